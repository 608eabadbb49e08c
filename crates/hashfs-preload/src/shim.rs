//! The shim's shared state (the real libc functions, the reentrancy guard, the image and
//! its descriptor table); the exported calls live in the modules below, one concern each:
//! `fd` (open, close, dup, fcntl), `path` (which paths are ours), `io` (read, write and
//! friends), `vector` (preadv/pwritev and the `*v2` calls), `copy` (copy_file_range,
//! sendfile, splice), `stat` (the stat family, access), `meta` (owners, times, the `*at`
//! name calls, mknod), `names` (unlink, mkdir, rename, links), `dir` (directory streams),
//! `cwd` (chdir into the prefix), `mmap`, `xattr`, `socket` (UNIX sockets bound and connected at paths in the prefix), `stdio`, `statfs`. docs/shim.md lists
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
use hashfs_interpose::{guarded, in_shim, real, shim_thread, FdSet, LastLink};

// ---------------------------------------------------------------------------------------
// State.

struct OpenFile {
    file: Option<File<MmapDevice>>,
    ino: Ino,
    fs_path: PathBuf,
    pos: fork::Position,
    /// O_ACCMODE, O_APPEND, O_NONBLOCK... as given to open.
    flags: std::sync::atomic::AtomicI32,
    /// The description as the owner of its OFD locks and `flock` (`locks.rs`), named at
    /// its first one.
    lock_owner: OnceLock<hashfs::share::lock_table::Owner>,
    /// A directory's path where it was last found, and the changes published then
    /// (`path::dir_path_now`).
    found_at: Mutex<Option<(u64, PathBuf)>>,
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        let last = self.pos.release() == Some(true);
        locks::close_description(self, last);
    }
}

struct Shim {
    fs: Option<FileSystem<MmapDevice>>,
    /// Why the image could not be used (reported once), and the errno its paths fail
    /// with from then on (EBUSY for an image another process holds).
    error: Option<(String, c_int)>,
    /// Held across `fork` (`shim/fork.rs`): a [`ForkMutex`], which the child can let go of.
    fds: hashfs::ForkMutex<FdTable>,
    fd_bits: FdSet,
    dirs: hashfs::ForkMutex<HashMap<usize, Box<DirStream>>>,
}

static SHIM: OnceLock<Shim> = OnceLock::new();

/// The shim's descriptors and their open files, looked up by every call on a descriptor.
type FdTable = HashMap<c_int, Arc<OpenFile>, hashfs::int_hash::IntHash>;

static FORKED: AtomicBool = AtomicBool::new(false);
static EXITING: AtomicBool = AtomicBool::new(false);

/// The exit work runs as the library's destructor, after every handler the program
/// registered with `atexit` (glibc runs the loaded objects' destructors last): a program
/// that removes its files in such a handler (initdb cleaning up after a failure) still
/// has the image.
#[used]
#[link_section = ".fini_array"]
static AT_EXIT: extern "C" fn() = at_exit;

/// At exit: drain redirected standard descriptors, close every HashFS file (freeing
/// unlinked ones) and mark the image clean. Nothing when this process never used the image.
pub(super) extern "C" fn at_exit() {
    if SHIM.get().is_none_or(|s| s.fs.is_none()) {
        return;
    }
    if FORKED.load(Ordering::Relaxed) || !is_owner() || EXITED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: flushing every stdio stream is what exit() does anyway; done now so that
    // redirected output reaches its pipe before the pumps are drained.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    pump::stop_input_pumps();
    let pumps = std::mem::take(&mut *PUMPS.lock());
    // The output pumps (on their descriptors, or gone on without one): closing every write
    // end of their pipes this process holds ends them, unless another process holds one.
    // Before 2026-12-07 only the descriptor a pump was started for was closed: with
    // `exec > f 2>&1` the copy on 2 kept the pipe open and the exit waited for ever, and a
    // pipeline's `echo` (a forked child that had put the pipeline's pipe on 1) waited a
    // second and left the image unclean.
    let outputs: Vec<u64> = pumps.iter().filter(|(fd, _, _)| *fd != -1).map(|&(_, pipe, _)| pipe).collect();
    pump::close_write_ends(&outputs, false);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    for (fd, pipe, handle) in pumps {
        if fd >= 0 {
            handle.join();
            continue;
        }
        if fd < -1 {
            // An output pump still writing what a replaced descriptor left: it ends soon
            // (`pump::wait_for_output_pump`).
            pump::wait_for_output_pump(pipe, handle, deadline);
            continue;
        }
        // An input pump (stopped above): it ends soon; waited for a second at most in all.
        let _ = handle.join_by(deadline);
    }
    EXITING.store(true, Ordering::Relaxed);
    guarded(leave_image);
}

