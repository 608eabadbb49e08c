//! The `hashfs` command end to end: mkfs, put a directory tree, get it back identical,
//! ls/cat/mkdir/rm, fsck exit codes, and clear errors for bad input.

#[path = "support/skip.rs"]
mod skip;
use skip::skip;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn hashfs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hashfs")).args(args).output().expect("runs")
}

fn ok(args: &[&str]) -> String {
    let o = hashfs(args);
    assert!(o.status.success(), "hashfs {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A host tree with nested directories, an empty file, a 3 MiB file, a symlink, modes, a
/// FIFO and a character device.
fn make_tree(root: &Path) {
    fs::create_dir_all(root.join("sub/deeper")).unwrap();
    fs::write(root.join("empty"), b"").unwrap();
    fs::write(root.join("small.txt"), b"hello hashfs\n").unwrap();
    let big: Vec<u8> = (0..3 * 1024 * 1024 + 123).map(|i: u32| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    fs::write(root.join("sub/big.bin"), &big).unwrap();
    fs::write(root.join("sub/deeper/x"), b"x").unwrap();
    fs::set_permissions(root.join("sub/deeper/x"), fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink("../small.txt", root.join("sub/link")).unwrap();
    let c = |p: PathBuf| std::ffi::CString::new(p.into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: valid paths; mknod of a device needs root, which the tests run as.
    unsafe {
        assert_eq!(libc::mkfifo(c(root.join("sub/fifo")).as_ptr(), 0o640), 0);
        assert_eq!(libc::mknod(c(root.join("tty")).as_ptr(), libc::S_IFCHR | 0o620, libc::makedev(4, 64)), 0);
    }
    // Extended attributes and an ACL (skipped where the host file system has none).
    let host_has_xattrs = Command::new("setfattr")
        .args(["-n", "user.tag", "-v", "small", root.join("small.txt").to_str().unwrap()])
        .status()
        .is_ok_and(|s| s.success());
    if host_has_xattrs {
        let ok = Command::new("setfacl").args(["-m", "u:1000:rw", root.join("sub/big.bin").to_str().unwrap()]).status();
        assert!(ok.is_ok_and(|s| s.success()), "setfacl on the host");
    } else {
        skip("the host file system takes no user attributes: put/get of attributes not checked");
    }
}

/// A path's extended attributes as (name, value) pairs, sorted.
fn xattrs(p: &Path) -> Vec<(String, Vec<u8>)> {
    let o = Command::new("getfattr").args(["-d", "-m", "-", "-e", "hex", "-h", p.to_str().unwrap()]).output();
    let Ok(o) = o else { return Vec::new() };
    let mut v: Vec<(String, Vec<u8>)> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
    v.sort();
    v
}

fn compare_trees(a: &Path, b: &Path) {
    let ma = fs::symlink_metadata(a).unwrap();
    let mb = fs::symlink_metadata(b).unwrap();
    assert_eq!(ma.file_type().is_dir(), mb.file_type().is_dir(), "{}", a.display());
    assert_eq!(ma.file_type().is_symlink(), mb.file_type().is_symlink(), "{}", a.display());
    {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let (ta, tb) = (ma.file_type(), mb.file_type());
        assert_eq!((ta.is_fifo(), ta.is_char_device()), (tb.is_fifo(), tb.is_char_device()), "{}", a.display());
        if ta.is_fifo() || ta.is_char_device() {
            assert_eq!((ma.rdev(), ma.mode(), ma.mtime()), (mb.rdev(), mb.mode(), mb.mtime()), "{}", a.display());
            return;
        }
    }
    if ma.file_type().is_symlink() {
        assert_eq!(fs::read_link(a).unwrap(), fs::read_link(b).unwrap());
    } else if ma.is_dir() {
        let mut na: Vec<_> = fs::read_dir(a).unwrap().map(|e| e.unwrap().file_name()).collect();
        let mut nb: Vec<_> = fs::read_dir(b).unwrap().map(|e| e.unwrap().file_name()).collect();
        na.sort();
        nb.sort();
        assert_eq!(na, nb, "{}", a.display());
        for n in na {
            compare_trees(&a.join(&n), &b.join(&n));
        }
    } else {
        assert_eq!(xattrs(a), xattrs(b), "{}", a.display());
        assert_eq!(fs::read(a).unwrap(), fs::read(b).unwrap(), "{}", a.display());
        assert_eq!(ma.permissions().mode() & 0o7777, mb.permissions().mode() & 0o7777, "{}", a.display());
        assert_eq!(ma.modified().unwrap(), mb.modified().unwrap(), "{}", a.display());
    }
}

fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("test.img");
    ok(&["mkfs", s(&img), "--size", "64M"]);
    (dir, img)
}

#[test]
fn put_get_round_trip_and_fsck_clean() {
    let (dir, img) = setup();
    let src = dir.path().join("src");
    make_tree(&src);
    let out = ok(&["put", s(&img), s(&src), "/data"]);
    assert!(out.contains("copied 4 files, 3 directories, 1 symlinks, 2 special files"), "{out}");
    let back = dir.path().join("back");
    ok(&["get", s(&img), "/data", s(&back)]);
    compare_trees(&src, &back);
    if !xattrs(&src.join("small.txt")).is_empty() {
        assert_eq!(xattrs(&back.join("sub/big.bin")).len(), 1, "the ACL came back");
    }
    // Into an existing directory: lands under its own name.
    ok(&["mkdir", s(&img), "/into"]);
    ok(&["put", s(&img), s(&src.join("small.txt")), "/into"]);
    assert_eq!(ok(&["cat", s(&img), "/into/small.txt"]), "hello hashfs\n");
    let ls = ok(&["ls", s(&img), "/data"]);
    assert_eq!(ls, "empty\nsmall.txt\nsub/\ntty\n");
    let long = ok(&["ls", "-l", s(&img), "/data/sub"]);
    assert!(long.contains("link -> ../small.txt"), "{long}");
    assert!(long.contains(&format!("{}", 3 * 1024 * 1024 + 123)), "{long}");
    let info = ok(&["info", s(&img)]);
    assert!(info.contains("mapping        hashfs") && info.contains("state          clean"), "{info}");
    assert!(info.contains("write mode     relaxed (untorn writes up to 1024 KiB)"), "{info}");
    let fsck = hashfs(&["fsck", s(&img)]);
    assert_eq!(code(&fsck), 0, "{}", String::from_utf8_lossy(&fsck.stdout));
    ok(&["rm", "-r", s(&img), "/data"]);
    assert_eq!(ok(&["ls", s(&img)]), "into/\n");
    assert_eq!(code(&hashfs(&["fsck", s(&img)])), 0);
}

#[test]
fn bad_input_gives_clear_errors() {
    let (dir, img) = setup();
    let err = |args: &[&str], want: &str| {
        let o = hashfs(args);
        assert_ne!(code(&o), 0, "{args:?} succeeded");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(want), "{args:?}: stderr {e:?} lacks {want:?}");
    };
    err(&["mkfs", s(&dir.path().join("a.img")), "--size", "1000"], "multiple of 4096");
    err(&["mkfs", s(&dir.path().join("a.img")), "--size", "64K"], "too small");
    err(&["mkfs", s(&dir.path().join("a.img")), "--size", "64M", "--mapping", "btree"], "unknown mapping");
    err(&["mkfs", s(&dir.path().join("a.img")), "--size", "12Q"], "unknown size unit");
    err(&["ls", s(&dir.path().join("missing.img"))], "cannot open image");
    err(&["cat", s(&img), "/nope"], "no such file or directory");
    err(&["mkdir", s(&img), &format!("/{}", "n".repeat(256))], "file name too long");
    err(&["rm", s(&img), "/"], "");
    fs::write(dir.path().join("junk.img"), vec![0x42u8; 1 << 20]).unwrap();
    err(&["ls", s(&dir.path().join("junk.img"))], "not a HashFS image");
    let fsck = hashfs(&["fsck", s(&dir.path().join("missing.img"))]);
    assert_eq!(code(&fsck), 8);
}

#[test]
fn fsck_exit_codes_follow_e2fsck() {
    let (_dir, img) = setup();
    ok(&["mkdir", s(&img), "/d"]);
    // Damage the primary superblock: check reports it (4), repair fixes it (1), then 0.
    let mut bytes = fs::read(&img).unwrap();
    bytes[100] ^= 0x10;
    fs::write(&img, &bytes).unwrap();
    let check = hashfs(&["fsck", s(&img)]);
    assert_eq!(code(&check), 4, "{}", String::from_utf8_lossy(&check.stdout));
    assert!(String::from_utf8_lossy(&check.stdout).contains("primary superblock"));
    let repair = hashfs(&["fsck", "--repair", s(&img)]);
    assert_eq!(code(&repair), 1, "{}", String::from_utf8_lossy(&repair.stdout));
    assert_eq!(code(&hashfs(&["fsck", s(&img)])), 0);
    assert_eq!(ok(&["ls", s(&img)]), "d/\n");
}

#[test]
fn full_image_reports_enospc_and_keeps_data() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("small.img");
    ok(&["mkfs", s(&img), "--size", "2M"]);
    fs::write(dir.path().join("keep"), b"keep me").unwrap();
    ok(&["put", s(&img), s(&dir.path().join("keep")), "/keep"]);
    fs::write(dir.path().join("huge"), vec![1u8; 4 << 20]).unwrap();
    let o = hashfs(&["put", s(&img), s(&dir.path().join("huge")), "/huge"]);
    assert_eq!(code(&o), 1);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no space left on device"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(ok(&["cat", s(&img), "/keep"]), "keep me");
    ok(&["rm", s(&img), "/huge"]);
    assert_eq!(code(&hashfs(&["fsck", s(&img)])), 0);
}

#[test]
fn every_mapping_round_trips_through_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    make_tree(&src);
    for (m, score) in [
        ("extent-tree", "0.7"),
        ("extent-tree-cached", "1.0"),
        ("radix-tree", "0.85"),
        ("cuckoo", "0.7"),
        ("extent-hash", "0.85"),
    ] {
        let img = dir.path().join(format!("{m}.img"));
        let out = ok(&["mkfs", s(&img), "--size", "64M", "--mapping", m, "--layout-score", score]);
        assert!(out.contains(&format!("mapping {m}")), "{out}");
        ok(&["put", s(&img), s(&src), "/data"]);
        let back = dir.path().join(format!("back-{m}"));
        ok(&["get", s(&img), "/data", s(&back)]);
        compare_trees(&src, &back);
        let info = ok(&["info", s(&img)]);
        assert!(info.contains(&format!("mapping        {m}")), "{info}");
        assert!(info.contains("write mode     relaxed (untorn writes up to 256 KiB)"), "{info}");
        assert!(info.contains("measured layout score") && info.contains("metadata/GiB"), "{info}");
        let fsck = hashfs(&["fsck", s(&img)]);
        assert_eq!(code(&fsck), 0, "{m}: {}", String::from_utf8_lossy(&fsck.stdout));
        ok(&["rm", "-r", s(&img), "/data"]);
        assert_eq!(code(&hashfs(&["fsck", s(&img)])), 0, "{m}");
    }
    // ctFS: the partitions the files took, and the whole virtual space accounted for.
    let img = dir.path().join("ctfs.img");
    ok(&["mkfs", s(&img), "--size", "64M", "--mapping", "ctfs"]);
    ok(&["put", s(&img), s(&src), "/data"]);
    let info = ok(&["info", s(&img)]);
    assert!(info.contains("mapping        ctfs"), "{info}");
    assert!(
        info.contains("partitions L0    4 KiB: ") && info.contains("partitions L9  512 GiB: 0 holding a file"),
        "{info}"
    );
    assert!(info.contains("partitions L4   16 MiB: 1 holding a file"), "{info}"); // sub/big.bin
    assert!(info.contains("virtual space  2 TiB: "), "{info}");
    assert_eq!(code(&hashfs(&["fsck", s(&img)])), 0);
    // Strict mode, and a journal large enough for 1 MiB untorn writes on a block mapping.
    let img = dir.path().join("strict.img");
    ok(&[
        "mkfs",
        s(&img),
        "--size",
        "64M",
        "--mapping",
        "radix-tree",
        "--write-mode",
        "strict",
        "--journal-blocks",
        "64",
    ]);
    let info = ok(&["info", s(&img)]);
    assert!(info.contains("write mode     strict (untorn writes up to 1024 KiB)"), "{info}");
    ok(&["put", s(&img), s(&src), "/data"]);
    compare_trees(&src, &{
        let back = dir.path().join("back-strict");
        ok(&["get", s(&img), "/data", s(&back)]);
        back
    });
    let o = hashfs(&["mkfs", s(&img), "--size", "64M", "--write-mode", "atomic"]);
    assert!(
        !o.status.success()
            && String::from_utf8_lossy(&o.stderr).contains("unknown write mode \"atomic\" (choose relaxed or strict)")
    );
    // Bad choices are refused with the list of mappings.
    let img = dir.path().join("x.img");
    let o = hashfs(&["mkfs", s(&img), "--size", "64M", "--mapping", "btree"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("unknown mapping") && e.contains("extent-hash"), "{e}");
    let o = hashfs(&["mkfs", s(&img), "--size", "64M", "--mapping", "radix-tree", "--layout-score", "1.5"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("layout-score"));
}

/// Without the cycle probe compiled in, `hashfs bench paper` says how to get it and does
/// nothing else.
#[cfg(not(feature = "probe"))]
#[test]
fn paper_benchmark_needs_the_probe() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let o = hashfs(&["bench", "paper", "--tiny", "--out", s(&out), "--image-dir", s(dir.path())]);
    assert_ne!(code(&o), 0);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--features probe"), "{o:?}");
    assert!(!out.exists(), "nothing written");
}

/// `hashfs bench paper` at a tiny scale: every experiment runs, every mapping appears in
/// the JSON with finite, positive figures (the figures themselves mean nothing here). Runs
/// in the probe build (scripts/test.sh: `--features probe`).
#[cfg(feature = "probe")]
#[test]
fn paper_benchmark_smoke() {
    // Images in DRAM (/dev/shm, as the real runs' default), not on the disk /tmp may be on.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let Some(tools) = ycsb_tools(dir.path()) else { return };
    let out = dir.path().join("results");
    let paper = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_hashfs")).args(args).envs(tools.clone()).output().unwrap();
        assert!(o.status.success(), "hashfs {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    };
    paper(&["bench", "paper", "--tiny", "--images", "2", "--out", s(&out), "--image-dir", s(dir.path())]);
    let bad = hashfs(&["bench", "paper", "--tiny", "--out", s(&out), "nonsense"]);
    assert_ne!(code(&bad), 0);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown experiment"));
    let bad = hashfs(&["bench", "paper", "--tiny", "--images", "0", "--out", s(&out), "locality"]);
    assert_ne!(code(&bad), 0);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--images"));
    for exp in
        ["locality", "fragmentation", "filesize", "iosize", "utilization", "concurrency", "pagecache", "spfs-extents"]
    {
        let text = std::fs::read_to_string(out.join(format!("{exp}.json"))).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let points = doc["points"].as_array().unwrap();
        assert!(!points.is_empty(), "{exp}: no points");
        let mappings: std::collections::BTreeSet<&str> =
            points.iter().map(|p| p["mapping"].as_str().unwrap()).collect();
        let want = match exp {
            "pagecache" => 2,
            "spfs-extents" => 4,
            _ => 6,
        };
        assert_eq!(mappings.len(), want, "{exp}: {mappings:?}");
        for p in points {
            assert!(p.get("error").is_none(), "{exp}: {p}");
            let m = p["map_cycles"]["mean"].as_f64().unwrap();
            let trials = p["map_cycles"]["trials"].as_array().unwrap();
            assert!(m.is_finite() && m > 0.0, "{exp}: {p}");
            assert!(trials.len() >= 20, "{exp}: {} trials", trials.len());
            // Two images, each kept, with different seeds (so different placements).
            assert_eq!(p["images"], serde_json::json!(2), "{exp}: {p}");
            assert_eq!(p["map_cycles"]["images"].as_array().unwrap().len(), 2, "{exp}");
        }
        let seeds = doc["config"]["image_seeds"].as_array().unwrap();
        assert!(seeds.len() == 2 && seeds[0] != seeds[1], "{exp}: {seeds:?}");
        assert!(doc["machine"]["tsc_ghz"].as_f64().unwrap() > 0.0);
    }
    // WineFS's experiments: every mapping with each allocator (HashFS: its table), the
    // mapped writes and the aging steps, finite figures, both images kept.
    for (exp, figures) in [
        ("winefs-aging", &["write_gbps", "faults_per_mib", "pmd_share", "free_aligned_share"][..]),
        ("winefs-2mib", &["map_write_us", "op_us", "faults", "pmd_share"][..]),
    ] {
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(format!("{exp}.json"))).unwrap()).unwrap();
        let points = doc["points"].as_array().unwrap();
        let configs: std::collections::BTreeSet<(String, String)> = points
            .iter()
            .map(|p| (p["mapping"].as_str().unwrap().to_string(), p["allocator"].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(configs.len(), 11, "{exp}: {configs:?}");
        for f in figures {
            let with: Vec<&serde_json::Value> = points.iter().filter(|p| p.get(*f).is_some()).collect();
            assert!(!with.is_empty(), "{exp}: no {f}");
            for p in with {
                let m = p[*f]["mean"].as_f64().unwrap();
                assert!(m.is_finite() && m >= 0.0, "{exp}: {p}");
                assert_eq!(p[*f]["images"].as_array().unwrap().len(), 2, "{exp}");
            }
        }
    }
    // ctFS on one large file: append and random read, shares of time in [0, 1] with
    // translation a part of mapping, both images kept.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ctfs-large.json")).unwrap()).unwrap();
    let points = doc["points"].as_array().unwrap();
    let ops: Vec<&str> = points.iter().map(|p| p["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["append", "rand_read"]);
    for p in points {
        let f = |k: &str| p[k]["mean"].as_f64().unwrap();
        assert!(f("ns_per_op") > 0.0, "{p}");
        assert!((0.0..=1.0).contains(&f("map_share")) && f("translate_share") >= 0.0, "{p}");
        assert!(f("translate_share") <= f("map_share") + 1e-9, "{p}");
        assert_eq!(p["translate_share"]["images"].as_array().unwrap().len(), 2, "{p}");
    }
    // ctFS's atomic writes: on ctfs untorn against relaxed, on extent-tree strict against
    // relaxed, every size aligned and not, positive times on both images; ctfs's limit.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ctfs-atomic.json")).unwrap()).unwrap();
    let points = doc["points"].as_array().unwrap();
    let kinds: std::collections::BTreeSet<(&str, &str, &str, u64)> = points
        .iter()
        .map(|p| {
            assert!(p["ms"]["mean"].as_f64().unwrap() > 0.0, "{p}");
            assert_eq!(p["ms"]["images"].as_array().unwrap().len(), 2, "{p}");
            (
                p["mapping"].as_str().unwrap(),
                p["mode"].as_str().unwrap(),
                p["align"].as_str().unwrap(),
                p["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(kinds.len(), 2 * 2 * 2 * 2, "{kinds:?}");
    assert_eq!(doc["config"]["untorn_write_max"]["ctfs"], serde_json::json!(1u64 << 30));
    // No scratch image is left behind.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "img"))
        .collect();
    assert!(left.is_empty());
    plot_smoke(&out, &dir.path().join("docs"));
    // A second run on other images (one each, numbered from 2), then both side by side.
    // ctFS Fig. 7: seven targets (three mappings in two modes through the shim, tmpfs),
    // each with load A, A-D, F, load E and E, every throughput positive on both images.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ctfs-ycsb.json")).unwrap()).unwrap();
    let points = doc["points"].as_array().unwrap();
    let targets: std::collections::BTreeSet<(&str, &str)> =
        points.iter().map(|p| (p["mapping"].as_str().unwrap(), p["mode"].as_str().unwrap())).collect();
    assert_eq!(targets.len(), 7, "{targets:?}");
    assert_eq!(points.len(), 7 * 8);
    for p in points {
        let f = &p["ops_per_s"];
        assert!(f["mean"].as_f64().is_some_and(|m| m.is_finite() && m > 0.0), "{p}");
        assert_eq!(f["images"].as_array().unwrap().len(), 2, "{p}");
    }
    let rerun = dir.path().join("rerun");
    paper(&[
        "bench",
        "paper",
        "--tiny",
        "--images",
        "1",
        "--first-image",
        "2",
        "--out",
        s(&rerun),
        "--image-dir",
        s(dir.path()),
    ]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(rerun.join("locality.json")).unwrap()).unwrap();
    assert_eq!(doc["first_image"], serde_json::json!(2));
    assert_ne!(doc["config"]["image_seeds"][0], seeds_of(&out)[0]);
    plot_two_runs_smoke(&out, &rerun, &dir.path().join("docs2"));
}

/// The shim and the LevelDB YCSB driver that `ctfs-ycsb` runs, built into `dir`, as the
/// environment that names them; None (a skip) without g++ or libleveldb-dev.
#[cfg(feature = "probe")]
fn ycsb_tools(dir: &Path) -> Option<Vec<(&'static str, PathBuf)>> {
    let have_gxx = Command::new("g++").arg("--version").output().is_ok_and(|o| o.status.success());
    if !have_gxx || !Path::new("/usr/include/leveldb/db.h").exists() {
        skip("bench paper's smoke run: ctfs-ycsb needs g++ and libleveldb-dev");
        return None;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let driver = dir.join("leveldb_ycsb");
    let st = Command::new("bash").arg(repo.join("apps/ycsb/build.sh")).arg(&driver).status().unwrap();
    assert!(st.success(), "building the YCSB driver");
    // The shim without the probe: the one scripts/test.sh built, else built here in this
    // build's target directory (target/probe/debug/hashfs -> target/probe).
    if let Some(shim) = std::env::var_os("HASHFS_BENCH_SHIM").map(PathBuf::from).filter(|p| p.is_file()) {
        return Some(vec![("HASHFS_BENCH_SHIM", shim), ("HASHFS_BENCH_YCSB", driver)]);
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_hashfs"));
    let profile = bin.parent().unwrap();
    let mut c = Command::new(env!("CARGO"));
    c.args(["build", "-q", "--workspace", "--lib", "--target-dir"]).arg(profile.parent().unwrap());
    if profile.file_name().is_some_and(|n| n == "release") {
        c.arg("--release");
    } else {
        c.args(["--profile", "test"]);
    }
    assert!(c.status().unwrap().success(), "building libhashfs_preload.so");
    let shim = profile.join("libhashfs_preload.so");
    assert!(shim.exists(), "{} not built", shim.display());
    Some(vec![("HASHFS_BENCH_SHIM", shim), ("HASHFS_BENCH_YCSB", driver)])
}

#[cfg(feature = "probe")]
fn seeds_of(results: &Path) -> Vec<serde_json::Value> {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("locality.json")).unwrap()).unwrap();
    doc["config"]["image_seeds"].as_array().unwrap().clone()
}

#[cfg(feature = "probe")]
fn python_with_matplotlib() -> Option<&'static str> {
    ["python3", "/usr/bin/python3"]
        .into_iter()
        .find(|py| Command::new(py).args(["-c", "import matplotlib"]).output().is_ok_and(|o| o.status.success()))
}

/// bench/plot.py with `--rerun`: one summary row per check with both runs' verdicts and
/// the verdict of both (the run's own or "unstable"), and a count that adds up.
#[cfg(feature = "probe")]
fn plot_two_runs_smoke(first: &Path, second: &Path, docs: &Path) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let Some(py) = python_with_matplotlib() else {
        skip("the plot check: no python3 with matplotlib");
        return;
    };
    let r = Command::new(py)
        .arg(repo.join("bench/plot.py"))
        .args(["--results", s(first), "--rerun", s(second), "--docs", s(docs)])
        .arg("--intro")
        .arg(repo.join("bench/results-intro.md"))
        .output()
        .unwrap();
    assert!(r.status.success(), "plot.py failed: {}", String::from_utf8_lossy(&r.stderr));
    let md = std::fs::read_to_string(docs.join("results.md")).unwrap();
    // "Of N checks ..., S give the same verdict in both runs: A agree, D differ and I are
    // inconclusive in both; U differ between the runs".
    let start = md.find("Of ").expect("summary missing");
    let para = &md[start..start + md[start..].find("differ between the runs").expect("no count of unstable checks")];
    let nums: Vec<u64> = para.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    assert_eq!(nums.len(), 6, "{para}");
    assert_eq!(nums[2] + nums[3] + nums[4], nums[1], "{para}");
    assert_eq!(nums[1] + nums[5], nums[0], "{para}");
    let table =
        md.split("| experiment | claim | run 1 (measured) | run 2 (measured) | both runs |").nth(1).expect("no table");
    let rows: Vec<&str> = table.lines().skip(2).take_while(|l| l.starts_with("| ")).collect();
    assert!(rows.iter().all(|l| l.matches(" | ").count() == 4), "{rows:?}");
    assert_eq!(rows.len() as u64, nums[0], "one summary row per check");
    let unstable = rows.iter().filter(|l| l.ends_with("**unstable** ⚠ |")).count() as u64;
    assert_eq!(unstable, nums[5], "every unstable check flagged");
}

/// bench/plot.py draws every experiment's figure and writes results.md from the tiny run,
/// with the summary, every section and the hand-written discussion.
#[cfg(feature = "probe")]
fn plot_smoke(results: &Path, docs: &Path) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let Some(py) = python_with_matplotlib() else {
        skip("the plot check: no python3 with matplotlib");
        return;
    };
    let r = Command::new(py)
        .arg(repo.join("bench/plot.py"))
        .args(["--results", s(results), "--docs", s(docs)])
        .arg("--intro")
        .arg(repo.join("bench/results-intro.md"))
        .arg("--discussion")
        .arg(repo.join("bench/results-discussion.md"))
        .output()
        .unwrap();
    assert!(r.status.success(), "plot.py failed: {}", String::from_utf8_lossy(&r.stderr));
    let md = std::fs::read_to_string(docs.join("results.md")).unwrap();
    assert!(md.contains("# Results: the papers' file-mapping evaluation"), "intro missing");
    // "Of N checks against the papers' claims, A agree, D differ and I are inconclusive":
    // three verdicts that add up, one summary row per check.
    let summary = md.lines().find(|l| l.starts_with("Of ") && l.contains("checks against the papers' claims"));
    let nums: Vec<u64> =
        summary.expect("summary missing").split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    assert_eq!(nums.len(), 4, "{summary:?}");
    assert_eq!(nums[1] + nums[2] + nums[3], nums[0], "{summary:?}");
    let rows = md.lines().filter(|l| {
        l.starts_with("| ")
            && ["**agrees**", "**differs**", "**inconclusive**"].iter().any(|v| l.ends_with(&format!("{v} |")))
    });
    assert_eq!(rows.count() as u64, nums[0], "one summary row per check");
    assert!(md.contains("Discussion (hand-written"), "discussion missing");
    assert!(!md.contains("Not in this run"), "a section has no data");
    for exp in [
        "locality",
        "fragmentation",
        "filesize",
        "iosize",
        "utilization",
        "concurrency",
        "pagecache",
        "spfs-extents",
        "winefs-aging",
        "winefs-2mib",
    ] {
        assert!(md.contains(&format!("![{exp}](results/{exp}.png)")), "{exp}: no figure in results.md");
        let png = std::fs::read(docs.join(format!("results/{exp}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{exp}: not a plot");
    }
}

#[test]
fn crashtest_explores_and_reruns_one_state() {
    let out =
        ok(&["crashtest", "--mapping", "hashfs,extent-tree", "--ops", "chmod,rename", "--seed", "3", "--threads", "1"]);
    assert!(out.contains("seed 3"), "{out}");
    let total = out.lines().find(|l| l.starts_with("total:")).expect("a total line");
    assert!(total.ends_with(" 0 failures"), "{out}");
    let states: u64 = total.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(states > 100, "{total}");
    // A reproducer's command: one workload, one crash point, one state.
    let one = ok(&[
        "crashtest",
        "--mapping",
        "hashfs",
        "--workload",
        "ace:rename",
        "--seed",
        "3",
        "--point",
        "1",
        "--state",
        "0",
    ]);
    assert!(one.contains("1 workloads, 1 crash points"), "{one}");
    // Bad input: a clear error, exit 1.
    let bad = hashfs(&["crashtest", "--ops", "nosuch"]);
    assert_eq!(code(&bad), 1);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown operation"));
    let bad = hashfs(&["crashtest", "--workload", "ace:nosuch"]);
    assert_eq!(code(&bad), 1);
}
