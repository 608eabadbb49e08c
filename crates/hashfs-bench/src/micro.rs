//! `hashfs-bench micro`: single-thread file operations, each on three targets measured in
//! interleaved rounds (every round runs every operation on hashfs, limit, tmpfs in turn):
//! - `hashfs`: the library's file API on a mapped image;
//! - `limit`: the least durable work the operation needs, on the same mapped image and
//!   the same physical blocks, with no file system: a read is the copy (a 1 MiB read
//!   fetches each block's successor's first lines during its copy, as HashFS's reads do,
//!   since 2026-12-05); an overwrite the copy (streaming stores) and a fence; an append, a
//!   create or an allocating write the copy and a fence, then one 8-byte metadata store,
//!   its flush and a fence;
//! - `tmpfs`: the same operations with system calls on a tmpfs directory (volatile).
//!
//! The limit writes the benchmark file's own physical blocks (translated before timing),
//! so it scribbles over file contents of a scratch image, never over metadata. The image
//! is formatted as `mkfs` does (preallocated) and its mapping faulted in before timing, as
//! `hashfs mount` leaves it once its background pass is done; `--cold` skips that (every
//! first write to a page pays a fault), `--sparse` formats it sparse (and skips it too:
//! every first write to a page pays the host's allocation as well). `--limit-drain` ends
//! each limit's last fence with a locked instruction: where `sfence` only orders streaming
//! stores (an AMD host: a 4 KiB overwrite's limit 198 ns without, 329 with,
//! `bench/results/micro/limit-drain/`), the limit's stores would otherwise drain while the next
//! operation runs, and a file system pays that drain at its next lock.

#![forbid(unsafe_code)]

use super::{cpu_model, git_commit, image_mount, mean_ci, Samples};
use crate::{fail, Failure};
use hashfs::pm::{DevOffset, MmapDevice, OpenMode, PmDevice};
use hashfs::{File, FileSystem, FormatOptions, HashPlacement, OpenOptions};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use serde_json::json;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const BLOCK: usize = 4096;
const MIB: usize = 1 << 20;
/// A small log record.
const RECORD: usize = 100;
const TARGETS: [&str; 3] = ["hashfs", "limit", "tmpfs"];

/// What `hashfs-bench micro` measures, and where.
pub struct Options {
    pub quick: bool,
    pub json: Option<PathBuf>,
    pub image: PathBuf,
    pub tmpfs_dir: PathBuf,
    /// Format the image sparse (`mkfs --sparse`): writes pay the host's first touch.
    pub sparse: bool,
    /// Only these operations (every one when empty).
    pub only: Vec<String>,
    /// Do not fault the mapping in before timing.
    pub cold: bool,
    /// The limits' last fence is followed by a locked instruction (`--limit-drain`).
    pub limit_drain: bool,
    /// HashFS's placement of the image.
    pub placement: HashPlacement,
}

struct Config {
    file_bytes: u64,
    image_bytes: u64,
    rounds: usize,
    /// 4 KiB operations per target per round.
    small_ops: usize,
    /// 1 MiB operations per target per round.
    large_ops: usize,
    /// Files created per target per round.
    files: usize,
    /// A growing file (append, allocating write) is deleted, untimed, at this size.
    grow_limit: u64,
}

/// One operation on one target: runs it once and returns the nanoseconds it took (any
/// untimed preparation happens inside, outside the timed part).
type Step<'a> = Box<dyn FnMut() -> u64 + 'a>;

/// `--limit-drain`: each limit's last fence is followed by one locked instruction.
static LIMIT_DRAIN: AtomicBool = AtomicBool::new(false);
static DRAINED: AtomicU64 = AtomicU64::new(0);

/// A limit's last fence; with `--limit-drain`, then a locked instruction, which waits for
/// the stores before it to drain (an `sfence` may only order streaming stores).
fn limit_fence(dev: &MmapDevice) {
    dev.fence();
    if LIMIT_DRAIN.load(Ordering::Relaxed) {
        DRAINED.fetch_add(1, Ordering::SeqCst);
    }
}

