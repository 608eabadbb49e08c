//! Shared by the FUSE tests: a mounted image in a temporary directory, served by the real
//! `hashfs mount --foreground` daemon, unmounted (and fsck-checked) at the end.
#![allow(dead_code)]

#[path = "support/skip.rs"]
mod skip;
#[allow(unused_imports)] // not every test that includes this file skips on its own
pub use skip::{fuse_available, skip};
#[path = "support/bounded.rs"]
mod bounded;
#[allow(unused_imports)] // the tests that run shim processes use them
pub use bounded::{Bounded, BoundedChild};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn hashfs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hashfs"))
}

/// The benchmarks' program (`hashfs-bench`), built beside `hashfs`.
pub fn hashfs_bench() -> Command {
    skip::beside(env!("CARGO_BIN_EXE_hashfs"), "hashfs-bench")
}

pub struct Mounted {
    pub dir: tempfile::TempDir,
    pub image: PathBuf,
    pub mnt: PathBuf,
    pub daemon: Option<Child>,
    /// With `$HASHFS_TEST_SHIM_BESIDE` set: a shim process that has the image (its working
    /// directory inside it) from before the mount to after it, which makes the mount a
    /// shared one (scripts/test.sh runs the POSIX suite so).
    pub beside: Option<Child>,
}

/// Whether the mounts of these tests are shared with shim processes (by
/// `$HASHFS_TEST_SHIM_BESIDE`, or `shared` in `$HASHFS_TEST_MOUNT_OPTS`).
pub fn shared_mounts() -> bool {
    std::env::var_os("HASHFS_TEST_SHIM_BESIDE").is_some()
        || std::env::var("HASHFS_TEST_MOUNT_OPTS").is_ok_and(|o| o.split(',').any(|x| x == "shared"))
}

