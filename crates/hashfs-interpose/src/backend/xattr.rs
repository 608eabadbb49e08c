//! Extended attributes ([`crate::entry::xattr`]).

use crate::call::{Errno, LastLink, Next, Served};
use libc::c_int;
use std::ffi::CStr;

/// Which file an xattr call names.
#[derive(Clone, Copy)]
pub enum XattrTarget<'a> {
    /// A path, and what its last symbolic link is (the `l` forms name the link).
    Path(&'a CStr, LastLink),
    Fd(c_int),
}

/// The size protocol is Linux's throughout: an empty buffer asks for the length, a buffer
/// too small is ERANGE. The name and buffer arguments arrive as the entry made them: an
/// error (EFAULT) for a null name or a bad buffer, which the backend returns for a file
/// it serves.
pub trait Xattrs {
    fn get_xattr(
        _target: XattrTarget<'_>,
        _name_value: Result<(&CStr, &mut [u8]), Errno>,
        _next: Next<'_, usize>,
    ) -> Served<usize> {
        None
    }
    fn list_xattr(_target: XattrTarget<'_>, _buf: Result<&mut [u8], Errno>, _next: Next<'_, usize>) -> Served<usize> {
        None
    }
    fn set_xattr(
        _target: XattrTarget<'_>,
        _name_value: Result<(&CStr, &[u8]), Errno>,
        _flags: c_int,
        _next: Next<'_, ()>,
    ) -> Served<()> {
        None
    }
    fn remove_xattr(_target: XattrTarget<'_>, _name: Result<&CStr, Errno>, _next: Next<'_, ()>) -> Served<()> {
        None
    }
}
