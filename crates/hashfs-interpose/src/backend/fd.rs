//! Descriptors ([`crate::entry::fd`]).

use crate::call::{Next, Served};
use libc::{c_int, c_uint, c_ulong, mode_t};
use std::ffi::CStr;

/// fcntl's third argument, as its command reads it.
pub enum FcntlArg<'a> {
    /// The record-lock commands' `struct flock` (F_GETLK, F_SETLK(W), and the OFD forms).
    Lock(&'a mut libc::flock),
    /// Every other command's integer (or none, unread).
    Word(c_ulong),
}

pub trait Descriptors {
    /// The open family, every form: `dirfd` is AT_FDCWD for open and creat, `mode` 0 for
    /// the `_FORTIFY_SOURCE` forms. `next` opens in libc with the flags it is given.
    fn open(_dirfd: c_int, _path: &CStr, _flags: c_int, _mode: mode_t, _next: Next<'_, c_int, c_int>) -> Served<c_int> {
        None
    }
    /// Every close, of any descriptor.
    fn close(_fd: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    /// Every `close_range` (a program's close of every descriptor it does not keep, as
    /// Python's subprocess makes in its child before the exec).
    fn close_range(_first: c_uint, _last: c_uint, _flags: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    fn dup(_fd: c_int, _next: Next<'_, c_int>) -> Served<c_int> {
        None
    }
    /// Every `dup2` (`flags` None) and `dup3`, of any descriptors.
    fn dup3(_fd: c_int, _newfd: c_int, _flags: Option<c_int>, _next: Next<'_, c_int>) -> Served<c_int> {
        None
    }
    fn fcntl(_fd: c_int, _cmd: c_int, _arg: FcntlArg<'_>, _next: Next<'_, c_int>) -> Served<c_int> {
        None
    }
    fn flock(_fd: c_int, _op: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
}
