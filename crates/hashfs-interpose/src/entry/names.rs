//! Names: unlink, rmdir, mkdir, rename, link, symlink, readlink, mknod and mkfifo, and
//! truncate by path, each with its `*at` form. A call naming two paths reaches the
//! backend when both are strings; it judges each (one inside and one outside is EXDEV).
//! Each name forwards to libc's function of that name.

use super::route;
use crate::call::{bytes_mut, c_str};
use crate::{forward, Backend};
use libc::{c_char, c_int, c_uint, dev_t, mode_t, off_t, size_t, ssize_t};

pub unsafe fn unlinkat<B: Backend>(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: unlinkat's contract: path is a NUL-terminated string.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::unlink_at(dirfd, p?, flags, next),
        || forward!(unlinkat(dirfd, path, flags): fn(c_int, *const c_char, c_int) -> c_int),
    )
}

pub unsafe fn unlink<B: Backend>(path: *const c_char) -> c_int {
    // SAFETY: as unlinkat.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::unlink_at(libc::AT_FDCWD, p?, 0, next),
        || forward!(unlink(path): fn(*const c_char) -> c_int),
    )
}

pub unsafe fn rmdir<B: Backend>(path: *const c_char) -> c_int {
    // SAFETY: as unlinkat.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::unlink_at(libc::AT_FDCWD, p?, libc::AT_REMOVEDIR, next),
        || forward!(rmdir(path): fn(*const c_char) -> c_int),
    )
}

pub unsafe fn mkdirat<B: Backend>(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: mkdirat's contract: path is a NUL-terminated string.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::mkdir_at(dirfd, p?, mode, next),
        || forward!(mkdirat(dirfd, path, mode): fn(c_int, *const c_char, mode_t) -> c_int),
    )
}

pub unsafe fn mkdir<B: Backend>(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: as mkdirat.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::mkdir_at(libc::AT_FDCWD, p?, mode, next),
        || forward!(mkdir(path, mode): fn(*const c_char, mode_t) -> c_int),
    )
}

pub unsafe fn renameat2<B: Backend>(
    fd1: c_int,
    from: *const c_char,
    fd2: c_int,
    to: *const c_char,
    flags: c_uint,
) -> c_int {
    // SAFETY: renameat2's contract: both paths are NUL-terminated strings.
    let (a, b) = unsafe { (c_str(from), c_str(to)) };
    route::<()>(
        a.is_some() && b.is_some(),
        |next| B::rename_at(fd1, a?, fd2, b?, flags, next),
        || forward!(renameat2(fd1, from, fd2, to, flags): fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int),
    )
}

pub unsafe fn renameat<B: Backend>(fd1: c_int, from: *const c_char, fd2: c_int, to: *const c_char) -> c_int {
    // SAFETY: as renameat2.
    let (a, b) = unsafe { (c_str(from), c_str(to)) };
    route::<()>(
        a.is_some() && b.is_some(),
        |next| B::rename_at(fd1, a?, fd2, b?, 0, next),
        || forward!(renameat(fd1, from, fd2, to): fn(c_int, *const c_char, c_int, *const c_char) -> c_int),
    )
}

pub unsafe fn rename<B: Backend>(from: *const c_char, to: *const c_char) -> c_int {
    // SAFETY: as renameat2.
    let (a, b) = unsafe { (c_str(from), c_str(to)) };
    route::<()>(
        a.is_some() && b.is_some(),
        |next| B::rename_at(libc::AT_FDCWD, a?, libc::AT_FDCWD, b?, 0, next),
        || forward!(rename(from, to): fn(*const c_char, *const c_char) -> c_int),
    )
}

pub unsafe fn linkat<B: Backend>(
    fd1: c_int,
    from: *const c_char,
    fd2: c_int,
    to: *const c_char,
    flags: c_int,
) -> c_int {
    // SAFETY: linkat's contract: both paths are NUL-terminated strings.
    let (a, b) = unsafe { (c_str(from), c_str(to)) };
    route::<()>(
        a.is_some() && b.is_some(),
        |next| B::link_at(fd1, a?, fd2, b?, flags, next),
        || forward!(linkat(fd1, from, fd2, to, flags): fn(c_int, *const c_char, c_int, *const c_char, c_int) -> c_int),
    )
}

