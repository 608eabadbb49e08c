//! The superblock (two copies: blocks 0 and 1) and the geometry it records.

#![forbid(unsafe_code)]

use super::journal::{ENTRY_BYTES, JOURNAL_HEADER_BYTES};
use super::mapping::hashfs::GROUP_SLOTS;
use super::{round_up, BLOCK_BYTES, HUGE_ALIGN_BYTES, INODE_BYTES, MAX_DATA_BLOCKS, MAX_INODES};
use crate::pm::DevOffset;
use crate::{Error, Result};
use bytemuck::{Pod, Zeroable};

pub const MAGIC: u64 = u64::from_le_bytes(*b"HASHFS\0\x01");
/// Version 2 added the mapping kinds other than HashFS and the layout score; a version-1
/// image (HashFS only, the new fields zero) reads as version 2. Version 3 added FIFOs,
/// devices and sockets (a device number in the mapping area of special inodes) and extended
/// attributes (`xattr_ino`, attribute inodes); older images hold none and read as version 3,
/// and a mount by this build stamps version 3, so that an older build refuses the image
/// once it may hold them. Version 4 leaves an inode's size and block count out of its
/// checksum (appends store them in place); older inodes' sums are still accepted, and a
/// mount stamps version 4 so that an older build, which would take every resealed inode
/// for corrupt, refuses the image. Version 5 lets a small append store its size tagged
/// with a check of its bytes (`fs/hashfs/append_tag.rs`), which an older build would take for a
/// size beyond any file after a crash; version-4 images hold no tags. Version 6 keeps the
/// bytes past EOF in a file's last block zero (invariant F2, `fs/eof_tail.rs`), which
/// older builds let be stale: the first mount of an older image by this build zeroes them
/// (as recovery after a crash does) and stamps version 6, so that an older build, which
/// would let them be stale again, refuses the image.
pub const FORMAT_VERSION: u32 = 6;

/// The first format version whose images keep F2 (bytes past EOF zero).
pub const FORMAT_ZEROED_TAILS: u32 = 6;
pub const SB_STATE_CLEAN: u32 = 1;
pub const SB_STATE_MOUNTED: u32 = 2;
/// Byte offsets of the two superblock copies.
pub const SB_PRIMARY_OFF: DevOffset = DevOffset(0);
pub const SB_SECONDARY_OFF: DevOffset = DevOffset(BLOCK_BYTES);

/// Which file-mapping structure the image uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MappingKind {
    /// The global linear-probing hash table of the HashFS paper, §3.2.2.
    HashFs = 1,
    /// Per-file B-tree of extents (HashFS paper §3.1.1).
    ExtentTree = 2,
    /// The same extent tree read through a DRAM cache of its nodes (Strata, §4.7).
    ExtentTreeCached = 3,
    /// Per-file radix tree of 4 KiB nodes (§3.1.2).
    RadixTree = 4,
    /// Global cuckoo hash table with ranged entries (§3.2.1).
    Cuckoo = 5,
    /// SPFS Extent Hashing (SPFS §4.2).
    ExtentHash = 6,
    /// ctFS: each file contiguous in a virtual partition, translated by a persistent page
    /// table (ctFS §3).
    Ctfs = 7,
}

impl MappingKind {
    pub const ALL: [MappingKind; 7] = {
        let p = MappingKind::PAPER;
        [p[0], p[1], p[2], p[3], p[4], p[5], MappingKind::Ctfs]
    };
    /// The mappings of the HashFS paper's evaluation (the paper benchmark's default).
    pub const PAPER: [MappingKind; 6] = [
        MappingKind::HashFs,
        MappingKind::ExtentTree,
        MappingKind::ExtentTreeCached,
        MappingKind::RadixTree,
        MappingKind::Cuckoo,
        MappingKind::ExtentHash,
    ];

    pub fn from_u32(v: u32) -> Option<MappingKind> {
        MappingKind::ALL.into_iter().find(|m| *m as u32 == v)
    }
    pub fn name(self) -> &'static str {
        match self {
            MappingKind::HashFs => "hashfs",
            MappingKind::ExtentTree => "extent-tree",
            MappingKind::ExtentTreeCached => "extent-tree-cached",
            MappingKind::RadixTree => "radix-tree",
            MappingKind::Cuckoo => "cuckoo",
            MappingKind::ExtentHash => "extent-hash",
            MappingKind::Ctfs => "ctfs",
        }
    }
    pub fn from_name(s: &str) -> Option<MappingKind> {
        MappingKind::ALL.into_iter().find(|m| m.name() == s)
    }
    /// Whether blocks come from the bitmap allocator (every mapping but HashFS, whose
    /// table allocates).
    pub fn uses_allocator(self) -> bool {
        self != MappingKind::HashFs
    }
}

