//! Inodes: 128 bytes each in a fixed table.
//!
//! A free inode is all zeros. An allocated inode has a nonzero mode and a CRC32C over
//! its inode number and every byte except the checksum itself, the size and block count
//! (bytes 16..32) and the timestamps (bytes 64..96). Those lie outside the checksum
//! because each is updated by one atomic 8-byte store without the journal (an append's
//! new size and blocks, a write's times), so a crash cannot leave a checksum that
//! disagrees with them; recovery recounts the blocks and frees mappings past the size.
//! Inodes sealed before format version 4 covered size and block count too: they still
//! check (either sum is accepted), and the next transaction that writes one reseals it.

#![forbid(unsafe_code)]

use bytemuck::{Pod, Zeroable};

/// An inode number, 1 ..= 2^32 - 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ino(pub u32);

impl Ino {
    pub const ROOT: Ino = Ino(1);
    pub fn get(self) -> u64 {
        self.0 as u64
    }
}

impl std::fmt::Display for Ino {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

pub const S_IFMT: u32 = 0o170000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFDIR: u32 = 0o040000;
pub const S_IFLNK: u32 = 0o120000;
pub const S_IFIFO: u32 = 0o010000;
pub const S_IFCHR: u32 = 0o020000;
pub const S_IFBLK: u32 = 0o060000;
pub const S_IFSOCK: u32 = 0o140000;

#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable, PartialEq, Eq)]
pub struct InodeRaw {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    /// Mapped data blocks.
    pub blocks: u64,
    /// Directories: the parent directory's inode number (".."); attribute inodes: their
    /// owner's. 0 for other files.
    pub parent: u32,
    /// Zero: inode numbers are 32 bits everywhere on the media.
    parent_hi: u32,
    /// Directories: live entries (to make rmdir's emptiness check O(1)).
    pub dir_entries: u64,
    pub generation: u32,
    /// The mapping's small state (see [`InodeRaw::radix_height`], [`InodeRaw::extent_root_level`]).
    map_flags: u32,
    /// CRC32C over the inode number (LE u64) and every byte except this field, the size,
    /// the block count and the timestamps.
    pub checksum: u32,
    /// Extended attributes: the inode holding them, 0 if none (`fs/xattr.rs`).
    pub xattr_ino: u32,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub btime_ns: i64,
    /// The mapping area, a union read only through the typed views below.
    map_area: [u64; 4],
}

pub const INODE_BYTES: usize = 128;
const _: () = assert!(std::mem::size_of::<InodeRaw>() == INODE_BYTES);
pub const INODE_CHECKSUM_OFF: usize = 56;
const _: () = assert!(std::mem::offset_of!(InodeRaw, checksum) == INODE_CHECKSUM_OFF);
/// The size and the block count (two words), stored in place by a fast append.
pub const INODE_SIZE_OFF: u64 = 16;
pub const INODE_BLOCKS_OFF: u64 = 24;
const INODE_BLOCKS_END: usize = 32;
const _: () = assert!(std::mem::offset_of!(InodeRaw, size) == INODE_SIZE_OFF as usize);
const _: () = assert!(std::mem::offset_of!(InodeRaw, blocks) == INODE_BLOCKS_OFF as usize);
pub const INODE_ATIME_OFF: u64 = 64;
pub const INODE_MTIME_OFF: u64 = 72;
pub const INODE_CTIME_OFF: u64 = 80;
const _: () = assert!(std::mem::offset_of!(InodeRaw, atime_ns) == INODE_ATIME_OFF as usize);
/// End of the four timestamps (atime, mtime, ctime, btime), which the checksum skips.
pub const INODE_TIMES_END: usize = 96;
const _: () = assert!(std::mem::offset_of!(InodeRaw, map_area) == INODE_TIMES_END);
const _: () = assert!(std::mem::offset_of!(InodeRaw, map_flags) == 52);
const _: () = assert!(std::mem::offset_of!(InodeRaw, parent) == 32);
const _: () = assert!(std::mem::offset_of!(InodeRaw, mtime_ns) == INODE_MTIME_OFF as usize);
const _: () = assert!(std::mem::offset_of!(InodeRaw, ctime_ns) == INODE_CTIME_OFF as usize);

/// The result of checking an inode read from the media.
#[derive(Debug, PartialEq, Eq)]
pub enum InodeState {
    Free,
    Allocated,
    Corrupt(&'static str),
}

impl InodeRaw {
    /// CRC32C over the inode number and every byte but the checksum, the size, the block
    /// count and the timestamps.
    pub fn compute_checksum(&self, ino: Ino) -> u32 {
        self.sum(ino, false)
    }

