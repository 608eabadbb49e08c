//! What common calls cost in fences, pinned: first SQLite's rollback journal
//! (`journal_mode=DELETE`), its calls as `strace` shows one transaction make them: the
//! journal created, its header and page records written (appends of 4 and 4,096 bytes),
//! its header rewritten at offset 0, two database pages overwritten, the journal unlinked.
//! On HashFS an unlink of a file no one has open frees it in the transaction that removes
//! its name (`fs/hashfs/unlink.rs`: four fences, not nine), and a rewrite of bytes a
//! one-fence append's check does not cover leaves its size tagged
//! (`fs/hashfs/append_tag.rs`: one fence, not two). A rename over a file's last link (an
//! atomic replacement: editors, git's index, RocksDB's `CURRENT`) and an rmdir free the
//! same way, a truncation frees its slots with one fence after its transaction's, and an
//! open with `O_CREAT | O_TRUNC` that makes its file truncates nothing (a shell's `>`), and
//! a chown to the owner a file has (SQLite's of each journal) stores its change time in place.
//! The crash explorer covers every crash state of these (`unlink-small`, `rmdir`,
//! `rename-over-small`, `truncate-down`, `overwrite-small` after `append-small`); these
//! tests pin the cost and the reuse of a freed inode's number.

mod common;

use common::{assert_fsck_clean, new_fs, remount, small_opts, test_mapping, Fs};
use hashfs::pm::{CrashDevice, PmDevice};
use hashfs::{FormatOptions, HashPlacement, Lblk, MappingKind, OpenOptions};
use std::path::Path;

const MIB: u64 = 1 << 20;

fn p(s: &str) -> &Path {
    Path::new(s)
}

fn rw() -> OpenOptions {
    OpenOptions::new().read(true).write(true).create(true).clone()
}

fn opts() -> FormatOptions {
    FormatOptions { placement: HashPlacement::Paper, ..small_opts() }
}

fn fences(dev: &CrashDevice, w: impl FnOnce()) -> u64 {
    let before = dev.stats().snapshot();
    w();
    dev.stats().snapshot().since(&before).fences
}

/// One transaction's calls on the journal `/db-journal` and the database `/db`; the
/// fences of the header's rewrite and of the unlink.
fn one_transaction(fs: &Fs, dev: &CrashDevice, round: u8) -> (u64, u64) {
    let db = fs.open_file(p("/db"), &rw()).unwrap();
    let j = fs.open_file(p("/db-journal"), &rw()).unwrap();
    j.write_at(0, &[round; 512]).unwrap();
    let mut at = 512;
    for page in 0..2u8 {
        for len in [4usize, 4096, 4] {
            j.write_at(at, &vec![page ^ round; len]).unwrap();
            at += len as u64;
        }
    }
    j.sync_data().unwrap();
    let rewrite = fences(dev, || {
        j.write_at(0, &[round ^ 0xFF; 12]).unwrap();
    });
    j.sync_data().unwrap();
    db.write_at(0, &[round; 4096]).unwrap();
    db.write_at(4096, &[round; 4096]).unwrap();
    db.sync_data().unwrap();
    drop(j);
    let unlink = fences(dev, || fs.remove_file(p("/db-journal")).unwrap());
    (rewrite, unlink)
}

#[test]
fn a_rollback_journal_transaction_rewrites_its_header_in_one_fence_and_unlinks_in_four() {
    let (fs, dev) = new_fs(16 * MIB, &opts());
    for round in 0..3 {
        let (rewrite, unlink) = one_transaction(&fs, &dev, round);
        if test_mapping() == MappingKind::HashFs {
            assert_eq!(rewrite, 1, "round {round}: the header's rewrite leaves the last record's tag");
            assert_eq!(unlink, 4, "round {round}: the unlink frees the journal in its own transaction");
        } else {
            // Other mappings: no tags, and the free after the name's transaction.
            assert_eq!(rewrite, 1, "round {round}: an overwrite");
            assert!(unlink >= 6, "round {round}: {unlink} fences on {:?}", test_mapping());
        }
        assert!(fs.metadata(p("/db-journal")).is_err());
    }
    assert_eq!(fs.read(p("/db")).unwrap(), vec![2u8; 8192]);
    let (fs, dev) = remount(fs, dev);
    assert_eq!(fs.read(p("/db")).unwrap(), vec![2u8; 8192]);
    drop(fs);
    assert_fsck_clean(&dev);
}

