//! The FUSE ceiling: a minimal passthrough over a directory (a tmpfs one in
//! `bench/filebench.py`), served with the same FUSE crate, thread count and mount
//! options as `hashfs mount`. Its file system costs almost nothing, so what a workload
//! runs at through it is what FUSE itself allows; HashFS's mount is measured against it.
//!
//! A benchmark tool, not a product: inodes are the lower directory's inode numbers, each
//! remembered by the last path it was looked up or created under; an unlinked file that
//! is still open is served through its handle. Extended attributes, locks and special
//! files are not served (ENOSYS), and set-ID bits are not cleared on writes (it asks for
//! FUSE_HANDLE_KILLPRIV_V2 only so that the kernel sends what it sends `hashfs mount`).

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, FileTimes, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

enum Handle {
    File(Arc<File>),
    Dir(Arc<Vec<(u64, FileType, OsString)>>),
}

pub struct Passthrough {
    root_ino: u64,
    paths: RwLock<HashMap<u64, PathBuf>>,
    handles: Mutex<HashMap<u64, Handle>>,
    /// How long the kernel may cache names and attributes (as `hashfs mount`'s
    /// `cache_timeout`: this passthrough owns its lower directory while it runs).
    ttl: Duration,
    /// Ask for FUSE over io_uring at INIT (`serve`'s `io_uring`).
    io_uring: bool,
    next_fh: AtomicU64,
    /// The lower directory is on tmpfs, where fsync has nothing to make durable: as
    /// `hashfs mount` on an image in memory, the first fsync is answered ENOSYS and the
    /// kernel sends no more (the ceiling must not pay round trips the mount skips).
    lower_volatile: bool,
}

fn err(e: io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

fn kind(m: &fs::Metadata) -> FileType {
    let t = m.file_type();
    if t.is_dir() {
        FileType::Directory
    } else if t.is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    }
}

fn time(s: i64, ns: i64) -> SystemTime {
    if s >= 0 {
        UNIX_EPOCH + Duration::new(s as u64, ns as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(s.unsigned_abs()) + Duration::from_nanos(ns as u64)
    }
}

fn when(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl Passthrough {
    pub fn new(lower: &Path, ttl: Duration) -> io::Result<Self> {
        let m = fs::metadata(lower)?;
        if !m.is_dir() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the lower path is not a directory"));
        }
        let mut paths = HashMap::new();
        paths.insert(1, lower.to_path_buf());
        Ok(Passthrough {
            root_ino: m.ino(),
            paths: RwLock::new(paths),
            handles: Mutex::new(HashMap::new()),
            ttl,
            io_uring: false,
            next_fh: AtomicU64::new(1),
            lower_volatile: hashfs::pm::mmap::is_tmpfs(&File::open(lower)?),
        })
    }

    /// The kernel's inode number for a lower one: the lower root and inode 1 trade places.
    fn fuse_ino(&self, lower: u64) -> u64 {
        if lower == self.root_ino {
            1
        } else if lower == 1 {
            self.root_ino
        } else {
            lower
        }
    }

    fn attr(&self, m: &fs::Metadata) -> FileAttr {
        FileAttr {
            ino: INodeNo(self.fuse_ino(m.ino())),
            size: m.size(),
            blocks: m.blocks(),
            atime: time(m.atime(), m.atime_nsec()),
            mtime: time(m.mtime(), m.mtime_nsec()),
            ctime: time(m.ctime(), m.ctime_nsec()),
            crtime: time(m.ctime(), m.ctime_nsec()),
            kind: kind(m),
            perm: (m.mode() & 0o7777) as u16,
            nlink: m.nlink() as u32,
            uid: m.uid(),
            gid: m.gid(),
            rdev: m.rdev() as u32,
            blksize: 4096,
            flags: 0,
        }
    }

    fn path(&self, ino: INodeNo) -> Result<PathBuf, Errno> {
        self.paths.read().expect("path table").get(&ino.0).cloned().ok_or(Errno::ENOENT)
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.path(parent)?.join(name))
    }

    /// Stats a path and remembers it as its inode's.
    fn remember(&self, path: PathBuf) -> Result<FileAttr, Errno> {
        let m = fs::symlink_metadata(&path).map_err(err)?;
        let a = self.attr(&m);
        self.paths.write().expect("path table").insert(a.ino.0, path);
        Ok(a)
    }

    fn add_handle(&self, h: Handle) -> FileHandle {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().expect("handle table").insert(fh, h);
        FileHandle(fh)
    }

    fn file(&self, fh: FileHandle) -> Result<Arc<File>, Errno> {
        match self.handles.lock().expect("handle table").get(&fh.0) {
            Some(Handle::File(f)) => Ok(f.clone()),
            _ => Err(Errno::EBADF),
        }
    }

    fn open_options(flags: i32) -> OpenOptions {
        let mut o = OpenOptions::new();
        let acc = flags & libc::O_ACCMODE;
        o.read(acc == libc::O_RDONLY || acc == libc::O_RDWR);
        o.write(acc == libc::O_WRONLY || acc == libc::O_RDWR);
        o.custom_flags(flags & !(libc::O_ACCMODE | libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC));
        if flags & libc::O_TRUNC != 0 {
            o.truncate(true);
        }
        o
    }

    fn set(&self, ino: INodeNo, fh: Option<FileHandle>, s: &SetAttrs) -> Result<FileAttr, Errno> {
        let path = self.path(ino)?;
        let file = match fh {
            Some(fh) => Some(self.file(fh)?),
            None if s.size.is_some() || s.atime.is_some() || s.mtime.is_some() => {
                let mut o = OpenOptions::new();
                if s.size.is_some() {
                    o.write(true);
                } else {
                    o.read(true);
                }
                Some(Arc::new(o.open(&path).map_err(err)?))
            }
            None => None,
        };
        if let Some(mode) = s.mode {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o7777)).map_err(err)?;
        }
        if s.uid.is_some() || s.gid.is_some() {
            std::os::unix::fs::lchown(&path, s.uid, s.gid).map_err(err)?;
        }
        if let Some(f) = &file {
            if let Some(size) = s.size {
                f.set_len(size).map_err(err)?;
            }
            let mut t = FileTimes::new();
            if let Some(a) = s.atime {
                t = t.set_accessed(when(a));
            }
            if let Some(m) = s.mtime {
                t = t.set_modified(when(m));
            }
            if s.atime.is_some() || s.mtime.is_some() {
                f.set_times(t).map_err(err)?;
            }
            return Ok(self.attr(&f.metadata().map_err(err)?));
        }
        Ok(self.attr(&fs::symlink_metadata(&path).map_err(err)?))
    }
}

