//! The file-system API behaves as a POSIX file system: data, holes, truncation, names,
//! links, rename rules, unlink of open files, and persistence across remounts.

mod common;
use common::*;
use hashfs::RenameMode;
use hashfs::{Error, FallocateMode, FileType, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

fn p(s: &str) -> &Path {
    Path::new(s)
}

/// Large reads at odd offsets over blocks written out of order, two files interleaved and
/// holes: every byte comes back (HashFS looks up several blocks of one read in one vector
/// hash and copies physically adjacent blocks together).
#[test]
fn large_reads_across_scattered_blocks_and_holes() {
    let (fs, _dev) = new_fs(16 << 20, &small_opts());
    let mut opts = OpenOptions::new();
    opts.read(true).write(true).create(true);
    let a = fs.open_file(p("/a"), &opts).unwrap();
    let b = fs.open_file(p("/b"), &opts).unwrap();
    let blocks = 40u64;
    let mut want = vec![0u8; (blocks * 4096) as usize];
    // Blocks in a scrambled order, every fifth left a hole; /b interleaves its own blocks.
    for i in 0..blocks {
        let blk = (i * 17) % blocks;
        if blk % 5 == 3 {
            continue;
        }
        let data: Vec<u8> = (0..4096u64).map(|j| (blk * 7 + j / 13) as u8 | 1).collect();
        a.write_at(blk * 4096, &data).unwrap();
        b.write_at(blk * 4096, &[0x5a; 4096]).unwrap();
        want[(blk * 4096) as usize..((blk + 1) * 4096) as usize].copy_from_slice(&data);
    }
    for (off, len) in [(0u64, want.len()), (100, 70_000), (4095, 9 * 4096 + 2), (12_288, 4096 * 33), (150_000, 13_840)]
    {
        let mut buf = vec![0xEEu8; len];
        let n = a.read_at(off, &mut buf).unwrap();
        let end = (off as usize + len).min(want.len());
        assert_eq!(n, end - off as usize, "read of {len} at {off}");
        assert!(buf[..n] == want[off as usize..end], "read of {len} at {off} returned other bytes");
    }
}

#[test]
fn write_read_and_holes() {
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    let f = fs.open_file(p("/a"), OpenOptions::new().read(true).write(true).create(true)).unwrap();
    assert_eq!(f.write_at(0, b"hello").unwrap(), 5);
    assert_eq!(f.write_at(10_000, b"world").unwrap(), 5);
    let mut buf = vec![0xAAu8; 10_005];
    assert_eq!(f.read_at(0, &mut buf).unwrap(), 10_005);
    assert_eq!(&buf[..5], b"hello");
    assert!(buf[5..10_000].iter().all(|&b| b == 0), "hole reads as zeros");
    assert_eq!(&buf[10_000..], b"world");
    let m = f.metadata().unwrap();
    assert_eq!(m.size, 10_005);
    assert_eq!(m.blocks, 2, "block 1 is a hole");
    assert_eq!(f.read_at(10_005, &mut buf).unwrap(), 0, "read at EOF");
    drop(f);
    let (fs, dev) = remount(fs, dev);
    assert_eq!(fs.read(p("/a")).unwrap().len(), 10_005);
    assert_fsck_clean(&dev);
    drop(fs);
}

/// A sparse file past 4 GiB (byte offsets past 32 bits, logical blocks past 2^20): a
/// write across the 4 GiB boundary and one at 5 GiB read back, the holes read as zeros,
/// the size and block count are right, a punch at the boundary and a truncate between
/// the two free what they should, and all of it survives a remount and passes fsck.
#[test]
fn holes_past_4_gib() {
    const G4: u64 = 1 << 32;
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    let f = fs.open_file(p("/big"), OpenOptions::new().read(true).write(true).create(true)).unwrap();
    let a: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8 + 1).collect();
    let b: Vec<u8> = (0..9000u32).map(|i| (i % 241) as u8 + 3).collect();
    let (at_a, at_b) = (G4 - 100, 5 * (G4 / 4) + 123);
    assert_eq!(f.write_at(at_a, &a).unwrap(), a.len());
    assert_eq!(f.write_at(at_b, &b).unwrap(), b.len());
    let read = |f: &hashfs::File<_>, off: u64, len: usize| {
        let mut buf = vec![0xEEu8; len];
        assert_eq!(f.read_at(off, &mut buf).unwrap(), len, "read of {len} at {off}");
        buf
    };
    let check = |f: &hashfs::File<_>, b_len: usize| {
        assert_eq!(read(f, at_a, a.len()), a, "the write across 4 GiB");
        assert_eq!(read(f, at_b, b_len), b[..b_len], "the write at 5 GiB");
        assert!(read(f, G4 + 5 * 4096, 8192).iter().all(|&x| x == 0), "the hole past 4 GiB");
        assert!(read(f, 1 << 20, 4096).iter().all(|&x| x == 0), "the hole below");
    };
    check(&f, b.len());
    let m = f.metadata().unwrap();
    assert_eq!(m.size, at_b + b.len() as u64);
    // Each write crosses two block boundaries: blocks 2^20 - 1 to 2^20 + 1, and three at
    // 5 GiB.
    assert_eq!(m.blocks, 3 + 3, "mapped blocks");
    // What the crash explorer's snapshots read of such a file: its mapped blocks only.
    let ino = fs.metadata(p("/big")).unwrap().ino;
    let runs = |fs: &hashfs::FileSystem<_>| -> Vec<(u64, u64)> {
        fs.mapped_runs(ino).unwrap().into_iter().map(|(l, n)| (l.0, n)).collect()
    };
    let (below, at_5g) = (G4 / 4096 - 1, 5 * (G4 / 4) / 4096);
    assert_eq!(runs(&fs), [(below, 3), (at_5g, 3)], "mapped runs");
    f.fallocate(G4, 4096, FallocateMode::PunchHole).unwrap();
    assert_eq!(f.metadata().unwrap().blocks, 5, "the punched block at 4 GiB is freed");
    assert_eq!(runs(&fs), [(below, 1), (below + 2, 1), (at_5g, 3)], "mapped runs after the punch");
    let mut a_punched = a.clone();
    a_punched[100..4196].fill(0);
    assert_eq!(read(&f, at_a, a.len()), a_punched);
    f.set_len(at_b + 1000).unwrap();
    assert_eq!(f.metadata().unwrap().blocks, 3, "the truncate inside the second write's first block frees two");
    drop(f);
    let (fs, dev) = remount(fs, dev);
    let f = fs.open_file(p("/big"), OpenOptions::new().read(true)).unwrap();
    assert_eq!(f.metadata().unwrap().size, at_b + 1000);
    assert_eq!(read(&f, at_a, a.len()), a_punched);
    assert_eq!(read(&f, at_b, 1000), b[..1000]);
    drop(f);
    assert_fsck_clean(&dev);
    drop(fs);
}

