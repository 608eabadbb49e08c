//! `ioctl` on HashFS descriptors, answered as a file system without the features asked
//! about would answer, so that a program probing for one falls back: EOPNOTSUPP for
//! clones and dedupe ranges (`cp --reflink=auto`, databases), the real answer for the
//! requests a regular file has (inode flags, none set; bytes left to read; the block size;
//! close-on-exec), ENOTTY for everything else (`isatty` included). The kernel would have
//! said EBADF: a HashFS descriptor is an `O_PATH` placeholder. docs/shim.md lists them.

use super::io::with_file;
use super::*;

/// Requests libc does not name.
const FIDEDUPERANGE: libc::c_ulong = 0xC018_9436;
const FS_IOC32_GETFLAGS: libc::c_ulong = 0x8004_6601;
const FS_IOC32_SETFLAGS: libc::c_ulong = 0x4004_6602;
const FIGETBSZ: libc::c_ulong = 2;

/// What the shim answers for `request` on its descriptor `fd`: a value, or an errno.
fn answer(fd: c_int, request: libc::c_ulong, arg: *mut c_void) -> Result<c_int, c_int> {
    let put_int = |v: c_int| {
        if arg.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: these requests' contract: arg points to an int the caller owns.
        unsafe { *(arg as *mut c_int) = v };
        Ok(0)
    };
    match request {
        libc::FICLONE | libc::FICLONERANGE | FIDEDUPERANGE => Err(libc::EOPNOTSUPP),
        // HashFS keeps no inode flags (append-only, immutable, no-COW...): none are set,
        // and setting none is the only change it takes.
        libc::FS_IOC_GETFLAGS | FS_IOC32_GETFLAGS => put_int(0),
        libc::FS_IOC_SETFLAGS | FS_IOC32_SETFLAGS => {
            if arg.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: as above.
            match unsafe { *(arg as *const c_int) } {
                0 => Ok(0),
                _ => Err(libc::EOPNOTSUPP),
            }
        }
        libc::FIONREAD => {
            let left = with_file(fd, |of, f| {
                let size = f.metadata().map_err(|e| e.errno())?.size;
                Ok(size.saturating_sub(*of.pos.lock()))
            })?;
            put_int(left.min(c_int::MAX as u64) as c_int)
        }
        FIGETBSZ => put_int(4096), // HashFS's block
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

/// `ioctl(fd, request, ...)`: one pointer or integer argument, as every request takes
/// (declared fixed: the System V x86-64 and AArch64 calling conventions pass it as they
/// pass a variadic one).
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: libc::c_ulong, arg: *mut c_void) -> c_int {
    if ours(fd) {
        return match guarded(|| answer(fd, request, arg)) {
            Some(Ok(v)) => v,
            Some(Err(e)) => fail(e),
            None => fail(libc::EBADF),
        };
    }
    // A clone whose source is a HashFS file (the destination is the kernel's): another
    // file system, as Linux answers.
    if matches!(request, libc::FICLONE | libc::FICLONERANGE) && !arg.is_null() {
        let src = if request == libc::FICLONE {
            arg as usize as c_int
        } else {
            // SAFETY: FICLONERANGE's contract: arg points to a struct file_clone_range.
            unsafe { (*(arg as *const libc::file_clone_range)).src_fd as c_int }
        };
        if ours(src) {
            return fail(libc::EXDEV);
        }
    }
    // SAFETY: forwarding.
    unsafe { real!(ioctl: fn(c_int, libc::c_ulong, *mut c_void) -> c_int)(fd, request, arg) }
}
