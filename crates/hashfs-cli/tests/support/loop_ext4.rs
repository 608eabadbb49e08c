//! ext4 on a loop device, for tests that cut the power of a lower disk for real: the
//! backing file copied while mounted holds what the loop device was given, which is what
//! the disk would hold after a power cut at that instant (ext4 replays its journal when
//! the copy is mounted). Mounted with `commit=600`, so that ext4 commits its journal on its
//! own only every ten minutes: nothing becomes durable during a test but what a sync made
//! so. Shared by `crates/hashfs-spfs/tests/lower_power_cut.rs` and the stacked mount's
//! power-cut test (included with `#[path]`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why a loop-mounted ext4 cannot be made here, if it cannot (needs root, `losetup` and
/// `mkfs.ext4`).
pub fn missing() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions.
    let ok = unsafe { libc::geteuid() } == 0
        && Command::new("losetup").arg("--version").output().is_ok()
        && Command::new("mkfs.ext4").arg("-V").output().is_ok();
    (!ok).then_some("a loop-mounted ext4 is not available (needs root, losetup and mkfs.ext4)")
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(o.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// ext4 on a loop device over a backing file, mounted; unmounted and detached when dropped.
pub struct Ext4 {
    dev: String,
    pub mnt: PathBuf,
}

impl Ext4 {
    /// `backing` (made with mkfs.ext4 first if `make`) mounted at `mnt`.
    pub fn up(backing: &Path, mnt: &Path, make: bool) -> Ext4 {
        let dev = run(Command::new("losetup").args(["--find", "--show"]).arg(backing));
        if make {
            run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&dev));
        }
        std::fs::create_dir_all(mnt).unwrap();
        run(Command::new("mount").args(["-t", "ext4", "-o", "commit=600"]).arg(&dev).arg(mnt));
        Ext4 { dev, mnt: mnt.to_path_buf() }
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}
