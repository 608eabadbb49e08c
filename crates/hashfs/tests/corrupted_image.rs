//! Corrupt images: bit flips in the superblock, journal, inode table, hash table and
//! directory blocks, and truncated images. Mount and fsck must answer with a clear error
//! or a finding, never a panic or a hang; fsck --repair must leave an image that mounts.

mod common;
use common::*;
use hashfs::fsck::{fsck, FsckMode};
use hashfs::pm::DevOffset;
use hashfs::pm::{CrashDevice, PmDevice};
use hashfs::{Error, FileSystem, OpenOptions};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

fn populated_image() -> (Vec<u8>, hashfs::testing::layout::Geometry) {
    let (fs, dev) = new_fs(2 << 20, &small_opts());
    fs.create_dir_all(Path::new("/a/b"), 0o755).unwrap();
    for i in 0..40 {
        fs.write(Path::new(&format!("/a/f{i}")), &vec![i as u8; 100 + i * 300]).unwrap();
    }
    fs.symlink(Path::new("/a/f1"), Path::new("/a/b/link")).unwrap();
    fs.hard_link(Path::new("/a/f2"), Path::new("/a/b/f2")).unwrap();
    let f = fs.open_file(Path::new("/sparse"), OpenOptions::new().write(true).create(true)).unwrap();
    f.write_at(50_000, b"x").unwrap();
    drop(f);
    let geo = fs.geometry();
    fs.unmount().unwrap();
    (dev.live_image(), geo)
}

/// Runs `f` on another thread and fails the test if it does not finish in time.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(v) => v,
        Err(_) => panic!("{what}: no answer within 30 s (hang or panic)"),
    }
}

/// Mounts, walks, checks and repairs a damaged image; returns whether fsck noticed.
fn exercise(label: String, image: Vec<u8>) -> bool {
    within(&label.clone(), move || {
        let dev = Arc::new(CrashDevice::from_image(&image));
        if let Ok((fs, _)) = FileSystem::mount(dev.clone(), &|_, _| {}) {
            // Using a damaged image may fail, but only with an error.
            let _ = common::model::snapshot(&fs);
            drop(fs);
        }
        let dev = Arc::new(CrashDevice::from_image(&image));
        let report = fsck(dev.clone(), FsckMode::Check, &|_, _| {}).expect("fsck check runs");
        let noticed = !report.findings.is_empty();
        let repaired = fsck(dev.clone(), FsckMode::Repair, &|_, _| {});
        if let Ok(r) = repaired {
            if r.exit_code() <= 1 {
                let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {})
                    .unwrap_or_else(|e| panic!("{label}: repaired image does not mount: {e}"));
                drop(fs);
                let again = fsck(dev, FsckMode::Check, &|_, _| {}).unwrap();
                assert!(again.findings.is_empty(), "{label}: findings after repair: {:?}", again.findings);
            }
        }
        noticed
    })
}

fn flip(image: &[u8], byte: DevOffset, bit: u8) -> Vec<u8> {
    let mut v = image.to_vec();
    v[byte.0 as usize] ^= 1 << bit;
    v
}

#[test]
fn superblock_flips() {
    let (img, _) = populated_image();
    let mut rng = SmallRng::seed_from_u64(1);
    for _ in 0..30 {
        let byte = rng.random_range(0..512);
        let bit = rng.random_range(0..8);
        let damaged = flip(&img, DevOffset(byte), bit);
        // The copy saves the mount.
        let dev = Arc::new(CrashDevice::from_image(&damaged));
        let (_, report) = FileSystem::mount(dev, &|_, _| {}).expect("the copy is used");
        assert!(report.used_superblock_copy);
        assert!(exercise(format!("primary superblock byte {byte} bit {bit}"), damaged));
    }
    // Both copies damaged: a clear refusal.
    let both = flip(&flip(&img, DevOffset(40), 1), DevOffset(4096 + 40), 1);
    let err = FileSystem::mount(Arc::new(CrashDevice::from_image(&both)), &|_, _| {}).err().expect("refused");
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    assert!(err.to_string().contains("superblock"), "{err}");
    let r = fsck(Arc::new(CrashDevice::from_image(&both)), FsckMode::Check, &|_, _| {}).unwrap();
    assert_eq!(r.exit_code(), 4);
    // Not a HashFS image at all.
    let err = FileSystem::mount(Arc::new(CrashDevice::new(1 << 20)), &|_, _| {}).err().unwrap();
    assert!(err.to_string().contains("not a HashFS image"), "{err}");
}

