//! `ctfs-atomic`: ctFS §3.3's second use of pswap, "atomic write on any amount of data":
//! an untorn write (`File::write_atomic_at`) on the `ctfs` mapping, staged in an unlinked
//! file and pswapped into place (`fs/ctfs/untorn_pswap.rs`), against a relaxed overwrite of the
//! same range (one copy, in place), from 2 MiB up to the scale's largest (1 GiB at full
//! scale, ctfs's untorn-write limit), at an aligned offset (0) and an unaligned one (4 KiB:
//! the page-table entries at both ends of every level, the limit's worst case). Beside it,
//! the same writes on `extent-tree` in strict mode (WineFS's answer: pieces of its untorn
//! limit, blocks of aligned 2 MiB extents logged and written in place, so the data is
//! written twice) against relaxed. Each file holds twice the largest write, filled first;
//! one untimed write in each mode warms each size and offset up, then the two modes are
//! interleaved trial by trial, the order alternating.

#![forbid(unsafe_code)]

use super::{mean_ci, Ctx, Report, Target};
use crate::Failure;
use hashfs::{AllocatorKind, MappingKind, WriteMode};
use serde_json::{json, Value};
use std::time::Instant;

/// Bytes each trial writes at least per size and mode (small sizes repeat their write).
const TRIAL_BYTES: u64 = 64 << 20;

fn figure(v: &[f64]) -> Value {
    let (m, ci) = mean_ci(v);
    json!({ "mean": m, "ci95": ci, "trials": v })
}

/// 2 MiB, then 8 times more each step, up to `max` (which ends the list).
fn sizes(max: u64) -> Vec<u64> {
    let mut v: Vec<u64> = std::iter::successors(Some(2u64 << 20), |s| Some(s * 8)).take_while(|&s| s < max).collect();
    v.push(max);
    v
}

pub fn run(ctx: &Ctx) -> Result<Report, Failure> {
    let max = ctx.scale.ctfs_atomic_max_bytes;
    let file = 2 * max;
    let trials = ctx.scale.trials.min(10);
    let mut points = Vec::new();
    let mut limits = serde_json::Map::new();
    for (kind, atomic) in [(MappingKind::Ctfs, "untorn"), (MappingKind::ExtentTree, "strict")] {
        let image_bytes = (file + 2 * max + (256 << 20)).next_multiple_of(1 << 30);
        let t = Target::with_allocator(ctx, kind, AllocatorKind::Aligned, 1.0, image_bytes)?;
        let f = t.fill("/data", file)?;
        for &size in &sizes(max) {
            let buf = vec![0x3Cu8; size as usize];
            let ops = (TRIAL_BYTES / size).max(1);
            for (align, off) in [("aligned", 0u64), ("unaligned", 4096)] {
                let write = |m: usize| -> Result<(), Failure> {
                    match (m, kind) {
                        (0, _) => f.write_at(off, &buf).map(drop)?,
                        (_, MappingKind::Ctfs) => f.write_atomic_at(off, &buf).map(drop)?,
                        _ => {
                            t.fs.set_write_mode(WriteMode::Strict);
                            let r = f.write_at(off, &buf);
                            t.fs.set_write_mode(WriteMode::Relaxed);
                            r.map(drop)?
                        }
                    }
                    Ok(())
                };
                // Warm-up, untimed: one write in each mode (the first write of a range
                // through ctFS's view maps it: 4-5x a later one at 1 GiB).
                write(0)?;
                write(1)?;
                // [relaxed, atomic] -> per-trial milliseconds per write
                let mut ms = [Vec::new(), Vec::new()];
                for trial in 0..trials {
                    let order = if trial % 2 == 0 { [0, 1] } else { [1, 0] };
                    for m in order {
                        let t0 = Instant::now();
                        for _ in 0..ops {
                            write(m)?;
                        }
                        ms[m].push(t0.elapsed().as_secs_f64() * 1e3 / ops as f64);
                    }
                }
                for (mode, v) in ["relaxed", atomic].into_iter().zip(&ms) {
                    eprintln!(
                        "# ctfs-atomic: {} {mode} {align} {}: {:.3} ms",
                        kind.name(),
                        super::experiments::size_label(size),
                        mean_ci(v).0
                    );
                    points.push(json!({
                        "mapping": kind.name(),
                        "mode": mode,
                        "align": align,
                        "bytes": size,
                        "x": super::experiments::size_label(size),
                        "ms": figure(v),
                    }));
                }
            }
        }
        limits.insert(kind.name().to_string(), json!(t.fs.untorn_write_max()));
    }
    Ok(Report {
        config: json!({
            "sizes": sizes(max),
            "file_bytes": file,
            "offsets": [0, 4096],
            "trial_bytes": TRIAL_BYTES,
            "allocator": "aligned",
            "untorn_write_max": limits,
        }),
        scale_note: format!("writes of 2 MiB to {} MiB into a {} MiB file", max >> 20, file >> 20),
        points,
    })
}
