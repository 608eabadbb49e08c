//! The HashFS table measured for `hashfs info` ([`FileSystem::mapping_stats`]).
//!
//! [`FileSystem::mapping_stats`]: crate::fs::FileSystem::mapping_stats

#![forbid(unsafe_code)]

use crate::fs::stats::{MappingStats, Measure, Runs};
use crate::fs::FsInner;
use crate::layout::superblock::map_region_bytes;
use crate::layout::MappingKind;
use crate::mapping::hashfs::{classify, Entry, HashTable};
use crate::pm::PmDevice;
use crate::Result;

impl<D: PmDevice> Measure<D> for HashTable<D> {
    /// The static table, one 8-byte key per mapped block, each block a run of one.
    fn measure(&self, fs: &FsInner<D>, st: &mut MappingStats, runs: &mut Runs) -> Result<()> {
        st.table_bytes = map_region_bytes(MappingKind::HashFs, fs.geo.data_blocks, fs.geo.groups > 0);
        for s in 0..self.nslots() {
            if let Entry::Key { ino, lblk } = classify(self.load(s), self.nslots()) {
                runs.entry(ino).or_default().push((lblk as u64, s, 1));
                st.entries += 1;
            }
        }
        st.entry_bytes = st.entries * 8;
        Ok(())
    }
}
