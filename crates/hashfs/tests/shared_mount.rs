//! Many participants on one image (issue 55, `fs/shared/mod.rs`): what one changes, the next
//! call of another sees; an unlinked file stays while anyone has it open; the last to
//! leave marks the image clean; a participant killed inside a call is recovered by the
//! next. Two mounts in one test process are two participants (each has its own caches);
//! the killed one is this binary run again (`HASHFS_SHARED_CHILD`).

mod common;

use common::shared_image::{start_child_named, Image, Killed};
use hashfs::{FileSystem, OpenOptions};
use std::path::Path;
use std::time::{Duration, Instant};

fn p(s: &str) -> &Path {
    Path::new(s)
}

#[test]
fn a_change_in_one_participant_is_seen_by_the_next_call_of_another() {
    let img = Image::new("seen");
    let (a, b) = (img.join(), img.join());
    a.create_dir(p("/d"), 0o755).unwrap();
    a.write(p("/d/f"), b"first").unwrap();
    assert_eq!(b.read(p("/d/f")).unwrap(), b"first", "a create and write");
    // Both cache the file now; each change below must reach the other's cached copy.
    let mut fa = a.open_file(p("/d/f"), OpenOptions::new().write(true).append(true)).unwrap();
    std::io::Write::write_all(&mut fa, &vec![b'x'; 10_000]).unwrap();
    let seen = b.read(p("/d/f")).unwrap();
    assert_eq!(seen.len(), 10_005, "an append's size");
    assert!(seen[5..].iter().all(|&c| c == b'x'), "an append's bytes");
    assert_eq!(b.metadata(p("/d/f")).unwrap().mtime_ns, a.metadata(p("/d/f")).unwrap().mtime_ns, "a write's times");
    // Small appends take one fence and leave the size tagged on the media
    // (`fs/hashfs/append_tag.rs`): the other reads it plain, and makes it plain itself
    // before it overwrites those bytes.
    for _ in 0..3 {
        std::io::Write::write_all(&mut fa, b"tail").unwrap();
        assert_eq!(b.metadata(p("/d/f")).unwrap().size, a.metadata(p("/d/f")).unwrap().size, "a small append's size");
    }
    assert!(b.read(p("/d/f")).unwrap().ends_with(b"tailtailtail"));
    let fb = b.open_file(p("/d/f"), OpenOptions::new().write(true)).unwrap();
    fb.write_at(10_005 + 8, b"TAIL").unwrap();
    drop(fb);
    assert!(a.read(p("/d/f")).unwrap().ends_with(b"tailtailTAIL"), "an overwrite of appended bytes");
    // An overwrite keeps its times in DRAM until fsync; the other sees them anyway.
    a.open_file(p("/d/f"), OpenOptions::new().write(true)).unwrap().write_at(0, b"F").unwrap();
    assert_eq!(
        b.metadata(p("/d/f")).unwrap().mtime_ns,
        a.metadata(p("/d/f")).unwrap().mtime_ns,
        "an overwrite's times"
    );
    b.rename(p("/d/f"), p("/d/g")).unwrap();
    assert!(!a.exists(p("/d/f")) && a.exists(p("/d/g")), "a rename");
    fa.set_len(3).unwrap();
    assert_eq!(b.read(p("/d/g")).unwrap(), b"Fir", "a truncation through an open file");
    b.set_permissions(p("/d/g"), 0o600).unwrap();
    assert_eq!(a.metadata(p("/d/g")).unwrap().perm, 0o600, "a chmod");
    let g = a.resolve(p("/d/g")).unwrap();
    a.set_xattr(g, b"user.k", b"v", hashfs::XattrMode::Any).unwrap();
    assert_eq!(b.get_xattr(g, b"user.k").unwrap(), b"v", "an attribute");
    drop(fa);
    a.remove_file(p("/d/g")).unwrap();
    assert!(!b.exists(p("/d/g")), "an unlink");
    let names: Vec<_> = (0..50).map(|i| format!("/d/n{i}")).collect();
    for n in &names {
        b.write(p(n), n.as_bytes()).unwrap();
    }
    assert_eq!(a.read_dir(p("/d")).unwrap().len(), 50, "creates in a listed directory");
    assert_eq!(a.statfs().blocks_free, b.statfs().blocks_free, "the free blocks");
    assert_eq!(a.statfs().inodes_free, b.statfs().inodes_free, "the free inodes");
    drop((a, b));
    img.check();
}

