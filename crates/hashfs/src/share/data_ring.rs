//! The ring of data changes (issue 56): which inodes' bytes participants overwrote in place,
//! which the ring of changes (`image.rs`) does not name (an overwrite changes no byte another
//! participant caches). Kept only while some participant watches it (a shared mount's
//! daemon, whose kernel caches the pages of files mapped through the mount): an overwrite
//! then claims a position with one atomic add and stores its inode there, tagged with the
//! position, so that a reader without any lock tells a slot not yet written from one a
//! later writer has lapped.

use super::participant_set::ParticipantSet;
use super::participants::Participant;
use super::region::Shared;
use crate::layout::Ino;
use std::sync::atomic::{AtomicU64, Ordering};

/// Positions the ring remembers.
pub const DATA_RING: usize = 1024;

/// One word alone on its cache line.
#[repr(C, align(64))]
pub struct LineWord {
    word: AtomicU64,
}

/// A set of participants alone on its cache line.
#[repr(C, align(64))]
pub struct LineSet {
    set: ParticipantSet,
}

/// The ring: who watches it, the next position, and the slots.
#[repr(C)]
pub struct DataRing {
    /// The participants that watch the ring.
    watchers: LineSet,
    /// The next position to claim.
    head: LineWord,
    /// Position `n`'s slot holds `(n as u32) << 32 | ino`.
    slots: [AtomicU64; DATA_RING],
}

// SAFETY: atomics only, and arrays of them.
unsafe impl Shared for LineWord {}
// SAFETY: a set of atomics.
unsafe impl Shared for LineSet {}
// SAFETY: as above.
unsafe impl Shared for DataRing {}

const _: () = assert!(std::mem::size_of::<LineSet>() == 64, "the watchers on one line");

/// What the ring says changed since a position.
pub enum DataChanges {
    /// These inodes (maybe twice), up to the position returned with them.
    Inodes(Vec<Ino>),
    /// More than the ring remembers.
    Everything,
}

impl DataRing {
    /// Whether anyone watches (an overwrite notes itself only then).
    pub fn watched(&self) -> bool {
        !self.watchers.set.is_empty()
    }

    /// An overwrite of `ino`'s bytes in place; the position it took.
    pub fn note(&self, ino: Ino) -> u64 {
        let n = self.head.word.fetch_add(1, Ordering::AcqRel);
        self.slots[(n % DATA_RING as u64) as usize].store((n & 0xFFFF_FFFF) << 32 | ino.0 as u64, Ordering::Release);
        n
    }

    /// Participant `me` watches from now on; the position to read from.
    pub fn watch(&self, me: Participant) -> u64 {
        self.watchers.set.insert(me);
        self.head()
    }

    /// The next position to be claimed (a read-only participant's start: it watches by a
    /// lock on the image file instead, `pins::WATCHES_DATA`).
    pub fn head(&self) -> u64 {
        self.head.word.load(Ordering::Acquire)
    }

    /// Participant `p` watches no more (it left, or died).
    pub fn unwatch(&self, p: Participant) {
        self.watchers.set.remove(p);
    }

    /// The overwrites from position `since` on, and the position to read from next (a
    /// slot claimed but not yet written stops the reading there, until half a ring has
    /// been written after it: its writer died between the two steps).
    pub fn since(&self, since: u64) -> (u64, DataChanges) {
        self.since_skipping(since, &|_| false)
    }

    /// [`Self::since`], leaving out the positions `skip` names (a reader's own notes).
    pub fn since_skipping(&self, since: u64, skip: &dyn Fn(u64) -> bool) -> (u64, DataChanges) {
        let head = self.head.word.load(Ordering::Acquire);
        if head.saturating_sub(since) > DATA_RING as u64 || since > head {
            return (head, DataChanges::Everything);
        }
        let mut inos = Vec::new();
        for n in since..head {
            let v = self.slots[(n % DATA_RING as u64) as usize].load(Ordering::Acquire);
            let tag = v >> 32;
            if tag == n & 0xFFFF_FFFF {
                if !skip(n) {
                    inos.push(Ino(v as u32));
                }
            } else if n >= DATA_RING as u64 && tag == (n - DATA_RING as u64) & 0xFFFF_FFFF || v == 0 {
                if head - n > DATA_RING as u64 / 2 {
                    // Half a ring written after it and this one still not: its writer died
                    // between claiming and storing. Past it, with everything changed.
                    return (head, DataChanges::Everything);
                }
                return (n, DataChanges::Inodes(inos)); // claimed, not yet written
            } else {
                return (head, DataChanges::Everything); // lapped while read
            }
        }
        (head, DataChanges::Inodes(inos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> Box<DataRing> {
        Box::new(DataRing {
            watchers: LineSet { set: ParticipantSet::new() },
            head: LineWord { word: AtomicU64::new(0) },
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
        })
    }

    fn inos(c: DataChanges) -> Vec<u32> {
        match c {
            DataChanges::Inodes(v) => v.into_iter().map(|i| i.0).collect(),
            DataChanges::Everything => panic!("everything"),
        }
    }

    /// Each overwrite is read once, in order; a reader a whole ring behind is told that
    /// anything may have changed.
    #[test]
    fn overwrites_are_read_once_and_a_lapped_reader_is_told() {
        let r = ring();
        let pos = r.watch(Participant(0));
        for i in 1..=10 {
            r.note(Ino(i));
        }
        let (next, c) = r.since(pos);
        assert_eq!(inos(c), (1..=10).collect::<Vec<_>>());
        assert_eq!(inos(r.since(next).1), Vec::<u32>::new());
        for i in 0..DATA_RING as u32 + 1 {
            r.note(Ino(i + 1));
        }
        assert!(matches!(r.since(next).1, DataChanges::Everything));
    }

    /// A position claimed and not yet written stops the reader there; once half a ring is
    /// written after it (its writer died between the two steps), the reader goes past it,
    /// told that anything may have changed.
    #[test]
    fn a_claimed_unwritten_slot_stops_the_reader_until_half_a_ring_passes_it() {
        let r = ring();
        r.note(Ino(5));
        let dead = r.head.word.fetch_add(1, Ordering::AcqRel); // claimed, never stored
        r.note(Ino(6));
        let (next, c) = r.since(0);
        assert_eq!((next, inos(c)), (dead, vec![5]), "stopped at the unwritten slot");
        for _ in 0..DATA_RING / 2 {
            r.note(Ino(7));
        }
        let (next, c) = r.since(dead);
        assert!(matches!(c, DataChanges::Everything));
        assert_eq!(next, r.head.word.load(Ordering::Acquire));
    }
}
