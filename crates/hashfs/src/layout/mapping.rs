//! The mapping structures' words on the media. The algorithms that read and write them are
//! in `mapping/` (one file per structure, whose module comment explains the design); what
//! the bytes are is declared here, so that this folder holds the whole format. Every word
//! is little-endian; a structure lives in the image's mapping region (`Geometry::map_off`,
//! `Geometry::struct_off`) or, for the trees, in data blocks and the inode's mapping area
//! ([`super::inode`]).

#![forbid(unsafe_code)]

/// The HashFS table (`mapping/hashfs.rs`): one 8-byte word per data block, at the block's
/// index (slot = block).
pub mod hashfs {
    /// A never-used slot.
    pub const EMPTY: u64 = 0;
    /// A freed slot (probe chains continue past it).
    pub const TOMBSTONE: u64 = u64::MAX;
    /// High half of a slot claimed by a write whose key is not yet published; the low half
    /// is the home slot of the key being placed.
    pub const RESERVED_TAG: u64 = 0xFFFF_FFFF_0000_0000;

    /// Grouped placement: slots per group (2 MiB of blocks). Group `g` is slots
    /// `g * GROUP_SLOTS ..`, 2 MiB-aligned on the image (the data region is).
    ///
    /// The group directory, one word per group after the table (`Geometry::group_dir_off`),
    /// is itself a linear-probing table whose slot index is the group: `key(ino, chunk)`
    /// (chunk = logical block / GROUP_SLOTS) at index `g` says that block
    /// `chunk * GROUP_SLOTS + i` of `ino` may lie in slot `g * GROUP_SLOTS + i`; EMPTY and
    /// TOMBSTONE as in the table. A word is written (and flushed) before any key of its
    /// chunk is published in the group, and cleared only once none is left.
    pub const GROUP_SLOTS: u64 = 512;

    /// A mapped slot's word: the key of logical block `lblk` of inode `ino`.
    #[inline]
    pub fn key(ino: u32, lblk: u32) -> u64 {
        ((ino as u64) << 32) | lblk as u64
    }
}

/// The per-file extent tree (`mapping/extent_tree.rs`): 4 KiB nodes in data blocks; the
/// root's two entries in the inode's mapping area.
pub mod extent_tree {
    /// Node header word: `NODE_MAGIC | level << 32 | count << 48`.
    pub const NODE_MAGIC: u64 = 0x4E54_5845; // "EXTN"
    /// Entries per node after the 16-byte header.
    pub const NODE_CAP: usize = 255;
    /// An entry: word 0 = logical block | length << 32 | VALID (interior: the child's
    /// smallest logical block | VALID); word 1 = physical block (interior: the child node).
    pub const ENTRY_BYTES: u64 = 16;
    /// Entries in the inode's root.
    pub const ROOT_CAP: usize = 2;
    pub const MAX_LEVELS: u8 = 6;
    /// Bit 63 of an entry's word 0.
    pub const VALID: u64 = 1 << 63;
    /// The longest extent one entry holds (31 bits of length).
    pub const MAX_EXTENT: u64 = (1 << 31) - 1;

    /// A node's header word.
    pub fn node_header(level: u8, count: usize) -> u64 {
        NODE_MAGIC | (level as u64) << 32 | (count as u64) << 48
    }

    /// (level, count) of a node header word, if it carries the magic.
    pub fn parse_node_header(h: u64) -> Option<(u8, usize)> {
        (h & 0xFFFF_FFFF == NODE_MAGIC).then_some((((h >> 32) & 0xFF) as u8, (h >> 48) as usize))
    }

    /// An entry's two words.
    pub fn entry_words(lblk: u64, len: u64, pblk: u64) -> [u64; 2] {
        [lblk | (len << 32) | VALID, pblk]
    }

    /// (logical block, length, physical block) of an entry, if valid.
    pub fn parse_entry(w0: u64, w1: u64) -> Option<(u64, u64, u64)> {
        (w0 & VALID != 0).then_some((w0 & 0xFFFF_FFFF, (w0 >> 32) & MAX_EXTENT, w1))
    }
}

/// The per-file radix tree (`mapping/radix.rs`): 4 KiB nodes of 512 pointer words; three
/// direct pointers, the root and the height in the inode's mapping area.
pub mod radix {
    /// Logical blocks mapped by the inode's direct pointers.
    pub const DIRECT: u64 = 3;
    pub const FANOUT_BITS: u32 = 9;
    /// Pointer words per node. A pointer is a block number plus one; 0 is nothing.
    pub const FANOUT: u64 = 1 << FANOUT_BITS;
    /// 512^4 * 4 KiB = 256 TiB, more than the 16 TiB file limit.
    pub const MAX_HEIGHT: u32 = 4;
}

