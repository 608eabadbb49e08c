//! The shim's shared state (the real libc functions, the reentrancy guard, the image and
//! its descriptor table); the exported calls live in the modules below, one concern each:
//! `fd` (open, close, dup, fcntl), `path` (which paths are ours), `io` (read, write and
//! friends), `vector` (preadv/pwritev and the `*v2` calls), `copy` (copy_file_range,
//! sendfile, splice), `stat` (the stat family, access), `meta` (owners, times, the `*at`
//! name calls, mknod), `names` (unlink, mkdir, rename, links), `dir` (directory streams),
//! `cwd` (chdir into the prefix), `mmap`, `xattr`, `socket` (refuses UNIX sockets in the prefix), `stdio`, `statfs`. docs/shim.md lists
//! what is served and what is refused.

use hashfs::pm::MmapDevice;
use hashfs::Access;
use hashfs::{Error, File, FileSystem, FileType, Ino, Metadata, SetAttr};
use hashfs::{Owner, RenameMode, SetTime, SyncScope};
use libc::{c_char, c_int, c_uint, c_void, mode_t, off_t, size_t, ssize_t};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

// The real libc functions, the reentrancy guard and errno: `hashfs-interpose`, shared with
// the stacked mode's shim.
use hashfs_interpose::{guarded, real, shim_thread, FdSet, LastLink};

// ---------------------------------------------------------------------------------------
// State.

struct OpenFile {
    file: Option<File<MmapDevice>>,
    ino: Ino,
    fs_path: PathBuf,
    pos: fork::Position,
    /// O_ACCMODE, O_APPEND, O_NONBLOCK... as given to open.
    flags: std::sync::atomic::AtomicI32,
    /// The description's descriptor of the image for its OFD locks and `flock`
    /// (`locks.rs`), opened at first use.
    lock_fd: OnceLock<Result<c_int, c_int>>,
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        locks::close_description(self);
        self.pos.release();
    }
}

struct Shim {
    fs: Option<FileSystem<MmapDevice>>,
    /// Why the image could not be used (reported once), and the errno its paths fail
    /// with from then on (EBUSY for an image another process holds).
    error: Option<(String, c_int)>,
    fds: Mutex<HashMap<c_int, Arc<OpenFile>>>,
    fd_bits: FdSet,
    dirs: Mutex<HashMap<usize, Box<DirStream>>>,
}

static SHIM: OnceLock<Shim> = OnceLock::new();
static FORKED: AtomicBool = AtomicBool::new(false);
static EXITING: AtomicBool = AtomicBool::new(false);

/// Standard descriptors redirected to HashFS files (dup2 onto 0, 1 or 2): glibc's stdio
/// writes them with its internal write, which no preload can see, so they become pipes that
/// a thread pumps into (or out of) the file.
static PUMPS: Mutex<Vec<(c_int, std::thread::JoinHandle<()>)>> = Mutex::new(Vec::new());

/// Before `target` (a standard descriptor) is replaced or closed: the output pump feeding
/// the file from it, taken out of the list. After the replacement, [`settle_pump`] lets it
/// write what the pipe still holds, so that the file has the data before the program goes
/// on (a shell's `echo a > f; echo b >> f` must not race two pumps).
pub(super) fn take_pump(target: c_int) -> Option<std::thread::JoinHandle<()>> {
    let mut pumps = PUMPS.lock();
    let i = pumps.iter().position(|(fd, _)| *fd == target)?;
    Some(pumps.swap_remove(i).1)
}

/// Waits for a taken pump to reach the end of its pipe, at most a second (another copy of
/// the pipe's write end, such as `2>&1` made, keeps it open; the pump then finishes on its
/// own when that copy goes, and is joined at exit).
pub(super) fn settle_pump(handle: Option<std::thread::JoinHandle<()>>, target: c_int) {
    let Some(h) = handle else { return };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while !h.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    if h.is_finished() {
        let _ = h.join();
    } else {
        PUMPS.lock().push((-2 - target, h)); // still writing: joined at exit, not closed there
    }
}

