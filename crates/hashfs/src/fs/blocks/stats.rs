//! The structures behind the block allocator measured for `hashfs info`
//! ([`FileSystem::mapping_stats`]): each structure's entries, nodes and static tables.
//!
//! [`FileSystem::mapping_stats`]: crate::fs::FileSystem::mapping_stats

#![forbid(unsafe_code)]

use crate::fs::inode::read_raw;
use crate::fs::stats::{MappingStats, Measure, Runs};
use crate::fs::FsInner;
use crate::layout::inode::InodeState;
use crate::layout::superblock::bitmap_bytes;
use crate::layout::{round_up, Ino, InodeRaw, BLOCK_BYTES};
use crate::mapping::{BlockMap, Mapped};
use crate::pm::PmDevice;
use crate::Result;

impl<D: PmDevice> Measure<D> for BlockMap<D> {
    /// The allocator's bitmap and the structure's static table; every entry the walk
    /// reports, priced by its structure, and every node.
    fn measure(&self, fs: &FsInner<D>, st: &mut MappingStats, runs: &mut Runs) -> Result<()> {
        st.bitmap_bytes = round_up(bitmap_bytes(fs.geo.data_blocks), BLOCK_BYTES);
        st.table_bytes = self.table_bytes();
        let mut record = |m: Mapped, st: &mut MappingStats| match m {
            Mapped::Data { ino, ext } => {
                let (lblk, len) = (ext.lblk.0, ext.len);
                runs.entry(ino.0).or_default().push((lblk, ext.pblk.0, len));
                let (n, bytes) = self.entries_for(ext.lblk, len);
                st.entries += n;
                st.entry_bytes += n * bytes;
            }
            Mapped::Node { .. } => st.node_blocks += 1,
        };
        if self.is_global() {
            let dummy: InodeRaw = bytemuck::Zeroable::zeroed();
            let _g = self.commit.lock(); // the extent-hash scan must not race inserts
            self.walk(Ino(0), &dummy, &mut |m| record(m, st))?;
        } else {
            for i in 1..=fs.geo.inode_count {
                let ino = Ino(i as u32);
                let raw = read_raw(&*fs.dev, &fs.geo, ino);
                if raw.check(ino) == InodeState::Allocated {
                    self.walk(ino, &raw, &mut |m| record(m, st))?;
                }
            }
            self.walk_shared(&mut |m| record(m, st))?;
        }
        Ok(())
    }
}
