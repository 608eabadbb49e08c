//! Names (the interposer's [`Names`] calls): unlink, rmdir, mkdir, rename, link, symlink,
//! readlink, mknod and mkfifo, and truncate by path.

use super::*;
use hashfs_interpose::{Errno, Names, Next, Served};
use io::served;
use meta::target_at;
use path::{kernel_call, kernel_call0, kernel_path_at, Last, PathEnd};

/// `p` without the trailing slash `fs_path_at_of` keeps for a path that names a
/// directory by its end.
fn without_slash(p: &Path) -> &Path {
    let b = p.as_os_str().as_bytes();
    match b.strip_suffix(b"/") {
        Some(rest) if !rest.is_empty() => Path::new(std::ffi::OsStr::from_bytes(rest)),
        _ => p,
    }
}

/// A new name (link, symlink, mknod) whose path ends in a slash, ".", or "..": EEXIST
/// where something is there, else ENOENT (Linux's `filename_create`).
fn new_name_end(fs: &FileSystem<MmapDevice>, p: &Path) -> Result<(), Error> {
    if !p.as_os_str().as_bytes().ends_with(b"/") {
        return Ok(());
    }
    Err(match fs.symlink_metadata(without_slash(p)) {
        Ok(_) => Error::Exists,
        Err(e) => e,
    })
}

