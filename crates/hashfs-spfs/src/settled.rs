//! Files below that are opened for writing in a hot directory (issue 58). The directory
//! rule (`dirs.rs`) starts *new* files in PM, but a maildir also appends to messages
//! delivered before its directory turned hot, and each such append's fsync went to the
//! lower file system. Promoting such a file at its open is free only if its bytes below
//! are already durable: a PM copy absorbs fsyncs on the grounds that the lower file holds,
//! durably, every byte PM does not (the profiler promotes a file right after a lower
//! fsync, which gives that).
//!
//! Here an open in a hot directory that finds its file not settled (no `syncfs` yet, or
//! one that began before the file's last change) goes below this time and asks the
//! write-back thread, woken for it, for one `syncfs` of the lower file system (at most one
//! per profiler interval); the thread keeps when it started, read on the kernel's coarse
//! real-time clock: inode timestamps come from that clock (or, with the kernel's
//! fine-grained timestamps, from a finer one never behind it), so a change made after the
//! start gets a ctime no earlier than the start. A file whose ctime is older than the
//! start, less [`MARGIN`], had no change since: the `syncfs` made all of it durable, and it
//! is promoted at the open with no lower fsync and no made record. Only such opens ask: a
//! directory turning hot does not (RocksDB's, whose files are made, not reopened, would pay
//! a `syncfs` of its unsynced tables for nothing).
//!
//! What this trusts, and where it would not hold (docs/stacked.md, *Files settled below*):
//! the real-time clock not set back across the `syncfs`; a write by a process outside the
//! stack is not under way across the `syncfs`'s start for longer than [`MARGIN`] (the
//! kernel stamps a write's ctime before it copies the bytes); a lower file system whose
//! timestamps have whole seconds only (ctime nanoseconds zero) is given two seconds more.

use crate::absorb::Key;
use crate::{lock, Stack};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How much older than the `syncfs`'s start a file's ctime must be.
pub const MARGIN: Duration = Duration::from_millis(50);

/// Nanoseconds since the epoch.
type Stamp = i128;

fn stamp(sec: i64, nsec: i64) -> Stamp {
    sec as i128 * 1_000_000_000 + nsec as i128
}

/// Whether a file with this ctime had its last change before a `syncfs` that started at
/// `mark`.
pub fn settled_before(ctime_sec: i64, ctime_nsec: i64, mark: Stamp) -> bool {
    // Whole seconds only: the change may have come up to two seconds after its stamp (FAT
    // rounds to two).
    let grain: Stamp = if ctime_nsec == 0 { 2_000_000_000 } else { 0 };
    stamp(ctime_sec, ctime_nsec) + grain + MARGIN.as_nanos() as Stamp <= mark
}

/// The lower file system's last `syncfs` and whether another is wanted.
#[derive(Default)]
pub struct Settled {
    /// The start of the last `syncfs` that succeeded (coarse real-time clock).
    mark: Mutex<Option<Stamp>>,
    wanted: AtomicBool,
    last_run: Mutex<Option<Instant>>,
    /// The write-back thread, woken when a `syncfs` is wanted.
    thread: Mutex<Option<std::thread::Thread>>,
}

impl Settled {
    pub fn want(&self) {
        if !self.wanted.swap(true, Ordering::Relaxed) {
            if let Some(t) = lock(&self.thread).as_ref() {
                t.unpark();
            }
        }
    }

    /// The write-back thread is `t`.
    pub(crate) fn runs_on(&self, t: std::thread::Thread) {
        *lock(&self.thread) = Some(t);
    }

    pub fn mark(&self) -> Option<Stamp> {
        *lock(&self.mark)
    }
}

impl Stack {
    /// The write-back thread's part: a `syncfs` of the lower file system if one is wanted
    /// and none ran within the profiler's interval. Whether one ran.
    pub(crate) fn settle(&self) -> bool {
        let s = &self.settled;
        if !s.wanted.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if lock(&s.last_run).is_some_and(|t| now.saturating_duration_since(t) < self.cfg.profiler.interval) {
            return false;
        }
        self.settle_now();
        true
    }

    /// Whether a `syncfs` is wanted (a front end that starts the write-back thread only
    /// when needed starts it then).
    pub fn settling_wanted(&self) -> bool {
        self.settled.wanted.load(Ordering::Relaxed)
    }

