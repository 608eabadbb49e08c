//! ctFS on image files: the live view (`mapping/ctfs/view.rs`: reads and in-place writes
//! of a `ctfs` file are copies through the image's pages mapped where the page table puts
//! them), checked against a model through every change that removes or moves pages
//! (truncation, hole punching, partition moves, untorn copy-on-write, pswap, unlink and
//! reuse of the blocks by another file), with the view shown to serve the reads; a view
//! that kept a stale mapping shows as wrong bytes or a SIGSEGV. And pswap
//! (`File::swap_pages`): contents exchanged, block counts, errors, a clean remount. And
//! the partition hierarchy's statistics (`hashfs info`): the level each file's size puts
//! it in, every page of the space in exactly one partition, the same after a remount; and
//! a full virtual space (ENOSPC for growth, never for a truncation).

use hashfs::{Error, FallocateMode, FileSystem, FormatOptions, MappingKind, OpenOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::Path;

const MIB: u64 = 1 << 20;

fn image(dir: &Path) -> FileSystem {
    let path = dir.join("ctfs.img");
    let opts = FormatOptions { mapping: MappingKind::Ctfs, ..FormatOptions::default() };
    FileSystem::format_file(&path, 96 * MIB, &opts, &|_, _| {}).unwrap();
    FileSystem::open(&path).unwrap().0
}

/// The hierarchy's statistics, checked: every page of the virtual space lies in one file's
/// partition or in one Empty partition.
fn partitions(fs: &FileSystem) -> hashfs::PartitionStats {
    let ps = fs.partition_stats().unwrap().expect("a ctfs image has partitions");
    assert_eq!(ps.allocated_pages() + ps.empty_pages(), ps.space_pages, "{ps:?}");
    ps
}

fn check(fs: &FileSystem, name: &str, model: &[u8], rng: &mut SmallRng) {
    let f = fs.open_file(Path::new(name), OpenOptions::new().read(true)).unwrap();
    assert_eq!(f.metadata().unwrap().size, model.len() as u64, "{name}: size");
    for _ in 0..20 {
        let off = rng.random_range(0..=model.len());
        let len = rng.random_range(0..=(model.len() - off).min(40_000));
        let mut buf = vec![0xEEu8; len];
        let n = f.read_at(off as u64, &mut buf).unwrap();
        assert_eq!(n, len);
        assert!(buf == model[off..off + len], "{name}: bytes {off}..{} differ from the model", off + len);
    }
}

#[test]
fn the_view_serves_reads_and_writes_and_forgets_what_changes_remove() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let fs = image(dir.path());
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    let mut rng = SmallRng::seed_from_u64(17);
    let names = ["/a", "/b", "/c"];
    let mut models: Vec<Vec<u8>> = vec![Vec::new(); names.len()];
    let mut served = 0u64;
    for step in 0..1500u32 {
        let i = rng.random_range(0..names.len());
        let name = names[i];
        let f = fs.open_file(Path::new(name), &rw).unwrap();
        let byte = (step % 251) as u8 + 1;
        let model = &mut models[i];
        match rng.random_range(0..20) {
            0..=6 => {
                // Appends and overwrites, small and large (partition moves as files grow).
                let len = if rng.random_bool(0.2) {
                    rng.random_range(1..3 * MIB as usize)
                } else {
                    rng.random_range(1..9000)
                };
                let off = if rng.random_bool(0.5) { model.len() } else { rng.random_range(0..=model.len()) };
                f.write_at(off as u64, &vec![byte; len]).unwrap();
                if model.len() < off + len {
                    model.resize(off + len, 0);
                }
                model[off..off + len].fill(byte);
            }
            7..=9 => {
                let ino = f.metadata().unwrap().ino;
                let before = fs.ctfs_view_pages(ino).expect("an image file has a view");
                check(&fs, name, model, &mut rng);
                served += u64::from(fs.ctfs_view_pages(ino).unwrap() > before);
            }
            10..=11 => {
                let new = rng.random_range(0..=model.len());
                f.set_len(new as u64).unwrap();
                model.resize(new, 0);
            }
            12..=13 if model.len() > 8192 => {
                let off = rng.random_range(0..model.len() - 4096);
                let len = rng.random_range(1..(model.len() - off).min(300_000));
                f.fallocate(off as u64, len as u64, FallocateMode::PunchHole).unwrap();
                model[off..off + len].fill(0);
            }
            14..=15 if model.len() >= 8192 => {
                let off = rng.random_range(0..model.len() / 4096) * 4096;
                let len = 4096.min(model.len() - off);
                if len == 4096 {
                    f.write_atomic_at(off as u64, &[byte; 4096]).unwrap();
                    model[off..off + 4096].fill(byte);
                }
            }
            16 if model.len() >= 3 * 4096 => {
                // pswap with another file's first pages (that file grown to hold them).
                let j = (i + 1) % names.len();
                let g = fs.open_file(Path::new(names[j]), &rw).unwrap();
                let n = rng.random_range(1..=(models[i].len() / 4096).min(4));
                if models[j].len() < n * 4096 {
                    g.set_len((n * 4096) as u64).unwrap();
                    models[j].resize(n * 4096, 0);
                }
                let off = rng.random_range(0..=models[i].len() / 4096 - n) * 4096;
                f.swap_pages(off as u64, &g, 0, (n * 4096) as u64).unwrap();
                let mine = models[i][off..off + n * 4096].to_vec();
                let theirs = models[j][..n * 4096].to_vec();
                models[i][off..off + n * 4096].copy_from_slice(&theirs);
                models[j][..n * 4096].copy_from_slice(&mine);
            }
            17 => {
                drop(f);
                fs.remove_file(Path::new(name)).unwrap();
                fs.open_file(Path::new(name), &rw).unwrap();
                model.clear();
            }
            _ => check(&fs, name, model, &mut rng),
        }
    }
    for (name, model) in names.iter().zip(&models) {
        check(&fs, name, model, &mut rng);
    }
    assert!(served > 50, "the view mapped pages for only {served} checks: it did not serve the reads");
    // The hierarchy after every move, and rebuilt from the inodes by a remount.
    let live = partitions(&fs);
    fs.unmount().unwrap();
    let (fs, _) = FileSystem::open(&dir.path().join("ctfs.img")).unwrap();
    assert_eq!(partitions(&fs).levels, live.levels, "the remount's hierarchy differs from the live one");
}

