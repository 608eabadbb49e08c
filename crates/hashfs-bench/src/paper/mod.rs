//! `hashfs-bench paper`: the file-mapping evaluation of the HashFS paper (FAST '21, §4.1-4.7)
//! and the index microbenchmark of the SPFS paper (FAST '23, Fig. 7), every mapping side by
//! side in one run.
//!
//! Method (HashFS §4): the latency of the mapping operation is counted in time-stamp-counter
//! cycles (`rdtscp`) by the IO path itself ([`hashfs::testing::probe`], cargo feature `probe`): translation, block
//! allocation, staging of structure changes, and the commit that makes an insertion
//! durable (its undo log and flushes). The latency of the whole IO operation is measured
//! around the call. The accounting's own cost is calibrated and subtracted. "Cold" runs
//! evict the file's mapping structures, inode and translation caches from the CPU caches
//! before each measured operation (`FileSystem::evict_mapping`); "hot" runs perform many
//! operations in a row. Every figure is a mean over trials with a 95% confidence interval
//! (Student's t). Each experiment writes one JSON file (machine, configuration, git commit
//! and every trial value); `bench/plot.py` draws the plots and writes `docs/results.md`.

#![forbid(unsafe_code)]

mod ctfs;
mod ctfs_atomic;
mod experiments;
mod images;
mod untorn;
mod winefs;
mod ycsb;

pub use super::mean_ci;
use super::{cpu_model, git_commit, image_mount};
use crate::{fail, Failure};
use hashfs::pm::{MmapDevice, OpenMode};
use hashfs::{testing::probe, File, FileSystem, MappingKind, OpenOptions};
use hashfs::{AllocatorKind, FormatOptions, HashPlacement};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

pub const BLOCK: u64 = 4096;

/// The experiments, in the order the papers present them.
pub const EXPERIMENTS: [(&str, &str); 16] = [
    ("locality", "HashFS §4.1 (Fig. 5): sequential/random single-block reads and appends, cold and hot"),
    ("fragmentation", "HashFS §4.2 (Fig. 6): layout score 1.0 vs 0.7, cold"),
    ("filesize", "HashFS §4.3 (Fig. 7): file sizes 4 KiB, 4 MiB, 4 GiB, cold"),
    ("iosize", "HashFS §4.4 (Fig. 8): IO sizes 4 KiB, 64 KiB, 1 MiB, share of the IO path in mapping, cold"),
    ("utilization", "HashFS §4.5 (Fig. 9): image 80/90/95% full, one cold operation per file"),
    ("concurrency", "HashFS §4.6 (Fig. 10): 1/2/4/8 threads reading and appending one file"),
    ("pagecache", "HashFS §4.7 (Fig. 11): extent tree on PM vs through a DRAM page cache"),
    ("spfs-extents", "SPFS Fig. 7: extent insert and lookup latency for extent sizes 4 KiB-4 MiB"),
    (
        "winefs-aging",
        "WineFS Figs. 1 and 3: memory-mapped write bandwidth and free aligned 2 MiB extents on fresh and aged images",
    ),
    ("winefs-2mib", "WineFS Fig. 2: map and write a 2 MiB file, on a fresh image"),
    ("untorn", "Untorn writes: strict against relaxed mode, 4 KiB-1 MiB overwrites and appends"),
    ("ctfs-pswap", "ctFS Fig. 6: pswap against memcpy, 1 page to the big file size, on the ctfs mapping"),
    ("ctfs-micro", "ctFS Table 1 and Fig. 1: six microbenchmarks, share of time in mapping, aligned allocator"),
    (
        "ctfs-large",
        "ctFS §2: 4 KiB appends and random reads on one 10 GiB file, share of time in translation, on the ctfs mapping",
    ),
    (
        "ctfs-atomic",
        "ctFS §3.3: untorn writes of 2 MiB-1 GiB by staging and pswap against relaxed ones, on ctfs; extent-tree's strict mode beside",
    ),
    (
        "ctfs-ycsb",
        "ctFS Fig. 7: LevelDB under YCSB through the shim on ctfs, hashfs and extent-tree, relaxed and strict",
    ),
];