#[test]
fn an_unlinked_file_stays_while_another_participant_has_it_open() {
    let img = Image::new("orphan");
    let (a, b) = (img.join(), img.join());
    a.write(p("/keep"), b"").unwrap(); // the root's first block
    let free = a.statfs().blocks_free;
    a.write(p("/f"), &vec![7u8; 64 << 10]).unwrap();
    let f = a.open_file(p("/f"), OpenOptions::new().read(true).write(true)).unwrap();
    b.remove_file(p("/f")).unwrap();
    assert!(!a.exists(p("/f")));
    // A participant that joins now finds the unlinked file, open elsewhere, and keeps it.
    let c = img.join();
    assert!(c.statfs().blocks_free < free);
    let mut buf = vec![0u8; 64 << 10];
    assert_eq!(f.read_at(0, &mut buf).unwrap(), buf.len());
    assert!(buf.iter().all(|&c| c == 7), "the unlinked file's bytes, read where it is open");
    f.write_at(64 << 10, b"more").unwrap();
    assert!(b.statfs().blocks_free < free, "freed while open elsewhere");
    drop(f);
    assert_eq!(b.statfs().blocks_free, free, "not freed at its last close");
    drop((a, b, c));
    img.check();
}

#[test]
fn the_last_participant_to_leave_marks_the_image_clean() {
    let img = Image::new("leave");
    let (a, b) = (img.join(), img.join());
    a.write(p("/f"), b"x").unwrap();
    let busy = FileSystem::open(&img.path).err().expect("a mount of one process while participants use it");
    assert_eq!(busy.errno(), libc::EBUSY);
    a.unmount().unwrap();
    assert!(FileSystem::open(&img.path).is_err(), "the image is free while a participant is left");
    b.write(p("/g"), b"y").unwrap();
    b.unmount().unwrap();
    let (fs, report) = FileSystem::open(&img.path).unwrap();
    assert!(report.was_clean, "the last to leave marked it clean");
    assert_eq!(fs.read(p("/g")).unwrap(), b"y");
    drop(fs);
    img.check();
    // The next participant after a clean unmount mounts as the first again.
    let c = img.join();
    assert_eq!(c.read(p("/f")).unwrap(), b"x");
}

/// Two participants that leave at the same moment: one of them is the last, and marks the
/// image clean. (The region may stay: the last one removes it only if no other process
/// still has the image open, and the other may not have closed it yet.)
#[test]
fn two_participants_leaving_at_once_leave_the_image_clean() {
    let img = Image::new("leave-at-once");
    for round in 0..40 {
        let (a, b) = (img.join(), img.join());
        a.write(p("/f"), b"x").unwrap();
        let go = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            for fs in [a, b] {
                let go = &go;
                s.spawn(move || {
                    go.wait();
                    fs.unmount().unwrap();
                });
            }
        });
        let (fs, report) = FileSystem::open(&img.path).unwrap();
        assert!(report.was_clean, "round {round}: neither marked the image clean");
        drop(fs);
    }
}

