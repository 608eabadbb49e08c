//! The image's record locks as a mount reaches them (`share/lock_table.rs`): on a mount
//! many processes share, the table in the image's region, with this participant's slot
//! and the region's descriptions to tell which owners are gone; on a mount of one process,
//! a table of its own in anonymous memory (no other process can reach the image); on a
//! read-only participant's, which may not write the region (docs/design.md, *Trust*), read
//! locks of the kernel's beside its pins, which it clears with the region's table read
//! without its lock, and which writers clear their write locks with
//! (`share/read_only_locks.rs`).

use crate::fs::FileSystem;
use crate::layout::Ino;
use crate::pm::PmDevice;
use crate::share::lock_table::{self, Conflict, Kind, LockScope, Owner, RecordLocks, Request};
use crate::share::read_only_locks::{ReaderLocks, Readers};
use crate::share::{ImageRegion, Participants, Region};

/// A mount of one process's own table: a participant table and a lock table in
/// anonymous memory.
pub(crate) struct LocalLocks {
    region: Region,
    me: crate::share::Participant,
}

const LOCAL_LOCKS_OFF: usize = std::mem::size_of::<Participants>().div_ceil(4096) * 4096;

impl LocalLocks {
    fn new() -> Option<LocalLocks> {
        let len = LOCAL_LOCKS_OFF + std::mem::size_of::<RecordLocks>().div_ceil(4096) * 4096;
        let region = Region::anonymous(len).ok()?;
        let me = region.at::<Participants>(0).join()?;
        Some(LocalLocks { region, me })
    }
}

/// Whether lock owner `o` is still there: its process runs, or its description in
/// `region` is still held.
fn owner_alive(region: &ImageRegion, o: Owner) -> bool {
    match o {
        Owner::Description(h) => region.descriptions().get(h).is_some(),
        Owner::Process { pid, start } | Owner::Mount { pid, start, .. } => lock_table::process_alive_cached(pid, start),
    }
}

