//! FIFOs of the image, opened through the shim. A FIFO's bytes are never the file system's:
//! the kernel moves them between the processes that have it open. So an open of a FIFO
//! inode of the image opens a kernel FIFO that stands for it, the same for every process of
//! the image: `<region>.fifos/<inode>-<generation>` beside the image's shared region
//! (`hashfs::share::fifo_dir_path`), made at its first open. The descriptor is the kernel's
//! (its reads, writes, `poll` and `O_NONBLOCK` are the kernel's FIFO's; `fstat` shows the
//! kernel node); `stat` of the path shows the image's inode.
//!
//! Trust: the directory is made with the image file's permissions (its read bits give
//! search, its write bits write; sticky; its group the image's), so those who may use the
//! image may use its FIFOs, and no one else; a directory there made by one who may not write
//! the image, or that is not a directory, is refused (EACCES, said once). The nodes are
//! 0666 inside it; the open is checked against the image inode's permissions first. A
//! process that may only read the image makes no directory (EROFS while there is none):
//! one it made would be its own user's, which the writers would refuse.
//!
//! A node stays while its FIFO has a name: a FIFO unlinked through the shim takes its node
//! with it (and the directory, once empty); the region's removal takes the directory only
//! if it is empty, since a process that left the image may still hold a node open (a
//! shell's `cmd < fifo` execs a program that holds no descriptor of the image), and the
//! next process to open the FIFO must reach the same kernel FIFO. A FIFO removed otherwise
//! (through the mount, or with the image) leaves its node, an empty kernel FIFO.

use super::*;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::sync::atomic::AtomicU64;

/// Flags an open passes on to the kernel FIFO (creation and truncation were the image's).
const KEPT: c_int = !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_DIRECTORY | libc::O_NOFOLLOW);

