//! libc's `syscall()`: a program that makes a file call by number (copy_file_range before
//! glibc had a wrapper, statx, renameat2 and openat in some runtimes, jemalloc's own opens
//! and reads) would otherwise reach the kernel with a HashFS descriptor (an `O_PATH`
//! placeholder: EBADF) or a path under the prefix (which the kernel does not have). The
//! calls the shim serves are dispatched to its own functions, which serve what is HashFS's
//! and pass the rest to libc; every other number goes to libc's `syscall` unchanged.
//! Like libc's, the result is -1 with `errno` set on failure.

use super::*;

type Long = libc::c_long;

/// `syscall(number, ...)`: up to six integer or pointer arguments, declared fixed (the
/// System V x86-64 and AArch64 conventions pass them as they pass variadic ones; the ones
/// a call does not take are never read).
#[no_mangle]
pub unsafe extern "C" fn syscall(n: Long, a: Long, b: Long, c: Long, d: Long, e: Long, f: Long) -> Long {
    // SAFETY: (every arm) the arguments are the system call's own, as the caller passed
    // them to libc's syscall; each function checks whether they are HashFS's and forwards
    // them otherwise.
    unsafe {
        let (i, p, s) = (|x: Long| x as c_int, |x: Long| x as *const c_char, |x: Long| x as size_t);
        match n {
            libc::SYS_read => interposed::read(i(a), b as *mut c_void, s(c)) as Long,
            libc::SYS_write => interposed::write(i(a), b as *const c_void, s(c)) as Long,
            libc::SYS_pread64 => interposed::pread64(i(a), b as *mut c_void, s(c), d as off_t) as Long,
            libc::SYS_pwrite64 => interposed::pwrite64(i(a), b as *const c_void, s(c), d as off_t) as Long,
            libc::SYS_readv => interposed::readv(i(a), b as *const libc::iovec, i(c)) as Long,
            libc::SYS_writev => interposed::writev(i(a), b as *const libc::iovec, i(c)) as Long,
            libc::SYS_lseek => interposed::lseek(i(a), b as off_t, i(c)) as Long,
            libc::SYS_fsync => interposed::fsync(i(a)) as Long,
            libc::SYS_fdatasync => interposed::fdatasync(i(a)) as Long,
            libc::SYS_ftruncate => interposed::ftruncate(i(a), b as off_t) as Long,
            libc::SYS_truncate => interposed::truncate(p(a), b as off_t) as Long,
            libc::SYS_fallocate => interposed::fallocate(i(a), i(b), c as off_t, d as off_t) as Long,
            libc::SYS_copy_file_range => {
                interposed::copy_file_range(i(a), b as *mut off_t, i(c), d as *mut off_t, s(e), f as c_uint) as Long
            }
            libc::SYS_close => interposed::close(i(a)) as Long,
            libc::SYS_openat => interposed::openat(i(a), p(b), i(c), d as c_uint) as Long,
            libc::SYS_dup => interposed::dup(i(a)) as Long,
            libc::SYS_dup3 => interposed::dup3(i(a), i(b), i(c)) as Long,
            libc::SYS_fcntl => interposed::fcntl(i(a), i(b), c as libc::c_ulong) as Long,
            libc::SYS_flock => interposed::flock(i(a), i(b)) as Long,
            libc::SYS_ioctl => ioctl::ioctl(i(a), b as libc::c_ulong, c as *mut c_void) as Long,
            libc::SYS_fstat => interposed::fstat(i(a), b as *mut libc::stat) as Long,
            libc::SYS_newfstatat => interposed::fstatat(i(a), p(b), c as *mut libc::stat, i(d)) as Long,
            libc::SYS_statx => interposed::statx(i(a), p(b), i(c), d as c_uint, e as *mut libc::statx) as Long,
            libc::SYS_faccessat => interposed::faccessat(i(a), p(b), i(c), 0) as Long,
            libc::SYS_mkdirat => interposed::mkdirat(i(a), p(b), c as mode_t) as Long,
            libc::SYS_unlinkat => interposed::unlinkat(i(a), p(b), i(c)) as Long,
            libc::SYS_renameat2 => interposed::renameat2(i(a), p(b), i(c), p(d), e as c_uint) as Long,
            libc::SYS_utimensat => interposed::utimensat(i(a), p(b), c as *const libc::timespec, i(d)) as Long,
            libc::SYS_fchmod => interposed::fchmod(i(a), b as mode_t) as Long,
            libc::SYS_linkat => interposed::linkat(i(a), p(b), i(c), p(d), i(e)) as Long,
            libc::SYS_symlinkat => interposed::symlinkat(p(a), i(b), p(c)) as Long,
            libc::SYS_readlinkat => interposed::readlinkat(i(a), p(b), c as *mut c_char, s(d)) as Long,
            libc::SYS_fchmodat => interposed::fchmodat(i(a), p(b), c as mode_t, 0) as Long,
            libc::SYS_fchown => interposed::fchown(i(a), b as libc::uid_t, c as libc::gid_t) as Long,
            libc::SYS_fchownat => interposed::fchownat(i(a), p(b), c as libc::uid_t, d as libc::gid_t, i(e)) as Long,
            libc::SYS_mknodat => interposed::mknodat(i(a), p(b), c as mode_t, d as libc::dev_t) as Long,
            // (fstatfs would answer for /dev/null's file system through the placeholder.)
            libc::SYS_statfs => statfs::statfs(p(a), b as *mut libc::statfs) as Long,
            libc::SYS_fstatfs => statfs::fstatfs(i(a), b as *mut libc::statfs) as Long,
            libc::SYS_mmap => interposed::mmap(a as *mut c_void, s(b), i(c), i(d), i(e), f as off_t) as Long,
            libc::SYS_munmap => interposed::munmap(a as *mut c_void, s(b)) as Long,
            _ => legacy(n, [a, b, c, d, e, f]),
        }
    }
}

