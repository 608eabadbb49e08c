//! A forked child killed before it joined (`fs/shared/fork.rs`): its count in the image's
//! `forks` word, and its hold on the descriptions counted for it, live in the slot its
//! parent reserved before the fork and handed to it after, which a survivor finds dead
//! and reaps. Before, the child counted itself only once it had taken a slot: one killed
//! earlier left the count for good, and the last participant to leave, finding a child on
//! its way, left the image unclean and its region behind. One test in this binary: the
//! child of a fork is this process with only the forking thread.

mod common;

use common::shared_image::Image;
use hashfs::OpenOptions;
use std::path::Path;

#[test]
fn a_child_killed_before_it_joined_leaves_no_count_behind() {
    let img = Image::new("fork-killed");
    let fs = img.join();
    let region = img.region();
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
        let other = img.join();
        other.write(Path::new(&format!("/other-{round}")), b"x").unwrap();
        other.shutdown().unwrap();
    }
    drop(f);
    assert!(fs.release_description(desc), "the dead children still hold the description");
    fs.shutdown().unwrap();
    assert!(img.marked_clean(), "the last to leave found a child on its way that had died before it joined");
    assert!(!region.exists(), "the last to leave kept the region for a dead child");
}
