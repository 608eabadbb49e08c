//! The stacked mount under a power cut of both sides at once (issue 58, item 5, with the
//! lower disk's durability taken for real): ext4 on a loop device (`support/loop_ext4.rs`)
//! under `hashfs mount --lower`, and three writers through the mount. The daemon is
//! stopped (SIGSTOP: no request is answered after that instant), the lower disk's backing
//! file and the PM image are copied as they stand, and the daemon is killed. A mount of the
//! copies must show every write an fsync acknowledged before the stop.
//!
//! The writers take every path by which bytes come to rest on one side or the other:
//! messages delivered into a directory that turns hot (made below first, then made in PM
//! with a made record), appends to messages delivered before (settled below once the
//! `syncfs` ran, then promoted at their opens), and a log that the profiler promotes.

mod fuse_common;
#[path = "support/loop_ext4.rs"]
mod loop_ext4;
#[path = "support/stacked.rs"]
mod stacked;

use fuse_common::{fuse_available, hashfs, skip};
use loop_ext4::Ext4;
use stacked::{counter, is_mounted};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A `hashfs mount --foreground` daemon, killed and its mount dropped if the test fails.
struct Daemon {
    child: Child,
    mnt: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).stderr(Stdio::null()).status();
    }
}

/// `hashfs mount --foreground` of `image` over `lower` at `mnt`.
fn start(image: &Path, lower: &Path, mnt: &Path, log: &Path, opts: &str) -> Daemon {
    fs::create_dir_all(mnt).unwrap();
    let mut child = hashfs()
        .args(["mount", "--foreground", "-o", opts, "--lower"])
        .args([lower, image, mnt])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(log).unwrap())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !is_mounted(mnt) {
        if let Some(s) = child.try_wait().unwrap() {
            panic!("daemon exited with {s}: {}", fs::read_to_string(log).unwrap_or_default());
        }
        assert!(t.elapsed() < Duration::from_secs(15), "mount did not appear");
        std::thread::sleep(Duration::from_millis(20));
    }
    Daemon { child, mnt: mnt.to_path_buf() }
}

fn message(n: usize) -> Vec<u8> {
    format!("message {n:05}\n").into_bytes().repeat(300 + n % 400)
}

fn record(i: usize, k: usize) -> Vec<u8> {
    format!("[record {k} of {i}]\n").into_bytes()
}

fn log_record(k: usize) -> Vec<u8> {
    format!("log record {k:06}\n").into_bytes().repeat(20)
}

/// What the writers had acknowledged: messages delivered, records per old message, log
/// records.
#[derive(Default)]
struct Acked {
    delivered: usize,
    appended: Vec<usize>,
    logged: usize,
}

const OLD: usize = 100;

#[test]
fn a_power_cut_of_both_sides_loses_no_acknowledged_fsync_through_the_mount() {
    cut_under("promote_after=5,sf_limit=none");
}

/// The same on a passthrough mount, where the log's promotion waits for its passthrough
/// handle to close and is made at its next open (with a lower fsync first: what the
/// handle wrote since the fsync that asked for it).
#[test]
fn a_power_cut_of_both_sides_loses_no_acknowledged_fsync_through_a_passthrough_mount() {
    cut_under("promote_after=5,sf_limit=none,passthrough=on");
}

