//! `hashfs-bench`: the benchmarks, apart from the file system's own command (`hashfs`).
//! They print their configuration (CPU, flush instruction, SIMD level, the image's page
//! size, the commit) beside their results and never decide whether CI passes; bench/README.md
//! says which results the docs cite and which command made each.
//!
//! - [`micro`]: the IO path's operations beside their durable limit and tmpfs.
//! - [`paper`]: the papers' evaluations (HashFS, SPFS, WineFS, ctFS), every mapping side by side.
//! - [`filebench`]: filebench's personalities in any directory; [`passthrough`]: the FUSE
//!   ceiling they are measured against.
//! - [`churn`]: the HashFS table's probe lengths under fill-and-empty rounds.
//! - [`age`]: Geriatrix's aging of an image (the WineFS experiments' aged images).
//! - [`takeover`]: a shared mount's takeover after a participant died holding its lock.

// Safe code only, but for pinning the aging thread to one CPU (age.rs).
#![deny(unsafe_code)]

mod age;
mod churn;
mod filebench;
mod micro;
#[cfg(feature = "probe")]
pub mod paper;
mod passthrough;
#[path = "../../hashfs-cli/src/progress.rs"]
mod progress;
mod takeover;

use clap::{Parser, Subcommand};
use hashfs::pm::{MmapDevice, OpenMode};
use hashfs::units::parse_size;
use hashfs::FileSystem;
pub(crate) use progress::{progress_bar, Steps};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "hashfs-bench",
    version,
    about = "HashFS's benchmarks (not tests): micro, the papers' evaluations, filebench, the FUSE ceiling, table churn, aging"
)]
struct Cli {
    #[command(subcommand)]
    cmd: BenchCmd,
}

/// An error for the user (the program exits with 1).
#[derive(Debug)]
pub struct Failure {
    pub msg: String,
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure { msg: e.to_string() }
    }
}

pub fn fail(msg: impl Into<String>) -> Failure {
    Failure { msg: msg.into() }
}

/// Mounts an existing image (recovering it if it was not cleanly unmounted, as `hashfs
/// mount` does, and saying so).
pub(crate) fn mount(image: &Path) -> Result<FileSystem<MmapDevice>, Failure> {
    let dev = MmapDevice::open(image, OpenMode::Existing)
        .map(Arc::new)
        .map_err(|e| fail(format!("cannot open image {}: {e}", image.display())))?;
    let (fs, report) =
        FileSystem::mount(dev, &|_, _| {}).map_err(|e| fail(format!("cannot mount {}: {e}", image.display())))?;
    if !report.was_clean {
        eprintln!(
            "hashfs-bench: {} was not cleanly unmounted; recovered ({} transactions rolled back)",
            image.display(),
            report.rolled_back_txids.len()
        );
    }
    Ok(fs)
}

