//! libc's `syscall()`: a program that makes a file call by number (copy_file_range before
//! glibc had a wrapper, statx, renameat2 and openat in some runtimes, jemalloc's own opens
//! and reads) would otherwise reach the kernel with a HashFS descriptor (an `O_PATH`
//! placeholder: EBADF) or a path under the prefix (which the kernel does not have), and
//! past a stacked file's PM copy. The file calls are dispatched to their entry points,
//! which ask the backend and pass the rest to libc; every other number goes to libc's
//! `syscall` unchanged. Like libc's, the result is -1 with `errno` set on failure.

use super::{copy, fd, io, meta, names, process, stat};
use crate::Backend;
use libc::{c_char, c_int, c_uint, c_void, mode_t, off_t, size_t};

type Long = libc::c_long;

/// `syscall(number, ...)`: up to six integer or pointer arguments, declared fixed (the
/// System V x86-64 and AArch64 conventions pass them as they pass variadic ones; the ones
/// a call does not take are never read).
pub unsafe fn syscall<B: Backend>(n: Long, a: Long, b: Long, c: Long, d: Long, e: Long, f: Long) -> Long {
    // SAFETY: (every arm) the arguments are the system call's own, as the caller passed
    // them to libc's syscall; each function checks whether they are HashFS's and forwards
    // them otherwise.
    unsafe {
        let (i, p, s) = (|x: Long| x as c_int, |x: Long| x as *const c_char, |x: Long| x as size_t);
        match n {
            libc::SYS_read => io::read::<B>(i(a), b as *mut c_void, s(c)) as Long,
            libc::SYS_write => io::write::<B>(i(a), b as *const c_void, s(c)) as Long,
            libc::SYS_pread64 => io::pread::<B>(i(a), b as *mut c_void, s(c), d as off_t) as Long,
            libc::SYS_pwrite64 => io::pwrite::<B>(i(a), b as *const c_void, s(c), d as off_t) as Long,
            libc::SYS_readv => io::readv::<B>(i(a), b as *const libc::iovec, i(c)) as Long,
            libc::SYS_writev => io::writev::<B>(i(a), b as *const libc::iovec, i(c)) as Long,
            libc::SYS_lseek => io::lseek::<B>(i(a), b as off_t, i(c)) as Long,
            libc::SYS_fsync => io::fsync::<B>(i(a)) as Long,
            libc::SYS_fdatasync => io::fdatasync::<B>(i(a)) as Long,
            libc::SYS_syncfs => io::syncfs::<B>(i(a)) as Long,
            libc::SYS_ftruncate => io::ftruncate::<B>(i(a), b as off_t) as Long,
            libc::SYS_truncate => names::truncate::<B>(p(a), b as off_t) as Long,
            libc::SYS_fallocate => io::fallocate::<B>(i(a), i(b), c as off_t, d as off_t) as Long,
            libc::SYS_copy_file_range => {
                copy::copy_file_range::<B>(i(a), b as *mut off_t, i(c), d as *mut off_t, s(e), f as c_uint) as Long
            }
            libc::SYS_close => fd::close::<B>(i(a)) as Long,
            libc::SYS_openat => fd::openat::<B>(i(a), p(b), i(c), d as c_uint) as Long,
            libc::SYS_dup => fd::dup::<B>(i(a)) as Long,
            libc::SYS_dup3 => fd::dup3::<B>(i(a), i(b), i(c)) as Long,
            libc::SYS_fcntl => fd::fcntl::<B>(i(a), i(b), c as libc::c_ulong) as Long,
            libc::SYS_flock => fd::flock::<B>(i(a), i(b)) as Long,
            libc::SYS_ioctl => process::ioctl::<B>(i(a), b as libc::c_ulong, c as *mut c_void) as Long,
            libc::SYS_fstat => stat::fstat::<B>(i(a), b as *mut libc::stat) as Long,
            libc::SYS_newfstatat => stat::fstatat::<B>(i(a), p(b), c as *mut libc::stat, i(d)) as Long,
            libc::SYS_statx => stat::statx::<B>(i(a), p(b), i(c), d as c_uint, e as *mut libc::statx) as Long,
            libc::SYS_faccessat => stat::faccessat::<B>(i(a), p(b), i(c), 0) as Long,
            libc::SYS_mkdirat => names::mkdirat::<B>(i(a), p(b), c as mode_t) as Long,
            libc::SYS_unlinkat => names::unlinkat::<B>(i(a), p(b), i(c)) as Long,
            libc::SYS_renameat2 => names::renameat2::<B>(i(a), p(b), i(c), p(d), e as c_uint) as Long,
            libc::SYS_utimensat => meta::utimensat::<B>(i(a), p(b), c as *const libc::timespec, i(d)) as Long,
            libc::SYS_fchmod => meta::fchmod::<B>(i(a), b as mode_t) as Long,
            libc::SYS_linkat => names::linkat::<B>(i(a), p(b), i(c), p(d), i(e)) as Long,
            libc::SYS_symlinkat => names::symlinkat::<B>(p(a), i(b), p(c)) as Long,
            libc::SYS_readlinkat => names::readlinkat::<B>(i(a), p(b), c as *mut c_char, s(d)) as Long,
            libc::SYS_fchmodat => meta::fchmodat::<B>(i(a), p(b), c as mode_t, 0) as Long,
            libc::SYS_fchown => meta::fchown::<B>(i(a), b as libc::uid_t, c as libc::gid_t) as Long,
            libc::SYS_fchownat => meta::fchownat::<B>(i(a), p(b), c as libc::uid_t, d as libc::gid_t, i(e)) as Long,
            libc::SYS_mknodat => names::mknodat::<B>(i(a), p(b), c as mode_t, d as libc::dev_t) as Long,
            // (fstatfs would answer for /dev/null's file system through the placeholder.)
            libc::SYS_umask => process::umask::<B>(a as mode_t) as Long,
            libc::SYS_statfs => process::statfs::<B>(p(a), b as *mut libc::statfs) as Long,
            libc::SYS_fstatfs => process::fstatfs::<B>(i(a), b as *mut libc::statfs) as Long,
            libc::SYS_mmap => copy::mmap::<B>(a as *mut c_void, s(b), i(c), i(d), i(e), f as off_t) as Long,
            libc::SYS_munmap => copy::munmap::<B>(a as *mut c_void, s(b)) as Long,
            _ => legacy::<B>(n, [a, b, c, d, e, f]),
        }
    }
}