#[test]
fn truncate_down_then_up_reads_zeros() {
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8 + 1).collect();
    fs.write(p("/t"), &data).unwrap();
    let f = fs.open_file(p("/t"), OpenOptions::new().read(true).write(true)).unwrap();
    f.set_len(5000).unwrap();
    assert_eq!(f.metadata().unwrap().blocks, 2);
    f.set_len(20_000).unwrap();
    let mut buf = vec![0u8; 20_000];
    f.read_at(0, &mut buf).unwrap();
    assert_eq!(&buf[..5000], &data[..5000]);
    assert!(buf[5000..].iter().all(|&b| b == 0), "bytes past the old EOF read as zeros");
    // Growing by writing past EOF zeroes the gap too.
    f.set_len(100).unwrap();
    f.write_at(3000, b"x").unwrap();
    f.read_at(0, &mut buf[..3001]).unwrap();
    assert!(buf[100..3000].iter().all(|&b| b == 0));
    drop(f);
    assert_fsck_clean(&dev);
}

#[test]
fn append_and_cursor() {
    let (fs, _dev) = new_fs(8 << 20, &small_opts());
    let mut f = fs.open_file(p("/log"), OpenOptions::new().append(true).create(true)).unwrap();
    for i in 0..100 {
        writeln!(f, "line {i}").unwrap();
    }
    drop(f);
    let text = String::from_utf8(fs.read(p("/log")).unwrap()).unwrap();
    assert_eq!(text.lines().count(), 100);
    let mut f = fs.open_file(p("/log"), OpenOptions::new().read(true)).unwrap();
    f.seek(SeekFrom::Start(5)).unwrap();
    let mut s = String::new();
    f.read_to_string(&mut s).unwrap();
    assert!(s.starts_with("0\nline 1"));
    assert!(matches!(f.write_at(0, b"x"), Err(Error::BadDescriptor)));
}

#[test]
fn names_and_directories() {
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    fs.create_dir(p("/d"), 0o755).unwrap();
    assert!(matches!(fs.create_dir(p("/d"), 0o755), Err(Error::Exists)));
    let long = "x".repeat(256);
    assert!(matches!(fs.write(&p("/d").join(&long), b""), Err(Error::NameTooLong)));
    let ok = "y".repeat(255);
    fs.write(&p("/d").join(&ok), b"1").unwrap();
    assert!(matches!(fs.metadata(p("/nope/x")), Err(Error::NotFound)));
    fs.write(p("/f"), b"").unwrap();
    assert!(matches!(fs.metadata(p("/f/x")), Err(Error::NotDir)));
    assert!(matches!(fs.remove_dir(p("/d")), Err(Error::NotEmpty)));
    assert!(matches!(fs.remove_file(p("/d")), Err(Error::IsDir)));
    assert!(matches!(fs.remove_dir(p("/f")), Err(Error::NotDir)));
    let d = fs.metadata(p("/d")).unwrap();
    assert_eq!(d.nlink, 2);
    fs.create_dir(p("/d/sub"), 0o700).unwrap();
    assert_eq!(fs.metadata(p("/d")).unwrap().nlink, 3);
    assert_eq!(fs.metadata(p("/d/sub/..")).unwrap().ino, d.ino);
    assert_eq!(fs.metadata(p("/")).unwrap().nlink, 3);
    fs.remove_dir(p("/d/sub")).unwrap();
    assert_eq!(fs.metadata(p("/d")).unwrap().nlink, 2);
    assert_fsck_clean(&dev);
}

#[test]
fn many_entries_in_one_directory() {
    let (fs, dev) = new_fs(32 << 20, &hashfs::FormatOptions { inode_count: Some(6000), ..small_opts() });
    fs.create_dir(p("/big"), 0o755).unwrap();
    for i in 0..5000 {
        let name = format!("/big/file-with-a-longish-name-{i:05}");
        fs.write(p(&name), &[]).unwrap();
    }
    let list = fs.read_dir(p("/big")).unwrap();
    assert_eq!(list.len(), 5000);
    for i in (0..5000).step_by(2) {
        fs.remove_file(p(&format!("/big/file-with-a-longish-name-{i:05}"))).unwrap();
    }
    assert_eq!(fs.read_dir(p("/big")).unwrap().len(), 2500);
    let size_before = fs.metadata(p("/big")).unwrap().size;
    for i in 0..2500 {
        fs.write(p(&format!("/big/n{i:04}-with-a-longish-name-xxxxx")), &[]).unwrap();
    }
    assert_eq!(fs.metadata(p("/big")).unwrap().size, size_before, "freed slots are reused");
    let (fs, dev) = remount(fs, dev);
    assert_eq!(fs.read_dir(p("/big")).unwrap().len(), 5000);
    assert!(fs.metadata(p("/big/n0042-with-a-longish-name-xxxxx")).is_ok());
    assert_fsck_clean(&dev);
    drop(fs);
}

