//! `put` and `get`: recursive copies between the host and an image, keeping modes,
//! owners, modification times, symbolic links, special files (FIFOs, devices with their
//! numbers, sockets) and extended attributes (ACLs included). An attribute the other side
//! refuses (a host file system without user attributes, say) is reported and skipped.

use crate::{fail, progress_bar, Failure, Steps};
use hashfs::pm::PmDevice;
use hashfs::Owner;
use hashfs::XattrMode;
use hashfs::{FileSystem, FileType, OpenOptions, SetAttr, SetTime};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Default)]
pub struct Counts {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    /// FIFOs, devices and sockets.
    pub special: u64,
    pub bytes: u64,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Counts { files, dirs, symlinks, special, bytes } = self;
        write!(f, "{files} files, {dirs} directories, {symlinks} symlinks, {special} special files, {bytes} bytes")
    }
}

const CHUNK: usize = 1 << 20;

fn host_bytes(p: &Path) -> u64 {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => fs::read_dir(p).map(|rd| rd.flatten().map(|e| host_bytes(&e.path())).sum()).unwrap_or(0),
        Ok(m) if m.is_file() => m.len(),
        _ => 0,
    }
}

/// Copies `host` into the image at `dest` (into it, if `dest` is an existing directory).
pub fn put<D: PmDevice>(fs: &FileSystem<D>, host: &Path, dest: &str) -> Result<Counts, Failure> {
    let meta = fs::symlink_metadata(host).map_err(|e| fail(format!("{}: {e}", host.display())))?;
    let mut target = PathBuf::from(dest);
    if fs.metadata(&target).map(|m| m.is_dir()).unwrap_or(false) {
        let name = host.file_name().ok_or_else(|| fail(format!("{}: has no file name", host.display())))?;
        target.push(name);
    }
    let pb = progress_bar(host_bytes(host), "copying in", Steps::Bytes);
    let mut n = Counts::default();
    put_one(fs, host, &meta, &target, &mut n, &pb)?;
    pb.finish_and_clear();
    Ok(n)
}

fn put_one<D: PmDevice>(
    fs: &FileSystem<D>,
    host: &Path,
    meta: &fs::Metadata,
    target: &Path,
    n: &mut Counts,
    pb: &indicatif::ProgressBar,
) -> Result<(), Failure> {
    let ctx = |e: hashfs::Error| fail(format!("{}: {e}", target.display()));
    let owner = Owner { uid: meta.uid(), gid: meta.gid() };
    let ft = meta.file_type();
    if ft.is_symlink() {
        let t = fs::read_link(host).map_err(|e| fail(format!("{}: {e}", host.display())))?;
        let (p, name) = fs.resolve_parent(target).map_err(ctx)?;
        fs.symlink_at(p, &name, t.as_os_str().as_bytes(), owner).map_err(ctx)?;
        n.symlinks += 1;
        return Ok(());
    }
    if ft.is_dir() {
        match fs.create_dir(target, meta.permissions().mode() & 0o7777) {
            Ok(_) | Err(hashfs::Error::Exists) => {}
            Err(e) => return Err(ctx(e)),
        }
        n.dirs += 1;
        let mut entries: Vec<_> =
            fs::read_dir(host).map_err(|e| fail(format!("{}: {e}", host.display())))?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let m = fs::symlink_metadata(e.path())?;
            put_one(fs, &e.path(), &m, &target.join(e.file_name()), n, pb)?;
        }
    } else if ft.is_file() {
        let f = fs
            .open_file(
                target,
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(meta.permissions().mode() & 0o7777)
                    .owner(owner),
            )
            .map_err(ctx)?;
        let mut src = fs::File::open(host).map_err(|e| fail(format!("{}: {e}", host.display())))?;
        let mut buf = vec![0u8; CHUNK];
        let mut off = 0u64;
        loop {
            let r = src.read(&mut buf)?;
            if r == 0 {
                break;
            }
            let mut done = 0;
            while done < r {
                done += f.write_at(off + done as u64, &buf[done..r]).map_err(ctx)?;
            }
            off += r as u64;
            pb.inc(r as u64);
        }
        n.files += 1;
        n.bytes += off;
    } else {
        use std::os::unix::fs::FileTypeExt;
        let t = if ft.is_fifo() {
            FileType::Fifo
        } else if ft.is_char_device() {
            FileType::CharDevice
        } else if ft.is_block_device() {
            FileType::BlockDevice
        } else if ft.is_socket() {
            FileType::Socket
        } else {
            return Err(fail(format!("{}: a file type HashFS does not know", host.display())));
        };
        let rdev = if matches!(t, FileType::CharDevice | FileType::BlockDevice) { meta.rdev() } else { 0 };
        let (p, name) = fs.resolve_parent(target).map_err(ctx)?;
        fs.mknod_at(p, &name, t, meta.permissions().mode() & 0o7777, rdev, owner).map_err(ctx)?;
        n.special += 1;
    }
    let ino = fs.resolve_nofollow(target).map_err(ctx)?;
    let attr = SetAttr {
        perm: Some(meta.permissions().mode() & 0o7777),
        uid: Some(meta.uid()),
        gid: Some(meta.gid()),
        mtime: Some(SetTime::At(meta.mtime() * 1_000_000_000 + meta.mtime_nsec())),
        atime: Some(SetTime::At(meta.atime() * 1_000_000_000 + meta.atime_nsec())),
        size: None,
    };
    fs.setattr(ino, &attr).map_err(ctx)?;
    for (name, value) in host_xattrs(host) {
        if let Err(e) = fs.set_xattr(ino, &name, &value, XattrMode::Any) {
            eprintln!("hashfs: {}: attribute {}: {e} (not copied)", target.display(), String::from_utf8_lossy(&name));
        }
    }
    Ok(())
}

