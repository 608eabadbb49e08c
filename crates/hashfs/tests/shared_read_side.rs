//! The image lock's read side (issue 55; `share/readers.rs`, `fs/shared/read_side.rs`):
//! reads and in-place overwrites of participants run beside each other, never beside a
//! change of the image; overwrites of one file take turns; a participant killed inside a
//! read-side call holds no one up. Two mounts in one test process are two participants;
//! the killed one is this binary run again (`HASHFS_SHARED_CHILD`).

mod common;

use common::shared_image::{start_child_named, Image};
use hashfs::{FileSystem, OpenOptions};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Barrier};
use std::time::Duration;

fn p(s: &str) -> &Path {
    Path::new(s)
}

const BLOCK: usize = 4096;

/// One participant empties a file and writes it whole again, generation after generation
/// (changes of the image, under the lock), while a second writes and removes other files
/// (which take the blocks the first frees) and a third reads the file on the read side:
/// every read sees one generation in every byte it returns. A writer that did not wait for
/// the readers would free blocks under a read, which would then return another file's
/// bytes or two generations.
#[test]
fn reads_beside_a_truncating_writer_see_whole_generations() {
    const BLOCKS: usize = 16;
    let img = Image::new("rs-trunc");
    let (w, o, r) = (img.join(), img.join(), img.join());
    w.write(p("/f"), &[1u8; BLOCKS * BLOCK]).unwrap();
    let stop = AtomicBool::new(false);
    let reads = std::thread::scope(|s| {
        let stop = &stop;
        let w = &w;
        let o = &o;
        s.spawn(move || {
            let f = w.open_file(p("/f"), OpenOptions::new().write(true)).unwrap();
            for gen in 0..20_000u32 {
                f.set_len(0).unwrap();
                f.write_at(0, &[1 + (gen % 200) as u8; BLOCKS * BLOCK]).unwrap();
            }
            stop.store(true, Ordering::Release);
        });
        s.spawn(move || {
            let mut k = 0u64;
            while !stop.load(Ordering::Acquire) {
                let name = format!("/other{}", k % 4);
                o.write(p(&name), &[0xEE; BLOCKS * BLOCK]).unwrap();
                o.remove_file(p(&name)).unwrap();
                k += 1;
            }
        });
        let f = r.open_file(p("/f"), OpenOptions::new().read(true)).unwrap();
        let mut buf = vec![0u8; BLOCKS * BLOCK];
        let mut reads = 0u64;
        while !stop.load(Ordering::Acquire) {
            let n = f.read_at(0, &mut buf).unwrap();
            let v = buf[0];
            for (b, block) in buf[..n].chunks(BLOCK).enumerate() {
                assert!(
                    v != 0 && v != 0xEE && block.iter().all(|&x| x == v),
                    "read {reads} of {n} bytes: block {b} holds bytes the file did not hold with its first's ({v}): \
                     {:?}",
                    &block[..8]
                );
            }
            reads += 1;
        }
        reads
    });
    assert!(reads > 0);
    drop((w, o, r));
    img.check();
}

/// Two participants overwrite all of one file (1 MiB) at once, round after round, each with its
/// own byte: after each round the file holds one writer's bytes only (POSIX: writes to
/// one file are atomic with respect to each other). The overwrites run on the read side
/// (the file's blocks are mapped, its size stays), where they take turns on the inode's
/// lock in the region.
#[test]
fn overwrites_of_one_file_from_two_participants_take_turns() {
    const BLOCKS: usize = 256;
    const ROUNDS: usize = 1000;
    let img = Image::new("rs-turns");
    let (a, b) = (img.join(), img.join());
    a.write(p("/f"), &[b'a'; BLOCKS * BLOCK]).unwrap();
    let fa = a.open_file(p("/f"), OpenOptions::new().read(true).write(true)).unwrap();
    let fb = b.open_file(p("/f"), OpenOptions::new().write(true)).unwrap();
    let barrier = Barrier::new(2);
    // The first round whose check found both writers' bytes, and where; both threads stop
    // after it (a panic inside would leave the other waiting at the barrier).
    let mixed: std::sync::Mutex<Option<(usize, usize)>> = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        let (barrier, fb, mixed) = (&barrier, &fb, &mixed);
        s.spawn(move || {
            let data = vec![b'b'; BLOCKS * BLOCK];
            for _ in 0..ROUNDS {
                barrier.wait();
                fb.write_at(0, &data).unwrap();
                barrier.wait();
                barrier.wait(); // the check
                if mixed.lock().unwrap().is_some() {
                    break;
                }
            }
        });
        let data = vec![b'a'; BLOCKS * BLOCK];
        let mut buf = vec![0u8; BLOCKS * BLOCK];
        for round in 0..ROUNDS {
            barrier.wait();
            fa.write_at(0, &data).unwrap();
            barrier.wait();
            let n = fa.read_at(0, &mut buf).unwrap_or(0);
            let first = buf[0];
            let at = if n < buf.len() {
                Some(n / BLOCK)
            } else {
                buf.chunks(BLOCK).position(|blk| blk.iter().any(|&x| x != first))
            };
            if let Some(block) = at {
                *mixed.lock().unwrap() = Some((round, block));
            }
            barrier.wait();
            if at.is_some() {
                break;
            }
        }
    });
    let mixed = mixed.into_inner().unwrap();
    assert!(mixed.is_none(), "(round, block) {mixed:?}: the file holds both writers' bytes");
    drop((fa, fb, a, b));
    img.check();
}

