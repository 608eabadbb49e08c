//! One-fence small appends (`fs/hashfs/append_tag.rs`): on HashFS an append of less than 4 KiB at
//! the end of a file takes one fence and stores its size tagged with a check of its bytes;
//! recovery keeps the size when the bytes are whole and drops the append when they are not;
//! anything that may change the bytes in place, and unmount, makes the size plain first.
//! The crash explorer (`append-small`, `append-cross`, `overwrite-tail`) covers every crash
//! state; these tests pin the cost (fences) and the media words, and build the torn state by
//! hand.

mod common;

use common::{assert_fsck_clean, mount_image, new_fs, remount, small_opts, test_mapping};
use hashfs::pm::PmDevice;
use hashfs::{FormatOptions, HashPlacement, Ino, Lblk, MappingKind, OpenOptions};
use std::path::Path;

const MIB: u64 = 1 << 20;
/// Bits of the size word above the size: a tag (0 on a plain size).
const TAG_BITS: u64 = !((1 << 45) - 1);

fn p(s: &str) -> &Path {
    Path::new(s)
}

fn rw() -> OpenOptions {
    OpenOptions::new().read(true).write(true).create(true).clone()
}

fn opts() -> FormatOptions {
    FormatOptions { placement: HashPlacement::Paper, ..small_opts() }
}

/// The size word of `ino` as the media holds it.
fn size_word(dev: &hashfs::pm::CrashDevice, geo: &hashfs::Geometry, ino: Ino) -> u64 {
    hashfs::testing::read_raw(dev, geo, ino).size
}

#[test]
fn a_small_append_takes_one_fence_a_large_one_two() {
    let (fs, dev) = new_fs(16 * MIB, &opts());
    let geo = fs.geometry();
    let f = fs.open_file(p("/log"), &rw()).unwrap();
    let ino = f.metadata().unwrap().ino;
    let fences = |w: &dyn Fn()| {
        let before = dev.stats().snapshot();
        w();
        dev.stats().snapshot().since(&before).fences
    };
    let one_fence = test_mapping() == MappingKind::HashFs;
    let mut want = Vec::new();
    for (i, len) in [100usize, 3000, 4095, 1, 700].into_iter().enumerate() {
        let d = vec![i as u8 + 1; len];
        let n = fences(&|| {
            f.append(&d).unwrap();
        });
        want.extend_from_slice(&d);
        if one_fence {
            assert_eq!(n, 1, "append {i} of {len} bytes");
            assert_ne!(size_word(&dev, &geo, ino) & TAG_BITS, 0, "append {i}: the size is tagged");
        } else {
            assert!(n >= 2, "append {i}: {n} fences on {:?}", test_mapping());
            assert_eq!(size_word(&dev, &geo, ino) & TAG_BITS, 0, "append {i}: only HashFS tags");
        }
    }
    // 4 KiB or more: data, fence, size, fence (and a plain size).
    let d = vec![9u8; 4096];
    let n = fences(&|| {
        f.append(&d).unwrap();
    });
    want.extend_from_slice(&d);
    assert_eq!(n, if one_fence { 2 } else { n.max(2) }, "a 4 KiB append");
    assert_eq!(size_word(&dev, &geo, ino), want.len() as u64, "a plain size after the large append");
    drop(f);
    let (fs, dev) = remount(fs, dev);
    assert_eq!(fs.read(p("/log")).unwrap(), want);
    drop(fs);
    assert_fsck_clean(&dev);
}

