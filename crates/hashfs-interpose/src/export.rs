//! [`export!`]: the exported symbols, one per libc function, each calling its entry point
//! in [`crate::entry`] with the backend a shim names. A shim invokes it once; nothing
//! else in a shim is `#[no_mangle]`.

/// Exports every libc function the interposer serves, for backend `$B`: invoked once in
/// a shim's crate as `hashfs_interpose::export!(crate::MyBackend);`.
#[macro_export]
macro_rules! export {
    ($B:ty) => {
        /// libc's functions, interposed (`hashfs_interpose::export!`).
        #[allow(clippy::missing_safety_doc)] // each has libc's contract for its name
        pub mod interposed {
            use $crate::libc::{c_char, c_int, c_uint, c_ulong, c_void, iovec, mode_t, off_t, size_t, ssize_t};
            use $crate::libc::{dev_t, gid_t, timespec, timeval, uid_t, utimbuf};
            use $crate::libc::{c_long, dirent, dirent64, msghdr, sockaddr, socklen_t, DIR, FILE};
            use $crate::libc::{statfs as statfs_t, statvfs as statvfs_t};
            use $crate::libc::{stat as stat_t, statx as statx_t};
            $crate::exports! { $B;
                read => io::read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t;
                write => io::write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t;
                pread => io::pread(fd: c_int, buf: *mut c_void, count: size_t, off: off_t) -> ssize_t;
                pread64 => io::pread(fd: c_int, buf: *mut c_void, count: size_t, off: off_t) -> ssize_t;
                pwrite => io::pwrite(fd: c_int, buf: *const c_void, count: size_t, off: off_t) -> ssize_t;
                pwrite64 => io::pwrite(fd: c_int, buf: *const c_void, count: size_t, off: off_t) -> ssize_t;
                readv => io::readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
                writev => io::writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
                preadv => io::preadv(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t;
                preadv64 => io::preadv(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t;
                preadv2 => io::preadv2(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t;
                preadv64v2 => io::preadv2(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t;
                pwritev => io::pwritev(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t;
                pwritev64 => io::pwritev(fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t;
                pwritev2 => io::pwritev2(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t;
                pwritev64v2 => io::pwritev2(fd: c_int, iov: *const iovec, n: c_int, off: off_t, flags: c_int) -> ssize_t;
                lseek => io::lseek(fd: c_int, off: off_t, whence: c_int) -> off_t;
                lseek64 => io::lseek(fd: c_int, off: off_t, whence: c_int) -> off_t;
                fsync => io::fsync(fd: c_int) -> c_int;
                syncfs => io::syncfs(fd: c_int) -> c_int;
                fdatasync => io::fdatasync(fd: c_int) -> c_int;
                sync_file_range => io::sync_file_range(fd: c_int, off: off_t, len: off_t, flags: c_uint) -> c_int;
                ftruncate => io::ftruncate(fd: c_int, len: off_t) -> c_int;
                ftruncate64 => io::ftruncate(fd: c_int, len: off_t) -> c_int;
                fallocate => io::fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int;
                fallocate64 => io::fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int;
                posix_fallocate => io::posix_fallocate(fd: c_int, off: off_t, len: off_t) -> c_int;
                posix_fallocate64 => io::posix_fallocate(fd: c_int, off: off_t, len: off_t) -> c_int;
                posix_fadvise => io::posix_fadvise(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int;
                posix_fadvise64 => io::posix_fadvise(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int;
                readahead => io::readahead(fd: c_int, off: off_t, count: size_t) -> ssize_t;
                open => fd::open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int;
                open64 => fd::open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int;
                openat => fd::openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int;
                openat64 => fd::openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int;
                __open_2 => fd::open_2(path: *const c_char, flags: c_int) -> c_int;
                __open64_2 => fd::open_2(path: *const c_char, flags: c_int) -> c_int;
                __openat_2 => fd::openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int;
                __openat64_2 => fd::openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int;
                creat => fd::creat(path: *const c_char, mode: mode_t) -> c_int;
                creat64 => fd::creat(path: *const c_char, mode: mode_t) -> c_int;
                close => fd::close(fd: c_int) -> c_int;
                close_range => fd::close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int;
                dup => fd::dup(fd: c_int) -> c_int;
                dup2 => fd::dup2(fd: c_int, newfd: c_int) -> c_int;
                dup3 => fd::dup3(fd: c_int, newfd: c_int, flags: c_int) -> c_int;
                fcntl => fd::fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
                fcntl64 => fd::fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
                flock => fd::flock(fd: c_int, op: c_int) -> c_int;
                lockf => fd::lockf(fd: c_int, cmd: c_int, len: off_t) -> c_int;
                lockf64 => fd::lockf(fd: c_int, cmd: c_int, len: off_t) -> c_int;
                stat => stat::stat(path: *const c_char, st: *mut stat_t) -> c_int;
                stat64 => stat::stat(path: *const c_char, st: *mut stat_t) -> c_int;
                lstat => stat::lstat(path: *const c_char, st: *mut stat_t) -> c_int;
                lstat64 => stat::lstat(path: *const c_char, st: *mut stat_t) -> c_int;
                fstat => stat::fstat(fd: c_int, st: *mut stat_t) -> c_int;
                fstat64 => stat::fstat(fd: c_int, st: *mut stat_t) -> c_int;
                fstatat => stat::fstatat(dirfd: c_int, path: *const c_char, st: *mut stat_t, flags: c_int) -> c_int;
                fstatat64 => stat::fstatat(dirfd: c_int, path: *const c_char, st: *mut stat_t, flags: c_int) -> c_int;
                __xstat => stat::xstat(ver: c_int, path: *const c_char, st: *mut stat_t) -> c_int;
                __xstat64 => stat::xstat(ver: c_int, path: *const c_char, st: *mut stat_t) -> c_int;
                __lxstat => stat::lxstat(ver: c_int, path: *const c_char, st: *mut stat_t) -> c_int;
                __lxstat64 => stat::lxstat(ver: c_int, path: *const c_char, st: *mut stat_t) -> c_int;
                __fxstat => stat::fxstat(ver: c_int, fd: c_int, st: *mut stat_t) -> c_int;
                __fxstat64 => stat::fxstat(ver: c_int, fd: c_int, st: *mut stat_t) -> c_int;
                __fxstatat => stat::fxstatat(ver: c_int, dirfd: c_int, path: *const c_char, st: *mut stat_t, flags: c_int) -> c_int;
                __fxstatat64 => stat::fxstatat(ver: c_int, dirfd: c_int, path: *const c_char, st: *mut stat_t, flags: c_int) -> c_int;
                statx => stat::statx(dirfd: c_int, path: *const c_char, flags: c_int, mask: c_uint, stx: *mut statx_t) -> c_int;
                access => stat::access(path: *const c_char, mode: c_int) -> c_int;
                euidaccess => stat::euidaccess(path: *const c_char, mode: c_int) -> c_int;
                eaccess => stat::euidaccess(path: *const c_char, mode: c_int) -> c_int;
                faccessat => stat::faccessat(dirfd: c_int, path: *const c_char, mode: c_int, flags: c_int) -> c_int;
                unlink => names::unlink(path: *const c_char) -> c_int;
                unlinkat => names::unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int;
                rmdir => names::rmdir(path: *const c_char) -> c_int;
                mkdir => names::mkdir(path: *const c_char, mode: mode_t) -> c_int;
                mkstemp => temp::mkstemp(template: *mut c_char) -> c_int;
                mkstemp64 => temp::mkstemp(template: *mut c_char) -> c_int;
                mkostemp => temp::mkostemp(template: *mut c_char, flags: c_int) -> c_int;
                mkostemp64 => temp::mkostemp(template: *mut c_char, flags: c_int) -> c_int;
                mkstemps => temp::mkstemps(template: *mut c_char, suffix: c_int) -> c_int;
                mkstemps64 => temp::mkstemps(template: *mut c_char, suffix: c_int) -> c_int;
                mkostemps => temp::mkostemps(template: *mut c_char, suffix: c_int, flags: c_int) -> c_int;
                mkostemps64 => temp::mkostemps(template: *mut c_char, suffix: c_int, flags: c_int) -> c_int;
                mkdtemp => temp::mkdtemp(template: *mut c_char) -> *mut c_char;
                mkdirat => names::mkdirat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int;
                rename => names::rename(from: *const c_char, to: *const c_char) -> c_int;
                renameat => names::renameat(fd1: c_int, from: *const c_char, fd2: c_int, to: *const c_char) -> c_int;
                renameat2 => names::renameat2(fd1: c_int, from: *const c_char, fd2: c_int, to: *const c_char, flags: c_uint) -> c_int;
                link => names::link(from: *const c_char, to: *const c_char) -> c_int;
                linkat => names::linkat(fd1: c_int, from: *const c_char, fd2: c_int, to: *const c_char, flags: c_int) -> c_int;
                symlink => names::symlink(target: *const c_char, path: *const c_char) -> c_int;
                symlinkat => names::symlinkat(target: *const c_char, dirfd: c_int, path: *const c_char) -> c_int;
                readlink => names::readlink(path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t;
                realpath => realpath::realpath(path: *const c_char, resolved: *mut c_char) -> *mut c_char;
                canonicalize_file_name => realpath::canonicalize_file_name(path: *const c_char) -> *mut c_char;
                readlinkat => names::readlinkat(dirfd: c_int, path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t;
                mknod => names::mknod(path: *const c_char, mode: mode_t, dev: dev_t) -> c_int;
                mknodat => names::mknodat(dirfd: c_int, path: *const c_char, mode: mode_t, dev: dev_t) -> c_int;
                mkfifo => names::mkfifo(path: *const c_char, mode: mode_t) -> c_int;
                mkfifoat => names::mkfifoat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int;
                truncate => names::truncate(path: *const c_char, len: off_t) -> c_int;
                truncate64 => names::truncate(path: *const c_char, len: off_t) -> c_int;
                chmod => meta::chmod(path: *const c_char, mode: mode_t) -> c_int;
                fchmod => meta::fchmod(fd: c_int, mode: mode_t) -> c_int;
                fchmodat => meta::fchmodat(dirfd: c_int, path: *const c_char, mode: mode_t, flags: c_int) -> c_int;
                chown => meta::chown(path: *const c_char, uid: uid_t, gid: gid_t) -> c_int;
                lchown => meta::lchown(path: *const c_char, uid: uid_t, gid: gid_t) -> c_int;
                fchown => meta::fchown(fd: c_int, uid: uid_t, gid: gid_t) -> c_int;
                fchownat => meta::fchownat(dirfd: c_int, path: *const c_char, uid: uid_t, gid: gid_t, flags: c_int) -> c_int;
                utimensat => meta::utimensat(dirfd: c_int, path: *const c_char, times: *const timespec, flags: c_int) -> c_int;
                futimens => meta::futimens(fd: c_int, times: *const timespec) -> c_int;
                futimes => meta::futimes(fd: c_int, tv: *const timeval) -> c_int;
                utimes => meta::utimes(path: *const c_char, tv: *const timeval) -> c_int;
                lutimes => meta::lutimes(path: *const c_char, tv: *const timeval) -> c_int;
                utime => meta::utime(path: *const c_char, times: *const utimbuf) -> c_int;
                copy_file_range => copy::copy_file_range(fd_in: c_int, off_in: *mut off_t, fd_out: c_int, off_out: *mut off_t, len: size_t, flags: c_uint) -> ssize_t;
                sendfile => copy::sendfile(out_fd: c_int, in_fd: c_int, off: *mut off_t, count: size_t) -> ssize_t;
                sendfile64 => copy::sendfile(out_fd: c_int, in_fd: c_int, off: *mut off_t, count: size_t) -> ssize_t;
                splice => copy::splice(fd_in: c_int, off_in: *mut off_t, fd_out: c_int, off_out: *mut off_t, len: size_t, flags: c_uint) -> ssize_t;
                mmap => copy::mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void;
                mmap64 => copy::mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void;
                munmap => copy::munmap(addr: *mut c_void, len: size_t) -> c_int;
                mremap => copy::mremap(old: *mut c_void, old_len: size_t, new_len: size_t, flags: c_int, new_addr: *mut c_void) -> *mut c_void;
                mprotect => copy::mprotect(addr: *mut c_void, len: size_t, prot: c_int) -> c_int;
                msync => copy::msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int;
                getxattr => xattr::getxattr(path: *const c_char, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t;
                listxattr => xattr::listxattr(path: *const c_char, list: *mut c_char, size: size_t) -> ssize_t;
                setxattr => xattr::setxattr(path: *const c_char, name: *const c_char, value: *const c_void, size: size_t, flags: c_int) -> c_int;
                removexattr => xattr::removexattr(path: *const c_char, name: *const c_char) -> c_int;
                lgetxattr => xattr::lgetxattr(path: *const c_char, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t;
                llistxattr => xattr::llistxattr(path: *const c_char, list: *mut c_char, size: size_t) -> ssize_t;
                lsetxattr => xattr::lsetxattr(path: *const c_char, name: *const c_char, value: *const c_void, size: size_t, flags: c_int) -> c_int;
                lremovexattr => xattr::lremovexattr(path: *const c_char, name: *const c_char) -> c_int;
                fgetxattr => xattr::fgetxattr(fd: c_int, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t;
                flistxattr => xattr::flistxattr(fd: c_int, list: *mut c_char, size: size_t) -> ssize_t;
                fsetxattr => xattr::fsetxattr(fd: c_int, name: *const c_char, value: *const c_void, size: size_t, flags: c_int) -> c_int;
                fremovexattr => xattr::fremovexattr(fd: c_int, name: *const c_char) -> c_int;
                opendir => streams::opendir(path: *const c_char) -> *mut DIR;
                fdopendir => streams::fdopendir(fd: c_int) -> *mut DIR;
                readdir => streams::readdir(d: *mut DIR) -> *mut dirent;
                readdir64 => streams::readdir64(d: *mut DIR) -> *mut dirent64;
                closedir => streams::closedir(d: *mut DIR) -> c_int;
                rewinddir => streams::rewinddir(d: *mut DIR) -> ();
                dirfd => streams::dirfd(d: *mut DIR) -> c_int;
                telldir => streams::telldir(d: *mut DIR) -> c_long;
                seekdir => streams::seekdir(d: *mut DIR, pos: c_long) -> ();
                readdir_r => streams::readdir_r(d: *mut DIR, entry: *mut dirent64, result: *mut *mut dirent64) -> c_int;
                readdir64_r => streams::readdir_r(d: *mut DIR, entry: *mut dirent64, result: *mut *mut dirent64) -> c_int;
                remove => compose::remove(path: *const c_char) -> c_int;
                scandir => compose::scandir(dir: *const c_char, list: *mut *mut *mut dirent64, filter: $crate::entry::compose::Filter, compar: $crate::entry::compose::Compare) -> c_int;
                scandir64 => compose::scandir(dir: *const c_char, list: *mut *mut *mut dirent64, filter: $crate::entry::compose::Filter, compar: $crate::entry::compose::Compare) -> c_int;
                scandirat => compose::scandirat(dirfd: c_int, dir: *const c_char, list: *mut *mut *mut dirent64, filter: $crate::entry::compose::Filter, compar: $crate::entry::compose::Compare) -> c_int;
                scandirat64 => compose::scandirat(dirfd: c_int, dir: *const c_char, list: *mut *mut *mut dirent64, filter: $crate::entry::compose::Filter, compar: $crate::entry::compose::Compare) -> c_int;
                glob => compose::glob(pattern: *const c_char, flags: c_int, errfunc: $crate::entry::compose::GlobErr, g: *mut $crate::entry::compose::Glob) -> c_int;
                glob64 => compose::glob(pattern: *const c_char, flags: c_int, errfunc: $crate::entry::compose::GlobErr, g: *mut $crate::entry::compose::Glob) -> c_int;
                nftw => compose::nftw(dir: *const c_char, f: $crate::entry::compose::NftwFn, fds: c_int, flags: c_int) -> c_int;
                nftw64 => compose::nftw(dir: *const c_char, f: $crate::entry::compose::NftwFn, fds: c_int, flags: c_int) -> c_int;
                ftw => compose::ftw(dir: *const c_char, f: $crate::entry::compose::FtwFn, fds: c_int) -> c_int;
                ftw64 => compose::ftw(dir: *const c_char, f: $crate::entry::compose::FtwFn, fds: c_int) -> c_int;
                pathconf => compose::pathconf(path: *const c_char, name: c_int) -> c_long;
                ftok => compose::ftok(path: *const c_char, id: c_int) -> $crate::libc::key_t;
                freopen => compose::freopen(path: *const c_char, mode: *const c_char, fp: *mut FILE) -> *mut FILE;
                freopen64 => compose::freopen(path: *const c_char, mode: *const c_char, fp: *mut FILE) -> *mut FILE;
                fopen => streams::fopen(path: *const c_char, mode: *const c_char) -> *mut FILE;
                fopen64 => streams::fopen(path: *const c_char, mode: *const c_char) -> *mut FILE;
                fdopen => streams::fdopen(fd: c_int, mode: *const c_char) -> *mut FILE;
                fclose => streams::fclose(fp: *mut FILE) -> c_int;
                fileno => streams::fileno(fp: *mut FILE) -> c_int;
                fileno_unlocked => streams::fileno_unlocked(fp: *mut FILE) -> c_int;
                chdir => process::chdir(path: *const c_char) -> c_int;
                umask => process::umask(mask: mode_t) -> mode_t;
                fchdir => process::fchdir(fd: c_int) -> c_int;
                getcwd => process::getcwd(buf: *mut c_char, size: size_t) -> *mut c_char;
                get_current_dir_name => process::get_current_dir_name() -> *mut c_char;
                statfs => process::statfs(path: *const c_char, out: *mut statfs_t) -> c_int;
                statfs64 => process::statfs(path: *const c_char, out: *mut statfs_t) -> c_int;
                fstatfs => process::fstatfs(fd: c_int, out: *mut statfs_t) -> c_int;
                fstatfs64 => process::fstatfs(fd: c_int, out: *mut statfs_t) -> c_int;
                statvfs => process::statvfs(path: *const c_char, out: *mut statvfs_t) -> c_int;
                statvfs64 => process::statvfs(path: *const c_char, out: *mut statvfs_t) -> c_int;
                fstatvfs => process::fstatvfs(fd: c_int, out: *mut statvfs_t) -> c_int;
                fstatvfs64 => process::fstatvfs(fd: c_int, out: *mut statvfs_t) -> c_int;
                bind => process::bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
                connect => process::connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
                sendto => process::sendto(fd: c_int, buf: *const c_void, n: size_t, flags: c_int, addr: *const sockaddr, len: socklen_t) -> ssize_t;
                sendmsg => process::sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t;
                ioctl => process::ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int;
                syscall => syscall::syscall(n: c_long, a: c_long, b: c_long, c: c_long, d: c_long, e: c_long, f: c_long) -> c_long;
                _exit => process::exit_now(status: c_int) -> !;
                _Exit => process::exit_now(status: c_int) -> !;
                fork => process::fork() -> libc::pid_t;
                daemon => detach::daemon(nochdir: c_int, noclose: c_int) -> c_int;
                forkpty => detach::forkpty(master: *mut c_int, name: *mut c_char, termp: *const $crate::libc::termios, winp: *const $crate::libc::winsize) -> libc::pid_t;
                login_tty => detach::login_tty(fd: c_int) -> c_int;
                execve => program::execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
                execv => program::execv(path: *const c_char, argv: *const *const c_char) -> c_int;
                execvp => program::execvp(file: *const c_char, argv: *const *const c_char) -> c_int;
                execvpe => program::execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
                system => program::system(command: *const c_char) -> c_int;
                popen => program::popen(command: *const c_char, mode: *const c_char) -> *mut FILE;
                wordexp => program::wordexp(words: *const c_char, we: *mut c_void, flags: c_int) -> c_int;
                posix_spawn => program::posix_spawn(pid: *mut libc::pid_t, path: *const c_char, actions: *const libc::posix_spawn_file_actions_t, attr: *const libc::posix_spawnattr_t, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
                posix_spawn_file_actions_addchdir_np => spawn_dir::posix_spawn_file_actions_addchdir_np(actions: *mut libc::posix_spawn_file_actions_t, path: *const c_char) -> c_int;
                posix_spawn_file_actions_addfchdir_np => spawn_dir::posix_spawn_file_actions_addfchdir_np(actions: *mut libc::posix_spawn_file_actions_t, fd: c_int) -> c_int;
                posix_spawn_file_actions_destroy => spawn_dir::posix_spawn_file_actions_destroy(actions: *mut libc::posix_spawn_file_actions_t) -> c_int;
                posix_spawnp => program::posix_spawnp(pid: *mut libc::pid_t, file: *const c_char, actions: *const libc::posix_spawn_file_actions_t, attr: *const libc::posix_spawnattr_t, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
                fexecve => program::fexecve(fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
            }
            $crate::list_execs! { $B;
                execl => Path;
                execlp => Search;
                execle => WithEnv;
            }

            /// `dlopen`: a jump to libc's, with the path the backend chooses
            /// (`entry::library`). A jump, not a call: libc's `dlopen` finds its caller by
            /// its return address, and searches a bare name along that caller's RUNPATH.
            #[no_mangle]
            #[unsafe(naked)]
            pub unsafe extern "C" fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void {
                /// The path and the function to jump to.
                unsafe extern "C" fn target(file: *const c_char, mode: c_int) -> $crate::entry::library::Target {
                    // SAFETY: dlopen's contract, which our caller met.
                    unsafe { $crate::entry::library::dlopen_target::<$B>(file, mode) }
                }
                // At entry rsp is 8 below a 16-byte boundary; `push rsi` keeps the mode and
                // aligns the call.
                core::arch::naked_asm!(
                    "push rsi",
                    "call {target}",
                    "pop rsi",
                    "mov rdi, rax",
                    "jmp rdx",
                    target = sym target,
                )
            }

            /// `vfork`: a jump to libc's, or to this interposer's `fork` where the backend
            /// must act for the child (`entry::process::vfork_target`). A jump, not a call:
            /// the function chosen returns to `vfork`'s caller itself, and a `vfork` child
            /// must not return through a frame of ours that its parent will use again.
            #[no_mangle]
            #[unsafe(naked)]
            pub unsafe extern "C" fn vfork() -> libc::pid_t {
                /// The address to jump to.
                extern "C" fn target() -> *const c_void {
                    $crate::entry::process::vfork_target::<$B>(fork)
                }
                // At entry rsp is 8 below a 16-byte boundary; the call needs it on one.
                core::arch::naked_asm!(
                    "sub rsp, 8",
                    "call {target}",
                    "add rsp, 8",
                    "jmp rax",
                    target = sym target,
                )
            }
        }
    };
}

/// The variadic execs (`execl`, `execlp`, `execle`), which Rust cannot define: each is a
/// naked function that spills the five argument registers after the path beside the
/// address of the caller's stack arguments and calls
/// [`exec_list`](crate::entry::program::exec_list) with both (x86-64 System V).
#[doc(hidden)]
#[macro_export]
macro_rules! list_execs {
    ($B:ty; $($name:ident => $kind:ident;)*) => {
        $(
            #[no_mangle]
            #[unsafe(naked)]
            pub unsafe extern "C" fn $name(path: *const c_char, arg: *const c_char) -> c_int {
                /// The list's registers and stack arguments, gathered.
                unsafe extern "C" fn gathered(
                    path: *const c_char,
                    regs: *const *const c_char,
                    stack: *const *const c_char,
                ) -> c_int {
                    // SAFETY: regs and stack are what the naked caller passes: the five
                    // register words it spilled and the address of the caller's stack
                    // arguments, whose list libc's contract null-terminates.
                    unsafe {
                        $crate::entry::program::exec_list::<$B>(
                            $crate::entry::program::ListExec::$kind,
                            path,
                            regs,
                            stack,
                        )
                    }
                }
                // At entry the return address is at [rsp] and the first stack argument at
                // [rsp + 8]; after `push rbp` that is [rbp + 16]. 48 bytes keep rsp 16-byte
                // aligned for the call.
                core::arch::naked_asm!(
                    "push rbp",
                    "mov rbp, rsp",
                    "sub rsp, 48",
                    "mov [rsp], rsi",
                    "mov [rsp + 8], rdx",
                    "mov [rsp + 16], rcx",
                    "mov [rsp + 24], r8",
                    "mov [rsp + 32], r9",
                    "mov rsi, rsp",
                    "lea rdx, [rbp + 16]",
                    "call {gathered}",
                    "leave",
                    "ret",
                    gathered = sym gathered,
                )
            }
        )*
    };
}

/// The table behind [`export!`]: `name => module::entry(args) -> ret;` makes the exported
/// `name` that calls `entry::module::entry::<$B>`.
#[doc(hidden)]
#[macro_export]
macro_rules! exports {
    ($B:ty; $($name:ident => $m:ident :: $f:ident ($($a:ident : $t:ty),*) -> $r:ty;)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name($($a: $t),*) -> $r {
                // SAFETY: the entry point's contract is this function's, libc's for its
                // name, which our caller met.
                unsafe { $crate::entry::$m::$f::<$B>($($a),*) }
            }
        )*
    };
}