/// How the block-allocating mappings choose blocks (`Superblock::allocator`): the
/// persistent bitmap is the same for both; only the DRAM policy differs (`crate::alloc`).
/// Images made before the field existed read 0, the bitmap policy they were made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum AllocatorKind {
    /// The HashFS paper's baseline, with the fragmentation generator.
    Bitmap = 0,
    /// WineFS's alignment-aware allocator.
    Aligned = 1,
}

impl AllocatorKind {
    pub const ALL: [AllocatorKind; 2] = [AllocatorKind::Bitmap, AllocatorKind::Aligned];

    pub fn from_u32(v: u32) -> Option<AllocatorKind> {
        AllocatorKind::ALL.into_iter().find(|a| *a as u32 == v)
    }
    pub fn name(self) -> &'static str {
        match self {
            AllocatorKind::Bitmap => "bitmap",
            AllocatorKind::Aligned => "aligned",
        }
    }
    pub fn from_name(s: &str) -> Option<AllocatorKind> {
        AllocatorKind::ALL.into_iter().find(|a| a.name() == s)
    }
}

/// Where the HashFS table places a block (`Superblock::placement`). Images made before
/// the field existed read 0, the paper's placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum HashPlacement {
    /// Every block at (or after) the slot its key hashes to (HashFS paper §3.2.2).
    Paper = 0,
    /// Whole 2 MiB logical chunks of a file in whole 2 MiB groups of slots, found through a
    /// group directory (`mapping/hashfs/groups.rs`); everything else as the paper's.
    Grouped = 1,
    /// The grouped placement's chunks, and every other block in a region of whole open
    /// groups that grows a few groups at a time (`mapping/hashfs/regions.rs`).
    Regions = 2,
}

impl HashPlacement {
    pub const ALL: [HashPlacement; 3] = [HashPlacement::Paper, HashPlacement::Grouped, HashPlacement::Regions];

    /// Whether an image of `mapping` with this placement keeps group directories (the
    /// placements are HashFS's table's; every other mapping ignores them).
    pub fn grouped_on(self, mapping: MappingKind) -> bool {
        self != HashPlacement::Paper && mapping == MappingKind::HashFs
    }

    pub fn from_u32(v: u32) -> Option<HashPlacement> {
        HashPlacement::ALL.into_iter().find(|a| *a as u32 == v)
    }
    pub fn name(self) -> &'static str {
        match self {
            HashPlacement::Paper => "paper",
            HashPlacement::Grouped => "grouped",
            HashPlacement::Regions => "regions",
        }
    }
    pub fn from_name(s: &str) -> Option<HashPlacement> {
        HashPlacement::ALL.into_iter().find(|a| a.name() == s)
    }
    /// [`from_name`](Self::from_name), with the error a command line prints.
    pub fn parse(s: &str) -> std::result::Result<HashPlacement, String> {
        HashPlacement::from_name(s).ok_or_else(|| format!("unknown placement {s:?} (choose paper, grouped or regions)"))
    }
}

/// Whether a write can be torn by a crash (`Superblock::write_mode`, the default of a
/// mount; `mount -o strict|relaxed` overrides it for one mount).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum WriteMode {
    /// The papers' default: an overwrite of mapped blocks may leave some bytes old and
    /// some new after a crash; a write that maps only new blocks is whole or absent.
    Relaxed = 0,
    /// Every write of up to the untorn-write limit is whole or absent after a crash
    /// (`fs/untorn.rs`).
    Strict = 1,
}

impl WriteMode {
    pub const ALL: [WriteMode; 2] = [WriteMode::Relaxed, WriteMode::Strict];

    pub fn from_u32(v: u32) -> Option<WriteMode> {
        WriteMode::ALL.into_iter().find(|a| *a as u32 == v)
    }
    pub fn name(self) -> &'static str {
        match self {
            WriteMode::Relaxed => "relaxed",
            WriteMode::Strict => "strict",
        }
    }
    pub fn from_name(s: &str) -> Option<WriteMode> {
        WriteMode::ALL.into_iter().find(|a| a.name() == s)
    }
}

