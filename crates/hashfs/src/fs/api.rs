//! The public API, shaped like `std::fs`: a [`FileSystem`] handle, [`File`],
//! [`OpenOptions`], [`Metadata`], directory entries, `read_at`/`write_at`; plus an
//! inode-level API (lookup by parent and name) for the POSIX front ends.
//!
//! Paths are absolute within the file system ("/a/b"; a leading "/" is optional).
//! Intermediate symbolic links are followed (at most 40, else `Loop`). The Rust API does
//! not check permissions: it acts with full rights, like root; front ends check access.

#![forbid(unsafe_code)]

use super::dir::RawDirEntry;
use super::ops::{NodeSpec, Owner, RemoveKind, RenameMode};
use super::recovery::{self, MountReport};
use super::verbs::{on_map, MapVerbs};
use super::{FormatOptions, FsInner};
use crate::layout::dirent::FileType;
use crate::layout::inode::InodeRaw;
use crate::layout::{Extent, Geometry, Ino, Lblk, MappingKind, BLOCK_BYTES, MAX_NAME_BYTES};
use crate::pm::{MmapDevice, OpenMode, PmDevice};
use crate::{Error, Result};
use std::collections::VecDeque;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use super::file::{Access, FallocateMode, File, OpenOptions, SyncScope};
pub use super::ops::{SetAttr, SetTime};
pub type DirEntry = RawDirEntry;

/// Symbolic links followed in one path walk before `Loop`.
pub const MAX_SYMLINK_FOLLOWS: u32 = 40;

/// A mounted file system. Cloning gives another handle to the same mount; the image is
/// marked cleanly unmounted when the last handle (and every open file) is gone.
pub struct FileSystem<D: PmDevice = MmapDevice> {
    pub(crate) inner: Arc<FsInner<D>>,
}

impl<D: PmDevice> Clone for FileSystem<D> {
    fn clone(&self) -> Self {
        FileSystem { inner: self.inner.clone() }
    }
}

/// File attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metadata {
    pub ino: Ino,
    pub file_type: FileType,
    /// Permission bits (mode & 0o7777).
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// Mapped 4 KiB data blocks.
    pub blocks: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub btime_ns: i64,
    pub generation: u32,
    /// Character and block devices: the device number (`st_rdev`); 0 otherwise.
    pub rdev: u64,
}

impl Metadata {
    pub(super) fn from_raw(ino: Ino, raw: &InodeRaw) -> Metadata {
        Metadata {
            ino,
            file_type: FileType::from_mode(raw.mode).expect("checked inode"),
            perm: raw.mode & 0o7777,
            nlink: raw.nlink,
            uid: raw.uid,
            gid: raw.gid,
            size: raw.size,
            blocks: raw.blocks,
            atime_ns: raw.atime_ns,
            mtime_ns: raw.mtime_ns,
            ctime_ns: raw.ctime_ns,
            btime_ns: raw.btime_ns,
            generation: raw.generation,
            rdev: raw.rdev(),
        }
    }
    pub fn is_dir(&self) -> bool {
        self.file_type == FileType::Directory
    }
    pub fn is_file(&self) -> bool {
        self.file_type == FileType::Regular
    }
    pub fn is_symlink(&self) -> bool {
        self.file_type == FileType::Symlink
    }
    pub fn len(&self) -> u64 {
        self.size
    }
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
    /// Full st_mode (type and permission bits).
    /// Whether the calling process may have `want` (`MAY_READ`, `MAY_WRITE`, `MAY_EXEC`:
    /// `R_OK`, `W_OK`, `X_OK`) on this file, as Linux decides for its effective ids
    /// (`fs/perm.rs`).
    pub fn permits(&self, want: u32) -> bool {
        super::perm::permits(self.mode(), self.uid, self.gid, want)
    }

    pub fn mode(&self) -> u32 {
        self.file_type.mode_bits() | self.perm
    }
    /// st_blocks: 512-byte units.
    pub fn st_blocks(&self) -> u64 {
        self.blocks * (BLOCK_BYTES / 512)
    }
}

/// File-system totals (statfs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    pub block_bytes: u64,
    pub blocks_total: u64,
    pub blocks_free: u64,
    pub inodes_total: u64,
    pub inodes_free: u64,
    pub name_max: u64,
}

impl FileSystem<MmapDevice> {
    /// Creates (or overwrites) the image file `path` of `size_bytes` and formats it.
    pub fn format_file(
        path: &Path,
        size_bytes: u64,
        opts: &FormatOptions,
        progress: super::Progress<'_>,
    ) -> Result<Geometry> {
        if !size_bytes.is_multiple_of(BLOCK_BYTES) {
            return Err(Error::InvalidParameter("image size must be a multiple of 4096 bytes".into()));
        }
        let dev = MmapDevice::open(path, OpenMode::CreateTruncate { size_bytes })?;
        if opts.preallocate {
            dev.preallocate().map_err(|e| {
                drop(std::fs::remove_file(path));
                Error::InvalidParameter(format!(
                    "preallocating the {} MiB image on its host file system: {e} (mkfs --sparse leaves it sparse)",
                    size_bytes >> 20
                ))
            })?;
        }
        let opts = FormatOptions { device_is_zeroed: true, ..opts.clone() };
        let g = super::format(&dev, &opts, progress)?;
        dev.sync_host()?;
        Ok(g)
    }

