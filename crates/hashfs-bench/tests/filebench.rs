//! `hashfs-bench filebench` (the four filebench personalities) and `hashfs-bench
//! fuse-ceiling` (the FUSE passthrough the mount is measured against): tiny runs whose
//! figures mean nothing, checked for doing what the workloads define.

#[path = "../../hashfs-cli/tests/support/skip.rs"]
mod skip;
use skip::fuse_available;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn hashfs_bench() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_hashfs-bench"))
}

/// Runs a personality in `dir` with a hundredth of its files (or `scale`) and 4 threads;
/// returns its JSON.
fn filebench(personality: &str, dir: &Path, seconds: u32, scale: f64) -> serde_json::Value {
    let json = dir.with_extension("json");
    let out = hashfs_bench()
        .args(["filebench", personality])
        .arg(dir)
        .args(["--seconds", &seconds.to_string(), "--threads", "4", "--files-scale", &scale.to_string()])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

fn ops(j: &serde_json::Value, name: &str) -> u64 {
    let f = j["flowops"].as_array().unwrap().iter().find(|f| f["name"] == name).unwrap();
    f["ops"].as_u64().unwrap()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn createfiles_makes_its_whole_fileset_and_stops() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("fs");
    std::fs::create_dir(&dir).unwrap();
    let j = filebench("createfiles", &dir, 120, 0.01);
    assert_eq!(ops(&j, "createfile1"), 500);
    assert_eq!(ops(&j, "writefile1"), 500);
    let files = files_under(&dir);
    assert_eq!(files.len(), 500);
    // Every file got its whole size: what the files hold is what the writes wrote.
    let held: u64 = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum();
    let written = j["flowops"].as_array().unwrap().iter().find(|f| f["name"] == "writefile1").unwrap()["bytes"].clone();
    assert_eq!(held, written.as_u64().unwrap());
    // 50,000 files, 100 to a directory: 500 leaf directories at full scale, 5 here.
    let leaves: std::collections::BTreeSet<_> = files.iter().map(|f| f.parent().unwrap().to_path_buf()).collect();
    assert_eq!(leaves.len(), 5);
    assert!(j["seconds"].as_f64().unwrap() < 120.0, "the run ends when the fileset is full");
}

/// Files present after a run: those created beforehand, plus creates, minus deletes.
fn check_balance(j: &serde_json::Value, dir: &Path, prepared: usize, create: &str, delete: &str) {
    for f in j["flowops"].as_array().unwrap() {
        assert!(f["ops"].as_u64().unwrap() > 0, "{} never ran: {j}", f["name"]);
    }
    let expect = prepared as i64 + ops(j, create) as i64 - ops(j, delete) as i64;
    assert_eq!(files_under(dir).len() as i64, expect);
}

#[test]
fn fileserver_and_varmail_run_every_step_and_keep_count() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("fileserver");
    std::fs::create_dir(&dir).unwrap();
    // 10,000 files at full scale, 200 here, 80% made beforehand.
    let j = filebench("fileserver", &dir, 2, 0.02);
    check_balance(&j, &dir, 160, "createfile1", "deletefile1");
    let dir = tmp.path().join("varmail");
    std::fs::create_dir(&dir).unwrap();
    let j = filebench("varmail", &dir, 2, 0.05);
    check_balance(&j, &dir, 40, "createfile2", "deletefile1");
    // One flat directory (the mail server's width is a million).
    assert!(files_under(&dir).iter().all(|f| f.parent() == files_under(&dir)[0].parent()));
}

#[test]
fn webserver_reads_and_appends_to_one_shared_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("fs");
    std::fs::create_dir(&dir).unwrap();
    let j = filebench("webserver", &dir, 2, 0.05);
    for f in j["flowops"].as_array().unwrap() {
        assert!(f["ops"].as_u64().unwrap() > 0, "{} never ran", f["name"]);
    }
    let log = files_under(&dir.join("logfiles"));
    assert_eq!(log.len(), 1);
    let appended =
        j["flowops"].as_array().unwrap().iter().find(|f| f["name"] == "appendlog").unwrap()["bytes"].as_u64().unwrap();
    let before = j["filesets"][1]["prepared_bytes"].as_u64().unwrap();
    assert_eq!(std::fs::metadata(&log[0]).unwrap().len(), before + appended, "every append reached the one log");
    // The read-only fileset is untouched: 50 files.
    assert_eq!(files_under(&dir.join("bigfileset")).len(), 50);
}

#[test]
fn filebench_refuses_a_used_directory_and_an_unknown_personality() {
    let tmp = tempfile::tempdir().unwrap();
    let out = hashfs_bench().args(["filebench", "mailserver"]).arg(tmp.path()).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown personality"));
    std::fs::create_dir_all(tmp.path().join("bigfileset/f0")).unwrap();
    let out = hashfs_bench().args(["filebench", "varmail"]).arg(tmp.path()).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already holds a fileset"));
}

fn is_mounted(mnt: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mnt = std::fs::canonicalize(mnt).unwrap();
    info.lines().any(|l| l.split(' ').nth(4) == Some(mnt.to_str().unwrap()))
}

#[test]
fn the_fuse_ceiling_serves_its_lower_directory() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (lower, mnt) = (tmp.path().join("lower"), tmp.path().join("mnt"));
    std::fs::create_dir(&lower).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    std::fs::write(lower.join("before"), b"made below").unwrap();
    let mut daemon = hashfs_bench().args(["fuse-ceiling"]).arg(&lower).arg(&mnt).stdin(Stdio::null()).spawn().unwrap();
    let start = Instant::now();
    while !is_mounted(&mnt) {
        assert!(start.elapsed() < Duration::from_secs(15), "the ceiling did not mount");
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = std::panic::catch_unwind(|| {
        assert_eq!(std::fs::read(mnt.join("before")).unwrap(), b"made below");
        std::fs::create_dir(mnt.join("d")).unwrap();
        std::fs::write(mnt.join("d/f"), vec![7u8; 100_000]).unwrap();
        assert_eq!(std::fs::read(lower.join("d/f")).unwrap(), vec![7u8; 100_000]);
        std::fs::rename(mnt.join("d"), mnt.join("e")).unwrap();
        assert_eq!(std::fs::read(mnt.join("e/f")).unwrap().len(), 100_000);
        let mut names: Vec<_> = std::fs::read_dir(&mnt).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["before", "e"]);
        std::fs::remove_file(mnt.join("e/f")).unwrap();
        std::fs::remove_dir(mnt.join("e")).unwrap();
        assert!(!lower.join("e").exists());
        std::fs::remove_file(mnt.join("before")).unwrap();
        // A workload through it keeps its count as on any directory.
        let dir = mnt.join("fb");
        std::fs::create_dir(&dir).unwrap();
        let j = filebench("varmail", &dir, 1, 0.05);
        check_balance(&j, &lower.join("fb"), 40, "createfile2", "deletefile1");
    });
    let st = std::process::Command::new("umount").arg(&mnt).status().unwrap();
    let code = daemon.wait().unwrap();
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
    assert!(st.success() && code.success());
}
