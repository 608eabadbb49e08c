//! Mappings that follow the other processes' changes (issue 55, item 4: a shared mapping
//! of a file in two processes shows one set of bytes).
//!
//! A shared mapping's pages that are the file's blocks show every change in place at once,
//! whoever makes it. Three kinds of page do not, and each was kept in step only with this
//! process's own calls (`file_changed`): a copy's (`copy.rs`), a watched hole's (a
//! hole another process fills stays this process's zero page), and the pages past the end
//! of the file (a file another process grows stays anonymous here). Found 2026-12-06: a
//! reader's copy of a small file kept its old bytes after another process's `pwrite`, a
//! mapping of a grown file read zeros where the other had appended, a mapping of a sparse
//! file zeros where the other had written.
//!
//! While this process has a shared mapping with such pages ([`needs`]), a thread of its
//! own (started at the first one, in each process, a forked child's at its first) reads the
//! image's ring of changes every [`PERIOD`] (`FileSystem::changes_since`, without the
//! image lock: inodes whose size, blocks or times changed), and, while one of them is a
//! copy, the ring of data changes too (`FileSystem::watch_data`: overwrites in place, noted
//! only while some participant watches), and brings each named file's mappings up to date
//! as its own calls do ([`follow`]). So what such a page shows is at most a period and the
//! refresh behind the file, as a mapping through a shared mount is (`hashfs-fuse/src/watch.rs`):
//! 1 ms while changes come, 16 ms ([`QUIET_PERIOD`]) for the first change after 100 ms
//! without one (reading every millisecond, a process that only kept a copy mapped spent 3%
//! of a core on it).
//! The rings name every participant's changes; the follower leaves out the positions this
//! process wrote (`FileSystem::changes_since_others`), whose bytes its own calls brought into
//! its mappings already (`file_changed`), so a process that writes a file it maps as a copy
//! does not copy it again for each of its writes. A copy is copied whole when another
//! process changed its file (the rings name inodes, not bytes); the other records' refresh
//! maps only what is new.

use super::*;
use std::sync::atomic::{AtomicI32, AtomicU64};
use std::time::Duration;

/// How often the follower reads the rings while other processes change followed files.
pub(super) const PERIOD: Duration = Duration::from_millis(1);
/// How often once [`QUIET_AFTER`] readings in a row found nothing to follow: a process
/// that only keeps a copy mapped spent 3% of a core reading every millisecond (0.09 s of
/// CPU over 3 s asleep, measured 2026-12-06), where the 1 ms period serves only changes
/// that come one after another.
const QUIET_PERIOD: Duration = Duration::from_millis(16);
/// Readings in a row that find nothing before the follower reads every [`QUIET_PERIOD`].
const QUIET_AFTER: u32 = 100;

/// The process whose follower runs (0: none; a forked child starts its own).
static RUNNING_IN: AtomicI32 = AtomicI32::new(0);
/// Where the follower starts reading each ring ([`UNSET`]: not yet): taken before the
/// first record's bytes were read ([`before_mapping`]) and before the first copy was
/// filled ([`before_copy`]), so that no change between the two is missed and none before
/// them is followed again (a whole pass over the records at the follower's start copied
/// each copy again right after it was made, and the read-only copy's pages, made writable
/// for it, split its kernel mapping meanwhile: `map_copy.rs` counted two).
static START: AtomicU64 = AtomicU64::new(UNSET);
static START_DATA: AtomicU64 = AtomicU64::new(UNSET);
/// The process whose [`START`] is set (a forked child keeps its parent's positions).
static STARTED_IN: AtomicI32 = AtomicI32::new(0);
const UNSET: u64 = u64::MAX;

/// Before a shared record's bytes are read from the file: the ring of changes' position,
/// once per process.
pub(super) fn before_mapping(fs: &FileSystem<MmapDevice>) {
    let me = current_pid();
    if STARTED_IN.load(Ordering::Acquire) != me {
        START.store(fs.changes_now().unwrap_or(UNSET), Ordering::Release);
        STARTED_IN.store(me, Ordering::Release);
    }
}

/// In a forked child (a participant of its own) whose parent watched the ring of data
/// changes for its copies: the child watches too, from the parent's position, so that
/// overwrites are still noted once the parent is gone.
pub(super) fn watch_in_child() {
    if let (true, Ok(fs)) = (START_DATA.load(Ordering::Acquire) != UNSET, shim().fs()) {
        let _ = fs.watch_data();
    }
}

/// Before a copy is filled: this participant watches the ring of data changes (overwrites
/// in place are noted only while someone does), from the position it then has.
pub(super) fn before_copy(fs: &FileSystem<MmapDevice>) {
    if START_DATA.load(Ordering::Acquire) == UNSET {
        START_DATA.store(fs.watch_data().unwrap_or(UNSET), Ordering::Release);
    }
}
/// Shared records with pages that only the follower brings up to date; and copies among
/// them (published by [`after_recount`], read by the follower without the lock).
static FOLLOWED: AtomicUsize = AtomicUsize::new(0);
static COPIES: AtomicUsize = AtomicUsize::new(0);

