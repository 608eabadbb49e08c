//! Hooks of the paper experiments (`hashfs-bench paper`'s "cold cache" runs, SPFS Fig. 7)
//! asked of either kind of mapping; the file system never calls them.

#![forbid(unsafe_code)]

use super::{FileMap, Index, Mapped};
use crate::layout::{Geometry, Ino, InodeRaw, BLOCK_BYTES};
use crate::pm::{DevOffset, PmDevice};
use crate::{Error, Result};
use std::sync::atomic::AtomicU8;

impl<D: PmDevice> FileMap<D> {
    /// Makes the mapping of `ino` cold: forgets the DRAM node cache, and adds to `ranges`
    /// the device ranges of the file's tree nodes (and ctFS's page-table nodes), for the
    /// caller to evict from the CPU caches.
    pub fn cold_ranges(
        &self,
        geo: &Geometry,
        ino: Ino,
        raw: &InodeRaw,
        ranges: &mut Vec<(DevOffset, u64)>,
    ) -> Result<()> {
        let FileMap::Blocks(b) = self else { return Ok(()) };
        if let Index::ExtentTreeCached(c) = &b.index {
            c.clear();
        }
        if !b.is_global() {
            let mut node = |m| {
                if let Mapped::Node { pblk, .. } = m {
                    ranges.push((geo.block_off(pblk), BLOCK_BYTES));
                }
            };
            b.walk(ino, raw, &mut node)?;
            b.walk_shared(&mut node)?; // ctFS: the page table's nodes
        }
        Ok(())
    }

    /// HashFS's grouped and regions placements: the DRAM filter of claimed chunks, which a
    /// cold run evicts too.
    pub fn claim_filter(&self) -> Option<&[AtomicU8]> {
        match self {
            FileMap::Hash(t) => t.groups().map(|g| g.filter_cells()),
            FileMap::Blocks(_) => None,
        }
    }

    /// Extent-hash images: how lookups search (SPFS Fig. 7).
    pub fn set_extent_lookup(&self, lookup: super::extent_hash::ExtentLookup) -> Result<()> {
        match self {
            FileMap::Blocks(b) => match &b.index {
                Index::ExtentHash(t) => {
                    t.set_lookup(lookup);
                    Ok(())
                }
                _ => Err(Error::Invalid("fast lookup exists only in extent hashing")),
            },
            FileMap::Hash(_) => Err(Error::Invalid("fast lookup exists only in extent hashing")),
        }
    }
}
