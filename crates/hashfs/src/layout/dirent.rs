//! Directory entries: a directory's data blocks hold 32-byte slots; an entry takes 1 to 9
//! consecutive slots in one block (16-byte header, then the name).
//!
//! The entry's first word is its inode number and doubles as its valid bit: the header and
//! name are written (and flushed) while the word is 0, then the word is set inside a
//! journaled transaction. A free run keeps its `nslots` so that a scan can step over it.

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
    pub ino: u64,
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
}

impl FileType {
    pub fn to_u8(self) -> u8 {
        match self {
            FileType::Regular => 8,
            FileType::Directory => 4,
            FileType::Symlink => 10,
        }
    }
    pub fn from_u8(v: u8) -> Option<FileType> {
        match v {
            8 => Some(FileType::Regular),
            4 => Some(FileType::Directory),
            10 => Some(FileType::Symlink),
            _ => None,
        }
    }
    pub fn from_mode(mode: u32) -> Option<FileType> {
        match mode & super::inode::S_IFMT {
            super::inode::S_IFREG => Some(FileType::Regular),
            super::inode::S_IFDIR => Some(FileType::Directory),
            super::inode::S_IFLNK => Some(FileType::Symlink),
            _ => None,
        }
    }
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