fn cpath(p: &Path) -> Option<std::ffi::CString> {
    std::ffi::CString::new(p.as_os_str().as_bytes()).ok()
}

/// The extended attributes of a host path (not following a symlink).
fn host_xattrs(p: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let Some(c) = cpath(p) else { return Vec::new() };
    let mut names = vec![0u8; 65_536];
    // SAFETY: c is a valid path; names holds its length.
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr() as *mut libc::c_char, names.len()) };
    if n <= 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for name in names[..n as usize].split(|&b| b == 0).filter(|s| !s.is_empty()) {
        let cname = std::ffi::CString::new(name).expect("no NUL inside");
        let mut v = vec![0u8; 65_536];
        // SAFETY: valid path and name; v holds its length.
        let len = unsafe { libc::lgetxattr(c.as_ptr(), cname.as_ptr(), v.as_mut_ptr() as *mut libc::c_void, v.len()) };
        if len >= 0 {
            v.truncate(len as usize);
            out.push((name.to_vec(), v));
        }
    }
    out
}

/// Sets the image inode's attributes on a host path (not following a symlink).
fn copy_xattrs_out<D: PmDevice>(fs: &FileSystem<D>, ino: hashfs::Ino, target: &Path) {
    let Some(c) = cpath(target) else { return };
    for name in fs.list_xattr(ino).unwrap_or_default() {
        let Ok(value) = fs.get_xattr(ino, &name) else { continue };
        let cname = std::ffi::CString::new(name.clone()).expect("no NUL inside");
        // SAFETY: valid path, name and value buffer.
        let r = unsafe {
            libc::lsetxattr(c.as_ptr(), cname.as_ptr(), value.as_ptr() as *const libc::c_void, value.len(), 0)
        };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            eprintln!("hashfs: {}: attribute {}: {e} (not copied)", target.display(), String::from_utf8_lossy(&name));
        }
    }
}

/// Copies `src` out of the image to `host` (into it, if `host` is an existing directory).
pub fn get<D: PmDevice>(fs: &FileSystem<D>, src: &str, host: &Path) -> Result<Counts, Failure> {
    let p = Path::new(src);
    let m = fs.symlink_metadata(p).map_err(|e| fail(format!("{src}: {e}")))?;
    let mut target = host.to_path_buf();
    if target.is_dir() {
        let name = p.file_name().map(|s| s.to_owned()).unwrap_or_else(|| "root".into());
        target.push(name);
    }
    let pb = progress_bar(0, "copying out", Steps::Bytes);
    let mut n = Counts::default();
    get_one(fs, p, m.file_type, &target, &mut n, &pb)?;
    pb.finish_and_clear();
    Ok(n)
}

