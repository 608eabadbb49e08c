//! Open file descriptions in the shared region: what Linux keeps per `open` (the file,
//! the offset, the status flags) and shares between the descriptors `dup` makes and those
//! a forked child or an exec'd program inherits (docs/design.md, "Descriptors across fork
//! and exec").
//!
//! A description is held by participants, not counted: its `holders` set has participant
//! `i` in it while `i` has a descriptor of it (how many, and which numbers, the process
//! keeps to itself). So a process that dies holding descriptions leaves nothing to count:
//! a survivor clears its bit in every description ([`Descriptions::release_all_of`]) and
//! those it was the last holder of are free. A fork cannot set the child's bit before the
//! child is a participant, so the parent first counts the fork in `forks` (a description
//! with forks pending is not freed), and the child turns that count into its bit.
//!
//! The offset is changed under the description's lock (the kernel's `f_pos_lock`), so that
//! two processes reading or writing through one description never use one offset twice;
//! the lock is robust ([`RobustLock`]): a holder killed mid-update leaves the offset at a
//! value it had (one word), and the next user takes the lock over.

use super::lock::{Acquired, RobustLock};
use super::participant_set::{HoldCounts, ParticipantSet};
use super::participants::{Participant, Participants};
use super::region::Shared;
use crate::layout::Ino;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Descriptions a region holds at once.
pub const MAX_DESCRIPTIONS: usize = 4096;

/// One open file description (64 bytes).
#[repr(C)]
pub struct Description {
    /// The participants that hold it. Empty: free.
    holders: ParticipantSet,
    /// Forks counted by a holder whose children have not taken their bit yet.
    forks: AtomicU32,
    lock: RobustLock,
    /// Bumped at each allocation: a name that carries it (an exec'd program's) is told
    /// apart from a later description in the same slot.
    generation: AtomicU64,
    ino: AtomicU32,
    /// The status flags (`O_APPEND`, `O_NONBLOCK`, the access mode, ...).
    flags: AtomicU32,
    offset: AtomicU64,
}

// SAFETY: atomics only (RobustLock is one).
unsafe impl Shared for Description {}

const _: () = assert!(std::mem::size_of::<Description>() == 64);

/// The table.
#[repr(C)]
pub struct Descriptions {
    slots: [Description; MAX_DESCRIPTIONS],
    /// How many descriptions each participant holds (a leave with none passes over the
    /// table's 256 KiB).
    held: HoldCounts,
}

// SAFETY: an array of Shared.
unsafe impl Shared for Descriptions {}

/// A description as one process names it: its slot and the generation it had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle {
    pub index: u32,
    pub generation: u64,
}

/// How the name of a descriptor handed over to another program starts (the shim names a
/// memfd so, `hashfs-preload/src/shim/exec.rs`).
const HANDED: &str = "hashfs-ofd-";

impl Handle {
    /// The name that carries this description to the program an exec or spawn starts,
    /// with the spawn's ticket if it took one (`hashfs-ofd-I-G` or `hashfs-ofd-I-G-tT`:
    /// the ticket travels with every descriptor handed over, so a program that finds any
    /// finds it, and one whose descriptors were all closed before it started adopts
    /// nothing and leaves the ticket's count to its reaper).
    pub fn handed_name(self, ticket: Option<u32>) -> String {
        let ticket = ticket.map_or(String::new(), |t| format!("-t{t}"));
        format!("{HANDED}{}-{}{ticket}", self.index, self.generation)
    }

    /// The description and ticket a name made by [`Self::handed_name`] carries.
    pub fn from_handed_name(name: &str) -> Option<(Handle, Option<u32>)> {
        let mut parts = name.strip_prefix(HANDED)?.split('-');
        let h = Handle { index: parts.next()?.parse().ok()?, generation: parts.next()?.parse().ok()? };
        let ticket = match parts.next() {
            Some(t) => Some(t.strip_prefix('t')?.parse().ok()?),
            None => None,
        };
        parts.next().is_none().then_some((h, ticket))
    }
}

impl Descriptions {
    /// Allocates a description of inode `ino` held by participant `me`; None when every
    /// slot is taken (the caller's ENFILE).
    pub fn open(&self, me: Participant, ino: Ino, flags: u32, offset: u64) -> Option<Handle> {
        for (i, d) in self.slots.iter().enumerate() {
            if d.held() {
                continue;
            }
            self.held.up(me);
            crate::fs::race_point::reached("descriptions: a hold counted");
            if !d.holders.try_claim(me) {
                self.held.down(me);
                continue;
            }
            if d.forks.load(Ordering::SeqCst) != 0 {
                // A fork counted on the previous description of the slot, whose holder
                // died before it could release: leave it to that fork's child.
                d.holders.remove(me);
                self.held.down(me);
                continue;
            }
            let generation = d.generation.fetch_add(1, Ordering::AcqRel) + 1;
            d.ino.store(ino.0, Ordering::Relaxed);
            d.offset.store(offset, Ordering::Relaxed);
            d.flags.store(flags, Ordering::Release);
            return Some(Handle { index: i as u32, generation });
        }
        None
    }

