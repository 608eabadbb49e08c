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

/// A name resolved and the inode it named then read, under one hold of the image
/// (`FileSystem::read_held` for a stat, `hold_image` for the calls that take the image
/// lock): another participant's rename over the name waits until the hold ends, so the
/// inode read is the one the name had (before, the shim's stat by path resolved and read
/// in two calls, and a rename between them freed the inode: ESTALE, in CI). The rename
/// is started once the name is resolved and given 100 ms to come between; it must not.
#[test]
fn a_rename_over_a_name_waits_for_a_call_that_resolved_it() {
    let img = Image::new("held");
    let (a, b) = (img.join(), img.join());
    for (hold, lock) in [("read_held", false), ("hold_image", true)] {
        a.write(p("/f"), b"old").unwrap();
        b.write(p("/t"), b"the new one").unwrap();
        let renamed = std::sync::atomic::AtomicBool::new(false);
        let (tx, rx) = std::sync::mpsc::channel();
        let seen = std::thread::scope(|s| {
            let (b, renamed) = (&b, &renamed);
            s.spawn(move || {
                rx.recv().unwrap();
                b.rename(p("/t"), p("/f")).unwrap();
                renamed.store(true, std::sync::atomic::Ordering::SeqCst);
            });
            let call = || {
                let ino = a.resolve(p("/f"))?;
                tx.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(100));
                assert!(!renamed.load(std::sync::atomic::Ordering::SeqCst), "{hold}: a rename came between");
                a.getattr(ino)
            };
            if lock {
                a.hold_image(call)
            } else {
                a.read_held(call)
            }
        });
        assert_eq!(seen.map(|m| m.size).map_err(|e| e.to_string()), Ok(3), "{hold}: the old file's size");
        assert_eq!(a.read(p("/f")).unwrap(), b"the new one", "{hold}: the rename, after");
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
    // The child writes, renames and removes files: calls its record describes.
    assert_eq!(survivor.shared_takeovers_scoped(), Some(takeovers), "a takeover recovered the whole image");
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

/// Regions that no last participant removed (every process of the image killed, the image
/// then deleted, as a test's temporary directory is) go when any image's first participant
/// makes its region; a region that a read-only participant still maps, though no slot names
/// a process, stays.
#[test]
fn a_region_its_participants_all_left_goes_with_the_next_region_made() {
    let killed = Image::new("swept");
    let killed_region = killed.region();
    drop(start_child(&killed).expect("the child joined")); // killed with SIGKILL
    assert!(killed_region.exists(), "no participant was left to remove the region");
    std::fs::remove_file(&killed.path).unwrap();
    std::mem::forget(killed); // its drop would remove the region
    let kept = Image::new("kept");
    let writer = kept.join();
    writer.write(p("/f"), b"read on").unwrap();
    let (reader, _) = FileSystem::open_read_only(&kept.path).unwrap();
    drop(writer); // the reader, which takes no slot, keeps the region
    assert!(kept.region().exists());

    let next = Image::new("sweeper");
    let fs = next.join();
    assert!(!killed_region.exists(), "a region nothing uses stayed when the next region was made");
    assert!(kept.region().exists(), "the region a read-only participant maps was removed");
    assert_eq!(reader.read(p("/f")).unwrap(), b"read on");
    drop((fs, reader));
    kept.check();
}

/// A participant that hands `/f`'s open description over to the program it execs (as the
/// shim does before `execve`), then execs `sleep`, which never joins: the handle goes to
/// `IMAGE.handle`.
#[test]
fn exec_child() {
    let Ok(image) = std::env::var("HASHFS_SHARED_CHILD") else { return };
    let (fs, _) = FileSystem::open_shared(Path::new(&image)).unwrap();
    let f = fs.open_file(p("/f"), OpenOptions::new().write(true).create(true)).unwrap();
    f.write_at(0, b"handed over").unwrap();
    let ino = f.metadata().unwrap().ino;
    let h = fs.share_description(ino, libc::O_RDONLY as u32, 3).unwrap().expect("a shared mount");
    std::fs::write(format!("{image}.handle"), format!("{} {}", h.index, h.generation)).unwrap();
    println!("joined");
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    let exec = fs.prepare_exec(&[h]).expect("a shared mount");
    std::mem::forget((exec, f, fs)); // as execve leaves them: not unmounted
    let e = std::os::unix::process::CommandExt::exec(std::process::Command::new("sleep").arg("60"));
    panic!("exec: {e}");
}

/// Two participants leave one right after the other, and the first's process still has
/// the image open when the last leaves (a program's exit runs on after the shim left, and
/// its descriptors close at the end): the first lets go of its hold on the image as it
/// leaves, so the last, alone, removes the region. Kept by a first that holds on
/// (`leaver-keeps-image-lock`), the region stayed after both processes ended (seen as a
/// region in /dev/shm after the shim's process tests, whose images were gone).
#[test]
fn the_last_to_leave_removes_the_region_while_an_earlier_leaver_still_has_the_image_open() {
    let img = Image::new("leavers");
    let (a, b) = (img.join(), img.join());
    b.write(p("/f"), b"b's").unwrap();
    b.shutdown().unwrap(); // left, its descriptor of the image open until dropped
    a.write(p("/g"), b"a's").unwrap();
    a.unmount().unwrap();
    assert!(!img.region().exists(), "the last to leave kept the region: an earlier leaver still held the image");
    drop(b);
    let (fs, report) = FileSystem::open(&img.path).unwrap();
    assert!(report.was_clean);
    assert_eq!(fs.read(p("/f")).unwrap(), b"b's");
    drop(fs);
    img.check();
}

/// A relative symbolic link with ".." in its target, followed on a shared mount: the walk
/// runs under the image lock's read side, and took the lock itself for the "..", waiting for
/// its own reader for ever (`find -L` through the shim hung so; `walk-dotdot-relocks`).
#[test]
fn a_link_up_and_over_resolves_on_a_shared_mount() {
    let img = Image::new("dotdot");
    let fs = img.join();
    fs.create_dir(p("/repo"), 0o755).unwrap();
    fs.write(p("/repo/a"), b"through the link").unwrap();
    fs.create_dir(p("/t"), 0o755).unwrap();
    fs.symlink(p("../repo"), p("/t/rel")).unwrap();
    // On a thread of its own, which a hung walk leaves behind when the test fails.
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        // A resolution (the shim's stat and open resolve so), then the read.
        let _ = tx.send(fs.resolve(p("/t/rel/a")).and_then(|ino| fs.read(p("/repo/a")).map(|r| (ino, r))));
        fs
    });
    let read = rx.recv_timeout(Duration::from_secs(10));
    assert!(read.is_ok(), "the walk through ../ hung");
    let (ino, bytes) = read.unwrap().unwrap();
    assert_eq!(bytes, b"through the link");
    let fs = reader.join().unwrap();
    assert_eq!(ino, fs.metadata(p("/repo/a")).unwrap().ino);
    fs.unmount().unwrap();
    img.check();
}

