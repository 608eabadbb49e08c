//! The FUSE front ends: this module serves a mounted HashFS through the kernel, so that
//! every program can use it; [`stacked`] serves SPFS's stacked mode (`hashfs_spfs::Stack`).
//!
//! Permissions: the mount uses `default_permissions`, so the kernel checks every access
//! against the mode, owner and group we report, with the caller's real credentials
//! (supplementary groups included), and applies POSIX's rules for sticky directories and
//! for who may chmod, chown and set times (`setattr_prepare`), clearing set-group-ID where
//! POSIX says. The daemon (root, `allow_other`) applies the caller's identity where the
//! kernel cannot: new inodes belong to the caller's uid and gid, or to the directory's
//! group under a set-group-ID directory (new directories inherit the bit), and the umask
//! is applied.
//!
//! Every reply is sent exactly once; errors map through `hashfs::Error::errno`.

#![forbid(unsafe_code)]

pub mod dirty_limit;
mod locks;
mod nodes;
mod session;
pub mod stacked;
mod stacked_caller;
mod watch;

pub use session::{io_uring_offered, session_config, KernelFlags, DEFAULT_THREADS, IO_URING_DEPTH, NO_IO_URING};
pub use watch::{watch_changes, WATCH_PERIOD};

use fuser::{
    Errno, FileAttr, FileHandle, FileType as FuseType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLock, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request, TimeOrNow, WriteFlags,
};
use hashfs::pm::PmDevice;
use hashfs::Access;
use hashfs::Inherited;
use hashfs::XattrMode;
use hashfs::{Error, File, FileSystem, FileType, Ino, Metadata, SetAttr};
use hashfs::{Owner, RenameMode, SetTime, SyncScope};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nodes::{ino_of, node_id, Nodes};

/// How long the kernel may cache names and attributes by default (mount option
/// `cache_timeout=SECONDS`). The image is locked by this daemon, so every
/// change to it reaches HashFS as a request the kernel made, and the kernel updates or
/// drops what it cached for that request itself: a new entry's attributes come with its
/// reply; an unlink, rmdir or rename drops the victim's cached attributes and the name; a
/// create, mkdir, unlink or rename drops the directory's; a write, truncation, setattr,
/// link or xattr change drops (or replaces) the inode's, the mode included when the
/// daemon clears set-ID bits. Nothing changes an inode behind the kernel's back, so the
/// cache never shows a state HashFS does not have, however long it is kept: the
/// timeout bounds only how long the kernel may skip asking (measured in
/// docs/benchmarks.md: the lookups and getattrs it saves under filebench).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The root's attribute that answers the daemon's process id (not stored in the image).
pub const DAEMON_PID_XATTR: &str = "hashfs.pid";
const S_ISGID: u32 = 0o2000;

fn errno(e: &Error) -> Errno {
    Errno::from_i32(e.errno())
}

fn time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

fn ns(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i64,
        Err(e) => -(e.duration().as_nanos() as i64),
    }
}

fn kind(t: FileType) -> FuseType {
    match t {
        FileType::Regular => FuseType::RegularFile,
        FileType::Directory => FuseType::Directory,
        FileType::Symlink => FuseType::Symlink,
        FileType::Fifo => FuseType::NamedPipe,
        FileType::CharDevice => FuseType::CharDevice,
        FileType::BlockDevice => FuseType::BlockDevice,
        FileType::Socket => FuseType::Socket,
    }
}

fn attr(m: &Metadata) -> FileAttr {
    FileAttr {
        ino: INodeNo(m.ino.get()),
        size: m.size,
        blocks: m.st_blocks(),
        atime: time(m.atime_ns),
        mtime: time(m.mtime_ns),
        ctime: time(m.ctime_ns),
        crtime: time(m.btime_ns),
        kind: kind(m.file_type),
        perm: m.perm as u16,
        nlink: m.nlink,
        uid: m.uid,
        gid: m.gid,
        rdev: hashfs::dev_to_kernel(m.rdev).unwrap_or(0),
        blksize: 4096,
        flags: 0,
    }
}

/// getxattr/listxattr's size protocol: 0 asks for the size; a smaller buffer is ERANGE.
fn xattr_reply(reply: ReplyXattr, data: &[u8], size: u32) {
    if size == 0 {
        reply.size(data.len() as u32);
    } else if data.len() > size as usize {
        reply.error(Errno::ERANGE);
    } else {
        reply.data(data);
    }
}

enum Handle<D: PmDevice> {
    File(Arc<File<D>>),
    Dir,
}

