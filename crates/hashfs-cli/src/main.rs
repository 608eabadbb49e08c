//! `hashfs`: format, check, inspect and use HashFS images without mounting them, mount
//! them, run the demonstration workload and explore crash states (the benchmarks are
//! `hashfs-bench`, crates/hashfs-bench).

mod copy;
mod demo;
mod files;
mod fsck;
mod info;
mod mkfs;
mod mountcmd;
mod mounthelper;
mod progress;

use clap::{Parser, Subcommand};
use hashfs::pm::{MmapDevice, OpenMode};
use hashfs::units::parse_size;
use hashfs::FileSystem;
use progress::{progress_bar, Steps};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(name = "hashfs", version, about = "HashFS: a persistent-memory file system with hash-based file mapping")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create (or overwrite) IMAGE and format it.
    Mkfs(mkfs::Args),
    /// Check an image. An image that was not cleanly unmounted is first recovered, as a
    /// mount would (and as e2fsck replays its journal). Exit codes: 0 clean (after recovery),
    /// 1 errors corrected, 4 errors left, 8 operational error.
    Fsck(fsck::Args),
    /// Geometry, mapping, space and inode use.
    Info { image: PathBuf },
    /// Copy a host file or directory tree into the image.
    Put { image: PathBuf, host_path: PathBuf, fs_path: String },
    /// Copy a file or directory tree out of the image.
    Get { image: PathBuf, fs_path: String, host_path: PathBuf },
    /// List a directory.
    Ls {
        image: PathBuf,
        #[arg(default_value = "/")]
        fs_path: String,
        /// Long format: type, permissions, links, owner, size.
        #[arg(short, long)]
        long: bool,
    },
    /// Write a file's contents to standard output.
    Cat { image: PathBuf, fs_path: String },
    /// Create a directory.
    Mkdir {
        image: PathBuf,
        fs_path: String,
        /// Create parents as needed.
        #[arg(short, long)]
        parents: bool,
    },
    /// Remove a file, symlink or empty directory.
    Rm {
        image: PathBuf,
        fs_path: String,
        /// Remove directories and their contents.
        #[arg(short, long)]
        recursive: bool,
    },
    /// Mount IMAGE at MOUNTPOINT through FUSE (a daemon unless --foreground).
    Mount {
        image: PathBuf,
        mountpoint: PathBuf,
        /// Stay in the foreground (serve until unmounted).
        #[arg(long)]
        foreground: bool,
        /// Request-serving threads.
        #[arg(long, default_value_t = hashfs_fuse::DEFAULT_THREADS)]
        threads: usize,
        /// Mount options, as mount(8)'s: ro, rw, nodev, nosuid, noexec, noatime, ...;
        /// strict or relaxed (the write mode of this mount; default: the image's);
        /// writeback_cache (writes durable at fsync or close, not at return) or direct_io
        /// (no page cache for file data: large writes at about 2 GB/s); cache_timeout=SECONDS
        /// (how long the kernel may cache names and attributes; 60); io_uring or
        /// io_uring=N (requests through FUSE over io_uring, N entries per CPU, 4; needs
        /// /sys/module/fuse/parameters/enable_uring on); for a stacked mount:
        /// promote_after=N (30), sync_interval_ms=N (1000), sf_limit=X|none (0.05),
        /// high_water=X (0.8), passthrough=on|off (the kernel's passthrough for files
        /// below; off), dir_rule=on|off (files made where files sync often start in PM;
        /// on), settled=on|off (a file below opened for writing there starts in PM if a
        /// syncfs since its last change made it durable; on), standalone=on|off (files made with O_SYNC, O_DSYNC or O_DIRECT, in a
        /// directory with the user.hashfs.boost attribute, or with an extension= start in
        /// PM; on), extension=EXT (repeated: names with this extension start in PM),
        /// dirty_limit=device|fuse (the mount's dirty page limits: a block device's, or
        /// the kernel's 1% for FUSE; device).
        #[arg(short = 'o', default_value = "")]
        options: String,
        /// SPFS's stacked mode: present DIR's tree (any file system) at MOUNTPOINT, with
        /// the image absorbing files that fsync often with little written between.
        #[arg(long, value_name = "DIR")]
        lower: Option<PathBuf>,
    },
    /// Link this program as DIR/mount.fuse.hashfs, so that `mount -t fuse.hashfs IMAGE DIR`
    /// and /etc/fstab lines of type fuse.hashfs work (options: ro, rw, nodev, nosuid,
    /// noexec, noatime and the other atime options, threads=N, strict, relaxed,
    /// writeback_cache, direct_io, cache_timeout=SECONDS, and fstab's own).
    InstallMountHelper {
        #[arg(default_value = "/sbin")]
        dir: PathBuf,
    },
    /// Unmount a HashFS mount point and wait until its image is cleanly closed.
    Umount {
        mountpoint: PathBuf,
        /// A stacked mount: write every promoted file back to the lower directory first
        /// (without it they stay in the image, and the next stacked mount serves them).
        #[arg(long)]
        writeback: bool,
    },
    /// Format an image and run a short demonstration workload, printing what it did.
    Demo {
        #[arg(long, default_value = "/dev/shm/hashfs-demo.img")]
        image: PathBuf,
        #[arg(long, value_parser = parse_size, default_value = "1G")]
        size: u64,
    },
    /// Explore crash states: run workloads on a crash-simulating device, recover every
    /// image a power failure could leave, and check it (exit 1 on any failure).
    Crashtest(hashfs_crashtest::CrashtestArgs),
}

