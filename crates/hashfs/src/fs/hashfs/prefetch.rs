//! HashFS's read prefetch: the key's home slot and the block there, fetched before the
//! file's lock.

#![forbid(unsafe_code)]

use crate::fs::inode::InodeCell;
use crate::fs::FsInner;
use crate::layout::{Lblk, Pblk, BLOCK_BYTES};
use crate::mapping::hashfs::{file_key, HashTable};
use crate::mapping::FileMap;
use crate::pm::PmDevice;

impl<D: PmDevice> FsInner<D> {
    /// Before a read of at most one block at `off` under HashFS's paper placement: fetches
    /// the line of its key's home slot and the line of the block there that the read starts
    /// in (where a block most likely is, the slot index being the block), so that the
    /// table's miss and the block's (its page walk included) overlap, and both overlap the
    /// lock, instead of following one another once the lookup has found the block. Not for
    /// writes: the block's line would have to be evicted again by the streaming stores
    /// (a 4 KiB overwrite took 10% longer), and the slot's line alone changed nothing
    /// measurable (`bench/results/micro/read-prefetch-ab/`).
    #[inline]
    pub(in crate::fs) fn prefetch_home(&self, cell: &InodeCell, off: u64, len: usize) {
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
    pub(in crate::fs) fn prefetch_key_home(&self, t: &HashTable<D>, key: u64, at: u64) {
        let home = t.home(key);
        self.dev.prefetch(t.slot_off(home));
        self.dev.prefetch(self.geo.block_off(Pblk(home)) + at);
    }
}
