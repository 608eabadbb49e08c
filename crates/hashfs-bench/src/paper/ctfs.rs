//! `ctfs-pswap`: ctFS Fig. 6, pswap against memcpy from one page up to the big file size
//! (4 GiB at full scale), on the `ctfs` mapping whatever `--mappings` says (the figure is
//! ctFS's own). Two files of that size are filled; pswap exchanges their first N pages
//! (`File::swap_pages`: one undo-logged transaction exchanging page-table entries at the
//! highest level both ranges' alignment allows), memcpy stores N pages into the second
//! file through a shared mapping of it and makes them durable (flush and fence), what a
//! copy-based atomic write costs at the least (ctFS compares with one memcpy too). The two
//! are interleaved trial by trial, the order alternating.

#![forbid(unsafe_code)]

use super::{images, mean_ci, Ctx, Report, Target};
use crate::Failure;
use hashfs::{AllocatorKind, MappingKind, OpenOptions, Protection};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

/// The DRAM source of the copies (reused for larger copies).
const SOURCE_BYTES: usize = 64 << 20;

fn figure(v: &[f64]) -> Value {
    let (m, ci) = mean_ci(v);
    json!({ "mean": m, "ci95": ci, "trials": v })
}

pub fn run(ctx: &Ctx) -> Result<Report, Failure> {
    let max_bytes = ctx.scale.big_file_bytes;
    let max_pages = max_bytes / 4096;
    let image_bytes = (2 * max_bytes + max_bytes / 8 + (64 << 20)).next_multiple_of(64 << 20);
    let t = Target::with_allocator(ctx, MappingKind::Ctfs, AllocatorKind::Aligned, 1.0, image_bytes)?;
    // Each file preallocated in one request (whole aligned 2 MiB extents, which the page
    // table maps with 2 MiB leaves, as ctFS maps large partitions), then written.
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    for name in ["/a", "/b"] {
        t.fs.open_file(Path::new(name), &rw)?.allocate(0, max_bytes)?;
    }
    let a = t.fill("/a", max_bytes)?;
    let b = t.fill("/b", max_bytes)?;
    let source = vec![0x5Au8; SOURCE_BYTES.min(max_bytes as usize)];
    let mut points = Vec::new();
    let mut n = 1u64;
    let _ = images::seed(ctx.image); // one image: the figure is a latency curve, not a ranking
    while n <= max_pages {
        let bytes = n * 4096;
        let trials = if n <= 1 << 16 { ctx.scale.trials.min(10) } else { 3 };
        let (mut pswap_us, mut memcpy_us, mut entries) = (Vec::new(), Vec::new(), 0);
        // A first, untimed swap: splits the 2 MiB leaves the small swaps cut into.
        entries = entries.max(a.swap_pages(0, &b, 0, bytes)?);
        for trial in 0..=trials {
            for which in if trial % 2 == 0 { [0, 1] } else { [1, 0] } {
                if which == 0 {
                    let t0 = Instant::now();
                    entries = a.swap_pages(0, &b, 0, bytes)?;
                    pswap_us.push(t0.elapsed().as_secs_f64() * 1e6);
                } else {
                    let m = b.map(0, bytes as usize, Protection::ReadWrite)?;
                    let t0 = Instant::now();
                    let mut done = 0usize;
                    while done < bytes as usize {
                        let k = source.len().min(bytes as usize - done);
                        m.write_at(done, &source[..k])?;
                        done += k;
                    }
                    m.persist(0, bytes as usize)?;
                    memcpy_us.push(t0.elapsed().as_secs_f64() * 1e6);
                }
            }
        }
        // The first trial of each warms up.
        pswap_us.remove(0);
        memcpy_us.remove(0);
        eprintln!(
            "# ctfs-pswap: {n} pages: pswap {:.1} µs ({entries} entries), memcpy {:.1} µs",
            mean_ci(&pswap_us).0,
            mean_ci(&memcpy_us).0
        );
        points.push(json!({
            "pages": n,
            "bytes": bytes,
            "entries": entries,
            "pswap_us": figure(&pswap_us),
            "memcpy_us": figure(&memcpy_us),
        }));
        n *= 2;
    }
    Ok(Report {
        config: json!({
            "max_bytes": max_bytes,
            "image_bytes": image_bytes,
            "allocator": "aligned",
            "memcpy": "N pages from DRAM into the second file's shared mapping, then flush and fence",
        }),
        scale_note: format!(
            "up to {} MiB ({} pages); ctFS's Fig. 6 goes to 4 GiB (1,048,576 pages) on Optane with a kernel pswap",
            max_bytes >> 20,
            max_pages
        ),
        points,
    })
}

