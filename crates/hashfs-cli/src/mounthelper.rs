//! mount(8) integration: `mount -t fuse.hashfs IMAGE DIR [-o OPTIONS]` and `/etc/fstab`
//! lines of type `fuse.hashfs` run `/sbin/mount.fuse.hashfs IMAGE DIR [-o OPTIONS]`, which
//! is this program under that name (`hashfs install-mount-helper` links it there).
//!
//! Options: `ro`/`rw`; `dev`/`nodev`, `suid`/`nosuid`, `exec`/`noexec` (passed to the
//! kernel); `atime`, `noatime`, `relatime`, `strictatime`, `nodiratime` (accepted: HashFS
//! keeps atime as set explicitly and never updates it on reads, so every one of them
//! holds); `threads=N`; `strict` or `relaxed` (the write mode of this mount, else the
//! image's: `hashfs mkfs --write-mode`); `writeback_cache` and `direct_io` (the kernel's
//! caching of file data, `hashfs_fuse::FuseOptions`); `cache_timeout=SECONDS` (how long
//! the kernel may cache names and attributes, 60 by default); `io_uring` or `io_uring=N`
//! (requests through FUSE over io_uring, N entries per CPU); `shared` (the image stays open
//! to shim processes, and they to it; taken when the image is in use); and the ones mount(8) and fstab use for themselves (`defaults`,
//! `auto`, `noauto`, `user`, `nouser`, `users`, `owner`, `group`, `nofail`, `_netdev`,
//! `x-*`, `comment=*`). Anything else is refused with its name, never ignored silently.
//! mount(8)'s helper flags `-n` (no mtab), `-s` (sloppy: unknown options are skipped with
//! a warning), `-f` (fake) and `-v` are understood.

#![forbid(unsafe_code)]

use crate::{fail, Failure};
use std::path::{Path, PathBuf};

/// What the options ask of the daemon.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MountOpts {
    /// `ro`, `nodev`, `nosuid`, `noexec` (and their opposites).
    pub flags: hashfs_fuse::KernelFlags,
    pub threads: Option<usize>,
    /// `strict` or `relaxed`: the write mode for this mount (None: the image's).
    pub write_mode: Option<hashfs::WriteMode>,
    /// `lower=DIR`: SPFS's stacked mode over DIR.
    pub lower: Option<std::path::PathBuf>,
    /// The stack's tuning (`promote_after=N`, `sync_interval_ms=N`, `sf_limit=X|none`,
    /// `high_water=X`, `passthrough=on|off`, `dir_rule=on|off`, `settled=on|off`,
    /// `standalone=on|off`, `extension=EXT`), as given, for the daemon.
    pub stack: Vec<String>,
    /// The FUSE front end's kernel caching (`writeback_cache`, `direct_io`).
    pub fuse: hashfs_fuse::FuseOptions,
    /// `shared`: the daemon is one of the processes that use the image at once (shim
    /// processes; `fs/shared/`), and the kernel caches nothing of it (mountcmd.rs).
    pub shared: bool,
}

/// What [`parse_options`] does with an option it does not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unknown {
    Refused,
    /// mount(8)'s `-s` (sloppy): skipped with a warning.
    Skipped,
}

/// Parses a comma-separated option list (later options win, as mount(8)).
pub fn parse_options(list: &str, unknown: Unknown) -> Result<MountOpts, Failure> {
    let mut o = MountOpts::default();
    for opt in list.split(',').filter(|s| !s.is_empty()) {
        match opt {
            "strict" => o.write_mode = Some(hashfs::WriteMode::Strict),
            "relaxed" => o.write_mode = Some(hashfs::WriteMode::Relaxed),
            "writeback_cache" => o.fuse.writeback_cache = true,
            "nowriteback_cache" => o.fuse.writeback_cache = false,
            "direct_io" => o.fuse.direct_io = true,
            "nodirect_io" => o.fuse.direct_io = false,
            "shared" => o.shared = true,
            "noshared" => o.shared = false,
            "ro" => o.flags.read_only = true,
            "rw" => o.flags.read_only = false,
            "dev" => o.flags.nodev = false,
            "nodev" => o.flags.nodev = true,
            "suid" => o.flags.nosuid = false,
            "nosuid" => o.flags.nosuid = true,
            "exec" => o.flags.noexec = false,
            "noexec" => o.flags.noexec = true,
            "atime" | "noatime" | "relatime" | "norelatime" | "strictatime" | "nodiratime" | "diratime"
            | "lazytime" | "nolazytime" => {}
            "defaults" | "auto" | "noauto" | "user" | "nouser" | "users" | "owner" | "group" | "nofail" | "_netdev"
            | "async" | "sync" => {}
            o2 if o2.starts_with("x-") || o2.starts_with("comment=") => {}
            "io_uring" => o.fuse.io_uring = Some(hashfs_fuse::IO_URING_DEPTH),
            "noio_uring" => o.fuse.io_uring = None,
            o2 if o2.starts_with("io_uring=") => {
                let n = o2["io_uring=".len()..]
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=256).contains(n))
                    .ok_or_else(|| fail(format!("mount option {o2}: io_uring takes entries per CPU, 1 to 256")))?;
                o.fuse.io_uring = Some(n);
            }
            o2 if o2.starts_with("threads=") => {
                let n = o2["threads=".len()..]
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| fail(format!("mount option {o2}: threads must be a number of at least 1")))?;
                o.threads = Some(n);
            }
            o2 if o2.starts_with("cache_timeout=") => {
                o.fuse.cache_timeout = o2["cache_timeout=".len()..]
                    .parse::<f64>()
                    .ok()
                    .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok())
                    .ok_or_else(|| fail(format!("mount option {o2}: cache_timeout must be a number of seconds")))?;
            }
            o2 if o2.starts_with("lower=") => o.lower = Some(o2["lower=".len()..].into()),
            o2 if [
                "promote_after=",
                "sync_interval_ms=",
                "sf_limit=",
                "high_water=",
                "passthrough=",
                "dir_rule=",
                "settled=",
                "standalone=",
                "extension=",
                "dirty_limit=",
            ]
            .iter()
            .any(|k| o2.starts_with(k)) =>
            {
                o.stack.push(o2.to_string())
            }
            other if unknown == Unknown::Skipped => {
                eprintln!("mount.fuse.hashfs: ignoring unknown option {other} (-s)")
            }
            other => {
                return Err(fail(format!("unknown mount option {other:?} (see `hashfs install-mount-helper --help`)")))
            }
        }
    }
    Ok(o)
}

