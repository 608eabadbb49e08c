//! HashFS's grouped placement (`mapping/hashfs/groups.rs`): whole 2 MiB chunks of a file
//! land on whole aligned 2 MiB groups of slots, found through the group directory; claims
//! are dropped when their group empties; everything survives a remount and a crash; small
//! files and partial chunks keep the paper's placement.

mod common;
use common::*;
use hashfs::pm::CrashDevice;
use hashfs::{format, FileSystem, FormatOptions, HashPlacement, Ino, Lblk, MappingKind, OpenOptions};
use std::path::Path;
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn opts() -> FormatOptions {
    FormatOptions {
        mapping: MappingKind::HashFs,
        placement: HashPlacement::Grouped,
        journal_count: 2,
        journal_blocks: 16,
        inode_count: Some(1024),
        hash_seed: Some(0x5EED),
        ..Default::default()
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ seed).collect()
}

/// The physical block of every logical block of `ino` in [from, to).
fn blocks(fs: &Fs, ino: Ino, from: u64, to: u64) -> Vec<Option<u64>> {
    (from..to).map(|l| fs.physical_block(ino, Lblk(l)).unwrap().map(|e| e.pblk.0)).collect()
}

/// Whether chunk `c` of `ino` lies on one aligned group, in order.
fn chunk_grouped(fs: &Fs, ino: Ino, c: u64) -> bool {
    let b = blocks(fs, ino, c * 512, (c + 1) * 512);
    let phase = fs.geometry().data_off / 4096;
    match b[0] {
        Some(first) => {
            (first + phase).is_multiple_of(512) && b.iter().enumerate().all(|(i, p)| *p == Some(first + i as u64))
        }
        None => false,
    }
}

/// The claim filter's counts summed over its cells (`Groups::filter_cells`): one per live
/// claim, counted up at each claim and down when one is dropped. A filter that kept the
/// chunks of dropped claims sent every lookup of such a chunk through the directory, the
/// whole claim window on a full image.
fn filter_total(fs: &Fs) -> u64 {
    let t = hashfs::testing::table(fs).unwrap();
    t.groups().unwrap().filter_cells().iter().map(|c| u64::from(c.load(std::sync::atomic::Ordering::Relaxed))).sum()
}

#[test]
fn whole_chunks_land_on_aligned_groups_and_claims_follow_the_file() {
    let (fs, dev) = new_fs(64 * MIB, &opts());
    assert_eq!(fs.claimed_groups(), Some(0));
    // A few small files first (more would leave no group free: see the next tests).
    for i in 0..20 {
        fs.write(Path::new(&format!("/s{i}")), &pattern(5000 + i * 37, i as u8)).unwrap();
    }
    let data = pattern((8 * MIB) as usize + 12_345, 7);
    fs.write(Path::new("/big"), &data).unwrap();
    let ino = fs.metadata(Path::new("/big")).unwrap().ino;
    assert_eq!(fs.claimed_groups(), Some(4), "one group per whole chunk; the tail is not a whole chunk");
    assert_eq!(filter_total(&fs), 4, "the claim filter counts each claim");
    for c in 0..4 {
        assert!(chunk_grouped(&fs, ino, c), "chunk {c} lies on one aligned group");
    }
    assert!(!chunk_grouped(&fs, ino, 4), "the partial last chunk keeps the paper's placement");
    assert_eq!(fs.read(Path::new("/big")).unwrap(), data);

    // A truncate into chunk 1 keeps chunks 0 and 1's claims and drops 2 and 3's.
    let f = fs.open_file(Path::new("/big"), OpenOptions::new().write(true)).unwrap();
    f.set_len(3 * MIB).unwrap();
    assert_eq!(fs.claimed_groups(), Some(2));
    assert_eq!(filter_total(&fs), 2, "the dropped claims are counted out of the filter");
    // Growing chunk 1 again fills its group's freed slots.
    f.write_at(3 * MIB, &data[(3 * MIB) as usize..(4 * MIB) as usize]).unwrap();
    drop(f);
    assert!(chunk_grouped(&fs, ino, 1), "the rewritten half returns to its group");
    assert_eq!(fs.read(Path::new("/big")).unwrap(), &data[..(4 * MIB) as usize]);

    // Claims and placement survive a remount; fsck finds every grouped key reachable.
    fs.unmount().unwrap();
    let (fs, _r, d2) = mount_image(&dev.live_image()).unwrap();
    assert_eq!(fs.claimed_groups(), Some(2));
    assert_eq!(filter_total(&fs), 2, "a mount counts the directory's claims");
    assert!(chunk_grouped(&fs, ino, 0) && chunk_grouped(&fs, ino, 1));
    assert_eq!(fs.read(Path::new("/big")).unwrap(), &data[..(4 * MIB) as usize]);
    for i in 0..20 {
        assert_eq!(fs.read(Path::new(&format!("/s{i}"))).unwrap(), pattern(5000 + i * 37, i as u8));
    }
    fs.remove_file(Path::new("/big")).unwrap();
    assert_eq!(fs.claimed_groups(), Some(0), "deleting the file drops every claim");
    assert_eq!(filter_total(&fs), 0);
    fs.unmount().unwrap();
    assert_fsck_clean(&d2);
}

