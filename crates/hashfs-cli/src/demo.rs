//! The demonstration workload behind the README's first command: format an image, build a
//! tree of files, read it back and verify it, do random reads, rename and delete, unmount,
//! fsck, and print what happened and how fast.

#![forbid(unsafe_code)]

use crate::{fail, Failure};
use hashfs::pm::{MmapDevice, OpenMode, PmDevice};
use hashfs::{
    fsck::{fsck, FsckMode},
    FormatOptions,
};
use hashfs::{FileSystem, OpenOptions};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Deterministic file contents (xorshift, 8 bytes a step, so that generating them costs
/// little next to the file system).
fn fill(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

fn mib_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / (1 << 20) as f64 / secs
}

pub fn run(image: &Path, size: u64) -> Result<(), Failure> {
    println!("HashFS demonstration on {} ({} MiB)", image.display(), size >> 20);
    let t = Instant::now();
    let g = FileSystem::format_file(image, size, &FormatOptions::default(), &|_, _| {})?;
    println!(
        "  mkfs: {} data blocks, {} inodes, hash table {} KiB, in {:.1} ms",
        g.data_blocks,
        g.inode_count,
        g.data_blocks * 8 / 1024,
        t.elapsed().as_secs_f64() * 1e3
    );
    let dev = Arc::new(MmapDevice::open(image, OpenMode::Existing)?);
    println!(
        "  device: MAP_SYNC {}, flush with {}, SIMD {}",
        dev.is_map_sync(),
        dev.flush_kind().name(),
        hashfs::simd_kind().name()
    );
    let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {})?;

    // A tree of files.
    let (dirs, per_dir) = (16u64, 128u64);
    let mut rng = SmallRng::seed_from_u64(42);
    let sizes: Vec<usize> =
        (0..dirs * per_dir).map(|_| rng.random_range(1..=64) * 1024 + rng.random_range(0..1024)).collect();
    let total: u64 = sizes.iter().map(|&s| s as u64).sum();
    let t = Instant::now();
    for d in 0..dirs {
        fs.create_dir(Path::new(&format!("/dir{d:02}")), 0o755)?;
        for i in 0..per_dir {
            let k = d * per_dir + i;
            fs.write(Path::new(&format!("/dir{d:02}/file{i:03}")), &fill(k, sizes[k as usize]))?;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "  created {} files in {dirs} directories, {:.1} MiB, in {:.0} ms: {:.0} files/s, {:.0} MiB/s",
        dirs * per_dir,
        total as f64 / (1 << 20) as f64,
        secs * 1e3,
        (dirs * per_dir) as f64 / secs,
        mib_s(total, secs)
    );

    let t = Instant::now();
    for d in 0..dirs {
        for i in 0..per_dir {
            let k = d * per_dir + i;
            let got = fs.read(Path::new(&format!("/dir{d:02}/file{i:03}")))?;
            if got != fill(k, sizes[k as usize]) {
                return Err(fail(format!("/dir{d:02}/file{i:03}: data read back differs")));
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    println!("  read back and verified every file in {:.0} ms: {:.0} MiB/s", secs * 1e3, mib_s(total, secs));

    // Random 4 KiB reads on a 64 MiB file.
    let big = fs.open_file(Path::new("/big"), OpenOptions::new().read(true).write(true).create(true))?;
    let chunk = fill(7, 1 << 20);
    for m in 0..64u64 {
        big.write_at(m << 20, &chunk)?;
    }
    let mut buf = vec![0u8; 4096];
    let n = 200_000u64;
    let offs: Vec<u64> = (0..n).map(|_| rng.random_range(0..(64u64 << 20) / 4096) * 4096).collect();
    let t = Instant::now();
    for &o in &offs {
        big.read_at(o, &mut buf)?;
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "  {n} random 4 KiB reads of a 64 MiB file: {:.2} M ops/s, {:.0} ns each",
        n as f64 / secs / 1e6,
        secs * 1e9 / n as f64
    );
    drop(big);

    // Namespace churn.
    let t = Instant::now();
    for d in 0..dirs {
        for i in (0..per_dir).step_by(2) {
            fs.rename(
                Path::new(&format!("/dir{d:02}/file{i:03}")),
                Path::new(&format!("/dir{:02}/moved{i:03}", (d + 1) % dirs)),
            )?;
        }
        for i in (1..per_dir).step_by(4) {
            fs.remove_file(Path::new(&format!("/dir{d:02}/file{i:03}")))?;
        }
    }
    let ops = dirs * (per_dir / 2 + per_dir / 4);
    let secs = t.elapsed().as_secs_f64();
    println!("  {ops} renames and unlinks in {:.0} ms: {:.0} ops/s", secs * 1e3, ops as f64 / secs);
    let st = fs.statfs();
    println!(
        "  in use: {} of {} blocks, {} of {} inodes",
        st.blocks_total - st.blocks_free,
        st.blocks_total,
        st.inodes_total - st.inodes_free,
        st.inodes_total
    );
    let stats = dev.stats().snapshot();
    println!(
        "  device traffic: {:.1} MiB read, {:.1} MiB written, {} cache lines flushed, {} fences",
        stats.bytes_read as f64 / (1 << 20) as f64,
        stats.bytes_written as f64 / (1 << 20) as f64,
        stats.flushes,
        stats.fences
    );
    fs.unmount()?;
    drop(dev);

    let dev = Arc::new(MmapDevice::open(image, OpenMode::Existing)?);
    let report = fsck(dev, FsckMode::Check, &|_, _| {})?;
    if report.findings.is_empty() {
        println!(
            "  fsck: clean ({} inodes, {} blocks, {} directories)",
            report.inodes_used, report.blocks_used, report.directories
        );
        println!("done; the image stays at {} (try: hashfs ls {} /dir00)", image.display(), image.display());
        Ok(())
    } else {
        Err(fail(format!("fsck found problems: {:?}", report.findings)))
    }
}
