//! WineFS's experiments (Kwon et al., SOSP '21), on every mapping with each block
//! allocator (HashFS allocates through its table):
//!
//! - `winefs-aging` (Figs. 1 and 3): an image aged step by step (Geriatrix's method, `hashfs
//!   age`) to 30, 45, 60, 75 and 90% full; at each step the share of free space in free
//!   aligned 2 MiB extents (Fig. 3), and on the fresh image and at 60, 75 and 90% the
//!   bandwidth of a sequential memcpy into a freshly allocated, memory-mapped file (Fig. 1),
//!   with its page faults and the share of the mapping the kernel maps with 2 MiB pages.
//! - `winefs-2mib` (Fig. 2): create a 2 MiB file, fallocate, map, write it whole through the
//!   mapping, unmap: the time of map, write and unmap (what Fig. 2 times) and of the whole,
//!   and the page faults, on a fresh image.
//!
//! The images are populated before use (PM has no first-touch faults), so the faults
//! counted are the mappings' own.

#![forbid(unsafe_code)]

use super::{images, mean_ci, Ctx, Report, Subject, Target};
use crate::age::{age_fs, AgeArgs, Progress};
use crate::{fail, Failure};
use hashfs::pm::MmapDevice;
use hashfs::{AllocatorKind, FileSystem, OpenOptions, Protection};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

const MIB: u64 = 1 << 20;
/// Aging steps (fullness), and those at which the mapped write is measured (and fresh).
const STEPS: [f64; 5] = [0.30, 0.45, 0.60, 0.75, 0.90];
const MEASURED: [f64; 3] = [0.60, 0.75, 0.90];
/// Churn between two steps, in image capacities (Geriatrix's -i; WineFS aged its images
/// with hundreds of overwrites, far beyond this machine's time).
const CHURN_PER_STEP: f64 = 0.5;
/// Mapped writes per measured state.
const WRITE_TRIALS: usize = 8;

/// Every mapping with each allocator (HashFS: its table).
fn configs(ctx: &Ctx) -> Vec<(Subject, Option<AllocatorKind>)> {
    let mut out = Vec::new();
    for &k in &ctx.mappings {
        if k.uses_allocator() {
            out.extend([AllocatorKind::Aligned, AllocatorKind::Bitmap].map(|a| (k, Some(a))));
        } else {
            out.push((k, None));
        }
    }
    out
}

fn allocator_name(a: Option<AllocatorKind>) -> &'static str {
    a.map_or("table", |a| a.name())
}

fn figure(v: &[f64]) -> Value {
    let (m, ci) = mean_ci(v);
    json!({ "mean": m, "ci95": ci, "trials": v })
}

/// Minor page faults of this thread so far (/proc/thread-self/stat, field 10).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let after = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    after.split_whitespace().nth(7).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// One mapped write: `bytes` fallocated in a new file, mapped, written in 1 MiB memcpys,
/// unmapped, deleted. (GB/s, faults per MiB, share mapped with 2 MiB pages.)
fn mapped_write(fs: &FileSystem<MmapDevice>, path: &str, bytes: u64) -> Result<(f64, f64, f64), Failure> {
    let p = Path::new(path);
    let f = fs.open_file(p, OpenOptions::new().read(true).write(true).create(true))?;
    f.allocate(0, bytes)?;
    let m = f.map(0, bytes as usize, Protection::ReadWrite)?;
    let chunk = vec![0x5Au8; MIB as usize];
    let faults = minor_faults();
    let t = Instant::now();
    for off in (0..bytes as usize).step_by(MIB as usize) {
        let n = (bytes as usize - off).min(chunk.len());
        m.write_at(off, &chunk[..n])?;
    }
    let secs = t.elapsed().as_secs_f64();
    let faults = minor_faults().saturating_sub(faults);
    let pmd = m.pmd_mapped_kib()? as f64 * 1024.0 / bytes as f64;
    drop(m);
    drop(f);
    fs.remove_file(p)?;
    Ok((bytes as f64 / secs / 1e9, faults as f64 * MIB as f64 / bytes as f64, pmd))
}

fn age_to(fs: &FileSystem<MmapDevice>, to: f64, churn: f64, seed: u64) -> Result<crate::age::Aged, Failure> {
    let args = AgeArgs { image: PathBuf::new(), to, profile: "agrawal".into(), churn, seed, json: None };
    age_fs(fs, &args, Progress::Hidden)
}

