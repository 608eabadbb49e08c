//! Attributes, names, mappings and copies. A stat of a promoted file shows its merged
//! length and modification time; a name removed may be a promoted file's last; a memory
//! mapping, and a copy the kernel makes between descriptors, would reach the lower file
//! behind the stack, so the file is written back first (and a mapped file stays below for
//! the rest of the process: the mapping outlives every descriptor).

use crate::*;
use hashfs_interpose::{Attributes, Errno, Next, Served};
use libc::{off_t, size_t, ssize_t};
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
        patched(next.call(), || at_under(dirfd, path, flags & libc::AT_SYMLINK_NOFOLLOW == 0))
    }

    fn fstat(fd: c_int, next: Next<'_, libc::stat>) -> Served<libc::stat> {
        patched(next.call(), || dir_of(fd).is_some_and(|p| path_under(&p, true)))
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
        if let Ok(x) = &mut x {
            let under = || at_under(dirfd, path, flags & libc::AT_SYMLINK_NOFOLLOW == 0);
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
    let key = fd::path_key(dirfd, path, false)?;
    stack_if(|| at_under(dirfd, path, false))?;
    hashfs_spfs::any_promoted().then_some(key)
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

// ---------------------------------------------------------------------------------------
// Mappings and kernel copies.

/// Brings a tracked descriptor's file below (written back if promoted, offset handed back
/// to the kernel) and pins it there; the cell to unpin, or an errno.
fn below(s: &'static Stacked, fd: c_int) -> Result<Option<Shared>, c_int> {
    guarded(|| -> Result<Option<Shared>, c_int> {
        let Some(d) = s.desc(fd) else { return Ok(None) };
        let Some(stack) = s.stack.as_ref() else { return Err(libc::EIO) };
        if FORKED.load(Ordering::Relaxed) {
            return Err(libc::EIO);
        }
        fd::pin_below(stack, &d.cell)?;
        // Pinned below: nothing moves the offset but the kernel from here on.
        io::kernel_pos(&d, fd);
        Ok(Some(d.cell.clone()))
    })
    .unwrap_or(Ok(None))
}

#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    let real = real!(mmap: fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void);
    if flags & libc::MAP_ANONYMOUS == 0 {
        if let Some(s) = ours(fd) {
            // Pinned for good: the mapping outlives the descriptor.
            if let Err(e) = below(s, fd) {
                set_errno(e);
                return libc::MAP_FAILED;
            }
        }
    }
    // SAFETY: forwarding.
    unsafe { real(addr, len, prot, flags, fd, off) }
}

#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    // SAFETY: same contract.
    unsafe { mmap(addr, len, prot, flags, fd, off) }
}

/// Runs a kernel copy between descriptors with the tracked ones' files below and pinned
/// for its duration.
fn copy_below(fds: [c_int; 2], real: impl FnOnce() -> ssize_t) -> ssize_t {
    let mut pins = Vec::new();
    for fd in fds {
        if let Some(s) = ours(fd) {
            match below(s, fd) {
                Ok(Some(c)) => pins.push(c),
                Ok(None) => {}
                Err(e) => {
                    guarded(|| pins.iter().for_each(fd::unpin));
                    return fail(e);
                }
            }
        }
    }
    let r = real();
    let e = errno();
    guarded(|| pins.iter().for_each(fd::unpin));
    set_errno(e);
    r
}

#[no_mangle]
pub unsafe extern "C" fn copy_file_range(
    fd_in: c_int,
    off_in: *mut i64,
    fd_out: c_int,
    off_out: *mut i64,
    len: size_t,
    flags: libc::c_uint,
) -> ssize_t {
    let real = real!(copy_file_range: fn(c_int, *mut i64, c_int, *mut i64, size_t, libc::c_uint) -> ssize_t);
    // SAFETY: forwarding.
    copy_below([fd_in, fd_out], || unsafe { real(fd_in, off_in, fd_out, off_out, len, flags) })
}

#[no_mangle]
pub unsafe extern "C" fn sendfile(out_fd: c_int, in_fd: c_int, offset: *mut off_t, count: size_t) -> ssize_t {
    let real = real!(sendfile: fn(c_int, c_int, *mut off_t, size_t) -> ssize_t);
    // SAFETY: forwarding.
    copy_below([in_fd, out_fd], || unsafe { real(out_fd, in_fd, offset, count) })
}

#[no_mangle]
pub unsafe extern "C" fn sendfile64(out_fd: c_int, in_fd: c_int, offset: *mut off_t, count: size_t) -> ssize_t {
    // SAFETY: same contract.
    unsafe { sendfile(out_fd, in_fd, offset, count) }
}

#[no_mangle]
pub unsafe extern "C" fn splice(
    fd_in: c_int,
    off_in: *mut i64,
    fd_out: c_int,
    off_out: *mut i64,
    len: size_t,
    flags: libc::c_uint,
) -> ssize_t {
    let real = real!(splice: fn(c_int, *mut i64, c_int, *mut i64, size_t, libc::c_uint) -> ssize_t);
    // SAFETY: forwarding.
    copy_below([fd_in, fd_out], || unsafe { real(fd_in, off_in, fd_out, off_out, len, flags) })
}
