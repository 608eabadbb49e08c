//! Streams: directory streams (opendir, fdopendir, readdir, closedir, rewinddir, dirfd)
//! and stdio's (fopen, fdopen, fclose, fileno). A stream a backend made is its own
//! handle; the calls on a stream reach the backend when it claims the handle
//! ([`crate::Streams::claims_dir`]), fclose and fileno always.

use super::route;
use crate::call::{c_str, Errno, Handle};
use crate::{forward, Backend};
use libc::{c_char, c_int, c_long, dirent, dirent64, DIR, FILE};

/// Whether directory stream `d` is the backend's, asked only for a call from the program:
/// the backend's own calls go to libc whatever the stream (`route`), and its answer may
/// take a lock that the backend holds then (a forked child's start-up reads `/proc` while
/// the fork holds the backend's table of streams: the child hung).
fn claimed_dir<B: Backend>(d: *mut DIR) -> bool {
    !crate::in_shim() && B::claims_dir(d as usize)
}

pub unsafe fn opendir<B: Backend>(path: *const c_char) -> *mut DIR {
    // SAFETY: opendir's contract: path is a NUL-terminated string.
    let p = unsafe { c_str(path) };
    route::<Handle>(
        p.is_some(),
        |next| B::opendir(p?, next),
        || forward!(opendir(path): fn(*const c_char) -> *mut DIR).cast(),
    )
    .cast()
}

pub unsafe fn fdopendir<B: Backend>(fd: c_int) -> *mut DIR {
    route::<Handle>(
        B::claims(fd),
        |next| B::fdopendir(fd, next),
        || forward!(fdopendir(fd): fn(c_int) -> *mut DIR).cast(),
    )
    .cast()
}

pub unsafe fn readdir64<B: Backend>(d: *mut DIR) -> *mut dirent64 {
    route::<Handle>(
        claimed_dir::<B>(d),
        |_| B::readdir(d as usize),
        || forward!(readdir64(d): fn(*mut DIR) -> *mut dirent64).cast(),
    )
    .cast()
}

/// readdir: `struct dirent` is `struct dirent64` on the 64-bit targets this builds for.
pub unsafe fn readdir<B: Backend>(d: *mut DIR) -> *mut dirent {
    const _: () = assert!(std::mem::size_of::<dirent>() == std::mem::size_of::<dirent64>());
    route::<Handle>(
        claimed_dir::<B>(d),
        |_| B::readdir(d as usize),
        || forward!(readdir(d): fn(*mut DIR) -> *mut dirent).cast(),
    )
    .cast()
}

pub unsafe fn closedir<B: Backend>(d: *mut DIR) -> c_int {
    route::<()>(claimed_dir::<B>(d), |_| B::closedir(d as usize), || forward!(closedir(d): fn(*mut DIR) -> c_int))
}

pub unsafe fn rewinddir<B: Backend>(d: *mut DIR) {
    if claimed_dir::<B>(d) && crate::serve(|| B::rewinddir(d as usize)).is_some() {
        return;
    }
    forward!(rewinddir(d): fn(*mut DIR) -> ())
}

pub unsafe fn telldir<B: Backend>(d: *mut DIR) -> c_long {
    route::<crate::Offset>(
        claimed_dir::<B>(d),
        |_| B::telldir(d as usize),
        || forward!(telldir(d): fn(*mut DIR) -> c_long),
    )
}

pub unsafe fn seekdir<B: Backend>(d: *mut DIR, pos: c_long) {
    if claimed_dir::<B>(d) && crate::serve(|| B::seekdir(d as usize, pos)).is_some() {
        return;
    }
    forward!(seekdir(d, pos): fn(*mut DIR, c_long) -> ())
}

/// readdir_r (and readdir64_r): the next entry copied into the caller's `entry`, `*result`
/// pointing to it, or null at the end; 0, or the error number.
pub unsafe fn readdir_r<B: Backend>(d: *mut DIR, entry: *mut dirent64, result: *mut *mut dirent64) -> c_int {
    if !claimed_dir::<B>(d) {
        return forward!(readdir64_r(d, entry, result): fn(*mut DIR, *mut dirent64, *mut *mut dirent64) -> c_int);
    }
    match crate::serve(|| B::readdir(d as usize)) {
        Some(Ok(Handle(0))) => {
            // SAFETY: readdir_r's contract: result is valid for a write.
            unsafe { *result = std::ptr::null_mut() };
            0
        }
        Some(Ok(Handle(e))) => {
            // SAFETY: the backend's entry is a whole dirent64 until the stream's next call;
            // entry is the caller's dirent64.
            unsafe {
                std::ptr::copy_nonoverlapping(e as *const dirent64, entry, 1);
                *result = entry;
            }
            0
        }
        Some(Err(e)) => e.0,
        None => libc::EBADF,
    }
}

pub unsafe fn dirfd<B: Backend>(d: *mut DIR) -> c_int {
    route::<c_int>(claimed_dir::<B>(d), |_| B::dirfd(d as usize), || forward!(dirfd(d): fn(*mut DIR) -> c_int))
}

pub unsafe fn fopen<B: Backend>(path: *const c_char, mode: *const c_char) -> *mut FILE {
    // SAFETY: fopen's contract: path and mode are NUL-terminated strings.
    let (p, m) = unsafe { (c_str(path), c_str(mode)) };
    route::<Handle>(
        p.is_some(),
        |next| B::fopen(p?, m.ok_or(Errno::FAULT), next),
        || forward!(fopen(path, mode): fn(*const c_char, *const c_char) -> *mut FILE).cast(),
    )
    .cast()
}

pub unsafe fn fdopen<B: Backend>(fd: c_int, mode: *const c_char) -> *mut FILE {
    // SAFETY: fdopen's contract: mode is a NUL-terminated string.
    let m = unsafe { c_str(mode) };
    route::<Handle>(
        B::claims(fd),
        |next| B::fdopen(fd, m.ok_or(Errno::FAULT), next),
        || forward!(fdopen(fd, mode): fn(c_int, *const c_char) -> *mut FILE).cast(),
    )
    .cast()
}

pub unsafe fn fclose<B: Backend>(fp: *mut FILE) -> c_int {
    route::<()>(!fp.is_null(), |next| B::fclose(fp as usize, next), || forward!(fclose(fp): fn(*mut FILE) -> c_int))
}

pub unsafe fn fileno<B: Backend>(fp: *mut FILE) -> c_int {
    route::<c_int>(!fp.is_null(), |_| B::fileno(fp as usize), || forward!(fileno(fp): fn(*mut FILE) -> c_int))
}

pub unsafe fn fileno_unlocked<B: Backend>(fp: *mut FILE) -> c_int {
    route::<c_int>(!fp.is_null(), |_| B::fileno(fp as usize), || forward!(fileno_unlocked(fp): fn(*mut FILE) -> c_int))
}
