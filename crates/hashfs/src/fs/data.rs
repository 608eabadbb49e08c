//! File data: read, write and truncate over every mapping (the HashFS table, or a per-file
//! or global structure with the block allocator), which this file asks only through the
//! verbs of `fs/verbs.rs`; fallocate is in `fs/fallocate.rs`.
//!
//! Durability order for a write (the papers' relaxed/sync mode): new blocks are claimed in
//! the table as reservations and filled (the rest of a partly written new block is zeroed,
//! so no stale data is ever exposed); data is flushed; then one transaction makes the new
//! keys and the inode (size, block count, times) visible, its first fence ordering the
//! data before them. An overwrite of mapped blocks needs only the data flush and one fence;
//! its times stay in DRAM until the file's fsync (`fs/times.rs`).
//!
//! Invariant (F1): no block at or beyond ceil(size / 4096) is mapped, except reservations
//! and keys of a write in progress (recovery frees those). (F2): bytes past EOF in the last
//! block read as zeros: a shrink zeroes them once its size is durable, recovery after a
//! crash zeroes them, and a growth zeroes those it brings inside the file and does not
//! write itself (a store through a mapping past EOF may have put bytes there;
//! `fs/eof_tail.rs`).

#![forbid(unsafe_code)]

use super::hashfs::append_tag::TAG_MAX_LEN;
use super::inode::{self, InodeCell, InodeMem};
use super::verbs::{on_map, MapVerbs};
use super::FsInner;
use crate::journal::Tx;
use crate::layout::{Extent, Ino, InodeRaw, Lblk, Pblk};
use crate::layout::{BLOCK_BYTES, MAX_FILE_BYTES};
use crate::mapping::ctfs::view::FileRef;
use crate::mapping::staged::Direct;
use crate::pm::mmap::NEXT_RUN_PREFETCH_LINES;
use crate::pm::PmDevice;
use crate::probe;
use crate::{Error, Result};
use smallvec::SmallVec;
use std::ops::Range;
use std::sync::atomic::Ordering;

/// New blocks per write transaction (1 MiB): bounds the journal space of one write.
pub const WRITE_CHUNK_BLOCKS: u64 = 256;

/// New blocks of one file for [`FsInner::tx_map_blocks`].
pub(crate) struct MapGroup<'r> {
    pub ino: Ino,
    pub raw: &'r mut InodeRaw,
    pub pairs: &'r [(Lblk, Pblk)],
    /// Logical blocks below this lie inside the file's durable size (holes being filled):
    /// recovery would keep a HashFS key published there, so their keys are logged and roll
    /// back with the transaction. Keys at or past it are published unlogged (recovery frees
    /// a key past EOF by itself).
    pub logged_below: Lblk,
}

pub(crate) fn blocks_for(size: u64) -> u64 {
    size.div_ceil(BLOCK_BYTES)
}

/// The first logical block past a file of `size` bytes.
pub(crate) fn end_lblk(size: u64) -> Lblk {
    Lblk(blocks_for(size))
}

/// Blocks a plan holds without a heap allocation (a 4 KiB write needs one or two).
const PLAN_INLINE: usize = 4;

/// A write's blocks in order.
pub(super) type Plan = SmallVec<[Planned; PLAN_INLINE]>;

/// One block of a write: where it maps, and whether it was claimed for this write.
#[derive(Clone, Copy)]
pub(super) struct Planned {
    pub(super) lblk: Lblk,
    pub(super) pblk: Pblk,
    pub(super) fresh: bool,
}

/// See [`FsInner::alloc_request`].
pub(crate) struct AllocRequest<'a, D: PmDevice> {
    fs: &'a FsInner<D>,
    ino: Ino,
}

impl<D: PmDevice> Drop for AllocRequest<'_, D> {
    fn drop(&mut self) {
        on_map!(self.fs, m => m.end_request(self.ino))
    }
}

impl<D: PmDevice> FsInner<D> {
    /// Translates logical block `lblk` of `cell`: the extent from `lblk` to the end of its
    /// mapping entry (one block for block-granular structures).
    #[inline]
    pub(crate) fn translate(
        &self,
        cell: &InodeCell,
        raw: &InodeRaw,
        lblk: Lblk,
        size_blocks: u64,
    ) -> Result<Option<Extent>> {
        self.translate_range(cell, raw, lblk, lblk + 1, size_blocks)
    }

