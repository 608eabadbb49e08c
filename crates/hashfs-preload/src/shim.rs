use hashfs::fs::api::Access;
use hashfs::fs::ops::{Owner, RenameMode, SetTime};
use hashfs::pm::MmapDevice;
use hashfs::{Error, File, FileSystem, FileType, Ino, Metadata, SetAttr};
use libc::{c_char, c_int, c_uint, c_void, mode_t, off_t, size_t, ssize_t};
use parking_lot::Mutex;
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

// ---------------------------------------------------------------------------------------
// The real libc functions.

macro_rules! real {
    ($name:ident : fn($($arg:ty),*) -> $ret:ty) => {{
        static PTR: std::sync::atomic::AtomicPtr<c_void> = std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
        #[allow(unused_unsafe)] // the macro is used both inside and outside unsafe blocks
        let f = {
            let mut p = PTR.load(Ordering::Relaxed);
            if p.is_null() {
                // SAFETY: the name is a NUL-terminated literal; RTLD_NEXT finds libc's symbol.
                p = unsafe { libc::dlsym(libc::RTLD_NEXT, concat!(stringify!($name), "\0").as_ptr() as *const c_char) };
                PTR.store(p, Ordering::Relaxed);
            }
            assert!(!p.is_null(), concat!("hashfs_preload: libc has no ", stringify!($name)));
            // SAFETY: the symbol is libc's function of this signature.
            unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> $ret>(p) }
        };
        f
    }};
}

thread_local! {
    static IN_SHIM: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with the reentrancy guard set; None if the guard was already set (the caller
/// then goes to libc).
fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    let entered = IN_SHIM.with(|g| !g.replace(true));
    if !entered {
        return None;
    }
    let r = f();
    IN_SHIM.with(|g| g.set(false));
    Some(r)
}

fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() = e };
}

fn fail<T: From<i8>>(e: c_int) -> T {
    set_errno(e);
    T::from(-1)
}

// ---------------------------------------------------------------------------------------
// State.

const FD_BITS: usize = 1 << 20;

struct OpenFile {
    file: Option<File<MmapDevice>>,
    ino: Ino,
    fs_path: PathBuf,
    pos: Mutex<u64>,
    /// O_ACCMODE, O_APPEND, O_NONBLOCK... as given to open.
    flags: std::sync::atomic::AtomicI32,
}

struct Shim {
    fs: Option<FileSystem<MmapDevice>>,
    /// Why the image could not be used (reported once, then EIO/EBUSY for its paths).
    error: Option<String>,
    fds: Mutex<HashMap<c_int, Arc<OpenFile>>>,
    fd_bits: Vec<AtomicU64>,
    dirs: Mutex<HashMap<usize, Box<DirStream>>>,
}

static SHIM: OnceLock<Shim> = OnceLock::new();
static FORKED: AtomicBool = AtomicBool::new(false);
static EXITING: AtomicBool = AtomicBool::new(false);

/// Standard descriptors redirected to HashFS files (dup2 onto 0, 1 or 2): glibc's stdio
/// writes them with its internal write, which no preload can see, so they become pipes that
/// a thread pumps into (or out of) the file.
static PUMPS: Mutex<Vec<(c_int, std::thread::JoinHandle<()>)>> = Mutex::new(Vec::new());

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
    let (r, w) = (fds[0], fds[1]);
    let output = target != 0;
    // SAFETY: plain descriptor operations on descriptors we own.
    unsafe {
        if dup2r(if output { w } else { r }, target) < 0 {
            closer(r);
            closer(w);
            return -1;
        }
        closer(if output { w } else { r });
    }
    let keep = if output { r } else { w };
    let handle = std::thread::spawn(move || {
        IN_SHIM.with(|g| g.set(true));
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
extern "C" fn at_exit() {
    if FORKED.load(Ordering::Relaxed) {
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
        }
    }
    EXITING.store(true, Ordering::Relaxed);
    guarded(|| {
        if let Some(s) = SHIM.get() {
            s.fds.lock().clear();
            if let Some(fs) = &s.fs {
                if let Err(e) = fs.shutdown() {
                    eprintln!("hashfs_preload: image not marked clean at exit: {e}");
                }
            }
        }
    });
}

extern "C" fn after_fork_in_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// The prefix served by HashFS (None: HASHFS_MOUNT unset or not absolute, nothing is ours).
fn prefix() -> Option<&'static Path> {
    static PREFIX: OnceLock<Option<PathBuf>> = OnceLock::new();
    PREFIX
        .get_or_init(|| {
            let p = PathBuf::from(std::env::var_os("HASHFS_MOUNT")?);
            if !p.is_absolute() || p == Path::new("/") {
                eprintln!("hashfs_preload: HASHFS_MOUNT must be an absolute path other than /; nothing is served");
                return None;
            }
            Some(p)
        })
        .as_deref()
}

/// The shim, mounting the image on first use of a path under the prefix.
fn shim() -> &'static Shim {
    SHIM.get_or_init(|| {
        let image = std::env::var_os("HASHFS_IMAGE").map(PathBuf::from);
        let (fs, error) = match &image {
            None => (None, Some("HASHFS_IMAGE is not set".to_string())),
            Some(img) => match FileSystem::open(img) {
                Ok((fs, _)) => (Some(fs), None),
                Err(e) => (None, Some(format!("cannot use image {}: {e}", img.display()))),
            },
        };
        if let Some(e) = &error {
            eprintln!("hashfs_preload: {e}; paths under {} will fail", prefix().unwrap_or(Path::new("?")).display());
        }
        // SAFETY: registering plain functions to run in fork children and at exit.
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
            if fs.is_some() {
                libc::atexit(at_exit);
            }
        }
        Shim {
            fs,
            error,
            fds: Mutex::new(HashMap::new()),
            fd_bits: (0..FD_BITS / 64).map(|_| AtomicU64::new(0)).collect(),
            dirs: Mutex::new(HashMap::new()),
        }
    })
}

impl Shim {
    fn is_ours(&self, fd: c_int) -> bool {
        fd >= 0
            && (fd as usize) < FD_BITS
            && self.fd_bits[fd as usize / 64].load(Ordering::Relaxed) & (1 << (fd as usize % 64)) != 0
    }
    fn mark(&self, fd: c_int, on: bool) {
        let bit = 1u64 << (fd as usize % 64);
        if on {
            self.fd_bits[fd as usize / 64].fetch_or(bit, Ordering::Relaxed);
        } else {
            self.fd_bits[fd as usize / 64].fetch_and(!bit, Ordering::Relaxed);
        }
    }
    fn file(&self, fd: c_int) -> Option<Arc<OpenFile>> {
        self.fds.lock().get(&fd).cloned()
    }
    fn fs(&self) -> Result<&FileSystem<MmapDevice>, c_int> {
        if FORKED.load(Ordering::Relaxed) || EXITING.load(Ordering::Relaxed) {
            return Err(libc::EIO);
        }
        self.fs.as_ref().ok_or(if self.error.as_deref().is_some_and(|e| e.contains("in use")) {
            libc::EBUSY
        } else {
            libc::EIO
        })
    }
}

/// Fast check used by the fd-taking functions before anything else.
fn ours(fd: c_int) -> bool {
    !IN_SHIM.with(|g| g.get()) && SHIM.get().is_some_and(|s| s.is_ours(fd))
}

// ---------------------------------------------------------------------------------------
// Paths.

/// The file-system path for `path` if it lies under the prefix.
fn fs_path(path: *const c_char) -> Option<PathBuf> {
    if path.is_null() {
        return None;
    }
    // SAFETY: libc's contract: a NUL-terminated string.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    let p = Path::new(std::ffi::OsStr::from_bytes(bytes));
    let abs = if p.is_absolute() { p.to_path_buf() } else { std::env::current_dir().ok()?.join(p) };
    // Normalize "." and ".." lexically (the prefix is not a real directory).
    let mut norm = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                norm.pop();
            }
            Component::Normal(n) => norm.push(n),
            _ => {}
        }
    }
    let rest = norm.strip_prefix(prefix()?).ok()?;
    Some(Path::new("/").join(rest))
}

