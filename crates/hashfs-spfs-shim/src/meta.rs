//! Attributes, names, mappings and copies. A stat of a promoted file shows its merged
//! length and modification time; a name removed may be a promoted file's last; a memory
//! mapping, and a copy the kernel makes between descriptors, would reach the lower file
//! behind the stack, so the file is written back first (and a mapped file stays below for
//! the rest of the process: the mapping outlives every descriptor).

use crate::*;
use hashfs_interpose::{Address, Attributes, Copies, Errno, LastLink, Mappings, Next, RangeCopy, Served};
use libc::off_t;
use std::cell::Cell;
use std::ffi::CStr;

/// The merged attributes of lower file `key`, if it is promoted; `under` says whether the
/// file stat'ed is under the lower directory, asked only before the stack is open.
fn merged(key: (u64, u64), under: impl FnOnce() -> bool) -> Option<hashfs_spfs::MergedAttr> {
    if lower()?.dev != key.0 {
        return None;
    }
    let stack = stack_if(under)?;
    if !hashfs_spfs::any_promoted() {
        return None;
    }
    stack.merged_attr(key)
}

/// The kernel's stat, with a promoted file's merged length, blocks and mtime.
fn patched(st: Result<libc::stat, Errno>, under: impl FnOnce() -> bool) -> Served<libc::stat> {
    let mut st = st;
    if let Ok(st) = &mut st {
        if let Some(m) = merged((st.st_dev, st.st_ino), under) {
            st.st_size = m.size as i64;
            st.st_blocks = st.st_blocks.max(m.blocks as i64);
            st.st_mtime = m.mtime_ns.div_euclid(1_000_000_000);
            st.st_mtime_nsec = m.mtime_ns.rem_euclid(1_000_000_000);
        }
    }
    Some(st)
}

impl Attributes for Spfs {
    fn stat_at(dirfd: c_int, path: &CStr, flags: c_int, next: Next<'_, libc::stat>) -> Served<libc::stat> {
        lower()?;
        let mut st = next.call();
        if st.as_ref().is_err_and(|e| e.0 == libc::ENOENT) && opened_now(dirfd, path) {
            st = next.call(); // a file made again at the stack's opening
        }
        patched(st, || at_under(dirfd, path, LastLink::of_at_flags(flags)))
    }

    fn fstat(fd: c_int, next: Next<'_, libc::stat>) -> Served<libc::stat> {
        patched(next.call(), || dir_of(fd).is_some_and(|p| path_under(&p, LastLink::Follow)))
    }

    fn statx(
        dirfd: c_int,
        path: &CStr,
        flags: c_int,
        _: libc::c_uint,
        next: Next<'_, libc::statx>,
    ) -> Served<libc::statx> {
        lower()?;
        let mut x = next.call();
        if x.as_ref().is_err_and(|e| e.0 == libc::ENOENT) && opened_now(dirfd, path) {
            x = next.call(); // a file made again at the stack's opening
        }
        if let Ok(x) = &mut x {
            let under = || at_under(dirfd, path, LastLink::of_at_flags(flags));
            if let Some(m) = merged((libc::makedev(x.stx_dev_major, x.stx_dev_minor), x.stx_ino), under) {
                x.stx_size = m.size;
                x.stx_blocks = x.stx_blocks.max(m.blocks);
                x.stx_mtime.tv_sec = m.mtime_ns.div_euclid(1_000_000_000);
                x.stx_mtime.tv_nsec = m.mtime_ns.rem_euclid(1_000_000_000) as u32;
            }
        }
        Some(x)
    }
}

// ---------------------------------------------------------------------------------------
// Names.

/// The lower file `(dirfd, path)` names now, if any file is promoted (else nothing to do).
pub(crate) fn named(dirfd: c_int, path: &CStr) -> Option<(u64, u64)> {
    lower()?;
    let key = fd::path_key(dirfd, path, LastLink::NoFollow)?;
    stack_if(|| at_under(dirfd, path, LastLink::NoFollow))?;
    hashfs_spfs::any_promoted().then_some(key)
}

/// Before a name of `key` goes: a file made in PM drops its made record with its last
/// name (`hashfs-spfs/src/remake.rs`).
pub(crate) fn name_going(key: Option<(u64, u64)>) -> Result<(), Errno> {
    match (key, STACKED.get().and_then(|s| s.stack.as_ref())) {
        (Some(_), Some(stack)) => stack.removing_name(key).map_err(|e| Errno::of_io(&e)),
        _ => Ok(()),
    }
}

/// After a name of `key` went: a promoted file with no name left loses its PM copy (at
/// its last close).
pub(crate) fn name_gone(key: Option<(u64, u64)>) {
    if key.is_none() {
        return;
    }
    if let Some(stack) = STACKED.get().and_then(|s| s.stack.as_ref()) {
        stack.name_removed(key);
    }
}

impl hashfs_interpose::Metadata for Spfs {}

impl hashfs_interpose::Xattrs for Spfs {}

// ---------------------------------------------------------------------------------------
// Mappings and kernel copies.

/// Brings a tracked descriptor's file below (written back if promoted, offset handed back
/// to the kernel) and pins it there; the cell to unpin.
fn below(fd: c_int) -> Result<Option<Shared>, Errno> {
    let s = stacked();
    let Some(d) = s.desc(fd) else { return Ok(None) };
    let Some(stack) = s.stack.as_ref() else { return Err(Errno::IO) };
    if FORKED.load(Ordering::Relaxed) {
        return Err(Errno::IO);
    }
    fd::pin_below(stack, &d.cell).map_err(Errno)?;
    // Pinned below: nothing moves the offset but the kernel from here on.
    io::kernel_pos(&d, fd);
    Ok(Some(d.cell.clone()))
}

impl Mappings for Spfs {
    #[allow(clippy::too_many_arguments)] // mmap's own six, and libc's call
    fn mmap(_: usize, _: usize, _: c_int, _: c_int, fd: c_int, _: off_t, next: Next<'_, Address>) -> Served<Address> {
        // Pinned for good: the mapping outlives the descriptor.
        Some(below(fd).and_then(|_| next.call()))
    }
}

/// Runs a kernel copy between descriptors with the tracked ones' files below and pinned
/// for its duration.
fn copy_below(fds: [c_int; 2], next: Next<'_, usize>) -> Served<usize> {
    let mut pins = Vec::new();
    for fd in fds {
        if stacked().tracked(fd) {
            match below(fd) {
                Ok(Some(c)) => pins.push(c),
                Ok(None) => {}
                Err(e) => {
                    pins.iter().for_each(fd::unpin);
                    return Some(Err(e));
                }
            }
        }
    }
    let r = next.call();
    pins.iter().for_each(fd::unpin);
    Some(r)
}

impl Copies for Spfs {
    fn copy_range(
        _: RangeCopy,
        fd_in: c_int,
        _: Option<&Cell<off_t>>,
        fd_out: c_int,
        _: Option<&Cell<off_t>>,
        _: usize,
        _: libc::c_uint,
        next: Next<'_, usize>,
    ) -> Served<usize> {
        copy_below([fd_in, fd_out], next)
    }

    fn sendfile(
        out_fd: c_int,
        in_fd: c_int,
        _: Option<&Cell<off_t>>,
        _: usize,
        next: Next<'_, usize>,
    ) -> Served<usize> {
        copy_below([in_fd, out_fd], next)
    }
}