#[test]
fn threads_of_two_participants_creating_in_one_directory() {
    const PER_THREAD: usize = 300;
    let img = Image::new("threads");
    let (a, b) = (img.join(), img.join());
    a.create_dir(p("/d"), 0o755).unwrap();
    std::thread::scope(|s| {
        for (who, fs) in [("a", &a), ("b", &b)] {
            for t in 0..2 {
                s.spawn(move || {
                    for i in 0..PER_THREAD {
                        let name = format!("/d/{who}{t}-{i}");
                        fs.write(p(&name), name.as_bytes()).unwrap();
                        if i % 3 == 0 {
                            fs.rename(p(&name), p(&format!("{name}.r"))).unwrap();
                        }
                    }
                });
            }
        }
    });
    for fs in [&a, &b] {
        let list = fs.read_dir(p("/d")).unwrap();
        assert_eq!(list.len(), 4 * PER_THREAD);
        for e in list {
            let name = String::from_utf8(e.name.clone()).unwrap();
            let data = fs.read(&p("/d").join(&name)).unwrap();
            assert_eq!(format!("/d/{}", name.trim_end_matches(".r")).as_bytes(), &data[..]);
        }
    }
    drop((a, b));
    img.check();
}

/// Starts a child participant on `img` and waits until it has joined the image (20 s at
/// most): None when it could not (a joining mount that finds the image inconsistent, as a
/// death left unrecovered leaves it, fails, and the child says nothing).
fn start_child(img: &Image) -> Option<Killed> {
    start_child_named(img, "child")
}

/// The killed participant: renames files into place forever (each written whole first).
#[test]
fn child() {
    let Ok(image) = std::env::var("HASHFS_SHARED_CHILD") else { return };
    let (fs, _) = FileSystem::open_shared(Path::new(&image)).unwrap();
    let _ = fs.create_dir(p("/c"), 0o755);
    println!("joined");
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    for i in 0u64.. {
        let tmp = format!("/c/tmp{i}");
        fs.write(p(&tmp), &vec![(i % 251) as u8; 5000 + (i % 7) as usize * 1000]).unwrap();
        fs.rename(p(&tmp), p(&format!("/c/f{i}"))).unwrap();
        if i >= 20 {
            let _ = fs.remove_file(p(&format!("/c/f{}", i - 20)));
        }
    }
}