/// The path for (dirfd, path) of the *at functions, if it is ours.
fn fs_path_at(dirfd: c_int, path: *const c_char) -> Option<PathBuf> {
    if path.is_null() {
        return None;
    }
    // SAFETY: as above.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    if dirfd == libc::AT_FDCWD || bytes.first() == Some(&b'/') {
        return fs_path(path);
    }
    let s = SHIM.get()?;
    let dir = s.file(dirfd)?;
    Some(dir.fs_path.join(std::ffi::OsStr::from_bytes(bytes)))
}

// ---------------------------------------------------------------------------------------
// Open, close, dup.

fn new_placeholder() -> c_int {
    let open = real!(open: fn(*const c_char, c_int, c_uint) -> c_int);
    // An O_PATH descriptor: every call the shim does not intercept (read, write, ioctl,
    // mmap, poll's IO, the *at calls with it as a directory...) fails with EBADF in the
    // kernel instead of acting on /dev/null.
    // SAFETY: a literal path.
    unsafe { open(c"/dev/null".as_ptr(), libc::O_PATH | libc::O_CLOEXEC, 0) }
}

fn register(s: &Shim, of: Arc<OpenFile>, cloexec: bool) -> c_int {
    let fd = new_placeholder();
    if fd < 0 {
        return -1;
    }
    if !cloexec {
        let fcntl = real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int);
        // SAFETY: fd is ours.
        unsafe { fcntl(fd, libc::F_SETFD, 0) };
    }
    if fd as usize >= FD_BITS {
        let close = real!(close: fn(c_int) -> c_int);
        // SAFETY: fd is ours.
        unsafe { close(fd) };
        return fail(libc::EMFILE);
    }
    s.fds.lock().insert(fd, of);
    s.mark(fd, true);
    fd
}

/// The process's file-mode creation mask (read by setting and restoring it).
fn process_umask() -> mode_t {
    // SAFETY: umask cannot fail; the mask is restored at once.
    unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    }
}

fn do_open(path: &Path, flags: c_int, mode: mode_t) -> c_int {
    let s = shim();
    let fs = match s.fs() {
        Ok(fs) => fs,
        Err(e) => return fail(e),
    };
    let acc = flags & libc::O_ACCMODE;
    let access = Access {
        read: acc == libc::O_RDONLY || acc == libc::O_RDWR,
        write: acc == libc::O_WRONLY || acc == libc::O_RDWR,
        append: flags & libc::O_APPEND != 0,
    };
    let r = (|| -> Result<(Ino, Option<File<MmapDevice>>), Error> {
        let ino = if flags & libc::O_CREAT != 0 {
            let (p, name) = fs.resolve_parent(path)?;
            match fs.lookup(p, &name) {
                Ok(_) if flags & libc::O_EXCL != 0 => return Err(Error::Exists),
                Ok(_) => fs.resolve(path)?,
                Err(Error::NotFound) => {
                    fs.create_file_at(p, &name, mode & 0o7777 & !process_umask(), Owner::current())?.ino
                }
                Err(e) => return Err(e),
            }
        } else if flags & libc::O_NOFOLLOW != 0 {
            let ino = fs.resolve_nofollow(path)?;
            if fs.getattr(ino)?.is_symlink() {
                return Err(Error::Loop);
            }
            ino
        } else {
            fs.resolve(path)?
        };
        let md = fs.getattr(ino)?;
        if flags & libc::O_DIRECTORY != 0 && !md.is_dir() {
            return Err(Error::NotDir);
        }
        if md.is_dir() {
            if access.write {
                return Err(Error::IsDir);
            }
            return Ok((ino, None));
        }
        let f = fs.open_ino(ino, if access.read || access.write { access } else { Access { read: true, ..access } })?;
        if flags & libc::O_TRUNC != 0 && access.write {
            f.set_len(0)?;
        }
        Ok((ino, Some(f)))
    })();
    match r {
        Ok((ino, file)) => {
            let of = Arc::new(OpenFile {
                file,
                ino,
                fs_path: path.to_path_buf(),
                pos: Mutex::new(0),
                flags: std::sync::atomic::AtomicI32::new(flags),
            });
            register(s, of, flags & libc::O_CLOEXEC != 0)
        }
        Err(e) => fail(e.errno()),
    }
}