    /// Mounts the image file `path`.
    pub fn open(path: &Path) -> Result<(FileSystem<MmapDevice>, MountReport)> {
        let dev = MmapDevice::open(path, OpenMode::Existing)?;
        FileSystem::mount(Arc::new(dev), &|_, _| {})
    }

    /// Mounts the image file `path` as one of many processes that use it at once
    /// (`fs/shared/mod.rs`): the image's lock taken shared, and the coordination in its
    /// region file on `/dev/shm` (made with the image file's owner and permissions, and
    /// removed by the last process to leave).
    ///
    /// A process that may only read the image file becomes a read-only participant
    /// ([`FileSystem::open_read_only`]).
    pub fn open_shared(path: &Path) -> Result<(FileSystem<MmapDevice>, MountReport)> {
        let dev = match MmapDevice::open(path, OpenMode::Shared) {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return FileSystem::open_read_only(path),
            dev => dev?,
        };
        let image = std::fs::File::open(path)?;
        let region = crate::share::region_path(&image)?;
        FileSystem::mount_shared(Arc::new(dev), &region, crate::share::Access::of_image(&image)?, &|_, _| {})
    }

    /// Mounts the image file `path` read-only, beside any processes that use it
    /// (`fs/shared/read_only.rs`): the image and its region mapped read-only, every call
    /// that would change the image EROFS, every other one read under the image lock's
    /// sequence. The image must be clean or mounted by a live process.
    pub fn open_read_only(path: &Path) -> Result<(FileSystem<MmapDevice>, MountReport)> {
        let dev = MmapDevice::open(path, OpenMode::SharedReadOnly)?;
        let image = std::fs::File::open(path)?;
        let region = crate::share::region_path(&image)?;
        FileSystem::mount_read_only(Arc::new(dev), &region, &|_, _| {})
    }
}

impl<D: PmDevice> FileSystem<D> {
    /// Mounts `dev` (mapped read-only) as a read-only participant ([`FileSystem::open_read_only`]);
    /// `region` is the image's region file, which this process never makes.
    pub fn mount_read_only(
        dev: Arc<D>,
        region: &Path,
        progress: super::Progress<'_>,
    ) -> Result<(FileSystem<D>, MountReport)> {
        let (inner, report) = super::shared::mount_read_only(dev, region, progress)?;
        Ok((FileSystem { inner }, report))
    }