/// Sizes and counts of one run.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    pub name: &'static str,
    /// Trials per point (>= 10).
    pub trials: usize,
    /// Operations per hot trial.
    pub hot_ops: usize,
    /// The main file (HashFS §4.1, §4.2, §4.4, §4.7: 1 GiB).
    pub file_bytes: u64,
    /// The largest file of §4.3 (paper: 4 GiB).
    pub big_file_bytes: u64,
    /// The image of §4.5 (paper: 128 GiB).
    pub util_image_bytes: u64,
    /// §4.5 file size.
    pub util_file_bytes: u64,
    /// Operations per thread per trial in §4.6.
    pub conc_ops: usize,
    /// §4.7 operations per trial (10 trials: paper 1,000,000 in all).
    pub pagecache_ops: usize,
    /// SPFS Fig. 7: files and bytes per file (paper: 8,000 x 256 MiB).
    pub spfs_files: u64,
    pub spfs_file_bytes: u64,
    /// SPFS lookups per trial.
    pub spfs_lookups: usize,
    /// WineFS Figs. 1 and 3: the aged image (paper: 100 GiB) and the mapped file.
    pub winefs_image_bytes: u64,
    pub winefs_file_bytes: u64,
    /// WineFS Fig. 2: 2 MiB files mapped and written per trial.
    pub winefs_small_files: usize,
    /// ctFS Fig. 7: YCSB records loaded, operations per workload, and each image.
    pub ycsb_records: u64,
    pub ycsb_ops: u64,
    pub ycsb_image_bytes: u64,
    /// ctFS's claim on a large file: the file appended and read (ctFS: 10 GB).
    pub ctfs_large_file_bytes: u64,
    /// ctFS's atomic writes by pswap: the largest write measured.
    pub ctfs_atomic_max_bytes: u64,
}

impl Scale {
    pub const FULL: Scale = Scale {
        name: "full",
        trials: 30,
        hot_ops: 100_000,
        file_bytes: 1 << 30,
        big_file_bytes: 4 << 30,
        util_image_bytes: 8 << 30,
        util_file_bytes: 4 << 20,
        conc_ops: 5_000,
        pagecache_ops: 100_000,
        spfs_files: 16,
        spfs_file_bytes: 256 << 20,
        spfs_lookups: 20_000,
        winefs_image_bytes: 2 << 30,
        winefs_file_bytes: 128 << 20,
        winefs_small_files: 100,
        ycsb_records: 200_000,
        ycsb_ops: 100_000,
        ycsb_image_bytes: 1 << 30,
        ctfs_large_file_bytes: 10 << 30,
        ctfs_atomic_max_bytes: 1 << 30,
    };
    pub const QUICK: Scale = Scale {
        name: "quick",
        trials: 10,
        hot_ops: 10_000,
        file_bytes: 1 << 30,
        big_file_bytes: 1 << 30,
        util_image_bytes: 1 << 30,
        util_file_bytes: 4 << 20,
        conc_ops: 2_000,
        pagecache_ops: 10_000,
        spfs_files: 4,
        spfs_file_bytes: 64 << 20,
        spfs_lookups: 2_000,
        winefs_image_bytes: 1 << 30,
        winefs_file_bytes: 64 << 20,
        winefs_small_files: 50,
        ycsb_records: 50_000,
        ycsb_ops: 50_000,
        ycsb_image_bytes: 512 << 20,
        ctfs_large_file_bytes: 1 << 30,
        ctfs_atomic_max_bytes: 128 << 20,
    };
    /// For the smoke test only: everything tiny; the figures mean nothing.
    pub const TINY: Scale = Scale {
        name: "tiny",
        trials: 10,
        hot_ops: 200,
        file_bytes: 8 << 20,
        big_file_bytes: 8 << 20,
        util_image_bytes: 64 << 20,
        util_file_bytes: 1 << 20,
        conc_ops: 100,
        pagecache_ops: 200,
        spfs_files: 2,
        // At least ten 4 MiB extents in all (one per insert trial).
        spfs_file_bytes: 20 << 20,
        spfs_lookups: 100,
        winefs_image_bytes: 128 << 20,
        winefs_file_bytes: 4 << 20,
        winefs_small_files: 10,
        ycsb_records: 2_000,
        ycsb_ops: 2_000,
        ycsb_image_bytes: 64 << 20,
        ctfs_large_file_bytes: 8 << 20,
        ctfs_atomic_max_bytes: 4 << 20,
    };
}

