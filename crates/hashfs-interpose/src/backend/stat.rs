//! Attributes ([`crate::entry::stat`]).

use crate::call::{Next, Served};
use libc::{c_int, c_uint};
use std::ffi::CStr;

pub trait Attributes {
    /// stat, lstat (`flags` AT_SYMLINK_NOFOLLOW) and fstatat, every name: the attributes
    /// of `path` from `dirfd` (AT_FDCWD for stat and lstat).
    fn stat_at(_dirfd: c_int, _path: &CStr, _flags: c_int, _next: Next<'_, libc::stat>) -> Served<libc::stat> {
        None
    }
    fn fstat(_fd: c_int, _next: Next<'_, libc::stat>) -> Served<libc::stat> {
        None
    }
    fn statx(
        _dirfd: c_int,
        _path: &CStr,
        _flags: c_int,
        _mask: c_uint,
        _next: Next<'_, libc::statx>,
    ) -> Served<libc::statx> {
        None
    }
    /// access (`flags` 0), euidaccess and eaccess (AT_EACCESS) and faccessat.
    fn access_at(_dirfd: c_int, _path: &CStr, _mode: c_int, _flags: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
}
