//! Extended attributes: get, list, set and remove, by path (following a last symbolic
//! link), by `l` path (not following) and by descriptor. A null name is EFAULT for a call
//! the backend takes; each name forwards to libc's function of that name.

use super::route;
use crate::call::{bytes, bytes_mut, c_str, Errno, LastLink};
use crate::{forward, Backend, XattrTarget};
use libc::{c_char, c_int, c_void, size_t, ssize_t};
use std::ffi::CStr;

/// The call's name, or EFAULT.
///
/// # Safety
/// `name`, when not null, is a NUL-terminated string.
unsafe fn name_of<'a>(name: *const c_char) -> Result<&'a CStr, Errno> {
    // SAFETY: the caller's contract.
    unsafe { c_str(name) }.ok_or(Errno::FAULT)
}

macro_rules! by_path {
    ($get:ident, $list:ident, $set:ident, $remove:ident, $follow:expr) => {
        pub unsafe fn $get<B: Backend>(path: *const c_char, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t {
            // SAFETY: the call's contract: path and name NUL-terminated, value writable for size bytes.
            let (p, n, v) = unsafe { (c_str(path), name_of(name), bytes_mut(value, size)) };
            route::<usize>(
                p.is_some(),
                |next| B::get_xattr(XattrTarget::Path(p?, $follow), n.and_then(|n| Ok((n, v?))), next),
                || forward!($get(path, name, value, size): fn(*const c_char, *const c_char, *mut c_void, size_t) -> ssize_t),
            )
        }

        pub unsafe fn $list<B: Backend>(path: *const c_char, list: *mut c_char, size: size_t) -> ssize_t {
            // SAFETY: the call's contract: path NUL-terminated, list writable for size bytes.
            let (p, l) = unsafe { (c_str(path), bytes_mut(list.cast(), size)) };
            route::<usize>(
                p.is_some(),
                |next| B::list_xattr(XattrTarget::Path(p?, $follow), l, next),
                || forward!($list(path, list, size): fn(*const c_char, *mut c_char, size_t) -> ssize_t),
            )
        }

        pub unsafe fn $set<B: Backend>(
            path: *const c_char,
            name: *const c_char,
            value: *const c_void,
            size: size_t,
            flags: c_int,
        ) -> c_int {
            // SAFETY: the call's contract: path and name NUL-terminated, value readable for size bytes.
            let (p, n, v) = unsafe { (c_str(path), name_of(name), bytes(value, size)) };
            route::<()>(
                p.is_some(),
                |next| B::set_xattr(XattrTarget::Path(p?, $follow), n.and_then(|n| Ok((n, v?))), flags, next),
                || forward!($set(path, name, value, size, flags): fn(*const c_char, *const c_char, *const c_void, size_t, c_int) -> c_int),
            )
        }

        pub unsafe fn $remove<B: Backend>(path: *const c_char, name: *const c_char) -> c_int {
            // SAFETY: the call's contract: path and name NUL-terminated.
            let (p, n) = unsafe { (c_str(path), name_of(name)) };
            route::<()>(
                p.is_some(),
                |next| B::remove_xattr(XattrTarget::Path(p?, $follow), n, next),
                || forward!($remove(path, name): fn(*const c_char, *const c_char) -> c_int),
            )
        }
    };
}

by_path!(getxattr, listxattr, setxattr, removexattr, LastLink::Follow);
by_path!(lgetxattr, llistxattr, lsetxattr, lremovexattr, LastLink::NoFollow);

pub unsafe fn fgetxattr<B: Backend>(fd: c_int, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t {
    // SAFETY: fgetxattr's contract: name NUL-terminated, value writable for size bytes.
    let (n, v) = unsafe { (name_of(name), bytes_mut(value, size)) };
    route::<usize>(
        B::claims_file(fd),
        |next| B::get_xattr(XattrTarget::Fd(fd), n.and_then(|n| Ok((n, v?))), next),
        || forward!(fgetxattr(fd, name, value, size): fn(c_int, *const c_char, *mut c_void, size_t) -> ssize_t),
    )
}

pub unsafe fn flistxattr<B: Backend>(fd: c_int, list: *mut c_char, size: size_t) -> ssize_t {
    // SAFETY: flistxattr's contract: list writable for size bytes.
    let l = unsafe { bytes_mut(list.cast(), size) };
    route::<usize>(
        B::claims_file(fd),
        |next| B::list_xattr(XattrTarget::Fd(fd), l, next),
        || forward!(flistxattr(fd, list, size): fn(c_int, *mut c_char, size_t) -> ssize_t),
    )
}

pub unsafe fn fsetxattr<B: Backend>(
    fd: c_int,
    name: *const c_char,
    value: *const c_void,
    size: size_t,
    flags: c_int,
) -> c_int {
    // SAFETY: fsetxattr's contract: name NUL-terminated, value readable for size bytes.
    let (n, v) = unsafe { (name_of(name), bytes(value, size)) };
    route::<()>(
        B::claims_file(fd),
        |next| B::set_xattr(XattrTarget::Fd(fd), n.and_then(|n| Ok((n, v?))), flags, next),
        || forward!(fsetxattr(fd, name, value, size, flags): fn(c_int, *const c_char, *const c_void, size_t, c_int) -> c_int),
    )
}

pub unsafe fn fremovexattr<B: Backend>(fd: c_int, name: *const c_char) -> c_int {
    // SAFETY: fremovexattr's contract: name NUL-terminated.
    let n = unsafe { name_of(name) };
    route::<()>(
        B::claims_file(fd),
        |next| B::remove_xattr(XattrTarget::Fd(fd), n, next),
        || forward!(fremovexattr(fd, name): fn(c_int, *const c_char) -> c_int),
    )
}
