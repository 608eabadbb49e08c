//! The crash-state explorer over the stacked mode's PM side: runs sequences of
//! [`PmStore`] operations (promote, writes, truncations, write-back, deletion, a save of
//! the Sync Factors) on HashFS's
//! crash-simulating device over a real lower file, and at every fence of every step
//! recovers each image a power failure could leave (the durable one, the one with every
//! pending line, and each pending line alone kept or dropped), with the lower file as it
//! stood at that instant (the store reports each change it makes below; the explorer
//! snapshots the file there). The recovered merged view must be the one before or the one
//! after the step (for a write, which relaxed mode does not make atomic, each byte old or
//! new): every completed write present, nothing half-promoted, nothing written twice, and
//! the PM copy gone only when the lower file holds its bytes; and the table of saved Sync
//! Factors readable, the file's factor in it the one saved before the step or after.
//!
//! Bounded runs are unit tests (CI); `cargo test -p hashfs-spfs --release -- --ignored
//! explore_full` runs many random sequences.

use crate::absorb::PmStore;
use hashfs::pm::{CrashDevice, CrashPoint};
use hashfs::{FileSystem, FormatOptions, MappingKind};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Clone, Debug)]
pub enum Step {
    Write {
        off: u64,
        len: usize,
        seed: u8,
    },
    SetLen(u64),
    WriteBack,
    /// The lower name is removed (as unlink does), then the PM copy.
    Delete,
    /// The table of Sync Factors saved with this one for the file (`saved_profiles.rs`).
    SaveProfile(f64),
}

/// The fence count when the store changed the lower file, and the file's bytes then
/// (None: deleted).
type LowerSnap = (u64, Option<Vec<u8>>);

struct Run {
    _dir: tempfile::TempDir,
    lower: PathBuf,
}

fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) | 1).collect()
}

/// Recovers the stacked store on `dev` over `lower_dir`. The kernel may fail
/// `open_by_handle_at` with ENOMEM when an allocation of its own fails (CI saw it once, on
/// a run whose earlier pass of the same test had passed): that is the host's, not a
/// recovery's, error, so it is retried a few times with the host's memory printed; any
/// other error fails the test. (A retry mounts the image again: recovery of the recovery
/// the failed attempt began, which must give the same view.)
fn open_store(dev: Arc<CrashDevice>, lower_dir: &Path) -> crate::absorb::Opened<CrashDevice> {
    for attempt in 0.. {
        let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {}).expect("recovery mounts");
        let root = File::open(lower_dir).unwrap();
        match PmStore::open(fs, OwnedFd::from(root), lower_dir) {
            Ok(opened) => return opened,
            Err(e) if attempt < 4 && e.contains("os error 12") => {
                let avail = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
                let avail = avail.lines().find(|l| l.starts_with("MemAvailable")).unwrap_or("?");
                eprintln!("stacked recovery: the kernel ran short of memory ({e}; {avail}); retrying");
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Err(e) => panic!("stacked recovery: {e:?}"),
        }
    }
    unreachable!()
}

/// What a user sees of the file after recovery: the merged view, or the lower file alone
/// when nothing is promoted; None when the file is gone.
fn view(
    store: &PmStore<CrashDevice>,
    files: &[(crate::absorb::Key, crate::absorb::Promoted<CrashDevice>)],
    lower: &Path,
) -> Option<Vec<u8>> {
    match files {
        [] => std::fs::read(lower).ok(),
        [(_, p)] => {
            let mut buf = vec![0u8; p.size as usize];
            let n = store.read(p, 0, &mut buf).expect("merged read");
            assert_eq!(n, buf.len());
            Some(buf)
        }
        _ => panic!("two promoted files for one lower file"),
    }
}

/// The file's bytes after `step` (a write or a length change) on `model`.
fn modeled(model: &mut Vec<u8>, step: &Step) {
    match step {
        Step::Write { off, len, seed } => {
            let end = *off as usize + len;
            if model.len() < end {
                model.resize(end, 0);
            }
            model[*off as usize..end].copy_from_slice(&bytes(*len, *seed));
        }
        Step::SetLen(n) => model.resize(*n as usize, 0),
        _ => {}
    }
}

