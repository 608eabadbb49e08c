//! Data: read, write and their positional and vector forms, lseek, sync, truncate, fallocate, hints
//! (the interposer's [`Data`] calls; the vector forms' work is in `vector`).

use super::*;
use hashfs::{FallocateMode, Seek};
use hashfs_interpose::{Data, Errno, IoVecs, Next, Offset, Posix, Served};

pub(super) fn with_file<T>(
    fd: c_int,
    f: impl FnOnce(&OpenFile, &File<MmapDevice>) -> Result<T, c_int>,
) -> Result<T, c_int> {
    with_file_or(fd, libc::EISDIR, f)
}

/// [`with_file`] for a call that changes the file: a directory's descriptor (open for
/// reading only, as every directory's is) is EBADF, as Linux checks the descriptor's mode
/// before what it names.
pub(super) fn with_file_to_change<T>(
    fd: c_int,
    f: impl FnOnce(&OpenFile, &File<MmapDevice>) -> Result<T, c_int>,
) -> Result<T, c_int> {
    with_file_or(fd, libc::EBADF, f)
}

fn with_file_or<T>(
    fd: c_int,
    dir: c_int,
    f: impl FnOnce(&OpenFile, &File<MmapDevice>) -> Result<T, c_int>,
) -> Result<T, c_int> {
    let s = shim();
    let of = s.file(fd).ok_or(libc::EBADF)?;
    s.fs()?;
    if of.flags.load(Ordering::Relaxed) & libc::O_PATH != 0 {
        return Err(libc::EBADF); // an O_PATH descriptor reads, writes and syncs nothing
    }
    let file = of.file.as_ref().ok_or(dir)?;
    f(&of, file)
}

pub(super) fn read_into(file: &File<MmapDevice>, off: u64, buf: &mut [u8]) -> Result<usize, c_int> {
    mmap::fill_holes_in(buf)?;
    file.read_at(off, buf).map_err(|e| e.errno())
}

pub(super) fn write_from(file: &File<MmapDevice>, off: u64, data: &[u8]) -> Result<usize, c_int> {
    file.write_at(off, data).map_err(|e| e.errno()).and_then(|n| {
        if n == 0 && !data.is_empty() {
            Err(libc::ENOSPC)
        } else {
            Ok(n)
        }
    })
}

/// fsync or fdatasync.
fn sync_fd(fd: c_int, scope: SyncScope) -> Result<(), c_int> {
    match with_file(fd, |_, f| f.sync(scope).map_err(|e| e.errno())) {
        Err(libc::EISDIR) => Ok(()), // fsync of a directory: every operation is durable already
        r => r,
    }
}

/// A sync of `fd`: the shim's descriptor, or a standard descriptor that a pump feeds its
/// file through (what the pipe holds written first); None for any other (the kernel's).
fn sync_served(fd: c_int, scope: SyncScope) -> Served<()> {
    if SHIM.get().is_some_and(|s| s.is_ours(fd)) {
        return served(sync_fd(fd, scope));
    }
    let of = super::pump::pumped_file(fd)?;
    served(super::pump::sync_pumped(&of, scope))
}

fn truncate_fd(fd: c_int, len: off_t) -> Result<(), c_int> {
    if len < 0 {
        return Err(libc::EINVAL);
    }
    match with_file_to_change(fd, |of, f| {
        // Shrinking under a shared mapping would leave it on freed blocks.
        if is_mapped(of.ino) && (len as u64) < f.metadata().map_err(|e| e.errno())?.size {
            return Err(libc::EBUSY);
        }
        f.set_len(len as u64).map_err(|e| e.errno())?;
        mmap::file_changed(of, 0, 0);
        Ok(())
    }) {
        Err(libc::EBADF) if shim().file(fd).is_some() => Err(libc::EINVAL),
        r => r,
    }
}

fn allocate_fd(fd: c_int, mode: c_int, off: off_t, len: off_t) -> Result<(), c_int> {
    if off < 0 || len <= 0 {
        return Err(libc::EINVAL);
    }
    let Some(mode) = hashfs::FallocateMode::from_linux_flags(mode) else {
        return Err(libc::EOPNOTSUPP); // collapse, insert, unshare
    };
    with_file_to_change(fd, |of, f| {
        // A punched block still mapped by a shared mapping would be freed under it: with
        // shared mappings the range is zeroed in place instead (it reads as zeros all the
        // same; the blocks stay allocated).
        let mode = match mode {
            FallocateMode::PunchHole if is_mapped(of.ino) => FallocateMode::ZeroRangeKeepSize,
            m => m,
        };
        f.fallocate(off as u64, len as u64, mode).map_err(|e| e.errno())?;
        mmap::file_changed(of, off as u64, off as u64 + len as u64);
        Ok(())
    })
}

