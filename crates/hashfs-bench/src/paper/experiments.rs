//! The experiments of `hashfs-bench paper`; each returns its points for the JSON.

#![forbid(unsafe_code)]

use super::{point, Ctx, OpKind, Report, Runner, Sample, Target, BLOCK};
use crate::{fail, Failure};
use hashfs::{testing::probe, MappingKind};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use serde_json::{json, Value};
use std::path::Path;

/// The paper's default layout score (§4: "an average layout score for file systems").
const DEFAULT_SCORE: f64 = 0.85;

pub fn run(name: &str, ctx: &Ctx) -> Result<Report, Failure> {
    match name {
        "locality" => locality(ctx),
        "fragmentation" => fragmentation(ctx),
        "filesize" => filesize(ctx),
        "iosize" => iosize(ctx),
        "utilization" => utilization(ctx),
        "concurrency" => concurrency(ctx),
        "pagecache" => pagecache(ctx),
        "spfs-extents" => spfs_extents(ctx),
        "winefs-aging" => super::winefs::aging(ctx),
        "winefs-2mib" => super::winefs::small_files(ctx),
        "untorn" => super::untorn::run(ctx),
        "ctfs-pswap" => super::ctfs::run(ctx),
        "ctfs-micro" => super::ctfs::micro(ctx),
        "ctfs-large" => super::ctfs::large(ctx),
        "ctfs-atomic" => super::ctfs_atomic::run(ctx),
        "ctfs-ycsb" => super::ycsb::run(ctx),
        _ => Err(fail(format!("unknown experiment {name}"))),
    }
}

pub fn size_label(b: u64) -> String {
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{} GiB", b >> 30)
    } else if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else {
        format!("{} KiB", b >> 10)
    }
}

fn labels(kind: &str, op: OpKind, cache: &str, x: &str) -> Value {
    json!({ "mapping": kind, "op": op.name(), "cache": cache, "x": x })
}

/// An image for a file of `file_bytes` plus the appends of one hot trial.
fn image_for(ctx: &Ctx, file_bytes: u64) -> u64 {
    roomy_image(file_bytes + ctx.scale.hot_ops as u64 * BLOCK)
}

/// How [`roomy_image`] sizes images, for the JSON.
const IMAGE_SIZING: &str = "4x the data (25% full), at most max(8 GiB, 2x the data)";

/// An image for `data` bytes of files that stays mostly empty, as in the paper's
/// experiments other than §4.5 ("a mostly empty file system"; the load of a global table
/// changes its cost, which §4.5 measures on its own): four times the data, but at most
/// max(8 GiB, twice the data) so the largest points fit this machine's memory.
fn roomy_image(data: u64) -> u64 {
    (4 * data).min((2 * data).max(8 << 30)) + (64 << 20)
}

/// `trials` cold operations of each kind (appends are truncated away after each), after
/// one unmeasured operation of the kind: the first operation on a new image pays one-time
/// costs (up to 100x a cold operation) that no later one does.
fn cold_points(r: &mut Runner, kind: &str, x: &str, ops: &[OpKind], trials: usize) -> Result<Vec<Value>, Failure> {
    let mut out = Vec::new();
    for &op in ops {
        r.cold(op)?;
        if op == OpKind::Append {
            r.reset_size()?;
        }
        let mut v = Vec::with_capacity(trials);
        for _ in 0..trials {
            v.push(r.cold(op)?);
            if op == OpKind::Append {
                r.reset_size()?;
            }
        }
        out.push(point(labels(kind, op, "cold", x), &v));
    }
    Ok(out)
}

/// `trials` runs of `n` operations in a row of each kind.
fn hot_points(
    r: &mut Runner,
    kind: &str,
    x: &str,
    ops: &[OpKind],
    trials: usize,
    n: usize,
) -> Result<Vec<Value>, Failure> {
    let mut out = Vec::new();
    for &op in ops {
        let mut v = Vec::with_capacity(trials);
        for _ in 0..trials {
            v.push(r.hot(op, n)?);
            if op == OpKind::Append {
                r.reset_size()?;
            }
        }
        out.push(point(labels(kind, op, "hot", x), &v));
    }
    Ok(out)
}