/// Three writers through a stacked mount with `opts` over a loop-mounted ext4, both sides
/// cut at once, and every acknowledged write checked through a mount of the copies.
fn cut_under(opts: &str) {
    if !fuse_available() {
        return;
    }
    if let Some(why) = loop_ext4::missing() {
        skip(why);
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let d = dir.path();
    let (backing, cut, image, pm_cut) =
        (d.join("lower.img"), d.join("lower-cut.img"), d.join("pm.img"), d.join("pm-cut.img"));
    let (lower, mnt, log) = (d.join("lower"), d.join("mnt"), d.join("daemon.log"));
    File::create(&backing).unwrap().set_len(256 << 20).unwrap();
    let st =
        hashfs().args(["mkfs", image.to_str().unwrap(), "--size", "64M", "--mapping", "extent-hash"]).output().unwrap();
    assert!(st.status.success());
    let acked = Arc::new(Mutex::new(Acked { appended: vec![0; OLD], ..Acked::default() }));
    let info;
    {
        let ext4 = Ext4::up(&backing, &lower, true);
        let daemon = start(&image, &ext4.mnt, &mnt, &log, opts);
        let bx = mnt.join("box");
        fs::create_dir(&bx).unwrap();
        for i in 0..OLD {
            // Made without O_TRUNC: the daemon would cut a new file to zero, and ext4
            // flushes a file cut to zero at its close (its auto_da_alloc), which would make
            // these durable without the syncfs the test is about.
            let mut f = OpenOptions::new().write(true).create_new(true).open(bx.join(format!("old{i:03}"))).unwrap();
            f.write_all(&message(i)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(150)); // older than the first syncfs by its margin
        let stop = Arc::new(AtomicBool::new(false));
        let writers = [0, 1, 2].map(|w| {
            let (stop, acked, bx, root) = (stop.clone(), acked.clone(), bx.clone(), mnt.clone());
            std::thread::spawn(move || {
                if w == 2 {
                    // A log the profiler promotes, kept open for eight fsynced records and
                    // one more written before it is closed unsynced, which the next handle's
                    // first fsync acknowledges (on a passthrough mount the promotion waits
                    // for the handle and is made at the next open).
                    let mut k = 0;
                    'run: while !stop.load(Relaxed) {
                        let Ok(mut f) = OpenOptions::new().append(true).create(true).open(root.join("log")) else {
                            break;
                        };
                        for j in 0..9 {
                            if f.write_all(&log_record(k)).is_err() {
                                break 'run;
                            }
                            k += 1;
                            if j < 8 {
                                if f.sync_data().is_err() {
                                    break 'run;
                                }
                                acked.lock().unwrap().logged = k;
                            }
                        }
                    }
                    return;
                }
                for k in 0.. {
                    if stop.load(Relaxed) {
                        break;
                    }
                    let done = if w == 0 {
                        // Deliveries: created, written, fsynced.
                        OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .open(bx.join(format!("new{k:05}")))
                            .and_then(|mut f| f.write_all(&message(1000 + k)).and_then(|_| f.sync_data()))
                    } else {
                        // Appends to the old messages, each in turn.
                        let i = (k * 37) % OLD;
                        let n = acked.lock().unwrap().appended[i];
                        OpenOptions::new()
                            .append(true)
                            .open(bx.join(format!("old{i:03}")))
                            .and_then(|mut f| f.write_all(&record(i, n)).and_then(|_| f.sync_data()))
                    };
                    if done.is_err() {
                        break;
                    }
                    let mut a = acked.lock().unwrap();
                    if w == 0 {
                        a.delivered = k + 1;
                    } else {
                        a.appended[(k * 37) % OLD] += 1;
                    }
                }
            })
        });
        std::thread::sleep(Duration::from_millis(800));
        let o = hashfs().arg("info").arg(&mnt).output().unwrap();
        info = String::from_utf8_lossy(&o.stdout).into_owned();
        // The cut: no request answered after this; acknowledgements already received are
        // recorded by their writers meanwhile.
        // SAFETY: a signal to the daemon, our child.
        unsafe { libc::kill(daemon.child.id() as i32, libc::SIGSTOP) };
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Relaxed);
        fs::copy(&backing, &cut).unwrap();
        fs::copy(&image, &pm_cut).unwrap();
        drop(daemon); // killed, its mount dropped
        for w in writers {
            w.join().unwrap();
        }
    }
    let a = acked.lock().unwrap();
    assert!(
        counter(&info, "promoted as made (directory rule)") > 0
            && counter(&info, "promoted at open (settled below)") > 0
            && counter(&info, "promotions") > 0
            && a.delivered > 10
            && a.logged > 10,
        "the writers did not take every path: {} delivered, {} logged; {info}",
        a.delivered,
        a.logged
    );
    let ext4 = Ext4::up(&cut, &lower, false);
    let mut daemon = start(&pm_cut, &ext4.mnt, &mnt, &log, opts);
    let bx = mnt.join("box");
    for n in 0..a.delivered {
        let got = fs::read(bx.join(format!("new{n:05}"))).unwrap_or_default();
        assert!(got == message(1000 + n), "delivered message {n}: {} bytes after the cut", got.len());
    }
    for (i, &n) in a.appended.iter().enumerate() {
        let got = fs::read(bx.join(format!("old{i:03}"))).unwrap();
        let mut want = message(i);
        for k in 0..n {
            want.extend(record(i, k));
        }
        assert!(
            got.starts_with(&want),
            "old message {i}: {} bytes after the cut, {} acknowledged",
            got.len(),
            want.len()
        );
    }
    let got = fs::read(mnt.join("log")).unwrap_or_default();
    let want: Vec<u8> = (0..a.logged).flat_map(log_record).collect();
    assert!(got.starts_with(&want), "log: {} bytes after the cut, {} acknowledged", got.len(), want.len());
    eprintln!(
        "power cut ({opts}): {} messages delivered, {} appends, {} log records acknowledged and found; \
         {} promotions deferred to the next open",
        a.delivered,
        a.appended.iter().sum::<usize>(),
        a.logged,
        counter(&info, "promotions deferred to the next open")
    );
    assert!(hashfs().arg("umount").arg(&mnt).status().unwrap().success());
    assert!(
        daemon.child.wait().unwrap().success(),
        "the daemon over the copies: {}",
        fs::read_to_string(&log).unwrap_or_default()
    );
    let o = hashfs().arg("fsck").arg(&pm_cut).arg("--lower").arg(&ext4.mnt).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains(", 0 problems"),
        "fsck --lower: {out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
