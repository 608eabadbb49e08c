//! The file system: format, mount (with recovery), and the operations on inodes, files
//! and directories.
//!
//! Locking: every inode has a reader-writer lock over its DRAM state. Data reads take it
//! shared; writes and metadata changes take it exclusive. When an operation needs several,
//! it takes directories before non-directories, a parent before its child, and otherwise
//! lower inode numbers first; renames also hold one global rename lock (as Linux's
//! s_vfs_rename_mutex), which makes the ancestor check race-free.

pub mod acl;
pub mod api;
mod append;
pub mod bench;
mod blocks;
mod ctfs;
pub mod data;
pub mod dir;
mod eof_tail;
mod fallocate;
mod file;
pub mod fsck;
pub(crate) mod hashfs;
pub mod inode;
pub mod map;
pub mod ops;
pub mod perm;
pub(crate) mod race_point;
pub mod recovery;
mod rename;
pub mod seek;
pub(crate) mod shared;
pub mod stats;
mod times;
pub mod untorn;
mod verbs;
pub mod xattr;

pub use api::{
    DirEntry, FallocateMode, File, FileSystem, Metadata, OpenOptions, SetAttr, StatFs, SyncScope, OPEN_RETRIES,
};
pub use fsck::{fsck, FsckMode};
pub use recovery::MountReport;
pub use stats::{MappingStats, PartitionLevel, PartitionStats};

use crate::journal::{self, Journals};
use crate::layout::inode::{InodeRaw, S_IFDIR};
use crate::layout::superblock::{
    GeometryParams, HashPlacement, FORMAT_VERSION, MAGIC, SB_PRIMARY_OFF, SB_SECONDARY_OFF,
};
use crate::layout::{
    AllocatorKind, Geometry, Ino, MappingKind, Superblock, WriteMode, BLOCK_BYTES, SB_STATE_CLEAN, SB_STATE_MOUNTED,
};
use crate::mapping::FileMap;
use crate::pm::{DevOffset, PmDevice};
use crate::{Error, Result};
use bytemuck::Zeroable;
use inode::{InodeAllocator, InodeCache};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Parameters of `mkfs`.
#[derive(Clone, Debug)]
pub struct FormatOptions {
    pub mapping: MappingKind,
    /// None: one inode per 16 KiB.
    pub inode_count: Option<u64>,
    pub journal_count: u32,
    pub journal_blocks: u32,
    /// The device is known to be all zeros (a freshly created file), so the metadata
    /// regions need not be cleared.
    pub device_is_zeroed: bool,
    /// The table's hash seed; None picks a random one (a fixed seed makes block placement
    /// reproducible, for tests and benchmarks).
    pub hash_seed: Option<u64>,
    /// The fragmentation generator's target layout score (1.0 = contiguous allocation),
    /// for the mappings that use the block allocator (below 1 only with the bitmap
    /// allocator).
    pub layout_score: f64,
    /// How the block-allocating mappings choose blocks (HashFS's table allocates itself).
    pub allocator: AllocatorKind,
    /// Where HashFS places blocks (ignored by the other mappings).
    pub placement: HashPlacement,
    /// The regions placement's target load of its open groups (a fraction; None: the
    /// default, 0.80). Lower opens groups sooner (fewer keys per group, fewer whole
    /// groups left for large files).
    pub region_load: Option<f64>,
    /// The write mode a mount starts in.
    pub write_mode: WriteMode,
    /// `FileSystem::format_file`: allocate the image file's whole length on the host
    /// (fallocate) before formatting, so that no later write pays the host's first touch
    /// (tmpfs zeroes a page, 2 MiB on a `huge=always` mount, the first time it is
    /// written); PM has none. False leaves the file sparse.
    pub preallocate: bool,
}

impl Default for FormatOptions {
    fn default() -> Self {
        FormatOptions {
            mapping: MappingKind::HashFs,
            inode_count: None,
            journal_count: 8,
            journal_blocks: 16,
            device_is_zeroed: false,
            hash_seed: None,
            layout_score: 1.0,
            allocator: AllocatorKind::Aligned,
            placement: HashPlacement::Paper,
            region_load: None,
            write_mode: WriteMode::Relaxed,
            preallocate: false,
        }
    }
}

/// Progress of long operations: (done, total) in bytes or items.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

