//! The working directory (chdir, fchdir, getcwd, get_current_dir_name), the file-mode
//! creation mask (umask), file-system statistics (statfs, statvfs and the descriptor
//! forms), bind and connect to UNIX socket paths, ioctl, and `_exit`.

use super::{route, route_out};
use crate::call::{c_str, CResult, Errno, Handle};
use crate::{forward, Backend, FsStats, IoctlArg};
use libc::{c_char, c_int, c_ulong, c_void, size_t, sockaddr, socklen_t};
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;

pub unsafe fn chdir<B: Backend>(path: *const c_char) -> c_int {
    // SAFETY: chdir's contract: path is a NUL-terminated string.
    let p = unsafe { c_str(path) };
    let raw = |to: Option<CString>| {
        let path = to.as_ref().map_or(path, |c| c.as_ptr());
        forward!(chdir(path): fn(*const c_char) -> c_int)
    };
    if let Some(p) = p {
        let next = |to| <()>::from_c(raw(to));
        if let Some(r) = crate::serve(|| B::chdir(p, crate::Next(&next))) {
            return <()>::to_c(r);
        }
    }
    raw(None)
}

pub unsafe fn fchdir<B: Backend>(fd: c_int) -> c_int {
    route::<()>(true, |next| B::fchdir(fd, next), || forward!(fchdir(fd): fn(c_int) -> c_int))
}

/// The mask the last `umask` through this library set, or [`UMASK_UNKNOWN`] before one
/// (or before [`process_umask`] first read it).
static UMASK: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(UMASK_UNKNOWN);
const UMASK_UNKNOWN: u32 = u32::MAX;

/// umask: the kernel's, and the mask kept for [`process_umask`] (a fork's child keeps it
/// with its copy of the memory; an exec'd program reads it again).
pub unsafe fn umask<B: Backend>(mask: libc::mode_t) -> libc::mode_t {
    let old = forward!(umask(mask): fn(libc::mode_t) -> libc::mode_t);
    UMASK.store(mask & 0o777, std::sync::atomic::Ordering::Release);
    old
}

/// The process's file-mode creation mask, for a backend that creates files: read without
/// setting it (`/proc/self/status`'s `Umask`, once; `umask` keeps it after that), so that a
/// file another thread creates meanwhile gets the program's mask. Reading it by setting
/// and restoring it left a moment where such a file got the mask set instead. Without
/// `/proc` it is read so all the same, the mask set meanwhile 077 (a file made then gets
/// fewer permissions, never more). A program that sets the mask by a raw system call,
/// not through libc's `umask` or `syscall`, leaves it stale.
pub fn process_umask() -> libc::mode_t {
    use std::sync::atomic::Ordering;
    let known = UMASK.load(Ordering::Acquire);
    if known != UMASK_UNKNOWN {
        return known;
    }
    let read = umask_of_proc().unwrap_or_else(|| {
        let strict: libc::mode_t = 0o077;
        let m = forward!(umask(strict): fn(libc::mode_t) -> libc::mode_t);
        forward!(umask(m): fn(libc::mode_t) -> libc::mode_t);
        m
    });
    // An umask call meanwhile stored the mask it set: that one stands.
    match UMASK.compare_exchange(UMASK_UNKNOWN, read & 0o777, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => read & 0o777,
        Err(set) => set,
    }
}

/// `Umask:` of `/proc/self/status` (Linux 4.7 on).
fn umask_of_proc() -> Option<libc::mode_t> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
    libc::mode_t::from_str_radix(line.trim(), 8).ok()
}