/// Tries to join `HASHFS_SHARED_CHILD` and prints why it could not (run as another user).
#[test]
fn joiner_of_another_user() {
    let Ok(image) = std::env::var("HASHFS_SHARED_CHILD") else { return };
    match FileSystem::open_shared(Path::new(&image)) {
        Ok(_) => println!("joined"),
        Err(e) => println!("refused: {e}"),
    }
}

/// A user who may write the image but not its region (made by root when the image was
/// 0644, the image made writable for all since) is refused with a message that says why
/// and what to do, in one readable sentence.
#[test]
fn a_region_another_user_made_is_refused_with_a_clear_message() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(std::env::var_os("CI").is_none(), "CI runs the tests as root");
        eprintln!("skipped: switching to another user needs root");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let img = Image::new("other-user");
    std::fs::set_permissions(&img.path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let a = img.join(); // the region: root's, 0644
    std::fs::set_permissions(&img.path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "joiner_of_another_user", "--nocapture", "--test-threads", "1"])
        .env("HASHFS_SHARED_CHILD", &img.path)
        .current_dir("/")
        .output()
        .expect("setpriv (util-linux)");
    let text = String::from_utf8_lossy(&out.stdout);
    // The harness prints the test's name on the line first.
    let line = text.lines().find_map(|l| l.find("refused: ").map(|i| &l[i..])).unwrap_or_default();
    assert!(
        line.contains("shared region is not writable by this user (made when the image had other permissions, or by another user); remove it when no process uses the image"),
        "{line:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(a);
    img.check();
}