/// Cuckoo table: 4 entries of 16 bytes (one cache line) per bucket, sized for 1.11
/// entries per data block.
pub const CUCKOO_BUCKET_BYTES: u64 = 64;
pub fn cuckoo_buckets(data_blocks: u64) -> u64 {
    (data_blocks * 10).div_ceil(36).max(2)
}
/// Extent-hash table: 32-byte entries, 1.125 per data block (every extent one block
/// long, the worst case, still leaves the table 89% full).
pub const EXTENT_HASH_ENTRY_BYTES: u64 = 32;
pub fn extent_hash_slots(data_blocks: u64) -> u64 {
    (data_blocks + data_blocks / 8).max(64)
}

/// Bytes of the allocation bitmap (whole 8-byte words) for `blocks` blocks.
pub fn bitmap_bytes(blocks: u64) -> u64 {
    blocks.div_ceil(64) * 8
}

/// The superblock: 512 bytes at offset 0, copied at offset 4096.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable, PartialEq, Eq)]
pub struct Superblock {
    pub magic: u64,
    pub format_version: u32,
    pub mapping_kind: u32,
    pub block_size: u32,
    pub journal_count: u32,
    pub journal_blocks: u32,
    /// SB_STATE_CLEAN after an orderly unmount, SB_STATE_MOUNTED while in use.
    pub state: u32,
    pub image_size_bytes: u64,
    pub inode_count: u64,
    pub journal_off: u64,
    pub inode_table_off: u64,
    pub map_off: u64,
    pub data_off: u64,
    pub data_blocks: u64,
    pub hash_seed: u64,
    pub created_ns: i64,
    pub mount_count: u64,
    pub uuid: [u8; 16],
    /// The fragmentation generator's layout score in millionths (allocator mappings).
    pub layout_score_ppm: u32,
    /// [`AllocatorKind`] (block-allocating mappings; 0 on HashFS images).
    pub allocator: u32,
    /// [`HashPlacement`] (HashFS images; 0 on the others and on images made before it).
    pub placement: u32,
    /// [`WriteMode`] a mount starts in (0, relaxed, on images made before it).
    pub write_mode: u32,
    /// The regions placement's target load of its open groups, in millionths (0 on
    /// images made before it: the default, `mapping/hashfs/regions.rs`).
    pub region_load_ppm: u32,
    pub reserved_u32: u32,
    /// What a clean unmount left (`Superblock::summary`): inodes in use, HashFS's table's
    /// slots in use, and the mount count they were taken at (0: none). Older builds keep
    /// these words as they find them and count their mounts, so what they leave is never
    /// taken for the image's.
    pub summary_inodes: u64,
    pub summary_slots: u64,
    pub summary_stamp: u64,
    pub reserved: [u64; 41],
    /// CRC32C of bytes 0..504.
    pub checksum: u32,
    pub reserved_tail: u32,
}

pub const SUPERBLOCK_BYTES: usize = 512;
const _: () = assert!(std::mem::size_of::<Superblock>() == SUPERBLOCK_BYTES);
const _: () = assert!(std::mem::offset_of!(Superblock, checksum) == 504);
const _: () = assert!(std::mem::offset_of!(Superblock, placement) == 136);
const _: () = assert!(std::mem::offset_of!(Superblock, write_mode) == 140);

/// A clean unmount's counts (`Superblock::summary`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    pub inodes: u64,
    pub slots: u64,
}

impl Superblock {
    /// The counts the last clean unmount left, if they describe the image as it is: the
    /// image is clean and they were taken at this mount count (every writable mount,
    /// of any build, adds one to it). A participant that runs first on a shared mount
    /// takes them instead of reading the tables (`fs/recovery.rs`); a mount that reads
    /// the tables checks them.
    pub fn summary(&self) -> Option<Summary> {
        let fresh = self.state == SB_STATE_CLEAN && self.summary_stamp != 0 && self.summary_stamp == self.mount_count;
        fresh.then_some(Summary { inodes: self.summary_inodes, slots: self.summary_slots })
    }

    /// Records `summary` at this mount count (or none), for a clean unmount to write.
    pub fn set_summary(&mut self, summary: Option<Summary>) {
        let Summary { inodes, slots } = summary.unwrap_or(Summary { inodes: 0, slots: 0 });
        self.summary_inodes = inodes;
        self.summary_slots = slots;
        self.summary_stamp = if summary.is_some() { self.mount_count } else { 0 };
    }

    pub fn compute_checksum(&self) -> u32 {
        crc32c::crc32c(&bytemuck::bytes_of(self)[..504])
    }
    pub fn seal(&mut self) {
        self.checksum = self.compute_checksum();
    }