/// How the kernel may cache file data (mount options `writeback_cache`, `direct_io`) and
/// names and attributes (`cache_timeout=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FuseOptions {
    /// The kernel's write-back cache: a write returns once it is in the page cache and
    /// reaches HashFS (and durability) at fsync, close, or the kernel's write-back (about
    /// 30 s later), as on a disk file system. Off: every write is durable when it returns.
    pub writeback_cache: bool,
    /// No page cache for file data: reads and writes go to the daemon straight from the
    /// caller's buffer (one copy fewer for large writes, a round trip per read).
    pub direct_io: bool,
    /// How long the kernel may cache a name's lookup and an inode's attributes (fuser
    /// gives an entry and its attributes one timeout).
    pub cache_timeout: Duration,
    /// FUSE over io_uring with this many entries per CPU (`fuser::Config::io_uring_depth`):
    /// requests go through a ring per CPU instead of `/dev/fuse`. The kernel must offer it
    /// (Linux 6.14+, `/sys/module/fuse/parameters/enable_uring`); INIT fails if it does not.
    pub io_uring: Option<usize>,
}

impl Default for FuseOptions {
    fn default() -> Self {
        FuseOptions { writeback_cache: false, direct_io: false, cache_timeout: DEFAULT_TIMEOUT, io_uring: None }
    }
}

/// The FUSE file system over a mounted HashFS.
pub struct HashFsFuse<D: PmDevice> {
    fs: FileSystem<D>,
    handles: Mutex<HashMap<u64, Arc<Handle<D>>>>,
    next_fh: AtomicU64,
    opts: FuseOptions,
    nodes: Nodes<D>,
    /// On a shared mount: record locks taken in the image's table of record locks, where
    /// the shim takes its processes' (`locks.rs`). None: the kernel keeps the mount's locks
    /// itself.
    locks: Option<locks::ImageLocks>,
}

impl<D: PmDevice> HashFsFuse<D> {
    pub fn new(fs: FileSystem<D>) -> Self {
        Self::with_options(fs, FuseOptions::default())
    }

    pub fn with_options(fs: FileSystem<D>, opts: FuseOptions) -> Self {
        HashFsFuse {
            fs,
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            opts,
            nodes: Nodes::new(),
            locks: None,
        }
    }

    /// Record locks through the mount taken in the image's table of record locks, where
    /// shim processes take theirs (a shared mount: `locks.rs`), so that the two exclude
    /// each other. Without the daemon's start time (`/proc`), the kernel keeps them.
    pub fn with_image_locks(mut self) -> Self {
        self.locks = locks::ImageLocks::new();
        if self.locks.is_none() {
            eprintln!("hashfs: no start time of the daemon: record locks through the mount stay the kernel's");
        }
        self
    }

    /// Every write is made as durable as an fsync would make it before it is answered
    /// (its times stored too), so fsync has nothing to do and the kernel is told not to
    /// send it (see [`Filesystem::fsync`] below): the image needs no msync and the kernel
    /// holds no dirty pages past a write's return (no write-back cache).
    fn sync_at_write(&self) -> bool {
        !self.opts.writeback_cache && self.fs.host_needs_no_sync()
    }

    /// The kernel opens and closes files without asking (see [`Filesystem::open`]), except
    /// under `direct_io`, whose handles carry FOPEN_DIRECT_IO.
    fn no_open(&self) -> bool {
        !self.opts.direct_io
    }

    /// The open flags of a new handle. FOPEN_NOFLUSH: a close sends no FLUSH round trip
    /// (HashFS has nothing to do then: every write is durable when it returns; under the
    /// write-back cache the kernel still writes dirty pages back at close, and sends FLUSH
    /// until [`Filesystem::flush`] has answered ENOSYS once). FOPEN_KEEP_CACHE: an open
    /// keeps the file's pages the kernel already has, instead of dropping them and reading
    /// the file again through the daemon. This is
    /// sound for the reason the names and attributes may be cached (`cache_timeout`): the
    /// daemon holds the image locked, so a file's data changes only through a request
    /// this kernel made (a write through its cache, a store through a mapping written
    /// back, a truncation, fallocate's punch and zero, copy_file_range), and the kernel
    /// updates or drops the pages each one touches. Nothing in HashFS changes a file's
    /// bytes on its own (a block moved by evacuation keeps them).
    /// With record locks on the image (a shared mount), a close sends FLUSH: it drops the
    /// closer's locks on the file.
    fn fopen_flags(&self) -> FopenFlags {
        let noflush = if self.locks.is_some() { FopenFlags::empty() } else { FopenFlags::FOPEN_NOFLUSH };
        if self.opts.direct_io {
            noflush | FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
        } else {
            noflush | FopenFlags::FOPEN_KEEP_CACHE
        }
    }

