//! A forked child's inherited mapping keeps its file's blocks (issue 55, `fs/shared/mapped.rs`):
//! a parent that unmaps right after `fork`, before its child has joined and marked the
//! blocks under its own name, keeps its own mark until the child has, so that no other
//! participant frees them between the two. With the library's calls as the LD_PRELOAD shim
//! makes them around `fork`, and a child that joins only when told. One test in this
//! binary: the child of a fork is this process with only the forking thread.

mod common;

use common::pipes::{exited_ok, Told};
use common::shared_image::Image;
use hashfs::{Error, OpenOptions};
use std::path::Path;

#[test]
fn a_parent_unmapping_before_its_child_joined_keeps_the_blocks_for_it() {
    let img = Image::new("fork-pins");
    let fs = img.join();
    let f = fs.open_file(Path::new("/f"), OpenOptions::new().read(true).write(true).create(true)).unwrap();
    f.write_at(0, &vec![7u8; 1 << 20]).unwrap();
    let pin = f.pin_blocks(); // as the shim's mmap of the file's pages
                              // Another participant, which would shrink the file (a second mount in this process).
    let other = img.join();
    let g = other.open_file(Path::new("/f"), OpenOptions::new().write(true)).unwrap();
    let told = Told::new();
    let fork = fs.prepare_fork(&[]).expect("a shared mount forks");
    // SAFETY: the child runs only this thread, which holds no lock but the image's (its
    // copy is let go by after_fork_in_child), and ends with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        told.child_side();
        let ok = told.wait_to_join() && fs.after_fork_in_child(fork).is_ok() && told.joined_then_wait() && {
            drop(pin);
            drop(f);
            fs.shutdown().is_ok()
        };
        // SAFETY: ends the child without the test harness's exit work.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    fs.after_fork_in_parent(fork, pid);
    told.test_side();
    drop(pin); // the parent unmaps at once; its child, not joined, maps the blocks still
    assert!(matches!(g.set_len(0), Err(Error::Busy)), "the blocks were freed under the child's mapping");
    assert!(told.tell_to_join(), "the child did not join");
    assert!(matches!(g.set_len(0), Err(Error::Busy)), "the joined child's mark keeps them");
    told.tell_to_finish();
    let (status, ok) = exited_ok(pid);
    assert!(ok, "the child failed: {status:#x}");
    // A call of the parent's that takes the image lock: its mark, which waited for the
    // child, goes.
    f.set_len(1 << 20).unwrap();
    g.set_len(0).expect("no mapping left anywhere");
    drop((f, g));
    other.shutdown().unwrap();
    fs.shutdown().unwrap();
}
