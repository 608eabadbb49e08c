//! `hashfs mount` and `hashfs umount`.

use crate::mounthelper::MountOpts;
use crate::{fail, Failure};
use hashfs_fuse::DEFAULT_THREADS;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(15);

/// Whether `mountpoint` is a FUSE mount of ours now (from /proc/self/mountinfo).
pub fn mounted_source(mountpoint: &Path) -> Option<String> {
    let mp = fs::canonicalize(mountpoint).ok()?;
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else { continue };
        if fields.get(4).map(|m| Path::new(unescape(m).as_str()) == mp).unwrap_or(false)
            && fields.get(dash + 1).is_some_and(|t| t.starts_with("fuse"))
        {
            return fields.get(dash + 2).map(|s| unescape(s));
        }
    }
    None
}

fn unescape(s: &str) -> String {
    s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

/// Serves the image at the mount point until it is unmounted, with mount(8)'s options.
pub fn run_foreground_with(image: &Path, mountpoint: &Path, o: &MountOpts) -> Result<(), Failure> {
    let threads = o.threads.unwrap_or(DEFAULT_THREADS);
    if !mountpoint.is_dir() {
        return Err(fail(format!("mount point {} is not a directory", mountpoint.display())));
    }
    if mounted_source(mountpoint).is_some() {
        return Err(fail(format!("{} is already a mount point", mountpoint.display())));
    }
    if o.fuse.io_uring.is_some() && !hashfs_fuse::io_uring_offered() {
        return Err(fail(hashfs_fuse::NO_IO_URING));
    }
    let mut o = o.clone();
    let alone = if o.shared { None } else { Some(crate::open_image(image)) };
    let fs = match alone {
        Some(Ok(dev)) => {
            // A long-lived mount: fault the mapping in now rather than one page per first
            // write.
            if let Err(e) = dev.populate_in_background() {
                eprintln!("hashfs: cannot fault the image in ahead of use: {e}");
            }
            crate::mount_dev(dev, image)?
        }
        Some(Err(e)) if !in_use(image) => return Err(e),
        shared_or_in_use => {
            if shared_or_in_use.is_some() {
                eprintln!("hashfs: {} is in use by other processes: mounting it shared", image.display());
            }
            share_options(&mut o)?;
            crate::mount_shared(image)?
        }
    };
    let o = &o;
    if let Some(mode) = o.write_mode {
        fs.set_write_mode(mode);
    }
    if let Some(lower) = &o.lower {
        return run_stacked(fs, image, lower, mountpoint, o);
    }
    let cfg = fuse_config(image, o, threads);
    let watched = o.shared.then(|| fs.clone());
    let mut daemon = hashfs_fuse::HashFsFuse::with_options(fs, o.fuse);
    if o.shared {
        // Record locks through the mount exclude the shim processes' (in the region).
        daemon = daemon.with_image_locks();
    }
    let Some(watched) = watched else {
        return fuser::mount2(daemon, mountpoint, &cfg)
            .map_err(|e| fail(format!("mount on {}: {e}", mountpoint.display())));
    };
    // A shared mount: the kernel's caches of what others change are dropped as the ring
    // names it (`hashfs_fuse::watch_changes`).
    let session = fuser::Session::new(daemon, mountpoint, &cfg)
        .and_then(fuser::Session::spawn)
        .map_err(|e| fail(format!("mount on {}: {e}", mountpoint.display())))?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = hashfs_fuse::watch_changes(watched, session.notifier(), stop.clone());
    let ended = session.join();
    stop.store(true, std::sync::atomic::Ordering::Release);
    if let Some(w) = watch {
        let _ = w.join(); // its handle of the file system goes: the last one unmounts it
    }
    ended.map_err(|e| fail(format!("mount on {}: {e}", mountpoint.display())))
}

/// After an exclusive open of `image` failed: whether processes that share it have it
/// (shim processes, a shared mount), so that its lock can be taken shared (an exclusive
/// holder, or an image that cannot be opened at all, refuses that too).
fn in_use(image: &Path) -> bool {
    hashfs::pm::MmapDevice::open(image, hashfs::pm::OpenMode::Shared).is_ok()
}

/// A shared mount's kernel caching: none. Other processes change the image behind the
/// kernel's back, so names and attributes are asked for at every lookup and stat (no
/// timeout) and file data is read and written through the daemon (`direct_io`): any
/// open, stat or read through the mount that starts after another process's change
/// returned sees it (docs/design.md, "A mount beside the shim").
fn share_options(o: &mut MountOpts) -> Result<(), Failure> {
    if o.fuse.writeback_cache {
        return Err(fail(
            "mount option writeback_cache cannot be used with shared (the kernel would cache writes others do not see)",
        ));
    }
    if o.lower.is_some() {
        return Err(fail("mount option shared is for an image mount, not a stacked one (lower=)"));
    }
    o.shared = true;
    o.fuse.cache_timeout = std::time::Duration::ZERO;
    o.fuse.direct_io = true;
    Ok(())
}

/// The FUSE session for `image` with mount(8)'s options (both kinds of mount).
fn fuse_config(image: &Path, o: &MountOpts, threads: usize) -> fuser::Config {
    hashfs_fuse::session_config(image, o.flags, o.fuse.io_uring, threads)
}

/// The stack's parameters from the mount options.
fn stack_config(o: &MountOpts) -> Result<hashfs_spfs::StackConfig, Failure> {
    hashfs_spfs::StackConfig::from_options(&o.stack).map_err(|e| fail(format!("mount option {e}")))
}

/// SPFS's stacked mode: the lower directory's tree, with the image absorbing the small
/// synchronous writes.
fn run_stacked(
    fs: hashfs::FileSystem<hashfs::pm::MmapDevice>,
    image: &Path,
    lower: &Path,
    mountpoint: &Path,
    o: &MountOpts,
) -> Result<(), Failure> {
    if o.flags.read_only {
        return Err(fail("a stacked mount cannot be read-only: its PM copies may need writing back"));
    }
    if o.fuse.cache_timeout != hashfs_fuse::DEFAULT_TIMEOUT {
        return Err(fail(
            "cache_timeout is not for a stacked mount: the lower directory may change beneath it, so names and \
             attributes are cached for one second",
        ));
    }
    let (stack, rec) = hashfs_spfs::Stack::open(fs, lower, stack_config(o)?).map_err(fail)?;
    if rec.repaired() {
        eprintln!("hashfs: stacked recovery: {}", rec.repairs());
    }
    let cfg = fuse_config(image, o, o.threads.unwrap_or(DEFAULT_THREADS));
    let demoter = hashfs_spfs::spawn_demoter(stack.clone());
    if stack.cfg.device_dirty_limit {
        // Once the mount exists (`hashfs_fuse::dirty_limit`).
        let mp = mountpoint.to_path_buf();
        std::thread::spawn(move || {
            if let Err(e) = hashfs_fuse::dirty_limit::relax(&mp, std::time::Duration::from_secs(10)) {
                eprintln!(
                    "hashfs: the mount keeps the kernel's dirty page limit for FUSE ({e}): writes without sync go \
                     at the daemon's pace"
                );
            }
        });
    }
    let fuse = hashfs_fuse::stacked::StackedFuse::new(stack.clone()).with_io_uring(o.fuse.io_uring.is_some());
    let r = fuser::mount2(fuse, mountpoint, &cfg).map_err(|e| fail(format!("mount on {}: {e}", mountpoint.display())));
    stack.stop();
    let _ = demoter.join();
    r
}

/// Starts a daemon (this program with --foreground and the options as `-o`) and waits
/// until the mount is there.
pub fn run_background_with(image: &Path, mountpoint: &Path, o: &MountOpts) -> Result<(), Failure> {
    use std::os::unix::process::CommandExt;
    let threads = o.threads.unwrap_or(DEFAULT_THREADS);
    let mut list = o.flags.options();
    list.extend(o.write_mode.map(|m| m.name()));
    list.extend(o.fuse.writeback_cache.then_some("writeback_cache"));
    list.extend(o.fuse.direct_io.then_some("direct_io"));
    list.extend(o.shared.then_some("shared"));
    let timeout = format!("cache_timeout={}", o.fuse.cache_timeout.as_secs_f64());
    if o.fuse.cache_timeout != hashfs_fuse::DEFAULT_TIMEOUT {
        list.push(&timeout);
    }
    let lower = o.lower.as_ref().map(|l| {
        let l = fs::canonicalize(l).unwrap_or_else(|_| l.clone());
        format!("lower={}", l.display())
    });
    list.extend(lower.as_deref());
    let uring = o.fuse.io_uring.map(|n| format!("io_uring={n}"));
    list.extend(uring.as_deref());
    list.extend(o.stack.iter().map(String::as_str));
    let log_path = std::env::temp_dir().join(format!("hashfs-mount-{}.log", std::process::id()));
    let log = fs::File::create(&log_path)?;
    let mut child = Command::new(std::env::current_exe()?)
        .arg("mount")
        .arg("--foreground")
        .arg("--threads")
        .arg(threads.to_string())
        .arg("-o")
        .arg(list.join(","))
        .arg(image)
        .arg(mountpoint)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()?;
    let start = Instant::now();
    loop {
        if mounted_source(mountpoint).is_some() {
            // Mounted is not yet serving: INIT comes after the mount (and with io_uring,
            // every queue's registration). A stat of the root waits for them, and fails if
            // the daemon gave up (it then exits with its reason in the log).
            if let Err(e) = fs::metadata(mountpoint) {
                let status = child.wait()?;
                return Err(daemon_failure(&log_path, &format!("the mount does not answer ({e}); daemon {status}")));
            }
            let _ = fs::remove_file(&log_path);
            println!("mounted {} on {} (daemon pid {})", image.display(), mountpoint.display(), child.id());
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            return Err(daemon_failure(&log_path, &format!("mount daemon exited with {status}")));
        }
        if start.elapsed() > WAIT {
            return Err(fail(format!("{} did not appear as a mount point within {WAIT:?}", mountpoint.display())));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Why a daemon that exited did: its log, else `otherwise`.
fn daemon_failure(log_path: &Path, otherwise: &str) -> Failure {
    let msg = fs::read_to_string(log_path).unwrap_or_default();
    let _ = fs::remove_file(log_path);
    let msg = msg.trim().trim_start_matches("hashfs: ");
    fail(if msg.is_empty() { otherwise.to_string() } else { msg.to_string() })
}

/// What `umount` does before it unmounts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeforeUnmount {
    Nothing,
    /// `--writeback`: a stacked mount writes every promoted file back to the lower
    /// directory.
    WriteBack,
}

/// Unmounts and waits until the daemon has released (and cleanly closed) the image.
pub fn umount(mountpoint: &Path, first: BeforeUnmount) -> Result<(), Failure> {
    let source =
        mounted_source(mountpoint).ok_or_else(|| fail(format!("{} is not a HashFS mount", mountpoint.display())))?;
    if first == BeforeUnmount::WriteBack {
        if stacked_status(mountpoint).is_err() {
            return Err(fail(format!(
                "{} is not a stacked mount (--lower): nothing to write back",
                mountpoint.display()
            )));
        }
        set_root_xattr(mountpoint, "hashfs.writeback")
            .map_err(|e| fail(format!("writing back the promoted files of {}: {e}", mountpoint.display())))?;
    }
    let daemon = root_xattr(mountpoint, hashfs_fuse::DAEMON_PID_XATTR).and_then(|p| p.parse::<i32>().ok());
    let start = Instant::now();
    loop {
        match unmount_once(mountpoint)? {
            Ok(()) => break,
            Err(Busy(_)) if start.elapsed() < BUSY_WAIT => std::thread::sleep(Duration::from_millis(20)),
            Err(Busy(why)) => {
                return Err(fail(format!(
                    "unmount {}: {why} after {BUSY_WAIT:?}: a process has a file or directory open there \
                     (`fuser -vm {}` names it)",
                    mountpoint.display(),
                    mountpoint.display()
                )))
            }
        }
    }
    // The daemon marks the image clean (or leaves it to the other processes of a shared
    // image) and exits; its lock on the image goes with it. The daemon's process tells,
    // where the image's lock cannot (others hold it shared).
    let image = PathBuf::from(source);
    let start = Instant::now();
    if let Some(pid) = daemon {
        while start.elapsed() < WAIT {
            if pid <= 0 || !hashfs::share::process_runs(pid as u32) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        return Err(fail(format!("unmounted, but the daemon (pid {pid}) still runs after {WAIT:?}")));
    }
    while start.elapsed() < WAIT {
        match hashfs::pm::MmapDevice::open(&image, hashfs::pm::OpenMode::Existing) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::ResourceBusy => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => return Ok(()), // the image is gone or unreadable: nothing to wait for
        }
    }
    Err(fail(format!("unmounted, but the daemon still holds {} after {WAIT:?}", image.display())))
}

/// How long `umount` tries again while the mount is busy. A file closed just before can
/// still be open in a child that another thread of the closing program forked and that has
/// not yet reached its exec (its copy of the descriptor table holds it for that moment): a
/// test's unmount right after its last close failed with EBUSY under load, likely so (the
/// quick tier of 2026-12-06, `fuse_stacked.rs`).
const BUSY_WAIT: Duration = Duration::from_secs(3);

/// The mount is busy: what the unmount said.
struct Busy(String);

/// One try at unmounting: `fusermount3 -u` (which a user who mounted may run), else
/// `umount2` (root). Ok(Err(Busy)) when either says the mount is busy.
fn unmount_once(mountpoint: &Path) -> Result<Result<(), Busy>, Failure> {
    let out = Command::new("fusermount3").arg("-u").arg(mountpoint).output();
    if matches!(&out, Ok(o) if o.status.success()) {
        return Ok(Ok(()));
    }
    let said = out.map(|o| String::from_utf8_lossy(&o.stderr).trim().to_string()).unwrap_or_default();
    let c = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes())?;
    // SAFETY: a valid NUL-terminated path; umount2 has no other preconditions.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        return Ok(Ok(()));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EBUSY) || said.contains("busy") {
        return Ok(Err(Busy(if e.raw_os_error() == Some(libc::EBUSY) { e.to_string() } else { said })));
    }
    let said = if said.is_empty() { String::new() } else { format!(" ({said})") };
    Err(fail(format!("unmount {}: {e}{said}", mountpoint.display())))
}

/// A stacked mount's status text (None: not a stacked mount).
pub fn stacked_status(mountpoint: &Path) -> std::io::Result<String> {
    root_xattr_or_error(mountpoint, "hashfs.status")
}

/// The mount's root attribute `name` (one the daemon answers), as text.
fn root_xattr(mountpoint: &Path, name: &str) -> Option<String> {
    root_xattr_or_error(mountpoint, name).ok()
}

fn root_xattr_or_error(mountpoint: &Path, name: &str) -> std::io::Result<String> {
    let p = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes())?;
    let name = std::ffi::CString::new(name)?;
    let mut buf = vec![0u8; 1 << 20];
    // SAFETY: NUL-terminated path and name; `buf` is writable for the length passed.
    let n = unsafe { libc::getxattr(p.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(String::from_utf8_lossy(&buf[..n as usize]).into_owned())
}

fn set_root_xattr(mountpoint: &Path, name: &str) -> std::io::Result<()> {
    let p = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes())?;
    let n = std::ffi::CString::new(name)?;
    // SAFETY: NUL-terminated path and name, a one-byte value that outlives the call.
    let r = unsafe { libc::setxattr(p.as_ptr(), n.as_ptr(), b"1".as_ptr().cast(), 1, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
