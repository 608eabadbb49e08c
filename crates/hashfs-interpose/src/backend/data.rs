//! Data on a descriptor ([`crate::entry::io`]).

use crate::call::{IoVecs, Next, Offset, Posix, Served};
use libc::{c_int, c_uint, off_t};

pub trait Data {
    fn read(_fd: c_int, _buf: &mut [u8], _next: Next<'_, usize>) -> Served<usize> {
        None
    }
    fn write(_fd: c_int, _buf: &[u8], _next: Next<'_, usize>) -> Served<usize> {
        None
    }
    fn pread(_fd: c_int, _buf: &mut [u8], _off: off_t, _next: Next<'_, usize>) -> Served<usize> {
        None
    }
    fn pwrite(_fd: c_int, _buf: &[u8], _off: off_t, _next: Next<'_, usize>) -> Served<usize> {
        None
    }
    fn readv(_fd: c_int, _iov: IoVecs<'_>, _next: Next<'_, usize>) -> Served<usize> {
        None
    }
    fn writev(_fd: c_int, _iov: IoVecs<'_>, _next: Next<'_, usize>) -> Served<usize> {
        None
    }
    /// `preadv` (`flags` None) and `preadv2` (with its `RWF_*` flags; an offset of -1
    /// means the file position).
    fn preadv(
        _fd: c_int,
        _iov: IoVecs<'_>,
        _off: off_t,
        _flags: Option<c_int>,
        _next: Next<'_, usize>,
    ) -> Served<usize> {
        None
    }
    /// `pwritev` and `pwritev2`, as [`Data::preadv`].
    fn pwritev(
        _fd: c_int,
        _iov: IoVecs<'_>,
        _off: off_t,
        _flags: Option<c_int>,
        _next: Next<'_, usize>,
    ) -> Served<usize> {
        None
    }
    fn lseek(_fd: c_int, _off: off_t, _whence: c_int, _next: Next<'_, Offset>) -> Served<Offset> {
        None
    }
    fn fsync(_fd: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    fn fdatasync(_fd: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    /// syncfs: every file system of the process's files that `fd`'s is.
    fn syncfs(_fd: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    fn sync_file_range(_fd: c_int, _off: off_t, _len: off_t, _flags: c_uint, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    fn ftruncate(_fd: c_int, _len: off_t, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    fn fallocate(_fd: c_int, _mode: c_int, _off: off_t, _len: off_t, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    fn posix_fallocate(_fd: c_int, _off: off_t, _len: off_t, _next: Next<'_, Posix>) -> Served<Posix> {
        None
    }
    fn posix_fadvise(_fd: c_int, _off: off_t, _len: off_t, _advice: c_int, _next: Next<'_, Posix>) -> Served<Posix> {
        None
    }
    fn readahead(_fd: c_int, _off: off_t, _count: usize, _next: Next<'_, usize>) -> Served<usize> {
        None
    }
}
