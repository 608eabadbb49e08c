//! What every front end of the stack does with a file's data: the FUSE daemon
//! ([`crate::ops`]) and the preload shim (`crates/hashfs-spfs-shim`) both call these with
//! the file's state locked ([`crate::FileGuard`]) and a descriptor of the lower file.
//!
//! The rules (docs/stacked.md): a promoted file's writes go to PM, reads merge PM over the
//! lower file, fsync is a fence; an unpromoted file's fsync goes to the lower file system
//! and then to the profiler, which may promote the file; a full PM sends the file back
//! down and the write with it.

use crate::absorb::Key;
use crate::lower::read_full;
use crate::{FileState, Stack};
use hashfs::SyncScope;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// A promoted file's length, blocks and modification time (ns), which a stat of the lower
/// file must show instead of its own.
#[derive(Clone, Copy, Debug)]
pub struct MergedAttr {
    pub size: u64,
    pub blocks: u64,
    pub mtime_ns: i64,
}

impl Stack {
    /// Writes `data` at `off`: into PM when the file is promoted, else (or when PM is full,
    /// after writing the file back) into `lower`. Counts the bytes for the profiler.
    pub fn write(&self, st: &mut FileState, lower: &File, off: u64, data: &[u8]) -> io::Result<usize> {
        st.profile.wrote(data.len() as u64, Instant::now());
        if let Some(n) = self.write_promoted(st, off, data)? {
            return Ok(n);
        }
        lower.write_all_at(data, off)?;
        Ok(data.len())
    }

