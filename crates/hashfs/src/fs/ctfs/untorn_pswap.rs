//! ctFS's atomic writes (§3.3: "ctU first writes the data to a staging partition, and when
//! the write is complete, it swaps the newly written data to the memory region belonging
//! to the target file"): on `ctfs` images, an untorn write larger than the copy-on-write
//! path takes ([`crate::fs::untorn::copy_limit`]) is staged in a file of its own and then
//! pswapped into place, so its data is written once and its commit changes page-table
//! entries at the highest level the alignment allows: a 2 MiB-aligned write of any
//! length costs one entry per 2 MiB (per 1 GiB once aligned to that) on each side, not
//! one per page, and not the data twice.
//!
//! The steps, each crash-safe:
//! 1. A *staging file*: a fresh inode with no links (nlink 0), so that a crash anywhere
//!    before step 4 leaves an orphan that recovery frees.
//! 2. The staging file is written with ordinary (relaxed) writes at an offset congruent to
//!    the target's modulo 1 GiB ([`STAGE_ALIGN`]): the target's old bytes around the data
//!    (the head and tail residues of the first and last page, and the rest of a 2 MiB the
//!    target maps with a 2 MiB leaf, so that the swap never splits the leaf), then the
//!    data. Whole 2 MiB of the range get aligned extents from the aligned allocator,
//!    mapped by 2 MiB leaves. Each relaxed write is durable when it returns.
//! 3. One undo-logged transaction: the pswap of the two ranges' page-table entries
//!    (growing the target's partition if the write extends the file), the target's new
//!    size, block count and times, the staging file's block count. The write takes effect
//!    at its commit.
//! 4. The staging file, which now maps the target's old pages, is freed.
//!
//! The released ctFS stages and swaps too, but sets the size before writing the data and
//! has no recovery for a swap cut short (`../shared/notes/seed-systems.md`); here the
//! size, the swap and the block counts are one transaction, and the staging file is an
//! orphan from its first moment.
//!
//! Limits ([`pswap_limits`]): the transaction must fit the journal's room (three quarters
//! of it, as [`crate::File::swap_pages`]); a bound on the page-table words a range of
//! some length changes, whatever its alignment, gives the largest write of any alignment,
//! and a tighter one the largest naturally aligned write (`RWF_ATOMIC`'s kind). On the
//! default journal both are [`CTFS_UNTORN_MAX_BYTES`] (1 GiB).

#![forbid(unsafe_code)]

use crate::fs::data::blocks_for;
use crate::fs::inode::{self, InodeCell, InodeMem};
use crate::fs::FsInner;
use crate::layout::inode::{InodeRaw, S_IFREG};
use crate::layout::mapping::ctfs::NODE_ENTRIES;
use crate::layout::{Geometry, Ino, Lblk, BLOCK_BYTES};
use crate::mapping::FileMap;
use crate::pm::PmDevice;
use crate::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The largest untorn write on a `ctfs` image: 1 GiB, one level-2 page-table entry.
pub const CTFS_UNTORN_MAX_BYTES: u64 = 1 << 30;
/// The staging offset is the target's modulo this (the span of a level-2 entry), so that
/// both ranges allow the same page-table levels.
const STAGE_ALIGN: u64 = 1 << 30;
/// Bytes a 2 MiB leaf maps.
const CHUNK_BYTES: u64 = NODE_ENTRIES * BLOCK_BYTES;
/// Bytes one undo entry holds (`mapping/staged.rs`: runs of changed words).
const ENTRY_WORD_BYTES: u64 = 44;
/// Undo entries one side of the swap may cost beyond its page-table words: nodes made
/// (their bitmap words and parent entries), nodes emptied and freed, rounding at node
/// boundaries.
const SIDE_SLACK: u64 = 16;
/// Undo entries of a partition move of the target in the same transaction (a write that
/// extends the file past its partition): at most 64 entries of one level on each side.
const PARTITION_MOVE: u64 = 2 * (64 * 8 / ENTRY_WORD_BYTES + 2);
/// Undo entries of the two inodes and the journal's own reserve.
const FIXED: u64 = 2 * (std::mem::size_of::<InodeRaw>() as u64).div_ceil(ENTRY_WORD_BYTES) + 16;

/// Undo entries of `words` changed page-table words in `runs` runs.
fn words_cost(words: u64, runs: u64) -> u64 {
    (words * 8).div_ceil(ENTRY_WORD_BYTES) + runs
}

/// Undo entries one side of a swap of `pages` pages may cost: with `aligned`, a range
/// aligned to its length, a power of two (one run of entries of one level); otherwise any
/// range (page entries in the partial 2 MiB at each end, 2 MiB entries in the partial
/// 1 GiB at each end, 1 GiB entries between).
fn side_cost(pages: u64, aligned: bool) -> u64 {
    let l1 = NODE_ENTRIES;
    let l2 = NODE_ENTRIES * NODE_ENTRIES;
    let words = if aligned {
        match pages {
            p if p < l1 => words_cost(p, 1),
            p if p < l2 => words_cost(p / l1, 1),
            p => words_cost(p / l2, 1),
        }
    } else {
        words_cost(pages.min(2 * (l1 - 1)), 2)
            + words_cost((pages / l1).min(2 * (l1 - 1)), 2)
            + words_cost(pages / l2 + 1, 1)
    };
    words + SIDE_SLACK
}

