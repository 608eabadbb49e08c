//! Record locks (`fcntl` F_SETLK, F_SETLKW, F_GETLK and their OFD forms) and `flock`
//! between the processes that share an image: each lies in the image's table of record
//! locks in the shared region (`hashfs::share::lock_table`), which a shared mount's daemon
//! uses too, so that conflicts, waits, EDEADLK and release at a holder's death hold
//! between every process on the image, with no system call unless a waiter sleeps.
//!
//! What is whose: POSIX locks belong to the process (its pid and start time, so that they
//! survive `execve` as on Linux) and a close of any of its descriptors of a file drops them
//! all on that file; OFD locks and `flock` belong to the open file description: the
//! region's description once one is made (a fork or exec shares it; a first OFD lock or
//! `flock` makes it now), dropped when its last holder among the processes closes it.

use super::*;

use hashfs::share::lock_table::{self, Conflict, Kind, Owner, Request, TO_END};
use hashfs::share::Handle;
use std::sync::atomic::AtomicU64;

/// This process's pid, as the shim keeps it (set at its start and in a forked child).
fn lock_pid() -> i32 {
    match super::exec::PROCESS_PID.load(Ordering::Relaxed) {
        0 => current_pid(),
        p => p,
    }
}

/// This process as the owner of its POSIX locks.
fn process_owner() -> Result<Owner, c_int> {
    lock_table::this_process(lock_pid() as u32).ok_or(libc::ENOLCK)
}

/// Descriptions of a mount of one process, which has no region to name them: numbered
/// here (no other process can hold one).
static LOCAL_DESCRIPTIONS: AtomicU64 = AtomicU64::new(1);

impl OpenFile {
    /// The description as the owner of its OFD locks and `flock`: the region's
    /// description, made now if no fork or exec shared it yet.
    fn description_owner(&self, fs: &FileSystem<MmapDevice>) -> Result<Owner, c_int> {
        if let Some(&o) = self.lock_owner.get() {
            return Ok(o);
        }
        let flags = self.flags.load(Ordering::Relaxed);
        let h = match self.pos.share(fs, self.ino, flags).map_err(|e| e.errno())? {
            Some(h) => h,
            None => Handle { index: u32::MAX, generation: LOCAL_DESCRIPTIONS.fetch_add(1, Ordering::Relaxed) },
        };
        Ok(*self.lock_owner.get_or_init(|| Owner::Description(h)))
    }
}

/// Drops a description's OFD locks and `flock`s with it, when this process was its last
/// holder (`last`; a description no fork or exec shared is this process's alone).
pub(super) fn close_description(of: &OpenFile, last: bool) {
    let Some(&owner) = of.lock_owner.get() else { return };
    let alone = matches!(owner, Owner::Description(h) if h.index == u32::MAX);
    if !(last || alone) {
        return;
    }
    if let Some(fs) = super::fork::joined_fs() {
        fs.release_record_locks(owner, Some(of.ino));
    }
}

/// POSIX: a close of any of the process's descriptors of inode `ino` drops every record
/// lock the process holds on it (the table's lock taken, and the process's start time read,
/// only when an entry of its pid is there).
pub(super) fn closed_a_descriptor_of(ino: Ino) {
    let Some(fs) = super::fork::joined_fs() else { return };
    if !fs.pid_may_hold_record_locks(lock_pid() as u32, ino) {
        return;
    }
    let Ok(owner) = process_owner() else { return };
    fs.release_record_locks(owner, Some(ino));
}