    /// The PM half of [`Stack::write`]: Some(bytes) when the write went to PM, None when the
    /// file is below (not promoted, or just written back because PM is full), where the
    /// caller writes it. Does not count for the profiler.
    pub fn write_promoted(&self, st: &mut FileState, off: u64, data: &[u8]) -> io::Result<Option<usize>> {
        let Some(p) = st.pm.as_mut() else { return Ok(None) };
        match self.store.write(p, off, data) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                self.write_back_locked(st)?;
                self.counters.pm_full_demotions.fetch_add(1, Ordering::Relaxed);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Reads the file: the merged view when promoted, else `lower`. Counts for the Sync
    /// Factor (a read lowers it).
    pub fn read(&self, st: &mut FileState, lower: &File, off: u64, buf: &mut [u8]) -> io::Result<usize> {
        st.profile.read(&self.cfg.profiler, Instant::now());
        match st.pm.as_ref() {
            Some(p) => self.store.read(p, off, buf),
            None => read_full(lower, off, buf),
        }
    }

    /// fsync: a fence for a promoted file; otherwise the lower file's fsync, then the
    /// profiler (as SPFS: sync first, profile after), which may promote the file.
    pub fn fsync(&self, st: &mut FileState, lower: &File, scope: SyncScope) -> io::Result<()> {
        let cfg = &self.cfg;
        let now = Instant::now();
        if let Some(p) = st.pm.as_ref() {
            // A file made in PM: its made record stands for its lower creation (`remake.rs`).
            self.store.sync(p)?;
            let v = st.profile.synced(&cfg.profiler, now);
            self.counters.absorbed_syncs.fetch_add(1, Ordering::Relaxed);
            if let (true, Some(dir)) = (v.small, st.dir) {
                self.dir_synced(dir, now);
            }
            return Ok(());
        }
        if st.passthrough > 0 {
            // Writes the kernel passed to the lower file: the daemon counts them here.
            if let Some(n) = crate::lower::unsynced_bytes(lower) {
                st.profile.wrote(n, now);
            }
        }
        crate::lower::sync(lower, scope)?;
        self.counters.lower_syncs.fetch_add(1, Ordering::Relaxed);
        let v = st.profile.synced(&cfg.profiler, now);
        if st.handle.is_none() && st.profile.sync_factor() >= crate::saved_profiles::KEEP_MIN {
            // Its factor is worth keeping across remounts: name the lower inode for the save.
            st.handle = crate::lower::LowerHandle::of(lower.as_fd()).ok();
        }
        if let (true, Some(dir)) = (v.small, st.dir) {
            self.dir_synced(dir, now);
        }
        if v.promote {
            if st.passthrough > 0 {
                // Handles that write below are open: the promotion waits for them to close.
                if !std::mem::replace(&mut st.promote_pending, true) {
                    self.counters.promotions_deferred.fetch_add(1, Ordering::Relaxed);
                }
            } else {
                self.promote(st, lower);
            }
        }
        Ok(())
    }

    /// Promotes the file, if it may be (its name not gone, nothing pinning it below, room
    /// in PM, a regular file); a failure leaves it below, with a message.
    pub(crate) fn promote(&self, st: &mut FileState, lower: &File) {
        self.promote_with(st, lower, None)
    }

    /// [`Stack::promote`], with the made record of a file made in PM (`remake.rs`).
    pub(crate) fn promote_with(&self, st: &mut FileState, lower: &File, made: Option<&crate::remake::MadeRecord>) {
        st.promote_pending = false;
        let (used, total) = self.store.usage();
        let room = (used as f64) < self.cfg.high_water * total as f64;
        if st.pm.is_some() || st.gone || st.pinned() || !room || !lower.metadata().map(|m| m.is_file()).unwrap_or(false)
        {
            return;
        }
        match self.store.promote_with(lower.as_fd(), made) {
            Ok(p) => {
                st.pm = Some(p);
                self.counters.promotions.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => eprintln!("hashfs: promotion of a lower file failed (it stays below): {e}"),
        }
    }

    /// A handle of `key` opened through the mount: its state, counted open, and whether
    /// the kernel may serve it from `lower` itself (passthrough, if `offered`). The kernel
    /// keeps an inode in one mode at a time, so the first open chooses for all that come
    /// while it is open: passthrough unless the file is promoted (its newest bytes are in
    /// PM) or syncing (a run of qualifying fsyncs: through the daemon it can be promoted
    /// while open; a passthrough handle's file is promoted only at an open after the last
    /// such handle closed). A promotion that waited for the passthrough handles to close
    /// is made here, when none is left, after a lower fsync of what they wrote since the
    /// fsync that asked for it. A passthrough handle is closed with
    /// [`Stack::closed_through`].
    pub fn opened_through(&self, key: Key, lower: &File, offered: bool) -> (crate::Shared, bool) {
        let sh = self.state(key);
        let mut st = sh.lock();
        if st.promote_pending && st.passthrough == 0 {
            // The passthrough handles may have written below since the fsync that asked
            // for the promotion, and a PM copy absorbs fsyncs on the grounds that every
            // byte it does not hold is durable below: one lower fsync first.
            match crate::lower::sync(lower, SyncScope::DataOnly) {
                Ok(()) => {
                    self.counters.lower_syncs.fetch_add(1, Ordering::Relaxed);
                    self.promote(&mut st, lower);
                }
                Err(e) => {
                    st.promote_pending = false;
                    eprintln!("hashfs: a promotion waited for passthrough handles, and the lower fsync before it failed (the file stays below): {e}");
                }
            }
        }
        let cfg = &self.cfg.profiler;
        let first_choice = st.opens == 0 && !st.profile.syncing(cfg, Instant::now()) && !st.profile.syncs_often(cfg);
        let pass = offered && st.pm.is_none() && st.opens == st.passthrough && (st.opens > 0 || first_choice);
        st.opens += 1;
        if pass {
            st.passthrough += 1;
            self.counters.passthrough_opens.fetch_add(1, Ordering::Relaxed);
        }
        drop(st);
        (sh, pass)
    }

    /// Truncates or extends the file (a promoted one PM first, then the lower file).
    pub fn truncate(&self, st: &mut FileState, lower: &File, size: u64) -> io::Result<()> {
        match st.pm.as_mut() {
            Some(p) => self.store.set_len(p, size),
            None => lower.set_len(size),
        }
    }

    /// fallocate: plain allocation only grows a promoted file; modes that would punch or
    /// move both copies are refused, loudly (EOPNOTSUPP), rather than done half.
    pub fn allocate(&self, st: &mut FileState, lower: &File, mode: i32, off: u64, len: u64) -> io::Result<()> {
        match st.pm.as_mut() {
            Some(p) if mode == 0 => {
                let end = off.checked_add(len).ok_or_else(|| io::Error::from_raw_os_error(libc::EFBIG))?;
                if end > p.size {
                    self.store.set_len(p, end)?;
                }
                Ok(())
            }
            Some(_) if mode == libc::FALLOC_FL_KEEP_SIZE => Ok(()),
            Some(_) => Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP)),
            None => {
                let m = rustix::fs::FallocateFlags::from_bits(mode as u32)
                    .ok_or_else(|| io::Error::from_raw_os_error(libc::EOPNOTSUPP))?;
                Ok(rustix::fs::fallocate(lower, m, off, len)?)
            }
        }
    }

