//! Record locks between the processes that share an image, in its shared region: `fcntl`'s
//! POSIX and OFD locks and `flock`, taken by the shim (`hashfs-preload/src/shim/locks.rs`)
//! and by a shared mount's daemon for its callers (`hashfs-fuse/src/locks.rs`), so that a
//! lock through either excludes the other. Before, each lock was the kernel's on a range of
//! the image file: a system call per lock and unlock (about 640 ns on tmpfs on the AMD host,
//! of which the call itself is 170), where this is a scan of a few entries under one word.
//!
//! The table is a fixed array of entries ([`MAX_RECORD_LOCKS`], 64 bytes each), changed
//! only under its robust lock. An entry is whole or free after every single store: its
//! fields are written while its head word is 0 (free) and the head, written last, makes it
//! valid; a removal is the head's one store. So a holder killed mid-change leaves entries
//! each of which is one it wrote or one it had not touched, and nothing to repair. A change
//! of one owner's locks adds its new entries before it removes the old ones: an interrupted
//! change leaves that owner holding at least what it held before or after (for an
//! open file description a forked process still holds, the survivor keeps its locks).
//!
//! Owners ([`Owner`]): a process for POSIX locks (its pid and start time: a lock stays
//! with the process across `execve`, as on Linux, and a reused pid is not taken for it), an
//! open file description for OFD locks and `flock` (its slot in the region's table of
//! descriptions and that slot's generation), and a lock owner of a mount's caller. An
//! entry whose owner is gone (the process ended, the description was freed) is dropped by
//! the first call that finds it in its way; a waiter looks again at least every
//! millisecond ([`RECHECK`]).
//!
//! Semantics, as Linux's lock manager: locks of one owner on one file never conflict and
//! merge with their neighbours of the same type; a lock or unlock over part of a range
//! splits it; read locks of different owners share; OFD and POSIX locks conflict with each
//! other and `flock`s only with `flock`s; a blocked POSIX waiter is told EDEADLK when its
//! wait would close a cycle of POSIX waiters (followed to [`DEADLOCK_DEPTH`] owners, as
//! Linux's `MAX_DEADLK_ITERATIONS`).

use super::descriptions::Handle;
use super::lock::{Acquired, RobustLock};
use super::participants::{Participant, Participants, MAX_PARTICIPANTS};
use super::read_only_locks::Readers;
use super::region::Shared;
use crate::layout::Ino;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Entries the table holds: locked ranges of every owner on every file.
pub const MAX_RECORD_LOCKS: usize = 4096;
/// How long a waiter sleeps before it looks for holders that are gone.
pub const RECHECK: Duration = Duration::from_millis(1);
/// Owners a deadlock check follows.
pub const DEADLOCK_DEPTH: usize = 10;
/// The end of a range that runs to the end of the file (and past it).
pub const TO_END: u64 = u64::MAX;

const VALID: u64 = 1 << 63;
const INO_MASK: u64 = 0xFFFF_FFFF;
const KIND_SHIFT: u32 = 32;
const FLOCK: u64 = 1 << 34;
const WRITE: u64 = 1 << 35;

/// Who holds a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// A process's POSIX locks: its pid and its start time (`/proc/PID/stat`).
    Process { pid: u32, start: u64 },
    /// An open file description's OFD locks and `flock`s.
    Description(Handle),
    /// A lock owner the kernel names to a mount's daemon (`owner`), served by the daemon
    /// process `pid` started at `start`.
    Mount { pid: u32, start: u64, owner: u64 },
}

impl Owner {
    fn encode(self) -> (u64, u64, u64, u64) {
        match self {
            Owner::Process { pid, start } => (1, pid.into(), start, 0),
            Owner::Description(h) => (2, h.index.into(), h.generation, 0),
            Owner::Mount { pid, start, owner } => (3, pid.into(), start, owner),
        }
    }

    fn decode(kind: u64, a: u64, b: u64, c: u64) -> Option<Owner> {
        Some(match kind {
            1 => Owner::Process { pid: a as u32, start: b },
            2 => Owner::Description(Handle { index: a as u32, generation: b }),
            3 => Owner::Mount { pid: a as u32, start: b, owner: c },
            _ => return None,
        })
    }

