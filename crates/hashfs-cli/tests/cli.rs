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
