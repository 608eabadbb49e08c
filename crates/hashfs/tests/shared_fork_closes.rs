//! What a parent lets go of right after `fork` stays its child's (issue 55,
//! `fs/shared/for_children.rs`): a file the parent closes before its child has joined (an
//! unlinked one, and one the parent then unlinks) is not freed under the child's inherited
//! descriptor, and the parent's writable mark of a file it unmaps stays until the child has
//! joined and marked it under its own name. With the library's calls as the LD_PRELOAD
//! shim makes them around `fork`, and a child that joins only when told (before 2026-12-06
//! the child read ENOENT, or another file's bytes once its program was exec'd, in 199 runs
//! of 200 of a fork, close, write loop through the shim). One test in this binary: the
//! child of a fork is this process with only the forking thread.

mod common;

use common::pipes::{exited_ok, Told};
use common::shared_image::Image;
use hashfs::OpenOptions;
use std::path::Path;

#[test]
fn what_a_parent_lets_go_of_before_its_child_joined_stays_the_childs() {
    let img = Image::new("fork-closes");
    let fs = img.join();
    let rw = || {
        let mut o = OpenOptions::new();
        o.read(true).write(true).create(true);
        o
    };
    let orphan = fs.open_file(Path::new("/orphan"), &rw()).unwrap();
    orphan.write_at(0, &[b'o'; 10_000]).unwrap();
    fs.remove_file(Path::new("/orphan")).unwrap();
    let linked = fs.open_file(Path::new("/linked"), &rw()).unwrap();
    linked.write_at(0, &[b'l'; 10_000]).unwrap();
    let mapped = fs.open_file(Path::new("/mapped"), &rw()).unwrap();
    fs.note_mapped_writable(mapped.ino(), true).unwrap(); // as the shim's mmap, shared and writable
    let other = img.join(); // another participant (a second mount in this process)
    let w = mapped.ino();
    assert!(other.mapped_writable_elsewhere(w));
    let told = Told::new();
    let fork = fs.prepare_fork(&[]).expect("a shared mount forks");
    // SAFETY: the child runs only this thread, which holds no lock but the image's (its
    // copy is let go by after_fork_in_child), and ends with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        told.child_side();
        let read_all = |f: &hashfs::File<_>, b: u8| {
            let mut buf = vec![0u8; 10_000];
            matches!(f.read_at(0, &mut buf), Ok(10_000)) && buf.iter().all(|&x| x == b)
        };
        let ok = told.wait_to_join()
            && fs.after_fork_in_child(fork).is_ok()
            && fs.note_mapped_writable(w, true).is_ok() // the shim's follow_in_child
            && told.joined_then_wait()
            && read_all(&orphan, b'o')
            && read_all(&linked, b'l')
            && {
                drop((orphan, linked, mapped));
                fs.shutdown().is_ok()
            };
        // SAFETY: ends the child without the test harness's exit work.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    fs.after_fork_in_parent(fork, pid);
    told.test_side();
    // The parent lets go at once; its child, not joined, has them all still.
    let (orphan_ino, linked_ino) = (orphan.ino(), linked.ino());
    drop((orphan, linked));
    fs.remove_file(Path::new("/linked")).unwrap();
    // A file opened after the fork (no child inherited it) goes at once when closed and
    // removed: only what was open at the fork waits (`children-keep-everything`).
    let free = fs.statfs().inodes_free;
    let late = fs.open_file(Path::new("/late"), &rw()).unwrap();
    late.write_at(0, b"made after the fork").unwrap();
    drop(late);
    fs.remove_file(Path::new("/late")).unwrap();
    assert_eq!(fs.statfs().inodes_free, free, "a file opened after the fork waited for the child");
    fs.note_mapped_writable(w, false).unwrap();
    assert!(other.mapped_writable_elsewhere(w), "the writable mark went before the child marked the file");
    // Files made meanwhile take no inode and no block of the two.
    for i in 0..8 {
        let f = other.open_file(Path::new(&format!("/new{i}")), &rw()).unwrap();
        assert!(f.ino() != orphan_ino && f.ino() != linked_ino, "an inode the child has open was freed");
        f.write_at(0, &[b'n'; 20_000]).unwrap();
    }
    assert!(told.tell_to_join(), "the child did not join");
    told.tell_to_finish();
    let (status, ok) = exited_ok(pid);
    assert!(ok, "the child did not read its two files whole: {status:#x}");
    // A call of the parent's that takes the image lock: what waited for the child goes.
    mapped.set_len(0).unwrap();
    assert!(!other.mapped_writable_elsewhere(w), "the parent's writable mark stayed after its child joined");
    drop(mapped);
    other.shutdown().unwrap();
    fs.shutdown().unwrap();
    drop((fs, other));
    img.check();
}