    /// POSIX locks' owners (processes, and a mount's callers) take part in deadlock checks.
    fn posix(self) -> bool {
        !matches!(self, Owner::Description(_))
    }
}

/// What a lock call asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
    Unlock,
}

/// A request: `kind` over bytes [start, end] of inode `ino` (`end` inclusive, [`TO_END`]
/// for "to the end of the file"), among `flock`s (whole files) or among record locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub ino: Ino,
    pub flock: bool,
    pub start: u64,
    pub end: u64,
    pub kind: Kind,
}

/// A lock in the way of a request (F_GETLK's answer): its range, whether it is a write
/// lock, and its holder's pid (-1 for an open file description's, as Linux reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub start: u64,
    pub end: u64,
    pub write: bool,
    pub pid: i32,
}

/// One locked range (64 bytes).
#[repr(C)]
pub struct Entry {
    /// 0: free. Else VALID, the inode (bits 0..32), the owner's kind (32..34), FLOCK, WRITE.
    head: AtomicU64,
    a: AtomicU64,
    b: AtomicU64,
    c: AtomicU64,
    start: AtomicU64,
    end: AtomicU64,
    /// The pid F_GETLK reports (as i32 bits).
    pid: AtomicU64,
    _pad: AtomicU64,
}

/// The table: its lock, the bound of its used entries, the word waiters sleep on, and the
/// entries.
#[repr(C)]
pub struct RecordLocks {
    lock: RobustLock,
    /// Bumped at every release: the word blocked waiters sleep on.
    released: AtomicU32,
    /// Waiters asleep (or about to be) on `released`: a release wakes them only if any.
    sleepers: AtomicU32,
    _pad: AtomicU32,
    /// Entries at and past this index are free.
    used: AtomicU64,
    _pad2: [AtomicU64; 5],
    /// What each participant's blocked POSIX waiter waits for, for the deadlock check: an
    /// entry as the lock it asks for would be (free when it waits for nothing).
    waiting: [Entry; MAX_PARTICIPANTS],
    entries: [Entry; MAX_RECORD_LOCKS],
}

// SAFETY: atomics only (RobustLock is one), and arrays of them.
unsafe impl Shared for Entry {}
// SAFETY: as above.
unsafe impl Shared for RecordLocks {}

const _: () = assert!(std::mem::size_of::<Entry>() == 64);

/// An entry's fields, read under the table's lock.
#[derive(Clone, Copy, Debug)]
struct Held {
    ino: u32,
    flock: bool,
    write: bool,
    owner: Owner,
    start: u64,
    end: u64,
    pid: i32,
}

fn head_of(ino: Ino, flock: bool, write: bool, kind: u64) -> u64 {
    VALID | u64::from(ino.0) | (kind << KIND_SHIFT) | if flock { FLOCK } else { 0 } | if write { WRITE } else { 0 }
}

impl Entry {
    fn read(&self) -> Option<Held> {
        let h = self.head.load(Ordering::Acquire);
        if h & VALID == 0 {
            return None;
        }
        let (a, b, c) =
            (self.a.load(Ordering::Relaxed), self.b.load(Ordering::Relaxed), self.c.load(Ordering::Relaxed));
        Some(Held {
            ino: (h & INO_MASK) as u32,
            flock: h & FLOCK != 0,
            write: h & WRITE != 0,
            owner: Owner::decode((h >> KIND_SHIFT) & 3, a, b, c)?,
            start: self.start.load(Ordering::Relaxed),
            end: self.end.load(Ordering::Relaxed),
            pid: self.pid.load(Ordering::Relaxed) as u32 as i32,
        })
    }

    /// Fills a free entry; its head, stored last, makes it valid.
    fn write(&self, l: &Held) {
        let (kind, a, b, c) = l.owner.encode();
        self.a.store(a, Ordering::Relaxed);
        self.b.store(b, Ordering::Relaxed);
        self.c.store(c, Ordering::Relaxed);
        self.start.store(l.start, Ordering::Relaxed);
        self.end.store(l.end, Ordering::Relaxed);
        self.pid.store(l.pid as u32 as u64, Ordering::Relaxed);
        self.head.store(head_of(Ino(l.ino), l.flock, l.write, kind), Ordering::Release);
    }
}

fn overlaps(s1: u64, e1: u64, s2: u64, e2: u64) -> bool {
    s1 <= e2 && s2 <= e1
}

