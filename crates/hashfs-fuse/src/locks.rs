//! Record locks through a shared mount (issue 56): the daemon takes each caller's POSIX
//! lock (FUSE's getlk and setlk) in the image's table of record locks in the shared region
//! (`hashfs::share::lock_table`), where the shim takes its processes' locks, so that a lock
//! through the mount and one through the shim exclude each other. Each lock owner the
//! kernel names (a process's files, for POSIX locks) is an owner of the table, with the
//! daemon's pid and start time: the table merges and splits one owner's ranges, and the
//! daemon's death lets every lock it held go. A close of any of the owner's descriptors of
//! a file (FUSE's flush) drops the owner's locks on that file, as POSIX has it.
//!
//! A wait (F_SETLKW) runs on a thread of its own, so that the daemon's request threads are
//! never held by a lock someone else keeps; a mount's owners take part in the table's
//! deadlock check as processes do. An owner interrupted while it waits gets the lock at
//! its holder's release and drops it at its close.
//!
//! `flock` through the mount is the daemon's too (asked for with FUSE_FLOCK_LOCKS; the
//! vendored fuser's `Filesystem::flock`): a whole-file lock among `flock`s only, owned by
//! the open file the kernel names, dropped at that file's release, so that it excludes the
//! shim's `flock`s. (Before 2026-12-06 the kernel kept it, local to the mount.)

use hashfs::pm::PmDevice;
use hashfs::share::lock_table::{self, Kind, Owner, Request, TO_END};
use hashfs::{FileSystem, Ino};

/// The daemon as the server of its callers' lock owners.
pub(crate) struct ImageLocks {
    pid: u32,
    start: u64,
}

/// A lock that conflicts with the one asked about: its range of the file (`end`
/// inclusive), type and holder's process (0 when an open file description holds it).
pub(crate) struct Conflict {
    pub start: u64,
    pub end: u64,
    pub typ: i32,
    pub pid: u32,
}

/// One of FUSE's lock calls: the inode, the lock owner the kernel names, the range
/// [start, end] (its end at or past `i64::MAX`: to the end of the file), the type and the
/// caller's pid; among `flock`s (whole files) or among record locks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LockCall {
    pub ino: Ino,
    pub flock: bool,
    pub owner: u64,
    pub start: u64,
    pub end: u64,
    pub typ: i32,
    pub pid: u32,
}

impl LockCall {
    /// The call as a request of the table.
    fn request(&self) -> Result<Request, i32> {
        let kind = match self.typ {
            libc::F_RDLCK => Kind::Read,
            libc::F_WRLCK => Kind::Write,
            libc::F_UNLCK => Kind::Unlock,
            _ => return Err(libc::EINVAL),
        };
        let end = if self.end >= i64::MAX as u64 { TO_END } else { self.end };
        if self.start > end {
            return Err(libc::EINVAL);
        }
        Ok(Request { ino: self.ino, flock: self.flock, start: self.start, end, kind })
    }
}

impl ImageLocks {
    /// None when the daemon's start time cannot be read (`/proc`).
    pub fn new() -> Option<ImageLocks> {
        match lock_table::this_process(std::process::id())? {
            Owner::Process { pid, start } => Some(ImageLocks { pid, start }),
            _ => None,
        }
    }

    fn owner(&self, owner: u64) -> Owner {
        Owner::Mount { pid: self.pid, start: self.start, owner }
    }

    /// FUSE's getlk: the first lock that conflicts with the call's, if any.
    pub fn test<D: PmDevice>(&self, fs: &FileSystem<D>, c: LockCall) -> Result<Option<Conflict>, i32> {
        Ok(fs.record_lock_test(self.owner(c.owner), &c.request()?)?.map(|c| Conflict {
            start: c.start,
            end: if c.end == TO_END { i64::MAX as u64 } else { c.end },
            typ: if c.write { libc::F_WRLCK } else { libc::F_RDLCK },
            pid: c.pid.max(0) as u32,
        }))
    }

    /// FUSE's setlk without waiting: takes or drops the call's lock; EAGAIN when another
    /// owner's lock conflicts.
    pub fn set<D: PmDevice>(&self, fs: &FileSystem<D>, c: LockCall) -> Result<(), i32> {
        let r = c.request()?;
        fs.set_record_lock(self.owner(c.owner), &r, c.pid as i32, None)
    }

    /// FUSE's setlk that waits (F_SETLKW): `done` gets the outcome, on a thread of its own
    /// when the lock is not free at once.
    pub fn set_waiting<D: PmDevice>(
        &self,
        fs: &FileSystem<D>,
        c: LockCall,
        done: impl FnOnce(Result<(), i32>) + Send + 'static,
    ) {
        match self.set(fs, c) {
            Err(libc::EAGAIN) => {}
            r => return done(r),
        }
        let Ok(r) = c.request() else { return done(Err(libc::EINVAL)) };
        let (fs, owner) = (fs.clone(), self.owner(c.owner));
        let spawned = std::thread::Builder::new().name("hashfs-lock-wait".into()).spawn(move || {
            done(fs.set_record_lock(owner, &r, c.pid as i32, Some(&|| false)));
        });
        if spawned.is_err() {
            // No thread: the waiter is told to try again rather than hold a request thread.
            eprintln!("hashfs: no thread to wait for a record lock on inode {}", c.ino);
        }
    }

    /// FUSE's flush: `owner` closed a descriptor of `ino`, so its locks on it go (POSIX).
    pub fn closed<D: PmDevice>(&self, fs: &FileSystem<D>, ino: Ino, owner: u64) {
        fs.release_record_locks(self.owner(owner), Some(ino));
    }
}