    /// The description `h` names, if it is still that one and held.
    pub fn get(&self, h: Handle) -> Option<&Description> {
        let d = self.slots.get(h.index as usize)?;
        (d.held() && d.generation.load(Ordering::Acquire) == h.generation).then_some(d)
    }

    /// Participant `me` no longer holds `h` (its last descriptor of it closed); the
    /// description is free when no one does. True when `me` was its last holder (no other
    /// participant holds it, and no fork is pending on it): two holders letting go at once
    /// may both be told so (`participant_set.rs`), never neither; the caller's work for the
    /// last holder (its OFD locks' release) may run twice. The pending forks are read
    /// first: a child takes its bit before it uncounts its fork ([`Self::adopt`]), so a
    /// count read as 0 after the child's uncounting comes with the child's bit seen
    /// (read after, the count could be the child's 0 while the bits read were from before
    /// its adoption, and a parent closing its copy right after the fork took the child's
    /// description for its own last).
    pub fn release(&self, h: Handle, me: Participant) -> bool {
        let Some(d) = self.get(h) else { return false };
        let forks = d.forks.load(Ordering::SeqCst);
        if d.holders.remove(me) {
            self.held.down(me);
        }
        forks == 0 && d.holders.is_empty()
    }

    /// Counts a fork on `h` (in the parent, before `fork`): the description stays
    /// allocated until the child takes its bit ([`Self::adopt`]) or the fork is undone
    /// ([`Self::fork_failed`]).
    pub fn count_fork(&self, h: Handle) -> bool {
        match self.get(h) {
            Some(d) => {
                d.forks.fetch_add(1, Ordering::AcqRel);
                true
            }
            None => false,
        }
    }

    /// In the child, as participant `me`: takes its bit on `h`, whose fork was counted.
    pub fn adopt(&self, h: Handle, me: Participant) {
        let d = &self.slots[h.index as usize];
        self.held.up(me);
        crate::fs::race_point::reached("descriptions: a hold counted");
        if d.holders.insert(me) {
            self.held.down(me); // it held it already
        }
        // Never below zero: an exec'd program adopts what a mount may have found uncounted.
        let _ = d.forks.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// As [`Self::adopt`], unless participant `p` holds `h` already: a fork's parent adopts
    /// what it counted for its child's slot, and a child whose parent died before it had
    /// adopts what is left (under the image lock, both).
    pub fn adopt_once(&self, h: Handle, p: Participant) {
        let d = &self.slots[h.index as usize];
        if !d.holders.contains(p) {
            self.adopt(h, p);
        }
    }

    /// In the parent, when `fork` failed: the count [`Self::count_fork`] made is undone.
    pub fn fork_failed(&self, h: Handle) {
        self.slots[h.index as usize].forks.fetch_sub(1, Ordering::AcqRel);
    }

    /// Clears dead participant `dead`'s bit in every description (a survivor's repair,
    /// before the participant's slot is reaped; a participant's own at its leave); returns
    /// how many it held. Only `dead` sets its bit: a word without it is passed by a load
    /// (as `OpenInodes::release_all_of`).
    pub fn release_all_of(&self, dead: Participant) -> usize {
        if self.held.none(dead) {
            return 0;
        }
        let n = self.slots.iter().filter(|d| d.holders.remove_if_in(dead)).count();
        self.held.reset(dead);
        n
    }

    /// Frees every description's offset lock that dead participant `dead` holds (a survivor's
    /// repair, before the slot is reaped): a thread of a program killed by its own process's
    /// `execve` while it read or wrote through a description (a pump) left the lock taken,
    /// and once the slot is reaped a later participant can take its index, which would own
    /// the lock for good (the next user waited for ever). The offset is one the holder
    /// stored, nothing to repair.
    pub fn release_locks_of(&self, dead: Participant) {
        for d in &self.slots {
            d.lock.release_if_owned_by(dead);
        }
    }

    /// Whether participant `p` holds any description.
    pub fn any_held_by(&self, p: Participant) -> bool {
        !self.held.none(p) && self.slots.iter().any(|d| d.holders.contains(p))
    }

    /// Whether a description of `ino` is allocated for another participant than `me`: held
    /// by one, or by a fork, exec or spawn whose child or program has not taken it over (a
    /// scan of the table: for the last close of an unlinked file while a child or program
    /// is on its way, `FsInner::open_elsewhere`).
    pub fn any_of(&self, ino: Ino, me: Participant) -> bool {
        self.slots.iter().any(|d| {
            (d.holders.any_but(Some(me)) || d.forks.load(Ordering::Acquire) != 0)
                && d.ino.load(Ordering::Acquire) == ino.0
        })
    }

    /// How many descriptions are allocated.
    pub fn in_use(&self) -> usize {
        self.slots.iter().filter(|d| d.held()).count()
    }
}

impl Description {
    /// Allocated: held by a participant, or by a fork not adopted yet.
    fn held(&self) -> bool {
        !self.holders.is_empty() || self.forks.load(Ordering::SeqCst) != 0
    }

