//! Metadata calls beyond `chmod`, `fchmod` and `utimensat` (in the parent module): owners
//! (`chown`, `lchown`, `fchown`, `fchownat`), `fchmodat`, the other time setters
//! (`futimens`, `utime`, `utimes`, `lutimes`, `futimes`), the `*at` forms of `symlink`,
//! `link` and `readlink`, and special files (`mknod`, `mknodat`, `mkfifo`, `mkfifoat`).
//!
//! Ownership follows the kernel's rule: root may give a file to anyone; its owner may
//! only change its group, to one of their own groups; anyone else gets EPERM.

use super::*;

/// The inode that (dirfd, path, flags) names, if it is ours: `AT_EMPTY_PATH` with an empty
/// path names the descriptor itself.
fn target_at(dirfd: c_int, path: *const c_char, flags: c_int) -> Option<Result<Ino, c_int>> {
    // SAFETY: libc's contract: a NUL-terminated path (checked for null).
    let empty = !path.is_null() && unsafe { *path } == 0;
    if (path.is_null() || empty && flags & libc::AT_EMPTY_PATH != 0) && ours(dirfd) {
        return guarded(|| shim().file(dirfd).map(|of| of.ino).ok_or(libc::EBADF));
    }
    let p = guarded(|| fs_path_at(dirfd, path)).flatten()?;
    guarded(|| {
        let fs = shim().fs()?;
        let r = if flags & libc::AT_SYMLINK_NOFOLLOW != 0 { fs.resolve_nofollow(&p) } else { fs.resolve(&p) };
        r.map_err(|e| e.errno())
    })
}

fn fd_target(fd: c_int) -> Option<Result<Ino, c_int>> {
    if !ours(fd) {
        return None;
    }
    guarded(|| shim().file(fd).map(|of| of.ino).ok_or(libc::EBADF))
}

/// chown's permission rule and change, on inode `ino`.
fn chown_ino(ino: Ino, uid: libc::uid_t, gid: libc::gid_t) -> Result<(), c_int> {
    let fs = shim().fs()?;
    let md = fs.peek_attr(ino).map_err(|e| e.errno())?;
    let uid = (uid != u32::MAX).then_some(uid);
    let gid = (gid != u32::MAX).then_some(gid);
    // SAFETY: no preconditions.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if euid != 0 {
        let changes_owner = uid.is_some_and(|u| u != md.uid);
        let group_ok = gid.is_none_or(|g| g == md.gid || g == egid || super::in_supplementary_groups(g));
        if changes_owner || euid != md.uid || !group_ok {
            return Err(libc::EPERM);
        }
    }
    let kept = hashfs::perm_without_set_id(md.perm, md.is_dir());
    let perm = (kept != md.perm && (uid.is_some() || gid.is_some())).then_some(kept);
    fs.setattr(ino, &SetAttr { uid, gid, perm, ..Default::default() }).map(|_| ()).map_err(|e| e.errno())
}

fn set_times(ino: Ino, a: Option<SetTime>, m: Option<SetTime>) -> Result<(), c_int> {
    let fs = shim().fs()?;
    fs.setattr(ino, &SetAttr { atime: a, mtime: m, ..Default::default() }).map(|_| ()).map_err(|e| e.errno())
}

fn from_timeval(tv: *const libc::timeval) -> (Option<SetTime>, Option<SetTime>) {
    if tv.is_null() {
        return (Some(SetTime::Now), Some(SetTime::Now));
    }
    // SAFETY: libc's contract: two timevals.
    let t = |i| unsafe { *tv.add(i) };
    let ns = |v: libc::timeval| SetTime::At(v.tv_sec * 1_000_000_000 + v.tv_usec * 1000);
    (Some(ns(t(0))), Some(ns(t(1))))
}

fn from_timespec(ts: *const libc::timespec) -> (Option<SetTime>, Option<SetTime>) {
    if ts.is_null() {
        return (Some(SetTime::Now), Some(SetTime::Now));
    }
    let t = |i: usize| {
        // SAFETY: libc's contract: two timespecs.
        let v = unsafe { *ts.add(i) };
        match v.tv_nsec {
            libc::UTIME_OMIT => None,
            libc::UTIME_NOW => Some(SetTime::Now),
            n => Some(SetTime::At(v.tv_sec * 1_000_000_000 + n)),
        }
    };
    (t(0), t(1))
}

