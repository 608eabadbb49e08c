//! `hashfs-bench takeover`: victims killed beside a survivor on a shared image, the
//! survivor's call after each death counted as a takeover or a plain call, fsck clean after
//! (the benchmark fails otherwise), and its JSON as the docs cite it.

use std::process::Command;

#[test]
fn takeovers_are_timed_and_the_image_stays_clean() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let json = dir.path().join("t.json");
    let out = Command::new(env!("CARGO_BIN_EXE_hashfs-bench"))
        .args(["takeover", "--sizes", "64M", "--rounds", "2", "--kills", "4", "--dir"])
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success(), "takeover failed: {}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = &doc["results"][0];
    assert_eq!(r["image_bytes"].as_u64(), Some(64 << 20));
    let (taken, plain) = (r["takeovers"].as_u64().unwrap(), r["plain_calls"].as_u64().unwrap());
    assert_eq!(taken + plain, 8, "one timed call per death: {r}");
    // The victims change files without a pause between calls: nearly every death is inside
    // one (713 of 720 in the committed runs).
    assert!(taken >= 1, "no death left the lock held: {r}");
    assert!(r["takeover_median_ms"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(r["takeover_ns"].as_array().map(|a| a.len() as u64), Some(taken));
    // Only the scratch image's own files were made, and removed.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("t.json")]);
}

#[test]
fn bad_arguments_fail_clearly() {
    let out = Command::new(env!("CARGO_BIN_EXE_hashfs-bench")).args(["takeover", "--kills", "0"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--kills"), "{}", String::from_utf8_lossy(&out.stderr));
}