    /// Checks magic, version, checksum and that the geometry fits `image_len` and is the
    /// geometry that `Geometry::compute` would give; the first problem found is returned.
    pub fn validate(&self, image_len: u64) -> Result<Geometry> {
        if self.magic != MAGIC {
            return Err(Error::corrupt("superblock: bad magic (not a HashFS image)"));
        }
        if self.checksum != self.compute_checksum() {
            return Err(Error::corrupt("superblock: checksum mismatch"));
        }
        if !(1..=FORMAT_VERSION).contains(&self.format_version) {
            return Err(Error::corrupt(format!(
                "superblock: format version {} (this build reads {FORMAT_VERSION})",
                self.format_version
            )));
        }
        let Some(mapping) = MappingKind::from_u32(self.mapping_kind) else {
            return Err(Error::corrupt(format!("superblock: unknown mapping kind {}", self.mapping_kind)));
        };
        if self.layout_score_ppm > 1_000_000 {
            return Err(Error::corrupt(format!("superblock: layout score {} ppm", self.layout_score_ppm)));
        }
        match AllocatorKind::from_u32(self.allocator) {
            None => return Err(Error::corrupt(format!("superblock: unknown allocator {}", self.allocator))),
            Some(AllocatorKind::Aligned) if self.layout_score_ppm != 1_000_000 || mapping == MappingKind::HashFs => {
                return Err(Error::corrupt("superblock: aligned allocator with a layout score, or on a HashFS image"));
            }
            _ => {}
        }
        let grouped = match HashPlacement::from_u32(self.placement) {
            None => return Err(Error::corrupt(format!("superblock: unknown placement {}", self.placement))),
            Some(HashPlacement::Grouped | HashPlacement::Regions) if mapping != MappingKind::HashFs => {
                return Err(Error::corrupt("superblock: grouped placement on an image that is not HashFS"));
            }
            Some(p) => p != HashPlacement::Paper,
        };
        if self.region_load_ppm != 0 && !(10_000..=950_000).contains(&self.region_load_ppm) {
            return Err(Error::corrupt(format!("superblock: region load {} ppm", self.region_load_ppm)));
        }
        if WriteMode::from_u32(self.write_mode).is_none() {
            return Err(Error::corrupt(format!("superblock: unknown write mode {}", self.write_mode)));
        }
        if self.block_size as u64 != BLOCK_BYTES {
            return Err(Error::corrupt("superblock: block size is not 4096"));
        }
        if self.image_size_bytes != image_len {
            return Err(Error::corrupt(format!(
                "superblock: image is {image_len} bytes but the superblock says {} (truncated or extended image)",
                self.image_size_bytes
            )));
        }
        let g = Geometry::compute(&GeometryParams {
            image_bytes: self.image_size_bytes,
            inode_count: Some(self.inode_count),
            journal_count: self.journal_count,
            journal_blocks: self.journal_blocks,
            mapping,
            grouped,
        })
        .map_err(|e| Error::corrupt(format!("superblock: geometry invalid: {e}")))?;
        if g.journal_off != self.journal_off
            || g.inode_table_off != self.inode_table_off
            || g.map_off != self.map_off
            || g.data_off != self.data_off
            || g.data_blocks != self.data_blocks
        {
            return Err(Error::corrupt("superblock: region offsets do not match the geometry"));
        }
        if !matches!(self.state, SB_STATE_CLEAN | SB_STATE_MOUNTED) {
            return Err(Error::corrupt(format!("superblock: unknown state {}", self.state)));
        }
        Ok(g)
    }
}

/// Inputs to the layout computation.
#[derive(Clone, Copy, Debug)]
pub struct GeometryParams {
    pub image_bytes: u64,
    /// None: one inode per 16 KiB of image.
    pub inode_count: Option<u64>,
    pub journal_count: u32,
    pub journal_blocks: u32,
    pub mapping: MappingKind,
    /// HashFS with the grouped placement: a group directory follows the table.
    pub grouped: bool,
}

/// Where every region of the image lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub image_bytes: u64,
    pub journal_count: u32,
    pub journal_blocks: u32,
    pub journal_off: u64,
    pub inode_count: u64,
    pub inode_table_off: u64,
    /// The mapping region: the HashFS table, or the allocation bitmap followed by the
    /// structure's table (cuckoo, extent hash) if it has one.
    pub map_off: u64,
    pub data_off: u64,
    pub data_blocks: u64,
    pub mapping: MappingKind,
    /// Grouped placement: the 2 MiB groups of slots (whole ones; 0 with the paper's).
    pub groups: u64,
}