    /// Runs the `syncfs` now; a failure (a write-back error below) keeps the last mark.
    pub fn settle_now(&self) {
        let s = &self.settled;
        s.wanted.store(false, Ordering::Relaxed);
        *lock(&s.last_run) = Some(Instant::now());
        let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
        let start = stamp(t.tv_sec, t.tv_nsec as i64);
        match rustix::fs::syncfs(self.store.lower_dir()) {
            Ok(()) => {
                let mut m = lock(&s.mark);
                *m = Some(m.map_or(start, |old| old.max(start)));
            }
            Err(e) => eprintln!("hashfs: syncfs of the lower file system failed ({e}); files below stay below"),
        }
    }

    /// A handle of lower file `key` (`lower` open on it), not made in PM, opened for
    /// writing: promoted now if its directory is hot, no handle of it is open, and it is
    /// settled below (unchanged since the last `syncfs` began). Whether it was. Call it
    /// before the open is counted.
    pub fn opened_for_writing(&self, key: Key, lower: &File) -> bool {
        if !self.cfg.dir_rule || !self.cfg.settled {
            return false;
        }
        let Some(sh) = self.existing(key) else { return false };
        let mut st = sh.lock();
        let Some(dir) = st.dir else { return false };
        if st.pm.is_some() || st.opens > 0 || !lock(&self.dirs).get(&dir).is_some_and(|d| d.hot(Instant::now())) {
            return false;
        }
        let Ok(m) = lower.metadata() else { return false };
        if !m.is_file() {
            return false;
        }
        if !self.settled.mark().is_some_and(|mark| settled_before(m.ctime(), m.ctime_nsec(), mark)) {
            // Changed since the last syncfs (or none ran): below this time.
            self.settled.want();
            return false;
        }
        self.promote(&mut st, lower);
        let promoted = st.pm.is_some();
        if promoted {
            self.counters.settled_promotions.fetch_add(1, Ordering::Relaxed);
        }
        promoted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StackConfig;
    use hashfs::SyncScope;
    use std::io::Write;
    use std::path::Path;
    use std::sync::Arc;

    #[test]
    fn a_file_is_settled_only_when_changed_a_margin_before_the_syncfs() {
        let mark = stamp(1000, 500_000_000);
        let margin = MARGIN.as_nanos() as i64;
        assert!(settled_before(1000, 500_000_000 - margin, mark));
        assert!(!settled_before(1000, 500_000_000 - margin + 1, mark), "inside the margin");
        assert!(!settled_before(1000, 600_000_000, mark), "changed after");
        // Whole-second stamps: two seconds more.
        assert!(!settled_before(999, 0, mark));
        assert!(settled_before(998, 0, stamp(1000, margin)));
    }

    fn open_stack(dir: &Path, format: bool) -> Arc<Stack> {
        let img = dir.join("pm.img");
        if format {
            hashfs::FileSystem::format_file(&img, 32 << 20, &hashfs::FormatOptions::default(), &|_, _| {}).unwrap();
        }
        let dev = hashfs::pm::MmapDevice::open(&img, hashfs::pm::OpenMode::Existing).unwrap();
        let (fs, _) = hashfs::FileSystem::mount(Arc::new(dev), &|_, _| {}).unwrap();
        let cfg = StackConfig::from_options(&["promote_after=3"]).unwrap();
        Stack::open(fs, &dir.join("lower"), cfg).unwrap().0
    }

    fn key(f: &File) -> Key {
        let m = f.metadata().unwrap();
        (m.dev(), m.ino())
    }

    /// A file of the lower directory's `sub`, opened for appending as a front end does:
    /// its directory noted, then the rule asked. The file, its key and whether it was
    /// promoted at the open.
    fn open_in(s: &Stack, lower: &Path, sub: &str, name: &str) -> (File, Key, bool) {
        let f = std::fs::OpenOptions::new().append(true).create(true).open(lower.join(sub).join(name)).unwrap();
        let k = key(&f);
        s.file_in(k, key(&File::open(lower.join(sub)).unwrap()));
        let promoted = s.opened_for_writing(k, &f);
        (f, k, promoted)
    }

    /// Appends `data` and fsyncs through the stack, then closes.
    fn append_synced(s: &Stack, f: &File, k: Key, data: &[u8]) {
        let sh = s.opened(k);
        let mut st = sh.lock();
        let end = f.metadata().unwrap().len().max(st.pm.as_ref().map_or(0, |p| p.size));
        s.write(&mut st, f, end, data).unwrap();
        s.fsync(&mut st, f, SyncScope::DataOnly).unwrap();
        drop(st);
        s.closed(k, &sh);
    }

    #[test]
    fn a_file_unchanged_since_a_syncfs_is_promoted_at_its_open_in_a_hot_directory() {
        // ext4 under /var/tmp exports file handles (tmpfs may not).
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let lower = dir.path().join("lower");
        for d in ["mail", "other"] {
            std::fs::create_dir_all(lower.join(d)).unwrap();
        }
        let s = open_stack(dir.path(), true);
        // Messages delivered below, never synced.
        for name in ["mail/old", "mail/early", "mail/busy", "mail/late", "other/old"] {
            std::fs::write(lower.join(name), b"delivered below\n").unwrap();
        }
        assert!(!s.settle(), "a syncfs ran unasked");
        // Three small fsyncs make `mail` hot; that alone asks for nothing.
        for i in 0..3 {
            let (f, k, promoted) = open_in(&s, &lower, "mail", &format!("s{i}"));
            assert!(!promoted, "a file was promoted before its directory was hot");
            append_synced(&s, &f, k, b"x");
        }
        assert!(!s.settle(), "a directory turning hot asked for a syncfs");
        // A message opened for writing there before any syncfs goes below, and asks for one.
        let (f, k, promoted) = open_in(&s, &lower, "mail", "early");
        assert!(!promoted, "a message was promoted with no syncfs yet");
        append_synced(&s, &f, k, b"appended below\n");
        std::thread::sleep(MARGIN * 2);
        assert!(s.settle(), "an open that found its file unsettled asked for no syncfs");
        // Changed after the syncfs began: not settled.
        std::fs::OpenOptions::new().append(true).open(lower.join("mail/late")).unwrap().write_all(b"more\n").unwrap();
        let lower_syncs = || s.counters.lower_syncs.load(Ordering::Relaxed);
        let absorbed = || s.counters.absorbed_syncs.load(Ordering::Relaxed);
        let (f, k, promoted) = open_in(&s, &lower, "mail", "old");
        assert!(promoted, "a message unchanged since the syncfs was not promoted at its open");
        let (below, pm) = (lower_syncs(), absorbed());
        append_synced(&s, &f, k, b"appended in PM\n");
        assert_eq!((lower_syncs(), absorbed()), (below, pm + 1), "its fsync was not absorbed");
        let (_, _, promoted) = open_in(&s, &lower, "mail", "late");
        assert!(!promoted, "a file changed after the syncfs began was promoted");
        let (_, _, promoted) = open_in(&s, &lower, "other", "old");
        assert!(!promoted, "a file of a directory that is not hot was promoted");
        // A file open already (its handles write below) waits for its next open.
        let f = std::fs::OpenOptions::new().append(true).open(lower.join("mail/busy")).unwrap();
        let k = key(&f);
        s.file_in(k, key(&File::open(lower.join("mail")).unwrap()));
        let sh = s.opened(k);
        assert!(!s.opened_for_writing(k, &f), "a file was promoted while a handle of it was open");
        s.closed(k, &sh);
        assert_eq!(s.counters.settled_promotions.load(Ordering::Relaxed), 1);
        // The late file asked for another syncfs: after it, the file is settled.
        std::thread::sleep(MARGIN * 2);
        s.settle_now();
        let (_, _, promoted) = open_in(&s, &lower, "mail", "late");
        assert!(promoted, "a file was not promoted after the syncfs that followed its change");
        // A power failure now: the message's PM copy over its lower bytes reads whole.
        drop(f);
        drop(s);
        let s = open_stack(dir.path(), false);
        let old = File::open(lower.join("mail/old")).unwrap();
        let sh = s.state(key(&old));
        let mut st = sh.lock();
        let size = st.pm.as_ref().expect("the promoted message is in PM after the remount").size as usize;
        let mut buf = vec![0u8; size];
        s.read(&mut st, &old, 0, &mut buf).unwrap();
        assert_eq!(buf, b"delivered below\nappended in PM\n");
    }
}
