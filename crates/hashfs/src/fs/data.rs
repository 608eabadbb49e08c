//! File data: read, write and truncate over every mapping (the HashFS table, or a per-file
//! or global structure with the block allocator); fallocate is in `fs/fallocate.rs`.
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

use super::append_tag::TAG_MAX_LEN;
use super::inode::{self, InodeCell, InodeMem};
use super::FsInner;
use crate::alloc::Run;
use crate::journal::Tx;
use crate::layout::{Extent, Ino, InodeRaw, Lblk, MappingKind, Pblk};
use crate::layout::{BLOCK_BYTES, MAX_FILE_BYTES};
use crate::mapping::ctfs::view::FileRef;
use crate::mapping::hashfs::{classify, file_key, Entry, HashTable, GROUP_SLOTS};
use crate::mapping::staged::Direct;
use crate::mapping::{BlockMap, FileMap};
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

/// Whether logical block `l` lies in a whole 2 MiB chunk of the file that `whole` covers
/// (one the grouped placements give a group).
fn in_whole_chunk(l: Lblk, whole: &Range<Lblk>) -> bool {
    let chunk = l.0 / GROUP_SLOTS;
    let (lo, hi) = (Lblk(chunk * GROUP_SLOTS), Lblk((chunk + 1) * GROUP_SLOTS));
    whole.start <= lo && hi <= whole.end && hi.0 <= 1 << 32
}

pub(crate) fn blocks_for(size: u64) -> u64 {
    size.div_ceil(BLOCK_BYTES)
}

/// The first logical block past a file of `size` bytes.
fn end_lblk(size: u64) -> Lblk {
    Lblk(blocks_for(size))
}

/// Blocks a plan holds without a heap allocation (a 4 KiB write needs one or two).
const PLAN_INLINE: usize = 4;