#[test]
fn partition_statistics_follow_the_files_sizes_and_survive_a_remount() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("ctfs.img");
    let fs = image(dir.path());
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    // (name, bytes written at offset, level of the smallest partition holding the last page)
    let files =
        [("/small", 0, 1024, 0), ("/mid", 0, 100 << 10, 2), ("/big", 0, 3 * MIB, 4), ("/sparse", 64 * MIB, 4096, 5)];
    let handles: Vec<hashfs::File> = files.iter().map(|f| fs.open_file(Path::new(f.0), &rw).unwrap()).collect();
    let before = partitions(&fs); // the root directory's block is mapped by now
    for ((_, off, len, _), f) in files.iter().zip(&handles) {
        f.write_at(*off, &vec![7u8; *len as usize]).unwrap();
    }
    drop(handles);
    let after = partitions(&fs);
    for l in &after.levels {
        let want = files.iter().filter(|f| f.3 == l.level).count() as u64;
        assert_eq!(l.files - before.levels[l.level as usize].files, want, "level {}: {after:?}", l.level);
    }
    let pages: u64 = [1, 64, 4096, 32768].iter().sum();
    assert_eq!(after.allocated_pages() - before.allocated_pages(), pages);
    fs.unmount().unwrap();
    let (fs, _) = FileSystem::open(&path).unwrap();
    assert_eq!(partitions(&fs).levels, after.levels, "after a remount");
    for (name, ..) in files {
        fs.remove_file(Path::new(name)).unwrap();
    }
    assert_eq!(partitions(&fs).levels, before.levels, "the freed partitions merge back");
}

