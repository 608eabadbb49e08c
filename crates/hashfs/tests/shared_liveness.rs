//! A participant's lock of the kernel's on its slot's byte of the region file (`share/liveness.rs`),
//! which tells the others it runs without a read of `/proc`: a POSIX record lock, the
//! process's own, which a child does not inherit. A participant killed while a child it
//! forked without the library (a program's raw `fork` or `clone`) still runs is found dead
//! by the next to join, and the last to leave marks the image clean; a lock of the open
//! file description (`liveness-lock-of-description`) lives on in the child, and the
//! others take the killed participant for alive for as long as the child runs. One test in
//! this binary: the child of a fork is this process with only the forking thread.

mod common;

use common::shared_image::Image;
use std::os::fd::AsRawFd;
use std::path::Path;

/// The pids holding a write lock on a participant's byte of the region file at `region`.
fn slot_lock_holders(region: &Path) -> Vec<i32> {
    let f = std::fs::File::open(region).unwrap();
    (0..hashfs::share::MAX_PARTICIPANTS as i64)
        .filter_map(|slot| {
            // SAFETY: a plain C struct, valid zeroed.
            let mut l: libc::flock = unsafe { std::mem::zeroed() };
            l.l_type = libc::F_WRLCK as libc::c_short;
            l.l_whence = libc::SEEK_SET as libc::c_short;
            l.l_start = hashfs::share::SLOT_BYTES + slot;
            l.l_len = 1;
            // SAFETY: F_GETLK with a valid struct flock on our descriptor.
            assert_eq!(unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETLK, &mut l) }, 0);
            (i32::from(l.l_type) == libc::F_WRLCK).then_some(l.l_pid)
        })
        .collect()
}

#[test]
fn a_participant_killed_while_a_child_it_forked_runs_is_found_dead() {
    let img = Image::new("liveness");
    let fs = img.join();
    fs.write(Path::new("/f"), b"parent").unwrap();
    let mut ready = [0 as libc::c_int; 2];
    // SAFETY: pipe fills the two descriptors.
    assert_eq!(unsafe { libc::pipe(ready.as_mut_ptr()) }, 0);
    let fork = fs.prepare_fork(&[]).expect("a shared mount forks");
    // SAFETY: the child runs only this thread, which holds no lock but the image's (its
    // copy is let go by after_fork_in_child), and ends killed or with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        if fs.after_fork_in_child(fork).is_err() || fs.write(Path::new("/child"), b"child").is_err() {
            // SAFETY: ends the child without the test harness's exit work.
            unsafe { libc::_exit(2) };
        }
        // A child of its own that never joins, holding every descriptor it inherited,
        // and outliving it (killed by the test, or ending in a minute).
        // SAFETY: the grandchild only sleeps and ends with _exit.
        let grandchild = unsafe { libc::fork() };
        if grandchild == 0 {
            // SAFETY: sleeping, then ending without the harness's exit work.
            unsafe {
                libc::sleep(60);
                libc::_exit(0)
            };
        }
        // SAFETY: writes the grandchild's pid from a live variable into our pipe, then
        // waits to be killed.
        unsafe {
            libc::write(ready[1], (&raw const grandchild).cast(), 4);
            loop {
                libc::pause();
            }
        }
    }
    fs.after_fork_in_parent(fork, pid);
    let mut grandchild: libc::pid_t = 0;
    // SAFETY: reads four bytes into a live variable from our end of the pipe.
    let n = unsafe { libc::read(ready[0], (&raw mut grandchild).cast(), 4) };
    assert_eq!(n, 4, "the child joined and forked");
    assert!(slot_lock_holders(&img.region()).contains(&pid), "the child holds no lock on its slot's byte");
    // SAFETY: kills and reaps our own child.
    unsafe {
        assert_eq!(libc::kill(pid, libc::SIGKILL), 0);
        assert_eq!(libc::waitpid(pid, std::ptr::null_mut(), 0), pid);
    }
    // Another participant joins (finding the child dead, it reaps its slot), the first
    // leaves, and the other, the last, marks the image clean. (The other: a region file's
    // descriptor of its own, as a process that did not fork from the child has; the first
    // shares the child's.)
    let other = img.join();
    assert_eq!(other.read(Path::new("/child")).unwrap(), b"child");
    fs.shutdown().unwrap();
    other.shutdown().unwrap();
    drop(other);
    let clean = img.marked_clean();
    // SAFETY: kills the grandchild (now init's child, which reaps it).
    unsafe { libc::kill(grandchild, libc::SIGKILL) };
    assert!(clean, "a participant killed while its child ran was taken for alive, and the image left unclean");
    drop(fs);
    img.check();
}
