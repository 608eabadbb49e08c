//! HashFS's read prefetch: the slots where a key most likely is and the blocks there,
//! fetched before the file's lock.

#![forbid(unsafe_code)]

use crate::fs::inode::InodeCell;
use crate::fs::FsInner;
use crate::layout::{Lblk, Pblk, BLOCK_BYTES};
use crate::mapping::hashfs::{file_key, HashTable};
use crate::mapping::FileMap;
use crate::pm::PmDevice;

impl<D: PmDevice> FsInner<D> {
    /// Before a read of at most one block at `off`: fetches the line of its key's home slot
    /// and the line of the block there that the read starts in (where a block most likely
    /// is, the slot index being the block), so that the table's miss and the block's (its
    /// page walk included) overlap, and both overlap the lock, instead of following one
    /// another once the lookup has found the block. Under the grouped placements, also the
    /// slot in its chunk's home group and the claim filter's word
    /// ([`HashTable::likely_slots`]): the regions placement's cold reads of one block cost
    /// 2.2-4.1x the paper placement's mapping cycles without them and 1.1-1.6x with them
    /// (`bench/results/paper/regions-prefetch/`, docs/mappings.md). Not for
    /// writes: the block's line would have to be evicted again by the streaming stores
    /// (a 4 KiB overwrite took 10% longer), and the slot's line alone changed nothing
    /// measurable (`bench/results/micro/read-prefetch-ab/`).
    #[inline]
    pub(in crate::fs) fn prefetch_home(&self, cell: &InodeCell, off: u64, len: usize) {
        let FileMap::Hash(t) = &self.map else { return };
        if len == 0 || len as u64 > BLOCK_BYTES {
            return;
        }
        if let Some(k) = file_key(cell.ino, Lblk::of_byte(off)) {
            self.prefetch_key_home(t, k, off % BLOCK_BYTES);
        }
    }

    /// Fetches the lines of the slots where `key` most likely is and the line `at` bytes
    /// into the block of each (the slot index being the block).
    #[inline]
    pub(in crate::fs) fn prefetch_key_home(&self, t: &HashTable<D>, key: u64, at: u64) {
        t.likely_slots(key, |s| {
            self.dev.prefetch(t.slot_off(s));
            self.dev.prefetch(self.geo.block_off(Pblk(s)) + at);
        });
    }
}