/// The x86-64 path calls that later architectures dropped for their `*at` forms.
///
/// # Safety
/// The arguments are system call `n`'s, as its caller passed them to `syscall`.
#[cfg(target_arch = "x86_64")]
unsafe fn legacy(n: Long, [a, b, c, d, e, f]: [Long; 6]) -> Long {
    let (i, p) = (|x: Long| x as c_int, |x: Long| x as *const c_char);
    // SAFETY: as in `syscall`.
    unsafe {
        match n {
            libc::SYS_open => interposed::open(p(a), i(b), c as c_uint) as Long,
            libc::SYS_creat => interposed::creat(p(a), b as mode_t) as Long,
            libc::SYS_dup2 => interposed::dup2(i(a), i(b)) as Long,
            libc::SYS_stat => interposed::fstatat(libc::AT_FDCWD, p(a), b as *mut libc::stat, 0) as Long,
            libc::SYS_lstat => {
                interposed::fstatat(libc::AT_FDCWD, p(a), b as *mut libc::stat, libc::AT_SYMLINK_NOFOLLOW) as Long
            }
            libc::SYS_access => interposed::access(p(a), i(b)) as Long,
            libc::SYS_mkdir => interposed::mkdir(p(a), b as mode_t) as Long,
            libc::SYS_rmdir => interposed::rmdir(p(a)) as Long,
            libc::SYS_unlink => interposed::unlink(p(a)) as Long,
            libc::SYS_rename => interposed::rename(p(a), p(b)) as Long,
            libc::SYS_link => interposed::link(p(a), p(b)) as Long,
            libc::SYS_symlink => interposed::symlink(p(a), p(b)) as Long,
            libc::SYS_readlink => interposed::readlink(p(a), b as *mut c_char, c as size_t) as Long,
            libc::SYS_chmod => interposed::chmod(p(a), b as mode_t) as Long,
            libc::SYS_chown => interposed::chown(p(a), b as libc::uid_t, c as libc::gid_t) as Long,
            libc::SYS_lchown => interposed::lchown(p(a), b as libc::uid_t, c as libc::gid_t) as Long,
            libc::SYS_mknod => interposed::mknod(p(a), b as mode_t, c as libc::dev_t) as Long,
            _ => real_syscall(n, [a, b, c, d, e, f]),
        }
    }
}

/// # Safety
/// As the x86-64 form.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn legacy(n: Long, args: [Long; 6]) -> Long {
    // SAFETY: as in `syscall`.
    unsafe { real_syscall(n, args) }
}

/// libc's `syscall`, for every number the shim does not serve.
///
/// # Safety
/// The arguments are system call `n`'s, as its caller passed them to `syscall`.
unsafe fn real_syscall(n: Long, [a, b, c, d, e, f]: [Long; 6]) -> Long {
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { real!(syscall: fn(Long, Long, Long, Long, Long, Long, Long) -> Long)(n, a, b, c, d, e, f) }
}