    /// A handle of `key` opened: its state, counted open.
    pub fn opened(&self, key: Key) -> crate::Shared {
        let sh = self.state(key);
        sh.lock().opens += 1;
        sh
    }

    /// A handle of `key` closed: a file whose last name went drops its PM copy at its last
    /// close, and a state nothing needs is forgotten. The profile outlives the handle
    /// otherwise (SPFS keeps it in the in-core inode): a file opened, appended, fsynced and
    /// closed at every delivery must still be seen syncing often.
    pub fn closed(&self, key: Key, sh: &crate::Shared) {
        self.closed_through(key, sh, false)
    }

    /// [`Stack::closed`] of a handle that was passthrough or not.
    pub fn closed_through(&self, key: Key, sh: &crate::Shared, passthrough: bool) {
        let mut st = sh.lock();
        st.opens = st.opens.saturating_sub(1);
        if passthrough {
            st.passthrough = st.passthrough.saturating_sub(1);
        }
        let gone = st.gone && st.opens == 0;
        if gone {
            self.drop_copy(&mut st);
        }
        drop(st);
        if gone {
            self.prune_unkept(key); // deleted: nothing of it may pass to its inode number's next file
        }
    }

    /// Before a name of `key` goes: a file made in PM drops its made record when this is
    /// its last name, so that a mount after a crash takes its lower inode's absence for the
    /// deletion it is, not for a creation lost below (`remake.rs`). An error leaves the name.
    pub fn removing_name(&self, key: Option<Key>) -> io::Result<()> {
        let Some(sh) = key.and_then(|k| self.existing(k)) else { return Ok(()) };
        let st = sh.lock();
        let Some(p) = st.pm.as_ref() else { return Ok(()) };
        if p.lower.metadata().map(|m| std::os::unix::fs::MetadataExt::nlink(&m) > 1).unwrap_or(false) {
            return Ok(()); // another name is left
        }
        // Whether made in this mount or an earlier one: the record is in PM.
        self.store.forget_made(p)
    }

    /// After a name of `key` went away: a promoted file with no name left loses its PM copy
    /// at its last close, and the state of a file not open is forgotten (its inode number
    /// may come back as a new file, which must not inherit it: a copy marked gone would
    /// never be promoted again).
    pub fn name_removed(&self, key: Option<Key>) {
        let Some(key) = key else { return };
        let Some(sh) = self.existing(key) else { return };
        let mut st = sh.lock();
        if let Some(p) = st.pm.as_ref() {
            if !p.lower.metadata().map(|m| std::os::unix::fs::MetadataExt::nlink(&m) == 0).unwrap_or(false) {
                return; // another name is left
            }
            st.gone = true;
            if st.opens == 0 {
                self.drop_copy(&mut st);
            }
        }
        let idle = st.opens == 0;
        // A file whose last name went must not leave its kept Sync Factor to a new file
        // on its inode number (the handle of a deleted inode is stale).
        let unnamed = st.gone
            || st.handle.as_ref().is_some_and(|h| {
                h.open(self.store.lower_dir(), libc::O_PATH)
                    .and_then(|fd| Ok(rustix::fs::fstat(&fd)?.st_nlink == 0))
                    .unwrap_or(true)
            });
        drop(st);
        if idle && unnamed {
            self.prune_unkept(key);
        } else if idle {
            self.prune(key);
        }
    }

    fn drop_copy(&self, st: &mut FileState) {
        if let Some(p) = st.pm.take() {
            if let Err(e) = self.store.discard(&p) {
                eprintln!("hashfs: dropping the PM copy of a deleted file: {e}");
            }
        }
    }

