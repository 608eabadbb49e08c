//! Where a file's record locks lie in the image file, for every front end that shares an
//! image (the shim, `hashfs-preload/src/shim/locks.rs`; a shared mount's daemon,
//! `hashfs-fuse/src/locks.rs`): each takes them through the kernel's lock manager on these
//! ranges of the image file, so the kernel's semantics hold between all of them. Inode
//! `ino`'s bytes [s, e) are the image file's [ino·2^40 + s, ino·2^40 + e); its `flock` is
//! one byte per inode past every inode's range.

use crate::layout::Ino;

/// Bytes of a file that a record lock can name (1 TiB): inode `ino`'s locks lie in the
/// image file's [ino << 40, (ino + 1) << 40).
pub const SPAN_SHIFT: u32 = 40;
pub const SPAN: i64 = 1 << SPAN_SHIFT;
/// Where `flock` locks lie: one byte per inode, past every inode's record locks.
pub const FLOCK_BASE: i64 = 1 << 62;

/// The image file's first byte for inode `ino`'s locks.
pub fn span_start(ino: Ino) -> i64 {
    (ino.0 as i64) << SPAN_SHIFT
}

/// The image file's range (start, length) for inode `ino`'s bytes [start, end] (`end`
/// inclusive, as FUSE gives it; at or past the span's end: to the end of the span). None
/// when `start` lies past what the span holds (the caller's EOVERFLOW).
pub fn image_range(ino: Ino, start: u64, end: u64) -> Option<(i64, i64)> {
    let s = i64::try_from(start).ok().filter(|&s| s < SPAN)?;
    let e = i64::try_from(end).unwrap_or(i64::MAX).min(SPAN - 1);
    (e >= s).then(|| (span_start(ino) + s, e - s + 1))
}

/// A record lock on a range of an open file, as `fcntl`'s lock commands see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeLock {
    /// `F_RDLCK`, `F_WRLCK` or `F_UNLCK`.
    pub typ: i32,
    pub start: i64,
    /// 0: to the end of the file.
    pub len: i64,
    /// The holder's process, as F_GETLK reports it (-1 for an open file description's).
    pub pid: i32,
}

/// `fcntl(fd, cmd, lock)` for the OFD lock commands (`F_OFD_SETLK`, `F_OFD_SETLKW`,
/// `F_OFD_GETLK`) on `fd`; what F_OFD_GETLK found, or the lock itself for the others.
pub fn ofd_lock(fd: &std::fs::File, cmd: i32, lock: RangeLock) -> std::io::Result<RangeLock> {
    use std::os::fd::AsRawFd;
    if !matches!(cmd, libc::F_OFD_SETLK | libc::F_OFD_SETLKW | libc::F_OFD_GETLK) {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: a plain C struct, valid zeroed.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = lock.typ as i16;
    l.l_whence = libc::SEEK_SET as i16;
    l.l_start = lock.start;
    l.l_len = lock.len;
    // l_pid stays 0, as OFD locks require.
    // SAFETY: an OFD lock command (checked above) with a valid struct flock on a live
    // descriptor; the kernel reads and (for F_OFD_GETLK) writes that struct only.
    if unsafe { libc::fcntl(fd.as_raw_fd(), cmd, &mut l as *mut libc::flock) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(RangeLock { typ: l.l_type as i32, start: l.l_start, len: l.l_len, pid: l.l_pid })
}

/// Where read-only participants pin the inodes they have open (`fs/shared/read_only.rs`):
/// one byte per inode, past every `flock` byte. A read-only participant holds a read lock
/// on its inode's byte (it may lock for reading with a read-only descriptor); a writer
/// that would free an unlinked inode probes for such a lock first and keeps the inode
/// while one is held.
pub const PIN_BASE: i64 = FLOCK_BASE + (1 << 33);

/// Takes (`F_RDLCK`) or lets go of (`F_UNLCK`) the pin on `ino` through `fd`'s open file
/// description.
pub fn pin(fd: &std::fs::File, ino: Ino, typ: i32) -> std::io::Result<()> {
    let lock = RangeLock { typ, start: PIN_BASE + ino.0 as i64, len: 1, pid: 0 };
    ofd_lock(fd, libc::F_OFD_SETLK, lock).map(drop)
}

/// Whether a read-only participant pins `ino` (the image file open as `fd`, whose own
/// open file description pins nothing). A failed probe counts as pinned: an inode kept
/// is freed later, one freed under a reader is lost to it.
pub fn pinned(fd: std::os::fd::RawFd, ino: Ino) -> bool {
    // SAFETY: the caller's descriptor, borrowed for the probe and not closed here.
    let f = std::mem::ManuallyDrop::new(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) });
    let probe = RangeLock { typ: libc::F_WRLCK, start: PIN_BASE + ino.0 as i64, len: 1, pid: 0 };
    !matches!(ofd_lock(&f, libc::F_OFD_GETLK, probe), Ok(l) if l.typ == libc::F_UNLCK)
}
