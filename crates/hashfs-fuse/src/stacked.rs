//! The FUSE operations of the stack. Names, directories and attributes are the lower file
//! system's, reached through O_PATH descriptors kept per kernel inode (as libfuse's
//! passthrough_hp does); file data goes to the lower file or, for a promoted file, to its
//! PM copy ([`hashfs_spfs::absorb`]). The kernel's write-back cache is on: writes reach the
//! daemon in page-sized batches, and an O_SYNC/O_DSYNC write reaches it as a write and an
//! fsync, which the profiler counts like any other.
//!
//! Root's `hashfs.status` xattr returns [`Stack::status`]; setting `hashfs.writeback`
//! writes every promoted file back (`hashfs umount --writeback`).

use crate::stacked_caller::as_caller;
use crate::sync_scope;
use fuser::{
    BackingId, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use hashfs_spfs::absorb::Key;
use hashfs_spfs::lower::{proc_path, reopen};
use hashfs_spfs::standalone::Made;
use hashfs_spfs::{lock, Shared, Stack};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const TTL: Duration = Duration::from_secs(1);
const STATUS_XATTR: &[u8] = b"hashfs.status";
const WRITEBACK_XATTR: &[u8] = b"hashfs.writeback";

fn err(e: io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

fn rerr(e: rustix::io::Errno) -> Errno {
    Errno::from_i32(e.raw_os_error())
}

struct Node {
    /// O_PATH, O_NOFOLLOW: the inode itself, whatever its name becomes.
    fd: Arc<OwnedFd>,
    key: Key,
    nlookup: u64,
}

enum Handle {
    /// `backing`: the kernel serves the handle's reads, writes and mappings from the lower
    /// file itself (passthrough); the daemon sees its fsyncs, truncations and release.
    File {
        lower: Arc<File>,
        state: Shared,
        key: Key,
        backing: Option<Arc<BackingId>>,
    },
    Dir(Arc<Vec<(u64, FileType, OsString)>>),
}

pub struct StackedFuse {
    stack: Arc<Stack>,
    nodes: Mutex<Nodes>,
    handles: Mutex<HashMap<u64, Handle>>,
    next_fh: AtomicU64,
    /// The kernel took the passthrough capability at init (`init`).
    passthrough: bool,
    /// Requests through FUSE over io_uring (`-o io_uring`): asked at init
    /// ([`StackedFuse::with_io_uring`]).
    io_uring: bool,
    /// Each lower file's backing registration while passthrough handles of it are open:
    /// the kernel wants one per inode (a second one for the same inode is EBUSY).
    backings: Mutex<HashMap<Key, Weak<BackingId>>>,
}

#[derive(Default)]
struct Nodes {
    by_ino: HashMap<u64, Node>,
    by_key: HashMap<Key, u64>,
    next_foreign: u64,
}

fn ts(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs()) + Duration::from_nanos(nsec as u64)
    }
}