/// The kernel's descriptor of the FIFO standing for the image's FIFO `md`, opened with
/// `flags` (checked against `md`'s permissions).
pub(super) fn open(md: &Metadata, flags: c_int) -> Result<c_int, c_int> {
    let want = match flags & libc::O_ACCMODE {
        libc::O_RDONLY => libc::R_OK,
        libc::O_WRONLY => libc::W_OK,
        _ => libc::R_OK | libc::W_OK,
    };
    if !super::stat::permitted(md, want) {
        return Err(libc::EACCES);
    }
    let mut tries = 0;
    let c = loop {
        tries += 1;
        let node = node_path(md.ino)?;
        let c = CString::new(node.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
        // SAFETY: a NUL-terminated path (inside the shim: the kernel's mknod).
        if unsafe { libc::mknod(c.as_ptr(), libc::S_IFIFO | 0o666, 0) } == 0 {
            // SAFETY: as above; the creation mask took bits the others need.
            unsafe { libc::chmod(c.as_ptr(), 0o666) };
            break c;
        }
        match hashfs_interpose::errno() {
            libc::EEXIST => break c,
            // The directory went meanwhile (the last FIFO of another was unlinked): made again.
            libc::ENOENT if tries < 3 => {}
            e => return Err(e),
        }
    };
    let open = real!(open: fn(*const c_char, c_int, c_uint) -> c_int);
    // SAFETY: a NUL-terminated path and the caller's flags. It may block until the other
    // end opens, as a FIFO's open does; no lock of the shim's is held here.
    let fd = unsafe { open(c.as_ptr(), (flags & KEPT) | libc::O_NOFOLLOW, 0) };
    if fd < 0 {
        return Err(hashfs_interpose::errno());
    }
    Ok(fd)
}

/// The image's FIFO or socket `ino` (its last name removed): its kernel node goes, if it
/// was made.
pub(super) fn removed(ino: Ino, generation: u32) {
    if let Ok(dir) = dir(false) {
        if std::fs::remove_file(dir.join(format!("{}-{generation}", ino.0))).is_ok() {
            let _ = std::fs::remove_dir(&dir); // if it was the last
        }
    }
}

/// The kernel node for inode `ino` as it is now (its generation names this FIFO and not
/// an earlier file of the same number).
fn node_path(ino: Ino) -> Result<PathBuf, c_int> {
    let fs = shim().fs()?;
    let generation = fs.peek_attr(ino).map_err(|e| e.errno())?.generation;
    // A process that may only read the image makes no directory (one it made, of its own
    // user, would be refused by the writers: EROFS for it, as for its other changes).
    node_of(ino, generation, !fs.is_read_only())
}

/// The kernel node standing for inode `ino` of generation `generation` (a FIFO's, or a
/// UNIX socket's, `socket.rs`), in the directory made if there is none and `make` (else
/// EROFS when there is none).
pub(super) fn node_of(ino: Ino, generation: u32, make: bool) -> Result<PathBuf, c_int> {
    Ok(dir(make)?.join(format!("{}-{generation}", ino.0)))
}

/// The image's FIFO directory, made if there is none (and `make`), and checked.
fn dir(make: bool) -> Result<PathBuf, c_int> {
    // The directory, and the device and inode numbers of the one last checked: a directory
    // found there again is taken unchecked only if it is that one (one removed with its last
    // node and made again, by anyone, is checked anew).
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    static CHECKED: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
    if let Some(d) = DIR.get() {
        let same = |m: &std::fs::Metadata| {
            m.is_dir() && m.dev() == CHECKED[0].load(Ordering::Acquire) && m.ino() == CHECKED[1].load(Ordering::Acquire)
        };
        if std::fs::symlink_metadata(d).is_ok_and(|m| same(&m)) {
            return Ok(d.clone());
        }
    }
    let image = std::env::var_os("HASHFS_IMAGE").ok_or(libc::ENOENT)?;
    let file = std::fs::File::open(&image).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
    let im = file.metadata().map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
    let region = hashfs::share::region_path(&file).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
    let d = hashfs::share::fifo_dir_path(&region);
    // Per class: the image's read bit gives search and read, its write bit write.
    let m = im.mode();
    let mut mode = 0o1000;
    for shift in [6, 3, 0] {
        if m & (0o4 << shift) != 0 {
            mode |= 0o5 << shift;
        }
        if m & (0o2 << shift) != 0 {
            mode |= 0o2 << shift;
        }
    }
    if !make && std::fs::symlink_metadata(&d).is_err() {
        return Err(libc::EROFS);
    }
    match std::fs::DirBuilder::new().mode(mode).create(&d) {
        Ok(()) => {
            // The creation mask took bits; the image's group (a member may give it), and for
            // root the image's owner too.
            let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode));
            let _ = std::os::unix::fs::chown(&d, None, Some(im.gid()));
            let _ = std::os::unix::fs::chown(&d, Some(im.uid()), None);
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e.raw_os_error().unwrap_or(libc::EIO)),
    }
    let found = std::fs::symlink_metadata(&d).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
    // SAFETY: no preconditions.
    let euid = unsafe { libc::geteuid() };
    // Made by one who may write the image: this process's user, the image's owner, root,
    // a member of the image's group when the group may write it (only a member can give
    // the directory that group), anyone when all may.
    let trusted =
        [euid, im.uid(), 0].contains(&found.uid()) || (m & 0o020 != 0 && found.gid() == im.gid()) || m & 0o002 != 0;
    if !found.is_dir() || !trusted {
        static SAID: AtomicBool = AtomicBool::new(false);
        if !SAID.swap(true, Ordering::Relaxed) {
            eprintln!(
                "hashfs_preload: {} is not the FIFO directory the shim makes for this image (made by a user who \
                 may not write the image, or not a directory): FIFOs of the image cannot be opened (EACCES)",
                d.display()
            );
        }
        return Err(libc::EACCES);
    }
    let _ = DIR.set(d.clone());
    CHECKED[0].store(found.dev(), Ordering::Release);
    CHECKED[1].store(found.ino(), Ordering::Release);
    Ok(d)
}