pub const MIN_DATA_BLOCKS: u64 = 16;
pub const MAX_JOURNALS: u32 = 256;
pub const MIN_JOURNAL_BLOCKS: u32 = 2;
pub const MAX_JOURNAL_BLOCKS: u32 = 1024;

impl Geometry {
    pub fn compute(p: &GeometryParams) -> std::result::Result<Geometry, String> {
        if p.journal_count == 0 || p.journal_count > MAX_JOURNALS {
            return Err(format!("journal count must be 1..={MAX_JOURNALS}"));
        }
        if !(MIN_JOURNAL_BLOCKS..=MAX_JOURNAL_BLOCKS).contains(&p.journal_blocks) {
            return Err(format!("journal size must be {MIN_JOURNAL_BLOCKS}..={MAX_JOURNAL_BLOCKS} blocks"));
        }
        if !p.image_bytes.is_multiple_of(BLOCK_BYTES) {
            return Err("image size must be a multiple of 4096 bytes".into());
        }
        let inode_count = p.inode_count.unwrap_or((p.image_bytes / 16384).clamp(16, MAX_INODES));
        if inode_count == 0 || inode_count > MAX_INODES {
            return Err(format!("inode count must be 1..={MAX_INODES}"));
        }
        let journal_off = 2 * BLOCK_BYTES;
        let journal_bytes = p.journal_count as u64 * p.journal_blocks as u64 * BLOCK_BYTES;
        let inode_table_off = journal_off + journal_bytes;
        let inode_table_bytes = round_up(inode_count * INODE_BYTES as u64, BLOCK_BYTES);
        let map_off = inode_table_off + inode_table_bytes;
        // Grouped placement: groups are whole aligned 2 MiB, whatever the image's size.
        let align = if p.image_bytes >= 64 * 1024 * 1024 || p.grouped { HUGE_ALIGN_BYTES } else { BLOCK_BYTES };
        if p.grouped && p.mapping != MappingKind::HashFs {
            return Err("the grouped placement is HashFS's".into());
        }
        let too_small = || format!("image of {} bytes is too small for its metadata", p.image_bytes);
        let rest = p.image_bytes.checked_sub(map_off).ok_or_else(too_small)?;
        let per_block = match p.mapping {
            MappingKind::HashFs => 8,
            MappingKind::Cuckoo => 19,
            MappingKind::ExtentHash => 37,
            _ => 1,
        };
        let mut data_blocks = (rest / (BLOCK_BYTES + per_block)).min(MAX_DATA_BLOCKS);
        let data_off = |n: u64| round_up(map_off + map_region_bytes(p.mapping, n, p.grouped), align);
        while data_blocks > 0 && data_off(data_blocks) + data_blocks * BLOCK_BYTES > p.image_bytes {
            data_blocks -= 1;
        }
        if data_blocks < MIN_DATA_BLOCKS {
            return Err(too_small());
        }
        if p.grouped && data_blocks < GROUP_SLOTS {
            return Err(format!("image of {} bytes is too small for one 2 MiB group of slots", p.image_bytes));
        }
        Ok(Geometry {
            image_bytes: p.image_bytes,
            journal_count: p.journal_count,
            journal_blocks: p.journal_blocks,
            journal_off,
            inode_count,
            inode_table_off,
            map_off,
            data_off: data_off(data_blocks),
            data_blocks,
            mapping: p.mapping,
            groups: if p.grouped { data_blocks / GROUP_SLOTS } else { 0 },
        })
    }

    pub fn journal_entries(&self) -> u64 {
        (self.journal_blocks as u64 * BLOCK_BYTES - JOURNAL_HEADER_BYTES) / ENTRY_BYTES
    }

    pub fn journal_base(&self, index: u32) -> DevOffset {
        DevOffset(self.journal_off + index as u64 * self.journal_blocks as u64 * BLOCK_BYTES)
    }

    /// Whether `len` blocks from `pblk` lie inside the data area (a number read from a
    /// damaged image may name any block; none outside is followed).
    pub fn holds_blocks(&self, pblk: super::Pblk, len: u64) -> bool {
        pblk.0.checked_add(len).is_some_and(|end| end <= self.data_blocks)
    }