fn fits(geo: &Geometry, pages: u64, aligned: bool) -> bool {
    2 * side_cost(pages, aligned) + PARTITION_MOVE + FIXED <= geo.journal_entries() * 3 / 4
}

/// The largest untorn writes by pswap on a `ctfs` image of geometry `geo`: (any alignment,
/// naturally aligned), powers of two of bytes up to [`CTFS_UNTORN_MAX_BYTES`] (0: none,
/// and on any other mapping). A write of any alignment of `len` bytes spans up to
/// `len / 4096 + 1` pages.
pub fn pswap_limits(geo: &Geometry) -> (u64, u64) {
    if geo.mapping != crate::layout::MappingKind::Ctfs {
        return (0, 0);
    }
    let max_pages = CTFS_UNTORN_MAX_BYTES / BLOCK_BYTES;
    let pow2 = |ok: &dyn Fn(u64) -> bool| {
        let mut p = 0;
        while p < max_pages && ok(if p == 0 { 1 } else { 2 * p }) {
            p = if p == 0 { 1 } else { 2 * p };
        }
        p * BLOCK_BYTES
    };
    let any = pow2(&|p| fits(geo, p + 1, false));
    // Every naturally aligned power of two up to the limit must fit, not only the limit.
    let aligned = pow2(&|p| fits(geo, p, true)).max(any);
    (any, aligned)
}

impl<D: PmDevice> FsInner<D> {
    /// Whether an untorn write of `len` bytes to `cell` goes by pswap: a `ctfs` image, more
    /// than the copy-on-write path takes, and the file not memory-mapped through the shim
    /// (its mapping would keep the old pages; the copy-on-write path logs them in place).
    pub(in crate::fs) fn untorn_by_pswap(&self, cell: &InodeCell, len: u64) -> bool {
        self.geo.mapping == crate::layout::MappingKind::Ctfs
            && len > crate::fs::untorn::copy_limit(&self.geo)
            && cell.map_count.load(Ordering::Acquire) == 0
    }

    /// ctFS's atomic write: stage, pswap, free the staging file (the module's steps).
    pub(in crate::fs) fn write_untorn_by_pswap(
        &self,
        cell: &InodeCell,
        st: &mut InodeMem,
        off: u64,
        data: &[u8],
    ) -> Result<()> {
        let end = off + data.len() as u64;
        let (a, z) = self.stage_range(cell, &st.raw, off, end)?;
        let s = a % STAGE_ALIGN;
        let stage = self.new_unlinked_file(cell.ino)?;
        let r = self
            .stage_write(cell, &st.raw, &stage, off, data, a, z, s)
            .and_then(|()| self.swap_staged(cell, st, &stage, a, z, s, end));
        let mut sst = stage.state.write();
        // After a commit the write has taken effect whatever happens here: a staging file
        // this fails to free is an orphan that the next mount frees.
        let freed = self.free_inode_locked(&stage, &mut sst);
        r.and(freed.or(Ok(())))
    }

    /// The pages [a, z) the swap exchanges: those under [off, end), widened to the whole
    /// 2 MiB at either end when the target maps it with a 2 MiB leaf (a swap of part of it
    /// would split the leaf and lose the file's 2 MiB page there).
    fn stage_range(&self, cell: &InodeCell, raw: &InodeRaw, off: u64, end: u64) -> Result<(u64, u64)> {
        let (mut a, mut z) = (off / BLOCK_BYTES * BLOCK_BYTES, end.div_ceil(BLOCK_BYTES) * BLOCK_BYTES);
        let size_blocks = blocks_for(raw.size);
        let leaf = |chunk: u64| -> Result<bool> {
            let l = Lblk(chunk / BLOCK_BYTES);
            Ok(l.0 < size_blocks && self.translate(cell, raw, l, size_blocks)?.is_some_and(|e| e.len >= NODE_ENTRIES))
        };
        if !a.is_multiple_of(CHUNK_BYTES) && leaf(a / CHUNK_BYTES * CHUNK_BYTES)? {
            a = a / CHUNK_BYTES * CHUNK_BYTES;
        }
        let last = (z - 1) / CHUNK_BYTES * CHUNK_BYTES;
        if !z.is_multiple_of(CHUNK_BYTES) && leaf(last)? {
            z = last + CHUNK_BYTES;
        }
        Ok((a, z))
    }