/// getcwd's buffer rules for a directory the backend keeps: into `buf` of `size` bytes,
/// or a new buffer from malloc when `buf` is null (glibc's extension; `size` 0 means as
/// large as needed).
pub(crate) fn give_path(p: &std::path::Path, buf: *mut c_char, size: size_t) -> Result<Handle, Errno> {
    let bytes = p.as_os_str().as_bytes();
    if buf.is_null() {
        if size != 0 && size < bytes.len() + 1 {
            return Err(Errno(libc::ERANGE));
        }
        let c = CString::new(bytes).map_err(|_| Errno::INVAL)?;
        // SAFETY: strdup copies a valid NUL-terminated string into malloc'd memory.
        let d = unsafe { libc::strdup(c.as_ptr()) };
        return if d.is_null() { Err(Errno(libc::ENOMEM)) } else { Ok(Handle(d as usize)) };
    }
    if size == 0 {
        return Err(Errno::INVAL);
    }
    if size < bytes.len() + 1 {
        return Err(Errno(libc::ERANGE));
    }
    // SAFETY: getcwd's contract: buf holds size > bytes.len() bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, bytes.len());
        *buf.add(bytes.len()) = 0;
    }
    Ok(Handle(buf as usize))
}

/// getcwd asks the backend even from inside its own calls (its relative paths resolve
/// through `std::env::current_dir`, which is getcwd).
pub unsafe fn getcwd<B: Backend>(buf: *mut c_char, size: size_t) -> *mut c_char {
    if let Some(p) = B::working_dir() {
        if B::working_dir_removed() {
            crate::set_errno(libc::ENOENT); // as Linux's
            return std::ptr::null_mut();
        }
        return Handle::to_c(give_path(&p, buf, size)).cast();
    }
    forward!(getcwd(buf, size): fn(*mut c_char, size_t) -> *mut c_char)
}

pub unsafe fn get_current_dir_name<B: Backend>() -> *mut c_char {
    if let Some(p) = B::working_dir() {
        if B::working_dir_removed() {
            crate::set_errno(libc::ENOENT);
            return std::ptr::null_mut();
        }
        return Handle::to_c(give_path(&p, std::ptr::null_mut(), 0)).cast();
    }
    forward!(get_current_dir_name(): fn() -> *mut c_char)
}

fn to_statfs(s: FsStats) -> libc::statfs {
    // SAFETY: struct statfs is plain data; all-zero is valid.
    let mut o: libc::statfs = unsafe { std::mem::zeroed() };
    o.f_type = s.magic as _;
    o.f_bsize = s.block_bytes as _;
    o.f_frsize = s.block_bytes as _;
    o.f_blocks = s.blocks_total;
    o.f_bfree = s.blocks_free;
    o.f_bavail = s.blocks_free;
    o.f_files = s.inodes_total;
    o.f_ffree = s.inodes_free;
    o.f_namelen = s.name_max as _;
    o
}

fn to_statvfs(s: FsStats) -> libc::statvfs {
    // SAFETY: struct statvfs is plain data; all-zero is valid.
    let mut o: libc::statvfs = unsafe { std::mem::zeroed() };
    o.f_bsize = s.block_bytes;
    o.f_frsize = s.block_bytes;
    o.f_blocks = s.blocks_total;
    o.f_bfree = s.blocks_free;
    o.f_bavail = s.blocks_free;
    o.f_files = s.inodes_total;
    o.f_ffree = s.inodes_free;
    o.f_favail = s.inodes_free;
    o.f_namemax = s.name_max;
    o
}

pub unsafe fn statfs<B: Backend>(path: *const c_char, out: *mut libc::statfs) -> c_int {
    // SAFETY: statfs's contract: path is a NUL-terminated string.
    let p = unsafe { c_str(path) };
    route_out(
        p.is_some(),
        out,
        |_| B::statfs(p?).map(|r| r.map(to_statfs)),
        |out| forward!(statfs(path, out): fn(*const c_char, *mut libc::statfs) -> c_int),
    )
}

pub unsafe fn fstatfs<B: Backend>(fd: c_int, out: *mut libc::statfs) -> c_int {
    route_out(
        B::claims(fd),
        out,
        |_| B::fstatfs(fd).map(|r| r.map(to_statfs)),
        |out| forward!(fstatfs(fd, out): fn(c_int, *mut libc::statfs) -> c_int),
    )
}