/// mknod in the image: FIFOs, devices and sockets become inodes of their type (opening a
/// device or socket needs the kernel: through the shim that is EOPNOTSUPP, through the
/// mount it works; a FIFO opens a kernel FIFO standing for it, `fifo.rs`).
pub(super) fn mknod_ours(p: &Path, mode: mode_t, dev: libc::dev_t) -> Result<(), c_int> {
    let fs = shim().fs()?;
    new_name_end(fs, p).map_err(|e| e.errno())?;
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

/// `f` on the image for `path` from `dirfd`, if it is ours; else, if the path leads out of
/// the image through `..` (`path::kernel_path_at`), `kernel` on the kernel's path for it.
fn at_path<T>(
    dirfd: c_int,
    path: &CStr,
    f: impl FnOnce(&FileSystem<MmapDevice>, &Path) -> Result<T, Error>,
    kernel: impl FnOnce(&CStr) -> c_int,
) -> Served<T>
where
    T: Default,
{
    let Some(p) = fs_path_at_of(dirfd, path) else {
        return kernel_call0(dirfd, path, kernel).map(|r| r.map(|()| T::default()));
    };
    served(shim().fs().and_then(|fs| f(fs, &p).map_err(|e| e.errno())))
}

impl Names for Preload {
    fn unlink_at(dirfd: c_int, path: &CStr, flags: c_int, _: Next<'_, ()>) -> Served<()> {
        at_path(
            dirfd,
            path,
            |fs, p| {
                if flags & !libc::AT_REMOVEDIR != 0 {
                    return Err(Error::Invalid("unlinkat flags")); // as Linux, before the walk
                }
                let end = PathEnd::of(path.to_bytes());
                if flags & libc::AT_REMOVEDIR != 0 {
                    // As Linux: a path ending in "." or ".." names no entry to remove.
                    return match end.last {
                        Last::Dot => Err(Error::Invalid("rmdir of \".\"")),
                        Last::DotDot => Err(Error::NotEmpty),
                        Last::Root => Err(Error::Busy),
                        Last::Name => fs.remove_dir(p),
                    };
                }
                if end.last != Last::Name {
                    return Err(Error::IsDir);
                }
                if end.slash {
                    // "f/": a directory is EISDIR, anything else ENOTDIR (the resolution's).
                    return Err(fs.symlink_metadata(p).map_or_else(|e| e, |_| Error::IsDir));
                }
                // A FIFO's or socket's last name: the kernel node standing for it goes too
                // (`fifo.rs`, `socket.rs`). (A look only: a link out of the image on the way
                // is the unlink's to report.)
                let fifo = following_out(|| fs.resolve_nofollow(p))
                    .and_then(|i| fs.peek_attr(i))
                    .ok()
                    .filter(|m| matches!(m.file_type, FileType::Fifo | FileType::Socket) && m.nlink == 1);
                fs.remove_file(p)?;
                if let Some(m) = fifo {
                    super::fifo::removed(m.ino, m.generation);
                }
                Ok(())
            },
            |k| {
                // SAFETY: a NUL-terminated path (inside the shim, libc's call is the kernel's).
                unsafe { libc::unlinkat(libc::AT_FDCWD, k.as_ptr(), flags) }
            },
        )
    }

    fn mkdir_at(dirfd: c_int, path: &CStr, mode: mode_t, _: Next<'_, ()>) -> Served<()> {
        at_path(
            dirfd,
            path,
            |fs, p| {
                if PathEnd::of(path.to_bytes()).last != Last::Name {
                    return Err(Error::Exists); // "x/.": as Linux's filename_create
                }
                fs.create_dir(p, mode & 0o7777 & !process_umask()).map(|_| ())
            },
            // SAFETY: a NUL-terminated path (inside the shim, libc's call is the kernel's).
            |k| unsafe { libc::mkdirat(libc::AT_FDCWD, k.as_ptr(), mode) },
        )
    }

    fn rename_at(fd1: c_int, from: &CStr, fd2: c_int, to: &CStr, flags: c_uint, _: Next<'_, ()>) -> Served<()> {
        let paths = (fs_path_at_of(fd1, from), fs_path_at_of(fd2, to));
        if (from.is_empty() || to.is_empty()) && paths != (None, None) {
            return served(Err(libc::ENOENT)); // an empty path names nothing
        }
        let known = libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE;
        if !matches!(paths, (None, None)) && (flags & !known != 0 || flags == known) {
            // As Linux: unknown flags, NOREPLACE with EXCHANGE, and RENAME_WHITEOUT (which
            // the image does not make) are EINVAL, before anything is renamed.
            return served(Err(libc::EINVAL));
        }
        let mode = if flags & libc::RENAME_EXCHANGE != 0 {
            RenameMode::Exchange
        } else if flags & libc::RENAME_NOREPLACE != 0 {
            RenameMode::NoReplace
        } else {
            RenameMode::Replace
        };
        match paths {
            (None, None) => kernel_pair(fd1, from, fd2, to, |a, b| {
                // SAFETY: NUL-terminated paths (inside the shim, libc's call is the kernel's).
                unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), flags) }
            }),
            (Some(a), Some(b)) => {
                let (from_end, to_end) = (PathEnd::of(from.to_bytes()), PathEnd::of(to.to_bytes()));
                // As Linux's renameat2: "." or ".." at either end is EBUSY (EEXIST for the
                // target under RENAME_NOREPLACE); a trailing slash at either end needs the
                // source to be a directory.
                if from_end.last != Last::Name {
                    return served(Err(libc::EBUSY));
                }
                if to_end.last != Last::Name {
                    return served(Err(if mode == RenameMode::NoReplace { libc::EEXIST } else { libc::EBUSY }));
                }
                served(shim().fs().and_then(|fs| {
                    if from_end.slash || to_end.slash {
                        let src = fs.symlink_metadata(without_slash(&a)).map_err(|e| e.errno())?;
                        if !src.is_dir() {
                            return Err(libc::ENOTDIR);
                        }
                    }
                    fs.rename_with(without_slash(&a), without_slash(&b), mode).map_err(|e| e.errno())
                }))
            }
            _ => served(Err(libc::EXDEV)), // across the prefix boundary
        }
    }

    fn link_at(fd1: c_int, from: &CStr, fd2: c_int, to: &CStr, flags: c_int, _: Next<'_, ()>) -> Served<()> {
        if flags & !(libc::AT_SYMLINK_FOLLOW | libc::AT_EMPTY_PATH) != 0
            && (fs_path_at_of(fd1, from).is_some() || fs_path_at_of(fd2, to).is_some())
        {
            return served(Err(libc::EINVAL)); // as Linux, before anything is looked up
        }
        let follow = if flags & libc::AT_SYMLINK_FOLLOW != 0 { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
        let from_fd = from.is_empty() && flags & libc::AT_EMPTY_PATH != 0;
        if (from.is_empty() && !from_fd || to.is_empty())
            && (fs_path_at_of(fd2, to).is_some() || from_fd && shim().is_ours(fd1))
        {
            return served(Err(libc::ENOENT)); // an empty path names nothing
        }
        match (target_at(fd1, from, follow | (flags & libc::AT_EMPTY_PATH)), fs_path_at_of(fd2, to)) {
            (None, None) => kernel_pair(fd1, from, fd2, to, |a, b| {
                // SAFETY: NUL-terminated paths (inside the shim, libc's call is the kernel's).
                unsafe {
                    libc::linkat(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), flags & !libc::AT_EMPTY_PATH)
                }
            }),
            (Some(src), Some(d)) => served(src.on(|ino| {
                let fs = shim().fs()?;
                new_name_end(fs, &d).map_err(|e| e.errno())?;
                let (parent, name) = fs.resolve_parent(&d).map_err(|e| e.errno())?;
                fs.link_at(ino, parent, &name).map(|_| ()).map_err(|e| e.errno())
            })),
            _ => served(Err(libc::EXDEV)),
        }
    }

    fn symlink_at(target: &CStr, dirfd: c_int, path: &CStr, _: Next<'_, ()>) -> Served<()> {
        at_path(
            dirfd,
            path,
            |fs, p| {
                new_name_end(fs, p)?;
                fs.symlink(Path::new(std::ffi::OsStr::from_bytes(target.to_bytes())), p)
            },
            // SAFETY: NUL-terminated strings (inside the shim, libc's call is the kernel's).
            |k| unsafe { libc::symlinkat(target.as_ptr(), libc::AT_FDCWD, k.as_ptr()) },
        )
    }

    fn readlink_at(dirfd: c_int, path: &CStr, buf: &mut [u8], _: Next<'_, usize>) -> Served<usize> {
        let link = match (super::path::descriptor_link(path.to_bytes()), super::path::cwd_link(path.to_bytes())) {
            (Some((_, of, b"")), _) => Some(super::path::link_target(&of)),
            (_, Some((dir, removed, b""))) => Some(super::path::link_answer(&dir, removed)),
            _ => None,
        };
        if let Some(t) = link {
            if buf.is_empty() {
                return served(Err(libc::EINVAL));
            }
            let n = t.len().min(buf.len());
            buf[..n].copy_from_slice(&t[..n]);
            return served(Ok(n));
        }
        // An empty path names the descriptor itself (a link's O_PATH descriptor), without
        // AT_EMPTY_PATH, as Linux's readlinkat has it.
        let t = match path.is_empty() {
            true => super::meta::fd_target(dirfd).map(super::meta::Target::Ino),
            false => target_at(dirfd, path, libc::AT_SYMLINK_NOFOLLOW),
        };
        if buf.is_empty() && t.is_some() {
            return served(Err(libc::EINVAL)); // as Linux: no room is EINVAL, whatever the path
        }
        let Some(t) = t else {
            return kernel_call(dirfd, path, |k| {
                // SAFETY: a NUL-terminated path and the caller's buffer (inside the shim,
                // libc's call is the kernel's).
                unsafe { libc::readlinkat(libc::AT_FDCWD, k.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) }
            });
        };
        let read = |ino| shim().fs()?.readlink_ino(ino).map_err(|e| e.errno());
        Some(t.on(read).map_err(Errno).map(|b| {
            let n = b.len().min(buf.len());
            buf[..n].copy_from_slice(&b[..n]);
            n
        }))
    }

    fn mknod_at(dirfd: c_int, path: &CStr, mode: mode_t, dev: libc::dev_t, _: Next<'_, ()>) -> Served<()> {
        let Some(p) = fs_path_at_of(dirfd, path) else {
            // SAFETY: a NUL-terminated path (inside the shim, libc's call is the kernel's).
            return kernel_call0(dirfd, path, |k| unsafe { libc::mknodat(libc::AT_FDCWD, k.as_ptr(), mode, dev) });
        };
        served(mknod_ours(&p, mode, dev))
    }

    fn truncate(path: &CStr, len: off_t, _: Next<'_, ()>) -> Served<()> {
        let kernel = |k: &CStr| {
            // SAFETY: a NUL-terminated path (inside the shim, libc's call is the kernel's).
            unsafe { libc::truncate(k.as_ptr(), len) }
        };
        at_path(
            libc::AT_FDCWD,
            path,
            |fs, p| {
                if len < 0 {
                    return Err(Error::Invalid("negative length"));
                }
                let f = fs.open_file(p, hashfs::OpenOptions::new().write(true))?;
                if !f.metadata()?.permits(hashfs::MAY_WRITE) {
                    return Err(Error::Access);
                }
                if is_mapped(f.ino()) && (len as u64) < f.metadata()?.size {
                    return Err(Error::Busy);
                }
                f.set_len(len as u64)?;
                mmap::file_changed_ino(f.ino(), 0, 0);
                Ok(())
            },
            kernel,
        )
    }
}