/// The global cuckoo table (`mapping/cuckoo.rs`): 64-byte buckets of [`cuckoo::WAYS`]
/// 16-byte entries; word 0 the key (as [`hashfs::key`]; 0 = empty), word 1 the value.
pub mod cuckoo {
    pub const WAYS: u64 = 4;
    pub const ENTRY_BYTES: u64 = 16;

    /// An entry's value word: physical block | run << 32 | rev << 48 (the blocks from this
    /// one to the end of its physically contiguous run, and the blocks before it).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Val {
        pub pblk: u64,
        pub run: u64,
        pub rev: u64,
    }

    pub fn enc(v: Val) -> u64 {
        v.pblk | v.run << 32 | v.rev << 48
    }

    pub fn dec(w: u64) -> Val {
        Val { pblk: w & 0xFFFF_FFFF, run: (w >> 32) & 0xFFFF, rev: w >> 48 }
    }
}

/// SPFS's extent hashing (`mapping/extent_hash.rs`): a linear-probing table of 32-byte
/// entries; word 0 the tag (inode << 32 | position), word 1 the extent's start | length
/// << 32, word 2 its physical block.
pub mod extent_hash {
    pub const ENTRY_BYTES: u64 = 32;
    pub const EMPTY: u64 = 0;
    pub const TOMBSTONE: u64 = u64::MAX;
    /// Claimed by an insert whose entry is not yet durable (recovery makes it a tombstone).
    pub const BUSY: u64 = u64::MAX - 1;

    /// The tag word of an entry stored at `pos` for inode `ino`.
    pub fn tag(ino: u32, pos: u32) -> u64 {
        ((ino as u64) << 32) | pos as u64
    }
}

/// ctFS (`mapping/ctfs/`): files contiguous in a virtual space of partitions, translated by
/// the persistent page table (PPT). Virtual addresses and physical blocks are both relative
/// (a virtual page number from the start of the space, a data block number), as in ctFS,
/// so the image can be mapped anywhere.
pub mod ctfs {
    /// Partition levels L0 (4 KiB) to L9 (512 GiB), each 8x the one below (ctFS Fig. 3):
    /// L3 = 2 MiB and L6 = 1 GiB meet the page table's levels.
    pub const LEVELS: u32 = 10;
    pub const LEVEL_BITS: u32 = 3;
    /// The virtual space: this many L9 partitions (2 TiB).
    pub const TOP_PARTITIONS: u64 = 4;
    /// Pages (blocks) in a partition of `level`.
    pub const fn partition_pages(level: u32) -> u64 {
        1 << (LEVEL_BITS * level)
    }
    /// Pages in the whole virtual space.
    pub const SPACE_PAGES: u64 = TOP_PARTITIONS * partition_pages(LEVELS - 1);

    /// The inode's partition word (`map_area[0]`): `base << 8 | ASSIGNED | level`, `base`
    /// the partition's first virtual page; 0 = no partition (the file maps nothing).
    pub const ASSIGNED: u64 = 0x80;
    pub fn partition_word(base: u64, level: u32) -> u64 {
        base << 8 | ASSIGNED | level as u64
    }

    /// PPT: 4 KiB nodes of 512 entries, each level resolving 9 bits of the virtual page
    /// (`NODE_BITS`); the root (level 3, one entry per L9 partition) is the block at
    /// `Geometry::struct_off`, the other nodes are data blocks.
    pub const NODE_BITS: u32 = 9;
    pub const NODE_ENTRIES: u64 = 1 << NODE_BITS;
    pub const ROOT_LEVEL: u32 = 3;
    pub const ROOT_BYTES: u64 = 4096;
    /// An entry: `block << 12 | flags`; 0 = nothing mapped. At level 0 the block is the
    /// page's data block; at level 1 with `HUGE` it is the first of 512 data blocks that
    /// are 2 MiB-aligned on the image (a 2 MiB leaf); otherwise the next level's node.
    pub const PRESENT: u64 = 1;
    pub const HUGE: u64 = 2;
    pub const FLAGS: u64 = 0xFFF;
    pub fn entry(block: u64, flags: u64) -> u64 {
        block << 12 | flags | PRESENT
    }
}
