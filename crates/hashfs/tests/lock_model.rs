//! The shared region's robust lock (`share/lock.rs`, the image lock and the shared
//! journals' locks of a mount shared by many processes) under loom: its protocol
//! (`hashfs::share::lock_protocol`) on loom's atomics, every interleaving of a few
//! participants and every outcome their memory orderings allow (issue 53, item 3; issue
//! 55, item 5). A participant's death is a thread that stops holding the lock and is then
//! reported dead (the kernel's answer about its process, here a flag stored after its last
//! access). Checked: the critical sections never overlap and each sees the last one's
//! writes (loom's cell finds any access not ordered after the one before), the lock of a
//! dead owner is taken over exactly once, and every participant gets the lock.

use hashfs::share::{lock_protocol, Acquired, LockWord, Participant};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize};
use loom::sync::Arc;
use std::sync::atomic::Ordering;

/// The lock word on loom's atomics: a sleep is a yield (loom runs another thread), and
/// a waiter spins once before it sleeps.
struct Word(AtomicU32);

impl LockWord for Word {
    fn load(&self, order: Ordering) -> u32 {
        self.0.load(order)
    }
    fn compare_exchange(&self, current: u32, new: u32, success: Ordering, failure: Ordering) -> Result<u32, u32> {
        self.0.compare_exchange(current, new, success, failure)
    }
    fn swap(&self, value: u32, order: Ordering) -> u32 {
        self.0.swap(value, order)
    }
    fn wait(&self, _expected: u32) {
        loom::thread::yield_now();
    }
    fn wake_all(&self) {}
    fn spin(&self) {
        loom::thread::yield_now();
    }
    fn spins(&self) -> u32 {
        1
    }
}

/// What the participants share: the word, their liveness, the data the lock guards, and
/// how many took a dead owner's lock over.
struct World {
    word: Word,
    alive: [AtomicBool; 3],
    data: UnsafeCell<u32>,
    takeovers: AtomicUsize,
}

impl World {
    fn new() -> Arc<World> {
        Arc::new(World {
            word: Word(AtomicU32::new(0)),
            alive: [AtomicBool::new(true), AtomicBool::new(true), AtomicBool::new(true)],
            data: UnsafeCell::new(0),
            takeovers: AtomicUsize::new(0),
        })
    }

    /// Participant `me` takes the lock, adds one to the data, and lets go, or dies holding
    /// it (`dies`).
    fn critical(&self, me: u32, dies: bool) {
        let alive = |p: Participant| self.alive[p.0 as usize].load(Ordering::Acquire);
        if let Acquired::FromDead(_) = lock_protocol::lock(&self.word, Participant(me), &alive) {
            self.takeovers.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: loom's cell checks that no other access overlaps this one.
        self.data.with_mut(|d| unsafe { *d += 1 });
        if dies {
            // Its process ends; the kernel then reports it gone.
            self.alive[me as usize].store(false, Ordering::Release);
        } else {
            lock_protocol::unlock(&self.word);
        }
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    // A waiter polls the owner's liveness (as the lock does every millisecond): each poll
    // is a branch.
    b.max_branches = 100_000;
    b.check(f);
}

/// Two participants take the lock in turn: their sections never overlap, and the second
/// sees the first's write.
#[test]
fn two_participants_exclude_each_other() {
    model(|| {
        let w = World::new();
        let t = {
            let w = w.clone();
            loom::thread::spawn(move || w.critical(1, false))
        };
        w.critical(0, false);
        t.join().unwrap();
        // SAFETY: both sections are over (joined, and the lock let go).
        assert_eq!(w.data.with(|d| unsafe { *d }), 2);
        assert_eq!(w.takeovers.load(Ordering::Relaxed), 0);
    });
}

/// One participant dies holding the lock, and two others want it: exactly one takes it
/// over, each gets it once, and every section sees the ones before (the dead owner's
/// included). (The owner dies before the others start: with it alive while they poll,
/// the interleavings pass loom's bounds.)
#[test]
fn a_dead_owners_lock_is_taken_over_once() {
    model(|| {
        let w = World::new();
        w.critical(0, true);
        let others: Vec<_> = [1, 2]
            .into_iter()
            .map(|me| {
                let w = w.clone();
                loom::thread::spawn(move || w.critical(me, false))
            })
            .collect();
        for t in others {
            t.join().unwrap();
        }
        // SAFETY: every section is over.
        assert_eq!(w.data.with(|d| unsafe { *d }), 3);
        assert_eq!(w.takeovers.load(Ordering::Relaxed), 1, "a dead owner's lock is taken over once");
    });
}
