//! HashFS: a persistent-memory file system whose file mapping is one global hash table.
//!
//! Layers, bottom to top: [`pm`] (the device: stores, flush, fence), [`layout`] (the
//! on-media format), [`journal`] (per-CPU undo journals), [`mapping`] (the HashFS table,
//! SIMD hashing, translation cache), [`fs`] (inodes, directories, files, recovery, fsck).

#![deny(unsafe_op_in_unsafe_fn)]

pub mod alloc;
pub mod crashtest;
pub mod error;
pub mod journal;
pub mod layout;
pub mod mapping;
pub mod pm;
pub mod timing;

pub use error::{Error, Result};
pub mod fs;

pub use fs::ops::{Owner, RenameMode, SetTime};
pub use fs::{DirEntry, File, FileSystem, FormatOptions, Metadata, MountReport, OpenOptions, SetAttr, StatFs};
pub use layout::{FileType, Ino, MappingKind};
