//! Extended attributes and ACLs on HashFS paths and descriptors: the `get`, `set`, `list`
//! and `remove` calls in their path, `l` (no follow) and `f` (descriptor) forms, with the
//! kernel's permission rules (`xattr_permission`) applied here, as the kernel cannot:
//! `trusted.*` is root's (EPERM to write, ENODATA to read, hidden from lists); `security.*`
//! takes root to write; `user.*` lives only on regular files and directories, needs read
//! or write permission, and on a sticky directory only its owner writes it;
//! `system.posix_acl_*` is changed by the owner or root, validated, and keeps the mode in
//! step. The buffer protocol is Linux's: size 0 asks for the length, a smaller buffer is
//! ERANGE. The shim stores ACLs but checks access by the mode bits only.

use super::*;
use hashfs::XattrMode;
use hashfs_interpose::{Errno, Next, Served, XattrTarget, Xattrs};

/// `op` on the inode a call names, if it is ours (`meta::Target::on`: a path resolved and
/// `op` run under the image lock).
fn on_target<T>(t: XattrTarget<'_>, op: impl FnMut(Ino) -> Result<T, c_int>) -> Option<Result<T, c_int>> {
    let t = match t {
        XattrTarget::Path(path, last) => super::meta::Target::Path(fs_path_of(path)?, last),
        XattrTarget::Fd(fd) => super::meta::Target::Ino(super::meta::fd_target(fd)?),
    };
    Some(t.on(op))
}

/// A path target the image does not serve that leads out of it through it (`/pm/..`,
/// `..` from a working directory inside it): the kernel's path for it (`path::kernel_path_at`),
/// for every xattr call.
fn kernel_target(t: &XattrTarget<'_>) -> Option<(CString, LastLink)> {
    match *t {
        XattrTarget::Path(path, last) if fs_path_of(path).is_none() => {
            Some((super::path::kernel_path_at(libc::AT_FDCWD, path)?, last))
        }
        _ => None,
    }
}

fn euid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() }
}

/// The kernel's `xattr_permission` (and the capability checks behind it) for `name`, to
/// read it (`want`: `R_OK`) or change it (`W_OK`).
fn allowed(md: &Metadata, name: &[u8], want: c_int) -> Result<(), c_int> {
    let (root, write) = (euid() == 0, want == libc::W_OK);
    if name.starts_with(b"trusted.") {
        return if root { Ok(()) } else { Err(if write { libc::EPERM } else { libc::ENODATA }) };
    }
    if name.starts_with(b"security.") {
        return if write && !root { Err(libc::EPERM) } else { Ok(()) };
    }
    if name.starts_with(b"system.") {
        return if write && !root && md.uid != euid() { Err(libc::EPERM) } else { Ok(()) };
    }
    if name.starts_with(b"user.") {
        if !md.is_file() && !md.is_dir() {
            return Err(if write { libc::EPERM } else { libc::ENODATA });
        }
        if write && md.is_dir() && md.perm & 0o1000 != 0 && !root && md.uid != euid() {
            return Err(libc::EPERM);
        }
    }
    if super::permitted(md, want) {
        Ok(())
    } else {
        Err(libc::EACCES)
    }
}

/// Copies `data` out under the size protocol.
fn give(data: &[u8], buf: &mut [u8]) -> Result<usize, c_int> {
    if buf.is_empty() {
        return Ok(data.len());
    }
    if data.len() > buf.len() {
        return Err(libc::ERANGE);
    }
    buf[..data.len()].copy_from_slice(data);
    Ok(data.len())
}

fn get(ino: Ino, name: &CStr, value: &mut [u8]) -> Result<usize, c_int> {
    let fs = shim().fs()?;
    let name = name.to_bytes();
    let md = fs.peek_attr(ino).map_err(|e| e.errno())?;
    allowed(&md, name, libc::R_OK)?;
    let v = fs.get_xattr(ino, name).map_err(|e| e.errno())?;
    give(&v, value)
}

fn list(ino: Ino, buf: &mut [u8]) -> Result<usize, c_int> {
    let fs = shim().fs()?;
    let root = euid() == 0;
    let mut out = Vec::new();
    for n in fs.list_xattr(ino).map_err(|e| e.errno())? {
        if root || !n.starts_with(b"trusted.") {
            out.extend_from_slice(&n);
            out.push(0);
        }
    }
    give(&out, buf)
}

fn set(ino: Ino, name: &CStr, value: &[u8], flags: c_int) -> Result<(), c_int> {
    let fs = shim().fs()?;
    let name = name.to_bytes();
    let mode = XattrMode::from_linux_flags(flags).ok_or(libc::EINVAL)?;
    let md = fs.peek_attr(ino).map_err(|e| e.errno())?;
    allowed(&md, name, libc::W_OK)?;
    fs.set_xattr(ino, name, value, mode).map_err(|e| e.errno())
}