/// A relaxed-mode write is not atomic (as on HashFS alone, and on ext4): an interrupted
/// one may leave a length between the old and the new and each byte old or new (zero past
/// an end), as HashFS's explorer accepts (`snapshot::torn_between`). Bytes that are
/// neither (a PM block mapped before its merge from below was written) fail.
fn torn_between(got: &[u8], before: &[u8], after: &[u8]) -> bool {
    let byte = |c: &[u8], i: usize| c.get(i).copied().unwrap_or(0);
    let (lo, hi) = (before.len().min(after.len()), before.len().max(after.len()));
    (lo..=hi).contains(&got.len()) && got.iter().enumerate().all(|(i, &x)| x == byte(before, i) || x == byte(after, i))
}

/// The images a crash point stands for, as the explorer of HashFS samples them.
fn images(p: &CrashPoint) -> Vec<Vec<u8>> {
    let n = p.lines.len();
    let mut out = vec![p.image_with(|_| false), p.image_with(|_| true)];
    for i in 0..n.min(24) {
        out.push(p.image_with(|j| j == i));
        out.push(p.image_with(|j| j != i));
    }
    out
}

/// Runs `steps` on a file of `initial` bytes, promoted first; checks every crash state.
/// Returns the number of states checked.
pub fn explore(initial: usize, steps: &[Step]) -> u64 {
    explore_with(initial, steps, false)
}

