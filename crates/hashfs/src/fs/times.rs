//! A write's times, durable at fsync (as ext4's and XFS's): a relaxed-mode overwrite or
//! fast append sets the file's modification and change times in DRAM only, and the media
//! gets them at the file's `fsync` (not `fdatasync`, which POSIX lets skip metadata that a
//! read does not need), at `sync`, at unmount, or with the inode's next transaction (which
//! writes the whole DRAM inode). A write's data and size are durable when it returns, as
//! before; after a crash its times may be those of any moment since the file's last fsync.
//! This saves the times' cache line and, for an overwrite, a fence per write. The
//! explorer's contract (`crashtest/snapshot.rs`, `Lagging`) says the same.
//!
//! The times are outside the inode's checksum (format 4), so they are stored in place.
//! Which clock a write reads is `inode::write_time_ns`'s (multigrain, as Linux's).

#![forbid(unsafe_code)]

use super::inode::{self, InodeCell, InodeMem};
use super::FsInner;
use crate::layout::inode::{INODE_CTIME_OFF, INODE_MTIME_OFF};
use crate::pm::PmDevice;
use std::sync::atomic::Ordering;

impl<D: PmDevice> FsInner<D> {
    /// A write's new times, in DRAM until the file's next fsync (see the module); on a
    /// shared mount, also stored (not flushed) where the other participants read them
    /// (`fs/shared/mod.rs`) when they change (once per tick of the coarse clock, or after a
    /// stat).
    pub(crate) fn set_write_times(&self, ino: crate::layout::Ino, st: &mut InodeMem) {
        let now = inode::write_time_ns(std::mem::take(st.times_seen.get_mut()));
        // Writes within one tick of the coarse clock set the times they already have.
        let changed = st.raw.mtime_ns != now || st.raw.ctime_ns != now;
        st.raw.mtime_ns = now;
        st.raw.ctime_ns = now;
        self.note_times_pending(st);
        if changed && self.shared.get().is_some() {
            self.show_times(ino, st);
        }
    }

    /// The inode's DRAM times are not (all) on the media yet: counted for
    /// [`Self::persist_all_times`] until [`Self::persist_times`] stores them.
    pub(crate) fn note_times_pending(&self, st: &mut InodeMem) {
        if !st.times_pending {
            st.times_pending = true;
            self.times_pending.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Stores the inode's DRAM times on the media if a write left them there only: two
    /// 8-byte stores in one line, its flush and a fence. Nothing for a freed inode (its
    /// slot may already be another's).
    pub(crate) fn persist_times(&self, cell: &InodeCell, st: &mut InodeMem) {
        if !st.times_pending {
            return;
        }
        if !st.freed {
            self.scope_inode(cell.ino);
            super::shared::touched(cell.ino);
            const _: () = assert!(INODE_CTIME_OFF == INODE_MTIME_OFF + 8);
            let ioff = self.geo.inode_off(cell.ino);
            self.dev.store_u64(ioff + INODE_MTIME_OFF, st.raw.mtime_ns as u64);
            self.dev.store_u64(ioff + INODE_CTIME_OFF, st.raw.ctime_ns as u64);
            self.dev.flush(ioff + INODE_MTIME_OFF, 16);
            self.dev.fence();
        }
        st.times_pending = false;
        self.times_pending.fetch_sub(1, Ordering::Relaxed);
    }

    /// Stores the inode's DRAM times where the other participants of a shared mount read
    /// them, without making them durable (they stay pending for fsync), and notes the
    /// change for them.
    fn show_times(&self, ino: crate::layout::Ino, st: &InodeMem) {
        if st.times_pending && !st.freed {
            self.scope_inode(ino);
            super::shared::touched(ino);
            let ioff = self.geo.inode_off(ino);
            self.dev.store_u64(ioff + INODE_MTIME_OFF, st.raw.mtime_ns as u64);
            self.dev.store_u64(ioff + INODE_CTIME_OFF, st.raw.ctime_ns as u64);
        }
    }

    /// [`Self::persist_times`] for every inode that needs it (sync, unmount).
    pub(crate) fn persist_all_times(&self) {
        if self.times_pending.load(Ordering::Relaxed) == 0 {
            return;
        }
        for cell in self.inodes.cells() {
            let mut st = cell.state.write();
            self.persist_times(&cell, &mut st);
        }
    }
}
