//! The aligned allocator (WineFS) in the file system: large files get 2 MiB-aligned
//! extents on an aged image, the bitmap allocator's do not, and the pools come back the
//! same from the bitmap after a remount.

mod common;

use common::{assert_fsck_clean, mount_image, new_fs, Fs, ALLOCATOR_MAPPINGS};
use hashfs::{AllocatorKind, FormatOptions, Lblk, MappingKind, OpenOptions};
use std::path::Path;

const MIB: u64 = 1 << 20;

fn opts(mapping: MappingKind, allocator: AllocatorKind) -> FormatOptions {
    FormatOptions {
        mapping,
        allocator,
        journal_count: 2,
        journal_blocks: 16,
        inode_count: Some(1024),
        hash_seed: Some(7),
        ..Default::default()
    }
}

/// Small files, every other one deleted: free space in holes between used blocks.
fn age(fs: &Fs) {
    for i in 0..600u64 {
        let data = vec![i as u8; (1 + i % 13) as usize * 4096];
        fs.write(Path::new(&format!("/s{i}")), &data).unwrap();
    }
    for i in (0..600u64).step_by(2) {
        fs.remove_file(Path::new(&format!("/s{i}"))).unwrap();
    }
}

/// How many of the file's logical 2 MiB chunks lie on one aligned physical extent each.
fn aligned_chunks(fs: &Fs, path: &str, chunks: u64) -> u64 {
    let ino = fs.metadata(Path::new(path)).unwrap().ino;
    let phase = fs.geometry().data_off / 4096;
    (0..chunks)
        .filter(|c| {
            let first = fs.physical_block(ino, Lblk(c * 512)).unwrap().unwrap().pblk.0;
            (first + phase).is_multiple_of(512)
                && (0..512)
                    .all(|i| fs.physical_block(ino, Lblk(c * 512 + i)).unwrap().map(|e| e.pblk.0) == Some(first + i))
        })
        .count() as u64
}

#[test]
fn large_files_get_aligned_extents_on_an_aged_image() {
    for mapping in ALLOCATOR_MAPPINGS {
        let mut got = Vec::new();
        for allocator in [AllocatorKind::Aligned, AllocatorKind::Bitmap] {
            let (fs, dev) = new_fs(96 * MIB, &opts(mapping, allocator));
            age(&fs);
            let before = fs.free_aligned_extents();
            let nodes_before = fs.mapping_stats().unwrap().node_blocks;
            // An 8 MiB file in one fallocate (as Geriatrix and mmap users allocate).
            let f = fs.open_file(Path::new("/big"), OpenOptions::new().write(true).create(true)).unwrap();
            f.allocate(0, 8 * MIB).unwrap();
            drop(f);
            got.push(aligned_chunks(&fs, "/big", 4));
            if mapping == MappingKind::Ctfs {
                // ctFS maps a chunk on an aligned extent with one 2 MiB leaf, any other
                // chunk with a node of page entries (the file's 16 MiB partition shares the
                // small files' upper nodes).
                let nodes = fs.mapping_stats().unwrap().node_blocks - nodes_before;
                assert_eq!(nodes, 4 - got.last().unwrap(), "{allocator:?}: page nodes");
            }
            if allocator == AllocatorKind::Aligned {
                assert_eq!(fs.free_aligned_extents(), before - 4, "{mapping:?}: one aligned extent per chunk");
            }
            // The same free aligned extents after a remount (rebuilt from the bitmap).
            let n = fs.free_aligned_extents();
            fs.unmount().unwrap();
            let image = dev.durable_image();
            let (fs, _, dev) = mount_image(&image).unwrap();
            assert_eq!(fs.free_aligned_extents(), n, "{mapping:?} {allocator:?}");
            assert_eq!(aligned_chunks(&fs, "/big", 4), *got.last().unwrap());
            assert_fsck_clean(&dev);
        }
        assert_eq!(got[0], 4, "{mapping:?}: aligned allocator, every chunk on an aligned extent");
        assert!(got[1] < 4, "{mapping:?}: the bitmap allocator's best fit ignores alignment: {got:?}");
    }
}

#[test]
fn a_file_grown_in_whole_chunks_stays_aligned_and_small_files_keep_out() {
    let (fs, _dev) = new_fs(64 * MIB, &opts(MappingKind::ExtentTree, AllocatorKind::Aligned));
    let f = fs.open_file(Path::new("/grow"), OpenOptions::new().write(true).create(true)).unwrap();
    for c in 0..4u64 {
        f.write_at(c * 2 * MIB, &vec![c as u8; 2 * MIB as usize]).unwrap();
        // Small files in between take holes or break one extent, never the big file's next.
        fs.write(Path::new(&format!("/small{c}")), b"x").unwrap();
    }
    drop(f);
    assert_eq!(aligned_chunks(&fs, "/grow", 4), 4);
    let data = fs.read(Path::new("/grow")).unwrap();
    assert!(data.chunks(2 * MIB as usize).enumerate().all(|(c, d)| d.iter().all(|&b| b == c as u8)));
}

#[test]
fn the_allocator_is_recorded_and_checked() {
    let (fs, dev) = new_fs(16 * MIB, &opts(MappingKind::ExtentTree, AllocatorKind::Bitmap));
    fs.unmount().unwrap();
    let sb = hashfs::fsck::geometry_of(&*dev).unwrap().0;
    assert_eq!(sb.allocator, AllocatorKind::Bitmap as u32);
    let (fs, _dev) = new_fs(16 * MIB, &opts(MappingKind::ExtentTree, AllocatorKind::Aligned));
    fs.unmount().unwrap();
    // The aligned allocator has no fragmentation generator.
    let dev = std::sync::Arc::new(hashfs::pm::CrashDevice::new(16 * MIB));
    let bad = FormatOptions { layout_score: 0.7, ..opts(MappingKind::ExtentTree, AllocatorKind::Aligned) };
    let e = hashfs::format(&*dev, &bad, &|_, _| {}).unwrap_err();
    assert!(matches!(e, hashfs::Error::InvalidParameter(_)), "{e}");
}