/// ctFS Table 1's six microbenchmarks, scaled (ctFS: 10 GB files, 1 GB pieces, 2,621,440
/// random operations).
const MICRO: [&str; 6] = ["Append", "SWE", "SR", "SW", "RR", "RW"];

/// `ctfs-micro`: ctFS Table 1 and Fig. 1, the share of each benchmark's time spent in
/// mapping (translation, allocation, structure changes and their commits: the probe's
/// spans, as every other experiment counts them), on every mapping given and `ctfs`, each
/// on a fresh image with the aligned allocator (ctFS's setting: files on 2 MiB pages).
/// Before the timed benchmarks each file is read once, so that ctFS's view is built (the
/// page faults of ctFS's kernel are not in its figures either); the view's own build cost
/// is in the `Append` and `SWE` rows, whose pages are new.
pub fn micro(ctx: &Ctx) -> Result<Report, Failure> {
    use hashfs::testing::probe;
    let file = ctx.scale.big_file_bytes;
    let piece = (file / 10).max(4096).next_multiple_of(4096);
    let random_ops = (file / 4096).min(1 << 18);
    let mut kinds = ctx.mappings.clone();
    if !ctx.has(MappingKind::Ctfs) {
        kinds.push(MappingKind::Ctfs.into());
    }
    let mut points = Vec::new();
    for kind in kinds {
        let image_bytes = (2 * file + file / 8 + (64 << 20)).next_multiple_of(64 << 20);
        let t = Target::with_allocator(ctx, kind, AllocatorKind::Aligned, 1.0, image_bytes)?;
        let rw = OpenOptions::new().read(true).write(true).create(true).clone();
        let ap = t.fs.open_file(Path::new("/append"), &rw)?;
        let f = t.fs.open_file(Path::new("/file"), &rw)?;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(images::seed(ctx.image) ^ 0xC7F5);
        let page = vec![0x42u8; 4096];
        let chunk = vec![0x24u8; piece as usize];
        let mut rbuf = vec![0u8; piece as usize];
        for name in MICRO {
            if name == "SR" {
                // Warm-up: one read of the whole file (builds ctFS's view), untimed.
                let mut off = 0;
                while off < file {
                    off += f.read_at(off, &mut rbuf)? as u64;
                }
            }
            let _ = probe::take();
            let t0 = probe::rdtscp();
            match name {
                "Append" => {
                    for _ in 0..file / 4096 {
                        ap.append(&page)?;
                    }
                }
                "SWE" | "SW" => {
                    let mut off = 0;
                    while off < file {
                        let n = piece.min(file - off) as usize;
                        f.write_at(off, &chunk[..n])?;
                        off += n as u64;
                    }
                }
                "SR" => {
                    let mut off = 0;
                    while off < file {
                        off += f.read_at(off, &mut rbuf)? as u64;
                    }
                }
                "RR" => {
                    for _ in 0..random_ops {
                        let off = rng.random_range(0..file / 4096) * 4096;
                        f.read_at(off, &mut rbuf[..4096])?;
                    }
                }
                _ => {
                    for _ in 0..random_ops {
                        let off = rng.random_range(0..file / 4096) * 4096;
                        f.write_at(off, &page)?;
                    }
                }
            }
            let t1 = probe::rdtscp();
            let s = ctx.correct(t1 - t0, probe::take());
            let ms = (t1 - t0) as f64 / ctx.tsc_ghz / 1e6;
            points.push(json!({
                "mapping": kind.name(),
                "op": name,
                "x": super::experiments::size_label(file),
                "ms": figure(&[ms]),
                "map_share": figure(&[s.map / s.io]),
            }));
            eprintln!("# ctfs-micro: {} {name}: {ms:.1} ms, {:.1}% in mapping", kind.name(), 100.0 * s.map / s.io);
        }
    }
    Ok(Report {
        config: json!({
            "file_bytes": file,
            "piece_bytes": piece,
            "random_ops": random_ops,
            "allocator": "aligned",
            "benchmarks": MICRO,
        }),
        scale_note: format!(
            "{} MiB files, {} MiB pieces, {random_ops} random operations (ctFS: 10 GB, 1 GB, 2,621,440)",
            file >> 20,
            piece >> 20
        ),
        points,
    })
}

