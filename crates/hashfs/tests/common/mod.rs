//! Shared helpers for the integration tests: in-memory images on the crash-simulating
//! device.
#![allow(dead_code)]

pub mod fragmented;
pub mod model;
pub mod pipes;
pub mod shared_image;

use hashfs::pm::CrashDevice;
use hashfs::{format, FormatOptions};
use hashfs::{AllocatorKind, FileSystem, HashPlacement, MappingKind};
use std::sync::Arc;

pub type Fs = FileSystem<CrashDevice>;

/// The mappings that take blocks from the block allocator (all but HashFS).
pub const ALLOCATOR_MAPPINGS: [MappingKind; 5] =
    [MappingKind::ExtentTree, MappingKind::RadixTree, MappingKind::Cuckoo, MappingKind::ExtentHash, MappingKind::Ctfs];

/// The mapping the suite runs against: `HASHFS_TEST_MAPPING` (a mapping name), else
/// HashFS. `scripts/test.sh` runs the suite once per mapping.
pub fn test_mapping() -> MappingKind {
    match std::env::var("HASHFS_TEST_MAPPING") {
        Ok(name) => MappingKind::from_name(&name).unwrap_or_else(|| panic!("HASHFS_TEST_MAPPING={name}: unknown")),
        Err(_) => MappingKind::HashFs,
    }
}

/// `HASHFS_TEST_LAYOUT_SCORE` (allocator mappings), else 1.0. Below 1 the suite runs on
/// the bitmap allocator (its fragmentation generator), else on the aligned allocator.
pub fn test_layout_score() -> f64 {
    std::env::var("HASHFS_TEST_LAYOUT_SCORE").ok().and_then(|v| v.parse().ok()).unwrap_or(1.0)
}

/// `HASHFS_TEST_PLACEMENT` (HashFS: paper or grouped), else the paper's.
pub fn test_placement() -> HashPlacement {
    match std::env::var("HASHFS_TEST_PLACEMENT") {
        Ok(name) => HashPlacement::from_name(&name).unwrap_or_else(|| panic!("HASHFS_TEST_PLACEMENT={name}: unknown")),
        Err(_) => HashPlacement::Paper,
    }
}

pub fn test_allocator() -> AllocatorKind {
    if test_layout_score() < 1.0 {
        AllocatorKind::Bitmap
    } else {
        AllocatorKind::Aligned
    }
}

pub fn small_opts() -> FormatOptions {
    let mapping = test_mapping();
    FormatOptions {
        journal_count: 2,
        journal_blocks: 4,
        inode_count: Some(256),
        hash_seed: Some(0x5EED),
        mapping,
        layout_score: if mapping.uses_allocator() { test_layout_score() } else { 1.0 },
        allocator: test_allocator(),
        placement: if mapping == MappingKind::HashFs { test_placement() } else { HashPlacement::Paper },
        ..Default::default()
    }
}

/// A formatted, mounted in-memory image of `bytes`.
pub fn new_fs(bytes: u64, opts: &FormatOptions) -> (Fs, Arc<CrashDevice>) {
    let dev = Arc::new(CrashDevice::new(bytes));
    // The grouped placement needs room for one aligned 2 MiB group; smaller test images
    // keep the paper's.
    let small = FormatOptions { placement: HashPlacement::Paper, ..opts.clone() };
    let opts = if bytes < 4 << 20 { &small } else { opts };
    format(&*dev, opts, &|_, _| {}).expect("format");
    let (fs, report) = FileSystem::mount(dev.clone(), &|_, _| {}).expect("mount");
    assert!(report.was_clean);
    (fs, dev)
}

/// Mounts a copy of an image.
pub fn mount_image(image: &[u8]) -> hashfs::Result<(Fs, hashfs::MountReport, Arc<CrashDevice>)> {
    let dev = Arc::new(CrashDevice::from_image(image));
    let (fs, r) = FileSystem::mount(dev.clone(), &|_, _| {})?;
    Ok((fs, r, dev))
}

/// fsck (check mode) must find nothing.
pub fn assert_fsck_clean(dev: &Arc<CrashDevice>) {
    let r = hashfs::fsck::fsck(dev.clone(), hashfs::fsck::FsckMode::Check, &|_, _| {}).expect("fsck ran");
    assert!(r.findings.is_empty(), "fsck findings: {:#?}", r.findings);
}

/// Remounts the live image of `dev` after dropping `fs` (a clean unmount).
pub fn remount(fs: Fs, dev: Arc<CrashDevice>) -> (Fs, Arc<CrashDevice>) {
    fs.unmount().expect("unmount");
    let image = dev.live_image();
    let (fs, r, dev) = mount_image(&image).expect("remount");
    assert!(r.was_clean);
    (fs, dev)
}

/// Bytes of a small file `seed` of the regions placement's tests: `len` bytes that differ
/// from file to file.
pub fn regions_pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(0x9E37_79B9)).to_le_bytes()[3])
        .collect()
}

/// Sizes of the regions placement's tests' small files: 1 to 24 blocks, some with a
/// partial last block.
pub fn small_len(i: u32) -> usize {
    (1 + (i * 7919) % 24) as usize * 4096 - (i % 3) as usize * 1000
}
