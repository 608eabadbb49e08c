//! `hashfs mkfs --allocator`, `hashfs-bench age` and the free aligned 2 MiB extents that
//! `hashfs info` reports: aging fills to the requested fullness, is reproducible from its
//! seed, and bad arguments fail clearly.

#[path = "../../hashfs-cli/tests/support/skip.rs"]
mod skip;
use std::path::Path;
use std::process::{Command, Output};

/// Runs `hashfs-bench age ...` for `age`, else `hashfs ...` (mkfs, info).
fn hashfs(args: &[&str]) -> Output {
    let mut program = match args.first() {
        Some(&"age") => Command::new(env!("CARGO_BIN_EXE_hashfs-bench")),
        _ => skip::beside(env!("CARGO_BIN_EXE_hashfs-bench"), "hashfs"),
    };
    program.args(args).output().expect("runs")
}

fn run_ok(args: &[&str]) -> String {
    let o = hashfs(args);
    assert!(o.status.success(), "hashfs {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The numbers of `free aligned 2 MiB extents: B before (..), A after (..)`.
fn aligned_before_after(out: &str) -> (u64, u64) {
    let line = out.lines().find(|l| l.starts_with("free aligned 2 MiB extents")).expect("aligned line");
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .filter(|w| !w.contains('.'))
        .filter_map(|w| w.parse().ok())
        .collect();
    // "2" of "2 MiB" comes first.
    (nums[1], nums[2])
}

fn full_pct(out: &str) -> f64 {
    let tail = out.split("files live, ").nth(1).expect("fullness");
    tail.split('%').next().unwrap().parse().unwrap()
}

#[test]
fn aging_reaches_its_fullness_reproducibly() {
    let dir = tempfile::tempdir().unwrap();
    let mut outs = Vec::new();
    for i in 0..2 {
        let img = dir.path().join(format!("a{i}.img"));
        run_ok(&["mkfs", p(&img), "--size", "256M", "--mapping", "extent-tree"]);
        let info = run_ok(&["info", p(&img)]);
        assert!(info.contains("allocator      aligned"), "{info}");
        assert!(info.contains("aligned 2 MiB"), "{info}");
        let json = dir.path().join(format!("a{i}.json"));
        let out = run_ok(&["age", p(&img), "--to", "60%", "--churn", "0.5", "--seed", "9", "--json", p(&json)]);
        let line: serde_json::Value = serde_json::from_str(std::fs::read_to_string(&json).unwrap().trim()).unwrap();
        assert_eq!((line["mapping"].as_str(), line["allocator"].as_str()), (Some("extent-tree"), Some("aligned")));
        assert_eq!(line["free_aligned_after"].as_u64(), Some(aligned_before_after(&out).1));
        let full = full_pct(&out);
        // At the target, overshooting by one file at most (8 MiB, 3% of this image).
        assert!((60.0..64.0).contains(&full), "{full}% full: {out}");
        let (before, after) = aligned_before_after(&out);
        assert!(before > 100 && after < before, "{out}");
        let fsck = hashfs(&["fsck", "-n", p(&img)]);
        assert_eq!(fsck.status.code(), Some(0), "{}", String::from_utf8_lossy(&fsck.stdout));
        outs.push(out.replace(p(&img), "IMAGE"));
    }
    assert_eq!(outs[0], outs[1], "the same seed ages the same way");
}

/// HashFS places blocks by the image's hash seed: with `mkfs --seed` as well as `age
/// --seed`, two agings leave the same table (probe lengths, groups, tombstones), for each
/// placement; images with different hash seeds do not.
#[test]
fn hashfs_aging_is_reproducible_from_the_image_seed() {
    let dir = tempfile::tempdir().unwrap();
    for placement in ["paper", "regions"] {
        let aged = |name: &str, seed: &str| {
            let img = dir.path().join(format!("{placement}-{name}.img"));
            run_ok(&["mkfs", p(&img), "--size", "128M", "--placement", placement, "--seed", seed]);
            let out = run_ok(&["age", p(&img), "--to", "75%", "--churn", "0.5", "--seed", "7"]);
            let info = run_ok(&["info", p(&img)]);
            assert!(info.contains("probe length"), "{info}");
            (out + &info).replace(p(&img), "IMAGE")
        };
        let (a, b, other) = (aged("a", "3"), aged("b", "3"), aged("c", "4"));
        assert_eq!(a, b, "{placement}: one image seed and one aging seed age alike");
        assert_ne!(a, other, "{placement}: another image seed places blocks elsewhere");
    }
}

#[test]
fn allocator_and_age_arguments_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("x.img");
    let bad = hashfs(&["mkfs", p(&img), "--size", "64M", "--mapping", "extent-tree", "--allocator", "buddy"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown allocator"), "{bad:?}");
    let bad = hashfs(&["mkfs", p(&img), "--size", "64M", "--allocator", "aligned"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("HashFS places blocks by hash"), "{bad:?}");
    let bad = hashfs(&[
        "mkfs",
        p(&img),
        "--size",
        "64M",
        "--mapping",
        "radix-tree",
        "--allocator",
        "aligned",
        "--layout-score",
        "0.5",
    ]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--allocator bitmap"), "{bad:?}");
    // A layout score alone picks the bitmap allocator.
    run_ok(&["mkfs", p(&img), "--size", "64M", "--mapping", "radix-tree", "--layout-score", "0.5"]);
    let info = run_ok(&["info", p(&img)]);
    assert!(info.contains("allocator      bitmap") && info.contains("layout score   0.50"), "{info}");
    for to in ["0%", "100%", "abc", "1.5"] {
        let bad = hashfs(&["age", p(&img), "--to", to]);
        assert_ne!(bad.status.code(), Some(0), "--to {to}");
        assert!(String::from_utf8_lossy(&bad.stderr).contains("fullness") || !bad.stderr.is_empty());
    }
    let bad = hashfs(&["age", p(&img), "--to", "50%", "--profile", "nope"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown aging profile"), "{bad:?}");
    // Aging a HashFS image works too (free aligned extents counted over the table).
    let h = dir.path().join("h.img");
    run_ok(&["mkfs", p(&h), "--size", "128M"]);
    let out = run_ok(&["age", p(&h), "--to", "40%", "--churn", "0.2"]);
    let (before, after) = aligned_before_after(&out);
    assert!(before > 0 && after < before, "{out}");
    // Already fuller than asked.
    let bad = hashfs(&["age", p(&h), "--to", "10%"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("already"), "{bad:?}");
}
