//! `untorn`: what strict mode costs (WineFS §5 reports its strict mode against its relaxed
//! one), on every mapping with each block allocator: overwrites at random aligned offsets
//! of a 4 KiB, 64 KiB and 1 MiB write into a populated file, and appends of the same
//! sizes, relaxed and strict on the same image, the two modes interleaved trial by trial
//! (the order alternating), so that the ratio compares like with like.
//!
//! Strict overwrites move blocks (copy on write: HashFS's key switch, the structures'
//! remapping) or, for blocks of aligned 2 MiB extents, log the old bytes and write in
//! place (`fs/untorn.rs`); strict appends map only new blocks, as relaxed ones do, in one
//! transaction. The paper benchmark's images have 256 KiB journals, so the untorn limit
//! is 1 MiB on every mapping and every write here is one untorn write.

#![forbid(unsafe_code)]

use super::{images, mean_ci, Ctx, Report, Target};
use crate::Failure;
use hashfs::{AllocatorKind, WriteMode};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use serde_json::{json, Value};
use std::time::Instant;

const SIZES: [(u64, &str); 3] = [(4 << 10, "4 KiB"), (64 << 10, "64 KiB"), (1 << 20, "1 MiB")];
/// Bytes each trial writes per size and mode (so the large sizes take as long as the small).
const TRIAL_BYTES_FULL: u64 = 64 << 20;

fn figure(v: &[f64]) -> Value {
    let (m, ci) = mean_ci(v);
    json!({ "mean": m, "ci95": ci, "trials": v })
}

pub fn run(ctx: &Ctx) -> Result<Report, Failure> {
    let s = ctx.scale;
    let file_bytes = s.winefs_file_bytes * 2;
    let trial_bytes = match s.name {
        "full" => TRIAL_BYTES_FULL,
        "quick" => TRIAL_BYTES_FULL / 4,
        _ => 1 << 20,
    };
    let trials = s.trials.min(12);
    // Room beyond the data for the journal and metadata, and a whole number of GiB; the
    // smoke test's tiny scale (figures that mean nothing) takes less, as formatting and
    // zeroing eleven images of 1 GiB took most of its run.
    let (headroom, granule) = if s.name == "tiny" { (64 << 20, 64 << 20) } else { (256 << 20, 1 << 30) };
    let mut points = Vec::new();
    for &kind in &ctx.mappings {
        let allocs: &[Option<AllocatorKind>] =
            if kind.uses_allocator() { &[Some(AllocatorKind::Aligned), Some(AllocatorKind::Bitmap)] } else { &[None] };
        for &alloc in allocs {
            let image_bytes = (file_bytes * 2 + 4 * trial_bytes + headroom).next_multiple_of(granule);
            let t = Target::with_allocator(ctx, kind, alloc.unwrap_or(AllocatorKind::Bitmap), 1.0, image_bytes)?;
            let limit = t.fs.untorn_write_max();
            let f = t.fill("/data", file_bytes)?;
            let a = t.fs.open_file(
                std::path::Path::new("/append"),
                hashfs::OpenOptions::new().read(true).write(true).create(true),
            )?;
            let mut rng = SmallRng::seed_from_u64(images::seed(ctx.image) ^ 0x0A70);
            for &(size, label) in &SIZES {
                let buf = vec![0x6Bu8; size as usize];
                let ops = (trial_bytes / size).max(8) as usize;
                // [op][mode] -> per-trial microseconds per write
                let mut us = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
                for trial in 0..trials {
                    let order = if trial % 2 == 0 { [0, 1] } else { [1, 0] };
                    for m in order {
                        let mode = [WriteMode::Relaxed, WriteMode::Strict][m];
                        t.fs.set_write_mode(mode);
                        // Overwrites at random aligned offsets.
                        let offs: Vec<u64> = (0..ops).map(|_| rng.random_range(0..file_bytes / size) * size).collect();
                        let t0 = Instant::now();
                        for &o in &offs {
                            f.write_at(o, &buf)?;
                        }
                        us[0][m].push(t0.elapsed().as_secs_f64() * 1e6 / ops as f64);
                        // Appends to an emptied file.
                        a.set_len(0)?;
                        let t0 = Instant::now();
                        for _ in 0..ops {
                            a.append(&buf)?;
                        }
                        us[1][m].push(t0.elapsed().as_secs_f64() * 1e6 / ops as f64);
                        a.set_len(0)?;
                    }
                }
                t.fs.set_write_mode(WriteMode::Relaxed);
                for (op, name) in [(0, "overwrite"), (1, "append")] {
                    let ratio: Vec<f64> = us[op][1].iter().zip(&us[op][0]).map(|(s, r)| s / r).collect();
                    points.push(json!({
                        "mapping": kind.name(),
                        "allocator": alloc.map_or("table", |a| a.name()),
                        "op": name,
                        "x": label,
                        "relaxed_us": figure(&us[op][0]),
                        "strict_us": figure(&us[op][1]),
                        "strict_over_relaxed": figure(&ratio),
                    }));
                }
            }
            eprintln!(
                "# untorn: {} ({}) done, limit {} KiB",
                kind.name(),
                alloc.map_or("table", |a| a.name()),
                limit >> 10
            );
            drop((f, a));
        }
    }
    Ok(Report {
        config: json!({
            "file_bytes": file_bytes,
            "bytes_per_trial_per_size": trial_bytes,
            "trials": trials,
            "sizes": SIZES.iter().map(|s| s.0).collect::<Vec<_>>(),
            "journal_blocks": 64,
            "modes": ["relaxed", "strict"],
        }),
        scale_note: format!(
            "{} MiB file; WineFS shows its strict mode's cost only through applications on clean images (its Fig. 9 d-f beside a-c), not for single writes",
            file_bytes >> 20
        ),
        points,
    })
}
