//! The image lock's read side on a shared mount (`share/readers.rs`; docs/design.md,
//! "Many processes on one image"): a read, and an overwrite of a file's mapped blocks
//! inside its size whose times stay what they are, change nothing another participant
//! caches (no inode bytes, no mapping, no allocation), so they run in several
//! participants at once, each after catching up with the ring. Whatever else a call
//! would do (fill a hole, grow the file, show new times, settle a tagged size) sends it
//! to the image lock instead.
//!
//! An fsync whose file's times are on the media already (a write stores them there,
//! unflushed) flushes them on the read side too; an fdatasync has nothing to change.
//!
//! Two overwrites of one file take turns on the inode's writer lock in the region
//! (`ImageRegion::inode_lock`), as Linux's writes to one file take the inode's lock; a
//! read takes none, and may see an overwrite in another process half done, as a read on
//! Linux may. A participant killed inside an overwrite leaves its bytes torn, as a power
//! failure may; the next to want the inode's lock takes it over with nothing to repair.

use super::depth;
use crate::fs::data::blocks_for;
use crate::fs::data::Plan;
use crate::fs::data::Planned;
use crate::fs::inode::{self, InodeCell};
use crate::fs::FsInner;
use crate::layout::inode::{INODE_CTIME_OFF, INODE_MTIME_OFF};
use crate::layout::Lblk;
use crate::pm::PmDevice;
use crate::share::Acquired;
use crate::Result;
use std::cell::Cell;
use std::sync::atomic::Ordering;

thread_local! {
    /// How deep this thread is in read-side calls (no destructor: see `DEPTH`).
    static READING: Cell<u32> = const { Cell::new(0) };
}

/// This thread's depth in read-side calls.
pub(super) fn reading() -> u32 {
    READING.with(Cell::get)
}

fn add_reading(by: i32) {
    READING.with(|d| d.set(d.get().saturating_add_signed(by)));
}

/// A read-side call's hold (see the module); let go when dropped.
pub(crate) struct Reading<'a, D: PmDevice> {
    fs: &'a FsInner<D>,
    outer: bool,
}

impl<D: PmDevice> Drop for Reading<'_, D> {
    fn drop(&mut self) {
        if !self.outer {
            return;
        }
        add_reading(-1);
        if let Some(sh) = self.fs.shared.get() {
            sh.region.leave_read(sh.me());
        }
    }
}

impl<D: PmDevice> FsInner<D> {
    /// Enters a read-side call on a shared mount (None on a mount of one process, whose
    /// calls take no image lock): beside other readers, after every writer, caught up
    /// with what the others changed. Inside a call that holds the image lock, or another
    /// read-side call, nothing more is taken.
    pub(crate) fn enter_read(&self) -> Option<Reading<'_, D>> {
        let sh = self.shared.get()?;
        if depth() > 0 || reading() > 0 {
            return Some(Reading { fs: self, outer: false });
        }
        let me = sh.me();
        if !sh.region.try_read(me) {
            // A writer holds the image lock: wait for it as a writer would (taking it
            // over, with the recovery, from one that died), then join the readers before
            // letting go, so that no writer comes between.
            let held = self.enter();
            sh.region.read_holding(me);
            drop(held);
        } else {
            self.catch_up(sh);
        }
        add_reading(1);
        Some(Reading { fs: self, outer: true })
    }

    /// On a shared mount, inside a read-side call: writes `data` at `off` of the file if
    /// the write is an overwrite that changes nothing but the bytes (every block mapped,
    /// inside the size, the times it would set the ones it has, no tagged size, no mapping
    /// of the file in this process, not strict mode); None, having written nothing, when
    /// it is not (the caller writes under the image lock).
    pub(crate) fn overwrite_shared(&self, cell: &InodeCell, off: u64, data: &[u8]) -> Result<Option<usize>> {
        let Some(sh) = self.shared.get() else { return Ok(None) };
        if data.is_empty() || self.is_strict() || depth() > 0 {
            return Ok(None);
        }
        let Some(end) = off.checked_add(data.len() as u64) else { return Ok(None) };
        let lock = sh.region.inode_lock(cell.ino);
        // A dead holder left at most an overwrite torn, as a power failure may: nothing to
        // repair.
        let _: Acquired = lock.lock(sh.me(), sh.region.participants());
        struct Unlock<'l>(&'l crate::share::RobustLock);
        impl Drop for Unlock<'_> {
            fn drop(&mut self) {
                self.0.unlock();
            }
        }
        let _unlock = Unlock(lock);
        let mut st = cell.state.write();
        if st.freed
            || !st.raw.is_reg()
            || st.tag.is_some()
            || end > st.raw.size
            || cell.map_count.load(Ordering::Acquire) != 0
        {
            return Ok(None);
        }
        let now = inode::write_time_ns(*st.times_seen.get_mut());
        if st.raw.mtime_ns != now || st.raw.ctime_ns != now {
            return Ok(None); // new times: the others must be told
        }
        let size_blocks = blocks_for(st.raw.size);
        let stop = Lblk::of_byte(end - 1) + 1;
        let mut plan = Plan::new();
        let mut lblk = Lblk::of_byte(off);
        while lblk < stop {
            let Some(e) = self.translate_range(cell, &st.raw, lblk, stop, size_blocks)? else {
                return Ok(None); // a hole: a block to claim
            };
            let n = e.len.min(stop - lblk);
            plan.extend((0..n).map(|i| Planned { lblk: lblk + i, pblk: e.pblk + i, fresh: false }));
            lblk += n;
        }
        self.write_planned(&plan, off, data);
        self.dev.fence();
        self.note_data(cell.ino);
        // The times, unchanged, stay pending for fsync as any write's do (`fs/times.rs`).
        self.note_times_pending(&mut st);
        Ok(Some(data.len()))
    }

    /// On a shared mount, inside a read-side call: makes `cell`'s times durable if that
    /// changes no byte the others read (a write stores its times where they read them,
    /// `fs/times.rs`, so its pending times are on the media already, unflushed: a flush
    /// and a fence finish them). False, having done nothing, when the media holds other
    /// times (the caller persists them under the image lock).
    pub(crate) fn sync_times_shared(&self, cell: &InodeCell) -> bool {
        if self.shared.get().is_none() || depth() > 0 {
            return false;
        }
        let mut st = cell.state.write();
        if !st.times_pending {
            return true;
        }
        if st.freed {
            return false;
        }
        let ioff = self.geo.inode_off(cell.ino);
        if self.dev.load_u64(ioff + INODE_MTIME_OFF) != st.raw.mtime_ns as u64
            || self.dev.load_u64(ioff + INODE_CTIME_OFF) != st.raw.ctime_ns as u64
        {
            return false;
        }
        self.dev.flush(ioff + INODE_MTIME_OFF, 16);
        self.dev.fence();
        st.times_pending = false;
        self.times_pending.fetch_sub(1, Ordering::Relaxed);
        true
    }
}
