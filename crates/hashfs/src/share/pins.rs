//! Read-only participants' pins (`fs/shared/read_only.rs`): a read-only participant may
//! not store to the shared region, so the inodes it has open are marked where it can mark
//! them, as read locks of the kernel's lock manager on bytes of the image file far past its
//! end (one per inode), which a writer probes before it frees an unlinked inode. (Record
//! locks between processes lie in the region, `lock_table.rs`; a read-only participant's
//! lie beside its pins, `read_only_locks.rs`.)

use crate::layout::Ino;

/// An OFD lock command of `fcntl` on the image file (`F_OFD_SETLK`, `F_OFD_GETLK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RangeLock {
    /// `F_RDLCK`, `F_WRLCK` or `F_UNLCK`.
    pub(super) typ: i32,
    pub(super) start: i64,
    pub(super) len: i64,
}

/// `fcntl(fd, cmd, lock)` for `F_OFD_SETLK` and `F_OFD_GETLK` on `fd`: what F_OFD_GETLK
/// found, or the lock itself for the other.
pub(super) fn ofd_lock(fd: &std::fs::File, cmd: i32, lock: RangeLock) -> std::io::Result<RangeLock> {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain C struct, valid zeroed.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = lock.typ as i16;
    l.l_whence = libc::SEEK_SET as i16;
    l.l_start = lock.start;
    l.l_len = lock.len;
    // l_pid stays 0, as OFD locks require.
    // SAFETY: an OFD lock command with a valid struct flock on a live descriptor; the
    // kernel reads and (for F_OFD_GETLK) writes that struct only.
    if unsafe { libc::fcntl(fd.as_raw_fd(), cmd, &mut l as *mut libc::flock) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(RangeLock { typ: l.l_type as i32, start: l.l_start, len: l.l_len })
}

/// Where read-only participants pin the inodes they have open: one byte per inode, at
/// 2^62 + 2^33 (where earlier versions kept them, past their record locks' ranges). A read-only participant holds a read lock
/// on its inode's byte (it may lock for reading with a read-only descriptor); a writer
/// that would free an unlinked inode probes for such a lock first and keeps the inode
/// while one is held.
pub const PIN_BASE: i64 = (1 << 62) + (1 << 33);

/// Where read-only participants pin the blocks of the files they map (pages onto the
/// image): one byte per inode, after the inodes' pins. A writer probes for such a lock
/// before it frees or moves a file's blocks, as for a writer's mark in the region
/// (`fs/shared/mapped.rs`).
pub const BLOCKS_PIN_BASE: i64 = PIN_BASE + (1 << 32);

/// Where a read-only participant marks that it follows the ring of data changes (the
/// overwrites in place its copies of files must take: `fs/shared/read_only.rs`), one byte
/// just after `read_only_locks::PRESENCE`. A writer notes its overwrites in place in the
/// ring while the region names a watcher or a reader holds this byte.
pub const WATCHES_DATA: i64 = BLOCKS_PIN_BASE + (1 << 32) + 1;
const _: () = assert!(WATCHES_DATA == super::read_only_locks::PRESENCE + 1);

/// Takes (`F_RDLCK`) or lets go of (`F_UNLCK`) the mark that this reader follows the ring
/// of data changes ([`WATCHES_DATA`]).
pub fn watch_data(fd: &std::fs::File, typ: i32) -> std::io::Result<()> {
    lock_byte(fd, WATCHES_DATA, typ)
}

/// Whether a read-only participant follows the ring of data changes ([`WATCHES_DATA`]); a
/// failed probe counts as one that does (an overwrite noted needlessly costs a slot).
pub fn data_watched(fd: std::os::fd::RawFd) -> bool {
    byte_locked(fd, WATCHES_DATA)
}

/// Takes (`F_RDLCK`) or lets go of (`F_UNLCK`) the pin on `ino` through `fd`'s open file
/// description.
pub fn pin(fd: &std::fs::File, ino: Ino, typ: i32) -> std::io::Result<()> {
    pin_at(fd, PIN_BASE, ino, typ)
}

/// Takes or lets go of the pin on `ino`'s blocks ([`BLOCKS_PIN_BASE`]).
pub fn pin_blocks(fd: &std::fs::File, ino: Ino, typ: i32) -> std::io::Result<()> {
    pin_at(fd, BLOCKS_PIN_BASE, ino, typ)
}

fn pin_at(fd: &std::fs::File, base: i64, ino: Ino, typ: i32) -> std::io::Result<()> {
    lock_byte(fd, base + ino.0 as i64, typ)
}

/// Takes or lets go of a read lock on byte `at` through `fd`'s open file description.
fn lock_byte(fd: &std::fs::File, at: i64, typ: i32) -> std::io::Result<()> {
    ofd_lock(fd, libc::F_OFD_SETLK, RangeLock { typ, start: at, len: 1 }).map(drop)
}

/// Whether a read-only participant pins `ino` (the image file open as `fd`, whose own
/// open file description pins nothing). A failed probe counts as pinned: an inode kept
/// is freed later, one freed under a reader is lost to it.
pub fn pinned(fd: std::os::fd::RawFd, ino: Ino) -> bool {
    pinned_at(fd, PIN_BASE, ino)
}

/// Whether a read-only participant maps `ino`'s blocks ([`BLOCKS_PIN_BASE`]); a failed
/// probe counts as mapped.
pub fn blocks_pinned(fd: std::os::fd::RawFd, ino: Ino) -> bool {
    pinned_at(fd, BLOCKS_PIN_BASE, ino)
}

fn pinned_at(fd: std::os::fd::RawFd, base: i64, ino: Ino) -> bool {
    byte_locked(fd, base + ino.0 as i64)
}

/// Whether another open file description holds a lock on byte `at` (the image file open
/// as `fd`); a failed probe counts as locked.
fn byte_locked(fd: std::os::fd::RawFd, at: i64) -> bool {
    // SAFETY: the caller's descriptor, borrowed for the probe and not closed here.
    let f = std::mem::ManuallyDrop::new(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) });
    let probe = RangeLock { typ: libc::F_WRLCK, start: at, len: 1 };
    !matches!(ofd_lock(&f, libc::F_OFD_GETLK, probe), Ok(l) if l.typ == libc::F_UNLCK)
}