    /// [`Self::translate`] for a request that goes on to block `end` (exclusive): HashFS
    /// looks up the following blocks of the request in the same vector hash.
    #[inline]
    pub(super) fn translate_range(
        &self,
        cell: &InodeCell,
        raw: &InodeRaw,
        lblk: Lblk,
        end: Lblk,
        size_blocks: u64,
    ) -> Result<Option<Extent>> {
        let _span = probe::translate();
        let e = on_map!(self, m => m.translate(self, cell, raw, lblk, end, size_blocks))?;
        // The device would be read or written out of bounds.
        match e {
            Some(e) if !self.geo.holds_blocks(e.pblk, e.len) => Err(Error::corrupt(format!(
                "inode {}: block {} maps {} blocks at {}, past the data area",
                cell.ino, lblk.0, e.len, e.pblk.0
            ))),
            e => Ok(e),
        }
    }

    pub(crate) fn read_at(&self, cell: &InodeCell, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.prefetch_home(cell, off, buf.len());
        let st = cell.state.read();
        if st.freed {
            return Err(Error::NotFound);
        }
        if st.raw.is_dir() {
            return Err(Error::IsDir);
        }
        let size = st.raw.size;
        if off >= size || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(size - off) as usize;
        let size_blocks = blocks_for(size);
        let end = (off + n as u64).div_ceil(BLOCK_BYTES);
        if let Some(v) = self.map.ctfs_view() {
            // ctFS: one copy from the file's virtual range, the MMU translating.
            let f = FileRef { m: &Direct(&*self.dev), geo: &self.geo, ino: cell.ino, raw: &st.raw, size_blocks };
            if v.read(&f, off, &mut buf[..n])? {
                cell.next_read_lblk.store(end, Ordering::Relaxed);
                return Ok(n);
            }
        }
        self.read_mapped(cell, &st.raw, off, &mut buf[..n])?;
        cell.next_read_lblk.store(end, Ordering::Relaxed);
        Ok(n)
    }

    /// Copies the file's bytes at `off` into `buf` (all inside its size) through its
    /// mapping, zeros for holes, under the file's lock the caller holds. Each run's
    /// successor is translated before the run is copied and its first lines prefetched
    /// ([`NEXT_RUN_PREFETCH_LINES`]), so that their misses overlap the copy.
    pub(super) fn read_mapped(&self, cell: &InodeCell, raw: &InodeRaw, off: u64, buf: &mut [u8]) -> Result<()> {
        let n = buf.len();
        let size_blocks = blocks_for(raw.size);
        let end = Lblk((off + n as u64).div_ceil(BLOCK_BYTES));
        let mut done = 0usize;
        let mut run = self.translate_range(cell, raw, Lblk::of_byte(off), end, size_blocks)?;
        while done < n {
            let pos = off + done as u64;
            let in_blk = pos % BLOCK_BYTES;
            let blocks = run.map_or(1, |e| e.len);
            let len = ((blocks * BLOCK_BYTES - in_blk) as usize).min(n - done);
            let next = match done + len < n {
                true => self.translate_range(cell, raw, Lblk::of_byte(pos + len as u64), end, size_blocks)?,
                false => None,
            };
            if let Some(e) = next {
                self.dev.prefetch_lines(self.geo.block_off(e.pblk), NEXT_RUN_PREFETCH_LINES);
            }
            match run {
                Some(e) => self.dev.read(self.geo.block_off(e.pblk) + in_blk, &mut buf[done..done + len]),
                None => buf[done..done + len].fill(0),
            }
            done += len;
            run = next;
        }
        Ok(())
    }

    pub(crate) fn write_at(&self, cell: &InodeCell, off: u64, data: &[u8]) -> Result<usize> {
        if self.is_strict() {
            return self.write_strict(cell, Some(off), data).map(|(n, _)| n);
        }
        self.regions_upkeep(cell, Some(off), data.len() as u64);
        let mut st = cell.state.write();
        let req = self.alloc_request(cell);
        let span = off..off.saturating_add(data.len() as u64);
        let n = self.write_locked(cell, &mut st, off, data, span.clone());
        drop((req, st));
        self.refresh_views(cell, span);
        n
    }

