//! Skipping a test whose tool is missing, never silently: shared by the CLI, FUSE and shim
//! test suites (included with `#[path]`).

/// Skips a test whose tool is missing: under CI (`CI` set) that is a failure; otherwise the
/// reason goes to standard error and to `$HASHFS_SKIP_LOG`, which scripts/test.sh prints
/// at its end so that a skip is never silent.
pub fn skip(why: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    assert!(!ci, "CI: {why}; scripts/test.sh installs what the tests need");
    eprintln!("SKIPPED: {why}");
    if let Some(log) = std::env::var_os("HASHFS_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).create(true).open(log) {
            let _ = writeln!(f, "{why}");
        }
    }
}

/// Whether FUSE can be used here (root, /dev/fuse and fusermount3); under CI it must be.
#[allow(dead_code)]
pub fn fuse_available() -> bool {
    let ok = std::path::Path::new("/dev/fuse").exists()
        && std::process::Command::new("fusermount3").arg("-V").output().is_ok()
        // SAFETY: geteuid has no preconditions.
        && unsafe { libc::geteuid() } == 0;
    if !ok {
        skip("FUSE is not available (needs root, /dev/fuse and fusermount3)");
    }
    ok
}

/// The workspace's other program, `name`, beside this test's own (`exe`, a
/// `CARGO_BIN_EXE_*`): `hashfs` and `hashfs-bench` are built into one target directory
/// (scripts/test.sh builds the workspace before its tests; a test of one crate alone
/// needs `cargo build --workspace` first).
#[allow(dead_code)]
pub fn beside(exe: &str, name: &str) -> std::process::Command {
    let path = std::path::Path::new(exe).with_file_name(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --workspace` (with this test's profile)",
        path.display()
    );
    std::process::Command::new(path)
}
