//! In-kernel copies where a HashFS descriptor is involved: `copy_file_range`, `sendfile`
//! and `splice`. The kernel cannot see HashFS files, so the copy runs here: inside the
//! library when both sides are ours, through a 256 KiB buffer when one side is a kernel
//! descriptor (a file, socket or pipe). Offsets, positions and errors follow Linux: a
//! given offset is used and updated and the position stays; without one the position is
//! used and advanced; flags the call does not know are EINVAL. `tee` needs two pipes, so
//! a HashFS descriptor in it fails, as its placeholder does (EINVAL).

use super::*;
use hashfs_interpose::{Copies, Next, RangeCopy, Served};
use io::served;
use std::cell::Cell;

const CHUNK: usize = 256 * 1024;

/// One end of a copy.
enum End {
    /// A HashFS descriptor.
    Ours(Arc<OpenFile>),
    /// A kernel descriptor.
    Kernel(c_int),
}

impl End {
    fn of(fd: c_int) -> Result<End, c_int> {
        let s = shim();
        if s.is_ours(fd) {
            s.fs()?;
            return s.file(fd).map(End::Ours).ok_or(libc::EBADF);
        }
        Ok(End::Kernel(fd))
    }
}

/// Reads up to `buf.len()` bytes at `off` (or at the position, advancing it).
fn read_end(end: &End, off: Option<u64>, buf: &mut [u8]) -> Result<usize, c_int> {
    match end {
        End::Ours(of) => {
            let f = of.file.as_ref().ok_or(libc::EISDIR)?;
            if of.flags.load(Ordering::Relaxed) & libc::O_ACCMODE == libc::O_WRONLY {
                return Err(libc::EBADF);
            }
            match off {
                Some(o) => read_into(f, o, buf),
                None => {
                    let mut pos = of.pos.lock();
                    let n = read_into(f, *pos, buf)?;
                    *pos += n as u64;
                    Ok(n)
                }
            }
        }
        &End::Kernel(fd) => {
            // SAFETY: buf is valid for its length.
            let n = unsafe {
                match off {
                    Some(o) => real!(pread: fn(c_int, *mut c_void, size_t, off_t) -> ssize_t)(
                        fd,
                        buf.as_mut_ptr() as *mut c_void,
                        buf.len(),
                        o as off_t,
                    ),
                    None => real!(read: fn(c_int, *mut c_void, size_t) -> ssize_t)(
                        fd,
                        buf.as_mut_ptr() as *mut c_void,
                        buf.len(),
                    ),
                }
            };
            if n < 0 {
                Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
            } else {
                Ok(n as usize)
            }
        }
    }
}

/// Writes all of `data` at `off` (or at the position, advancing it); returns the bytes
/// written before an error, or the error if none were.
fn write_end(end: &End, off: Option<u64>, data: &[u8]) -> Result<usize, c_int> {
    match end {
        End::Ours(of) => {
            let f = of.file.as_ref().ok_or(libc::EISDIR)?;
            let flags = of.flags.load(Ordering::Relaxed);
            if flags & libc::O_ACCMODE == libc::O_RDONLY {
                return Err(libc::EBADF);
            }
            let (at, n) = if flags & libc::O_APPEND != 0 {
                let (n, end) = f.append(data).map_err(|e| e.errno())?;
                *of.pos.lock() = end;
                (end - n as u64, n)
            } else {
                let mut pos = of.pos.lock();
                let at = off.unwrap_or(*pos);
                let mut done = 0;
                while done < data.len() {
                    done += write_from(f, at + done as u64, &data[done..])?;
                }
                if off.is_none() {
                    *pos = at + done as u64;
                }
                (at, done)
            };
            mmap::file_changed(of, at, at + n as u64);
            Ok(n)
        }
        &End::Kernel(fd) => {
            let mut done = 0;
            while done < data.len() {
                let rest = &data[done..];
                // SAFETY: rest is valid for its length.
                let n = unsafe {
                    match off {
                        Some(o) => real!(pwrite: fn(c_int, *const c_void, size_t, off_t) -> ssize_t)(
                            fd,
                            rest.as_ptr() as *const c_void,
                            rest.len(),
                            (o + done as u64) as off_t,
                        ),
                        None => real!(write: fn(c_int, *const c_void, size_t) -> ssize_t)(
                            fd,
                            rest.as_ptr() as *const c_void,
                            rest.len(),
                        ),
                    }
                };
                if n < 0 {
                    let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
                    return if done > 0 { Ok(done) } else { Err(e) };
                }
                done += n as usize;
            }
            Ok(done)
        }
    }
}

