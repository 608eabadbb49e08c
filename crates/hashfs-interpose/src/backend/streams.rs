//! Directory and stdio streams ([`crate::entry::streams`]). Handles are the pointers the
//! program holds, as numbers: a backend makes its own and never dereferences another's.

use crate::call::{Errno, Handle, Next, Served};
use libc::c_int;
use std::ffi::CStr;

pub trait Streams {
    /// Whether directory stream `d` is one this backend made (the calls on a stream ask
    /// it first).
    fn claims_dir(_d: usize) -> bool {
        false
    }
    fn opendir(_path: &CStr, _next: Next<'_, Handle>) -> Served<Handle> {
        None
    }
    fn fdopendir(_fd: c_int, _next: Next<'_, Handle>) -> Served<Handle> {
        None
    }
    /// The next entry of a claimed stream: a `struct dirent64` the backend keeps until
    /// the stream's next call, or `Handle(0)` at the end.
    fn readdir(_d: usize) -> Served<Handle> {
        None
    }
    fn closedir(_d: usize) -> Served<()> {
        None
    }
    fn rewinddir(_d: usize) -> Served<()> {
        None
    }
    /// The position of a claimed stream, for `seekdir`.
    fn telldir(_d: usize) -> Served<crate::Offset> {
        None
    }
    /// Moves a claimed stream to a position `telldir` gave.
    fn seekdir(_d: usize, _pos: libc::c_long) -> Served<()> {
        None
    }
    fn dirfd(_d: usize) -> Served<c_int> {
        None
    }
    /// fopen and fopen64; `mode` is EFAULT for a null pointer.
    fn fopen(_path: &CStr, _mode: Result<&CStr, Errno>, _next: Next<'_, Handle>) -> Served<Handle> {
        None
    }
    fn fdopen(_fd: c_int, _mode: Result<&CStr, Errno>, _next: Next<'_, Handle>) -> Served<Handle> {
        None
    }
    /// Every fclose.
    fn fclose(_fp: usize, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    /// Every fileno and fileno_unlocked.
    fn fileno(_fp: usize) -> Served<c_int> {
        None
    }
}