fn kind(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        libc::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

/// What a write or truncation by an unprivileged caller does to a file's mode (the
/// kernel leaves it to the daemon under FUSE_HANDLE_KILLPRIV_V2): set-user-ID goes, and
/// set-group-ID where group execution makes it mean something.
fn kill_suidgid(f: &File) -> Result<(), Errno> {
    let st = rustix::fs::fstat(f).map_err(rerr)?;
    let ftype = hashfs::FileType::from_mode(st.st_mode).unwrap_or(hashfs::FileType::Regular);
    let m = hashfs::perm_without_set_id(st.st_mode & 0o7777, ftype);
    if m != st.st_mode & 0o7777 {
        rustix::fs::fchmod(f, Mode::from_raw_mode(m)).map_err(rerr)?;
    }
    Ok(())
}

impl StackedFuse {
    pub fn new(stack: Arc<Stack>) -> StackedFuse {
        // The kernel sends each new object's mode with the caller's umask applied; the
        // daemon's own (022) must not be applied again (`caller.rs`).
        rustix::process::umask(Mode::empty());
        let root = rustix::io::fcntl_dupfd_cloexec(stack.lower_root(), 0).expect("dup of the lower root");
        let mut nodes = Nodes { next_foreign: 1 << 62, ..Nodes::default() };
        nodes.by_ino.insert(1, Node { fd: Arc::new(root), key: stack.root_key(), nlookup: 1 << 40 });
        nodes.by_key.insert(stack.root_key(), 1);
        StackedFuse {
            stack,
            nodes: Mutex::new(nodes),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            passthrough: false,
            io_uring: false,
            backings: Mutex::new(HashMap::new()),
        }
    }

    /// Asks the kernel at init for FUSE over io_uring (the session's
    /// `fuser::Config::io_uring_depth` sets the rings up): each request is served on its
    /// caller's CPU by that CPU's queue thread. Every method here answers before it
    /// returns, which the rings require (vendor/README.md).
    pub fn with_io_uring(mut self, on: bool) -> StackedFuse {
        self.io_uring = on;
        self
    }

    /// The kernel inode number of a lower inode: its own number on the lower root's file
    /// system (so that readdir's d_ino and stat agree), a number of ours on another one.
    fn ino_for(&self, nodes: &mut Nodes, key: Key) -> u64 {
        if key == self.stack.root_key() {
            return 1;
        }
        if let Some(i) = nodes.by_key.get(&key) {
            return *i;
        }
        if key.0 == self.stack.root_key().0 && key.1 > 1 && key.1 < 1 << 62 {
            key.1
        } else {
            nodes.next_foreign += 1;
            nodes.next_foreign
        }
    }

    fn node_fd(&self, ino: INodeNo) -> Result<(Arc<OwnedFd>, Key), Errno> {
        let nodes = lock(&self.nodes);
        let n = nodes.by_ino.get(&ino.0).ok_or(Errno::ENOENT)?;
        Ok((n.fd.clone(), n.key))
    }

    /// Stats `fd`, with a promoted file's length and times from PM.
    fn attr_of(&self, ino: u64, fd: impl AsFd) -> Result<FileAttr, Errno> {
        let st = rustix::fs::fstat(fd).map_err(rerr)?;
        let mut a = FileAttr {
            ino: INodeNo(ino),
            size: st.st_size as u64,
            blocks: st.st_blocks as u64,
            atime: ts(st.st_atime, st.st_atime_nsec as i64),
            mtime: ts(st.st_mtime, st.st_mtime_nsec as i64),
            ctime: ts(st.st_ctime, st.st_ctime_nsec as i64),
            crtime: ts(st.st_ctime, st.st_ctime_nsec as i64),
            kind: kind(st.st_mode),
            perm: (st.st_mode & 0o7777) as u16,
            nlink: st.st_nlink as u32,
            uid: st.st_uid,
            gid: st.st_gid,
            rdev: st.st_rdev as u32,
            blksize: st.st_blksize as u32,
            flags: 0,
        };
        if let Some(m) = self.stack.merged_attr((st.st_dev, st.st_ino)) {
            a.size = m.size;
            a.blocks = a.blocks.max(m.blocks);
            a.mtime = ts(m.mtime_ns.div_euclid(1_000_000_000), m.mtime_ns.rem_euclid(1_000_000_000));
            a.ctime = a.ctime.max(a.mtime);
        }
        Ok(a)
    }

    /// Looks `name` up under `parent` and adds a kernel reference.
    fn do_lookup(&self, parent: INodeNo, name: &OsStr) -> Result<FileAttr, Errno> {
        let (pfd, pkey) = self.node_fd(parent)?;
        let fd = rustix::fs::openat(&pfd, name, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
            .map_err(rerr)?;
        let st = rustix::fs::fstat(&fd).map_err(rerr)?;
        let key = (st.st_dev, st.st_ino);
        if st.st_mode & libc::S_IFMT == libc::S_IFREG {
            self.stack.file_in(key, pkey); // its fsyncs count for this directory
        }
        let ino = {
            let mut nodes = lock(&self.nodes);
            let ino = self.ino_for(&mut nodes, key);
            match nodes.by_ino.get_mut(&ino) {
                Some(n) => n.nlookup += 1,
                None => {
                    nodes.by_ino.insert(ino, Node { fd: Arc::new(fd), key, nlookup: 1 });
                    nodes.by_key.insert(key, ino);
                }
            }
            ino
        };
        let (fd, _) = self.node_fd(INodeNo(ino))?;
        self.attr_of(ino, &fd)
    }

    fn entry(&self, reply: ReplyEntry, r: Result<FileAttr, Errno>) {
        match r {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn add_handle(&self, h: Handle) -> FileHandle {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, h);
        FileHandle(fh)
    }

    fn file(&self, fh: FileHandle) -> Result<(Arc<File>, Shared, Key), Errno> {
        match lock(&self.handles).get(&fh.0) {
            Some(Handle::File { lower, state, key, .. }) => Ok((lower.clone(), state.clone(), *key)),
            _ => Err(Errno::EBADF),
        }
    }

    /// The lower inode `name` under `parent` names, if any (for unlink and rename).
    fn key_at(&self, parent: &OwnedFd, name: &OsStr) -> Option<Key> {
        rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW).ok().map(|st| (st.st_dev, st.st_ino))
    }

    fn open_lower(&self, fd: &OwnedFd, flags: i32) -> Result<File, Errno> {
        // The write-back cache reads around partial pages, and the daemon writes at the
        // kernel's offsets: no O_WRONLY, no O_APPEND; O_TRUNC is done by setattr's path;
        // sync flags come back as fsyncs.
        // O_NOFOLLOW was the kernel's to apply when it looked the name up (ELOOP for a
        // symlink); here it would refuse /proc/self/fd/N itself, a symlink.
        let mut f = flags
            & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY | libc::O_TRUNC | libc::O_APPEND | libc::O_NOFOLLOW);
        f &= !(libc::O_SYNC | libc::O_DSYNC | libc::O_DIRECT);
        if f & libc::O_ACCMODE == libc::O_WRONLY {
            f = (f & !libc::O_ACCMODE) | libc::O_RDWR;
        }
        reopen(fd.as_fd(), f).map_err(err)
    }

    /// The backing registration of lower file `key` for a passthrough handle: the one its
    /// open handles share, else a new one of the file `file` is open on.
    fn backing(
        &self,
        key: Key,
        file: &File,
        register: impl FnOnce(&File) -> io::Result<BackingId>,
    ) -> io::Result<Arc<BackingId>> {
        let mut b = lock(&self.backings);
        if let Some(id) = b.get(&key).and_then(Weak::upgrade) {
            return Ok(id);
        }
        // Read and write whatever this handle's mode: the next handles share it. A lower
        // file root may not open so (a read-only file system) is registered as it is.
        let rw = reopen(file.as_fd(), libc::O_RDWR).ok();
        let id = Arc::new(register(rw.as_ref().unwrap_or(file))?);
        b.retain(|_, w| w.strong_count() > 0);
        b.insert(key, Arc::downgrade(&id));
        Ok(id)
    }

    /// An open of lower file `key` (`lower` open on it), counted in its state: the state,
    /// and the backing registration if the kernel serves the handle by passthrough
    /// ([`hashfs_spfs::Stack::opened_through`]). A registration that fails leaves the
    /// handle to the daemon, undone in the count (with a message, once).
    fn counted_open(
        &self,
        key: Key,
        lower: &File,
        register: impl FnOnce(&File) -> io::Result<BackingId>,
    ) -> (Shared, Option<Arc<BackingId>>) {
        let (state, pass) = self.stack.opened_through(key, lower, self.passthrough);
        if !pass {
            return (state, None);
        }
        match self.backing(key, lower, register) {
            Ok(b) => (state, Some(b)),
            Err(e) => {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    eprintln!("hashfs: a passthrough open failed ({e}); such files go through the daemon")
                });
                let mut st = state.lock();
                st.passthrough = st.passthrough.saturating_sub(1);
                drop(st);
                (state, None)
            }
        }
    }

    fn truncate(&self, key: Key, lower: &File, size: u64) -> Result<(), Errno> {
        let sh = self.stack.state(key);
        let mut st = sh.lock();
        self.stack.truncate(&mut st, lower, size).map_err(err)
    }
}

