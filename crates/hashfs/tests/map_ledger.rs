//! ctFS's live view counts its kernel mappings in the process's one ledger of HashFS's
//! mappings (`pm::vspace::map_budget`, shared with the preload shim; `HASHFS_MAP_BUDGET`
//! sets it here, which is why this test has a binary of its own): with part of the budget
//! held by another part of HashFS, a fragmented file gets only what is left mapped and is
//! read through the page-table walk past it, every byte right; the view's mappings leave
//! the ledger when they are given back and when the image is closed.

mod common;

use common::fragmented::{check, ctfs_fragmented, Fragmented};
use hashfs::pm::vspace::{map_budget, maps_given, maps_held, maps_taken};
use std::path::Path;

const BUDGET: u64 = 64;
/// What another part (the shim's mappings) holds before the image is read.
const OTHERS: u64 = 40;
const BLOCKS: u64 = 300;

#[test]
fn the_view_maps_only_what_the_other_parts_leave() {
    // SAFETY: the only test of this binary sets it before any image is opened; no other
    // thread reads the environment meanwhile.
    unsafe { std::env::set_var("HASHFS_MAP_BUDGET", BUDGET.to_string()) };
    assert_eq!(map_budget(), BUDGET);
    let Fragmented { fs, a, b, dir: _dir } = ctfs_fragmented(BLOCKS);
    let check = |f: &hashfs::File, tag: u8| check(f, tag, BLOCKS);
    let held_before = maps_held();
    maps_taken(OTHERS);
    let ino_a = a.metadata().unwrap().ino;
    check(&a, 1);
    let mapped = fs.ctfs_view_pages(ino_a).unwrap();
    // One run a page: the view took what the others left, no more.
    assert!(mapped > 0 && mapped <= BUDGET - OTHERS, "{mapped} pages mapped beside {OTHERS} held by others");
    assert!(maps_held() <= held_before + BUDGET, "{} held, budget {BUDGET}", maps_held());
    let view_held = maps_held() - held_before - OTHERS;
    assert!(view_held >= mapped.min(1), "the view's mappings are in the ledger: {view_held}");
    // The others give theirs back: b's pages come in beside a's.
    maps_given(OTHERS);
    let ino_b = b.metadata().unwrap().ino;
    check(&b, 2);
    assert!(fs.ctfs_view_pages(ino_b).unwrap() > 0, "b's pages mapped once the others gave theirs back");
    assert!(maps_held() <= held_before + BUDGET);
    // a's mappings given back by its removal, then every one with the image.
    drop(a);
    fs.remove_file(Path::new("/a")).unwrap();
    drop((b, fs));
    assert_eq!(maps_held(), held_before, "the view's mappings left the ledger with the image");
}
