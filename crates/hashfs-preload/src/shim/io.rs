//! Data: read, write and their positional and vector forms, lseek, sync, truncate, fallocate, hints.

use super::*;
use hashfs::FallocateMode;

pub(super) fn with_file<T>(
    fd: c_int,
    f: impl FnOnce(&OpenFile, &File<MmapDevice>) -> Result<T, c_int>,
) -> Result<T, c_int> {
    let s = shim();
    let of = s.file(fd).ok_or(libc::EBADF)?;
    s.fs()?;
    let file = of.file.as_ref().ok_or(libc::EISDIR)?;
    f(&of, file)
}

pub(super) fn ret_size(r: Result<usize, c_int>) -> ssize_t {
    match r {
        Ok(n) => n as ssize_t,
        Err(e) => fail(e),
    }
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

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    if ours(fd) {
        // SAFETY: libc's contract: buf holds count bytes.
        let b = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, count) };
        return guarded(|| {
            ret_size(with_file(fd, |of, f| {
                let mut pos = of.pos.lock();
                let n = read_into(f, *pos, b)?;
                *pos += n as u64;
                Ok(n)
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(read: fn(c_int, *mut c_void, size_t) -> ssize_t)(fd, buf, count) }
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    if ours(fd) {
        // SAFETY: libc's contract: buf holds count bytes.
        let b = unsafe { std::slice::from_raw_parts(buf as *const u8, count) };
        return guarded(|| {
            ret_size(with_file(fd, |of, f| {
                let mut pos = of.pos.lock();
                if of.flags.load(Ordering::Relaxed) & libc::O_APPEND != 0 {
                    // O_APPEND may have been set after open (fcntl F_SETFL).
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
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(write: fn(c_int, *const c_void, size_t) -> ssize_t)(fd, buf, count) }
}

#[no_mangle]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, count: size_t, off: off_t) -> ssize_t {
    if ours(fd) {
        if off < 0 {
            return fail(libc::EINVAL);
        }
        // SAFETY: libc's contract: buf holds count bytes.
        let b = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, count) };
        return guarded(|| ret_size(with_file(fd, |_, f| read_into(f, off as u64, b)))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(pread: fn(c_int, *mut c_void, size_t, off_t) -> ssize_t)(fd, buf, count, off) }
}

#[no_mangle]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, count: size_t, off: off_t) -> ssize_t {
    // SAFETY: same contract (off_t is 64-bit here).
    unsafe { pread(fd, buf, count, off) }
}

#[no_mangle]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, count: size_t, off: off_t) -> ssize_t {
    if ours(fd) {
        if off < 0 {
            return fail(libc::EINVAL);
        }
        // SAFETY: libc's contract: buf holds count bytes.
        let b = unsafe { std::slice::from_raw_parts(buf as *const u8, count) };
        return guarded(|| {
            ret_size(with_file(fd, |of, f| {
                let n = write_from(f, off as u64, b)?;
                mmap::file_changed(of, off as u64, off as u64 + n as u64);
                Ok(n)
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(pwrite: fn(c_int, *const c_void, size_t, off_t) -> ssize_t)(fd, buf, count, off) }
}

#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, count: size_t, off: off_t) -> ssize_t {
    // SAFETY: same contract.
    unsafe { pwrite(fd, buf, count, off) }
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t {
    if ours(fd) {
        let mut total = 0isize;
        for i in 0..n.max(0) as usize {
            // SAFETY: libc's contract: iov has n entries.
            let v = unsafe { *iov.add(i) };
            // SAFETY: as for read.
            let r = unsafe { read(fd, v.iov_base, v.iov_len) };
            if r < 0 {
                return if total > 0 { total } else { r };
            }
            total += r;
            if (r as usize) < v.iov_len {
                break;
            }
        }
        return total;
    }
    // SAFETY: forwarding.
    unsafe { real!(readv: fn(c_int, *const libc::iovec, c_int) -> ssize_t)(fd, iov, n) }
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t {
    if ours(fd) {
        // One write of the gathered bytes, so that O_APPEND writes stay whole.
        let mut buf = Vec::new();
        for i in 0..n.max(0) as usize {
            // SAFETY: libc's contract: iov has n entries, each of iov_len bytes.
            let v = unsafe { *iov.add(i) };
            // SAFETY: as above.
            buf.extend_from_slice(unsafe { std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len) });
        }
        // SAFETY: buf is valid for its length.
        return unsafe { write(fd, buf.as_ptr() as *const c_void, buf.len()) };
    }
    // SAFETY: forwarding.
    unsafe { real!(writev: fn(c_int, *const libc::iovec, c_int) -> ssize_t)(fd, iov, n) }
}

#[no_mangle]
pub unsafe extern "C" fn lseek(fd: c_int, off: off_t, whence: c_int) -> off_t {
    if ours(fd) {
        return guarded(|| {
            let s = shim();
            let Some(of) = s.file(fd) else { return fail(libc::EBADF) };
            let size = match s.fs().and_then(|fs| fs.peek_attr(of.ino).map_err(|e| e.errno())) {
                Ok(m) => m.size as i64,
                Err(e) => return fail(e),
            };
            let mut pos = of.pos.lock();
            let new = match whence {
                libc::SEEK_SET => off,
                libc::SEEK_CUR => *pos as i64 + off,
                libc::SEEK_END => size + off,
                libc::SEEK_DATA if off < size => off,
                libc::SEEK_HOLE if off < size => size,
                libc::SEEK_DATA | libc::SEEK_HOLE => return fail(libc::ENXIO),
                _ => return fail(libc::EINVAL),
            };
            if new < 0 {
                return fail(libc::EINVAL);
            }
            *pos = new as u64;
            new
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(lseek: fn(c_int, off_t, c_int) -> off_t)(fd, off, whence) }
}

#[no_mangle]
pub unsafe extern "C" fn lseek64(fd: c_int, off: off_t, whence: c_int) -> off_t {
    // SAFETY: same contract.
    unsafe { lseek(fd, off, whence) }
}

/// fsync, or fdatasync (`data_only`: the times a write left in DRAM may stay there).
pub(super) fn sync_fd(fd: c_int, data_only: bool) -> c_int {
    match with_file(fd, |_, f| if data_only { f.sync_data() } else { f.sync_all() }.map_err(|e| e.errno())) {
        Ok(()) => 0,
        Err(libc::EISDIR) => 0, // fsync of a directory: every operation is durable already
        Err(e) => fail(e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    if ours(fd) {
        return guarded(|| sync_fd(fd, false)).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fsync: fn(c_int) -> c_int)(fd) }
}

#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    if ours(fd) {
        return guarded(|| sync_fd(fd, true)).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fdatasync: fn(c_int) -> c_int)(fd) }
}

pub(super) fn truncate_fd(fd: c_int, len: off_t) -> c_int {
    if len < 0 {
        return fail(libc::EINVAL);
    }
    match with_file(fd, |of, f| {
        // Shrinking under a shared mapping would leave it on freed blocks.
        if is_mapped(of.ino) && (len as u64) < f.metadata().map_err(|e| e.errno())?.size {
            return Err(libc::EBUSY);
        }
        f.set_len(len as u64).map_err(|e| e.errno())?;
        mmap::file_changed(of, 0, 0);
        Ok(())
    }) {
        Ok(()) => 0,
        Err(libc::EBADF) if shim().file(fd).is_some() => fail(libc::EINVAL),
        Err(e) => fail(e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: off_t) -> c_int {
    if ours(fd) {
        return guarded(|| truncate_fd(fd, len)).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(ftruncate: fn(c_int, off_t) -> c_int)(fd, len) }
}

#[no_mangle]
pub unsafe extern "C" fn ftruncate64(fd: c_int, len: off_t) -> c_int {
    // SAFETY: same contract.
    unsafe { ftruncate(fd, len) }
}

pub(super) fn path_op<T>(
    path: *const c_char,
    f: impl FnOnce(&FileSystem<MmapDevice>, &Path) -> Result<T, Error>,
) -> Option<Result<T, c_int>> {
    let p = guarded(|| fs_path(path)).flatten()?;
    guarded(|| {
        let s = shim();
        let fs = s.fs()?;
        f(fs, &p).map_err(|e| e.errno())
    })
}

pub(super) fn ret0(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => fail(e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn truncate(path: *const c_char, len: off_t) -> c_int {
    if let Some(r) = path_op(path, |fs, p| {
        if len < 0 {
            return Err(Error::Invalid("negative length"));
        }
        let f = fs.open_file(p, hashfs::OpenOptions::new().write(true))?;
        if is_mapped(f.ino()) && (len as u64) < f.metadata()?.size {
            return Err(Error::Busy);
        }
        f.set_len(len as u64)?;
        mmap::file_changed_ino(f.ino(), 0, 0);
        Ok(())
    }) {
        return ret0(r);
    }
    // SAFETY: forwarding.
    unsafe { real!(truncate: fn(*const c_char, off_t) -> c_int)(path, len) }
}

#[no_mangle]
pub unsafe extern "C" fn truncate64(path: *const c_char, len: off_t) -> c_int {
    // SAFETY: same contract.
    unsafe { truncate(path, len) }
}

pub(super) fn allocate_fd(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    if off < 0 || len <= 0 {
        return libc::EINVAL;
    }
    let Some(mode) = hashfs::FallocateMode::from_linux_flags(mode) else {
        return libc::EOPNOTSUPP; // collapse, insert, unshare
    };
    match with_file(fd, |of, f| {
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
    }) {
        Ok(()) => 0,
        Err(e) => e,
    }
}

#[no_mangle]
pub unsafe extern "C" fn fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    if ours(fd) {
        let e = guarded(|| allocate_fd(fd, mode, off, len)).unwrap_or(libc::EIO);
        return if e == 0 { 0 } else { fail(e) };
    }
    // SAFETY: forwarding.
    unsafe { real!(fallocate: fn(c_int, c_int, off_t, off_t) -> c_int)(fd, mode, off, len) }
}

#[no_mangle]
pub unsafe extern "C" fn fallocate64(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    // SAFETY: same contract.
    unsafe { fallocate(fd, mode, off, len) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fallocate(fd: c_int, off: off_t, len: off_t) -> c_int {
    if ours(fd) {
        // posix_fallocate returns the error number instead of setting errno.
        return guarded(|| allocate_fd(fd, 0, off, len)).unwrap_or(libc::EIO);
    }
    // SAFETY: forwarding.
    unsafe { real!(posix_fallocate: fn(c_int, off_t, off_t) -> c_int)(fd, off, len) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fallocate64(fd: c_int, off: off_t, len: off_t) -> c_int {
    // SAFETY: same contract.
    unsafe { posix_fallocate(fd, off, len) }
}

#[no_mangle]
pub unsafe extern "C" fn sync_file_range(fd: c_int, off: off_t, len: off_t, flags: c_uint) -> c_int {
    if ours(fd) {
        return 0; // every write is durable when it returns
    }
    // SAFETY: forwarding.
    unsafe { real!(sync_file_range: fn(c_int, off_t, off_t, c_uint) -> c_int)(fd, off, len, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn readahead(fd: c_int, off: off_t, count: size_t) -> ssize_t {
    if ours(fd) {
        return 0; // nothing to read ahead into: reads come straight from the image
    }
    // SAFETY: forwarding.
    unsafe { real!(readahead: fn(c_int, off_t, size_t) -> ssize_t)(fd, off, count) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fadvise(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int {
    if ours(fd) {
        return 0; // no page cache to advise
    }
    // SAFETY: forwarding.
    unsafe { real!(posix_fadvise: fn(c_int, off_t, off_t, c_int) -> c_int)(fd, off, len, advice) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fadvise64(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int {
    // SAFETY: same contract.
    unsafe { posix_fadvise(fd, off, len, advice) }
}