fn locality(ctx: &Ctx) -> Result<Report, Failure> {
    let s = ctx.scale;
    let mut points = Vec::new();
    let mut measured = serde_json::Map::new();
    let x = size_label(s.file_bytes);
    for kind in ctx.kinds() {
        let t = Target::new(ctx, kind, DEFAULT_SCORE, image_for(ctx, s.file_bytes))?;
        let f = t.fill("/file", s.file_bytes)?;
        measured.insert(kind.name().into(), json!(t.layout_score()));
        let mut r = Runner::new(ctx, &t.fs, &f, BLOCK)?;
        points.extend(cold_points(&mut r, kind.name(), &x, &OpKind::ALL, s.trials)?);
        points.extend(hot_points(&mut r, kind.name(), &x, &OpKind::ALL, s.trials, s.hot_ops)?);
    }
    Ok(Report {
        config: json!({ "image_sizing": IMAGE_SIZING, "file_bytes": s.file_bytes, "io_bytes": BLOCK, "layout_score": DEFAULT_SCORE,
            "measured_layout_score": measured, "trials": s.trials, "hot_ops_per_trial": s.hot_ops }),
        scale_note: if s.hot_ops < 100_000 {
            format!("hot runs of {} operations per trial (paper: 100,000)", s.hot_ops)
        } else {
            String::new()
        },
        points,
    })
}

fn fragmentation(ctx: &Ctx) -> Result<Report, Failure> {
    let s = ctx.scale;
    let mut points = Vec::new();
    let mut measured = serde_json::Map::new();
    for score in [1.0, 0.7] {
        let x = format!("layout {score:.1}");
        for kind in ctx.kinds() {
            let t = Target::new(ctx, kind, score, image_for(ctx, s.file_bytes))?;
            let f = t.fill("/file", s.file_bytes)?;
            measured.insert(format!("{} {x}", kind.name()), json!(t.layout_score()));
            let mut r = Runner::new(ctx, &t.fs, &f, BLOCK)?;
            points.extend(cold_points(&mut r, kind.name(), &x, &OpKind::ALL, s.trials)?);
        }
    }
    Ok(Report {
        config: json!({ "image_sizing": IMAGE_SIZING, "file_bytes": s.file_bytes, "io_bytes": BLOCK, "layout_scores": [1.0, 0.7],
            "measured_layout_score": measured, "trials": s.trials }),
        scale_note: String::new(),
        points,
    })
}

fn filesize(ctx: &Ctx) -> Result<Report, Failure> {
    let s = ctx.scale;
    let sizes = [4 << 10, 4 << 20, s.big_file_bytes];
    let mut points = Vec::new();
    for &size in &sizes {
        let x = size_label(size);
        for kind in ctx.kinds() {
            let t = Target::new(ctx, kind, DEFAULT_SCORE, image_for(ctx, size))?;
            let f = t.fill("/file", size)?;
            let mut r = Runner::new(ctx, &t.fs, &f, BLOCK)?;
            points.extend(cold_points(&mut r, kind.name(), &x, &OpKind::ALL, s.trials)?);
        }
    }
    Ok(Report {
        config: json!({ "image_sizing": IMAGE_SIZING, "file_bytes": sizes, "io_bytes": BLOCK, "layout_score": DEFAULT_SCORE, "trials": s.trials }),
        scale_note: if s.big_file_bytes < 4 << 30 {
            format!("largest file {} (paper: 4 GiB)", size_label(s.big_file_bytes))
        } else {
            String::new()
        },
        points,
    })
}

fn iosize(ctx: &Ctx) -> Result<Report, Failure> {
    let s = ctx.scale;
    let ios = [4 << 10, 64 << 10, 1 << 20];
    let mut points = Vec::new();
    for kind in ctx.kinds() {
        let t = Target::new(ctx, kind, DEFAULT_SCORE, image_for(ctx, s.file_bytes))?;
        let f = t.fill("/file", s.file_bytes)?;
        for &io in &ios {
            let mut r = Runner::new(ctx, &t.fs, &f, io)?;
            points.extend(cold_points(&mut r, kind.name(), &size_label(io), &OpKind::ALL, s.trials)?);
        }
    }
    Ok(Report {
        config: json!({ "image_sizing": IMAGE_SIZING, "file_bytes": s.file_bytes, "io_bytes": ios, "layout_score": DEFAULT_SCORE, "trials": s.trials }),
        scale_note: String::new(),
        points,
    })
}