/// Runs as `mount.fuse.hashfs IMAGE DIR [-o OPTS] [-n] [-s] [-f] [-v]`.
pub fn run(args: &[String]) -> Result<(), Failure> {
    let mut pos = Vec::new();
    let mut opts = String::new();
    let (mut sloppy, mut fake, mut verbose) = (false, false, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-o" => {
                let v = it.next().ok_or_else(|| fail("-o needs a value"))?;
                if !opts.is_empty() {
                    opts.push(',');
                }
                opts.push_str(v);
            }
            "-n" => {}
            "-s" => sloppy = true,
            "-f" => fake = true,
            "-v" => verbose = true,
            s if s.starts_with("-o") => opts.push_str(&s[2..]),
            s if s.starts_with('-') => return Err(fail(format!("unknown flag {s}"))),
            s => pos.push(s.to_string()),
        }
    }
    let [image, dir] = pos.as_slice() else {
        return Err(fail("usage: mount.fuse.hashfs IMAGE DIR [-o OPTIONS]"));
    };
    let o = parse_options(&opts, if sloppy { Unknown::Skipped } else { Unknown::Refused })?;
    if verbose {
        eprintln!("mount.fuse.hashfs: {image} on {dir} with {o:?}");
    }
    if fake {
        return Ok(());
    }
    crate::mountcmd::run_background_with(Path::new(image), Path::new(dir), &o)
}

/// `hashfs install-mount-helper`: links this program as `DIR/mount.fuse.hashfs`.
pub fn install(dir: &Path) -> Result<PathBuf, Failure> {
    let exe = std::env::current_exe().map_err(|e| fail(format!("cannot find this program: {e}")))?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    let link = dir.join("mount.fuse.hashfs");
    match std::fs::symlink_metadata(&link) {
        Ok(_) => std::fs::remove_file(&link).map_err(|e| fail(format!("{}: {e}", link.display())))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(format!("{}: {e}", link.display()))),
    }
    std::os::unix::fs::symlink(&exe, &link).map_err(|e| fail(format!("{}: {e}", link.display())))?;
    Ok(link)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options() {
        let o = parse_options("defaults,noatime,ro,nodev,threads=2,x-systemd.automount", Unknown::Refused).unwrap();
        let flags = hashfs_fuse::KernelFlags { read_only: true, nodev: true, ..Default::default() };
        assert_eq!(o, MountOpts { flags, threads: Some(2), ..Default::default() });
        assert!(!parse_options("ro,rw", Unknown::Refused).unwrap().flags.read_only, "the later option wins");
        assert!(parse_options("bogus", Unknown::Refused).is_err());
        assert!(parse_options("threads=0", Unknown::Refused).is_err());
        let t = |s| parse_options(s, Unknown::Refused).map(|o| o.fuse.cache_timeout);
        assert_eq!(t("").unwrap(), hashfs_fuse::DEFAULT_TIMEOUT);
        assert_eq!(t("cache_timeout=0.5").unwrap(), std::time::Duration::from_millis(500));
        assert_eq!(t("cache_timeout=0").unwrap(), std::time::Duration::ZERO);
        assert!(t("cache_timeout=-1").is_err() && t("cache_timeout=x").is_err() && t("cache_timeout=inf").is_err());
        assert!(parse_options("bogus,ro", Unknown::Skipped).unwrap().flags.read_only);
        assert_eq!(parse_options("strict", Unknown::Refused).unwrap().write_mode, Some(hashfs::WriteMode::Strict));
        assert_eq!(
            parse_options("strict,relaxed", Unknown::Refused).unwrap().write_mode,
            Some(hashfs::WriteMode::Relaxed)
        );
    }
}