/// The case the view's give-back exists for: a file's blocks freed by a truncation and
/// taken by another file must not be read through the first file's old mapping.
#[test]
fn freed_blocks_taken_by_another_file_are_not_read_through_an_old_mapping() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let fs = image(dir.path());
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    let a = fs.open_file(Path::new("/a"), &rw).unwrap();
    a.write_at(0, &[b'A'; 8 * 4096]).unwrap();
    let mut buf = vec![0u8; 8 * 4096];
    a.read_at(0, &mut buf).unwrap();
    let ino = a.metadata().unwrap().ino;
    assert!(fs.ctfs_view_pages(ino).unwrap() >= 8, "the read went through the view");
    a.set_len(0).unwrap();
    let b = fs.open_file(Path::new("/b"), &rw).unwrap();
    b.write_at(0, &[b'B'; 8 * 4096]).unwrap();
    a.set_len(8 * 4096).unwrap(); // holes again
    a.read_at(0, &mut buf).unwrap();
    assert!(buf.iter().all(|&x| x == 0), "a truncated file reads another file's blocks through its old view");
    a.write_at(0, &[b'C'; 4096]).unwrap();
    a.read_at(0, &mut buf[..4096]).unwrap();
    assert!(buf[..4096].iter().all(|&x| x == b'C'));
}

#[test]
fn pswap_exchanges_pages_between_and_within_files() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("ctfs.img");
    let fs = image(dir.path());
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    let a = fs.open_file(Path::new("/a"), &rw).unwrap();
    let b = fs.open_file(Path::new("/b"), &rw).unwrap();
    // a: 2 MiB + 3 pages of data; b: a sparse file of the same size with one page.
    let big = 2 * MIB as usize + 3 * 4096;
    let data: Vec<u8> = (0..big).map(|i| (i / 4096 % 250) as u8 + 1).collect();
    a.write_at(0, &data).unwrap();
    b.set_len(big as u64).unwrap();
    b.write_at(4096, &[9u8; 4096]).unwrap();
    // One level-1 entry for the aligned 2 MiB, three page entries for the rest (§3.3).
    assert_eq!(a.swap_pages(0, &b, 0, big as u64).unwrap(), 4);
    let read = |f: &hashfs::File, off: u64, len: usize| {
        let mut v = vec![0u8; len];
        assert_eq!(f.read_at(off, &mut v).unwrap(), len);
        v
    };
    assert!(read(&b, 0, big) == data, "b holds a's pages");
    let mut expect = vec![0u8; big];
    expect[4096..8192].fill(9);
    assert!(read(&a, 0, big) == expect, "a holds b's page and holes");
    assert_eq!(a.metadata().unwrap().blocks, 1);
    assert_eq!(b.metadata().unwrap().blocks, (big / 4096) as u64);
    // Within one file, ranges apart.
    b.swap_pages(0, &b, 2 * MIB, 3 * 4096).unwrap();
    let got = read(&b, 0, big);
    assert!(got[..3 * 4096] == data[2 * MIB as usize..] && got[2 * MIB as usize..] == data[..3 * 4096]);
    // Errors change nothing.
    assert!(matches!(a.swap_pages(1, &b, 0, 4096), Err(Error::Invalid(_))), "misaligned");
    assert!(matches!(b.swap_pages(0, &b, 4096, 8192), Err(Error::Invalid(_))), "overlapping");
    assert!(matches!(a.swap_pages(0, &b, big as u64, 4096), Err(Error::Invalid(_))), "past the end");
    assert!(read(&b, 0, big) == got);
    drop((a, b));
    fs.unmount().unwrap();
    let dev = std::sync::Arc::new(hashfs::pm::MmapDevice::open(&path, hashfs::pm::OpenMode::Existing).unwrap());
    let report = hashfs::fsck::fsck(dev, hashfs::fsck::FsckMode::Check, &|_, _| {}).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let (fs, _) = FileSystem::open(&path).unwrap();
    let b = fs.open_file(Path::new("/b"), OpenOptions::new().read(true)).unwrap();
    assert!(read(&b, 0, big) == got, "after a remount");
}

