//! Names: unlink, rmdir, mkdir, rename, chmod, utimensat, symlink, link, readlink.

use super::*;

#[no_mangle]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    if let Some(r) = path_op(path, |fs, p| fs.remove_file(p)) {
        return ret0(r);
    }
    // SAFETY: forwarding.
    unsafe { real!(unlink: fn(*const c_char) -> c_int)(path) }
}

#[no_mangle]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path_at(dirfd, path)) {
        return guarded(|| {
            ret0(shim().fs().and_then(|fs| {
                if flags & libc::AT_REMOVEDIR != 0 { fs.remove_dir(&p) } else { fs.remove_file(&p) }
                    .map_err(|e| e.errno())
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(unlinkat: fn(c_int, *const c_char, c_int) -> c_int)(dirfd, path, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    if let Some(r) = path_op(path, |fs, p| fs.remove_dir(p)) {
        return ret0(r);
    }
    // SAFETY: forwarding.
    unsafe { real!(rmdir: fn(*const c_char) -> c_int)(path) }
}

#[no_mangle]
pub unsafe extern "C" fn mkdir(path: *const c_char, mode: mode_t) -> c_int {
    if let Some(r) = path_op(path, |fs, p| fs.create_dir(p, mode & 0o7777 & !process_umask()).map(|_| ())) {
        return ret0(r);
    }
    // SAFETY: forwarding.
    unsafe { real!(mkdir: fn(*const c_char, mode_t) -> c_int)(path, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn mkdirat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path_at(dirfd, path)) {
        return guarded(|| {
            ret0(
                shim().fs().and_then(|fs| {
                    fs.create_dir(&p, mode & 0o7777 & !process_umask()).map(|_| ()).map_err(|e| e.errno())
                }),
            )
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(mkdirat: fn(c_int, *const c_char, mode_t) -> c_int)(dirfd, path, mode) }
}

pub(super) fn rename_impl(from: Option<PathBuf>, to: Option<PathBuf>, mode: RenameMode) -> Option<c_int> {
    match (from, to) {
        (None, None) => None,
        (Some(a), Some(b)) => {
            guarded(|| ret0(shim().fs().and_then(|fs| fs.rename_with(&a, &b, mode).map_err(|e| e.errno()))))
        }
        _ => Some(fail(libc::EXDEV)), // across the prefix boundary
    }
}

#[no_mangle]
pub unsafe extern "C" fn rename(from: *const c_char, to: *const c_char) -> c_int {
    let paths = guarded(|| (fs_path(from), fs_path(to)));
    if let Some((a, b)) = paths {
        if let Some(r) = rename_impl(a, b, RenameMode::Replace) {
            return r;
        }
    }
    // SAFETY: forwarding.
    unsafe { real!(rename: fn(*const c_char, *const c_char) -> c_int)(from, to) }
}

#[no_mangle]
pub unsafe extern "C" fn renameat(fd1: c_int, from: *const c_char, fd2: c_int, to: *const c_char) -> c_int {
    let paths = guarded(|| (fs_path_at(fd1, from), fs_path_at(fd2, to)));
    if let Some((a, b)) = paths {
        if let Some(r) = rename_impl(a, b, RenameMode::Replace) {
            return r;
        }
    }
    // SAFETY: forwarding.
    unsafe { real!(renameat: fn(c_int, *const c_char, c_int, *const c_char) -> c_int)(fd1, from, fd2, to) }
}

#[no_mangle]
pub unsafe extern "C" fn renameat2(
    fd1: c_int,
    from: *const c_char,
    fd2: c_int,
    to: *const c_char,
    flags: c_uint,
) -> c_int {
    let mode = if flags & libc::RENAME_EXCHANGE != 0 {
        RenameMode::Exchange
    } else if flags & libc::RENAME_NOREPLACE != 0 {
        RenameMode::NoReplace
    } else {
        RenameMode::Replace
    };
    let paths = guarded(|| (fs_path_at(fd1, from), fs_path_at(fd2, to)));
    if let Some((a, b)) = paths {
        if let Some(r) = rename_impl(a, b, mode) {
            return r;
        }
    }
    // SAFETY: forwarding.
    unsafe {
        real!(renameat2: fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int)(fd1, from, fd2, to, flags)
    }
}

#[no_mangle]
pub unsafe extern "C" fn chmod(path: *const c_char, mode: mode_t) -> c_int {
    if let Some(r) = path_op(path, |fs, p| fs.set_permissions(p, mode & 0o7777)) {
        return ret0(r);
    }
    // SAFETY: forwarding.
    unsafe { real!(chmod: fn(*const c_char, mode_t) -> c_int)(path, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn fchmod(fd: c_int, mode: mode_t) -> c_int {
    if ours(fd) {
        return guarded(|| {
            let s = shim();
            ret0(s.file(fd).ok_or(libc::EBADF).and_then(|of| {
                s.fs().and_then(|fs| {
                    fs.setattr(of.ino, &SetAttr { perm: Some(mode & 0o7777), ..Default::default() })
                        .map(|_| ())
                        .map_err(|e| e.errno())
                })
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fchmod: fn(c_int, mode_t) -> c_int)(fd, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn utimensat(
    dirfd: c_int,
    path: *const c_char,
    times: *const libc::timespec,
    flags: c_int,
) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path_at(dirfd, path)) {
        let t = |i: usize| -> Option<SetTime> {
            if times.is_null() {
                return Some(SetTime::Now);
            }
            // SAFETY: libc's contract: two timespecs.
            let ts = unsafe { *times.add(i) };
            match ts.tv_nsec {
                libc::UTIME_OMIT => None,
                libc::UTIME_NOW => Some(SetTime::Now),
                n => Some(SetTime::At(ts.tv_sec * 1_000_000_000 + n)),
            }
        };
        let (a, m) = (t(0), t(1));
        return guarded(|| {
            ret0(shim().fs().and_then(|fs| {
                let ino = if flags & libc::AT_SYMLINK_NOFOLLOW != 0 { fs.resolve_nofollow(&p) } else { fs.resolve(&p) };
                ino.and_then(|i| fs.setattr(i, &SetAttr { atime: a, mtime: m, ..Default::default() }))
                    .map(|_| ())
                    .map_err(|e| e.errno())
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe {
        real!(utimensat: fn(c_int, *const c_char, *const libc::timespec, c_int) -> c_int)(dirfd, path, times, flags)
    }
}

#[no_mangle]
pub unsafe extern "C" fn symlink(target: *const c_char, link: *const c_char) -> c_int {
    if let Some(r) = path_op(link, |fs, p| {
        // SAFETY: libc's contract.
        let t = unsafe { CStr::from_ptr(target) }.to_bytes();
        fs.symlink(Path::new(std::ffi::OsStr::from_bytes(t)), p)
    }) {
        return ret0(r);
    }
    // SAFETY: forwarding.
    unsafe { real!(symlink: fn(*const c_char, *const c_char) -> c_int)(target, link) }
}

#[no_mangle]
pub unsafe extern "C" fn link(from: *const c_char, to: *const c_char) -> c_int {
    let paths = guarded(|| (fs_path(from), fs_path(to)));
    match paths {
        Some((Some(a), Some(b))) => {
            return guarded(|| ret0(shim().fs().and_then(|fs| fs.hard_link(&a, &b).map_err(|e| e.errno()))))
                .unwrap_or(-1)
        }
        Some((Some(_), None)) | Some((None, Some(_))) => return fail(libc::EXDEV),
        _ => {}
    }
    // SAFETY: forwarding.
    unsafe { real!(link: fn(*const c_char, *const c_char) -> c_int)(from, to) }
}

#[no_mangle]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t {
    if let Some(r) = path_op(path, |fs, p| fs.read_link(p)) {
        return match r {
            Ok(t) => {
                let b = t.as_os_str().as_bytes();
                let n = b.len().min(size);
                // SAFETY: libc's contract: buf holds size bytes.
                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), buf as *mut u8, n) };
                n as ssize_t
            }
            Err(e) => fail(e),
        };
    }
    // SAFETY: forwarding.
    unsafe { real!(readlink: fn(*const c_char, *mut c_char, size_t) -> ssize_t)(path, buf, size) }
}