/// Whether record `m` has pages that another process's change would not reach by itself:
/// a copy, watched holes, or pages past the end of the file.
pub(super) fn needs(m: &FileMap) -> bool {
    !m.private && (m.copy || !m.holes.is_empty() || m.mapped < m.len)
}

/// After the records changed (under MAPS's lock): publishes what the follower has to
/// follow, and starts it in this process at the first such record.
pub(super) fn after_recount(maps: &[FileMap]) {
    let followed = maps.iter().filter(|m| needs(m)).count();
    FOLLOWED.store(followed, Ordering::Relaxed);
    COPIES.store(maps.iter().filter(|m| !m.private && m.copy).count(), Ordering::Relaxed);
    if followed == 0 {
        return;
    }
    let me = current_pid();
    if RUNNING_IN.swap(me, Ordering::AcqRel) == me {
        return;
    }
    let started = std::thread::Builder::new().name("hashfs-map-follow".into()).spawn(run);
    if started.is_err() {
        RUNNING_IN.store(0, Ordering::Release); // the next record tries again
        eprintln!("hashfs_preload: no thread to follow other processes' changes into this one's mappings");
    }
}

/// The follower's loop, until the process leaves the image. On an image of one process
/// (no region: nothing else changes it) it ends at once; a read-only participant's waits
/// for a writer's region while it has followed records.
fn run() {
    hashfs::pm::block_signals();
    let Ok(fs) = shim().fs() else { return };
    // Records made before a writer made a read-only participant's region are followed
    // whole once it is there.
    let mut everything = false;
    let start = START.load(Ordering::Acquire);
    // A read-only participant has a ring to read once a writer made the region.
    let mut seen = loop {
        match fs.changes_now() {
            Some(_) if start != UNSET && !everything => break start,
            Some(n) => break n,
            None if fs.is_read_only() && FOLLOWED.load(Ordering::Relaxed) > 0 && !EXITING.load(Ordering::Relaxed) => {
                everything = true;
                std::thread::sleep(PERIOD * 10)
            }
            None if fs.is_read_only() => {
                RUNNING_IN.store(0, Ordering::Release); // the next followed record starts one
                return;
            }
            None => return,
        }
    };
    let mut seen_data: Option<u64> = None;
    let mut quiet = 0u32;
    loop {
        if !everything {
            std::thread::sleep(if quiet >= QUIET_AFTER { QUIET_PERIOD } else { PERIOD });
        }
        if EXITING.load(Ordering::Relaxed) || RUNNING_IN.load(Ordering::Acquire) != current_pid() {
            return;
        }
        if FOLLOWED.load(Ordering::Relaxed) == 0 {
            quiet = quiet.saturating_add(1); // nothing mapped to follow (any more)
            continue;
        }
        if seen_data.is_none() && COPIES.load(Ordering::Relaxed) > 0 {
            seen_data = Some(START_DATA.load(Ordering::Acquire)).filter(|&d| d != UNSET);
        }
        let Some((now, changed)) = fs.changes_since_others(seen) else { return };
        seen = now;
        let mut inos = Vec::new();
        let mut add = |c: hashfs::Changed| match c {
            hashfs::Changed::Inodes(v) => inos.extend(v),
            hashfs::Changed::Everything => everything = true,
        };
        add(changed);
        if let Some((next, data)) = seen_data.and_then(|s| fs.data_changes_since_others(s)) {
            seen_data = Some(next);
            add(data);
        }
        if std::mem::take(&mut everything) {
            inos = MAPS.lock().iter().filter(|m| needs(m)).map(|m| m.file.ino).collect();
        }
        inos.sort_unstable();
        inos.dedup();
        quiet = if inos.is_empty() { quiet.saturating_add(1) } else { 0 };
        for ino in inos {
            follow(fs, ino);
        }
    }
}

/// Brings `ino`'s followed records up to date with the file after another process changed
/// it: copies given back to the file's pages if another process now maps it writable (its
/// mark is published as a change: `copy::yield_to_writers`), holes it filled mapped, pages
/// it grew the file over mapped, copies copied again (the rings name the inode, not the
/// bytes).
fn follow(fs: &FileSystem<MmapDevice>, ino: Ino) {
    let mut maps = MAPS.lock();
    if !maps.iter().any(|m| m.file.ino == ino && needs(m)) {
        return;
    }
    super::copy::yield_to_writers(fs, &mut maps, ino);
    let Ok(size) = fs.peek_attr(ino).map(|a| a.size) else { return };
    // The file's whole range (rounded up to pages inside: no end past it).
    bring_up_to_date(fs, &mut maps, ino, 0, size, size);
}