fn remove(ino: Ino, name: &CStr) -> Result<(), c_int> {
    let fs = shim().fs()?;
    let name = name.to_bytes();
    let md = fs.peek_attr(ino).map_err(|e| e.errno())?;
    allowed(&md, name, libc::W_OK)?;
    fs.remove_xattr(ino, name).map_err(|e| e.errno())
}

/// A call's `op` on the inode `t` names, given the call's checked arguments: their error
/// (a name too long, say) if they have one, once the target is known to be ours.
fn serve<A, T>(
    t: XattrTarget<'_>,
    args: Result<A, Errno>,
    mut op: impl FnMut(Ino, &mut A) -> Result<T, c_int>,
) -> Served<T> {
    match args {
        Ok(mut a) => on_target(t, |i| op(i, &mut a)).map(|r| r.map_err(Errno)),
        Err(e) => on_target(t, |_| Ok(())).map(|_| Err(e)),
    }
}

impl Xattrs for Preload {
    fn get_xattr(t: XattrTarget<'_>, nv: Result<(&CStr, &mut [u8]), Errno>, _: Next<'_, usize>) -> Served<usize> {
        if let Some((k, last)) = kernel_target(&t) {
            let (n, v) = match nv {
                Ok(nv) => nv,
                Err(e) => return Some(Err(e)),
            };
            let (p, name, buf, len) = (k.as_ptr(), n.as_ptr(), v.as_mut_ptr() as *mut c_void, v.len());
            // SAFETY: NUL-terminated strings and a buffer of `len` bytes (inside the shim,
            // libc's calls are the kernel's).
            let r = unsafe {
                match last {
                    LastLink::Follow => libc::getxattr(p, name, buf, len),
                    LastLink::NoFollow => libc::lgetxattr(p, name, buf, len),
                }
            };
            return Some(if r >= 0 { Ok(r as usize) } else { Err(Errno::last()) });
        }
        serve(t, nv, |i, (n, v)| get(i, n, v))
    }

    fn list_xattr(t: XattrTarget<'_>, buf: Result<&mut [u8], Errno>, _: Next<'_, usize>) -> Served<usize> {
        if let Some((k, last)) = kernel_target(&t) {
            let b = match buf {
                Ok(b) => b,
                Err(e) => return Some(Err(e)),
            };
            let (p, out, len) = (k.as_ptr(), b.as_mut_ptr() as *mut c_char, b.len());
            // SAFETY: as in get_xattr.
            let r = unsafe {
                match last {
                    LastLink::Follow => libc::listxattr(p, out, len),
                    LastLink::NoFollow => libc::llistxattr(p, out, len),
                }
            };
            return Some(if r >= 0 { Ok(r as usize) } else { Err(Errno::last()) });
        }
        serve(t, buf, |i, b| list(i, b))
    }

    fn set_xattr(t: XattrTarget<'_>, nv: Result<(&CStr, &[u8]), Errno>, flags: c_int, _: Next<'_, ()>) -> Served<()> {
        if let Some((k, last)) = kernel_target(&t) {
            let (n, v) = match nv {
                Ok(nv) => nv,
                Err(e) => return Some(Err(e)),
            };
            let (p, name, val, len) = (k.as_ptr(), n.as_ptr(), v.as_ptr() as *const c_void, v.len());
            // SAFETY: NUL-terminated strings and a value of `len` bytes (inside the shim,
            // libc's calls are the kernel's).
            let r = unsafe {
                match last {
                    LastLink::Follow => libc::setxattr(p, name, val, len, flags),
                    LastLink::NoFollow => libc::lsetxattr(p, name, val, len, flags),
                }
            };
            return Some(if r == 0 { Ok(()) } else { Err(Errno::last()) });
        }
        serve(t, nv, |i, (n, v)| set(i, n, v, flags))
    }

    fn remove_xattr(t: XattrTarget<'_>, name: Result<&CStr, Errno>, _: Next<'_, ()>) -> Served<()> {
        if let Some((k, last)) = kernel_target(&t) {
            let n = match name {
                Ok(n) => n,
                Err(e) => return Some(Err(e)),
            };
            // SAFETY: NUL-terminated strings (inside the shim, libc's calls are the kernel's).
            let r = unsafe {
                match last {
                    LastLink::Follow => libc::removexattr(k.as_ptr(), n.as_ptr()),
                    LastLink::NoFollow => libc::lremovexattr(k.as_ptr(), n.as_ptr()),
                }
            };
            return Some(if r == 0 { Ok(()) } else { Err(Errno::last()) });
        }
        serve(t, name, |i, n| remove(i, n))
    }
}