    /// Whether this mount may only read the image ([`FileSystem::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.inner.is_read_only()
    }

    /// Runs `calls`, calls of this file system that change nothing, as one: on a read-only
    /// participant's mount they all read one state of the image (run again if a writer
    /// changed it meanwhile), so that, say, a name resolved and the inode it named opened
    /// are one file; elsewhere `calls` runs once as it is.
    pub fn read_together<T>(&self, calls: impl FnMut() -> Result<T>) -> Result<T> {
        self.inner.read_call(calls)
    }

    /// Runs `calls` as one call of a participant that may write: on a shared mount it holds
    /// the image lock across them (the calls inside take nothing more), so that no other
    /// participant changes the image between them: a name resolved and the inode it named
    /// opened are one file, not another that a rename and a create elsewhere gave the freed
    /// inode number. Elsewhere (one process; a read-only participant, which has
    /// [`Self::read_together`]) `calls` runs as it is.
    pub fn hold_image<T>(&self, calls: impl FnOnce() -> T) -> T {
        let _in = if self.inner.is_read_only() { None } else { Some(self.inner.enter()) };
        calls()
    }

    /// Runs `calls`, calls of this file system that change nothing, as one read of the
    /// image: on a shared mount a participant that may write holds the read side of the
    /// image lock across them (beside other readers, no writer between them); a read-only
    /// participant reads them in one state ([`Self::read_together`]); elsewhere `calls`
    /// runs once as it is. A name resolved and the inode it named then read (a stat by
    /// path) are one file, never one that another process's rename over the name freed.
    pub fn read_held<T>(&self, mut calls: impl FnMut() -> Result<T>) -> Result<T> {
        self.inner.read_call(|| {
            let _read = self.inner.enter_read();
            calls()
        })
    }

    /// Mounts the file system on `dev`, recovering from an unclean shutdown.
    pub fn mount(dev: Arc<D>, progress: super::Progress<'_>) -> Result<(FileSystem<D>, MountReport)> {
        let (inner, report) = recovery::mount(dev, progress, recovery::MountAs::Alone)?;
        Ok((FileSystem { inner }, report))
    }

    /// Mounts the file system on `dev` as one participant of many (`fs/shared/mod.rs`):
    /// `region` is the image's region file (made with `access` if missing). Only HashFS's
    /// mapping is shared yet, every placement (Unsupported otherwise).
    pub fn mount_shared(
        dev: Arc<D>,
        region: &Path,
        access: crate::share::Access,
        progress: super::Progress<'_>,
    ) -> Result<(FileSystem<D>, MountReport)> {
        let (inner, report) = super::shared::mount(dev, region, access, progress)?;
        Ok((FileSystem { inner }, report))
    }

    /// Unmounts cleanly. Fails with Busy if files are open or other handles exist.
    pub fn unmount(self) -> Result<()> {
        if self.inner.inodes.open_files() > 0 || Arc::strong_count(&self.inner) > 1 {
            return Err(Error::Busy);
        }
        self.inner.mark_clean();
        self.inner.dev.sync_host()?;
        Ok(())
    }

    /// Marks the image cleanly unmounted without consuming the handle, for a process that
    /// is exiting (the LD_PRELOAD shim). Every file must be closed; nothing may be done
    /// through any handle afterwards.
    pub fn shutdown(&self) -> Result<()> {
        if self.inner.inodes.open_files() > 0 {
            return Err(Error::Busy);
        }
        self.inner.mark_clean();
        self.inner.dev.sync_host()?;
        Ok(())
    }

    /// On a mount shared by many processes ([`FileSystem::mount_shared`]): how often this
    /// one recovered the image after another died inside a call. None on a mount of one.
    pub fn shared_takeovers(&self) -> Option<u64> {
        self.inner.takeovers()
    }

    /// Of [`Self::shared_takeovers`], those that repaired only what the dead participant's
    /// call named (docs/design.md, *A takeover scoped to the dead call*), not the whole image.
    pub fn shared_takeovers_scoped(&self) -> Option<u64> {
        self.inner.scoped_takeovers()
    }

    pub fn device(&self) -> &Arc<D> {
        &self.inner.dev
    }
    /// Whether a file's fsync has nothing left to do once the times a write left in DRAM
    /// are stored ([`File::sync_all`], `fs/times.rs`): the image's host needs no msync
    /// (tmpfs, DAX). A front end that stores those times at every write may then answer
    /// fsync without doing anything.
    pub fn host_needs_no_sync(&self) -> bool {
        self.inner.dev.host_needs_no_sync()
    }
    pub fn geometry(&self) -> Geometry {
        self.inner.geo
    }
    /// The largest untorn write of any alignment ([`File::write_atomic_at`], and each
    /// piece of a strict mode write): a power of two of bytes, set by the journal's size
    /// (on the default journal 1 MiB for HashFS, 256 KiB for the other block mappings, and
    /// 1 GiB for `ctfs`, whose large untorn writes are pswaps; `fs/untorn.rs`,
    /// `fs/ctfs/untorn_pswap.rs`).
    pub fn untorn_write_max(&self) -> u64 {
        self.inner.untorn_max()
    }

    /// The largest naturally aligned untorn write (a power of two of bytes at a multiple
    /// of itself, as `RWF_ATOMIC` asks): at least [`Self::untorn_write_max`]; larger on
    /// `ctfs` images with small journals, where an aligned pswap changes few entries.
    pub fn untorn_write_max_aligned(&self) -> u64 {
        self.inner.untorn_aligned_max()
    }

    /// The write mode of this mount.
    pub fn write_mode(&self) -> crate::WriteMode {
        if self.inner.is_strict() {
            crate::WriteMode::Strict
        } else {
            crate::WriteMode::Relaxed
        }
    }

    /// Sets the write mode for this mount (the image's own, from mkfs, is where the next
    /// mount starts).
    pub fn set_write_mode(&self, mode: crate::WriteMode) {
        self.inner.strict.store(mode == crate::WriteMode::Strict, std::sync::atomic::Ordering::Relaxed);
    }

    /// On a shared mount, the count of changes published so far by every participant (this
    /// one included): while it stays the same, no name or inode changed. None on a mount of
    /// one process.
    pub fn changes_published(&self) -> Option<u64> {
        self.inner.changes_published()
    }

    /// Turns the caller's permission checks on or off for this mount (`fs/perm.rs`): the
    /// shim's; off by default, where the kernel checks (the FUSE mount).
    pub fn check_access(&self, on: bool) {
        self.inner.checks_access.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn mapping(&self) -> MappingKind {
        self.inner.map.kind()
    }
    /// ctFS images: the leading pages of `ino` that the live view maps now (reads and
    /// in-place writes below them are one copy); None without a view.
    pub fn ctfs_view_pages(&self, ino: Ino) -> Option<u64> {
        let _in = self.inner.enter();
        self.inner.map.ctfs_view().map(|v| v.mapped_pages(ino))
    }

    /// Where logical block `lblk` of `ino` lies: the extent from it to the end of its
    /// mapping entry, or None for a hole: what the mapping structure translates, through
    /// the file's translation cache or cursor.
    pub fn physical_block(&self, ino: Ino, lblk: Lblk) -> Result<Option<Extent>> {
        self.inner.read_call(|| {
            let _in = self.inner.enter();
            let cell = self.inner.cell(ino)?;
            let st = cell.state.read();
            st.live()?;
            let size_blocks = st.raw.size.div_ceil(BLOCK_BYTES);
            if lblk.0 >= size_blocks {
                return Ok(None);
            }
            self.inner.translate(&cell, &st.raw, lblk, size_blocks)
        })
    }

    /// The mapped logical blocks of `ino` as sorted runs (first, count): what reads of a
    /// sparse file need to visit (the crash explorer's snapshots of files past 4 GiB).
    /// A walk of the file's structure; on the global tables (HashFS's, the cuckoo table,
    /// extent hashing) one scan of the whole table, so a check's verb, not a data path's.
    pub fn mapped_runs(&self, ino: Ino) -> Result<Vec<(Lblk, u64)>> {
        self.inner.read_call(|| {
            let _in = self.inner.enter();
            let cell = self.inner.cell(ino)?;
            let st = cell.state.read();
            st.live()?;
            on_map!(self.inner, m => m.mapped_runs(ino, &st.raw))
        })
    }

    /// The bytes stored past EOF in the last block of `ino` (empty when the size ends on
    /// a block boundary or that block is a hole). Invariant F2 (`fs/data.rs`) keeps them
    /// zero, so that a mapping of the block never shows bytes the file no longer has: for
    /// the checks that hold it (the crash explorer's snapshots, fsck's, tests).
    pub fn bytes_past_eof(&self, ino: Ino) -> Result<Vec<u8>> {
        self.inner.read_call(|| {
            let _in = self.inner.enter();
            let cell = self.inner.cell(ino)?;
            let st = cell.state.read();
            st.live()?;
            self.inner.bytes_past_eof(&cell, &st.raw)
        })
    }

    /// HashFS with the regions placement: the open groups (the small keys' region), and
    /// whether moves into the newest ones still wait (a busy or memory-mapped file).
    pub fn open_groups(&self) -> Option<(u64, bool)> {
        let _in = self.inner.enter();
        self.inner.map.open_groups()
    }

    /// HashFS with the grouped placement: the groups claimed by a file's 2 MiB chunk.
    pub fn claimed_groups(&self) -> Option<u64> {
        let _in = self.inner.enter();
        self.inner.map.claimed_groups()
    }

    /// Whether a file's whole 2 MiB chunk written at once (a hole a mapping fills) gets
    /// one aligned, physically contiguous extent while [`free_aligned_extents`] has one:
    /// the aligned allocator's mappings and HashFS's grouped and regions placements. With
    /// HashFS's paper placement (or the bitmap allocator) each block lies apart, one
    /// kernel mapping each when a mapping shows them.
    ///
    /// [`free_aligned_extents`]: Self::free_aligned_extents
    pub fn fills_whole_chunks(&self) -> bool {
        let _in = self.inner.enter();
        self.inner.map.fills_whole_chunks()
    }

    /// Free aligned 2 MiB extents: runs of 512 free data blocks that start 2 MiB-aligned in
    /// the image (WineFS Fig. 3), what a memory-mapped file needs for 2 MiB pages. For
    /// HashFS, runs of 512 free (empty or tombstone) slots.
    pub fn free_aligned_extents(&self) -> u64 {
        let _in = self.inner.enter();
        self.inner.map.free_aligned_extents(self.inner.geo.data_off / BLOCK_BYTES)
    }

    pub fn statfs(&self) -> StatFs {
        let _in = self.inner.enter();
        let (total, free) = self.inner.map.blocks_total_free(self.inner.geo.data_blocks);
        StatFs {
            block_bytes: BLOCK_BYTES,
            blocks_total: total,
            blocks_free: free,
            inodes_total: self.inner.geo.inode_count,
            inodes_free: self.inner.geo.inode_count.saturating_sub(self.inner.inodes_used()),
            name_max: MAX_NAME_BYTES as u64,
        }
    }

    /// Makes everything durable: the times writes left in DRAM (`fs/times.rs`; every other
    /// change is durable when its operation returns), and the image on a host that is not
    /// persistent memory.
    pub fn sync(&self) -> Result<()> {
        if self.inner.is_read_only() {
            return Ok(()); // nothing of this process's to make durable
        }
        let _in = self.inner.enter();
        self.inner.persist_all_times();
        self.inner.sync_data()
    }

    // ---- inode-level API ----

    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        // On a shared mount, beside other participants' reads (the read side): a lookup or
        // a walk of a path reads directories and fills this participant's caches only.
        self.read_held(|| {
            let (ino, _) = self.inner.lookup(parent, name)?;
            self.getattr(ino)
        })
    }

    pub fn getattr(&self, ino: Ino) -> Result<Metadata> {
        self.attr(ino, true)
    }

    /// [`FileSystem::getattr`] for a front end's own bookkeeping (a size, a type, a
    /// permission check), whose times nobody is shown: they are not marked read, so the
    /// file's next write keeps the coarse clock (`inode::write_time_ns`). A stat must use
    /// `getattr`.
    pub fn peek_attr(&self, ino: Ino) -> Result<Metadata> {
        self.attr(ino, false)
    }

    /// Inode `ino`'s attributes, its times marked read if `shown` (a stat).
    fn attr(&self, ino: Ino, shown: bool) -> Result<Metadata> {
        // On a shared mount, beside other participants' reads (the read side).
        self.read_held(|| {
            let cell = self.inner.cell(ino)?;
            let st = cell.state.read();
            st.live()?;
            if shown {
                st.times_read();
            }
            Ok(Metadata::from_raw(ino, &st.raw))
        })
    }

    /// chmod, chown, truncate, utimens. A chmod of a file with an access ACL also rewrites
    /// the ACL's owner, mask and other entries (a second transaction).
    pub fn setattr(&self, ino: Ino, attr: &SetAttr) -> Result<Metadata> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let raw = self.inner.setattr(ino, attr)?;
        if let (Some(p), true) = (attr.perm, raw.xattr_ino != 0) {
            self.chmod_acl(ino, p)?;
        }
        if let Ok(cell) = self.inner.cell(ino) {
            cell.state.read().times_read(); // the caller sees the times
        }
        Ok(Metadata::from_raw(ino, &raw))
    }

    /// open(2)'s O_CREAT on `name` in `parent`: makes a regular file unless the name
    /// exists. Some(the new file) when this call made it; None when the name exists (the
    /// caller opens what it names, following a symlink), also when another thread or
    /// process made it between this call's lookup and its create (the lookup does not
    /// hold the image lock, so another participant's create can come between); with
    /// `exclusive` (O_EXCL) an existing name is EEXIST. `owner` is asked only for a file
    /// this call makes (the process's credentials cost two system calls).
    pub fn create_unless_exists(
        &self,
        parent: Ino,
        name: &[u8],
        perm: u32,
        owner: impl Fn() -> Owner,
        exclusive: bool,
    ) -> Result<Option<Metadata>> {
        self.inner.writable()?;
        let mut tries = 0;
        loop {
            tries += 1;
            let found = {
                let _read = self.inner.enter_read();
                self.inner.lookup(parent, name)
            };
            match found {
                Ok(_) if exclusive => return Err(Error::Exists),
                Ok(_) => return Ok(None),
                Err(Error::NotFound) => {}
                Err(e) => return Err(e),
            }
            super::race_point::reached("create: the lookup found no name");
            match self.create_file_at(parent, name, perm, owner()) {
                Ok(m) => return Ok(Some(m)),
                // Made meanwhile: looked up again (it may be gone again, then made here).
                Err(Error::Exists) if !exclusive && tries < OPEN_RETRIES => {}
                Err(e) => return Err(e),
            }
        }
    }

    pub fn create_file_at(&self, parent: Ino, name: &[u8], perm: u32, owner: Owner) -> Result<Metadata> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let c = self.inner.create_node(parent, name, NodeSpec::File { perm }, owner)?;
        self.getattr(c.ino)
    }

    pub fn mkdir_at(&self, parent: Ino, name: &[u8], perm: u32, owner: Owner) -> Result<Metadata> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let c = self.inner.create_node(parent, name, NodeSpec::Dir { perm }, owner)?;
        self.getattr(c.ino)
    }

    pub fn symlink_at(&self, parent: Ino, name: &[u8], target: &[u8], owner: Owner) -> Result<Metadata> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let c = self.inner.create_node(parent, name, NodeSpec::Symlink { target }, owner)?;
        self.getattr(c.ino)
    }

    /// getxattr(2): the value of attribute `name` (NoData if absent).
    pub fn get_xattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.inner.read_call(|| {
            let _in = self.inner.enter();
            super::xattr::check_name(name)?;
            self.inner.xattrs(ino)?.remove(name).ok_or(Error::NoData)
        })
    }

    /// listxattr(2): every attribute name, sorted.
    pub fn list_xattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        self.inner.read_call(|| {
            let _in = self.inner.enter();
            Ok(self.inner.xattrs(ino)?.into_keys().collect())
        })
    }

    /// setxattr(2), with XATTR_CREATE / XATTR_REPLACE as `mode`. The ACL names
    /// (`system.posix_acl_access`/`_default`) are validated and keep the mode in step, as
    /// Linux does (`fs/acl.rs`), so every front end gets ACL semantics from this one call.
    pub fn set_xattr(&self, ino: Ino, name: &[u8], value: &[u8], mode: super::xattr::XattrMode) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        if name == super::acl::ACCESS || name == super::acl::DEFAULT {
            return self.set_acl(ino, name, value, mode);
        }
        self.inner.change_xattr(ino, name, Some(value), mode)
    }

    /// removexattr(2) (NoData if absent).
    pub fn remove_xattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        self.inner.change_xattr(ino, name, None, super::xattr::XattrMode::Any)
    }

    /// mknod(2): a FIFO, character or block device (with its device number) or socket.
    pub fn mknod_at(
        &self,
        parent: Ino,
        name: &[u8],
        ftype: FileType,
        perm: u32,
        rdev: u64,
        owner: Owner,
    ) -> Result<Metadata> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let c = self.inner.create_node(parent, name, NodeSpec::Special { ftype, perm, rdev }, owner)?;
        self.getattr(c.ino)
    }

    pub fn link_at(&self, ino: Ino, new_parent: Ino, name: &[u8]) -> Result<Metadata> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        self.inner.link(ino, new_parent, name)?;
        self.getattr(ino)
    }

    pub fn unlink_at(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        self.inner.remove(parent, name, RemoveKind::NonDir)
    }

    pub fn rmdir_at(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        self.inner.remove(parent, name, RemoveKind::Dir)
    }

    pub fn rename_at(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        mode: RenameMode,
    ) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        self.inner.rename(parent, name, new_parent, new_name, mode)
    }

    pub fn readlink_ino(&self, ino: Ino) -> Result<Vec<u8>> {
        self.inner.read_call(|| {
            let _in = self.inner.enter();
            self.inner.readlink(ino)
        })
    }

    /// Up to `max` entries after `cookie` (0 = from the start; "." and ".." not included).
    pub fn readdir_ino(&self, ino: Ino, cookie: u64, max: usize) -> Result<Vec<DirEntry>> {
        self.inner.read_call(|| {
            let _in = self.inner.enter();
            self.inner.readdir(ino, cookie, max)
        })
    }

    /// Opens inode `ino` (a regular file or, read-only, anything).
    pub fn open_ino(&self, ino: Ino, access: Access) -> Result<File<D>> {
        if self.inner.is_read_only() {
            let found = self.inner.read_call(|| self.open_found(ino, access))?;
            return self.open_pinned(found, access);
        }
        let _in = self.inner.enter();
        let cell = self.inner.cell(ino)?;
        {
            let st = cell.state.read();
            openable(&st, access)?;
            if cell.open_count.load(Ordering::Acquire) == 0 {
                self.inner.note_open(ino)?;
            }
            cell.open_count.fetch_add(1, Ordering::AcqRel);
        }
        Ok(File { fs: self.inner.clone(), cell, access, pos: 0, generation: 0 })
    }

    /// A read-only participant's open, first step: inode `ino`'s cell and the generation
    /// it has, read in the caller's call (the one that also resolved the name, for a path).
    fn open_found(&self, ino: Ino, access: Access) -> Result<(Arc<super::inode::InodeCell>, u32)> {
        if access.write {
            return Err(Error::ReadOnly);
        }
        let cell = self.inner.cell(ino)?;
        let generation = {
            let st = cell.state.read();
            openable(&st, access)?;
            super::file::opened_generation(&st.raw)
        };
        Ok((cell, generation))
    }

    /// A read-only participant's open, second step: the inode pinned (named nowhere but
    /// in this process: `fs/shared/read_only.rs`), then asked of the media, under the
    /// sequence, whether it still has the generation it was found with (a free racing
    /// the pin moved the sequence); Stale if not.
    fn open_pinned(&self, (cell, generation): (Arc<super::inode::InodeCell>, u32), access: Access) -> Result<File<D>> {
        let ino = cell.ino;
        super::race_point::reached("open: a read-only participant found the inode");
        self.inner.hold_read_only(&cell)?;
        let f = File { fs: self.inner.clone(), cell, access, pos: 0, generation };
        let same = self.inner.read_call(|| {
            let mut raw = super::inode::read_raw(&*self.inner.dev, &self.inner.geo, ino);
            super::hashfs::append_tag::read_plain(&mut raw);
            Ok(raw.check(ino) == crate::layout::inode::InodeState::Allocated
                && super::file::opened_generation(&raw) == generation)
        })?;
        if !same {
            return Err(Error::Stale(ino.0));
        }
        Ok(f)
    }

    // ---- path API ----

    fn components(path: &Path) -> Result<VecDeque<Vec<u8>>> {
        let bytes = path.as_os_str().as_bytes();
        if bytes.contains(&0) {
            return Err(Error::Invalid("path contains a NUL byte"));
        }
        Ok(bytes.split(|&b| b == b'/').filter(|c| !c.is_empty() && *c != b".").map(|c| c.to_vec()).collect())
    }

    /// The parent of directory `dir` (".."; the root is its own parent).
    pub fn parent_of(&self, dir: Ino) -> Result<Ino> {
        self.inner.read_call(|| {
            let _in = self.inner.enter();
            self.parent_in_call(dir)
        })
    }

    /// [`Self::parent_of`] inside a call that holds the image lock or its read side (a
    /// walk's ".." of a symbolic link's target: taking the lock again there, under the
    /// read side a resolution holds, waited for its own reader for ever).
    fn parent_in_call(&self, dir: Ino) -> Result<Ino> {
        let cell = self.inner.cell(dir)?;
        let st = cell.state.read();
        if !st.raw.is_dir() {
            return Err(Error::NotDir);
        }
        Ok(Ino(st.raw.parent))
    }

    fn walk(&self, mut comps: VecDeque<Vec<u8>>, last: LastLink) -> Result<Ino> {
        let mut cur = Ino::ROOT;
        let mut follows = 0;
        while let Some(c) = comps.pop_front() {
            if c == b".." {
                cur = self.parent_in_call(cur)?;
                continue;
            }
            let (ino, ft) = self.inner.lookup(cur, &c)?;
            if ft == FileType::Symlink && (!comps.is_empty() || last == LastLink::Follow) {
                follows += 1;
                if follows > MAX_SYMLINK_FOLLOWS {
                    return Err(Error::Loop);
                }
                let link = self.inner.readlink(ino)?;
                let mut target = &link[..];
                if target.first() == Some(&b'/') {
                    cur = Ino::ROOT;
                    if let Some(mp) = self.inner.mount_point.get() {
                        match target.strip_prefix(&mp.path[..]) {
                            Some(rest) if rest.is_empty() || rest[0] == b'/' => target = rest,
                            _ => {
                                // Where the path leads: the target, then what was left of it.
                                let mut out = target.to_vec();
                                for c in &comps {
                                    if out.last() != Some(&b'/') {
                                        out.push(b'/');
                                    }
                                    out.extend_from_slice(c);
                                }
                                (mp.on_outside)(&out);
                                return Err(Error::LinkOutside(out));
                            }
                        }
                    }
                }
                let t = Self::components(Path::new(std::ffi::OsStr::from_bytes(target)))?;
                for part in t.into_iter().rev() {
                    comps.push_front(part);
                }
                continue;
            }
            if !comps.is_empty() && ft != FileType::Directory {
                // Checked again by lookup, but name the error POSIX expects right here.
                return Err(Error::NotDir);
            }
            cur = ino;
        }
        Ok(cur)
    }

    /// Shows the file system at `path` (absolute, no trailing slash) to the walks of this
    /// mount: see [`MountPoint`](super::MountPoint). Set once; later calls change nothing.
    pub fn set_mount_point(&self, path: &[u8], on_outside: fn(&[u8])) {
        let _ = self.inner.mount_point.set(super::MountPoint { path: path.to_vec(), on_outside });
    }

    /// The inode at `path`, following a final symlink.
    pub fn resolve(&self, path: &Path) -> Result<Ino> {
        self.resolve_with(path, LastLink::Follow)
    }

    /// The inode at `path`, not following a final symlink.
    pub fn resolve_nofollow(&self, path: &Path) -> Result<Ino> {
        self.resolve_with(path, LastLink::NoFollow)
    }

    /// A path that ends in a slash names a directory, as on Linux: a final symlink is
    /// followed, and anything but a directory is NotDir.
    fn resolve_with(&self, path: &Path, last: LastLink) -> Result<Ino> {
        let dir = path.as_os_str().as_bytes().ends_with(b"/");
        self.read_held(|| {
            let ino = self.walk(Self::components(path)?, if dir { LastLink::Follow } else { last })?;
            if dir && !self.inner.cell(ino)?.state.read().raw.is_dir() {
                return Err(Error::NotDir);
            }
            Ok(ino)
        })
    }

    /// The parent directory of `path` and the final name.
    pub fn resolve_parent(&self, path: &Path) -> Result<(Ino, Vec<u8>)> {
        self.inner.read_call(|| {
            let _in = self.inner.enter();
            let mut comps = Self::components(path)?;
            let last = comps.pop_back().ok_or(Error::Exists)?;
            if last == b".." {
                return Err(Error::Exists);
            }
            let parent = self.walk(comps, LastLink::Follow)?;
            if !self.getattr(parent)?.is_dir() {
                return Err(Error::NotDir);
            }
            Ok((parent, last))
        })
    }

    pub fn metadata(&self, path: &Path) -> Result<Metadata> {
        self.read_held(|| self.getattr(self.resolve(path)?))
    }

    pub fn symlink_metadata(&self, path: &Path) -> Result<Metadata> {
        self.read_held(|| self.getattr(self.resolve_nofollow(path)?))
    }

    pub fn exists(&self, path: &Path) -> bool {
        let _read = self.inner.enter_read();
        self.resolve(path).is_ok()
    }

    pub fn create_dir(&self, path: &Path, perm: u32) -> Result<Metadata> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let (p, name) = self.resolve_parent(path)?;
        self.mkdir_at(p, &name, perm, Owner::current())
    }

    pub fn create_dir_all(&self, path: &Path, perm: u32) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let mut cur = std::path::PathBuf::from("/");
        for c in Self::components(path)? {
            cur.push(std::ffi::OsStr::from_bytes(&c));
            match self.create_dir(&cur, perm) {
                Ok(_) => {}
                Err(Error::Exists) if self.metadata(&cur)?.is_dir() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub fn remove_file(&self, path: &Path) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let (p, name) =
            self.resolve_parent(path).map_err(|e| if matches!(e, Error::Exists) { Error::IsDir } else { e })?;
        self.unlink_at(p, &name)
    }

    pub fn remove_dir(&self, path: &Path) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let (p, name) =
            self.resolve_parent(path).map_err(|e| if matches!(e, Error::Exists) { Error::Busy } else { e })?;
        self.rmdir_at(p, &name)
    }

    /// Removes a directory and everything below it.
    pub fn remove_dir_all(&self, path: &Path) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let ino = self.resolve_nofollow(path)?;
        if !self.getattr(ino)?.is_dir() {
            return self.remove_file(path);
        }
        loop {
            let entries = self.readdir_ino(ino, 0, 256)?;
            if entries.is_empty() {
                break;
            }
            for e in entries {
                let child = path.join(std::ffi::OsStr::from_bytes(&e.name));
                if e.file_type == FileType::Directory {
                    self.remove_dir_all(&child)?;
                } else {
                    self.unlink_at(ino, &e.name)?;
                }
            }
        }
        self.remove_dir(path)
    }

    pub fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        self.rename_with(from, to, RenameMode::Replace)
    }

    pub fn rename_with(&self, from: &Path, to: &Path, mode: RenameMode) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let (sp, sn) =
            self.resolve_parent(from).map_err(|e| if matches!(e, Error::Exists) { Error::Busy } else { e })?;
        let (dp, dn) = self.resolve_parent(to).map_err(|e| if matches!(e, Error::Exists) { Error::Busy } else { e })?;
        self.rename_at(sp, &sn, dp, &dn, mode)
    }

    pub fn hard_link(&self, original: &Path, link: &Path) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let ino = self.resolve_nofollow(original)?;
        let (p, name) = self.resolve_parent(link)?;
        self.link_at(ino, p, &name).map(|_| ())
    }

    pub fn symlink(&self, target: &Path, link: &Path) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let (p, name) = self.resolve_parent(link)?;
        self.symlink_at(p, &name, target.as_os_str().as_bytes(), Owner::current()).map(|_| ())
    }

    pub fn read_link(&self, path: &Path) -> Result<std::path::PathBuf> {
        self.inner.read_call(|| {
            let _in = self.inner.enter();
            use std::os::unix::ffi::OsStringExt;
            let bytes = self.readlink_ino(self.resolve_nofollow(path)?)?;
            Ok(std::path::PathBuf::from(std::ffi::OsString::from_vec(bytes)))
        })
    }

    /// All entries of the directory at `path` ("." and ".." not included).
    pub fn read_dir(&self, path: &Path) -> Result<Vec<DirEntry>> {
        self.inner.read_call(|| {
            let _in = self.inner.enter();
            let ino = self.resolve(path)?;
            let mut out = Vec::new();
            let mut cookie = 0;
            loop {
                let batch = self.readdir_ino(ino, cookie, 1024)?;
                match batch.last() {
                    Some(e) => cookie = e.cookie,
                    None => return Ok(out),
                }
                out.extend(batch);
            }
        })
    }

    pub fn set_permissions(&self, path: &Path, perm: u32) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        self.setattr(self.resolve(path)?, &SetAttr { perm: Some(perm), ..Default::default() }).map(|_| ())
    }

    pub fn set_owner(&self, path: &Path, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        self.setattr(self.resolve(path)?, &SetAttr { uid, gid, ..Default::default() }).map(|_| ())
    }

    pub fn set_times(&self, path: &Path, atime: Option<SetTime>, mtime: Option<SetTime>) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        self.setattr(self.resolve(path)?, &SetAttr { atime, mtime, ..Default::default() }).map(|_| ())
    }

    /// Reads a whole file.
    pub fn read(&self, path: &Path) -> Result<Vec<u8>> {
        self.inner.read_call(|| {
            let _in = self.inner.enter();
            let mut f = self.open_file(path, OpenOptions::new().read(true))?;
            super::race_point::reached("read: the file opened");
            let mut v = Vec::with_capacity(f.metadata()?.size as usize);
            f.read_to_end(&mut v).map_err(Error::Io)?;
            Ok(v)
        })
    }

    /// Creates or replaces a file with `data`.
    pub fn write(&self, path: &Path, data: &[u8]) -> Result<()> {
        self.inner.writable()?;
        let _in = self.inner.enter();
        let f = self.open_file(path, OpenOptions::new().write(true).create(true).truncate(true))?;
        let mut done = 0;
        while done < data.len() {
            done += f.write_at(done as u64, &data[done..])?;
        }
        Ok(())
    }

    pub fn open_file(&self, path: &Path, opts: &OpenOptions) -> Result<File<D>> {
        let _in = self.inner.enter();
        let access = Access { read: opts.read, write: opts.write || opts.append, append: opts.append };
        if !access.read && !access.write {
            return Err(Error::Invalid("open needs read or write access"));
        }
        if (opts.truncate || opts.create || opts.create_new) && !access.write {
            return Err(Error::Invalid("create or truncate needs write access"));
        }
        if access.write {
            self.inner.writable()?;
        }
        // The inode the path named may be freed before it is opened (a rename over it, an
        // unlink, in another thread): the path is resolved again, so that the open finds
        // what the path names now, as rename's atomicity promises, not a stale inode; and
        // a create that found the name taken may find it gone when it resolves it.
        let mut tries = 0;
        // Whether this open made the file: then, as in Linux, O_TRUNC truncates nothing
        // (a new file is empty; a truncation would be a transaction for its times).
        let mut created = false;
        let f = loop {
            tries += 1;
            let (resolved, r) = if self.inner.is_read_only() {
                // The name resolved and its inode's generation read in one call: between
                // two, a writer could free the inode and make another file of it.
                match self.inner.read_call(|| {
                    let (ino, _) = self.resolve_for_open(path, opts)?;
                    super::race_point::reached("open: a read-only participant resolved the name");
                    self.open_found(ino, access)
                }) {
                    Ok(found) => (true, self.open_pinned(found, access)),
                    Err(e) => (false, Err(e)),
                }
            } else {
                match self.resolve_for_open(path, opts) {
                    Ok((ino, made)) => {
                        created = made;
                        (true, self.open_ino(ino, access))
                    }
                    Err(e) => (false, Err(e)),
                }
            };
            match r {
                Err(Error::Stale(_)) if tries < OPEN_RETRIES => {}
                Err(Error::NotFound) if tries < OPEN_RETRIES && (resolved || opts.create) => {}
                r => break r?,
            }
        };
        if opts.truncate && !created {
            f.set_len(0)?;
        }
        Ok(f)
    }

    /// The inode `path` names for [`Self::open_file`], made if `opts` say so, and whether
    /// this call made it.
    fn resolve_for_open(&self, path: &Path, opts: &OpenOptions) -> Result<(Ino, bool)> {
        Ok(if opts.create || opts.create_new {
            let (p, name) =
                self.resolve_parent(path).map_err(|e| if matches!(e, Error::Exists) { Error::IsDir } else { e })?;
            let owner = opts.owner.unwrap_or_else(Owner::current);
            match self.create_unless_exists(p, &name, opts.perm, || owner, opts.create_new)? {
                Some(m) => (m.ino, true),
                None => (self.resolve(path)?, false),
            }
        } else {
            (self.resolve(path)?, false)
        })
    }
}

/// Whether a path walk follows a symbolic link in the path's last component.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LastLink {
    Follow,
    NoFollow,
}

/// How many times an open resolves its path again when the inode it found was freed
/// before it was opened (each time by another thread's or process's rename or unlink).
pub const OPEN_RETRIES: u32 = 8;

/// Whether an inode may be opened with `access` (EISDIR for a directory opened to write;
/// FIFOs, devices and sockets are the kernel's).
fn openable(st: &super::inode::InodeMem, access: Access) -> Result<()> {
    st.live()?;
    if st.raw.is_dir() && access.write {
        return Err(Error::IsDir);
    }
    if st.raw.is_special() {
        return Err(Error::Unsupported("a FIFO, device or socket is opened through the kernel (a mount)"));
    }
    Ok(())
}
