//! Data and syncs on tracked descriptors. A file below is the kernel's (its writes and
//! offset-moving reads run with the file's state locked, so that a promotion cannot slip
//! between; positional reads do not lock); a promoted file is served from the stack:
//! writes into PM, reads from the merged view, fsync a fence, the file offset kept here.

use crate::*;
use hashfs::SyncScope;
use hashfs_interpose::{Data, Errno, IoVecs, LastLink, Names, Next, Offset, Posix, Served};
use hashfs_spfs::FileGuard;
use libc::off_t;
use std::borrow::Cow;
use std::ffi::CStr;

/// Makes the kernel's offset the descriptor's again after the file went back below
/// (the caller holds the file's state, or the file is pinned below).
pub(crate) fn kernel_pos(d: &Desc, fd: c_int) {
    let p = d.pos.load(Ordering::Relaxed);
    if p != KERNEL_POS {
        // SAFETY: the caller's descriptor.
        unsafe { real!(lseek: fn(c_int, off_t, c_int) -> off_t)(fd, p, libc::SEEK_SET) };
        d.pos.store(KERNEL_POS, Ordering::Relaxed);
    }
}

/// The descriptor's offset while its file is promoted (taken from the kernel at first use).
fn promoted_pos(d: &Desc, fd: c_int) -> i64 {
    let p = d.pos.load(Ordering::Relaxed);
    if p != KERNEL_POS {
        return p;
    }
    // SAFETY: the caller's descriptor.
    let k = unsafe { real!(lseek: fn(c_int, off_t, c_int) -> off_t)(fd, 0, libc::SEEK_CUR) };
    let k = k.max(0);
    d.pos.store(k, Ordering::Relaxed);
    k
}

fn lookup(fd: c_int) -> Result<(&'static Arc<Stack>, Arc<Desc>), Errno> {
    let s = stacked();
    match (s.stack.as_ref(), s.desc(fd)) {
        (Some(stack), Some(d)) => Ok((stack, d)),
        // A tracked descriptor whose stack is gone (cannot happen once tracked): EIO, loudly.
        _ => Err(Errno::IO),
    }
}

/// A child made by fork() that did not exec does not share the parent's PM state: its
/// calls on tracked descriptors fail.
fn refused_in_child() -> Result<(), Errno> {
    if FORKED.load(Ordering::Relaxed) {
        return Err(Errno::IO);
    }
    Ok(())
}

/// A write of `data()` (gathered only for PM) at `at`, or at the offset; `next` writes to
/// the lower file when the file is below.
fn write_common<'a>(
    fd: c_int,
    at: Option<i64>,
    data: impl FnOnce() -> Cow<'a, [u8]>,
    next: Next<'_, usize>,
) -> Result<usize, Errno> {
    let (stack, d) = lookup(fd)?;
    refused_in_child()?;
    let mut st = d.cell.lock();
    if st.pm.is_some() {
        let flags = d.flags.load(Ordering::Relaxed);
        if flags & libc::O_ACCMODE == libc::O_RDONLY {
            return Err(Errno::BADF);
        }
        let size = st.pm.as_ref().map_or(0, |p| p.size);
        let off = if flags & libc::O_APPEND != 0 {
            size as i64
        } else {
            match at {
                Some(o) if o < 0 => return Err(Errno::INVAL),
                Some(o) => o,
                None => promoted_pos(&d, fd),
            }
        };
        let buf = data();
        st.profile.wrote(buf.len() as u64, std::time::Instant::now());
        match stack.write_promoted(&mut st, off as u64, &buf) {
            Ok(Some(n)) => {
                if at.is_none() {
                    d.pos.store(off + n as i64, Ordering::Relaxed);
                }
                return Ok(n);
            }
            Ok(None) => {} // PM was full: the file went back below, and so does this write
            Err(e) => return Err(Errno::of_io(&e)),
        }
        kernel_pos(&d, fd);
        return next.call();
    }
    kernel_pos(&d, fd);
    let n = next.call()?;
    if n > 0 {
        st.profile.wrote(n as u64, std::time::Instant::now());
    }
    Ok(n)
}