/// A writer execs with a description handed over to the next program, and before that
/// program joins, a read-only participant, the only other process, leaves: no process
/// holds the image's lock in that window (the writer's descriptor of the image closed on
/// exec), but the region must stay, for the program finds its descriptors there. A reader
/// that removes it (`read-only-leaves-handover`) leaves the next program nothing to adopt.
#[test]
fn an_exec_handover_outlasts_a_read_only_participant_leaving_last() {
    let img = Image::new("exec-handover");
    let handle_file = std::path::PathBuf::from(format!("{}.handle", img.path.display()));
    struct Gone(std::path::PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _gone = Gone(handle_file.clone());
    // The reader first (it joins the region the child makes at its first call after it).
    // One that opened after the child joined was refused now and then, until 2026-12-03:
    // the child execs from a thread other than its main one, whose zombie main thread made
    // it look dead for a moment (`zombie-leader-dead`).
    let (reader, _) = FileSystem::open_read_only(&img.path).unwrap();
    let child = start_child_named(&img, "exec_child").expect("the child joined");
    let comm = format!("/proc/{}/comm", child.id());
    let t = Instant::now();
    while std::fs::read_to_string(&comm).unwrap_or_default().trim() != "sleep" {
        assert!(t.elapsed() < Duration::from_secs(20), "the child did not exec");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(reader.read(p("/f")).unwrap(), b"handed over");
    drop(reader);
    assert!(img.region().exists(), "the reader left last and removed the region an exec handed descriptions over in");
    let text = std::fs::read_to_string(&handle_file).unwrap();
    let mut words = text.split(' ').map(|w| w.parse::<u64>().unwrap());
    let h = hashfs::share::Handle { index: words.next().unwrap() as u32, generation: words.next().unwrap() };
    // This process plays the next program.
    let next = img.join();
    let ino = next.metadata(p("/f")).unwrap().ino;
    assert_eq!(next.adopt_inherited(&[h]), vec![Some((ino, libc::O_RDONLY as u32))]);
    assert_eq!(next.lock_offset(h).map(|at| at.get()), Some(3));
    next.release_description(h);
    drop(child);
    next.unmount().unwrap();
    img.check();
}

/// The image's superblock, changed by `f` and written over both copies (as another build,
/// or the media, could leave it).
fn rewrite_superblock(img: &Image, f: impl FnOnce(&mut hashfs::Superblock)) {
    use hashfs::pm::PmDevice;
    let dev = hashfs::pm::MmapDevice::open(&img.path, hashfs::pm::OpenMode::Existing).unwrap();
    let (mut sb, _, _) = hashfs::read_superblock(&dev).unwrap();
    f(&mut sb);
    sb.seal();
    for off in [0, 4096] {
        dev.write(hashfs::pm::DevOffset(off), bytemuck::bytes_of(&sb));
    }
    dev.fence();
}

/// Files made by a mount of one process, which leaves its counts in the superblock as it
/// unmounts: their inode numbers, and the totals it showed.
fn files_left_by_one_process(img: &Image) -> (Vec<hashfs::Ino>, hashfs::StatFs) {
    let (fs, _) = FileSystem::open(&img.path).unwrap();
    fs.create_dir(p("/d"), 0o755).unwrap();
    for name in ["/a", "/b", "/d/c"] {
        fs.write(p(name), &vec![7u8; 20_000]).unwrap();
    }
    let inos = ["/", "/a", "/b", "/d", "/d/c"].iter().map(|n| fs.metadata(p(n)).unwrap().ino).collect();
    let totals = fs.statfs();
    fs.unmount().unwrap();
    (inos, totals)
}

/// A participant alone on a cleanly unmounted image reads neither the inode table nor the
/// table (`MountAs::First`): it takes the counts the unmount left in the superblock, and
/// builds the region's inode bitmap at its first allocation. A free before that (only the
/// count changes), then creates in it and in a second participant take no inode in use;
/// the counts stay right through the next unmount, which a mount that reads the tables
/// checks (it refuses counts that disagree), also when a participant only removed a file
/// (its bitmap never built). Deliberate bugs: `summary-bits-unbuilt` (the bitmap never
/// built: the first create takes the root's inode), `summary-free-uncounted` (a free
/// before the bitmap is built not counted: statfs and the next unmount's counts one off).
#[test]
fn a_first_participant_takes_a_clean_unmounts_counts() {
    let img = Image::new("summary");
    let (inos, totals) = files_left_by_one_process(&img);
    let (a, report) = FileSystem::open_shared(&img.path).unwrap();
    assert!(report.from_summary, "the first participant scanned a cleanly unmounted image");
    assert_eq!(a.statfs(), totals, "the counts it took");
    a.remove_file(p("/a")).unwrap();
    let b = img.join();
    let mut made = Vec::new();
    for (fs, name) in [(&a, "/e"), (&b, "/f"), (&a, "/d/g")] {
        fs.write(p(name), b"new").unwrap();
        made.push(fs.metadata(p(name)).unwrap().ino);
    }
    b.create_dir(p("/h"), 0o700).unwrap();
    made.push(b.metadata(p("/h")).unwrap().ino);
    for ino in &made {
        assert!(!inos[..1].contains(ino) && !inos[2..].contains(ino), "a new file took inode {ino}, in use: {inos:?}");
    }
    assert_eq!(a.read(p("/b")).unwrap(), vec![7u8; 20_000]);
    assert_eq!(b.read(p("/d/c")).unwrap(), vec![7u8; 20_000]);
    let now = a.statfs();
    assert_eq!(now.inodes_free, totals.inodes_free + 1 - 4, "one removed, four made");
    assert_eq!(now, b.statfs());
    drop((a, b));
    let (fs, report) = FileSystem::open(&img.path).expect("the counts the last participant left are the tables'");
    assert!(report.was_clean && !report.from_summary);
    assert_eq!(fs.statfs(), now);
    drop(fs);
    // A participant that only removes a file never builds the bitmap: the count alone.
    let (c, report) = FileSystem::open_shared(&img.path).unwrap();
    assert!(report.from_summary);
    c.remove_file(p("/b")).unwrap();
    assert_eq!(c.statfs().inodes_free, now.inodes_free + 1, "a free before the bitmap is built");
    drop(c);
    let (fs, _) = FileSystem::open(&img.path).expect("the counts a participant that only freed left");
    assert_eq!(fs.statfs().inodes_free, now.inodes_free + 1);
    drop(fs);
    img.check();
}

/// Counts a clean unmount left are taken only at the mount count they were taken at: a
/// build that does not keep them (an older one) counts its mount and leaves them as they
/// were, and they are not the image's then. Deliberate bug `summary-stamp-ignored`.
#[test]
fn counts_an_older_build_left_behind_are_not_taken() {
    let img = Image::new("summary-stale");
    let (_, before) = files_left_by_one_process(&img);
    let mut left = None;
    rewrite_superblock(&img, |sb| left = Some((sb.summary_inodes, sb.summary_slots, sb.summary_stamp)));
    let (fs, _) = FileSystem::open(&img.path).unwrap();
    fs.write(p("/later"), &vec![1u8; 50_000]).unwrap();
    drop(fs);
    // What an older build leaves: its mount counted, the counts of the mount before.
    let (inodes, slots, stamp) = left.unwrap();
    rewrite_superblock(&img, |sb| (sb.summary_inodes, sb.summary_slots, sb.summary_stamp) = (inodes, slots, stamp));
    let (a, report) = FileSystem::open_shared(&img.path).unwrap();
    assert!(!report.from_summary, "counts taken at mount {stamp} were taken at mount {}", stamp + 1);
    let st = a.statfs();
    assert_eq!(st.inodes_free, before.inodes_free - 1);
    assert!(st.blocks_free < before.blocks_free);
    drop(a);
    img.check();
}

/// Counts in the superblock that disagree with the tables (the media, or a bug): a mount
/// that reads the tables refuses the image and names fsck, which finds them and drops
/// them; the next first participant scans, and its unmount leaves counts again. Deliberate
/// bug `summary-not-checked`.
#[test]
fn counts_that_disagree_with_the_tables_are_refused_and_repaired() {
    use hashfs::fsck::{fsck, FsckMode};
    let img = Image::new("summary-wrong");
    files_left_by_one_process(&img);
    rewrite_superblock(&img, |sb| sb.summary_inodes += 3);
    let e = FileSystem::open(&img.path).err().expect("a mount that reads the tables checks the counts");
    assert!(e.to_string().contains("fsck --repair"), "{e}");
    let dev = || std::sync::Arc::new(hashfs::pm::MmapDevice::open(&img.path, hashfs::pm::OpenMode::Existing).unwrap());
    let found = fsck(dev(), FsckMode::Check, &|_, _| {}).unwrap();
    assert!(found.findings.iter().any(|f| f.contains("last clean unmount counted")), "{:?}", found.findings);
    let fixed = fsck(dev(), FsckMode::Repair, &|_, _| {}).unwrap();
    assert!(fixed.remaining.is_empty(), "{:?}", fixed.remaining);
    let (a, report) = FileSystem::open_shared(&img.path).unwrap();
    assert!(!report.from_summary, "counts fsck dropped");
    drop(a);
    let (a, report) = FileSystem::open_shared(&img.path).unwrap();
    assert!(report.from_summary, "the last participant's unmount left counts again");
    drop(a);
    img.check();
}

/// A participant that changes files made before it without making any (no inode taken, so
/// a region's bitmap left unbuilt stays so): appends to /a, cuts it back, renames /b and back.
#[test]
fn grower() {
    let Ok(image) = std::env::var("HASHFS_SHARED_CHILD") else { return };
    let (fs, _) = FileSystem::open_shared(Path::new(&image)).unwrap();
    println!("joined");
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    let mut a = fs.open_file(p("/a"), OpenOptions::new().write(true).append(true)).unwrap();
    loop {
        std::io::Write::write_all(&mut a, &[7u8; 3000]).unwrap();
        if a.metadata().unwrap().size > 200_000 {
            a.set_len(20_000).unwrap();
        }
        fs.rename(p("/b"), p("/b2")).unwrap();
        fs.rename(p("/b2"), p("/b")).unwrap();
    }
}

/// A participant dies inside a call while the region's inode bitmap is not built (a first
/// participant took a clean unmount's counts and no one has made a file since): the
/// survivor's takeover recovers, every file is whole, and the survivor, last to leave,
/// leaves counts the next first participant takes again. Deliberate bug
/// `takeover-scans-unbuilt-bits` (the recovery reads the inodes of a bitmap not built,
/// none: every file's blocks are freed as strays).
#[test]
fn a_takeover_before_the_inode_bitmap_is_built_recovers_every_file() {
    let img = Image::new("summary-takeover");
    files_left_by_one_process(&img);
    let mut takeovers = 0;
    for round in 0..8u64 {
        let (survivor, report) = FileSystem::open_shared(&img.path).unwrap();
        assert!(report.from_summary, "round {round}: the image was left clean with its counts");
        let child = start_child_named(&img, "grower").expect("the grower joined");
        std::thread::sleep(Duration::from_millis(15 + 23 * (round % 4)));
        drop(child);
        let size = survivor.metadata(p("/a")).unwrap().size;
        assert!(survivor.read(p("/a")).unwrap().iter().all(|&c| c == 7), "round {round}: /a's {size} bytes");
        assert_eq!(survivor.read(p("/d/c")).unwrap(), vec![7u8; 20_000], "round {round}: /d/c");
        assert!(survivor.exists(p("/b")) || survivor.exists(p("/b2")), "round {round}: /b lost");
        takeovers += survivor.shared_takeovers().unwrap();
        if survivor.exists(p("/b2")) {
            survivor.rename(p("/b2"), p("/b")).unwrap();
        }
        survivor.unmount().unwrap();
        img.check();
    }
    assert!(takeovers > 0, "no kill landed inside a call: the test exercised no takeover");
}

/// A participant spawns a program with an unlinked file's description and closes the file
/// at once: the file stays by its description (a live one while a program is on its way
/// counts as open elsewhere, `FsInner::open_elsewhere`) until the program has opened it
/// (`description-holds-nothing`; before 2026-12-07 the parent kept its hold for the
/// program, `fs/shared/for_children.rs`). A file opened after the spawn and closed is
/// freed at once. This process plays the program (a second mount).
#[test]
fn a_spawned_programs_file_is_kept_until_the_program_opened_it() {
    let img = Image::new("spawn-keeps");
    let parent = img.join();
    let mut rw = OpenOptions::new();
    rw.read(true).write(true).create(true);
    let f = parent.open_file(p("/o"), &rw).unwrap();
    f.write_at(0, &[b'o'; 10_000]).unwrap();
    parent.remove_file(p("/o")).unwrap();
    let ino = f.ino();
    let h = parent.share_description(ino, libc::O_RDONLY as u32, 0).unwrap().expect("a shared mount");
    let spawn = parent.prepare_spawn(&[h], false).expect("a shared mount");
    drop(f); // closed right after the spawn
    let free = parent.statfs().inodes_free;
    let late = parent.open_file(p("/late"), &rw).unwrap();
    late.write_at(0, b"made after the spawn").unwrap();
    drop(late);
    parent.remove_file(p("/late")).unwrap();
    assert_eq!(parent.statfs().inodes_free, free, "a file opened after the spawn waited for the program");
    let program = img.join();
    assert_eq!(program.adopt_inherited(&[h]), vec![Some((ino, libc::O_RDONLY as u32))]);
    parent.write(p("/tick"), b"1").unwrap(); // a call of the parent's between the adoption and the open
    let access = hashfs::Access { read: true, write: false, append: false };
    let g = program.open_ino(ino, access).expect("the program's inherited file was freed before it opened it");
    program.inherited_opened(None);
    parent.write(p("/tick"), b"2").unwrap(); // the parent lets go of its hold now
    let mut buf = vec![0u8; 10_000];
    assert_eq!(g.read_at(0, &mut buf).unwrap(), 10_000);
    assert!(buf.iter().all(|&b| b == b'o'), "the program read another file's bytes");
    drop(g);
    program.release_description(h);
    drop(spawn);
    program.unmount().unwrap();
    parent.unmount().unwrap();
    img.check();
}