    /// A fresh regular inode with no links and no name (`parent` = `owner`): an orphan
    /// that recovery frees if a crash comes before it is linked or freed.
    pub(in crate::fs) fn new_unlinked_file(&self, owner: Ino) -> Result<Arc<InodeCell>> {
        let ino = self.alloc_ino()?;
        let mut raw = inode::fresh_raw(S_IFREG, 0, 0, inode::now_ns());
        raw.parent = owner.0;
        let mut tx = self.journals.begin();
        inode::tx_write_inode(&mut tx, &self.geo, ino, &mut raw);
        if let Err(e) = tx.commit() {
            self.free_ino(ino);
            return Err(e);
        }
        let cell = Arc::new(InodeCell::new(ino, raw));
        self.inodes.insert(cell.clone());
        Ok(cell)
    }

    /// Step 2: the staging file's pages [s, s + z - a) hold the target's [a, z) as the
    /// write leaves it.
    #[allow(clippy::too_many_arguments)]
    fn stage_write(
        &self,
        cell: &InodeCell,
        raw: &InodeRaw,
        stage: &InodeCell,
        off: u64,
        data: &[u8],
        a: u64,
        z: u64,
        s: u64,
    ) -> Result<()> {
        let end = off + data.len() as u64;
        let head = self.read_old(cell, raw, a, off)?;
        let tail = self.read_old(cell, raw, end, z)?;
        let mut sst = stage.state.write();
        let _req = self.alloc_request(stage);
        let span = s..s + (z - a);
        for (at, bytes) in [(a, &head[..]), (off, data), (end, &tail[..])] {
            if bytes.is_empty() {
                continue;
            }
            let n = self.write_locked(stage, &mut sst, s + (at - a), bytes, span.clone())?;
            if n < bytes.len() {
                return Err(Error::NoSpace);
            }
        }
        Ok(())
    }

    /// The target's bytes [from, to) as a read shows them (zeros in holes and past the
    /// end of file), read under the lock the caller holds.
    fn read_old(&self, cell: &InodeCell, raw: &InodeRaw, from: u64, to: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; (to - from) as usize];
        let n = to.min(raw.size).saturating_sub(from) as usize;
        self.read_mapped(cell, raw, from, &mut buf[..n])?;
        Ok(buf)
    }

    /// Step 3: one transaction swaps the target's pages [a, z) with the staging file's
    /// from `s` and sets the target's size, block counts and times.
    #[allow(clippy::too_many_arguments)]
    fn swap_staged(
        &self,
        cell: &InodeCell,
        st: &mut InodeMem,
        stage: &InodeCell,
        a: u64,
        z: u64,
        s: u64,
        end: u64,
    ) -> Result<()> {
        let FileMap::Blocks(bm) = &self.map else { return Err(Error::Unsupported("pswap needs a ctfs image")) };
        let old_size = st.raw.size;
        let new_size = old_size.max(end);
        if new_size > old_size {
            self.zero_tail_before_growth(cell, &st.raw, u64::MAX)?;
        }
        let mut sst = stage.state.write();
        let (mut ra, mut rb) = (st.raw, sst.raw);
        let mut tx = self.journals.begin();
        let (mt, (ca, cb, _)) = self.exchange_in_tx(
            &tx,
            bm.begin(),
            (cell.ino, &mut ra),
            a / BLOCK_BYTES,
            Some((stage.ino, &mut rb)),
            s / BLOCK_BYTES,
            (z - a) / BLOCK_BYTES,
            "an untorn write needing more page-table entries than one transaction holds",
        )?;
        let now = inode::now_ns();
        ra.blocks = ra.blocks - ca + cb;
        rb.blocks = rb.blocks - cb + ca;
        ra.size = new_size;
        ra.mtime_ns = now;
        ra.ctime_ns = now;
        mt.finish_with(&mut tx);
        inode::tx_write_inode(&mut tx, &self.geo, cell.ino, &mut ra);
        inode::tx_write_inode(&mut tx, &self.geo, stage.ino, &mut rb);
        tx.commit()?;
        st.raw = ra;
        sst.raw = rb;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::MappingKind;

    fn geo(journal_blocks: u32) -> Geometry {
        let params = crate::fs::GeometryParams {
            image_bytes: 64 << 20,
            inode_count: None,
            journal_count: 1,
            journal_blocks,
            mapping: MappingKind::Ctfs,
            grouped: false,
        };
        Geometry::compute(&params).unwrap()
    }

    #[test]
    fn the_default_journal_takes_a_gibibyte_of_any_alignment() {
        assert_eq!(pswap_limits(&geo(16)), (CTFS_UNTORN_MAX_BYTES, CTFS_UNTORN_MAX_BYTES));
    }

    #[test]
    fn a_small_journal_takes_more_when_the_write_is_aligned() {
        let (any, aligned) = pswap_limits(&geo(4));
        assert!((256 << 10..CTFS_UNTORN_MAX_BYTES).contains(&any), "{any}");
        assert_eq!(aligned, CTFS_UNTORN_MAX_BYTES);
        // The bounds grow with the length and the page-table level.
        assert!(side_cost(511, false) < side_cost(1023, false));
        assert!(side_cost(512, true) < side_cost(256, true));
    }
}
