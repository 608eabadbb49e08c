//! The stat family, statx and access(): attributes and permission checks (the
//! interposer's [`Attributes`] calls).

use super::*;
use hashfs_interpose::{Attributes, Errno, Next, Served};
use io::served;

fn to_stat(m: &Metadata) -> libc::stat {
    // SAFETY: struct stat is plain data; all-zero is valid.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    st.st_dev = 0x4853; // "HS"
    st.st_ino = m.ino.get();
    st.st_mode = m.mode();
    st.st_rdev = m.rdev;
    st.st_nlink = m.nlink as _;
    st.st_uid = m.uid;
    st.st_gid = m.gid;
    st.st_size = m.size as i64;
    st.st_blksize = 4096;
    st.st_blocks = m.st_blocks() as i64;
    st.st_atime = m.atime_ns.div_euclid(1_000_000_000);
    st.st_atime_nsec = m.atime_ns.rem_euclid(1_000_000_000);
    st.st_mtime = m.mtime_ns.div_euclid(1_000_000_000);
    st.st_mtime_nsec = m.mtime_ns.rem_euclid(1_000_000_000);
    st.st_ctime = m.ctime_ns.div_euclid(1_000_000_000);
    st.st_ctime_nsec = m.ctime_ns.rem_euclid(1_000_000_000);
    st
}

fn stat_path(p: &Path, last: LastLink) -> Result<libc::stat, c_int> {
    let fs = shim().fs()?;
    match following_out(|| path::on_inode(fs, p, last, path::Hold::Read, |i| fs.getattr(i))) {
        Ok(m) => Ok(to_stat(&m)),
        Err(Error::LinkOutside(out)) => stat_outside(&out, last),
        Err(e) => Err(e.errno()),
    }
}

/// The kernel's stat of `out`, where a link in the image led (`Error::LinkOutside`).
fn stat_outside(out: &[u8], last: LastLink) -> Result<libc::stat, c_int> {
    let c = CString::new(out).map_err(|_| libc::EINVAL)?;
    let flags = if last == LastLink::NoFollow { libc::AT_SYMLINK_NOFOLLOW } else { 0 };
    // SAFETY: plain data, filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a stat buffer of ours.
    if unsafe { libc::fstatat(libc::AT_FDCWD, c.as_ptr(), &mut st, flags) } != 0 {
        return Err(hashfs_interpose::errno());
    }
    Ok(st)
}

fn stat_fd(fd: c_int) -> Result<libc::stat, c_int> {
    let s = shim();
    let of = s.file(fd).ok_or(libc::EBADF)?;
    stat_file(&of)
}

fn stat_file(of: &OpenFile) -> Result<libc::stat, c_int> {
    shim().fs()?.getattr(of.ino).map(|m| to_stat(&m)).map_err(|e| e.errno())
}

/// The stat of descriptor `fd`: one of the shim's, or a standard descriptor whose pipe an
/// output pump writes into a file (`pump::stat_file`); None for any other (the kernel's).
fn stat_any_fd(fd: c_int) -> Option<Result<libc::stat, c_int>> {
    if shim().is_ours(fd) {
        return Some(stat_fd(fd));
    }
    super::pump::stat_file(fd).map(|of| stat_file(&of))
}

