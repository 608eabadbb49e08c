//! Untorn writes (`File::write_atomic_at`, strict mode) on every mapping: the data and
//! size they leave, the limit, the journal room a write of the limit needs on fragmented
//! images, memory-mapped files, and the write mode through mkfs and mount. The crash
//! guarantees are the explorer's (`tests/crash_consistency.rs`, untorn operations).

mod common;

use common::{assert_fsck_clean, new_fs, remount};
use hashfs::pm::{CrashDevice, CrashPoint};
use hashfs::{AllocatorKind, Error, FormatOptions, HashPlacement, MappingKind, OpenOptions, Protection, WriteMode};
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn rw() -> OpenOptions {
    OpenOptions::new().read(true).write(true).create(true).clone()
}

fn opts(mapping: MappingKind, allocator: AllocatorKind, layout_score: f64) -> FormatOptions {
    FormatOptions { mapping, allocator, layout_score, hash_seed: Some(7), inode_count: Some(256), ..Default::default() }
}

/// The suite's mapping (`HASHFS_TEST_MAPPING`; scripts/test.sh runs every one), with the
/// allocator layouts that matter: aligned (blocks kept in place), bitmap-fragmented
/// (scattered blocks, the costliest structure changes).
fn configs() -> Vec<(MappingKind, AllocatorKind, f64)> {
    match common::test_mapping() {
        MappingKind::HashFs => vec![(MappingKind::HashFs, AllocatorKind::Bitmap, 1.0)],
        m => vec![(m, AllocatorKind::Aligned, 1.0), (m, AllocatorKind::Bitmap, 0.3)],
    }
}

fn write_model(model: &mut Vec<u8>, off: u64, data: &[u8]) {
    let end = off as usize + data.len();
    if model.len() < end {
        model.resize(end, 0);
    }
    model[off as usize..end].copy_from_slice(data);
}

#[test]
fn untorn_writes_leave_the_data_and_size_of_a_write() {
    for (mapping, allocator, score) in configs() {
        let (fs, dev) = new_fs(32 * MIB, &opts(mapping, allocator, score));
        let max = fs.untorn_write_max();
        let expect = match mapping {
            MappingKind::HashFs => MIB,
            MappingKind::Ctfs => 1 << 30, // pswap (fs/ctfs/untorn_pswap.rs)
            _ => 256 << 10,
        };
        assert_eq!(max, expect, "{mapping:?}: the limit on the default journal");
        // ctfs: writes this image holds, by pswap (more than the copy-on-write path takes).
        let big = max.min(4 * MIB);
        let f = fs.open_file(Path::new("/f"), &rw()).unwrap();
        let mut model = Vec::new();
        // A sparse file: blocks 0..3 and 10 mapped.
        for (off, len) in [(0u64, 3 * 4096usize), (40_960, 100)] {
            let d = vec![1u8; len];
            f.write_at(off, &d).unwrap();
            write_model(&mut model, off, &d);
        }
        let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
        // Overwrites inside a block and across blocks, over holes and mapped blocks, an
        // append, and writes of the limit (aligned, then spanning one block more).
        let cases = [
            (10u64, 50usize),
            (4000, 5000),
            (8000, 40_000),
            (model.len() as u64, 7000),
            (0, big as usize),
            (100, big as usize),
            // A whole 2 MiB (ctfs: swapped as one 2 MiB entry), then part of it.
            (2 * MIB, (2 * MIB).min(big) as usize),
            (2 * MIB + 5000, (big / 2) as usize),
        ];
        for (i, (off, len)) in cases.into_iter().enumerate() {
            let d: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            assert_eq!(f.write_atomic_at(off, &d).unwrap(), off + len as u64, "{mapping:?} case {i}");
            write_model(&mut model, off, &d);
            let mut back = vec![0u8; model.len()];
            assert_eq!(f.read_at(0, &mut back).unwrap(), model.len());
            assert!(back == model, "{mapping:?} {allocator:?}: case {i} reads back wrong");
            assert_eq!(f.metadata().unwrap().size, model.len() as u64);
        }
        // Too large, and empty.
        assert!(matches!(f.write_atomic_at(0, &vec![0u8; max as usize + 1]), Err(Error::Invalid(_))));
        assert_eq!(f.write_atomic_at(5, &[]).unwrap(), 5);
        // Space: every moved block's old block came back.
        let blocks = f.metadata().unwrap().st_blocks();
        drop(f);
        let (fs, dev) = remount(fs, dev);
        assert_fsck_clean(&dev);
        let f = fs.open_file(Path::new("/f"), OpenOptions::new().read(true)).unwrap();
        let mut back = vec![0u8; model.len()];
        f.read_at(0, &mut back).unwrap();
        assert!(back == model, "{mapping:?}: after remount");
        assert_eq!(f.metadata().unwrap().st_blocks(), blocks);
    }
}