fn utilization(ctx: &Ctx) -> Result<Report, Failure> {
    let s = ctx.scale;
    let levels = [0.80, 0.90, 0.95];
    let mut points = Vec::new();
    let mut rng = SmallRng::seed_from_u64(11);
    for kind in ctx.kinds() {
        let t = Target::new(ctx, kind, DEFAULT_SCORE, s.util_image_bytes)?;
        t.fs.create_dir(Path::new("/u"), 0o755)?;
        let mut files = Vec::new();
        let mut failed: Option<String> = None;
        for &level in &levels {
            let x = format!("{:.0}%", level * 100.0);
            // Fill to the level with files of util_file_bytes.
            while failed.is_none() {
                let st = t.fs.statfs();
                let used = 1.0 - st.blocks_free as f64 / st.blocks_total as f64;
                if used >= level {
                    break;
                }
                let left = ((level - used) * st.blocks_total as f64) as u64 * BLOCK;
                let bytes = s.util_file_bytes.min(left.max(BLOCK));
                match t.fill(&format!("/u/f{:06}", files.len()), bytes) {
                    Ok(f) => files.push(f),
                    Err(e) => failed = Some(format!("filling to {x}: {}", e.msg)),
                }
            }
            if let Some(err) = &failed {
                for op in OpKind::ALL {
                    let mut p = labels(kind.name(), op, "cold", &x);
                    p["error"] = json!(err);
                    points.push(p);
                }
                continue;
            }
            let st = t.fs.statfs();
            let used = 1.0 - st.blocks_free as f64 / st.blocks_total as f64;
            for op in OpKind::ALL {
                // One unmeasured operation first, as in `cold_points`.
                let mut w = Runner::new(ctx, &t.fs, &files[0], BLOCK)?;
                w.cold(op)?;
                if op == OpKind::Append {
                    w.reset_size()?;
                }
                let mut v: Vec<Sample> = Vec::with_capacity(s.trials);
                for _ in 0..s.trials {
                    // One cold operation on a random (whole) file.
                    let f = &files[rng.random_range(0..files.len().saturating_sub(1).max(1))];
                    let mut r = Runner::new(ctx, &t.fs, f, BLOCK)?;
                    if op == OpKind::SeqRead {
                        r.rng = SmallRng::seed_from_u64(rng.random());
                        r.op(OpKind::RandRead)?;
                    }
                    v.push(r.cold(op)?);
                    if op == OpKind::Append {
                        r.reset_size()?;
                    }
                }
                let mut p = point(labels(kind.name(), op, "cold", &x), &v);
                p["measured_utilization"] = json!(used);
                points.push(p);
            }
        }
    }
    Ok(Report {
        config: json!({ "image_bytes": s.util_image_bytes, "file_bytes": s.util_file_bytes, "io_bytes": BLOCK,
            "levels": levels, "layout_score": DEFAULT_SCORE, "trials": s.trials }),
        scale_note: format!("{} image (paper: 128 GiB)", size_label(s.util_image_bytes)),
        points,
    })
}

fn concurrency(ctx: &Ctx) -> Result<Report, Failure> {
    let s = ctx.scale;
    let threads = [1usize, 2, 4, 8];
    let mut points = Vec::new();
    let appends = 8 * s.conc_ops as u64 * BLOCK;
    for kind in ctx.kinds() {
        let t = Target::new(ctx, kind, DEFAULT_SCORE, roomy_image(s.file_bytes + appends))?;
        let f = t.fill("/file", s.file_bytes)?;
        let base = Runner::new(ctx, &t.fs, &f, BLOCK)?;
        for &n in &threads {
            let x = format!("{n} threads");
            let mut reads = Vec::new();
            let mut apps = Vec::new();
            for trial in 0..s.trials {
                let per: Vec<Result<(Sample, Sample), Failure>> = std::thread::scope(|sc| {
                    let hs: Vec<_> = (0..n)
                        .map(|i| {
                            let (fs, f) = (&t.fs, &f);
                            sc.spawn(move || -> Result<(Sample, Sample), Failure> {
                                let mut r = Runner::new(ctx, fs, f, BLOCK)?;
                                r.blocks = base.blocks;
                                r.rng = SmallRng::seed_from_u64((trial * 64 + i) as u64);
                                let mut a = (Sample::default(), Sample::default());
                                for _ in 0..s.conc_ops {
                                    let x = r.op(OpKind::RandRead)?;
                                    let y = r.op(OpKind::Append)?;
                                    a.0 += x;
                                    a.1 += y;
                                }
                                Ok(a)
                            })
                        })
                        .collect();
                    hs.into_iter()
                        .map(|h| h.join().unwrap_or_else(|_| Err(fail("a benchmark thread panicked"))))
                        .collect()
                });
                let total = (n * s.conc_ops) as f64;
                let mut sum = (Sample::default(), Sample::default());
                for r in per {
                    let (a, b) = r?;
                    sum.0 += a;
                    sum.1 += b;
                }
                reads.push(sum.0.per(total));
                apps.push(sum.1.per(total));
                base.reset_size()?;
            }
            points.push(point(labels(kind.name(), OpKind::RandRead, "hot", &x), &reads));
            points.push(point(labels(kind.name(), OpKind::Append, "hot", &x), &apps));
        }
    }
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    Ok(Report {
        config: json!({ "image_sizing": IMAGE_SIZING, "file_bytes": s.file_bytes, "io_bytes": BLOCK, "threads": threads,
            "ops_per_thread_per_trial": s.conc_ops, "layout_score": DEFAULT_SCORE, "trials": s.trials, "cores": cores }),
        scale_note: format!("{cores} cores: more than {cores} threads time-share them"),
        points,
    })
}