    /// HashFS's access for a kernel open: under the write-back cache the kernel reads
    /// around partial-page writes through any handle and places appends itself.
    fn access(&self, flags: i32) -> Access {
        let acc = flags & libc::O_ACCMODE;
        let wb = self.opts.writeback_cache;
        Access {
            read: acc == libc::O_RDONLY || acc == libc::O_RDWR || wb,
            write: acc == libc::O_WRONLY || acc == libc::O_RDWR,
            append: flags & libc::O_APPEND != 0 && !wb,
        }
    }

    /// [`Self::access`] for a create, which also writes (the new file's attributes).
    fn create_access(&self, flags: i32) -> Access {
        Access { write: true, ..self.access(flags) }
    }

    /// What a write or truncation by an unprivileged caller does to a file's mode (the
    /// kernel leaves it to the daemon under FUSE_HANDLE_KILLPRIV_V2): set-user-ID goes,
    /// and set-group-ID where group execution makes it mean something.
    fn kill_suidgid(&self, i: Ino) -> Result<(), Error> {
        let md = self.fs.peek_attr(i)?;
        let (perm, p) = (md.perm, hashfs::perm_without_set_id(md.perm, md.file_type));
        if p != perm {
            self.fs.setattr(i, &SetAttr { perm: Some(p), ..SetAttr::default() })?;
        }
        Ok(())
    }

    fn add_handle(&self, h: Handle<D>) -> FileHandle {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().expect("handle table").insert(fh, Arc::new(h));
        FileHandle(fh)
    }

    /// The file a request on `i` with handle `fh` goes through: handle 0 is the kernel's
    /// own open of a file it did not ask the daemon to open (no-open mode).
    fn io_file(&self, i: INodeNo, fh: FileHandle) -> Result<Arc<File<D>>, Error> {
        if fh.0 == 0 {
            self.nodes.file(&self.fs, i)
        } else {
            self.file(fh)
        }
    }

    fn file(&self, fh: FileHandle) -> Result<Arc<File<D>>, Error> {
        let h = self.handles.lock().expect("handle table").get(&fh.0).cloned();
        match h.as_deref() {
            Some(Handle::File(f)) => Ok(f.clone()),
            _ => Err(Error::BadDescriptor),
        }
    }

    /// Owner, permission bits and inherited ACLs of a new inode made by `req` in `parent`
    /// (the kernel sends the mode unmasked, FUSE_DONT_MASK, so that a default ACL can
    /// take the umask's place).
    fn new_owner(
        &self,
        req: &Request,
        parent: Ino,
        mode: u32,
        umask: u32,
        ftype: FileType,
    ) -> Result<(Owner, Inherited), Error> {
        let is_dir = ftype == FileType::Directory;
        let p = self.fs.getattr(parent)?;
        let mut inh = self.fs.inherit(parent, mode, umask, ftype)?;
        let mut perm = inh.perm;
        let gid = if p.perm & S_ISGID != 0 {
            if is_dir {
                perm |= S_ISGID;
            }
            p.gid
        } else {
            req.gid()
        };
        if !is_dir && perm & S_ISGID != 0 && gid != req.gid() && req.uid() != 0 {
            perm &= !S_ISGID;
        }
        inh.perm = perm;
        Ok((Owner { uid: req.uid(), gid }, inh))
    }

    /// Sets a new inode's inherited ACLs; returns its attributes as they then are.
    fn finish_new(&self, m: Metadata, inh: &Inherited) -> Result<Metadata, Error> {
        if inh.access.is_none() && inh.default.is_none() {
            return Ok(m);
        }
        self.fs.apply_inherited(m.ino, inh)?;
        self.fs.getattr(m.ino)
    }

    /// Creates a regular file as `req`.
    fn create_regular(
        &self,
        req: &Request,
        parent: Ino,
        name: &OsStr,
        mode: u32,
        umask: u32,
    ) -> Result<Metadata, Error> {
        let (owner, inh) = self.new_owner(req, parent, mode, umask, FileType::Regular)?;
        let m = self.fs.create_file_at(parent, name.as_bytes(), inh.perm, owner)?;
        self.finish_new(m, &inh)
    }

    /// The HashFS inode the kernel's node ID names (`nodes.rs`): on a shared mount, ESTALE
    /// when that inode is gone or its number is another inode's now (freed by another
    /// participant since the kernel was given it). A mount alone frees nothing the kernel
    /// knows (`Nodes::hold`) and skips the check.
    fn ino(&self, i: INodeNo) -> Result<Ino, Error> {
        let (ino, generation) = ino_of(i);
        if generation != 0 && self.locks.is_some() {
            match self.fs.peek_attr(ino) {
                Ok(m) if m.generation == generation => {}
                Ok(_) | Err(Error::NotFound) => return Err(Error::Stale(ino.0)),
                Err(e) => return Err(e),
            }
        }
        Ok(ino)
    }

