//! A participant's fork (issue 55, `fs/shared/fork.rs`), with the library's calls as the
//! LD_PRELOAD shim makes them around `fork`: the child joins as a participant of its own,
//! keeps the parent's open file and shares its description's offset; a parent that leaves
//! before its child has joined does not mark the image clean or remove its region under
//! the child, and the child, the last to leave, does both; the description the two shared
//! is freed with the child's close, the last. One test in this binary: the
//! child of a fork is this process with only the forking thread.

mod common;

use common::shared_image::Image;
use hashfs::{FileSystem, OpenOptions};
use std::path::Path;

#[test]
fn a_forked_child_joins_and_a_parent_leaving_first_leaves_the_image_to_it() {
    let img = Image::new("fork");
    let fs = img.join();
    let f = fs.open_file(Path::new("/f"), OpenOptions::new().write(true).create(true)).unwrap();
    let ino = f.metadata().unwrap().ino;
    f.write_at(0, b"parent;").unwrap();
    let desc = fs.share_description(ino, libc::O_WRONLY as u32, 7).unwrap().expect("a shared mount");
    // The child joins when the parent has left and checked what it left (a pipe).
    let mut go = [0 as libc::c_int; 2];
    // SAFETY: pipe fills the two descriptors.
    assert_eq!(unsafe { libc::pipe(go.as_mut_ptr()) }, 0);
    let fork = fs.prepare_fork(&[desc]).expect("a shared mount forks");
    // SAFETY: the child runs only this thread, which holds no lock but the image's (its
    // copy is let go by after_fork_in_child), and ends with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // A slow child: the parent leaves before it joins. (Its copy of the pipe's write
        // end closed, so that a parent whose assertion failed leaves it reading an end of
        // file, and it ends, rather than an orphan waiting for ever.)
        let mut byte = 0u8;
        // SAFETY: closes the child's copy of a descriptor of ours, then reads one byte
        // into `byte` from our end of the pipe.
        let n = unsafe {
            libc::close(go[1]);
            libc::read(go[0], (&raw mut byte).cast(), 1)
        };
        if n != 1 {
            // SAFETY: ends the child without the test harness's exit work.
            unsafe { libc::_exit(2) };
        }
        let ok = (|| -> hashfs::Result<()> {
            fs.after_fork_in_child(fork)?;
            // The inherited file, at the inherited offset, moved for the parent too.
            let mut at = fs.lock_offset(desc).ok_or(hashfs::Error::NotFound)?;
            f.write_at(at.get(), b"child")?;
            at.set(at.get() + 5);
            drop(at);
            drop(f);
            fs.release_description(desc);
            if fs.lock_offset(desc).is_some() {
                // The child took the parent's place as a holder, and was the last.
                eprintln!("the description outlived its last holder's close");
                return Err(hashfs::Error::Busy);
            }
            fs.write(Path::new("/made-by-child"), b"yes")?;
            fs.shutdown()
        })();
        // SAFETY: ends the child without the test harness's exit work.
        unsafe { libc::_exit(if ok.is_ok() { 0 } else { 1 }) };
    }
    fs.after_fork_in_parent(fork, pid);
    drop(f);
    fs.release_description(desc);
    fs.shutdown().unwrap();
    assert!(!img.marked_clean(), "the parent left first, with its child not joined yet, and marked the image clean");
    assert!(img.region().exists(), "the parent left first and removed the region its child joins");
    // SAFETY: writes one byte from a static to the pipe.
    assert_eq!(unsafe { libc::write(go[1], b"j".as_ptr().cast(), 1) }, 1);
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child failed: {status:#x}");
    assert!(img.marked_clean(), "the child, the last to leave, marks the image clean");
    assert!(!img.region().exists(), "the child, the last to leave, removes the region");
    drop(fs);
    let (again, report) = FileSystem::open(&img.path).unwrap();
    assert!(report.was_clean);
    assert_eq!(again.read(Path::new("/f")).unwrap(), b"parent;child");
    assert_eq!(again.read(Path::new("/made-by-child")).unwrap(), b"yes");
    drop(again);
}