#[test]
fn rename_rules() {
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    fs.create_dir_all(p("/a/b/c"), 0o755).unwrap();
    fs.write(p("/a/f"), b"F").unwrap();
    fs.write(p("/a/g"), b"G").unwrap();
    // Replace a file.
    fs.rename(p("/a/f"), p("/a/g")).unwrap();
    assert_eq!(fs.read(p("/a/g")).unwrap(), b"F");
    assert!(matches!(fs.metadata(p("/a/f")), Err(Error::NotFound)));
    // Directory into its own subtree.
    assert!(matches!(fs.rename(p("/a"), p("/a/b/c/x")), Err(Error::Invalid(_))));
    // File over directory and back.
    assert!(matches!(fs.rename(p("/a/g"), p("/a/b")), Err(Error::IsDir)));
    assert!(matches!(fs.rename(p("/a/b"), p("/a/g")), Err(Error::NotDir)));
    // Directory over non-empty directory.
    fs.create_dir(p("/e"), 0o755).unwrap();
    assert!(matches!(fs.rename(p("/e"), p("/a/b")), Err(Error::NotEmpty)));
    // Directory over empty directory, across parents.
    fs.create_dir(p("/a/empty"), 0o755).unwrap();
    fs.rename(p("/a/b"), p("/a/empty")).unwrap();
    assert!(fs.metadata(p("/a/empty/c")).unwrap().is_dir());
    fs.rename(p("/a/empty/c"), p("/c2")).unwrap();
    assert_eq!(fs.metadata(p("/")).unwrap().nlink, 5); // a, e, c2 + 2
    assert_eq!(fs.metadata(p("/c2/..")).unwrap().ino, hashfs::Ino::ROOT);
    // NOREPLACE and EXCHANGE.
    fs.write(p("/x"), b"X").unwrap();
    fs.write(p("/y"), b"Y").unwrap();
    assert!(matches!(fs.rename_with(p("/x"), p("/y"), RenameMode::NoReplace), Err(Error::Exists)));
    fs.rename_with(p("/x"), p("/c2"), RenameMode::Exchange).unwrap();
    assert!(fs.metadata(p("/x")).unwrap().is_dir());
    assert_eq!(fs.read(p("/c2")).unwrap(), b"X");
    // Same inode: nothing happens.
    fs.hard_link(p("/y"), p("/y2")).unwrap();
    fs.rename(p("/y"), p("/y2")).unwrap();
    assert!(fs.metadata(p("/y")).is_ok());
    assert_fsck_clean(&dev);
}

#[test]
fn links_symlinks_and_loops() {
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    fs.write(p("/orig"), b"data").unwrap();
    fs.hard_link(p("/orig"), p("/hard")).unwrap();
    assert_eq!(fs.metadata(p("/orig")).unwrap().nlink, 2);
    fs.remove_file(p("/orig")).unwrap();
    assert_eq!(fs.read(p("/hard")).unwrap(), b"data");
    fs.create_dir(p("/dir"), 0o755).unwrap();
    assert!(matches!(fs.hard_link(p("/dir"), p("/dir2")), Err(Error::NotPermitted)));
    fs.symlink(p("/hard"), p("/sym")).unwrap();
    fs.symlink(p("dir"), p("/reldir")).unwrap();
    assert_eq!(fs.read(p("/sym")).unwrap(), b"data");
    assert!(fs.symlink_metadata(p("/sym")).unwrap().is_symlink());
    assert_eq!(fs.read_link(p("/sym")).unwrap(), p("/hard"));
    fs.write(p("/reldir/inside"), b"i").unwrap();
    assert_eq!(fs.read(p("/dir/inside")).unwrap(), b"i");
    fs.symlink(p("/loop1"), p("/loop2")).unwrap();
    fs.symlink(p("/loop2"), p("/loop1")).unwrap();
    assert!(matches!(fs.read(p("/loop1")), Err(Error::Loop)));
    let entries = fs.read_dir(p("/")).unwrap();
    let sym = entries.iter().find(|e| e.name == b"sym").unwrap();
    assert_eq!(sym.file_type, FileType::Symlink);
    assert_fsck_clean(&dev);
}