/// A write of the limit over a file whose every block lies apart from its neighbours (the
/// worst case for the structures' changes) fits one journal, on every mapping.
#[test]
fn a_write_of_the_limit_fits_the_journal_on_fragmented_images() {
    for (mapping, allocator, score) in configs() {
        for journal_blocks in [4u32, 16] {
            let o = FormatOptions { journal_blocks, ..opts(mapping, allocator, score) };
            let (fs, dev) = new_fs(32 * MIB, &o);
            // ctfs's limit on the default journal (1 GiB) is larger than the image: its
            // bound is checked against the page table in fs/ctfs/untorn_pswap.rs.
            let max = fs.untorn_write_max().min(4 * MIB) as usize;
            assert!(max >= 64 << 10, "{mapping:?} journal {journal_blocks}: limit {max}");
            // Interleave two files block by block, so neither has two adjacent blocks.
            let a = fs.open_file(Path::new("/a"), &rw()).unwrap();
            let b = fs.open_file(Path::new("/b"), &rw()).unwrap();
            for i in 0..(2 * max as u64 / 4096 + 2) {
                a.write_at(i * 4096, &[1u8; 4096]).unwrap();
                b.write_at(i * 4096, &[2u8; 4096]).unwrap();
            }
            for round in 0..4u8 {
                let off = 100 + round as u64 * 4096;
                let d = vec![round + 3; max];
                a.write_atomic_at(off, &d)
                    .unwrap_or_else(|e| panic!("{mapping:?} {allocator:?} journal {journal_blocks}: {e}"));
                let mut back = vec![0u8; max];
                a.read_at(off, &mut back).unwrap();
                assert!(back == d);
            }
            drop((a, b));
            let (_fs, dev) = remount(fs, dev);
            assert_fsck_clean(&dev);
        }
    }
}

/// Blocks under a shim mapping stay where they are: the write goes through the journal
/// and shows in the mapping; one larger than the journal holds fails with Busy.
#[test]
fn a_mapped_file_is_written_in_place() {
    for mapping in [MappingKind::HashFs, MappingKind::ExtentTree] {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let path = dir.path().join("img");
        let o = FormatOptions { mapping, ..FormatOptions::default() };
        hashfs::FileSystem::format_file(&path, 64 * MIB, &o, &|_, _| {}).unwrap();
        let fs = hashfs::FileSystem::open(&path).unwrap().0;
        let f = fs.open_file(Path::new("/f"), &rw()).unwrap();
        f.write_at(0, &vec![5u8; 16 * 4096]).unwrap();
        let m = f.map(0, 16 * 4096, Protection::ReadOnly).unwrap();
        f.write_atomic_at(4000, &[9u8; 8000]).unwrap();
        let mut buf = vec![0u8; 8000];
        m.read_at(4000, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 9), "{mapping:?}: the mapping sees the write");
        assert!(matches!(f.write_atomic_at(0, &vec![1u8; 64 * 4096]), Err(Error::Busy)));
        // In strict mode the same write goes through, in pieces the journal can log.
        fs.set_write_mode(WriteMode::Strict);
        f.write_at(0, &vec![2u8; 64 * 4096]).unwrap();
        let mut buf = vec![0u8; 16 * 4096];
        m.read_at(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 2), "{mapping:?}: the mapping sees the strict write");
        fs.set_write_mode(WriteMode::Relaxed);
        drop(m);
        f.write_atomic_at(0, &vec![1u8; 64 * 4096]).unwrap();
    }
}

