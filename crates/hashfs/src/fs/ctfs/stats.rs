//! ctFS's partition hierarchy as `hashfs info` reports it (ctFS §3.1, Fig. 3).

#![forbid(unsafe_code)]

use crate::fs::api::FileSystem;
use crate::fs::inode::read_raw;
use crate::fs::stats::{PartitionLevel, PartitionStats};
use crate::layout::inode::InodeState;
use crate::layout::mapping::ctfs::{partition_pages, LEVELS, SPACE_PAGES};
use crate::layout::Ino;
use crate::mapping::ctfs::partition::Partition;
use crate::mapping::FileMap;
use crate::pm::PmDevice;
use crate::Result;

impl<D: PmDevice> FileSystem<D> {
    /// ctFS's partitions (None on an image of another mapping): the files' partitions read
    /// from the inodes, the Empty ones from the mounted hierarchy. Takes no file locks: run
    /// it on a quiet file system.
    pub fn partition_stats(&self) -> Result<Option<PartitionStats>> {
        let _in = self.inner.enter();
        let inner = &self.inner;
        let FileMap::Blocks(b) = &inner.map else { return Ok(None) };
        let Some(ctfs) = b.ctfs() else { return Ok(None) };
        let mut levels: Vec<PartitionLevel> = (0..LEVELS)
            .map(|level| PartitionLevel { level, pages: partition_pages(level), ..Default::default() })
            .collect();
        for i in 1..=inner.geo.inode_count {
            let ino = Ino(i as u32);
            let raw = read_raw(&*inner.dev, &inner.geo, ino);
            // A special file's map area holds its device number, not a partition.
            if raw.check(ino) != InodeState::Allocated || raw.is_special() {
                continue;
            }
            if let Some(p) = Partition::from_word(raw.ctfs_partition())? {
                levels[p.level as usize].files += 1;
            }
        }
        let parts = ctfs.parts.lock();
        for l in &mut levels {
            l.empty = parts.empty_at(l.level);
        }
        Ok(Some(PartitionStats { levels, space_pages: SPACE_PAGES }))
    }
}