pub fn aging(ctx: &Ctx) -> Result<Report, Failure> {
    let s = ctx.scale;
    let mut points = Vec::new();
    for (kind, alloc) in configs(ctx) {
        let t = Target::with_allocator(ctx, kind, alloc.unwrap_or(AllocatorKind::Bitmap), 1.0, s.winefs_image_bytes)?;
        let labels = |x: &str| json!({ "mapping": kind.name(), "allocator": allocator_name(alloc), "x": x });
        let measure = |x: &str, points: &mut Vec<Value>| -> Result<(), Failure> {
            let (mut gbps, mut faults, mut pmd) = (Vec::new(), Vec::new(), Vec::new());
            for i in 0..WRITE_TRIALS {
                let (g, f, p) = mapped_write(&t.fs, &format!("/mapped{i}"), s.winefs_file_bytes)?;
                gbps.push(g);
                faults.push(f);
                pmd.push(p);
            }
            let mut p = labels(x);
            p["figure"] = json!("mmap");
            p["write_gbps"] = figure(&gbps);
            p["faults_per_mib"] = figure(&faults);
            p["pmd_share"] = figure(&pmd);
            points.push(p);
            Ok(())
        };
        measure("fresh", &mut points)?;
        for (i, &to) in STEPS.iter().enumerate() {
            let aged = age_to(&t.fs, to, CHURN_PER_STEP, images::seed(ctx.image) ^ i as u64)?;
            let st = t.fs.statfs();
            let share = aged.aligned_after as f64 * 512.0 / st.blocks_free.max(1) as f64;
            let x = format!("{:.0}%", to * 100.0);
            let mut p = labels(&x);
            p["figure"] = json!("free");
            p["free_aligned_share"] = figure(&[share]);
            p["full"] = figure(&[aged.full_after]);
            p["file_chunks_aligned_share"] =
                figure(&[aged.file_chunks_aligned as f64 / aged.file_chunks.max(1) as f64]);
            points.push(p);
            if MEASURED.contains(&to) {
                measure(&x, &mut points)?;
            }
        }
        eprintln!("# winefs-aging: {} ({}) done", kind.name(), allocator_name(alloc));
    }
    Ok(Report {
        config: json!({
            "image_bytes": s.winefs_image_bytes,
            "file_bytes": s.winefs_file_bytes,
            "steps": STEPS,
            "measured": MEASURED,
            "churn_per_step": CHURN_PER_STEP,
            "write_trials": WRITE_TRIALS,
            "profile": "agrawal",
        }),
        scale_note: format!(
            "{} MiB image aged in steps with {CHURN_PER_STEP} image-capacities of churn each (paper: 100 GiB, up to 40 TB of churn); {} MiB mapped file (paper: 50 GB)",
            s.winefs_image_bytes >> 20,
            s.winefs_file_bytes >> 20
        ),
        points,
    })
}

pub fn small_files(ctx: &Ctx) -> Result<Report, Failure> {
    let s = ctx.scale;
    let n = s.winefs_small_files;
    let bytes = 2 * MIB;
    // (The smoke test's tiny scale: no 256 MiB floor, whose zeroing took most of its run.)
    let floor = if s.name == "tiny" { 0 } else { 256 * MIB };
    let image = (n as u64 * bytes * 4).max(floor);
    let mut points = Vec::new();
    for (kind, alloc) in configs(ctx) {
        let t = Target::with_allocator(ctx, kind, alloc.unwrap_or(AllocatorKind::Bitmap), 1.0, image)?;
        t.fs.write(Path::new("/first"), b"x")?; // so that no file starts at the first block
        let (mut us, mut map_us, mut faults, mut pmd) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let chunk = vec![0x3Cu8; bytes as usize];
        for trial in 0..s.trials.min(10) {
            let (mut time, mut map_time, mut flt, mut huge) = (0.0, 0.0, 0u64, 0.0);
            for i in 0..n {
                let path = format!("/t{trial}-{i}");
                let t0 = Instant::now();
                let f = t.fs.open_file(Path::new(&path), OpenOptions::new().read(true).write(true).create(true))?;
                f.allocate(0, bytes)?;
                // The part Fig. 2 times: map, write through the mapping, unmap.
                let f0 = minor_faults();
                let t1 = Instant::now();
                let m = f.map(0, bytes as usize, Protection::ReadWrite)?;
                m.write_at(0, &chunk)?;
                let (mapped, faulted) = (t1.elapsed().as_secs_f64(), minor_faults().saturating_sub(f0));
                huge += m.pmd_mapped_kib()? as f64 * 1024.0 / bytes as f64;
                let t2 = Instant::now();
                drop(m);
                let unmapped = t2.elapsed().as_secs_f64();
                drop(f);
                time += (t1 - t0).as_secs_f64() + mapped + unmapped;
                map_time += mapped + unmapped;
                flt += faulted;
            }
            for i in 0..n {
                t.fs.remove_file(Path::new(&format!("/t{trial}-{i}")))
                    .map_err(|e| fail(format!("winefs-2mib: {e}")))?;
            }
            us.push(time * 1e6 / n as f64);
            map_us.push(map_time * 1e6 / n as f64);
            faults.push(flt as f64 / n as f64);
            pmd.push(huge / n as f64);
        }
        let mut p = json!({ "mapping": kind.name(), "allocator": allocator_name(alloc), "x": "2 MiB" });
        p["figure"] = json!("2mib");
        p["op_us"] = figure(&us);
        p["map_write_us"] = figure(&map_us);
        p["faults"] = figure(&faults);
        p["pmd_share"] = figure(&pmd);
        points.push(p);
    }
    Ok(Report {
        config: json!({ "image_bytes": image, "file_bytes": bytes, "files_per_trial": n }),
        scale_note: String::new(),
        points,
    })
}
