//! Crashes with transactions open in several journals at once: two threads run random
//! operations in their own subtrees (`/A` and `/B`) of one image; at every fence, each
//! subtree must recover to the state before or after the operation its thread had in
//! flight, and a crashed recovery must recover to the same state again.

#![forbid(unsafe_code)]

use super::explore::{image_for, Config, Failure, Stats};
use super::snapshot::{lagging_times_ok, torn_between, without_times, Lagging, Snapshot};
use super::workload::Op;
use crate::journal;
use crate::pm::{CrashDevice, CrashPoint};
use crate::FileSystem;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// One thread's operations, the states of its subtree around them, and the fence counts
/// read before and after each.
struct Track {
    root: &'static str,
    ops: Vec<Op>,
    torn: Vec<bool>,
    /// The files whose times may lag during each operation (`during`), and once each has
    /// completed (`done[k]`: after k operations).
    during: Vec<Lagging>,
    done: Vec<Lagging>,
    states: Vec<Snapshot>,
    spans: Vec<(u64, u64)>,
}

impl Track {
    /// At crash point `f` the subtree must be before or after the operation in flight, or
    /// after the last one that completed.
    fn check(&self, r: &Snapshot, f: u64) -> Result<(), String> {
        let in_flight = self.spans.iter().position(|&(b, e)| b <= f && f < e);
        let completed = self.spans.iter().filter(|s| s.1 <= f).count();
        let (lag, window) = match in_flight {
            Some(k) => (&self.during[k], &self.states[..=k + 1]),
            None => (&self.done[completed], &self.states[..=completed]),
        };
        lagging_times_ok(r, window, lag).map_err(|e| format!("{}: {e}", self.root))?;
        let clear = |s: &Snapshot| if lag.is_empty() { s.clone() } else { without_times(s, lag) };
        let r = &clear(r);
        let ok = match in_flight {
            Some(k) => {
                let (b, a) = (&clear(&self.states[k]), &clear(&self.states[k + 1]));
                r == b || r == a || (self.torn[k] && torn_between(r, b, a))
            }
            None => *r == clear(&self.states[completed]),
        };
        if ok {
            return Ok(());
        }
        let k = in_flight.unwrap_or(completed);
        Err(format!(
            "{} recovered to no allowed state (operation {k}): {}",
            self.root,
            r.first_difference(&self.states[k])
        ))
    }
}

fn random_ops(rng: &mut SmallRng, root: &str, n: usize) -> Vec<Op> {
    let names = ["x", "y", "z"];
    let path = |rng: &mut SmallRng| format!("{root}/{}", names[rng.random_range(0..names.len())]);
    (0..n)
        .map(|_| match rng.random_range(0..8) {
            0 | 1 => Op::Create { path: path(rng) },
            2 => Op::Append { path: path(rng), len: rng.random_range(1..9000), seed: rng.random() },
            3 => Op::Truncate { path: path(rng), size: rng.random_range(0..9000) },
            4 => Op::Unlink { path: path(rng) },
            5 => Op::Rename { from: path(rng), to: path(rng), mode: crate::RenameMode::Replace },
            6 => Op::Mkdir { path: path(rng) },
            _ => Op::Chmod { path: path(rng), perm: rng.random_range(0..0o777) },
        })
        .collect()
}

/// Journals with a transaction open in the image of the latest contents of `p`.
pub fn open_journals(p: &CrashPoint) -> usize {
    let dev = CrashDevice::from_image(&p.image_all_pending());
    let Ok((_, geo, _)) = crate::fs::read_superblock(&dev) else { return 0 };
    journal::inspect(&dev, &geo).iter().filter(|j| j.active_txid != 0).count()
}

