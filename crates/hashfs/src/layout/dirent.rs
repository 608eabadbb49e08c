//! Directory entries: a directory's data blocks hold 32-byte slots; an entry takes 1 to 9
//! consecutive slots in one block (16-byte header, then the name).
//!
//! The entry's first word is its inode number and doubles as its valid bit: the header and
//! name are written (and flushed) while the word is 0, then the word is set inside a
//! journaled transaction. A free run keeps its `nslots` so that a scan can step over it.

#![forbid(unsafe_code)]

use bytemuck::{Pod, Zeroable};

pub const DIRENT_SLOT_BYTES: u64 = 32;
pub const DIRENT_HEADER_BYTES: usize = 16;
pub const MAX_NAME_BYTES: usize = 255;
pub const MAX_DIRENT_SLOTS: u8 = 9;
pub const SLOTS_PER_BLOCK: u64 = super::BLOCK_BYTES / DIRENT_SLOT_BYTES;

#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable, PartialEq, Eq)]
pub struct DirentHeader {
    /// Inode number; 0 = free.
    pub ino: u32,
    /// Zero. Inode numbers are 32 bits everywhere on the media; the entry's first 8 bytes
    /// (`ino`, `ino_hi`) are its valid word, set by one atomic 8-byte store.
    pub ino_hi: u32,
    /// Slots this entry (or free run) spans, 1..=9; 0 in never-used slots (spans 1).
    pub nslots: u8,
    pub name_len: u8,
    pub file_type: u8,
    pub reserved: [u8; 5],
}
const _: () = assert!(std::mem::size_of::<DirentHeader>() == DIRENT_HEADER_BYTES);

/// File types recorded in directory entries (as the d_type values of Linux).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    Regular,
    Directory,
    Symlink,
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
}

impl FileType {
    pub fn to_u8(self) -> u8 {
        match self {
            FileType::Regular => 8,
            FileType::Directory => 4,
            FileType::Symlink => 10,
            FileType::Fifo => 1,
            FileType::CharDevice => 2,
            FileType::BlockDevice => 6,
            FileType::Socket => 12,
        }
    }
    pub fn from_u8(v: u8) -> Option<FileType> {
        match v {
            8 => Some(FileType::Regular),
            4 => Some(FileType::Directory),
            10 => Some(FileType::Symlink),
            1 => Some(FileType::Fifo),
            2 => Some(FileType::CharDevice),
            6 => Some(FileType::BlockDevice),
            12 => Some(FileType::Socket),
            _ => None,
        }
    }
    /// The `S_IF*` bits of this type.
    pub fn mode_bits(self) -> u32 {
        use super::inode::*;
        match self {
            FileType::Regular => S_IFREG,
            FileType::Directory => S_IFDIR,
            FileType::Symlink => S_IFLNK,
            FileType::Fifo => S_IFIFO,
            FileType::CharDevice => S_IFCHR,
            FileType::BlockDevice => S_IFBLK,
            FileType::Socket => S_IFSOCK,
        }
    }
    /// FIFOs, devices and sockets: no data, behaviour from the kernel.
    pub fn is_special(self) -> bool {
        matches!(self, FileType::Fifo | FileType::CharDevice | FileType::BlockDevice | FileType::Socket)
    }
    /// The type of a mknod(2) mode; `S_IFREG` and 0 are regular files.
    pub fn from_mknod_mode(mode: u32) -> Option<FileType> {
        match mode & super::inode::S_IFMT {
            0 => Some(FileType::Regular),
            super::inode::S_IFDIR | super::inode::S_IFLNK => None,
            _ => Self::from_mode(mode),
        }
    }
    pub fn from_mode(mode: u32) -> Option<FileType> {
        match mode & super::inode::S_IFMT {
            super::inode::S_IFREG => Some(FileType::Regular),
            super::inode::S_IFDIR => Some(FileType::Directory),
            super::inode::S_IFLNK => Some(FileType::Symlink),
            super::inode::S_IFIFO => Some(FileType::Fifo),
            super::inode::S_IFCHR => Some(FileType::CharDevice),
            super::inode::S_IFBLK => Some(FileType::BlockDevice),
            super::inode::S_IFSOCK => Some(FileType::Socket),
            _ => None,
        }
    }
}

/// A device number as the kernel passes it to FUSE (`new_encode_dev`: 12-bit major,
/// 20-bit minor) to the `dev_t` that `stat` reports.
pub fn dev_from_kernel(k: u32) -> u64 {
    let major = (k & 0xfff00) >> 8;
    let minor = (k & 0xff) | ((k >> 12) & 0xfff00);
    libc::makedev(major, minor)
}

/// A `dev_t` in the kernel's 32-bit encoding; None when the major or minor is too large.
pub fn dev_to_kernel(dev: u64) -> Option<u32> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    if major >= 1 << 12 || minor >= 1 << 20 {
        return None;
    }
    Some((minor & 0xff) | (major << 8) | ((minor & !0xff) << 12))
}

/// Slots needed for a name of `name_len` bytes.
pub fn slots_for(name_len: usize) -> u8 {
    (DIRENT_HEADER_BYTES + name_len).div_ceil(DIRENT_SLOT_BYTES as usize) as u8
}

/// Whether `name` may be stored as a directory entry.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name != b"."
        && name != b".."
        && !name.iter().any(|&b| b == b'/' || b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_counts() {
        assert_eq!(slots_for(1), 1);
        assert_eq!(slots_for(16), 1);
        assert_eq!(slots_for(17), 2);
        assert_eq!(slots_for(255), MAX_DIRENT_SLOTS);
    }

    #[test]
    fn device_numbers_round_trip() {
        for (major, minor) in [(0, 0), (1, 3), (8, 17), (4095, 0xfffff), (259, 65536)] {
            let dev = libc::makedev(major, minor);
            let k = dev_to_kernel(dev).unwrap();
            assert_eq!(dev_from_kernel(k), dev, "{major}:{minor}");
        }
        assert_eq!(dev_to_kernel(libc::makedev(4096, 0)), None);
        // The kernel's own encoding of 8:1 (sda1).
        assert_eq!(dev_to_kernel(libc::makedev(8, 1)), Some(0x801));
    }

    #[test]
    fn names() {
        assert!(valid_name(b"a"));
        assert!(!valid_name(b""));
        assert!(!valid_name(b"."));
        assert!(!valid_name(b".."));
        assert!(!valid_name(b"a/b"));
        assert!(!valid_name(&[b'x'; 256]));
        assert!(valid_name(&[b'x'; 255]));
    }
}
