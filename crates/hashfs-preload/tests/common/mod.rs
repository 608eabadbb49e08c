//! What the shim's tests share: the freshly built shim library and an image to run
//! programs against.
#![allow(dead_code)]

use hashfs::pm::{MmapDevice, OpenMode};
use hashfs::FileSystem;
use hashfs::{
    fsck::{fsck, FsckMode},
    FormatOptions,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

#[path = "../../../hashfs-cli/tests/support/skip.rs"]
pub mod skip;

#[path = "../../../hashfs-cli/tests/support/bounded.rs"]
pub mod bounded;
#[allow(unused_imports)] // (each test binary uses some)
pub use bounded::{output_within, Bounded, BoundedChild, RUN_LIMIT};

pub const PREFIX: &str = "/hashfs-test";

/// The start of a Python script that prints calls' answers, to compare the shim's with the
/// kernel's: `d` is the script's directory argument, and `t(name, f)` prints the call's
/// name and its answer: its result when that is a string, boolean, bytes, list or tuple
/// (exactly: a stat result, whose numbers differ between file systems, is "ok"), else
/// "ok", or the errno's name.
pub const PY_ANSWERS: &str = r#"
import errno, os, sys
d = sys.argv[1]
def t(name, f):
    try:
        r = f()
        r = r if type(r) in (str, bool, bytes, list, tuple) else "ok"
    except OSError as e:
        r = errno.errorcode[e.errno]
    print(name, r)
"#;

/// Runs `script` (after [`PY_ANSWERS`]) on a tmpfs and through the shim (as root) and
/// requires the same lines, and each of `must` among the kernel's.
pub fn answers_as_the_kernels(script: &str, must: &[&str]) {
    let script = &format!("{PY_ANSWERS}{script}");
    let img = image();
    let shim = img.ok("python3", &["-c", script, &p("")]);
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let kernel = std::process::Command::new("python3").args(["-c", script]).arg(dir.path()).output().unwrap();
    assert!(kernel.status.success(), "{}", String::from_utf8_lossy(&kernel.stderr));
    let kernel = String::from_utf8_lossy(&kernel.stdout);
    let differ: Vec<String> = kernel
        .lines()
        .zip(shim.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("kernel: {a:<36} shim: {b}"))
        .collect();
    assert!(differ.is_empty() && kernel.lines().count() == shim.lines().count(), "{}", differ.join("\n"));
    assert!(must.iter().all(|m| kernel.contains(m)), "{kernel}");
    img.fsck_clean();
}

/// A C program built from `source` with `cc` in `dir`, named `name`; None (a skip, a
/// failure under CI) where `cc` is missing or fails.
pub fn c_program(dir: &Path, name: &str, source: &str) -> Option<PathBuf> {
    let (src, prog) = (dir.join(format!("{name}.c")), dir.join(name));
    std::fs::write(&src, source).unwrap();
    if !Command::new("cc").arg("-o").arg(&prog).arg(&src).status().is_ok_and(|s| s.success()) {
        skip::skip(&format!("cc (to build the {name} program) is not installed"));
        return None;
    }
    Some(prog)
}

/// LevelDB's YCSB driver (`apps/ycsb/build.sh`), built into `img`'s directory; None (a
/// skip, a failure under CI) where g++ or LevelDB's headers are missing.
pub fn ycsb_driver(img: &Image) -> Option<PathBuf> {
    let gxx = Command::new("sh").args(["-c", "command -v g++"]).output().is_ok_and(|o| o.status.success());
    if !gxx || !Path::new("/usr/include/leveldb/db.h").exists() {
        skip::skip("g++ or libleveldb-dev is not installed");
        return None;
    }
    let exe = img._dir.path().join("leveldb_ycsb");
    let st = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../../apps/ycsb/build.sh"))
        .arg(&exe)
        .status()
        .unwrap();
    assert!(st.success(), "building the YCSB driver");
    Some(exe)
}

/// The YCSB driver's output: each of `workloads` ran and every value read back.
pub fn assert_ycsb_ok(out: &str, workloads: &str) {
    for w in workloads.chars() {
        assert!(out.contains(&format!("workload {w}:")), "{out}");
    }
    assert!(out.contains("all correct"), "{out}");
}

pub fn shim_path() -> PathBuf {
    // `cargo test` builds the library only as an rlib and never rebuilds the cdylib: build
    // it every time (a no-op when up to date), so the tests never load a stale shim.
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| build_workspace("--lib"));
    let so = profile_dir().join("libhashfs_preload.so");
    assert!(so.exists(), "{} not built", so.display());
    so
}

