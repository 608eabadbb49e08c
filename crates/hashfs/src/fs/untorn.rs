//! Untorn writes (WineFS's and SPFS's strict mode; Linux's `RWF_ATOMIC`): a write of up
//! to [`FsInner::untorn_max`] bytes that a crash leaves whole or absent, its size change
//! included, on every mapping.
//!
//! One transaction makes the whole write visible. Each block under the write is one of:
//! - *fresh* (a hole, or past EOF): a new block, filled (zeros around the data) and mapped
//!   by the transaction, as a relaxed write does;
//! - *moved* (copy on write): a new block gets the old contents with the data over them,
//!   and the transaction switches the mapping: HashFS's key goes to the new slot and the
//!   old slot becomes a tombstone (both words logged; slot = block, so the new data lives
//!   in a new slot), the block mappings' structure removes the old block and inserts the
//!   new one; the old block is freed once the transaction committed;
//! - *logged* (in place): the data is a write of the transaction itself, its old bytes in
//!   the undo log (the double write WineFS's strict mode does for aligned extents), for
//!   blocks that must not move: those of a file memory-mapped through the shim (a move
//!   would leave the mapping on the old block) and those of an aligned 2 MiB extent (a
//!   HashFS group, or a block the aligned allocator placed congruent to its logical
//!   offset), which a move would break up. When the journal cannot take an aligned
//!   block's old bytes, it moves after all; a mapped file's write fails with Busy.
//!
//! One exception needs no transaction: on HashFS (the paper's placement), a write inside
//! one mapped block that leaves the size alone switches the block's key with two fences
//! and no undo entries, the nearer of two copies of a key being the live one
//! (`switch_one`'s comment gives the order; recovery frees the farther copy).
//!
//! The new blocks' contents are flushed before the commit, whose first fence orders them
//! before every mapping change; until then they are reservations (HashFS) or DRAM claims
//! (allocator) that a crash leaves unreachable and recovery frees.
//!
//! The limit: the transaction must fit one journal. A moved HashFS block costs two undo
//! entries (its new slot and its old one), so the default journal of 16 blocks (1,023
//! entries) takes 1 MiB (257 blocks when unaligned); a moved block of the block mappings
//! costs its structure's removal and insertion plus two bitmap words, bounded here by
//! [`MOVE_COST_BLOCKMAP`](crate::mapping::MOVE_COST_BLOCKMAP) entries, which gives 256 KiB on the default journal (more with
//! larger journals, `mkfs --journal-blocks`).

#![forbid(unsafe_code)]

use super::ctfs::untorn_pswap::pswap_limits;
use super::data::{blocks_for, whole_blocks};
use super::inode::{self, InodeCell, InodeMem};
use super::verbs::{on_map, MapVerbs};
use super::FsInner;
use crate::layout::inode::{INODE_CTIME_OFF, INODE_MTIME_OFF};
use crate::layout::journal::ENTRY_DATA_BYTES;
use crate::layout::{Geometry, Ino, Lblk, Pblk, BLOCK_BYTES, MAX_FILE_BYTES};
use crate::pm::PmDevice;
use crate::{Error, Result};
use std::sync::atomic::Ordering;

/// The largest untorn write on any image (WineFS and Linux's XFS offer about as much).
pub const UNTORN_MAX_BYTES: u64 = 1 << 20;
/// Undo entries kept for the inode and the runs a write's first and last block add.
const RESERVED_ENTRIES: u64 = 16;

/// The largest untorn write an image of geometry `geo` takes, whatever its alignment: a
/// power of two of blocks, so that `RWF_ATOMIC`'s naturally aligned writes of every size
/// up to it fit (an unaligned strict write of that size spans one block more, which the
/// bound allows). On `ctfs` images, the larger of the copy-on-write path's and pswap's
/// (`fs/ctfs/untorn_pswap.rs`).
pub fn untorn_limit(geo: &Geometry) -> u64 {
    copy_limit(geo).max(pswap_limits(geo).0)
}