#[test]
fn partial_chunks_and_appends_keep_the_paper_placement() {
    let (fs, _dev) = new_fs(32 * MIB, &opts());
    // posix_fallocate over whole chunks claims them.
    let g = fs.open_file(Path::new("/pre"), OpenOptions::new().write(true).create(true)).unwrap();
    g.allocate(0, 4 * MIB).unwrap();
    assert_eq!(fs.claimed_groups(), Some(2));
    let ino = g.ino();
    assert!(chunk_grouped(&fs, ino, 0) && chunk_grouped(&fs, ino, 1));
    // Appends never write a whole chunk in one request.
    let f = fs.open_file(Path::new("/log"), OpenOptions::new().write(true).create(true).append(true)).unwrap();
    for i in 0..8 {
        f.write_at(0, &pattern((MIB / 2) as usize, i)).unwrap();
    }
    assert_eq!(fs.claimed_groups(), Some(2), "no append claimed a group");
    assert!(!chunk_grouped(&fs, f.ino(), 0));
}

#[test]
fn small_files_everywhere_are_moved_out_of_the_group_a_chunk_claims() {
    // Hashing spreads small files' blocks over every group: at 4% full hardly any group of
    // 512 slots is still empty (about e^(-512 * 0.04)). A whole-chunk write then empties
    // the group with the fewest keys by moving them elsewhere, and the small files read
    // back the same, before and after a remount, with fsck clean.
    let (fs, dev) = new_fs(16 * MIB, &FormatOptions { inode_count: Some(4096), ..opts() });
    let mut n = 0;
    while fs.statfs().blocks_free as f64 > fs.statfs().blocks_total as f64 * 0.96 {
        fs.write(Path::new(&format!("/s{n}")), &pattern(4096, n as u8)).unwrap();
        n += 1;
    }
    assert_eq!(fs.free_aligned_extents(), 0, "no group is free");
    // A file that is open elsewhere keeps its blocks only while its lock is held; an
    // open handle alone does not pin them.
    let _held = fs.open_file(Path::new("/s0"), OpenOptions::new().read(true)).unwrap();
    let data = pattern((2 * MIB) as usize, 3);
    fs.write(Path::new("/big"), &data).unwrap();
    let ino = fs.metadata(Path::new("/big")).unwrap().ino;
    assert_eq!(fs.claimed_groups(), Some(1));
    assert!(chunk_grouped(&fs, ino, 0));
    assert_eq!(fs.read(Path::new("/big")).unwrap(), data);
    for i in 0..n {
        assert_eq!(fs.read(Path::new(&format!("/s{i}"))).unwrap(), pattern(4096, i as u8), "small file {i}");
    }
    drop(_held);
    let (fs, d2) = remount(fs, dev);
    for i in 0..n {
        assert_eq!(fs.read(Path::new(&format!("/s{i}"))).unwrap(), pattern(4096, i as u8), "small file {i}");
    }
    assert!(chunk_grouped(&fs, ino, 0));
    fs.unmount().unwrap();
    assert_fsck_clean(&d2);
}

#[test]
fn a_pinned_file_s_blocks_are_never_moved() {
    // Every group holds a block of the one file, which is pinned (as a memory mapping pins
    // it): no group can be emptied, and the chunk is placed by hash.
    let (fs, _dev) = new_fs(16 * MIB, &opts());
    let f = fs.open_file(Path::new("/m"), OpenOptions::new().read(true).write(true).create(true)).unwrap();
    f.write_at(0, &pattern((MIB / 2) as usize, 1)).unwrap();
    let groups = fs.geometry().data_blocks / 512;
    let pin = f.pin_blocks();
    let data = pattern((2 * MIB) as usize, 3);
    fs.write(Path::new("/big"), &data).unwrap();
    let ino = fs.metadata(Path::new("/big")).unwrap().ino;
    assert!(groups <= 8);
    assert_eq!(fs.claimed_groups(), Some(0));
    assert!(!chunk_grouped(&fs, ino, 0));
    assert_eq!(fs.read(Path::new("/big")).unwrap(), data);
    drop(pin);
    // Unpinned, the next whole chunk may move its blocks.
    fs.write(Path::new("/big2"), &data).unwrap();
    assert_eq!(fs.claimed_groups(), Some(1));
    assert_eq!(fs.read(Path::new("/m")).unwrap(), pattern((MIB / 2) as usize, 1));
}

