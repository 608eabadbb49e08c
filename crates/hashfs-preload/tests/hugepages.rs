//! Memory-mapped files get 2 MiB pages (WineFS): on an image mapped with 2 MiB pages (a
//! tmpfs mounted `huge=always`, as a DAX device maps PM), a file allocated with the
//! aligned allocator and mapped through the shim is mapped by the kernel with 2 MiB pages
//! (`ShmemPmdMapped`); with the bitmap allocator, whose extents ignore alignment, it is not;
//! with HashFS's regions placement, whose files' chunks are claimed groups, it is, on a
//! fresh image and on an aged one.

mod common;
use common::Bounded;
#[path = "../../hashfs-cli/tests/support/huge.rs"]
mod huge;
use common::skip::skip;
use common::{image_in, p, workspace_bin, Image};
use hashfs::{AllocatorKind, FormatOptions, HashPlacement, MappingKind};
use huge::huge_dir;
use std::path::Path;

fn pmd_kib(allocator: AllocatorKind, dir: &Path, sparse: bool) -> u64 {
    let opts = FormatOptions { mapping: MappingKind::ExtentTree, allocator, ..FormatOptions::default() };
    let img = image_in(dir, 256 << 20, &opts);
    // Small files first, so that the big file does not start at the first data block.
    let small = format!("open('{}', 'w').write('a'); open('{}', 'w').write('bb')", p("/a"), p("/b"));
    img.ok("python3", &["-c", &small]);
    let kib = mapped_write(&img, "/big", 8, sparse);
    img.fsck_clean();
    kib
}

/// The benchmark's own script through the shim: fallocates (or, `sparse`, sizes) a file of
/// `mib` MiB at `path`, maps it shared and writable, copies into it through the mapping
/// and checks the bytes; the KiB of the mapping the kernel mapped with 2 MiB pages.
fn mapped_write(img: &Image, path: &str, mib: u64, sparse: bool) -> u64 {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/winefs/mmap_write.py");
    let mut args = vec![script.to_string(), p(path), mib.to_string()];
    if sparse {
        args.push("sparse".into()); // the file all hole: blocks given by the first stores
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = img.ok("python3", &args);
    assert!(out.contains(r#""data_ok": true"#), "{out}");
    let field = out.split(r#""pmd_kib": "#).nth(1).unwrap_or_else(|| panic!("no pmd_kib: {out}"));
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

/// Issue 57, item 3, on HashFS's regions placement: a writable shared mapping of a
/// fallocated 128 MiB file through the shim is mapped with 2 MiB pages (at least 90% of
/// it) on a fresh 1 GiB image and on the same image aged to 75% full with small and large
/// files created and deleted (`hashfs-bench age`, Geriatrix's file sizes, as
/// scripts/winefs-shim.sh ages its images): the placement keeps free groups whole for the
/// chunks files claim. The paper's placement scatters a file's blocks and maps none of it
/// so (`lmdb_writemap_too_large_for_the_budget_fails_at_open` in apps.rs).
#[test]
fn regions_placement_maps_files_on_2mib_pages_fresh_and_aged() {
    let Some(dir) = huge_dir() else {
        skip("no tmpfs with huge=always (mounting one needs root)");
        return;
    };
    let opts =
        FormatOptions { mapping: MappingKind::HashFs, placement: HashPlacement::Regions, ..FormatOptions::default() };
    let img = image_in(&dir, 1 << 30, &opts);
    const MIB: u64 = 128;
    let fresh = mapped_write(&img, "/fresh", MIB, false);
    let age = std::process::Command::new(workspace_bin("hashfs-bench"))
        .arg("age")
        .arg(&img.path)
        .args(["--to", "75%", "--churn", "1", "--seed", "7"])
        .output_bounded();
    let report = String::from_utf8_lossy(&age.stdout);
    assert!(age.status.success(), "hashfs-bench age: {}", String::from_utf8_lossy(&age.stderr));
    let aged = mapped_write(&img, "/mapped-aged", MIB, false);
    img.fsck_clean();
    let least = MIB * 1024 * 9 / 10;
    assert!(fresh >= least, "fresh image: {fresh} of {} KiB on 2 MiB pages", MIB * 1024);
    assert!(aged >= least, "aged image: {aged} of {} KiB on 2 MiB pages; {report}", MIB * 1024);
}
