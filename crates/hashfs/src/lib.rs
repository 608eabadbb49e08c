//! HashFS: a persistent-memory file system whose file mapping is one global hash table.
//!
//! Layers, bottom to top: [`pm`] (the device: stores, flush, fence), `layout` (the on-media
//! format), `journal` (per-CPU undo journals), `mapping` (the HashFS table and the other
//! mapping structures, SIMD hashing, translation cache), `fs` (inodes, directories, files,
//! recovery, fsck).
//!
//! The public API is what this file re-exports: a [`FileSystem`] on a [`pm::PmDevice`],
//! formatted with [`format`], checked with [`fsck`]. Tests, tools and benchmarks that need
//! to see inside (the on-media layout, the mapping structures, the crash explorer, the
//! paper benchmark's cycle probe) go through [`testing`], which promises no stability.

#![deny(unsafe_op_in_unsafe_fn)]

mod alloc;
mod crashtest;
mod error;
mod fs;
mod fuzz;
pub mod int_hash;
mod journal;
mod layout;
mod mapping;
pub mod pm;
mod probe;
pub mod share;
pub mod units;

pub use error::{Error, Result};
pub use fs::acl::Inherited;
pub use fs::api::Access;
pub use fs::map::{BlockPin, Mapping};
pub use fs::ops::{perm_without_set_id, Owner, RenameMode, SetTime};
pub use fs::perm::{in_caller_group, with_ids, Ids, MAY_EXEC, MAY_READ, MAY_WRITE};
pub use fs::seek::Seek;
pub use fs::shared::{Changed, Fork, ForkMutex, ForkMutexGuard};
pub use fs::untorn::{untorn_aligned_limit, untorn_limit};
pub use fs::xattr::XattrMode;
pub use fs::{
    format, read_superblock, DirEntry, FallocateMode, File, FileSystem, FormatOptions, MappingStats, Metadata,
    MountReport, OpenOptions, PartitionLevel, PartitionStats, SetAttr, StatFs, SuperblockSource, SyncScope,
    OPEN_RETRIES,
};
pub use layout::dirent::{dev_from_kernel, dev_to_kernel};
pub use layout::{
    AllocatorKind, Extent, FileType, Geometry, HashPlacement, Ino, Lblk, MappingKind, Pblk, Superblock, WriteMode,
};
pub use mapping::simd::{simd_kind, SimdKind};
pub use pm::filemap::Protection;
pub use pm::mmap::NEXT_RUN_PREFETCH_LINES;

/// Checking and repairing an image offline.
pub mod fsck {
    pub use crate::fs::fsck::{fsck, geometry_of, recover_then_check, FsckMode, FsckReport, Recovery};
}

/// The testing and benchmark surface: the crate's internals, for its own tests, the crash
/// explorer's command, `hashfs-bench` and `hashfs info`. Nothing here is a stable API, and
/// nothing in the file system's IO path depends on it.
pub mod testing {
    use crate::pm::PmDevice;
    use crate::{FileSystem, Ino, Result};

    /// The on-media format.
    pub mod layout {
        pub use crate::layout::*;
    }

    /// The mapping structures.
    pub mod mapping {
        pub use crate::mapping::*;
    }

    /// The crash-state explorer (`hashfs crashtest`).
    pub mod crashtest {
        pub use crate::crashtest::*;
    }

    /// The image fuzzer's harness (`fuzz/`, `tests/fuzz_images.rs`).
    pub mod fuzz {
        pub use crate::fuzz::*;
    }

    /// The paper benchmark's cycle accounting (cargo feature `probe`).
    #[cfg(feature = "probe")]
    pub mod probe {
        pub use crate::probe::*;
    }

    /// An inode as it lies on the media.
    pub use crate::fs::inode::read_raw;

    /// The image's mapping structure.
    pub fn map<D: PmDevice>(fs: &FileSystem<D>) -> &crate::mapping::FileMap<D> {
        &fs.inner.map
    }

    /// The HashFS table, when the image uses it.
    pub fn table<D: PmDevice>(fs: &FileSystem<D>) -> Option<&crate::mapping::hashfs::HashTable<D>> {
        match &fs.inner.map {
            crate::mapping::FileMap::Hash(t) => Some(t),
            crate::mapping::FileMap::Blocks(_) => None,
        }
    }

    /// Makes the next mapping operation on `ino` cold (the paper's "cold cache" runs); see
    /// `fs/bench.rs`. Returns the bytes evicted.
    pub fn evict_mapping<D: PmDevice>(fs: &FileSystem<D>, ino: Ino) -> Result<u64> {
        fs.evict_mapping(ino)
    }

    /// Extent-hash images: how lookups search, SPFS's probabilistic fast lookup or every
    /// stride length (SPFS Fig. 7).
    pub fn set_extent_lookup<D: PmDevice>(fs: &FileSystem<D>, lookup: ExtentLookup) -> Result<()> {
        fs.set_extent_lookup(lookup)
    }

    pub use crate::mapping::extent_hash::ExtentLookup;

    /// On a mount shared by many processes: the image's `forks` word, the children and
    /// programs counted as on their way (`fs/shared/fork.rs`).
    pub fn forks_counted<D: PmDevice>(fs: &FileSystem<D>) -> Option<u64> {
        fs.forks_counted()
    }
}