/// With a mount point (the LD_PRELOAD shim's prefix), an absolute symbolic link under it
/// leads back into the file system and one anywhere else leads out: the walk refuses it,
/// naming the path it leads to (its target, then the rest of the path), where a chroot's
/// walk would look for that path inside (`link-prefix-kept`: a link to /pm/x is not
/// found).
#[test]
fn absolute_links_under_a_mount_point_stay_inside_and_others_lead_out() {
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    fs.set_mount_point(b"/pm", |_| {});
    fs.create_dir(p("/d"), 0o755).unwrap();
    fs.write(p("/d/x"), b"inside").unwrap();
    fs.symlink(p("/pm/d/x"), p("/abs")).unwrap();
    fs.symlink(p("/pm/d"), p("/dirlink")).unwrap();
    fs.symlink(p("/pm"), p("/root")).unwrap();
    fs.symlink(p("/pmx/d"), p("/beside")).unwrap();
    fs.symlink(p("/usr/bin"), p("/out")).unwrap();
    fs.write(p("/usr"), b"a file of the same name inside").unwrap();
    assert_eq!(fs.read(p("/abs")).unwrap(), b"inside");
    assert_eq!(fs.read(p("/dirlink/x")).unwrap(), b"inside");
    assert_eq!(fs.read(p("/root/root/d/x")).unwrap(), b"inside");
    assert!(matches!(fs.read(p("/beside")), Err(Error::LinkOutside(t)) if t == b"/pmx/d"));
    match fs.read(p("/out/env")) {
        Err(e @ Error::LinkOutside(_)) => {
            assert_eq!(e.errno(), libc::EXDEV);
            assert!(matches!(e, Error::LinkOutside(t) if t == b"/usr/bin/env"));
        }
        other => panic!("a link out of the file system: {other:?}"),
    }
    assert_eq!(fs.read_link(p("/abs")).unwrap(), p("/pm/d/x"), "the link keeps its target");
    assert_fsck_clean(&dev);
}

#[test]
fn unlinked_open_file_lives_until_close() {
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    fs.write(p("/tmp"), &vec![7u8; 100_000]).unwrap();
    let free_before = fs.statfs().blocks_free;
    let f = fs.open_file(p("/tmp"), OpenOptions::new().read(true).write(true)).unwrap();
    fs.remove_file(p("/tmp")).unwrap();
    assert!(matches!(fs.metadata(p("/tmp")), Err(Error::NotFound)));
    let mut buf = vec![0u8; 100_000];
    assert_eq!(f.read_at(0, &mut buf).unwrap(), 100_000);
    assert!(buf.iter().all(|&b| b == 7));
    f.write_at(100_000, b"more").unwrap();
    assert_eq!(f.metadata().unwrap().nlink, 0);
    drop(f);
    assert!(fs.statfs().blocks_free >= free_before + 25, "blocks come back at close");
    assert_fsck_clean(&dev);
}

#[test]
fn unlinked_open_file_is_freed_at_next_mount_after_crash() {
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    fs.write(p("/tmp"), &vec![7u8; 50_000]).unwrap();
    let free_with_file = fs.statfs().blocks_free;
    let f = fs.open_file(p("/tmp"), OpenOptions::new().read(true)).unwrap();
    fs.remove_file(p("/tmp")).unwrap();
    // Crash with the file still open: take the image as it is now.
    let image = dev.crash_point_now().image_durable_only();
    drop(f);
    drop(fs);
    let (fs, report, dev) = mount_image(&image).unwrap();
    assert!(!report.was_clean);
    assert_eq!(report.orphans_freed, 1);
    assert!(fs.statfs().blocks_free >= free_with_file + 13);
    assert_fsck_clean(&dev);
}

/// A write's times reach the media at fsync, sync or unmount, not at fdatasync
/// (`fs/times.rs`); its data and size at once. "Crash" = the durable image, now.
#[test]
fn write_times_are_durable_at_fsync_sync_and_unmount() {
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    fs.write(p("/t"), &[1u8; 5000]).unwrap();
    fs.set_times(p("/t"), None, Some(hashfs::SetTime::At(7_000_000_000))).unwrap();
    let f = fs.open_file(p("/t"), OpenOptions::new().read(true).write(true)).unwrap();
    let crashed = |dev: &std::sync::Arc<hashfs::pm::CrashDevice>| {
        let (fs, _, _) = mount_image(&dev.crash_point_now().image_durable_only()).unwrap();
        let m = fs.metadata(p("/t")).unwrap();
        let mut head = [0u8; 2];
        fs.open_file(p("/t"), OpenOptions::new().read(true)).unwrap().read_at(0, &mut head).unwrap();
        (m.size, m.mtime_ns, head)
    };
    // An overwrite, and (HashFS's paper placement) a fast append inside the last block:
    // data and size durable, times in DRAM. Elsewhere the append's transaction stores the
    // times with the size.
    f.write_at(0, b"ab").unwrap();
    let fast_append = test_mapping() == hashfs::MappingKind::HashFs && test_placement() == hashfs::HashPlacement::Paper;
    let size = if fast_append { f.append(b"cd").unwrap().1 } else { 5000 };
    let live = f.metadata().unwrap().mtime_ns;
    assert!(live > 7_000_000_000);
    assert_eq!(crashed(&dev), (size, 7_000_000_000, *b"ab"), "before fsync: new data and size, old times");
    f.sync_data().unwrap();
    assert_eq!(crashed(&dev).1, 7_000_000_000, "fdatasync leaves the times");
    f.sync_all().unwrap();
    assert_eq!(crashed(&dev).1, live, "fsync stores them");
    f.write_at(1, b"x").unwrap();
    let live = f.metadata().unwrap().mtime_ns;
    fs.sync().unwrap();
    assert_eq!(crashed(&dev).1, live, "sync stores them");
    f.write_at(2, b"y").unwrap();
    let live = f.metadata().unwrap().mtime_ns;
    drop(f);
    let (fs, dev) = remount(fs, dev);
    assert_eq!(fs.metadata(p("/t")).unwrap().mtime_ns, live, "unmount stores them");
    assert_fsck_clean(&dev);
}

