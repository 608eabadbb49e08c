//! `ctfs-ycsb`: ctFS Fig. 7, LevelDB under YCSB through the shim. The paper runs LevelDB
//! with YCSB's load A, workloads A-D and F, load E and workload E on ctFS and on other PM
//! file systems in two groups: sync/POSIX (normalized to ext4-DAX) and strict (to
//! NOVA-strict). Here every target is a HashFS image used by an unmodified LevelDB through
//! `libhashfs_preload.so` (no system call on the data path, as ctFS's user-space library),
//! one image per mapping: `ctfs`, `hashfs` and `extent-tree` (the index of ext4-DAX, which
//! needs a DAX device this machine lacks), each in the relaxed and in the strict write mode
//! (the groups), beside LevelDB on the tmpfs holding the images through system calls
//! (volatile, a reference). The driver is `apps/ycsb/leveldb_ycsb.cc`: 100-byte values,
//! YCSB's request distributions, every value read checked.
//!
//! One process per load: the first runs load A then A, B, C, D, F on one database, the
//! second load E then E on another. The targets run one after the other, their order
//! rotated from image to image; an image's figure is one run (the between-image spread is
//! the interval, as everywhere).

#![forbid(unsafe_code)]

use super::{images, Ctx, Report};
use crate::{fail, Failure};
use hashfs::pm::{MmapDevice, OpenMode};
use hashfs::{FileSystem, FormatOptions, MappingKind, WriteMode};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workloads in the order the two processes print them.
const FIRST: &str = "ABCDF";
const SECOND: &str = "E";
/// Where the shim presents each image to the driver.
const PREFIX: &str = "/hashfs-ycsb";

/// One target: a mapping and write mode through the shim, or tmpfs.
#[derive(Clone, Copy)]
enum Target {
    Shim(MappingKind, WriteMode),
    Tmpfs,
}

impl Target {
    fn labels(self) -> (&'static str, &'static str) {
        match self {
            Target::Shim(k, WriteMode::Strict) => (k.name(), "strict"),
            Target::Shim(k, WriteMode::Relaxed) => (k.name(), "relaxed"),
            Target::Tmpfs => ("tmpfs", "volatile"),
        }
    }
}

/// A tool the experiment runs: `$var`, else `name` beside this executable.
fn tool(var: &str, name: &str, how: &str) -> Result<PathBuf, Failure> {
    let path = match std::env::var_os(var) {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.join(name)))
            .unwrap_or_else(|| PathBuf::from(name)),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(fail(format!("ctfs-ycsb needs {} ({how}); set {var} to its path", path.display())))
    }
}

/// The throughputs one driver process printed: ("load", ops/s) and ("A", ops/s) ...
fn parse(out: &str) -> Vec<(String, f64)> {
    let rate = |l: &str| l.rsplit(':').next()?.split_whitespace().next()?.parse::<f64>().ok();
    out.lines()
        .filter_map(|l| {
            if l.starts_with("load ") {
                Some(("load".to_string(), rate(l)?))
            } else {
                let w = l.strip_prefix("workload ")?.split(':').next()?;
                Some((w.to_string(), rate(l)?))
            }
        })
        .collect()
}

/// Runs the driver on `db` (a path the process sees) for `workloads`; its throughputs.
fn drive(cmd: &mut Command, ycsb: &Path, db: &str, ctx: &Ctx, workloads: &str) -> Result<Vec<(String, f64)>, Failure> {
    let (records, ops) = (ctx.scale.ycsb_records.to_string(), ctx.scale.ycsb_ops.to_string());
    let o = cmd
        .arg(db)
        .args([records.as_str(), ops.as_str(), workloads])
        .output()
        .map_err(|e| fail(format!("running {}: {e}", ycsb.display())))?;
    let out = String::from_utf8_lossy(&o.stdout);
    if !o.status.success() || !out.contains("all correct") {
        let err = String::from_utf8_lossy(&o.stderr);
        return Err(fail(format!("ctfs-ycsb: the driver on {db} failed ({}): {out}{err}", o.status)));
    }
    let got = parse(&out);
    if got.len() != 1 + workloads.len() {
        return Err(fail(format!("ctfs-ycsb: unexpected driver output on {db}: {out}")));
    }
    Ok(got)
}

