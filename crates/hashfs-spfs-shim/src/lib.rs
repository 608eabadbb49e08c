//! `libhashfs_spfs_shim.so`: SPFS's stacked mode inside the process. With
//! `LD_PRELOAD=libhashfs_spfs_shim.so HASHFS_IMAGE=IMG HASHFS_LOWER=DIR` (or `hashfs run
//! IMG --lower DIR -- PROGRAM`), the program uses DIR's real paths and real descriptors;
//! the kernel serves every file until the Sync Point Profiler sees it fsynced often with
//! little written in between. From then on the file's writes go to its PM copy in the
//! image, its reads merge that copy over the lower file, and its fsync is a fence: no
//! system call and no FUSE round trip on the data path. This is the same stack as the FUSE
//! mount's (`hashfs_spfs::Stack`: profiler, PM copies, write-back thread, crash repairs);
//! only the front end differs. docs/stacked.md has the design and its limits.
//!
//! What is intercepted, for regular files under DIR (everything else passes untouched):
//! the open family, close, dup family and fcntl (descriptors are tracked), the read and
//! write families, lseek, fsync/fdatasync, truncation and fallocate (served from PM for a
//! promoted file), the stat family (a promoted file's length and mtime), unlink and rename
//! (a promoted file whose last name goes loses its PM copy), and the calls that would
//! reach the lower file behind the stack's back: mmap, stdio streams (fopen, fdopen),
//! copy_file_range, sendfile and splice. Those write the file back first, and a file that
//! is memory-mapped or open as a stream is never promoted while it is (`pinned`).
//!
//! One process owns the image (the library's exclusive lock): in another process, or in a
//! child made by fork() that did not exec, opening a file under DIR fails (EBUSY, EIO)
//! rather than bypassing the PM copies. At exit every promoted file is written back, so
//! that DIR is whole for other programs; `HASHFS_STACK_KEEP=1` leaves them in PM for the
//! next run or a stacked mount (which recover the image, as after a crash); `HASHFS_STACK_STATUS=1` prints what `hashfs info` shows
//! for a mount (PM use, counters, promoted files) before that. Tuning: `HASHFS_STACK_OPTIONS=promote_after=N,...`, the
//! mount's `-o` options.
//!
//! The exported libc functions are `hashfs-interpose`'s (written once, shared with
//! `hashfs-preload`); this crate is the backend behind them, [`Spfs`]. Modules: `fd`
//! (Descriptors and Streams: open, close, dup, fcntl, stdio streams), `io` (Data, and the
//! Names it watches: unlink, rename, truncate), `meta` (Attributes, Mappings, Copies).

use hashfs_spfs::{Shared, Stack, StackConfig};
use libc::{c_char, c_int};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::fs::File;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

// The real libc functions, the reentrancy guard and errno: `hashfs-interpose`, shared with
// `hashfs-preload`.
use hashfs_interpose::{errno, guarded, real, shim_thread, FdSet, LastLink};

// ---------------------------------------------------------------------------------------
// State.

/// `Desc::pos` when the kernel's file offset is the descriptor's (the file is below).
const KERNEL_POS: i64 = -1;

/// One open file description of a lower file (shared by its dup'd numbers).
pub(crate) struct Desc {
    key: hashfs_spfs::absorb::Key,
    cell: Shared,
    /// The file offset while the file is promoted (the kernel's is stale then), or
    /// [`KERNEL_POS`]. Changed only with the file's state locked.
    pos: AtomicI64,
    /// O_ACCMODE, O_APPEND... as opened or set by F_SETFL.
    flags: AtomicI32,
}

struct Stacked {
    stack: Option<Arc<Stack>>,
    /// Why the image could not be used (said once), and the errno files under the lower
    /// directory fail with from then on (the mount error's own: EBUSY for an image in use).
    error: Option<(String, c_int)>,
    fds: RwLock<HashMap<c_int, Arc<Desc>>>,
    fd_bits: FdSet,
    demoter: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Stdio streams of lower files: what fclose must unpin.
    streams: Mutex<HashMap<usize, Shared>>,
}