/// What one target measures: a mapping, and for HashFS its placement (`--mappings
/// hashfs-regions` measures the regions placement beside the paper's, named `hashfs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subject {
    pub kind: MappingKind,
    pub placement: HashPlacement,
}

impl Subject {
    pub fn name(self) -> &'static str {
        match (self.kind, self.placement) {
            (MappingKind::HashFs, HashPlacement::Grouped) => "hashfs-grouped",
            (MappingKind::HashFs, HashPlacement::Regions) => "hashfs-regions",
            (kind, _) => kind.name(),
        }
    }

    pub fn from_name(name: &str) -> Option<Subject> {
        let placed = [HashPlacement::Grouped, HashPlacement::Regions]
            .map(|placement| Subject { kind: MappingKind::HashFs, placement });
        placed.into_iter().find(|s| s.name() == name).or_else(|| MappingKind::from_name(name).map(Subject::from))
    }

    pub fn uses_allocator(self) -> bool {
        self.kind.uses_allocator()
    }
}

impl From<MappingKind> for Subject {
    fn from(kind: MappingKind) -> Subject {
        Subject { kind, placement: HashPlacement::Paper }
    }
}

/// Where and how an experiment runs.
#[derive(Clone)]
pub struct Ctx {
    pub scale: Scale,
    /// The mappings to measure (default: the HashFS paper's six; ctfs and HashFS's other
    /// placements by name).
    pub mappings: Vec<Subject>,
    pub image_dir: PathBuf,
    pub cal: Calibration,
    pub tsc_ghz: f64,
    /// Which of the freshly formatted images this run measures (its seed:
    /// [`images::seed`]).
    pub image: usize,
}

/// The accounting's own cost, subtracted from every measurement.
#[derive(Clone, Copy, Debug)]
pub struct Calibration {
    /// Cycles one span adds to its own count.
    pub inner: u64,
    /// Cycles one span adds to an enclosing measurement.
    pub pair: u64,
    /// Cycles of an empty enclosing measurement.
    pub outer: u64,
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn calibrate() -> Calibration {
    let n = 5_000;
    let outer = median(
        (0..n)
            .map(|_| {
                let a = probe::rdtscp();
                probe::rdtscp() - a
            })
            .collect(),
    );
    let _ = probe::take();
    let inner = median(
        (0..n)
            .map(|_| {
                probe::probe_span();
                probe::take().map_cycles
            })
            .collect(),
    );
    let with = median(
        (0..n)
            .map(|_| {
                let a = probe::rdtscp();
                probe::probe_span();
                let b = probe::rdtscp();
                let _ = probe::take();
                b - a
            })
            .collect(),
    );
    Calibration { inner, pair: with.saturating_sub(outer), outer }
}

fn tsc_ghz() -> f64 {
    let t = Instant::now();
    let a = probe::rdtscp();
    while t.elapsed().as_millis() < 200 {
        std::hint::spin_loop();
    }
    let b = probe::rdtscp();
    (b - a) as f64 / t.elapsed().as_nanos() as f64
}

/// One measured operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    SeqRead,
    RandRead,
    Append,
}

impl OpKind {
    pub fn name(self) -> &'static str {
        match self {
            OpKind::SeqRead => "seq_read",
            OpKind::RandRead => "rand_read",
            OpKind::Append => "append",
        }
    }
    pub const ALL: [OpKind; 3] = [OpKind::SeqRead, OpKind::RandRead, OpKind::Append];
}

/// Cycles of one operation: the mapping share and the whole call.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub map: f64,
    /// Of which commits of mapping changes.
    pub commit: f64,
    /// Of which translation alone (`probe::translate`).
    pub translate: f64,
    pub io: f64,
}

impl std::ops::AddAssign for Sample {
    fn add_assign(&mut self, o: Sample) {
        self.map += o.map;
        self.commit += o.commit;
        self.translate += o.translate;
        self.io += o.io;
    }
}

impl Sample {
    /// The mean of a sum of `n` samples.
    pub fn per(self, n: f64) -> Sample {
        Sample { map: self.map / n, commit: self.commit / n, translate: self.translate / n, io: self.io / n }
    }

