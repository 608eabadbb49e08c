//! Descriptors: the open family, close, the dup family, fcntl and flock. Every open is
//! `openat` here (glibc's `open` is `openat(AT_FDCWD, ...)` too); `close`, `dup2` and
//! `dup3` reach the backend whatever the descriptor (the one replaced may be its, or a
//! standard descriptor it redirected).

use super::route;
use crate::call::{c_str, serve, CResult, Next};
use crate::{forward, Backend, FcntlArg};
use libc::{c_char, c_int, c_uint, c_ulong, mode_t};

pub unsafe fn openat<B: Backend>(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    let raw =
        |flags: c_int| forward!(openat(dirfd, path, flags, mode): fn(c_int, *const c_char, c_int, c_uint) -> c_int);
    // SAFETY: openat's contract: path is a NUL-terminated string.
    if let Some(p) = unsafe { c_str(path) } {
        let next = |flags| c_int::from_c(raw(flags));
        if let Some(r) = serve(|| B::open(dirfd, p, flags, mode as mode_t, Next(&next))) {
            return c_int::to_c(r);
        }
    }
    raw(flags)
}

pub unsafe fn open<B: Backend>(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: open's contract is openat's with AT_FDCWD.
    unsafe { openat::<B>(libc::AT_FDCWD, path, flags, mode) }
}

/// `__open_2`: `_FORTIFY_SOURCE`'s open without O_CREAT, so without a mode.
pub unsafe fn open_2<B: Backend>(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as open.
    unsafe { openat::<B>(libc::AT_FDCWD, path, flags, 0) }
}

/// `__openat_2`, as [`open_2`].
pub unsafe fn openat_2<B: Backend>(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as openat.
    unsafe { openat::<B>(dirfd, path, flags, 0) }
}

pub unsafe fn creat<B: Backend>(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: creat is open with these flags.
    unsafe { openat::<B>(libc::AT_FDCWD, path, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, mode) }
}

pub unsafe fn close<B: Backend>(fd: c_int) -> c_int {
    route::<()>(true, |next| B::close(fd, next), || forward!(close(fd): fn(c_int) -> c_int))
}

pub unsafe fn close_range<B: Backend>(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    route::<()>(
        true,
        |next| B::close_range(first, last, flags, next),
        || forward!(close_range(first, last, flags): fn(c_uint, c_uint, c_int) -> c_int),
    )
}

pub unsafe fn dup<B: Backend>(fd: c_int) -> c_int {
    route::<c_int>(B::claims(fd), |next| B::dup(fd, next), || forward!(dup(fd): fn(c_int) -> c_int))
}

pub unsafe fn dup2<B: Backend>(fd: c_int, newfd: c_int) -> c_int {
    route::<c_int>(true, |next| B::dup3(fd, newfd, None, next), || forward!(dup2(fd, newfd): fn(c_int, c_int) -> c_int))
}

pub unsafe fn dup3<B: Backend>(fd: c_int, newfd: c_int, flags: c_int) -> c_int {
    route::<c_int>(
        true,
        |next| B::dup3(fd, newfd, Some(flags), next),
        || forward!(dup3(fd, newfd, flags): fn(c_int, c_int, c_int) -> c_int),
    )
}

/// fcntl's third argument is variadic: declared here as one machine word, as the System V
/// x86-64 and AArch64 conventions pass it (a command that takes none never reads it).
pub unsafe fn fcntl<B: Backend>(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    let lock = matches!(
        cmd,
        libc::F_GETLK | libc::F_SETLK | libc::F_SETLKW | libc::F_OFD_GETLK | libc::F_OFD_SETLK | libc::F_OFD_SETLKW
    );
    route::<c_int>(
        B::claims(fd),
        |next| {
            let arg = if lock {
                let p = arg as *mut libc::flock;
                if p.is_null() {
                    return Some(Err(crate::Errno::FAULT));
                }
                // SAFETY: fcntl's contract for the lock commands: arg points to a struct flock.
                FcntlArg::Lock(unsafe { &mut *p })
            } else {
                FcntlArg::Word(arg)
            };
            B::fcntl(fd, cmd, arg, next)
        },
        || forward!(fcntl(fd, cmd, arg): fn(c_int, c_int, c_ulong) -> c_int),
    )
}

/// lockf(3): glibc's runs through its own internal fcntl, which no preload sees, so on a
/// descriptor the backend claims it is the record lock fcntl takes (a write lock of `len`
/// bytes from the offset, 0: to the end; F_TEST asks F_GETLK for a read lock and says
/// EACCES when another process holds one), as glibc builds it.
pub unsafe fn lockf<B: Backend>(fd: c_int, cmd: c_int, len: libc::off_t) -> c_int {
    const F_ULOCK: c_int = 0;
    const F_LOCK: c_int = 1;
    const F_TLOCK: c_int = 2;
    const F_TEST: c_int = 3;
    if !B::claims(fd) {
        return forward!(lockf(fd, cmd, len): fn(c_int, c_int, libc::off_t) -> c_int);
    }
    // SAFETY: a plain C struct, valid zeroed.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_whence = libc::SEEK_CUR as i16;
    l.l_len = len;
    let (typ, op) = match cmd {
        F_ULOCK => (libc::F_UNLCK, libc::F_SETLK),
        F_LOCK => (libc::F_WRLCK, libc::F_SETLKW),
        F_TLOCK => (libc::F_WRLCK, libc::F_SETLK),
        F_TEST => (libc::F_RDLCK, libc::F_GETLK),
        _ => {
            crate::set_errno(libc::EINVAL);
            return -1;
        }
    };
    l.l_type = typ as i16;
    // SAFETY: a lock command with a pointer to a struct flock that lives through the call.
    let r = unsafe { fcntl::<B>(fd, op, &mut l as *mut libc::flock as c_ulong) };
    if r < 0 || cmd != F_TEST {
        return r;
    }
    // SAFETY: no preconditions.
    if l.l_type == libc::F_UNLCK as i16 || l.l_pid == unsafe { libc::getpid() } {
        return 0;
    }
    crate::set_errno(libc::EACCES);
    -1
}

pub unsafe fn flock<B: Backend>(fd: c_int, op: c_int) -> c_int {
    route::<()>(B::claims(fd), |next| B::flock(fd, op, next), || forward!(flock(fd, op): fn(c_int, c_int) -> c_int))
}
