//! The vector and `*v2` read/write family: `preadv`, `pwritev`, `preadv2`, `pwritev2` (and
//! their `64` names). `readv`/`writev` are in the parent module.
//!
//! `*v2` flags as Linux has them: `RWF_HIPRI`, `RWF_DSYNC`, `RWF_SYNC` and `RWF_NOWAIT` are
//! accepted (every write is durable when it returns and nothing waits on a device);
//! `RWF_APPEND` writes at the end; `RWF_NOAPPEND` ignores `O_APPEND`; `RWF_ATOMIC` makes
//! the write untorn (`File::write_atomic_at`) under Linux's rules: one buffer, a power of
//! two of bytes between the units `statx` reports (4 KiB and the image's untorn limit),
//! at an offset that is a multiple of its length, else EINVAL (Linux also asks for
//! `O_DIRECT`, which means nothing here: there is no page cache to bypass). Any other flag
//! is EOPNOTSUPP. An offset of -1 uses and advances the file position, as
//! `readv`/`writev`.

use super::*;

const RWF_HIPRI: c_int = 0x1;
const RWF_DSYNC: c_int = 0x2;
const RWF_SYNC: c_int = 0x4;
const RWF_NOWAIT: c_int = 0x8;
const RWF_APPEND: c_int = 0x10;
const RWF_NOAPPEND: c_int = 0x20;
const RWF_ATOMIC: c_int = libc::RWF_ATOMIC;
const RWF_KNOWN: c_int = RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT | RWF_APPEND | RWF_NOAPPEND | RWF_ATOMIC;

/// The smallest untorn write `statx` reports (one block).
pub(super) const ATOMIC_UNIT_MIN: u64 = 4096;

/// The buffers of an iovec array, checked as the kernel does (count, total length).
///
/// # Safety
/// `iov` points to `n` iovecs whose buffers are valid for their lengths.
unsafe fn buffers(iov: *const libc::iovec, n: c_int) -> Result<Vec<(*mut u8, usize)>, c_int> {
    if !(0..=libc::UIO_MAXIOV).contains(&n) {
        return Err(libc::EINVAL);
    }
    let mut out = Vec::with_capacity(n as usize);
    let mut total: usize = 0;
    for i in 0..n as usize {
        // SAFETY: the caller's contract.
        let v = unsafe { *iov.add(i) };
        total = total.checked_add(v.iov_len).filter(|&t| t <= isize::MAX as usize).ok_or(libc::EINVAL)?;
        out.push((v.iov_base as *mut u8, v.iov_len));
    }
    Ok(out)
}

fn check_flags(flags: c_int) -> Result<(), c_int> {
    if flags & !RWF_KNOWN != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(())
}

