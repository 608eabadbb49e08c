//! A tmpfs mounted `huge=always` (2 MiB pages, as a DAX mapping of PM has) for the tests
//! that check 2 MiB mappings: shared by the library's and the shim's tests (included with
//! `#[path]`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory, mounted here when missing (needs root); None when it cannot be. Checked
/// and mounted once per test process: tests running in parallel that each found it missing
/// each mounted a tmpfs over it, and the later mount hid the files of a test already
/// writing there (it failed one run in four with the directory unmounted at the start).
pub fn huge_dir() -> Option<PathBuf> {
    static DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(mount_huge_dir).clone()
}

fn mount_huge_dir() -> Option<PathBuf> {
    let dir = Path::new("/mnt/hashfs-test-huge");
    let mounted = |d: &Path| Command::new("mountpoint").arg("-q").arg(d).status().is_ok_and(|s| s.success());
    if !mounted(dir) {
        let _ = std::fs::create_dir_all(dir);
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "huge=always,size=2g,mode=1777", "hashfs-test-huge"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return None;
        }
    }
    Some(dir.to_path_buf())
}
