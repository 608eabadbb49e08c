//! A lock word shared between processes whose owner may die holding it. The word holds
//! the owner's participant index + 1 (0: free) and a waiters bit; a waiter sleeps on it
//! with `futex` for at most [`RobustLock::RECHECK`] at a time, and each time it wakes with
//! the lock still taken it asks whether the owner still runs. The first waiter to find
//! the owner dead takes the lock over and is told so ([`Acquired::FromDead`]): it repairs
//! what the owner left half done (docs/design.md: a journal's rollback) before it goes on.
//! The protocol ([`lock`], [`try_lock`], [`unlock`]) is written once over any word
//! ([`LockWord`]): the region's, and loom's in its model (`tests/lock_model.rs`).

use super::participants::{Participant, Participants};
use super::region::Shared;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub(super) const WAITERS: u32 = 1 << 31;

#[repr(C)]
pub struct RobustLock {
    word: AtomicU32,
}

// SAFETY: one atomic.
unsafe impl Shared for RobustLock {}

/// How a lock was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// From a free word, or from a live owner's unlock.
    Clean,
    /// From participant `.0`, dead while it held the lock.
    FromDead(Participant),
}

impl RobustLock {
    /// How long a waiter sleeps before it asks again whether the owner lives.
    pub const RECHECK: Duration = Duration::from_millis(1);

    /// Takes the lock for participant `me` (an index in `who`).
    pub fn lock(&self, me: Participant, who: &Participants) -> Acquired {
        lock(&self.word, me, &|p| who.alive(p))
    }

    /// Takes the lock for participant `me` if it is free or its owner is dead; None while
    /// a live participant holds it.
    pub fn try_lock(&self, me: Participant, who: &Participants) -> Option<Acquired> {
        try_lock(&self.word, me, &|p| who.alive(p))
    }

    /// Releases the lock (its owner's call).
    pub fn unlock(&self) {
        unlock(&self.word)
    }

    /// Frees the lock if dead participant `p` holds it (its slot is about to be reaped,
    /// and a new process could take the index; the image lock's holder only).
    pub fn release_if_owned_by(&self, p: Participant) {
        let cur = self.word.load(Ordering::Acquire);
        if cur & !WAITERS == p.0 + 1 && self.word.compare_exchange(cur, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            futex_wake_all(&self.word);
        }
    }

    /// The lock's word (the read side looks at it: `readers.rs`).
    pub(super) fn word(&self) -> &AtomicU32 {
        &self.word
    }

    /// The owner's participant index, if the lock is held.
    pub fn owner(&self) -> Option<Participant> {
        let w = self.word.load(Ordering::Acquire) & !WAITERS;
        (w != 0).then(|| Participant(w - 1))
    }
}

/// What the lock's protocol needs of its word: atomic operations, and a sleep on the word
/// that a wake ends. The shared region's word is an [`AtomicU32`] with `futex`; the
/// protocol's model (`tests/lock_model.rs`) gives it loom's atomics, which check every
/// interleaving and memory ordering of a few threads.
pub trait LockWord {
    fn load(&self, order: Ordering) -> u32;
    fn compare_exchange(&self, current: u32, new: u32, success: Ordering, failure: Ordering) -> Result<u32, u32>;
    fn swap(&self, value: u32, order: Ordering) -> u32;
    /// For the read side's counts (`readers.rs`).
    fn fetch_add(&self, value: u32, order: Ordering) -> u32;
    fn fetch_sub(&self, value: u32, order: Ordering) -> u32;
    fn store(&self, value: u32, order: Ordering);
    /// A sequentially consistent fence (the read side's Dekker pair).
    fn fence(&self);
    /// Sleeps while the word holds `expected`, at most [`RobustLock::RECHECK`].
    fn wait(&self, expected: u32);
    /// Wakes every sleeper.
    fn wake_all(&self);
    /// A turn of a short spin before sleeping.
    fn spin(&self) {
        std::hint::spin_loop();
    }
    /// How many turns a waiter spins before it sleeps.
    fn spins(&self) -> u32 {
        64
    }
}

