//! The lower file system: file handles that name a lower inode across renames and
//! remounts, and the few calls rustix leaves to libc.
//!
//! A promoted file's PM copy records its lower inode as an exportfs file handle
//! (`name_to_handle_at`): the handle survives renames, hard links and a reboot, and
//! `open_by_handle_at` fails with ESTALE once the inode is gone, which is how a mount
//! finds the PM copies of files deleted before a crash. ext4, XFS, Btrfs and tmpfs
//! export handles; a lower file system that does not is refused at mount.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

const MAX_HANDLE_SZ: usize = 128;

/// A lower inode's file handle, as stored in PM: its type, then its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowerHandle {
    pub kind: i32,
    pub bytes: Vec<u8>,
}

#[repr(C)]
struct RawHandle {
    handle_bytes: libc::c_uint,
    handle_type: libc::c_int,
    f_handle: [u8; MAX_HANDLE_SZ],
}

impl LowerHandle {
    /// The handle of the inode `fd` refers to (any fd, O_PATH included).
    pub fn of(fd: BorrowedFd<'_>) -> io::Result<LowerHandle> {
        let mut raw = RawHandle { handle_bytes: MAX_HANDLE_SZ as u32, handle_type: 0, f_handle: [0; MAX_HANDLE_SZ] };
        let mut mount_id: libc::c_int = 0;
        // SAFETY: `raw` is a file_handle header followed by MAX_HANDLE_SZ bytes, the size
        // its handle_bytes announces; the path is a NUL-terminated empty string, with
        // AT_EMPTY_PATH naming `fd` itself; both out-pointers live across the call.
        let r = unsafe {
            libc::name_to_handle_at(
                fd.as_raw_fd(),
                c"".as_ptr(),
                (&raw mut raw).cast::<libc::file_handle>(),
                &mut mount_id,
                libc::AT_EMPTY_PATH,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        let n = (raw.handle_bytes as usize).min(MAX_HANDLE_SZ);
        Ok(LowerHandle { kind: raw.handle_type, bytes: raw.f_handle[..n].to_vec() })
    }

    /// Opens the inode (`flags` as open(2)'s) through any fd on the same file system.
    /// ESTALE: the inode no longer exists.
    pub fn open(&self, mount_fd: BorrowedFd<'_>, flags: i32) -> io::Result<OwnedFd> {
        if self.bytes.len() > MAX_HANDLE_SZ {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut raw =
            RawHandle { handle_bytes: self.bytes.len() as u32, handle_type: self.kind, f_handle: [0; MAX_HANDLE_SZ] };
        raw.f_handle[..self.bytes.len()].copy_from_slice(&self.bytes);
        // SAFETY: `raw` is a valid file_handle of handle_bytes bytes (checked above);
        // the kernel only reads it.
        let fd = unsafe {
            libc::open_by_handle_at(
                mount_fd.as_raw_fd(),
                (&raw mut raw).cast::<libc::file_handle>(),
                flags | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: open_by_handle_at returned a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The bytes stored in PM: type (4 bytes, little-endian), then the handle.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = self.kind.to_le_bytes().to_vec();
        v.extend_from_slice(&self.bytes);
        v
    }

    pub fn decode(b: &[u8]) -> Option<LowerHandle> {
        if b.len() < 4 || b.len() > 4 + MAX_HANDLE_SZ {
            return None;
        }
        Some(LowerHandle { kind: i32::from_le_bytes(b[..4].try_into().ok()?), bytes: b[4..].to_vec() })
    }
}

/// The path through which a descriptor (O_PATH included) can be reopened.
pub fn proc_path(fd: BorrowedFd<'_>) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Opens the file an O_PATH descriptor names, with open(2)'s `flags`.
pub fn reopen(fd: BorrowedFd<'_>, flags: i32) -> io::Result<File> {
    let flags = rustix::fs::OFlags::from_bits_retain((flags | libc::O_CLOEXEC) as u32);
    let fd = rustix::fs::open(proc_path(fd), flags, rustix::fs::Mode::empty())?;
    Ok(File::from(fd))
}

/// Where a descriptor's file is now (for messages and `hashfs info`).
pub fn path_of(fd: impl AsFd) -> Option<PathBuf> {
    std::fs::read_link(proc_path(fd.as_fd())).ok()
}

/// Walks the tree under `root` (not crossing into other file systems, not following
/// symbolic links) and takes out of `want` each (device, inode) that has a name there;
/// stops early once `want` is empty. Directories it cannot read are passed over.
pub fn find_names(root: &Path, want: &mut Vec<(u64, u64)>) {
    use std::os::unix::fs::MetadataExt;
    let Ok(top) = std::fs::metadata(root) else { return };
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.dev() != top.dev() {
                continue;
            }
            if m.is_dir() {
                dirs.push(e.path());
            } else {
                want.retain(|&k| k != (m.dev(), m.ino()));
                if want.is_empty() {
                    return;
                }
            }
        }
    }
}

/// The lower file's fsync or fdatasync.
pub fn sync(f: &File, scope: hashfs::SyncScope) -> io::Result<()> {
    match scope {
        hashfs::SyncScope::All => f.sync_all(),
        hashfs::SyncScope::DataOnly => f.sync_data(),
    }
}

/// Reads `buf.len()` bytes at `off`, or fewer at end of file.
pub fn read_full(f: &File, off: u64, buf: &mut [u8]) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Bytes of `f` written and not yet on the lower file system's disk (its page cache's dirty
/// and under-writeback pages, by `cachestat(2)`, Linux 6.5 on), for the profiler of a file
/// whose writes the kernel passes to the lower file itself (the mount's passthrough): the
/// daemon never sees them, so at an fsync, before the lower file's own, these are what was
/// written since the last one (a write back by the kernel's flusher, after 30 s, would hide
/// some: the profiler's interval is 1 s). None where the call is missing.
pub fn unsynced_bytes(f: &File) -> Option<u64> {
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    const SYS_CACHESTAT: libc::c_long = 451; // the same on every architecture
    let range = Range { off: 0, len: 0 }; // to the end of the file
    let mut st = Stat::default();
    // SAFETY: cachestat(fd, struct cachestat_range *, struct cachestat *, flags): both
    // structs are the kernel's layout and live across the call.
    let r = unsafe { libc::syscall(SYS_CACHESTAT, f.as_raw_fd(), &raw const range, &raw mut st, 0) };
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    (r == 0).then(|| (st.nr_dirty + st.nr_writeback) * page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_survive_rename_and_go_stale_after_unlink() {
        let dir = std::env::temp_dir().join(format!("hashfs-spfs-handle-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let root = File::open(&dir).unwrap();
        let a = dir.join("a");
        std::fs::write(&a, b"hello").unwrap();
        let h = LowerHandle::of(File::open(&a).unwrap().as_fd()).unwrap();
        assert_eq!(LowerHandle::decode(&h.encode()), Some(h.clone()));
        std::fs::rename(&a, dir.join("b")).unwrap();
        let f = File::from(h.open(root.as_fd(), libc::O_RDONLY).unwrap());
        let mut buf = [0u8; 8];
        assert_eq!(read_full(&f, 0, &mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        drop(f);
        std::fs::remove_file(dir.join("b")).unwrap();
        let e = h.open(root.as_fd(), libc::O_RDONLY).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESTALE), "{e}");
        assert_eq!(LowerHandle::decode(&[1, 2]), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