    /// Opens the inode the kernel's node ID names. Checked again once open (the open holds
    /// it): another participant may have freed it and a new file taken its number since
    /// the check, and the kernel, told ESTALE, looks the path up again and opens what it
    /// names now, as an open racing a rename on a local file system opens the old file or
    /// the new.
    fn open_node(&self, i: INodeNo, access: Access) -> Result<File<D>, Error> {
        self.ino(i)?;
        nodes::open(&self.fs, i, access)
    }

    /// A setlk or flock on a shared mount (`locks.rs`): `call` for the inode `i` names,
    /// taken in the table; a wait runs on a thread of its own.
    fn set_lock(&self, i: INodeNo, call: impl FnOnce(Ino) -> locks::LockCall, sleep: bool, reply: ReplyEmpty) {
        let Some(l) = &self.locks else { return reply.error(Errno::ENOSYS) };
        let call = match self.ino(i) {
            Ok(i) => call(i),
            Err(e) => return reply.error(errno(&e)),
        };
        let answer = |r: Result<(), i32>| match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(Errno::from_i32(e)),
        };
        if sleep {
            l.set_waiting(&self.fs, call, answer);
        } else {
            answer(l.set(&self.fs, call));
        }
    }

    fn entry(&self, reply: ReplyEntry, r: Result<Metadata, Error>) {
        match r {
            Ok(m) => {
                self.nodes.looked_up(node_id(&m));
                reply.entry_node(node_id(&m), &self.opts.cache_timeout, &attr(&m), Generation(m.generation as u64))
            }
            Err(e) => reply.error(errno(&e)),
        }
    }
}

