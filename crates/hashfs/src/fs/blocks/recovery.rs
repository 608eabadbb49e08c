//! Mount's recovery on the mappings behind the block allocator: what a crash left mapped
//! past a file's end, or to a free inode, is unmapped once the file system exists.

#![forbid(unsafe_code)]

use crate::fs::inode::{self, InodeCell};
use crate::fs::recovery::{RecoverVerbs, FREE};
use crate::fs::FsInner;
use crate::layout::{Ino, Lblk};
use crate::mapping::BlockMap;
use crate::pm::PmDevice;
use crate::Result;

impl<D: PmDevice> RecoverVerbs<D> for BlockMap<D> {
    /// None: the structures' strays are ranges, unmapped below.
    fn drop_stray_slots(&self, _slots: &[u64]) {}

    fn unmap_stray_ranges(&self, fs: &FsInner<D>, ranges: &[(u32, u64)], sizes: &[u64]) -> Result<()> {
        for &(ino, from) in ranges {
            let free = sizes[ino as usize] == FREE;
            let raw = if free { bytemuck::Zeroable::zeroed() } else { inode::read_raw(&*fs.dev, &fs.geo, Ino(ino)) };
            let cell = InodeCell::new(Ino(ino), raw);
            let mut st = cell.state.write();
            fs.unmap_blocks_of(self, &cell, &mut st, Lblk(from), Lblk(1 << 32), !free)?;
        }
        Ok(())
    }

    /// Nothing to repair: a structure's change is whole after the journal's rollback.
    fn repair_after_crash(&self, _fs: &FsInner<D>) -> u64 {
        0
    }
}