/// A file with an attribute, or one still open, is freed the general way (its attribute
/// inode goes in the free's transaction; an open one at its last close): the cost of that
/// path is what the fast one is measured against.
#[test]
fn an_unlink_of_a_file_with_an_attribute_or_a_handle_takes_the_general_path() {
    if test_mapping() != MappingKind::HashFs {
        return;
    }
    let (fs, dev) = new_fs(16 * MIB, &opts());
    fs.write(p("/x"), &[1u8; 9000]).unwrap();
    let x = fs.resolve(p("/x")).unwrap();
    fs.set_xattr(x, b"user.a", b"1", hashfs::XattrMode::Create).unwrap();
    let n = fences(&dev, || fs.remove_file(p("/x")).unwrap());
    assert!(n >= 9, "an attribute inode to free: {n} fences");
    fs.write(p("/y"), &[2u8; 9000]).unwrap();
    let y = fs.open_file(p("/y"), &rw()).unwrap();
    fs.remove_file(p("/y")).unwrap();
    assert_eq!(y.read_at(0, &mut [0u8; 1]).unwrap(), 1, "open after its unlink");
    drop(y);
    drop(fs);
    assert_fsck_clean(&dev);
}

/// The number an unlink gives back is taken by the next create: its blocks read as what
/// it wrote and holes as zeros, never the old file's bytes (its keys are tombstoned before
/// the number is free), through a remount.
#[test]
fn a_freed_number_taken_again_shows_none_of_the_old_file() {
    let (fs, dev) = new_fs(16 * MIB, &opts());
    fs.write(p("/old"), &vec![0xAB; 5 * 4096]).unwrap();
    let ino = fs.resolve(p("/old")).unwrap();
    fs.remove_file(p("/old")).unwrap();
    let f = fs.open_file(p("/new"), &rw()).unwrap();
    assert_eq!(f.ino(), ino, "the freed number is taken again (the test's premise)");
    f.write_at(3 * 4096, &[1u8; 10]).unwrap();
    drop(f);
    let mut want = vec![0u8; 3 * 4096];
    want.extend_from_slice(&[1u8; 10]);
    assert!(fs.read(p("/new")).unwrap() == want, "holes read as zeros, not the old file's bytes");
    if test_mapping() == MappingKind::HashFs {
        for l in [0, 1, 2, 4] {
            assert!(fs.physical_block(ino, Lblk(l)).unwrap().is_none(), "no key of the old file at {l}");
        }
    }
    let (fs, dev) = remount(fs, dev);
    assert!(fs.read(p("/new")).unwrap() == want, "the same after a remount");
    drop(fs);
    assert_fsck_clean(&dev);
}

/// A rename over a file that has no other link frees it in the rename's transaction (four
/// fences on HashFS); over one with another link it only drops a link, and the other name
/// still reads the file.
#[test]
fn a_rename_over_a_last_link_frees_the_file_and_over_another_link_keeps_it() {
    let (fs, dev) = new_fs(16 * MIB, &opts());
    fs.write(p("/target"), &[1u8; 9000]).unwrap();
    fs.write(p("/new"), &[2u8; 100]).unwrap();
    let n = fences(&dev, || fs.rename(p("/new"), p("/target")).unwrap());
    if test_mapping() == MappingKind::HashFs {
        assert_eq!(n, 4, "the replaced file freed in the rename's transaction");
    }
    assert_eq!(fs.read(p("/target")).unwrap(), vec![2u8; 100]);

    fs.hard_link(p("/target"), p("/other")).unwrap();
    fs.write(p("/newer"), &[3u8; 50]).unwrap();
    fs.rename(p("/newer"), p("/target")).unwrap();
    assert_eq!(fs.read(p("/target")).unwrap(), vec![3u8; 50]);
    assert_eq!(fs.read(p("/other")).unwrap(), vec![2u8; 100], "the replaced file's other name");
    assert_eq!(fs.metadata(p("/other")).unwrap().nlink, 1);
    let (fs, dev) = remount(fs, dev);
    assert_eq!(fs.read(p("/other")).unwrap(), vec![2u8; 100], "after a remount");
    drop(fs);
    assert_fsck_clean(&dev);
}