#[test]
fn pswap_needs_a_ctfs_image() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("h.img");
    FileSystem::format_file(&path, 32 * MIB, &FormatOptions::default(), &|_, _| {}).unwrap();
    let fs = FileSystem::open(&path).unwrap().0;
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    let a = fs.open_file(Path::new("/a"), &rw).unwrap();
    a.write_at(0, &[1u8; 8192]).unwrap();
    assert!(matches!(a.swap_pages(0, &a, 4096, 4096), Err(Error::Unsupported(_))));
}

/// A file whose last page needs a partition of `level` (8^level pages): one byte just past
/// the partition one level down. Err(NoSpace) when the virtual space has none left.
fn take_level(fs: &FileSystem, name: &str, level: u32) -> hashfs::Result<()> {
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    let f = fs.open_file(Path::new(name), &rw)?;
    let below = if level == 0 { 0 } else { 8u64.pow(level - 1) };
    f.write_at(below * 4096, b"x").map(|_| ())
}

/// With every partition of 2 MiB (L3) or more taken, the virtual space refuses a new large
/// file with ENOSPC, losing nothing, while a truncation that would move a file down to a
/// 2 MiB partition keeps the file where it is (there is no partition to move to) instead of
/// failing; the data and the hierarchy stay whole, also after a remount.
#[test]
fn a_full_virtual_space_refuses_growth_but_not_truncation() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("ctfs.img");
    let fs = image(dir.path());
    let mut taken = Vec::new();
    for level in (3..=9).rev() {
        for i in 0.. {
            let name = format!("/l{level}-{i}");
            match take_level(&fs, &name, level) {
                Ok(()) => taken.push((name, level)),
                Err(Error::NoSpace) => break,
                Err(e) => panic!("{name}: {e}"),
            }
        }
    }
    let full = partitions(&fs);
    for l in &full.levels[3..] {
        assert_eq!(l.empty, 0, "no free partition of 2 MiB or more: {full:?}");
    }
    assert_eq!(full.levels[9].files, 3, "the root directory's partition split the fourth: {full:?}");
    // A refused growth leaves the file as it was.
    let rw = OpenOptions::new().read(true).write(true).clone();
    let big = fs.open_file(Path::new("/l9-0"), &rw).unwrap();
    big.write_at(0, b"head").unwrap();
    let last = fs.open_file(Path::new("/l4-0"), &rw).unwrap();
    let before = last.metadata().unwrap().size;
    assert!(matches!(last.write_at(1 << 30, b"y"), Err(Error::NoSpace)));
    assert_eq!(last.metadata().unwrap().size, before);
    // The truncation that would move /l9-0 down to a 2 MiB partition.
    big.set_len(MIB).unwrap();
    assert_eq!(big.metadata().unwrap().size, MIB);
    big.write_at(MIB - 4, b"end!").unwrap();
    let mut buf = [0u8; 4];
    big.read_at(0, &mut buf).unwrap();
    assert_eq!(&buf, b"head");
    drop((big, last));
    assert_eq!(partitions(&fs).levels[9].files, 3, "/l9-0 stays in its partition");
    fs.unmount().unwrap();
    let (fs, _) = FileSystem::open(&path).unwrap();
    assert_eq!(partitions(&fs).levels[9].files, 3, "after a remount");
    let big = fs.open_file(Path::new("/l9-0"), OpenOptions::new().read(true)).unwrap();
    big.read_at(MIB - 4, &mut buf).unwrap();
    assert_eq!(&buf, b"end!");
    drop(big); // an unlinked file open keeps its partition
               // A truncation with room to move goes down: free one top partition, truncate another.
    fs.remove_file(Path::new("/l9-1")).unwrap();
    fs.open_file(Path::new("/l9-2"), &rw).unwrap().set_len(MIB).unwrap();
    let after = partitions(&fs);
    assert_eq!((after.levels[9].files, after.levels[3].files), (1, full.levels[3].files + 1), "{after:?}");
    for (name, _) in taken.iter().filter(|(n, _)| n != "/l9-1") {
        fs.remove_file(Path::new(name)).unwrap();
    }
    assert_eq!(partitions(&fs).levels[9].empty, 3, "the space merges back but for the root's: {:?}", partitions(&fs));
}