fn main() -> ExitCode {
    match run(Cli::parse().cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure { msg }) => {
            eprintln!("hashfs-bench: {msg}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Subcommand)]
enum BenchCmd {
    /// 4 KiB random read, overwrite, append, small-file create, 1 MiB sequential read,
    /// overwrite and allocating write, beside their durable limit on the same mapped image
    /// and the same operations on a tmpfs, in interleaved rounds.
    Micro {
        /// A short run (under a minute).
        #[arg(long)]
        quick: bool,
        /// Write every figure and the configuration to this JSON file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// The image to create for HashFS and memcpy.
        #[arg(long, default_value = "/dev/shm/hashfs-bench.img")]
        image: PathBuf,
        /// A directory on a tmpfs for the system-call baseline.
        #[arg(long, default_value = "/dev/shm")]
        tmpfs_dir: PathBuf,
        /// Format the image sparse (as `mkfs --sparse`): writes pay the host's first touch.
        #[arg(long)]
        sparse: bool,
        /// Only these operations, comma-separated (e.g. `append_4k`, to profile one).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Do not fault the image's mapping in before timing (a mount does it in the
        /// background; this shows the first seconds).
        #[arg(long)]
        cold: bool,
        /// End each limit's last fence with one locked instruction (an atomic add), which
        /// waits until the limit's stores have drained: on a CPU whose `sfence` only
        /// orders streaming stores, the limit's stores otherwise drain while the next
        /// operation runs, and a file system pays the drain at its next lock.
        #[arg(long)]
        limit_drain: bool,
        /// HashFS's placement: paper (the default image's), grouped or regions.
        #[arg(long, default_value = "paper", value_parser = hashfs::HashPlacement::parse)]
        placement: hashfs::HashPlacement,
    },
    /// The papers' evaluations, every mapping side by side: HashFS §4.1-4.7, SPFS Fig. 7,
    /// WineFS Figs. 1-3, ctFS Table 1 and Figs. 1, 6 and 7. Writes one JSON file per
    /// experiment; `bench/plot.py` draws them. Needs a build with the cycle probe
    /// (`--features hashfs-bench/probe`; scripts/bench-paper.sh).
    Paper {
        /// Experiments to run (default: all): locality, fragmentation, filesize, iosize,
        /// utilization, concurrency, pagecache, spfs-extents, winefs-aging, winefs-2mib,
        /// untorn, ctfs-pswap, ctfs-micro, ctfs-large, ctfs-atomic, ctfs-ycsb.
        experiments: Vec<String>,
        /// Only these mappings (comma-separated; default: the HashFS paper's six; ctfs, and
        /// hashfs-grouped or hashfs-regions for HashFS with that placement, by name).
        #[arg(long, value_delimiter = ',')]
        mappings: Vec<String>,
        /// Smaller sizes and fewer operations: everything in a few minutes.
        #[arg(long)]
        quick: bool,
        /// Tiny sizes, for the smoke test only (the figures mean nothing).
        #[arg(long, hide = true)]
        tiny: bool,
        /// Directory for the JSON files.
        #[arg(long, default_value = "bench/results/paper/run1")]
        out: PathBuf,
        /// Directory for the scratch images (tmpfs, or a DAX file system).
        #[arg(long, default_value = "/dev/shm")]
        image_dir: PathBuf,
        /// Freshly formatted images per point, each with its own placement (the intervals
        /// cover the variation between them).
        #[arg(long, default_value_t = 3)]
        images: usize,
        /// Number the images from this one: a second run with `--first-image 3` measures
        /// three other placements (image i's seed depends only on i).
        #[arg(long, default_value_t = 0)]
        first_image: usize,
    },
    /// Filebench's file server, mail server, web server or create-files personality in a
    /// directory (any file system), with filebench's defaults; per operation the count and
    /// latency. `bench/filebench.py` runs them on HashFS, the FUSE ceiling, tmpfs and ext4.
    Filebench {
        /// fileserver, varmail, webserver or createfiles.
        personality: String,
        /// An empty directory on the file system to measure.
        dir: PathBuf,
        #[arg(long, default_value_t = 30)]
        seconds: u64,
        /// Threads (default: the personality's, 50, 16, 100 and 16).
        #[arg(long)]
        threads: Option<usize>,
        /// Scale every fileset's number of files by this factor (0 < f <= 1).
        #[arg(long, default_value_t = 1.0)]
        files_scale: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Write the figures and configuration to this JSON file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The FUSE ceiling: serves a directory through a minimal FUSE passthrough with the
    /// FUSE crate, threads and mount options of `hashfs mount`, until it is unmounted (a
    /// benchmark tool: what FUSE itself allows, to measure the HashFS mount against).
    FuseCeiling {
        /// The directory served (a tmpfs one, so that its own cost is negligible).
        lower: PathBuf,
        mountpoint: PathBuf,
        #[arg(long, default_value_t = hashfs_fuse::DEFAULT_THREADS)]
        threads: usize,
        /// How long the kernel may cache names and attributes, in seconds (as `hashfs
        /// mount -o cache_timeout=`; the same default).
        #[arg(long, default_value_t = hashfs_fuse::DEFAULT_TIMEOUT.as_secs_f64())]
        cache_timeout: f64,
        /// FUSE over io_uring with this many entries per CPU (as `hashfs mount -o io_uring=N`).
        #[arg(long)]
        io_uring: Option<usize>,
    },
    /// Fills the image to 90% and empties it, ten times, printing the table's probe lengths.
    Churn {
        #[arg(long, default_value = "/dev/shm/hashfs-churn.img")]
        image: PathBuf,
        #[arg(long, value_parser = parse_size, default_value = "256M")]
        size: u64,
        #[arg(long, default_value_t = 10)]
        rounds: u32,
    },
    /// Age an image as Geriatrix does: create files from a size profile up to a fullness,
    /// then create and delete at that fullness; reports the free aligned 2 MiB extents.
    Age(age::AgeArgs),
    /// A shared mount's takeover: victims join an image and are killed at random moments;
    /// the survivor's next call after each death is timed (a takeover when the victim died
    /// holding the image lock), on images of each size in interleaved rounds.
    Takeover {
        /// Image sizes, comma-separated.
        #[arg(long, value_delimiter = ',', value_parser = parse_size, default_value = "1G,4G,16G")]
        sizes: Vec<u64>,
        #[arg(long, default_value_t = 3)]
        rounds: u32,
        /// Victims per image per round.
        #[arg(long, default_value_t = 40)]
        kills: u32,
        /// Victims that fill a file of this many MiB and truncate it to nothing, again and
        /// again, instead of writing and renaming small files (0).
        #[arg(long, default_value_t = 0)]
        victim_file_mib: u64,
        /// Directory for the scratch images.
        #[arg(long, default_value = "/dev/shm")]
        dir: PathBuf,
        /// Write every figure and the configuration to this JSON file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// (`takeover`'s victim: joins IMAGE and changes files until killed.)
    #[command(hide = true)]
    TakeoverVictim {
        image: PathBuf,
        #[arg(long, default_value_t = 0)]
        file_mib: u64,
    },
}

fn run(cmd: BenchCmd) -> Result<(), Failure> {
    match cmd {
        BenchCmd::Micro { quick, json, image, tmpfs_dir, sparse, only, cold, limit_drain, placement } => {
            micro::run(&micro::Options { quick, json, image, tmpfs_dir, sparse, only, cold, limit_drain, placement })
        }
        BenchCmd::Churn { image, size, rounds } => churn::run(&image, size, rounds),
        BenchCmd::Age(args) => age::run(&args),
        BenchCmd::Takeover { sizes, rounds, kills, victim_file_mib, dir, json } => {
            takeover::run(&takeover::Options { sizes, rounds, kills, victim_file_mib, dir, json })
        }
        BenchCmd::TakeoverVictim { image, file_mib } => takeover::victim(&image, file_mib),
        BenchCmd::Filebench { personality, dir, seconds, threads, files_scale, seed, json } => {
            filebench::run(&filebench::Options { dir, personality, seconds, threads, files_scale, seed, json })
        }
        BenchCmd::FuseCeiling { lower, mountpoint, threads, cache_timeout, io_uring } => {
            let ttl = std::time::Duration::try_from_secs_f64(cache_timeout)
                .map_err(|_| fail(format!("--cache-timeout {cache_timeout}: not a number of seconds")))?;
            passthrough::serve(&lower, &mountpoint, threads, ttl, io_uring)
        }
        #[cfg(feature = "probe")]
        BenchCmd::Paper { experiments, mappings, quick, tiny, out, image_dir, images, first_image } => {
            let images = first_image..first_image.saturating_add(images);
            paper::run(&experiments, &mappings, quick, tiny, images, &out, &image_dir)
        }
        #[cfg(not(feature = "probe"))]
        BenchCmd::Paper { .. } => Err(fail(
            "this hashfs-bench was built without the cycle probe the paper benchmark reads; build it with \
             `cargo build --release --workspace --features hashfs-bench/probe` (scripts/bench-paper.sh does, in target/probe)",
        )),
    }
}

/// Latency samples in nanoseconds.
pub struct Samples(pub Vec<u64>);

impl Samples {
    pub fn median(&self) -> u64 {
        self.pct(50.0)
    }
    /// The `p`th percentile (0 with no samples).
    pub fn pct(&self, p: f64) -> u64 {
        if self.0.is_empty() {
            return 0;
        }
        let mut v = self.0.clone();
        v.sort_unstable();
        let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
        v[i]
    }
    pub fn ops_per_s(&self) -> f64 {
        let sum: u64 = self.0.iter().sum();
        self.0.len() as f64 / (sum as f64 / 1e9)
    }
}

pub use hashfs::pm::cpu_model;

/// The commit this binary was built from (short hash, "-dirty" when the code built
/// differed from it; `build.rs`), or "unknown" outside a git checkout.
pub fn git_commit() -> String {
    env!("HASHFS_BUILD_COMMIT").to_string()
}

/// Mean and half-width of the 95% confidence interval (Student's t).
pub fn mean_ci(v: &[f64]) -> (f64, f64) {
    let n = v.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (mean, f64::NAN);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    // Two-sided 97.5% quantiles of t for 1..=30 degrees of freedom, then the normal value.
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    let t = if n - 1 <= 30 { T[n - 2] } else { 1.96 };
    (mean, t * (var / n as f64).sqrt())
}

/// The file system holding `dir`, as `type options` from /proc/mounts (the mount with the
/// longest prefix of the directory): whether images there get 2 MiB pages (`huge=always`
/// tmpfs, hugetlbfs, DAX) changes TLB misses and first-touch costs.
pub fn image_mount(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && dir.starts_with(f[1])).then(|| (f[1].len(), format!("{} {}", f[2], f[3])))
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, m)| m)
        .unwrap_or_else(|| "unknown".into())
}

/// The running kernel's release (`uname -r`).
pub fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}