impl LockWord for AtomicU32 {
    fn load(&self, order: Ordering) -> u32 {
        AtomicU32::load(self, order)
    }
    fn compare_exchange(&self, current: u32, new: u32, success: Ordering, failure: Ordering) -> Result<u32, u32> {
        AtomicU32::compare_exchange(self, current, new, success, failure)
    }
    fn swap(&self, value: u32, order: Ordering) -> u32 {
        AtomicU32::swap(self, value, order)
    }
    fn fetch_add(&self, value: u32, order: Ordering) -> u32 {
        AtomicU32::fetch_add(self, value, order)
    }
    fn fetch_sub(&self, value: u32, order: Ordering) -> u32 {
        AtomicU32::fetch_sub(self, value, order)
    }
    fn store(&self, value: u32, order: Ordering) {
        AtomicU32::store(self, value, order)
    }
    fn fence(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
    }
    fn wait(&self, expected: u32) {
        futex_wait(self, expected, RobustLock::RECHECK);
    }
    fn wake_all(&self) {
        futex_wake_all(self);
    }
}

/// [`RobustLock::lock`] on any word: `alive` says whether a participant still runs.
pub fn lock<W: LockWord>(word: &W, me: Participant, alive: &dyn Fn(Participant) -> bool) -> Acquired {
    let mine = me.0 + 1;
    if word.compare_exchange(0, mine, Ordering::Acquire, Ordering::Relaxed).is_ok() {
        return Acquired::Clean;
    }
    let mut spins = 0;
    loop {
        let cur = word.load(Ordering::Relaxed);
        if cur == 0 {
            // Taken with the waiters bit: others may still sleep on the word.
            if word.compare_exchange(0, mine | WAITERS, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return Acquired::Clean;
            }
            continue;
        }
        let owner = Participant((cur & !WAITERS) - 1);
        if !alive(owner) {
            if word.compare_exchange(cur, mine | WAITERS, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return Acquired::FromDead(owner);
            }
            continue;
        }
        if spins < word.spins() {
            spins += 1;
            word.spin();
            continue;
        }
        if cur & WAITERS == 0
            && word.compare_exchange(cur, cur | WAITERS, Ordering::Relaxed, Ordering::Relaxed).is_err()
        {
            continue;
        }
        word.wait(cur | WAITERS);
    }
}

/// [`RobustLock::try_lock`] on any word.
pub fn try_lock<W: LockWord>(word: &W, me: Participant, alive: &dyn Fn(Participant) -> bool) -> Option<Acquired> {
    let mine = me.0 + 1;
    loop {
        let cur = word.load(Ordering::Relaxed);
        if cur & !WAITERS == 0 {
            return word
                .compare_exchange(cur, mine | (cur & WAITERS), Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
                .then_some(Acquired::Clean);
        }
        let owner = Participant((cur & !WAITERS) - 1);
        if alive(owner) {
            return None;
        }
        if word.compare_exchange(cur, mine | (cur & WAITERS), Ordering::Acquire, Ordering::Relaxed).is_ok() {
            return Some(Acquired::FromDead(owner));
        }
    }
}

/// [`RobustLock::unlock`] on any word.
pub fn unlock<W: LockWord>(word: &W) {
    if word.swap(0, Ordering::Release) & WAITERS != 0 {
        word.wake_all();
    }
}

/// Sleeps while `word` holds `expected`, at most `max`, woken by [`futex_wake_all`].
fn futex_wait(word: &AtomicU32, expected: u32, max: Duration) {
    let ts = libc::timespec { tv_sec: max.as_secs() as libc::time_t, tv_nsec: max.subsec_nanos() as libc::c_long };
    // SAFETY: FUTEX_WAIT (shared: the word may be in another process's mapping too) on a
    // live atomic; the kernel reads the word and the timeout and nothing else. Every
    // result (woken, timed out, EAGAIN because the word changed, EINTR) sends the caller
    // back to look at the word.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, &ts as *const libc::timespec) };
}

/// Wakes every process sleeping on `word`.
fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live atomic; the kernel only wakes its sleepers.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
}