/// A read of `len` bytes at `at`, or at the offset, handed to `scatter`; `next` reads
/// the lower file when the file is below.
fn read_common(
    fd: c_int,
    at: Option<i64>,
    len: usize,
    scatter: impl FnOnce(&[u8]),
    next: Next<'_, usize>,
) -> Result<usize, Errno> {
    let Some(d) = stacked().desc(fd) else { return next.call() };
    refused_in_child()?;
    // Reads of a file below need no lock: a promotion changes nothing below. They count
    // for the Sync Factor at the next fsync.
    if !d.cell.promoted() && (at.is_some() || d.pos.load(Ordering::Relaxed) == KERNEL_POS) {
        d.cell.read_below();
        return next.call();
    }
    let (stack, _) = lookup(fd)?;
    let mut st = d.cell.lock();
    if st.pm.is_none() {
        kernel_pos(&d, fd);
        st.profile.read(&stack.cfg.profiler, std::time::Instant::now());
        return next.call();
    }
    if d.flags.load(Ordering::Relaxed) & libc::O_ACCMODE == libc::O_WRONLY {
        return Err(Errno::BADF);
    }
    let off = match at {
        Some(o) if o < 0 => return Err(Errno::INVAL),
        Some(o) => o,
        None => promoted_pos(&d, fd),
    };
    let mut buf = vec![0u8; len];
    let n = stack.read(&mut st, &view(fd), off as u64, &mut buf).map_err(|e| Errno::of_io(&e))?;
    scatter(&buf[..n]);
    if at.is_none() {
        d.pos.store(off + n as i64, Ordering::Relaxed);
    }
    Ok(n)
}

/// An offset of -1 (`preadv2`, `pwritev2`): the file position.
fn at_of(off: off_t, flags: Option<c_int>) -> Option<i64> {
    if flags.is_some() && off == -1 {
        None
    } else {
        Some(off)
    }
}

/// `*v2` flags with no PM form (RWF_ATOMIC and the rest; RWF_DSYNC/RWF_SYNC are what a
/// promoted file's writes are anyway): refused for a promoted file.
fn refused_flags(fd: c_int, flags: Option<c_int>) -> Result<(), Errno> {
    let f = flags.unwrap_or(0);
    if f & !(libc::RWF_DSYNC | libc::RWF_SYNC | libc::RWF_HIPRI) != 0
        && stacked().desc(fd).is_some_and(|d| d.cell.promoted())
    {
        return Err(Errno(libc::EOPNOTSUPP));
    }
    Ok(())
}

/// Runs `f` on the locked state of a tracked descriptor's file.
fn with_file<T>(fd: c_int, f: impl FnOnce(&Arc<Stack>, &Desc, &mut FileGuard) -> Result<T, Errno>) -> Result<T, Errno> {
    let (stack, d) = lookup(fd)?;
    refused_in_child()?;
    let mut st = d.cell.lock();
    f(stack, &d, &mut st)
}

fn sync_common(fd: c_int, scope: SyncScope) -> Result<(), Errno> {
    if EXITED.load(Ordering::Acquire) && !keep_at_exit() {
        // After the exit write-back: the lower file's own fsync, and no promotion.
        return hashfs_spfs::lower::sync(&view(fd), scope).map_err(|e| Errno::of_io(&e));
    }
    with_file(fd, |stack, _, st| {
        let was = st.pm.is_some();
        st.fold_reads(&stack.cfg.profiler);
        stack.fsync(st, &view(fd), scope).map_err(|e| Errno::of_io(&e))?;
        if (!was && st.pm.is_some()) || stack.settling_wanted() {
            // A promotion, or a syncfs an open asked for, which the thread runs
            // (`hashfs-spfs/src/settled.rs`).
            stacked().demoter_running(stack);
        }
        Ok(())
    })
}