/// A write's times are the clock's last tick unless the file's times were read since they
/// last changed, as Linux's multigrain timestamps (`fs/inode.rs`): a stat always sees a
/// later write change the time, and a file written after another, unobserved, never shows
/// an earlier time than the other's.
#[test]
fn write_times_after_a_stat_change_and_keep_order() {
    let (fs, _dev) = new_fs(8 << 20, &small_opts());
    fs.write(p("/a"), b"a").unwrap();
    fs.write(p("/b"), b"b").unwrap();
    let open = |name| fs.open_file(p(name), OpenOptions::new().read(true).write(true)).unwrap();
    let (a, b) = (open("/a"), open("/b"));
    for i in 0..2000u64 {
        let before = a.metadata().unwrap().mtime_ns;
        a.write_at(0, b"x").unwrap();
        let after = a.metadata().unwrap().mtime_ns;
        assert!(after > before, "round {i}: a write after a stat keeps the time ({before} -> {after})");
        b.write_at(0, b"y").unwrap();
        b.write_at(1, b"z").unwrap(); // unobserved since the one before: the coarse clock
        let tb = b.metadata().unwrap().mtime_ns;
        assert!(tb >= after, "round {i}: b, written after a, shows an earlier time ({tb} < {after})");
    }
}

/// A front end's own look at a file's attributes (`peek_attr`: a size, a type, a
/// permission check) is not a stat: the next write keeps the coarse clock, so it shows the
/// same time as the write before (the floor) unless the clock ticked between. Marked as a
/// stat, every such write would take the fine clock and show a later time.
#[test]
fn a_front_ends_own_attribute_reads_leave_writes_on_the_coarse_clock() {
    let (fs, _dev) = new_fs(8 << 20, &small_opts());
    fs.write(p("/a"), b"a").unwrap();
    let f = fs.open_file(p("/a"), OpenOptions::new().read(true).write(true)).unwrap();
    let ino = f.metadata().unwrap().ino;
    let mut same = 0;
    for _ in 0..200 {
        fs.getattr(ino).unwrap(); // a stat: the next write takes the fine clock
        f.write_at(0, b"x").unwrap();
        let t1 = fs.peek_attr(ino).unwrap().mtime_ns;
        f.write_at(0, b"y").unwrap();
        let t2 = fs.getattr(ino).unwrap().mtime_ns;
        assert!(t2 >= t1, "times go back: {t1} -> {t2}");
        same += usize::from(t2 == t1);
    }
    assert!(same >= 100, "only {same} of 200 writes after a peek kept the coarse clock");
}

#[test]
fn metadata_changes_persist() {
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    fs.write(p("/m"), b"abc").unwrap();
    fs.set_permissions(p("/m"), 0o600).unwrap();
    fs.set_owner(p("/m"), Some(1000), Some(100)).unwrap();
    fs.set_times(p("/m"), Some(hashfs::SetTime::At(1_000_000_000)), Some(hashfs::SetTime::At(2_000_000_000))).unwrap();
    let (fs, _dev) = remount(fs, dev);
    let m = fs.metadata(p("/m")).unwrap();
    assert_eq!((m.perm, m.uid, m.gid), (0o600, 1000, 100));
    assert_eq!((m.atime_ns, m.mtime_ns), (1_000_000_000, 2_000_000_000));
    let st = fs.statfs();
    assert!(st.blocks_free < st.blocks_total && st.inodes_free < st.inodes_total);
    assert_eq!(st.name_max, 255);
}

#[test]
fn fallocate_maps_holes_and_keeps_data() {
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    let f = fs.open_file(p("/fa"), OpenOptions::new().read(true).write(true).create(true)).unwrap();
    f.write_at(5000, b"keep").unwrap();
    let free = fs.statfs().blocks_free;
    let nodes = fs.mapping_stats().unwrap().node_blocks;
    f.allocate(0, 40_000).unwrap();
    let m = f.metadata().unwrap();
    assert_eq!(m.size, 40_000);
    assert_eq!(m.blocks, 10, "every block of the range is mapped");
    // Nine data blocks, plus any tree nodes the mapping grew.
    let new_nodes = fs.mapping_stats().unwrap().node_blocks - nodes;
    assert_eq!(fs.statfs().blocks_free, free - 9 - new_nodes);
    let mut buf = vec![1u8; 40_000];
    f.read_at(0, &mut buf).unwrap();
    assert_eq!(&buf[5000..5004], b"keep");
    assert!(buf[..5000].iter().chain(&buf[5004..]).all(|&b| b == 0));
    // Within the size: no change of size, holes mapped.
    f.set_len(100_000).unwrap();
    f.allocate(90_000, 100).unwrap();
    assert_eq!(f.metadata().unwrap().size, 100_000);
    assert_eq!(f.metadata().unwrap().blocks, 11);
    drop(f);
    assert_fsck_clean(&dev);
}

#[test]
fn punch_hole_and_keep_size() {
    use hashfs::FallocateMode;
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    let data: Vec<u8> = (0..40_000u32).map(|i| (i % 200) as u8 + 1).collect();
    fs.write(p("/ph"), &data).unwrap();
    let f = fs.open_file(p("/ph"), OpenOptions::new().read(true).write(true)).unwrap();
    let blocks = f.metadata().unwrap().blocks;
    // From the middle of block 1 to the middle of block 6: blocks 2..=5 freed.
    f.fallocate(6000, 20_000, FallocateMode::PunchHole).unwrap();
    let m = f.metadata().unwrap();
    assert_eq!(m.size, 40_000, "size kept");
    assert_eq!(m.blocks, blocks - 4);
    let mut buf = vec![0xFFu8; 40_000];
    f.read_at(0, &mut buf).unwrap();
    assert_eq!(&buf[..6000], &data[..6000]);
    assert!(buf[6000..26_000].iter().all(|&b| b == 0), "the hole reads as zeros");
    assert_eq!(&buf[26_000..], &data[26_000..]);
    // Punching past EOF changes nothing beyond it; KEEP_SIZE maps holes inside the size only.
    f.fallocate(39_000, 100_000, FallocateMode::PunchHole).unwrap();
    assert_eq!(f.metadata().unwrap().size, 40_000);
    f.fallocate(0, 1 << 20, FallocateMode::AllocateKeepSize).unwrap();
    let m = f.metadata().unwrap();
    assert_eq!((m.size, m.blocks), (40_000, 10));
    assert!(FallocateMode::from_linux_flags(0x02).is_none(), "PUNCH_HOLE needs KEEP_SIZE");
    drop(f);
    assert_fsck_clean(&dev);
}

