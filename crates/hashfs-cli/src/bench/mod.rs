//! Benchmarks. They print their configuration beside their results and never decide
//! whether CI passes.

mod churn;
mod micro;

use crate::Failure;
use clap::Subcommand;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum BenchCmd {
    /// 4 KiB random read, overwrite, append, and small-file create, beside a bare memcpy
    /// on the same mapped image and the same operations on a plain tmpfs.
    Micro {
        /// A short run (under 30 seconds).
        #[arg(long)]
        quick: bool,
        /// Write every figure and the configuration to this JSON file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// The image to create for HashFS and memcpy.
        #[arg(long, default_value = "/dev/shm/hashfs-bench.img")]
        image: PathBuf,
        /// A directory on a plain tmpfs for the system-call baseline.
        #[arg(long, default_value = "/dev/shm")]
        tmpfs_dir: PathBuf,
    },
    /// Fills the image to 90% and empties it, ten times, printing the table's probe lengths.
    Churn {
        #[arg(long, default_value = "/dev/shm/hashfs-churn.img")]
        image: PathBuf,
        #[arg(long, value_parser = crate::parse_size, default_value = "256M")]
        size: u64,
        #[arg(long, default_value_t = 10)]
        rounds: u32,
    },
}

pub fn run(cmd: BenchCmd) -> Result<(), Failure> {
    match cmd {
        BenchCmd::Micro { quick, json, image, tmpfs_dir } => micro::run(quick, json.as_deref(), &image, &tmpfs_dir),
        BenchCmd::Churn { image, size, rounds } => churn::run(&image, size, rounds),
    }
}

/// Latency samples in nanoseconds.
pub struct Samples(pub Vec<u64>);

impl Samples {
    pub fn median(&self) -> u64 {
        self.pct(50.0)
    }
    pub fn pct(&self, p: f64) -> u64 {
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