    /// The mean of `samples`.
    pub fn mean(samples: &[Sample]) -> Sample {
        let mut sum = Sample::default();
        for &s in samples {
            sum += s;
        }
        sum.per(samples.len() as f64)
    }
}

/// A file system on a fresh image, with one file to measure.
pub struct Target {
    pub fs: FileSystem<MmapDevice>,
    pub kind: Subject,
}

impl Target {
    /// Formats `bytes` of image for `kind` at `layout_score` and mounts it; the image's
    /// memory is populated first (PM has no first-touch faults). The file is unlinked once
    /// mapped, so its memory goes back when the target is dropped or the process ends,
    /// however it ends.
    pub fn new(ctx: &Ctx, kind: Subject, layout_score: f64, bytes: u64) -> Result<Target, Failure> {
        // The HashFS paper's baseline allocator, with its fragmentation generator.
        Target::with_allocator(ctx, kind, AllocatorKind::Bitmap, layout_score, bytes)
    }

    /// [`Target::new`] with the block allocator `allocator` (WineFS's experiments).
    pub fn with_allocator(
        ctx: &Ctx,
        kind: impl Into<Subject>,
        allocator: AllocatorKind,
        layout_score: f64,
        bytes: u64,
    ) -> Result<Target, Failure> {
        let kind = kind.into();
        let image = ctx.image_dir.join(format!("hashfs-paper-{}-{}.img", kind.name(), std::process::id()));
        let _ = std::fs::remove_file(&image);
        let bytes = bytes.next_multiple_of(2 << 20);
        let opts = FormatOptions {
            mapping: kind.kind,
            placement: kind.placement,
            layout_score,
            allocator,
            hash_seed: Some(images::seed(ctx.image)),
            journal_blocks: 64,
            ..FormatOptions::default()
        };
        FileSystem::format_file(&image, bytes, &opts, &|_, _| {}).map_err(|e| {
            let _ = std::fs::remove_file(&image);
            fail(format!("formatting {} ({} MiB): {e}", image.display(), bytes >> 20))
        })?;
        let dev = MmapDevice::open(&image, OpenMode::Existing);
        let _ = std::fs::remove_file(&image);
        let dev = Arc::new(dev?);
        dev.populate().map_err(|e| fail(format!("populating {}: {e}", image.display())))?;
        let (fs, _) = FileSystem::mount(dev, &|_, _| {})?;
        Ok(Target { fs, kind })
    }

    /// Creates `path` and writes `bytes` to it in 1 MiB pieces.
    pub fn fill(&self, path: &str, bytes: u64) -> Result<File<MmapDevice>, Failure> {
        let f = self.fs.open_file(Path::new(path), OpenOptions::new().read(true).write(true).create(true))?;
        let chunk = vec![0xA5u8; (1 << 20).min(bytes.max(BLOCK)) as usize];
        let mut off = 0;
        while off < bytes {
            let n = (chunk.len() as u64).min(bytes - off) as usize;
            f.write_at(off, &chunk[..n])
                .map_err(|e| fail(format!("{}: writing {path} at {} MiB: {e}", self.kind.name(), off >> 20)))?;
            off += n as u64;
        }
        Ok(f)
    }

    /// The measured layout score of the image's files.
    pub fn layout_score(&self) -> f64 {
        self.fs.mapping_stats().map(|s| s.layout_score).unwrap_or(f64::NAN)
    }
}

/// Runs operations on one file and measures them.
pub struct Runner<'a> {
    pub ctx: &'a Ctx,
    pub fs: &'a FileSystem<MmapDevice>,
    pub file: &'a File<MmapDevice>,
    /// Blocks of the file that reads cover (its size when the run started).
    pub blocks: u64,
    pub io: u64,
    pub rng: SmallRng,
    seq: u64,
    buf: Vec<u8>,
    wbuf: Vec<u8>,
}