/// The lower directory (canonical) and its device, from `HASHFS_LOWER`.
struct Lower {
    path: PathBuf,
    dev: u64,
}

static STACKED: OnceLock<Stacked> = OnceLock::new();
static FORKED: AtomicBool = AtomicBool::new(false);
static EXITED: AtomicBool = AtomicBool::new(false);
static OWNER_PID: AtomicI32 = AtomicI32::new(0);

fn lower() -> Option<&'static Lower> {
    static LOWER: OnceLock<Option<Lower>> = OnceLock::new();
    LOWER
        .get_or_init(|| {
            let dir = std::env::var_os("HASHFS_LOWER")?;
            let path = match std::fs::canonicalize(&dir) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("hashfs_spfs_shim: HASHFS_LOWER={}: {e}; nothing is stacked", Path::new(&dir).display());
                    return None;
                }
            };
            let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
            let stat = real!(stat: fn(*const c_char, *mut libc::stat) -> c_int);
            // SAFETY: a NUL-terminated path and room for a struct stat.
            if unsafe { stat(c.as_ptr(), st.as_mut_ptr()) } != 0 {
                return None;
            }
            // SAFETY: filled by a successful stat.
            let dev = unsafe { st.assume_init() }.st_dev;
            Some(Lower { path, dev })
        })
        .as_ref()
}

fn stack_config() -> Result<StackConfig, String> {
    let opts = std::env::var("HASHFS_STACK_OPTIONS").unwrap_or_default();
    let opts: Vec<&str> = opts.split(',').filter(|s| !s.is_empty()).collect();
    StackConfig::from_options(&opts).map_err(|e| format!("HASHFS_STACK_OPTIONS {e}"))
}

/// The stack on the image, or why not and the errno files under the lower directory
/// then fail with (EBUSY for an image another process holds, EIO otherwise).
fn open_stack(lower: &Path) -> Result<Arc<Stack>, (String, c_int)> {
    let eio = |e: String| (e, libc::EIO);
    let img =
        std::env::var_os("HASHFS_IMAGE").map(PathBuf::from).ok_or_else(|| eio("HASHFS_IMAGE is not set".into()))?;
    let cfg = stack_config().map_err(eio)?;
    let unusable = |e: hashfs::Error| (format!("cannot use image {}: {e}", img.display()), e.errno());
    let dev = hashfs::pm::MmapDevice::open(&img, hashfs::pm::OpenMode::Existing).map_err(|e| unusable(e.into()))?;
    let (fs, _) = hashfs::FileSystem::mount(Arc::new(dev), &|_, _| {}).map_err(unusable)?;
    let (stack, _) = Stack::open(fs, lower, cfg).map_err(eio)?;
    Ok(stack)
}

/// The shim's state, mounting the image on first use of a file under the lower directory.
fn stacked() -> &'static Stacked {
    STACKED.get_or_init(|| {
        let (stack, error) = match lower().map(|l| open_stack(&l.path)) {
            Some(Ok(s)) => (Some(s), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, Some(("HASHFS_LOWER is not set or not a directory".to_string(), libc::EIO))),
        };
        if let Some((e, _)) = &error {
            eprintln!("hashfs_spfs_shim: {e}; files under the lower directory will fail to open");
        }
        // SAFETY: getpid through the system call (no cached value a vfork child shares).
        OWNER_PID.store(unsafe { libc::syscall(libc::SYS_getpid) } as i32, Ordering::Relaxed);
        // SAFETY: registering plain functions to run in fork children and at exit.
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
            if stack.is_some() {
                libc::atexit(at_exit);
            }
        }
        Stacked {
            stack,
            error,
            fds: RwLock::new(HashMap::new()),
            fd_bits: FdSet::new(),
            demoter: Mutex::new(None),
            streams: Mutex::new(HashMap::new()),
        }
    })
}

extern "C" fn after_fork_in_child() {
    FORKED.store(true, Ordering::Relaxed);
}