/// FIFOs, character and block devices (with their numbers) and sockets are inodes of their
/// own type: listed with their d_type, kept across a remount, linked, renamed and removed
/// like files, never opened for data through the library, and fsck-clean throughout.
#[test]
fn special_files_are_inodes_of_their_own_type() {
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    let owner = hashfs::Owner { uid: 1000, gid: 100 };
    let root = hashfs::Ino::ROOT;
    let tty = libc::makedev(4, 64);
    let disk = libc::makedev(259, 65_537);
    fs.mknod_at(root, b"fifo", FileType::Fifo, 0o640, 0, owner).unwrap();
    fs.mknod_at(root, b"tty", FileType::CharDevice, 0o620, tty, owner).unwrap();
    fs.mknod_at(root, b"disk", FileType::BlockDevice, 0o660, disk, owner).unwrap();
    fs.mknod_at(root, b"sock", FileType::Socket, 0o755, 0, owner).unwrap();
    // Wrong requests fail clearly.
    assert!(matches!(fs.mknod_at(root, b"fifo", FileType::Fifo, 0o640, 0, owner), Err(Error::Exists)));
    assert!(matches!(fs.mknod_at(root, b"x", FileType::Fifo, 0o640, tty, owner), Err(Error::Invalid(_))));
    assert!(matches!(fs.mknod_at(root, b"x", FileType::Directory, 0o755, 0, owner), Err(Error::Invalid(_))));
    let free = fs.statfs().blocks_free;
    let (fs, dev) = remount(fs, dev);
    for (name, t, perm, rdev) in [
        ("/fifo", FileType::Fifo, 0o640, 0),
        ("/tty", FileType::CharDevice, 0o620, tty),
        ("/disk", FileType::BlockDevice, 0o660, disk),
        ("/sock", FileType::Socket, 0o755, 0),
    ] {
        let m = fs.symlink_metadata(p(name)).unwrap();
        assert_eq!((m.file_type, m.perm, m.rdev, m.size, m.blocks, m.nlink), (t, perm, rdev, 0, 0, 1), "{name}");
        assert_eq!(m.mode() & libc::S_IFMT, t.mode_bits());
        assert_eq!((m.uid, m.gid), (1000, 100));
        let e = fs.read_dir(p("/")).unwrap().into_iter().find(|e| e.name == name.as_bytes()[1..]).unwrap();
        assert_eq!(e.file_type, t);
        assert!(matches!(fs.open_file(p(name), OpenOptions::new().read(true)), Err(Error::Unsupported(_))));
        assert!(matches!(
            fs.open_file(p(name), OpenOptions::new().write(true).truncate(true)),
            Err(Error::Unsupported(_))
        ));
    }
    assert_eq!(fs.statfs().blocks_free, free, "special files take no blocks");
    assert_fsck_clean(&dev);
    fs.hard_link(p("/tty"), p("/tty2")).unwrap();
    fs.rename(p("/disk"), p("/disk2")).unwrap();
    fs.set_permissions(p("/fifo"), 0o600).unwrap();
    assert_eq!(fs.metadata(p("/tty2")).unwrap().nlink, 2);
    assert_eq!(fs.metadata(p("/disk2")).unwrap().rdev, disk);
    assert_fsck_clean(&dev);
    for n in ["/fifo", "/tty", "/tty2", "/disk2", "/sock"] {
        fs.remove_file(p(n)).unwrap();
    }
    assert_eq!(fs.read_dir(p("/")).unwrap().len(), 0);
    let (fs, dev) = remount(fs, dev);
    assert_eq!(fs.statfs().inodes_free, fs.statfs().inodes_total - 1, "every special inode freed");
    assert_fsck_clean(&dev);
}

