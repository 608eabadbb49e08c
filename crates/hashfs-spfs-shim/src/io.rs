//! Data and syncs on tracked descriptors. A file below is the kernel's (its writes and
//! offset-moving reads run with the file's state locked, so that a promotion cannot slip
//! between; positional reads do not lock); a promoted file is served from the stack:
//! writes into PM, reads from the merged view, fsync a fence, the file offset kept here.

use crate::*;
use hashfs_spfs::FileGuard;
use libc::{iovec, off_t, size_t, ssize_t};
use std::borrow::Cow;

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

fn lookup(s: &'static Stacked, fd: c_int) -> Option<(&'static Arc<Stack>, Arc<Desc>)> {
    Some((s.stack.as_ref()?, s.desc(fd)?))
}

fn refused_in_child() -> bool {
    FORKED.load(Ordering::Relaxed)
}

/// A write of `data()` (gathered only for PM) at `at`, or at the offset; `real` writes to
/// the lower file when the file is below.
fn write_common<'a>(
    s: &'static Stacked,
    fd: c_int,
    at: Option<i64>,
    data: impl FnOnce() -> Cow<'a, [u8]>,
    real: impl FnOnce() -> ssize_t,
) -> ssize_t {
    let r = guarded(|| -> Option<ssize_t> {
        let (stack, d) = lookup(s, fd)?;
        if refused_in_child() {
            return Some(fail(libc::EIO));
        }
        let mut st = d.cell.lock();
        if st.pm.is_some() {
            let flags = d.flags.load(Ordering::Relaxed);
            if flags & libc::O_ACCMODE == libc::O_RDONLY {
                return Some(fail(libc::EBADF));
            }
            let size = st.pm.as_ref().map_or(0, |p| p.size);
            let off = if flags & libc::O_APPEND != 0 {
                size as i64
            } else {
                match at {
                    Some(o) if o < 0 => return Some(fail(libc::EINVAL)),
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
                    return Some(n as ssize_t);
                }
                Ok(None) => {} // PM was full: the file went back below, and so does this write
                Err(e) => return Some(fail(io_errno(&e))),
            }
            kernel_pos(&d, fd);
            return Some(real());
        }
        kernel_pos(&d, fd);
        let n = real();
        if n > 0 {
            st.profile.wrote(n as u64, std::time::Instant::now());
        }
        Some(n)
    })
    .flatten();
    r.unwrap_or_else(real_fallback)
}

/// A tracked descriptor whose stack is gone (cannot happen once tracked): EIO, loudly.
fn real_fallback() -> ssize_t {
    fail(libc::EIO)
}

/// A read of `len` bytes at `at`, or at the offset, handed to `scatter`; `real` reads the
/// lower file when the file is below.
fn read_common(
    s: &'static Stacked,
    fd: c_int,
    at: Option<i64>,
    len: usize,
    scatter: impl FnOnce(&[u8]),
    real: impl FnOnce() -> ssize_t,
) -> ssize_t {
    let Some(d) = s.desc(fd) else { return real() };
    if FORKED.load(Ordering::Relaxed) {
        return fail(libc::EIO);
    }
    // Reads of a file below need no lock: a promotion changes nothing below.
    if !d.cell.promoted() && (at.is_some() || d.pos.load(Ordering::Relaxed) == KERNEL_POS) {
        return real();
    }
    let r = guarded(|| -> Option<ssize_t> {
        let stack = s.stack.as_ref()?;
        let mut st = d.cell.lock();
        if st.pm.is_none() {
            kernel_pos(&d, fd);
            return Some(real());
        }
        if d.flags.load(Ordering::Relaxed) & libc::O_ACCMODE == libc::O_WRONLY {
            return Some(fail(libc::EBADF));
        }
        let off = match at {
            Some(o) if o < 0 => return Some(fail(libc::EINVAL)),
            Some(o) => o,
            None => promoted_pos(&d, fd),
        };
        let mut buf = vec![0u8; len];
        match stack.read(&mut st, &view(fd), off as u64, &mut buf) {
            Ok(n) => {
                scatter(&buf[..n]);
                if at.is_none() {
                    d.pos.store(off + n as i64, Ordering::Relaxed);
                }
                Some(n as ssize_t)
            }
            Err(e) => Some(fail(io_errno(&e))),
        }
    })
    .flatten();
    r.unwrap_or_else(real_fallback)
}