/// A 2 MiB write takes two transactions (256 blocks each): the first claims the group
/// and publishes half, the second fills the rest from the claim. A crash at any fence
/// leaves a prefix of the write, the claim dropped if no key of its chunk was published,
/// and an image fsck finds clean.
#[test]
fn crash_during_a_grouped_chunk_write_gives_a_prefix() {
    let dev = Arc::new(CrashDevice::new(16 * MIB));
    format(&*dev, &opts(), &|_, _| {}).unwrap();
    let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {}).unwrap();
    fs.write(Path::new("/small"), b"s").unwrap();
    let f = fs.open_file(Path::new("/g"), OpenOptions::new().read(true).write(true).create(true)).unwrap();
    dev.set_capture(true);
    f.write_at(0, &vec![4u8; (2 * MIB) as usize]).unwrap();
    dev.set_capture(false);
    assert!(chunk_grouped(&fs, f.ino(), 0));
    drop(f);
    drop(fs);
    let points = dev.take_points();
    assert!(points.len() > 4, "{} fences", points.len());
    let mut saw_partial = false;
    for p in &points {
        for img in [p.image_durable_only(), p.image_all_pending()] {
            let (fs, _r, d) = mount_image(&img).unwrap_or_else(|e| panic!("fence {}: {e}", p.fence_index));
            let f = fs.open_file(Path::new("/g"), OpenOptions::new().read(true)).unwrap();
            let size = f.metadata().unwrap().size;
            saw_partial |= size > 0 && size < 2 * MIB;
            let mut buf = vec![0u8; size as usize];
            f.read_at(0, &mut buf).unwrap();
            assert!(buf.iter().all(|&b| b == 4), "fence {}: a prefix of the write", p.fence_index);
            let claimed = fs.claimed_groups().unwrap();
            assert!(claimed <= 1, "fence {}: {claimed} claims", p.fence_index);
            if size == 0 {
                assert_eq!(claimed, 0, "fence {}: a claim with no key of its chunk survives recovery", p.fence_index);
            }
            assert_eq!(fs.read(Path::new("/small")).unwrap(), b"s");
            drop(f);
            fs.unmount().unwrap();
            assert_fsck_clean(&d);
        }
    }
    assert!(saw_partial, "some crash image holds half of the write");
}

/// Reads of claimed chunks with holes punched in them: punched blocks read as zeros, whatever
/// their freed slots' blocks still hold, in reads of every size and alignment (a read's run
/// of consecutive slots ends at a hole: a run that passed over a block with no slot, or one
/// taken to the chunk's end without checking each slot's key, tried as a faster large read,
/// read the freed blocks' old bytes here).
#[test]
fn reads_of_claimed_chunks_stop_at_holes() {
    use hashfs::FallocateMode;
    let (fs, dev) = new_fs(64 * MIB, &opts());
    let mut data = pattern((8 * MIB) as usize, 3);
    fs.write(Path::new("/big"), &data).unwrap();
    assert_eq!(fs.claimed_groups(), Some(4));
    let f = fs.open_file(Path::new("/big"), OpenOptions::new().read(true).write(true)).unwrap();
    for (block, n) in [(512 + 20, 1u64), (1024 + 100, 4), (1536 + 9, 1), (1536 + 511, 1)] {
        f.fallocate(block * 4096, n * 4096, FallocateMode::PunchHole).unwrap();
        data[(block * 4096) as usize..((block + n) * 4096) as usize].fill(0);
    }
    assert_eq!(fs.claimed_groups(), Some(4), "a punched chunk keeps its group");
    assert!(fs.read(Path::new("/big")).unwrap() == data, "the whole file, read at once");
    for (off, len) in
        [(0, MIB), (2 * MIB, MIB), (2 * MIB + 4096, 2 * MIB), (4 * MIB + 123, 700_000), (6 * MIB, 2 * MIB)]
    {
        let mut buf = vec![0xEEu8; len as usize];
        assert_eq!(f.read_at(off, &mut buf).unwrap(), len as usize);
        assert!(buf[..] == data[off as usize..(off + len) as usize], "{len} bytes at {off}");
    }
    drop(f);
    fs.unmount().unwrap();
    assert_fsck_clean(&dev);
}