/// Whether lock `h` stands in the way of `owner`'s request `r` (a lock, not an unlock):
/// another owner's, on the same file among the same kind of locks, over some of the same
/// bytes, and one of the two a write lock.
fn in_the_way(h: &Held, owner: Owner, r: &Request) -> bool {
    h.ino == r.ino.0
        && h.flock == r.flock
        && h.owner != owner
        && (r.kind == Kind::Write || h.write)
        && overlaps(h.start, h.end, r.start, r.end)
}

impl Held {
    fn conflict(&self) -> Conflict {
        Conflict { start: self.start, end: self.end, write: self.write, pid: self.pid }
    }
}

/// The table as one participant uses it: who it is, the participants (for the table's
/// robust lock), and whether an owner is still there.
pub struct LockScope<'a> {
    pub table: &'a RecordLocks,
    pub me: Participant,
    pub who: &'a Participants,
    pub alive: &'a dyn Fn(Owner) -> bool,
    /// Read-only participants' locks, which lie outside the table (`read_only_locks.rs`):
    /// a write request clears them too. None where no such participant can be (a mount of
    /// one process).
    pub readers: Option<&'a Readers<'a>>,
}

/// What [`LockScope::apply`] changed, to take back: the entries it wrote and the ones it
/// removed, with where they were. The entries written are at most three (the request's, and
/// the parts of a range of the owner's on each side of it; one owner's ranges on a file are
/// apart) but after a holder's death between a change's two halves: kept without a heap
/// allocation, which a lock call would pay for at every call.
#[derive(Default)]
struct Change {
    added: [usize; 3],
    n_added: usize,
    more: Vec<usize>,
    removed: Vec<(usize, Held)>,
}

impl Change {
    fn add(&mut self, i: usize) {
        match self.added.get_mut(self.n_added) {
            Some(slot) => {
                *slot = i;
                self.n_added += 1;
            }
            None => self.more.push(i),
        }
    }

    fn added(&self) -> impl Iterator<Item = usize> + '_ {
        self.added[..self.n_added].iter().copied().chain(self.more.iter().copied())
    }
}

impl RecordLocks {
    /// What dead participant `p` left in the table (a survivor's repair before the slot is
    /// reaped, whose index a later participant may take: as for descriptions' offset locks,
    /// `Descriptions::release_locks_of`): the table's lock if it held it (the entries are
    /// whole: nothing to repair), and the note of what its blocked waiter waited for. A
    /// waiter killed by its own process's `execve` left the note under an owner that still
    /// lives (the process keeps its POSIX locks across the exec), and the deadlock check
    /// followed it: a wait closing no cycle failed with EDEADLK.
    pub fn release_dead(&self, p: Participant) {
        self.lock.release_if_owned_by(p);
        if let Some(w) = self.waiting.get(p.0 as usize) {
            w.head.store(0, Ordering::Release);
        }
    }
}

/// The table's lock, held (released when dropped).
struct Locked<'a>(&'a RecordLocks);

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.0.lock.unlock();
    }
}