/// # Safety
/// `buf` holds `count` bytes (libc's contract).
unsafe fn slice<'a>(buf: *const c_void, count: size_t) -> &'a [u8] {
    if count == 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(buf as *const u8, count) }
}

/// The iovecs' bytes, gathered.
///
/// # Safety
/// `iov` points to `n` iovecs (libc's contract).
unsafe fn gather(iov: *const iovec, n: c_int) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n.max(0) as usize {
        // SAFETY: the caller's contract.
        let v = unsafe { &*iov.add(i) };
        // SAFETY: each iovec describes a readable buffer.
        out.extend_from_slice(unsafe { slice(v.iov_base, v.iov_len) });
    }
    out
}

/// Spreads `data` over the iovecs.
///
/// # Safety
/// As [`gather`], with writable buffers.
unsafe fn scatter(iov: *const iovec, n: c_int, mut data: &[u8]) {
    for i in 0..n.max(0) as usize {
        if data.is_empty() {
            break;
        }
        // SAFETY: the caller's contract.
        let v = unsafe { &*iov.add(i) };
        let k = v.iov_len.min(data.len());
        // SAFETY: each iovec describes a writable buffer of iov_len bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), v.iov_base as *mut u8, k) };
        data = &data[k..];
    }
}

fn iov_len(iov: *const iovec, n: c_int) -> usize {
    // SAFETY: libc's contract: iov points to n iovecs.
    (0..n.max(0) as usize).map(|i| unsafe { (*iov.add(i)).iov_len }).sum()
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    let real = real!(write: fn(c_int, *const c_void, size_t) -> ssize_t);
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real(fd, buf, count) };
    };
    // SAFETY: libc's contract for buf; forwarding.
    write_common(s, fd, None, || Cow::Borrowed(unsafe { slice(buf, count) }), || unsafe { real(fd, buf, count) })
}

#[no_mangle]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, count: size_t, off: off_t) -> ssize_t {
    let real = real!(pwrite: fn(c_int, *const c_void, size_t, off_t) -> ssize_t);
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real(fd, buf, count, off) };
    };
    // SAFETY: as write.
    write_common(
        s,
        fd,
        Some(off),
        || Cow::Borrowed(unsafe { slice(buf, count) }),
        || unsafe { real(fd, buf, count, off) },
    )
}

#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, count: size_t, off: off_t) -> ssize_t {
    // SAFETY: same contract.
    unsafe { pwrite(fd, buf, count, off) }
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    let real = real!(writev: fn(c_int, *const iovec, c_int) -> ssize_t);
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real(fd, iov, n) };
    };
    // SAFETY: libc's contract for iov; forwarding.
    write_common(s, fd, None, || Cow::Owned(unsafe { gather(iov, n) }), || unsafe { real(fd, iov, n) })
}

#[no_mangle]
pub unsafe extern "C" fn pwritev(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t {
    let real = real!(pwritev: fn(c_int, *const iovec, c_int, off_t) -> ssize_t);
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real(fd, iov, n, off) };
    };
    // SAFETY: as writev.
    write_common(s, fd, Some(off), || Cow::Owned(unsafe { gather(iov, n) }), || unsafe { real(fd, iov, n, off) })
}

