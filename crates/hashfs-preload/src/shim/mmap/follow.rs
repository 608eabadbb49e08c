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
//! refresh behind the file, as a mapping through a shared mount is (`hashfs-fuse/src/watch.rs`).
//! The rings name every participant's changes; the follower leaves out the positions this
//! process wrote (`FileSystem::changes_since_others`), whose bytes its own calls brought into
//! its mappings already (`file_changed`), so a process that writes a file it maps as a copy
//! does not copy it again for each of its writes. A copy is copied whole when another
//! process changed its file (the rings name inodes, not bytes); the other records' refresh
//! maps only what is new.

use super::*;
use std::sync::atomic::AtomicI32;
use std::time::Duration;

/// How often the follower reads the rings.
pub(super) const PERIOD: Duration = Duration::from_millis(1);

/// The process whose follower runs (0: none; a forked child starts its own).
static RUNNING_IN: AtomicI32 = AtomicI32::new(0);
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
    let Ok(fs) = shim().fs() else { return };
    // A read-only participant has a ring to read once a writer made the region.
    let mut seen = loop {
        match fs.changes_now() {
            Some(n) => break n,
            None if fs.is_read_only() && FOLLOWED.load(Ordering::Relaxed) > 0 && !EXITING.load(Ordering::Relaxed) => {
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
    // Changes between a record's making and `seen` are followed once now.
    let mut everything = true;
    loop {
        if !everything {
            std::thread::sleep(PERIOD);
        }
        if EXITING.load(Ordering::Relaxed) || RUNNING_IN.load(Ordering::Acquire) != current_pid() {
            return;
        }
        if FOLLOWED.load(Ordering::Relaxed) == 0 {
            continue;
        }
        if seen_data.is_none() && COPIES.load(Ordering::Relaxed) > 0 {
            seen_data = fs.watch_data();
            everything = true; // overwrites before the watch began are nowhere
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
        for ino in inos {
            follow(fs, ino);
        }
    }
}

/// Brings `ino`'s followed records up to date with the file after another process changed
/// it: holes it filled mapped, pages it grew the file over mapped, copies copied again
/// (the rings name the inode, not the bytes).
fn follow(fs: &FileSystem<MmapDevice>, ino: Ino) {
    let mut maps = MAPS.lock();
    if !maps.iter().any(|m| m.file.ino == ino && needs(m)) {
        return;
    }
    let Ok(size) = fs.peek_attr(ino).map(|a| a.size) else { return };
    // The file's whole range (rounded up to pages inside: no end past it).
    let mut stale = remap_filled(fs, &mut maps, ino, 0, size);
    for (i, m) in maps.iter_mut().enumerate() {
        if m.file.ino != ino || m.private {
            continue;
        }
        if m.copy {
            copy::refresh(m, 0, size, size);
            continue;
        }
        grow(fs, m, i, size, &mut stale);
    }
    copy::take_over(&mut maps, &stale, size);
    recount(&maps);
}