/// The x86-64 path calls that later architectures dropped for their `*at` forms.
///
/// # Safety
/// The arguments are system call `n`'s, as its caller passed them to `syscall`.
#[cfg(target_arch = "x86_64")]
unsafe fn legacy<B: Backend>(n: Long, [a, b, c, d, e, f]: [Long; 6]) -> Long {
    let (i, p) = (|x: Long| x as c_int, |x: Long| x as *const c_char);
    // SAFETY: as in `syscall`.
    unsafe {
        match n {
            libc::SYS_open => fd::open::<B>(p(a), i(b), c as c_uint) as Long,
            libc::SYS_creat => fd::creat::<B>(p(a), b as mode_t) as Long,
            libc::SYS_dup2 => fd::dup2::<B>(i(a), i(b)) as Long,
            libc::SYS_stat => stat::fstatat::<B>(libc::AT_FDCWD, p(a), b as *mut libc::stat, 0) as Long,
            libc::SYS_lstat => {
                stat::fstatat::<B>(libc::AT_FDCWD, p(a), b as *mut libc::stat, libc::AT_SYMLINK_NOFOLLOW) as Long
            }
            libc::SYS_access => stat::access::<B>(p(a), i(b)) as Long,
            libc::SYS_mkdir => names::mkdir::<B>(p(a), b as mode_t) as Long,
            libc::SYS_rmdir => names::rmdir::<B>(p(a)) as Long,
            libc::SYS_unlink => names::unlink::<B>(p(a)) as Long,
            libc::SYS_rename => names::rename::<B>(p(a), p(b)) as Long,
            libc::SYS_link => names::link::<B>(p(a), p(b)) as Long,
            libc::SYS_symlink => names::symlink::<B>(p(a), p(b)) as Long,
            libc::SYS_readlink => names::readlink::<B>(p(a), b as *mut c_char, c as size_t) as Long,
            libc::SYS_chmod => meta::chmod::<B>(p(a), b as mode_t) as Long,
            libc::SYS_chown => meta::chown::<B>(p(a), b as libc::uid_t, c as libc::gid_t) as Long,
            libc::SYS_lchown => meta::lchown::<B>(p(a), b as libc::uid_t, c as libc::gid_t) as Long,
            libc::SYS_mknod => names::mknod::<B>(p(a), b as mode_t, c as libc::dev_t) as Long,
            _ => real_syscall(n, [a, b, c, d, e, f]),
        }
    }
}

/// # Safety
/// As the x86-64 form.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn legacy<B: Backend>(n: Long, args: [Long; 6]) -> Long {
    // SAFETY: as in `syscall`.
    unsafe { real_syscall(n, args) }
}

/// libc's `syscall`, for every number the shim does not serve.
///
/// # Safety
/// The arguments are system call `n`'s, as its caller passed them to `syscall`.
unsafe fn real_syscall(n: Long, [a, b, c, d, e, f]: [Long; 6]) -> Long {
    crate::forward!(syscall(n, a, b, c, d, e, f): fn(Long, Long, Long, Long, Long, Long, Long) -> Long)
}
