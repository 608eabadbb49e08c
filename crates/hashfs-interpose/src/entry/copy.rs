//! Copies the kernel makes between descriptors (copy_file_range, sendfile, splice), and
//! memory mappings (mmap, munmap, mprotect, msync). A copy reaches the backend when it
//! claims either descriptor; munmap, mprotect and msync reach it always (the range may
//! hold a mapping of its), mmap when it claims the descriptor of a file mapping.

use super::route;
use crate::call::Address;
use crate::{forward, Backend, RangeCopy};
use libc::{c_int, c_uint, c_void, off_t, size_t, ssize_t};
use std::cell::Cell;

/// The caller's offset (`loff_t` and `off_t` are one type here) as a cell a backend reads
/// and updates; None for a null pointer (the descriptor's position). A `Cell` because
/// the two offsets of a copy may be one variable, and libc's own call writes it too.
///
/// # Safety
/// `p`, when not null, points to an `off_t` valid for the call's duration.
unsafe fn offset<'a>(p: *mut off_t) -> Option<&'a Cell<off_t>> {
    // SAFETY: the caller's contract; Cell<off_t> has off_t's layout, and a shared Cell may
    // alias another (both offsets one variable) and be written behind it (libc's call).
    unsafe { p.cast::<Cell<off_t>>().as_ref() }
}

pub unsafe fn copy_file_range<B: Backend>(
    fd_in: c_int,
    off_in: *mut off_t,
    fd_out: c_int,
    off_out: *mut off_t,
    len: size_t,
    flags: c_uint,
) -> ssize_t {
    // SAFETY: copy_file_range's contract: each offset null or valid.
    let (oi, oo) = unsafe { (offset(off_in), offset(off_out)) };
    route::<usize>(
        B::claims(fd_in) || B::claims(fd_out),
        |next| B::copy_range(RangeCopy::CopyFileRange, fd_in, oi, fd_out, oo, len, flags, next),
        || forward!(copy_file_range(fd_in, off_in, fd_out, off_out, len, flags): fn(c_int, *mut off_t, c_int, *mut off_t, size_t, c_uint) -> ssize_t),
    )
}

pub unsafe fn sendfile<B: Backend>(out_fd: c_int, in_fd: c_int, off: *mut off_t, count: size_t) -> ssize_t {
    // SAFETY: sendfile's contract: the offset null or valid.
    let o = unsafe { offset(off) };
    route::<usize>(
        B::claims(in_fd) || B::claims(out_fd),
        |next| B::sendfile(out_fd, in_fd, o, count, next),
        || forward!(sendfile(out_fd, in_fd, off, count): fn(c_int, c_int, *mut off_t, size_t) -> ssize_t),
    )
}

pub unsafe fn splice<B: Backend>(
    fd_in: c_int,
    off_in: *mut off_t,
    fd_out: c_int,
    off_out: *mut off_t,
    len: size_t,
    flags: c_uint,
) -> ssize_t {
    // SAFETY: splice's contract: each offset null or valid.
    let (oi, oo) = unsafe { (offset(off_in), offset(off_out)) };
    route::<usize>(
        B::claims(fd_in) || B::claims(fd_out),
        |next| B::copy_range(RangeCopy::Splice, fd_in, oi, fd_out, oo, len, flags, next),
        || forward!(splice(fd_in, off_in, fd_out, off_out, len, flags): fn(c_int, *mut off_t, c_int, *mut off_t, size_t, c_uint) -> ssize_t),
    )
}

pub unsafe fn mmap<B: Backend>(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    let raw = || forward!(mmap(addr, len, prot, flags, fd, off): fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void);
    if flags & libc::MAP_ANONYMOUS == 0 && B::claims(fd) {
        return route::<Address>(true, |next| B::mmap(addr as usize, len, prot, flags, fd, off, next), raw);
    }
    // MAP_FIXED_NOREPLACE (which includes no MAP_FIXED bit) never replaces a mapping.
    route::<Address>(flags & libc::MAP_FIXED != 0, |next| B::mmap_over(addr as usize, len, next), raw)
}

/// mremap: variadic in C, its fifth argument read only with MREMAP_FIXED. Taken here as
/// a fixed fifth argument: on x86-64 an integer argument the caller did not pass is a
/// register's stale value, read and not used (and passed on as such to libc's).
pub unsafe fn mremap<B: Backend>(
    old: *mut c_void,
    old_len: size_t,
    new_len: size_t,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    route::<Address>(
        true,
        |next| B::mremap(old as usize, old_len, new_len, flags, new_addr as usize, next),
        || forward!(mremap(old, old_len, new_len, flags, new_addr): fn(*mut c_void, size_t, size_t, c_int, *mut c_void) -> *mut c_void),
    )
}

pub unsafe fn munmap<B: Backend>(addr: *mut c_void, len: size_t) -> c_int {
    route::<()>(
        true,
        |next| B::munmap(addr as usize, len, next),
        || forward!(munmap(addr, len): fn(*mut c_void, size_t) -> c_int),
    )
}

pub unsafe fn mprotect<B: Backend>(addr: *mut c_void, len: size_t, prot: c_int) -> c_int {
    route::<()>(
        true,
        |next| B::mprotect(addr as usize, len, prot, next),
        || forward!(mprotect(addr, len, prot): fn(*mut c_void, size_t, c_int) -> c_int),
    )
}

pub unsafe fn msync<B: Backend>(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
    route::<()>(
        true,
        |next| B::msync(addr as usize, len, flags, next),
        || forward!(msync(addr, len, flags): fn(*mut c_void, size_t, c_int) -> c_int),
    )
}