#[no_mangle]
pub unsafe extern "C" fn pwritev64(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t {
    // SAFETY: same contract.
    unsafe { pwritev(fd, iov, n, off) }
}

#[no_mangle]
pub unsafe extern "C" fn pwritev2(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t {
    let real = real!(pwritev2: fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t);
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real(fd, iov, n, off, flags) };
    };
    // RWF_DSYNC/RWF_SYNC: a promoted file's writes are durable when they return anyway;
    // RWF_ATOMIC and the rest have no PM form here: refused for a promoted file.
    let at = if off == -1 { None } else { Some(off) };
    if flags & !(libc::RWF_DSYNC | libc::RWF_SYNC | libc::RWF_HIPRI) != 0
        && s.desc(fd).is_some_and(|d| d.cell.promoted())
    {
        return fail(libc::EOPNOTSUPP);
    }
    // SAFETY: as writev.
    write_common(s, fd, at, || Cow::Owned(unsafe { gather(iov, n) }), || unsafe { real(fd, iov, n, off, flags) })
}

#[no_mangle]
pub unsafe extern "C" fn pwritev64v2(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t {
    // SAFETY: same contract.
    unsafe { pwritev2(fd, iov, n, off, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    let real = real!(read: fn(c_int, *mut c_void, size_t) -> ssize_t);
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real(fd, buf, count) };
    };
    read_common(
        s,
        fd,
        None,
        count,
        // SAFETY: buf holds count bytes; data is at most count long.
        |data| unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf as *mut u8, data.len()) },
        // SAFETY: forwarding.
        || unsafe { real(fd, buf, count) },
    )
}

#[no_mangle]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, count: size_t, off: off_t) -> ssize_t {
    let real = real!(pread: fn(c_int, *mut c_void, size_t, off_t) -> ssize_t);
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real(fd, buf, count, off) };
    };
    read_common(
        s,
        fd,
        Some(off),
        count,
        // SAFETY: as read.
        |data| unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf as *mut u8, data.len()) },
        // SAFETY: forwarding.
        || unsafe { real(fd, buf, count, off) },
    )
}

#[no_mangle]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, count: size_t, off: off_t) -> ssize_t {
    // SAFETY: same contract.
    unsafe { pread(fd, buf, count, off) }
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    let real = real!(readv: fn(c_int, *const iovec, c_int) -> ssize_t);
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real(fd, iov, n) };
    };
    // SAFETY: libc's contract for iov; forwarding.
    read_common(s, fd, None, iov_len(iov, n), |data| unsafe { scatter(iov, n, data) }, || unsafe { real(fd, iov, n) })
}

#[no_mangle]
pub unsafe extern "C" fn preadv(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t {
    let real = real!(preadv: fn(c_int, *const iovec, c_int, off_t) -> ssize_t);
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real(fd, iov, n, off) };
    };
    // SAFETY: as readv.
    read_common(
        s,
        fd,
        Some(off),
        iov_len(iov, n),
        |data| unsafe { scatter(iov, n, data) },
        || unsafe { real(fd, iov, n, off) },
    )
}

#[no_mangle]
pub unsafe extern "C" fn preadv64(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t {
    // SAFETY: same contract.
    unsafe { preadv(fd, iov, n, off) }
}

#[no_mangle]
pub unsafe extern "C" fn preadv2(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t {
    let real = real!(preadv2: fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t);
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real(fd, iov, n, off, flags) };
    };
    let at = if off == -1 { None } else { Some(off) };
    // SAFETY: as readv.
    read_common(
        s,
        fd,
        at,
        iov_len(iov, n),
        |data| unsafe { scatter(iov, n, data) },
        || unsafe { real(fd, iov, n, off, flags) },
    )
}