    /// What a stat of lower file `key` must show instead of its own, if it is promoted.
    pub fn merged_attr(&self, key: Key) -> Option<MergedAttr> {
        let sh = self.existing(key)?;
        if !sh.promoted() {
            return None;
        }
        let st = sh.lock();
        let p = st.pm.as_ref()?;
        let m = p.pm.metadata().ok()?;
        Some(MergedAttr { size: p.size, blocks: m.st_blocks(), mtime_ns: m.mtime_ns })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StackConfig;
    use std::sync::Arc;

    fn stack(dir: &std::path::Path) -> Arc<Stack> {
        let img = dir.join("pm.img");
        hashfs::FileSystem::format_file(&img, 32 << 20, &hashfs::FormatOptions::default(), &|_, _| {}).unwrap();
        let dev = hashfs::pm::MmapDevice::open(&img, hashfs::pm::OpenMode::Existing).unwrap();
        let (fs, _) = hashfs::FileSystem::mount(Arc::new(dev), &|_, _| {}).unwrap();
        let lower = dir.join("lower");
        std::fs::create_dir(&lower).unwrap();
        Stack::open(fs, &lower, StackConfig::default()).unwrap().0
    }

    /// Writes and fsyncs `file` until the stack promotes it (at most 40 times).
    fn sync_until_promoted(s: &Stack, sh: &crate::Shared, file: &File) -> bool {
        for i in 0..40u64 {
            let mut st = sh.lock();
            s.write(&mut st, file, i * 100, &[7u8; 100]).unwrap();
            s.fsync(&mut st, file, SyncScope::DataOnly).unwrap();
            if st.pm.is_some() {
                return true;
            }
        }
        false
    }

    /// The status fits the 64 KiB the kernel lets an extended attribute (how `hashfs info`
    /// reads it from a mount): with many promoted files it lists what fits and counts the rest.
    #[test]
    fn the_status_of_many_promoted_files_fits_an_extended_attribute() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let s = stack(dir.path());
        for i in 0..300 {
            let f = File::create(dir.path().join(format!("lower/{i:03}-{}", "m".repeat(200)))).unwrap();
            let m = f.metadata().unwrap();
            let sh = s.opened((std::os::unix::fs::MetadataExt::dev(&m), std::os::unix::fs::MetadataExt::ino(&m)));
            s.promote(&mut sh.lock(), &f);
        }
        let status = s.status();
        assert!(status.contains("promoted files: 300"), "{status}");
        assert!(status.len() <= 64 << 10, "{} bytes", status.len());
        let listed = status.lines().filter(|l| l.starts_with("  /")).count();
        assert!(listed > 100 && listed < 300, "{listed} listed");
        assert!(status.ends_with(&format!("  ... and {} more\n", 300 - listed)), "{status}");
    }

    #[test]
    fn a_deleted_promoted_files_inode_number_comes_back_as_a_new_file_that_can_be_promoted() {
        // ext4 under /var/tmp exports file handles (tmpfs may not).
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let s = stack(dir.path());
        let path = dir.path().join("lower/wal");
        let open =
            || std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        let key = |f: &File| {
            let m = std::os::unix::fs::MetadataExt::ino(&f.metadata().unwrap());
            (std::os::unix::fs::MetadataExt::dev(&f.metadata().unwrap()), m)
        };
        let f = open();
        let k = key(&f);
        let sh = s.opened(k);
        assert!(sync_until_promoted(&s, &sh, &f), "a file fsynced 40 times with little written is promoted");
        s.closed(k, &sh);
        drop(f);
        std::fs::remove_file(&path).unwrap();
        s.name_removed(Some(k));
        assert!(s.existing(k).is_none(), "the state of a deleted file that is not open is forgotten");
        // A new file given the same (st_dev, st_ino), as ext4 does with freed inodes.
        let g = open();
        let sh = s.opened(k);
        assert!(!sh.lock().gone, "a new file does not inherit a deleted file's state");
        assert!(sync_until_promoted(&s, &sh, &g), "the new file is promoted like any other");
    }
}
