//! A read-only participant's record locks beside a writer's (`share/read_only_locks.rs`),
//! both in this process on one image: kernel OFD locks belong to open file descriptions,
//! and each mount holds its own, so the two exclude each other as two processes would.

use super::super::test_image::{check_and_remove, image};
use crate::fs::race_point::with_between;
use crate::layout::Ino;
use crate::share::lock_table::{Kind, Owner, Request, TO_END};
use crate::share::Handle;
use crate::FileSystem;
use std::path::Path;

/// The writer's owner: a mount's caller served by this process (alive).
fn writer() -> Owner {
    let pid = std::process::id();
    Owner::Mount { pid, start: crate::share::start_time(pid).unwrap(), owner: 1 }
}

/// A reader's owner: one of its descriptions (owners of a read-only participant are its own).
fn reader(n: u64) -> Owner {
    Owner::Description(Handle { index: u32::MAX, generation: n })
}

fn req(ino: Ino, kind: Kind, start: u64, end: u64) -> Request {
    Request { ino, flock: false, start, end, kind }
}

/// A writer's mount and a read-only participant's on a fresh image, and a file's inode.
fn pair(name: &str) -> (super::super::test_image::TestImage, FileSystem, FileSystem, Ino) {
    let img = image(name);
    let (a, _) = FileSystem::open_shared(&img).unwrap();
    a.write(Path::new("/f"), b"locked bytes").unwrap();
    let ino = a.metadata(Path::new("/f")).unwrap().ino;
    let (b, _) = FileSystem::open_read_only(&img).unwrap();
    (img, a, b, ino)
}

/// Each side refuses the other over shared bytes and grants beside them; F_GETLK tells
/// each what the other holds; read locks share; `flock` apart from record locks.
#[test]
fn a_readers_read_lock_and_a_writers_write_lock_exclude_each_other() {
    let (img, a, b, ino) = pair("rol-exclude");
    let w = writer();
    b.set_record_lock(reader(1), &req(ino, Kind::Read, 0, 99), -1, None).unwrap();
    assert_eq!(a.set_record_lock(w, &req(ino, Kind::Write, 50, 60), 7, None), Err(libc::EAGAIN));
    let seen = a.record_lock_test(w, &req(ino, Kind::Write, 50, 60)).unwrap().expect("F_GETLK sees the reader");
    assert!(!seen.write && seen.start <= 50 && seen.end >= 60, "{seen:?}");
    a.set_record_lock(w, &req(ino, Kind::Read, 50, 60), 7, None).unwrap();
    a.set_record_lock(w, &req(ino, Kind::Write, 100, TO_END), 7, None).unwrap();
    a.set_record_lock(w, &req(ino, Kind::Unlock, 0, TO_END), 7, None).unwrap();
    b.set_record_lock(reader(1), &req(ino, Kind::Unlock, 0, 99), -1, None).unwrap();
    a.set_record_lock(w, &req(ino, Kind::Write, 50, 60), 7, None).unwrap();
    assert_eq!(b.set_record_lock(reader(1), &req(ino, Kind::Read, 0, 99), -1, None), Err(libc::EAGAIN));
    let seen = b.record_lock_test(reader(1), &req(ino, Kind::Read, 55, 55)).unwrap().expect("the writer's");
    assert!(seen.write && (seen.start, seen.end, seen.pid) == (50, 60, 7), "{seen:?}");
    b.set_record_lock(reader(1), &req(ino, Kind::Read, 61, 99), -1, None).unwrap();
    // flock: the reader's LOCK_SH keeps out a writer's LOCK_EX, not its record locks.
    let fl = |kind| Request { ino, flock: true, start: 0, end: TO_END, kind };
    b.set_record_lock(reader(2), &fl(Kind::Read), -1, None).unwrap();
    assert_eq!(a.set_record_lock(w, &fl(Kind::Write), -1, None), Err(libc::EAGAIN));
    assert_eq!(b.set_record_lock(reader(2), &fl(Kind::Write), -1, None), Err(libc::ENOLCK));
    b.release_record_locks(reader(2), None);
    a.set_record_lock(w, &fl(Kind::Write), -1, None).unwrap();
    assert_eq!(b.set_record_lock(reader(2), &fl(Kind::Read), -1, None), Err(libc::EAGAIN));
    drop((a, b));
    check_and_remove(&img);
}

/// A writer refused because of a reader takes its entries back: another of the reader's
/// owners still gets the same bytes, and the table holds nothing of the refused request
/// (`read-only-lock-kept-on-refusal` leaves the write lock there). A writer that merged
/// the request with a lock it held gets that lock back as it was.
#[test]
fn a_refused_write_lock_leaves_the_table_as_it_was() {
    let (img, a, b, ino) = pair("rol-refused");
    let w = writer();
    a.set_record_lock(w, &req(ino, Kind::Write, 0, 9), 7, None).unwrap();
    b.set_record_lock(reader(1), &req(ino, Kind::Read, 20, 29), -1, None).unwrap();
    assert_eq!(a.set_record_lock(w, &req(ino, Kind::Write, 5, 25), 7, None), Err(libc::EAGAIN));
    assert_eq!(a.with_record_locks(|s| s.in_use()).unwrap(), 1);
    b.set_record_lock(reader(2), &req(ino, Kind::Read, 10, 19), -1, None).unwrap();
    let held = b.record_lock_test(reader(2), &req(ino, Kind::Read, 0, TO_END)).unwrap().expect("the writer's");
    assert_eq!((held.start, held.end), (0, 9), "the writer's own lock as it was");
    drop((a, b));
    check_and_remove(&img);
}

