//! The image's record locks as a mount reaches them (`share/lock_table.rs`): on a mount
//! many processes share, the table in the image's region, with this participant's slot
//! and the region's descriptions to tell which owners are gone; on a mount of one process,
//! a table of its own in anonymous memory (no other process can reach the image); on a
//! read-only participant's, the region's table read without its lock (F_GETLK), and
//! ENOLCK for a lock it would take (it may not write the region: docs/design.md, *Trust*).

use crate::fs::FileSystem;
use crate::pm::PmDevice;
use crate::share::lock_table::{self, Conflict, LockScope, Owner, RecordLocks, Request};
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
            let scope =
                LockScope { table: region.record_locks(), me: sh.me(), who: region.participants(), alive: &alive };
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
        };
        Ok(f(&scope))
    }

    /// Whether process `pid` may hold a POSIX lock on `ino` ([`LockScope::pid_holds_any`]):
    /// false without a table (a mount of one process that never locked, a read-only
    /// participant's, which takes none).
    pub fn pid_may_hold_record_locks(&self, pid: u32, ino: crate::layout::Ino) -> bool {
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
        if self.is_read_only() {
            let Some(region) = self.inner.read_only_region() else { return Ok(None) };
            let alive = |o: Owner| owner_alive(region, o);
            return Ok(lock_table::peek(region.record_locks(), owner, r, &alive));
        }
        self.with_record_locks(|s| s.test(owner, r))
    }
}
