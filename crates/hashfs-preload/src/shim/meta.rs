//! Owners, permissions and times (the interposer's [`Metadata`] calls): chmod, chown and
//! the time setters, by path, by descriptor and in their `*at` forms.
//!
//! Ownership follows the kernel's rule: root may give a file to anyone; its owner may
//! only change its group, to one of their own groups; anyone else gets EPERM.

use super::*;
use hashfs_interpose::{Errno, Metadata, Next, Served, Times};
use io::served;
use path::kernel_call0;

/// What (dirfd, path, flags) names, if it is ours: one of the shim's descriptors
/// (`AT_EMPTY_PATH` with an empty path names the descriptor itself) or a path in the image.
pub(super) enum Target {
    Ino(Result<Ino, c_int>),
    Path(PathBuf, LastLink),
}

impl Target {
    /// `op` on the inode named: a path resolved and `op` run under the image lock
    /// (`path::on_inode`; the calls by path that name a [`Target`] all take it), a
    /// descriptor's inode as it is (the descriptor keeps it).
    pub(super) fn on<T>(self, op: impl FnMut(Ino) -> Result<T, c_int>) -> Result<T, c_int> {
        match self {
            Target::Ino(ino) => ino.and_then(op),
            Target::Path(p, last) => {
                shim().fs().and_then(|fs| path::on_inode_errno(fs, &p, last, path::Hold::Lock, op))
            }
        }
    }
}

/// What (dirfd, path, flags) names, if it is ours ([`Target`]).
pub(super) fn target_at(dirfd: c_int, path: &CStr, flags: c_int) -> Option<Target> {
    if path.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
        if let Some(ino) = fd_target(dirfd) {
            return Some(Target::Ino(ino));
        }
    }
    let p = fs_path_at_of(dirfd, path)?;
    Some(Target::Path(p, if flags & libc::AT_SYMLINK_NOFOLLOW != 0 { LastLink::NoFollow } else { LastLink::Follow }))
}

/// EINVAL for flags other than the two that fchmodat, fchownat and utimensat know, as
/// Linux answers (the walk's result comes after).
fn known_flags(flags: c_int) -> Result<(), c_int> {
    match flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) {
        0 => Ok(()),
        _ => Err(libc::EINVAL),
    }
}

/// The inode a call on descriptor `fd`'s attributes acts on: one of the shim's, or a
/// standard descriptor that a pump of this process feeds from or into a file (`pump.rs`:
/// its bytes go through the kernel's pipe, its times, mode, owner and attributes are the
/// file's). None for a descriptor
/// that is the kernel's (the call goes there); EBADF for one the shim claims but no longer
/// has.
pub(super) fn fd_target(fd: c_int) -> Option<Result<Ino, c_int>> {
    let s = shim();
    match s.file(fd).or_else(|| super::pump::pumped_file(fd)) {
        Some(of) => Some(Ok(of.ino)),
        None => s.is_ours(fd).then_some(Err(libc::EBADF)),
    }
}

/// chown's permission rule and change, on inode `ino`.
fn chown_ino(ino: Ino, uid: libc::uid_t, gid: libc::gid_t) -> Result<(), c_int> {
    let fs = shim().fs()?;
    if fs.is_read_only() {
        return Err(libc::EROFS); // before the owner's rule, as on a read-only file system
    }
    let md = fs.peek_attr(ino).map_err(|e| e.errno())?;
    let uid = (uid != u32::MAX).then_some(uid);
    let gid = (gid != u32::MAX).then_some(gid);
    // SAFETY: no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        let changes_owner = uid.is_some_and(|u| u != md.uid);
        let group_ok = gid.is_none_or(|g| g == md.gid || hashfs::in_caller_group(g));
        if changes_owner || euid != md.uid || !group_ok {
            return Err(libc::EPERM);
        }
    }
    let kept = hashfs::perm_without_set_id(md.perm, md.file_type);
    let perm = (kept != md.perm && (uid.is_some() || gid.is_some())).then_some(kept);
    fs.setattr(ino, &SetAttr { uid, gid, perm, ..Default::default() }).map(|_| ()).map_err(|e| e.errno())
}

/// Sets the times `times` asks for, with Linux's permission rule: setting both to now
/// (`times` null, or both UTIME_NOW) needs ownership or write permission (else EACCES),
/// any other setting ownership (else EPERM); root may do either.
fn set_times(ino: Ino, times: Times) -> Result<(), c_int> {
    let fs = shim().fs()?;
    if fs.is_read_only() {
        return Err(libc::EROFS); // before any permission, as on a read-only file system
    }
    let md = fs.peek_attr(ino).map_err(|e| e.errno())?;
    let touch = times.is_none_or(|t| t[0].tv_nsec == libc::UTIME_NOW && t[1].tv_nsec == libc::UTIME_NOW);
    // SAFETY: no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 && euid != md.uid {
        if !touch {
            return Err(libc::EPERM);
        }
        if !md.permits(hashfs::MAY_WRITE) {
            return Err(libc::EACCES);
        }
    }
    let (a, m) = from_times(times);
    fs.setattr(ino, &SetAttr { atime: a, mtime: m, ..Default::default() }).map(|_| ()).map_err(|e| e.errno())
}