fn timed(f: impl FnOnce()) -> u64 {
    let t = Instant::now();
    f();
    t.elapsed().as_nanos() as u64
}

/// The operations, in the order they run.
const OPS: [&str; 8] = [
    "randread_4k",
    "overwrite_4k",
    "append_4k",
    "append_100b",
    "create_write_close_4k",
    "seqread_1m",
    "overwrite_1m",
    "alloc_write_1m",
];

pub fn run(o: &Options) -> Result<(), Failure> {
    if let Some(unknown) = o.only.iter().find(|n| !OPS.contains(&n.as_str())) {
        return Err(fail(format!("bench micro: no operation {unknown} (known: {})", OPS.join(", "))));
    }
    LIMIT_DRAIN.store(o.limit_drain, Ordering::Relaxed);
    let cfg = if o.quick {
        Config {
            file_bytes: 256 << 20,
            image_bytes: 1 << 30,
            rounds: 5,
            small_ops: 4_000,
            large_ops: 32,
            files: 1_000,
            grow_limit: 64 << 20,
        }
    } else {
        Config {
            file_bytes: 1 << 30,
            image_bytes: 4 << 30,
            rounds: 10,
            small_ops: 20_000,
            large_ops: 128,
            files: 5_000,
            grow_limit: 256 << 20,
        }
    };
    let tmp = o.tmpfs_dir.join(format!("hashfs-bench-tmpfs-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| fail(format!("{}: {e}", tmp.display())))?;
    let result = run_in(&cfg, o, &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = std::fs::remove_file(&o.image);
    result
}

/// A file that grows by `step` bytes per operation and starts over (deleted, untimed)
/// when it reaches the limit: on HashFS and on tmpfs.
struct Growing<'a> {
    fs: &'a FileSystem<MmapDevice>,
    path: String,
    file: Option<File<MmapDevice>>,
    pos: u64,
}

impl Growing<'_> {
    fn next(&mut self, limit: u64, step: u64) -> (&File<MmapDevice>, u64) {
        if self.file.is_none() || self.pos + step > limit {
            self.file = None;
            let _ = self.fs.remove_file(Path::new(&self.path));
            let mut opts = OpenOptions::new();
            opts.read(true).write(true).create(true);
            self.file = Some(self.fs.open_file(Path::new(&self.path), &opts).expect("create benchmark file"));
            self.pos = 0;
        }
        let pos = self.pos;
        self.pos += step;
        (self.file.as_ref().expect("just opened"), pos)
    }
}

struct TmpGrowing {
    path: PathBuf,
    file: Option<std::fs::File>,
    pos: u64,
}

impl TmpGrowing {
    fn next(&mut self, limit: u64, step: u64) -> (&mut std::fs::File, u64) {
        if self.file.is_none() || self.pos + step > limit {
            self.file = Some(std::fs::File::create(&self.path).expect("create tmpfs file"));
            self.pos = 0;
        }
        let pos = self.pos;
        self.pos += step;
        (self.file.as_mut().expect("just opened"), pos)
    }
}

/// Appends of `rec` to a growing file named `name`: on HashFS (the library's `append`)
/// and on tmpfs (`write` with `O_APPEND` semantics: the file's own position).
fn appends<'a>(
    fs: &'a FileSystem<MmapDevice>,
    tmp: &Path,
    name: &'static str,
    rec: &'a [u8],
    limit: u64,
) -> [Step<'a>; 2] {
    let mut h = Growing { fs, path: format!("/{name}"), file: None, pos: 0 };
    let mut t = TmpGrowing { path: tmp.join(name), file: None, pos: 0 };
    let n = rec.len();
    [
        Box::new(move || {
            let (file, _) = h.next(limit, n as u64);
            timed(|| assert_eq!(file.append(rec).expect("append").0, n))
        }),
        Box::new(move || {
            let (file, _) = t.next(limit, n as u64);
            timed(|| file.write_all(rec).expect("append"))
        }),
    ]
}