impl<'a> Runner<'a> {
    pub fn new(
        ctx: &'a Ctx,
        fs: &'a FileSystem<MmapDevice>,
        file: &'a File<MmapDevice>,
        io: u64,
    ) -> Result<Self, Failure> {
        let blocks = file.metadata()?.len() / BLOCK;
        Ok(Runner {
            ctx,
            fs,
            file,
            blocks,
            io,
            rng: SmallRng::seed_from_u64(7),
            seq: 0,
            buf: vec![0u8; io as usize],
            wbuf: vec![0x3Cu8; io as usize],
        })
    }

    /// One operation, timed.
    pub fn op(&mut self, kind: OpKind) -> Result<Sample, Failure> {
        let io_blocks = self.io / BLOCK;
        let off = match kind {
            OpKind::SeqRead => {
                if self.seq + io_blocks > self.blocks {
                    self.seq = 0;
                }
                let o = self.seq;
                self.seq += io_blocks;
                o * BLOCK
            }
            OpKind::RandRead => self.rng.random_range(0..=self.blocks.saturating_sub(io_blocks)) * BLOCK,
            OpKind::Append => 0,
        };
        let _ = probe::take();
        let t0 = probe::rdtscp();
        let r = match kind {
            OpKind::Append => self.file.append(&self.wbuf).map(|(n, _)| n),
            _ => self.file.read_at(off, &mut self.buf),
        };
        let t1 = probe::rdtscp();
        let c = probe::take();
        let n = r?;
        if n as u64 != self.io {
            return Err(fail(format!("{} of {} bytes did only {n}", kind.name(), self.io)));
        }
        Ok(self.ctx.correct(t1 - t0, c))
    }

    /// The mean over `ops` operations in a row (hot).
    pub fn hot(&mut self, kind: OpKind, ops: usize) -> Result<Sample, Failure> {
        let mut sum = Sample::default();
        for _ in 0..ops {
            sum += self.op(kind)?;
        }
        Ok(sum.per(ops as f64))
    }

    /// One operation after evicting the file's mapping state from every cache.
    pub fn cold(&mut self, kind: OpKind) -> Result<Sample, Failure> {
        if kind == OpKind::SeqRead {
            // Cold sequential: the block after the previous operation's, nothing cached.
            self.seq = self.seq.min(self.blocks.saturating_sub(self.io / BLOCK));
        }
        hashfs::testing::evict_mapping(self.fs, self.file.ino())?;
        self.op(kind)
    }

    /// Shrinks the file back to the size the runner started with (after appends).
    pub fn reset_size(&self) -> Result<(), Failure> {
        self.file.set_len(self.blocks * BLOCK)?;
        Ok(())
    }
}

impl Ctx {
    pub fn kinds(&self) -> Vec<Subject> {
        self.mappings.clone()
    }

    pub fn only<const N: usize>(&self, kinds: [MappingKind; N]) -> Vec<Subject> {
        kinds.into_iter().map(Subject::from).filter(|k| self.mappings.contains(k)).collect()
    }

    /// Whether the run measures `kind` (with HashFS: the paper's placement).
    pub fn has(&self, kind: MappingKind) -> bool {
        self.mappings.contains(&Subject::from(kind))
    }

    /// Removes the accounting's own cost from one operation's figures.
    pub fn correct(&self, io_cycles: u64, c: probe::Counts) -> Sample {
        let spans = c.map_spans + c.commit_spans;
        let commit = c.commit_cycles.saturating_sub(c.commit_spans * self.cal.inner) as f64;
        let map = c.map_cycles.saturating_sub(c.map_spans * self.cal.inner) as f64 + commit;
        let translate = c.translate_cycles.saturating_sub(c.translate_spans * self.cal.inner) as f64;
        let io = io_cycles.saturating_sub(self.cal.outer + spans * self.cal.pair) as f64;
        Sample { map, commit, translate, io: io.max(map) }
    }
}

/// Trials of one point, reduced for the JSON.
pub fn point(labels: Value, trials: &[Sample]) -> Value {
    let col = |f: &dyn Fn(&Sample) -> f64| {
        let v: Vec<f64> = trials.iter().map(f).collect();
        let (m, ci) = mean_ci(&v);
        json!({ "mean": m, "ci95": ci, "trials": v })
    };
    let mut o = labels;
    o["map_cycles"] = col(&|s| s.map);
    o["commit_cycles"] = col(&|s| s.commit);
    o["io_cycles"] = col(&|s| s.io);
    o["map_share"] = col(&|s| if s.io > 0.0 { s.map / s.io } else { 0.0 });
    o
}

