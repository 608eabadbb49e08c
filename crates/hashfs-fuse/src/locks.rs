//! Record locks through a shared mount (issue 56): the daemon takes each caller's POSIX
//! lock (FUSE's getlk and setlk) through the kernel's lock manager on the image file's
//! range that stands for the file's (`hashfs::share::record_locks`), where the shim takes
//! its processes' locks, so that a lock through the mount and one through the shim exclude
//! each other. Each lock owner the kernel names (a process's files, for POSIX locks) gets a
//! descriptor of the image of its own and its locks are OFD locks on it: the kernel then
//! gives conflicts between owners, the merging and splitting of one owner's ranges, and
//! their release when the descriptor closes. A close of any of the owner's descriptors of a
//! file (FUSE's flush) drops the owner's locks on that file, as POSIX has it.
//!
//! A wait (F_SETLKW) runs on a thread of its own, so that the daemon's request threads are
//! never held by a lock someone else keeps. The kernel's deadlock detection does not reach
//! OFD locks: two owners through the mount that wait for each other wait for ever (as
//! with OFD locks on any file); an owner interrupted while it waits gets the lock at its
//! holder's release and drops it at its close.
//!
//! `flock` through the mount stays the kernel's own, local to the mount (FUSE gives the
//! daemon no way here to tell a `flock` from a whole-file POSIX lock).

use hashfs::share::record_locks::{image_range, ofd_lock, span_start, RangeLock, SPAN};
use hashfs::Ino;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// One lock owner's descriptor of the image and the inodes it has locks on.
struct Owner {
    fd: Arc<File>,
    inos: HashSet<u32>,
}

/// The lock owners of a shared mount.
pub(crate) struct ImageLocks {
    image: PathBuf,
    owners: Mutex<HashMap<u64, Owner>>,
}

/// A lock that conflicts with the one asked about: its range of the file (`end`
/// inclusive), type and holder's process (0 when an open file description holds it).
pub(crate) struct Conflict {
    pub start: u64,
    pub end: u64,
    pub typ: i32,
    pub pid: u32,
}

fn flock(typ: i32, start: i64, len: i64) -> RangeLock {
    RangeLock { typ, start, len, pid: 0 }
}

/// fcntl's OFD lock command `cmd` on `fd` (`hashfs::share::record_locks::ofd_lock`): what
/// F_OFD_GETLK found; the errno on failure.
fn ofd(fd: &File, cmd: libc::c_int, l: RangeLock) -> Result<RangeLock, i32> {
    ofd_lock(fd, cmd, l).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

impl ImageLocks {
    pub fn new(image: PathBuf) -> ImageLocks {
        ImageLocks { image, owners: Mutex::new(HashMap::new()) }
    }

    fn open_image(&self) -> Result<File, i32> {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.image)
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
    }

    /// Owner `owner`'s descriptor, opened at its first lock on `ino`.
    fn owner_fd(&self, owner: u64, ino: Ino) -> Result<Arc<File>, i32> {
        let mut owners = self.owners.lock().expect("lock owners");
        if let Some(o) = owners.get_mut(&owner) {
            o.inos.insert(ino.0);
            return Ok(o.fd.clone());
        }
        let fd = Arc::new(self.open_image()?);
        owners.insert(owner, Owner { fd: fd.clone(), inos: HashSet::from([ino.0]) });
        Ok(fd)
    }

    /// FUSE's getlk: the first lock that conflicts with `typ` over [start, end] of `ino`
    /// for `owner`, if any.
    pub fn test(&self, ino: Ino, owner: u64, start: u64, end: u64, typ: i32) -> Result<Option<Conflict>, i32> {
        let (s, len) = image_range(ino, start, end).ok_or(libc::EOVERFLOW)?;
        let fd = match self.owners.lock().expect("lock owners").get(&owner) {
            Some(o) => o.fd.clone(),
            None => Arc::new(self.open_image()?),
        };
        let l = ofd(&fd, libc::F_OFD_GETLK, flock(typ, s, len))?;
        if l.typ == libc::F_UNLCK {
            return Ok(None);
        }
        let base = span_start(ino);
        let first = (l.start - base).max(0) as u64;
        let end = if l.len == 0 || l.start + l.len >= base + SPAN {
            i64::MAX as u64
        } else {
            (l.start + l.len - 1 - base) as u64
        };
        Ok(Some(Conflict { start: first, end, typ: l.typ, pid: l.pid.max(0) as u32 }))
    }

    /// FUSE's setlk without waiting: takes or drops `owner`'s lock of type `typ` over
    /// [start, end] of `ino`; EAGAIN when another owner's lock conflicts.
    pub fn set(&self, ino: Ino, owner: u64, start: u64, end: u64, typ: i32) -> Result<(), i32> {
        let (s, len) = image_range(ino, start, end).ok_or(libc::EOVERFLOW)?;
        if typ == libc::F_UNLCK {
            let fd = self.owners.lock().expect("lock owners").get(&owner).map(|o| o.fd.clone());
            return match fd {
                Some(fd) => ofd(&fd, libc::F_OFD_SETLK, flock(typ, s, len)).map(drop),
                None => Ok(()),
            };
        }
        let fd = self.owner_fd(owner, ino)?;
        ofd(&fd, libc::F_OFD_SETLK, flock(typ, s, len)).map(drop).map_err(|e| {
            if e == libc::EACCES {
                libc::EAGAIN
            } else {
                e
            }
        })
    }

    /// FUSE's setlk that waits (F_SETLKW): `done` gets the outcome, on a thread of its own
    /// when the lock is not free at once.
    pub fn set_waiting(
        &self,
        ino: Ino,
        owner: u64,
        start: u64,
        end: u64,
        typ: i32,
        done: impl FnOnce(Result<(), i32>) + Send + 'static,
    ) {
        match self.set(ino, owner, start, end, typ) {
            Err(libc::EAGAIN) => {}
            r => return done(r),
        }
        let (Some((s, len)), Ok(fd)) = (image_range(ino, start, end), self.owner_fd(owner, ino)) else {
            return done(Err(libc::ENOLCK));
        };
        let spawned = std::thread::Builder::new().name("hashfs-lock-wait".into()).spawn(move || {
            done(ofd(&fd, libc::F_OFD_SETLKW, flock(typ, s, len)).map(drop));
        });
        if spawned.is_err() {
            // No thread: the waiter is told to try again rather than hold a request thread.
            eprintln!("hashfs: no thread to wait for a record lock on inode {ino}");
        }
    }

    /// FUSE's flush: `owner` closed a descriptor of `ino`, so its locks on it go (POSIX);
    /// its descriptor of the image closes with its last locked file.
    pub fn closed(&self, ino: Ino, owner: u64) {
        let mut owners = self.owners.lock().expect("lock owners");
        let Some(o) = owners.get_mut(&owner) else { return };
        if o.inos.remove(&ino.0) {
            let _ = ofd(&o.fd, libc::F_OFD_SETLK, flock(libc::F_UNLCK, span_start(ino), SPAN));
        }
        if o.inos.is_empty() {
            owners.remove(&owner);
        }
    }
}
