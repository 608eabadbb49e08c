//! A set of participants in the shared region, a bit each over [`SET_WORDS`] words: who
//! has an inode open and how it maps it (`image.rs`), who holds an open file description
//! (`descriptions.rs`), who watches the ring of overwrites (`data_ring.rs`).
//!
//! Each participant changes only its own bit (a survivor clears a dead one's), by one
//! read-modify-write of its word. A question about the others ("is anyone else in it?")
//! reads the words one by one, so it is not one atomic snapshot: every operation here is
//! sequentially consistent, so that of two participants each removing itself and then
//! looking at the other's word, at least one sees the other gone (the store-buffering
//! pair, with a fence between each one's change and its reads: loom checks fences, not
//! sequentially consistent accesses, `tests/set_model.rs`). Neither then thinks the other still holds what both let go of; both may find
//! themselves the last, which the callers allow (`descriptions.rs`: the last holder's work
//! is idempotent). Where the last holder's work may run once only (`OpenInodes`), the
//! set is changed under the image lock.

use super::participants::{Participant, MAX_PARTICIPANTS};
use super::region::Shared;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, Ordering::SeqCst};

/// Words of a set.
pub const SET_WORDS: usize = MAX_PARTICIPANTS.div_ceil(64);

/// A set in shared memory.
#[repr(C)]
pub struct ParticipantSet {
    words: [AtomicU64; SET_WORDS],
}

// SAFETY: an array of atomics.
unsafe impl Shared for ParticipantSet {}

/// A set as read: a value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Members([u64; SET_WORDS]);

fn place(p: Participant) -> (usize, u64) {
    ((p.0 / 64) as usize, 1u64 << (p.0 % 64))
}

/// A word of a set: the region's atomics, or loom's in its model (`tests/lock_model.rs`).
pub trait SetWord {
    fn load(&self, order: Ordering) -> u64;
    fn fetch_and(&self, value: u64, order: Ordering) -> u64;
    fn compare_exchange(&self, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64>;
    /// A sequentially consistent fence: between a participant's change of its own word
    /// and its reads of the others (the store-buffering pair).
    fn fence(&self);
}

impl SetWord for AtomicU64 {
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    fn fetch_and(&self, value: u64, order: Ordering) -> u64 {
        AtomicU64::fetch_and(self, value, order)
    }
    fn compare_exchange(&self, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64> {
        AtomicU64::compare_exchange(self, current, new, success, failure)
    }
    fn fence(&self) {
        std::sync::atomic::fence(SeqCst);
    }
}

/// Whether no word has a member.
pub fn is_empty<W: SetWord>(words: &[W]) -> bool {
    words.iter().all(|w| w.load(SeqCst) == 0)
}

/// Takes `p` out of the set; whether it was in. A fence after: what the caller reads of
/// the set next (whether it was the last) is read after its own word changed.
pub fn remove<W: SetWord>(words: &[W], p: Participant) -> bool {
    let (w, bit) = place(p);
    let was = words[w].fetch_and(!bit, SeqCst) & bit != 0;
    words[w].fence();
    was
}

/// Takes an empty set for `p` ([`ParticipantSet::try_claim`]).
pub fn try_claim<W: SetWord>(words: &[W], p: Participant) -> bool {
    let (w, bit) = place(p);
    if words[w].compare_exchange(0, bit, SeqCst, SeqCst).is_err() {
        return false;
    }
    words[w].fence();
    if words.iter().enumerate().all(|(i, word)| i == w || word.load(SeqCst) == 0) {
        return true;
    }
    words[w].fetch_and(!bit, SeqCst);
    false
}

impl ParticipantSet {
    pub const fn new() -> ParticipantSet {
        ParticipantSet { words: [const { AtomicU64::new(0) }; SET_WORDS] }
    }

    /// Adds `p`; whether it was in already.
    pub fn insert(&self, p: Participant) -> bool {
        let (w, bit) = place(p);
        self.words[w].fetch_or(bit, SeqCst) & bit != 0
    }

    /// Takes `p` out; whether it was in.
    pub fn remove(&self, p: Participant) -> bool {
        remove(&self.words, p)
    }

    /// Takes `p` out if it is in (a load first: a word without its bit is not written, so
    /// a look for one participant through a table dirties no line it does not change).
    pub fn remove_if_in(&self, p: Participant) -> bool {
        self.contains(p) && self.remove(p)
    }

    pub fn contains(&self, p: Participant) -> bool {
        let (w, bit) = place(p);
        self.words[w].load(SeqCst) & bit != 0
    }

    /// The members, word by word.
    pub fn load(&self) -> Members {
        Members(std::array::from_fn(|w| self.words[w].load(SeqCst)))
    }

    pub fn is_empty(&self) -> bool {
        is_empty(&self.words)
    }

    /// Whether a member other than `me` (any, for None) is in.
    pub fn any_but(&self, me: Option<Participant>) -> bool {
        self.load().without(me).any()
    }