pub(crate) struct FsInner<D: PmDevice> {
    pub dev: Arc<D>,
    pub geo: Geometry,
    pub sb: Mutex<Superblock>,
    pub journals: Journals<D>,
    pub map: FileMap<D>,
    pub inodes: InodeCache,
    pub ialloc: InodeAllocator,
    pub rename_lock: Mutex<()>,
    pub unmounted: AtomicBool,
    /// Strict write mode (every write of up to the untorn limit is untorn), from the
    /// superblock at mount, changeable for the mount.
    pub strict: AtomicBool,
    /// Inodes whose times a write left in DRAM only (`fs/times.rs`).
    pub times_pending: AtomicU64,
    /// Files whose size a one-fence append left tagged on the media (`fs/hashfs/append_tag.rs`).
    pub tagged: AtomicU64,
    /// Set when the mount is one participant of many (`fs/shared/mod.rs`).
    pub shared: std::sync::OnceLock<shared::SharedMount>,
    /// Set when the mount is a read-only participant's (`fs/shared/read_only.rs`).
    pub read_only: std::sync::OnceLock<shared::ReadOnlyMount>,
    /// A mount of one process's table of record locks (`fs/shared/record_locks.rs`).
    pub local_locks: std::sync::OnceLock<Option<shared::record_locks::LocalLocks>>,
    /// Where a front end that resolves paths itself shows the file system
    /// ([`FileSystem::set_mount_point`]).
    pub mount_point: std::sync::OnceLock<MountPoint>,
    /// Whether calls check the caller's permissions (`fs/perm.rs`; the shim's mounts).
    pub checks_access: AtomicBool,
}

/// Where a front end that resolves paths itself (the LD_PRELOAD shim) shows the file
/// system, `path` without a trailing slash: an absolute symbolic link under it leads back
/// inside, and one anywhere else leads out, which a walk refuses ([`Error::LinkOutside`],
/// with the path it leads to) after telling `on_outside` that path. Without one, an
/// absolute link is taken from the file system's root, as in a chroot.
pub struct MountPoint {
    pub path: Vec<u8>,
    pub on_outside: fn(&[u8]),
}

/// Writes a new, empty file system on `dev`.
pub fn format<D: PmDevice>(dev: &D, opts: &FormatOptions, progress: Progress<'_>) -> Result<Geometry> {
    let geo = Geometry::compute(&GeometryParams {
        image_bytes: dev.len_bytes(),
        inode_count: opts.inode_count,
        journal_count: opts.journal_count,
        journal_blocks: opts.journal_blocks,
        mapping: opts.mapping,
        grouped: opts.placement.grouped_on(opts.mapping),
    })
    .map_err(Error::InvalidParameter)?;
    if let Some(load) = opts.region_load {
        if !(0.01..=0.95).contains(&load) || opts.placement != HashPlacement::Regions {
            return Err(Error::InvalidParameter(format!(
                "region load {load}: a fraction from 0.01 to 0.95, for the regions placement"
            )));
        }
    }
    if !(0.0..=1.0).contains(&opts.layout_score) {
        return Err(Error::InvalidParameter(format!("layout score {} is not in [0, 1]", opts.layout_score)));
    }
    let allocator = if opts.mapping.uses_allocator() { opts.allocator } else { AllocatorKind::Bitmap };
    if allocator == AllocatorKind::Aligned && opts.layout_score < 1.0 {
        return Err(Error::InvalidParameter(format!(
            "layout score {}: the fragmentation generator is the bitmap allocator's (--allocator bitmap)",
            opts.layout_score
        )));
    }
    // Invalidate any previous superblocks first, so that a crash during mkfs never leaves
    // an old superblock over new, half-written metadata.
    for off in [SB_PRIMARY_OFF, SB_SECONDARY_OFF] {
        dev.zero(off, BLOCK_BYTES);
        dev.flush(off, BLOCK_BYTES);
    }
    dev.fence();
    journal::format(dev, &geo);
    if !opts.device_is_zeroed {
        let start = geo.inode_table_off;
        let end = geo.data_off;
        const STEP: u64 = 64 << 20;
        let mut off = start;
        while off < end {
            let n = STEP.min(end - off);
            dev.zero(DevOffset(off), n);
            dev.flush(DevOffset(off), n);
            off += n;
            progress(off - start, end - start);
        }
    }
    let now = inode::now_ns();
    let mut root = InodeRaw::zeroed();
    root.mode = S_IFDIR | 0o755;
    root.nlink = 2;
    root.parent = Ino::ROOT.0;
    root.atime_ns = now;
    root.mtime_ns = now;
    root.ctime_ns = now;
    root.btime_ns = now;
    root.seal(Ino::ROOT);
    let root_off = geo.inode_off(Ino::ROOT);
    dev.write(root_off, bytemuck::bytes_of(&root));
    dev.flush(root_off, crate::layout::INODE_BYTES as u64);
    dev.fence();

    let mut sb = Superblock::zeroed();
    sb.magic = MAGIC;
    sb.format_version = FORMAT_VERSION;
    sb.mapping_kind = opts.mapping as u32;
    sb.block_size = BLOCK_BYTES as u32;
    sb.journal_count = geo.journal_count;
    sb.journal_blocks = geo.journal_blocks;
    sb.state = SB_STATE_CLEAN;
    sb.image_size_bytes = geo.image_bytes;
    sb.inode_count = geo.inode_count;
    sb.journal_off = geo.journal_off;
    sb.inode_table_off = geo.inode_table_off;
    sb.map_off = geo.map_off;
    sb.data_off = geo.data_off;
    sb.data_blocks = geo.data_blocks;
    sb.hash_seed = opts.hash_seed.unwrap_or_else(random_u64);
    sb.created_ns = now;
    sb.layout_score_ppm = (opts.layout_score * 1e6).round() as u32;
    sb.allocator = allocator as u32;
    sb.placement = if geo.groups > 0 { opts.placement as u32 } else { 0 };
    sb.region_load_ppm = opts.region_load.map_or(0, |l| (l * 1e6).round() as u32);
    sb.write_mode = opts.write_mode as u32;
    sb.uuid[..8].copy_from_slice(&random_u64().to_le_bytes());
    sb.uuid[8..].copy_from_slice(&random_u64().to_le_bytes());
    write_superblock(dev, &mut sb);
    progress(1, 1);
    Ok(geo)
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_i64(inode::now_ns());
    h.finish()
}