/// Closes every HashFS file (freeing unlinked ones) and leaves the image (the last to
/// leave marks it clean); from here on the process's paths fail with EIO.
fn leave_image() {
    EXITING.store(true, Ordering::Relaxed);
    if let Some(s) = SHIM.get() {
        pump::finish_detached();
        s.fds.lock().clear();
        pump::forget_standard_files();
        // The records of pumps a parent ran, which a forked child inherited (an exec would
        // have handed their files on), hold those files open: a subshell that exits with
        // them failed to leave (a `$(...)` in a group redirected into the image printed
        // "image not marked clean at exit" once per subshell).
        let me = current_pid();
        pump::PUMPED.lock().retain(|p| p.pid == me);
        // The process's mappings go with it: their records (open files, pinned blocks)
        // must not keep the image from being marked clean.
        mmap::forget_all();
        if let Some(fs) = &s.fs {
            if let Err(e) = fs.shutdown() {
                eprintln!("hashfs_preload: image not marked clean at exit: {e}");
            }
        }
    }
}

/// Before an exec that hands the next program nothing of the image (no descriptor): the
/// exit work, as the program this process was is about to end. (stdio's buffers are not
/// flushed: an exec discards them; no pump serves a standard descriptor, or the exec would
/// hand it over.) Without this, the next program, which may never use the image, would
/// leave this participant's slot in place until it ended, and no one to mark the image
/// clean. Called within the shim (guarded).
pub(super) fn leave_before_exec() {
    if FORKED.load(Ordering::Relaxed) || !is_owner() || EXITED.swap(true, Ordering::AcqRel) {
        return;
    }
    pump::close_exec_write_ends();
    leave_image();
}

/// Set once the exit work has run (by `exit`'s handler or by `_exit`).
static EXITED: AtomicBool = AtomicBool::new(false);
/// The process that mounted the image (0: not yet).
static OWNER_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Whether this is the process that mounted the image: a child made by `vfork` shares our
/// memory but runs no fork handlers, and must not unmount the image under its parent.
fn is_owner() -> bool {
    OWNER_PID.load(Ordering::Relaxed) == current_pid()
}

/// This process's pid, from the system call (no cached value that a `vfork` child shares
/// with its parent).
pub(super) fn current_pid() -> i32 {
    // SAFETY: getpid cannot fail.
    unsafe { libc::syscall(libc::SYS_getpid) as i32 }
}

/// glibc's handler in every child its fork makes: a child of a process that uses the image
/// is marked as not joined (EIO on its paths) until the shim's own `fork` (`fork.rs`),
/// through which the program's calls come, makes it a participant.
pub(super) extern "C" fn after_fork_in_child() {
    exec::PROCESS_PID.store(current_pid(), Ordering::Relaxed);
    workers::forget_in_child();
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

/// Where a plain absolute `path` (no `.`, `..` or empty component, no trailing slash, which
/// would need normalizing) lies, decided without allocating: `Some(None)` outside the
/// prefix, `Some(Some(rest))` inside it, at `rest` below it (empty for the prefix itself,
/// else starting with a slash); None when the path (or the prefix) is not plain.
pub(super) fn plain_route(path: &[u8]) -> Option<Option<&[u8]>> {
    match prefix_bytes() {
        None => Some(None),
        Some(pre) => plain_route_under(pre, path),
    }
}

/// [`plain_route`] under prefix `pre`.
pub(super) fn plain_route_under<'a>(pre: &[u8], path: &'a [u8]) -> Option<Option<&'a [u8]>> {
    fn plain(b: &[u8]) -> bool {
        b.first() == Some(&b'/')
            && !b.windows(2).any(|w| w == b"//")
            && !b.split(|&c| c == b'/').skip(1).any(|c| c == b"." || c == b"..")
    }
    if !plain(path) || !plain(pre) {
        return None;
    }
    let inside = path.starts_with(pre) && (path.len() == pre.len() || path[pre.len()] == b'/');
    if !inside {
        return Some(None);
    }
    let rest = &path[pre.len()..];
    // A trailing slash ("/pm/d/") goes the normalizing way, whose components drop it.
    if rest.ends_with(b"/") {
        return None;
    }
    Some(Some(rest))
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
///
/// A process that may only read the image file (or that `HASHFS_READ_ONLY=1` tells to,
/// as `mount -o ro`) reads it beside the others and gets EROFS for every change
/// (`FileSystem::open_read_only`).
fn open_image(img: &Path) -> hashfs::Result<(FileSystem<MmapDevice>, hashfs::MountReport)> {
    let populate = std::env::var_os("HASHFS_POPULATE").is_some_and(|v| v == "1");
    if std::env::var_os("HASHFS_READ_ONLY").is_some_and(|v| v == "1") {
        return FileSystem::open_read_only(img);
    }
    let dev = match MmapDevice::open(img, hashfs::pm::OpenMode::Shared) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return FileSystem::open_read_only(img),
        dev => dev?,
    };
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

