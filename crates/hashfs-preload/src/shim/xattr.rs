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

/// Which inode a call names: a path (following the last symlink or not) or a descriptor.
enum Target {
    Path(PathBuf, bool),
    Fd(c_int),
}

impl Target {
    fn ino(&self, fs: &FileSystem<MmapDevice>) -> Result<Ino, c_int> {
        match self {
            Target::Path(p, true) => fs.resolve(p).map_err(|e| e.errno()),
            Target::Path(p, false) => fs.resolve_nofollow(p).map_err(|e| e.errno()),
            &Target::Fd(fd) => shim().file(fd).map(|of| of.ino).ok_or(libc::EBADF),
        }
    }
}

fn euid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() }
}

/// The kernel's `xattr_permission` (and the capability checks behind it) for `name`.
fn allowed(md: &Metadata, name: &[u8], write: bool) -> Result<(), c_int> {
    let root = euid() == 0;
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
    if super::permitted(md, if write { libc::W_OK } else { libc::R_OK }) {
        Ok(())
    } else {
        Err(libc::EACCES)
    }
}

fn name_of(name: *const c_char) -> Result<Vec<u8>, c_int> {
    if name.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: libc's contract: a NUL-terminated name.
    Ok(unsafe { CStr::from_ptr(name) }.to_bytes().to_vec())
}

/// Copies `data` out under the size protocol.
fn give(data: &[u8], buf: *mut c_void, size: size_t) -> Result<usize, c_int> {
    if size == 0 {
        return Ok(data.len());
    }
    if data.len() > size {
        return Err(libc::ERANGE);
    }
    // SAFETY: libc's contract: buf holds size >= data.len() bytes.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf as *mut u8, data.len()) };
    Ok(data.len())
}

fn get(t: Target, name: *const c_char, value: *mut c_void, size: size_t) -> Result<usize, c_int> {
    let fs = shim().fs()?;
    let ino = t.ino(fs)?;
    let name = name_of(name)?;
    let md = fs.peek_attr(ino).map_err(|e| e.errno())?;
    allowed(&md, &name, false)?;
    let v = fs.get_xattr(ino, &name).map_err(|e| e.errno())?;
    give(&v, value, size)
}

fn list(t: Target, buf: *mut c_char, size: size_t) -> Result<usize, c_int> {
    let fs = shim().fs()?;
    let ino = t.ino(fs)?;
    let root = euid() == 0;
    let mut out = Vec::new();
    for n in fs.list_xattr(ino).map_err(|e| e.errno())? {
        if root || !n.starts_with(b"trusted.") {
            out.extend_from_slice(&n);
            out.push(0);
        }
    }
    give(&out, buf as *mut c_void, size)
}

fn set(t: Target, name: *const c_char, value: *const c_void, size: size_t, flags: c_int) -> Result<usize, c_int> {
    let fs = shim().fs()?;
    let ino = t.ino(fs)?;
    let name = name_of(name)?;
    let mode = XattrMode::from_linux_flags(flags).ok_or(libc::EINVAL)?;
    let md = fs.peek_attr(ino).map_err(|e| e.errno())?;
    allowed(&md, &name, true)?;
    let v = if size == 0 {
        &[][..]
    } else {
        // SAFETY: libc's contract: value holds size bytes.
        unsafe { std::slice::from_raw_parts(value as *const u8, size) }
    };
    fs.set_xattr(ino, &name, v, mode).map(|()| 0).map_err(|e| e.errno())
}

fn remove(t: Target, name: *const c_char) -> Result<usize, c_int> {
    let fs = shim().fs()?;
    let ino = t.ino(fs)?;
    let name = name_of(name)?;
    let md = fs.peek_attr(ino).map_err(|e| e.errno())?;
    allowed(&md, &name, true)?;
    fs.remove_xattr(ino, &name).map(|()| 0).map_err(|e| e.errno())
}