/// The kernel holds the union of the reader's owners' ranges: one owner's unlock lets go
/// only of what no other holds (`read-only-unlock-drops-others` lets go of all of it).
/// Past 2 GiB a file's bytes stand as one byte of the image file: a reader's lock there
/// keeps a writer out of all of them until every such lock is gone.
#[test]
fn a_readers_unlock_keeps_what_its_other_owners_hold() {
    let (img, a, b, ino) = pair("rol-union");
    let w = writer();
    b.set_record_lock(reader(1), &req(ino, Kind::Read, 0, 99), -1, None).unwrap();
    b.set_record_lock(reader(2), &req(ino, Kind::Read, 40, 59), -1, None).unwrap();
    b.set_record_lock(reader(1), &req(ino, Kind::Unlock, 0, 99), -1, None).unwrap();
    assert_eq!(a.set_record_lock(w, &req(ino, Kind::Write, 45, 45), 7, None), Err(libc::EAGAIN));
    a.set_record_lock(w, &req(ino, Kind::Write, 0, 9), 7, None).unwrap();
    b.release_record_locks(reader(2), Some(ino));
    a.set_record_lock(w, &req(ino, Kind::Write, 45, 45), 7, None).unwrap();
    const GIB: u64 = 1 << 30;
    b.set_record_lock(reader(1), &req(ino, Kind::Read, 3 * GIB, 3 * GIB + 9), -1, None).unwrap();
    b.set_record_lock(reader(2), &req(ino, Kind::Read, 5 * GIB, TO_END), -1, None).unwrap();
    assert_eq!(a.set_record_lock(w, &req(ino, Kind::Write, 4 * GIB, 4 * GIB), 7, None), Err(libc::EAGAIN));
    b.set_record_lock(reader(1), &req(ino, Kind::Unlock, 0, TO_END), -1, None).unwrap();
    assert_eq!(a.set_record_lock(w, &req(ino, Kind::Write, 6 * GIB, 6 * GIB), 7, None), Err(libc::EAGAIN));
    b.release_record_locks(reader(2), None);
    a.set_record_lock(w, &req(ino, Kind::Write, 4 * GIB, 6 * GIB), 7, None).unwrap();
    drop((a, b));
    check_and_remove(&img);
}

/// The two orders of announcing and looking, cut where each side has done its first step:
/// a reader that runs whole between a writer's entries and its probe is refused (the
/// writer's entries are there) and the writer granted; a writer between a reader's kernel
/// lock and its look at the table is refused. Never both granted
/// (`read-only-lock-probed-first`, `read-only-lock-looked-first` grant both).
#[test]
fn each_side_announces_before_it_looks() {
    let (img, a, b, ino) = pair("rol-order");
    let w = writer();
    let r = req(ino, Kind::Read, 0, 9);
    let wr = req(ino, Kind::Write, 0, 9);
    let reader_got = std::sync::Mutex::new(None);
    let writer_got = with_between(
        "lock table: a write lock's entries written",
        || *reader_got.lock().unwrap() = Some(b.set_record_lock(reader(1), &r, -1, None)),
        || a.set_record_lock(w, &wr, 7, None),
    );
    let reader_got = reader_got.into_inner().unwrap().expect("the reader ran between");
    assert_eq!((writer_got, reader_got), (Ok(()), Err(libc::EAGAIN)), "writer first");
    a.release_record_locks(w, None);
    let writer_got = std::sync::Mutex::new(None);
    let reader_got = with_between(
        "read-only lock: announced",
        || *writer_got.lock().unwrap() = Some(a.set_record_lock(w, &wr, 7, None)),
        || b.set_record_lock(reader(1), &r, -1, None),
    );
    let writer_got = writer_got.into_inner().unwrap().expect("the writer ran between");
    assert_eq!((writer_got, reader_got), (Err(libc::EAGAIN), Ok(())), "reader first");
    drop((a, b));
    check_and_remove(&img);
}

/// A reader that marks itself after a writer asked whether any reader is there, and locks
/// before the writer writes its entries, is still seen: it waits out the writer's trust in
/// the answer before it locks, and the writer, finding its answer that old, asks about its
/// range (`read-only-lock-presence-trusted` trusts the answer at any age,
/// `read-only-lock-unsettled` locks at once; each grants both).
#[test]
fn a_reader_that_comes_after_a_writers_answer_is_seen() {
    let (img, a, b, ino) = pair("rol-settle");
    let w = writer();
    let r = req(ino, Kind::Read, 0, 9);
    let reader_got = std::sync::Mutex::new(None);
    let writer_got = with_between(
        "lock table: readers asked",
        || *reader_got.lock().unwrap() = Some(b.set_record_lock(reader(1), &r, -1, None)),
        || a.set_record_lock(w, &req(ino, Kind::Write, 0, 9), 7, None),
    );
    let reader_got = reader_got.into_inner().unwrap().expect("the reader ran between");
    assert_eq!((writer_got, reader_got), (Err(libc::EAGAIN), Ok(())));
    drop((a, b));
    check_and_remove(&img);
}