/// [`explore`]; with `made`, the file is made empty and promoted as made in PM (with its
/// made record, `remake.rs`), and a deletion drops the record first, as the front ends do.
/// The lower file system keeps its creation here; [`explore_lost_creation`] loses it.
pub fn explore_with(initial: usize, steps: &[Step], made: bool) -> u64 {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = Run { lower: dir.path().join("lower"), _dir: dir };
    std::fs::create_dir(&run.lower).unwrap();
    let lower_file = run.lower.join("f");
    let kept = run.lower.join("f.kept");
    std::fs::write(&lower_file, bytes(initial, 0x40)).unwrap();
    let dev = Arc::new(CrashDevice::new(hashfs::testing::crashtest::IMAGE_BYTES));
    let opts = FormatOptions { mapping: MappingKind::ExtentHash, ..FormatOptions::default() };
    hashfs::format(&*dev, &opts, &|_, _| {}).unwrap();
    let (mut store, _, _) = open_store(dev.clone(), &run.lower);
    // Where the lower file stood after each of the store's changes, by fence count.
    let snaps: Arc<Mutex<Vec<LowerSnap>>> = Arc::new(Mutex::new(Vec::new()));
    {
        let (snaps, dev, path) = (snaps.clone(), dev.clone(), lower_file.clone());
        store.lower_hook = Some(Box::new(move || {
            snaps.lock().unwrap().push((dev.fence_count(), std::fs::read(&path).ok()));
        }));
    }
    let mut model = std::fs::read(&lower_file).unwrap();
    let handle = crate::lower::LowerHandle::of(File::open(&lower_file).unwrap().as_fd()).unwrap();
    // The file's saved Sync Factor (None: no table saved yet).
    let mut saved: Option<f64> = None;
    let mut checked = 0;
    let record = made
        .then(|| crate::remake::MadeRecord::of(File::open(&lower_file).unwrap().as_fd(), &run.lower, b"f").unwrap());
    let promote_first = |store: &PmStore<CrashDevice>| {
        store.promote_with(File::open(&lower_file).unwrap().as_fd(), record.as_ref()).unwrap()
    };
    let promote = |store: &PmStore<CrashDevice>| store.promote(File::open(&lower_file).unwrap().as_fd()).unwrap();
    // Step 0 is the promotion itself; the others follow.
    let mut p = None;
    let all: Vec<Option<&Step>> = std::iter::once(None).chain(steps.iter().map(Some)).collect();
    for (i, step) in all.iter().enumerate() {
        let before = model.clone();
        let saved_before = saved;
        let lower_before = std::fs::read(&lower_file).ok();
        snaps.lock().unwrap().clear();
        dev.set_capture(true);
        match step {
            None => p = Some(promote_first(&store)),
            Some(s @ Step::Write { off, len, seed }) => {
                store.write(p.as_mut().unwrap(), *off, &bytes(*len, *seed)).unwrap();
                modeled(&mut model, s);
            }
            Some(s @ Step::SetLen(n)) => {
                store.set_len(p.as_mut().unwrap(), *n).unwrap();
                modeled(&mut model, s);
            }
            Some(Step::WriteBack) => {
                store.write_back(p.as_ref().unwrap()).unwrap();
                p = Some(promote(&store));
            }
            Some(Step::SaveProfile(sf)) => {
                store.save_profiles(&[(handle.clone(), *sf)]).unwrap();
                saved = Some(*sf);
            }
            Some(Step::Delete) => {
                store.forget_made(p.as_ref().unwrap()).unwrap();
                // A second name keeps the inode for the crash states before its removal.
                std::fs::hard_link(&lower_file, &kept).unwrap();
                std::fs::remove_file(&lower_file).unwrap();
                snaps.lock().unwrap().push((dev.fence_count(), None));
                let q = p.take().unwrap();
                store.discard(&q).unwrap();
                drop(q); // its descriptor held the lower inode; now it is freed
            }
        }
        let mut points = dev.take_points();
        points.push(dev.crash_point_now());
        dev.set_capture(false);
        let after = if matches!(step, Some(Step::Delete)) { None } else { Some(model.clone()) };
        let lower_after = std::fs::read(&lower_file).ok();
        let snap_list = snaps.lock().unwrap().clone();
        for point in &points {
            let lower_then = snap_list
                .iter()
                .rev()
                .find(|(c, _)| *c <= point.fence_index)
                .map(|(_, s)| s.clone())
                .unwrap_or_else(|| lower_before.clone());
            match &lower_then {
                // Before a deletion's removal below: the inode, back at its name.
                Some(_) if !lower_file.exists() => std::fs::hard_link(&kept, &lower_file).unwrap(),
                // After it: the inode freed (the states come in fence order).
                None => {
                    let _ = std::fs::remove_file(&lower_file);
                    let _ = std::fs::remove_file(&kept);
                }
                Some(_) => {}
            }
            for img in images(point) {
                if let Some(l) = &lower_then {
                    // The same inode (its handle is in PM): rewritten in place.
                    let f = std::fs::OpenOptions::new().write(true).open(&lower_file).unwrap();
                    f.set_len(0).unwrap();
                    std::os::unix::fs::FileExt::write_all_at(&f, l, 0).unwrap();
                }
                let crashed = Arc::new(CrashDevice::from_image(&img));
                let (s2, mut files, _) = open_store(crashed, &run.lower);
                let kept = match s2.load_profiles() {
                    Ok(recs) => recs.iter().find(|(h, _)| *h == handle).map(|(_, sf)| *sf),
                    Err(e) => panic!("step {i} ({step:?}), fence {}: the saved Sync Factors: {e}", point.fence_index),
                };
                assert!(
                    kept == saved_before || kept == saved,
                    "step {i} ({step:?}), fence {}: the saved Sync Factor is {kept:?}, neither {saved_before:?} nor {saved:?}",
                    point.fence_index
                );
                if lower_then.is_none() {
                    assert!(files.is_empty(), "step {i} ({step:?}): a copy of a deleted file survived recovery");
                } else {
                    let g = view(&s2, &files, &lower_file).expect("the lower file is there");
                    let torn = matches!(step, Some(Step::Write { .. })) && torn_between(&g, &before, &model);
                    assert!(
                        g == before || Some(&g) == after.as_ref() || torn,
                        "step {i} ({step:?}), fence {}: the recovered file ({} bytes) is neither the state before ({} bytes) nor after",
                        point.fence_index,
                        g.len(),
                        before.len()
                    );
                    // Growing the recovered file must show zeros, not bytes cut off before
                    // the crash (the lower file was truncated after PM).
                    if let [(_, p)] = files.as_mut_slice() {
                        s2.set_len(p, g.len() as u64 + 8192).unwrap();
                        let mut grown = g.clone();
                        grown.resize(g.len() + 8192, 0);
                        assert!(
                            view(&s2, &files, &lower_file) == Some(grown),
                            "step {i} ({step:?}): stale bytes after growth"
                        );
                    }
                }
                checked += 1;
            }
        }
        // Back to where the run stood (recoveries may have repaired the lower file).
        if let Some(l) = &lower_after {
            let f = std::fs::OpenOptions::new().write(true).open(&lower_file).unwrap();
            f.set_len(0).unwrap();
            std::os::unix::fs::FileExt::write_all_at(&f, l, 0).unwrap();
        }
        if matches!(step, Some(Step::Delete)) {
            break;
        }
    }
    drop(run);
    checked
}