pub unsafe fn statvfs<B: Backend>(path: *const c_char, out: *mut libc::statvfs) -> c_int {
    // SAFETY: statvfs's contract: path is a NUL-terminated string.
    let p = unsafe { c_str(path) };
    route_out(
        p.is_some(),
        out,
        |_| B::statfs(p?).map(|r| r.map(to_statvfs)),
        |out| forward!(statvfs(path, out): fn(*const c_char, *mut libc::statvfs) -> c_int),
    )
}

pub unsafe fn fstatvfs<B: Backend>(fd: c_int, out: *mut libc::statvfs) -> c_int {
    route_out(
        B::claims(fd),
        out,
        |_| B::fstatfs(fd).map(|r| r.map(to_statvfs)),
        |out| forward!(fstatvfs(fd, out): fn(c_int, *mut libc::statvfs) -> c_int),
    )
}

/// The path of a UNIX socket address (not abstract, not unnamed).
///
/// # Safety
/// `addr`, when not null, holds `len` bytes (bind's and connect's contract).
unsafe fn unix_path(addr: *const sockaddr, len: socklen_t) -> Option<CString> {
    let fam = std::mem::size_of::<libc::sa_family_t>();
    if addr.is_null() || (len as usize) < fam + 1 {
        return None;
    }
    // SAFETY: the caller's contract: the family comes first.
    if unsafe { (*addr).sa_family } as c_int != libc::AF_UNIX {
        return None;
    }
    let un = addr as *const libc::sockaddr_un;
    let max = (len as usize - fam).min(108);
    // SAFETY: sun_path holds at least `max` bytes of the caller's buffer.
    let path = unsafe { std::slice::from_raw_parts((*un).sun_path.as_ptr() as *const u8, max) };
    if path.first().is_none_or(|&b| b == 0) {
        return None; // abstract or unnamed
    }
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    CString::new(&path[..end]).ok()
}

pub unsafe fn bind<B: Backend>(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: bind's contract: addr holds len bytes.
    if let Some(p) = crate::guarded(|| unsafe { unix_path(addr, len) }).flatten() {
        if let Some(r) = crate::serve(|| B::bind_unix(fd, &p)) {
            return <()>::to_c(r);
        }
    }
    forward!(bind(fd, addr, len): fn(c_int, *const sockaddr, socklen_t) -> c_int)
}

pub unsafe fn connect<B: Backend>(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: connect's contract: addr holds len bytes.
    if let Some(p) = crate::guarded(|| unsafe { unix_path(addr, len) }).flatten() {
        if let Some(r) = crate::serve(|| B::connect_unix(fd, &p)) {
            return <()>::to_c(r);
        }
    }
    forward!(connect(fd, addr, len): fn(c_int, *const sockaddr, socklen_t) -> c_int)
}

/// A UNIX socket address of `path` and its length (None when it does not fit).
pub fn unix_address(path: &CStr) -> Option<(libc::sockaddr_un, socklen_t)> {
    // SAFETY: an all-zero sockaddr_un is a valid value.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.to_bytes();
    if bytes.len() >= a.sun_path.len() {
        return None;
    }
    for (d, &b) in a.sun_path.iter_mut().zip(bytes) {
        *d = b as c_char;
    }
    Some((a, (std::mem::offset_of!(libc::sockaddr_un, sun_path) + bytes.len() + 1) as socklen_t))
}

/// The address to send a datagram to instead of `addr` (`len` bytes): the kernel's path
/// for a UNIX socket of the backend's (`Process::unix_peer`), None to send as given.
///
/// # Safety
/// `addr`, when not null, holds `len` bytes.
unsafe fn peer_of<B: Backend>(
    addr: *const sockaddr,
    len: socklen_t,
) -> Option<Result<(libc::sockaddr_un, socklen_t), c_int>> {
    // SAFETY: the caller's contract.
    let p = crate::guarded(|| unsafe { unix_path(addr, len) }).flatten()?;
    let node = crate::serve(|| B::unix_peer(&p))?;
    Some(node.map_err(|e| e.0).and_then(|n| unix_address(&n).ok_or(libc::ENAMETOOLONG)))
}