impl LockScope<'_> {
    /// Takes the table's lock and never lets go (a thread killed holding it).
    #[cfg(test)]
    pub(crate) fn hold_for_good(&self) {
        std::mem::forget(self.lock());
    }

    /// Notes that `owner` waits for `r`, as a blocked waiter does, and leaves the note (a
    /// waiter killed in its sleep).
    #[cfg(test)]
    pub(crate) fn note_waiting_for_good(&self, owner: Owner, r: &Request) {
        let _l = self.lock();
        self.note_waiting(owner, r);
    }

    fn lock(&self) -> Locked<'_> {
        // A holder killed mid-change left whole entries (module comment): nothing to repair.
        let _: Acquired = self.table.lock.lock(self.me, self.who);
        Locked(self.table)
    }

    fn used(&self) -> usize {
        (self.table.used.load(Ordering::Acquire) as usize).min(MAX_RECORD_LOCKS)
    }

    /// The entries in use, with their indexes.
    fn held(&self) -> impl Iterator<Item = (usize, Held)> + '_ {
        self.table.entries[..self.used()].iter().enumerate().filter_map(|(i, e)| e.read().map(|h| (i, h)))
    }

    /// The first entry of another owner that conflicts with `r` (a lock, not an unlock).
    fn conflict(&self, owner: Owner, r: &Request) -> Option<(usize, Held)> {
        self.held().find(|(_, h)| in_the_way(h, owner, r))
    }

    /// Drops every entry of `owner`, on inode `ino` only if given; true if any (under the
    /// table's lock).
    fn drop_owner(&self, owner: Owner, ino: Option<Ino>) -> bool {
        let mut any = false;
        for (i, h) in self.held().collect::<Vec<_>>() {
            if h.owner == owner && ino.is_none_or(|n| n.0 == h.ino) {
                self.remove(i);
                any = true;
            }
        }
        any
    }

    /// The first conflict whose owner is still there; entries of owners found gone are
    /// dropped on the way.
    fn live_conflict(&self, owner: Owner, r: &Request) -> Option<Held> {
        loop {
            let (_, h) = self.conflict(owner, r)?;
            if (self.alive)(h.owner) {
                return Some(h);
            }
            self.drop_owner(h.owner, None);
            self.released();
        }
    }

    fn remove(&self, i: usize) {
        self.table.entries[i].head.store(0, Ordering::Release);
        crate::fs::race_point::reached("lock table: an entry freed");
        let mut used = self.used();
        while used > 0 && self.table.entries[used - 1].head.load(Ordering::Acquire) == 0 {
            used -= 1;
        }
        self.table.used.store(used as u64, Ordering::Release);
    }

    /// A free entry's index (the table's bound moved past it), or None when full.
    fn free_entry(&self, skip: impl Fn(usize) -> bool) -> Option<usize> {
        let used = self.used();
        if let Some(i) = (0..used).find(|&i| self.table.entries[i].head.load(Ordering::Acquire) == 0 && !skip(i)) {
            return Some(i);
        }
        (used < MAX_RECORD_LOCKS).then_some(used)
    }

    /// Writes `l` into a free entry, one `skip` names not if another is free.
    fn insert(&self, l: &Held, skip: impl Fn(usize) -> bool) -> Option<usize> {
        let i = self.free_entry(skip).or_else(|| self.free_entry(|_| false))?;
        self.table.entries[i].write(l);
        if i >= self.used() {
            self.table.used.store(i as u64 + 1, Ordering::Release);
        }
        crate::fs::race_point::reached("lock table: an entry written");
        Some(i)
    }

    /// Tells sleeping waiters that something was let go.
    fn released(&self) {
        self.table.released.fetch_add(1, Ordering::AcqRel);
        if self.table.sleepers.load(Ordering::Acquire) != 0 {
            futex_wake_all(&self.table.released);
        }
    }

    /// Applies `r` for `owner` (no conflict left in its way): its new entries first, then
    /// the old ones it replaces go. ENOLCK when the table has no room (nothing changed).
    fn apply(&self, owner: Owner, r: &Request, pid: i32) -> Result<Change, i32> {
        let write = r.kind == Kind::Write;
        let mine = |h: &Held| h.owner == owner && h.ino == r.ino.0 && h.flock == r.flock;
        if r.kind != Kind::Unlock
            && self.held().any(|(_, h)| mine(&h) && h.write == write && h.start <= r.start && h.end >= r.end)
        {
            return Ok(Change::default()); // held already (SQLite's read lock taken again, say)
        }
        let (mut start, mut end) = (r.start, r.end);
        let mut old = Vec::new();
        let mut keep: Vec<Held> = Vec::new();
        let mut changed = false;
        let (mut same, other): (Vec<_>, Vec<_>) =
            self.held().filter(|(_, h)| mine(h)).partition(|(_, h)| r.kind != Kind::Unlock && h.write == write);
        // The owner's ranges of another type (or all, for an unlock) lose what the request
        // covers; its ranges of the same type that touch the request merge with it, each
        // merge widening what the next may touch.
        for (i, h) in other {
            if overlaps(h.start, h.end, r.start, r.end) {
                old.push((i, h));
                changed = true;
                if h.start < r.start {
                    keep.push(Held { end: r.start - 1, ..h });
                }
                if h.end > r.end {
                    keep.push(Held { start: r.end + 1, ..h });
                }
            }
        }
        while let Some(k) =
            same.iter().position(|(_, h)| h.start <= end.saturating_add(1) && start <= h.end.saturating_add(1))
        {
            let (i, h) = same.swap_remove(k);
            start = start.min(h.start);
            end = end.max(h.end);
            old.push((i, h));
        }
        if r.kind != Kind::Unlock {
            keep.push(Held { ino: r.ino.0, flock: r.flock, write, owner, start, end, pid });
        }
        // Room for every new entry before any is written: beside the old ones (which then
        // go), or, on a table too full for that, in their place (a holder killed between
        // then leaves its owner with less than it held).
        let free = (0..self.used()).filter(|&i| self.table.entries[i].head.load(Ordering::Acquire) == 0).count()
            + (MAX_RECORD_LOCKS - self.used());
        if free + old.len() < keep.len() {
            return Err(libc::ENOLCK);
        }
        let first = free < keep.len();
        if first {
            old.iter().for_each(|&(i, _)| self.remove(i));
        }
        let mut change = Change::default();
        for k in &keep {
            change.add(self.insert(k, |i| old.iter().any(|&(j, _)| j == i)).ok_or(libc::ENOLCK)?);
        }
        if !first {
            old.iter().for_each(|&(i, _)| self.remove(i));
        }
        if changed {
            self.released();
        }
        change.removed = old;
        Ok(change)
    }

    /// Takes back what [`Self::apply`] changed, in the same order: the old entries back
    /// beside the new ones (in their place on a table too full for that), then the new go.
    fn undo(&self, c: Change) {
        let free = (0..self.used()).filter(|&i| self.table.entries[i].head.load(Ordering::Acquire) == 0).count()
            + (MAX_RECORD_LOCKS - self.used());
        let first = free < c.removed.len();
        if first {
            c.added().for_each(|i| self.remove(i));
        }
        for (_, h) in &c.removed {
            let _ = self.insert(h, |i| c.added().any(|j| j == i));
        }
        if !first {
            c.added().for_each(|i| self.remove(i));
        }
        self.released();
    }

    /// Applies `r` (nothing in the table in its way) and, for a write request, clears it
    /// with the read-only participants' locks after its entries are written
    /// (`read_only_locks.rs`): false, the change taken back, when one is in the way.
    fn apply_checked(&self, owner: Owner, r: &Request, pid: i32) -> Result<bool, i32> {
        let readers = self.readers.filter(|_| r.kind == Kind::Write);
        if let Some(readers) = readers {
            readers.before_write();
        }
        crate::fs::race_point::reached("lock table: readers asked");
        let change = self.apply(owner, r, pid)?;
        crate::fs::race_point::reached("lock table: a write lock's entries written");
        let refused = change.n_added > 0 && readers.is_some_and(|readers| readers.in_the_way(r).is_some());
        if refused {
            self.undo(change);
        }
        Ok(!refused)
    }

    /// F_GETLK: the first lock of another owner in `r`'s way, if any.
    pub fn test(&self, owner: Owner, r: &Request) -> Option<Conflict> {
        if r.kind == Kind::Unlock {
            return None;
        }
        let _l = self.lock();
        if let Some(h) = self.live_conflict(owner, r) {
            return Some(h.conflict());
        }
        let readers = self.readers.filter(|_| r.kind == Kind::Write)?;
        readers.before_write();
        readers.in_the_way(r)
    }

    /// F_SETLK: takes or lets go of `r` for `owner` (`pid`: what F_GETLK reports of it),
    /// EAGAIN if another owner's lock is in the way, ENOLCK if the table is full.
    pub fn set(&self, owner: Owner, r: &Request, pid: i32) -> Result<(), i32> {
        let _l = self.lock();
        if r.kind != Kind::Unlock && self.live_conflict(owner, r).is_some() {
            return Err(libc::EAGAIN);
        }
        match self.apply_checked(owner, r, pid)? {
            true => Ok(()),
            false => Err(libc::EAGAIN),
        }
    }

    /// F_SETLKW: as [`Self::set`], waiting while another owner's lock is in the way. EDEADLK
    /// when a POSIX owner's wait would close a cycle of waiters; EINTR when the sleep was
    /// interrupted and `interrupted` says the call ends there (a handler without SA_RESTART).
    pub fn set_waiting(&self, owner: Owner, r: &Request, pid: i32, interrupted: &dyn Fn() -> bool) -> Result<(), i32> {
        loop {
            let l = self.lock();
            match (r.kind != Kind::Unlock).then(|| self.live_conflict(owner, r)).flatten() {
                None if self.apply_checked(owner, r, pid)? => return Ok(()),
                // A read-only participant's lock in the way: no cycle through it is known.
                None => {}
                Some(h) if !r.flock && owner.posix() && h.owner.posix() && self.closes_a_cycle(owner, r) => {
                    return Err(libc::EDEADLK)
                }
                Some(_) => {}
            }
            let seen = self.table.released.load(Ordering::Acquire);
            self.note_waiting(owner, r);
            self.table.sleepers.fetch_add(1, Ordering::AcqRel);
            drop(l);
            let woken = futex_wait(&self.table.released, seen, RECHECK);
            self.table.sleepers.fetch_sub(1, Ordering::AcqRel);
            {
                let _l = self.lock();
                self.table.waiting[self.me.0 as usize].head.store(0, Ordering::Release);
            }
            if woken == Woken::Interrupted && interrupted() {
                return Err(libc::EINTR);
            }
        }
    }

    fn note_waiting(&self, owner: Owner, r: &Request) {
        let Some(w) = self.table.waiting.get(self.me.0 as usize) else { return };
        w.head.store(0, Ordering::Release);
        let write = r.kind == Kind::Write;
        w.write(&Held { ino: r.ino.0, flock: r.flock, write, owner, start: r.start, end: r.end, pid: 0 });
    }

    /// What POSIX owner `o` waits for, if it is blocked for a record lock (a `flock` wait,
    /// which a mount's owner may make, is no part of a deadlock: under the table's lock).
    fn waits_for(&self, o: Owner) -> Option<Request> {
        self.table.waiting.iter().filter_map(Entry::read).find(|w| w.owner == o && !w.flock).map(|w| Request {
            ino: Ino(w.ino),
            flock: w.flock,
            start: w.start,
            end: w.end,
            kind: if w.write { Kind::Write } else { Kind::Read },
        })
    }

    /// Whether `owner` waiting for `r` closes a cycle: a holder in its way waits (for a
    /// lock whose holder waits...) for a lock `owner` holds.
    fn closes_a_cycle(&self, owner: Owner, r: &Request) -> bool {
        let mut seen = vec![owner];
        let mut next: Vec<Owner> = self.blockers(owner, r);
        for _ in 0..DEADLOCK_DEPTH {
            if next.contains(&owner) {
                return true;
            }
            let mut after = Vec::new();
            for b in next {
                if seen.contains(&b) || !b.posix() || !(self.alive)(b) {
                    continue;
                }
                seen.push(b);
                if let Some(wr) = self.waits_for(b) {
                    after.extend(self.blockers(b, &wr));
                }
            }
            if after.is_empty() {
                return false;
            }
            next = after;
        }
        false
    }

    /// The owners of the locks in `r`'s way for `owner`.
    fn blockers(&self, owner: Owner, r: &Request) -> Vec<Owner> {
        let mut v: Vec<Owner> = self.held().filter(|(_, h)| in_the_way(h, owner, r)).map(|(_, h)| h.owner).collect();
        v.dedup();
        v
    }

    /// Drops `owner`'s locks, on inode `ino` only if given (a POSIX close: every lock the
    /// process holds on the file; the last close of a description: its OFD locks and
    /// `flock`; a process's exit: all of them).
    pub fn release(&self, owner: Owner, ino: Option<Ino>) {
        let _l = self.lock();
        if self.drop_owner(owner, ino) {
            self.released();
        }
    }

    /// Whether a process numbered `pid` holds a POSIX lock on `ino`, read without the
    /// table's lock and without the process's start time: a close asks this first, so that
    /// a process that never locked reads no `/proc` and takes no lock at its closes (a
    /// gone process's entry under a reused pid only sends it to [`Self::release`], which
    /// matches the start time too).
    pub fn pid_holds_any(&self, pid: u32, ino: Ino) -> bool {
        self.held().any(|(_, h)| matches!(h.owner, Owner::Process { pid: p, .. } if p == pid) && h.ino == ino.0)
    }

    /// Entries in use (for `hashfs info` and tests).
    pub fn in_use(&self) -> usize {
        self.held().count()
    }
}