/// Reads into the buffers at `off` (or at the file position, advancing it, when -1).
fn read_vec(fd: c_int, bufs: &[(*mut u8, usize)], off: off_t, flags: c_int, v2: bool) -> Result<usize, c_int> {
    check_flags(flags)?;
    if off < -1 || (off == -1 && !v2) {
        return Err(libc::EINVAL);
    }
    with_file(fd, |of, f| {
        if of.flags.load(Ordering::Relaxed) & libc::O_ACCMODE == libc::O_WRONLY {
            return Err(libc::EBADF);
        }
        let mut pos = of.pos.lock();
        let start = if off == -1 { *pos } else { off as u64 };
        let mut done = 0u64;
        for &(p, len) in bufs {
            // SAFETY: the caller's iovec contract.
            let b = unsafe { std::slice::from_raw_parts_mut(p, len) };
            let mut filled = 0;
            while filled < len {
                let n = read_into(f, start + done + filled as u64, &mut b[filled..])?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            done += filled as u64;
            if filled < len {
                break;
            }
        }
        if off == -1 {
            *pos = start + done;
        }
        Ok(done as usize)
    })
}

/// Writes the gathered buffers as one write (so that an append stays whole).
fn write_vec(fd: c_int, bufs: &[(*mut u8, usize)], off: off_t, flags: c_int, v2: bool) -> Result<usize, c_int> {
    check_flags(flags)?;
    if off < -1 || (off == -1 && !v2) {
        return Err(libc::EINVAL);
    }
    let mut data = Vec::with_capacity(bufs.iter().map(|b| b.1).sum());
    for &(p, len) in bufs {
        // SAFETY: the caller's iovec contract.
        data.extend_from_slice(unsafe { std::slice::from_raw_parts(p as *const u8, len) });
    }
    with_file(fd, |of, f| {
        let open_flags = of.flags.load(Ordering::Relaxed);
        if open_flags & libc::O_ACCMODE == libc::O_RDONLY {
            return Err(libc::EBADF);
        }
        let append = flags & RWF_APPEND != 0 || (open_flags & libc::O_APPEND != 0 && flags & RWF_NOAPPEND == 0);
        let mut pos = of.pos.lock();
        let (at, n) = if flags & RWF_ATOMIC != 0 {
            let at = match (append, off) {
                (true, _) => f.metadata().map_err(|e| e.errno())?.size,
                (false, -1) => *pos,
                (false, o) => o as u64,
            };
            let len = data.len() as u64;
            let max = shim().fs()?.untorn_write_max_aligned();
            if bufs.len() != 1 || !len.is_power_of_two() || !(ATOMIC_UNIT_MIN..=max).contains(&len) || at % len != 0 {
                return Err(libc::EINVAL);
            }
            let end = if append { f.append_atomic(&data) } else { f.write_atomic_at(at, &data) };
            let end = end.map_err(|e| e.errno())?;
            if off == -1 {
                *pos = end;
            }
            (end - len, data.len())
        } else if append {
            // Linux: with O_APPEND (or RWF_APPEND) the write goes to the end, whatever the
            // offset; the position moves only for the offset -1.
            let (n, end) = f.append(&data).map_err(|e| e.errno())?;
            if off == -1 {
                *pos = end;
            }
            (end - n as u64, n)
        } else {
            let at = if off == -1 { *pos } else { off as u64 };
            let mut done = 0;
            while done < data.len() {
                done += write_from(f, at + done as u64, &data[done..])?;
            }
            if off == -1 {
                *pos = at + done as u64;
            }
            (at, done)
        };
        drop(pos);
        super::mmap::file_changed(of, at, at + n as u64);
        Ok(n)
    })
}

macro_rules! vector_fns {
    ($name:ident, $name64:ident, $op:ident, $v2:expr, ($($flag:ident)?), [$($argty:ty),*]) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(fd: c_int, iov: *const libc::iovec, n: c_int, off: off_t $(, $flag: c_int)?) -> ssize_t {
            if ours(fd) {
                return guarded(|| {
                    // SAFETY: libc's contract for iov and n.
                    let r = unsafe { buffers(iov, n) }.and_then(|b| $op(fd, &b, off, 0 $(| $flag)?, $v2));
                    ret_size(r)
                })
                .unwrap_or(-1);
            }
            // SAFETY: forwarding.
            unsafe { real!($name: fn($($argty),*) -> ssize_t)(fd, iov, n, off $(, $flag)?) }
        }
        #[no_mangle]
        pub unsafe extern "C" fn $name64(fd: c_int, iov: *const libc::iovec, n: c_int, off: off_t $(, $flag: c_int)?) -> ssize_t {
            // SAFETY: same contract (off_t is 64-bit here).
            unsafe { $name(fd, iov, n, off $(, $flag)?) }
        }
    };
}

vector_fns!(preadv, preadv64, read_vec, false, (), [c_int, *const libc::iovec, c_int, off_t]);
vector_fns!(pwritev, pwritev64, write_vec, false, (), [c_int, *const libc::iovec, c_int, off_t]);
vector_fns!(preadv2, preadv64v2, read_vec, true, (flags), [c_int, *const libc::iovec, c_int, off_t, c_int]);
vector_fns!(pwritev2, pwritev64v2, write_vec, true, (flags), [c_int, *const libc::iovec, c_int, off_t, c_int]);