/// Grouped placement: blocks of a claimed group are written in place (the group stays
/// whole), and the file reads back right.
#[test]
fn grouped_extents_stay_in_their_group() {
    let o =
        FormatOptions { placement: HashPlacement::Grouped, ..opts(MappingKind::HashFs, AllocatorKind::Bitmap, 1.0) };
    let (fs, dev) = new_fs(16 * MIB, &o);
    let f = fs.open_file(Path::new("/f"), &rw()).unwrap();
    f.write_at(0, &vec![3u8; 2 << 20]).unwrap();
    let before: Vec<_> = (0..512).map(|l| fs.physical_block(f.ino(), hashfs::Lblk(l)).unwrap()).collect();
    f.write_atomic_at(5000, &[4u8; 20_000]).unwrap();
    let after: Vec<_> = (0..512).map(|l| fs.physical_block(f.ino(), hashfs::Lblk(l)).unwrap()).collect();
    assert_eq!(
        before.iter().map(|e| e.map(|e| e.pblk)).collect::<Vec<_>>(),
        after.iter().map(|e| e.map(|e| e.pblk)).collect::<Vec<_>>()
    );
    let mut back = vec![0u8; 30_000];
    f.read_at(0, &mut back).unwrap();
    assert!(
        back[..5000].iter().all(|&b| b == 3)
            && back[5000..25_000].iter().all(|&b| b == 4)
            && back[25_000..].iter().all(|&b| b == 3)
    );
    drop(f);
    let (_fs, dev) = remount(fs, dev);
    assert_fsck_clean(&dev);
}

/// mkfs sets the mode a mount starts in; a mount may change it; strict writes larger
/// than the limit go in untorn pieces.
#[test]
fn the_write_mode_comes_from_mkfs_and_the_mount() {
    let o = FormatOptions { write_mode: WriteMode::Strict, ..opts(MappingKind::HashFs, AllocatorKind::Bitmap, 1.0) };
    let (fs, dev) = new_fs(16 * MIB, &o);
    assert_eq!(fs.write_mode(), WriteMode::Strict);
    let f = fs.open_file(Path::new("/f"), &rw()).unwrap();
    let d: Vec<u8> = (0..3 * MIB + 123).map(|i| (i % 251) as u8).collect();
    assert_eq!(f.write_at(7, &d).unwrap(), d.len());
    let mut back = vec![0u8; d.len()];
    f.read_at(7, &mut back).unwrap();
    assert!(back == d);
    drop(f);
    fs.set_write_mode(WriteMode::Relaxed);
    assert_eq!(fs.write_mode(), WriteMode::Relaxed);
    let (fs, _dev) = remount(fs, dev);
    assert_eq!(fs.write_mode(), WriteMode::Strict, "the image's mode, at the next mount");
}

/// A block overwritten again and again (untorn) moves between slots without using up
/// space or leaving the table inconsistent (HashFS leaves the old slot a tombstone that
/// the next switch of the key takes again).
#[test]
fn repeated_untorn_overwrites_reuse_their_space() {
    for (mapping, allocator, score) in configs() {
        let (fs, dev) = new_fs(16 * MIB, &opts(mapping, allocator, score));
        let f = fs.open_file(Path::new("/f"), &rw()).unwrap();
        f.write_at(0, &vec![1u8; 64 << 10]).unwrap();
        let (free, blocks) = (fs.statfs().blocks_free, f.metadata().unwrap().st_blocks());
        for i in 0..2000u64 {
            let b = (i * 7) % 15; // the last write ends inside the 16th block: no growth
            f.write_atomic_at(b * 4096 + (i % 3) * 100, &[(i % 250) as u8 + 1; 4096]).unwrap();
        }
        // The block mappings' structures may take a node or two as moved blocks split the
        // file's extents; the data takes nothing more.
        let used = free as i64 - fs.statfs().blocks_free as i64;
        assert!((0..=4).contains(&used), "{mapping:?} {allocator:?}: {used} blocks more in use");
        assert_eq!(f.metadata().unwrap().st_blocks(), blocks);
        drop(f);
        let (_fs, dev) = remount(fs, dev);
        assert_fsck_clean(&dev);
    }
}

/// Every image a crash at one of `points` may leave, as far as lines `lines` go: each of
/// their contents in turn, with every other line durable, then latest. Calls `check` with
/// the image and the fence index; returns how many images it saw.
fn each_crash_image(points: &[CrashPoint], lines: &[usize], check: &mut dyn FnMut(&[u8], u64)) -> usize {
    let mut images = 0;
    for pt in points {
        let ours: Vec<usize> = (0..pt.lines.len()).filter(|&i| lines.contains(&pt.lines[i].line)).collect();
        let combos: usize = ours.iter().map(|&i| pt.lines[i].outcomes.len()).product();
        for rest in [0, usize::MAX] {
            for mut c in 0..combos {
                let img = pt.image_choosing(|i| match ours.contains(&i) {
                    true => {
                        let n = pt.lines[i].outcomes.len();
                        let k = c % n;
                        c /= n;
                        k
                    }
                    false => rest,
                });
                check(&img, pt.fence_index);
                images += 1;
            }
        }
    }
    images
}