/// fallocate on a tracked descriptor: the stack's rules for a promoted file, the kernel's
/// (with the state locked) below.
fn allocate<T>(fd: c_int, mode: c_int, off: off_t, len: off_t, next: Next<'_, T>) -> Result<(), Errno> {
    if off < 0 || len <= 0 {
        return Err(Errno::INVAL);
    }
    with_file(fd, |stack, _, st| {
        if st.pm.is_none() {
            return next.call().map(|_| ());
        }
        stack.allocate(st, &view(fd), mode, off as u64, len as u64).map_err(|e| Errno::of_io(&e))
    })
}

impl Data for Spfs {
    fn read(fd: c_int, buf: &mut [u8], next: Next<'_, usize>) -> Served<usize> {
        let len = buf.len();
        Some(read_common(fd, None, len, |data| buf[..data.len()].copy_from_slice(data), next))
    }

    fn write(fd: c_int, buf: &[u8], next: Next<'_, usize>) -> Served<usize> {
        Some(write_common(fd, None, || Cow::Borrowed(buf), next))
    }

    fn pread(fd: c_int, buf: &mut [u8], off: off_t, next: Next<'_, usize>) -> Served<usize> {
        let len = buf.len();
        Some(read_common(fd, Some(off), len, |data| buf[..data.len()].copy_from_slice(data), next))
    }

    fn pwrite(fd: c_int, buf: &[u8], off: off_t, next: Next<'_, usize>) -> Served<usize> {
        Some(write_common(fd, Some(off), || Cow::Borrowed(buf), next))
    }

    fn readv(fd: c_int, mut iov: IoVecs<'_>, next: Next<'_, usize>) -> Served<usize> {
        let len = iov.total();
        Some(len.and_then(|len| read_common(fd, None, len, |data| iov.scatter(data), next)))
    }

    fn writev(fd: c_int, iov: IoVecs<'_>, next: Next<'_, usize>) -> Served<usize> {
        Some(write_common(fd, None, || Cow::Owned(iov.gather()), next))
    }

    fn preadv(
        fd: c_int,
        mut iov: IoVecs<'_>,
        off: off_t,
        flags: Option<c_int>,
        next: Next<'_, usize>,
    ) -> Served<usize> {
        let len = iov.total();
        Some(len.and_then(|len| read_common(fd, at_of(off, flags), len, |data| iov.scatter(data), next)))
    }

    fn pwritev(fd: c_int, iov: IoVecs<'_>, off: off_t, flags: Option<c_int>, next: Next<'_, usize>) -> Served<usize> {
        Some(
            refused_flags(fd, flags)
                .and_then(|()| write_common(fd, at_of(off, flags), || Cow::Owned(iov.gather()), next)),
        )
    }

    fn lseek(fd: c_int, off: off_t, whence: c_int, next: Next<'_, Offset>) -> Served<Offset> {
        if !<crate::Spfs as hashfs_interpose::Backend>::claims(fd) {
            return None; // a standard descriptor this shim does not track: the kernel's
        }
        let r = with_file(fd, |_, d, st| {
            let Some(p) = st.pm.as_ref() else {
                kernel_pos(d, fd);
                return next.call();
            };
            let size = p.size as i64;
            let new = match whence {
                libc::SEEK_SET => Some(off),
                libc::SEEK_CUR => promoted_pos(d, fd).checked_add(off),
                libc::SEEK_END => size.checked_add(off),
                // The merged file has no holes it would report: all data to its end.
                libc::SEEK_DATA if off < size => Some(off),
                libc::SEEK_HOLE if off < size => Some(size),
                libc::SEEK_DATA | libc::SEEK_HOLE => return Err(Errno(libc::ENXIO)),
                _ => return Err(Errno::INVAL),
            };
            match new {
                Some(n) if n >= 0 => {
                    d.pos.store(n, Ordering::Relaxed);
                    Ok(Offset(n))
                }
                _ => Err(Errno::INVAL),
            }
        });
        Some(r)
    }

