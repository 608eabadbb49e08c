//! What an image's mapping says about its space, asked of either kind: the blocks it can
//! hold and has free, whole 2 MiB chunks (for mapped files' huge pages), and HashFS's
//! groups.

#![forbid(unsafe_code)]

use super::hashfs::{classify, Entry};
use super::FileMap;
use crate::alloc::{runs::aligned_chunks, Run, HUGE_BLOCKS};
use crate::pm::PmDevice;
use crate::AllocatorKind;

impl<D: PmDevice> FileMap<D> {
    /// Data blocks the mapping can hold, and of them the free ones (`data_blocks`: the
    /// image's).
    pub fn blocks_total_free(&self, data_blocks: u64) -> (u64, u64) {
        match self {
            FileMap::Hash(t) => (t.capacity(), t.capacity().saturating_sub(t.used())),
            FileMap::Blocks(b) => (data_blocks, b.free_blocks()),
        }
    }

    /// HashFS with the regions placement: the open groups, and whether moves into the
    /// newest ones still wait.
    pub fn open_groups(&self) -> Option<(u64, bool)> {
        match self {
            FileMap::Hash(t) => t.regions().map(|r| (r.len(), r.opening())),
            FileMap::Blocks(_) => None,
        }
    }

    /// HashFS with a grouped placement: the groups claimed by a file's 2 MiB chunk.
    pub fn claimed_groups(&self) -> Option<u64> {
        match self {
            FileMap::Hash(t) => t.groups().map(|g| g.claimed()),
            FileMap::Blocks(_) => None,
        }
    }

    /// Whether a file's whole 2 MiB chunk written at once gets one aligned, physically
    /// contiguous extent: the aligned allocator's mappings and HashFS's grouped placements.
    pub fn fills_whole_chunks(&self) -> bool {
        match self {
            FileMap::Blocks(b) => b.alloc.kind() == AllocatorKind::Aligned,
            FileMap::Hash(t) => t.groups().is_some(),
        }
    }

    /// Free aligned 2 MiB extents (`phase`: the data area's first block modulo 512): runs
    /// of 512 free data blocks that start 2 MiB-aligned in the image; for HashFS, free
    /// groups under the regions placement, else runs of 512 free (empty or tombstone) slots.
    pub fn free_aligned_extents(&self, phase: u64) -> u64 {
        match self {
            FileMap::Blocks(b) => b.alloc.free_aligned_extents(phase),
            FileMap::Hash(t) if t.regions().is_some() => t.groups().map_or(0, |g| g.free_groups()),
            FileMap::Hash(t) => {
                let free = |s: u64| matches!(classify(t.load(s), t.nslots()), Entry::Empty | Entry::Tombstone);
                let whole = Run { start: 0, len: t.nslots() };
                let chunks = aligned_chunks(whole, phase % HUGE_BLOCKS);
                chunks.filter(|&c| (c..c + HUGE_BLOCKS).all(free)).count() as u64
            }
        }
    }
}