/// The largest naturally aligned untorn write (a power of two of bytes at an offset that
/// is a multiple of it: `RWF_ATOMIC`'s kind): on `ctfs` images pswap's, which costs one
/// page-table entry per 2 MiB once aligned; elsewhere [`untorn_limit`].
pub fn untorn_aligned_limit(geo: &Geometry) -> u64 {
    untorn_limit(geo).max(pswap_limits(geo).1)
}

/// The largest untorn write the copy-on-write (and logging) path takes, any alignment.
pub(crate) fn copy_limit(geo: &Geometry) -> u64 {
    let blocks =
        (geo.journal_entries().saturating_sub(RESERVED_ENTRIES) / geo.mapping.untorn_move_cost()).saturating_sub(1);
    if blocks == 0 {
        return 0;
    }
    ((1u64 << blocks.ilog2()) * BLOCK_BYTES).min(UNTORN_MAX_BYTES)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum How {
    Fresh,
    Moved,
    Logged,
}

/// One block under an untorn write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Block {
    pub lblk: Lblk,
    /// Where it is mapped now (None: a hole or past EOF).
    pub old: Option<Pblk>,
    /// The block the write puts it in (fresh and moved).
    pub new: Pblk,
    pub how: How,
}

impl<D: PmDevice> FsInner<D> {
    pub(crate) fn untorn_max(&self) -> u64 {
        untorn_limit(&self.geo)
    }

    pub(crate) fn untorn_aligned_max(&self) -> u64 {
        untorn_aligned_limit(&self.geo)
    }

    fn move_cost(&self) -> u64 {
        self.geo.mapping.untorn_move_cost()
    }

    /// Whether the mount is in strict mode.
    pub(crate) fn is_strict(&self) -> bool {
        self.strict.load(Ordering::Relaxed)
    }

    /// A strict-mode write: untorn pieces of at most [`Self::untorn_max`] bytes (each
    /// piece whole or absent after a crash; on a file memory-mapped through the shim, as
    /// large as the journal can log, down to a block), under one hold of the file's lock.
    /// `off` None appends. Returns the bytes written and the end of the last piece.
    pub(crate) fn write_strict(&self, cell: &InodeCell, off: Option<u64>, data: &[u8]) -> Result<(usize, u64)> {
        let r = self.write_strict_unrefreshed(cell, off, data);
        if let Ok((n, end)) = r {
            self.refresh_views(cell, end - n as u64..end);
        }
        r
    }

    fn write_strict_unrefreshed(&self, cell: &InodeCell, off: Option<u64>, data: &[u8]) -> Result<(usize, u64)> {
        self.regions_upkeep(cell, off, data.len() as u64);
        let mut st = cell.state.write();
        self.untag(cell, &mut st); // `fs/hashfs/append_tag.rs`
        let _req = self.alloc_request(cell);
        let mut max = self.untorn_max().max(BLOCK_BYTES) as usize;
        let mut pos = off.unwrap_or(st.raw.size);
        let mut done = 0;
        while done < data.len() {
            // Pieces end on multiples of the limit, so that aligned writes stay aligned.
            let n = (max - (pos % max as u64) as usize).min(data.len() - done);
            match self.write_untorn_locked(cell, &mut st, pos, &data[done..done + n]) {
                Ok(()) => {}
                Err(Error::NoSpace) if done > 0 => break,
                // A memory-mapped file's blocks are logged in place: smaller pieces, down
                // to a block, until one fits the journal.
                Err(Error::Busy) if max > BLOCK_BYTES as usize => {
                    max /= 2;
                    continue;
                }
                Err(e) => return Err(e),
            }
            done += n;
            pos += n as u64;
        }
        Ok((done, pos))
    }

    /// One untorn write (`File::write_atomic_at`, `RWF_ATOMIC`): all of `data` at `off`
    /// (`None`: at the end of file), or an error and no change.
    pub(crate) fn write_untorn(&self, cell: &InodeCell, off: Option<u64>, data: &[u8]) -> Result<u64> {
        let r = self.write_untorn_unrefreshed(cell, off, data);
        if let Ok(end) = r {
            self.refresh_views(cell, end - data.len() as u64..end);
        }
        r
    }