impl Filesystem for StackedFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // Files below are served by the kernel from the lower file (passthrough) where it
        // can; the kernel refuses that together with its write-back cache, which the mount
        // takes otherwise (writes to the daemon then come in page-sized batches).
        if self.stack.cfg.passthrough {
            if config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok() && config.set_max_stack_depth(1).is_ok() {
                self.passthrough = true;
            } else {
                eprintln!(
                    "hashfs: the kernel lacks FUSE passthrough: files below go through the daemon (mount option \
                     passthrough=off says so without this message)"
                );
            }
        }
        if !self.passthrough {
            if let Err(missing) = config.add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE) {
                eprintln!("hashfs: the kernel lacks FUSE capabilities {missing:?}: writes are not cached");
            }
        }
        // The daemon clears set-user-ID and set-group-ID where a write or truncation by
        // someone else must (the lower file system does not: the daemon is root). Without
        // this the kernel asks for security.capability before every write.
        if config.add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2).is_err() {
            eprintln!("hashfs: the kernel lacks FUSE_HANDLE_KILLPRIV_V2: every write costs a getxattr round trip");
        }
        if self.io_uring && config.add_capabilities(InitFlags::FUSE_OVER_IO_URING).is_err() {
            return Err(io::Error::other(crate::NO_IO_URING));
        }
        Ok(())
    }

    fn destroy(&mut self) {
        self.stack.stop();
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.entry(reply, self.do_lookup(parent, name))
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let mut nodes = lock(&self.nodes);
        let done = match nodes.by_ino.get_mut(&ino.0) {
            Some(n) if ino.0 != 1 => {
                n.nlookup = n.nlookup.saturating_sub(nlookup);
                (n.nlookup == 0).then_some(n.key)
            }
            _ => None,
        };
        if let Some(key) = done {
            nodes.by_ino.remove(&ino.0);
            nodes.by_key.remove(&key);
            drop(nodes);
            self.stack.prune(key);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.node_fd(ino).and_then(|(fd, _)| self.attr_of(ino.0, &fd)) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        req: &Request,
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
        let r = (|| -> Result<FileAttr, Errno> {
            let (fd, key) = self.node_fd(ino)?;
            let path = proc_path(fd.as_fd());
            if let Some(m) = mode {
                rustix::fs::chmod(&path, Mode::from_raw_mode(m & 0o7777)).map_err(rerr)?;
            }
            if uid.is_some() || gid.is_some() {
                rustix::fs::chownat(
                    &fd,
                    "",
                    uid.map(rustix::fs::Uid::from_raw),
                    gid.map(rustix::fs::Gid::from_raw),
                    AtFlags::EMPTY_PATH,
                )
                .map_err(rerr)?;
            }
            if let Some(size) = size {
                let lower = match fh.and_then(|fh| self.file(fh).ok()) {
                    Some((l, _, _)) => l,
                    None => Arc::new(reopen(fd.as_fd(), libc::O_WRONLY).map_err(err)?),
                };
                self.truncate(key, &lower, size)?;
                if req.uid() != 0 && mode.is_none() {
                    kill_suidgid(&lower)?;
                }
            }
            if atime.is_some() || mtime.is_some() {
                let t = |x: Option<TimeOrNow>| match x {
                    None => rustix::fs::Timespec { tv_sec: 0, tv_nsec: rustix::fs::UTIME_OMIT },
                    Some(TimeOrNow::Now) => rustix::fs::Timespec { tv_sec: 0, tv_nsec: rustix::fs::UTIME_NOW },
                    Some(TimeOrNow::SpecificTime(s)) => {
                        let d = s.duration_since(UNIX_EPOCH).unwrap_or_default();
                        rustix::fs::Timespec { tv_sec: d.as_secs() as i64, tv_nsec: d.subsec_nanos() as _ }
                    }
                };
                let times = rustix::fs::Timestamps { last_access: t(atime), last_modification: t(mtime) };
                rustix::fs::utimensat(rustix::fs::CWD, &path, &times, AtFlags::empty()).map_err(rerr)?;
                if let (Some(sh), Some(m)) = (self.stack.existing(key), mtime) {
                    let st = sh.lock();
                    if let Some(p) = st.pm.as_ref() {
                        let at = match m {
                            TimeOrNow::Now => hashfs::SetTime::Now,
                            TimeOrNow::SpecificTime(s) => hashfs::SetTime::At(
                                s.duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0),
                            ),
                        };
                        let a = hashfs::SetAttr { mtime: Some(at), ..hashfs::SetAttr::default() };
                        self.stack.store.fs.setattr(p.pm.ino(), &a).map_err(|e| Errno::from_i32(e.errno()))?;
                    }
                }
            }
            self.attr_of(ino.0, &fd)
        })();
        match r {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.node_fd(ino).and_then(|(fd, _)| rustix::fs::readlinkat(&fd, "", Vec::new()).map_err(rerr)) {
            Ok(t) => reply.data(t.as_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let (pfd, _) = self.node_fd(parent)?;
            let ft = rustix::fs::FileType::from_raw_mode(mode);
            let mode = Mode::from_raw_mode(mode & 0o7777);
            as_caller(req, || rustix::fs::mknodat(&pfd, name, ft, mode, rdev as u64).map_err(rerr))?;
            self.do_lookup(parent, name)
        })();
        self.entry(reply, r)
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        let r = (|| {
            let (pfd, _) = self.node_fd(parent)?;
            let mode = Mode::from_raw_mode(mode & 0o7777);
            as_caller(req, || rustix::fs::mkdirat(&pfd, name, mode).map_err(rerr))?;
            self.do_lookup(parent, name)
        })();
        self.entry(reply, r)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = (|| {
            let (pfd, _) = self.node_fd(parent)?;
            let key = self.key_at(&pfd, name);
            self.stack.removing_name(key).map_err(err)?;
            rustix::fs::unlinkat(&pfd, name, AtFlags::empty()).map_err(rerr)?;
            self.stack.name_removed(key);
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self
            .node_fd(parent)
            .and_then(|(pfd, _)| rustix::fs::unlinkat(&pfd, name, AtFlags::REMOVEDIR).map_err(rerr))
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let r = (|| {
            let (pfd, _) = self.node_fd(parent)?;
            as_caller(req, || rustix::fs::symlinkat(target, &pfd, link_name).map_err(rerr))?;
            self.do_lookup(parent, link_name)
        })();
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
        let r = (|| {
            let (pfd, _) = self.node_fd(parent)?;
            let (nfd, _) = self.node_fd(newparent)?;
            let replaced = self.key_at(&nfd, newname);
            let f = rustix::fs::RenameFlags::from_bits(flags.bits()).ok_or(Errno::EINVAL)?;
            if !f.contains(rustix::fs::RenameFlags::EXCHANGE) {
                self.stack.removing_name(replaced).map_err(err)?;
            }
            rustix::fs::renameat_with(&pfd, name, &nfd, newname, f).map_err(rerr)?;
            if !f.contains(rustix::fs::RenameFlags::EXCHANGE) {
                self.stack.name_removed(replaced);
            }
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let r = (|| {
            let (fd, _) = self.node_fd(ino)?;
            let (nfd, _) = self.node_fd(newparent)?;
            rustix::fs::linkat(&fd, "", &nfd, newname, AtFlags::EMPTY_PATH).map_err(rerr)?;
            self.do_lookup(newparent, newname)
        })();
        self.entry(reply, r)
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let r = (|| {
            let (fd, key) = self.node_fd(ino)?;
            let lower = Arc::new(self.open_lower(&fd, flags.0)?);
            if flags.0 & libc::O_TRUNC != 0 && flags.0 & libc::O_ACCMODE != libc::O_RDONLY {
                self.truncate(key, &lower, 0)?;
                if req.uid() != 0 {
                    kill_suidgid(&lower)?;
                }
            }
            if flags.0 & libc::O_ACCMODE != libc::O_RDONLY {
                // A file written in a hot directory starts in PM if a syncfs settled it
                // below (`settled.rs`).
                self.stack.opened_for_writing(key, &lower);
            }
            let (state, backing) = self.counted_open(key, &lower, |f| reply.open_backing(f));
            let promoted = state.lock().pm.is_some();
            let fh = self.add_handle(Handle::File { lower, state, key, backing: backing.clone() });
            Ok((fh, promoted, backing))
        })();
        match r {
            Ok((fh, _, Some(b))) => reply.opened_passthrough(fh, FopenFlags::empty(), &b),
            // A promoted file changes only through this mount (its newest bytes are in
            // PM; changing it below is what docs/stacked.md says not to do), so the
            // kernel's cached pages stay right across opens (a mail spool reads its whole
            // mailbox at every check). Any other file may be changed in the lower
            // directory directly: an open drops its pages, so that it reads what is there.
            Ok((fh, true, None)) => reply.opened(fh, FopenFlags::FOPEN_KEEP_CACHE),
            Ok((fh, false, None)) => reply.opened(fh, FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let r = (|| {
            let (pfd, pkey) = self.node_fd(parent)?;
            let o = OFlags::from_bits_retain((flags | libc::O_CREAT | libc::O_CLOEXEC) as u32)
                - OFlags::APPEND
                - OFlags::TRUNC
                - OFlags::SYNC
                - OFlags::DSYNC
                - OFlags::DIRECT;
            let o = if o.contains(OFlags::WRONLY) { (o - OFlags::WRONLY) | OFlags::RDWR } else { o };
            let fd =
                as_caller(req, || rustix::fs::openat(&pfd, name, o, Mode::from_raw_mode(mode & 0o7777)).map_err(rerr))?;
            let a = self.do_lookup(parent, name)?;
            let st = rustix::fs::fstat(&fd).map_err(rerr)?;
            let key = (st.st_dev, st.st_ino);
            let lower = Arc::new(File::from(fd));
            if flags & libc::O_TRUNC != 0 {
                self.truncate(key, &lower, 0)?;
            }
            // A file made with O_SYNC, O_DSYNC or O_DIRECT, with one of the mount's
            // extensions, in a boosted directory or in one whose files sync often starts in
            // PM (`standalone.rs`, `dirs.rs`).
            let made = Made { dir: pkey, dir_path: &proc_path(pfd.as_fd()), name: name.as_bytes(), flags };
            self.stack.created_in(&made, key, &lower);
            let (state, backing) = self.counted_open(key, &lower, |f| reply.open_backing(f));
            Ok((a, self.add_handle(Handle::File { lower, state, key, backing: backing.clone() }), backing))
        })();
        match r {
            Ok((a, fh, Some(b))) => reply.created_passthrough(&TTL, &a, Generation(0), fh, FopenFlags::empty(), &b),
            Ok((a, fh, None)) => reply.created(&TTL, &a, Generation(0), fh, FopenFlags::FOPEN_KEEP_CACHE),
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
        let r = (|| {
            let (lower, sh, _) = self.file(fh)?;
            let mut buf = vec![0u8; size as usize];
            let n = self.stack.read(&mut sh.lock(), &lower, offset, &mut buf).map_err(err)?;
            buf.truncate(n);
            Ok(buf)
        })();
        match r {
            Ok(b) => reply.data(&b),
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
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        match self.file(fh).and_then(|(lower, sh, _)| {
            if kill {
                kill_suidgid(&lower)?;
            }
            self.stack.write(&mut sh.lock(), &lower, offset, data).map_err(err)
        }) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    /// Nothing to do at a close: record locks are the kernel's own on this mount (no
    /// FUSE_POSIX_LOCKS), and the kernel writes a file's dirty pages before it would send
    /// FLUSH. ENOSYS makes the kernel stop sending it (`no_flush`), which saves every
    /// later close a round trip to the daemon (a maildir delivery closes each message).
    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.error(Errno::ENOSYS)
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
        let handle = lock(&self.handles).remove(&fh.0);
        if let Some(Handle::File { state, key, backing, .. }) = handle {
            self.stack.closed_through(key, &state, backing.is_some());
        }
        reply.ok()
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        match self
            .file(fh)
            .and_then(|(lower, sh, _)| self.stack.fsync(&mut sh.lock(), &lower, sync_scope(datasync)).map_err(err))
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let r = (|| {
            let (fd, _) = self.node_fd(ino)?;
            let dir = reopen(fd.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY).map_err(err)?;
            let mut entries = Vec::new();
            let mut nodes = lock(&self.nodes);
            for e in rustix::fs::Dir::read_from(&dir).map_err(rerr)? {
                let e = e.map_err(rerr)?;
                let name = OsStr::from_bytes(e.file_name().to_bytes()).to_os_string();
                let ft = match e.file_type() {
                    rustix::fs::FileType::Directory => FileType::Directory,
                    rustix::fs::FileType::Symlink => FileType::Symlink,
                    rustix::fs::FileType::Fifo => FileType::NamedPipe,
                    rustix::fs::FileType::CharacterDevice => FileType::CharDevice,
                    rustix::fs::FileType::BlockDevice => FileType::BlockDevice,
                    rustix::fs::FileType::Socket => FileType::Socket,
                    _ => FileType::RegularFile,
                };
                let st_dev = self.stack.root_key().0;
                let ino = if name == "." || name == ".." { 1 } else { self.ino_for(&mut nodes, (st_dev, e.ino())) };
                entries.push((ino, ft, name));
            }
            drop(nodes);
            Ok(self.add_handle(Handle::Dir(Arc::new(entries))))
        })();
        match r {
            Ok(fh) => reply.opened(fh, FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let entries = match lock(&self.handles).get(&fh.0) {
            Some(Handle::Dir(e)) => e.clone(),
            _ => return reply.error(Errno::EBADF),
        };
        for (i, (ino, ft, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), i as u64 + 1, *ft, name) {
                break;
            }
        }
        reply.ok()
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        lock(&self.handles).remove(&fh.0);
        reply.ok()
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let r = self.node_fd(ino).and_then(|(fd, _)| {
            let d = reopen(fd.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY).map_err(err)?;
            d.sync_all().map_err(err)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match rustix::fs::fstatvfs(self.stack.lower_root()) {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(rerr(e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        if ino.0 == 1 && name.as_bytes() == WRITEBACK_XATTR {
            return match self.stack.write_back_all() {
                Ok(_) => reply.ok(),
                Err(e) => reply.error(err(e)),
            };
        }
        let r = self.node_fd(ino).and_then(|(fd, key)| {
            let f = rustix::fs::XattrFlags::from_bits(flags as u32).ok_or(Errno::EINVAL)?;
            rustix::fs::setxattr(proc_path(fd.as_fd()), name, value, f).map_err(rerr)?;
            self.stack.xattr_changed(key, name.as_bytes());
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let r = if ino.0 == 1 && name.as_bytes() == STATUS_XATTR {
            // What the kernel granted at init, then the stack's own status.
            let requests = if self.io_uring { "FUSE over io_uring" } else { "/dev/fuse" };
            let files_below = if self.passthrough { "passthrough" } else { "through the daemon" };
            Ok(format!("front end: requests through {requests}, files below {files_below}\n{}", self.stack.status())
                .into_bytes())
        } else {
            self.node_fd(ino).and_then(|(fd, _)| {
                let p = proc_path(fd.as_fd());
                let n = rustix::fs::getxattr_query(&p, name).map_err(rerr)?;
                let mut v = vec![0u8; n];
                let n = rustix::fs::getxattr(&p, name, &mut v[..]).map_err(rerr)?;
                v.truncate(n);
                Ok(v)
            })
        };
        match r {
            Ok(v) if size == 0 => reply.size(v.len() as u32),
            Ok(v) if v.len() > size as usize => reply.error(Errno::ERANGE),
            Ok(v) => reply.data(&v),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let r = self.node_fd(ino).and_then(|(fd, _)| {
            let p = proc_path(fd.as_fd());
            let n = rustix::fs::listxattr_query(&p).map_err(rerr)?;
            let mut v = vec![0u8; n];
            let n = rustix::fs::listxattr(&p, &mut v[..]).map_err(rerr)?;
            v.truncate(n);
            Ok(v)
        });
        match r {
            Ok(v) if size == 0 => reply.size(v.len() as u32),
            Ok(v) if v.len() > size as usize => reply.error(Errno::ERANGE),
            Ok(v) => reply.data(&v),
            Err(e) => reply.error(e),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.node_fd(ino).and_then(|(fd, key)| {
            rustix::fs::removexattr(proc_path(fd.as_fd()), name).map_err(rerr)?;
            self.stack.xattr_changed(key, name.as_bytes());
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let r = (|| {
            let (lower, sh, _) = self.file(fh)?;
            let r = self.stack.allocate(&mut sh.lock(), &lower, mode, offset, length);
            r.map_err(err)
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}