/// F_GETLK without the table's lock (a read-only participant, which may not store to the
/// region): the first entry of a live owner in `r`'s way, each entry read whole.
pub fn peek(table: &RecordLocks, owner: Owner, r: &Request, alive: &dyn Fn(Owner) -> bool) -> Option<Conflict> {
    if r.kind == Kind::Unlock {
        return None;
    }
    let used = (table.used.load(Ordering::Acquire) as usize).min(MAX_RECORD_LOCKS);
    table.entries[..used]
        .iter()
        .filter_map(Entry::read)
        .find(|h| in_the_way(h, owner, r) && alive(h.owner))
        .map(|h| h.conflict())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Woken {
    Other,
    Interrupted,
}

fn futex_wait(word: &AtomicU32, expected: u32, max: Duration) -> Woken {
    let ts = libc::timespec { tv_sec: max.as_secs() as libc::time_t, tv_nsec: max.subsec_nanos() as libc::c_long };
    // SAFETY: FUTEX_WAIT (shared: the word lies in a mapping other processes share) on a
    // live atomic; the kernel reads the word and the timeout only.
    let r = unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, &ts as *const libc::timespec)
    };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
        Woken::Interrupted
    } else {
        Woken::Other
    }
}

/// Sleeps `d` (a read-only participant's wait, which cannot tell the table it sleeps);
/// true when a signal cut the sleep short.
pub fn pause(d: Duration) -> bool {
    let ts = libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long };
    // SAFETY: a valid timespec; no remainder asked for.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) != 0 }
}

fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live atomic; the kernel only wakes its sleepers.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
}

/// Whether a signal handler that interrupts a wait ends the call with EINTR: Linux restarts
/// F_SETLKW and `flock` after a handler installed with SA_RESTART, and ends them after one
/// without. Which signal came is not known here, so the call ends if any handler of a
/// signal that can come from outside lacks it (a fault's handler, SIGSEGV's say, cannot
/// interrupt a sleep).
pub fn a_handler_interrupts() -> bool {
    const FAULTS: [i32; 6] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGTRAP, libc::SIGSYS];
    (1..libc::SIGRTMAX()).filter(|s| !FAULTS.contains(s)).any(|sig| {
        // SAFETY: a plain C struct, valid zeroed.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a query of the disposition into our struct; nothing is changed.
        let ok = unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } == 0;
        ok && old.sa_sigaction != libc::SIG_DFL
            && old.sa_sigaction != libc::SIG_IGN
            && old.sa_flags & libc::SA_RESTART == 0
    })
}

/// This process (`pid`: its pid, which the caller keeps) as the owner of its POSIX locks:
/// its pid and start time (read again in a forked child, whose pid differs).
pub fn this_process(pid: u32) -> Option<Owner> {
    static PID: AtomicU64 = AtomicU64::new(0);
    static START: AtomicU64 = AtomicU64::new(0);
    if PID.load(Ordering::Acquire) != u64::from(pid) {
        START.store(super::start_time(pid)?, Ordering::Release);
        PID.store(pid.into(), Ordering::Release);
    }
    Some(Owner::Process { pid, start: START.load(Ordering::Acquire) })
}

/// Whether process `pid` started at `start` still runs, asked at most once a
/// millisecond per owner in a process (a refused lock asked again and again reads
/// `/proc` once a millisecond, not at every call).
pub fn process_alive_cached(pid: u32, start: u64) -> bool {
    use std::sync::Mutex;
    use std::time::Instant;
    static SEEN: Mutex<Vec<(u32, u64, Instant)>> = Mutex::new(Vec::new());
    if pid == std::process::id() {
        return true;
    }
    let now = Instant::now();
    // Never waited for (a fork while another thread held it would leave the child's copy
    // taken): busy, the process is asked directly.
    let Ok(mut seen) = SEEN.try_lock() else { return super::process_alive(pid, start) };
    seen.retain(|&(_, _, t)| now.duration_since(t) < RECHECK);
    if seen.iter().any(|&(p, s, _)| p == pid && s == start) {
        return true;
    }
    drop(seen);
    let alive = super::process_alive(pid, start);
    if alive {
        if let Ok(mut seen) = SEEN.try_lock() {
            if seen.len() < 64 {
                seen.push((pid, start, now));
            }
        }
    }
    alive
}

#[cfg(test)]
mod tests;