/// Polls `f` every 10 ms until it holds; fails after 20 s, naming `what`.
pub fn wait_for(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(20), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The shim library, built beside `hashfs` (scripts/test.sh builds the workspace first).
pub fn shim_library() -> PathBuf {
    let so = Path::new(env!("CARGO_BIN_EXE_hashfs")).with_file_name("libhashfs_preload.so");
    assert!(so.is_file(), "{} is not built: run `cargo build --workspace` (with this test's profile)", so.display());
    so
}

/// `bash -c script` through the shim on `image`, its paths under `/pm`.
pub fn shim_bash(image: &Path, script: &str) -> Command {
    let mut c = Command::new("bash");
    c.arg("-c").arg(script).env("LD_PRELOAD", shim_library()).env("HASHFS_IMAGE", image).env("HASHFS_MOUNT", "/pm");
    c
}

fn is_mounted(mnt: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mnt = std::fs::canonicalize(mnt).unwrap();
    info.lines().any(|l| l.split(' ').nth(4) == Some(mnt.to_str().unwrap()))
}

impl Mounted {
    pub fn new(size: &str) -> Mounted {
        Self::new_in(size, &std::env::temp_dir())
    }

    /// As [`Mounted::new`], with the image (and the mount point) in `parent`: /dev/shm for
    /// an image in memory, which needs no msync.
    pub fn new_in(size: &str, parent: &Path) -> Mounted {
        Self::new_in_with(size, parent, &[])
    }

    /// As [`Mounted::new_in`], with mount options (`-o ...`, as [`Mounted::start_with`]).
    pub fn new_in_with(size: &str, parent: &Path, opts: &[&str]) -> Mounted {
        let dir = tempfile::tempdir_in(parent).unwrap();
        let image = dir.path().join("fs.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let st = hashfs().args(["mkfs", image.to_str().unwrap(), "--size", size]).status().unwrap();
        assert!(st.success());
        let mut m = Mounted { dir, image, mnt, daemon: None, beside: None };
        m.start_with(opts);
        m
    }

    /// Starts the daemon on the existing image.
    pub fn start(&mut self) {
        self.start_with(&[]);
    }

    /// Starts the daemon on the existing image with mount options (`-o ...`), and those
    /// of `$HASHFS_TEST_MOUNT_OPTS` (scripts/test.sh runs the FUSE tests again with
    /// `io_uring` there).
    pub fn start_with(&mut self, opts: &[&str]) {
        assert!(opts.is_empty() || (opts.len() == 2 && opts[0] == "-o"), "start_with takes [] or [\"-o\", LIST]");
        if std::env::var_os("HASHFS_TEST_SHIM_BESIDE").is_some() && self.beside.is_none() {
            let ready = self.dir.path().join("beside-ready");
            // A previous shim process's file would let the mount start before this one
            // has joined (the mount would then take the image alone and this one fail).
            let _ = std::fs::remove_file(&ready);
            let script = format!("cd /pm && : > {} && {{ read -r _ || true; }}", ready.display());
            self.beside = Some(shim_bash(&self.image, &script).stdin(Stdio::piped()).spawn().unwrap());
            wait_for("the shim process beside", || ready.exists());
        }
        let extra = std::env::var("HASHFS_TEST_MOUNT_OPTS").unwrap_or_default();
        let list: Vec<&str> =
            opts.get(1).copied().into_iter().chain(Some(extra.as_str()).filter(|s| !s.is_empty())).collect();
        let child = hashfs()
            .args(["mount", "--foreground", self.image.to_str().unwrap(), self.mnt.to_str().unwrap()])
            .args(if list.is_empty() { vec![] } else { vec!["-o".to_string(), list.join(",")] })
            .args(self.lower().map(|l| vec!["--lower".into(), l]).unwrap_or_default())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        self.daemon = Some(child);
        let start = Instant::now();
        while !is_mounted(&self.mnt) {
            assert!(start.elapsed() < Duration::from_secs(15), "mount did not appear");
            std::thread::sleep(Duration::from_millis(20));
        }
        // The root belongs to root with mode 0755; tests that act as other users open it up.
        std::fs::set_permissions(&self.mnt, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    }

    /// With `HASHFS_TEST_STACKED` set, the mount is SPFS's stacked mode over a lower
    /// directory beside the image (scripts/test.sh runs the POSIX suite so as well).
    fn lower(&self) -> Option<String> {
        std::env::var_os("HASHFS_TEST_STACKED")?;
        let lower = self.dir.path().join("lower");
        std::fs::create_dir_all(&lower).unwrap();
        Some(lower.to_str().unwrap().to_string())
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.mnt.join(p.trim_start_matches('/'))
    }

    /// Unmounts with `hashfs umount` and waits for the daemon.
    pub fn stop(&mut self) {
        let st = hashfs().args(["umount", self.mnt.to_str().unwrap()]).status().unwrap();
        assert!(st.success(), "umount failed");
        if let Some(mut c) = self.daemon.take() {
            let status = c.wait().unwrap();
            assert!(status.success(), "daemon exited with {status}");
        }
        self.end_beside();
    }

    /// Ends the shim process beside the mount (its stdin closed: it leaves the image
    /// cleanly, the last to leave marking it clean).
    pub fn end_beside(&mut self) {
        if let Some(mut c) = self.beside.take() {
            drop(c.stdin.take());
            let status = c.wait().unwrap();
            assert!(status.success(), "the shim process beside exited with {status}");
        }
    }

    /// SIGKILL for the daemon (and the shim process beside it: the image is left as a
    /// crash of every process that had it leaves it), then the kernel side of the mount is
    /// torn down.
    pub fn kill_daemon(&mut self) {
        for mut c in [self.daemon.take(), self.beside.take()].into_iter().flatten() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        let _ = Command::new("fusermount3").arg("-u").arg(&self.mnt).status();
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
    }

    pub fn fsck_clean(&self) {
        let o = hashfs().args(["fsck", self.image.to_str().unwrap()]).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "fsck: {}", String::from_utf8_lossy(&o.stdout));
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(c) = &mut self.daemon {
            // A daemon that died under a test (the mount then answers ENOTCONN) says how:
            // a panic prints itself, a signal (SIGSEGV, SIGBUS, the OOM killer's SIGKILL)
            // does not.
            if let Ok(Some(status)) = c.try_wait() {
                eprintln!("the mount's daemon had exited before the test's end: {status}");
            }
            let _ = hashfs().args(["umount", self.mnt.to_str().unwrap()]).status();
            if let Some(mut c) = self.daemon.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            // A test that failed with files of the mount open leaves `hashfs umount` busy:
            // the daemon is gone, so the kernel's mount goes lazily (left, it stayed in
            // /dev/shm with its directory after the test's own files went).
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).stderr(Stdio::null()).status();
        }
        if let Some(mut c) = self.beside.take() {
            drop(c.stdin.take());
            let _ = c.wait();
        }
    }
}

/// Runs `f` on a thread whose file-system identity is (uid, gid, groups), as the kernel
/// sees it for FUSE requests (fsuid/fsgid and the supplementary groups are per thread).
pub fn as_user<T: Send>(uid: u32, gid: u32, groups: &[u32], f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: raw syscalls that change only this thread's credentials (glibc's
            // wrappers would change every thread of the process).
            unsafe {
                assert_eq!(libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()), 0);
                libc::syscall(libc::SYS_setfsgid, gid);
                libc::syscall(libc::SYS_setfsuid, uid);
            }
            f()
        })
        .join()
        .unwrap()
    })
}

pub fn errno<T: std::fmt::Debug>(r: std::io::Result<T>) -> i32 {
    match r {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e.raw_os_error().expect("an OS error"),
    }
}

/// Pages of `f` the kernel's page cache holds (mincore over a shared read-only mapping).
pub fn cached_pages(f: &std::fs::File, len: usize) -> usize {
    use std::os::fd::AsRawFd;
    // SAFETY: a fresh read-only shared mapping of len bytes of an open file, unmapped below;
    // mincore writes one byte per page into a vector of that many.
    unsafe {
        let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
        assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        let mut v = vec![0u8; len.div_ceil(4096)];
        assert_eq!(libc::mincore(p, len, v.as_mut_ptr()), 0, "mincore");
        libc::munmap(p, len);
        v.iter().filter(|b| **b & 1 != 0).count()
    }
}