/// fstatat's work: `dirfd` itself for an empty path with AT_EMPTY_PATH; None when the
/// file is not HashFS's.
fn stat_at(dirfd: c_int, path: &CStr, flags: c_int) -> Option<Result<libc::stat, c_int>> {
    const KNOWN: c_int =
        libc::AT_SYMLINK_NOFOLLOW | libc::AT_NO_AUTOMOUNT | libc::AT_EMPTY_PATH | libc::AT_STATX_SYNC_TYPE;
    if path.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
        if let Some(r) = stat_any_fd(dirfd) {
            return Some(if flags & !KNOWN != 0 { Err(libc::EINVAL) } else { r });
        }
    }
    if flags & libc::AT_SYMLINK_NOFOLLOW != 0 && matches!(super::path::cwd_link(path.to_bytes()), Some((_, _, b""))) {
        return None; // the link itself, the kernel's
    }
    if let Some((n, _, b"")) = super::path::descriptor_link(path.to_bytes()) {
        if flags & libc::AT_SYMLINK_NOFOLLOW != 0 {
            return None; // the link itself, the kernel's
        }
        return Some(if flags & !KNOWN != 0 { Err(libc::EINVAL) } else { stat_fd(n) });
    }
    if let Some(of) = super::path::pumped_link(path.to_bytes()) {
        if flags & libc::AT_SYMLINK_NOFOLLOW != 0 {
            return None; // the link itself, the kernel's
        }
        return Some(if flags & !KNOWN != 0 { Err(libc::EINVAL) } else { stat_file(&of) });
    }
    let Some(p) = fs_path_at_of(dirfd, path) else {
        let k = kernel_path_at(dirfd, path)?;
        // SAFETY: an all-zero stat is a valid buffer; `k` is NUL-terminated.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above (inside the shim, libc's fstatat is the kernel's).
        let r = unsafe { libc::fstatat(libc::AT_FDCWD, k.as_ptr(), &mut st, flags & !libc::AT_EMPTY_PATH) };
        return Some(if r == 0 { Ok(st) } else { Err(hashfs_interpose::errno()) });
    };
    if flags & !KNOWN != 0 {
        return Some(Err(libc::EINVAL)); // as Linux's vfs_statx
    }
    Some(stat_path(&p, LastLink::of_at_flags(flags)))
}

fn to_statx(st: &libc::stat) -> libc::statx {
    // SAFETY: plain data.
    let mut x: libc::statx = unsafe { std::mem::zeroed() };
    x.stx_mask = libc::STATX_BASIC_STATS;
    x.stx_blksize = st.st_blksize as u32;
    x.stx_nlink = st.st_nlink as u32;
    x.stx_uid = st.st_uid;
    x.stx_gid = st.st_gid;
    x.stx_mode = st.st_mode as u16;
    x.stx_ino = st.st_ino;
    x.stx_size = st.st_size as u64;
    x.stx_blocks = st.st_blocks as u64;
    x.stx_atime.tv_sec = st.st_atime;
    x.stx_atime.tv_nsec = st.st_atime_nsec as u32;
    x.stx_mtime.tv_sec = st.st_mtime;
    x.stx_mtime.tv_nsec = st.st_mtime_nsec as u32;
    x.stx_ctime.tv_sec = st.st_ctime;
    x.stx_ctime.tv_nsec = st.st_ctime_nsec as u32;
    x.stx_dev_major = 0;
    x.stx_dev_minor = 0x4853;
    x.stx_rdev_major = libc::major(st.st_rdev);
    x.stx_rdev_minor = libc::minor(st.st_rdev);
    // Untorn writes (pwritev2 with RWF_ATOMIC), on regular files.
    if st.st_mode & libc::S_IFMT == libc::S_IFREG {
        if let Ok(fs) = shim().fs() {
            x.stx_mask |= libc::STATX_WRITE_ATOMIC;
            x.stx_attributes |= libc::STATX_ATTR_WRITE_ATOMIC as u64;
            x.stx_attributes_mask |= libc::STATX_ATTR_WRITE_ATOMIC as u64;
            x.stx_atomic_write_unit_min = super::vector::ATOMIC_UNIT_MIN as u32;
            x.stx_atomic_write_unit_max = fs.untorn_write_max_aligned() as u32;
            x.stx_atomic_write_segments_max = 1;
        }
    }
    x
}

/// Whether the process (by its effective ids) may access `m` as `mode` asks (R_OK, W_OK,
/// X_OK), as the kernel would: root may read and write anything, and execute anything with
/// some execute bit or a directory.
pub(super) fn permitted(m: &Metadata, mode: c_int) -> bool {
    m.permits((mode & (libc::R_OK | libc::W_OK | libc::X_OK)) as u32)
}