#[no_mangle]
pub unsafe extern "C" fn preadv64v2(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t {
    // SAFETY: same contract.
    unsafe { preadv2(fd, iov, n, off, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn lseek(fd: c_int, off: off_t, whence: c_int) -> off_t {
    let real = real!(lseek: fn(c_int, off_t, c_int) -> off_t);
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real(fd, off, whence) };
    };
    let r = guarded(|| -> Option<off_t> {
        let d = s.desc(fd)?;
        let st = d.cell.lock();
        let Some(p) = st.pm.as_ref() else {
            kernel_pos(&d, fd);
            // SAFETY: forwarding.
            return Some(unsafe { real(fd, off, whence) });
        };
        let size = p.size as i64;
        let new = match whence {
            libc::SEEK_SET => Some(off),
            libc::SEEK_CUR => promoted_pos(&d, fd).checked_add(off),
            libc::SEEK_END => size.checked_add(off),
            // The merged file has no holes it would report: all data to its end.
            libc::SEEK_DATA if off < size => Some(off),
            libc::SEEK_HOLE if off < size => Some(size),
            libc::SEEK_DATA | libc::SEEK_HOLE => return Some(fail(libc::ENXIO)),
            _ => return Some(fail(libc::EINVAL)),
        };
        match new {
            Some(n) if n >= 0 => {
                d.pos.store(n, Ordering::Relaxed);
                Some(n)
            }
            _ => Some(fail(libc::EINVAL)),
        }
    })
    .flatten();
    r.unwrap_or_else(|| real_fallback() as off_t)
}

#[no_mangle]
pub unsafe extern "C" fn lseek64(fd: c_int, off: off_t, whence: c_int) -> off_t {
    // SAFETY: same contract.
    unsafe { lseek(fd, off, whence) }
}

/// Runs `f` on the locked state of a tracked descriptor's file; -1 with errno on error.
fn with_file(s: &'static Stacked, fd: c_int, f: impl FnOnce(&Arc<Stack>, &Desc, &mut FileGuard) -> c_int) -> c_int {
    guarded(|| -> Option<c_int> {
        let (stack, d) = lookup(s, fd)?;
        if refused_in_child() {
            return Some(fail(libc::EIO));
        }
        let mut st = d.cell.lock();
        Some(f(stack, &d, &mut st))
    })
    .flatten()
    .unwrap_or_else(|| fail(libc::EIO))
}

fn sync_common(s: &'static Stacked, fd: c_int, datasync: bool) -> c_int {
    if EXITED.load(Ordering::Acquire) && !keep_at_exit() {
        // After the exit write-back: the lower file's own fsync, and no promotion.
        return guarded(|| {
            let v = view(fd);
            let r = if datasync { v.sync_data() } else { v.sync_all() };
            r.map_or_else(|e| fail(io_errno(&e)), |_| 0)
        })
        .unwrap_or_else(|| fail(libc::EIO));
    }
    with_file(s, fd, |stack, _, st| {
        let was = st.pm.is_some();
        match stack.fsync(st, &view(fd), datasync) {
            Ok(()) => {
                if !was && st.pm.is_some() {
                    s.demoter_running(stack);
                }
                0
            }
            Err(e) => fail(io_errno(&e)),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    match ours(fd) {
        Some(s) => sync_common(s, fd, false),
        // SAFETY: forwarding.
        None => unsafe { real!(fsync: fn(c_int) -> c_int)(fd) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    match ours(fd) {
        Some(s) => sync_common(s, fd, true),
        // SAFETY: forwarding.
        None => unsafe { real!(fdatasync: fn(c_int) -> c_int)(fd) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn sync_file_range(fd: c_int, off: off_t, len: off_t, flags: libc::c_uint) -> c_int {
    let real = real!(sync_file_range: fn(c_int, off_t, off_t, libc::c_uint) -> c_int);
    match ours(fd) {
        // A promoted file's writes are in PM, flushed, when they return.
        Some(s) if s.desc(fd).is_some_and(|d| d.cell.promoted()) => 0,
        // SAFETY: forwarding.
        _ => unsafe { real(fd, off, len, flags) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: off_t) -> c_int {
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real!(ftruncate: fn(c_int, off_t) -> c_int)(fd, len) };
    };
    if len < 0 {
        return fail(libc::EINVAL);
    }
    with_file(s, fd, |stack, d, st| {
        if st.pm.is_some() && d.flags.load(Ordering::Relaxed) & libc::O_ACCMODE == libc::O_RDONLY {
            return fail(libc::EINVAL);
        }
        match stack.truncate(st, &view(fd), len as u64) {
            Ok(()) => 0,
            Err(e) => fail(io_errno(&e)),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ftruncate64(fd: c_int, len: off_t) -> c_int {
    // SAFETY: same contract.
    unsafe { ftruncate(fd, len) }
}

/// truncate(path) of a promoted file: the stack's order (PM first, then the lower file).
/// None: not a promoted file (the kernel does it).
fn truncate_promoted(path: *const c_char, len: off_t) -> Option<c_int> {
    let key = fd::path_key(libc::AT_FDCWD, path, true)?;
    let stack = stack_if(|| at_under(libc::AT_FDCWD, path, true))?;
    if !hashfs_spfs::any_promoted() {
        return None;
    }
    let cell = stack.existing(key)?;
    let mut st = cell.lock();
    let p = st.pm.as_mut()?;
    if len < 0 {
        return Some(fail(libc::EINVAL));
    }
    Some(match stack.store.set_len(p, len as u64) {
        Ok(()) => 0,
        Err(e) => fail(io_errno(&e)),
    })
}

#[no_mangle]
pub unsafe extern "C" fn truncate(path: *const c_char, len: off_t) -> c_int {
    if !in_shim() && lower().is_some() {
        if let Some(r) = guarded(|| truncate_promoted(path, len)).flatten() {
            return r;
        }
    }
    // SAFETY: forwarding.
    unsafe { real!(truncate: fn(*const c_char, off_t) -> c_int)(path, len) }
}

#[no_mangle]
pub unsafe extern "C" fn truncate64(path: *const c_char, len: off_t) -> c_int {
    // SAFETY: same contract.
    unsafe { truncate(path, len) }
}

/// fallocate on a tracked descriptor: the stack's rules for a promoted file, the kernel's
/// (with the state locked) below. Returns 0 or an errno value.
fn allocate(
    s: &'static Stacked,
    fd: c_int,
    mode: c_int,
    off: off_t,
    len: off_t,
    real: impl FnOnce() -> c_int,
) -> c_int {
    if off < 0 || len <= 0 {
        return libc::EINVAL;
    }
    let r = with_file(s, fd, |stack, _, st| {
        if st.pm.is_none() {
            return match real() {
                0 => 0,
                -1 => fail(errno()),
                e => fail(e),
            };
        }
        match stack.allocate(st, &view(fd), mode, off as u64, len as u64) {
            Ok(()) => 0,
            Err(e) => fail(io_errno(&e)),
        }
    });
    if r == 0 {
        0
    } else {
        errno()
    }
}

#[no_mangle]
pub unsafe extern "C" fn fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    let real = real!(fallocate: fn(c_int, c_int, off_t, off_t) -> c_int);
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real(fd, mode, off, len) };
    };
    // SAFETY: forwarding.
    match allocate(s, fd, mode, off, len, || unsafe { real(fd, mode, off, len) }) {
        0 => 0,
        e => fail(e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fallocate64(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    // SAFETY: same contract.
    unsafe { fallocate(fd, mode, off, len) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fallocate(fd: c_int, off: off_t, len: off_t) -> c_int {
    let real = real!(posix_fallocate: fn(c_int, off_t, off_t) -> c_int);
    let Some(s) = ours(fd) else {
        // SAFETY: forwarding.
        return unsafe { real(fd, off, len) };
    };
    // posix_fallocate returns the error number itself.
    // SAFETY: forwarding.
    allocate(s, fd, 0, off, len, || unsafe { real(fd, off, len) })
}

#[no_mangle]
pub unsafe extern "C" fn posix_fallocate64(fd: c_int, off: off_t, len: off_t) -> c_int {
    // SAFETY: same contract.
    unsafe { posix_fallocate(fd, off, len) }
}
