//! The shared region's robust locks (issue 55's first piece, `src/share/`) between real
//! processes: this test binary runs itself again as the other participant
//! (`HASHFS_SHARE_CHILD`), since a child made by `fork` in a threaded test process may
//! not allocate.

use hashfs::share::{
    Acquired, Descriptions, Handle, Identity, Participant, Participants, Region, RobustLock, HEADER_BYTES,
    LAYOUT_VERSION,
};
use hashfs::Ino;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const PARTS: usize = HEADER_BYTES;
const LOCK: usize = PARTS + std::mem::size_of::<Participants>().next_multiple_of(4096);
const COUNTER: usize = LOCK + 8;
const MARK: usize = LOCK + 16;
const DESCS: usize = LOCK + 4096;
const LEN: usize = DESCS + std::mem::size_of::<Descriptions>();

fn id() -> Identity {
    Identity::of_image([0x5A; 16]).unwrap()
}

fn region(path: &Path) -> Region {
    Region::attach(path, &id(), LEN, 0o600).unwrap()
}

/// Runs this binary's `child` test as another process, acting as `role` on `path`.
fn spawn(role: &str, path: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .env("HASHFS_SHARE_CHILD", role)
        .env("HASHFS_SHARE_REGION", path)
        .spawn()
        .unwrap()
}