#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path(path)) {
        return guarded(|| do_open(&p, flags, mode as mode_t)).unwrap_or(-1);
    }
    // SAFETY: forwarding the caller's arguments.
    unsafe { real!(open: fn(*const c_char, c_int, c_uint) -> c_int)(path, flags, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path(path)) {
        return guarded(|| do_open(&p, flags, mode as mode_t)).unwrap_or(-1);
    }
    // SAFETY: forwarding the caller's arguments.
    unsafe { real!(open64: fn(*const c_char, c_int, c_uint) -> c_int)(path, flags, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path_at(dirfd, path)) {
        return guarded(|| do_open(&p, flags, mode as mode_t)).unwrap_or(-1);
    }
    // SAFETY: forwarding the caller's arguments.
    unsafe { real!(openat: fn(c_int, *const c_char, c_int, c_uint) -> c_int)(dirfd, path, flags, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: same contract.
    unsafe { openat(dirfd, path, flags, mode) }
}

// The _FORTIFY_SOURCE entry points (open without O_CREAT, so no mode).

#[no_mangle]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: same contract as open.
    unsafe { open(path, flags, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: same contract as open.
    unsafe { open64(path, flags, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: same contract as openat.
    unsafe { openat(dirfd, path, flags, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: same contract as openat.
    unsafe { openat(dirfd, path, flags, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn creat(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: same contract as open.
    unsafe { open(path, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn creat64(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: same contract as open.
    unsafe { open(path, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if ours(fd) {
        if let Some(s) = SHIM.get() {
            guarded(|| {
                s.mark(fd, false);
                s.fds.lock().remove(&fd);
            });
        }
    }
    // SAFETY: closing the placeholder (or the caller's own descriptor).
    unsafe { real!(close: fn(c_int) -> c_int)(fd) }
}

fn dup_into(old: c_int, newfd: c_int) -> c_int {
    let s = shim();
    let Some(of) = s.file(old) else { return fail(libc::EBADF) };
    if s.is_ours(newfd) {
        s.mark(newfd, false);
        s.fds.lock().remove(&newfd);
    }
    s.fds.lock().insert(newfd, of);
    s.mark(newfd, true);
    newfd
}

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    // SAFETY: dup of the placeholder gives a fresh kernel number.
    let n = unsafe { real!(dup: fn(c_int) -> c_int)(fd) };
    if n >= 0 && ours(fd) {
        return guarded(|| dup_into(fd, n)).unwrap_or(n);
    }
    n
}

#[no_mangle]
pub unsafe extern "C" fn dup2(fd: c_int, newfd: c_int) -> c_int {
    if (0..=2).contains(&newfd) && fd != newfd && ours(fd) {
        return guarded(|| match shim().file(fd) {
            Some(of) if of.file.is_some() => start_pump(of, newfd),
            Some(_) => fail(libc::EISDIR),
            None => fail(libc::EBADF),
        })
        .unwrap_or(-1);
    }
    if fd != newfd && SHIM.get().is_some_and(|s| s.is_ours(newfd)) && !ours(fd) {
        guarded(|| {
            let s = shim();
            s.mark(newfd, false);
            s.fds.lock().remove(&newfd);
        });
    }
    // SAFETY: forwarding; the kernel makes newfd a copy of fd's placeholder.
    let n = unsafe { real!(dup2: fn(c_int, c_int) -> c_int)(fd, newfd) };
    if n >= 0 && fd != newfd && ours(fd) {
        return guarded(|| dup_into(fd, n)).unwrap_or(n);
    }
    n
}

#[no_mangle]
pub unsafe extern "C" fn dup3(fd: c_int, newfd: c_int, flags: c_int) -> c_int {
    if SHIM.get().is_some_and(|s| s.is_ours(newfd)) && !ours(fd) {
        guarded(|| {
            let s = shim();
            s.mark(newfd, false);
            s.fds.lock().remove(&newfd);
        });
    }
    // SAFETY: forwarding.
    let n = unsafe { real!(dup3: fn(c_int, c_int, c_int) -> c_int)(fd, newfd, flags) };
    if n >= 0 && ours(fd) {
        return guarded(|| dup_into(fd, n)).unwrap_or(n);
    }
    n
}

// ---------------------------------------------------------------------------------------
// Data.

fn with_file<T>(fd: c_int, f: impl FnOnce(&OpenFile, &File<MmapDevice>) -> Result<T, c_int>) -> Result<T, c_int> {
    let s = shim();
    let of = s.file(fd).ok_or(libc::EBADF)?;
    s.fs()?;
    let file = of.file.as_ref().ok_or(libc::EISDIR)?;
    f(&of, file)
}

fn ret_size(r: Result<usize, c_int>) -> ssize_t {
    match r {
        Ok(n) => n as ssize_t,
        Err(e) => fail(e),
    }
}

fn read_into(file: &File<MmapDevice>, off: u64, buf: &mut [u8]) -> Result<usize, c_int> {
    file.read_at(off, buf).map_err(|e| e.errno())
}

fn write_from(file: &File<MmapDevice>, off: u64, data: &[u8]) -> Result<usize, c_int> {
    file.write_at(off, data).map_err(|e| e.errno()).and_then(|n| {
        if n == 0 && !data.is_empty() {
            Err(libc::ENOSPC)
        } else {
            Ok(n)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    if ours(fd) {
        // SAFETY: libc's contract: buf holds count bytes.
        let b = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, count) };
        return guarded(|| {
            ret_size(with_file(fd, |of, f| {
                let mut pos = of.pos.lock();
                let n = read_into(f, *pos, b)?;
                *pos += n as u64;
                Ok(n)
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(read: fn(c_int, *mut c_void, size_t) -> ssize_t)(fd, buf, count) }
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    if ours(fd) {
        // SAFETY: libc's contract: buf holds count bytes.
        let b = unsafe { std::slice::from_raw_parts(buf as *const u8, count) };
        return guarded(|| {
            ret_size(with_file(fd, |of, f| {
                let mut pos = of.pos.lock();
                if of.flags.load(Ordering::Relaxed) & libc::O_APPEND != 0 {
                    // O_APPEND may have been set after open (fcntl F_SETFL).
                    let (n, end) = f.append(b).map_err(|e| e.errno())?;
                    *pos = end;
                    drop(pos);
                    mmap::file_changed(of);
                    return Ok(n);
                }
                let n = write_from(f, *pos, b)?;
                *pos += n as u64;
                drop(pos);
                mmap::file_changed(of);
                Ok(n)
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(write: fn(c_int, *const c_void, size_t) -> ssize_t)(fd, buf, count) }
}

#[no_mangle]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, count: size_t, off: off_t) -> ssize_t {
    if ours(fd) {
        if off < 0 {
            return fail(libc::EINVAL);
        }
        // SAFETY: libc's contract: buf holds count bytes.
        let b = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, count) };
        return guarded(|| ret_size(with_file(fd, |_, f| read_into(f, off as u64, b)))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(pread: fn(c_int, *mut c_void, size_t, off_t) -> ssize_t)(fd, buf, count, off) }
}

#[no_mangle]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, count: size_t, off: off_t) -> ssize_t {
    // SAFETY: same contract (off_t is 64-bit here).
    unsafe { pread(fd, buf, count, off) }
}

#[no_mangle]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, count: size_t, off: off_t) -> ssize_t {
    if ours(fd) {
        if off < 0 {
            return fail(libc::EINVAL);
        }
        // SAFETY: libc's contract: buf holds count bytes.
        let b = unsafe { std::slice::from_raw_parts(buf as *const u8, count) };
        return guarded(|| {
            ret_size(with_file(fd, |of, f| {
                let n = write_from(f, off as u64, b)?;
                mmap::file_changed(of);
                Ok(n)
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(pwrite: fn(c_int, *const c_void, size_t, off_t) -> ssize_t)(fd, buf, count, off) }
}

#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, count: size_t, off: off_t) -> ssize_t {
    // SAFETY: same contract.
    unsafe { pwrite(fd, buf, count, off) }
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t {
    if ours(fd) {
        let mut total = 0isize;
        for i in 0..n.max(0) as usize {
            // SAFETY: libc's contract: iov has n entries.
            let v = unsafe { *iov.add(i) };
            // SAFETY: as for read.
            let r = unsafe { read(fd, v.iov_base, v.iov_len) };
            if r < 0 {
                return if total > 0 { total } else { r };
            }
            total += r;
            if (r as usize) < v.iov_len {
                break;
            }
        }
        return total;
    }
    // SAFETY: forwarding.
    unsafe { real!(readv: fn(c_int, *const libc::iovec, c_int) -> ssize_t)(fd, iov, n) }
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t {
    if ours(fd) {
        // One write of the gathered bytes, so that O_APPEND writes stay whole.
        let mut buf = Vec::new();
        for i in 0..n.max(0) as usize {
            // SAFETY: libc's contract: iov has n entries, each of iov_len bytes.
            let v = unsafe { *iov.add(i) };
            // SAFETY: as above.
            buf.extend_from_slice(unsafe { std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len) });
        }
        // SAFETY: buf is valid for its length.
        return unsafe { write(fd, buf.as_ptr() as *const c_void, buf.len()) };
    }
    // SAFETY: forwarding.
    unsafe { real!(writev: fn(c_int, *const libc::iovec, c_int) -> ssize_t)(fd, iov, n) }
}

#[no_mangle]
pub unsafe extern "C" fn lseek(fd: c_int, off: off_t, whence: c_int) -> off_t {
    if ours(fd) {
        return guarded(|| {
            let s = shim();
            let Some(of) = s.file(fd) else { return fail(libc::EBADF) };
            let size = match s.fs().and_then(|fs| fs.getattr(of.ino).map_err(|e| e.errno())) {
                Ok(m) => m.size as i64,
                Err(e) => return fail(e),
            };
            let mut pos = of.pos.lock();
            let new = match whence {
                libc::SEEK_SET => off,
                libc::SEEK_CUR => *pos as i64 + off,
                libc::SEEK_END => size + off,
                libc::SEEK_DATA if off < size => off,
                libc::SEEK_HOLE if off < size => size,
                libc::SEEK_DATA | libc::SEEK_HOLE => return fail(libc::ENXIO),
                _ => return fail(libc::EINVAL),
            };
            if new < 0 {
                return fail(libc::EINVAL);
            }
            *pos = new as u64;
            new
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(lseek: fn(c_int, off_t, c_int) -> off_t)(fd, off, whence) }
}

#[no_mangle]
pub unsafe extern "C" fn lseek64(fd: c_int, off: off_t, whence: c_int) -> off_t {
    // SAFETY: same contract.
    unsafe { lseek(fd, off, whence) }
}

fn sync_fd(fd: c_int) -> c_int {
    match with_file(fd, |_, f| f.sync_all().map_err(|e| e.errno())) {
        Ok(()) => 0,
        Err(libc::EISDIR) => 0, // fsync of a directory: every operation is durable already
        Err(e) => fail(e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    if ours(fd) {
        return guarded(|| sync_fd(fd)).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fsync: fn(c_int) -> c_int)(fd) }
}

#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    if ours(fd) {
        return guarded(|| sync_fd(fd)).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fdatasync: fn(c_int) -> c_int)(fd) }
}

fn truncate_fd(fd: c_int, len: off_t) -> c_int {
    if len < 0 {
        return fail(libc::EINVAL);
    }
    match with_file(fd, |of, f| {
        // Shrinking under a shared mapping would leave it on freed blocks.
        if has_shared_maps(of.ino) && (len as u64) < f.metadata().map_err(|e| e.errno())?.size {
            return Err(libc::EBUSY);
        }
        f.set_len(len as u64).map_err(|e| e.errno())?;
        mmap::file_changed(of);
        Ok(())
    }) {
        Ok(()) => 0,
        Err(libc::EBADF) if shim().file(fd).is_some() => fail(libc::EINVAL),
        Err(e) => fail(e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: off_t) -> c_int {
    if ours(fd) {
        return guarded(|| truncate_fd(fd, len)).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(ftruncate: fn(c_int, off_t) -> c_int)(fd, len) }
}

#[no_mangle]
pub unsafe extern "C" fn ftruncate64(fd: c_int, len: off_t) -> c_int {
    // SAFETY: same contract.
    unsafe { ftruncate(fd, len) }
}

fn path_op<T>(
    path: *const c_char,
    f: impl FnOnce(&FileSystem<MmapDevice>, &Path) -> Result<T, Error>,
) -> Option<Result<T, c_int>> {
    let p = guarded(|| fs_path(path)).flatten()?;
    guarded(|| {
        let s = shim();
        let fs = s.fs()?;
        f(fs, &p).map_err(|e| e.errno())
    })
}

fn ret0(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => fail(e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn truncate(path: *const c_char, len: off_t) -> c_int {
    if let Some(r) = path_op(path, |fs, p| {
        if len < 0 {
            return Err(Error::Invalid("negative length"));
        }
        let f = fs.open_file(p, hashfs::OpenOptions::new().write(true))?;
        if has_shared_maps(f.ino()) && (len as u64) < f.metadata()?.size {
            return Err(Error::Busy);
        }
        f.set_len(len as u64)?;
        mmap::file_changed_ino(f.ino());
        Ok(())
    }) {
        return ret0(r);
    }
    // SAFETY: forwarding.
    unsafe { real!(truncate: fn(*const c_char, off_t) -> c_int)(path, len) }
}

#[no_mangle]
pub unsafe extern "C" fn truncate64(path: *const c_char, len: off_t) -> c_int {
    // SAFETY: same contract.
    unsafe { truncate(path, len) }
}

fn allocate_fd(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    if off < 0 || len <= 0 {
        return libc::EINVAL;
    }
    let Some(mode) = hashfs::fs::FallocateMode::from_linux_flags(mode) else {
        return libc::EOPNOTSUPP; // collapse, insert, unshare
    };
    match with_file(fd, |of, f| {
        f.fallocate(off as u64, len as u64, mode).map_err(|e| e.errno())?;
        mmap::file_changed(of);
        Ok(())
    }) {
        Ok(()) => 0,
        Err(e) => e,
    }
}

#[no_mangle]
pub unsafe extern "C" fn fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    if ours(fd) {
        let e = guarded(|| allocate_fd(fd, mode, off, len)).unwrap_or(libc::EIO);
        return if e == 0 { 0 } else { fail(e) };
    }
    // SAFETY: forwarding.
    unsafe { real!(fallocate: fn(c_int, c_int, off_t, off_t) -> c_int)(fd, mode, off, len) }
}

#[no_mangle]
pub unsafe extern "C" fn fallocate64(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    // SAFETY: same contract.
    unsafe { fallocate(fd, mode, off, len) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fallocate(fd: c_int, off: off_t, len: off_t) -> c_int {
    if ours(fd) {
        // posix_fallocate returns the error number instead of setting errno.
        return guarded(|| allocate_fd(fd, 0, off, len)).unwrap_or(libc::EIO);
    }
    // SAFETY: forwarding.
    unsafe { real!(posix_fallocate: fn(c_int, off_t, off_t) -> c_int)(fd, off, len) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fallocate64(fd: c_int, off: off_t, len: off_t) -> c_int {
    // SAFETY: same contract.
    unsafe { posix_fallocate(fd, off, len) }
}

#[no_mangle]
pub unsafe extern "C" fn sync_file_range(fd: c_int, off: off_t, len: off_t, flags: c_uint) -> c_int {
    if ours(fd) {
        return 0; // every write is durable when it returns
    }
    // SAFETY: forwarding.
    unsafe { real!(sync_file_range: fn(c_int, off_t, off_t, c_uint) -> c_int)(fd, off, len, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn readahead(fd: c_int, off: off_t, count: size_t) -> ssize_t {
    if ours(fd) {
        return 0; // nothing to read ahead into: reads come straight from the image
    }
    // SAFETY: forwarding.
    unsafe { real!(readahead: fn(c_int, off_t, size_t) -> ssize_t)(fd, off, count) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fadvise(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int {
    if ours(fd) {
        return 0; // no page cache to advise
    }
    // SAFETY: forwarding.
    unsafe { real!(posix_fadvise: fn(c_int, off_t, off_t, c_int) -> c_int)(fd, off, len, advice) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fadvise64(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int {
    // SAFETY: same contract.
    unsafe { posix_fadvise(fd, off, len, advice) }
}

// ---------------------------------------------------------------------------------------
// fcntl.

#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: libc::c_ulong) -> c_int {
    if ours(fd) {
        let r = guarded(|| -> Option<c_int> {
            let s = shim();
            let of = s.file(fd)?;
            match cmd {
                libc::F_GETFL => Some(
                    of.flags.load(Ordering::Relaxed)
                        & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_CLOEXEC),
                ),
                libc::F_SETFL => {
                    let keep = of.flags.load(Ordering::Relaxed) & !(libc::O_APPEND | libc::O_NONBLOCK);
                    of.flags.store(keep | (arg as c_int & (libc::O_APPEND | libc::O_NONBLOCK)), Ordering::Relaxed);
                    Some(0)
                }
                libc::F_SETLK | libc::F_SETLKW | libc::F_OFD_SETLK | libc::F_OFD_SETLKW => Some(0),
                libc::F_GETLK | libc::F_OFD_GETLK => {
                    // SAFETY: libc's contract: arg points to a struct flock.
                    unsafe { (*(arg as *mut libc::flock)).l_type = libc::F_UNLCK as i16 };
                    Some(0)
                }
                _ => None, // F_GETFD, F_SETFD, F_DUPFD...: on the placeholder, below
            }
        })
        .flatten();
        if let Some(v) = r {
            return v;
        }
        if cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC {
            // SAFETY: forwarding; the new number is then bound to the same open file.
            let n = unsafe { real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int)(fd, cmd, arg) };
            if n >= 0 {
                return guarded(|| dup_into(fd, n)).unwrap_or(n);
            }
            return n;
        }
    }
    // SAFETY: forwarding.
    unsafe { real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int)(fd, cmd, arg) }
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: libc::c_ulong) -> c_int {
    // SAFETY: same contract.
    unsafe { fcntl(fd, cmd, arg) }
}

#[no_mangle]
pub unsafe extern "C" fn flock(fd: c_int, op: c_int) -> c_int {
    if ours(fd) {
        return 0; // one process owns the image: no other holder to conflict with
    }
    // SAFETY: forwarding.
    unsafe { real!(flock: fn(c_int, c_int) -> c_int)(fd, op) }
}

// ---------------------------------------------------------------------------------------
// stat family.

fn fill_stat(m: &Metadata, st: *mut libc::stat) {
    // SAFETY: libc's contract: st points to a struct stat.
    let st = unsafe { &mut *st };
    // SAFETY: struct stat is plain data; all-zero is valid.
    *st = unsafe { std::mem::zeroed() };
    st.st_dev = 0x4853; // "HS"
    st.st_ino = m.ino.get();
    st.st_mode = m.mode();
    st.st_rdev = m.rdev;
    st.st_nlink = m.nlink as _;
    st.st_uid = m.uid;
    st.st_gid = m.gid;
    st.st_size = m.size as i64;
    st.st_blksize = 4096;
    st.st_blocks = m.st_blocks() as i64;
    st.st_atime = m.atime_ns.div_euclid(1_000_000_000);
    st.st_atime_nsec = m.atime_ns.rem_euclid(1_000_000_000);
    st.st_mtime = m.mtime_ns.div_euclid(1_000_000_000);
    st.st_mtime_nsec = m.mtime_ns.rem_euclid(1_000_000_000);
    st.st_ctime = m.ctime_ns.div_euclid(1_000_000_000);
    st.st_ctime_nsec = m.ctime_ns.rem_euclid(1_000_000_000);
}

fn stat_path(p: &Path, follow: bool, st: *mut libc::stat) -> c_int {
    let s = shim();
    let r = s.fs().and_then(|fs| {
        let ino = if follow { fs.resolve(p) } else { fs.resolve_nofollow(p) };
        ino.and_then(|i| fs.getattr(i)).map_err(|e| e.errno())
    });
    ret_stat(r, st)
}

fn stat_fd(fd: c_int, st: *mut libc::stat) -> c_int {
    let s = shim();
    let r =
        s.file(fd).ok_or(libc::EBADF).and_then(|of| s.fs().and_then(|fs| fs.getattr(of.ino).map_err(|e| e.errno())));
    ret_stat(r, st)
}

/// Fills `st` and returns 0, or sets errno and returns -1.
fn ret_stat(r: Result<Metadata, c_int>, st: *mut libc::stat) -> c_int {
    match r {
        Ok(m) => {
            fill_stat(&m, st);
            0
        }
        Err(e) => fail(e),
    }
}

macro_rules! stat_fns {
    ($name:ident, $follow:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, st: *mut libc::stat) -> c_int {
            if let Some(Some(p)) = guarded(|| fs_path(path)) {
                return guarded(|| stat_path(&p, $follow, st)).unwrap_or(-1);
            }
            // SAFETY: forwarding.
            unsafe { real!($name: fn(*const c_char, *mut libc::stat) -> c_int)(path, st) }
        }
    };
}
stat_fns!(stat, true);
stat_fns!(stat64, true);
stat_fns!(lstat, false);
stat_fns!(lstat64, false);

#[no_mangle]
pub unsafe extern "C" fn fstat(fd: c_int, st: *mut libc::stat) -> c_int {
    if ours(fd) {
        return guarded(|| stat_fd(fd, st)).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fstat: fn(c_int, *mut libc::stat) -> c_int)(fd, st) }
}

#[no_mangle]
pub unsafe extern "C" fn fstat64(fd: c_int, st: *mut libc::stat) -> c_int {
    if ours(fd) {
        return guarded(|| stat_fd(fd, st)).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fstat64: fn(c_int, *mut libc::stat) -> c_int)(fd, st) }
}

fn fstatat_impl(dirfd: c_int, path: *const c_char, st: *mut libc::stat, flags: c_int) -> Option<c_int> {
    // SAFETY: libc's contract.
    let empty = !path.is_null() && unsafe { *path } == 0;
    if empty && flags & libc::AT_EMPTY_PATH != 0 && ours(dirfd) {
        return guarded(|| stat_fd(dirfd, st));
    }
    let p = guarded(|| fs_path_at(dirfd, path)).flatten()?;
    guarded(|| stat_path(&p, flags & libc::AT_SYMLINK_NOFOLLOW == 0, st))
}

#[no_mangle]
pub unsafe extern "C" fn fstatat(dirfd: c_int, path: *const c_char, st: *mut libc::stat, flags: c_int) -> c_int {
    if let Some(r) = fstatat_impl(dirfd, path, st, flags) {
        return r;
    }
    // SAFETY: forwarding.
    unsafe { real!(fstatat: fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int)(dirfd, path, st, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn fstatat64(dirfd: c_int, path: *const c_char, st: *mut libc::stat, flags: c_int) -> c_int {
    if let Some(r) = fstatat_impl(dirfd, path, st, flags) {
        return r;
    }
    // SAFETY: forwarding.
    unsafe { real!(fstatat64: fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int)(dirfd, path, st, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    stx: *mut libc::statx,
) -> c_int {
    // SAFETY: struct stat is plain data.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if let Some(r) = fstatat_impl(dirfd, path, &mut st, flags) {
        if r == 0 {
            // SAFETY: libc's contract: stx points to a struct statx.
            let x = unsafe { &mut *stx };
            // SAFETY: plain data.
            *x = unsafe { std::mem::zeroed() };
            x.stx_mask = libc::STATX_BASIC_STATS;
            x.stx_blksize = st.st_blksize as u32;
            x.stx_nlink = st.st_nlink as u32;
            x.stx_uid = st.st_uid;
            x.stx_gid = st.st_gid;
            x.stx_mode = st.st_mode as u16;
            x.stx_ino = st.st_ino;
            x.stx_size = st.st_size as u64;
            x.stx_blocks = st.st_blocks as u64;
            x.stx_atime.tv_sec = st.st_atime;
            x.stx_atime.tv_nsec = st.st_atime_nsec as u32;
            x.stx_mtime.tv_sec = st.st_mtime;
            x.stx_mtime.tv_nsec = st.st_mtime_nsec as u32;
            x.stx_ctime.tv_sec = st.st_ctime;
            x.stx_ctime.tv_nsec = st.st_ctime_nsec as u32;
            x.stx_dev_major = 0;
            x.stx_dev_minor = 0x4853;
            x.stx_rdev_major = libc::major(st.st_rdev);
            x.stx_rdev_minor = libc::minor(st.st_rdev);
        }
        return r;
    }
    // SAFETY: forwarding.
    unsafe {
        real!(statx: fn(c_int, *const c_char, c_int, c_uint, *mut libc::statx) -> c_int)(dirfd, path, flags, mask, stx)
    }
}

/// Whether the process (by its effective ids) may access `m` as `mode` asks (R_OK, W_OK,
/// X_OK), as the kernel would: root may read and write anything, and execute anything with
/// some execute bit or a directory.
fn permitted(m: &Metadata, mode: c_int) -> bool {
    // SAFETY: these have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let want = (mode & (libc::R_OK | libc::W_OK | libc::X_OK)) as u32;
    if uid == 0 {
        return want & libc::X_OK as u32 == 0 || m.is_dir() || m.perm & 0o111 != 0;
    }
    let bits = if m.uid == uid {
        (m.perm >> 6) & 7
    } else if m.gid == gid || in_supplementary_groups(m.gid) {
        (m.perm >> 3) & 7
    } else {
        m.perm & 7
    };
    bits & want == want
}

fn in_supplementary_groups(gid: u32) -> bool {
    let mut groups = [0 as libc::gid_t; 256];
    // SAFETY: the buffer holds 256 entries.
    let n = unsafe { libc::getgroups(groups.len() as c_int, groups.as_mut_ptr()) };
    n > 0 && groups[..n as usize].contains(&gid)
}

/// access() and friends for our paths: existence, then the permission bits.
fn access_ours(path: *const c_char, mode: c_int) -> Option<c_int> {
    path_op(path, |fs, p| {
        let m = fs.metadata(p)?;
        if mode != libc::F_OK && !permitted(&m, mode) {
            return Err(Error::Access);
        }
        Ok(())
    })
    .map(ret0)
}

#[no_mangle]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    if let Some(r) = access_ours(path, mode) {
        return r;
    }
    // SAFETY: forwarding.
    unsafe { real!(access: fn(*const c_char, c_int) -> c_int)(path, mode) }
}

/// glibc implements euidaccess with an internal stat that no preload sees.
#[no_mangle]
pub unsafe extern "C" fn euidaccess(path: *const c_char, mode: c_int) -> c_int {
    if let Some(r) = access_ours(path, mode) {
        return r;
    }
    // SAFETY: forwarding.
    unsafe { real!(euidaccess: fn(*const c_char, c_int) -> c_int)(path, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn eaccess(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: same contract.
    unsafe { euidaccess(path, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn faccessat(dirfd: c_int, path: *const c_char, mode: c_int, flags: c_int) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path_at(dirfd, path)) {
        return guarded(|| {
            ret0(shim().fs().and_then(|fs| {
                let m = fs.metadata(&p).map_err(|e| e.errno())?;
                if mode != libc::F_OK && !permitted(&m, mode) {
                    return Err(libc::EACCES);
                }
                Ok(())
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(faccessat: fn(c_int, *const c_char, c_int, c_int) -> c_int)(dirfd, path, mode, flags) }
}

// ---------------------------------------------------------------------------------------
// Namespace.

#[no_mangle]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    if let Some(r) = path_op(path, |fs, p| fs.remove_file(p)) {
        return ret0(r);
    }
    // SAFETY: forwarding.
    unsafe { real!(unlink: fn(*const c_char) -> c_int)(path) }
}

#[no_mangle]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path_at(dirfd, path)) {
        return guarded(|| {
            ret0(shim().fs().and_then(|fs| {
                if flags & libc::AT_REMOVEDIR != 0 { fs.remove_dir(&p) } else { fs.remove_file(&p) }
                    .map_err(|e| e.errno())
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(unlinkat: fn(c_int, *const c_char, c_int) -> c_int)(dirfd, path, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    if let Some(r) = path_op(path, |fs, p| fs.remove_dir(p)) {
        return ret0(r);
    }
    // SAFETY: forwarding.
    unsafe { real!(rmdir: fn(*const c_char) -> c_int)(path) }
}

#[no_mangle]
pub unsafe extern "C" fn mkdir(path: *const c_char, mode: mode_t) -> c_int {
    if let Some(r) = path_op(path, |fs, p| fs.create_dir(p, mode & 0o7777 & !process_umask()).map(|_| ())) {
        return ret0(r);
    }
    // SAFETY: forwarding.
    unsafe { real!(mkdir: fn(*const c_char, mode_t) -> c_int)(path, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn mkdirat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path_at(dirfd, path)) {
        return guarded(|| {
            ret0(
                shim().fs().and_then(|fs| {
                    fs.create_dir(&p, mode & 0o7777 & !process_umask()).map(|_| ()).map_err(|e| e.errno())
                }),
            )
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(mkdirat: fn(c_int, *const c_char, mode_t) -> c_int)(dirfd, path, mode) }
}

fn rename_impl(from: Option<PathBuf>, to: Option<PathBuf>, mode: RenameMode) -> Option<c_int> {
    match (from, to) {
        (None, None) => None,
        (Some(a), Some(b)) => {
            guarded(|| ret0(shim().fs().and_then(|fs| fs.rename_with(&a, &b, mode).map_err(|e| e.errno()))))
        }
        _ => Some(fail(libc::EXDEV)), // across the prefix boundary
    }
}

#[no_mangle]
pub unsafe extern "C" fn rename(from: *const c_char, to: *const c_char) -> c_int {
    let paths = guarded(|| (fs_path(from), fs_path(to)));
    if let Some((a, b)) = paths {
        if let Some(r) = rename_impl(a, b, RenameMode::Replace) {
            return r;
        }
    }
    // SAFETY: forwarding.
    unsafe { real!(rename: fn(*const c_char, *const c_char) -> c_int)(from, to) }
}

#[no_mangle]
pub unsafe extern "C" fn renameat(fd1: c_int, from: *const c_char, fd2: c_int, to: *const c_char) -> c_int {
    let paths = guarded(|| (fs_path_at(fd1, from), fs_path_at(fd2, to)));
    if let Some((a, b)) = paths {
        if let Some(r) = rename_impl(a, b, RenameMode::Replace) {
            return r;
        }
    }
    // SAFETY: forwarding.
    unsafe { real!(renameat: fn(c_int, *const c_char, c_int, *const c_char) -> c_int)(fd1, from, fd2, to) }
}

#[no_mangle]
pub unsafe extern "C" fn renameat2(
    fd1: c_int,
    from: *const c_char,
    fd2: c_int,
    to: *const c_char,
    flags: c_uint,
) -> c_int {
    let mode = if flags & libc::RENAME_EXCHANGE != 0 {
        RenameMode::Exchange
    } else if flags & libc::RENAME_NOREPLACE != 0 {
        RenameMode::NoReplace
    } else {
        RenameMode::Replace
    };
    let paths = guarded(|| (fs_path_at(fd1, from), fs_path_at(fd2, to)));
    if let Some((a, b)) = paths {
        if let Some(r) = rename_impl(a, b, mode) {
            return r;
        }
    }
    // SAFETY: forwarding.
    unsafe {
        real!(renameat2: fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int)(fd1, from, fd2, to, flags)
    }
}

#[no_mangle]
pub unsafe extern "C" fn chmod(path: *const c_char, mode: mode_t) -> c_int {
    if let Some(r) = path_op(path, |fs, p| fs.set_permissions(p, mode & 0o7777)) {
        return ret0(r);
    }
    // SAFETY: forwarding.
    unsafe { real!(chmod: fn(*const c_char, mode_t) -> c_int)(path, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn fchmod(fd: c_int, mode: mode_t) -> c_int {
    if ours(fd) {
        return guarded(|| {
            let s = shim();
            ret0(s.file(fd).ok_or(libc::EBADF).and_then(|of| {
                s.fs().and_then(|fs| {
                    fs.setattr(of.ino, &SetAttr { perm: Some(mode & 0o7777), ..Default::default() })
                        .map(|_| ())
                        .map_err(|e| e.errno())
                })
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fchmod: fn(c_int, mode_t) -> c_int)(fd, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn utimensat(
    dirfd: c_int,
    path: *const c_char,
    times: *const libc::timespec,
    flags: c_int,
) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path_at(dirfd, path)) {
        let t = |i: usize| -> Option<SetTime> {
            if times.is_null() {
                return Some(SetTime::Now);
            }
            // SAFETY: libc's contract: two timespecs.
            let ts = unsafe { *times.add(i) };
            match ts.tv_nsec {
                libc::UTIME_OMIT => None,
                libc::UTIME_NOW => Some(SetTime::Now),
                n => Some(SetTime::At(ts.tv_sec * 1_000_000_000 + n)),
            }
        };
        let (a, m) = (t(0), t(1));
        return guarded(|| {
            ret0(shim().fs().and_then(|fs| {
                let ino = if flags & libc::AT_SYMLINK_NOFOLLOW != 0 { fs.resolve_nofollow(&p) } else { fs.resolve(&p) };
                ino.and_then(|i| fs.setattr(i, &SetAttr { atime: a, mtime: m, ..Default::default() }))
                    .map(|_| ())
                    .map_err(|e| e.errno())
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe {
        real!(utimensat: fn(c_int, *const c_char, *const libc::timespec, c_int) -> c_int)(dirfd, path, times, flags)
    }
}

#[no_mangle]
pub unsafe extern "C" fn symlink(target: *const c_char, link: *const c_char) -> c_int {
    if let Some(r) = path_op(link, |fs, p| {
        // SAFETY: libc's contract.
        let t = unsafe { CStr::from_ptr(target) }.to_bytes();
        fs.symlink(Path::new(std::ffi::OsStr::from_bytes(t)), p)
    }) {
        return ret0(r);
    }
    // SAFETY: forwarding.
    unsafe { real!(symlink: fn(*const c_char, *const c_char) -> c_int)(target, link) }
}

#[no_mangle]
pub unsafe extern "C" fn link(from: *const c_char, to: *const c_char) -> c_int {
    let paths = guarded(|| (fs_path(from), fs_path(to)));
    match paths {
        Some((Some(a), Some(b))) => {
            return guarded(|| ret0(shim().fs().and_then(|fs| fs.hard_link(&a, &b).map_err(|e| e.errno()))))
                .unwrap_or(-1)
        }
        Some((Some(_), None)) | Some((None, Some(_))) => return fail(libc::EXDEV),
        _ => {}
    }
    // SAFETY: forwarding.
    unsafe { real!(link: fn(*const c_char, *const c_char) -> c_int)(from, to) }
}

#[no_mangle]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t {
    if let Some(r) = path_op(path, |fs, p| fs.read_link(p)) {
        return match r {
            Ok(t) => {
                let b = t.as_os_str().as_bytes();
                let n = b.len().min(size);
                // SAFETY: libc's contract: buf holds size bytes.
                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), buf as *mut u8, n) };
                n as ssize_t
            }
            Err(e) => fail(e),
        };
    }
    // SAFETY: forwarding.
    unsafe { real!(readlink: fn(*const c_char, *mut c_char, size_t) -> ssize_t)(path, buf, size) }
}

// ---------------------------------------------------------------------------------------
// Directories.

pub struct DirStream {
    entries: Vec<(Ino, FileType, CString)>,
    next: usize,
    fd: c_int,
    ent: libc::dirent64,
}

fn open_dir_stream(path: &Path, fd: c_int) -> Result<*mut libc::DIR, c_int> {
    let s = shim();
    let fs = s.fs()?;
    let ino = fs.resolve(path).map_err(|e| e.errno())?;
    let md = fs.getattr(ino).map_err(|e| e.errno())?;
    if !md.is_dir() {
        return Err(libc::ENOTDIR);
    }
    let parent = fs.parent_of(ino).map_err(|e| e.errno())?;
    let mut entries =
        vec![(ino, FileType::Directory, c".".to_owned()), (parent, FileType::Directory, c"..".to_owned())];
    let mut cookie = 0;
    loop {
        let batch = fs.readdir_ino(ino, cookie, 1024).map_err(|e| e.errno())?;
        let Some(last) = batch.last() else { break };
        cookie = last.cookie;
        for e in batch {
            entries.push((e.ino, e.file_type, CString::new(e.name).map_err(|_| libc::EIO)?));
        }
    }
    // SAFETY: dirent64 is plain data.
    let ds = Box::new(DirStream { entries, next: 0, fd, ent: unsafe { std::mem::zeroed() } });
    let ptr = &*ds as *const DirStream as usize;
    s.dirs.lock().insert(ptr, ds);
    Ok(ptr as *mut libc::DIR)
}

fn is_our_dir(d: *mut libc::DIR) -> bool {
    !IN_SHIM.with(|g| g.get()) && SHIM.get().is_some_and(|s| s.dirs.lock().contains_key(&(d as usize)))
}

#[no_mangle]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut libc::DIR {
    if let Some(Some(p)) = guarded(|| fs_path(path)) {
        return guarded(|| match open_dir_stream(&p, -1) {
            Ok(d) => d,
            Err(e) => {
                set_errno(e);
                std::ptr::null_mut()
            }
        })
        .unwrap_or(std::ptr::null_mut());
    }
    // SAFETY: forwarding.
    unsafe { real!(opendir: fn(*const c_char) -> *mut libc::DIR)(path) }
}

#[no_mangle]
pub unsafe extern "C" fn fdopendir(fd: c_int) -> *mut libc::DIR {
    if ours(fd) {
        return guarded(|| {
            let r = shim().file(fd).ok_or(libc::EBADF).and_then(|of| open_dir_stream(&of.fs_path, fd));
            match r {
                Ok(d) => d,
                Err(e) => {
                    set_errno(e);
                    std::ptr::null_mut()
                }
            }
        })
        .unwrap_or(std::ptr::null_mut());
    }
    // SAFETY: forwarding.
    unsafe { real!(fdopendir: fn(c_int) -> *mut libc::DIR)(fd) }
}

fn next_entry(d: *mut libc::DIR) -> *mut libc::dirent64 {
    let s = shim();
    let mut dirs = s.dirs.lock();
    let Some(ds) = dirs.get_mut(&(d as usize)) else { return std::ptr::null_mut() };
    let Some((ino, ft, name)) = ds.entries.get(ds.next) else { return std::ptr::null_mut() };
    ds.next += 1;
    ds.ent.d_ino = ino.get();
    ds.ent.d_off = ds.next as i64;
    ds.ent.d_reclen = std::mem::size_of::<libc::dirent64>() as u16;
    ds.ent.d_type = ft.to_u8();
    let b = name.as_bytes_with_nul();
    let n = b.len().min(ds.ent.d_name.len());
    for (dst, &src) in ds.ent.d_name[..n].iter_mut().zip(b) {
        *dst = src as c_char;
    }
    &mut ds.ent as *mut libc::dirent64
}

#[no_mangle]
pub unsafe extern "C" fn readdir(d: *mut libc::DIR) -> *mut libc::dirent {
    if is_our_dir(d) {
        return guarded(|| next_entry(d) as *mut libc::dirent).unwrap_or(std::ptr::null_mut());
    }
    // SAFETY: forwarding.
    unsafe { real!(readdir: fn(*mut libc::DIR) -> *mut libc::dirent)(d) }
}

#[no_mangle]
pub unsafe extern "C" fn readdir64(d: *mut libc::DIR) -> *mut libc::dirent64 {
    if is_our_dir(d) {
        return guarded(|| next_entry(d)).unwrap_or(std::ptr::null_mut());
    }
    // SAFETY: forwarding.
    unsafe { real!(readdir64: fn(*mut libc::DIR) -> *mut libc::dirent64)(d) }
}

#[no_mangle]
pub unsafe extern "C" fn closedir(d: *mut libc::DIR) -> c_int {
    if is_our_dir(d) {
        let fd = guarded(|| shim().dirs.lock().remove(&(d as usize)).map(|ds| ds.fd)).flatten();
        if let Some(fd) = fd {
            if fd >= 0 {
                // SAFETY: closing the descriptor the stream owned (fdopendir).
                unsafe { close(fd) };
            }
        }
        return 0;
    }
    // SAFETY: forwarding.
    unsafe { real!(closedir: fn(*mut libc::DIR) -> c_int)(d) }
}

#[no_mangle]
pub unsafe extern "C" fn rewinddir(d: *mut libc::DIR) {
    if is_our_dir(d) {
        guarded(|| {
            if let Some(ds) = shim().dirs.lock().get_mut(&(d as usize)) {
                ds.next = 0;
            }
        });
        return;
    }
    // SAFETY: forwarding.
    unsafe { real!(rewinddir: fn(*mut libc::DIR) -> ())(d) }
}

#[no_mangle]
pub unsafe extern "C" fn dirfd(d: *mut libc::DIR) -> c_int {
    if is_our_dir(d) {
        return guarded(|| shim().dirs.lock().get(&(d as usize)).map(|ds| ds.fd).unwrap_or(-1)).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(dirfd: fn(*mut libc::DIR) -> c_int)(d) }
}

// ---------------------------------------------------------------------------------------
// stdio: FILE streams over HashFS files through fopencookie, so every stdio function of
// glibc works on them.

#[repr(C)]
struct CookieIo {
    read: Option<unsafe extern "C" fn(*mut c_void, *mut c_char, size_t) -> ssize_t>,
    write: Option<unsafe extern "C" fn(*mut c_void, *const c_char, size_t) -> ssize_t>,
    seek: Option<unsafe extern "C" fn(*mut c_void, *mut i64, c_int) -> c_int>,
    close: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

extern "C" {
    fn fopencookie(cookie: *mut c_void, mode: *const c_char, io: CookieIo) -> *mut libc::FILE;
}

unsafe extern "C" fn cookie_read(c: *mut c_void, buf: *mut c_char, n: size_t) -> ssize_t {
    // SAFETY: the cookie is the descriptor we stored.
    unsafe { read(c as usize as c_int, buf as *mut c_void, n) }
}
unsafe extern "C" fn cookie_write(c: *mut c_void, buf: *const c_char, n: size_t) -> ssize_t {
    // SAFETY: as above.
    unsafe { write(c as usize as c_int, buf as *const c_void, n) }
}
unsafe extern "C" fn cookie_seek(c: *mut c_void, off: *mut i64, whence: c_int) -> c_int {
    // SAFETY: as above; off is glibc's in/out offset.
    let r = unsafe { lseek(c as usize as c_int, *off, whence) };
    if r < 0 {
        return -1;
    }
    // SAFETY: as above.
    unsafe { *off = r };
    0
}
unsafe extern "C" fn cookie_close(c: *mut c_void) -> c_int {
    let fd = c as usize as c_int;
    STREAMS.lock().retain(|(_, d)| *d != fd);
    // SAFETY: as above.
    unsafe { close(fd) }
}

fn mode_flags(mode: &[u8]) -> Option<c_int> {
    let plus = mode.contains(&b'+');
    let base = match mode.first()? {
        b'r' => {
            if plus {
                libc::O_RDWR
            } else {
                libc::O_RDONLY
            }
        }
        b'w' => (if plus { libc::O_RDWR } else { libc::O_WRONLY }) | libc::O_CREAT | libc::O_TRUNC,
        b'a' => (if plus { libc::O_RDWR } else { libc::O_WRONLY }) | libc::O_CREAT | libc::O_APPEND,
        _ => return None,
    };
    let x = if mode.contains(&b'x') { libc::O_EXCL } else { 0 };
    let e = if mode.contains(&b'e') { libc::O_CLOEXEC } else { 0 };
    Some(base | x | e)
}

/// Streams made by `stream_for`, with their descriptors (fileno of a cookie stream is -1 in
/// glibc; programs such as sort fstat it).
static STREAMS: Mutex<Vec<(usize, c_int)>> = Mutex::new(Vec::new());

fn stream_for(fd: c_int, mode: *const c_char) -> *mut libc::FILE {
    let io = CookieIo {
        read: Some(cookie_read),
        write: Some(cookie_write),
        seek: Some(cookie_seek),
        close: Some(cookie_close),
    };
    // SAFETY: the cookie is a descriptor number; glibc calls our functions with it.
    let f = unsafe { fopencookie(fd as usize as *mut c_void, mode, io) };
    if !f.is_null() {
        STREAMS.lock().push((f as usize, fd));
    }
    f
}

fn stream_fd(f: *mut libc::FILE) -> Option<c_int> {
    if IN_SHIM.with(|g| g.get()) {
        return None;
    }
    STREAMS.lock().iter().find(|(p, _)| *p == f as usize).map(|(_, fd)| *fd)
}

#[no_mangle]
pub unsafe extern "C" fn fileno(f: *mut libc::FILE) -> c_int {
    if let Some(fd) = stream_fd(f) {
        return fd;
    }
    // SAFETY: forwarding.
    unsafe { real!(fileno: fn(*mut libc::FILE) -> c_int)(f) }
}

#[no_mangle]
pub unsafe extern "C" fn fileno_unlocked(f: *mut libc::FILE) -> c_int {
    if let Some(fd) = stream_fd(f) {
        return fd;
    }
    // SAFETY: forwarding.
    unsafe { real!(fileno_unlocked: fn(*mut libc::FILE) -> c_int)(f) }
}

#[no_mangle]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    if let Some(Some(p)) = guarded(|| fs_path(path)) {
        // SAFETY: libc's contract.
        let Some(flags) = mode_flags(unsafe { CStr::from_ptr(mode) }.to_bytes()) else {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        };
        let fd = guarded(|| do_open(&p, flags, 0o666)).unwrap_or(-1);
        if fd < 0 {
            return std::ptr::null_mut();
        }
        let f = stream_for(fd, mode);
        if f.is_null() {
            // SAFETY: our descriptor.
            unsafe { close(fd) };
        }
        return f;
    }
    // SAFETY: forwarding.
    unsafe { real!(fopen: fn(*const c_char, *const c_char) -> *mut libc::FILE)(path, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    // SAFETY: same contract.
    unsafe { fopen(path, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn fdopen(fd: c_int, mode: *const c_char) -> *mut libc::FILE {
    if ours(fd) {
        return stream_for(fd, mode);
    }
    // SAFETY: forwarding.
    unsafe { real!(fdopen: fn(c_int, *const c_char) -> *mut libc::FILE)(fd, mode) }
}

// ---------------------------------------------------------------------------------------
// statfs / statvfs.

fn fill_statvfs(out: *mut libc::statvfs) -> c_int {
    let st = match shim().fs() {
        Ok(fs) => fs.statfs(),
        Err(e) => return fail(e),
    };
    // SAFETY: libc's contract: out points to a struct statvfs (plain data).
    unsafe {
        *out = std::mem::zeroed();
        (*out).f_bsize = st.block_bytes;
        (*out).f_frsize = st.block_bytes;
        (*out).f_blocks = st.blocks_total;
        (*out).f_bfree = st.blocks_free;
        (*out).f_bavail = st.blocks_free;
        (*out).f_files = st.inodes_total;
        (*out).f_ffree = st.inodes_free;
        (*out).f_favail = st.inodes_free;
        (*out).f_namemax = st.name_max;
    }
    0
}

fn fill_statfs(out: *mut libc::statfs) -> c_int {
    let st = match shim().fs() {
        Ok(fs) => fs.statfs(),
        Err(e) => return fail(e),
    };
    // SAFETY: libc's contract: out points to a struct statfs (plain data).
    unsafe {
        *out = std::mem::zeroed();
        (*out).f_type = 0x4853_4653; // "HSFS"
        (*out).f_bsize = st.block_bytes as _;
        (*out).f_frsize = st.block_bytes as _;
        (*out).f_blocks = st.blocks_total;
        (*out).f_bfree = st.blocks_free;
        (*out).f_bavail = st.blocks_free;
        (*out).f_files = st.inodes_total;
        (*out).f_ffree = st.inodes_free;
        (*out).f_namelen = st.name_max as _;
    }
    0
}

macro_rules! statfs_fns {
    ($path_fn:ident, $fd_fn:ident, $ty:ty, $fill:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $path_fn(path: *const c_char, out: *mut $ty) -> c_int {
            if guarded(|| fs_path(path)).flatten().is_some() {
                return guarded(|| $fill(out)).unwrap_or(-1);
            }
            // SAFETY: forwarding.
            unsafe { real!($path_fn: fn(*const c_char, *mut $ty) -> c_int)(path, out) }
        }
        #[no_mangle]
        pub unsafe extern "C" fn $fd_fn(fd: c_int, out: *mut $ty) -> c_int {
            if ours(fd) {
                return guarded(|| $fill(out)).unwrap_or(-1);
            }
            // SAFETY: forwarding.
            unsafe { real!($fd_fn: fn(c_int, *mut $ty) -> c_int)(fd, out) }
        }
    };
}
statfs_fns!(statfs, fstatfs, libc::statfs, fill_statfs);
statfs_fns!(statfs64, fstatfs64, libc::statfs, fill_statfs);
statfs_fns!(statvfs, fstatvfs, libc::statvfs, fill_statvfs);
statfs_fns!(statvfs64, fstatvfs64, libc::statvfs, fill_statvfs);

// ---------------------------------------------------------------------------------------
// The rest, by concern (after the macros above, which they use).

mod copy;
mod cwd;
mod meta;
mod mmap;
mod vector;
mod xattr;
pub use copy::*;
pub use cwd::*;
pub use meta::*;
use mmap::has_shared_maps;
pub use mmap::*;
pub use vector::*;
pub use xattr::*;