    fn write_untorn_unrefreshed(&self, cell: &InodeCell, off: Option<u64>, data: &[u8]) -> Result<u64> {
        self.regions_upkeep(cell, off, data.len() as u64);
        let mut st = cell.state.write();
        self.untag(cell, &mut st); // `fs/hashfs/append_tag.rs`
        let _req = self.alloc_request(cell);
        let off = off.unwrap_or(st.raw.size);
        self.write_untorn_locked(cell, &mut st, off, data)?;
        Ok(off + data.len() as u64)
    }

    fn write_untorn_locked(&self, cell: &InodeCell, st: &mut InodeMem, off: u64, data: &[u8]) -> Result<()> {
        if st.freed {
            return Err(Error::NotFound);
        }
        if st.raw.is_dir() {
            return Err(Error::IsDir);
        }
        if data.is_empty() {
            return Ok(());
        }
        let len = data.len() as u64;
        let aligned = len.is_power_of_two() && off.is_multiple_of(len);
        if len > self.untorn_max() && !(aligned && len <= self.untorn_aligned_max()) {
            return Err(Error::Invalid("an untorn write larger than the image's untorn-write limit"));
        }
        let end = off.checked_add(len).filter(|&e| e <= MAX_FILE_BYTES).ok_or(Error::FileTooBig)?;
        if self.untorn_by_pswap(cell, len) {
            return self.write_untorn_by_pswap(cell, st, off, data);
        }
        let mut blocks = self.plan_untorn(cell, st, off, end)?;
        if let (Some(a), Some(z)) = (blocks.first(), blocks.last()) {
            // Named for a takeover (`fs/shared/takeover.rs`) with the keys it holds: a key
            // switch leaves two copies of a key for a moment, and the repair keeps the one
            // nearest its home, as recovery does.
            let mapped = blocks.iter().filter(|b| b.old.is_some()).count() as u64;
            self.scope_range(cell.ino, a.lblk, z.lblk + 1, mapped, Some(st.raw.blocks));
        }
        if let [b] = blocks.as_slice() {
            if let Some(r) = on_map!(self, m => m.switch_one(self, cell, st, b, off, data, end)) {
                return r;
            }
        }
        self.claim_untorn(cell, st, &mut blocks, off..end)?;
        let new: Vec<Pblk> = blocks.iter().filter(|b| b.how != How::Logged).map(|b| b.new).collect();
        let r = self.commit_untorn(cell, st, &blocks, off, data);
        if r.is_err() {
            self.unclaim_blocks(&new);
        }
        r
    }

    /// Fills new block `new` for a moved block: the old block `old`'s contents with `src`
    /// over its bytes from `a` (a whole block: `src` alone), in non-temporal stores, durable
    /// at the next fence. `buf` is scratch.
    pub(in crate::fs) fn fill_moved(&self, new: Pblk, old: Pblk, a: usize, src: &[u8], buf: &mut Vec<u8>) {
        let at = self.geo.block_off(new);
        if a == 0 && src.len() == BLOCK_BYTES as usize {
            return self.dev.write_nt(at, src);
        }
        buf.resize(BLOCK_BYTES as usize, 0);
        self.dev.read(self.geo.block_off(old), buf);
        buf[a..a + src.len()].copy_from_slice(src);
        self.dev.write_nt(at, buf);
    }