/// Extended attributes with Linux's semantics: namespaces, XATTR_CREATE/REPLACE, ENODATA,
/// ERANGE for a long name, E2BIG past 64 KiB, ENOSPC past 64 KiB of names; kept across a
/// remount, on directories too, and freed with their file; fsck-clean throughout.
#[test]
fn extended_attributes() {
    use hashfs::XattrMode::{Any, Create, Replace};
    let (fs, dev) = new_fs(16 << 20, &small_opts());
    fs.write(p("/f"), b"data").unwrap();
    fs.create_dir(p("/d"), 0o755).unwrap();
    let (f, d) = (fs.resolve(p("/f")).unwrap(), fs.resolve(p("/d")).unwrap());
    let inodes_before = fs.statfs().inodes_free;
    assert_eq!(fs.list_xattr(f).unwrap(), Vec::<Vec<u8>>::new());
    assert!(matches!(fs.get_xattr(f, b"user.x"), Err(Error::NoData)));
    fs.set_xattr(f, b"user.x", b"one", Create).unwrap();
    assert!(matches!(fs.set_xattr(f, b"user.x", b"two", Create), Err(Error::Exists)));
    assert!(matches!(fs.set_xattr(f, b"user.y", b"two", Replace), Err(Error::NoData)));
    fs.set_xattr(f, b"user.x", b"two", Replace).unwrap();
    let big = vec![0xABu8; 65_536];
    fs.set_xattr(f, b"user.big", &big, Any).unwrap();
    fs.set_xattr(f, b"trusted.t", b"", Any).unwrap(); // an empty value is a value
    fs.set_xattr(d, b"security.label", b"s0", Any).unwrap();
    assert!(matches!(fs.set_xattr(f, b"user.huge", &vec![0; 65_537], Any), Err(Error::TooBig)));
    assert!(matches!(fs.set_xattr(f, &[b'u'; 256], b"", Any), Err(Error::Range)));
    assert!(matches!(fs.set_xattr(f, b"os2.x", b"", Any), Err(Error::Unsupported(_))));
    assert!(matches!(fs.set_xattr(f, b"user.", b"", Any), Err(Error::Unsupported(_))));
    assert!(matches!(fs.remove_xattr(f, b"user.nope"), Err(Error::NoData)));
    assert_fsck_clean(&dev);
    let (fs, dev) = remount(fs, dev);
    assert_eq!(fs.list_xattr(f).unwrap(), vec![b"trusted.t".to_vec(), b"user.big".to_vec(), b"user.x".to_vec()]);
    assert_eq!(fs.get_xattr(f, b"user.x").unwrap(), b"two");
    assert_eq!(fs.get_xattr(f, b"user.big").unwrap(), big);
    assert_eq!(fs.get_xattr(f, b"trusted.t").unwrap(), b"");
    assert_eq!(fs.get_xattr(d, b"security.label").unwrap(), b"s0");
    assert_eq!(fs.read(p("/f")).unwrap(), b"data", "the data is untouched");
    let ctime = fs.getattr(f).unwrap().ctime_ns;
    fs.remove_xattr(f, b"user.big").unwrap();
    assert!(fs.getattr(f).unwrap().ctime_ns >= ctime);
    // The names of one file together: at most 64 KiB.
    let mut names = 0;
    let err = loop {
        let name = format!("user.{names:0>250}");
        match fs.set_xattr(f, name.as_bytes(), b"", Any) {
            Ok(()) => names += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::NoSpace), "{err:?}");
    assert!((255..270).contains(&names), "{names} names of 256 bytes fit");
    assert_fsck_clean(&dev);
    // Removing the file frees its attributes' inode and blocks.
    fs.remove_file(p("/f")).unwrap();
    fs.remove_xattr(d, b"security.label").unwrap();
    assert_eq!(fs.statfs().inodes_free, inodes_before + 1, "the file and both attribute inodes are free");
    let (_fs, dev) = remount(fs, dev);
    assert_fsck_clean(&dev);
}

/// fallocate(ZERO_RANGE): the range reads as zeros with every block mapped; mapped blocks
/// keep their place; without KEEP_SIZE the size grows to cover it, with it nothing past
/// EOF changes. COLLAPSE_RANGE and INSERT_RANGE stay unsupported.
#[test]
fn zero_range() {
    use hashfs::FallocateMode;
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    let data: Vec<u8> = (0..40_000u32).map(|i| (i % 200) as u8 + 1).collect();
    let f = fs.open_file(p("/z"), OpenOptions::new().read(true).write(true).create(true)).unwrap();
    f.write_at(0, &data[..20_000]).unwrap();
    f.write_at(32_768, &data[32_768..]).unwrap(); // blocks 5..=7 a hole
    let placed = fs.physical_block(f.ino(), hashfs::Lblk(1)).unwrap().map(|e| e.pblk);
    f.fallocate(6000, 24_000, FallocateMode::ZeroRangeKeepSize).unwrap();
    let m = f.metadata().unwrap();
    assert_eq!((m.size, m.blocks), (40_000, 10), "holes inside the range mapped, size kept");
    assert_eq!(
        fs.physical_block(f.ino(), hashfs::Lblk(1)).unwrap().map(|e| e.pblk),
        placed,
        "a mapped block keeps its place"
    );
    let mut buf = vec![0xFFu8; 40_000];
    f.read_at(0, &mut buf).unwrap();
    assert_eq!(&buf[..6000], &data[..6000]);
    assert!(buf[6000..30_000].iter().all(|&b| b == 0), "the range reads as zeros");
    assert_eq!(&buf[30_000..32_768], &[0u8; 2768][..], "the rest of the old hole");
    assert_eq!(&buf[32_768..], &data[32_768..]);
    // KEEP_SIZE past EOF changes nothing; without it the size grows.
    f.fallocate(39_000, 100_000, FallocateMode::ZeroRangeKeepSize).unwrap();
    assert_eq!(f.metadata().unwrap().size, 40_000);
    f.read_at(39_000, &mut buf[..1000]).unwrap();
    assert!(buf[..1000].iter().all(|&b| b == 0));
    f.fallocate(39_500, 20_000, FallocateMode::ZeroRange).unwrap();
    let m = f.metadata().unwrap();
    assert_eq!((m.size, m.blocks), (59_500, 15));
    assert_eq!(FallocateMode::from_linux_flags(0x10), Some(FallocateMode::ZeroRange));
    assert_eq!(FallocateMode::from_linux_flags(0x11), Some(FallocateMode::ZeroRangeKeepSize));
    assert!(FallocateMode::from_linux_flags(0x08).is_none(), "COLLAPSE_RANGE");
    assert!(FallocateMode::from_linux_flags(0x20).is_none(), "INSERT_RANGE");
    drop(f);
    assert_fsck_clean(&dev);
}