/// Every image a crash at one of `points` may leave (over `lines`, as
/// [`each_crash_image`]), recovered: bytes [off, off + len) of `/f` must all be one of
/// `whole` (each a byte value the write or its absence leaves everywhere). Returns how many
/// images were checked.
fn assert_whole_after_recovery(points: &[CrashPoint], lines: &[usize], off: u64, len: usize, whole: &[u8]) -> usize {
    each_crash_image(points, lines, &mut |img, fence| {
        let (fs, _, _) = common::mount_image(img).expect("recovery");
        let f = fs.open_file(Path::new("/f"), &rw()).unwrap();
        let mut got = vec![0u8; len];
        assert_eq!(f.read_at(off, &mut got).unwrap(), len);
        assert!(
            whole.iter().any(|&w| got.iter().all(|&b| b == w)),
            "fence {fence}: bytes {off}..{} after recovery start with {:?} and hold {:?}, not one of {whole:?} throughout",
            off + len as u64,
            &got[..8],
            got.iter().copied().collect::<std::collections::BTreeSet<u8>>()
        );
    })
}

/// A HashFS image (the paper's placement) with `/f` of 256 blocks of ones, and where its
/// blocks' slots lie; None when the suite runs another mapping.
struct SlotImage {
    fs: common::Fs,
    dev: Arc<CrashDevice>,
    f: hashfs::File<CrashDevice>,
    map_off: u64,
}

impl SlotImage {
    fn new() -> Option<SlotImage> {
        if common::test_mapping() != MappingKind::HashFs {
            return None;
        }
        let o =
            FormatOptions { placement: HashPlacement::Paper, ..opts(MappingKind::HashFs, AllocatorKind::Bitmap, 1.0) };
        let (fs, dev) = new_fs(16 * MIB, &o);
        let map_off = fs.geometry().map_off;
        let f = fs.open_file(Path::new("/f"), &rw()).unwrap();
        f.write_at(0, &vec![1u8; 256 * 4096]).unwrap();
        Some(SlotImage { fs, dev, f, map_off })
    }

    /// The slot (= block) that logical block `l` of `/f` lies in.
    fn slot(&self, l: u64) -> u64 {
        self.fs.physical_block(self.f.ino(), hashfs::Lblk(l)).unwrap().expect("mapped").pblk.0
    }

    /// The cache line that holds table slot `slot`.
    fn line_of(&self, slot: u64) -> usize {
        ((self.map_off + 8 * slot) / 64) as usize
    }
}

/// Freeing HashFS slots fences first (`fs/data.rs`, `free_slots`). An untorn write whose
/// new slot lies before the old one (the second switch of a block takes back the tombstone
/// the first left) leaves the older copy's tombstone flushed but not fenced; a hole punched
/// over the block then stores the live copy's tombstone. With the two slots in different
/// cache lines (the explorer's small images keep them in one), no crash image of the punch
/// may read the block as the first write, the older copy: only as the second write or as
/// zeros. Without the fence the image with the live copy's tombstone on the media and the
/// older copy's not brings the first write back (`scripts/crash-bugs.sh`,
/// `free-slots-no-fence`).
#[test]
fn a_hole_punched_after_a_key_switch_never_revives_the_older_copy() {
    let Some(t) = SlotImage::new() else { return };
    let (dev, f) = (&t.dev, &t.f);
    let (slot, line_of) = (|l| t.slot(l), |s| t.line_of(s));
    // A block in the last slot of a cache line whose first untorn write takes the next
    // slot (in the next line) and whose second takes its slot back.
    let mut found = None;
    for l in 0..256 {
        let p = slot(l);
        if line_of(p) == line_of(p + 1) {
            continue;
        }
        f.write_atomic_at(l * 4096, &[2u8; 4096]).unwrap();
        if slot(l) != p + 1 {
            continue;
        }
        f.write_atomic_at(l * 4096, &[3u8; 4096]).unwrap();
        if slot(l) == p {
            found = Some((l, p));
            break;
        }
    }
    let (lblk, p) = found.expect("a block at the end of a cache line whose switches alternate");
    let (live, older) = (line_of(p), line_of(p + 1));
    dev.set_capture(true);
    f.fallocate(lblk * 4096, 4096, hashfs::FallocateMode::PunchHole).unwrap();
    dev.set_capture(false);
    let points = dev.take_points();
    let pending = |line: usize| points.iter().any(|pt| pt.lines.iter().any(|l| l.line == line));
    assert!(pending(older), "the older copy's tombstone was still pending when the punch began");
    assert!(pending(live), "the live copy's tombstone");
    // The second write (3) or the hole (0); the first write's bytes (2) mean the older
    // copy came back.
    let images = assert_whole_after_recovery(&points, &[live, older], lblk * 4096, 4096, &[3, 0]);
    assert!(images >= 4, "{images} crash images checked");
}

