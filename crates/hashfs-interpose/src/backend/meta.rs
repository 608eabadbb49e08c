//! Owners, permissions and times ([`crate::entry::meta`]).

use crate::call::{Next, Served};
use libc::{c_int, gid_t, mode_t, uid_t};
use std::ffi::CStr;

/// The access and modification times a call sets (`UTIME_NOW` and `UTIME_OMIT` as
/// utimensat has them); None: both now (a null pointer).
pub type Times = Option<[libc::timespec; 2]>;

pub trait Metadata {
    /// chmod (`flags` 0) and fchmodat.
    fn chmod_at(_dirfd: c_int, _path: &CStr, _mode: mode_t, _flags: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    fn fchmod(_fd: c_int, _mode: mode_t, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    /// chown, lchown (AT_SYMLINK_NOFOLLOW) and fchownat.
    fn chown_at(
        _dirfd: c_int,
        _path: &CStr,
        _uid: uid_t,
        _gid: gid_t,
        _flags: c_int,
        _next: Next<'_, ()>,
    ) -> Served<()> {
        None
    }
    fn fchown(_fd: c_int, _uid: uid_t, _gid: gid_t, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    /// utimensat with a path, utimes, lutimes (AT_SYMLINK_NOFOLLOW) and utime.
    fn set_times_at(_dirfd: c_int, _path: &CStr, _times: Times, _flags: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    /// futimens, futimes, and utimensat with a null path.
    fn set_times_fd(_fd: c_int, _times: Times, _next: Next<'_, ()>) -> Served<()> {
        None
    }
}