    /// Makes `p` the only member (a slot taken by its first holder, under the lock that
    /// orders its changes).
    pub fn set_only(&self, p: Participant) {
        let (w, bit) = place(p);
        for (i, word) in self.words.iter().enumerate() {
            word.store(if i == w { bit } else { 0 }, SeqCst);
        }
    }

    /// Empties the set.
    pub fn clear(&self) {
        for w in &self.words {
            w.store(0, SeqCst);
        }
    }

    /// Takes an empty set for `p`: true when `p` is its only member now. Its word is
    /// claimed from 0 and the others read after; a claim that finds another member there
    /// (one claiming in another word at once) is undone, so two claimers never both
    /// succeed (each reads the other's word after its own claim: at least one sees the
    /// other), though both may fail.
    pub fn try_claim(&self, p: Participant) -> bool {
        try_claim(&self.words, p)
    }
}

impl Default for ParticipantSet {
    fn default() -> ParticipantSet {
        ParticipantSet::new()
    }
}

/// How many entries of a table (open inodes, descriptions) each participant holds, or
/// more: a hold is counted up before its bit is set and down after it is cleared, so a
/// participant killed between the two leaves its count high, never below its bits. One
/// whose count is 0 holds nothing there, and its leave (or its reaper) need not look
/// through the table, whose pages a short-lived process would otherwise fault in only to
/// find nothing.
#[repr(C)]
pub struct HoldCounts {
    counts: [AtomicU32; MAX_PARTICIPANTS],
}

// SAFETY: an array of atomics.
unsafe impl Shared for HoldCounts {}

impl HoldCounts {
    /// Every participant at 0 (the region's are its zeroed memory; this for tables built
    /// in memory of their own).
    pub fn new() -> HoldCounts {
        HoldCounts { counts: std::array::from_fn(|_| AtomicU32::new(0)) }
    }

    /// A hold of `p`'s is about to be set.
    pub fn up(&self, p: Participant) {
        self.counts[p.0 as usize].fetch_add(1, Ordering::AcqRel);
    }

    /// A hold of `p`'s was cleared (or was not set after all).
    pub fn down(&self, p: Participant) {
        let _ = self.counts[p.0 as usize].fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Whether `p` holds nothing in the table.
    pub fn none(&self, p: Participant) -> bool {
        self.counts[p.0 as usize].load(Ordering::Acquire) == 0
    }

    /// `p`'s holds were all cleared by a look through the table (a count a death left
    /// high, too).
    pub fn reset(&self, p: Participant) {
        self.counts[p.0 as usize].store(0, Ordering::Release);
    }
}

impl Default for HoldCounts {
    fn default() -> HoldCounts {
        HoldCounts::new()
    }
}

impl Members {
    pub fn any(&self) -> bool {
        self.0.iter().any(|&w| w != 0)
    }

    pub fn contains(&self, p: Participant) -> bool {
        let (w, bit) = place(p);
        self.0[w] & bit != 0
    }

    /// The members but `me` (all of them, for None).
    pub fn without(mut self, me: Option<Participant>) -> Members {
        if let Some(p) = me {
            let (w, bit) = place(p);
            self.0[w] &= !bit;
        }
        self
    }

    /// The members, in order.
    pub fn iter(self) -> impl Iterator<Item = Participant> {
        (0..SET_WORDS).flat_map(move |w| {
            let word = self.0[w];
            (0..64u32).filter(move |b| word & (1u64 << b) != 0).map(move |b| Participant(w as u32 * 64 + b))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Members in every word are kept apart; a claim needs the whole set empty.
    #[test]
    fn members_in_every_word() {
        let s = ParticipantSet::new();
        let (a, b, last) = (Participant(3), Participant(64 + 5), Participant(MAX_PARTICIPANTS as u32 - 1));
        assert!(s.is_empty() && s.try_claim(b) && !s.is_empty());
        assert!(!s.try_claim(a), "b is in");
        assert!(!s.any_but(Some(b)) && s.any_but(Some(a)) && s.any_but(None));
        assert!(!s.insert(last) && s.insert(last));
        assert_eq!(s.load().iter().collect::<Vec<_>>(), vec![b, last]);
        assert!(s.remove(b) && !s.remove(b) && !s.remove_if_in(a));
        assert!(s.any_but(Some(b)) && !s.any_but(Some(last)));
        assert!(!s.try_claim(a), "last is in, in another word");
        assert!(s.contains(last) && !s.contains(a), "the failed claim was undone");
        s.set_only(a);
        assert_eq!(s.load().iter().collect::<Vec<_>>(), vec![a]);
        s.clear();
        assert!(s.is_empty());
    }

    /// Two participants in different words claiming one empty set at once: never both.
    #[test]
    fn two_claims_in_different_words_never_both_succeed() {
        for _ in 0..2000 {
            let s = ParticipantSet::new();
            let won = std::thread::scope(|t| {
                let x = t.spawn(|| s.try_claim(Participant(1)));
                let y = t.spawn(|| s.try_claim(Participant(200)));
                [x.join().unwrap(), y.join().unwrap()]
            });
            assert!(!(won[0] && won[1]), "both claimed the set");
            assert_eq!(s.load().iter().count(), won.iter().filter(|&&w| w).count());
        }
    }
}
