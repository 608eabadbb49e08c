//! Filebench's filesets: a fixed list of file names spread over a directory tree of a
//! mean width, each with a size drawn once (gamma-distributed, as filebench's `cvar-gamma`),
//! and a state that the threads claim before they use a file.

use rand::{rngs::SmallRng, Rng};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

pub const ABSENT: u8 = 0;
pub const PRESENT: u8 = 1;
const BUSY: u8 = 2;

/// A fileset's shape, as filebench's `define fileset`.
#[derive(Clone, Debug)]
pub struct Spec {
    pub name: &'static str,
    pub entries: usize,
    pub dir_width: usize,
    pub mean_size: u64,
    /// Percentage of the files created before the run.
    pub prealloc: u32,
    /// Filebench's `readonly`: threads share files instead of claiming them.
    pub readonly: bool,
}

pub struct Fileset {
    pub spec: Spec,
    pub paths: Vec<PathBuf>,
    pub sizes: Vec<u64>,
    state: Vec<AtomicU8>,
    /// Which files were made before the run.
    prepared: Vec<AtomicBool>,
}

/// One draw from a gamma distribution with shape `k` >= 1 and mean `mean` (Marsaglia and
/// Tsang's method; filebench's `cvar-gamma` with `gamma:1.5` has shape 1.5).
pub fn gamma(rng: &mut SmallRng, k: f64, mean: f64) -> f64 {
    let d = k - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        // A standard normal draw (Box-Muller).
        let (u1, u2): (f64, f64) = (rng.random::<f64>().max(f64::MIN_POSITIVE), rng.random());
        let x = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v * mean / k;
        }
    }
}

impl Fileset {
    /// Names and sizes for `spec` under `root`: file i lives in leaf directory i / width,
    /// whose path is that number's digits in base `width` (so each directory holds about
    /// `width` entries, as filebench's tree does).
    pub fn new(spec: Spec, root: &Path, rng: &mut SmallRng) -> Fileset {
        let width = spec.dir_width.max(2);
        let leaves = spec.entries.div_ceil(width).max(1);
        let mut depth = 0;
        let mut n = leaves - 1;
        while n > 0 {
            depth += 1;
            n /= width;
        }
        let base = root.join(spec.name);
        let paths = (0..spec.entries)
            .map(|i| {
                let mut p = base.clone();
                let leaf = i / width;
                for level in (0..depth).rev() {
                    p.push(format!("d{}", (leaf / width.pow(level as u32)) % width));
                }
                p.push(format!("f{i}"));
                p
            })
            .collect();
        let sizes = (0..spec.entries).map(|_| (gamma(rng, 1.5, spec.mean_size as f64) as u64).max(1)).collect();
        let state = (0..spec.entries).map(|_| AtomicU8::new(ABSENT)).collect();
        let prepared = (0..spec.entries).map(|_| AtomicBool::new(false)).collect();
        Fileset { spec, paths, sizes, state, prepared }
    }

    /// Every directory of the tree, parents first.
    pub fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.paths.iter().filter_map(|p| p.parent().map(Path::to_path_buf)).collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// File `i` was made before the run: it is there to be used.
    pub fn mark_prepared(&self, i: usize) {
        self.prepared[i].store(true, Ordering::Relaxed);
        self.state[i].store(PRESENT, Ordering::Release);
    }

    pub fn prepared(&self, i: usize) -> bool {
        self.prepared[i].load(Ordering::Relaxed)
    }

    /// Claims a file in state `want` (a read-only set is shared: nothing is claimed):
    /// random probes, then a scan from a random place; None when there is none.
    pub fn claim(&self, want: u8, rng: &mut SmallRng) -> Option<usize> {
        let n = self.state.len();
        let take = |i: usize| {
            if self.spec.readonly {
                self.state[i].load(Ordering::Acquire) == want
            } else {
                self.state[i].compare_exchange(want, BUSY, Ordering::AcqRel, Ordering::Relaxed).is_ok()
            }
        };
        for _ in 0..64 {
            let i = rng.random_range(0..n);
            if take(i) {
                return Some(i);
            }
        }
        let start = rng.random_range(0..n);
        (0..n).map(|k| (start + k) % n).find(|&i| take(i))
    }

    /// Gives back a claimed file in its new state.
    pub fn release(&self, i: usize, s: u8) {
        if !self.spec.readonly {
            self.state[i].store(s, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn gamma_has_the_mean_it_is_given() {
        let mut rng = SmallRng::seed_from_u64(1);
        let n = 200_000;
        let mean = (0..n).map(|_| gamma(&mut rng, 1.5, 16384.0)).sum::<f64>() / n as f64;
        assert!((mean / 16384.0 - 1.0).abs() < 0.02, "mean {mean}");
    }

    #[test]
    fn directories_hold_about_their_width() {
        let mut rng = SmallRng::seed_from_u64(1);
        let spec = Spec { name: "s", entries: 10_000, dir_width: 20, mean_size: 1, prealloc: 0, readonly: false };
        let set = Fileset::new(spec, Path::new("/r"), &mut rng);
        assert_eq!(set.paths[0], Path::new("/r/s/d0/d0/d0/f0"));
        assert_eq!(set.paths[9_999], Path::new("/r/s/d1/d4/d19/f9999"));
        let leaves = set.dirs().iter().filter(|d| d.components().count() == 6).count();
        assert_eq!(leaves, 500);
    }

    #[test]
    fn a_claimed_file_is_not_claimed_twice() {
        let mut rng = SmallRng::seed_from_u64(1);
        let spec = Spec { name: "s", entries: 3, dir_width: 20, mean_size: 1, prealloc: 0, readonly: false };
        let set = Fileset::new(spec, Path::new("/r"), &mut rng);
        let got: Vec<_> = (0..3).map(|_| set.claim(ABSENT, &mut rng).expect("a free file")).collect();
        assert!(set.claim(ABSENT, &mut rng).is_none());
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(sorted, [0, 1, 2]);
        set.release(got[0], PRESENT);
        assert_eq!(set.claim(PRESENT, &mut rng), Some(got[0]));
    }
}
