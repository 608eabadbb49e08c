use super::*;
use crate::share::Region;
use proptest::prelude::*;
use std::sync::Arc;

const LOCKS_OFF: usize = std::mem::size_of::<Participants>().div_ceil(4096) * 4096;

/// A region with a participant table and a lock table, as a mount's.
struct Fixture {
    region: Region,
}

impl Fixture {
    fn new() -> Arc<Fixture> {
        let len = LOCKS_OFF + std::mem::size_of::<RecordLocks>().div_ceil(4096) * 4096;
        Arc::new(Fixture { region: Region::anonymous(len).unwrap() })
    }
    fn who(&self) -> &Participants {
        self.region.at(0)
    }
    fn table(&self) -> &RecordLocks {
        self.region.at(LOCKS_OFF)
    }
    fn scope<'a>(&'a self, me: Participant, alive: &'a dyn Fn(Owner) -> bool) -> LockScope<'a> {
        LockScope { table: self.table(), me, who: self.who(), alive, readers: None }
    }
}

fn everyone(_: Owner) -> bool {
    true
}

fn process(pid: u32) -> Owner {
    Owner::Process { pid, start: 7 }
}

fn req(kind: Kind, start: u64, end: u64) -> Request {
    Request { ino: Ino(5), flock: false, start, end, kind }
}

#[test]
fn owners_share_reads_and_exclude_writes_and_flocks_are_apart() {
    let f = Fixture::new();
    let me = f.who().join().unwrap();
    let s = f.scope(me, &everyone);
    let (a, b) = (process(1), Owner::Description(Handle { index: 3, generation: 9 }));
    s.set(a, &req(Kind::Read, 0, 9), 1).unwrap();
    s.set(b, &req(Kind::Read, 5, TO_END), -1).unwrap();
    assert_eq!(s.set(b, &req(Kind::Write, 9, 9), -1), Err(libc::EAGAIN), "an OFD lock meets a POSIX one");
    assert_eq!(s.test(b, &req(Kind::Write, 9, 20)), Some(Conflict { start: 0, end: 9, write: false, pid: 1 }));
    assert_eq!(s.test(a, &req(Kind::Write, 10, 10)), Some(Conflict { start: 5, end: TO_END, write: false, pid: -1 }));
    // An owner's own locks never stand in its way: a's read becomes a write where b is not.
    s.set(a, &req(Kind::Write, 0, 4), 1).unwrap();
    assert_eq!(s.test(b, &req(Kind::Read, 3, 3)).map(|c| (c.start, c.end, c.write)), Some((0, 4, true)));
    // flock is a space of its own.
    let fl = Request { flock: true, ..req(Kind::Write, 0, TO_END) };
    s.set(b, &fl, -1).unwrap();
    assert_eq!(s.set(a, &fl, 1), Err(libc::EAGAIN));
    s.release(b, Some(Ino(5)));
    s.set(a, &fl, 1).unwrap();
    assert_eq!(s.test(b, &req(Kind::Write, 0, 3)).map(|c| c.pid), Some(1));
    s.release(a, None);
    assert_eq!(s.in_use(), 0);
}

#[test]
fn a_gone_owners_locks_are_dropped_by_the_call_they_block() {
    let f = Fixture::new();
    let me = f.who().join().unwrap();
    let dead = process(40);
    let alive = move |o: Owner| o != dead;
    let s = f.scope(me, &alive);
    f.scope(me, &everyone).set(dead, &req(Kind::Write, 0, 10), 40).unwrap();
    f.scope(me, &everyone).set(dead, &req(Kind::Write, 20, 30), 40).unwrap();
    assert_eq!(s.test(process(2), &req(Kind::Read, 5, 5)), None);
    assert_eq!(s.in_use(), 0, "every entry of the gone owner dropped");
}

#[test]
fn a_full_table_refuses_and_changes_nothing() {
    let f = Fixture::new();
    let me = f.who().join().unwrap();
    let s = f.scope(me, &everyone);
    let a = process(1);
    for i in 0..MAX_RECORD_LOCKS as u64 {
        s.set(a, &req(Kind::Read, 2 * i, 2 * i), 1).unwrap();
    }
    assert_eq!(s.set(process(2), &req(Kind::Read, 1, 1), 2), Err(libc::ENOLCK));
    // A split needs a new entry too: refused, and the range stays whole.
    assert_eq!(s.set(a, &req(Kind::Write, 2, 2), 1), Ok(()), "a change in place of one entry fits");
    assert_eq!(s.in_use(), MAX_RECORD_LOCKS);
    s.release(a, None);
    assert_eq!(s.in_use(), 0);
    assert_eq!(f.table().used.load(Ordering::Relaxed), 0);
}