/// One target on one image: every workload's throughput, labelled as the paper's.
fn one(ctx: &Ctx, t: Target, shim: &Path, ycsb: &Path) -> Result<Vec<(String, f64)>, Failure> {
    let dir = ctx.image_dir.join(format!("hashfs-ycsb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| fail(format!("{}: {e}", dir.display())))?;
    let result = (|| {
        let (root, env): (String, Vec<(&str, String)>) = match t {
            Target::Tmpfs => (dir.display().to_string(), Vec::new()),
            Target::Shim(kind, mode) => {
                let image = dir.join("ycsb.img");
                let opts = FormatOptions {
                    mapping: kind,
                    hash_seed: Some(images::seed(ctx.image)),
                    journal_blocks: 64,
                    preallocate: true,
                    ..FormatOptions::default()
                };
                FileSystem::format_file(&image, ctx.scale.ycsb_image_bytes, &opts, &|_, _| {})
                    .map_err(|e| fail(format!("formatting {}: {e}", image.display())))?;
                // Every page of the image zeroed by the host once, here: PM has no first
                // touch, and hashed placement would pay it for pages the others never touch.
                MmapDevice::open(&image, OpenMode::Existing)?
                    .populate()
                    .map_err(|e| fail(format!("populating {}: {e}", image.display())))?;
                let mode = if mode == WriteMode::Strict { "strict" } else { "relaxed" };
                let env = vec![
                    ("LD_PRELOAD", shim.display().to_string()),
                    ("HASHFS_IMAGE", image.display().to_string()),
                    ("HASHFS_MOUNT", PREFIX.to_string()),
                    ("HASHFS_WRITE_MODE", mode.to_string()),
                ];
                (PREFIX.to_string(), env)
            }
        };
        let mut all = Vec::new();
        for (db, workloads, load) in [("a", FIRST, "load_a"), ("e", SECOND, "load_e")] {
            let mut cmd = Command::new(ycsb);
            cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
            let got = drive(&mut cmd, ycsb, &format!("{root}/db-{db}"), ctx, workloads)?;
            all.extend(got.into_iter().map(|(w, r)| (if w == "load" { load.to_string() } else { w }, r)));
        }
        Ok(all)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

pub fn run(ctx: &Ctx) -> Result<Report, Failure> {
    let shim = tool("HASHFS_BENCH_SHIM", "libhashfs_preload.so", "cargo build --release -p hashfs-preload")?;
    let ycsb = tool("HASHFS_BENCH_YCSB", "leveldb_ycsb", "apps/ycsb/build.sh, with g++ and libleveldb-dev")?;
    let mut targets = Vec::new();
    for mode in [WriteMode::Relaxed, WriteMode::Strict] {
        for kind in [MappingKind::Ctfs, MappingKind::HashFs, MappingKind::ExtentTree] {
            targets.push(Target::Shim(kind, mode));
        }
    }
    targets.push(Target::Tmpfs);
    let n = targets.len();
    targets.rotate_left(ctx.image % n);
    let mut points = Vec::new();
    for t in targets {
        let (mapping, mode) = t.labels();
        for (workload, ops_per_s) in one(ctx, t, &shim, &ycsb)? {
            eprintln!("# ctfs-ycsb: {mapping} {mode} {workload}: {ops_per_s:.0} ops/s");
            points.push(json!({
                "mapping": mapping,
                "mode": mode,
                "workload": workload,
                "ops_per_s": { "mean": ops_per_s, "ci95": f64::NAN, "trials": [ops_per_s] },
            }));
        }
    }
    Ok(Report {
        config: json!({
            "records": ctx.scale.ycsb_records,
            "operations_per_workload": ctx.scale.ycsb_ops,
            "value_bytes": 100,
            "image_bytes": ctx.scale.ycsb_image_bytes,
            "driver": "apps/ycsb/leveldb_ycsb.cc (Debian's LevelDB), one process for load A then A, B, C, D, F, one for load E then E",
            "shim": shim.display().to_string(),
            "image_populated": true,
        }),
        scale_note: format!(
            "{} records, {} operations per workload, 100-byte values; no ext4-DAX, NOVA or SplitFS here: the \
             extent tree stands in for ext4-DAX's index, every HashFS target runs through the same shim",
            ctx.scale.ycsb_records, ctx.scale.ycsb_ops
        ),
        points,
    })
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn the_driver_output_is_parsed() {
        let out = "load 300000 records in 1.161 s: 258357 ops/s\nworkload A: 200000 ops in 0.848 s: \
                   235908 ops/s\nworkload C: 200000 ops in 0.713 s: 280416 ops/s\nchecked 5 values, all correct\n";
        let got = parse(out);
        assert_eq!(got, vec![("load".into(), 258357.0), ("A".into(), 235908.0), ("C".into(), 280416.0)]);
    }
}
