//! Descriptors: open, creat, close, dup and their placeholders.

use super::*;

pub(super) fn new_placeholder() -> c_int {
    let open = real!(open: fn(*const c_char, c_int, c_uint) -> c_int);
    // An O_PATH descriptor: every call the shim does not intercept (read, write, ioctl,
    // mmap, poll's IO, the *at calls with it as a directory...) fails with EBADF in the
    // kernel instead of acting on /dev/null.
    // SAFETY: a literal path.
    unsafe { open(c"/dev/null".as_ptr(), libc::O_PATH | libc::O_CLOEXEC, 0) }
}

pub(super) fn register(s: &Shim, of: Arc<OpenFile>, cloexec: bool) -> c_int {
    let fd = new_placeholder();
    if fd < 0 {
        return -1;
    }
    if !cloexec {
        let fcntl = real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int);
        // SAFETY: fd is ours.
        unsafe { fcntl(fd, libc::F_SETFD, 0) };
    }
    if fd as usize >= FdSet::LIMIT {
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
pub(super) fn process_umask() -> mode_t {
    // SAFETY: umask cannot fail; the mask is restored at once.
    unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    }
}

pub(super) fn do_open(path: &Path, flags: c_int, mode: mode_t) -> c_int {
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
            if fs.peek_attr(ino)?.is_symlink() {
                return Err(Error::Loop);
            }
            ino
        } else {
            fs.resolve(path)?
        };
        let md = fs.peek_attr(ino)?;
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
    let pump = if (0..=2).contains(&fd) { guarded(|| take_pump(fd)).flatten() } else { None };
    // SAFETY: closing the placeholder (or the caller's own descriptor).
    let r = unsafe { real!(close: fn(c_int) -> c_int)(fd) };
    settle_pump(pump, fd);
    r
}

pub(super) fn dup_into(old: c_int, newfd: c_int) -> c_int {
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
    // A standard descriptor that fed a file through a pump, replaced (a shell restoring
    // its stdout): the file gets what the pipe still holds before dup2 returns.
    let pump = if (0..=2).contains(&newfd) && fd != newfd { guarded(|| take_pump(newfd)).flatten() } else { None };
    // SAFETY: forwarding; the kernel makes newfd a copy of fd's placeholder.
    let n = unsafe { real!(dup2: fn(c_int, c_int) -> c_int)(fd, newfd) };
    settle_pump(pump, newfd);
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
