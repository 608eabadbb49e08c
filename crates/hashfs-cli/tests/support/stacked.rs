//! The stacked mount in a temporary directory, served by the real `hashfs mount
//! --foreground --lower` daemon: shared by the stacked mount's tests (`fuse_stacked.rs`,
//! `fuse_stacked_kill.rs`, `fuse_stacked_power_cut.rs`, `fuse_uring.rs`; included with
//! `#[path]`, beside `mod fuse_common`), and the kill tests' appender.
#![allow(dead_code)]

use crate::fuse_common::hashfs;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Stacked {
    pub _dir: tempfile::TempDir,
    pub image: PathBuf,
    pub lower: PathBuf,
    pub mnt: PathBuf,
    pub opts: String,
    pub daemon: Option<Child>,
    pub log: PathBuf,
}

pub fn is_mounted(mnt: &Path) -> bool {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mnt = fs::canonicalize(mnt).unwrap();
    info.lines().any(|l| l.split(' ').nth(4) == Some(mnt.to_str().unwrap()))
}

impl Stacked {
    /// A fresh extent-hash image of `size` over an empty lower directory.
    pub fn new(size: &str, opts: &str) -> Stacked {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let image = dir.path().join("pm.img");
        let (lower, mnt) = (dir.path().join("lower"), dir.path().join("mnt"));
        fs::create_dir(&lower).unwrap();
        fs::create_dir(&mnt).unwrap();
        let st = hashfs()
            .args(["mkfs", image.to_str().unwrap(), "--size", size, "--mapping", "extent-hash"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        let log = dir.path().join("daemon.log");
        Stacked { _dir: dir, image, lower, mnt, opts: opts.into(), daemon: None, log }
    }

    pub fn start(&mut self) {
        let child = hashfs()
            .args(["mount", "--foreground", "-o", &self.opts, "--lower"])
            .args([&self.lower, &self.image, &self.mnt])
            .stdin(Stdio::null())
            .stderr(File::create(&self.log).unwrap())
            .spawn()
            .unwrap();
        self.daemon = Some(child);
        let t = Instant::now();
        while !is_mounted(&self.mnt) {
            if let Some(s) = self.daemon.as_mut().unwrap().try_wait().unwrap() {
                panic!("daemon exited with {s}: {}", fs::read_to_string(&self.log).unwrap_or_default());
            }
            assert!(t.elapsed() < Duration::from_secs(15), "mount did not appear");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn p(&self, name: &str) -> PathBuf {
        self.mnt.join(name)
    }

    pub fn low(&self, name: &str) -> PathBuf {
        self.lower.join(name)
    }

    pub fn info(&self) -> String {
        let o = hashfs().args(["info"]).arg(&self.mnt).output().unwrap();
        assert!(o.status.success(), "info: {}\ndaemon's log:\n{}", String::from_utf8_lossy(&o.stderr), self.log());
        String::from_utf8(o.stdout).unwrap()
    }

    pub fn promoted(&self) -> usize {
        let info = self.info();
        let line = info.lines().find(|l| l.starts_with("promoted files:")).expect("promoted files line");
        line["promoted files:".len()..].trim().parse().unwrap()
    }

    /// `hashfs fsck IMAGE --lower DIR` finds nothing wrong (after an unmount).
    pub fn fsck_clean(&self) {
        let o = hashfs().arg("fsck").arg(&self.image).arg("--lower").arg(&self.lower).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && out.contains(", 0 problems"),
            "fsck --lower: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    pub fn umount(&mut self, writeback: bool) {
        let mut c = hashfs();
        c.arg("umount").arg(&self.mnt);
        if writeback {
            c.arg("--writeback");
        }
        assert!(c.status().unwrap().success(), "umount");
        let s = self.daemon.take().unwrap().wait().unwrap();
        assert!(s.success(), "daemon: {s}: {}", self.log());
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        let _ = Command::new("fusermount3").arg("-u").arg(&self.mnt).stderr(Stdio::null()).status();
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).stderr(Stdio::null()).status();
    }
}

impl Drop for Stacked {
    fn drop(&mut self) {
        if self.daemon.is_some() {
            self.kill();
        }
    }
}

pub fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// The number after `label:` in the status `hashfs info` prints on the mount point.
pub fn counter(info: &str, label: &str) -> u64 {
    let at = info.find(&format!("{label}:")).unwrap_or_else(|| panic!("no {label} in {info}"));
    info[at + label.len() + 1..].split_whitespace().next().unwrap().parse().unwrap()
}

/// The appender of the kill tests' WAL (`fuse_stacked_kill.rs`, `fuse_uring.rs`): record `i`.
pub fn record(i: usize) -> Vec<u8> {
    format!("record {i:06} {}\n", "x".repeat(i % 300)).into_bytes()
}

/// Appends records from `acked` on to `path`, each fsynced, until `stop` or an error (the
/// daemon killed); returns how many were acknowledged in all.
pub fn spawn_appender(
    path: PathBuf,
    acked: usize,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut n = acked;
        let Ok(mut f) = OpenOptions::new().append(true).create(true).open(&path) else { return n };
        while !stop.load(std::sync::atomic::Ordering::Relaxed)
            && f.write_all(&record(n)).is_ok()
            && f.sync_data().is_ok()
        {
            n += 1;
        }
        n
    })
}

/// After a kill and remount: every acknowledged record of the WAL, in order, once, and at
/// most the one in flight beyond, which is cut off so that the next round goes on after
/// the last acknowledged one.
pub fn check_wal(s: &Stacked, acked: usize, round: usize) {
    let got = fs::read(s.p("wal")).unwrap();
    let want: Vec<u8> = (0..acked).flat_map(record).collect();
    assert!(got.len() >= want.len(), "round {round}: lost fsynced records ({} < {})", got.len(), want.len());
    assert_eq!(&got[..want.len()], &want[..], "round {round}: acknowledged records differ");
    let extra = &got[want.len()..];
    assert!(record(acked).starts_with(extra), "round {round}: unexpected bytes after the last record");
    if !extra.is_empty() {
        let f = OpenOptions::new().write(true).open(s.p("wal")).unwrap();
        f.set_len(want.len() as u64).unwrap();
        f.sync_all().unwrap();
    }
}

/// Kills the daemon `rounds` times, each 20-200 ms (from `rng`) into an appender of fsynced
/// records to `wal`, restarting it and checking the WAL after each; then checks that the
/// WAL was promoted, unmounts with write-back and checks the lower file. Returns the
/// records acknowledged.
pub fn kill_under_an_appender(s: &mut Stacked, rounds: usize, mut rng: u64) -> usize {
    let mut acked = 0usize; // records whose fsync returned
    for round in 0..rounds {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = spawn_appender(s.p("wal"), acked, stop.clone());
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_millis(20 + rng % 180));
        s.kill();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        acked = writer.join().unwrap();
        s.start();
        check_wal(s, acked, round);
    }
    assert!(acked > 20, "the writer made progress ({acked} records)");
    assert_eq!(s.promoted(), 1, "the WAL was promoted: {}", s.info());
    s.umount(true);
    let want: Vec<u8> = (0..acked).flat_map(record).collect();
    assert_eq!(fs::read(s.low("wal")).unwrap(), want);
    acked
}