    /// Finds every block under [off, end) and chooses how each is written, within the
    /// journal's room.
    fn plan_untorn(&self, cell: &InodeCell, st: &InodeMem, off: u64, end: u64) -> Result<Vec<Block>> {
        let old_blocks = blocks_for(st.raw.size);
        let mut blocks = Vec::new();
        for l in Lblk::of_byte(off).0..Lblk::of_byte(end - 1).0 + 1 {
            let lblk = Lblk(l);
            let old = match lblk.0 < old_blocks {
                true => self.translate(cell, &st.raw, lblk, old_blocks)?.map(|e| e.pblk),
                false => None,
            };
            let how = if old.is_some() { How::Moved } else { How::Fresh };
            blocks.push(Block { lblk, old, new: Pblk(0), how });
        }
        let room = self.geo.journal_entries().saturating_sub(RESERVED_ENTRIES);
        let cost = self.move_cost();
        // A fresh block costs HashFS at most its key's undo entry; a block mapping's
        // insertion is bounded like a move.
        let fresh = on_map!(self, m => m.fresh_cost(cost));
        let mut used: u64 = blocks.iter().map(|b| if b.how == How::Moved { cost } else { fresh }).sum();
        // Asked at the first block that has one to keep or move (on a shared mount, a
        // read-only participant's mapping is a question to the kernel).
        let mut mapped_at_all = None;
        for b in blocks.iter_mut() {
            let Some(p) = b.old else { continue };
            let mapped = *mapped_at_all.get_or_insert_with(|| self.mapped_anywhere(cell));
            if !mapped && !on_map!(self, m => m.keeps_alignment(self, cell.ino, b.lblk, p)) {
                continue;
            }
            let start = b.lblk.0 * BLOCK_BYTES;
            let bytes = end.min(start + BLOCK_BYTES) - off.max(start);
            let logged = bytes.div_ceil(ENTRY_DATA_BYTES as u64);
            if used - cost + logged <= room {
                used = used - cost + logged;
                b.how = How::Logged;
            } else if mapped {
                // A move would leave the shim's mapping on the old block.
                return Err(Error::Busy);
            }
        }
        // The block mappings remove the moved blocks in one range (one removal per
        // structure change): the mapped blocks between two moved ones move too.
        if let (true, Some(a), Some(z)) = (
            on_map!(self, m => m.moves_in_one_range()),
            blocks.iter().position(|b| b.how == How::Moved),
            blocks.iter().rposition(|b| b.how == How::Moved),
        ) {
            for b in &mut blocks[a..z] {
                if b.how == How::Logged {
                    b.how = How::Moved;
                }
            }
        }
        Ok(blocks)
    }

    /// New blocks for the fresh and moved blocks, before anything is written (running out
    /// of space changes nothing).
    fn claim_untorn(
        &self,
        cell: &InodeCell,
        st: &InodeMem,
        blocks: &mut [Block],
        span: std::ops::Range<u64>,
    ) -> Result<()> {
        let idx: Vec<usize> = (0..blocks.len()).filter(|&i| blocks[i].how != How::Logged).collect();
        let Some(&i0) = idx.first() else { return Ok(()) };
        let lblks: Vec<Lblk> = idx.iter().map(|&i| blocks[i].lblk).collect();
        // The block before the first claimed one is logged (it stays where it is) if any.
        let before = i0.checked_sub(1).and_then(|i| blocks[i].old);
        let hint = on_map!(self, m => m.hint_for(self, cell, &st.raw, blocks[i0].lblk, before))?;
        let whole = whole_blocks(&self.claim_span(span, st.raw.size));
        let got = self.claim_blocks_for(cell.ino, &lblks, hint, whole, None)?;
        for (&i, p) in idx.iter().zip(got) {
            blocks[i].new = p;
        }
        Ok(())
    }

    /// Fills the new blocks, then commits one transaction: the mapping changes, the logged
    /// data, the new size, block count and times.
    fn commit_untorn(
        &self,
        cell: &InodeCell,
        st: &mut InodeMem,
        blocks: &[Block],
        off: u64,
        data: &[u8],
    ) -> Result<()> {
        let old_size = st.raw.size;
        let new_size = old_size.max(off + data.len() as u64);
        if new_size > old_size {
            self.zero_tail_before_growth(cell, &st.raw, u64::MAX)?;
        }
        let mut tx = self.journals.begin();
        let mut buf = Vec::new();
        for b in blocks {
            let start = b.lblk.0 * BLOCK_BYTES;
            let (a, z) = (off.max(start) - start, (off + data.len() as u64).min(start + BLOCK_BYTES) - start);
            let src = &data[(start + a - off) as usize..(start + z - off) as usize];
            match (b.how, b.old) {
                (How::Logged, Some(p)) => tx.write(self.geo.block_off(p) + a, src),
                // A whole block: the data alone, from the caller's buffer.
                (_, _) if a == 0 && z == BLOCK_BYTES => self.dev.write_nt(self.geo.block_off(b.new), src),
                (How::Moved, Some(p)) => self.fill_moved(b.new, p, a as usize, src, &mut buf),
                _ => {
                    buf.clear();
                    buf.resize(BLOCK_BYTES as usize, 0);
                    buf[a as usize..z as usize].copy_from_slice(src);
                    self.dev.write_nt(self.geo.block_off(b.new), &buf);
                }
            }
        }
        let now = inode::now_ns();
        let mut raw = st.raw;
        raw.size = new_size;
        raw.blocks += blocks.iter().filter(|b| b.how == How::Fresh).count() as u64;
        raw.mtime_ns = now;
        raw.ctime_ns = now;
        let old_end = Lblk(blocks_for(old_size));
        on_map!(self, m => {
            #[allow(clippy::let_unit_value)] // the block mappings' Switched is ()
            let switched = m.tx_switch(&mut tx, cell.ino, &mut raw, blocks, old_end)?;
            self.commit_untorn_inode(tx, cell, st, raw, now)?;
            m.switched(cell, blocks, switched);
            Ok(())
        })
    }