/// pswap moves the live mappings with the page-table entries (`mremap`), as ctFS's kernel
/// swaps them: files whose ranges lie in their mapped prefixes keep those prefixes, and
/// reads through the view return the exchanged bytes at once, for a 2 MiB-aligned range
/// (whole leaves) and an unaligned one; a partition move (a file growing out of its
/// partition) keeps the file's mapped pages too. Giving the mappings back instead would
/// be correct but leave the prefixes short (the first assertions fail).
#[test]
fn pswap_and_partition_moves_keep_the_live_mappings() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let fs = image(dir.path());
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    let fill = |name: &str, len: usize, seed: u8| {
        let f = fs.open_file(Path::new(name), &rw).unwrap();
        let data: Vec<u8> = (0..len).map(|i| seed.wrapping_add((i / 4096) as u8)).collect();
        f.write_at(0, &data).unwrap();
        let mut buf = vec![0u8; len];
        assert_eq!(f.read_at(0, &mut buf).unwrap(), len); // maps the file's pages
        (f, data)
    };
    let (a, mut da) = fill("/a", 4 * MIB as usize, 1);
    let (b, mut db) = fill("/b", 4 * MIB as usize, 101);
    let (ia, ib) = (a.metadata().unwrap().ino, b.metadata().unwrap().ino);
    let pages = |i| fs.ctfs_view_pages(i).unwrap();
    let (pa, pb) = (pages(ia), pages(ib));
    assert!(pa >= 1024 && pb >= 1024, "both files mapped: {pa}, {pb}");
    for (off_a, off_b, len) in [(0u64, 2 * MIB, 2 * MIB), (4096, 3 * 4096, 5 * 4096)] {
        a.swap_pages(off_a, &b, off_b, len).unwrap();
        let (ra, rb) = (off_a as usize..(off_a + len) as usize, off_b as usize..(off_b + len) as usize);
        let tmp = da[ra.clone()].to_vec();
        da[ra].copy_from_slice(&db[rb.clone()]);
        db[rb].copy_from_slice(&tmp);
        assert_eq!((pages(ia), pages(ib)), (pa, pb), "the prefixes stay mapped after pswap at {off_a}");
        for (f, model) in [(&a, &da), (&b, &db)] {
            let mut buf = vec![0u8; model.len()];
            f.read_at(0, &mut buf).unwrap();
            assert!(buf == *model, "the exchanged bytes through the view");
        }
        assert_eq!((pages(ia), pages(ib)), (pa, pb), "served by the mappings that moved");
    }
    // A file in a 256 KiB partition, mapped, grown into a 2 MiB one.
    let (c, mut dc) = fill("/c", 200 * 1024, 7);
    let ic = c.metadata().unwrap().ino;
    let before = pages(ic);
    assert!(before >= 50, "{before}");
    let more = vec![9u8; 200 * 1024];
    c.write_at(dc.len() as u64, &more).unwrap();
    dc.extend_from_slice(&more);
    assert_eq!(pages(ic), before, "the mapped pages moved with the file");
    let mut buf = vec![0u8; dc.len()];
    c.read_at(0, &mut buf).unwrap();
    assert!(buf == dc, "the moved file reads back");
    drop((a, b, c));
    fs.unmount().unwrap();
}