/// An error for the user, with the exit code to use.
#[derive(Debug)]
struct Failure {
    msg: String,
    code: u8,
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure { msg: e.to_string(), code: 1 }
    }
}

fn fail(msg: impl Into<String>) -> Failure {
    Failure { msg: msg.into(), code: 1 }
}

pub(crate) fn open_image(image: &Path) -> Result<Arc<MmapDevice>, Failure> {
    MmapDevice::open(image, OpenMode::Existing)
        .map(Arc::new)
        .map_err(|e| fail(format!("cannot open image {}: {e}", image.display())))
}

pub(crate) fn mount(image: &Path) -> Result<FileSystem<MmapDevice>, Failure> {
    mount_dev(open_image(image)?, image)
}

/// Mounts `image` as one of the processes that share it (`FileSystem::open_shared`), with
/// the recovery report on stderr.
pub(crate) fn mount_shared(image: &Path) -> Result<FileSystem<MmapDevice>, Failure> {
    let (fs, report) =
        FileSystem::open_shared(image).map_err(|e| fail(format!("cannot mount {} shared: {e}", image.display())))?;
    report_mount(image, &report);
    Ok(fs)
}

/// Mounts the opened image, with a progress bar and the recovery report on stderr.
pub(crate) fn mount_dev(dev: Arc<MmapDevice>, image: &Path) -> Result<FileSystem<MmapDevice>, Failure> {
    let pb = progress_bar(0, "mounting", Steps::Items);
    let (fs, report) = FileSystem::mount(dev, &|done, total| {
        pb.set_length(total);
        pb.set_position(done);
    })
    .map_err(|e| fail(format!("cannot mount {}: {e}", image.display())))?;
    pb.finish_and_clear();
    report_mount(image, &report);
    Ok(fs)
}

/// What a mount found and recovered, on stderr.
fn report_mount(image: &Path, report: &hashfs::MountReport) {
    if !report.was_clean {
        eprintln!(
            "hashfs: {} was not cleanly unmounted; recovered: {} transactions rolled back, {} stray blocks and {} orphan inodes freed",
            image.display(),
            report.rolled_back_txids.len(),
            report.stray_slots_freed,
            report.orphans_freed
        );
    }
    if !report.corrupt_inodes.is_empty() {
        eprintln!("hashfs: warning: {} corrupt inodes; run hashfs fsck --repair", report.corrupt_inodes.len());
    }
}

fn run(cli: Cli) -> Result<u8, Failure> {
    match cli.cmd {
        Cmd::Mkfs(args) => mkfs::run(args),
        Cmd::Fsck(args) => fsck::run(args),
        Cmd::Info { image } => info::run(&image),
        Cmd::Put { image, host_path, fs_path } => copy::put_cmd(&image, &host_path, &fs_path),
        Cmd::Get { image, fs_path, host_path } => copy::get_cmd(&image, &fs_path, &host_path),
        Cmd::Ls { image, fs_path, long } => {
            files::ls(&image, &fs_path, if long { files::Listing::Long } else { files::Listing::Names })
        }
        Cmd::Cat { image, fs_path } => files::cat(&image, &fs_path),
        Cmd::Mkdir { image, fs_path, parents } => {
            files::mkdir(&image, &fs_path, if parents { files::Parents::Made } else { files::Parents::Required })
        }
        Cmd::Rm { image, fs_path, recursive } => {
            files::rm(&image, &fs_path, if recursive { files::Removal::Tree } else { files::Removal::Entry })
        }
        Cmd::Mount { image, mountpoint, foreground, threads, options, lower } => {
            let mut o = mounthelper::parse_options(&options, mounthelper::Unknown::Refused)?;
            o.lower = lower.or(o.lower);
            o.threads = Some(o.threads.unwrap_or(threads));
            if foreground {
                mountcmd::run_foreground_with(&image, &mountpoint, &o).map(|_| 0)
            } else {
                mountcmd::run_background_with(&image, &mountpoint, &o).map(|_| 0)
            }
        }
        Cmd::InstallMountHelper { dir } => mounthelper::install(&dir).map(|l| {
            println!("installed {}", l.display());
            0
        }),
        Cmd::Umount { mountpoint, writeback } => {
            let first = if writeback { mountcmd::BeforeUnmount::WriteBack } else { mountcmd::BeforeUnmount::Nothing };
            mountcmd::umount(&mountpoint, first).map(|_| 0)
        }
        Cmd::Demo { image, size } => demo::run(&image, size).map(|_| 0),
        Cmd::Crashtest(args) => hashfs_crashtest::run(args).map(|failed| u8::from(failed > 0)).map_err(fail),
    }
}

fn main() -> ExitCode {
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`hashfs cat IMAGE F | head`) instead of failing on EPIPE.
    // SAFETY: called before any thread starts; SIG_DFL is a valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Run by mount(8) as /sbin/mount.fuse.hashfs IMAGE DIR -o OPTIONS.
    let args: Vec<String> = std::env::args().collect();
    if args.first().and_then(|a| Path::new(a).file_name()).is_some_and(|n| n == "mount.fuse.hashfs") {
        return match mounthelper::run(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(f) => {
                eprintln!("mount.fuse.hashfs: {}", f.msg);
                ExitCode::from(32) // mount(8)'s "mount failure"
            }
        };
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("hashfs: {}", f.msg);
            ExitCode::from(f.code)
        }
    }
}