/// `ctfs-large`: ctFS's claim on one large file (§2: "at least 97% of the runtime is spent
/// on I/O, instead of indexing", on 10 GB files) and issue 17's goal, on the `ctfs` mapping
/// whatever `--mappings` says: one file grown to the scale's large size (10 GiB at full
/// scale) by 4 KiB appends, in ten timed segments, then read once whole (untimed: builds
/// the view, as ctfs-micro does), then 4 KiB reads at random offsets, in ten timed trials.
/// Each trial gives the time per operation, the share of it in mapping (the probe's spans:
/// translation, allocation, structure changes, commits) and the share in translation
/// alone (`probe::translate`: finding where a block lies, through ctFS's view or the page
/// table). The library's calls are the shim's: it serves `write` and `pread` with them.
pub fn large(ctx: &Ctx) -> Result<Report, Failure> {
    use hashfs::testing::probe;
    const SEGMENTS: u64 = 10;
    let file = ctx.scale.ctfs_large_file_bytes.next_multiple_of(SEGMENTS * 4096);
    let image_bytes = (file + file / 8 + (64 << 20)).next_multiple_of(64 << 20);
    let t = Target::with_allocator(ctx, MappingKind::Ctfs, AllocatorKind::Aligned, 1.0, image_bytes)?;
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    let f = t.fs.open_file(Path::new("/large"), &rw)?;
    let page = vec![0x42u8; 4096];
    let mut buf = vec![0u8; 1 << 20];
    let mut samples: [Vec<(f64, f64, f64)>; 2] = [Vec::new(), Vec::new()];
    let per_segment = file / SEGMENTS / 4096;
    for _ in 0..SEGMENTS {
        let _ = probe::take();
        let t0 = probe::rdtscp();
        for _ in 0..per_segment {
            f.append(&page)?;
        }
        let t1 = probe::rdtscp();
        let s = ctx.correct(t1 - t0, probe::take());
        samples[0].push(((t1 - t0) as f64 / ctx.tsc_ghz / per_segment as f64, s.map / s.io, s.translate / s.io));
    }
    let mut off = 0;
    while off < file {
        off += f.read_at(off, &mut buf)? as u64;
    }
    let ops = (file / 4096).min(1 << 15);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(images::seed(ctx.image) ^ 0x1A46);
    for _ in 0..ctx.scale.trials.min(10) {
        let offs: Vec<u64> = (0..ops).map(|_| rng.random_range(0..file / 4096) * 4096).collect();
        let _ = probe::take();
        let t0 = probe::rdtscp();
        for &o in &offs {
            f.read_at(o, &mut buf[..4096])?;
        }
        let t1 = probe::rdtscp();
        let s = ctx.correct(t1 - t0, probe::take());
        samples[1].push(((t1 - t0) as f64 / ctx.tsc_ghz / ops as f64, s.map / s.io, s.translate / s.io));
    }
    let mut points = Vec::new();
    for (op, v) in ["append", "rand_read"].into_iter().zip(samples) {
        let col = |i: usize| -> Vec<f64> { v.iter().map(|s| [s.0, s.1, s.2][i]).collect() };
        eprintln!(
            "# ctfs-large: {op}: {:.0} ns, {:.2}% in mapping, {:.2}% in translation",
            mean_ci(&col(0)).0,
            100.0 * mean_ci(&col(1)).0,
            100.0 * mean_ci(&col(2)).0
        );
        points.push(json!({
            "mapping": "ctfs",
            "op": op,
            "x": super::experiments::size_label(file),
            "ns_per_op": figure(&col(0)),
            "map_share": figure(&col(1)),
            "translate_share": figure(&col(2)),
        }));
    }
    Ok(Report {
        config: json!({
            "file_bytes": file,
            "image_bytes": image_bytes,
            "append_segments": SEGMENTS,
            "random_reads_per_trial": ops,
            "allocator": "aligned",
        }),
        scale_note: format!("one {} MiB file (ctFS: 10 GB), {ops} random reads per trial", file >> 20),
        points,
    })
}
