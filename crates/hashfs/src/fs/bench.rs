//! Hooks for the paper experiments (`hashfs-bench paper`, through [`crate::testing`]); the
//! file system never calls them.

#![forbid(unsafe_code)]

use super::FileSystem;
use crate::layout::superblock::map_region_bytes;
use crate::layout::Ino;
use crate::pm::{DevOffset, PmDevice};
use crate::{Error, Result};
use std::sync::atomic::Ordering;

impl<D: PmDevice> FileSystem<D> {
    /// Makes the next mapping operation on `ino` cold, as after the reset of the HashFS
    /// paper's "cold cache" runs (§4.1): forgets the file's translation cache and cursor
    /// and the DRAM node cache, then evicts from the CPU caches (`clflushopt`/`clflush`,
    /// `mfence`) the file's inode, its in-DRAM inode (translation cache), the static mapping
    /// region (HashFS table, or allocator bitmap and global table) and the file's tree
    /// nodes. Returns the number of bytes evicted. The allocator's DRAM free-extent index
    /// is not evicted (it is a tree of heap nodes).
    pub(crate) fn evict_mapping(&self, ino: Ino) -> Result<u64> {
        let inner = &self.inner;
        let cell = inner.cell(ino)?;
        let st = cell.state.read();
        cell.tcache.invalidate_all();
        cell.cursor.store(0, Ordering::Relaxed);
        cell.next_read_lblk.store(u64::MAX, Ordering::Relaxed);
        let geo = inner.geo;
        let mut ranges = vec![
            (geo.inode_off(ino), crate::layout::INODE_BYTES as u64),
            (DevOffset(geo.map_off), map_region_bytes(inner.map.kind(), geo.data_blocks, geo.groups > 0)),
        ];
        inner.map.cold_ranges(&geo, ino, &st.raw, &mut ranges)?;
        let mut bytes = 0;
        for (off, len) in ranges {
            if !inner.dev.evict(off, len) {
                return Err(Error::Invalid("evicting caches needs a memory-mapped device"));
            }
            bytes += len;
        }
        crate::pm::evict_object::<super::inode::InodeCell>(&cell);
        if let Some(words) = inner.map.claim_filter() {
            crate::pm::evict_slice(words);
        }
        Ok(bytes)
    }

    /// Extent-hash images: turns the probabilistic fast lookup on or off (SPFS Fig. 7).
    pub(crate) fn set_extent_lookup(&self, lookup: crate::mapping::extent_hash::ExtentLookup) -> Result<()> {
        self.inner.map.set_extent_lookup(lookup)
    }
}