fn pagecache(ctx: &Ctx) -> Result<Report, Failure> {
    let s = ctx.scale;
    let trials = 10;
    let mut points = Vec::new();
    let x = format!("{} ops", trials * s.pagecache_ops);
    for kind in ctx.only([MappingKind::ExtentTree, MappingKind::ExtentTreeCached]) {
        let appends = s.pagecache_ops as u64 * BLOCK;
        let t = Target::new(ctx, kind, DEFAULT_SCORE, roomy_image(s.file_bytes + appends))?;
        let f = t.fill("/file", s.file_bytes)?;
        let mut r = Runner::new(ctx, &t.fs, &f, BLOCK)?;
        points.extend(hot_points(
            &mut r,
            kind.name(),
            &x,
            &[OpKind::RandRead, OpKind::Append],
            trials,
            s.pagecache_ops,
        )?);
    }
    Ok(Report {
        config: json!({ "image_sizing": IMAGE_SIZING, "file_bytes": s.file_bytes, "io_bytes": BLOCK, "trials": trials,
            "ops_per_trial": s.pagecache_ops, "layout_score": DEFAULT_SCORE }),
        scale_note: if trials * s.pagecache_ops < 1_000_000 {
            format!("{} operations (paper: 1,000,000)", trials * s.pagecache_ops)
        } else {
            String::new()
        },
        points,
    })
}

/// SPFS Fig. 7: files filled round-robin one extent at a time (so that no two extents of
/// a file are adjacent and each stays separate), at layout score 1.0.
fn spfs_extents(ctx: &Ctx) -> Result<Report, Failure> {
    let s = ctx.scale;
    use hashfs::testing::ExtentLookup::{Every, Fast};
    let variants: [(&str, MappingKind, hashfs::testing::ExtentLookup); 4] = [
        ("extent-tree", MappingKind::ExtentTree, Every),
        ("hashfs", MappingKind::HashFs, Every),
        ("extent-hash", MappingKind::ExtentHash, Every),
        ("extent-hash+fast", MappingKind::ExtentHash, Fast),
    ];
    let extents: [u64; 6] = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20];
    let trials = s.trials.max(10);
    let mut points = Vec::new();
    let mut rng = SmallRng::seed_from_u64(3);
    for &e in &extents {
        let x = size_label(e);
        for (name, kind, lookup) in variants.into_iter().filter(|v| ctx.has(v.1)) {
            let data = s.spfs_files * s.spfs_file_bytes;
            let t = Target::new(ctx, kind.into(), 1.0, roomy_image(data))?;
            if kind == MappingKind::ExtentHash {
                hashfs::testing::set_extent_lookup(&t.fs, lookup)?;
            }
            let files: Vec<_> = (0..s.spfs_files).map(|i| t.fill(&format!("/f{i}"), 0)).collect::<Result<_, _>>()?;
            let buf = vec![0x77u8; e as usize];
            let mut ins = Vec::new();
            for _ in 0..s.spfs_file_bytes / e {
                for f in &files {
                    let _ = probe::take();
                    f.append(&buf).map_err(|err| fail(format!("{name}: appending a {x} extent: {err}")))?;
                    let c = probe::take();
                    ins.push(ctx.correct(0, c));
                }
            }
            // Trials: the fill in ten consecutive parts, in order.
            let part = ins.len().div_ceil(trials).max(1);
            let tri: Vec<Sample> = ins
                .chunks(part)
                // Inserts have no enclosing IO measurement.
                .map(|c| Sample { io: 0.0, ..Sample::mean(c) })
                .collect();
            let mut p = point(json!({ "mapping": name, "op": "insert", "cache": "hot", "x": x }), &tri);
            p["extents"] = json!(ins.len());
            points.push(p);
            let mut look = Vec::new();
            for _ in 0..trials {
                let mut sum = Sample::default();
                for _ in 0..s.spfs_lookups {
                    let f = &files[rng.random_range(0..files.len())];
                    let mut r = Runner::new(ctx, &t.fs, f, BLOCK)?;
                    r.rng = SmallRng::seed_from_u64(rng.random());
                    sum += r.op(OpKind::RandRead)?;
                }
                look.push(sum.per(s.spfs_lookups as f64));
            }
            points.push(point(json!({ "mapping": name, "op": "lookup", "cache": "hot", "x": x }), &look));
        }
    }
    Ok(Report {
        config: json!({ "image_sizing": IMAGE_SIZING, "files": s.spfs_files, "file_bytes": s.spfs_file_bytes, "extent_bytes": extents,
            "layout_score": 1.0, "lookups_per_trial": s.spfs_lookups, "trials": trials,
            "insert_trials": "the inserts in ten consecutive parts, in order" }),
        scale_note: format!(
            "{} files of {} (paper: 8,000 files of 256 MiB)",
            s.spfs_files,
            size_label(s.spfs_file_bytes)
        ),
        points,
    })
}
