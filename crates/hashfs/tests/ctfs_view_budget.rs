//! ctFS's live view on a fragmented image stays within its budget of kernel mappings
//! (`mapping/ctfs/view.rs`; half of `vm.max_map_count` by default, here 64 through
//! `HASHFS_CTFS_VIEW_BUDGET`, which is why this test has a binary of its own): a file
//! whose every block is a run of its own is mapped up to the budget and read through the
//! page-table walk past it, every byte right; the process's mappings grow by no more than
//! the budget; a file that gives its mappings back (unlink) lets another file's pages in.

mod common;

use common::fragmented::{check, ctfs_fragmented, Fragmented};
use std::path::Path;

const BUDGET: u64 = 64;
const BLOCKS: u64 = 600;

fn process_mappings() -> u64 {
    std::fs::read_to_string("/proc/self/maps").unwrap().lines().count() as u64
}

#[test]
fn a_fragmented_file_is_mapped_up_to_the_budget_and_walked_past_it() {
    // SAFETY: the only test of this binary sets it before any image is opened; no other
    // thread reads the environment meanwhile.
    unsafe { std::env::set_var("HASHFS_CTFS_VIEW_BUDGET", BUDGET.to_string()) };
    let Fragmented { fs, a, b, dir: _dir } = ctfs_fragmented(BLOCKS);
    let ino_a = a.metadata().unwrap().ino;
    let runs = (0..BLOCKS)
        .filter(|&l| {
            let e = fs.physical_block(ino_a, hashfs::Lblk(l)).unwrap().unwrap();
            l == 0 || fs.physical_block(ino_a, hashfs::Lblk(l - 1)).unwrap().unwrap().pblk.0 + 1 != e.pblk.0
        })
        .count() as u64;
    assert!(runs > 4 * BUDGET, "the file is not fragmented: {runs} runs");
    let check = |f: &hashfs::File, tag: u8| check(f, tag, BLOCKS);
    let before = process_mappings();
    check(&a, 1);
    let mapped = fs.ctfs_view_pages(ino_a).unwrap();
    assert!(mapped > 0 && mapped <= BUDGET, "{mapped} pages mapped, one run each");
    // The view's mappings, and the reserved range they split in two.
    assert!(process_mappings() <= before + BUDGET + 2, "{} mappings after {before}", process_mappings());
    // The budget is spent: b is read through the walk, correctly.
    let ino_b = b.metadata().unwrap().ino;
    check(&b, 2);
    assert_eq!(fs.ctfs_view_pages(ino_b).unwrap(), 0);
    // a's mappings given back: b's pages come in.
    drop(a);
    fs.remove_file(Path::new("/a")).unwrap();
    check(&b, 2);
    assert!(fs.ctfs_view_pages(ino_b).unwrap() > 0, "b's pages mapped once a's went");
    assert!(process_mappings() <= before + BUDGET + 2);
}