/// A call naming two paths, neither the image's: `op` on the kernel's paths when either
/// leads out of the image through `..` (`path::kernel_path_at`; the other as written, or
/// its own rewriting). None: both are the kernel's as written.
fn kernel_pair(fd1: c_int, a: &CStr, fd2: c_int, b: &CStr, op: impl FnOnce(&CStr, &CStr) -> c_int) -> Served<()> {
    let (ka, kb) = (kernel_path_at(fd1, a), kernel_path_at(fd2, b));
    if ka.is_none() && kb.is_none() {
        return None;
    }
    // A path kept as written is relative to its own directory descriptor, unless made absolute.
    let as_written = |fd: c_int, p: &CStr| -> Option<CString> {
        if p.to_bytes().first() == Some(&b'/') || fd == libc::AT_FDCWD {
            return Some(p.to_owned());
        }
        let dir = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
        CString::new(dir.join(std::ffi::OsStr::from_bytes(p.to_bytes())).as_os_str().as_bytes()).ok()
    };
    let (Some(ka), Some(kb)) = (ka.or_else(|| as_written(fd1, a)), kb.or_else(|| as_written(fd2, b))) else {
        return Some(Err(Errno(libc::EBADF)));
    };
    let r = op(&ka, &kb);
    Some(if r == 0 { Ok(()) } else { Err(Errno(hashfs_interpose::errno())) })
}