struct SetAttrs {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
}

impl Filesystem for Passthrough {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // The capabilities `hashfs-fuse` asks for that change what the kernel sends.
        let _ = config.add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2);
        let _ = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS);
        if self.io_uring && config.add_capabilities(InitFlags::FUSE_OVER_IO_URING).is_err() {
            return Err(io::Error::other(hashfs_fuse::NO_IO_URING));
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.child(parent, name).and_then(|p| self.remember(p)) {
            Ok(a) => reply.entry(&self.ttl, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let m = match fh.map(|fh| self.file(fh)) {
            Some(Ok(f)) => f.metadata().map_err(err),
            _ => self.path(ino).and_then(|p| fs::symlink_metadata(p).map_err(err)),
        };
        match m {
            Ok(m) => reply.attr(&self.ttl, &self.attr(&m)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        match self.set(ino, fh, &SetAttrs { mode, uid, gid, size, atime, mtime }) {
            Ok(a) => reply.attr(&self.ttl, &a),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let r = self.child(parent, name).and_then(|p| {
            fs::DirBuilder::new().mode(mode & !umask & 0o7777).create(&p).map_err(err)?;
            self.remember(p)
        });
        match r {
            Ok(a) => reply.entry(&self.ttl, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.child(parent, name).and_then(|p| fs::remove_file(p).map_err(err)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.child(parent, name).and_then(|p| fs::remove_dir(p).map_err(err)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
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
        if !flags.is_empty() {
            return reply.error(Errno::EINVAL);
        }
        let r = (|| {
            let (from, to) = (self.child(parent, name)?, self.child(newparent, newname)?);
            fs::rename(&from, &to).map_err(err)?;
            // Every remembered path under the old name moves with it.
            let mut paths = self.paths.write().expect("path table");
            for p in paths.values_mut() {
                if let Ok(rest) = p.strip_prefix(&from) {
                    *p = to.join(rest);
                }
            }
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.path(ino).and_then(|p| Self::open_options(flags.0).open(p).map_err(err)) {
            Ok(f) => reply.opened(
                self.add_handle(Handle::File(Arc::new(f))),
                FopenFlags::FOPEN_NOFLUSH | FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let r = self.child(parent, name).and_then(|p| {
            let mut o = Self::open_options(flags);
            o.mode(mode & !umask & 0o7777);
            if flags & libc::O_EXCL != 0 {
                o.create_new(true);
            } else {
                o.create(true);
            }
            let f = o.open(&p).map_err(err)?;
            let a = self.remember(p)?;
            Ok((a, f))
        });
        match r {
            Ok((a, f)) => {
                let fh = self.add_handle(Handle::File(Arc::new(f)));
                reply.created(
                    &self.ttl,
                    &a,
                    Generation(0),
                    fh,
                    FopenFlags::FOPEN_NOFLUSH | FopenFlags::FOPEN_KEEP_CACHE,
                )
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let r = self.file(fh).and_then(|f| {
            let mut buf = vec![0u8; size as usize];
            let mut done = 0;
            while done < buf.len() {
                match f.read_at(&mut buf[done..], offset + done as u64) {
                    Ok(0) => break,
                    Ok(n) => done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(err(e)),
                }
            }
            buf.truncate(done);
            Ok(buf)
        });
        match r {
            Ok(buf) => reply.data(&buf),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // The kernel sends an O_APPEND write with the file's end as its offset.
        match self.file(fh).and_then(|f| f.write_all_at(data, offset).map_err(err)) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok()
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.handles.lock().expect("handle table").remove(&fh.0);
        reply.ok()
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let r = self.file(fh).and_then(|f| if datasync { f.sync_data() } else { f.sync_all() }.map_err(err));
        match r {
            Ok(()) if self.lower_volatile => reply.error(Errno::ENOSYS),
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let r = self.path(ino).and_then(|p| {
            let mut entries = Vec::new();
            for e in fs::read_dir(&p).map_err(err)? {
                let e = e.map_err(err)?;
                let m = e.metadata().map_err(err)?;
                entries.push((self.fuse_ino(m.ino()), kind(&m), e.file_name()));
            }
            Ok(entries)
        });
        match r {
            Ok(entries) => reply.opened(self.add_handle(Handle::Dir(Arc::new(entries))), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let entries = match self.handles.lock().expect("handle table").get(&fh.0) {
            Some(Handle::Dir(d)) => d.clone(),
            _ => return reply.error(Errno::EBADF),
        };
        // Offsets: 1 after ".", 2 after "..", 3 + i after entry i.
        if offset == 0 && reply.add(ino, 1, FileType::Directory, ".") {
            return reply.ok();
        }
        if offset <= 1 && reply.add(ino, 2, FileType::Directory, "..") {
            return reply.ok();
        }
        for (i, (e_ino, k, name)) in entries.iter().enumerate().skip(offset.saturating_sub(2) as usize) {
            if reply.add(INodeNo(*e_ino), 3 + i as u64, *k, name) {
                break;
            }
        }
        reply.ok()
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.handles.lock().expect("handle table").remove(&fh.0);
        reply.ok()
    }
}

/// Serves `lower` at `mountpoint` until it is unmounted, as `hashfs mount` serves an
/// image: the same session configuration (`hashfs_fuse::session_config`: thread count,
/// `clone_fd`, `default_permissions`, `noatime`, `allow_other`).
pub fn serve(
    lower: &Path,
    mountpoint: &Path,
    threads: usize,
    ttl: Duration,
    io_uring: Option<usize>,
) -> Result<(), crate::Failure> {
    let mut fs = Passthrough::new(lower, ttl).map_err(|e| crate::fail(format!("{}: {e}", lower.display())))?;
    if io_uring.is_some() {
        if !hashfs_fuse::io_uring_offered() {
            return Err(crate::fail(hashfs_fuse::NO_IO_URING));
        }
        fs.io_uring = true;
    }
    // `hashfs mount`'s session and options (read-write, default), its subtype renamed.
    let mut cfg = hashfs_fuse::session_config(lower, hashfs_fuse::KernelFlags::default(), io_uring, threads);
    for o in &mut cfg.mount_options {
        if let fuser::MountOption::Subtype(s) = o {
            *s = "hashfs-ceiling".into();
        }
    }
    fuser::mount2(fs, mountpoint, &cfg).map_err(|e| crate::fail(format!("mount on {}: {e}", mountpoint.display())))
}