impl<D: PmDevice> Filesystem for HashFsFuse<D> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // POSIX ACLs enforced by the kernel (with default_permissions), modes sent
        // unmasked so that a default ACL replaces the umask. A kernel without them
        // refuses the flags: ACLs are then stored but not enforced.
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_POSIX_ACL | InitFlags::FUSE_DONT_MASK) {
            eprintln!("hashfs: the kernel lacks FUSE capabilities {missing:?}: ACLs are not enforced");
        }
        // The daemon clears set-user-ID and set-group-ID where a write or truncation by
        // someone else must; without this the kernel asks for security.capability (a
        // round trip) before every write.
        if config.add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2).is_err() {
            eprintln!("hashfs: the kernel lacks FUSE_HANDLE_KILLPRIV_V2: every write costs a getxattr round trip");
        }
        // A shared mount's record locks are the daemon's (on the image file, where the
        // shim takes its processes'): the kernel sends them.
        if self.locks.is_some() && config.add_capabilities(InitFlags::FUSE_POSIX_LOCKS).is_err() {
            eprintln!(
                "hashfs: the kernel lacks FUSE_POSIX_LOCKS: record locks through the mount do not exclude the shim's"
            );
        }
        if self.locks.is_some() && config.add_capabilities(InitFlags::FUSE_FLOCK_LOCKS).is_err() {
            eprintln!("hashfs: the kernel lacks FUSE_FLOCK_LOCKS: flock through the mount does not exclude the shim's");
        }
        // Lookups and readdirs of one directory may run in parallel (the file system
        // locks what it must itself).
        let _ = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS);
        // Listings with attributes where the kernel sees them followed by lookups.
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO)
        {
            eprintln!("hashfs: the kernel lacks {missing:?}: listings are followed by a lookup per name");
        }
        // Shared mappings of files opened for direct IO (Linux 6.6): the kernel keeps
        // their pages cached and coherent with the direct writes.
        if self.opts.direct_io && config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP).is_err() {
            eprintln!("hashfs: the kernel lacks FUSE_DIRECT_IO_ALLOW_MMAP: files opened with direct_io cannot be mapped shared");
        }
        if self.opts.io_uring.is_some() && config.add_capabilities(InitFlags::FUSE_OVER_IO_URING).is_err() {
            return Err(std::io::Error::other(NO_IO_URING));
        }
        if self.opts.writeback_cache {
            if let Err(missing) = config.add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE) {
                eprintln!("hashfs: the kernel lacks {missing:?}: writeback_cache is ignored");
                self.opts.writeback_cache = false;
            }
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = self.ino(parent).and_then(|p| {
            let mut tries = 0;
            loop {
                tries += 1;
                let m = self.fs.lookup(p, name.as_bytes())?;
                // On a shared mount the file is kept open for the kernel's open that may
                // follow (`Nodes::keep_recent`); one freed between the lookup and that
                // is looked up again.
                if self.locks.is_none() || self.nodes.keep_recent(&self.fs, &m) || tries == hashfs::OPEN_RETRIES {
                    return Ok(m);
                }
            }
        });
        self.entry(reply, r)
    }

    /// The kernel let go of an inode it was given `nlookup` times (see `nodes.rs`).
    fn forget(&self, _req: &Request, i: INodeNo, nlookup: u64) {
        self.nodes.forget(i, nlookup);
    }

    fn getattr(&self, _req: &Request, i: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.ino(i).and_then(|i| self.fs.getattr(i)) {
            Ok(m) => reply.attr(&self.opts.cache_timeout, &attr(&m)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        i: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let t = |x: TimeOrNow| match x {
            TimeOrNow::Now => SetTime::Now,
            TimeOrNow::SpecificTime(s) => SetTime::At(ns(s)),
        };
        let mut a =
            SetAttr { perm: mode.map(|m| m & 0o7777), uid, gid, size, atime: atime.map(t), mtime: mtime.map(t) };
        // With FUSE_HANDLE_KILLPRIV_V2 the daemon drops the set-ID bits: on a truncation
        // by an unprivileged caller, and on every owner or group change of a non-directory
        // (root's too, as Linux's chown), in the same transaction.
        let kill = size.is_some() && mode.is_none() && req.uid() != 0;
        match self.ino(i).and_then(|i| {
            if (uid.is_some() || gid.is_some()) && mode.is_none() {
                let md = self.fs.peek_attr(i)?;
                let kept = hashfs::perm_without_set_id(md.perm, md.file_type);
                a.perm = (kept != md.perm).then_some(kept);
            }
            let m = self.fs.setattr(i, &a)?;
            if kill {
                self.kill_suidgid(i)?;
                return self.fs.getattr(i);
            }
            Ok(m)
        }) {
            Ok(m) => reply.attr(&self.opts.cache_timeout, &attr(&m)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&self, _req: &Request, i: INodeNo, reply: ReplyData) {
        match self.ino(i).and_then(|i| self.fs.readlink_ino(i)) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        // FIFOs, devices and sockets are inodes of their own type; the kernel supplies
        // their behaviour (pipes, device drivers, socket binding) once they exist.
        let r = self.ino(parent).and_then(|p| match FileType::from_mknod_mode(mode) {
            Some(FileType::Regular) => self.create_regular(req, p, name, mode, umask),
            Some(t) => {
                let (owner, inh) = self.new_owner(req, p, mode, umask, t)?;
                let rdev = if matches!(t, FileType::CharDevice | FileType::BlockDevice) {
                    hashfs::dev_from_kernel(rdev)
                } else {
                    0
                };
                let m = self.fs.mknod_at(p, name.as_bytes(), t, inh.perm, rdev, owner)?;
                self.finish_new(m, &inh)
            }
            None => Err(Error::Invalid("mknod: not a file type mknod makes")),
        });
        self.entry(reply, r)
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let r = self.ino(parent).and_then(|p| {
            let (owner, inh) = self.new_owner(req, p, mode, umask, FileType::Directory)?;
            let m = self.fs.mkdir_at(p, name.as_bytes(), inh.perm, owner)?;
            self.finish_new(m, &inh)
        });
        self.entry(reply, r)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.ino(parent).and_then(|p| {
            self.nodes.hold(&self.fs, p, name.as_bytes());
            self.fs.unlink_at(p, name.as_bytes())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.ino(parent).and_then(|p| self.fs.rmdir_at(p, name.as_bytes())) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let r = self.ino(parent).and_then(|p| {
            let (owner, _) = self.new_owner(req, p, 0o777, 0, FileType::Symlink)?;
            self.fs.symlink_at(p, link_name.as_bytes(), target.as_os_str().as_bytes(), owner)
        });
        self.entry(reply, r)
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mode = if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            RenameMode::Exchange
        } else if flags.contains(RenameFlags::RENAME_NOREPLACE) {
            RenameMode::NoReplace
        } else if flags.is_empty() {
            RenameMode::Replace
        } else {
            return reply.error(Errno::EINVAL); // RENAME_WHITEOUT
        };
        let r = self.ino(parent).and_then(|p| self.ino(newparent).map(|n| (p, n))).and_then(|(p, n)| {
            if mode == RenameMode::Replace {
                self.nodes.hold(&self.fs, n, newname.as_bytes());
            }
            self.fs.rename_at(p, name.as_bytes(), n, newname.as_bytes(), mode)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn link(&self, _req: &Request, i: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let r = self
            .ino(i)
            .and_then(|i| self.ino(newparent).map(|n| (i, n)))
            .and_then(|(i, n)| self.fs.link_at(i, n, newname.as_bytes()));
        self.entry(reply, r)
    }

    /// Answered ENOSYS (outside `direct_io`), which the kernel takes as "open and close
    /// files yourself": from then on an open, and its close, cost no round trip (a web
    /// server's whole-file reads of cached files none at all), and the kernel's reads and
    /// writes come with handle 0, served through the inode's file in `nodes.rs`. What an
    /// open did here the kernel does itself: it checked the caller's access already, an
    /// O_TRUNC reaches the daemon as a truncation (SETATTR, which clears set-ID bits as a
    /// truncation by others must), and O_APPEND writes come at the end the kernel knows
    /// (every change of size goes through it). Its own files keep their cached pages, as
    /// FOPEN_KEEP_CACHE asked before.
    fn open(&self, req: &Request, i: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if self.no_open() {
            return reply.error(Errno::ENOSYS);
        }
        let access = self.access(flags.0);
        match self.open_node(i, access) {
            Ok(f) => {
                if flags.0 & libc::O_TRUNC != 0 && access.write {
                    if let Err(e) = f.set_len(0) {
                        return reply.error(errno(&e));
                    }
                    if req.uid() != 0 {
                        if let Err(e) = self.kill_suidgid(f.ino()) {
                            return reply.error(errno(&e));
                        }
                    }
                }
                reply.opened(self.add_handle(Handle::File(Arc::new(f))), self.fopen_flags())
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        // Once the kernel opens files itself it may never release a CREATE's handle: the
        // new file is then served, as its own opens are, through its inode's file, kept
        // until the kernel forgets the inode (handle 0).
        let r = self.ino(parent).and_then(|p| {
            let m = self.create_regular(req, p, name, mode, umask)?;
            if self.no_open() {
                self.nodes.created(&self.fs, &m)?;
                return Ok((m, FileHandle(0)));
            }
            let f = self.fs.open_ino(m.ino, self.create_access(flags))?;
            self.nodes.looked_up(node_id(&m));
            Ok((m, self.add_handle(Handle::File(Arc::new(f)))))
        });
        match r {
            Ok((m, fh)) => reply.created_node(
                node_id(&m),
                &self.opts.cache_timeout,
                &attr(&m),
                Generation(m.generation as u64),
                fh,
                self.fopen_flags(),
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        i: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let f = match self.io_file(i, fh) {
            Ok(f) => f,
            Err(e) => return reply.error(errno(&e)),
        };
        let mut buf = vec![0u8; size as usize];
        match f.read_at(offset, &mut buf) {
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        i: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let f = match self.io_file(i, fh) {
            Ok(f) => f,
            Err(e) => return reply.error(errno(&e)),
        };
        match f.write_at(offset, data) {
            Ok(n) => {
                if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
                    if let Err(e) = self.kill_suidgid(f.ino()) {
                        return reply.error(errno(&e));
                    }
                }
                if self.sync_at_write() {
                    // The write's times, which HashFS keeps in DRAM until fsync: one line
                    // written back and a fence, instead of an FSYNC round trip later.
                    if let Err(e) = f.sync_all() {
                        return reply.error(errno(&e));
                    }
                }
                reply.written(n as u32)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// Nothing to do at a close (every write reached HashFS before it, under the write-back
    /// cache too: the kernel writes dirty pages back before it would flush), so the first
    /// one is answered ENOSYS and the kernel sends no more. Handles the daemon opened say
    /// FOPEN_NOFLUSH anyway; the kernel's own (no-open) ones cannot. On a shared mount a
    /// close has work: it drops the closer's record locks on the file (POSIX), so it is
    /// answered, and the handles say no FOPEN_NOFLUSH.
    fn flush(&self, _req: &Request, i: INodeNo, _fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty) {
        match (&self.locks, self.ino(i)) {
            (Some(l), Ok(i)) => {
                l.closed(&self.fs, i, lock_owner.0);
                reply.ok()
            }
            _ => reply.error(Errno::ENOSYS),
        }
    }

    /// On a shared mount, the lock that conflicts on the image's range (`locks.rs`); the
    /// kernel answers it itself on other mounts (this capability is not asked for).
    fn getlk(
        &self,
        _req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        let Some(l) = &self.locks else { return reply.error(Errno::ENOSYS) };
        let call = |ino| locks::LockCall { ino, flock: false, owner: lock_owner.0, start, end, typ, pid };
        match self.ino(i).map_err(|e| e.errno()).and_then(|i| l.test(&self.fs, call(i))) {
            Ok(Some(c)) => reply.locked(c.start, c.end, c.typ, c.pid),
            Ok(None) => reply.locked(start, end, libc::F_UNLCK, 0),
            Err(e) => reply.error(Errno::from_i32(e)),
        }
    }

    /// On a shared mount, takes or drops the lock on the image's range (`locks.rs`); a
    /// wait runs on a thread of its own.
    fn setlk(
        &self,
        _req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let call = |ino| locks::LockCall { ino, flock: false, owner: lock_owner.0, start, end, typ, pid };
        self.set_lock(i, call, sleep, reply);
    }

    /// On a shared mount, a `flock` of the open file `lock_owner` names (`locks.rs`).
    fn flock(
        &self,
        _req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let call = |ino| locks::LockCall { ino, flock: true, owner: lock_owner.0, start: 0, end: u64::MAX, typ, pid };
        self.set_lock(i, call, sleep, reply);
    }

    fn release(
        &self,
        _req: &Request,
        i: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // The file took a `flock` (FUSE_RELEASE_FLOCK_UNLOCK): it goes with the file.
        if let (Some(l), Some(owner), Ok(i)) = (&self.locks, lock_owner, self.ino(i)) {
            l.closed(&self.fs, i, owner.0);
        }
        // Dropping the last reference closes the file (and frees it if it was unlinked).
        self.handles.lock().expect("handle table").remove(&fh.0);
        reply.ok()
    }

    /// With `sync_at_write`, every write was durable, times and all, when it was answered,
    /// and every other change is durable when its request returns, so an fsync has nothing
    /// to do: the first one is answered ENOSYS, which the kernel takes as success and as
    /// "never send FSYNC again" (it still writes a mapping's dirty pages back first, each
    /// a WRITE, before it returns). An fsync through the mount then costs no round trip
    /// (NOVA's and PMFS's fsync are as empty). What it would have done is done first,
    /// so the answer is true whatever came before it.
    fn fsync(&self, _req: &Request, i: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        match self.io_file(i, fh).and_then(|f| f.sync(sync_scope(datasync))) {
            Ok(()) if self.sync_at_write() => reply.error(Errno::ENOSYS),
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn opendir(&self, _req: &Request, i: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.ino(i).and_then(|i| self.fs.getattr(i)) {
            Ok(m) if m.is_dir() => reply.opened(self.add_handle(Handle::Dir), FopenFlags::empty()),
            Ok(_) => reply.error(Errno::ENOTDIR),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(&self, _req: &Request, i: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let dir = match self.ino(i) {
            Ok(d) => d,
            Err(e) => return reply.error(errno(&e)),
        };
        // Offsets: 1 after ".", 2 after "..", then 2 + the entry's cookie.
        if offset == 0 && reply.add(i, 1, FuseType::Directory, ".") {
            return reply.ok();
        }
        if offset <= 1 {
            let parent = self.fs.parent_of(dir).map(|p| p.get()).unwrap_or(i.0);
            if reply.add(INodeNo(parent), 2, FuseType::Directory, "..") {
                return reply.ok();
            }
        }
        let mut cookie = offset.saturating_sub(2);
        loop {
            let batch = match self.fs.readdir_ino(dir, cookie, 128) {
                Ok(b) => b,
                Err(e) => return reply.error(errno(&e)),
            };
            if batch.is_empty() {
                return reply.ok();
            }
            for e in batch {
                if reply.add(INodeNo(e.ino.get()), e.cookie + 2, kind(e.file_type), OsStr::from_bytes(&e.name)) {
                    return reply.ok();
                }
                cookie = e.cookie;
            }
        }
    }

    /// A directory listing with every entry's attributes (`ls -l`, `find`, `du`), so that
    /// the kernel needs no lookup per name: asked for by the kernel when it sees a listing
    /// followed by lookups (FUSE_READDIRPLUS_AUTO). Offsets as in `readdir`; "." and ".."
    /// carry no attributes (the kernel skips them). An entry removed between the listing and
    /// its getattr is left out, as if listed after the removal.
    fn readdirplus(&self, _req: &Request, i: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectoryPlus) {
        let dir = match self.ino(i) {
            Ok(d) => d,
            Err(e) => return reply.error(errno(&e)),
        };
        let ttl = self.opts.cache_timeout;
        let dot = |m: Result<Metadata, Error>| m.map(|m| attr(&m));
        if offset == 0 {
            match dot(self.fs.getattr(dir)) {
                Ok(a) if reply.add(i, 1, ".", &Duration::ZERO, &a, Generation(0)) => return reply.ok(),
                Ok(_) => {}
                Err(e) => return reply.error(errno(&e)),
            }
        }
        if offset <= 1 {
            let parent = self.fs.parent_of(dir).unwrap_or(dir);
            match self.fs.getattr(parent) {
                Ok(m) if reply.add(node_id(&m), 2, "..", &Duration::ZERO, &attr(&m), Generation(0)) => {
                    return reply.ok()
                }
                Ok(_) => {}
                Err(e) => return reply.error(errno(&e)),
            }
        }
        let mut cookie = offset.saturating_sub(2);
        loop {
            let batch = match self.fs.readdir_ino(dir, cookie, 128) {
                Ok(b) => b,
                Err(e) => return reply.error(errno(&e)),
            };
            if batch.is_empty() {
                return reply.ok();
            }
            for e in batch {
                match self.fs.getattr(e.ino) {
                    Ok(m) => {
                        let full = reply.add(
                            node_id(&m),
                            e.cookie + 2,
                            OsStr::from_bytes(&e.name),
                            &ttl,
                            &attr(&m),
                            Generation(m.generation as u64),
                        );
                        if full {
                            return reply.ok();
                        }
                        self.nodes.looked_up(node_id(&m)); // the kernel counts every entry but . and ..
                    }
                    Err(Error::NotFound) => {}
                    Err(err) => return reply.error(errno(&err)),
                }
                cookie = e.cookie;
            }
        }
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.handles.lock().expect("handle table").remove(&fh.0);
        reply.ok()
    }

    /// As [`Self::fsync`]: a directory's changes are durable when their requests return.
    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        match self.fs.sync() {
            Ok(()) if self.sync_at_write() => reply.error(Errno::ENOSYS),
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let s = self.fs.statfs();
        reply.statfs(
            s.blocks_total,
            s.blocks_free,
            s.blocks_free,
            s.inodes_total,
            s.inodes_free,
            s.block_bytes as u32,
            s.name_max as u32,
            s.block_bytes as u32,
        )
    }

    fn setxattr(
        &self,
        req: &Request,
        i: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        let Some(mode) = XattrMode::from_linux_flags(flags).filter(|_| position == 0) else {
            return reply.error(Errno::EINVAL);
        };
        let n = name.as_bytes();
        // The kernel checks CAP_SYS_ADMIN for trusted.*; the daemon sees only the caller's
        // ids, and holds the namespace to root as well (a setfsuid'd thread keeps the
        // capability).
        if n.starts_with(b"trusted.") && req.uid() != 0 {
            return reply.error(Errno::EPERM);
        }
        let r = self.ino(i).and_then(|i| self.fs.set_xattr(i, n, value, mode));
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getxattr(&self, req: &Request, i: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if self.ino(i).is_ok_and(|x| x == Ino::ROOT) && name.as_bytes() == DAEMON_PID_XATTR.as_bytes() {
            // The daemon's process, for `hashfs umount` to wait for (a shared image's lock
            // does not tell when this daemon let it go).
            return xattr_reply(reply, std::process::id().to_string().as_bytes(), size);
        }
        if name.as_bytes().starts_with(b"trusted.") && req.uid() != 0 {
            return reply.error(Errno::ENODATA); // as ext4: invisible to users
        }
        match self.ino(i).and_then(|i| self.fs.get_xattr(i, name.as_bytes())) {
            Ok(v) => xattr_reply(reply, &v, size),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn listxattr(&self, req: &Request, i: INodeNo, size: u32, reply: ReplyXattr) {
        match self.ino(i).and_then(|i| self.fs.list_xattr(i)) {
            Ok(names) => {
                let mut list = Vec::new();
                // As ext4: trusted.* names are listed to root only.
                for n in names.into_iter().filter(|n| req.uid() == 0 || !n.starts_with(b"trusted.")) {
                    list.extend_from_slice(&n);
                    list.push(0);
                }
                xattr_reply(reply, &list, size)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn removexattr(&self, req: &Request, i: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if name.as_bytes().starts_with(b"trusted.") && req.uid() != 0 {
            return reply.error(Errno::EPERM);
        }
        match self.ino(i).and_then(|i| self.fs.remove_xattr(i, name.as_bytes())) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// The kernel asks only for SEEK_DATA and SEEK_HOLE (it serves the others itself).
    fn lseek(&self, _req: &Request, i: INodeNo, _fh: FileHandle, offset: i64, whence: i32, reply: ReplyLseek) {
        let what = match whence {
            libc::SEEK_DATA => hashfs::Seek::Data,
            libc::SEEK_HOLE => hashfs::Seek::Hole,
            _ => return reply.error(Errno::EINVAL),
        };
        let Ok(off) = u64::try_from(offset) else { return reply.error(Errno::ENXIO) }; // as tmpfs
        match self.ino(i).and_then(|i| self.fs.seek(i, off, what)) {
            Ok(Some(at)) => reply.offset(at as i64),
            Ok(None) => reply.error(Errno::ENXIO),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        i: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let Some(mode) = hashfs::FallocateMode::from_linux_flags(mode) else {
            return reply.error(Errno::EOPNOTSUPP); // collapse, insert, unshare
        };
        match self.io_file(i, fh).and_then(|f| f.fallocate(offset, length, mode)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

/// fuser's `datasync` flag (fsync's and fsyncdir's) as the sync it asks for.
pub(crate) fn sync_scope(datasync: bool) -> SyncScope {
    if datasync {
        SyncScope::DataOnly
    } else {
        SyncScope::All
    }
}
