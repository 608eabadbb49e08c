//! Images for the shared mount's unit tests (`join.rs`, `read_only.rs`).

use crate::fsck::{fsck, FsckMode};
use crate::pm::{MmapDevice, OpenMode};
use crate::FileSystem;
use std::path::{Path, PathBuf};

/// A formatted image of 8 MiB and 64 inodes on /dev/shm, named after `what`.
pub(crate) fn image(what: &str) -> TestImage {
    let image = PathBuf::from(format!("/dev/shm/hashfs-shared-{what}-{}.img", std::process::id()));
    let opts = crate::FormatOptions { inode_count: Some(64), ..Default::default() };
    FileSystem::format_file(&image, 8 << 20, &opts, &|_, _| {}).unwrap();
    TestImage(image)
}

/// An image that goes with its region when the test ends, also when it fails (a planted
/// bug's run of `scripts/crash-bugs.sh` fails it on purpose).
pub(crate) struct TestImage(PathBuf);

impl std::ops::Deref for TestImage {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TestImage {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestImage {
    fn drop(&mut self) {
        if let Ok(f) = std::fs::File::open(&self.0) {
            if let Ok(r) = crate::share::region_path(&f) {
                let _ = std::fs::remove_file(r);
            }
        }
        let _ = std::fs::remove_file(&self.0);
    }
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