/// The times a call asks for, as the library's (UTIME_OMIT: unchanged).
fn from_times(times: Times) -> (Option<SetTime>, Option<SetTime>) {
    let Some(ts) = times else { return (Some(SetTime::Now), Some(SetTime::Now)) };
    let t = |v: libc::timespec| match v.tv_nsec {
        libc::UTIME_OMIT => None,
        libc::UTIME_NOW => Some(SetTime::Now),
        n => Some(SetTime::At(v.tv_sec * 1_000_000_000 + n)),
    };
    (t(ts[0]), t(ts[1]))
}

/// chmod as Linux: the owner or root only (else EPERM), and set-group-ID dropped when
/// the caller is not root and not in the file's group.
fn chmod_ino(ino: Ino, mode: mode_t, flags: c_int) -> Result<(), c_int> {
    let fs = shim().fs()?;
    let md = fs.peek_attr(ino).map_err(|e| e.errno())?;
    if flags & libc::AT_SYMLINK_NOFOLLOW != 0 && md.is_symlink() {
        return Err(libc::EOPNOTSUPP); // as Linux: symlinks have no mode to change
    }
    if fs.is_read_only() {
        return Err(libc::EROFS); // before the owner's rule, as on a read-only file system
    }
    let mut perm = mode & 0o7777;
    // SAFETY: no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        if euid != md.uid {
            return Err(libc::EPERM);
        }
        if !hashfs::in_caller_group(md.gid) {
            perm &= !libc::S_ISGID;
        }
    }
    fs.setattr(ino, &SetAttr { perm: Some(perm), ..Default::default() }).map(|_| ()).map_err(|e| e.errno())
}

impl Metadata for Preload {
    fn chmod_at(dirfd: c_int, path: &CStr, mode: mode_t, flags: c_int, _: Next<'_, ()>) -> Served<()> {
        let Some(t) = target_at(dirfd, path, flags) else {
            // SAFETY: a NUL-terminated path (inside the shim, libc's call is the kernel's).
            return kernel_call0(dirfd, path, |k| unsafe { libc::fchmodat(libc::AT_FDCWD, k.as_ptr(), mode, flags) });
        };
        Some(known_flags(flags).and_then(|()| t.on(|ino| chmod_ino(ino, mode, flags))).map_err(Errno))
    }

    fn fchmod(fd: c_int, mode: mode_t, _: Next<'_, ()>) -> Served<()> {
        served(fd_target(fd)?.and_then(|ino| chmod_ino(ino, mode, 0)))
    }

    fn chown_at(
        dirfd: c_int,
        path: &CStr,
        uid: libc::uid_t,
        gid: libc::gid_t,
        flags: c_int,
        _: Next<'_, ()>,
    ) -> Served<()> {
        let Some(t) = target_at(dirfd, path, flags) else {
            // SAFETY: a NUL-terminated path (inside the shim, libc's call is the kernel's).
            return kernel_call0(dirfd, path, |k| unsafe {
                libc::fchownat(libc::AT_FDCWD, k.as_ptr(), uid, gid, flags)
            });
        };
        Some(known_flags(flags).and_then(|()| t.on(|ino| chown_ino(ino, uid, gid))).map_err(Errno))
    }

    fn fchown(fd: c_int, uid: libc::uid_t, gid: libc::gid_t, _: Next<'_, ()>) -> Served<()> {
        served(fd_target(fd)?.and_then(|ino| chown_ino(ino, uid, gid)))
    }

    fn set_times_at(dirfd: c_int, path: &CStr, times: Times, flags: c_int, _: Next<'_, ()>) -> Served<()> {
        let Some(t) = target_at(dirfd, path, flags) else {
            let ts = times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
            // SAFETY: a NUL-terminated path and null or two timespecs (inside the shim,
            // libc's call is the kernel's).
            return kernel_call0(dirfd, path, |k| unsafe { libc::utimensat(libc::AT_FDCWD, k.as_ptr(), ts, flags) });
        };
        Some(known_flags(flags).and_then(|()| t.on(|ino| set_times(ino, times))).map_err(Errno))
    }

    fn set_times_fd(fd: c_int, times: Times, _: Next<'_, ()>) -> Served<()> {
        served(fd_target(fd)?.and_then(|ino| set_times(ino, times)))
    }
}