fn machine(ctx: &Ctx) -> Value {
    let uname = std::process::Command::new("uname")
        .arg("-r")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| s.lines().next().map(|l| l.split_whitespace().nth(1).unwrap_or("0").parse::<u64>().unwrap_or(0)))
        .unwrap_or(0);
    json!({
        "cpu": cpu_model(),
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "memory_gib": (mem as f64 / (1u64 << 20) as f64).round(),
        "kernel": uname,
        "tsc_ghz": ctx.tsc_ghz,
        "flush": hashfs::pm::flush_kind().name(),
        "simd": hashfs::simd_kind().name(),
        "image_dir": ctx.image_dir.display().to_string(),
        "image_mount": image_mount(&ctx.image_dir),
        "timing_overhead_cycles": { "inner": ctx.cal.inner, "pair": ctx.cal.pair, "outer": ctx.cal.outer },
        "free_page_reporting": free_page_reporting(),
    })
}

/// Whether the guest hands freed memory back to its hypervisor (virtio-balloon free page
/// reporting): when it does, every fresh image's first touch costs a fault in the host too
/// (measured: 4 GiB populated in 5 s instead of 0.3 s), so scripts/bench-paper.sh turns it
/// off for its run and the JSON says which way it was.
fn free_page_reporting() -> String {
    match std::fs::read_to_string("/sys/module/page_reporting/parameters/page_reporting_order") {
        // Orders above the buddy allocator's largest (10) are never reported.
        Ok(s) => match s.trim().parse::<u32>() {
            Ok(order) if order > 10 => format!("off (page_reporting_order {order})"),
            Ok(order) => format!("on (page_reporting_order {order})"),
            Err(_) => format!("unknown ({})", s.trim()),
        },
        Err(_) => "none".into(),
    }
}

/// One experiment's result before it is written.
pub struct Report {
    pub config: Value,
    /// What this run does differently from the paper, because of this machine.
    pub scale_note: String,
    pub points: Vec<Value>,
}

pub fn run(
    names: &[String],
    mappings: &[String],
    quick: bool,
    tiny: bool,
    images: std::ops::Range<usize>,
    out: &Path,
    image_dir: &Path,
) -> Result<(), Failure> {
    if !(1..=30).contains(&images.len()) {
        return Err(fail(format!("--images {}: between 1 and 30", images.len())));
    }
    if images.end > 1000 {
        return Err(fail(format!("--first-image {}: at most {}", images.start, 1000 - images.len())));
    }
    let mappings: Vec<Subject> = if mappings.is_empty() {
        MappingKind::PAPER.map(Subject::from).to_vec()
    } else {
        mappings
            .iter()
            .map(|m| {
                Subject::from_name(m).ok_or_else(|| {
                    let all: Vec<&str> = MappingKind::ALL.iter().map(|k| k.name()).collect();
                    fail(format!(
                        "unknown mapping {m:?}; mappings: {}, and hashfs-grouped, hashfs-regions (HashFS's other placements)",
                        all.join(", ")
                    ))
                })
            })
            .collect::<Result<_, _>>()?
    };
    for n in names {
        if !EXPERIMENTS.iter().any(|(e, _)| e == n) {
            let all: Vec<&str> = EXPERIMENTS.iter().map(|e| e.0).collect();
            return Err(fail(format!("unknown experiment {n:?}; experiments: {}", all.join(", "))));
        }
    }
    probe::enable().map_err(fail)?;
    std::fs::create_dir_all(out).map_err(|e| fail(format!("{}: {e}", out.display())))?;
    let scale = if tiny {
        Scale::TINY
    } else if quick {
        Scale::QUICK
    } else {
        Scale::FULL
    };
    let ctx =
        Ctx { scale, mappings, image_dir: image_dir.to_path_buf(), cal: calibrate(), tsc_ghz: tsc_ghz(), image: 0 };
    let mach = machine(&ctx);
    let commit = git_commit();
    let count = images.len();
    println!(
        "# hashfs-bench paper ({} scale, {count} images per point, images {}..{}), commit {commit}",
        scale.name, images.start, images.end
    );
    println!("# machine: {mach}");
    for (name, title) in EXPERIMENTS {
        if !names.is_empty() && !names.iter().any(|n| n == name) {
            continue;
        }
        println!("\n## {name}: {title}");
        let t = Instant::now();
        let mut reps = Vec::with_capacity(count);
        for image in images.clone() {
            println!("# image {image} ({} of {count}, seed {:#x})", image - images.start + 1, images::seed(image));
            reps.push(experiments::run(name, &Ctx { image, ..ctx.clone() })?);
        }
        let rep = images::merge(reps, images.start);
        let secs = t.elapsed().as_secs_f64();
        if !rep.scale_note.is_empty() {
            println!("# scale: {}", rep.scale_note);
        }
        print_table(&rep.points);
        let doc = json!({
            "experiment": name,
            "title": title,
            "scale": scale.name,
            "images": count,
            "first_image": images.start,
            "git_commit": commit,
            "machine": mach,
            "config": rep.config,
            "scale_note": rep.scale_note,
            "seconds": secs,
            "points": rep.points,
        });
        let path = out.join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(&doc)?)
            .map_err(|e| fail(format!("{}: {e}", path.display())))?;
        println!("# {name}: {secs:.0} s, wrote {}", path.display());
    }
    probe::disable();
    Ok(())
}