fn start_pump(of: Arc<OpenFile>, target: c_int) -> c_int {
    let pipe2 = real!(pipe2: fn(*mut c_int, c_int) -> c_int);
    let dup2r = real!(dup2: fn(c_int, c_int) -> c_int);
    let closer = real!(close: fn(c_int) -> c_int);
    let readr = real!(read: fn(c_int, *mut c_void, size_t) -> ssize_t);
    let writer = real!(write: fn(c_int, *const c_void, size_t) -> ssize_t);
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds holds two descriptors.
    if unsafe { pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return -1;
    }
    // The caller may have closed `target` before dup2 onto it (a shell saving and closing
    // its stdout first), so one end of the new pipe can land on `target` itself; moved
    // elsewhere, or the dup2 below would close it.
    let fcntlr = real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int);
    for fd in fds.iter_mut() {
        if *fd == target {
            // SAFETY: duplicating our own pipe end (target is taken, so the copy lands
            // elsewhere), then closing the original.
            let moved = unsafe { fcntlr(*fd, libc::F_DUPFD_CLOEXEC, 3) };
            if moved < 0 {
                // SAFETY: both ends are ours.
                unsafe {
                    closer(fds[0]);
                    closer(fds[1]);
                }
                return -1;
            }
            // SAFETY: the original end, now duplicated.
            unsafe { closer(*fd) };
            *fd = moved;
        }
    }
    let (r, w) = (fds[0], fds[1]);
    let output = target != 0;
    let older = if output { take_pump(target) } else { None };
    // SAFETY: plain descriptor operations on descriptors we own.
    unsafe {
        if dup2r(if output { w } else { r }, target) < 0 {
            closer(r);
            closer(w);
            return -1;
        }
        closer(if output { w } else { r });
    }
    settle_pump(older, target);
    // Our end, out of the way of the program's dup2 (`hashfs::pm::out_of_the_way`).
    let keep = {
        use std::os::fd::{FromRawFd, IntoRawFd};
        // SAFETY: our own pipe end, owned by nothing else.
        hashfs::pm::out_of_the_way(unsafe { std::fs::File::from_raw_fd(if output { r } else { w }) }).into_raw_fd()
    };
    let handle = std::thread::spawn(move || {
        shim_thread();
        let Some(file) = of.file.as_ref() else { return };
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if output {
                // SAFETY: buf is valid for its length.
                let n = unsafe { readr(keep, buf.as_mut_ptr() as *mut c_void, buf.len()) };
                if n <= 0 {
                    break;
                }
                let mut pos = of.pos.lock();
                let written = if of.flags.load(Ordering::Relaxed) & libc::O_APPEND != 0 {
                    file.append(&buf[..n as usize])
                } else {
                    file.write_at(*pos, &buf[..n as usize]).map(|k| (k, *pos + k as u64))
                };
                match written {
                    Ok((_, end)) => *pos = end,
                    Err(e) => {
                        eprintln!("hashfs_preload: write to redirected descriptor {target} failed: {e}");
                        break;
                    }
                }
            } else {
                let mut pos = of.pos.lock();
                let n = match file.read_at(*pos, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                *pos += n as u64;
                drop(pos);
                // SAFETY: buf holds n bytes.
                if unsafe { writer(keep, buf.as_ptr() as *const c_void, n) } < 0 {
                    break;
                }
            }
        }
        // SAFETY: our end of the pipe.
        unsafe { closer(keep) };
    });
    PUMPS.lock().push((if output { target } else { -1 }, handle));
    target
}

/// At exit: drain redirected standard descriptors, close every HashFS file (freeing
/// unlinked ones) and mark the image clean.
pub(super) extern "C" fn at_exit() {
    if FORKED.load(Ordering::Relaxed) || !is_owner() || EXITED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: flushing every stdio stream is what exit() does anyway; done now so that
    // redirected output reaches its pipe before the pumps are drained.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    let pumps = std::mem::take(&mut *PUMPS.lock());
    let closer = real!(close: fn(c_int) -> c_int);
    for (fd, handle) in pumps {
        if fd >= 0 {
            // SAFETY: closing the write end held as the standard descriptor ends the pump.
            unsafe { closer(fd) };
            let _ = handle.join();
        } else if fd < -1 && handle.is_finished() {
            let _ = handle.join();
        }
    }
    EXITING.store(true, Ordering::Relaxed);
    guarded(|| {
        if let Some(s) = SHIM.get() {
            s.fds.lock().clear();
            // The process's mappings go with it: their records (open files, pinned blocks)
            // must not keep the image from being marked clean.
            mmap::forget_all();
            if let Some(fs) = &s.fs {
                if let Err(e) = fs.shutdown() {
                    eprintln!("hashfs_preload: image not marked clean at exit: {e}");
                }
            }
        }
    });
}