/// The durable image after a tagged append, with the appended bytes whole, then with one
/// of them as if its line had not reached the media: recovery keeps the first and drops
/// the append from the second (the size before it, its bytes gone), and fsck says so first.
#[test]
fn recovery_keeps_a_whole_tagged_append_and_drops_a_torn_one() {
    if test_mapping() != MappingKind::HashFs {
        return;
    }
    for cross in [false, true] {
        let (fs, dev) = new_fs(16 * MIB, &opts());
        let geo = fs.geometry();
        let f = fs.open_file(p("/log"), &rw()).unwrap();
        let ino = f.metadata().unwrap().ino;
        let first = vec![1u8; 3000];
        f.append(&first).unwrap();
        // Inside the first block, or across into a second one.
        let second = vec![2u8; if cross { 2000 } else { 500 }];
        f.append(&second).unwrap();
        let end = (first.len() + second.len()) as u64;
        assert_ne!(size_word(&dev, &geo, ino) & TAG_BITS, 0);
        let image = dev.crash_point_now().image_durable_only();

        let (fs2, report, _) = mount_image(&image).unwrap();
        assert!(!report.was_clean);
        assert_eq!((report.appends_settled, report.appends_dropped), (1, 0), "cross {cross}");
        let mut whole = first.clone();
        whole.extend_from_slice(&second);
        assert_eq!(fs2.read(p("/log")).unwrap(), whole, "cross {cross}: the whole append stays");
        drop(fs2);

        // The append's last byte as it was before the append (a zero: fresh or past EOF).
        let lblk = Lblk((end - 1) / 4096);
        let pblk = fs.physical_block(ino, lblk).unwrap().unwrap().pblk;
        let mut torn = image.clone();
        torn[(geo.block_off(pblk).0 + (end - 1) % 4096) as usize] = 0;
        let tdev = std::sync::Arc::new(hashfs::pm::CrashDevice::from_image(&torn));
        let r = hashfs::fsck::fsck(tdev, hashfs::fsck::FsckMode::Check, &|_, _| {}).unwrap();
        assert!(
            r.pending.iter().any(|f| f.contains("last append did not reach the media whole")),
            "cross {cross}: fsck names the torn append, for recovery: {:#?}",
            r.findings
        );
        let (fs3, report, dev3) = mount_image(&torn).unwrap();
        assert_eq!((report.appends_settled, report.appends_dropped), (1, 1), "cross {cross}");
        assert_eq!(fs3.read(p("/log")).unwrap(), first, "cross {cross}: the torn append is gone");
        assert_eq!(size_word(&dev3, &geo, ino), first.len() as u64, "a plain size after recovery");
        drop(fs3);
        assert_fsck_clean(&dev3);
        drop(f);
    }
}

/// Whatever may change a tagged append's bytes in place makes the size plain first: an
/// overwrite of one of them, an untorn write, a punched hole, a mapping's pin (and no
/// append is tagged while one lives); so does unmount. An overwrite of other bytes leaves
/// the tag (one fence), and a crash after it keeps the append.
#[test]
fn the_size_is_plain_before_its_bytes_can_change_in_place_and_after_unmount() {
    if test_mapping() != MappingKind::HashFs {
        return;
    }
    let (fs, dev) = new_fs(16 * MIB, &opts());
    let geo = fs.geometry();
    let f = fs.open_file(p("/log"), &rw()).unwrap();
    let ino = f.metadata().unwrap().ino;
    let tagged = || size_word(&dev, &geo, ino) & TAG_BITS != 0;
    let steps: [(&str, &dyn Fn()); 4] = [
        ("overwrite", &|| {
            // The first of the 100 bytes the last append added.
            let end = f.metadata().unwrap().size;
            f.write_at(end - 100, b"x").unwrap();
        }),
        ("untorn write", &|| {
            f.write_atomic_at(2, b"y").unwrap();
        }),
        ("punch", &|| f.fallocate(0, 4096, hashfs::FallocateMode::PunchHole).unwrap()),
        ("truncate", &|| f.set_len(9000).unwrap()),
    ];
    // Appends land in the third block, which the punch of the first leaves mapped (an
    // append into a hole inside the size is a transaction).
    f.write_at(0, &[1u8; 8500]).unwrap();
    for (what, step) in steps {
        f.append(&[7u8; 100]).unwrap();
        assert!(tagged(), "{what}: tagged before");
        step();
        // Truncation leaves the tagged bytes alone, but its transaction stores the inode.
        assert!(!tagged(), "{what}: plain after");
    }
    let pin = f.pin_blocks();
    f.append(&[8u8; 100]).unwrap();
    assert!(!tagged(), "no tag while a mapping is pinned");
    drop(pin);
    f.append(&[9u8; 100]).unwrap();
    assert!(tagged());
    let pin = f.pin_blocks();
    assert!(!tagged(), "a pin makes the size plain");
    drop(pin);
    f.append(&[10u8; 100]).unwrap();
    assert!(tagged());
    let want = fs.read(p("/log")).unwrap();
    drop(f);
    let (fs, dev) = remount(fs, dev);
    assert_eq!(size_word(&dev, &geo, ino), want.len() as u64, "unmount makes the size plain");
    assert_eq!(fs.read(p("/log")).unwrap(), want);
    drop(fs);
    assert_fsck_clean(&dev);
}