    pub fn inode_off(&self, ino: super::Ino) -> DevOffset {
        let ino = u64::from(ino.0);
        debug_assert!(ino >= 1 && ino <= self.inode_count);
        DevOffset(self.inode_table_off + (ino - 1) * INODE_BYTES as u64)
    }

    pub fn slot_off(&self, slot: u64) -> DevOffset {
        DevOffset(self.map_off + slot * 8)
    }

    /// The group directory after the HashFS table (grouped placement): one word per group.
    pub fn group_dir_off(&self) -> DevOffset {
        DevOffset(self.map_off + round_up(self.data_blocks * 8, BLOCK_BYTES))
    }

    /// The allocation bitmap (allocator mappings).
    pub fn bitmap_off(&self) -> DevOffset {
        DevOffset(self.map_off)
    }

    /// The structure's table after the bitmap (cuckoo, extent hash).
    pub fn struct_off(&self) -> DevOffset {
        DevOffset(self.map_off + round_up(bitmap_bytes(self.data_blocks), BLOCK_BYTES))
    }

    pub fn block_off(&self, pblk: super::Pblk) -> DevOffset {
        DevOffset(self.data_off + pblk.0 * BLOCK_BYTES)
    }

    /// Bytes of the mapping region (table, bitmap) per GiB of data region: the static part
    /// of the mapping's size (tree nodes live in data blocks and are counted by
    /// `hashfs info`).
    pub fn mapping_bytes_per_gib(&self) -> f64 {
        let region = map_region_bytes(self.mapping, self.data_blocks, self.groups > 0) as f64;
        region / (self.data_blocks as f64 * BLOCK_BYTES as f64) * (1u64 << 30) as f64
    }
}

/// Bytes of the mapping region for `n` data blocks (`grouped`: with the group directory).
pub fn map_region_bytes(mapping: MappingKind, n: u64, grouped: bool) -> u64 {
    let bitmap = round_up(bitmap_bytes(n), BLOCK_BYTES);
    let dir = if grouped { round_up(n / GROUP_SLOTS * 8, BLOCK_BYTES) } else { 0 };
    match mapping {
        MappingKind::HashFs => round_up(n * 8, BLOCK_BYTES) + dir,
        MappingKind::Cuckoo => bitmap + round_up(cuckoo_buckets(n) * CUCKOO_BUCKET_BYTES, BLOCK_BYTES),
        MappingKind::ExtentHash => bitmap + round_up(extent_hash_slots(n) * EXTENT_HASH_ENTRY_BYTES, BLOCK_BYTES),
        MappingKind::ExtentTree | MappingKind::ExtentTreeCached | MappingKind::RadixTree => bitmap,
        MappingKind::Ctfs => bitmap + crate::layout::mapping::ctfs::ROOT_BYTES,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(bytes: u64) -> GeometryParams {
        GeometryParams {
            image_bytes: bytes,
            inode_count: None,
            journal_count: 4,
            journal_blocks: 4,
            mapping: MappingKind::HashFs,
            grouped: false,
        }
    }

    #[test]
    fn regions_are_ordered_and_fit() {
        for (mib, mapping) in [1u64, 8, 64, 100, 1024].into_iter().flat_map(|m| MappingKind::ALL.map(|k| (m, k))) {
            let g = Geometry::compute(&GeometryParams { mapping, ..params(mib << 20) }).unwrap();
            assert!(g.journal_off < g.inode_table_off);
            assert!(g.inode_table_off < g.map_off);
            assert!(g.map_off + map_region_bytes(mapping, g.data_blocks, false) <= g.data_off);
            assert!(g.data_off + g.data_blocks * BLOCK_BYTES <= g.image_bytes);
            assert_eq!(g.data_off % BLOCK_BYTES, 0);
            if mib >= 64 {
                assert_eq!(g.data_off % HUGE_ALIGN_BYTES, 0);
            }
        }
    }

    #[test]
    fn table_overhead_is_under_point_two_percent() {
        let g = Geometry::compute(&params(1 << 30)).unwrap();
        let frac = g.mapping_bytes_per_gib() / (1u64 << 30) as f64;
        assert!(frac < 0.002, "{frac}");
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(Geometry::compute(&params(4096 * 3)).is_err());
        assert!(Geometry::compute(&params((1 << 20) + 1)).is_err());
        let mut p = params(1 << 20);
        p.journal_count = 0;
        assert!(Geometry::compute(&p).is_err());
        p = params(1 << 20);
        p.inode_count = Some(MAX_INODES + 1);
        assert!(Geometry::compute(&p).is_err());
    }
}