/// Set once the exit work has run (by `exit`'s handler or by `_exit`).
static EXITED: AtomicBool = AtomicBool::new(false);
/// The process that mounted the image (0: not yet).
static OWNER_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Whether this is the process that mounted the image: a child made by `vfork` shares our
/// memory but runs no fork handlers, and must not unmount the image under its parent.
fn is_owner() -> bool {
    // SAFETY: getpid through the system call (no cached value that a vfork child shares).
    let pid = unsafe { libc::syscall(libc::SYS_getpid) } as i32;
    OWNER_PID.load(Ordering::Relaxed) == pid
}

/// glibc's handler in every child its fork makes: a child of a process that uses the image
/// is marked as not joined (EIO on its paths) until the shim's own `fork` (`fork.rs`),
/// through which the program's calls come, makes it a participant.
extern "C" fn after_fork_in_child() {
    if SHIM.get().is_some_and(|s| s.fs.is_some()) {
        FORKED.store(true, Ordering::Relaxed);
    }
}

/// The prefix served by HashFS as bytes, without a trailing slash (None: HASHFS_MOUNT unset,
/// not absolute, or `/`: nothing is ours). Read through libc's `getenv`, which allocates
/// nothing: a call asking whether a path is ours may come from an allocator's own start-up
/// (Debian's jemalloc reads /etc/malloc.conf with `readlink` before its heap works; an
/// allocation there re-enters jemalloc and hangs), so the answer "not ours" must never
/// touch the heap. It is copied into static storage at once: programs that set their
/// process title (Redis, PostgreSQL) write over the environment's original strings.
fn prefix_bytes() -> Option<&'static [u8]> {
    struct Copy {
        bytes: [u8; libc::PATH_MAX as usize],
        len: usize,
    }
    static PREFIX: OnceLock<Option<Copy>> = OnceLock::new();
    let copy = PREFIX.get_or_init(|| {
        // SAFETY: a NUL-terminated name; getenv returns a NUL-terminated string of the
        // environment, or null.
        let v = unsafe { libc::getenv(c"HASHFS_MOUNT".as_ptr()) };
        if v.is_null() {
            return None;
        }
        // SAFETY: as above.
        let b = unsafe { CStr::from_ptr(v) }.to_bytes();
        let mut trimmed = b;
        while let Some(t) = trimmed.strip_suffix(b"/") {
            trimmed = t; // "/pm/" is "/pm", and "//" is "/"
        }
        if b.first() != Some(&b'/') || trimmed.is_empty() || trimmed.len() > libc::PATH_MAX as usize {
            eprintln!("hashfs_preload: HASHFS_MOUNT must be an absolute path other than /; nothing is served");
            return None;
        }
        let mut c = Copy { bytes: [0; libc::PATH_MAX as usize], len: trimmed.len() };
        c.bytes[..trimmed.len()].copy_from_slice(trimmed);
        Some(c)
    });
    copy.as_ref().map(|c| &c.bytes[..c.len])
}

/// The prefix served by HashFS (None: HASHFS_MOUNT unset or not absolute, nothing is ours).
fn prefix() -> Option<&'static Path> {
    prefix_bytes().map(|b| Path::new(std::ffi::OsStr::from_bytes(b)))
}

/// Whether `path` (absolute) certainly lies outside the prefix, decided without
/// allocating: true when both are plain (no `.`, `..` or empty component, which would
/// need normalizing) and the path's components do not start with the prefix's.
pub(super) fn plainly_outside(path: &[u8]) -> bool {
    fn plain(b: &[u8]) -> bool {
        b.first() == Some(&b'/')
            && !b.windows(2).any(|w| w == b"//")
            && !b.split(|&c| c == b'/').skip(1).any(|c| c == b"." || c == b"..")
    }
    let Some(pre) = prefix_bytes() else { return true };
    if !plain(path) || !plain(pre) {
        return false;
    }
    !(path.starts_with(pre) && (path.len() == pre.len() || path[pre.len()] == b'/'))
}

/// `HASHFS_WRITE_MODE` (strict or relaxed): the write mode of this process's mount, as
/// `mount -o strict` (unset: the image's, from mkfs).
fn write_mode_env() -> Result<Option<hashfs::WriteMode>, String> {
    match std::env::var("HASHFS_WRITE_MODE") {
        Err(_) => Ok(None),
        Ok(v) => hashfs::WriteMode::from_name(&v)
            .map(Some)
            .ok_or_else(|| format!("HASHFS_WRITE_MODE={v:?}: choose strict or relaxed")),
    }
}