/// Seals and writes both superblock copies, each made durable before the next is touched,
/// so that one copy is always whole: the primary first, unless the secondary is not whole
/// now (a crash tore it while the last mount or unmount wrote it), which is written first.
/// (Primary first every time, a crash of the mount that follows such a crash tears the
/// primary too, and the image no longer mounts.)
pub(crate) fn write_superblock<D: PmDevice>(dev: &D, sb: &mut Superblock) {
    sb.seal();
    let mut secondary = Superblock::zeroed();
    dev.read(SB_SECONDARY_OFF, bytemuck::bytes_of_mut(&mut secondary));
    let order = if secondary.validate(dev.len_bytes()).is_ok() {
        [SB_PRIMARY_OFF, SB_SECONDARY_OFF]
    } else {
        [SB_SECONDARY_OFF, SB_PRIMARY_OFF]
    };
    for off in order {
        dev.write(off, bytemuck::bytes_of(sb));
        dev.flush(off, std::mem::size_of::<Superblock>() as u64);
        dev.fence();
    }
}

/// Which superblock copy was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuperblockSource {
    Primary,
    /// The primary was unreadable; the copy at block 1 was used.
    Secondary,
}

/// Reads and validates the superblock, falling back to the copy.
pub fn read_superblock<D: PmDevice>(dev: &D) -> Result<(Superblock, Geometry, SuperblockSource)> {
    if dev.len_bytes() < 2 * BLOCK_BYTES {
        return Err(Error::corrupt(format!("image of {} bytes is too small to hold a superblock", dev.len_bytes())));
    }
    let read = |off| {
        let mut sb = Superblock::zeroed();
        dev.read(off, bytemuck::bytes_of_mut(&mut sb));
        sb
    };
    let primary = read(SB_PRIMARY_OFF);
    match primary.validate(dev.len_bytes()) {
        Ok(g) => Ok((primary, g, SuperblockSource::Primary)),
        Err(e1) => {
            let second = read(SB_SECONDARY_OFF);
            match second.validate(dev.len_bytes()) {
                Ok(g) => Ok((second, g, SuperblockSource::Secondary)),
                Err(_) => Err(e1),
            }
        }
    }
}

impl<D: PmDevice> FsInner<D> {
    pub fn cell(&self, ino: Ino) -> Result<Arc<inode::InodeCell>> {
        self.inodes.get(&*self.dev, &self.geo, ino, &self.tagged)
    }

    /// Marks the image cleanly unmounted (no files may be open).
    pub fn mark_clean(&self) {
        if self.unmounted.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.leave_shared() {
            return;
        }
        self.persist_all_times();
        self.untag_all();
        let summary = self.summary();
        let mut sb = self.sb.lock();
        sb.state = SB_STATE_CLEAN;
        sb.set_summary(summary);
        write_superblock(&*self.dev, &mut sb);
        let _ = self.dev.sync_host();
    }

    pub fn mark_mounted(&self) {
        let mut sb = self.sb.lock();
        sb.state = SB_STATE_MOUNTED;
        // This build may add what older formats lack (special files, attributes).
        sb.format_version = FORMAT_VERSION;
        sb.mount_count += 1;
        write_superblock(&*self.dev, &mut sb);
    }
}

impl<D: PmDevice> Drop for FsInner<D> {
    fn drop(&mut self) {
        // Every handle is gone (each holds an Arc), so no file is open: a clean unmount.
        self.mark_clean();
        self.leave_read_only();
    }
}
