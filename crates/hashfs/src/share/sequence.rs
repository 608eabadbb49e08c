//! The image lock's sequence (`ImageWords::writing`): odd while a participant holds the
//! image lock, one more at each acquisition and release, so that a read-only participant,
//! which may take no lock, can tell whether a call of its own ran beside a change
//! (`fs/shared/read_only.rs`). Written once over any word ([`SeqWord`]): the region's, and
//! loom's in its model (`tests/lock_model.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

/// What the protocol needs of its word.
pub trait SeqWord {
    fn load(&self, order: Ordering) -> u64;
    fn store(&self, value: u64, order: Ordering);
    fn fetch_add(&self, value: u64, order: Ordering) -> u64;
    /// A sequentially consistent fence.
    fn fence(&self);
}

impl SeqWord for AtomicU64 {
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    fn store(&self, value: u64, order: Ordering) {
        AtomicU64::store(self, value, order)
    }
    fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
        AtomicU64::fetch_add(self, value, order)
    }
    fn fence(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
    }
}

/// The image lock's new holder: the sequence odd (already odd when a dead holder left it
/// so) before any store of its call.
pub fn hold(w: &impl SeqWord) {
    let s = w.load(Ordering::Relaxed);
    if s.is_multiple_of(2) {
        w.store(s + 1, Ordering::Relaxed);
    }
    // No store of the holder's is seen before the odd sequence (a reader's fence in
    // `unchanged` pairs with this one).
    w.fence();
}

/// The holder lets go: the sequence even again, after every store of its call. Returns
/// what it was (odd).
pub fn release(w: &impl SeqWord) -> u64 {
    w.fetch_add(1, Ordering::Release)
}

/// A reader's start: the sequence if even (no holder), None while a participant holds the
/// lock.
pub fn even(w: &impl SeqWord) -> Option<u64> {
    let s = w.load(Ordering::Acquire);
    s.is_multiple_of(2).then_some(s)
}

/// A reader's end: whether the sequence is still `s` (its start's), so that no holder
/// changed anything while it read.
pub fn unchanged(w: &impl SeqWord, s: u64) -> bool {
    w.fence();
    w.load(Ordering::Relaxed) == s
}
