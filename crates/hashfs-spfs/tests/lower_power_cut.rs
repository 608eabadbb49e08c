//! A power failure of the lower file system, for real: ext4 on a loop device whose backing
//! file is copied while the stack runs over it. The copy holds what the loop device was
//! given, which is what the disk would hold after a power cut at that instant (ext4's own
//! journal is replayed when the copy is mounted); its periodic commit is set past the
//! test's length, so nothing becomes durable below but what a sync made so. The PM image is
//! copied at the same instant, and a stack opened over the two must show every acknowledged
//! fsync.
//!
//! What it guards: where the stack takes something below as durable without a lower fsync
//! of its own. Files settled below (`settled.rs`), whose promotion at an open takes the
//! lower bytes as durable because a `syncfs` made them so: a file changed after the
//! `syncfs` began must not be promoted that way, and the `syncfs` must really run; either
//! mistake loses a file's bytes here. Files made in PM (`remake.rs`), whose creation below
//! no fsync made durable: a power cut takes the lower inode, and the stack must make the
//! file again from its PM copy's record. And the two steps where bytes cross from one side
//! to the other, which the stacked explorer (`crashtest.rs`, whose lower file never loses
//! a write) cannot judge: the profiler's promotion, which takes the lower file as durable
//! because the fsync that promotes it went below first, and write-back, which drops the PM
//! copy only after a lower fsync.
//!
//! Needs root, `losetup` and `mkfs.ext4` (under CI a missing one fails the test).

#[path = "../../hashfs-cli/tests/support/loop_ext4.rs"]
mod loop_ext4;
#[path = "../../hashfs-cli/tests/support/skip.rs"]
mod skip;

use hashfs_spfs::absorb::Key;
use hashfs_spfs::{Stack, StackConfig};
use loop_ext4::Ext4;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn available() -> bool {
    match loop_ext4::missing() {
        Some(why) => {
            skip::skip(why);
            false
        }
        None => true,
    }
}

fn open_stack(img: &Path, lower: &Path) -> (Arc<Stack>, hashfs_spfs::Recovery) {
    let dev = hashfs::pm::MmapDevice::open(img, hashfs::pm::OpenMode::Existing).unwrap();
    let (fs, _) = hashfs::FileSystem::mount(Arc::new(dev), &|_, _| {}).unwrap();
    let cfg = StackConfig::from_options(&["promote_after=3"]).unwrap();
    Stack::open(fs, lower, cfg).unwrap()
}

fn key(f: &File) -> Key {
    let m = f.metadata().unwrap();
    (m.dev(), m.ino())
}

/// Opens `dir/name` for appending as a front end does (its directory noted, then the rule
/// asked), appends `data` and fsyncs through the stack. Whether it was promoted at the open.
fn append_synced(s: &Stack, dir: &Path, name: &str, data: &[u8]) -> bool {
    let f = std::fs::OpenOptions::new().append(true).create(true).open(dir.join(name)).unwrap();
    let k = key(&f);
    s.file_in(k, key(&File::open(dir).unwrap()));
    let promoted = s.opened_for_writing(k, &f);
    let sh = s.opened(k);
    let mut st = sh.lock();
    let end = f.metadata().unwrap().len().max(st.pm.as_ref().map_or(0, |p| p.size));
    s.write(&mut st, &f, end, data).unwrap();
    s.fsync(&mut st, &f, hashfs::SyncScope::DataOnly).unwrap();
    drop(st);
    s.closed(k, &sh);
    promoted
}

