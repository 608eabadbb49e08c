//! Names (the interposer's [`Names`] calls): unlink, rmdir, mkdir, rename, link, symlink,
//! readlink, mknod and mkfifo, and truncate by path.

use super::*;
use hashfs_interpose::{Errno, Names, Next, Served};
use io::served;
use meta::target_at;

/// mknod in the image: FIFOs, devices and sockets become inodes of their type (opening a
/// device or socket needs the kernel: through the shim that is EOPNOTSUPP, through the
/// mount it works; a FIFO opens a kernel FIFO standing for it, `fifo.rs`).
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

/// `f` on the image for `path` from `dirfd`, if it is ours.
fn at_path<T>(
    dirfd: c_int,
    path: &CStr,
    f: impl FnOnce(&FileSystem<MmapDevice>, &Path) -> Result<T, Error>,
) -> Served<T> {
    let p = fs_path_at_of(dirfd, path)?;
    served(shim().fs().and_then(|fs| f(fs, &p).map_err(|e| e.errno())))
}

impl Names for Preload {
    fn unlink_at(dirfd: c_int, path: &CStr, flags: c_int, _: Next<'_, ()>) -> Served<()> {
        at_path(dirfd, path, |fs, p| {
            if flags & libc::AT_REMOVEDIR != 0 {
                return fs.remove_dir(p);
            }
            // A FIFO's last name: the kernel FIFO standing for it goes too (`fifo.rs`).
            let fifo = fs
                .resolve_nofollow(p)
                .and_then(|i| fs.peek_attr(i))
                .ok()
                .filter(|m| m.file_type == FileType::Fifo && m.nlink == 1);
            fs.remove_file(p)?;
            if let Some(m) = fifo {
                super::fifo::removed(m.ino, m.generation);
            }
            Ok(())
        })
    }

    fn mkdir_at(dirfd: c_int, path: &CStr, mode: mode_t, _: Next<'_, ()>) -> Served<()> {
        at_path(dirfd, path, |fs, p| fs.create_dir(p, mode & 0o7777 & !process_umask()).map(|_| ()))
    }

    fn rename_at(fd1: c_int, from: &CStr, fd2: c_int, to: &CStr, flags: c_uint, _: Next<'_, ()>) -> Served<()> {
        let mode = if flags & libc::RENAME_EXCHANGE != 0 {
            RenameMode::Exchange
        } else if flags & libc::RENAME_NOREPLACE != 0 {
            RenameMode::NoReplace
        } else {
            RenameMode::Replace
        };
        match (fs_path_at_of(fd1, from), fs_path_at_of(fd2, to)) {
            (None, None) => None,
            (Some(a), Some(b)) => {
                served(shim().fs().and_then(|fs| fs.rename_with(&a, &b, mode).map_err(|e| e.errno())))
            }
            _ => served(Err(libc::EXDEV)), // across the prefix boundary
        }
    }

    fn link_at(fd1: c_int, from: &CStr, fd2: c_int, to: &CStr, flags: c_int, _: Next<'_, ()>) -> Served<()> {
        let follow = if flags & libc::AT_SYMLINK_FOLLOW != 0 { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
        match (target_at(fd1, from, follow | (flags & libc::AT_EMPTY_PATH)), fs_path_at_of(fd2, to)) {
            (None, None) => None,
            (Some(src), Some(d)) => served(src.and_then(|ino| {
                let fs = shim().fs()?;
                let (parent, name) = fs.resolve_parent(&d).map_err(|e| e.errno())?;
                fs.link_at(ino, parent, &name).map(|_| ()).map_err(|e| e.errno())
            })),
            _ => served(Err(libc::EXDEV)),
        }
    }

    fn symlink_at(target: &CStr, dirfd: c_int, path: &CStr, _: Next<'_, ()>) -> Served<()> {
        at_path(dirfd, path, |fs, p| fs.symlink(Path::new(std::ffi::OsStr::from_bytes(target.to_bytes())), p))
    }

    fn readlink_at(dirfd: c_int, path: &CStr, buf: &mut [u8], _: Next<'_, usize>) -> Served<usize> {
        let t = target_at(dirfd, path, libc::AT_SYMLINK_NOFOLLOW)?;
        Some(t.and_then(|ino| shim().fs()?.readlink_ino(ino).map_err(|e| e.errno())).map_err(Errno).map(|b| {
            let n = b.len().min(buf.len());
            buf[..n].copy_from_slice(&b[..n]);
            n
        }))
    }

    fn mknod_at(dirfd: c_int, path: &CStr, mode: mode_t, dev: libc::dev_t, _: Next<'_, ()>) -> Served<()> {
        let p = fs_path_at_of(dirfd, path)?;
        served(mknod_ours(&p, mode, dev))
    }

    fn truncate(path: &CStr, len: off_t, _: Next<'_, ()>) -> Served<()> {
        at_path(libc::AT_FDCWD, path, |fs, p| {
            if len < 0 {
                return Err(Error::Invalid("negative length"));
            }
            let f = fs.open_file(p, hashfs::OpenOptions::new().write(true))?;
            if is_mapped(f.ino()) && (len as u64) < f.metadata()?.size {
                return Err(Error::Busy);
            }
            f.set_len(len as u64)?;
            mmap::file_changed_ino(f.ino(), 0, 0);
            Ok(())
        })
    }
}
