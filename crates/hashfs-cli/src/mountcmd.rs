//! `hashfs mount` and `hashfs umount`.

use crate::mounthelper::MountOpts;
use crate::{fail, Failure};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(15);
pub const DEFAULT_THREADS: usize = 4;

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
    let fs = crate::mount(image)?;
    if let Some(mode) = o.write_mode {
        fs.set_write_mode(mode);
    }
    let image_abs = fs::canonicalize(image).unwrap_or_else(|_| image.to_path_buf());
    let mut cfg = fuser::Config::default();
    cfg.mount_options = vec![
        fuser::MountOption::FSName(image_abs.display().to_string()),
        fuser::MountOption::Subtype("hashfs".into()),
        fuser::MountOption::DefaultPermissions,
        if o.read_only { fuser::MountOption::RO } else { fuser::MountOption::RW },
        if o.nosuid { fuser::MountOption::NoSuid } else { fuser::MountOption::Suid },
        if o.nodev { fuser::MountOption::NoDev } else { fuser::MountOption::Dev },
        if o.noexec { fuser::MountOption::NoExec } else { fuser::MountOption::Exec },
        fuser::MountOption::NoAtime,
    ];
    cfg.acl = fuser::SessionACL::All;
    cfg.n_threads = Some(threads.max(1));
    cfg.clone_fd = true;
    fuser::mount2(hashfs_fuse::HashFsFuse::new(fs), mountpoint, &cfg)
        .map_err(|e| fail(format!("mount on {}: {e}", mountpoint.display())))?;
    Ok(())
}

/// Starts a daemon (this program with --foreground and the options as `-o`) and waits
/// until the mount is there.
pub fn run_background_with(image: &Path, mountpoint: &Path, o: &MountOpts) -> Result<(), Failure> {
    use std::os::unix::process::CommandExt;
    let threads = o.threads.unwrap_or(DEFAULT_THREADS);
    let mut list = vec![if o.read_only { "ro" } else { "rw" }];
    list.extend(o.nodev.then_some("nodev"));
    list.extend(o.nosuid.then_some("nosuid"));
    list.extend(o.noexec.then_some("noexec"));
    list.extend(o.write_mode.map(|m| m.name()));
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
            let _ = fs::remove_file(&log_path);
            println!("mounted {} on {} (daemon pid {})", image.display(), mountpoint.display(), child.id());
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            let msg = fs::read_to_string(&log_path).unwrap_or_default();
            let _ = fs::remove_file(&log_path);
            let msg = msg.trim().trim_start_matches("hashfs: ");
            return Err(fail(if msg.is_empty() {
                format!("mount daemon exited with {status}")
            } else {
                msg.to_string()
            }));
        }
        if start.elapsed() > WAIT {
            return Err(fail(format!("{} did not appear as a mount point within {WAIT:?}", mountpoint.display())));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Unmounts and waits until the daemon has released (and cleanly closed) the image.
pub fn umount(mountpoint: &Path) -> Result<(), Failure> {
    let source =
        mounted_source(mountpoint).ok_or_else(|| fail(format!("{} is not a HashFS mount", mountpoint.display())))?;
    let status = Command::new("fusermount3").arg("-u").arg(mountpoint).status();
    if !matches!(status, Ok(s) if s.success()) {
        let c = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes())?;
        // SAFETY: a valid NUL-terminated path; umount2 has no other preconditions.
        if unsafe { libc::umount2(c.as_ptr(), 0) } != 0 {
            return Err(fail(format!("unmount {}: {}", mountpoint.display(), std::io::Error::last_os_error())));
        }
    }
    // The daemon marks the image clean and exits; its lock on the image goes with it.
    let image = PathBuf::from(source);
    let start = Instant::now();
    while start.elapsed() < WAIT {
        match hashfs::pm::MmapDevice::open(&image, hashfs::pm::OpenMode::Existing) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => return Ok(()), // the image is gone or unreadable: nothing to wait for
        }
    }
    Err(fail(format!("unmounted, but the daemon still holds {} after {WAIT:?}", image.display())))
}
