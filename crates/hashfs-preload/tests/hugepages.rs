//! Memory-mapped files get 2 MiB pages (WineFS): on an image mapped with 2 MiB pages (a
//! tmpfs mounted `huge=always`, as a DAX device maps PM), a file allocated with the
//! aligned allocator and mapped through the shim is mapped by the kernel with 2 MiB pages
//! (`ShmemPmdMapped`); with the bitmap allocator, whose extents ignore alignment, it is not.

mod common;
#[path = "../../hashfs-cli/tests/support/huge.rs"]
mod huge;
use common::skip::skip;
use common::{image_in, p};
use hashfs::{AllocatorKind, FormatOptions, MappingKind};
use huge::huge_dir;
use std::path::Path;

fn pmd_kib(allocator: AllocatorKind, dir: &Path, sparse: bool) -> u64 {
    let opts = FormatOptions { mapping: MappingKind::ExtentTree, allocator, ..FormatOptions::default() };
    let img = image_in(dir, 256 << 20, &opts);
    // Small files first, so that the big file does not start at the first data block.
    let small = format!("open('{}', 'w').write('a'); open('{}', 'w').write('bb')", p("/a"), p("/b"));
    img.ok("python3", &["-c", &small]);
    // The benchmark's own script: fallocate, map, memcpy through the mapping, one JSON line.
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/winefs/mmap_write.py");
    let mut args = vec![script.to_string(), p("/big"), "8".into()];
    if sparse {
        args.push("sparse".into()); // the file all hole: blocks given by the first stores
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = img.ok("python3", &args);
    img.fsck_clean();
    assert!(out.contains(r#""data_ok": true"#), "{out}");
    let field = out.split(r#""pmd_kib": "#).nth(1).expect("pmd_kib");
    field.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

#[test]
fn mapped_files_get_2mib_pages_with_the_aligned_allocator() {
    let Some(dir) = huge_dir() else {
        skip("no tmpfs with huge=always (mounting one needs root)");
        return;
    };
    let aligned = pmd_kib(AllocatorKind::Aligned, &dir, false);
    let bitmap = pmd_kib(AllocatorKind::Bitmap, &dir, false);
    assert_eq!(aligned, 8192, "every 2 MiB of the file on a huge page (bitmap allocator: {bitmap} KiB)");
    assert!(bitmap < aligned, "the bitmap allocator's placement ignores alignment: {bitmap} KiB");
}

/// A hole written through the mapping gets its whole 2 MiB at the first store, one aligned
/// extent, so the sparse file ends up on huge pages too.
#[test]
fn holes_filled_through_a_mapping_get_2mib_pages() {
    let Some(dir) = huge_dir() else {
        skip("no tmpfs with huge=always (mounting one needs root)");
        return;
    };
    assert_eq!(pmd_kib(AllocatorKind::Aligned, &dir, true), 8192, "every 2 MiB of the filled holes on a huge page");
}
