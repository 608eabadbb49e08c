//! What the file system asks of a mapping: the verbs of the data path, one trait that each
//! mapping's folder implements (`fs/hashfs/verbs.rs` for the HashFS table,
//! `fs/blocks/verbs.rs` for the structures behind the block allocator: extent tree, radix
//! tree, cuckoo table, extent hashing and ctFS's page table), and the one place that asks
//! an image which mapping it has ([`on_map!`]). The rest of `fs/` calls the verbs through
//! [`FsInner`]'s methods and never matches on the mapping.

#![forbid(unsafe_code)]

use super::data::MapGroup;
use super::inode::InodeCell;
use super::FsInner;
use crate::journal::Tx;
use crate::layout::{Extent, Geometry, Ino, InodeRaw, Lblk, Pblk};
use crate::pm::PmDevice;
use crate::Result;
use std::ops::Range;

/// Runs `$body` with `$m` bound to the image's mapping (`&HashTable` or `&BlockMap`), each
/// arm compiled for its own type: a match on the mapping, written once.
macro_rules! on_map {
    (map $map:expr, $m:ident => $body:expr) => {
        match &$map {
            crate::mapping::FileMap::Hash($m) => $body,
            crate::mapping::FileMap::Blocks($m) => {
                let $m: &crate::mapping::BlockMap<_> = $m;
                $body
            }
        }
    };
    ($fs:expr, $m:ident => $body:expr) => {
        match &$fs.map {
            crate::mapping::FileMap::Hash($m) => $body,
            crate::mapping::FileMap::Blocks($m) => {
                let $m: &crate::mapping::BlockMap<_> = $m;
                $body
            }
        }
    };
}
pub(crate) use on_map;

/// The verbs of the data path. `fs` is the file system the mapping belongs to (for its
/// device, geometry, journals and the features that run only on one mapping).
pub(crate) trait MapVerbs<D: PmDevice> {
    /// Logical block `lblk` of `cell` (the request going on to `end`, exclusive): the
    /// extent from `lblk` to the end of its mapping entry, or None for a hole.
    fn translate(
        &self,
        fs: &FsInner<D>,
        cell: &InodeCell,
        raw: &InodeRaw,
        lblk: Lblk,
        end: Lblk,
        size_blocks: u64,
    ) -> Result<Option<Extent>>;

    /// Where new blocks for `first` should go (after `before`, the block the request
    /// placed before it, else the file's block before), for mappings that place blocks.
    fn hint_for(
        &self,
        fs: &FsInner<D>,
        cell: &InodeCell,
        raw: &InodeRaw,
        first: Lblk,
        before: Option<Pblk>,
    ) -> Result<Option<Pblk>>;

    /// New blocks for `lblks` of `ino` (sorted), not yet reachable; `whole` is the range of
    /// whole blocks the request writes (see [`FsInner::claim_blocks_for`]).
    fn claim_blocks(
        &self,
        fs: &FsInner<D>,
        ino: Ino,
        lblks: &[Lblk],
        hint: Option<Pblk>,
        whole: Range<Lblk>,
    ) -> Result<Vec<Pblk>>;

    /// Gives back claimed blocks whose transaction did not commit.
    fn unclaim_blocks(&self, fs: &FsInner<D>, blocks: &[Pblk]);