/// A participant overwriting a file in place in a loop (on the read side, holding the
/// file's inode lock most of the time) is killed with SIGKILL, again and again: each
/// time, the survivor's next overwrite of that file (the dead one's inode lock) and next
/// change of the image (the dead one's count of read-side calls) return within 2 s, and
/// fsck finds the image sound at the end.
#[test]
fn a_participant_killed_inside_an_overwrite_holds_no_one_up() {
    let img = Image::new("rs-kill");
    let a = std::sync::Arc::new(img.join());
    a.write(p("/f"), &[7u8; 64 * BLOCK]).unwrap();
    for round in 0..10u8 {
        let child = start_child_named(&img, "overwriter").expect("the overwriter joined");
        std::thread::sleep(Duration::from_millis(20 + round as u64 * 7));
        drop(child); // SIGKILL, most likely inside an overwrite
        let (tx, rx) = mpsc::channel();
        let survivor = a.clone();
        // Not a scoped thread: one that waits forever must not hold the test up.
        let h = std::thread::spawn(move || {
            let f = survivor.open_file(p("/f"), OpenOptions::new().write(true)).unwrap();
            f.write_at(BLOCK as u64, &[round; BLOCK]).unwrap();
            survivor.write(p(&format!("/after{round}")), b"a change of the image").unwrap();
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(2))
            .unwrap_or_else(|_| panic!("round {round}: the survivor waited more than 2 s for a dead participant"));
        h.join().unwrap();
    }
    drop(std::sync::Arc::into_inner(a).expect("the survivor's threads are done"));
    img.check();
}

/// The killed participant: overwrites `/f` in place forever.
#[test]
fn overwriter() {
    let Ok(image) = std::env::var("HASHFS_SHARED_CHILD") else { return };
    let (fs, _) = FileSystem::open_shared(Path::new(&image)).unwrap();
    let f = fs.open_file(p("/f"), OpenOptions::new().write(true)).unwrap();
    println!("joined");
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    let data = vec![9u8; 64 * BLOCK];
    loop {
        f.write_at(0, &data).unwrap();
    }
}

/// An fsync on the read side (the times a write stored on the media flushed there): the
/// times it made durable are the ones every participant sees, and a mount after the last
/// participant left finds them.
#[test]
fn an_fsync_beside_others_keeps_the_times_everyone_sees() {
    let img = Image::new("rs-fsync");
    let (a, b) = (img.join(), img.join());
    a.write(p("/f"), &[1u8; 8 * BLOCK]).unwrap();
    let f = a.open_file(p("/f"), OpenOptions::new().write(true)).unwrap();
    for round in 0..50u8 {
        f.write_at(BLOCK as u64, &[round; BLOCK]).unwrap();
        f.sync_all().unwrap();
        std::thread::sleep(Duration::from_millis(1)); // across ticks of the coarse clock
    }
    let seen = b.metadata(p("/f")).unwrap();
    assert_eq!(seen.mtime_ns, a.metadata(p("/f")).unwrap().mtime_ns);
    drop((f, a, b));
    let (fs, report) = FileSystem::open(&img.path).unwrap();
    assert!(report.was_clean);
    assert_eq!(fs.metadata(p("/f")).unwrap().mtime_ns, seen.mtime_ns, "the last write's times, durable");
    drop(fs);
    img.check();
}

/// While a participant watches the ring of data changes (a shared mount's daemon, whose
/// kernel caches pages of files mapped through it), every overwrite in place is noted
/// there, on the read side or under the image lock (the ring of changes names neither:
/// they change no byte another participant caches).
#[test]
fn every_overwrite_in_place_is_noted_for_a_watcher() {
    let img = Image::new("rs-data");
    let (a, w) = (img.join(), img.join());
    a.write(p("/f"), &[1u8; 8 * BLOCK]).unwrap();
    let f = a.open_file(p("/f"), OpenOptions::new().write(true)).unwrap();
    let mut pos = w.watch_data().expect("a shared mount");
    for i in 0..300u32 {
        f.write_at((i % 8) as u64 * BLOCK as u64, &[i as u8; BLOCK]).unwrap();
        let (next, changed) = w.data_changes_since(pos).unwrap();
        match changed {
            hashfs::Changed::Inodes(v) => assert!(v.contains(&f.ino()), "overwrite {i} was not noted: {v:?}"),
            hashfs::Changed::Everything => panic!("overwrite {i}: the ring lapped with one writer"),
        }
        pos = next;
    }
    drop((f, a, w));
    img.check();
}

/// A participant that changed files faster than it read the rings, three rings' worth,
/// finds that nothing changed for it when it leaves its own changes out: every position it
/// missed is its own (`OwnMarks`, which remember 32 rings back). Before, a lap was
/// "everything changed", and the shim's mapping follower of a process that appended fast
/// copied every copy of a file it mapped again at each lap. Another participant's change
/// in the lap, or a lap past what the marks remember, is still everything; a third
/// participant, for whom none of them is its own, sees everything.
#[test]
fn a_lap_of_a_participants_own_changes_is_nothing_to_it() {
    let img = Image::new("rs-own-lap");
    let (a, b, w) = (img.join(), img.join(), img.join());
    a.write(p("/f"), &[1u8; BLOCK]).unwrap();
    b.write(p("/g"), &[1u8; BLOCK]).unwrap();
    let f = a.open_file(p("/f"), OpenOptions::new().write(true)).unwrap();
    let g = b.open_file(p("/g"), OpenOptions::new().write(true)).unwrap();
    let data_watch = a.watch_data().expect("a shared mount");
    let (mut pos, mut data) = (a.changes_now().unwrap(), data_watch);
    let third = w.changes_now().unwrap();
    let everything = |c: Option<(u64, hashfs::Changed)>| matches!(c, Some((_, hashfs::Changed::Everything)));
    let nothing =
        |c: Option<(u64, hashfs::Changed)>| matches!(c, Some((_, hashfs::Changed::Inodes(v))) if v.is_empty());
    for lap in 0..3 {
        // Three rings of a's appends (the ring of changes) and overwrites (of data).
        for i in 0..3 * 1024 + 5 {
            f.write_at(BLOCK as u64 + (lap * 4000 + i) as u64, &[2]).unwrap();
            f.write_at(0, &[i as u8]).unwrap();
        }
        let (changes, data_changes) = (a.changes_since_others(pos), a.data_changes_since_others(data));
        match lap {
            0 => {
                assert!(nothing(changes.clone()), "a's own lap of the ring of changes: {changes:?}");
                assert!(nothing(data_changes.clone()), "a's own lap of the data ring: {data_changes:?}");
                assert!(everything(w.changes_since_others(third)), "the lap is everything to another participant");
            }
            1 => {
                // One overwrite and one append of b's inside the lap: everything.
                g.write_at(0, &[9]).unwrap();
                g.write_at(BLOCK as u64, &[9]).unwrap();
                for i in 0..5 {
                    f.write_at(0, &[i]).unwrap();
                    f.write_at(BLOCK as u64 + 20_000 + i as u64, &[2]).unwrap();
                }
                let (changes, data_changes) = (a.changes_since_others(pos), a.data_changes_since_others(data));
                assert!(everything(changes.clone()), "b's append inside a's lap: {changes:?}");
                assert!(everything(data_changes.clone()), "b's overwrite inside a's lap: {data_changes:?}");
            }
            _ => {}
        }
        pos = a.changes_now().unwrap();
        data = a.data_changes_since_others(data).unwrap().0;
    }
    // Past what the marks remember: 33 rings of a's own overwrites.
    for i in 0..33 * 1024 {
        f.write_at(0, &[i as u8]).unwrap();
    }
    assert!(everything(a.data_changes_since_others(data)), "a lap longer than the marks");
    drop((f, g, a, b, w));
    img.check();
}

/// Two participants' threads overwrite files of their own at once while a third reads the
/// ring of data changes without a lock: each overwrite is read exactly once (no slot read
/// before its writer stored it, none skipped).
#[test]
fn concurrent_overwrites_are_each_noted_once() {
    const PER_WRITER: u32 = 20_000;
    let img = Image::new("rs-ring");
    let (a, b, w) = (img.join(), img.join(), img.join());
    a.write(p("/a"), &[1u8; BLOCK]).unwrap();
    b.write(p("/b"), &[1u8; BLOCK]).unwrap();
    let (fa, fb) = (
        a.open_file(p("/a"), OpenOptions::new().write(true)).unwrap(),
        b.open_file(p("/b"), OpenOptions::new().write(true)).unwrap(),
    );
    let (ia, ib) = (fa.ino(), fb.ino());
    let mut pos = w.watch_data().unwrap();
    let done = AtomicBool::new(false);
    // Overwrites made and overwrites read: the writers wait while they are a quarter of a
    // ring ahead, so that the reader (on two cores, with the writers) never falls a ring
    // behind, and a slot whose writer was preempted between its two steps never has half a
    // ring written after it (which the reader takes for a dead writer's: everything).
    let (made, read) = (std::sync::atomic::AtomicU64::new(0), std::sync::atomic::AtomicU64::new(0));
    // Set when the reader ends, also by a panic, so that no writer waits for it after.
    let gone = AtomicBool::new(false);
    struct Gone<'g>(&'g AtomicBool);
    impl Drop for Gone<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let counts = std::thread::scope(|s| {
        let (done, made, read, gone) = (&done, &made, &read, &gone);
        let writers: Vec<_> = [&fa, &fb]
            .into_iter()
            .map(|f| {
                s.spawn(move || {
                    for i in 0..PER_WRITER {
                        // `read` first: it is never past what `made` says after it.
                        while {
                            let r = read.load(Ordering::Acquire);
                            made.load(Ordering::Acquire) - r > 256
                        } && !gone.load(Ordering::Acquire)
                        {
                            std::thread::yield_now();
                        }
                        // Counted before it is made: `read` never passes `made`.
                        made.fetch_add(1, Ordering::AcqRel);
                        f.write_at(0, &[i as u8; 64]).unwrap();
                    }
                })
            })
            .collect();
        let reader = s.spawn(move || {
            let _gone = Gone(gone);
            let mut counts = std::collections::HashMap::new();
            loop {
                let finished = done.load(Ordering::Acquire);
                let (next, changed) = w.data_changes_since(pos).unwrap();
                match changed {
                    hashfs::Changed::Inodes(v) => {
                        read.fetch_add(v.len() as u64, Ordering::AcqRel);
                        v.into_iter().for_each(|i| *counts.entry(i).or_insert(0u32) += 1)
                    }
                    hashfs::Changed::Everything => panic!("the reader fell a whole ring behind at {pos}"),
                }
                pos = next;
                if finished && w.data_changes_since(pos).unwrap().1 == hashfs::Changed::Inodes(Vec::new()) {
                    return counts;
                }
            }
        });
        // Every writer joined before any result is unwrapped: the reader stops only once
        // they are done, also when one failed.
        let ended: Vec<_> = writers.into_iter().map(|t| t.join()).collect();
        done.store(true, Ordering::Release);
        let counts = reader.join().unwrap();
        ended.into_iter().for_each(|r| r.unwrap());
        counts
    });
    // The first overwrite of each coarse-clock tick goes under the image lock (new times)
    // and is noted there; every one is noted exactly once.
    assert_eq!(counts.get(&ia), Some(&PER_WRITER), "{counts:?}");
    assert_eq!(counts.get(&ib), Some(&PER_WRITER), "{counts:?}");
    assert_eq!(counts.len(), 2, "only the two files: {counts:?}");
    drop((fa, fb, a, b));
    img.check();
}