/// A read at the file position, which it advances.
fn read_here(fd: c_int, b: &mut [u8]) -> Result<usize, c_int> {
    with_file(fd, |of, f| {
        let mut pos = of.pos.lock();
        let n = read_into(f, *pos, b)?;
        *pos += n as u64;
        Ok(n)
    })
}

/// A write at the file position (at the end with O_APPEND, which may have been set after
/// open by fcntl F_SETFL), which it advances.
fn write_here(fd: c_int, b: &[u8]) -> Result<usize, c_int> {
    with_file_to_change(fd, |of, f| {
        let mut pos = of.pos.lock();
        if of.flags.load(Ordering::Relaxed) & libc::O_APPEND != 0 {
            let (n, end) = f.append(b).map_err(|e| e.errno())?;
            *pos = end;
            drop(pos);
            mmap::file_changed(of, end - n as u64, end);
            return Ok(n);
        }
        let at = *pos;
        let n = write_from(f, at, b)?;
        *pos += n as u64;
        drop(pos);
        mmap::file_changed(of, at, at + n as u64);
        Ok(n)
    })
}

fn seek(fd: c_int, off: off_t, whence: c_int) -> Result<off_t, c_int> {
    let of = shim().file(fd).ok_or(libc::EBADF)?;
    seek_in(&of, off, whence)
}

/// lseek's work on open file `of` (a descriptor's, or a pump's: `pump::seek_pumped`).
pub(super) fn seek_in(of: &OpenFile, off: off_t, whence: c_int) -> Result<off_t, c_int> {
    let fs = shim().fs()?;
    // The size only where it counts (an lseek to the current offset is common: stdio's
    // ftell, a shell's redirection).
    let size = || fs.peek_attr(of.ino).map(|m| m.size as i64).map_err(|e| e.errno());
    let mut pos = of.pos.lock();
    let new = match whence {
        libc::SEEK_SET => off,
        libc::SEEK_CUR => *pos as i64 + off,
        libc::SEEK_END => size()? + off,
        libc::SEEK_DATA | libc::SEEK_HOLE => {
            // (A negative offset is ENXIO, as tmpfs answers.)
            let what = if whence == libc::SEEK_DATA { Seek::Data } else { Seek::Hole };
            let off = u64::try_from(off).map_err(|_| libc::ENXIO)?;
            fs.seek(of.ino, off, what).map_err(|e| e.errno())?.ok_or(libc::ENXIO)? as i64
        }
        _ => return Err(libc::EINVAL),
    };
    if new < 0 {
        return Err(libc::EINVAL);
    }
    *pos = new as u64;
    Ok(new)
}

/// A result of the shim's own functions (errors as errno values) as the interposer's.
pub(super) fn served<T>(r: Result<T, c_int>) -> Served<T> {
    Some(r.map_err(Errno))
}

impl Data for Preload {
    fn read(fd: c_int, buf: &mut [u8], _: Next<'_, usize>) -> Served<usize> {
        served(read_here(fd, buf))
    }

    fn write(fd: c_int, buf: &[u8], _: Next<'_, usize>) -> Served<usize> {
        served(write_here(fd, buf))
    }

    fn pread(fd: c_int, buf: &mut [u8], off: off_t, _: Next<'_, usize>) -> Served<usize> {
        if off < 0 {
            return served(Err(libc::EINVAL));
        }
        served(with_file(fd, |_, f| read_into(f, off as u64, buf)))
    }

    fn pwrite(fd: c_int, buf: &[u8], off: off_t, _: Next<'_, usize>) -> Served<usize> {
        if off < 0 {
            return served(Err(libc::EINVAL));
        }
        served(with_file_to_change(fd, |of, f| {
            let n = write_from(f, off as u64, buf)?;
            mmap::file_changed(of, off as u64, off as u64 + n as u64);
            Ok(n)
        }))
    }

