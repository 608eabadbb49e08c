//! The shared region's robust lock (`share/lock.rs`, the image lock and the shared
//! journals' locks of a mount shared by many processes) under loom: its protocol
//! (`hashfs::share::lock_protocol`) on loom's atomics, every interleaving of a few
//! participants and every outcome their memory orderings allow (issue 53, item 3; issue
//! 55, item 5). A participant's death is a thread that stops holding the lock and is then
//! reported dead (the kernel's answer about its process, here a flag stored after its last
//! access). Checked: the critical sections never overlap and each sees the last one's
//! writes (loom's cell finds any access not ordered after the one before), the lock of a
//! dead owner is taken over exactly once, and every participant gets the lock. And the
//! lock's read side (`share/readers.rs`): a reader and a writer never overlap, and a
//! reader that died inside its call does not hold a writer up. And the image lock's
//! sequence (`share/sequence.rs`), under which read-only participants read: no read it
//! accepts is torn.

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
    fn fetch_add(&self, value: u32, order: Ordering) -> u32 {
        self.0.fetch_add(value, order)
    }
    fn fetch_sub(&self, value: u32, order: Ordering) -> u32 {
        self.0.fetch_sub(value, order)
    }
    fn store(&self, value: u32, order: Ordering) {
        self.0.store(value, order)
    }
    fn fence(&self) {
        loom::sync::atomic::fence(Ordering::SeqCst);
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

/// The image lock's word, a reader's count, the data a writer changes and a reader reads,
/// and whether the reader's participant lives.
struct ReadWorld {
    lock: Word,
    count: Word,
    data: UnsafeCell<u32>,
    reader_alive: AtomicBool,
}

impl ReadWorld {
    fn new() -> Arc<ReadWorld> {
        Arc::new(ReadWorld {
            lock: Word(AtomicU32::new(0)),
            count: Word(AtomicU32::new(0)),
            data: UnsafeCell::new(0),
            reader_alive: AtomicBool::new(true),
        })
    }

    /// Participant 0 (the writer) takes the lock, waits for the reader, adds one, lets go.
    fn write(&self) {
        let alive = |_: Participant| true;
        let _ = lock_protocol::lock(&self.lock, Participant(0), &alive);
        lock_protocol::drain_one(&self.count, &|| self.reader_alive.load(Ordering::Acquire));
        // SAFETY: loom's cell checks that no read overlaps this write.
        self.data.with_mut(|d| unsafe { *d += 1 });
        lock_protocol::unlock(&self.lock);
    }

    /// Participant 1 enters a read-side call (as `FsInner::enter_read`: the fast way, else
    /// through the lock, joining the readers before letting go), reads, and leaves, or
    /// dies inside (`dies`). Returns what it read.
    fn read(&self, dies: bool) -> u32 {
        if !lock_protocol::try_read(&self.lock, &self.count) {
            let alive = |_: Participant| true;
            let _ = lock_protocol::lock(&self.lock, Participant(1), &alive);
            self.count.fetch_add(1, Ordering::Relaxed);
            lock_protocol::unlock(&self.lock);
        }
        // SAFETY: loom's cell checks that no write overlaps this read.
        let v = self.data.with(|d| unsafe { *d });
        if dies {
            self.reader_alive.store(false, Ordering::Release);
        } else {
            lock_protocol::leave_read(&self.lock, &self.count);
        }
        v
    }
}

/// A reader and a writer: the read never overlaps the write (it sees the data before or
/// after it, whole), whichever comes first.
#[test]
fn a_reader_and_a_writer_never_overlap() {
    model(|| {
        let w = ReadWorld::new();
        let t = {
            let w = w.clone();
            loom::thread::spawn(move || w.read(false))
        };
        w.write();
        let seen = t.join().unwrap();
        assert!(seen <= 1);
        // SAFETY: both are over.
        assert_eq!(w.data.with(|d| unsafe { *d }), 1);
    });
}

/// Two rounds of each: every read sees a whole number of writes, none overlaps.
#[test]
fn readers_and_writers_in_turn_never_overlap() {
    model(|| {
        let w = ReadWorld::new();
        let t = {
            let w = w.clone();
            loom::thread::spawn(move || {
                let a = w.read(false);
                let b = w.read(false);
                assert!(a <= b, "reads go forward");
            })
        };
        w.write();
        w.write();
        t.join().unwrap();
    });
}

/// A reader dies inside its call: the writer finds it dead, clears its count, and goes on.
#[test]
fn a_dead_reader_does_not_hold_a_writer_up() {
    model(|| {
        let w = ReadWorld::new();
        let t = {
            let w = w.clone();
            loom::thread::spawn(move || w.read(true))
        };
        // Returns (a writer that waited for a dead reader forever would exceed loom's
        // branch bound).
        w.write();
        t.join().unwrap();
        // SAFETY: both are over.
        assert_eq!(w.data.with(|d| unsafe { *d }), 1);
    });
}

/// The image lock's sequence (`share/sequence.rs`) on loom's atomics.
struct Seq(loom::sync::atomic::AtomicU64);

impl hashfs::share::sequence::SeqWord for Seq {
    fn load(&self, order: Ordering) -> u64 {
        self.0.load(order)
    }
    fn store(&self, value: u64, order: Ordering) {
        self.0.store(value, order)
    }
    fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
        self.0.fetch_add(value, order)
    }
    fn fence(&self) {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }
}

/// A holder of the image lock writes two words a read-only reader reads without any lock:
/// a read the sequence accepts saw both words of one version, never one of each.
#[test]
fn a_read_the_sequence_accepts_is_never_torn() {
    use hashfs::share::sequence::{even, hold, release, unchanged};
    model(|| {
        let w = Arc::new((Seq(loom::sync::atomic::AtomicU64::new(0)), AtomicU32::new(0), AtomicU32::new(0)));
        let t = {
            let w = w.clone();
            loom::thread::spawn(move || {
                let mut accepted = 0;
                for _ in 0..2 {
                    let Some(s) = even(&w.0) else { continue };
                    let (a, b) = (w.1.load(Ordering::Relaxed), w.2.load(Ordering::Relaxed));
                    if unchanged(&w.0, s) {
                        assert_eq!(a, b, "a torn read was accepted");
                        accepted += 1;
                    }
                }
                accepted
            })
        };
        for v in 1..=2 {
            hold(&w.0);
            w.1.store(v, Ordering::Relaxed);
            w.2.store(v, Ordering::Relaxed);
            release(&w.0);
        }
        t.join().unwrap();
    });
}