/// An rmdir of an empty directory no one has open frees it in its own transaction too.
#[test]
fn an_rmdir_frees_the_directory_in_its_own_transaction() {
    let (fs, dev) = new_fs(16 * MIB, &opts());
    for round in 0..3 {
        fs.create_dir(p("/d"), 0o755).unwrap();
        fs.write(p("/d/f"), &[round; 10]).unwrap();
        fs.remove_file(p("/d/f")).unwrap();
        let n = fences(&dev, || fs.remove_dir(p("/d")).unwrap());
        if test_mapping() == MappingKind::HashFs {
            assert_eq!(n, 4, "round {round}: the directory freed in the rmdir's transaction");
        }
        assert!(fs.metadata(p("/d")).is_err());
    }
    assert_eq!(fs.metadata(p("/")).unwrap().nlink, 2, "the root's link count");
    let (fs, dev) = remount(fs, dev);
    drop(fs);
    assert_fsck_clean(&dev);
}

/// `journal_mode=TRUNCATE` ends a transaction by truncating the journal to nothing (as a
/// shell's `>` does to a file): the size's transaction, then the slots tombstoned and
/// fenced, the transaction's fence standing for the one before (four fences on HashFS).
#[test]
fn a_truncation_to_nothing_takes_four_fences() {
    let (fs, dev) = new_fs(16 * MIB, &opts());
    let j = fs.open_file(p("/db-journal"), &rw()).unwrap();
    for round in 0..3u8 {
        j.write_at(0, &vec![round; 3 * 4096 + 100]).unwrap();
        let n = fences(&dev, || j.set_len(0).unwrap());
        if test_mapping() == MappingKind::HashFs {
            assert_eq!(n, 4, "round {round}");
        }
        assert_eq!(j.metadata().unwrap().size, 0);
    }
    j.write_at(8192, b"x").unwrap();
    let mut want = vec![0u8; 8192];
    want.push(b'x');
    assert!(fs.read(p("/db-journal")).unwrap() == want, "no old byte comes back in the holes");
    drop(j);
    let (fs, dev) = remount(fs, dev);
    assert!(fs.read(p("/db-journal")).unwrap() == want);
    drop(fs);
    assert_fsck_clean(&dev);
}

/// An open with `O_CREAT | O_TRUNC` that makes its file truncates nothing (as in Linux):
/// the create's transaction alone. One of a file that exists truncates it.
#[test]
fn an_open_that_makes_its_file_truncates_nothing() {
    let (fs, dev) = new_fs(16 * MIB, &opts());
    fs.write(p("/first"), b"the root's first block").unwrap();
    let ct = OpenOptions::new().write(true).create(true).truncate(true).clone();
    let n = fences(&dev, || drop(fs.open_file(p("/out"), &ct).unwrap()));
    assert_eq!(n, 3, "a create's transaction, and no truncation");
    fs.write(p("/out"), &[5u8; 5000]).unwrap();
    let f = fs.open_file(p("/out"), &ct).unwrap();
    assert_eq!(f.metadata().unwrap().size, 0, "an existing file is truncated");
    drop(f);
    drop(fs);
    assert_fsck_clean(&dev);
}

/// A chown to the owner a file has (SQLite's `fchown` of each rollback journal it makes)
/// moves only the change time: stored in place with one fence, not a transaction's three,
/// and durable when the call returns (the image as the fences left it shows it, and the
/// times a write before it left pending). A chown that changes the owner is a transaction.
#[test]
fn a_chown_to_the_owner_the_file_has_takes_one_fence() {
    let (fs, dev) = new_fs(16 * MIB, &opts());
    let j = fs.open_file(p("/db-journal"), &rw()).unwrap();
    j.write_at(0, &[1u8; 600]).unwrap(); // its times pending until fsync
    let md = j.metadata().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let n = fences(&dev, || fs.set_owner(p("/db-journal"), Some(md.uid), Some(md.gid)).unwrap());
    assert_eq!(n, 1, "the change time in place");
    let after = j.metadata().unwrap();
    assert!(after.ctime_ns > md.ctime_ns, "the change time moves: {} -> {}", md.ctime_ns, after.ctime_ns);
    assert_eq!((after.uid, after.gid, after.perm, after.mtime_ns), (md.uid, md.gid, md.perm, md.mtime_ns));
    // A crash now: the image as the fences left it.
    let (crashed, _, cdev) = common::mount_image(&dev.durable_image()).unwrap();
    let got = crashed.metadata(p("/db-journal")).unwrap();
    assert_eq!((got.ctime_ns, got.mtime_ns, got.size), (after.ctime_ns, md.mtime_ns, 600));
    drop(crashed);
    assert_fsck_clean(&cdev);
    let n = fences(&dev, || fs.set_owner(p("/db-journal"), Some(md.uid + 1), None).unwrap());
    assert!(n >= 3, "a new owner is a transaction: {n} fences");
    drop(j);
    drop(fs);
    assert_fsck_clean(&dev);
}
