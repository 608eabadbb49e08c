//! UNIX sockets at paths in the image. A socket's traffic is never the file system's: the
//! kernel moves it between the processes connected. So, as for a FIFO (`fifo.rs`), a
//! socket bound at a path of the image is two things: the image's inode of type socket at
//! that name, which the bind makes (EADDRINUSE when the name is taken, as the kernel's bind
//! answers; its mode 0777 less the umask, as the kernel's), and a kernel socket bound at the
//! node that stands for it, `<region>.fifos/<inode>-<generation>` beside the image's shared
//! region, the same for every process of the image. A connect to the path resolves it in
//! the image (symbolic links followed; ENOENT when there is nothing, ECONNREFUSED when it is
//! not a socket or nothing is bound there, EACCES without write permission, as the kernel's)
//! and connects to that node. The socket's last name removed through the shim takes the node
//! with it, and the region's removal (the last process to leave) every socket's node
//! (`hashfs::share`'s `remove_region`); a process that may only read the image binds
//! nothing (EROFS).
//!
//! A datagram sent with `sendto` or `sendmsg` to a path in the image goes to the node, found
//! as a connect finds it. What differs from the kernel's: `getsockname`, `getpeername` and
//! a received datagram's sender give the node's path, not the name in the image; a socket
//! bound through the mount (`hashfs mount`) and one bound through the shim at the same
//! name are not each other's (each side's kernel socket is its own).
//! Before 2026-12-07 bind and connect at a path in the image failed with EOPNOTSUPP.

use super::*;

/// bind of a UNIX socket `fd` at `path`: served when the path is in the image.
pub(super) fn bind(fd: c_int, path: &CStr) -> Option<Result<(), c_int>> {
    let p = fs_path_of(path)?;
    Some(bind_at(fd, &p))
}

/// connect of a UNIX socket `fd` to `path`: served when the path is in the image.
pub(super) fn connect(fd: c_int, path: &CStr) -> Option<Result<(), c_int>> {
    let p = fs_path_of(path)?;
    Some(connect_at(fd, &p))
}

/// The kernel's path for a datagram sent to `path` (`sendto`, `sendmsg`): served when the
/// path is in the image, checked as a connect is.
pub(super) fn peer(path: &CStr) -> Option<Result<CString, c_int>> {
    let p = fs_path_of(path)?;
    Some(peer_node(&p).and_then(|n| CString::new(n.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)))
}

fn bind_at(fd: c_int, p: &Path) -> Result<(), c_int> {
    let fs = shim().fs()?;
    match super::names::mknod_ours(p, libc::S_IFSOCK | 0o777, 0) {
        Err(libc::EEXIST) => return Err(libc::EADDRINUSE),
        r => r?,
    }
    let made = fs.resolve_nofollow(p).and_then(|i| fs.peek_attr(i)).map_err(|e| e.errno());
    let bound = made.and_then(|m| {
        let node = node(&m, true)?;
        // A node of this inode and generation can only be one its last unlink did not
        // reach (removed through the mount): nothing is bound to it any more.
        let _ = std::fs::remove_file(&node);
        at_node(&node, |a, len| {
            // SAFETY: the caller's socket; `a` holds `len` bytes of a sockaddr_un.
            unsafe { real!(bind: fn(c_int, *const libc::sockaddr, libc::socklen_t) -> c_int)(fd, a, len) }
        })
    });
    if bound.is_err() {
        let _ = fs.remove_file(p); // the bind made nothing, as the kernel's that fails
    }
    bound
}

/// The node standing for the socket at `p`, as a connect or a datagram finds it: ENOENT
/// when there is nothing, ECONNREFUSED when it is not a socket or nothing was ever bound
/// there, EACCES without write permission, as the kernel's.
fn peer_node(p: &Path) -> Result<PathBuf, c_int> {
    let fs = shim().fs()?;
    let m = fs.resolve(p).and_then(|i| fs.peek_attr(i)).map_err(|e| e.errno())?;
    if m.file_type != FileType::Socket {
        return Err(libc::ECONNREFUSED);
    }
    if !super::stat::permitted(&m, libc::W_OK) {
        return Err(libc::EACCES);
    }
    // No node (no directory, or none for this socket): nothing is bound there.
    let node = node(&m, false).map_err(|_| libc::ECONNREFUSED)?;
    if std::fs::symlink_metadata(&node).is_err() {
        return Err(libc::ECONNREFUSED);
    }
    Ok(node)
}

fn connect_at(fd: c_int, p: &Path) -> Result<(), c_int> {
    let node = peer_node(p)?;
    match at_node(&node, |a, len| {
        // SAFETY: the caller's socket; `a` holds `len` bytes of a sockaddr_un.
        unsafe { real!(connect: fn(c_int, *const libc::sockaddr, libc::socklen_t) -> c_int)(fd, a, len) }
    }) {
        Err(libc::ENOENT) => Err(libc::ECONNREFUSED),
        r => r,
    }
}

/// The kernel node standing for socket `m`, the same for every process of the image (in
/// the directory made if there is none and `make`).
fn node(m: &Metadata, make: bool) -> Result<PathBuf, c_int> {
    super::fifo::node_of(m.ino, m.generation, make)
}

/// `call` with the UNIX socket address of `node` and its length; its errno on failure.
fn at_node(node: &Path, call: impl FnOnce(*const libc::sockaddr, libc::socklen_t) -> c_int) -> Result<(), c_int> {
    let path = CString::new(node.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
    let (a, len) = hashfs_interpose::entry::process::unix_address(&path).ok_or(libc::ENAMETOOLONG)?;
    if call((&raw const a).cast(), len) == 0 {
        Ok(())
    } else {
        Err(hashfs_interpose::errno())
    }
}
