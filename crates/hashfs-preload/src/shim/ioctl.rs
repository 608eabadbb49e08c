//! `ioctl` on HashFS descriptors, answered as a file system without the features asked
//! about would answer, so that a program probing for one falls back: EOPNOTSUPP for
//! clones and dedupe ranges (`cp --reflink=auto`, databases), the real answer for the
//! requests a regular file has (inode flags, none set; bytes left to read; the block size;
//! close-on-exec), ENOTTY for everything else (`isatty` included). The kernel would have
//! said EBADF: a HashFS descriptor is an `O_PATH` placeholder. docs/shim.md lists them.

use super::io::with_file;
use super::*;
use hashfs_interpose::IoctlArg;

/// Requests libc does not name.
const FIDEDUPERANGE: libc::c_ulong = 0xC018_9436;
const FS_IOC32_GETFLAGS: libc::c_ulong = 0x8004_6601;
const FS_IOC32_SETFLAGS: libc::c_ulong = 0x4004_6602;
const FIGETBSZ: libc::c_ulong = 2;

/// What the shim answers for `request` on its descriptor `fd`: a value, or an errno.
fn answer(fd: c_int, request: libc::c_ulong, arg: &IoctlArg) -> Result<c_int, c_int> {
    match request {
        libc::FICLONE | libc::FICLONERANGE | FIDEDUPERANGE => Err(libc::EOPNOTSUPP),
        // HashFS keeps no inode flags (append-only, immutable, no-COW...): none are set,
        // and setting none is the only change it takes.
        // SAFETY: these requests' argument points to an int.
        libc::FS_IOC_GETFLAGS | FS_IOC32_GETFLAGS => unsafe { arg.put_int(0) }.map(|()| 0).map_err(|e| e.0),
        libc::FS_IOC_SETFLAGS | FS_IOC32_SETFLAGS => {
            // SAFETY: as above.
            match unsafe { arg.get_int() }.map_err(|e| e.0)? {
                0 => Ok(0),
                _ => Err(libc::EOPNOTSUPP),
            }
        }
        libc::FIONREAD => {
            let left = with_file(fd, |of, f| {
                let size = f.metadata().map_err(|e| e.errno())?.size;
                Ok(size.saturating_sub(*of.pos.lock()))
            })?;
            // SAFETY: FIONREAD's argument points to an int.
            unsafe { arg.put_int(left.min(c_int::MAX as u64) as c_int) }.map(|()| 0).map_err(|e| e.0)
        }
        // HashFS's block. SAFETY: FIGETBSZ's argument points to an int.
        FIGETBSZ => unsafe { arg.put_int(4096) }.map(|()| 0).map_err(|e| e.0),
        libc::FIOCLEX | libc::FIONCLEX => {
            let flag = if request == libc::FIOCLEX { libc::FD_CLOEXEC } else { 0 };
            // SAFETY: F_SETFD on the placeholder descriptor (allowed on O_PATH).
            match unsafe { real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int)(fd, libc::F_SETFD, flag as _) } {
                0 => Ok(0),
                _ => Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EBADF)),
            }
        }
        _ => Err(libc::ENOTTY),
    }
}

/// ioctl on a HashFS descriptor, or a clone from one: another file system, as Linux
/// answers a clone whose source is elsewhere.
pub(super) fn ioctl(fd: c_int, request: libc::c_ulong, arg: &IoctlArg) -> Result<c_int, c_int> {
    if shim().is_ours(fd) {
        return answer(fd, request, arg);
    }
    Err(libc::EXDEV)
}