#[test]
fn truncated_images() {
    let (img, _) = populated_image();
    for len in [0usize, 100, 4096, 8192, img.len() / 2, img.len() - 4096] {
        let dev = Arc::new(CrashDevice::from_image(&img[..len]));
        if len == 0 {
            continue; // an empty device cannot even be mapped; the CLI refuses it earlier
        }
        let err = FileSystem::mount(dev.clone(), &|_, _| {}).err().expect("refused");
        assert!(matches!(err, Error::Corrupt(_)), "len {len}: {err}");
        let r = fsck(dev, FsckMode::Check, &|_, _| {}).unwrap();
        assert_eq!(r.exit_code(), 4, "len {len}: {:?}", r.findings);
    }
}

#[test]
fn inode_table_flips_are_found() {
    let (img, geo) = populated_image();
    let mut rng = SmallRng::seed_from_u64(2);
    let used_inodes = 46u64; // root, a, b, 40 files, link, sparse (+ slack)
    for _ in 0..60 {
        let ino = rng.random_range(1..=used_inodes.min(geo.inode_count));
        // Structural bytes (0..64) are checksummed, but for the size (16..24), which fast
        // appends store in place (docs/design.md, "Fast appends"): a flip there is found
        // only when it cuts mapped blocks off. The block count (24..32), outside the sum
        // too, is recounted by fsck, so its flips must still be found. Timestamps are not
        // checked at all.
        let r = rng.random_range(0..56);
        let byte = geo.inode_off(hashfs::Ino(ino as u32)) + if r >= 16 { r + 8 } else { r };
        let bit = rng.random_range(0..8);
        assert!(
            exercise(format!("inode {ino} byte {byte} bit {bit}"), flip(&img, byte, bit)),
            "inode {ino} byte {byte} bit {bit} went unnoticed"
        );
    }
}

#[test]
fn mapping_structure_flips_are_found_or_harmless() {
    let (img, geo) = populated_image();
    if !test_mapping().uses_allocator() {
        return; // HashFS: hash_table_flips_are_found
    }
    let mut rng = SmallRng::seed_from_u64(6);
    // Bitmap bits of data blocks: every flip leaves a block leaked or in use but free.
    for _ in 0..30 {
        let b = rng.random_range(0..geo.data_blocks);
        let byte = geo.bitmap_off() + b / 8;
        assert!(exercise(format!("bitmap bit of block {b}"), flip(&img, byte, (b % 8) as u8)), "block {b}");
    }
    // The structure: tree nodes (found by a walk) or the global table's region. Flips in
    // unused bytes may go unnoticed; none may panic, hang, or survive a repair.
    let (fs, _r, _d) = mount_image(&img).unwrap();
    let mut regions = Vec::new();
    if let hashfs::testing::mapping::FileMap::Blocks(b) = hashfs::testing::map(&fs) {
        for i in 1..64u32 {
            let ino = hashfs::Ino(i);
            let raw = hashfs::testing::read_raw(&**fs.device(), &geo, ino);
            if raw.check(ino) != hashfs::testing::layout::inode::InodeState::Allocated {
                continue;
            }
            let _ = b.walk(ino, &raw, &mut |x| {
                if let hashfs::testing::mapping::Mapped::Node { pblk, .. } = x {
                    regions.push((geo.block_off(pblk), 4096u64));
                }
            });
        }
        if b.table_bytes() > 0 {
            regions.push((geo.struct_off(), b.table_bytes()));
        }
    }
    drop(fs);
    for _ in 0..40 {
        if regions.is_empty() {
            break;
        }
        let (base, len) = regions[rng.random_range(0..regions.len())];
        let byte = base + rng.random_range(0..len.min(4096));
        exercise(format!("structure byte {byte}"), flip(&img, byte, rng.random_range(0..8)));
    }
}

#[test]
fn hash_table_flips_are_found() {
    let (img, geo) = populated_image();
    if test_mapping().uses_allocator() {
        return; // mapping_structure_flips_are_found_or_harmless
    }
    let dev = CrashDevice::from_image(&img);
    let mut rng = SmallRng::seed_from_u64(3);
    // Flip bits in live keys, tombstones/empties alike.
    for _ in 0..80 {
        let slot = rng.random_range(0..geo.data_blocks);
        let byte = geo.slot_off(slot) + rng.random_range(0..8);
        let bit = rng.random_range(0..8);
        let before = dev.load_u64(geo.slot_off(slot));
        assert!(
            exercise(format!("slot {slot} ({before:#x}) byte {byte} bit {bit}"), flip(&img, byte, bit)),
            "slot {slot} ({before:#x}) bit flip unnoticed"
        );
    }
}