/// A write's blocks in order.
type Plan = SmallVec<[Planned; PLAN_INLINE]>;

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
        match &self.fs.map {
            FileMap::Blocks(b) => b.alloc.end_request(self.ino.get()),
            FileMap::Hash(t) => {
                if let Some(g) = t.groups() {
                    g.end_request(t, self.ino);
                }
            }
        }
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
    fn translate_range(
        &self,
        cell: &InodeCell,
        raw: &InodeRaw,
        lblk: Lblk,
        end: Lblk,
        size_blocks: u64,
    ) -> Result<Option<Extent>> {
        let _span = probe::translate();
        match &self.map {
            FileMap::Hash(t) => Ok(translate_hash(t, cell, lblk, end, size_blocks)),
            FileMap::Blocks(b) => {
                let tc = b.uses_tcache();
                if tc {
                    if let Some(p) = cell.tcache.get(lblk) {
                        return Ok(Some(Extent { lblk, pblk: p, len: 1 }));
                    }
                }
                let r = b.lookup(cell.ino, raw, &cell.cursor, lblk)?;
                if let (true, Some(e)) = (tc, r) {
                    // Ranged entries fill the translation cache with the blocks that follow.
                    for i in 0..e.len.min(crate::mapping::tcache::TCACHE_ENTRIES as u64) {
                        cell.tcache.put(lblk + i, e.pblk + i);
                    }
                }
                Ok(r)
            }
        }
    }

    /// ctFS's live translation, on an image that has one.
    #[inline]
    fn ctfs_view(&self) -> Option<&crate::mapping::ctfs::view::View> {
        match &self.map {
            FileMap::Blocks(b) => b.ctfs_view(),
            FileMap::Hash(_) => None,
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
        if let Some(v) = self.ctfs_view() {
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
    /// mapping, zeros for holes, under the file's lock the caller holds.
    pub(super) fn read_mapped(&self, cell: &InodeCell, raw: &InodeRaw, off: u64, buf: &mut [u8]) -> Result<()> {
        let n = buf.len();
        let size_blocks = blocks_for(raw.size);
        let end = (off + n as u64).div_ceil(BLOCK_BYTES);
        let mut done = 0usize;
        while done < n {
            let pos = off + done as u64;
            let lblk = Lblk::of_byte(pos);
            let in_blk = pos % BLOCK_BYTES;
            match self.translate_range(cell, raw, lblk, Lblk(end), size_blocks)? {
                Some(e) => {
                    let len = ((e.len * BLOCK_BYTES - in_blk) as usize).min(n - done);
                    self.dev.read(self.geo.block_off(e.pblk.0) + in_blk, &mut buf[done..done + len]);
                    done += len;
                }
                None => {
                    let len = ((BLOCK_BYTES - in_blk) as usize).min(n - done);
                    buf[done..done + len].fill(0);
                    done += len;
                }
            }
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

    /// Before a read of at most one block at `off` under HashFS's paper placement: fetches
    /// the line of its key's home slot and the line of the block there that the read starts
    /// in (where a block most likely is, the slot index being the block), so that the
    /// table's miss and the block's (its page walk included) overlap, and both overlap the
    /// lock, instead of following one another once the lookup has found the block. Not for
    /// writes: the block's line would have to be evicted again by the streaming stores
    /// (a 4 KiB overwrite took 10% longer), and the slot's line alone changed nothing
    /// measurable (`bench/results/micro/read-prefetch-ab/`).
    #[inline]
    fn prefetch_home(&self, cell: &InodeCell, off: u64, len: usize) {
        let FileMap::Hash(t) = &self.map else { return };
        if len == 0 || len as u64 > BLOCK_BYTES || t.groups().is_some() {
            return;
        }
        if let Some(k) = file_key(cell.ino, Lblk::of_byte(off)) {
            self.prefetch_key_home(t, k, off % BLOCK_BYTES);
        }
    }

    /// Fetches the line of `key`'s home slot and the line `at` bytes into the block of that
    /// slot (the block a key's data most likely has under the paper placement).
    #[inline]
    pub(super) fn prefetch_key_home(&self, t: &HashTable<D>, key: u64, at: u64) {
        let home = t.home(key);
        self.dev.prefetch(t.slot_off(home));
        self.dev.prefetch(self.geo.block_off(home) + at);
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

    /// The bytes of a request over `span` (of a file of `size` bytes) whose whole 2 MiB
    /// chunks may claim groups (HashFS's grouped and regions placements; the other
    /// mappings' allocators get `span` itself). A large file grown in pieces smaller than
    /// a chunk (`cp` writes 128 KiB, many programs 1 MiB) would get no group: a write of at
    /// least [`GROWTH_CLAIM_BYTES`] that starts a chunk other than the first, at or past
    /// the end of file, claims the chunk, and the file's next writes fill its group. A
    /// file that stops short leaves the rest of that group unused, as a large file's last
    /// extent does under an aligned allocator; a file's first chunk never claims this way.
    pub(crate) fn claim_span(&self, span: Range<u64>, size: u64) -> Range<u64> {
        const CHUNK: u64 = GROUP_SLOTS * BLOCK_BYTES;
        let FileMap::Hash(t) = &self.map else { return span };
        let grows = span.start.is_multiple_of(CHUNK) && span.start >= CHUNK.max(size);
        match span.end.checked_next_multiple_of(CHUNK) {
            Some(end) if t.groups().is_some() && grows && span.end - span.start >= GROWTH_CLAIM_BYTES => {
                span.start..end
            }
            _ => span,
        }
    }

    /// Blocks one write transaction maps: WRITE_CHUNK_BLOCKS for HashFS (one unlogged
    /// word each); for the other structures, sized so that their undo records fit the
    /// journal.
    fn write_chunk_blocks(&self) -> u64 {
        match self.map {
            FileMap::Hash(_) => WRITE_CHUNK_BLOCKS,
            FileMap::Blocks(_) => (self.geo.journal_entries() / 10).clamp(1, WRITE_CHUNK_BLOCKS),
        }
    }

    /// New blocks for logical blocks `lblks` of `ino` (sorted), not yet reachable: HashFS
    /// reserves their slots; the others take blocks from the allocator, contiguous with
    /// `hint` (the block before) when the layout allows.
    pub(crate) fn claim_blocks(&self, ino: Ino, lblks: &[Lblk], hint: Option<Pblk>) -> Result<Vec<Pblk>> {
        self.claim_blocks_for(ino, lblks, hint, Lblk(0)..Lblk(0))
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
    ) -> Result<Vec<Pblk>> {
        let _span = probe::map();
        match &self.map {
            FileMap::Hash(t) => {
                let mut out = Vec::with_capacity(lblks.len());
                let mut upkept = t.regions().is_none();
                for (i, &l) in lblks.iter().enumerate() {
                    if let Some(s) = t.groups().and_then(|g| self.claim_grouped(t, g, ino, l, &whole)) {
                        out.push(Pblk(s));
                        continue;
                    }
                    if !upkept {
                        // The regions placement: room for this request's small keys (those
                        // outside the whole chunks it writes) before the first of them.
                        let small = lblks[i..].iter().filter(|l| !in_whole_chunk(**l, &whole)).count();
                        self.regions_upkeep_for(small.max(1) as u64, false);
                        upkept = true;
                    }
                    let key = file_key(ino, l).ok_or(Error::FileTooBig);
                    let got = match key.and_then(|k| t.reserve(k)) {
                        Err(Error::NoSpace) if t.regions().is_some() => {
                            // Its chain is full: more groups, even if another request is
                            // opening some, then once more.
                            self.regions_upkeep_for((lblks.len() - i) as u64, true);
                            file_key(ino, l).ok_or(Error::FileTooBig).and_then(|k| t.reserve(k))
                        }
                        got => got,
                    };
                    match got {
                        Ok(s) => out.push(s),
                        Err(e) => {
                            free_slots(t, &*self.dev, &out);
                            return Err(e);
                        }
                    }
                }
                Ok(out)
            }
            FileMap::Blocks(b) => {
                let runs = b.claim(ino, lblks, hint, whole)?;
                Ok(runs.iter().flat_map(Run::blocks).collect())
            }
        }
    }

    /// Grouped placement: the slot of block `l` of `ino` in its chunk's group, claiming a
    /// group (a free one, else one emptied by moving other files' blocks out) when the
    /// request writes the whole chunk (`whole`) and the chunk has none yet.
    fn claim_grouped(
        &self,
        t: &HashTable<D>,
        g: &crate::mapping::hashfs::groups::Groups<D>,
        ino: Ino,
        l: Lblk,
        whole: &Range<Lblk>,
    ) -> Option<u64> {
        if let Some(s) = g.take(t, ino, l) {
            return Some(s);
        }
        let chunk = l.0 / GROUP_SLOTS;
        if in_whole_chunk(l, whole) && g.group_for(ino.0, chunk).is_none() {
            // The regions placement keeps free groups whole: none is emptied by moves.
            if g.claim(t, ino, chunk).is_none() {
                if g.regions.is_some() {
                    return None;
                }
                self.claim_by_evacuation(t, g, ino, chunk)?;
            }
            return g.take(t, ino, l);
        }
        None
    }

    /// Gives back claimed blocks whose transaction did not commit.
    pub(crate) fn unclaim_blocks(&self, blocks: &[Pblk]) {
        match &self.map {
            FileMap::Hash(t) => free_slots(t, &*self.dev, blocks),
            FileMap::Blocks(b) => b.unclaim(&blocks.iter().map(|&p| Run::one(p)).collect::<Vec<_>>()),
        }
    }

    /// Adds to `tx` what maps claimed blocks: for each file, `pairs` of (logical,
    /// physical) sorted by logical block; its `raw` is the inode the transaction writes
    /// afterwards. All groups share one structure change (one staged overlay).
    pub(crate) fn tx_map_blocks<'a>(&'a self, tx: &mut Tx<'a, D>, groups: &mut [MapGroup<'_>]) -> Result<()> {
        let _span = probe::map();
        match &self.map {
            FileMap::Hash(t) => {
                for g in groups.iter() {
                    for &(l, s) in g.pairs {
                        let k = file_key(g.ino, l).ok_or(Error::FileTooBig)?;
                        if l < g.logged_below {
                            tx.write_u64(t.slot_off(s.0), k);
                        } else {
                            tx.publish_u64(t.slot_off(s.0), k);
                        }
                    }
                }
                Ok(())
            }
            FileMap::Blocks(b) => {
                let mut mt = b.begin();
                for g in groups.iter_mut() {
                    for x in extents_of(g.pairs) {
                        if let Err(e) = mt.insert(tx, g.ino, g.raw, x) {
                            mt.abort();
                            return Err(e);
                        }
                    }
                }
                mt.finish_with(tx);
                Ok(())
            }
        }
    }

    /// One write inside a file's chunk limit: find or claim every block, write the data,
    /// then persist size, block count and new mappings in one transaction (or, for an
    /// overwrite inside the size, only the times).
    fn write_chunk(&self, cell: &InodeCell, st: &mut InodeMem, off: u64, data: &[u8], span: &Range<u64>) -> Result<()> {
        let old_size = st.raw.size;
        if off < old_size {
            self.untag(cell, st); // bytes a tagged size covers may change in place
        }
        let new_size = old_size.max(off + data.len() as u64);
        if let (true, Some(v)) = (new_size == old_size, self.ctfs_view()) {
            // ctFS: an overwrite of mapped blocks is one copy into the file's virtual range.
            let size_blocks = blocks_for(old_size);
            let f = FileRef { m: &Direct(&*self.dev), geo: &self.geo, ino: cell.ino, raw: &st.raw, size_blocks };
            if v.write_in_place(&f, off, data)? {
                self.dev.fence();
                self.set_write_times(st);
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
            self.set_write_times(st);
            return Ok(());
        }
        if self.can_append_fast(cell, st, &plan) {
            // One fence for a small append at the end of a HashFS file that no mapping
            // can write into (`fs/append_tag.rs`).
            let tail = (off == old_size
                && !data.is_empty()
                && data.len() as u64 <= TAG_MAX_LEN
                && matches!(self.map, FileMap::Hash(_))
                && cell.map_count.load(Ordering::Acquire) == 0)
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
            let existing = if lblk.0 < old_blocks { self.translate(cell, raw, lblk, old_blocks)? } else { None };
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
        let hint = match self.map {
            FileMap::Hash(_) => None, // a block's slot is its key's: no placement hint
            FileMap::Blocks(_) => {
                let before = holes[0].checked_sub(1).map(|i| plan[i].pblk);
                self.claim_hint(cell, raw, lblks[0], before)?
            }
        };
        let got = self.claim_blocks_for(cell.ino, &lblks, hint, whole_blocks(span))?;
        for (&i, p) in holes.iter().zip(got) {
            plan[i].pblk = p;
        }
        Ok(plan)
    }

    /// Where new blocks for logical block `first` should go: after the block before it,
    /// `before` when the request placed that one, else the file's (if inside its size).
    pub(crate) fn claim_hint(
        &self,
        cell: &InodeCell,
        raw: &InodeRaw,
        first: Lblk,
        before: Option<Pblk>,
    ) -> Result<Option<Pblk>> {
        let size_blocks = blocks_for(raw.size);
        Ok(match before {
            Some(p) => Some(p + 1),
            None if first.0 > 0 && first.0 <= size_blocks => {
                self.translate(cell, raw, Lblk(first.0 - 1), size_blocks)?.map(|e| e.pblk + 1)
            }
            None => None,
        })
    }

    /// Writes `data` (at file offset `off`) into the planned blocks with streaming stores;
    /// a fresh block gets zeros around the data.
    fn write_planned(&self, plan: &[Planned], off: u64, data: &[u8]) {
        let mut block_buf = Vec::new();
        for p in plan {
            let blk_start = p.lblk.0 * BLOCK_BYTES;
            let a = off.max(blk_start) - blk_start;
            let b = (off + data.len() as u64).min(blk_start + BLOCK_BYTES) - blk_start;
            let src = &data[(blk_start + a - off) as usize..(blk_start + b - off) as usize];
            let dst = self.geo.block_off(p.pblk.0);
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
        if let FileMap::Hash(_) = self.map {
            for &(lblk, slot) in &pairs {
                cell.tcache.put(lblk, slot);
            }
        }
        Ok(())
    }

    /// Unmaps logical blocks [from, to) of a file of an allocator mapping, from the end,
    /// in transactions that each fit the journal and each commit the inode (block count,
    /// tree root) with the structure and bitmap changes.
    pub(crate) fn unmap_blocks(
        &self,
        b: &BlockMap<D>,
        cell: &InodeCell,
        st: &mut InodeMem,
        from: Lblk,
        to: Lblk,
    ) -> Result<()> {
        self.unmap_blocks_of(b, cell, st, from, to, true)
    }

    /// [`unmap_blocks`](Self::unmap_blocks); `write_inode` false for the entries a global
    /// table still holds for a free inode (recovery), whose inode stays zeroed.
    pub(crate) fn unmap_blocks_of(
        &self,
        b: &BlockMap<D>,
        cell: &InodeCell,
        st: &mut InodeMem,
        from: Lblk,
        to: Lblk,
        write_inode: bool,
    ) -> Result<()> {
        cell.tcache.invalidate_from(from);
        cell.cursor.store(0, Ordering::Relaxed);
        // No block lies past EOF (F1): a removal to the end of the file leaves nothing
        // mapped from `from` on once its last step (the lowest range) is done.
        let to_the_end = to >= end_lblk(st.raw.size);
        let budget = self.geo.journal_entries() * 3 / 4;
        let mut hi = b.removal_end(cell.ino, from, to)?;
        // Steps end on multiples of their length: on ctfs, whole 2 MiB (a leaf goes as one
        // entry, never split into pages first).
        let mut step = if b.kind == MappingKind::Ctfs { 512 } else { 64u64 };
        while hi > from {
            let lo = Lblk((hi.0 - 1) / step * step).max(from);
            let mut raw = st.raw;
            let mut tx = self.journals.begin();
            let mut mt = b.begin();
            let freed = match mt.remove(&mut tx, cell.ino, &mut raw, lo, hi, to_the_end && lo == from) {
                Ok(n) => n,
                Err(e) => {
                    mt.abort();
                    return Err(e);
                }
            };
            let entries = tx.undo_entries() + mt.undo_entries() + 4;
            if entries > budget && step > 1 {
                mt.abort();
                drop(tx);
                step = (step / 4).max(1);
                continue;
            }
            // Cheap steps (holes, or runs the structure removes with a few entries: ctFS's
            // 2 MiB leaves, long extents) grow, so that removing a large file takes a few
            // transactions rather than one per 64 blocks.
            if entries < budget / 8 && hi - lo == step {
                step = (step * 4).min(1 << 30);
            }
            raw.blocks = raw.blocks.saturating_sub(freed);
            mt.finish_with(&mut tx);
            if write_inode {
                inode::tx_write_inode(&mut tx, &self.geo, cell.ino, &mut raw);
            }
            tx.commit()?;
            st.raw = raw;
            hi = lo;
        }
        cell.cursor.store(0, Ordering::Relaxed);
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
        if new_size < old_size && cell.map_count.load(Ordering::Acquire) > 0 {
            return Err(Error::Busy); // a mapping would be left on freed blocks
        }
        let now = inode::now_ns();
        let mut raw = st.raw;
        raw.size = new_size;
        raw.mtime_ns = now;
        raw.ctime_ns = now;
        let victims = match &self.map {
            FileMap::Hash(t) if new_size < old_size => {
                mapped_slots(t, cell.ino, end_lblk(new_size), end_lblk(old_size))
            }
            _ => {
                if new_size > old_size {
                    self.zero_tail_before_growth(cell, &st.raw, u64::MAX)?;
                }
                Vec::new()
            }
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
        match &self.map {
            FileMap::Hash(t) => free_slots(t, &*self.dev, &victims),
            FileMap::Blocks(b) if new_size < old_size => {
                self.unmap_blocks(b, cell, st, end_lblk(new_size), end_lblk(old_size))?
            }
            FileMap::Blocks(_) => {}
        }
        Ok(())
    }

    /// Frees an inode with no links and no open handles: its blocks, then the inode.
    pub(crate) fn free_inode_locked(&self, cell: &InodeCell, st: &mut InodeMem) -> Result<()> {
        debug_assert_eq!(st.raw.nlink, 0);
        cell.tcache.invalidate_all();
        let nblocks = blocks_for(st.raw.size).max(1);
        match &self.map {
            _ if st.raw.is_special() => {} // maps no blocks
            FileMap::Hash(t) => {
                let victims = mapped_slots(t, cell.ino, Lblk(0), Lblk(nblocks));
                free_slots(t, &*self.dev, &victims);
            }
            FileMap::Blocks(b) => self.unmap_blocks(b, cell, st, Lblk(0), Lblk(nblocks))?,
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
        st.freed = true;
        st.dir = None;
        self.persist_times(cell, st); // only forgets them
        self.untag(cell, st); // the same
        self.inodes.remove(cell.ino);
        self.ialloc.free(cell.ino);
        if let (Some(c), Some(r)) = (xattrs, xraw) {
            let mut xst = c.state.write();
            xst.raw = r;
            self.free_inode_locked(&c, &mut xst)?;
        }
        Ok(())
    }

    /// Flushes nothing (every write is durable on return) but makes the image durable on
    /// a host that is not persistent memory.
    pub(crate) fn sync_data(&self) -> Result<()> {
        self.dev.sync_host()?;
        Ok(())
    }
}

/// Translation through the HashFS table: translation cache, then the table. A request of
/// several blocks (up to `end`) looks up to 8 of them with one vector hash, and so does a
/// cache miss during sequential access (paper §3.2.2: spare SIMD lanes prefetch following
/// entries); the blocks found are cached. A random single-block access looks up only its
/// block. Returns the slot and how many of the blocks looked up follow it physically.
#[inline]
fn translate_hash<D: PmDevice>(
    t: &HashTable<D>,
    cell: &InodeCell,
    lblk: Lblk,
    end: Lblk,
    size_blocks: u64,
) -> Option<Extent> {
    if let Some(p) = cell.tcache.get(lblk) {
        return Some(Extent { lblk, pblk: p, len: 1 });
    }
    let sequential = cell.next_read_lblk.load(Ordering::Relaxed) == lblk.0;
    let limit = if sequential { Lblk(size_blocks).max(end) } else { end };
    if lblk + 1 < limit {
        let n = (limit - lblk).min(8) as usize;
        let mut keys = [0u64; 8];
        for (i, k) in keys[..n].iter_mut().enumerate() {
            *k = file_key(cell.ino, lblk + i as u64)?;
        }
        let mut out = [None; 8];
        t.lookup_batch(&keys[..n], &mut out[..n]);
        for (i, s) in out[..n].iter().enumerate() {
            if let Some(s) = s {
                cell.tcache.put(lblk + i as u64, *s);
            }
        }
        let first = out[0]?;
        let run = out[..n].iter().zip(0..).take_while(|&(s, i)| *s == Some(first + i)).count();
        return Some(Extent { lblk, pblk: first, len: run as u64 });
    }
    let p = t.lookup(file_key(cell.ino, lblk)?)?;
    cell.tcache.put(lblk, p);
    Some(Extent { lblk, pblk: p, len: 1 })
}

/// The least write that claims the chunk a large file grows into ([`FsInner::claim_span`]).
pub(crate) const GROWTH_CLAIM_BYTES: u64 = 64 << 10;

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

/// Frees HashFS table slots: a fence, tombstones, a fence, then purge. The first fence
/// makes every earlier flush durable before a live key's tombstone can be: an untorn
/// write's key switch may have left the tombstone of the key's older copy flushed but not
/// fenced (`fs/untorn.rs`), and if the live copy's tombstone reached the media first, a
/// crash would bring the older copy's data back.
pub(crate) fn free_slots<D: PmDevice>(t: &HashTable<D>, dev: &D, slots: &[Pblk]) {
    if slots.is_empty() {
        return;
    }
    dev.fence();
    let freed: Vec<_> = slots.iter().map(|&s| t.release(s)).collect();
    dev.fence();
    for chunk in freed.chunks(1024) {
        t.release_done(chunk);
    }
    dev.fence();
}

/// Slots of the mapped blocks of `ino` in [from, to): by lookups when the range is small,
/// else by one scan of the table.
pub(crate) fn mapped_slots<D: PmDevice>(t: &HashTable<D>, ino: Ino, from: Lblk, to: Lblk) -> Vec<Pblk> {
    let mut out = Vec::new();
    if from >= to {
        return out;
    }
    if to - from > (t.nslots() / 64).max(4096) {
        for s in 0..t.nslots() {
            if let Entry::Key { ino: i, lblk } = classify(t.load(s), t.nslots()) {
                if i == ino.0 && (from.0..to.0).contains(&(lblk as u64)) {
                    out.push(Pblk(s));
                }
            }
        }
        return out;
    }
    // Blocks past the largest file have no key (and hold nothing).
    let to = to.min(Lblk(1 << 32));
    let mut lblk = from;
    while lblk < to {
        let n = (to - lblk).min(8) as usize;
        let mut keys = [0u64; 8];
        for (i, k) in keys[..n].iter_mut().enumerate() {
            *k = file_key(ino, lblk + i as u64).expect("below 2^32");
        }
        let mut found = [None; 8];
        t.lookup_batch(&keys[..n], &mut found[..n]);
        out.extend(found[..n].iter().flatten());
        lblk += n as u64;
    }
    out
}