#[test]
fn an_overwrite_of_other_bytes_keeps_the_tag_and_a_crash_after_it_keeps_the_append() {
    if test_mapping() != MappingKind::HashFs {
        return;
    }
    let (fs, dev) = new_fs(16 * MIB, &opts());
    let geo = fs.geometry();
    let f = fs.open_file(p("/journal"), &rw()).unwrap();
    let ino = f.metadata().unwrap().ino;
    let tagged = || size_word(&dev, &geo, ino) & TAG_BITS != 0;
    let mut want = vec![1u8; 8716];
    f.write_at(0, &want).unwrap();
    f.append(&[2u8; 4]).unwrap();
    want.extend_from_slice(&[2u8; 4]);
    // A header rewritten at the start, and bytes just before the appended ones.
    for (off, len) in [(0u64, 12usize), (8700, 16)] {
        let before = dev.stats().snapshot();
        f.write_at(off, &vec![3u8; len]).unwrap();
        assert_eq!(dev.stats().snapshot().since(&before).fences, 1, "overwrite at {off}: one fence");
        assert!(tagged(), "overwrite at {off}: the tag stays");
        want[off as usize..off as usize + len].fill(3);
    }
    let image = dev.crash_point_now().image_durable_only();
    let (fs2, report, dev2) = mount_image(&image).unwrap();
    assert_eq!((report.appends_settled, report.appends_dropped), (1, 0));
    assert!(fs2.read(p("/journal")).unwrap() == want, "the append and both overwrites after a crash");
    drop(fs2);
    assert_fsck_clean(&dev2);
    // One byte of the appended ones: plain first.
    f.write_at(8719, b"z").unwrap();
    assert!(!tagged(), "an overwrite of an appended byte makes the size plain");
    drop(f);
}

/// A tag on a cleanly unmounted image cannot come from an append (unmount makes every
/// size plain): it is corruption, which fsck reports.
#[test]
fn a_tag_on_a_clean_image_is_corruption() {
    if test_mapping() != MappingKind::HashFs {
        return;
    }
    let (fs, dev) = new_fs(16 * MIB, &opts());
    let geo = fs.geometry();
    fs.write(p("/f"), &[1u8; 300]).unwrap();
    let ino = fs.metadata(p("/f")).unwrap().ino;
    fs.unmount().unwrap();
    let mut image = dev.live_image();
    let at = (geo.inode_off(ino).0 + 16) as usize;
    let tagged = 300u64 | 100 << 45;
    image[at..at + 8].copy_from_slice(&tagged.to_le_bytes());
    let tdev = std::sync::Arc::new(hashfs::pm::CrashDevice::from_image(&image));
    let r = hashfs::fsck::fsck(tdev, hashfs::fsck::FsckMode::Check, &|_, _| {}).unwrap();
    assert!(r.exit_code() != 0 && !r.findings.is_empty(), "fsck: {:#?}", r.findings);
    let (_fs, report, _) = mount_image(&image).unwrap();
    assert!(report.corrupt_inodes.contains(&ino), "{report:?}");
}