    /// Commits an untorn write's transaction with the inode (only its times when nothing
    /// else changed: one undo entry, as a relaxed overwrite stores them).
    fn commit_untorn_inode(
        &self,
        mut tx: crate::journal::Tx<'_, D>,
        cell: &InodeCell,
        st: &mut InodeMem,
        mut raw: crate::layout::InodeRaw,
        now: i64,
    ) -> Result<()> {
        let times_only = {
            let mut same = raw;
            (same.mtime_ns, same.ctime_ns) = (st.raw.mtime_ns, st.raw.ctime_ns);
            bytemuck::bytes_of(&same) == bytemuck::bytes_of(&st.raw)
        };
        if times_only {
            let ioff = self.geo.inode_off(cell.ino);
            const _: () = assert!(INODE_CTIME_OFF == INODE_MTIME_OFF + 8);
            tx.write(ioff + INODE_MTIME_OFF, bytemuck::cast_slice(&[now as u64, now as u64]));
        } else {
            inode::tx_write_inode(&mut tx, &self.geo, cell.ino, &mut raw);
        }
        tx.commit()?;
        st.raw = raw;
        Ok(())
    }
}

/// What an untorn write asks of the mapping (implemented beside each mapping:
/// `fs/hashfs/untorn.rs`, `fs/blocks/untorn.rs`).
pub(crate) trait UntornVerbs<D: PmDevice> {
    /// What a move's transaction leaves to finish once it committed.
    type Switched;

    /// An untorn write of the one block `b` (over [off, end)): where the mapping can
    /// switch it without the journal, the write done (or its error); None for the general
    /// path.
    #[allow(clippy::too_many_arguments)]
    fn switch_one(
        &self,
        fs: &FsInner<D>,
        cell: &InodeCell,
        st: &mut InodeMem,
        b: &Block,
        off: u64,
        data: &[u8],
        end: u64,
    ) -> Option<Result<()>>;

    /// Undo entries a fresh block costs the transaction (`move_cost`: a moved block's).
    fn fresh_cost(&self, move_cost: u64) -> u64;

    /// Whether the moved blocks are removed in one range (the mapped blocks between two
    /// moved ones move too).
    fn moves_in_one_range(&self) -> bool;

    /// Whether block `l` of `ino` at `p` is part of an aligned 2 MiB extent (a move would
    /// break it).
    fn keeps_alignment(&self, fs: &FsInner<D>, ino: Ino, l: Lblk, p: Pblk) -> bool;

    /// Adds to `tx` the mapping of the fresh blocks and the switch of the moved ones
    /// (`old_end`: the first block past the durable size).
    fn tx_switch<'a>(
        &'a self,
        tx: &mut crate::journal::Tx<'a, D>,
        ino: Ino,
        raw: &mut crate::layout::InodeRaw,
        blocks: &[Block],
        old_end: Lblk,
    ) -> Result<Self::Switched>;

    /// After the transaction committed.
    fn switched(&self, cell: &InodeCell, blocks: &[Block], switched: Self::Switched);
}
