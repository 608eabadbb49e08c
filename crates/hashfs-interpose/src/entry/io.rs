//! Data on a descriptor: the read and write families, lseek, the syncs, truncation,
//! allocation and hints. The `64` names are the same functions here (`off_t` is 64-bit).

use super::route;
use crate::call::{bytes, bytes_mut, IoVecs, Offset, Posix};
use crate::{forward, Backend};
use libc::{c_int, c_uint, c_void, iovec, off_t, size_t, ssize_t};

pub unsafe fn read<B: Backend>(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    route(
        B::claims(fd),
        // SAFETY: read's contract: buf is writable for count bytes.
        |next| match unsafe { bytes_mut(buf, count) } {
            Ok(b) => B::read(fd, b, next),
            Err(e) => Some(Err(e)),
        },
        || forward!(read(fd, buf, count): fn(c_int, *mut c_void, size_t) -> ssize_t),
    )
}

pub unsafe fn write<B: Backend>(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    route(
        B::claims(fd),
        // SAFETY: write's contract: buf is readable for count bytes.
        |next| match unsafe { bytes(buf, count) } {
            Ok(b) => B::write(fd, b, next),
            Err(e) => Some(Err(e)),
        },
        || forward!(write(fd, buf, count): fn(c_int, *const c_void, size_t) -> ssize_t),
    )
}

pub unsafe fn pread<B: Backend>(fd: c_int, buf: *mut c_void, count: size_t, off: off_t) -> ssize_t {
    route(
        B::claims(fd),
        // SAFETY: as read.
        |next| match unsafe { bytes_mut(buf, count) } {
            Ok(b) => B::pread(fd, b, off, next),
            Err(e) => Some(Err(e)),
        },
        || forward!(pread(fd, buf, count, off): fn(c_int, *mut c_void, size_t, off_t) -> ssize_t),
    )
}

pub unsafe fn pwrite<B: Backend>(fd: c_int, buf: *const c_void, count: size_t, off: off_t) -> ssize_t {
    route(
        B::claims(fd),
        // SAFETY: as write.
        |next| match unsafe { bytes(buf, count) } {
            Ok(b) => B::pwrite(fd, b, off, next),
            Err(e) => Some(Err(e)),
        },
        || forward!(pwrite(fd, buf, count, off): fn(c_int, *const c_void, size_t, off_t) -> ssize_t),
    )
}

pub unsafe fn readv<B: Backend>(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    route(
        B::claims(fd),
        // SAFETY: readv's contract: iov holds n iovecs of writable buffers.
        |next| match unsafe { IoVecs::new(iov, n) } {
            Ok(v) => B::readv(fd, v, next),
            Err(e) => Some(Err(e)),
        },
        || forward!(readv(fd, iov, n): fn(c_int, *const iovec, c_int) -> ssize_t),
    )
}

pub unsafe fn writev<B: Backend>(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    route(
        B::claims(fd),
        // SAFETY: writev's contract: iov holds n iovecs of readable buffers.
        |next| match unsafe { IoVecs::new(iov, n) } {
            Ok(v) => B::writev(fd, v, next),
            Err(e) => Some(Err(e)),
        },
        || forward!(writev(fd, iov, n): fn(c_int, *const iovec, c_int) -> ssize_t),
    )
}