/// The caller's lock `l` on `of` as a request: [start, end] of the file made absolute
/// (SEEK_CUR from the descriptor's offset, SEEK_END from the size).
fn request(of: &OpenFile, fs: &FileSystem<MmapDevice>, l: &libc::flock) -> Result<Request, c_int> {
    let base = match l.l_whence as c_int {
        libc::SEEK_SET => 0,
        libc::SEEK_CUR => *of.pos.lock() as i64,
        libc::SEEK_END => fs.peek_attr(of.ino).map_err(|e| e.errno())?.size as i64,
        _ => return Err(libc::EINVAL),
    };
    let start = base.checked_add(l.l_start).ok_or(libc::EOVERFLOW)?;
    let (start, end) = match l.l_len {
        0 => (start, None),
        n if n > 0 => (start, Some(start.checked_add(n - 1).ok_or(libc::EOVERFLOW)?)),
        n => (start.checked_add(n).ok_or(libc::EINVAL)?, Some(start - 1)),
    };
    if start < 0 {
        return Err(libc::EINVAL);
    }
    let kind = match l.l_type as c_int {
        libc::F_RDLCK => Kind::Read,
        libc::F_WRLCK => Kind::Write,
        libc::F_UNLCK => Kind::Unlock,
        _ => return Err(libc::EINVAL),
    };
    Ok(Request { ino: of.ino, flock: false, start: start as u64, end: end.map_or(TO_END, |e| e as u64), kind })
}

/// F_GETLK's answer in the caller's struct: the lock in the way, or F_UNLCK.
fn answer(c: Option<Conflict>, l: &mut libc::flock) {
    let Some(c) = c else {
        l.l_type = libc::F_UNLCK as i16;
        return;
    };
    l.l_type = if c.write { libc::F_WRLCK } else { libc::F_RDLCK } as i16;
    l.l_whence = libc::SEEK_SET as i16;
    l.l_start = c.start as i64;
    l.l_len = if c.end == TO_END { 0 } else { (c.end - c.start + 1) as i64 };
    l.l_pid = c.pid;
}

/// fcntl's lock commands on `of`.
pub(super) fn fcntl_lock(of: &OpenFile, cmd: c_int, l: &mut libc::flock) -> Result<c_int, c_int> {
    let fs = shim().fs()?;
    let ofd = matches!(cmd, libc::F_OFD_SETLK | libc::F_OFD_SETLKW | libc::F_OFD_GETLK);
    if ofd && l.l_pid != 0 {
        return Err(libc::EINVAL); // as Linux: an OFD lock's l_pid must be 0
    }
    let owner = if ofd { of.description_owner(fs)? } else { process_owner()? };
    let r = request(of, fs, l)?;
    // As Linux: a lock (not F_GETLK's question) needs a descriptor open for what it locks.
    let access = of.flags.load(Ordering::Relaxed) & libc::O_ACCMODE;
    let refused = match r.kind {
        Kind::Read => access == libc::O_WRONLY,
        Kind::Write => access == libc::O_RDONLY,
        Kind::Unlock => false,
    };
    if refused && !matches!(cmd, libc::F_GETLK | libc::F_OFD_GETLK) {
        return Err(libc::EBADF);
    }
    let pid = match owner {
        Owner::Process { pid, .. } => pid as i32,
        _ => -1,
    };
    match cmd {
        libc::F_GETLK | libc::F_OFD_GETLK => {
            answer(fs.record_lock_test(owner, &r)?, l);
            Ok(0)
        }
        libc::F_SETLK | libc::F_OFD_SETLK => fs.set_record_lock(owner, &r, pid, None).map(|()| 0),
        _ => fs.set_record_lock(owner, &r, pid, Some(&lock_table::a_handler_interrupts)).map(|()| 0),
    }
}

/// flock(2) on `of`: a whole-file lock of the description, among `flock`s only.
pub(super) fn flock(of: &OpenFile, op: c_int) -> Result<(), c_int> {
    let fs = shim().fs()?;
    let kind = match op & !libc::LOCK_NB {
        libc::LOCK_SH => Kind::Read,
        libc::LOCK_EX => Kind::Write,
        libc::LOCK_UN => Kind::Unlock,
        _ => return Err(libc::EINVAL),
    };
    let owner = of.description_owner(fs)?;
    let r = Request { ino: of.ino, flock: true, start: 0, end: TO_END, kind };
    // flock says EWOULDBLOCK, which is EAGAIN on Linux.
    let wait = (op & libc::LOCK_NB == 0).then_some(&lock_table::a_handler_interrupts as &dyn Fn() -> bool);
    fs.set_record_lock(owner, &r, -1, wait)
}
