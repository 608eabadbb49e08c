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
use hashfs_interpose::IoVecs;

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

fn check_flags(flags: c_int) -> Result<(), c_int> {
    if flags & !RWF_KNOWN != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(())
}

/// Reads into the buffers at `off` (or at the file position, advancing it, when -1).
pub(super) fn read_vec(fd: c_int, mut iov: IoVecs<'_>, off: off_t, flags: Option<c_int>) -> Result<usize, c_int> {
    let (v2, flags) = (flags.is_some(), flags.unwrap_or(0));
    iov.total().map_err(|e| e.0)?;
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
        for i in 0..iov.count() {
            let b = iov.buf_mut(i);
            let len = b.len();
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
pub(super) fn write_vec(fd: c_int, iov: IoVecs<'_>, off: off_t, flags: Option<c_int>) -> Result<usize, c_int> {
    let (v2, flags) = (flags.is_some(), flags.unwrap_or(0));
    iov.total().map_err(|e| e.0)?;
    check_flags(flags)?;
    if off < -1 || (off == -1 && !v2) {
        return Err(libc::EINVAL);
    }
    let data = iov.gather();
    super::io::with_file_to_change(fd, |of, f| {
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
            if iov.count() != 1 || !len.is_power_of_two() || !(ATOMIC_UNIT_MIN..=max).contains(&len) || at % len != 0 {
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