/// access() and friends for our paths: existence, then the permission bits, by the real
/// ids (the path's search permission too) unless `AT_EACCESS` asks for the effective
/// ones; a final symbolic link itself with `AT_SYMLINK_NOFOLLOW`; EROFS for W_OK on a
/// read-only participant's mount.
fn access_path(p: &Path, mode: c_int, flags: c_int) -> Result<(), c_int> {
    let ids = if flags & libc::AT_EACCESS != 0 { hashfs::Ids::Effective } else { hashfs::Ids::Real };
    hashfs::with_ids(ids, || access_path_by(p, mode, flags))
}

fn access_path_by(p: &Path, mode: c_int, flags: c_int) -> Result<(), c_int> {
    if mode & !(libc::R_OK | libc::W_OK | libc::X_OK) != 0
        || flags & !(libc::AT_EACCESS | libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0
    {
        return Err(libc::EINVAL);
    }
    let fs = shim().fs()?;
    let nofollow = flags & libc::AT_SYMLINK_NOFOLLOW != 0;
    let m = match following_out(|| if nofollow { fs.symlink_metadata(p) } else { fs.metadata(p) }) {
        Ok(m) => m,
        Err(Error::LinkOutside(out)) => {
            let c = CString::new(out).map_err(|_| libc::EINVAL)?;
            // SAFETY: a NUL-terminated path.
            return match unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), mode, flags) } {
                0 => Ok(()),
                _ => Err(hashfs_interpose::errno()),
            };
        }
        Err(e) => return Err(e.errno()),
    };
    access_check(fs, &m, mode)
}

/// access()'s answer for file `m`, found.
fn access_check(fs: &FileSystem<MmapDevice>, m: &Metadata, mode: c_int) -> Result<(), c_int> {
    if mode & libc::W_OK != 0 && fs.is_read_only() && (m.is_dir() || m.file_type == FileType::Regular || m.is_symlink())
    {
        return Err(libc::EROFS);
    }
    if mode != libc::F_OK && !m.permits(mode as u32) {
        return Err(libc::EACCES);
    }
    Ok(())
}

impl Attributes for Preload {
    fn stat_at(dirfd: c_int, path: &CStr, flags: c_int, _: Next<'_, libc::stat>) -> Served<libc::stat> {
        Some(stat_at(dirfd, path, flags)?.map_err(Errno))
    }

    fn fstat(fd: c_int, _: Next<'_, libc::stat>) -> Served<libc::stat> {
        Some(stat_any_fd(fd)?.map_err(Errno))
    }

    fn statx(dirfd: c_int, path: &CStr, flags: c_int, mask: c_uint, _: Next<'_, libc::statx>) -> Served<libc::statx> {
        let r = stat_at(dirfd, path, flags)?;
        // As Linux: the reserved mask bit, and both sync types at once, are EINVAL.
        if mask & libc::STATX__RESERVED as c_uint != 0 || flags & libc::AT_STATX_SYNC_TYPE == libc::AT_STATX_SYNC_TYPE {
            return Some(Err(Errno(libc::EINVAL)));
        }
        Some(r.map(|st| to_statx(&st)).map_err(Errno))
    }

    /// glibc implements euidaccess with an internal stat that no preload sees: served
    /// here with the rest.
    fn access_at(dirfd: c_int, path: &CStr, mode: c_int, flags: c_int, _: Next<'_, ()>) -> Served<()> {
        if path.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
            if let Some(ino) = meta::fd_target(dirfd) {
                let ids = if flags & libc::AT_EACCESS != 0 { hashfs::Ids::Effective } else { hashfs::Ids::Real };
                return served(ino.and_then(|ino| {
                    let fs = shim().fs()?;
                    let m = fs.getattr(ino).map_err(|e| e.errno())?;
                    hashfs::with_ids(ids, || access_check(fs, &m, mode))
                }));
            }
        }
        let Some(p) = fs_path_at_of(dirfd, path) else {
            let k = kernel_path_at(dirfd, path)?;
            // SAFETY: a NUL-terminated path (inside the shim, libc's faccessat is the kernel's).
            let r = unsafe { libc::faccessat(libc::AT_FDCWD, k.as_ptr(), mode, flags) };
            return served(if r == 0 { Ok(()) } else { Err(hashfs_interpose::errno()) });
        };
        served(access_path(&p, mode, flags))
    }
}
