//! Shared helpers for the integration tests: in-memory images on the crash-simulating
//! device.
#![allow(dead_code)]

pub mod model;

use hashfs::fs::{format, FormatOptions};
use hashfs::pm::CrashDevice;
use hashfs::FileSystem;
use std::sync::Arc;

pub type Fs = FileSystem<CrashDevice>;

pub fn small_opts() -> FormatOptions {
    FormatOptions {
        journal_count: 2,
        journal_blocks: 4,
        inode_count: Some(256),
        hash_seed: Some(0x5EED),
        ..Default::default()
    }
}

/// A formatted, mounted in-memory image of `bytes`.
pub fn new_fs(bytes: u64, opts: &FormatOptions) -> (Fs, Arc<CrashDevice>) {
    let dev = Arc::new(CrashDevice::new(bytes));
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
    let r = hashfs::fs::fsck(dev.clone(), hashfs::fs::FsckMode::Check, &|_, _| {}).expect("fsck ran");
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