#[no_mangle]
pub unsafe extern "C" fn fchownat(
    dirfd: c_int,
    path: *const c_char,
    uid: libc::uid_t,
    gid: libc::gid_t,
    flags: c_int,
) -> c_int {
    if let Some(t) = target_at(dirfd, path, flags) {
        return guarded(|| ret0(t.and_then(|ino| chown_ino(ino, uid, gid)))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe {
        real!(fchownat: fn(c_int, *const c_char, libc::uid_t, libc::gid_t, c_int) -> c_int)(
            dirfd, path, uid, gid, flags,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn chown(path: *const c_char, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    if let Some(t) = target_at(libc::AT_FDCWD, path, 0) {
        return guarded(|| ret0(t.and_then(|ino| chown_ino(ino, uid, gid)))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(chown: fn(*const c_char, libc::uid_t, libc::gid_t) -> c_int)(path, uid, gid) }
}

#[no_mangle]
pub unsafe extern "C" fn lchown(path: *const c_char, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    if let Some(t) = target_at(libc::AT_FDCWD, path, libc::AT_SYMLINK_NOFOLLOW) {
        return guarded(|| ret0(t.and_then(|ino| chown_ino(ino, uid, gid)))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(lchown: fn(*const c_char, libc::uid_t, libc::gid_t) -> c_int)(path, uid, gid) }
}

#[no_mangle]
pub unsafe extern "C" fn fchown(fd: c_int, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    if let Some(t) = fd_target(fd) {
        return guarded(|| ret0(t.and_then(|ino| chown_ino(ino, uid, gid)))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fchown: fn(c_int, libc::uid_t, libc::gid_t) -> c_int)(fd, uid, gid) }
}

#[no_mangle]
pub unsafe extern "C" fn fchmodat(dirfd: c_int, path: *const c_char, mode: mode_t, flags: c_int) -> c_int {
    if let Some(t) = target_at(dirfd, path, flags) {
        return guarded(|| {
            ret0(t.and_then(|ino| {
                let fs = shim().fs()?;
                if flags & libc::AT_SYMLINK_NOFOLLOW != 0 && fs.peek_attr(ino).is_ok_and(|m| m.is_symlink()) {
                    return Err(libc::EOPNOTSUPP); // as Linux: symlinks have no mode to change
                }
                fs.setattr(ino, &SetAttr { perm: Some(mode & 0o7777), ..Default::default() })
                    .map(|_| ())
                    .map_err(|e| e.errno())
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fchmodat: fn(c_int, *const c_char, mode_t, c_int) -> c_int)(dirfd, path, mode, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn futimens(fd: c_int, times: *const libc::timespec) -> c_int {
    if let Some(t) = fd_target(fd) {
        let (a, m) = from_timespec(times);
        return guarded(|| ret0(t.and_then(|ino| set_times(ino, a, m)))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(futimens: fn(c_int, *const libc::timespec) -> c_int)(fd, times) }
}

#[no_mangle]
pub unsafe extern "C" fn futimes(fd: c_int, tv: *const libc::timeval) -> c_int {
    if let Some(t) = fd_target(fd) {
        let (a, m) = from_timeval(tv);
        return guarded(|| ret0(t.and_then(|ino| set_times(ino, a, m)))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(futimes: fn(c_int, *const libc::timeval) -> c_int)(fd, tv) }
}

macro_rules! path_times {
    ($name:ident, $flags:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, tv: *const libc::timeval) -> c_int {
            if let Some(t) = target_at(libc::AT_FDCWD, path, $flags) {
                let (a, m) = from_timeval(tv);
                return guarded(|| ret0(t.and_then(|ino| set_times(ino, a, m)))).unwrap_or(-1);
            }
            // SAFETY: forwarding.
            unsafe { real!($name: fn(*const c_char, *const libc::timeval) -> c_int)(path, tv) }
        }
    };
}
path_times!(utimes, 0);
path_times!(lutimes, libc::AT_SYMLINK_NOFOLLOW);

#[no_mangle]
pub unsafe extern "C" fn utime(path: *const c_char, times: *const libc::utimbuf) -> c_int {
    if let Some(t) = target_at(libc::AT_FDCWD, path, 0) {
        let (a, m) = if times.is_null() {
            (Some(SetTime::Now), Some(SetTime::Now))
        } else {
            // SAFETY: libc's contract: a utimbuf.
            let u = unsafe { *times };
            (Some(SetTime::At(u.actime * 1_000_000_000)), Some(SetTime::At(u.modtime * 1_000_000_000)))
        };
        return guarded(|| ret0(t.and_then(|ino| set_times(ino, a, m)))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(utime: fn(*const c_char, *const libc::utimbuf) -> c_int)(path, times) }
}

#[no_mangle]
pub unsafe extern "C" fn symlinkat(target: *const c_char, dirfd: c_int, link: *const c_char) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path_at(dirfd, link)) {
        return guarded(|| {
            ret0(shim().fs().and_then(|fs| {
                // SAFETY: libc's contract.
                let t = unsafe { CStr::from_ptr(target) }.to_bytes();
                fs.symlink(Path::new(std::ffi::OsStr::from_bytes(t)), &p).map_err(|e| e.errno())
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(symlinkat: fn(*const c_char, c_int, *const c_char) -> c_int)(target, dirfd, link) }
}

#[no_mangle]
pub unsafe extern "C" fn linkat(
    olddirfd: c_int,
    from: *const c_char,
    newdirfd: c_int,
    to: *const c_char,
    flags: c_int,
) -> c_int {
    let src = target_at(
        olddirfd,
        from,
        if flags & libc::AT_SYMLINK_FOLLOW != 0 { 0 } else { libc::AT_SYMLINK_NOFOLLOW }
            | (flags & libc::AT_EMPTY_PATH),
    );
    let dst = guarded(|| fs_path_at(newdirfd, to)).flatten();
    match (src, dst) {
        (Some(s), Some(d)) => {
            return guarded(|| {
                ret0(s.and_then(|ino| {
                    let fs = shim().fs()?;
                    let (parent, name) = fs.resolve_parent(&d).map_err(|e| e.errno())?;
                    fs.link_at(ino, parent, &name).map(|_| ()).map_err(|e| e.errno())
                }))
            })
            .unwrap_or(-1)
        }
        (Some(_), None) | (None, Some(_)) => return fail(libc::EXDEV),
        _ => {}
    }
    // SAFETY: forwarding.
    unsafe {
        real!(linkat: fn(c_int, *const c_char, c_int, *const c_char, c_int) -> c_int)(
            olddirfd, from, newdirfd, to, flags,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn readlinkat(dirfd: c_int, path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t {
    if let Some(t) = target_at(dirfd, path, libc::AT_SYMLINK_NOFOLLOW) {
        return guarded(|| match t.and_then(|ino| shim().fs()?.readlink_ino(ino).map_err(|e| e.errno())) {
            Ok(b) => {
                let n = b.len().min(size);
                // SAFETY: libc's contract: buf holds size bytes.
                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), buf as *mut u8, n) };
                n as ssize_t
            }
            Err(e) => fail(e),
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(readlinkat: fn(c_int, *const c_char, *mut c_char, size_t) -> ssize_t)(dirfd, path, buf, size) }
}

/// mknod in the image: FIFOs, devices and sockets become inodes of their type (opening
/// them needs the kernel: through the shim that is EOPNOTSUPP, through the mount it works).
fn mknod_ours(p: &Path, mode: mode_t, dev: libc::dev_t) -> Result<(), c_int> {
    let fs = shim().fs()?;
    let t = FileType::from_mknod_mode(mode).ok_or(libc::EINVAL)?;
    let (parent, name) = fs.resolve_parent(p).map_err(|e| e.errno())?;
    let perm = mode & 0o7777 & !super::process_umask();
    if t == FileType::Regular {
        return fs.create_file_at(parent, &name, perm, Owner::current()).map(|_| ()).map_err(|e| e.errno());
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if matches!(t, FileType::CharDevice | FileType::BlockDevice) && euid != 0 {
        return Err(libc::EPERM); // as Linux: devices need CAP_MKNOD
    }
    let rdev = if matches!(t, FileType::CharDevice | FileType::BlockDevice) { dev } else { 0 };
    fs.mknod_at(parent, &name, t, perm, rdev, Owner::current()).map(|_| ()).map_err(|e| e.errno())
}

#[no_mangle]
pub unsafe extern "C" fn mknodat(dirfd: c_int, path: *const c_char, mode: mode_t, dev: libc::dev_t) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path_at(dirfd, path)) {
        return guarded(|| ret0(mknod_ours(&p, mode, dev))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(mknodat: fn(c_int, *const c_char, mode_t, libc::dev_t) -> c_int)(dirfd, path, mode, dev) }
}

#[no_mangle]
pub unsafe extern "C" fn mknod(path: *const c_char, mode: mode_t, dev: libc::dev_t) -> c_int {
    // SAFETY: same contract.
    unsafe { mknodat(libc::AT_FDCWD, path, mode, dev) }
}

#[no_mangle]
pub unsafe extern "C" fn mkfifoat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path_at(dirfd, path)) {
        return guarded(|| ret0(mknod_ours(&p, libc::S_IFIFO | (mode & 0o7777), 0))).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(mkfifoat: fn(c_int, *const c_char, mode_t) -> c_int)(dirfd, path, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn mkfifo(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: same contract.
    unsafe { mkfifoat(libc::AT_FDCWD, path, mode) }
}