/// One of the workspace's programs (`hashfs`, `hashfs-bench`...), built in the profile of
/// the test's own build as [`shim_path`] builds the shim.
pub fn workspace_bin(name: &str) -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| build_workspace("--bins"));
    let bin = profile_dir().join(name);
    assert!(bin.exists(), "{} not built", bin.display());
    bin
}

/// target/<profile>/deps/apps-xxxx -> target/<profile>
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// Builds the workspace's `what` (`--lib`, `--bins`; a no-op when up to date) with the whole
/// workspace's features, as scripts/test.sh's `cargo build --workspace`, so that it reuses
/// that build instead of compiling the libraries again.
fn build_workspace(what: &str) {
    let mut c = Command::new(env!("CARGO"));
    c.args(["build", "--workspace", what]);
    // In the profile of the test's own build (`cargo test` builds with `test`, whose
    // libraries it then reuses, into target/debug; `cargo test --release` with
    // `release`; any other profile, such as scripts/crash-bugs.sh's, with itself).
    match profile_dir().file_name().and_then(|n| n.to_str()) {
        Some("release") => c.arg("--release"),
        Some("debug") | None => c.args(["--profile", "test"]),
        Some(other) => c.args(["--profile", other]),
    };
    assert!(c.status().unwrap().success(), "building the workspace's {what}");
}

pub struct Image {
    pub _dir: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn image() -> Image {
    image_in(&std::env::temp_dir(), 64 << 20, &FormatOptions::default())
}

/// An image of `bytes` in a new directory under `parent`, formatted with `opts`.
pub fn image_in(parent: &Path, bytes: u64, opts: &FormatOptions) -> Image {
    let dir = tempfile::tempdir_in(parent).unwrap();
    let path = dir.path().join("shim.img");
    FileSystem::format_file(&path, bytes, opts, &|_, _| {}).unwrap();
    Image { _dir: dir, path }
}

impl Image {
    pub fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        c.env("LD_PRELOAD", shim_path()).env("HASHFS_IMAGE", &self.path).env("HASHFS_MOUNT", PREFIX);
        c
    }
    pub fn run(&self, prog: &str, args: &[&str]) -> Output {
        output_within(self.cmd(prog).args(args), RUN_LIMIT)
    }
    pub fn ok(&self, prog: &str, args: &[&str]) -> String {
        let o = self.run(prog, args);
        assert!(o.status.success(), "{prog} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
    /// Checks that the image's shared region is gone: the last process to leave removes it.
    pub fn region_removed(&self) {
        let f = std::fs::File::open(&self.path).unwrap();
        let region = hashfs::share::region_path(&f).unwrap();
        assert!(!region.exists(), "the last process to leave removes the region {}", region.display());
    }
    pub fn fsck_clean(&self) {
        let dev = Arc::new(MmapDevice::open(&self.path, OpenMode::Existing).unwrap());
        let (sb, _) = hashfs::fsck::geometry_of(&*dev).unwrap();
        assert_eq!(sb.state, hashfs::testing::layout::SB_STATE_CLEAN, "every process unmounted cleanly");
        let r = fsck(dev, FsckMode::Check, &|_, _| {}).unwrap();
        assert!(r.findings.is_empty(), "{:?}", r.findings);
    }
}

pub fn p(s: &str) -> String {
    format!("{PREFIX}{s}")
}