    fn readv(fd: c_int, mut iov: IoVecs<'_>, _: Next<'_, usize>) -> Served<usize> {
        let mut total = 0;
        for i in 0..iov.count() {
            let b = iov.buf_mut(i);
            let want = b.len();
            match read_here(fd, b) {
                Err(e) if total == 0 => return served(Err(e)),
                Err(_) => break,
                Ok(n) => {
                    total += n;
                    if n < want {
                        break;
                    }
                }
            }
        }
        served(Ok(total))
    }

    fn writev(fd: c_int, iov: IoVecs<'_>, _: Next<'_, usize>) -> Served<usize> {
        // One write of the gathered bytes, so that O_APPEND writes stay whole.
        served(write_here(fd, &iov.gather()))
    }

    fn preadv(fd: c_int, iov: IoVecs<'_>, off: off_t, flags: Option<c_int>, _: Next<'_, usize>) -> Served<usize> {
        served(vector::read_vec(fd, iov, off, flags))
    }

    fn pwritev(fd: c_int, iov: IoVecs<'_>, off: off_t, flags: Option<c_int>, _: Next<'_, usize>) -> Served<usize> {
        served(vector::write_vec(fd, iov, off, flags))
    }

    fn lseek(fd: c_int, off: off_t, whence: c_int, _: Next<'_, Offset>) -> Served<Offset> {
        if !SHIM.get().is_some_and(|s| s.is_ours(fd)) {
            // A standard descriptor: its output pump's file, or the kernel's.
            return served(super::pump::seek_pumped(fd, off, whence)?.map(Offset));
        }
        served(seek(fd, off, whence).map(Offset))
    }

    fn fsync(fd: c_int, _: Next<'_, ()>) -> Served<()> {
        sync_served(fd, SyncScope::All)
    }

    fn fdatasync(fd: c_int, _: Next<'_, ()>) -> Served<()> {
        sync_served(fd, SyncScope::DataOnly)
    }

    /// Every write to the image is durable when it returns (the file system's own syncs
    /// are a fence at most): what a pump still holds is written first.
    fn syncfs(fd: c_int, _: Next<'_, ()>) -> Served<()> {
        sync_served(fd, SyncScope::All)
    }

    fn sync_file_range(_: c_int, off: off_t, len: off_t, flags: c_uint, _: Next<'_, ()>) -> Served<()> {
        const KNOWN: c_uint =
            libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        if flags & !KNOWN != 0 || off < 0 || len < 0 || off.checked_add(len).is_none() {
            return served(Err(libc::EINVAL)); // as Linux
        }
        served(Ok(())) // every write is durable when it returns
    }

    fn ftruncate(fd: c_int, len: off_t, _: Next<'_, ()>) -> Served<()> {
        if !SHIM.get().is_some_and(|s| s.is_ours(fd)) {
            // A standard descriptor: its output pump's file, or the kernel's.
            return served(super::pump::truncate_pumped(fd, len)?);
        }
        served(truncate_fd(fd, len))
    }

    fn fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t, _: Next<'_, ()>) -> Served<()> {
        served(allocate_fd(fd, mode, off, len))
    }

    fn posix_fallocate(fd: c_int, off: off_t, len: off_t, _: Next<'_, Posix>) -> Served<Posix> {
        served(allocate_fd(fd, 0, off, len).map(|()| Posix))
    }

    fn posix_fadvise(_: c_int, _: off_t, len: off_t, advice: c_int, _: Next<'_, Posix>) -> Served<Posix> {
        let known = matches!(
            advice,
            libc::POSIX_FADV_NORMAL
                | libc::POSIX_FADV_RANDOM
                | libc::POSIX_FADV_SEQUENTIAL
                | libc::POSIX_FADV_WILLNEED
                | libc::POSIX_FADV_DONTNEED
                | libc::POSIX_FADV_NOREUSE
        );
        if !known || len < 0 {
            return served(Err(libc::EINVAL)); // as Linux
        }
        served(Ok(Posix)) // no page cache to advise
    }

    fn readahead(fd: c_int, _: off_t, _: usize, _: Next<'_, usize>) -> Served<usize> {
        // Nothing to read ahead into (reads come straight from the image); Linux's answers
        // for a descriptor not open for reading (EBADF) and for a directory (EINVAL).
        served(match with_file(fd, |of, _| Ok(of.flags.load(Ordering::Relaxed) & libc::O_ACCMODE)) {
            Ok(libc::O_WRONLY) => Err(libc::EBADF),
            Ok(_) => Ok(0),
            Err(libc::EISDIR) => Err(libc::EINVAL),
            Err(e) => Err(e),
        })
    }
}
