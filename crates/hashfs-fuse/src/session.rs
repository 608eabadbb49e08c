//! The FUSE session a mount runs (`hashfs mount`, its stacked mode, and the FUSE ceiling
//! benchmark's passthrough in `hashfs-bench`, so that the ceiling is measured with the
//! mount's own options): mount(8)'s flags for the kernel, threads, FUSE over io_uring.

use std::path::Path;

/// Request-serving threads when the mount names none (`threads=N`).
pub const DEFAULT_THREADS: usize = 4;

/// Entries per CPU of `io_uring` without a number: a queue's thread serves one request at
/// a time, so more entries only let the kernel hand it several at once.
pub const IO_URING_DEPTH: usize = 4;

/// Why a mount that asked for FUSE over io_uring cannot have it.
pub const NO_IO_URING: &str = "FUSE over io_uring (mount option io_uring) is not offered by this kernel: it needs \
     Linux 6.14 or later built with CONFIG_FUSE_IO_URING, turned on with \
     `echo 1 > /sys/module/fuse/parameters/enable_uring`";

/// mount(8)'s flags that the kernel enforces (`ro`, `nodev`, `nosuid`, `noexec`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelFlags {
    pub read_only: bool,
    pub nodev: bool,
    pub nosuid: bool,
    pub noexec: bool,
}

impl KernelFlags {
    /// The flags as mount options, `ro` or `rw` first (for the daemon's command line).
    pub fn options(&self) -> Vec<&'static str> {
        let mut list = vec![if self.read_only { "ro" } else { "rw" }];
        list.extend(self.nodev.then_some("nodev"));
        list.extend(self.nosuid.then_some("nosuid"));
        list.extend(self.noexec.then_some("noexec"));
        list
    }
}

/// The session for a mount of `source` (shown as the file system's name in /proc/mounts,
/// absolute), with `threads` serving threads and, with `io_uring`, that many ring entries
/// per CPU.
pub fn session_config(source: &Path, flags: KernelFlags, io_uring: Option<usize>, threads: usize) -> fuser::Config {
    let source = std::fs::canonicalize(source).unwrap_or_else(|_| source.to_path_buf());
    let mut cfg = fuser::Config::default();
    cfg.mount_options = vec![
        fuser::MountOption::FSName(source.display().to_string()),
        fuser::MountOption::Subtype("hashfs".into()),
        fuser::MountOption::DefaultPermissions,
        if flags.read_only { fuser::MountOption::RO } else { fuser::MountOption::RW },
        if flags.nosuid { fuser::MountOption::NoSuid } else { fuser::MountOption::Suid },
        if flags.nodev { fuser::MountOption::NoDev } else { fuser::MountOption::Dev },
        if flags.noexec { fuser::MountOption::NoExec } else { fuser::MountOption::Exec },
        fuser::MountOption::NoAtime,
    ];
    cfg.acl = fuser::SessionACL::All;
    cfg.n_threads = Some(threads.max(1));
    cfg.clone_fd = true;
    cfg.io_uring_depth = io_uring;
    cfg
}

/// Whether the kernel offers FUSE over io_uring (checked before anything is mounted).
pub fn io_uring_offered() -> bool {
    std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring")
        .is_ok_and(|s| s.trim() == "Y" || s.trim() == "1")
}