/// An untorn write across two HashFS blocks is one transaction that switches both keys,
/// each new key and old slot's tombstone logged. With both new slots before the old ones
/// on their probe paths (each block's earlier switch left its home a tombstone), a new key
/// that reached the media without its undo record would win over the old copy after the
/// rollback, and the write would be torn. Every image of every crash point, over the four
/// slots' lines, shows both blocks old or both new (`scripts/crash-bugs.sh`,
/// `untorn-unlogged-key`, which the sampled explorer no longer reaches).
#[test]
fn an_untorn_write_across_two_blocks_whose_new_slots_come_first_is_whole_or_absent() {
    let Some(t) = SlotImage::new() else { return };
    let (dev, f) = (&t.dev, &t.f);
    let (slot, line_of) = (|l| t.slot(l), |s| t.line_of(s));
    let mut found = None;
    for l in (0..254).step_by(2) {
        // Each block switched once on its own (data 2): to a slot after its home.
        let before = [slot(l), slot(l + 1)];
        f.write_atomic_at(l * 4096, &[2u8; 4096]).unwrap();
        f.write_atomic_at((l + 1) * 4096, &[2u8; 4096]).unwrap();
        let old = [slot(l), slot(l + 1)];
        if old[0] <= before[0] || old[1] <= before[1] {
            continue;
        }
        // Both at once (data 3), captured: the new slots must come before the old.
        dev.set_capture(true);
        f.write_atomic_at(l * 4096, &[3u8; 8192]).unwrap();
        dev.set_capture(false);
        let points = dev.take_points();
        let new = [slot(l), slot(l + 1)];
        if new[0] < old[0] && new[1] < old[1] {
            found = Some((l, old, new, points));
            break;
        }
    }
    let (lblk, old, new, points) = found.expect("two blocks whose second switch takes slots before their first");
    let lines: Vec<usize> = old.iter().chain(&new).map(|&s| line_of(s)).collect();
    // Both blocks old (2) or both new (3); a mix is a torn write.
    let images = assert_whole_after_recovery(&points, &lines, lblk * 4096, 8192, &[2, 3]);
    assert!(images >= 8, "{images} crash images checked");
}

/// HashFS (the paper's placement): an untorn write inside one mapped block that leaves the
/// size alone switches the key without the journal, in two fences, whichever side of the
/// old slot the new one lies on (the first switch takes a slot after it, the second the
/// tombstone the first left, before it); a write across two blocks takes the transaction
/// (more fences). The data survives a remount and fsck finds nothing.
#[test]
fn an_untorn_write_inside_one_hashfs_block_takes_two_fences() {
    if common::test_mapping() != MappingKind::HashFs {
        return;
    }
    use hashfs::pm::PmDevice;
    let o = FormatOptions { placement: HashPlacement::Paper, ..opts(MappingKind::HashFs, AllocatorKind::Bitmap, 1.0) };
    let (fs, dev) = new_fs(16 * MIB, &o);
    let f = fs.open_file(Path::new("/f"), &rw()).unwrap();
    let mut model = vec![1u8; 5 * 4096];
    f.write_at(0, &model).unwrap();
    let fences = |w: &dyn Fn()| {
        let before = dev.stats().snapshot();
        w();
        dev.stats().snapshot().since(&before).fences
    };
    for (i, (off, len)) in
        [(4096u64, 4096usize), (4096, 4096), (8192 + 10, 50), (8192 + 10, 50), (4096, 4096)].into_iter().enumerate()
    {
        let d = vec![i as u8 + 2; len];
        assert_eq!(fences(&|| assert_eq!(f.write_atomic_at(off, &d).unwrap(), off + len as u64)), 2, "write {i}");
        write_model(&mut model, off, &d);
    }
    let d = vec![9u8; 4096];
    let across = fences(&|| {
        f.write_atomic_at(4000, &d).unwrap();
    });
    assert!(across > 2, "across two blocks: the transaction ({across} fences)");
    write_model(&mut model, 4000, &d);
    drop(f);
    let (fs, dev) = remount(fs, dev);
    assert_eq!(fs.read(Path::new("/f")).unwrap(), model);
    assert_eq!(fs.metadata(Path::new("/f")).unwrap().st_blocks(), 5 * 8);
    drop(fs);
    assert_fsck_clean(&dev);
}