/// A file made in PM (`remake.rs`) whose creation the lower file system loses: for each
/// step `k` up to the first write-back (whose lower fsync makes the creation durable), the
/// steps before it run, step `k` runs with every fence captured, and every crash state is
/// recovered with the lower file gone (its inode freed, as a power failure before the
/// lower file system committed the creation leaves it). The recovered file must be the
/// one before or after the step, made again at its name from PM; a deleted one must stay
/// deleted. Returns the number of states checked.
pub fn explore_lost_creation(steps: &[Step]) -> u64 {
    let mut checked = 0;
    let until = steps.iter().position(|s| matches!(s, Step::WriteBack)).map_or(steps.len(), |i| i + 1);
    for k in 0..=until {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let run = Run { lower: dir.path().join("lower"), _dir: dir };
        std::fs::create_dir(&run.lower).unwrap();
        let lower_file = run.lower.join("f");
        std::fs::write(&lower_file, b"").unwrap();
        let dev = Arc::new(CrashDevice::new(hashfs::testing::crashtest::IMAGE_BYTES));
        let opts = FormatOptions { mapping: MappingKind::ExtentHash, ..FormatOptions::default() };
        hashfs::format(&*dev, &opts, &|_, _| {}).unwrap();
        let (mut store, _, _) = open_store(dev.clone(), &run.lower);
        // The fence count at the store's last change below (a write-back's is after its
        // lower fsync, from which the creation is durable).
        let last_change = Arc::new(Mutex::new(None::<u64>));
        {
            let (last, dev) = (last_change.clone(), dev.clone());
            store.lower_hook = Some(Box::new(move || *last.lock().unwrap() = Some(dev.fence_count())));
        }
        let record = crate::remake::MadeRecord::of(File::open(&lower_file).unwrap().as_fd(), &run.lower, b"f").unwrap();
        let mut model: Option<Vec<u8>> = None; // the file does not exist before step 0
        let mut p = None;
        let all: Vec<Option<&Step>> = std::iter::once(None).chain(steps.iter().map(Some)).collect();
        let mut points = Vec::new();
        let mut before = None;
        let mut sync_fence = None;
        for (i, step) in all.iter().enumerate().take(k + 1) {
            if i == k {
                before = model.clone();
                *last_change.lock().unwrap() = None;
                dev.set_capture(true);
            }
            match step {
                None => {
                    p = Some(store.promote_with(File::open(&lower_file).unwrap().as_fd(), Some(&record)).unwrap());
                    model = Some(Vec::new());
                }
                Some(s @ Step::Write { off, len, seed }) => {
                    store.write(p.as_mut().unwrap(), *off, &bytes(*len, *seed)).unwrap();
                    modeled(model.as_mut().unwrap(), s);
                }
                Some(s @ Step::SetLen(n)) => {
                    store.set_len(p.as_mut().unwrap(), *n).unwrap();
                    modeled(model.as_mut().unwrap(), s);
                }
                Some(Step::WriteBack) => {
                    store.write_back(p.as_ref().unwrap()).unwrap();
                    sync_fence = *last_change.lock().unwrap();
                    p = None;
                }
                Some(Step::SaveProfile(_)) => {}
                Some(Step::Delete) => {
                    store.forget_made(p.as_ref().unwrap()).unwrap();
                    std::fs::remove_file(&lower_file).unwrap();
                    store.discard(p.as_ref().unwrap()).unwrap();
                    p = None;
                    model = None;
                }
            }
            if i == k {
                points = dev.take_points();
                points.push(dev.crash_point_now());
                dev.set_capture(false);
            }
            if matches!(step, Some(Step::Delete)) {
                break;
            }
        }
        let step = all.get(k).copied().flatten();
        let after = model.clone();
        // Nothing of the run may hold the lower inode: its loss frees it.
        drop((p, store));
        for point in &points {
            if matches!(step, Some(Step::WriteBack)) && sync_fence.is_some_and(|f| point.fence_index > f) {
                continue; // the lower fsync came before: the creation is durable
            }
            for img in images(point) {
                let _ = std::fs::remove_file(&lower_file);
                let _ = std::fs::remove_dir_all(run.lower.join(crate::remake::REMADE_DIR));
                let crashed = Arc::new(CrashDevice::from_image(&img));
                let (s2, files, rec) = open_store(crashed, &run.lower);
                let g = view(&s2, &files, &lower_file);
                let torn = matches!(step, Some(Step::Write { .. }))
                    && g.as_deref()
                        .is_some_and(|g| torn_between(g, before.as_deref().unwrap(), after.as_deref().unwrap()));
                assert!(
                    g == before || g == after || torn,
                    "lost creation, step {k} ({step:?}), fence {}: the recovered file ({:?} bytes, {} remade) is neither the \
                     state before ({:?} bytes) nor after ({:?})",
                    point.fence_index,
                    g.as_ref().map(|g| g.len()),
                    rec.remade,
                    before.as_ref().map(|b| b.len()),
                    after.as_ref().map(|a| a.len())
                );
                assert!(
                    !run.lower.join(crate::remake::REMADE_DIR).exists(),
                    "step {k}: remade elsewhere than at its name"
                );
                checked += 1;
            }
        }
    }
    checked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(off: u64, len: usize, seed: u8) -> Step {
        Step::Write { off, len, seed }
    }

    /// The named sequences: each step of the protocol at least once, in the orders that
    /// matter (a write after a shrink, a write-back of a file grown past its lower end).
    pub fn named() -> Vec<(usize, Vec<Step>)> {
        vec![
            (
                6000,
                vec![
                    w(10, 100, 1),
                    Step::SaveProfile(0.785),
                    w(4000, 8192, 2),
                    Step::SetLen(5000),
                    Step::SaveProfile(0.5),
                    w(9000, 3000, 3),
                    Step::WriteBack,
                ],
            ),
            (9000, vec![Step::SetLen(4097), w(8000, 50, 4), Step::SetLen(12000), Step::WriteBack, w(0, 4096, 5)]),
            (0, vec![w(0, 10, 6), w(5, 9000, 7), Step::SetLen(0), w(100, 1, 8), Step::WriteBack]),
            (5000, vec![Step::SaveProfile(0.25), w(4090, 20, 9), Step::Delete]),
        ]
    }

    fn random(seed: u64, n: usize) -> (usize, Vec<Step>) {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let initial = next(20_000) as usize;
        let mut steps: Vec<Step> = (0..n)
            .map(|_| match next(10) {
                0..=5 => w(next(20_000), 1 + next(9000) as usize, next(256) as u8),
                6 | 7 => Step::SetLen(next(24_000)),
                8 => Step::SaveProfile(next(1000) as f64 / 1000.0),
                _ => Step::WriteBack,
            })
            .collect();
        if next(4) == 0 {
            steps.push(Step::Delete);
        }
        (initial, steps)
    }

    #[test]
    fn explore_named_sequences() {
        let mut states = 0;
        for (initial, steps) in named() {
            states += explore(initial, &steps);
        }
        eprintln!("stacked explorer: {states} crash states checked");
        assert!(states > 100, "the explorer saw crash states ({states})");
    }

    /// Files made in PM (`remake.rs`): the named sequences' kinds of steps on a file
    /// promoted as made, its lower creation kept and lost.
    fn made_sequences() -> Vec<Vec<Step>> {
        vec![
            vec![w(0, 700, 1), w(300, 9000, 2), Step::SetLen(5000), Step::WriteBack, w(10, 10, 3)],
            vec![w(0, 5000, 4), Step::Delete],
        ]
    }

    #[test]
    fn explore_files_made_in_pm() {
        let mut states = 0;
        for steps in made_sequences() {
            states += explore_with(0, &steps, true);
            states += explore_lost_creation(&steps);
        }
        eprintln!("stacked explorer, files made in PM: {states} crash states checked");
        assert!(states > 100, "the explorer saw crash states ({states})");
    }

    #[test]
    fn explore_random_sequences() {
        let mut states = 0;
        for seed in 0..6 {
            let (initial, steps) = random(seed, 6);
            states += explore(initial, &steps);
        }
        eprintln!("stacked explorer: {states} crash states checked");
    }

    #[test]
    #[ignore = "full run: cargo test -p hashfs-spfs --release -- --ignored explore_full"]
    fn explore_full() {
        let mut states = 0;
        for seed in 0..200 {
            let (initial, steps) = random(seed, 10);
            states += explore(initial, &steps);
        }
        eprintln!("stacked explorer (full): {states} crash states checked");
    }

    #[test]
    #[ignore = "full run: cargo test --workspace --lib --release -- --ignored explore_full_made"]
    fn explore_full_made() {
        let mut states = 0;
        for seed in 0..60 {
            let (_, steps) = random(1000 + seed, 8);
            states += explore_with(0, &steps, true);
            states += explore_lost_creation(&steps);
        }
        eprintln!("stacked explorer (full), files made in PM: {states} crash states checked");
    }
}
