//! fallocate over every mapping: preallocation (`posix_fallocate`), `FALLOC_FL_ZERO_RANGE`
//! and `FALLOC_FL_PUNCH_HOLE`, built on the write and truncation paths of `fs/data.rs`
//! (whose invariants F1 and F2 they keep).

#![forbid(unsafe_code)]

use super::data::{blocks_for, WRITE_CHUNK_BLOCKS};
use super::inode::{self, InodeCell};
use super::verbs::{on_map, MapVerbs};
use super::FsInner;
use crate::layout::{Lblk, BLOCK_BYTES, MAX_FILE_BYTES};
use crate::pm::PmDevice;
use crate::{Error, Result};
use std::sync::atomic::Ordering;

/// What an allocation or a zeroed range past the end of the file does to its size:
/// moves it to the range's end (plain `fallocate`), or leaves it (`FALLOC_FL_KEEP_SIZE`:
/// then nothing past the size changes, as no block may lie past EOF).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SizeRule {
    Extend,
    Keep,
}

impl<D: PmDevice> FsInner<D> {
    /// posix_fallocate: maps every hole in [off, off + len) with zeroed blocks and grows
    /// the size to cover the range. Mapped blocks are left as they are.
    pub(crate) fn allocate(&self, cell: &InodeCell, off: u64, len: u64, size: SizeRule) -> Result<()> {
        let r = self.allocate_unrefreshed(cell, off, len, size);
        self.refresh_views(cell, off..off.saturating_add(len));
        r
    }

    fn allocate_unrefreshed(&self, cell: &InodeCell, off: u64, len: u64, size: SizeRule) -> Result<()> {
        let mut end = off.checked_add(len).filter(|&e| e <= MAX_FILE_BYTES).ok_or(Error::FileTooBig)?;
        if size == SizeRule::Keep {
            // No block may lie past EOF (F1): preallocate only up to the current size.
            end = end.min(cell.state.read().raw.size);
            if end <= off {
                return Ok(());
            }
        }
        if len == 0 {
            return Err(Error::Invalid("fallocate of zero bytes"));
        }
        self.regions_upkeep(cell, Some(off), end - off);
        let mut st = cell.state.write();
        self.untag(cell, &mut st); // its bytes may change in place (`fs/hashfs/append_tag.rs`)
        if st.raw.is_dir() {
            return Err(Error::IsDir);
        }
        let _req = self.alloc_request(cell);
        let zeros = vec![0u8; (WRITE_CHUNK_BLOCKS * BLOCK_BYTES) as usize];
        let mut lblk = off / BLOCK_BYTES;
        let last = (end - 1) / BLOCK_BYTES;
        while lblk <= last {
            let size_blocks = blocks_for(st.raw.size);
            let mapped = lblk < size_blocks && self.translate(cell, &st.raw, Lblk(lblk), size_blocks)?.is_some();
            if mapped {
                lblk += 1;
                continue;
            }
            // A run of unmapped blocks (bounded by one write transaction).
            let mut run_end = lblk + 1;
            while run_end <= last
                && run_end - lblk < WRITE_CHUNK_BLOCKS
                && !(run_end < size_blocks && self.translate(cell, &st.raw, Lblk(run_end), size_blocks)?.is_some())
            {
                run_end += 1;
            }
            // Zeros over the run (holes read as zeros already), never growing past `end`.
            let from = lblk * BLOCK_BYTES;
            let to = (run_end * BLOCK_BYTES).min(end.max(st.raw.size));
            let n = self.write_locked(cell, &mut st, from, &zeros[..(to - from) as usize], off..end)?;
            if n < (to - from) as usize {
                return Err(Error::NoSpace);
            }
            lblk = run_end;
        }
        if st.raw.size < end {
            self.set_len_locked(cell, &mut st, end)?;
        }
        // Only a write's own times may wait for fsync (`fs/times.rs`).
        self.persist_times(cell, &mut st);
        Ok(())
    }

    /// fallocate(FALLOC_FL_ZERO_RANGE): [off, off + len) reads as zeros afterwards, every
    /// block of it mapped. Holes get new zeroed blocks and mapped blocks are zeroed in
    /// place, keeping their placement (which matters to the huge-page-aware layouts). Not
    /// atomic, like an overwrite: after a crash each byte of the range is old or zero, and
    /// the size old or new. With [`SizeRule::Keep`], nothing past the current size changes (no
    /// block may lie past EOF).
    pub(crate) fn zero_range(&self, cell: &InodeCell, off: u64, len: u64, size: SizeRule) -> Result<()> {
        let r = self.zero_range_unrefreshed(cell, off, len, size);
        self.refresh_views(cell, off..off.saturating_add(len));
        r
    }