fn run_in(cfg: &Config, o: &Options, tmp: &Path) -> Result<(), Failure> {
    let fmt = FormatOptions { preallocate: !o.sparse, placement: o.placement, ..FormatOptions::default() };
    let t = Instant::now();
    FileSystem::format_file(&o.image, cfg.image_bytes, &fmt, &|_, _| {})?;
    let mkfs_ms = t.elapsed().as_millis() as u64;
    let dev = Arc::new(MmapDevice::open(&o.image, OpenMode::Existing)?);
    let populate = !o.sparse && !o.cold;
    if populate {
        dev.populate().map_err(|e| fail(format!("populating {}: {e}", o.image.display())))?;
    }
    let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {})?;
    let geo = fs.geometry();
    let blocks = cfg.file_bytes / BLOCK as u64;
    let n_ops = cfg.rounds * cfg.small_ops;
    let mut rng = SmallRng::seed_from_u64(1);
    let offsets: Vec<u64> = (0..n_ops).map(|_| rng.random_range(0..blocks) * BLOCK as u64).collect();
    let chunk = vec![0xC3u8; MIB];
    let wbuf = vec![0x5Au8; BLOCK];

    // The benchmark file, the same size on both file systems.
    let f = fs.open_file(Path::new("/bench"), OpenOptions::new().read(true).write(true).create(true))?;
    let tf = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(tmp.join("bench"))?;
    for m in 0..cfg.file_bytes >> 20 {
        f.write_at(m << 20, &chunk)?;
        tf.write_all_at(&chunk, m << 20)?;
    }
    // The limit copies exactly the physical blocks that hold the HashFS file.
    let ino = f.ino();
    let block_of: Vec<DevOffset> = (0..blocks)
        .map(|b| match fs.physical_block(ino, hashfs::Lblk(b)) {
            Ok(Some(e)) => Ok(geo.block_off(e.pblk)),
            _ => Err(std::io::Error::other(format!("block {b} of the benchmark file is not mapped"))),
        })
        .collect::<Result<_, _>>()?;
    let phys_random: Vec<DevOffset> = offsets.iter().map(|&o| block_of[(o / BLOCK as u64) as usize]).collect();
    // The limit's metadata word: the last 8 bytes of the file's last block.
    let meta = block_of[blocks as usize - 1] + (BLOCK as u64 - 8);
    let meta_store = |v: u64| {
        dev.store_u64(meta, v);
        dev.flush(meta, 8);
        limit_fence(&dev);
    };
    let blocks_per_mib = (MIB / BLOCK) as u64;
    let mibs = cfg.file_bytes / MIB as u64;
    fs.create_dir(Path::new("/small"), 0o755)?;
    std::fs::create_dir_all(tmp.join("small"))?;

    let fs = &fs;
    let dev = &*dev;
    let (f, tf, wbuf, chunk, offsets, phys_random, block_of) =
        (&f, &tf, &wbuf, &chunk, &offsets, &phys_random, &block_of);
    let meta_store = &meta_store;
    // A cursor per target (every step advances its own).
    let cursor = || {
        let mut i = 0usize;
        move || {
            i += 1;
            i - 1
        }
    };
    let seq_block = move |i: usize| block_of[i % block_of.len()];
    // The limit of an operation that writes a new 4 KiB block and persists one word for it
    // (an append, a create): a step with its own cursor over the file's blocks.
    let new_block_limit = move || -> Step {
        let mut b = cursor();
        Box::new(move || {
            let i = b();
            timed(|| {
                dev.write_nt(seq_block(i), wbuf);
                dev.fence();
                meta_store(i as u64);
            })
        })
    };
    // The limit's 1 MiB write: the file's 256 blocks from `first`, streamed, one fence.
    let write_mib = move |first: u64| {
        for (k, piece) in chunk.chunks(BLOCK).enumerate() {
            dev.write_nt(block_of[(first + k as u64) as usize], piece);
        }
        limit_fence(dev);
    };
    let mut ops: Vec<(&str, [Step; 3])> = Vec::new();
    {
        let (mut a, mut b, mut c) = (cursor(), cursor(), cursor());
        let (mut b0, mut b1, mut b2) = (vec![0u8; BLOCK], vec![0u8; BLOCK], vec![0u8; BLOCK]);
        ops.push((
            "randread_4k",
            [
                Box::new(move || {
                    let o = offsets[a()];
                    timed(|| assert_eq!(f.read_at(o, &mut b0).expect("read"), b0.len()))
                }),
                Box::new(move || {
                    let p = phys_random[b()];
                    timed(|| dev.read(p, &mut b1))
                }),
                Box::new(move || {
                    let o = offsets[c()];
                    timed(|| tf.read_exact_at(&mut b2, o).expect("pread"))
                }),
            ],
        ));
    }
    {
        let (mut a, mut b, mut c) = (cursor(), cursor(), cursor());
        ops.push((
            "overwrite_4k",
            [
                Box::new(move || {
                    let o = offsets[a()];
                    timed(|| assert_eq!(f.write_at(o, wbuf).expect("write"), BLOCK))
                }),
                Box::new(move || {
                    let p = phys_random[b()];
                    timed(|| {
                        dev.write_nt(p, wbuf);
                        limit_fence(dev);
                    })
                }),
                Box::new(move || {
                    let o = offsets[c()];
                    timed(|| tf.write_all_at(wbuf, o).expect("pwrite"))
                }),
            ],
        ));
    }
    let limit = cfg.grow_limit;
    {
        let [h, t] = appends(fs, tmp, "append", wbuf, limit);
        ops.push(("append_4k", [h, new_block_limit(), t]));
    }
    {
        // Small records, as a write-ahead log appends them (LevelDB's, RocksDB's): most
        // land inside the file's last block.
        let [h, t] = appends(fs, tmp, "log", &wbuf[..RECORD], limit);
        let mut b = cursor();
        let rec = &wbuf[..RECORD];
        ops.push((
            "append_100b",
            [
                h,
                Box::new(move || {
                    let i = b();
                    let at = seq_block(i / 40) + (i % 40 * RECORD) as u64;
                    timed(|| {
                        dev.write(at, rec);
                        dev.flush(at, RECORD as u64);
                        dev.fence();
                        meta_store(i as u64);
                    })
                }),
                t,
            ],
        ));
    }
    {
        let (mut a, mut c) = (cursor(), cursor());
        let small = tmp.join("small");
        ops.push((
            "create_write_close_4k",
            [
                Box::new(move || {
                    let p = format!("/small/f{:07}", a());
                    timed(|| {
                        let g =
                            fs.open_file(Path::new(&p), OpenOptions::new().write(true).create(true)).expect("create");
                        g.write_at(0, wbuf).expect("write");
                    })
                }),
                new_block_limit(),
                Box::new(move || {
                    let p = small.join(format!("f{:07}", c()));
                    timed(|| {
                        let mut g = std::fs::File::create(&p).expect("create");
                        g.write_all(wbuf).expect("write");
                    })
                }),
            ],
        ));
    }
    {
        let (mut a, mut b, mut c) = (cursor(), cursor(), cursor());
        let (mut b0, mut b1, mut b2) = (vec![0u8; MIB], vec![0u8; MIB], vec![0u8; MIB]);
        ops.push((
            "seqread_1m",
            [
                Box::new(move || {
                    let o = (a() as u64 % mibs) * MIB as u64;
                    timed(|| assert_eq!(f.read_at(o, &mut b0).expect("read"), b0.len()))
                }),
                Box::new(move || {
                    let first = (b() as u64 % mibs) * blocks_per_mib;
                    timed(|| {
                        // Each block's successor's first lines fetched during its copy, as
                        // HashFS's reads do (`NEXT_RUN_PREFETCH_LINES`).
                        for (k, piece) in b1.chunks_mut(BLOCK).enumerate() {
                            if k + 1 < MIB / BLOCK {
                                let next = block_of[(first + k as u64 + 1) as usize];
                                dev.prefetch_lines(next, hashfs::NEXT_RUN_PREFETCH_LINES);
                            }
                            dev.read(block_of[(first + k as u64) as usize], piece);
                        }
                    })
                }),
                Box::new(move || {
                    let o = (c() as u64 % mibs) * MIB as u64;
                    timed(|| tf.read_exact_at(&mut b2, o).expect("pread"))
                }),
            ],
        ));
    }
    {
        let (mut a, mut b, mut c) = (cursor(), cursor(), cursor());
        ops.push((
            "overwrite_1m",
            [
                Box::new(move || {
                    let o = (a() as u64 % mibs) * MIB as u64;
                    timed(|| assert_eq!(f.write_at(o, chunk).expect("write"), MIB))
                }),
                Box::new(move || {
                    let first = (b() as u64 % mibs) * blocks_per_mib;
                    timed(|| write_mib(first))
                }),
                Box::new(move || {
                    let o = (c() as u64 % mibs) * MIB as u64;
                    timed(|| tf.write_all_at(chunk, o).expect("pwrite"))
                }),
            ],
        ));
    }
    {
        let mut h = Growing { fs, path: "/alloc".into(), file: None, pos: 0 };
        let mut b = cursor();
        let mut t = TmpGrowing { path: tmp.join("alloc"), file: None, pos: 0 };
        ops.push((
            "alloc_write_1m",
            [
                Box::new(move || {
                    let (file, pos) = h.next(limit, MIB as u64);
                    timed(|| assert_eq!(file.write_at(pos, chunk).expect("write"), MIB))
                }),
                Box::new(move || {
                    let first = (b() as u64 % mibs) * blocks_per_mib;
                    timed(|| {
                        write_mib(first);
                        meta_store(first);
                    })
                }),
                Box::new(move || {
                    let (file, pos) = t.next(limit, MIB as u64);
                    timed(|| file.write_all_at(chunk, pos).expect("pwrite"))
                }),
            ],
        ));
    }

    debug_assert!(ops.iter().map(|(n, _)| *n).eq(OPS.iter().copied()), "OPS names every operation in order");
    if !o.only.is_empty() {
        ops.retain(|(name, _)| o.only.iter().any(|n| n == name));
    }
    // Rounds: every operation, every target in turn.
    let per_round = |op: &str| match op {
        "create_write_close_4k" => cfg.files,
        o if o.ends_with("_1m") => cfg.large_ops,
        _ => cfg.small_ops,
    };
    // samples[op][target][round]
    let mut samples: Vec<[Vec<Samples>; 3]> = ops.iter().map(|_| Default::default()).collect();
    for _ in 0..cfg.rounds {
        for (k, (name, steps)) in ops.iter_mut().enumerate() {
            let n = per_round(name);
            for (t, step) in steps.iter_mut().enumerate() {
                samples[k][t].push(Samples((0..n).map(|_| step()).collect()));
            }
        }
    }
    let names: Vec<&str> = ops.iter().map(|(n, _)| *n).collect();
    drop(ops);
    report(cfg, o, dev, mkfs_ms, populate, &names, &samples)
}