thread_local! {
    /// Set while a call that follows a link out of the image resolves its path
    /// ([`following_out`]).
    static FOLLOWING_OUT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, a resolution whose call follows a link out of the image to the kernel's file
/// it leads to (`Error::LinkOutside`): open, exec, stat and access do, so that a shell
/// finds and runs a program a link in the image names (a virtual environment's python) and
/// a program reads and writes the file a link names.
fn following_out<T>(f: impl FnOnce() -> T) -> T {
    FOLLOWING_OUT.with(|o| o.set(true));
    let r = f();
    FOLLOWING_OUT.with(|o| o.set(false));
    r
}

/// A walk met a symbolic link in the image whose target lies outside the prefix: a call
/// that does not follow it ([`following_out`]) fails (EXDEV), said once per process.
fn link_outside(target: &[u8]) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !FOLLOWING_OUT.with(|o| o.get()) && !SAID.swap(true, Ordering::Relaxed) {
        eprintln!(
            "hashfs_preload: a symbolic link in the image leads out of it, to {}; the shim follows such links \
             only to open, run or stat what they name (this call fails with EXDEV; `hashfs mount` follows them \
             all)",
            String::from_utf8_lossy(target)
        );
    }
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
                        if let Some(pre) = prefix_bytes() {
                            fs.set_mount_point(pre, link_outside);
                        }
                        // No kernel checks the calls the shim serves: it does, as Linux.
                        fs.check_access(true);
                        (Some(fs), None)
                    }
                    Err(e) => (None, Some((format!("cannot use image {}: {e}", img.display()), e.errno()))),
                },
            },
        };
        if let Some((e, _)) = &error {
            eprintln!("hashfs_preload: {e}; paths under {} will fail", prefix().unwrap_or(Path::new("?")).display());
        }
        OWNER_PID.store(current_pid(), Ordering::Relaxed);
        Shim {
            fs,
            error,
            fds: hashfs::ForkMutex::new(FdTable::default()),
            fd_bits: FdSet::new(),
            dirs: hashfs::ForkMutex::new(HashMap::new()),
        }
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

    /// A standard descriptor may be a pump's pipe (`shim/pump.rs`): the calls on its file
    /// find out (`meta::fd_target`), and go to the kernel when it is not.
    fn claims_file(fd: c_int) -> bool {
        Self::claims(fd) || ((0..=2).contains(&fd) && SHIM.get().is_some())
    }
}

hashfs_interpose::export!(crate::shim::Preload);

// ---------------------------------------------------------------------------------------
// The rest, by concern (after the macros above, which they use).

mod copy;
mod cwd;
mod dir;
mod exec;
mod fd;
mod fifo;
mod fork;
mod io;
mod ioctl;
mod library;
mod locks;
mod meta;
mod mmap;
mod names;
mod path;
mod program;
mod pump;
mod snapshot;
mod socket;
mod soname;
mod stat;
mod statfs;
mod stdio;
mod vector;
mod workers;
mod xattr;
use dir::DirStream;
use fd::process_umask;
use io::{read_into, with_file, write_from};
use mmap::is_mapped;
use path::*;
use pump::{settle_pump, start_pump, take_pump, PUMPS};
use stat::permitted;
