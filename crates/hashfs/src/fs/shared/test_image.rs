//! Images for the shared mount's unit tests (`join.rs`, `read_only.rs`).

use crate::fsck::{fsck, FsckMode};
use crate::pm::{MmapDevice, OpenMode};
use crate::FileSystem;
use std::path::{Path, PathBuf};

/// A formatted image of 8 MiB and 64 inodes on /dev/shm, named after `what`.
pub(crate) fn image(what: &str) -> PathBuf {
    let image = PathBuf::from(format!("/dev/shm/hashfs-shared-{what}-{}.img", std::process::id()));
    let opts = crate::FormatOptions { inode_count: Some(64), ..Default::default() };
    FileSystem::format_file(&image, 8 << 20, &opts, &|_, _| {}).unwrap();
    image
}

/// fsck of `image`, which no one uses any more; removes it and its region.
pub(crate) fn check_and_remove(image: &Path) {
    let region = crate::share::region_path(&std::fs::File::open(image).unwrap()).unwrap();
    let dev = std::sync::Arc::new(MmapDevice::open(image, OpenMode::Existing).unwrap());
    let r = fsck(dev, FsckMode::Check, &|_, _| {}).unwrap();
    let _ = std::fs::remove_file(image);
    let _ = std::fs::remove_file(region);
    assert!(r.findings.is_empty(), "fsck: {:?}", r.findings);
}