pub unsafe fn link<B: Backend>(from: *const c_char, to: *const c_char) -> c_int {
    // SAFETY: as linkat.
    let (a, b) = unsafe { (c_str(from), c_str(to)) };
    route::<()>(
        a.is_some() && b.is_some(),
        // link(2) does not follow a symbolic link it is given (Linux), as linkat without flags.
        |next| B::link_at(libc::AT_FDCWD, a?, libc::AT_FDCWD, b?, 0, next),
        || forward!(link(from, to): fn(*const c_char, *const c_char) -> c_int),
    )
}

pub unsafe fn symlinkat<B: Backend>(target: *const c_char, dirfd: c_int, path: *const c_char) -> c_int {
    // SAFETY: symlinkat's contract: both are NUL-terminated strings.
    let (t, p) = unsafe { (c_str(target), c_str(path)) };
    route::<()>(
        t.is_some() && p.is_some(),
        |next| B::symlink_at(t?, dirfd, p?, next),
        || forward!(symlinkat(target, dirfd, path): fn(*const c_char, c_int, *const c_char) -> c_int),
    )
}

pub unsafe fn symlink<B: Backend>(target: *const c_char, path: *const c_char) -> c_int {
    // SAFETY: as symlinkat.
    let (t, p) = unsafe { (c_str(target), c_str(path)) };
    route::<()>(
        t.is_some() && p.is_some(),
        |next| B::symlink_at(t?, libc::AT_FDCWD, p?, next),
        || forward!(symlink(target, path): fn(*const c_char, *const c_char) -> c_int),
    )
}

pub unsafe fn readlinkat<B: Backend>(dirfd: c_int, path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t {
    // SAFETY: readlinkat's contract: path is a NUL-terminated string, buf writable for size bytes.
    let p = unsafe { c_str(path) };
    route::<usize>(
        p.is_some(),
        // SAFETY: as above.
        |next| match unsafe { bytes_mut(buf.cast(), size) } {
            Ok(b) => B::readlink_at(dirfd, p?, b, next),
            Err(e) => Some(Err(e)),
        },
        || forward!(readlinkat(dirfd, path, buf, size): fn(c_int, *const c_char, *mut c_char, size_t) -> ssize_t),
    )
}

pub unsafe fn readlink<B: Backend>(path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t {
    // SAFETY: as readlinkat.
    let p = unsafe { c_str(path) };
    route::<usize>(
        p.is_some(),
        // SAFETY: as readlinkat.
        |next| match unsafe { bytes_mut(buf.cast(), size) } {
            Ok(b) => B::readlink_at(libc::AT_FDCWD, p?, b, next),
            Err(e) => Some(Err(e)),
        },
        || forward!(readlink(path, buf, size): fn(*const c_char, *mut c_char, size_t) -> ssize_t),
    )
}

pub unsafe fn mknodat<B: Backend>(dirfd: c_int, path: *const c_char, mode: mode_t, dev: dev_t) -> c_int {
    // SAFETY: mknodat's contract: path is a NUL-terminated string.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::mknod_at(dirfd, p?, mode, dev, next),
        || forward!(mknodat(dirfd, path, mode, dev): fn(c_int, *const c_char, mode_t, dev_t) -> c_int),
    )
}

pub unsafe fn mknod<B: Backend>(path: *const c_char, mode: mode_t, dev: dev_t) -> c_int {
    // SAFETY: as mknodat.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::mknod_at(libc::AT_FDCWD, p?, mode, dev, next),
        || forward!(mknod(path, mode, dev): fn(*const c_char, mode_t, dev_t) -> c_int),
    )
}

/// `mkfifoat`: mknodat of a FIFO (glibc's own definition).
pub unsafe fn mkfifoat<B: Backend>(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: as mknodat.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::mknod_at(dirfd, p?, libc::S_IFIFO | (mode & 0o7777), 0, next),
        || forward!(mkfifoat(dirfd, path, mode): fn(c_int, *const c_char, mode_t) -> c_int),
    )
}

pub unsafe fn mkfifo<B: Backend>(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: as mknodat.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::mknod_at(libc::AT_FDCWD, p?, libc::S_IFIFO | (mode & 0o7777), 0, next),
        || forward!(mkfifo(path, mode): fn(*const c_char, mode_t) -> c_int),
    )
}

pub unsafe fn truncate<B: Backend>(path: *const c_char, len: off_t) -> c_int {
    // SAFETY: truncate's contract: path is a NUL-terminated string.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::truncate(p?, len, next),
        || forward!(truncate(path, len): fn(*const c_char, off_t) -> c_int),
    )
}