fn get_one<D: PmDevice>(
    fs: &FileSystem<D>,
    src: &Path,
    ft: FileType,
    target: &Path,
    n: &mut Counts,
    pb: &indicatif::ProgressBar,
) -> Result<(), Failure> {
    let ctx = |e: hashfs::Error| fail(format!("{}: {e}", src.display()));
    let hctx = |e: std::io::Error| fail(format!("{}: {e}", target.display()));
    let m = fs.symlink_metadata(src).map_err(ctx)?;
    match ft {
        FileType::Symlink => {
            let t = fs.read_link(src).map_err(ctx)?;
            std::os::unix::fs::symlink(&t, target).map_err(hctx)?;
            n.symlinks += 1;
            return Ok(());
        }
        FileType::Directory => {
            match fs::create_dir(target) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && target.is_dir() => {}
                Err(e) => return Err(hctx(e)),
            }
            n.dirs += 1;
            for e in fs.read_dir(src).map_err(ctx)? {
                let name = std::ffi::OsStr::from_bytes(&e.name);
                get_one(fs, &src.join(name), e.file_type, &target.join(name), n, pb)?;
            }
        }
        FileType::Regular => {
            let f = fs.open_file(src, OpenOptions::new().read(true)).map_err(ctx)?;
            let mut out = fs::File::create(target).map_err(hctx)?;
            let mut buf = vec![0u8; CHUNK];
            let mut off = 0u64;
            pb.inc_length(m.size);
            loop {
                let r = f.read_at(off, &mut buf).map_err(ctx)?;
                if r == 0 {
                    break;
                }
                out.write_all(&buf[..r]).map_err(hctx)?;
                off += r as u64;
                pb.inc(r as u64);
            }
            n.files += 1;
            n.bytes += off;
        }
        FileType::Fifo | FileType::CharDevice | FileType::BlockDevice | FileType::Socket => {
            use std::os::unix::ffi::OsStrExt as _;
            let c = std::ffi::CString::new(target.as_os_str().as_bytes())
                .map_err(|_| fail(format!("{}: path contains a NUL byte", target.display())))?;
            let mode = ft.mode_bits() | (m.perm & 0o7777);
            // SAFETY: `c` is a valid NUL-terminated path; mknod reads nothing else.
            if unsafe { libc::mknod(c.as_ptr(), mode, m.rdev) } != 0 {
                return Err(hctx(std::io::Error::last_os_error()));
            }
            n.special += 1;
            copy_xattrs_out(fs, m.ino, target);
            return set_special_times(target, &m).map_err(hctx);
        }
    }
    fs::set_permissions(target, fs::Permissions::from_mode(m.perm)).map_err(hctx)?;
    copy_xattrs_out(fs, m.ino, target);
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(m.mtime_ns.max(0) as u64);
    let atime = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(m.atime_ns.max(0) as u64);
    let times = fs::FileTimes::new().set_modified(mtime).set_accessed(atime);
    if let Ok(f) = fs::File::options().write(ft == FileType::Regular).read(true).open(target) {
        let _ = f.set_times(times);
    }
    Ok(())
}

/// Times of a special file copied out: set by path, without opening it (a FIFO would block).
fn set_special_times(target: &Path, m: &hashfs::Metadata) -> std::io::Result<()> {
    let ts = |ns: i64| libc::timespec { tv_sec: ns.div_euclid(1_000_000_000), tv_nsec: ns.rem_euclid(1_000_000_000) };
    let times = [ts(m.atime_ns), ts(m.mtime_ns)];
    let c = std::ffi::CString::new(target.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: `c` is a valid path and `times` two timespecs, as utimensat requires.
    if unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `hashfs put`: copies a host file or tree into the image, and says what it copied.
pub fn put_cmd(image: &Path, host_path: &Path, fs_path: &str) -> Result<u8, Failure> {
    let fs = crate::mount(image)?;
    let n = put(&fs, host_path, fs_path)?;
    println!("copied {n}");
    Ok(0)
}

/// `hashfs get`: copies a file or tree out of the image, and says what it copied.
pub fn get_cmd(image: &Path, fs_path: &str, host_path: &Path) -> Result<u8, Failure> {
    let fs = crate::mount(image)?;
    let n = get(&fs, fs_path, host_path)?;
    println!("copied {n}");
    Ok(0)
}