pub unsafe fn sendto<B: Backend>(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> libc::ssize_t {
    // SAFETY: sendto's contract: addr holds len bytes.
    match unsafe { peer_of::<B>(addr, len) } {
        Some(Ok((a, alen))) => {
            let a = (&raw const a).cast::<sockaddr>();
            forward!(sendto(fd, buf, n, flags, a, alen): fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> libc::ssize_t)
        }
        Some(Err(e)) => {
            crate::set_errno(e);
            -1
        }
        None => {
            forward!(sendto(fd, buf, n, flags, addr, len): fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> libc::ssize_t)
        }
    }
}

pub unsafe fn sendmsg<B: Backend>(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> libc::ssize_t {
    // SAFETY: sendmsg's contract: msg, when not null, is a msghdr whose name holds namelen bytes.
    let peer = if msg.is_null() { None } else { unsafe { peer_of::<B>((*msg).msg_name.cast(), (*msg).msg_namelen) } };
    match peer {
        Some(Ok((mut a, alen))) => {
            // SAFETY: as above; a copy of the caller's header, naming our address instead.
            let mut m = unsafe { *msg };
            m.msg_name = (&raw mut a).cast();
            m.msg_namelen = alen;
            let m = &raw const m;
            forward!(sendmsg(fd, m, flags): fn(c_int, *const libc::msghdr, c_int) -> libc::ssize_t)
        }
        Some(Err(e)) => {
            crate::set_errno(e);
            -1
        }
        None => forward!(sendmsg(fd, msg, flags): fn(c_int, *const libc::msghdr, c_int) -> libc::ssize_t),
    }
}

/// The source descriptor a clone request names (FICLONE's argument, FICLONERANGE's
/// `src_fd`).
///
/// # Safety
/// ioctl's contract for the request: FICLONERANGE's argument, when not null, points to
/// a `struct file_clone_range`.
unsafe fn clone_source(request: c_ulong, arg: *mut c_void) -> Option<c_int> {
    match request {
        libc::FICLONE => Some(arg as usize as c_int),
        libc::FICLONERANGE if !arg.is_null() => {
            // SAFETY: the caller's contract.
            Some(unsafe { (*(arg as *const libc::file_clone_range)).src_fd as c_int })
        }
        _ => None,
    }
}

/// ioctl's third argument is variadic: declared here as one pointer, as the System V
/// x86-64 and AArch64 conventions pass it. A clone reaches the backend when it claims
/// either descriptor.
pub unsafe fn ioctl<B: Backend>(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int {
    // SAFETY: ioctl's contract for the request.
    let src = unsafe { clone_source(request, arg) };
    route::<c_int>(
        B::claims(fd) || src.is_some_and(B::claims),
        |next| B::ioctl(fd, request, IoctlArg(arg), next),
        || forward!(ioctl(fd, request, arg): fn(c_int, c_ulong, *mut c_void) -> c_int),
    )
}

pub unsafe fn exit_now<B: Backend>(status: c_int) -> ! {
    if !crate::in_shim() {
        B::before_exit();
    }
    forward!(_exit(status): fn(c_int) -> ());
    unreachable!("_exit returned")
}

/// `fork`, with the backend's preparation before it and its completion after it in both
/// processes (glibc's `pthread_atfork` handlers run inside the real fork, between the two).
pub unsafe fn fork<B: Backend>() -> libc::pid_t {
    let prepared = crate::guarded(B::before_fork).flatten();
    let pid = forward!(fork(): fn() -> libc::pid_t);
    let e = crate::errno();
    crate::guarded(|| B::after_fork(prepared, pid));
    crate::set_errno(e);
    pid
}

/// What `vfork` runs (a naked jump from [`export!`](crate::export), so that the function
/// chosen returns to `vfork`'s caller, in the child too): [`fork`] where the backend says
/// so, else libc's `vfork`.
pub fn vfork_target<B: Backend>(fork: unsafe extern "C" fn() -> libc::pid_t) -> *const c_void {
    if crate::guarded(B::vfork_as_fork).unwrap_or(false) {
        return fork as *const c_void;
    }
    crate::real!(vfork: fn() -> libc::pid_t) as *const c_void
}