/// Two POSIX owners each holding what the other waits for: the second to wait is told.
#[test]
fn a_wait_that_closes_a_cycle_is_refused() {
    let f = Fixture::new();
    let (p1, p2) = (f.who().join().unwrap(), f.who().join().unwrap());
    let (a, b) = (process(1), process(2));
    f.scope(p1, &everyone).set(a, &req(Kind::Write, 1, 1), 1).unwrap();
    f.scope(p2, &everyone).set(b, &req(Kind::Write, 2, 2), 2).unwrap();
    let g = f.clone();
    let waiter =
        std::thread::spawn(move || g.scope(p2, &everyone).set_waiting(b, &req(Kind::Write, 1, 1), 2, &|| false));
    while f.scope(p1, &everyone).waits_for(b).is_none() {
        std::thread::yield_now();
    }
    // On a thread of its own: without the check it would wait for ever.
    let (tx, rx) = std::sync::mpsc::channel();
    let g = f.clone();
    std::thread::spawn(move || {
        let _ = tx.send(g.scope(p1, &everyone).set_waiting(a, &req(Kind::Write, 2, 2), 1, &|| false));
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(Err(libc::EDEADLK)), "the second wait of a cycle");
    let s = f.scope(p1, &everyone);
    // An OFD owner waits without the check (as on Linux).
    s.release(a, None);
    assert_eq!(waiter.join().unwrap(), Ok(()), "the waiter got the lock at the release");
    assert_eq!(s.test(a, &req(Kind::Read, 1, 1)).map(|c| c.pid), Some(2));
}

/// A waiter sleeps and gets the lock when its holder lets go; one whose holder is gone
/// gets it at its next look.
#[test]
fn waiters_get_the_lock_at_a_release_or_a_death() {
    let f = Fixture::new();
    let p1 = f.who().join().unwrap();
    let p2 = f.who().join().unwrap();
    let holder = process(1);
    let gone = std::sync::atomic::AtomicBool::new(false);
    f.scope(p1, &everyone).set(holder, &req(Kind::Write, 0, TO_END), 1).unwrap();
    std::thread::scope(|t| {
        let w = t.spawn(|| {
            let alive = |o: Owner| o != holder || !gone.load(Ordering::SeqCst);
            f.scope(p2, &alive).set_waiting(process(2), &req(Kind::Read, 3, 3), 2, &|| false)
        });
        std::thread::sleep(Duration::from_millis(20));
        assert!(!w.is_finished(), "granted while held");
        gone.store(true, Ordering::SeqCst);
        assert_eq!(w.join().unwrap(), Ok(()));
    });
}

/// One file's byte-by-byte truth: which owner holds each byte and how.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Byte {
    Free,
    Read,
    Write,
}

const BYTES: u64 = 24;
const OWNERS: u32 = 3;

fn op() -> impl Strategy<Value = (u32, u8, u64, u64)> {
    (0..OWNERS, 0u8..3, 0..BYTES, 0..BYTES + 1)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    /// Random locks and unlocks of three owners over a short file, each range to its end
    /// when its second bound is past it, against a model of every byte (its last standing
    /// for every byte past it): each call is
    /// refused exactly when another owner's byte is in the way, F_GETLK says so for every
    /// byte, and one owner's entries never overlap nor touch one of the same type.
    #[test]
    fn locks_follow_a_model_of_every_byte(ops in proptest::collection::vec(op(), 1..60)) {
        let f = Fixture::new();
        let me = f.who().join().unwrap();
        let s = f.scope(me, &everyone);
        let mut model = vec![[Byte::Free; BYTES as usize + 1]; OWNERS as usize];
        for (o, k, a, b) in ops {
            let (start, end) = if b == BYTES { (a, TO_END) } else { (a.min(b), a.max(b)) };
            let kind = [Kind::Read, Kind::Write, Kind::Unlock][k as usize];
            let last = end.min(BYTES); // the model's last byte stands for all past it
            let blocked = kind != Kind::Unlock && (0..OWNERS).filter(|&x| x != o).any(|x| {
                (start..=last).any(|i| match model[x as usize][i as usize] {
                    Byte::Free => false,
                    Byte::Read => kind == Kind::Write,
                    Byte::Write => true,
                })
            });
            let got = s.set(process(o + 1), &req(kind, start, end), (o + 1) as i32);
            prop_assert_eq!(got.is_err(), blocked, "{:?} {}..={} by {}", kind, start, end, o);
            if !blocked {
                for i in start..=last {
                    model[o as usize][i as usize] = match kind {
                        Kind::Read => Byte::Read,
                        Kind::Write => Byte::Write,
                        Kind::Unlock => Byte::Free,
                    };
                }
            }
            for x in 0..OWNERS {
                for i in 0..=BYTES {
                    let others = (0..OWNERS).filter(|&y| y != x).map(|y| model[y as usize][i as usize]);
                    let (mut w, mut r) = (false, false);
                    for b in others {
                        w |= b == Byte::Write;
                        r |= b != Byte::Free;
                    }
                    let t = |k| s.test(process(x + 1), &req(k, i, if i == BYTES { TO_END } else { i })).is_some();
                    prop_assert_eq!(t(Kind::Read), w, "read test of byte {} for {}", i, x);
                    prop_assert_eq!(t(Kind::Write), r, "write test of byte {} for {}", i, x);
                }
            }
            let held: Vec<Held> = s.held().map(|(_, h)| h).collect();
            for (i, h) in held.iter().enumerate() {
                for g in &held[i + 1..] {
                    prop_assert!(!(h.owner == g.owner && overlaps(h.start, h.end, g.start, g.end)), "{:?} {:?}", h, g);
                    // Merged as Linux merges them (F_GETLK reports the whole range).
                    let touch = h.start <= g.end.saturating_add(1) && g.start <= h.end.saturating_add(1);
                    prop_assert!(!(h.owner == g.owner && h.write == g.write && touch), "unmerged {:?} {:?}", h, g);
                }
            }
        }
    }
}