/// Prints the table and writes the JSON: per operation and target the mean of the round
/// medians with its 95% interval over rounds, the pooled p99, and the ratios to the limit
/// and to tmpfs computed per round (paired: the targets of a round ran back to back).
fn report(
    cfg: &Config,
    o: &Options,
    dev: &MmapDevice,
    mkfs_ms: u64,
    populated: bool,
    names: &[&str],
    samples: &[[Vec<Samples>; 3]],
) -> Result<(), Failure> {
    let simd = hashfs::simd_kind().name();
    let flush = dev.flush_kind().name();
    let commit = git_commit();
    let mount = image_mount(o.image.parent().unwrap_or(Path::new("/")));
    let page = if mount.contains("huge=always") || dev.is_map_sync() { "2M" } else { "4K" };
    println!(
        "# hashfs-bench micro{}: single thread, {} interleaved rounds of {} 4 KiB ops, {} 1 MiB ops, {} files",
        if o.quick { " --quick" } else { "" },
        cfg.rounds,
        cfg.small_ops,
        cfg.large_ops,
        cfg.files
    );
    println!(
        "# image {} ({} MiB, {}, {}populated; mounted on {mount}; page size {page}; MAP_SYNC {}), tmpfs dir {}",
        o.image.display(),
        cfg.image_bytes >> 20,
        if o.sparse { "sparse" } else { "preallocated" },
        if populated { "" } else { "not " },
        dev.is_map_sync(),
        o.tmpfs_dir.display()
    );
    println!(
        "# cpu {}, flush {flush}, simd {simd}, commit {commit}, mkfs {mkfs_ms} ms, placement {}",
        cpu_model(),
        o.placement.name()
    );
    if o.limit_drain {
        println!("# --limit-drain: each limit's last fence is followed by a locked instruction");
    }
    println!(
        "{:<22} {:<7} {:>16} {:>9} {:>16} {:>16}",
        "operation", "target", "median_ns ±95%", "p99_ns", "vs limit", "vs tmpfs"
    );
    let mut json_results = serde_json::Map::new();
    for (k, op) in names.iter().enumerate() {
        let round_medians = |t: usize| -> Vec<f64> { samples[k][t].iter().map(|s| s.median() as f64).collect() };
        let med: Vec<Vec<f64>> = (0..3).map(round_medians).collect();
        let ratio = |t: usize, base: usize| -> (f64, f64) {
            mean_ci(&med[t].iter().zip(&med[base]).map(|(a, b)| a / b).collect::<Vec<_>>())
        };
        let mut jt = serde_json::Map::new();
        for (t, name) in TARGETS.iter().enumerate() {
            let pooled = Samples(samples[k][t].iter().flat_map(|s| s.0.iter().copied()).collect());
            let (m, ci) = mean_ci(&med[t]);
            let (rl, rl_ci) = ratio(t, 1);
            let (rt, rt_ci) = ratio(t, 2);
            println!(
                "{:<22} {:<7} {:>9.0} ± {:<4.0} {:>9} {:>9.2}x ± {:.2} {:>9.2}x ± {:.2}",
                op,
                name,
                m,
                ci,
                pooled.pct(99.0),
                rl,
                rl_ci,
                rt,
                rt_ci
            );
            jt.insert(
                name.to_string(),
                json!({
                    "median_ns": m, "median_ci95_ns": ci, "p99_ns": pooled.pct(99.0),
                    "ops_per_s": pooled.ops_per_s(),
                    "vs_limit": rl, "vs_limit_ci95": rl_ci, "vs_tmpfs": rt, "vs_tmpfs_ci95": rt_ci,
                    "round_medians_ns": med[t],
                }),
            );
        }
        json_results.insert(op.to_string(), serde_json::Value::Object(jt));
    }
    if let Some(path) = &o.json {
        let doc = json!({
            "benchmark": "micro",
            "config": {
                "quick": o.quick,
                "rounds": cfg.rounds,
                "small_ops_per_round": cfg.small_ops,
                "large_ops_per_round": cfg.large_ops,
                "files_per_round": cfg.files,
                "file_bytes": cfg.file_bytes,
                "image_bytes": cfg.image_bytes,
                "grow_limit_bytes": cfg.grow_limit,
                "image": o.image.display().to_string(),
                "image_mount": mount,
                "image_page_size": page,
                "sparse": o.sparse,
                "only": o.only,
                "limit_drain": o.limit_drain,
                "placement": o.placement.name(),
                "populated": populated,
                "mkfs_ms": mkfs_ms,
                "map_sync": dev.is_map_sync(),
                "tmpfs_dir": o.tmpfs_dir.display().to_string(),
                "tmpfs_mount": image_mount(&o.tmpfs_dir),
                "cpu": cpu_model(),
                "kernel": super::kernel(),
                "flush": flush,
                "simd": simd,
                "threads": 1,
                "git_commit": commit,
            },
            "results": json_results,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .map_err(|e| fail(format!("{}: {e}", path.display())))?;
        println!("# wrote {}", path.display());
    }
    Ok(())
}