    /// The checksum of format versions up to 3, which covered size and block count.
    fn legacy_checksum(&self, ino: Ino) -> u32 {
        self.sum(ino, true)
    }

    /// CRC32C over the inode number and every byte but the checksum and the timestamps,
    /// and but the size and block count unless `with_size`.
    fn sum(&self, ino: Ino, with_size: bool) -> u32 {
        let b = bytemuck::bytes_of(self);
        let mut c = crc32c::crc32c(&ino.get().to_le_bytes());
        if with_size {
            c = crc32c::crc32c_append(c, &b[..INODE_CHECKSUM_OFF]);
        } else {
            c = crc32c::crc32c_append(c, &b[..INODE_SIZE_OFF as usize]);
            c = crc32c::crc32c_append(c, &b[INODE_BLOCKS_END..INODE_CHECKSUM_OFF]);
        }
        c = crc32c::crc32c_append(c, &b[INODE_CHECKSUM_OFF + 4..INODE_ATIME_OFF as usize]);
        crc32c::crc32c_append(c, &b[INODE_TIMES_END..])
    }

    /// Whether the sum on the media is this version's (size and block count outside it),
    /// so that they may be stored in place.
    pub fn sealed_without_size(&self, ino: Ino) -> bool {
        self.checksum == self.compute_checksum(ino)
    }
    pub fn seal(&mut self, ino: Ino) {
        self.checksum = self.compute_checksum(ino);
    }
    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }
    pub fn is_reg(&self) -> bool {
        self.mode & S_IFMT == S_IFREG
    }
    pub fn is_symlink(&self) -> bool {
        self.mode & S_IFMT == S_IFLNK
    }
    /// A FIFO, device or socket: an inode with no data whose behaviour the kernel supplies.
    pub fn is_special(&self) -> bool {
        matches!(self.mode & S_IFMT, S_IFIFO | S_IFCHR | S_IFBLK | S_IFSOCK)
    }

    pub fn is_device(&self) -> bool {
        matches!(self.mode & S_IFMT, S_IFCHR | S_IFBLK)
    }
    /// A device's number (`st_rdev`); 0 for every other type.
    pub fn rdev(&self) -> u64 {
        if self.is_device() {
            self.map_area[0]
        } else {
            0
        }
    }