pub unsafe fn preadv<B: Backend>(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t {
    route(
        B::claims(fd),
        // SAFETY: as readv.
        |next| match unsafe { IoVecs::new(iov, n) } {
            Ok(v) => B::preadv(fd, v, off, None, next),
            Err(e) => Some(Err(e)),
        },
        || forward!(preadv(fd, iov, n, off): fn(c_int, *const iovec, c_int, off_t) -> ssize_t),
    )
}

pub unsafe fn preadv2<B: Backend>(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t {
    route(
        B::claims(fd),
        // SAFETY: as readv.
        |next| match unsafe { IoVecs::new(iov, n) } {
            Ok(v) => B::preadv(fd, v, off, Some(flags), next),
            Err(e) => Some(Err(e)),
        },
        || forward!(preadv2(fd, iov, n, off, flags): fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t),
    )
}

pub unsafe fn pwritev<B: Backend>(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t {
    route(
        B::claims(fd),
        // SAFETY: as writev.
        |next| match unsafe { IoVecs::new(iov, n) } {
            Ok(v) => B::pwritev(fd, v, off, None, next),
            Err(e) => Some(Err(e)),
        },
        || forward!(pwritev(fd, iov, n, off): fn(c_int, *const iovec, c_int, off_t) -> ssize_t),
    )
}

pub unsafe fn pwritev2<B: Backend>(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t {
    route(
        B::claims(fd),
        // SAFETY: as writev.
        |next| match unsafe { IoVecs::new(iov, n) } {
            Ok(v) => B::pwritev(fd, v, off, Some(flags), next),
            Err(e) => Some(Err(e)),
        },
        || forward!(pwritev2(fd, iov, n, off, flags): fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t),
    )
}

/// lseek: a descriptor the backend claims, or a standard one (which a shim may have made
/// a pipe standing for its file, as for the syncs below).
pub unsafe fn lseek<B: Backend>(fd: c_int, off: off_t, whence: c_int) -> off_t {
    route::<Offset>(
        B::claims(fd) || (0..=2).contains(&fd),
        |next| B::lseek(fd, off, whence, next),
        || forward!(lseek(fd, off, whence): fn(c_int, off_t, c_int) -> off_t),
    )
}

/// Whether a sync of `fd` goes to the backend: a descriptor it claims, or a standard one
/// (one a shim redirected to its file is a pipe the kernel cannot sync: dd's `conv=fsync`
/// on its output, which it reopens onto standard output, failed with EINVAL).
fn sync_claimed<B: Backend>(fd: c_int) -> bool {
    B::claims(fd) || (0..=2).contains(&fd)
}

pub unsafe fn fsync<B: Backend>(fd: c_int) -> c_int {
    route::<()>(sync_claimed::<B>(fd), |next| B::fsync(fd, next), || forward!(fsync(fd): fn(c_int) -> c_int))
}

pub unsafe fn fdatasync<B: Backend>(fd: c_int) -> c_int {
    route::<()>(sync_claimed::<B>(fd), |next| B::fdatasync(fd, next), || forward!(fdatasync(fd): fn(c_int) -> c_int))
}

pub unsafe fn syncfs<B: Backend>(fd: c_int) -> c_int {
    route::<()>(sync_claimed::<B>(fd), |next| B::syncfs(fd, next), || forward!(syncfs(fd): fn(c_int) -> c_int))
}

pub unsafe fn sync_file_range<B: Backend>(fd: c_int, off: off_t, len: off_t, flags: c_uint) -> c_int {
    route::<()>(
        B::claims(fd),
        |next| B::sync_file_range(fd, off, len, flags, next),
        || forward!(sync_file_range(fd, off, len, flags): fn(c_int, off_t, off_t, c_uint) -> c_int),
    )
}

/// ftruncate: a descriptor the backend claims, or a standard one (as lseek: dd truncates
/// the output it reopens onto standard output).
pub unsafe fn ftruncate<B: Backend>(fd: c_int, len: off_t) -> c_int {
    route::<()>(
        B::claims(fd) || (0..=2).contains(&fd),
        |next| B::ftruncate(fd, len, next),
        || forward!(ftruncate(fd, len): fn(c_int, off_t) -> c_int),
    )
}

pub unsafe fn fallocate<B: Backend>(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    route::<()>(
        B::claims(fd),
        |next| B::fallocate(fd, mode, off, len, next),
        || forward!(fallocate(fd, mode, off, len): fn(c_int, c_int, off_t, off_t) -> c_int),
    )
}

pub unsafe fn posix_fallocate<B: Backend>(fd: c_int, off: off_t, len: off_t) -> c_int {
    route::<Posix>(
        B::claims(fd),
        |next| B::posix_fallocate(fd, off, len, next),
        || forward!(posix_fallocate(fd, off, len): fn(c_int, off_t, off_t) -> c_int),
    )
}

pub unsafe fn posix_fadvise<B: Backend>(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int {
    route::<Posix>(
        B::claims(fd),
        |next| B::posix_fadvise(fd, off, len, advice, next),
        || forward!(posix_fadvise(fd, off, len, advice): fn(c_int, off_t, off_t, c_int) -> c_int),
    )
}

pub unsafe fn readahead<B: Backend>(fd: c_int, off: off_t, count: size_t) -> ssize_t {
    route::<usize>(
        B::claims(fd),
        |next| B::readahead(fd, off, count, next),
        || forward!(readahead(fd, off, count): fn(c_int, off_t, size_t) -> ssize_t),
    )
}