fn is_owner() -> bool {
    // SAFETY: getpid through the system call.
    let pid = unsafe { libc::syscall(libc::SYS_getpid) } as i32;
    OWNER_PID.load(Ordering::Relaxed) == pid
}

/// At exit: the write-back thread stopped, every promoted file written back (unless
/// `HASHFS_STACK_KEEP=1`), the image marked clean.
extern "C" fn at_exit() {
    if FORKED.load(Ordering::Relaxed) || !is_owner() || EXITED.swap(true, Ordering::AcqRel) {
        return;
    }
    guarded(|| {
        let Some(s) = STACKED.get() else { return };
        let Some(stack) = &s.stack else { return };
        stack.stop();
        if let Some(h) = s.demoter.lock().take() {
            let _ = h.join();
        }
        if std::env::var_os("HASHFS_STACK_STATUS").is_some_and(|v| v == "1") {
            eprint!("hashfs_spfs_shim: at exit\n{}", stack.status());
        }
        if keep_at_exit() {
            // The PM copies stay, and so does the stack, live for whatever the process still
            // does (exit handlers registered before ours run after it): the image is not
            // marked clean, and the next mount recovers it as after a crash.
            return;
        }
        if let Err(e) = stack.write_back_all() {
            eprintln!("hashfs_spfs_shim: writing promoted files back at exit: {e} (they stay in PM)");
            return;
        }
        // Every file is below now, and stays there (fsyncs after this go to the lower file
        // system, unprofiled): later writes, from exit handlers, reach the lower files.
        stack.close_all();
        if let Err(e) = stack.store.fs.shutdown() {
            eprintln!("hashfs_spfs_shim: image not marked clean at exit: {e}");
        }
    });
}

/// `HASHFS_STACK_KEEP=1`: promoted files stay in PM at exit.
fn keep_at_exit() -> bool {
    std::env::var_os("HASHFS_STACK_KEEP").is_some_and(|v| v == "1")
}

impl hashfs_interpose::Process for Spfs {
    /// `_exit` runs no exit handlers: the exit work (write-back, the image marked clean)
    /// runs here first.
    fn before_exit() {
        if STACKED.get().is_some_and(|s| s.stack.is_some()) {
            at_exit();
        }
    }
}

impl Stacked {
    fn tracked(&self, fd: c_int) -> bool {
        self.fd_bits.contains(fd)
    }

    fn mark(&self, fd: c_int) {
        self.fd_bits.insert(fd);
    }

    fn unmark(&self, fd: c_int) {
        self.fd_bits.remove(fd);
    }

    fn desc(&self, fd: c_int) -> Option<Arc<Desc>> {
        self.fds.read().get(&fd).cloned()
    }

    /// Binds `fd` to `d` (open, dup).
    fn track(&self, fd: c_int, d: Arc<Desc>) {
        if fd < 0 || fd as usize >= FdSet::LIMIT {
            return;
        }
        let old = self.fds.write().insert(fd, d);
        self.mark(fd);
        if let Some(old) = old {
            self.released(old);
        }
    }

    /// Forgets `fd` (close, or dup2 over it).
    fn untrack(&self, fd: c_int) {
        if !self.tracked(fd) {
            return;
        }
        self.unmark(fd);
        let old = self.fds.write().remove(&fd);
        if let Some(old) = old {
            self.released(old);
        }
    }

    /// A number of `d` went: at its description's last, the stack hears of the close.
    fn released(&self, d: Arc<Desc>) {
        if let (Some(stack), Some(d)) = (&self.stack, Arc::into_inner(d)) {
            stack.closed(d.key, &d.cell);
        }
    }