#[test]
fn journal_and_directory_flips_do_not_panic() {
    let (img, geo) = populated_image();
    let mut rng = SmallRng::seed_from_u64(4);
    for _ in 0..30 {
        let j = rng.random_range(0..geo.journal_count);
        let byte = geo.journal_base(j) + rng.random_range(0..64);
        exercise(format!("journal {j} header byte {byte}"), flip(&img, byte, rng.random_range(0..8)));
    }
    // Directory blocks: find them through a mount, then flip bits in them.
    let (fs, _r, _d) = mount_image(&img).unwrap();
    let mut dir_blocks = Vec::new();
    for d in ["/", "/a", "/a/b"] {
        let ino = fs.resolve(Path::new(d)).unwrap();
        let e = fs.physical_block(ino, hashfs::Lblk(0)).unwrap().expect("a directory has a block");
        dir_blocks.push(geo.block_off(e.pblk));
    }
    drop(fs);
    for _ in 0..60 {
        let base = dir_blocks[rng.random_range(0..dir_blocks.len())];
        let byte = base + rng.random_range(0..1024);
        exercise(format!("directory block byte {byte}"), flip(&img, byte, rng.random_range(0..8)));
    }
}

#[test]
fn uncommitted_journal_with_corrupt_entry_does_not_panic() {
    // A crash in the middle of a transaction, then a flip in its undo entries.
    let (fs, dev) = new_fs(2 << 20, &small_opts());
    fs.create_dir(Path::new("/x"), 0o755).unwrap();
    dev.set_capture(true);
    fs.rename(Path::new("/x"), Path::new("/y")).unwrap();
    dev.set_capture(false);
    let points = dev.take_points();
    let geo = fs.geometry();
    let mut rng = SmallRng::seed_from_u64(5);
    for p in &points {
        let img = p.image_all_pending();
        for _ in 0..10 {
            let j = rng.random_range(0..geo.journal_count);
            let byte = geo.journal_base(j) + 64 + rng.random_range(0..64 * 8);
            exercise(
                format!("fence {} journal {j} byte {byte}", p.fence_index),
                flip(&img, byte, rng.random_range(0..8)),
            );
        }
    }
}

/// F2: bytes past EOF in a file's last block (a mapping of the block would show them)
/// are a finding on a cleanly unmounted image, which repair zeroes; after a crash, a
/// pending one that recovery zeroes.
#[test]
fn bytes_past_eof_are_found_and_zeroed() {
    let (img, geo) = populated_image();
    let (fs, _r, _d) = mount_image(&img).unwrap();
    let ino = fs.resolve(Path::new("/a/f3")).unwrap(); // 1,000 bytes
    let e = fs.physical_block(ino, hashfs::Lblk(0)).unwrap().expect("mapped");
    drop(fs);
    let at = geo.block_off(e.pblk) + 1000 + 77;
    let mut bad = img.clone();
    bad[at.0 as usize] = 0x5A;
    let dev = Arc::new(CrashDevice::from_image(&bad));
    let found = fsck(dev.clone(), FsckMode::Check, &|_, _| {}).unwrap().findings;
    assert!(found.iter().any(|f| f.contains("byte 1077 past EOF (1000)")), "{found:?}");
    fsck(dev.clone(), FsckMode::Repair, &|_, _| {}).unwrap();
    assert!(fsck(dev.clone(), FsckMode::Check, &|_, _| {}).unwrap().findings.is_empty());
    let (fs, _) = FileSystem::mount(dev, &|_, _| {}).unwrap();
    assert!(fs.bytes_past_eof(ino).unwrap().iter().all(|&b| b == 0), "repair zeroed them");
    assert_eq!(fs.read(Path::new("/a/f3")).unwrap(), vec![3u8; 1000]);
    drop(fs);
    // The same bytes on an image that crashed (taken while mounted): recovery zeroes them.
    let (fs, report, dev) = mount_image(&bad).unwrap();
    assert!(report.was_clean && report.tails_zeroed == 0);
    let crashed = dev.live_image();
    drop(fs);
    let (fs, report, _dev) = mount_image(&crashed).unwrap();
    assert!(!report.was_clean && report.tails_zeroed == 1, "{report:?}");
    assert!(fs.bytes_past_eof(ino).unwrap().iter().all(|&b| b == 0));
}