/// A format-2 image (before special files and attributes) mounts, keeps its files, and is
/// stamped with the current format by the mount, so that an older build refuses it from then on.
#[test]
fn format_2_images_mount_and_are_stamped_current() {
    use hashfs::pm::PmDevice;
    use hashfs::testing::layout::superblock::{FORMAT_VERSION, SB_PRIMARY_OFF, SB_SECONDARY_OFF};
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    fs.write(p("/old"), b"from format 2").unwrap();
    drop(fs);
    let (mut sb, _, _) = hashfs::read_superblock(&*dev).unwrap();
    assert_eq!(sb.format_version, FORMAT_VERSION);
    sb.format_version = 2;
    sb.seal();
    for off in [SB_PRIMARY_OFF, SB_SECONDARY_OFF] {
        dev.write(off, bytemuck::bytes_of(&sb));
    }
    let image = dev.live_image();
    let (fs, _report, dev) = mount_image(&image).unwrap();
    assert_eq!(fs.read(p("/old")).unwrap(), b"from format 2");
    assert_eq!(hashfs::read_superblock(&*dev).unwrap().0.format_version, FORMAT_VERSION);
    assert_fsck_clean(&dev);
}

/// lseek's SEEK_DATA and SEEK_HOLE (`FileSystem::seek`): a run of several blocks, a hole
/// between runs, a hole at the end of the file, preallocated blocks (data), a punched one
/// (a hole again), and the end of the file or past it (ENXIO's None).
#[test]
fn seek_data_and_seek_hole_find_runs_and_holes() {
    use hashfs::Seek::{Data, Hole};
    const B: u64 = 4096;
    let (fs, dev) = new_fs(8 << 20, &small_opts());
    let f = fs.open_file(p("/s"), OpenOptions::new().read(true).write(true).create(true)).unwrap();
    let ino = f.metadata().unwrap().ino;
    assert_eq!(fs.seek(ino, 0, Data).unwrap(), None, "an empty file has no data");
    assert_eq!(fs.seek(ino, 0, Hole).unwrap(), None, "nor a hole: offset 0 is its end");
    // Blocks 0-2 in one write, a hole at 3-6, block 7, a hole to the end at 10 blocks.
    f.write_at(0, &[1u8; 3 * B as usize]).unwrap();
    f.write_at(7 * B + 10, b"x").unwrap();
    f.set_len(10 * B).unwrap();
    let at = |off, what| fs.seek(ino, off, what).unwrap();
    assert_eq!(at(0, Data), Some(0));
    assert_eq!(at(100, Data), Some(100), "inside data: the offset itself");
    assert_eq!(at(0, Hole), Some(3 * B), "the run of three blocks stepped over whole");
    assert_eq!(at(2 * B + 5, Hole), Some(3 * B));
    assert_eq!(at(3 * B, Data), Some(7 * B));
    assert_eq!(at(4 * B + 1, Hole), Some(4 * B + 1), "inside a hole: the offset itself");
    assert_eq!(at(7 * B, Hole), Some(8 * B));
    assert_eq!(at(8 * B, Data), None, "no data after the last block");
    assert_eq!(at(9 * B, Hole), Some(9 * B));
    assert_eq!(at(10 * B, Data), None, "at the end");
    assert_eq!(at(10 * B, Hole), None, "at the end");
    assert_eq!(at(u64::MAX, Hole), None, "far past the end");
    // Preallocated blocks are data; a punched block is a hole.
    f.fallocate(4 * B, 2 * B, FallocateMode::Allocate).unwrap();
    assert_eq!(at(3 * B, Data), Some(4 * B));
    assert_eq!(at(4 * B, Hole), Some(6 * B));
    f.fallocate(B, B, FallocateMode::PunchHole).unwrap();
    assert_eq!(at(0, Hole), Some(B));
    assert_eq!(at(B, Data), Some(2 * B));
    // The same after a remount (the mapping's own structure, no cache).
    drop(f);
    let (fs, dev) = remount(fs, dev);
    let at = |off, what| fs.seek(ino, off, what).unwrap();
    assert_eq!(
        (at(0, Hole), at(B, Data), at(2 * B, Hole), at(3 * B, Data)),
        (Some(B), Some(2 * B), Some(3 * B), Some(4 * B))
    );
    assert_eq!((at(6 * B, Data), at(7 * B, Hole), at(8 * B, Data)), (Some(7 * B), Some(8 * B), None));
    // A hole longer than the device has blocks: found through the file's mapped runs.
    let t = fs.open_file(p("/t"), OpenOptions::new().read(true).write(true).create(true)).unwrap();
    let (far, size) = (600 << 20, 1 << 30);
    t.write_at(B, b"a").unwrap();
    t.write_at(far + 5, b"y").unwrap();
    t.set_len(size).unwrap();
    let ti = t.metadata().unwrap().ino;
    let at = |off, what| fs.seek(ti, off, what).unwrap();
    assert_eq!((at(0, Data), at(B + 7, Data), at(2 * B, Data)), (Some(B), Some(B + 7), Some(far)));
    assert_eq!((at(far + 9, Data), at(far + B, Data), at(far, Hole)), (Some(far + 9), None, Some(far + B)));
    assert_eq!((at(size - 1, Data), at(size - 1, Hole)), (None, Some(size - 1)));
    drop(t);
    assert_fsck_clean(&dev);
    drop(fs);
}