    fn zero_range_unrefreshed(&self, cell: &InodeCell, off: u64, len: u64, size: SizeRule) -> Result<()> {
        if len == 0 {
            return Err(Error::Invalid("fallocate of zero bytes"));
        }
        let end = off.checked_add(len).filter(|&e| e <= MAX_FILE_BYTES).ok_or(Error::FileTooBig)?;
        if cell.state.read().raw.is_dir() {
            return Err(Error::IsDir);
        }
        // Inside the size, one pass of zeros: a write fills a hole with a new zeroed block
        // and zeroes a mapped block in place. Past the size, `allocate` grows the file.
        self.regions_upkeep(cell, Some(off), end - off);
        let mut st = cell.state.write();
        self.untag(cell, &mut st); // its bytes may change in place (`fs/hashfs/append_tag.rs`)
        let inside = end.min(st.raw.size);
        let _req = self.alloc_request(cell);
        let zeros = vec![0u8; (WRITE_CHUNK_BLOCKS * BLOCK_BYTES) as usize];
        let mut at = off;
        while at < inside {
            let n = ((inside - at) as usize).min(zeros.len());
            let done = self.write_locked(cell, &mut st, at, &zeros[..n], off..end)?;
            if done == 0 {
                return Err(Error::NoSpace);
            }
            at += done as u64;
        }
        self.persist_times(cell, &mut st); // only a write's own times wait for fsync
        drop(st);
        let grow_from = off.max(inside);
        if size == SizeRule::Extend && end > grow_from {
            // (zero_range's own refresh covers the grown part)
            self.allocate_unrefreshed(cell, grow_from, end - grow_from, SizeRule::Extend)?;
        }
        Ok(())
    }

    /// fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE): [off, off + len) reads as
    /// zeros afterwards; whole blocks inside it are freed, partial ones zeroed. The size is
    /// kept. Like an overwrite it is not atomic: after a crash each byte of the range is old
    /// or zero. HashFS frees the blocks before the inode's block count is committed, so a
    /// crash can leave a count that recovery corrects, never punched data that comes back;
    /// the other mappings unmap and count in the same transactions.
    pub(crate) fn punch_hole(&self, cell: &InodeCell, off: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Err(Error::Invalid("fallocate of zero bytes"));
        }
        let mut st = cell.state.write();
        self.untag(cell, &mut st); // its bytes may change in place (`fs/hashfs/append_tag.rs`)
        if st.raw.is_dir() {
            return Err(Error::IsDir);
        }
        if self.mapped_anywhere(cell) {
            return Err(Error::Busy); // a mapping would be left on freed blocks
        }
        let size = st.raw.size;
        let end = off.saturating_add(len).min(size);
        if off >= end {
            return Ok(());
        }
        let size_blocks = blocks_for(size);
        // Partial blocks at either end: zero the covered bytes in place.
        for (a, b) in
            [(off, end.min((off / BLOCK_BYTES + 1) * BLOCK_BYTES)), ((end / BLOCK_BYTES * BLOCK_BYTES).max(off), end)]
        {
            if a < b && (a % BLOCK_BYTES != 0 || b - a < BLOCK_BYTES) {
                if let Some(e) = self.translate(cell, &st.raw, Lblk::of_byte(a), size_blocks)? {
                    let at = self.geo.block_off(e.pblk) + a % BLOCK_BYTES;
                    self.dev.zero(at, b - a);
                    self.dev.flush(at, b - a);
                }
            }
        }
        let first_full = Lblk(off.div_ceil(BLOCK_BYTES));
        let last_full = Lblk(end / BLOCK_BYTES + u64::from(end == size && !size.is_multiple_of(BLOCK_BYTES)));
        cell.tcache.invalidate_all();
        cell.cursor.store(0, Ordering::Relaxed);
        let now = inode::now_ns();
        // The blocks go first (the structures commit the inode as they go; HashFS's
        // block count follows in the transaction below).
        let (from, to) = (first_full, last_full.max(first_full));
        let planned = on_map!(self, m => m.release_plan(cell, from, to));
        self.scope_range(cell.ino, from, to, planned.len() as u64, Some(st.raw.blocks));
        on_map!(self, m => m.release_blocks(self, cell, &mut st, &planned, from, to))?;
        let mut raw = st.raw;
        raw.blocks = raw.blocks.saturating_sub(planned.len() as u64);
        raw.mtime_ns = now;
        raw.ctime_ns = now;
        let mut tx = self.journals.begin();
        inode::tx_write_inode(&mut tx, &self.geo, cell.ino, &mut raw);
        tx.commit()?;
        st.raw = raw;
        Ok(())
    }
}