fn print_table(points: &[Value]) {
    println!(
        "{:<20} {:<10} {:<6} {:<12} {:>12} {:>10} {:>10} {:>12} {:>7}",
        "mapping", "op", "cache", "x", "map_cycles", "±95%", "commit", "io_cycles", "share"
    );
    for p in points {
        let s = |k: &str| p[k].as_str().unwrap_or("").to_string();
        let m = |k: &str| p[k]["mean"].as_f64().unwrap_or(f64::NAN);
        let ci = p["map_cycles"]["ci95"].as_f64().unwrap_or(f64::NAN);
        if let Some(err) = p["error"].as_str() {
            println!("{:<20} {:<10} {:<6} {:<12} failed: {err}", s("mapping"), s("op"), s("cache"), s("x"));
            continue;
        }
        if p.get("ops_per_s").is_some() {
            let ci = p["ops_per_s"]["ci95"].as_f64().unwrap_or(f64::NAN);
            println!(
                "{:<20} {:<10} {:<8} {:>12.0} ops/s ± {ci:.0}",
                s("mapping"),
                s("mode"),
                s("workload"),
                m("ops_per_s")
            );
            continue;
        }
        if p.get("translate_share").is_some() {
            println!(
                "{:<20} {:<10} {:<6} {:<12} {:>9.0} ns per operation, {:.1}% in mapping, {:.2}% in translation",
                s("mapping"),
                s("op"),
                s("cache"),
                s("x"),
                m("ns_per_op"),
                100.0 * m("map_share"),
                100.0 * m("translate_share")
            );
            continue;
        }
        if p.get("align").is_some() {
            let ci = p["ms"]["ci95"].as_f64().unwrap_or(f64::NAN);
            println!(
                "{:<20} {:<10} {:<10} {:<8} {:>10.3} ms ± {ci:.3}",
                s("mapping"),
                s("mode"),
                s("align"),
                s("x"),
                m("ms")
            );
            continue;
        }
        if p.get("strict_over_relaxed").is_some() {
            let ci = |k: &str| p[k]["ci95"].as_f64().unwrap_or(f64::NAN);
            println!(
                "{:<20} {:<10} {:<8} {:<8} relaxed {:>9.1} us  strict {:>9.1} us  strict/relaxed {:.2} ± {:.2}",
                s("mapping"),
                s("op"),
                s("allocator"),
                s("x"),
                m("relaxed_us"),
                m("strict_us"),
                m("strict_over_relaxed"),
                ci("strict_over_relaxed")
            );
            continue;
        }
        println!(
            "{:<20} {:<10} {:<6} {:<12} {:>12.0} {:>10.0} {:>10.0} {:>12.0} {:>6.1}%",
            s("mapping"),
            s("op"),
            s("cache"),
            s("x"),
            m("map_cycles"),
            ci,
            m("commit_cycles"),
            m("io_cycles"),
            100.0 * m("map_share")
        );
    }
}