    // The interposer asks for standard descriptors too (the preload shim's may be pumps):
    // one this shim does not track is the kernel's.
    fn fsync(fd: c_int, _: Next<'_, ()>) -> Served<()> {
        <crate::Spfs as hashfs_interpose::Backend>::claims(fd).then(|| sync_common(fd, SyncScope::All))
    }

    fn fdatasync(fd: c_int, _: Next<'_, ()>) -> Served<()> {
        <crate::Spfs as hashfs_interpose::Backend>::claims(fd).then(|| sync_common(fd, SyncScope::DataOnly))
    }

    fn sync_file_range(fd: c_int, _: off_t, _: off_t, _: libc::c_uint, _: Next<'_, ()>) -> Served<()> {
        // A promoted file's writes are in PM, flushed, when they return.
        stacked().desc(fd).is_some_and(|d| d.cell.promoted()).then_some(Ok(()))
    }

    fn ftruncate(fd: c_int, len: off_t, _: Next<'_, ()>) -> Served<()> {
        if !<crate::Spfs as hashfs_interpose::Backend>::claims(fd) {
            return None; // a standard descriptor this shim does not track: the kernel's
        }
        if len < 0 {
            return Some(Err(Errno::INVAL));
        }
        Some(with_file(fd, |stack, d, st| {
            if st.pm.is_some() && d.flags.load(Ordering::Relaxed) & libc::O_ACCMODE == libc::O_RDONLY {
                return Err(Errno::INVAL);
            }
            stack.truncate(st, &view(fd), len as u64).map_err(|e| Errno::of_io(&e))
        }))
    }

    fn fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t, next: Next<'_, ()>) -> Served<()> {
        Some(allocate(fd, mode, off, len, next))
    }

    fn posix_fallocate(fd: c_int, off: off_t, len: off_t, next: Next<'_, Posix>) -> Served<Posix> {
        Some(allocate(fd, 0, off, len, next).map(|()| Posix))
    }
}

impl Names for Spfs {
    /// truncate of a promoted file: the stack's order (PM first, then the lower file);
    /// any other file is the kernel's.
    fn truncate(path: &CStr, len: off_t, _: Next<'_, ()>) -> Served<()> {
        lower()?;
        let key = fd::path_key(libc::AT_FDCWD, path, LastLink::Follow)?;
        let stack = stack_if(|| at_under(libc::AT_FDCWD, path, LastLink::Follow))?;
        if !hashfs_spfs::any_promoted() {
            return None;
        }
        let cell = stack.existing(key)?;
        let mut st = cell.lock();
        let p = st.pm.as_mut()?;
        if len < 0 {
            return Some(Err(Errno::INVAL));
        }
        Some(stack.store.set_len(p, len as u64).map_err(|e| Errno::of_io(&e)))
    }

    fn unlink_at(dirfd: c_int, path: &CStr, flags: c_int, next: Next<'_, ()>) -> Served<()> {
        let key = if flags & libc::AT_REMOVEDIR == 0 { meta::named(dirfd, path) } else { None };
        if let Err(e) = meta::name_going(key) {
            return Some(Err(e));
        }
        Some(next.call().inspect(|()| meta::name_gone(key)))
    }

    fn rename_at(_: c_int, _: &CStr, fd2: c_int, to: &CStr, flags: libc::c_uint, next: Next<'_, ()>) -> Served<()> {
        let key = if flags & libc::RENAME_EXCHANGE == 0 { meta::named(fd2, to) } else { None };
        if let Err(e) = meta::name_going(key) {
            return Some(Err(e));
        }
        Some(next.call().inspect(|()| meta::name_gone(key)))
    }
}