fn ret_int(r: Result<usize, c_int>) -> c_int {
    match r {
        Ok(_) => 0,
        Err(e) => fail(e),
    }
}

macro_rules! path_fns {
    ($get:ident, $list:ident, $set:ident, $remove:ident, $follow:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $get(path: *const c_char, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t {
            if let Some(Some(p)) = guarded(|| fs_path(path)) {
                return guarded(|| ret_size(get(Target::Path(p, $follow), name, value, size))).unwrap_or(-1);
            }
            // SAFETY: forwarding.
            unsafe { real!($get: fn(*const c_char, *const c_char, *mut c_void, size_t) -> ssize_t)(path, name, value, size) }
        }
        #[no_mangle]
        pub unsafe extern "C" fn $list(path: *const c_char, list_buf: *mut c_char, size: size_t) -> ssize_t {
            if let Some(Some(p)) = guarded(|| fs_path(path)) {
                return guarded(|| ret_size(list(Target::Path(p, $follow), list_buf, size))).unwrap_or(-1);
            }
            // SAFETY: forwarding.
            unsafe { real!($list: fn(*const c_char, *mut c_char, size_t) -> ssize_t)(path, list_buf, size) }
        }
        #[no_mangle]
        pub unsafe extern "C" fn $set(
            path: *const c_char,
            name: *const c_char,
            value: *const c_void,
            size: size_t,
            flags: c_int,
        ) -> c_int {
            if let Some(Some(p)) = guarded(|| fs_path(path)) {
                return guarded(|| ret_int(set(Target::Path(p, $follow), name, value, size, flags))).unwrap_or(-1);
            }
            // SAFETY: forwarding.
            unsafe {
                real!($set: fn(*const c_char, *const c_char, *const c_void, size_t, c_int) -> c_int)(
                    path, name, value, size, flags,
                )
            }
        }
        #[no_mangle]
        pub unsafe extern "C" fn $remove(path: *const c_char, name: *const c_char) -> c_int {
            if let Some(Some(p)) = guarded(|| fs_path(path)) {
                return guarded(|| ret_int(remove(Target::Path(p, $follow), name))).unwrap_or(-1);
            }
            // SAFETY: forwarding.
            unsafe { real!($remove: fn(*const c_char, *const c_char) -> c_int)(path, name) }
        }
    };
}

path_fns!(getxattr, listxattr, setxattr, removexattr, true);
path_fns!(lgetxattr, llistxattr, lsetxattr, lremovexattr, false);

#[no_mangle]
pub unsafe extern "C" fn fgetxattr(fd: c_int, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t {
    if ours(fd) {
        return guarded(|| ret_size(get(Target::Fd(fd), name, value, size))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fgetxattr: fn(c_int, *const c_char, *mut c_void, size_t) -> ssize_t)(fd, name, value, size) }
}

#[no_mangle]
pub unsafe extern "C" fn flistxattr(fd: c_int, list_buf: *mut c_char, size: size_t) -> ssize_t {
    if ours(fd) {
        return guarded(|| ret_size(list(Target::Fd(fd), list_buf, size))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(flistxattr: fn(c_int, *mut c_char, size_t) -> ssize_t)(fd, list_buf, size) }
}

#[no_mangle]
pub unsafe extern "C" fn fsetxattr(
    fd: c_int,
    name: *const c_char,
    value: *const c_void,
    size: size_t,
    flags: c_int,
) -> c_int {
    if ours(fd) {
        return guarded(|| ret_int(set(Target::Fd(fd), name, value, size, flags))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe {
        real!(fsetxattr: fn(c_int, *const c_char, *const c_void, size_t, c_int) -> c_int)(fd, name, value, size, flags)
    }
}

#[no_mangle]
pub unsafe extern "C" fn fremovexattr(fd: c_int, name: *const c_char) -> c_int {
    if ours(fd) {
        return guarded(|| ret_int(remove(Target::Fd(fd), name))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fremovexattr: fn(c_int, *const c_char) -> c_int)(fd, name) }
}
