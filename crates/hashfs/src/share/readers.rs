//! The image lock's read side (docs/design.md, "Many processes on one image"): calls that
//! change nothing the others cache (a read, an overwrite of a file's mapped blocks inside
//! its size) run in several participants at once, and a call that changes the image
//! (holding the image lock, `lock.rs`) runs alone.
//!
//! Each participant has a count of its threads inside a read-side call, on a cache line
//! of its own. A reader adds one to its count and then looks at the image lock's word: if
//! no one holds it, it goes on; else it takes its one back and waits for the lock as a
//! writer would (then it joins the readers while it holds the lock, and lets go). A
//! writer takes the lock, then waits until every participant's count is zero. Both sides
//! put a sequentially consistent fence between their store and their load (a Dekker
//! pair), so at least one of them sees the other: a reader never goes on while a writer
//! that saw no reader goes on too. A participant killed inside a read-side call leaves its
//! count: a draining writer that finds it dead sets it to zero (its slot cannot be reused
//! meanwhile: slots are reaped only under the image lock, which the writer holds).
//!
//! The protocol is written once over any word ([`LockWord`]): the region's, and loom's in
//! its model (`tests/lock_model.rs`).

use super::lock::{LockWord, WAITERS};
use super::participants::{Participant, MAX_PARTICIPANTS};
use super::region::Shared;
use std::sync::atomic::{AtomicU32, Ordering};

/// One participant's count of threads inside read-side calls, alone on its cache line (a
/// reader's two updates per call must not take a line another process's reader updates).
#[repr(C, align(64))]
pub struct ReadCount {
    count: AtomicU32,
}

/// Every participant's read count, and how many slots have ever been taken.
#[repr(C)]
pub struct Readers {
    /// The highest participant slot ever taken, plus one (a writer drains the counts
    /// below it).
    high: ReadCount,
    counts: [ReadCount; MAX_PARTICIPANTS],
}

// SAFETY: an atomic, and an array of them.
unsafe impl Shared for ReadCount {}
// SAFETY: an array of Shared.
unsafe impl Shared for Readers {}

impl Readers {
    /// Participant `me` tries to enter a read-side call while `lock` (the image lock's
    /// word) is free; false when a writer holds it (nothing was changed then).
    pub fn try_enter(&self, lock: &AtomicU32, me: Participant) -> bool {
        try_enter(lock, &self.counts[me.0 as usize].count)
    }

    /// Participant `me`, holding the image lock, joins the readers (before it lets go of
    /// the lock: a downgrade).
    pub fn enter_holding(&self, me: Participant) {
        self.counts[me.0 as usize].count.fetch_add(1, Ordering::Relaxed);
    }

    /// Participant `me` leaves a read-side call.
    pub fn leave(&self, lock: &AtomicU32, me: Participant) {
        leave(lock, &self.counts[me.0 as usize].count)
    }

    /// Participant `me` took its slot (before its first read-side call).
    pub fn joined(&self, me: Participant) {
        self.high.count.fetch_max(me.0 + 1, Ordering::AcqRel);
    }

    /// A writer that holds the image lock waits until no participant is inside a
    /// read-side call; `alive` says whether a participant runs (a dead one's count is
    /// cleared).
    pub fn drain(&self, alive: &dyn Fn(Participant) -> bool) {
        // After the fence, as the counts: a reader that joined after the last look at
        // `high` set it before its own fence.
        // One fence for every count (not one per count, as `drain_one` has for one).
        self.high.count.fence();
        let high = self.high.count.load(Ordering::Relaxed).min(MAX_PARTICIPANTS as u32);
        for (i, c) in self.counts.iter().enumerate().take(high as usize) {
            wait_for_zero(&c.count, &|| alive(Participant(i as u32)));
        }
    }

    /// Clears dead participant `p`'s count (its slot is about to be reaped; the image
    /// lock's holder only).
    pub fn clear(&self, p: Participant) {
        self.counts[p.0 as usize].count.store(0, Ordering::Release);
    }
}

/// [`Readers::try_enter`] on any words: `count` is the reader's participant's.
pub fn try_enter<W: LockWord>(lock: &W, count: &W) -> bool {
    count.fetch_add(1, Ordering::Relaxed);
    count.fence();
    // Acquire: the last writer's changes, released by its unlock, are seen.
    if lock.load(Ordering::Acquire) & !WAITERS == 0 {
        return true;
    }
    leave(lock, count);
    false
}

/// [`Readers::leave`] on any words.
pub fn leave<W: LockWord>(lock: &W, count: &W) {
    // Release: what the call read and wrote comes before a draining writer's work.
    count.fetch_sub(1, Ordering::Release);
    count.fence();
    if lock.load(Ordering::Relaxed) & !WAITERS != 0 {
        count.wake_all();
    }
}

/// A writer holding the lock waits for one participant's count to reach zero (or clears
/// it, when `alive` says the participant is dead).
pub fn drain_one<W: LockWord>(count: &W, alive: &dyn Fn() -> bool) {
    count.fence();
    wait_for_zero(count, alive)
}

/// [`drain_one`] after the writer's fence.
fn wait_for_zero<W: LockWord>(count: &W, alive: &dyn Fn() -> bool) {
    let mut spins = 0;
    loop {
        let c = count.load(Ordering::Acquire);
        if c == 0 {
            return;
        }
        if spins < count.spins() {
            spins += 1;
            count.spin();
            continue;
        }
        if !alive() {
            count.store(0, Ordering::Release);
            return;
        }
        count.wait(c);
    }
}
