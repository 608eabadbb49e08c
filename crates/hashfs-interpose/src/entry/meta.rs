//! Owners, permissions and times: chmod and chown with their `f` and `*at` forms, and
//! every time setter (utimensat, futimens, utime, utimes, lutimes, futimes), whose times
//! reach the backend as two `timespec`s. Each name forwards to libc's function of that name.

use super::route;
use crate::call::c_str;
use crate::{forward, Backend, Times};
use libc::{c_char, c_int, gid_t, mode_t, timespec, timeval, uid_t, utimbuf};

pub unsafe fn fchmodat<B: Backend>(dirfd: c_int, path: *const c_char, mode: mode_t, flags: c_int) -> c_int {
    // SAFETY: fchmodat's contract: path is a NUL-terminated string.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::chmod_at(dirfd, p?, mode, flags, next),
        || forward!(fchmodat(dirfd, path, mode, flags): fn(c_int, *const c_char, mode_t, c_int) -> c_int),
    )
}

pub unsafe fn chmod<B: Backend>(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: as fchmodat.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::chmod_at(libc::AT_FDCWD, p?, mode, 0, next),
        || forward!(chmod(path, mode): fn(*const c_char, mode_t) -> c_int),
    )
}

pub unsafe fn fchmod<B: Backend>(fd: c_int, mode: mode_t) -> c_int {
    route::<()>(
        B::claims_file(fd),
        |next| B::fchmod(fd, mode, next),
        || forward!(fchmod(fd, mode): fn(c_int, mode_t) -> c_int),
    )
}

pub unsafe fn fchownat<B: Backend>(dirfd: c_int, path: *const c_char, uid: uid_t, gid: gid_t, flags: c_int) -> c_int {
    // SAFETY: fchownat's contract: path is a NUL-terminated string.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::chown_at(dirfd, p?, uid, gid, flags, next),
        || forward!(fchownat(dirfd, path, uid, gid, flags): fn(c_int, *const c_char, uid_t, gid_t, c_int) -> c_int),
    )
}

pub unsafe fn chown<B: Backend>(path: *const c_char, uid: uid_t, gid: gid_t) -> c_int {
    // SAFETY: as fchownat.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::chown_at(libc::AT_FDCWD, p?, uid, gid, 0, next),
        || forward!(chown(path, uid, gid): fn(*const c_char, uid_t, gid_t) -> c_int),
    )
}

pub unsafe fn lchown<B: Backend>(path: *const c_char, uid: uid_t, gid: gid_t) -> c_int {
    // SAFETY: as fchownat.
    let p = unsafe { c_str(path) };
    route::<()>(
        p.is_some(),
        |next| B::chown_at(libc::AT_FDCWD, p?, uid, gid, libc::AT_SYMLINK_NOFOLLOW, next),
        || forward!(lchown(path, uid, gid): fn(*const c_char, uid_t, gid_t) -> c_int),
    )
}

pub unsafe fn fchown<B: Backend>(fd: c_int, uid: uid_t, gid: gid_t) -> c_int {
    route::<()>(
        B::claims_file(fd),
        |next| B::fchown(fd, uid, gid, next),
        || forward!(fchown(fd, uid, gid): fn(c_int, uid_t, gid_t) -> c_int),
    )
}

/// Two timespecs at `ts`, or None for a null pointer (both now).
///
/// # Safety
/// `ts`, when not null, points to two timespecs (the contract of the callers).
unsafe fn timespecs(ts: *const timespec) -> Times {
    // SAFETY: the caller's contract.
    (!ts.is_null()).then(|| unsafe { [*ts, *ts.add(1)] })
}

/// As [`timespecs`], from two timevals.
///
/// # Safety
/// `tv`, when not null, points to two timevals.
unsafe fn timevals(tv: *const timeval) -> Times {
    let ts = |v: timeval| timespec { tv_sec: v.tv_sec, tv_nsec: v.tv_usec * 1000 };
    // SAFETY: the caller's contract.
    (!tv.is_null()).then(|| unsafe { [ts(*tv), ts(*tv.add(1))] })
}

/// `utimensat`; a null path (Linux's) names `dirfd` itself, as futimens does.
pub unsafe fn utimensat<B: Backend>(dirfd: c_int, path: *const c_char, times: *const timespec, flags: c_int) -> c_int {
    // SAFETY: utimensat's contract: path null or a NUL-terminated string, times null or two timespecs.
    let (p, t) = unsafe { (c_str(path), timespecs(times)) };
    // A null path is EINVAL in glibc's utimensat (the system call's "the descriptor itself"
    // is futimens's); a path too long for c_str goes to the kernel (ENAMETOOLONG).
    route::<()>(
        p.is_some() || path.is_null() && B::claims_file(dirfd),
        |next| match p {
            Some(p) => B::set_times_at(dirfd, p, t, flags, next),
            None => Some(Err(crate::Errno(libc::EINVAL))),
        },
        || forward!(utimensat(dirfd, path, times, flags): fn(c_int, *const c_char, *const timespec, c_int) -> c_int),
    )
}

pub unsafe fn futimens<B: Backend>(fd: c_int, times: *const timespec) -> c_int {
    // SAFETY: futimens's contract: times null or two timespecs.
    let t = unsafe { timespecs(times) };
    route::<()>(
        B::claims_file(fd),
        |next| B::set_times_fd(fd, t, next),
        || forward!(futimens(fd, times): fn(c_int, *const timespec) -> c_int),
    )
}

pub unsafe fn futimes<B: Backend>(fd: c_int, tv: *const timeval) -> c_int {
    // SAFETY: futimes's contract: tv null or two timevals.
    let t = unsafe { timevals(tv) };
    route::<()>(
        B::claims_file(fd),
        |next| B::set_times_fd(fd, t, next),
        || forward!(futimes(fd, tv): fn(c_int, *const timeval) -> c_int),
    )
}

pub unsafe fn utimes<B: Backend>(path: *const c_char, tv: *const timeval) -> c_int {
    // SAFETY: utimes's contract: path a NUL-terminated string, tv null or two timevals.
    let (p, t) = unsafe { (c_str(path), timevals(tv)) };
    route::<()>(
        p.is_some(),
        |next| B::set_times_at(libc::AT_FDCWD, p?, t, 0, next),
        || forward!(utimes(path, tv): fn(*const c_char, *const timeval) -> c_int),
    )
}

pub unsafe fn lutimes<B: Backend>(path: *const c_char, tv: *const timeval) -> c_int {
    // SAFETY: as utimes.
    let (p, t) = unsafe { (c_str(path), timevals(tv)) };
    route::<()>(
        p.is_some(),
        |next| B::set_times_at(libc::AT_FDCWD, p?, t, libc::AT_SYMLINK_NOFOLLOW, next),
        || forward!(lutimes(path, tv): fn(*const c_char, *const timeval) -> c_int),
    )
}

pub unsafe fn utime<B: Backend>(path: *const c_char, times: *const utimbuf) -> c_int {
    // SAFETY: utime's contract: path a NUL-terminated string, times null or a utimbuf.
    let (p, t) = unsafe {
        let t = (!times.is_null()).then(|| {
            let u = *times;
            [timespec { tv_sec: u.actime, tv_nsec: 0 }, timespec { tv_sec: u.modtime, tv_nsec: 0 }]
        });
        (c_str(path), t)
    };
    route::<()>(
        p.is_some(),
        |next| B::set_times_at(libc::AT_FDCWD, p?, t, 0, next),
        || forward!(utime(path, times): fn(*const c_char, *const utimbuf) -> c_int),
    )
}