/// Mounts the image; with `HASHFS_POPULATE=1`, its mapping is faulted in on a thread of
/// its own (a preallocated image only; `MmapDevice::populate_in_background`), so that
/// writes do not pay a page fault each: worth it for a long-running process, wasted CPU
/// for a short one, hence opt-in.
///
/// The image is shared with every other process that uses it through the shim
/// (`FileSystem::mount_shared`); an image whose mapping is not shared yet is mounted by
/// this process alone, and the others get EBUSY while it runs.
fn open_image(img: &Path) -> hashfs::Result<(FileSystem<MmapDevice>, hashfs::MountReport)> {
    let populate = std::env::var_os("HASHFS_POPULATE").is_some_and(|v| v == "1");
    let dev = MmapDevice::open(img, hashfs::pm::OpenMode::Shared)?;
    if populate {
        dev.populate_in_background()?;
    }
    let image = std::fs::File::open(img)?;
    let region = hashfs::share::region_path(&image)?;
    let access = hashfs::share::Access::of_image(&image)?;
    match FileSystem::mount_shared(std::sync::Arc::new(dev), &region, access, &|_, _| {}) {
        Err(Error::Unsupported(_)) => {}
        shared => return shared,
    }
    let dev = MmapDevice::open(img, hashfs::pm::OpenMode::Existing)?;
    if populate {
        dev.populate_in_background()?;
    }
    FileSystem::mount(std::sync::Arc::new(dev), &|_, _| {})
}

/// The shim, mounting the image on first use of a path under the prefix.
fn shim() -> &'static Shim {
    SHIM.get_or_init(|| {
        let image = std::env::var_os("HASHFS_IMAGE").map(PathBuf::from);
        let (fs, error) = match &image {
            None => (None, Some(("HASHFS_IMAGE is not set".to_string(), libc::EIO))),
            Some(img) => match write_mode_env() {
                Err(e) => (None, Some((e, libc::EIO))),
                Ok(mode) => match open_image(img) {
                    Ok((fs, _)) => {
                        if let Some(m) = mode {
                            fs.set_write_mode(m);
                        }
                        (Some(fs), None)
                    }
                    Err(e) => (None, Some((format!("cannot use image {}: {e}", img.display()), e.errno()))),
                },
            },
        };
        if let Some((e, _)) = &error {
            eprintln!("hashfs_preload: {e}; paths under {} will fail", prefix().unwrap_or(Path::new("?")).display());
        }
        // SAFETY: getpid through the system call.
        OWNER_PID.store(unsafe { libc::syscall(libc::SYS_getpid) } as i32, Ordering::Relaxed);
        // SAFETY: registering plain functions to run in fork children and at exit.
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
            if fs.is_some() {
                libc::atexit(at_exit);
            }
        }
        Shim { fs, error, fds: Mutex::new(HashMap::new()), fd_bits: FdSet::new(), dirs: Mutex::new(HashMap::new()) }
    })
}

impl Shim {
    fn is_ours(&self, fd: c_int) -> bool {
        self.fd_bits.contains(fd)
    }
    fn mark(&self, fd: c_int) {
        self.fd_bits.insert(fd);
    }
    fn unmark(&self, fd: c_int) {
        self.fd_bits.remove(fd);
    }
    fn file(&self, fd: c_int) -> Option<Arc<OpenFile>> {
        self.fds.lock().get(&fd).cloned()
    }
    fn fs(&self) -> Result<&FileSystem<MmapDevice>, c_int> {
        if FORKED.load(Ordering::Relaxed) || EXITING.load(Ordering::Relaxed) {
            return Err(libc::EIO);
        }
        self.fs.as_ref().ok_or(self.error.as_ref().map_or(libc::EIO, |&(_, errno)| errno))
    }
}

/// The shim as the interposer's backend: the calls it serves are in the modules below,
/// one family each (`io`: data...), and `export!` makes libc's names call them.
pub struct Preload;

impl hashfs_interpose::Backend for Preload {
    fn claims(fd: c_int) -> bool {
        SHIM.get().is_some_and(|s| s.is_ours(fd))
    }
}

hashfs_interpose::export!(crate::shim::Preload);

// ---------------------------------------------------------------------------------------
// The rest, by concern (after the macros above, which they use).

mod copy;
mod cwd;
mod dir;
mod fd;
mod fork;
mod io;
mod ioctl;
mod locks;
mod meta;
mod mmap;
mod names;
mod path;
mod socket;
mod stat;
mod statfs;
mod stdio;
mod vector;
mod xattr;
use dir::DirStream;
use fd::process_umask;
use io::{read_into, with_file, write_from};
use mmap::is_mapped;
use path::*;
use stat::{in_supplementary_groups, permitted};