/// A region's path, removed when the test ends (also when it fails).
fn scratch(name: &str) -> tempfile::TempPath {
    let p = std::env::temp_dir().join(format!("hashfs-share-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    tempfile::TempPath::try_from_path(p).unwrap()
}

fn wait_for(mark: &AtomicU64, v: u64) {
    let start = Instant::now();
    while mark.load(Ordering::Acquire) != v {
        assert!(start.elapsed() < Duration::from_secs(20), "the other process never got there");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The other participant: `hold` takes the lock, says so, and waits to be killed;
/// `count` adds to the counter under the lock.
#[test]
fn child() {
    let Ok(role) = std::env::var("HASHFS_SHARE_CHILD") else { return };
    let r = region(Path::new(&std::env::var("HASHFS_SHARE_REGION").unwrap()));
    let (who, lock) = (r.at::<Participants>(PARTS), r.at::<RobustLock>(LOCK));
    let me = who.join().unwrap();
    match role.as_str() {
        "hold" => {
            assert_eq!(lock.lock(me, who), Acquired::Clean);
            r.at::<AtomicU64>(MARK).store(1, Ordering::Release);
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        "count" => {
            r.at::<AtomicU64>(MARK).fetch_add(1, Ordering::AcqRel);
            wait_for(r.at::<AtomicU64>(MARK), 2);
            bump(&r, me, 200_000);
            who.leave(me);
        }
        "open-ten" => {
            let d = r.at::<Descriptions>(DESCS);
            for i in 0..10 {
                d.open(me, Ino(100 + i), 0, 0).unwrap();
            }
            r.at::<AtomicU64>(MARK).store(1, Ordering::Release);
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        "advance" => {
            let h = handle_from_env();
            let d = r.at::<Descriptions>(DESCS);
            d.adopt(h, me); // the parent counted this "fork"
            start_together(&r);
            advance(&r, h, me, 100_000);
            d.release(h, me);
            who.leave(me);
        }
        _ => panic!("unknown role {role}"),
    }
}

/// Adds 1 to the counter `n` times, each under the lock, as a read and a separate write
/// (so that two unlocked writers lose updates).
fn bump(r: &Region, me: Participant, n: u64) {
    let (who, lock, c) = (r.at::<Participants>(PARTS), r.at::<RobustLock>(LOCK), r.at::<AtomicU64>(COUNTER));
    for _ in 0..n {
        assert_eq!(lock.lock(me, who), Acquired::Clean);
        let v = c.load(Ordering::Relaxed);
        std::hint::spin_loop();
        c.store(v + 1, Ordering::Relaxed);
        lock.unlock();
    }
}

#[test]
fn a_lock_held_by_a_killed_process_is_taken_over_within_10_ms() {
    if std::env::var_os("HASHFS_SHARE_CHILD").is_some() {
        return;
    }
    let path = scratch("kill");
    let r = region(&path);
    let (who, lock) = (r.at::<Participants>(PARTS), r.at::<RobustLock>(LOCK));
    let me = who.join().unwrap();
    let mut holder = spawn("hold", &path);
    wait_for(r.at::<AtomicU64>(MARK), 1);
    let owner = lock.owner().expect("the child holds the lock");
    assert!(who.alive(owner));
    // Killed, and not reaped yet: a zombie, which must count as dead.
    holder.kill().unwrap();
    let dying = Instant::now();
    while who.alive(owner) {
        assert!(dying.elapsed() < Duration::from_secs(5), "the killed child still runs");
        std::thread::sleep(Duration::from_millis(1));
    }
    let r2 = region(&path);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let t = Instant::now();
        let got = r2.at::<RobustLock>(LOCK).lock(me, r2.at::<Participants>(PARTS));
        let _ = tx.send((got, t.elapsed()));
    });
    let (got, took) = rx.recv_timeout(Duration::from_secs(5)).expect("the dead owner's lock was never taken over");
    assert_eq!(got, Acquired::FromDead(owner));
    assert!(took < Duration::from_millis(10), "took {took:?}");
    lock.unlock();
    holder.wait().unwrap();
    who.reap(owner);
    assert!(!who.alive(owner));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_live_holder_keeps_its_lock_and_a_waiter_gets_it_at_unlock() {
    if std::env::var_os("HASHFS_SHARE_CHILD").is_some() {
        return;
    }
    let path = scratch("live");
    let r = region(&path);
    let (who, lock) = (r.at::<Participants>(PARTS), r.at::<RobustLock>(LOCK));
    let me = who.join().unwrap();
    assert_eq!(lock.lock(me, who), Acquired::Clean);
    // Another thread of this process as a second participant (a slot of its own).
    let other = who.join().unwrap();
    let r2 = region(&path);
    let waiter = std::thread::spawn(move || {
        let t = Instant::now();
        let got = r2.at::<RobustLock>(LOCK).lock(other, r2.at::<Participants>(PARTS));
        (got, t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(100)); // the waiter sleeps and rechecks meanwhile
    assert_eq!(lock.owner(), Some(me), "a live owner's lock was taken");
    lock.unlock();
    let (got, waited) = waiter.join().unwrap();
    assert_eq!(got, Acquired::Clean);
    assert!(waited >= Duration::from_millis(90));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn two_processes_counting_under_the_lock_lose_nothing() {
    if std::env::var_os("HASHFS_SHARE_CHILD").is_some() {
        return;
    }
    let path = scratch("count");
    let r = region(&path);
    let who = r.at::<Participants>(PARTS);
    let me = who.join().unwrap();
    let mut child = spawn("count", &path);
    wait_for(r.at::<AtomicU64>(MARK), 1);
    r.at::<AtomicU64>(MARK).store(2, Ordering::Release);
    bump(&r, me, 200_000);
    assert!(child.wait().unwrap().success());
    assert_eq!(r.at::<AtomicU64>(COUNTER).load(Ordering::Relaxed), 400_000);
    std::fs::remove_file(&path).unwrap();
}

/// Processes (threads here: each opens and maps the file on its own) that attach to one
/// region at once all land on one file, whether none existed or a stale one did.
fn all_attach_one_file(path: &Path) {
    let n = 8;
    let barrier = std::sync::Barrier::new(n);
    let inodes: Vec<u64> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let r = region(path);
                    r.at::<AtomicU64>(COUNTER).fetch_add(1, Ordering::AcqRel);
                    std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).unwrap())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(inodes.windows(2).all(|w| w[0] == w[1]), "attached to different files: {inodes:?}");
    assert_eq!(region(path).at::<AtomicU64>(COUNTER).load(Ordering::Acquire), n as u64, "a count was lost");
    let left: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&*format!("{}.new", path.file_name().unwrap().to_string_lossy()))
        })
        .collect();
    assert!(left.is_empty(), "scratch files left: {left:?}");
}

#[test]
fn racing_attaches_make_one_region() {
    for _ in 0..20 {
        let path = scratch("attach-race");
        all_attach_one_file(&path);
        std::fs::remove_file(&path).unwrap();
    }
}

/// A region of another boot (or of an image since replaced) is stale: attaching replaces
/// it with a fresh one (its counter back at zero), and racing replacements agree on one.
/// (Twenty rounds of each: with the check under the stale file's lock gone, one round in
/// a few ends on two regions; two rounds let the planted bug through in CI once.)
#[test]
fn a_stale_region_is_replaced_once() {
    for round in 0..40 {
        let stale = if round % 2 == 0 {
            Identity { boot_id: [0; 16], ..id() }
        } else {
            Identity { image_uuid: [1; 16], ..id() }
        };
        let path = scratch("attach-stale");
        let old = Region::attach(&path, &stale, LEN, 0o600).unwrap();
        old.at::<AtomicU64>(COUNTER).store(1000, Ordering::Release);
        all_attach_one_file(&path);
        assert_eq!(old.at::<AtomicU64>(COUNTER).load(Ordering::Acquire), 1000, "the stale file was written");
        std::fs::remove_file(&path).unwrap();
    }
}

/// In this boot, a region of another layout version or size is another program's: refused
/// with a message that says so; a file without the header is not ours: refused too.
#[test]
fn foreign_regions_are_refused_with_a_reason() {
    let path = scratch("attach-foreign");
    drop(Region::attach(&path, &id(), LEN + 4096, 0o600).unwrap());
    let e = Region::attach(&path, &id(), LEN, 0o600).err().expect("refused");
    assert!(e.to_string().contains("another HashFS version"), "{e}");
    std::fs::write(&path, vec![7u8; LEN]).unwrap();
    let e = Region::attach(&path, &id(), LEN, 0o600).err().expect("refused");
    assert!(e.to_string().contains("not a HashFS shared region"), "{e}");
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        LAYOUT_VERSION, 15,
        "version 15: sets of participants four words long, 256 participants (share::ParticipantSet); \
         14: descriptors a spawn hands over name its ticket, a participant slot (fs/shared/fork.rs); \
         13: a participant slot's leaving word also marks a count in the image's forks word (share::Participants), \
         and read-only participants watch the ring of data changes by a lock; 12: each open inode's marks of writable shared mappings (share::OpenInodes); 11: the record locks' table (share::lock_table) before the inode bitmap; 10: a \
         region of an image of HashFS's grouped placements ends with the table's state (share::TableLayout)"
    );
}

fn handle_from_env() -> Handle {
    let v = std::env::var("HASHFS_SHARE_HANDLE").unwrap();
    let (i, g) = v.split_once(':').unwrap();
    Handle { index: i.parse().unwrap(), generation: g.parse().unwrap() }
}

/// Reads and writes `n` times through description `h`, each moving its offset by one
/// (as `read` does: the offset read, some work, then the new one stored).
fn advance(r: &Region, h: Handle, me: Participant, n: u64) {
    let (who, d) = (r.at::<Participants>(PARTS), r.at::<Descriptions>(DESCS).get(h).unwrap());
    for _ in 0..n {
        d.with_offset(me, who, |off| {
            for _ in 0..20 {
                std::hint::spin_loop();
            }
            (off + 1, ())
        });
    }
}

/// The two processes of a test meet here and leave at once (spinning, not sleeping, so
/// that their loops overlap).
fn start_together(r: &Region) {
    let mark = r.at::<AtomicU64>(MARK);
    mark.fetch_add(1, Ordering::AcqRel);
    let t = Instant::now();
    while mark.load(Ordering::Acquire) < 2 {
        assert!(t.elapsed() < Duration::from_secs(20), "the other process never came");
        std::hint::spin_loop();
    }
}

#[test]
fn descriptions_are_allocated_once_held_by_participants_and_freed_by_the_last() {
    let path = scratch("descs");
    let r = region(&path);
    let (who, d) = (r.at::<Participants>(PARTS), r.at::<Descriptions>(DESCS));
    let (a, b) = (who.join().unwrap(), who.join().unwrap());
    // Threads allocating at once never get one slot twice (ten rounds, each freeing all).
    let go = std::sync::Barrier::new(4);
    let mut handles: Vec<Handle> = Vec::new();
    for round in 0..10 {
        for h in handles.drain(..) {
            d.release(h, a);
        }
        handles = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4u32)
                .map(|t| {
                    let go = &go;
                    s.spawn(move || {
                        go.wait();
                        (0..1000).map(|i| d.open(a, Ino(t * 1000 + i), 0, 0).unwrap()).collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let mut idx: Vec<u32> = handles.iter().map(|h| h.index).collect();
        idx.sort();
        idx.dedup();
        assert_eq!(idx.len(), 4000, "round {round}: a slot was allocated twice");
        assert_eq!(d.in_use(), 4000);
    }
    // Shared with b (as a fork's child takes it): freed only when both released it.
    let h = handles[0];
    assert!(d.count_fork(h));
    d.release(h, a);
    assert!(d.get(h).is_some(), "freed with a fork pending");
    d.adopt(h, b);
    d.release(h, b);
    assert!(d.get(h).is_none(), "still allocated after its last holder released it");
    // The slot's next description is another generation: the old name no longer reaches it.
    let again = d.open(a, Ino(7), 0, 0).unwrap();
    assert_eq!(again.index, h.index);
    assert!(again.generation > h.generation && d.get(h).is_none());
    for h in handles.iter().skip(1).chain([&again]) {
        d.release(*h, a);
    }
    assert_eq!(d.in_use(), 0);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_killed_process_descriptions_are_released_by_a_survivor() {
    if std::env::var_os("HASHFS_SHARE_CHILD").is_some() {
        return;
    }
    let path = scratch("descs-kill");
    let r = region(&path);
    let (who, d) = (r.at::<Participants>(PARTS), r.at::<Descriptions>(DESCS));
    let me = who.join().unwrap();
    let mine = d.open(me, Ino(1), 0, 0).unwrap();
    let mut child = spawn("open-ten", &path);
    wait_for(r.at::<AtomicU64>(MARK), 1);
    assert_eq!(d.in_use(), 11);
    child.kill().unwrap();
    child.wait().unwrap();
    let dead = Participant(me.0 + 1); // the slot the child joined in, after ours
    assert!(!who.alive(dead), "the killed child still counts as alive");
    assert_eq!(d.release_all_of(dead), 10);
    who.reap(dead);
    assert_eq!(d.in_use(), 1, "the survivor's own description is kept");
    assert!(d.get(mine).is_some());
    std::fs::remove_file(&path).unwrap();
}

/// Two processes moving one description's offset (a forked child and its parent reading
/// through one descriptor) never use one offset twice: 200,000 moves end at 200,000.
#[test]
fn two_processes_sharing_a_description_move_its_offset_in_turn() {
    if std::env::var_os("HASHFS_SHARE_CHILD").is_some() {
        return;
    }
    let path = scratch("descs-offset");
    let r = region(&path);
    let (who, d) = (r.at::<Participants>(PARTS), r.at::<Descriptions>(DESCS));
    let me = who.join().unwrap();
    let h = d.open(me, Ino(5), 0, 0).unwrap();
    assert!(d.count_fork(h));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .env("HASHFS_SHARE_CHILD", "advance")
        .env("HASHFS_SHARE_REGION", &path)
        .env("HASHFS_SHARE_HANDLE", format!("{}:{}", h.index, h.generation))
        .spawn()
        .unwrap();
    start_together(&r);
    advance(&r, h, me, 100_000);
    assert!(child.wait().unwrap().success());
    assert_eq!(d.get(h).unwrap().offset(), 200_000, "an offset was used twice");
    d.release(h, me);
    assert_eq!(d.in_use(), 0);
    std::fs::remove_file(&path).unwrap();
}