    /// A request (write, fallocate) that may claim blocks over several transactions: the
    /// aligned allocator's reservation for it is given back when this is dropped.
    pub(crate) fn alloc_request<'a>(&'a self, cell: &'a InodeCell) -> AllocRequest<'a, D> {
        AllocRequest { fs: self, ino: cell.ino }
    }

    /// Appends at the current end of file; returns the bytes written and the new end.
    pub(crate) fn append(&self, cell: &InodeCell, data: &[u8]) -> Result<(usize, u64)> {
        if self.is_strict() {
            return self.write_strict(cell, None, data);
        }
        self.regions_upkeep(cell, None, data.len() as u64);
        let mut st = cell.state.write();
        let req = self.alloc_request(cell);
        let off = st.raw.size;
        let n = self.write_locked(cell, &mut st, off, data, off..off + data.len() as u64)?;
        drop((req, st));
        self.refresh_views(cell, off..off + n as u64);
        Ok((n, off + n as u64))
    }

    /// Writes `data` at `off` in transactions of a bounded number of blocks; `span` is the
    /// whole request (bytes) this write is part of, which tells the allocator which of the
    /// file's 2 MiB will be written whole.
    pub(super) fn write_locked(
        &self,
        cell: &InodeCell,
        st: &mut InodeMem,
        off: u64,
        data: &[u8],
        span: Range<u64>,
    ) -> Result<usize> {
        if st.freed {
            return Err(Error::NotFound);
        }
        if st.raw.is_dir() {
            return Err(Error::IsDir);
        }
        if data.is_empty() {
            return Ok(0);
        }
        let end = off.checked_add(data.len() as u64).ok_or(Error::FileTooBig)?;
        if end > MAX_FILE_BYTES {
            return Err(Error::FileTooBig);
        }
        let span = self.claim_span(span, st.raw.size);
        let mut done = 0usize;
        let mut chunk = self.write_chunk_blocks();
        while done < data.len() {
            let pos = off + done as u64;
            let chunk_end_pos = ((pos / BLOCK_BYTES + chunk) * BLOCK_BYTES).min(end);
            let len = (chunk_end_pos - pos) as usize;
            match self.write_chunk(cell, st, pos, &data[done..done + len], &span) {
                Ok(()) => done += len,
                // A structure change larger than one journal: retry in smaller pieces.
                Err(Error::JournalFull(_)) if chunk > 1 => chunk = (chunk / 4).max(1),
                Err(Error::NoSpace) if done > 0 => return Ok(done),
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// Blocks one write transaction maps: WRITE_CHUNK_BLOCKS for HashFS (one unlogged
    /// word each); for the other structures, sized so that their undo records fit the
    /// journal.
    fn write_chunk_blocks(&self) -> u64 {
        on_map!(self, m => m.write_chunk_blocks(&self.geo))
    }

    /// New blocks for logical blocks `lblks` of `ino` (sorted), not yet reachable: HashFS
    /// reserves their slots; the others take blocks from the allocator, contiguous with
    /// `hint` (the block before) when the layout allows.
    ///
    /// `blocks`: the inode's block count now, None for an inode free on the media (a
    /// shared mount names the claimed blocks for a takeover: `fs/shared/takeover.rs`).
    pub(crate) fn claim_blocks(
        &self,
        ino: Ino,
        lblks: &[Lblk],
        hint: Option<Pblk>,
        blocks: Option<u64>,
    ) -> Result<Vec<Pblk>> {
        self.claim_blocks_for(ino, lblks, hint, Lblk(0)..Lblk(0), blocks)
    }

    /// [`claim_blocks`](Self::claim_blocks) for part of a request that writes the whole
    /// blocks `whole` of the file: the aligned allocator gives each 2 MiB of the file that
    /// lies inside `whole` an aligned extent, even when one transaction claims only part
    /// of it (the next continues after it).
    pub(crate) fn claim_blocks_for(
        &self,
        ino: Ino,
        lblks: &[Lblk],
        hint: Option<Pblk>,
        whole: Range<Lblk>,
        blocks: Option<u64>,
    ) -> Result<Vec<Pblk>> {
        let _span = probe::map();
        self.scope_claims(ino, lblks, blocks);
        on_map!(self, m => m.claim_blocks(self, ino, lblks, hint, whole))
    }

    /// Gives back claimed blocks whose transaction did not commit.
    pub(crate) fn unclaim_blocks(&self, blocks: &[Pblk]) {
        on_map!(self, m => m.unclaim_blocks(self, blocks))
    }

    /// Adds to `tx` what maps claimed blocks: for each file, `pairs` of (logical,
    /// physical) sorted by logical block; its `raw` is the inode the transaction writes
    /// afterwards. All groups share one structure change (one staged overlay).
    pub(crate) fn tx_map_blocks<'a>(&'a self, tx: &mut Tx<'a, D>, groups: &mut [MapGroup<'_>]) -> Result<()> {
        let _span = probe::map();
        on_map!(self, m => m.tx_map(tx, groups))
    }

    /// One write inside a file's chunk limit: find or claim every block, write the data,
    /// then persist size, block count and new mappings in one transaction (or, for an
    /// overwrite inside the size, only the times).
    fn write_chunk(&self, cell: &InodeCell, st: &mut InodeMem, off: u64, data: &[u8], span: &Range<u64>) -> Result<()> {
        let old_size = st.raw.size;
        if off < old_size {
            // Bytes a tagged size covers may change in place.
            self.untag_for(cell, st, off..off + data.len() as u64);
        }
        let new_size = old_size.max(off + data.len() as u64);
        if new_size > old_size {
            // Bytes past the durable size (its tail zeroed, an append's) before the size.
            self.scope_inode(cell.ino);
        }
        if let (true, Some(v)) = (new_size == old_size, self.map.ctfs_view()) {
            // ctFS: an overwrite of mapped blocks is one copy into the file's virtual range.
            let size_blocks = blocks_for(old_size);
            let f = FileRef { m: &Direct(&*self.dev), geo: &self.geo, ino: cell.ino, raw: &st.raw, size_blocks };
            if v.write_in_place(&f, off, data)? {
                self.dev.fence();
                self.set_write_times(cell.ino, st);
                return Ok(());
            }
        }
        let plan = self.plan_write(cell, &st.raw, off, data.len() as u64, span)?;
        let fresh = || plan.iter().filter(|p| p.fresh).map(|p| p.pblk).collect::<Vec<Pblk>>();
        if new_size > old_size {
            if let Err(e) = self.zero_tail_before_growth(cell, &st.raw, off) {
                self.unclaim_blocks(&fresh());
                return Err(e);
            }
        }
        self.write_planned(&plan, off, data);
        if new_size == old_size && plan.iter().all(|p| !p.fresh) {
            self.dev.fence();
            self.note_data(cell.ino); // no transaction names the inode: a watcher is told
            self.set_write_times(cell.ino, st);
            return Ok(());
        }
        if self.can_append_fast(cell, st, &plan) {
            // One fence for a small append at the end of a HashFS file that no mapping
            // can write into (`fs/hashfs/append_tag.rs`).
            let tail = (off == old_size
                && !data.is_empty()
                && data.len() as u64 <= TAG_MAX_LEN
                && on_map!(self, m => m.one_fence_appends())
                && !self.mapped_by_a_writer(cell))
            .then_some(data);
            self.append_fast(cell, st, &plan, new_size, tail);
            return Ok(());
        }
        if let Err(e) = self.commit_write(cell, st, &plan, new_size) {
            self.unclaim_blocks(&fresh());
            return Err(e);
        }
        Ok(())
    }

    /// The blocks under bytes [off, off + len): mapped ones found, holes and blocks past the
    /// end claimed (near the previous block), all before any data is touched, so that
    /// running out of space changes nothing.
    fn plan_write(&self, cell: &InodeCell, raw: &InodeRaw, off: u64, len: u64, span: &Range<u64>) -> Result<Plan> {
        let old_blocks = blocks_for(raw.size);
        let first = Lblk::of_byte(off);
        let end = Lblk::of_byte(off + len - 1) + 1;
        let mut plan = Plan::with_capacity((end - first) as usize);
        let mut holes: SmallVec<[usize; PLAN_INLINE]> = SmallVec::new();
        let mut lblk = first;
        while lblk < end {
            let existing = match lblk.0 < old_blocks {
                // The request's mapped blocks looked up together (HashFS: 8 in one vector
                // hash, their slots fetched at once, and a run of consecutive slots followed).
                true => self.translate_range(cell, raw, lblk, end.min(Lblk(old_blocks)), old_blocks)?,
                false => None,
            };
            match existing {
                Some(e) => {
                    let n = e.len.min(end - lblk);
                    plan.extend((0..n).map(|i| Planned { lblk: lblk + i, pblk: e.pblk + i, fresh: false }));
                    lblk += n;
                }
                None => {
                    holes.push(plan.len());
                    plan.push(Planned { lblk, pblk: Pblk(0), fresh: true });
                    lblk += 1;
                }
            }
        }
        if holes.is_empty() {
            return Ok(plan);
        }
        let lblks: SmallVec<[Lblk; PLAN_INLINE]> = holes.iter().map(|&i| plan[i].lblk).collect();
        let before = holes[0].checked_sub(1).map(|i| plan[i].pblk);
        let hint = on_map!(self, m => m.hint_for(self, cell, raw, lblks[0], before))?;
        let got = self.claim_blocks_for(cell.ino, &lblks, hint, whole_blocks(span), Some(raw.blocks))?;
        for (&i, p) in holes.iter().zip(got) {
            plan[i].pblk = p;
        }
        Ok(plan)
    }

    /// Writes `data` (at file offset `off`) into the planned blocks with streaming stores;
    /// a fresh block gets zeros around the data.
    pub(super) fn write_planned(&self, plan: &[Planned], off: u64, data: &[u8]) {
        let mut block_buf = Vec::new();
        for p in plan {
            let blk_start = p.lblk.0 * BLOCK_BYTES;
            let a = off.max(blk_start) - blk_start;
            let b = (off + data.len() as u64).min(blk_start + BLOCK_BYTES) - blk_start;
            let src = &data[(blk_start + a - off) as usize..(blk_start + b - off) as usize];
            let dst = self.geo.block_off(p.pblk);
            if p.fresh && (a != 0 || b != BLOCK_BYTES) {
                block_buf.clear();
                block_buf.resize(BLOCK_BYTES as usize, 0);
                block_buf[a as usize..b as usize].copy_from_slice(src);
                self.dev.write_nt(dst, &block_buf);
            } else {
                self.dev.write_nt(dst + a, src);
            }
        }
    }

    /// One transaction: the fresh blocks mapped, the new size, block count and times.
    fn commit_write(&self, cell: &InodeCell, st: &mut InodeMem, plan: &[Planned], new_size: u64) -> Result<()> {
        let ino = cell.ino;
        let old_blocks = blocks_for(st.raw.size);
        let now = inode::now_ns();
        let mut raw = st.raw;
        let pairs: Vec<(Lblk, Pblk)> = plan.iter().filter(|p| p.fresh).map(|p| (p.lblk, p.pblk)).collect();
        raw.size = new_size;
        raw.blocks += pairs.len() as u64;
        raw.mtime_ns = now;
        raw.ctime_ns = now;
        let mut tx = self.journals.begin();
        self.tx_map_blocks(
            &mut tx,
            &mut [MapGroup { ino, raw: &mut raw, pairs: &pairs, logged_below: Lblk(old_blocks) }],
        )?;
        inode::tx_write_inode(&mut tx, &self.geo, ino, &mut raw);
        {
            let _span = probe::commit();
            tx.commit()?;
        }
        st.raw = raw;
        on_map!(self, m => m.mapped(cell, &pairs));
        Ok(())
    }

    /// Sets the size of a regular file (truncate up or down).
    pub(crate) fn set_len_locked(&self, cell: &InodeCell, st: &mut InodeMem, new_size: u64) -> Result<()> {
        if new_size > MAX_FILE_BYTES {
            return Err(Error::FileTooBig);
        }
        if st.raw.is_dir() {
            return Err(Error::IsDir);
        }
        let old_size = st.raw.size;
        if new_size < old_size && self.mapped_anywhere(cell) {
            // A mapping, in this process or another, would be left on freed blocks (Linux
            // would raise SIGBUS in it past the new end).
            return Err(Error::Busy);
        }
        self.scope_inode(cell.ino); // a tail zeroed past the size, in either direction
        let now = inode::now_ns();
        let mut raw = st.raw;
        raw.size = new_size;
        raw.mtime_ns = now;
        raw.ctime_ns = now;
        let (from, to) = (end_lblk(new_size), end_lblk(old_size));
        let victims = if new_size < old_size {
            let victims = on_map!(self, m => m.release_plan(cell, from, to));
            self.scope_range(cell.ino, from, to, victims.len() as u64, Some(st.raw.blocks));
            victims
        } else {
            if new_size > old_size {
                self.zero_tail_before_growth(cell, &st.raw, u64::MAX)?;
            }
            Vec::new()
        };
        raw.blocks = raw.blocks.saturating_sub(victims.len() as u64);
        let mut tx = self.journals.begin();
        inode::tx_write_inode(&mut tx, &self.geo, cell.ino, &mut raw);
        tx.commit()?;
        st.raw = raw;
        // The smaller size is durable; the blocks past it are now unreachable (F1 lets
        // recovery free them if we crash before this finishes), and the rest of the new
        // last block still holds the file's old bytes, which a mapping of it would show
        // (F2; recovery zeroes them if we crash first).
        cell.tcache.invalidate_from(end_lblk(new_size));
        if new_size < old_size && self.zero_tail_past_eof(cell, &st.raw)? {
            self.dev.fence();
        }
        if new_size < old_size {
            on_map!(self, m => m.release_blocks_after_commit(self, cell, st, &victims, from, to))?;
        }
        Ok(())
    }

    /// Frees an inode with no links and no open handles: its blocks, then the inode.
    pub(crate) fn free_inode_locked(&self, cell: &InodeCell, st: &mut InodeMem) -> Result<()> {
        debug_assert_eq!(st.raw.nlink, 0);
        cell.tcache.invalidate_all();
        let nblocks = blocks_for(st.raw.size).max(1);
        if !st.raw.is_special() {
            // A special file maps no blocks.
            let (from, to) = (Lblk(0), Lblk(nblocks));
            on_map!(self, m => {
                let planned = m.release_plan(cell, from, to);
                self.scope_range(cell.ino, from, to, planned.len() as u64, Some(st.raw.blocks));
                m.release_blocks(self, cell, st, &planned, from, to)
            })?;
        }
        // The attributes go with the file: their inode gets nlink 0 in the same
        // transaction (recovery frees it if a crash comes first), then is freed.
        let xattrs = match st.raw.xattr_ino {
            0 => None,
            x => Some(self.cell(Ino(x))?),
        };
        let mut tx = self.journals.begin();
        inode::tx_free_inode(&mut tx, &self.geo, cell.ino);
        let mut xraw = xattrs.as_ref().map(|c| {
            let mut r = c.state.read().raw;
            r.nlink = 0;
            r
        });
        if let (Some(c), Some(r)) = (&xattrs, xraw.as_mut()) {
            inode::tx_write_inode(&mut tx, &self.geo, c.ino, r);
        }
        tx.commit()?;
        self.forget_freed(cell, st);
        if let (Some(c), Some(r)) = (xattrs, xraw) {
            let mut xst = c.state.write();
            xst.raw = r;
            self.free_inode_locked(&c, &mut xst)?;
        }
        Ok(())
    }

    /// Once the transaction that freed the inode committed: what DRAM keeps of it goes, and
    /// its number is given back.
    pub(crate) fn forget_freed(&self, cell: &InodeCell, st: &mut InodeMem) {
        st.freed = true;
        st.dir = None;
        self.persist_times(cell, st); // only forgets them
        self.untag(cell, st); // the same
        self.inodes.remove(cell.ino);
        self.free_ino(cell.ino);
    }

    /// Flushes nothing (every write is durable on return) but makes the image durable on
    /// a host that is not persistent memory.
    pub(crate) fn sync_data(&self) -> Result<()> {
        self.dev.sync_host()?;
        Ok(())
    }
}

/// The whole blocks of a request's byte range: the 2 MiB of a file the aligned allocator
/// gives an aligned extent must lie inside them.
pub(crate) fn whole_blocks(span: &Range<u64>) -> Range<Lblk> {
    Lblk(span.start.div_ceil(BLOCK_BYTES))..Lblk(span.end / BLOCK_BYTES)
}

/// (logical, physical) pairs sorted by logical block, as extents contiguous on both sides.
pub(crate) fn extents_of(pairs: &[(Lblk, Pblk)]) -> impl Iterator<Item = Extent> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let &(l0, p0) = pairs.get(i)?;
        let mut j = i + 1;
        while j < pairs.len() && pairs[j] == (l0 + (j - i) as u64, p0 + (j - i) as u64) {
            j += 1;
        }
        let x = Extent { lblk: l0, pblk: p0, len: (j - i) as u64 };
        i = j;
        Some(x)
    })
}