/// Runs one two-thread workload from `base` (which must hold `/A` and `/B`) and checks every
/// crash point. Returns the statistics and the crash points that had transactions open in
/// two journals.
pub fn explore_two_threads(
    cfg: &Config,
    mapping: &str,
    base: &[u8],
    round: u64,
    ops_per_thread: usize,
    failures: &mut Vec<Failure>,
) -> (Stats, u64) {
    let mut stats = Stats { workloads: 1, ..Default::default() };
    let mut rng = SmallRng::seed_from_u64(cfg.seed ^ round.wrapping_mul(0xA24B_AED4_963E_E407));
    let dev = Arc::new(CrashDevice::from_image(base));
    let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {}).expect("the base image mounts");
    let mut tracks: Vec<Track> = ["/A", "/B"]
        .into_iter()
        .map(|root| {
            let ops = random_ops(&mut rng, root, ops_per_thread);
            let s0 = Snapshot::of_tree(&fs, root).expect("walks");
            let done = vec![Lagging::new()];
            Track { root, ops, torn: Vec::new(), during: Vec::new(), done, states: vec![s0], spans: Vec::new() }
        })
        .collect();
    dev.set_capture(true);
    std::thread::scope(|s| {
        for t in tracks.iter_mut() {
            let (fs, dev) = (&fs, &dev);
            s.spawn(move || {
                let mut lag = Lagging::new();
                let mut fds = super::descriptors::Descriptors::default();
                for (k, op) in t.ops.clone().into_iter().enumerate() {
                    t.torn.push(op.is_torn_on(fs, &fds));
                    op.start_lag(fs, &fds, &mut lag, k);
                    t.during.push(lag.clone());
                    let b = dev.fence_count();
                    let ok = op.apply(fs, &mut fds).is_ok();
                    let e = dev.fence_count();
                    op.end_lag(fs, &fds, &mut lag, ok);
                    t.done.push(lag.clone());
                    t.spans.push((b, e));
                    t.states.push(Snapshot::of_tree(fs, t.root).expect("walks"));
                }
            });
        }
    });
    dev.set_capture(false);
    let points = dev.take_points();
    drop(fs);
    let mut both_open = 0;
    let ops: Vec<String> =
        tracks.iter().flat_map(|t| t.ops.iter().map(move |o| format!("thread {}: {o}", t.root))).collect();
    for (pidx, p) in points.iter().enumerate() {
        stats.crash_points += 1;
        if open_journals(p) >= 2 {
            both_open += 1;
        }
        let count = p.state_count();
        let exhaustive = count <= cfg.samples.max(2);
        let n = if exhaustive { count } else { cfg.samples.max(2) };
        for state in 0..n {
            let (img, _) = image_for(p, state, exhaustive, cfg.seed, pidx);
            stats.states += 1;
            let res = check_image(&img, &tracks, p.fence_index, &mut stats);
            if let Err(message) = res {
                failures.push(Failure {
                    mapping: mapping.to_string(),
                    workload: format!("two-threads:{round}"),
                    ops,
                    seed: cfg.seed,
                    point: pidx,
                    state,
                    rpoint: None,
                    death: None,
                    persisted: format!("{} pending lines", p.lines.len()),
                    message,
                });
                return (stats, both_open);
            }
        }
    }
    (stats, both_open)
}

fn check_image(img: &[u8], tracks: &[Track], f: u64, stats: &mut Stats) -> Result<(), String> {
    let dev = Arc::new(CrashDevice::from_image(img));
    dev.set_capture(true);
    let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {}).map_err(|e| format!("mount failed: {e}"))?;
    dev.set_capture(false);
    let rpoints = dev.take_points();
    let mut first = Vec::new();
    for t in tracks {
        let r = Snapshot::of_tree(&fs, t.root).map_err(|e| format!("walk failed: {e}"))?;
        t.check(&r, f)?;
        first.push(r);
    }
    fs.unmount().map_err(|e| format!("unmount: {e}"))?;
    let rep = crate::fs::fsck(dev, crate::fs::FsckMode::Check, &|_, _| {}).map_err(|e| format!("fsck: {e}"))?;
    if !rep.findings.is_empty() {
        return Err(format!("fsck findings: {:#?}", rep.findings));
    }
    // Recovery crashed at each of its fences, with the open transactions of both journals.
    for rp in rpoints.iter().filter(|rp| !(rp.lines.is_empty() && rp.durable == img)) {
        for rimg in [rp.image_durable_only(), rp.image_all_pending()] {
            stats.recovery_states += 1;
            let d = Arc::new(CrashDevice::from_image(&rimg));
            let (fs, _) = FileSystem::mount(d, &|_, _| {}).map_err(|e| format!("second mount failed: {e}"))?;
            for (t, want) in tracks.iter().zip(&first) {
                let r = Snapshot::of_tree(&fs, t.root).map_err(|e| format!("walk failed: {e}"))?;
                if r != *want {
                    return Err(format!(
                        "after a crashed recovery {} differs from the first recovery: {}",
                        t.root,
                        r.first_difference(want)
                    ));
                }
            }
        }
    }
    Ok(())
}
