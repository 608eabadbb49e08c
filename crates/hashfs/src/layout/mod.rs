//! The on-media format: geometry, superblock, inodes, directory entries and the undo
//! journals' entries.
//!
//! docs/design.md has the byte map. Every structure here is `#[repr(C)]` with fixed-width
//! little-endian fields (the crate builds only for little-endian targets), explicit
//! reserved bytes, and a compile-time size check.

#![forbid(unsafe_code)]

pub mod block;
pub mod dirent;
pub mod inode;
pub mod journal;
pub mod mapping;
pub mod superblock;

pub use block::{Extent, Lblk, Pblk};
pub use dirent::{DirentHeader, FileType, DIRENT_SLOT_BYTES, MAX_NAME_BYTES};
pub use inode::{Ino, InodeRaw, INODE_BYTES};
pub use superblock::{
    AllocatorKind, Geometry, HashPlacement, MappingKind, Superblock, WriteMode, SB_STATE_CLEAN, SB_STATE_MOUNTED,
};

#[cfg(not(target_endian = "little"))]
compile_error!("HashFS stores little-endian fields and builds only for little-endian targets");

/// File-system block size: data blocks, table alignment.
pub const BLOCK_BYTES: u64 = 4096;
/// Alignment of the data region on images of at least 64 MiB, so that file data can be
/// mapped with 2 MiB pages.
pub const HUGE_ALIGN_BYTES: u64 = 2 * 1024 * 1024;
/// The largest file: 2^32 logical blocks of 4 KiB (the logical block is 32 bits of the
/// HashFS key).
pub const MAX_FILE_BYTES: u64 = (1u64 << 32) * BLOCK_BYTES;
/// Inode numbers run from 1 to this (0 and 0xFFFF_FFFF are reserved markers in the key).
pub const MAX_INODES: u64 = (1u64 << 32) - 2;
/// Physical data blocks are slot indexes below 2^32 - 1, so that a translation packs into
/// one 8-byte word (an image of up to 16 TiB of data).
pub const MAX_DATA_BLOCKS: u64 = (1u64 << 32) - 1;
/// Symbolic link targets are stored in one data block.
pub const MAX_SYMLINK_BYTES: u64 = BLOCK_BYTES - 1;
/// Link count ceiling (as ext4's EXT4_LINK_MAX).
pub const MAX_LINKS: u32 = 65_000;

pub fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}