/// Copies up to `len` bytes; `in_off`/`out_off` are the callers' offsets (updated) or
/// None for the positions.
fn copy(
    fd_in: c_int,
    in_off: Option<&Cell<off_t>>,
    fd_out: c_int,
    out_off: Option<&Cell<off_t>>,
    len: usize,
) -> Result<usize, c_int> {
    let (src, dst) = (End::of(fd_in)?, End::of(fd_out)?);
    let (mut ri, mut wo) = (in_off.map(Cell::get), out_off.map(Cell::get));
    if ri.is_some_and(|o| o < 0) || wo.is_some_and(|o| o < 0) {
        return Err(libc::EINVAL);
    }
    let mut buf = vec![0u8; CHUNK.min(len.max(1))];
    let mut total = 0usize;
    while total < len {
        let want = (len - total).min(buf.len());
        let n = match read_end(&src, ri.map(|o| o as u64), &mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if total == 0 => return Err(e),
            Err(_) => break,
        };
        let w = match write_end(&dst, wo.map(|o| o as u64), &buf[..n]) {
            Ok(w) => w,
            Err(e) if total == 0 => return Err(e),
            Err(_) => break,
        };
        total += w;
        ri = ri.map(|o| o + w as off_t);
        wo = wo.map(|o| o + w as off_t);
        if w < n {
            break;
        }
    }
    if let (Some(c), Some(v)) = (in_off, ri) {
        c.set(v);
    }
    if let (Some(c), Some(v)) = (out_off, wo) {
        c.set(v);
    }
    Ok(total)
}

/// copy_file_range's checks on its output, as Linux's `generic_copy_file_checks`: an
/// appending output is EBADF, and a range copied onto itself (one file, the ranges
/// overlapping) EINVAL.
fn same_file_checks(
    fd_in: c_int,
    off_in: Option<&Cell<off_t>>,
    fd_out: c_int,
    off_out: Option<&Cell<off_t>>,
    len: usize,
) -> Result<(), c_int> {
    let s = shim();
    let Some(out) = s.file(fd_out) else { return Ok(()) };
    if out.flags.load(Ordering::Relaxed) & libc::O_APPEND != 0 {
        return Err(libc::EBADF);
    }
    let Some(inp) = s.file(fd_in) else { return Ok(()) };
    if inp.ino != out.ino || len == 0 {
        return Ok(());
    }
    let at = |of: &OpenFile, off: Option<&Cell<off_t>>| off.map_or(*of.pos.lock() as i64, Cell::get);
    let (a, b) = (at(&inp, off_in), at(&out, off_out));
    let len = len.min(i64::MAX as usize) as i64;
    if a < b.saturating_add(len) && b < a.saturating_add(len) {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// Whether `fd` is a pipe (splice needs one side to be).
fn is_pipe(fd: c_int) -> bool {
    // SAFETY: a zeroed stat is valid plain data.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a valid stat buffer.
    let ok = unsafe { real!(fstat: fn(c_int, *mut libc::stat) -> c_int)(fd, &mut st) } == 0;
    ok && (st.st_mode & libc::S_IFMT) == libc::S_IFIFO
}

impl Copies for Preload {
    fn copy_range(
        call: RangeCopy,
        fd_in: c_int,
        off_in: Option<&Cell<off_t>>,
        fd_out: c_int,
        off_out: Option<&Cell<off_t>>,
        len: usize,
        flags: c_uint,
        _: Next<'_, usize>,
    ) -> Served<usize> {
        const SPLICE_KNOWN: c_uint =
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK | libc::SPLICE_F_MORE | libc::SPLICE_F_GIFT;
        let s = shim();
        let refused = match call {
            RangeCopy::CopyFileRange => flags != 0,
            // One side must be a pipe, as Linux requires; HashFS descriptors never are.
            RangeCopy::Splice => {
                let pipe_side = if s.is_ours(fd_in) { fd_out } else { fd_in };
                flags & !SPLICE_KNOWN != 0 || s.is_ours(fd_in) && s.is_ours(fd_out) || !is_pipe(pipe_side)
            }
        };
        if refused {
            return served(Err(libc::EINVAL));
        }
        if call == RangeCopy::CopyFileRange {
            if let Err(e) = same_file_checks(fd_in, off_in, fd_out, off_out, len) {
                return served(Err(e));
            }
        }
        served(copy(fd_in, off_in, fd_out, off_out, len))
    }

    fn sendfile(
        out_fd: c_int,
        in_fd: c_int,
        off: Option<&Cell<off_t>>,
        count: usize,
        _: Next<'_, usize>,
    ) -> Served<usize> {
        // sendfile writes at the output's position, never at an appending one's end.
        if shim().file(out_fd).is_some_and(|of| of.flags.load(Ordering::Relaxed) & libc::O_APPEND != 0) {
            return served(Err(libc::EINVAL));
        }
        served(copy(in_fd, off, out_fd, None, count))
    }
}
