//! Measured size and layout of the mapping structure (`hashfs info`): the paper's
//! "mapping structure size" (HashFS §2.1) and the layout score (§4) of the files as they
//! lie on the device; on a `ctfs` image, its partition hierarchy (ctFS §3.1).

#![forbid(unsafe_code)]

use super::api::FileSystem;
use super::inode::read_raw;
use crate::layout::inode::InodeState;
use crate::layout::mapping::ctfs::{partition_pages, LEVELS, SPACE_PAGES};
use crate::layout::superblock::{bitmap_bytes, map_region_bytes};
use crate::layout::{round_up, Ino, InodeRaw, MappingKind, BLOCK_BYTES};
use crate::mapping::ctfs::partition::Partition;
use crate::mapping::hashfs::{classify, Entry};
use crate::mapping::{cuckoo, extent_hash, extent_tree, FileMap, Mapped};
use crate::pm::PmDevice;
use crate::Result;
use std::collections::HashMap;

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
    /// ctFS's partitions (None on an image of another mapping): the files' partitions read
    /// from the inodes, the Empty ones from the mounted hierarchy. Takes no file locks: run
    /// it on a quiet file system.
    pub fn partition_stats(&self) -> Result<Option<PartitionStats>> {
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

    /// Walks the whole mapping structure and measures it (takes no file locks: run it on a
    /// quiet file system).
    pub fn mapping_stats(&self) -> Result<MappingStats> {
        let inner = &self.inner;
        let geo = inner.geo;
        let mut st = MappingStats { kind: Some(inner.map.kind()), ..Default::default() };
        // Per file: (logical, physical, length) runs.
        let mut runs: HashMap<u32, Vec<(u64, u64, u64)>> = HashMap::new();
        match &inner.map {
            FileMap::Hash(t) => {
                st.table_bytes = map_region_bytes(MappingKind::HashFs, geo.data_blocks, geo.groups > 0);
                for s in 0..t.nslots() {
                    if let Entry::Key { ino, lblk } = classify(t.load(s), t.nslots()) {
                        runs.entry(ino).or_default().push((lblk as u64, s, 1));
                        st.entries += 1;
                    }
                }
                st.entry_bytes = st.entries * 8;
            }
            FileMap::Blocks(b) => {
                st.bitmap_bytes = round_up(bitmap_bytes(geo.data_blocks), BLOCK_BYTES);
                st.table_bytes = b.table_bytes();
                let mut record = |m: Mapped, st: &mut MappingStats| match m {
                    Mapped::Data { ino, ext } => {
                        let (lblk, len) = (ext.lblk.0, ext.len);
                        runs.entry(ino.0).or_default().push((lblk, ext.pblk.0, len));
                        let (n, bytes) = match b.kind {
                            MappingKind::Cuckoo => (len, cuckoo::ENTRY_BYTES),
                            MappingKind::RadixTree => (len, 8),
                            // A page-table entry per page (a 2 MiB leaf counts 512: the walk
                            // does not tell them apart).
                            MappingKind::Ctfs => (len, 8),
                            MappingKind::ExtentHash => (
                                match (u32::try_from(lblk), u32::try_from(len)) {
                                    (Ok(l), Ok(n)) => extent_hash::insert_positions(l, n).len() as u64,
                                    _ => 0, // past the largest file: walk reports no such extent
                                },
                                extent_hash::ENTRY_BYTES,
                            ),
                            _ => (1, extent_tree::ENTRY_BYTES),
                        };
                        st.entries += n;
                        st.entry_bytes += n * bytes;
                    }
                    Mapped::Node { .. } => st.node_blocks += 1,
                };
                if b.is_global() {
                    let dummy: InodeRaw = bytemuck::Zeroable::zeroed();
                    let _g = b.commit.lock(); // the extent-hash scan must not race inserts
                    b.walk(Ino(0), &dummy, &mut |m| record(m, &mut st))?;
                } else {
                    for i in 1..=geo.inode_count {
                        let ino = Ino(i as u32);
                        let raw = read_raw(&*inner.dev, &geo, ino);
                        if raw.check(ino) == InodeState::Allocated {
                            b.walk(ino, &raw, &mut |m| record(m, &mut st))?;
                        }
                    }
                    b.walk_shared(&mut |m| record(m, &mut st))?;
                }
            }
        }
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