    /// Adds to `tx` what maps claimed blocks (see [`FsInner::tx_map_blocks`]).
    fn tx_map<'a>(&'a self, tx: &mut Tx<'a, D>, groups: &mut [MapGroup<'_>]) -> Result<()>;

    /// After the transaction that mapped `pairs` of `cell` committed.
    fn mapped(&self, cell: &InodeCell, pairs: &[(Lblk, Pblk)]);

    /// New blocks one write transaction maps.
    fn write_chunk_blocks(&self, geo: &Geometry) -> u64;

    /// A request (write, fallocate) that claimed blocks over several transactions is done.
    fn end_request(&self, ino: Ino);

    /// Whether a small append at the end of a file may take one fence
    /// (`fs/hashfs/append_tag.rs`).
    fn one_fence_appends(&self) -> bool;

    /// Whether a new block past the end of file is mapped by one word that need not be
    /// logged (recovery frees a mapping past EOF): a fast append may then map new blocks
    /// without a transaction (`fs/append.rs`).
    fn maps_past_eof_unlogged(&self) -> bool;

    /// A fast append's new blocks `fresh` of `cell`, (logical, physical), mapped by their
    /// unlogged words and flushed (the append's fence follows); only where
    /// [`maps_past_eof_unlogged`](Self::maps_past_eof_unlogged). Returns how many.
    fn map_unlogged(&self, fs: &FsInner<D>, cell: &InodeCell, fresh: impl Iterator<Item = (Lblk, Pblk)>) -> u64;

    /// After an append that mapped new blocks, ending the file at block `next`: fetch what
    /// the next append will touch.
    fn prefetch_next_append(&self, fs: &FsInner<D>, ino: Ino, next: Lblk);

    /// Before a shrink's smaller size is committed: the blocks of `cell` in [from, to)
    /// that [`release_blocks`](Self::release_blocks) will free, for mappings that must
    /// find them while they are still the file's.
    fn release_plan(&self, cell: &InodeCell, from: Lblk, to: Lblk) -> Vec<Pblk>;

    /// The count a mount shared by many processes (`fs/shared/`) publishes to the others
    /// after its changes and takes on from theirs: HashFS's table's used slots, which its
    /// load checks read; None where the mapping keeps no such count in memory.
    fn shared_count(&self) -> Option<u64>;

    /// Takes on the count another participant published ([`Self::shared_count`]).
    fn adopt_shared_count(&self, n: u64);

    /// Settles every size that a one-fence append left tagged (the last participant
    /// leaving a shared image clean; `fs/hashfs/append_tag.rs`). Flushes what it stores;
    /// the caller fences.
    fn settle_tagged_sizes(&self, fs: &FsInner<D>);

    /// The mapped logical blocks of `ino` as sorted runs (first, count): a walk of the
    /// file's structure, or one scan of a global table (see
    /// [`FileSystem::mapped_runs`](crate::FileSystem::mapped_runs)).
    fn mapped_runs(&self, ino: Ino, raw: &InodeRaw) -> Result<Vec<(Lblk, u64)>>;

    /// Once the smaller size is durable (or the file has no links): frees the blocks of
    /// `cell` in [from, to), `planned` being what [`release_plan`](Self::release_plan)
    /// found.
    fn release_blocks(
        &self,
        fs: &FsInner<D>,
        cell: &InodeCell,
        st: &mut super::inode::InodeMem,
        planned: &[Pblk],
        from: Lblk,
        to: Lblk,
    ) -> Result<()>;

    /// [`release_blocks`](Self::release_blocks) right after the transaction that made the
    /// smaller size durable, with nothing flushed since that a fence did not follow: a
    /// mapping whose freeing begins with a fence may leave it out (HashFS's paper
    /// placement, `fs/hashfs/slots.rs`).
    fn release_blocks_after_commit(
        &self,
        fs: &FsInner<D>,
        cell: &InodeCell,
        st: &mut super::inode::InodeMem,
        planned: &[Pblk],
        from: Lblk,
        to: Lblk,
    ) -> Result<()> {
        self.release_blocks(fs, cell, st, planned, from, to)
    }
}

/// `pieces` (first block, count), in any order, as sorted runs with adjacent and
/// overlapping pieces merged.
pub(crate) fn merge_runs(mut pieces: Vec<(u64, u64)>) -> Vec<(Lblk, u64)> {
    pieces.sort_unstable();
    let mut out: Vec<(Lblk, u64)> = Vec::new();
    for (first, n) in pieces.into_iter().filter(|p| p.1 > 0) {
        match out.last_mut() {
            Some((l, m)) if l.0 + *m >= first => *m = (*m).max(first + n - l.0),
            _ => out.push((Lblk(first), n)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn runs_merge_when_they_touch_or_overlap() {
        let runs = super::merge_runs(vec![(10, 2), (0, 3), (3, 1), (12, 0), (11, 5), (20, 1)]);
        let plain: Vec<(u64, u64)> = runs.iter().map(|&(l, n)| (l.0, n)).collect();
        assert_eq!(plain, [(0, 4), (10, 6), (20, 1)]);
    }
}
