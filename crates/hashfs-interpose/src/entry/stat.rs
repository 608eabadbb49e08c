//! Attributes: the stat family (stat and lstat are `fstatat` here, as in glibc), statx,
//! and the access family (`faccessat`).

use super::{route, route_out};
use crate::call::c_str;
use crate::{forward, Backend};
use libc::{c_char, c_int, c_uint};

pub unsafe fn fstatat<B: Backend>(dirfd: c_int, path: *const c_char, st: *mut libc::stat, flags: c_int) -> c_int {
    // SAFETY: fstatat's contract: path is a NUL-terminated string.
    let p = unsafe { c_str(path) };
    route_out(
        p.is_some(),
        st,
        |next| B::stat_at(dirfd, p?, flags, next),
        |st| forward!(fstatat(dirfd, path, st, flags): fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int),
    )
}

pub unsafe fn stat<B: Backend>(path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: stat is fstatat in the working directory.
    unsafe { fstatat::<B>(libc::AT_FDCWD, path, st, 0) }
}

pub unsafe fn lstat<B: Backend>(path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: lstat is fstatat without following a last symbolic link.
    unsafe { fstatat::<B>(libc::AT_FDCWD, path, st, libc::AT_SYMLINK_NOFOLLOW) }
}

pub unsafe fn fstat<B: Backend>(fd: c_int, st: *mut libc::stat) -> c_int {
    route_out(
        B::claims_file(fd),
        st,
        |next| B::fstat(fd, next),
        |st| forward!(fstat(fd, st): fn(c_int, *mut libc::stat) -> c_int),
    )
}

pub unsafe fn statx<B: Backend>(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    stx: *mut libc::statx,
) -> c_int {
    // SAFETY: statx's contract: path is a NUL-terminated string.
    let p = unsafe { c_str(path) };
    route_out(
        p.is_some(),
        stx,
        |next| B::statx(dirfd, p?, flags, mask, next),
        |stx| forward!(statx(dirfd, path, flags, mask, stx): fn(c_int, *const c_char, c_int, c_uint, *mut libc::statx) -> c_int),
    )
}

pub unsafe fn faccessat<B: Backend>(dirfd: c_int, path: *const c_char, mode: c_int, flags: c_int) -> c_int {
    // SAFETY: faccessat's contract: path is a NUL-terminated string.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::access_at(dirfd, p?, mode, flags, next),
        || forward!(faccessat(dirfd, path, mode, flags): fn(c_int, *const c_char, c_int, c_int) -> c_int),
    )
}

pub unsafe fn access<B: Backend>(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: access is faccessat in the working directory.
    unsafe { faccessat::<B>(libc::AT_FDCWD, path, mode, 0) }
}

/// `euidaccess` and `eaccess`: by the effective ids.
pub unsafe fn euidaccess<B: Backend>(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: euidaccess is faccessat with AT_EACCESS.
    unsafe { faccessat::<B>(libc::AT_FDCWD, path, mode, libc::AT_EACCESS) }
}

/// glibc's versioned stat entry points (`__xstat` and kin, `ver` the layout's version:
/// 1 on x86-64, where it is `struct stat`), which programs built before glibc 2.33 still
/// call (Debian's GNU make among them): the calls above, as fstatat.
pub unsafe fn xstat<B: Backend>(_ver: c_int, path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: __xstat's contract is stat's.
    unsafe { fstatat::<B>(libc::AT_FDCWD, path, st, 0) }
}

pub unsafe fn lxstat<B: Backend>(_ver: c_int, path: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: __lxstat's contract is lstat's.
    unsafe { fstatat::<B>(libc::AT_FDCWD, path, st, libc::AT_SYMLINK_NOFOLLOW) }
}

pub unsafe fn fxstat<B: Backend>(_ver: c_int, fd: c_int, st: *mut libc::stat) -> c_int {
    // SAFETY: __fxstat's contract is fstat's.
    unsafe { fstat::<B>(fd, st) }
}

pub unsafe fn fxstatat<B: Backend>(
    _ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    st: *mut libc::stat,
    flags: c_int,
) -> c_int {
    // SAFETY: __fxstatat's contract is fstatat's.
    unsafe { fstatat::<B>(dirfd, path, st, flags) }
}