    /// Starts the write-back thread (at the first promotion: a process that never
    /// promotes a file pays nothing for it).
    fn demoter_running(&self, stack: &Arc<Stack>) {
        let mut d = self.demoter.lock();
        if d.is_none() {
            let stack = stack.clone();
            let spawned = std::thread::Builder::new().name("hashfs-writeback".into()).spawn(move || {
                shim_thread();
                hashfs::pm::block_signals();
                hashfs_spfs::run_demoter(&stack);
            });
            match spawned {
                Ok(h) => *d = Some(h),
                // Promoted files are then written back at exit only; said, never a panic
                // in the program's call (the process's limit of threads).
                Err(e) => {
                    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
                    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                        eprintln!(
                            "hashfs_spfs_shim: no write-back thread ({e}): promoted files are written back at exit"
                        );
                    }
                }
            }
        }
    }
}

/// The stack if this process opened it already, or else if `under()` says the file at
/// hand is under the lower directory (the stack is opened then: files an earlier run left
/// promoted are found). A process that never touches the lower directory never takes the
/// image, whatever else it stats or removes on the same device.
fn stack_if(under: impl FnOnce() -> bool) -> Option<&'static Arc<Stack>> {
    if let Some(s) = STACKED.get() {
        return s.stack.as_ref();
    }
    if under() {
        stacked().stack.as_ref()
    } else {
        None
    }
}

/// Opens the stack, if it is not open yet and `(dirfd, path)` lies under the lower
/// directory; whether it did. Its opening makes again the files made in PM whose creation
/// a crash lost below (`hashfs-spfs/src/remake.rs`): a call that found no such file, or is
/// about to create one, before the stack was open must then be made (again) after it.
/// (The file need not exist: its directory is what is resolved.)
fn opened_now(dirfd: c_int, path: &std::ffi::CStr) -> bool {
    STACKED.get().is_none() && at_under(dirfd, path, LastLink::NoFollow) && {
        stacked();
        true
    }
}

/// Whether `p` (absolute, its last symbolic link followed or not as `last` says) lies
/// under the lower directory.
fn path_under(p: &Path, last: LastLink) -> bool {
    let Some(l) = lower() else { return false };
    let resolved = match last {
        LastLink::Follow => std::fs::canonicalize(p).ok(),
        LastLink::NoFollow => match (p.parent(), p.file_name()) {
            (Some(dir), Some(name)) => std::fs::canonicalize(dir).ok().map(|d| d.join(name)),
            _ => None,
        },
    };
    resolved.is_some_and(|r| r.starts_with(&l.path))
}

/// The directory `dirfd` stands for (the working directory for AT_FDCWD).
fn dir_of(dirfd: c_int) -> Option<PathBuf> {
    if dirfd == libc::AT_FDCWD {
        std::env::current_dir().ok()
    } else {
        std::fs::read_link(format!("/proc/self/fd/{dirfd}")).ok()
    }
}

/// Whether `(dirfd, path)` names something under the lower directory.
fn at_under(dirfd: c_int, path: &std::ffi::CStr, last: LastLink) -> bool {
    let bytes = path.to_bytes();
    let p = Path::new(std::ffi::OsStr::from_bytes(bytes));
    if bytes.is_empty() {
        // AT_EMPTY_PATH: dirfd itself.
        return dir_of(dirfd).is_some_and(|d| path_under(&d, LastLink::Follow));
    }
    let abs = if p.is_absolute() { p.to_path_buf() } else { dir_of(dirfd).map(|d| d.join(p)).unwrap_or_default() };
    path_under(&abs, last)
}

/// The shim as the interposer's backend: the calls it serves are in `io` (data)...;
/// `export!` makes libc's names call them.
pub struct Spfs;

impl hashfs_interpose::Backend for Spfs {
    fn claims(fd: c_int) -> bool {
        STACKED.get().is_some_and(|s| s.tracked(fd))
    }
}

hashfs_interpose::export!(crate::Spfs);

/// A `File` view of the caller's descriptor, for the stack's calls (never closed here).
fn view(fd: c_int) -> ManuallyDrop<File> {
    // SAFETY: fd is open for the duration of the call that passed it; ManuallyDrop keeps
    // the view from closing it.
    ManuallyDrop::new(unsafe { File::from_raw_fd(fd) })
}

mod fd;
mod io;
mod meta;
