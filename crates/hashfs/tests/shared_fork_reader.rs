//! A read-only participant's forked child keeps its parent's files from the fork on
//! (issue 55, `fs/shared/read_only.rs::pins_for_child`): a reader pins the files it has open
//! with locks on a description of the image file, and its child's pins are made on a
//! description of the child's own before the fork, so that a parent closing a file at once
//! leaves the child's pin. Before 2026-12-06 the child pinned its files itself after the
//! fork, and a writer could free an unlinked file between the parent's close and that
//! pin, under the child. With the library's calls as the LD_PRELOAD shim makes them
//! around `fork`, and a child that pins only when told. One test in this binary: the child
//! of a fork is this process with only the forking thread.

mod common;

use common::pipes::{exited_ok, Told};
use common::shared_image::Image;
use hashfs::{FileSystem, OpenOptions};
use std::path::Path;

#[test]
fn a_read_only_parent_closing_right_after_fork_leaves_its_child_the_file() {
    let img = Image::new("fork-reader");
    let writer = img.join();
    let mut rw = OpenOptions::new();
    rw.read(true).write(true).create(true);
    writer.open_file(Path::new("/f"), &rw).unwrap().write_at(0, &[b'r'; 10_000]).unwrap();
    let (reader, _) = FileSystem::open_read_only(&img.path).unwrap();
    let f = reader.open_file(Path::new("/f"), OpenOptions::new().read(true)).unwrap();
    let ino = f.ino();
    let told = Told::new();
    let fork = reader.prepare_fork(&[]).expect("a read-only mount forks");
    // SAFETY: the child runs only this thread, which holds no lock but the reader's own
    // (let go by after_fork_in_child), and ends with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        told.child_side();
        let ok = told.wait_to_join() && reader.after_fork_in_child(fork).is_ok() && told.joined_then_wait() && {
            let mut buf = vec![0u8; 10_000];
            matches!(f.read_at(0, &mut buf), Ok(10_000)) && buf.iter().all(|&b| b == b'r')
        };
        // SAFETY: ends the child without the test harness's exit work.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    reader.after_fork_in_parent(fork, pid);
    told.test_side();
    drop(f); // the parent closes at once: its pin goes, the child's stays
    writer.remove_file(Path::new("/f")).unwrap();
    for i in 0..8 {
        let g = writer.open_file(Path::new(&format!("/new{i}")), &rw).unwrap();
        assert_ne!(g.ino(), ino, "the file the child has open was freed");
        g.write_at(0, &[b'n'; 20_000]).unwrap();
    }
    assert!(told.tell_to_join(), "the child did not go on after its fork");
    told.tell_to_finish();
    let (status, ok) = exited_ok(pid);
    assert!(ok, "the child did not read its file whole: {status:#x}");
    drop(reader);
    writer.shutdown().unwrap();
    drop(writer);
    img.check();
}