    pub fn ino(&self) -> Ino {
        Ino(self.ino.load(Ordering::Acquire))
    }

    pub fn flags(&self) -> u32 {
        self.flags.load(Ordering::Acquire)
    }

    /// `fcntl(F_SETFL)`: every descriptor of the description sees the new flags.
    pub fn set_flags(&self, flags: u32) {
        self.flags.store(flags, Ordering::Release);
    }

    pub fn offset(&self) -> u64 {
        self.offset.load(Ordering::Acquire)
    }

    /// Runs `f` with the offset under the description's lock (as participant `me`): `f`
    /// gets the offset and returns the new one and its result. Two processes reading or
    /// writing through one description so never use one offset twice.
    pub fn with_offset<R>(&self, me: Participant, who: &Participants, f: impl FnOnce(u64) -> (u64, R)) -> R {
        let mut held = self.lock_offset(me, who);
        let (next, r) = f(held.get());
        held.set(next);
        r
    }

    /// Takes the description's lock (as participant `me`) until the guard is dropped,
    /// also when the holder panics. A dead holder's update is one store: the offset is
    /// one it had, nothing to repair.
    pub fn lock_offset<'a>(&'a self, me: Participant, who: &Participants) -> OffsetGuard<'a> {
        let _: Acquired = self.lock.lock(me, who);
        OffsetGuard { d: self }
    }
}

/// A description's offset, held under its lock ([`Description::lock_offset`]).
pub struct OffsetGuard<'a> {
    d: &'a Description,
}

impl OffsetGuard<'_> {
    pub fn get(&self) -> u64 {
        self.d.offset.load(Ordering::Acquire)
    }

    pub fn set(&mut self, offset: u64) {
        self.d.offset.store(offset, Ordering::Release);
    }
}

impl Drop for OffsetGuard<'_> {
    fn drop(&mut self) {
        self.d.lock.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table in memory of its own (zeroed: every slot free).
    fn region() -> crate::share::Region {
        crate::share::Region::anonymous(std::mem::size_of::<Descriptions>()).unwrap()
    }

    /// A participant killed between counting a description and taking its bit (an open,
    /// and a fork's adoption) leaves no bit its leave or its reaper would pass over: each
    /// skips the table when the count is 0.
    #[test]
    fn a_holder_killed_between_its_count_and_its_bit_leaves_no_hold_unseen() {
        let r = region();
        let t = r.at::<Descriptions>(0);
        let (a, b) = (Participant(1), Participant(130));
        let h = t.open(b, Ino(5), 0, 0).unwrap();
        assert!(t.count_fork(h));
        let killed_at = |f: &dyn Fn()| {
            let hook = crate::fs::race_point::on_this_thread(|name| {
                if name == "descriptions: a hold counted" {
                    panic!("killed at {name}");
                }
            });
            let killed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            drop(hook);
            assert!(killed.is_err(), "the point was not reached");
        };
        let reaped = |what: &str| {
            assert_eq!(t.release_all_of(a), 0, "{what}: the dead one held nothing yet");
            assert!(!t.slots.iter().any(|d| d.holders.contains(a)), "{what}: a hold of the dead one is left");
            assert!(t.held.none(a));
        };
        killed_at(&|| {
            t.open(a, Ino(6), 0, 0);
        });
        reaped("an open");
        killed_at(&|| t.adopt(h, a));
        reaped("an adoption");
        assert!(t.get(h).is_some() && !t.release(h, b), "the fork's count stays for its child");
    }

    /// The names of descriptors handed over carry their description and the spawn's ticket
    /// to the program (`fs/shared/fork.rs`); anything else is no such name.
    #[test]
    fn a_handed_name_carries_the_description_and_the_ticket() {
        let h = Handle { index: 4095, generation: u64::MAX };
        for ticket in [None, Some(0), Some(63)] {
            assert_eq!(Handle::from_handed_name(&h.handed_name(ticket)), Some((h, ticket)));
        }
        for junk in ["hashfs-ofd-1", "hashfs-ofd-1-2-3", "hashfs-ofd-1-2-t", "hashfs-cwd", "hashfs-ofd-1-2-t3-4"] {
            assert_eq!(Handle::from_handed_name(junk), None, "{junk}");
        }
    }
}