/// What a user of the stack reads of `path`: the merged view if promoted, else the file.
fn view(s: &Stack, path: &Path) -> Vec<u8> {
    let f = File::open(path).unwrap();
    let sh = s.state(key(&f));
    let mut st = sh.lock();
    let size = st.pm.as_ref().map_or(f.metadata().unwrap().len(), |p| p.size) as usize;
    let mut buf = vec![0u8; size];
    let n = s.read(&mut st, &f, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// Fails with where `got` and `want` first differ (not the bytes: they are many).
fn same(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        panic!("{what}: {} bytes where {} were acknowledged, first difference at byte {at}", got.len(), want.len());
    }
}

#[test]
fn files_settled_below_keep_their_bytes_through_a_power_cut_of_the_lower_disk() {
    if !available() {
        return;
    }
    // Several blocks each: a promoted file's PM copy takes only the blocks it writes (the
    // last one, merged with the bytes below); the others are read from below.
    let old = b"delivered before the syncfs\n".repeat(1000);
    let late = b"delivered after the syncfs\n".repeat(1000);
    cut_after(
        |s, mail| {
            std::fs::write(mail.join("old"), &old).unwrap();
            std::thread::sleep(Duration::from_millis(150)); // older than the syncfs by its margin
            for i in 0..3 {
                // Three small fsyncs (below) make "mail" hot.
                assert!(!append_synced(s, mail, &format!("s{i}"), b"x"));
            }
            s.settle_now();
            std::fs::write(mail.join("late"), &late).unwrap();
            assert!(append_synced(s, mail, "old", b"appended in PM\n"), "old was not promoted at its open");
            assert!(
                !append_synced(s, mail, "late", b"appended below\n"),
                "late was promoted though changed after the syncfs"
            );
        },
        |s, mail, _| {
            same(&view(s, &mail.join("old")), &[&old[..], b"appended in PM\n"].concat(), "old after the cut");
            same(&view(s, &mail.join("late")), &[&late[..], b"appended below\n"].concat(), "late after the cut");
        },
    );
}

#[test]
fn a_file_made_in_pm_is_made_again_after_a_power_cut_of_the_lower_disk() {
    if !available() {
        return;
    }
    let message = b"made in PM, fsynced there\n".repeat(1000);
    cut_after(
        |s, mail| {
            for i in 0..3 {
                // Three small fsyncs (below) make "mail" hot.
                assert!(!append_synced(s, mail, &format!("s{i}"), b"x"));
            }
            // A message made there: promoted as it is made, so its fsync is absorbed and no
            // lower fsync commits its creation.
            let f = std::fs::OpenOptions::new().write(true).create_new(true).open(mail.join("new")).unwrap();
            let k = key(&f);
            let made = hashfs_spfs::standalone::Made {
                dir: key(&File::open(mail).unwrap()),
                dir_path: mail,
                name: b"new",
                flags: libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY,
            };
            assert!(s.created_in(&made, k, &f), "the message was not made in PM");
            let sh = s.opened(k);
            let mut st = sh.lock();
            s.write(&mut st, &f, 0, &message).unwrap();
            s.fsync(&mut st, &f, hashfs::SyncScope::DataOnly).unwrap();
            drop(st);
            s.closed(k, &sh);
        },
        |s, mail, rec| {
            // The cut took the lower creation (else this test tries nothing), and the stack
            // made it again.
            assert_eq!(rec.remade, 1, "{}", rec.repairs());
            same(&view(s, &mail.join("new")), &message, "the message after the cut");
        },
    );
}

/// A cut lower disk and PM, and a stack over their copies (after `work` is done by a stack
/// over a fresh ext4 whose directory `mail` exists).
fn cut_after(work: impl FnOnce(&Stack, &Path), check: impl FnOnce(&Stack, &Path, &hashfs_spfs::Recovery)) {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let pm = tempfile::tempdir_in("/dev/shm").unwrap();
    let (backing, cut) = (dir.path().join("lower.img"), dir.path().join("lower-cut.img"));
    let mnt = dir.path().join("mnt");
    File::create(&backing).unwrap().set_len(64 << 20).unwrap();
    let img = pm.path().join("pm.img");
    hashfs::FileSystem::format_file(&img, 32 << 20, &hashfs::FormatOptions::default(), &|_, _| {}).unwrap();
    {
        let ext4 = Ext4::up(&backing, &mnt, true);
        let mail = ext4.mnt.join("mail");
        std::fs::create_dir(&mail).unwrap();
        // The directory's creation durable: what is tested is the files in it.
        File::open(&mail).unwrap().sync_all().unwrap();
        let (s, _) = open_stack(&img, &ext4.mnt);
        work(&s, &mail);
        std::fs::copy(&backing, &cut).unwrap();
        std::fs::copy(&img, pm.path().join("pm-cut.img")).unwrap();
        drop(s);
    }
    let ext4 = Ext4::up(&cut, &mnt, false);
    let (s, rec) = open_stack(&pm.path().join("pm-cut.img"), &ext4.mnt);
    check(&s, &ext4.mnt.join("mail"), &rec);
}

/// Record `i` of a log: each a few blocks, so that a PM copy holds only some of a file's.
fn record(i: usize) -> Vec<u8> {
    format!("record {i:04} ").into_bytes().repeat(700)
}

#[test]
fn bytes_below_a_promotion_and_a_write_back_survive_a_power_cut_of_the_lower_disk() {
    if !available() {
        return;
    }
    // "log": appended and fsynced through the stack until the profiler promotes it (a few
    // small fsyncs, with promote_after=3), then appended in PM. "done": the same, then
    // written back (its PM copy dropped after a lower fsync). Neither is fsynced below after
    // that; the directory is not hot (no file is made or opened after it turns hot).
    let appended = |s: &Stack, mail: &Path, name: &str| {
        let mut promoted_at = None;
        for i in 0..6 {
            let f = std::fs::OpenOptions::new().append(true).create(true).open(mail.join(name)).unwrap();
            let k = key(&f);
            let sh = s.opened(k);
            let mut st = sh.lock();
            let end = f.metadata().unwrap().len().max(st.pm.as_ref().map_or(0, |p| p.size));
            s.write(&mut st, &f, end, &record(i)).unwrap();
            s.fsync(&mut st, &f, hashfs::SyncScope::DataOnly).unwrap();
            if st.pm.is_some() && promoted_at.is_none() {
                promoted_at = Some(i);
            }
            drop(st);
            s.closed(k, &sh);
        }
        // Promoted with records still to come (they go to PM).
        assert!(promoted_at.is_some_and(|i| i < 5), "{name} promoted at {promoted_at:?}");
    };
    let all: Vec<u8> = (0..6).flat_map(record).collect();
    cut_after(
        |s, mail| {
            appended(s, mail, "log");
            appended(s, mail, "done");
            let f = File::open(mail.join("done")).unwrap();
            let sh = s.state(key(&f));
            let mut st = sh.lock();
            s.write_back_locked(&mut st).unwrap();
            assert!(st.pm.is_none(), "done was not written back");
        },
        |s, mail, _| {
            same(&view(s, &mail.join("log")), &all, "log after the cut (promoted)");
            same(&view(s, &mail.join("done")), &all, "done after the cut (written back)");
        },
    );
}

/// A promotion that waited for passthrough handles to close (the mount's `passthrough=on`):
/// the fsync that asked for it went below, but the passthrough handles may have written
/// below after it, unsynced, before they closed. The promotion at the next open must not
/// take those bytes as durable: an fsync after it (absorbed in PM) covers them as POSIX
/// has it, whichever descriptor wrote them.
#[test]
fn a_promotion_deferred_past_passthrough_handles_keeps_their_later_writes_through_a_power_cut() {
    if !available() {
        return;
    }
    let all: Vec<u8> = (0..7).flat_map(record).collect();
    cut_after(
        |s, mail| {
            let f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(mail.join("wal")).unwrap();
            let k = key(&f);
            let (sh, pass) = s.opened_through(k, &f, true);
            assert!(pass, "the first open was not offered passthrough");
            // Written by the kernel to the lower file (passthrough), fsynced through the
            // daemon until the profiler asks for a promotion, which waits for the handle.
            let mut end = 0;
            let mut asked = None;
            for i in 0..5 {
                f.write_all_at(&record(i), end).unwrap();
                end += record(i).len() as u64;
                let mut st = sh.lock();
                s.fsync(&mut st, &f, hashfs::SyncScope::DataOnly).unwrap();
                if st.promote_pending {
                    asked = Some(i);
                    break;
                }
            }
            let asked = asked.expect("the profiler did not ask for a promotion");
            // Written after that fsync, by the passthrough handle, and never synced below.
            f.write_all_at(&record(asked + 1), end).unwrap();
            end += record(asked + 1).len() as u64;
            s.closed_through(k, &sh, true);
            // The next open makes the promotion; its write goes to PM and its fsync is
            // absorbed, acknowledging every byte of the file.
            let (sh, pass) = s.opened_through(k, &f, true);
            assert!(!pass && sh.lock().pm.is_some(), "the waiting promotion was not made at the open");
            let mut st = sh.lock();
            for i in asked + 2..7 {
                s.write(&mut st, &f, end, &record(i)).unwrap();
                end += record(i).len() as u64;
            }
            s.fsync(&mut st, &f, hashfs::SyncScope::DataOnly).unwrap();
            drop(st);
            s.closed(k, &sh);
            assert_eq!(end as usize, all.len());
        },
        |s, mail, _| same(&view(s, &mail.join("wal")), &all, "wal after the cut"),
    );
}
