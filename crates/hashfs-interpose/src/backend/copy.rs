//! Kernel copies between descriptors and memory mappings ([`crate::entry::copy`]).
//! Addresses are plain numbers here: a backend maps and unmaps, it never dereferences
//! the caller's.

use crate::call::{Address, Next, Served};
use libc::{c_int, c_uint, off_t};
use std::cell::Cell;

/// Which call copies a range between two descriptors (their arguments are the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeCopy {
    CopyFileRange,
    Splice,
}

pub trait Copies {
    /// copy_file_range and splice. Offsets: the caller's variables (read and updated), or
    /// None for the positions.
    #[allow(clippy::too_many_arguments)] // the calls' own six, which call, and libc's call
    fn copy_range(
        _call: RangeCopy,
        _fd_in: c_int,
        _off_in: Option<&Cell<off_t>>,
        _fd_out: c_int,
        _off_out: Option<&Cell<off_t>>,
        _len: usize,
        _flags: c_uint,
        _next: Next<'_, usize>,
    ) -> Served<usize> {
        None
    }
    fn sendfile(
        _out_fd: c_int,
        _in_fd: c_int,
        _off: Option<&Cell<off_t>>,
        _count: usize,
        _next: Next<'_, usize>,
    ) -> Served<usize> {
        None
    }
}

pub trait Mappings {
    /// mmap and mmap64 of a descriptor the backend claims (not MAP_ANONYMOUS).
    #[allow(clippy::too_many_arguments)] // mmap's own six, and libc's call
    fn mmap(
        _addr: usize,
        _len: usize,
        _prot: c_int,
        _flags: c_int,
        _fd: c_int,
        _off: off_t,
        _next: Next<'_, Address>,
    ) -> Served<Address> {
        None
    }
    /// mmap and mmap64 with MAP_FIXED of memory the backend does not serve (anonymous, or
    /// a descriptor it does not claim): the kernel's mapping replaces whatever was at
    /// `[addr, addr + len)`, which may be one of the backend's (`next` makes it).
    fn mmap_over(_addr: usize, _len: usize, _next: Next<'_, Address>) -> Served<Address> {
        None
    }
    /// Every mremap (`new_addr` as the caller passed it: read only with MREMAP_FIXED).
    fn mremap(
        _old: usize,
        _old_len: usize,
        _new_len: usize,
        _flags: c_int,
        _new_addr: usize,
        _next: Next<'_, Address>,
    ) -> Served<Address> {
        None
    }
    /// Every munmap.
    fn munmap(_addr: usize, _len: usize, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    /// Every mprotect.
    fn mprotect(_addr: usize, _len: usize, _prot: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    /// Every msync.
    fn msync(_addr: usize, _len: usize, _flags: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
}