/// Untorn writes larger than the copy-on-write path takes (`fs/ctfs/untorn_pswap.rs`): staged in
/// an unlinked file and pswapped in. The data, size and block count are the write's; the
/// file's 2 MiB leaves stay 2 MiB leaves (whole 2 MiB swapped as one entry, a write into
/// part of a leaf staged with the rest of its 2 MiB); the old pages and the staging file
/// are freed; the view serves the new bytes; fsck is clean and a remount reads the same.
#[test]
fn large_untorn_writes_are_staged_and_pswapped() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("ctfs.img");
    let fs = image(dir.path());
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    let f = fs.open_file(Path::new("/f"), &rw).unwrap();
    let mut rng = SmallRng::seed_from_u64(31);
    let mut model: Vec<u8> = (0..8 * MIB).map(|_| rng.random()).collect();
    f.write_at(0, &model).unwrap();
    let ino = f.metadata().unwrap().ino;
    let leaves = |fs: &FileSystem, chunks: std::ops::Range<u64>| {
        for c in chunks {
            let e = fs.physical_block(ino, hashfs::Lblk(c * 512)).unwrap().expect("mapped");
            assert_eq!(e.len, 512, "2 MiB at {} MiB is no longer one 2 MiB leaf", 2 * c);
        }
    };
    leaves(&fs, 0..4);
    let before = fs.statfs();
    let copy_limit = 256 << 10;
    for (i, (off, len)) in [(2 * MIB, 4 * MIB), (6 * MIB + 5000, MIB), (100, copy_limit + 1)].into_iter().enumerate() {
        let d: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        assert_eq!(f.write_atomic_at(off, &d).unwrap(), off + len, "write {i}");
        model[off as usize..(off + len) as usize].copy_from_slice(&d);
        check(&fs, "/f", &model, &mut rng);
    }
    // The first 2 MiB was written in part (its pages swapped one by one): not a leaf now.
    leaves(&fs, 1..4);
    let after = fs.statfs();
    assert_eq!((after.blocks_free, after.inodes_free), (before.blocks_free, before.inodes_free));
    assert_eq!(f.metadata().unwrap().blocks, 2048);
    assert!(fs.ctfs_view_pages(ino).unwrap() > 0, "the view maps the file");
    // An append that moves the file to a larger partition in the swap's transaction.
    let d: Vec<u8> = (0..10 * MIB + 123).map(|_| rng.random()).collect();
    assert_eq!(f.write_atomic_at(model.len() as u64, &d).unwrap(), (model.len() + d.len()) as u64);
    model.extend_from_slice(&d);
    check(&fs, "/f", &model, &mut rng);
    drop(f);
    fs.unmount().unwrap();
    let dev = std::sync::Arc::new(hashfs::pm::MmapDevice::open(&path, hashfs::pm::OpenMode::Existing).unwrap());
    let report = hashfs::fsck::fsck(dev, hashfs::fsck::FsckMode::Check, &|_, _| {}).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let (fs, _) = FileSystem::open(&path).unwrap();
    check(&fs, "/f", &model, &mut rng);
}

/// A small journal: writes of any alignment up to the smaller limit, naturally aligned
/// ones (`RWF_ATOMIC`'s kind) up to 1 GiB; a large write that is neither is refused and
/// changes nothing.
#[test]
fn a_small_journal_takes_large_untorn_writes_when_they_are_aligned() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("ctfs.img");
    let opts = FormatOptions { mapping: MappingKind::Ctfs, journal_blocks: 4, ..FormatOptions::default() };
    FileSystem::format_file(&path, 96 * MIB, &opts, &|_, _| {}).unwrap();
    let fs = FileSystem::open(&path).unwrap().0;
    let (any, aligned) = (fs.untorn_write_max(), fs.untorn_write_max_aligned());
    assert!(any < 4 * MIB && aligned == 1 << 30, "{any} {aligned}");
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    let f = fs.open_file(Path::new("/f"), &rw).unwrap();
    let mut model = vec![7u8; 12 * MIB as usize];
    f.write_at(0, &model).unwrap();
    let d = vec![8u8; 4 * MIB as usize];
    assert_eq!(f.write_atomic_at(4 * MIB, &d).unwrap(), 8 * MIB);
    model[4 * MIB as usize..8 * MIB as usize].fill(8);
    assert!(matches!(f.write_atomic_at(4 * MIB + 4096, &d), Err(Error::Invalid(_))));
    let d = vec![9u8; any as usize];
    assert_eq!(f.write_atomic_at(4096, &d).unwrap(), 4096 + any);
    model[4096..4096 + any as usize].fill(9);
    let mut rng = SmallRng::seed_from_u64(5);
    check(&fs, "/f", &model, &mut rng);
    drop(f);
    fs.unmount().unwrap();
}