impl<D: PmDevice> FileSystem<D> {
    /// Runs `f` on the image's table of record locks as this process's participant. Err
    /// (ENOLCK) on a read-only participant's mount, or when a mount of one process could
    /// not make its table.
    pub fn with_record_locks<R>(&self, f: impl FnOnce(&LockScope<'_>) -> R) -> Result<R, i32> {
        if let Some(sh) = self.inner.shared.get() {
            let region = &sh.region;
            let alive = |o: Owner| owner_alive(region, o);
            let readers = self.inner.dev.backing_fd().map(|fd| Readers { fd, asked: &sh.readers_asked });
            let scope = LockScope {
                table: region.record_locks(),
                me: sh.me(),
                who: region.participants(),
                alive: &alive,
                readers: readers.as_ref(),
            };
            return Ok(f(&scope));
        }
        if self.is_read_only() {
            return Err(libc::ENOLCK);
        }
        let local = self.inner.local_locks.get_or_init(LocalLocks::new).as_ref().ok_or(libc::ENOLCK)?;
        let everyone = |_: Owner| true;
        let scope = LockScope {
            table: local.region.at(LOCAL_LOCKS_OFF),
            me: local.me,
            who: local.region.at(0),
            alive: &everyone,
            readers: None,
        };
        Ok(f(&scope))
    }

    /// Whether process `pid` may hold a POSIX lock on `ino` ([`LockScope::pid_holds_any`]):
    /// false without a table (a mount of one process that never locked, a read-only
    /// participant's, which takes none).
    pub fn pid_may_hold_record_locks(&self, pid: u32, ino: Ino) -> bool {
        if let Some(ro) = self.inner.read_only.get() {
            return ro.pins.lock().locks.holds_any(pid, ino);
        }
        let local = self.inner.local_locks.get().is_some_and(|l| l.is_some());
        if self.inner.shared.get().is_none() && !local {
            return false;
        }
        self.with_record_locks(|s| s.pid_holds_any(pid, ino)).unwrap_or(false)
    }

    /// F_GETLK: the first lock of another owner in `r`'s way. A read-only participant reads
    /// the region's table without its lock (a snapshot: each entry is whole, the set may be
    /// changing).
    pub fn record_lock_test(&self, owner: Owner, r: &Request) -> Result<Option<Conflict>, i32> {
        let Some(ro) = self.inner.read_only.get() else { return self.with_record_locks(|s| s.test(owner, r)) };
        if let Some(region) = self.inner.read_only_region() {
            let alive = |o: Owner| owner_alive(region, o);
            if let Some(c) = lock_table::peek(region.record_locks(), owner, r, &alive) {
                return Ok(Some(c));
            }
        }
        let pins = ro.pins.lock();
        let others = pins.file.as_ref().and_then(|f| ReaderLocks::test_others(f, r));
        Ok(others.or_else(|| pins.locks.test(owner, r)))
    }

    /// F_SETLK, F_SETLKW and `flock`: takes or lets go of `r` for `owner` (`pid`: what
    /// F_GETLK reports of it). EAGAIN when another owner's lock is in the way and `wait` is
    /// None; else the call waits, and `wait` says whether a sleep a signal interrupted ends
    /// it (EINTR). EDEADLK, ENOLCK as [`LockScope::set_waiting`] says.
    pub fn set_record_lock(
        &self,
        owner: Owner,
        r: &Request,
        pid: i32,
        wait: Option<&dyn Fn() -> bool>,
    ) -> Result<(), i32> {
        if let Some(ro) = self.inner.read_only.get() {
            return self.reader_set(ro, owner, r, wait);
        }
        match wait {
            None => self.with_record_locks(|s| s.set(owner, r, pid))?,
            Some(interrupted) => self.with_record_locks(|s| s.set_waiting(owner, r, pid, interrupted))?,
        }
    }

    /// Drops `owner`'s record locks (on inode `ino` only, if given): a close.
    pub fn release_record_locks(&self, owner: Owner, ino: Option<Ino>) {
        if let Some(ro) = self.inner.read_only.get() {
            let mut pins = ro.pins.lock();
            let super::read_only::Pins { file, locks, .. } = &mut *pins;
            if let Some(f) = file.as_ref() {
                locks.release(f, owner, ino);
            }
            return;
        }
        let _ = self.with_record_locks(|s| s.release(owner, ino));
    }

    /// A read-only participant's lock call (`share/read_only_locks.rs`): a read lock is
    /// announced to the writers in the kernel first, then the region's table is read for
    /// a write lock in its way. A write lock (`flock` LOCK_EX; fcntl's is EBADF on a
    /// read-only descriptor before this) is ENOLCK: the kernel would give it only through
    /// a descriptor open for writing, which this process may not have.
    fn reader_set(
        &self,
        ro: &super::ReadOnlyMount,
        owner: Owner,
        r: &Request,
        wait: Option<&dyn Fn() -> bool>,
    ) -> Result<(), i32> {
        if r.kind == Kind::Write {
            return Err(libc::ENOLCK);
        }
        loop {
            {
                let mut pins = ro.pins.lock();
                let super::read_only::Pins { file, locks, .. } = &mut *pins;
                let f = file.as_ref().ok_or(libc::ENOLCK)?;
                if r.kind == Kind::Unlock {
                    locks.apply(f, owner, r);
                    return Ok(());
                }
                locks.mark(f)?;
                locks.announce(f, r)?;
                crate::fs::race_point::reached("read-only lock: announced");
                let in_the_way = self.inner.read_only_region().and_then(|region| {
                    let alive = |o: Owner| owner_alive(region, o);
                    lock_table::peek(region.record_locks(), owner, r, &alive)
                });
                if in_the_way.is_none() {
                    locks.apply(f, owner, r);
                    return Ok(());
                }
                locks.withdraw(f, r);
            }
            let Some(interrupted) = wait else { return Err(libc::EAGAIN) };
            if lock_table::pause(lock_table::RECHECK) && interrupted() {
                return Err(libc::EINTR);
            }
        }
    }
}

#[cfg(test)]
mod tests;
