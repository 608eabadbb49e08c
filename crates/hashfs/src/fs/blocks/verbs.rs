//! The data path's verbs on the structures behind the block allocator: a file's blocks
//! come from the allocator (near the block before, or aligned for whole 2 MiB), and its
//! structure maps them in an undo-logged change.

#![forbid(unsafe_code)]

use crate::alloc::Run;
use crate::fs::data::{blocks_for, extents_of, MapGroup, WRITE_CHUNK_BLOCKS};
use crate::fs::inode::{InodeCell, InodeMem};
use crate::fs::verbs::{merge_runs, MapVerbs};
use crate::fs::FsInner;
use crate::journal::Tx;
use crate::layout::{Extent, Geometry, Ino, InodeRaw, Lblk, Pblk};
use crate::mapping::BlockMap;
use crate::pm::PmDevice;
use crate::Result;
use std::ops::Range;

impl<D: PmDevice> MapVerbs<D> for BlockMap<D> {
    /// The translation cache (for the structures that use it), then the structure; a
    /// ranged entry fills the cache with the blocks that follow.
    #[inline]
    fn translate(
        &self,
        _fs: &FsInner<D>,
        cell: &InodeCell,
        raw: &InodeRaw,
        lblk: Lblk,
        _end: Lblk,
        _size_blocks: u64,
    ) -> Result<Option<Extent>> {
        let tc = self.uses_tcache();
        if tc {
            if let Some(p) = cell.tcache.get(lblk) {
                return Ok(Some(Extent { lblk, pblk: p, len: 1 }));
            }
        }
        let r = self.lookup(cell.ino, raw, &cell.cursor, lblk)?;
        if let (true, Some(e)) = (tc, r) {
            for i in 0..e.len.min(crate::mapping::tcache::TCACHE_ENTRIES as u64) {
                cell.tcache.put(lblk + i, e.pblk + i);
            }
        }
        Ok(r)
    }

    /// After the block before `first`: `before` when the request placed that one, else the
    /// file's (if inside its size).
    fn hint_for(
        &self,
        fs: &FsInner<D>,
        cell: &InodeCell,
        raw: &InodeRaw,
        first: Lblk,
        before: Option<Pblk>,
    ) -> Result<Option<Pblk>> {
        let size_blocks = blocks_for(raw.size);
        Ok(match before {
            Some(p) => Some(p + 1),
            None if first.0 > 0 && first.0 <= size_blocks => {
                fs.translate(cell, raw, Lblk(first.0 - 1), size_blocks)?.map(|e| e.pblk + 1)
            }
            None => None,
        })
    }

    fn claim_blocks(
        &self,
        _fs: &FsInner<D>,
        ino: Ino,
        lblks: &[Lblk],
        hint: Option<Pblk>,
        whole: Range<Lblk>,
    ) -> Result<Vec<Pblk>> {
        let runs = BlockMap::claim(self, ino, lblks, hint, whole)?;
        Ok(runs.iter().flat_map(Run::blocks).collect())
    }

    fn unclaim_blocks(&self, _fs: &FsInner<D>, blocks: &[Pblk]) {
        BlockMap::unclaim(self, &blocks.iter().map(|&p| Run::one(p)).collect::<Vec<_>>())
    }

    /// One structure change (one staged overlay) for every group, each file's blocks as
    /// extents.
    fn tx_map<'a>(&'a self, tx: &mut Tx<'a, D>, groups: &mut [MapGroup<'_>]) -> Result<()> {
        let mut mt = self.begin();
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

    fn mapped(&self, _cell: &InodeCell, _pairs: &[(Lblk, Pblk)]) {}

    /// Sized so that the structure's undo records fit the journal.
    fn write_chunk_blocks(&self, geo: &Geometry) -> u64 {
        (geo.journal_entries() / 10).clamp(1, WRITE_CHUNK_BLOCKS)
    }

    fn end_request(&self, ino: Ino) {
        self.alloc.end_request(ino.get())
    }

    fn one_fence_appends(&self) -> bool {
        false
    }

    fn shared_count(&self) -> Option<u64> {
        None
    }

    fn adopt_shared_count(&self, _n: u64) {}

    /// None to settle: sizes are tagged only on HashFS.
    fn settle_tagged_sizes(&self, _fs: &FsInner<D>) {}

    /// No: a structure's insertion changes shared state, which a transaction logs.
    fn maps_past_eof_unlogged(&self) -> bool {
        false
    }

    fn map_unlogged(&self, _fs: &FsInner<D>, _cell: &InodeCell, mut fresh: impl Iterator<Item = (Lblk, Pblk)>) -> u64 {
        debug_assert!(fresh.next().is_none(), "a block mapping's fast append maps no block");
        0
    }

    fn prefetch_next_append(&self, _fs: &FsInner<D>, _ino: Ino, _next: Lblk) {}

    /// Nothing: the structure finds its entries when it removes them.
    fn release_plan(&self, _cell: &InodeCell, _from: Lblk, _to: Lblk) -> Vec<Pblk> {
        Vec::new()
    }

    fn mapped_runs(&self, ino: Ino, raw: &InodeRaw) -> Result<Vec<(Lblk, u64)>> {
        Ok(merge_runs(self.mapped_extents(ino, raw)?))
    }

    fn release_blocks(
        &self,
        fs: &FsInner<D>,
        cell: &InodeCell,
        st: &mut InodeMem,
        _planned: &[Pblk],
        from: Lblk,
        to: Lblk,
    ) -> Result<()> {
        fs.unmap_blocks(self, cell, st, from, to)
    }
}
