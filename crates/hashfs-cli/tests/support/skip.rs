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
