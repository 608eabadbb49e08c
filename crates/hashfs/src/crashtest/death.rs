//! Process death: the failure of one participant of a shared image (issue 55), beside
//! power failure. A process killed at any instruction leaves every store it made visible
//! to the others (they share the cache) and makes none after; nothing is lost from the
//! cache, and nothing it did not store appears. The states to recover are therefore the
//! prefixes of the workload's stores in program order, applied to the live image before
//! it ([`crate::pm::CrashDevice::record_stores`]). Each is repaired by recovery (what the
//! survivor that finds the dead process runs), checked as a power failure's image is (the
//! state before or after the interrupted operation, fsck clean), and then the survivor goes
//! on: it creates, writes, renames and removes a file on the repaired image, and fsck must
//! find nothing again.
//!
//! Every image of power failure's model includes these (a prefix of each line's stores),
//! but a power failure's crash point is sampled when it has many states; here every
//! store is a state, except inside one device call over many lines (a copy of data),
//! where the states are after its first line, its middle one, its last but one and its
//! last.

#![forbid(unsafe_code)]

use super::explore::{image_hash, recover_and_check, Found, Recording};
use super::Stats;
use crate::fs::{fsck, FsckMode};
use crate::pm::{CrashDevice, LineStore};
use crate::FileSystem;
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

/// What a workload's run recorded for process deaths.
pub(crate) struct Deaths {
    /// The live image when the workload began.
    pub base: Vec<u8>,
    /// Every store the workload made, in program order.
    pub stores: Vec<LineStore>,
    /// How many stores were made before each operation began.
    pub marks: Vec<usize>,
}

impl Deaths {
    /// The operation a death after `n` stores interrupts.
    fn step(&self, n: usize) -> usize {
        self.marks.iter().rposition(|&m| m < n).unwrap_or(0)
    }
}

/// Whether a death after store `p` (1-based) of a call of `n` line stores is explored:
/// every one of a short call; of a longer one (a copy of data, homogeneous), the first,
/// the middle, the last but one and the last.
fn explored(p: usize, n: usize) -> bool {
    n <= 4 || p == 1 || p == n / 2 || p + 1 >= n
}

/// Explores every process death of the recorded workload (or the one `only` names): the
/// number of stores made before the death identifies it.
pub(crate) fn explore_deaths(rec: &Recording, d: &Deaths, only: Option<usize>, stats: &mut Stats) -> Result<(), Found> {
    let mut img = d.base.clone();
    let mut seen = HashSet::new();
    seen.insert(image_hash(&img));
    let mut i = 0;
    while i < d.stores.len() {
        let call = d.stores[i].call;
        let n = d.stores[i..].iter().take_while(|s| s.call == call).count();
        for p in 1..=n {
            d.stores[i + p - 1].apply(&mut img);
            let after = i + p;
            if !explored(p, n) || only.is_some_and(|o| o != after) || !seen.insert(image_hash(&img)) {
                continue;
            }
            stats.deaths += 1;
            check_death(rec, d, after, &img).map_err(|message| Found {
                point: 0,
                state: 0,
                rpoint: None,
                death: Some(after),
                persisted: format!(
                    "the {after} first stores of the workload (the last one to the line at {:#x}, in device call {})",
                    d.stores[after - 1].line() * 64,
                    call
                ),
                message,
            })?;
        }
        i += n;
    }
    Ok(())
}

/// The survivor's view of a death after `after` stores: recovery, the operation whole or
/// absent, fsck clean; then it goes on.
fn check_death(rec: &Recording, d: &Deaths, after: usize, img: &[u8]) -> Result<(), String> {
    let (_, _, dev) = rec.with_expect(d.step(after), |expect| recover_and_check(img, expect, false))?;
    go_on(dev).map_err(|e| format!("the survivor could not go on after the repair: {e}"))
}

/// The survivor's next operations on the repaired image, then fsck.
fn go_on(dev: Arc<CrashDevice>) -> Result<(), String> {
    let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {}).map_err(|e| format!("mount: {e}"))?;
    let a = Path::new("/survivor");
    let b = Path::new("/survivor-renamed");
    fs.write(a, &[0x5A; 5000]).map_err(|e| format!("write: {e}"))?;
    fs.rename(a, b).map_err(|e| format!("rename: {e}"))?;
    if fs.read(b).map_err(|e| format!("read: {e}"))? != [0x5A; 5000] {
        return Err("the file written after the repair reads back wrong".into());
    }
    fs.remove_file(b).map_err(|e| format!("unlink: {e}"))?;
    fs.unmount().map_err(|e| format!("unmount: {e}"))?;
    let r = fsck(dev, FsckMode::Check, &|_, _| {}).map_err(|e| format!("fsck failed to run: {e}"))?;
    if !r.findings.is_empty() {
        return Err(format!("fsck findings after the survivor's operations: {:#?}", r.findings));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::explored;

    #[test]
    fn long_calls_are_cut_at_four_places_short_ones_everywhere() {
        assert_eq!((1..=3).filter(|&p| explored(p, 3)).count(), 3);
        let long: Vec<usize> = (1..=64).filter(|&p| explored(p, 64)).collect();
        assert_eq!(long, [1, 32, 63, 64]);
    }
}
