//! A forked child killed before it joined (`fs/shared/fork.rs`): its count in the image's
//! `forks` word, and its hold on the descriptions counted for it, live in the slot its
//! parent reserved before the fork and handed to it after, which a survivor finds dead
//! and reaps. Before, the child counted itself only once it had taken a slot: one killed
//! earlier left the count for good, and the last participant to leave, finding a child on
//! its way, left the image unclean and its region behind. One test in this binary: the
//! child of a fork is this process with only the forking thread.

use hashfs::{FileSystem, OpenOptions};
use std::path::{Path, PathBuf};

fn clean(img: &Path) -> bool {
    let dev = hashfs::pm::CrashDevice::from_image(&std::fs::read(img).unwrap());
    let (sb, _) = hashfs::fsck::geometry_of(&dev).unwrap();
    sb.state == hashfs::testing::layout::SB_STATE_CLEAN
}

/// Removes the image and its region when the test ends (not in the child).
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        if let Ok(f) = std::fs::File::open(&self.0) {
            if let Ok(r) = hashfs::share::region_path(&f) {
                let _ = std::fs::remove_file(r);
            }
        }
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_child_killed_before_it_joined_leaves_no_count_behind() {
    let img = PathBuf::from(format!("/dev/shm/hashfs-shared-fork-killed-{}.img", std::process::id()));
    let _removed = Removed(img.clone());
    FileSystem::format_file(&img, 64 << 20, &hashfs::FormatOptions::default(), &|_, _| {}).unwrap();
    let (fs, _) = FileSystem::open_shared(&img).unwrap();
    let region = hashfs::share::region_path(&std::fs::File::open(&img).unwrap()).unwrap();
    let f = fs.open_file(Path::new("/f"), OpenOptions::new().write(true).create(true)).unwrap();
    let ino = f.metadata().unwrap().ino;
    let desc = fs.share_description(ino, libc::O_WRONLY as u32, 0).unwrap().expect("a shared mount");
    for round in 0..3 {
        let fork = fs.prepare_fork(&[desc]).expect("a shared mount forks");
        // SAFETY: the child ends at once with _exit, touching nothing: killed before it
        // joined.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            // SAFETY: ends the child without the test harness's exit work.
            unsafe { libc::_exit(0) };
        }
        fs.after_fork_in_parent(fork, pid);
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        // Another participant joins (reaping the dead), writes and leaves, round after round.
        let (other, _) = FileSystem::open_shared(&img).unwrap();
        other.write(Path::new(&format!("/other-{round}")), b"x").unwrap();
        other.shutdown().unwrap();
    }
    drop(f);
    assert!(fs.release_description(desc), "the dead children still hold the description");
    fs.shutdown().unwrap();
    assert!(clean(&img), "the last to leave found a child on its way that had died before it joined");
    assert!(!region.exists(), "the last to leave kept the region for a dead child");
}