    pub fn check(&self, ino: Ino) -> InodeState {
        if self.mode == 0 {
            // One comparison of the whole inode (a byte loop that stops early is not
            // vectorized, and mount reads every free inode this way).
            return if bytemuck::bytes_of(self) == [0u8; std::mem::size_of::<InodeRaw>()] {
                InodeState::Free
            } else {
                InodeState::Corrupt("free inode is not zeroed")
            };
        }
        if self.checksum != self.compute_checksum(ino) && self.checksum != self.legacy_checksum(ino) {
            return InodeState::Corrupt("checksum mismatch");
        }
        if !matches!(self.mode & S_IFMT, S_IFREG | S_IFDIR | S_IFLNK) && !self.is_special() {
            return InodeState::Corrupt("unknown file type");
        }
        if self.is_special() && (self.size != 0 || self.blocks != 0) {
            return InodeState::Corrupt("special file with data");
        }
        if self.is_special() {
            let want_zero = if self.is_device() { &self.map_area[1..] } else { &self.map_area[..] };
            if self.map_flags != 0 || want_zero.iter().any(|&w| w != 0) {
                return InodeState::Corrupt("special file with a mapping");
            }
        }
        if self.parent_hi != 0 {
            return InodeState::Corrupt("parent inode number beyond 32 bits");
        }
        if self.size > super::MAX_FILE_BYTES {
            return InodeState::Corrupt("size beyond the largest file");
        }
        if self.is_symlink() && self.size > super::MAX_SYMLINK_BYTES {
            return InodeState::Corrupt("symlink target too long");
        }
        if self.is_dir() && !self.size.is_multiple_of(super::BLOCK_BYTES) {
            return InodeState::Corrupt("directory size is not whole blocks");
        }
        InodeState::Allocated
    }
}

/// The mapping area: `map_flags` (bytes 52..56) and `map_area` (bytes 96..128), a union on
/// the media whose meaning is the image's mapping's and the file type's:
///
/// | who | `map_area` | `map_flags` |
/// |---|---|---|
/// | extent tree (`mapping/extent_tree.rs`) | root entries 0 and 1, 16 bytes each | count \| level << 8 |
/// | radix tree (`mapping/radix.rs`) | words 0..3: blocks 0..3 (block + 1, 0 = hole); word 3: root node (block + 1) | height |
/// | ctFS (`mapping/ctfs/`) | word 0: the file's partition (`layout::mapping::ctfs::partition_word`, 0 = none) | zero |
/// | HashFS, cuckoo, extent hashing | zero | zero |
/// | character and block devices | word 0: the device number (Linux `dev_t`) | zero |
/// | FIFOs, sockets | zero | zero |
impl InodeRaw {
    /// Radix tree: the pointer word of direct block `i` (< 3): block + 1, 0 for a hole.
    pub fn radix_direct(&self, i: usize) -> u64 {
        self.map_area[..3][i]
    }
    pub fn set_radix_direct(&mut self, i: usize, v: u64) {
        self.map_area[..3][i] = v;
    }
    /// ctFS: the file's partition word (0: none).
    pub fn ctfs_partition(&self) -> u64 {
        self.map_area[0]
    }
    pub fn set_ctfs_partition(&mut self, w: u64) {
        self.map_area[0] = w;
    }
    /// Radix tree: the root node (block + 1), 0 when there is no tree.
    pub fn radix_root(&self) -> u64 {
        self.map_area[3]
    }
    pub fn set_radix_root(&mut self, v: u64) {
        self.map_area[3] = v;
    }
    /// Radix tree: the tree's height (0: no tree).
    pub fn radix_height(&self) -> u32 {
        self.map_flags
    }
    pub fn set_radix_height(&mut self, h: u32) {
        self.map_flags = h;
    }

    /// Extent tree: root entry `i` (< 2), two words as a node entry holds them.
    pub fn extent_root_entry(&self, i: usize) -> [u64; 2] {
        [self.map_area[2 * i], self.map_area[2 * i + 1]]
    }
    /// Extent tree: the root's entry count and level.
    pub fn extent_root_level(&self) -> (u8, usize) {
        (((self.map_flags >> 8) & 0xFF) as u8, (self.map_flags & 0xFF) as usize)
    }
    /// Extent tree: a new root of up to two entries at `level`.
    pub fn set_extent_root(&mut self, entries: &[[u64; 2]], level: u8) {
        self.map_area = [0; 4];
        for (i, [a, b]) in entries.iter().enumerate() {
            self.map_area[2 * i] = *a;
            self.map_area[2 * i + 1] = *b;
        }
        self.map_flags = entries.len() as u32 | (level as u32) << 8;
    }

