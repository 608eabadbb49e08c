//! Measured size and layout of the mapping structure (`hashfs info`): the paper's
//! "mapping structure size" (HashFS §2.1) and the layout score (§4) of the files as they
//! lie on the device, each mapping measured beside it (`fs/hashfs/stats.rs`,
//! `fs/blocks/stats.rs`); on a `ctfs` image, its partition hierarchy (`fs/ctfs/stats.rs`,
//! ctFS §3.1).

#![forbid(unsafe_code)]

use super::api::FileSystem;
use super::verbs::on_map;
use super::FsInner;
use crate::layout::{MappingKind, BLOCK_BYTES};
use crate::pm::PmDevice;
use crate::Result;
use std::collections::HashMap;

/// Each file's (logical, physical, length) runs, by inode number.
pub(crate) type Runs = HashMap<u32, Vec<(u64, u64, u64)>>;

/// How a mapping measures itself for [`FileSystem::mapping_stats`] (implemented beside
/// each mapping: `fs/hashfs/stats.rs`, `fs/blocks/stats.rs`).
pub(crate) trait Measure<D: PmDevice> {
    /// Adds the structure's sizes and entries to `st`, and every file's runs to `runs`.
    fn measure(&self, fs: &FsInner<D>, st: &mut MappingStats, runs: &mut Runs) -> Result<()>;
}

/// What the mapping structure holds and costs.
#[derive(Clone, Debug, Default)]
pub struct MappingStats {
    pub kind: Option<MappingKind>,
    /// Files (inodes) with at least one mapped block.
    pub files: u64,
    /// Mapped data blocks.
    pub data_blocks: u64,
    /// Mapping entries: HashFS and cuckoo keys, radix pointers, extents (trees), pointers
    /// stored for extents (extent hash).
    pub entries: u64,
    /// Bytes those entries occupy.
    pub entry_bytes: u64,
    /// Tree nodes (blocks of the data region).
    pub node_blocks: u64,
    /// The static table region (HashFS, cuckoo, extent hash), allocated at mkfs.
    pub table_bytes: u64,
    /// The allocation bitmap (allocator mappings).
    pub bitmap_bytes: u64,
    /// Fraction of blocks after each file's first that directly follow their
    /// predecessor, over all files (Smith and Seltzer's layout score, block-weighted).
    pub layout_score: f64,
}

impl MappingStats {
    /// Bytes of mapping structure: tree nodes, or the static table.
    pub fn structure_bytes(&self) -> u64 {
        self.node_blocks * BLOCK_BYTES + self.table_bytes
    }
    /// Structure bytes per GiB of mapped data.
    pub fn bytes_per_gib(&self) -> f64 {
        if self.data_blocks == 0 {
            return 0.0;
        }
        self.structure_bytes() as f64 / (self.data_blocks * BLOCK_BYTES) as f64 * (1u64 << 30) as f64
    }
}

/// ctFS's partitions at one level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartitionLevel {
    pub level: u32,
    /// Pages (4 KiB) in one partition of the level.
    pub pages: u64,
    /// Allocated partitions: one per file that maps a block.
    pub files: u64,
    /// Empty partitions.
    pub empty: u64,
}

/// ctFS's virtual space: its partitions, level by level (ctFS §3.1, Fig. 3).
#[derive(Clone, Debug, Default)]
pub struct PartitionStats {
    /// Every level, L0 (4 KiB) to L9 (512 GiB).
    pub levels: Vec<PartitionLevel>,
    /// Pages of the whole space.
    pub space_pages: u64,
}

impl PartitionStats {
    /// Pages of the files' partitions (the virtual space the files hold; read from the
    /// inodes).
    pub fn allocated_pages(&self) -> u64 {
        self.levels.iter().map(|l| l.files * l.pages).sum()
    }
    /// Pages of the Empty partitions (the mounted hierarchy's; the rest of the space is
    /// Partitioned into them).
    pub fn empty_pages(&self) -> u64 {
        self.levels.iter().map(|l| l.empty * l.pages).sum()
    }
}

impl<D: PmDevice> FileSystem<D> {
    /// Walks the whole mapping structure and measures it (takes no file locks: run it on a
    /// quiet file system).
    pub fn mapping_stats(&self) -> Result<MappingStats> {
        let _in = self.inner.enter();
        let inner = &self.inner;
        let mut st = MappingStats { kind: Some(inner.map.kind()), ..Default::default() };
        // Per file: (logical, physical, length) runs.
        let mut runs = Runs::new();
        on_map!(inner, m => m.measure(inner, &mut st, &mut runs))?;
        let (mut follow, mut pairs) = (0u64, 0u64);
        for (_, mut r) in runs {
            r.sort_unstable();
            st.files += 1;
            let mut prev: Option<u64> = None;
            for (_, p, len) in r {
                st.data_blocks += len;
                if let Some(q) = prev {
                    pairs += 1;
                    follow += u64::from(p == q + 1);
                }
                pairs += len - 1;
                follow += len - 1;
                prev = Some(p + len - 1);
            }
        }
        st.layout_score = if pairs == 0 { 1.0 } else { follow as f64 / pairs as f64 };
        Ok(st)
    }
}