/// The bytes of the model file `owner` holds (any type), the last standing for all past it.
fn bytes_held(s: &LockScope<'_>, owner: Owner) -> Vec<bool> {
    let mut v = vec![false; BYTES as usize + 1];
    for (_, h) in s.held().filter(|(_, h)| h.owner == owner) {
        for i in h.start..=h.end.min(BYTES) {
            v[i as usize] = true;
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    /// A holder killed after any store of a change (a race point at each entry written or
    /// freed stands for its death there) leaves its owner holding every byte it held both
    /// before and after the change: an open file description that a forked process still
    /// holds keeps its locks. Each change is one of an owner's locks and unlocks.
    #[test]
    fn a_change_cut_after_any_store_keeps_what_it_held_before_and_after(ops in proptest::collection::vec(op(), 1..30)) {
        let f = Fixture::new();
        let me = f.who().join().unwrap();
        let s = f.scope(me, &everyone);
        let owner = Owner::Description(Handle { index: 1, generation: 1 });
        for (_, k, a, b) in ops {
            let (start, end) = if b == BYTES { (a, TO_END) } else { (a.min(b), a.max(b)) };
            let kind = [Kind::Read, Kind::Write, Kind::Unlock][k as usize];
            let before = bytes_held(&s, owner);
            let cuts = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            {
                let (cuts, f2) = (cuts.clone(), f.clone());
                let _hook = crate::fs::race_point::on_this_thread(move |_| {
                    cuts.borrow_mut().push(bytes_held(&f2.scope(me, &everyone), owner));
                });
                s.set(owner, &req(kind, start, end), -1).unwrap();
            }
            let after = bytes_held(&s, owner);
            for (n, cut) in cuts.borrow().iter().enumerate() {
                for i in 0..=BYTES as usize {
                    prop_assert!(cut[i] || !(before[i] && after[i]), "{:?} {}..={}: byte {} lost at store {}", kind, start, end, i, n);
                }
            }
        }
    }
}

/// Threads of four participants taking one write lock on one byte again and again (each
/// retrying a refused F_SETLK): no two ever hold it at once, and each gets it its share of
/// times. The table's lock is what makes a check for conflicts and the entry it writes one
/// step (the deliberate bug `lock-table-unlocked` takes it away).
#[test]
fn threads_taking_one_write_lock_never_hold_it_together() {
    const ROUNDS: usize = 20_000;
    let f = Fixture::new();
    let inside = std::sync::atomic::AtomicU32::new(0);
    let overlaps = std::sync::atomic::AtomicU32::new(0);
    std::thread::scope(|t| {
        for n in 0..4u32 {
            let (f, inside, overlaps) = (&f, &inside, &overlaps);
            t.spawn(move || {
                let me = f.who().join().unwrap();
                let s = f.scope(me, &everyone);
                let owner = process(100 + n);
                for _ in 0..ROUNDS {
                    while s.set(owner, &req(Kind::Write, 0, 0), 1).is_err() {
                        std::hint::spin_loop();
                    }
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    // Held a while: two holders at once, which the bug makes rare on a
                    // loaded machine (two threads must check at the same moment), are
                    // then seen together (not caught in one quick tier of 2026-12-06,
                    // with the machine's two cores busy).
                    for _ in 0..64 {
                        std::hint::spin_loop();
                    }
                    inside.fetch_sub(1, Ordering::SeqCst);
                    s.set(owner, &req(Kind::Unlock, 0, 0), 1).unwrap();
                }
            });
        }
    });
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "times two owners held one write lock at once");
    assert_eq!(f.scope(Participant(0), &everyone).in_use(), 0);
}