    /// Character and block devices: sets the device number (`st_rdev`).
    pub fn set_rdev(&mut self, rdev: u64) {
        self.map_area = [rdev, 0, 0, 0];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_detects_flips_and_misplacement() {
        let mut i = InodeRaw::zeroed();
        i.mode = S_IFREG | 0o644;
        i.nlink = 1;
        i.size = 12345;
        i.seal(Ino(7));
        assert_eq!(i.check(Ino(7)), InodeState::Allocated);
        assert!(matches!(i.check(Ino(8)), InodeState::Corrupt(_)));
        let covered = (0..16).chain(32..56).chain(60..64).chain(96..128);
        for bit in covered.flat_map(|byte| (0..8).map(move |b| byte * 8 + b)) {
            let mut b = i;
            bytemuck::bytes_of_mut(&mut b)[bit / 8] ^= 1 << (bit % 8);
            assert!(matches!(b.check(Ino(7)), InodeState::Corrupt(_) | InodeState::Free), "bit {bit}");
        }
    }

    /// Size and block count lie outside the sum (stored in place by fast appends); an inode
    /// sealed by an older build, whose sum covers them, still checks, until they change.
    #[test]
    fn size_and_blocks_outside_the_sum_legacy_sums_accepted() {
        let mut i = InodeRaw::zeroed();
        i.mode = S_IFREG | 0o644;
        i.nlink = 1;
        i.size = 100;
        i.seal(Ino(7));
        assert!(i.sealed_without_size(Ino(7)));
        i.size = 5000;
        i.blocks = 2;
        assert_eq!(i.check(Ino(7)), InodeState::Allocated);
        i.checksum = i.legacy_checksum(Ino(7));
        assert_eq!(i.check(Ino(7)), InodeState::Allocated);
        assert!(!i.sealed_without_size(Ino(7)));
        i.size = 6000;
        assert_eq!(i.check(Ino(7)), InodeState::Corrupt("checksum mismatch"));
    }

    /// Inode numbers are 32 bits on the media: a sealed inode whose parent word has a high
    /// half is corrupt, not a parent past 2^32.
    #[test]
    fn parent_high_half_must_be_zero() {
        let mut i = InodeRaw::zeroed();
        i.mode = S_IFDIR | 0o755;
        i.nlink = 2;
        i.parent = 1;
        i.seal(Ino(2));
        assert_eq!(i.check(Ino(2)), InodeState::Allocated);
        i.parent_hi = 1;
        i.seal(Ino(2));
        assert_eq!(i.check(Ino(2)), InodeState::Corrupt("parent inode number beyond 32 bits"));
    }

    /// The typed views read and write the bytes the format names.
    #[test]
    fn mapping_area_views_use_the_named_bytes() {
        let mut i = InodeRaw::zeroed();
        i.set_radix_direct(2, 7);
        i.set_radix_root(9);
        i.set_radix_height(3);
        let b = bytemuck::bytes_of(&i);
        assert_eq!(u64::from_le_bytes(b[112..120].try_into().unwrap()), 7);
        assert_eq!(u64::from_le_bytes(b[120..128].try_into().unwrap()), 9);
        assert_eq!(u32::from_le_bytes(b[52..56].try_into().unwrap()), 3);
        i.set_extent_root(&[[1, 2], [3, 4]], 5);
        assert_eq!((i.extent_root_entry(1), i.extent_root_level()), ([3, 4], (5, 2)));
        let b = bytemuck::bytes_of(&i);
        assert_eq!(u64::from_le_bytes(b[96..104].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(b[52..56].try_into().unwrap()), 2 | 5 << 8);
        i.mode = S_IFCHR | 0o600;
        i.set_rdev(0x1234);
        assert_eq!(i.rdev(), 0x1234);
    }

    #[test]
    fn free_inode_must_be_zero() {
        let mut i = InodeRaw::zeroed();
        assert_eq!(i.check(Ino(1)), InodeState::Free);
        i.size = 1;
        assert!(matches!(i.check(Ino(1)), InodeState::Corrupt(_)));
    }
}