/// A participant that holds `/held` open until it is killed.
#[test]
fn holder() {
    let Ok(image) = std::env::var("HASHFS_SHARED_CHILD") else { return };
    let (fs, _) = FileSystem::open_shared(Path::new(&image)).unwrap();
    let _held = fs.open_file(p("/held"), OpenOptions::new().read(true)).unwrap();
    println!("joined");
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A participant of `img` that has unlinked /held, which a child held open and still does
/// in the region: the child was killed (outside a call), so the participant's last close
/// did not free the file.
fn an_orphan_a_killed_holder_kept(img: &Image) -> FileSystem {
    let a = img.join();
    a.write(p("/held"), b"kept open by the child").unwrap();
    let f = a.open_file(p("/held"), OpenOptions::new().read(true)).unwrap();
    let child = start_child_named(img, "holder").expect("the holder joined");
    drop(child); // killed with SIGKILL, its hold on /held left in the region
    a.remove_file(p("/held")).unwrap();
    drop(f); // the child's bit still set: not freed here
    a
}

/// The next mount of `img`, which the last to leave must have marked clean with /held
/// freed (a clean image with an unlinked inode in it is refused).
fn mount_after_the_last_left(img: &Image) -> FileSystem {
    let (fs, report) = FileSystem::open(&img.path).expect("the next mount accepts the image");
    assert!(report.was_clean, "the last to leave marked the image clean");
    assert!(fs.read(p("/held")).is_err());
    fs
}

/// A participant killed while it holds an unlinked file open, outside a call: the others
/// do not free the file at their last close (its holder's bit is still set until a join
/// reaps it), so the last to leave frees it before it marks the image clean.
#[test]
fn the_last_to_leave_frees_what_a_killed_holder_kept() {
    let img = Image::new("orphan");
    an_orphan_a_killed_holder_kept(&img).unmount().unwrap();
    drop(mount_after_the_last_left(&img));
    img.check();
}

/// As above, but a participant joining in between finds the holder dead and reaps its
/// slot (its bit on /held released): nothing in the region names the dead one any more
/// when the last participant leaves, which must look for the orphan all the same (the join
/// noted a death: `ImageWords::leftovers`; a last leaver that finds nothing to look for
/// reads no more of the inode table than its own open files).
#[test]
fn the_last_to_leave_frees_what_a_reaped_holder_kept() {
    let img = Image::new("orphan-reaped");
    let a = an_orphan_a_killed_holder_kept(&img);
    let c = img.join(); // reaps the dead holder's slot
    c.write(p("/c"), b"the joiner's").unwrap();
    c.unmount().unwrap();
    a.unmount().unwrap();
    let fs = mount_after_the_last_left(&img);
    assert_eq!(fs.read(p("/c")).unwrap(), b"the joiner's");
    drop(fs);
    img.check();
}

#[test]
fn a_participant_killed_inside_a_call_is_recovered_by_the_next() {
    let img = Image::new("killed");
    let survivor = img.join();
    let mut takeovers = 0;
    for round in 0..20u64 {
        // Each child joins the image the last one died in.
        let child = start_child(&img);
        assert!(child.is_some(), "round {round}: the child could not join the image (a death left unrecovered?)");
        std::thread::sleep(Duration::from_millis(20 + 37 * (round % 5)));
        drop(child);
        // The survivor's next call takes the lock over within a bound and recovers.
        let t = Instant::now();
        let list = survivor.read_dir(p("/c")).unwrap_or_default();
        assert!(t.elapsed() < Duration::from_secs(2), "the next call waited {:?}", t.elapsed());
        for e in list {
            let name = String::from_utf8(e.name.clone()).unwrap();
            let data = survivor.read(&p("/c").join(&name)).unwrap();
            if let Some(i) = name.strip_prefix('f').and_then(|n| n.parse::<u64>().ok()) {
                assert_eq!(data.len(), 5000 + (i % 7) as usize * 1000, "{name} is whole");
                assert!(data.iter().all(|&c| c == (i % 251) as u8), "{name}'s bytes");
            }
        }
        takeovers = survivor.shared_takeovers().unwrap();
    }
    assert!(takeovers > 0, "no kill landed inside a call: the test exercised no takeover");
    survivor.unmount().unwrap();
    img.check();
}

/// The only participant killed inside a call: the next to join finds the lock's holder
/// dead and no one alive, and mounts as after a power failure.
#[test]
fn the_only_participant_killed_is_recovered_by_the_next_to_join() {
    let img = Image::new("alone");
    for round in 0..6u64 {
        let child = start_child(&img);
        assert!(child.is_some(), "round {round}: the child could not join");
        std::thread::sleep(Duration::from_millis(30 + 41 * round));
        drop(child);
        let (fs, report) = FileSystem::open_shared(&img.path).unwrap();
        assert!(!report.was_clean, "round {round}: a dead participant's image mounted as clean");
        for e in fs.read_dir(p("/c")).unwrap() {
            let name = String::from_utf8(e.name.clone()).unwrap();
            if let Some(i) = name.strip_prefix('f').and_then(|n| n.parse::<u64>().ok()) {
                assert_eq!(fs.read(&p("/c").join(&name)).unwrap().len(), 5000 + (i % 7) as usize * 1000);
            }
        }
        fs.unmount().unwrap();
        img.check();
    }
}

#[test]
fn the_region_file_goes_with_the_last_participant_and_comes_back_with_the_next() {
    let img = Image::new("region");
    let (a, b) = (img.join(), img.join());
    assert!(img.region().exists());
    a.write(p("/f"), b"1").unwrap();
    drop(a);
    assert!(img.region().exists(), "removed while a participant is left");
    drop(b);
    assert!(!img.region().exists(), "left behind by the last participant");
    let c = img.join();
    assert!(img.region().exists());
    assert_eq!(c.read(p("/f")).unwrap(), b"1");
}
