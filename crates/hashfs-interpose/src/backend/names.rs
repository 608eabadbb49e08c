//! Names ([`crate::entry::names`]). Paths are relative to their `dirfd` (AT_FDCWD for the
//! forms without one).

use crate::call::{Next, Served};
use libc::{c_int, c_uint, dev_t, mode_t, off_t};
use std::ffi::CStr;

pub trait Names {
    /// unlink (`flags` 0), rmdir (AT_REMOVEDIR) and unlinkat.
    fn unlink_at(_dirfd: c_int, _path: &CStr, _flags: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    fn mkdir_at(_dirfd: c_int, _path: &CStr, _mode: mode_t, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    /// rename, renameat (`flags` 0) and renameat2.
    fn rename_at(
        _fd1: c_int,
        _from: &CStr,
        _fd2: c_int,
        _to: &CStr,
        _flags: c_uint,
        _next: Next<'_, ()>,
    ) -> Served<()> {
        None
    }
    /// link (`flags` 0) and linkat.
    fn link_at(_fd1: c_int, _from: &CStr, _fd2: c_int, _to: &CStr, _flags: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    /// symlink and symlinkat: a link at `path` holding `target`.
    fn symlink_at(_target: &CStr, _dirfd: c_int, _path: &CStr, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    /// readlink and readlinkat: the bytes copied into `buf` (no NUL added).
    fn readlink_at(_dirfd: c_int, _path: &CStr, _buf: &mut [u8], _next: Next<'_, usize>) -> Served<usize> {
        None
    }
    /// mknod, mknodat, and mkfifo and mkfifoat (`mode` with S_IFIFO, `dev` 0).
    fn mknod_at(_dirfd: c_int, _path: &CStr, _mode: mode_t, _dev: dev_t, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    /// truncate and truncate64.
    fn truncate(_path: &CStr, _len: off_t, _next: Next<'_, ()>) -> Served<()> {
        None
    }
}
