//! `hashfs-bench filebench`: filebench's file server, mail server, web server and
//! create-files personalities, run by this program's threads in any directory (the HashFS
//! mount, the FUSE ceiling, tmpfs, ext4; `bench/filebench.py` runs them side by side).
//!
//! Filebench itself is not packaged for this platform (Debian 12 dropped it), so its four
//! workloads are written here from their definitions: the filesets (entries, directory
//! width, gamma-distributed sizes, share created beforehand) and each thread's flow of
//! operations, with filebench's defaults; per operation the count, mean and percentiles
//! of its latency, as filebench's per-flowop report. Not modelled: filebench's `memsize`,
//! its process (rather than thread) instances and its I/O rate limits (none of the four
//! use them by default).

mod fileset;
mod personality;

use crate::{fail, Failure};
use fileset::{Fileset, ABSENT, PRESENT};
use personality::{Op, Personality};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

pub struct Options {
    pub dir: PathBuf,
    pub personality: String,
    pub seconds: u64,
    pub threads: Option<usize>,
    /// Scales every fileset's entries (a smoke test's tiny runs).
    pub files_scale: f64,
    pub seed: u64,
    pub json: Option<PathBuf>,
}

/// What one thread measured: per flow step, its latencies (ns) and bytes moved.
struct Tally {
    lat: Vec<Vec<u64>>,
    bytes: Vec<u64>,
}

/// A thread's open file: which fileset entry, and the file.
struct Open {
    set: usize,
    entry: usize,
    file: File,
}

struct Worker<'a> {
    p: &'a Personality,
    sets: &'a [Fileset],
    rng: SmallRng,
    /// What writes write, and where reads land (allocated once: not part of any timing).
    buf: Vec<u8>,
    rbuf: Vec<u8>,
    open: Option<Open>,
    log: Option<File>,
}

fn io_err(what: &str, path: &Path, e: io::Error) -> String {
    format!("{what} {}: {e}", path.display())
}

impl Worker<'_> {
    /// Runs one flow step; returns the bytes it moved, or None when it found no file to
    /// use (the fileset is full or empty for the moment).
    fn step(&mut self, op: Op) -> Result<Option<u64>, String> {
        let sets = self.sets;
        match op {
            Op::Create(s) => {
                self.close();
                let Some(i) = sets[s].claim(ABSENT, &mut self.rng) else { return Ok(None) };
                let path = &sets[s].paths[i];
                let file = OpenOptions::new().read(true).write(true).create_new(true).open(path).map_err(|e| {
                    sets[s].release(i, ABSENT);
                    io_err("create", path, e)
                })?;
                self.open = Some(Open { set: s, entry: i, file });
                Ok(Some(0))
            }
            Op::Open(s) => {
                self.close();
                let Some(i) = sets[s].claim(PRESENT, &mut self.rng) else { return Ok(None) };
                let path = &sets[s].paths[i];
                let file = OpenOptions::new().read(true).write(!sets[s].spec.readonly).open(path).map_err(|e| {
                    sets[s].release(i, PRESENT);
                    io_err("open", path, e)
                })?;
                self.open = Some(Open { set: s, entry: i, file });
                Ok(Some(0))
            }
            Op::WriteWhole { iosize } => {
                let Some(o) = &self.open else { return Ok(None) };
                let size = sets[o.set].sizes[o.entry];
                let mut off = 0;
                while off < size {
                    let n = (size - off).min(iosize as u64) as usize;
                    o.file
                        .write_all_at(&self.buf[..n], off)
                        .map_err(|e| io_err("write", &sets[o.set].paths[o.entry], e))?;
                    off += n as u64;
                }
                Ok(Some(size))
            }
            Op::ReadWhole { iosize } => {
                let Some(o) = &self.open else { return Ok(None) };
                let (mut off, buf) = (0u64, &mut self.rbuf[..iosize]);
                loop {
                    let n = o.file.read_at(buf, off).map_err(|e| io_err("read", &sets[o.set].paths[o.entry], e))?;
                    if n == 0 {
                        return Ok(Some(off));
                    }
                    off += n as u64;
                }
            }
            Op::AppendRand { iosize } => {
                let n = self.rng.random_range(1..=iosize);
                let Some(o) = &mut self.open else { return Ok(None) };
                let path = &sets[o.set].paths[o.entry];
                o.file.seek(SeekFrom::End(0)).map_err(|e| io_err("seek", path, e))?;
                o.file.write_all(&self.buf[..n]).map_err(|e| io_err("append", path, e))?;
                Ok(Some(n as u64))
            }
            Op::AppendShared { set, iosize } => {
                let n = self.rng.random_range(1..=iosize);
                let path = &sets[set].paths[0];
                if self.log.is_none() {
                    let f = OpenOptions::new().append(true).open(path).map_err(|e| io_err("open", path, e))?;
                    self.log = Some(f);
                }
                let log = self.log.as_mut().expect("opened above");
                log.write_all(&self.buf[..n]).map_err(|e| io_err("append", path, e))?;
                Ok(Some(n as u64))
            }
            Op::Fsync => {
                let Some(o) = &self.open else { return Ok(None) };
                o.file.sync_all().map_err(|e| io_err("fsync", &sets[o.set].paths[o.entry], e))?;
                Ok(Some(0))
            }
            Op::Close => Ok(self.close().then_some(0)),
            Op::Delete(s) => {
                self.close();
                let Some(i) = sets[s].claim(PRESENT, &mut self.rng) else { return Ok(None) };
                let path = &sets[s].paths[i];
                fs::remove_file(path).map_err(|e| {
                    sets[s].release(i, PRESENT);
                    io_err("delete", path, e)
                })?;
                sets[s].release(i, ABSENT);
                Ok(Some(0))
            }
            Op::Stat(s) => {
                let Some(i) = sets[s].claim(PRESENT, &mut self.rng) else { return Ok(None) };
                let r = fs::metadata(&sets[s].paths[i]);
                sets[s].release(i, PRESENT);
                r.map_err(|e| io_err("stat", &sets[s].paths[i], e))?;
                Ok(Some(0))
            }
        }
    }

    /// Closes the open file (if any) and gives its entry back; whether one was open.
    fn close(&mut self) -> bool {
        match self.open.take() {
            Some(o) => {
                drop(o.file);
                self.sets[o.set].release(o.entry, PRESENT);
                true
            }
            None => false,
        }
    }

    fn run(&mut self, stop: &AtomicBool) -> Result<Tally, String> {
        let n = self.p.flow.len();
        let mut t = Tally { lat: vec![Vec::new(); n], bytes: vec![0; n] };
        'run: while !stop.load(Ordering::Relaxed) {
            for (k, &(_, op)) in self.p.flow.iter().enumerate() {
                if stop.load(Ordering::Relaxed) {
                    break 'run;
                }
                let start = Instant::now();
                match self.step(op)? {
                    Some(bytes) => {
                        t.lat[k].push(start.elapsed().as_nanos() as u64);
                        t.bytes[k] += bytes;
                    }
                    None if self.p.until_full && matches!(op, Op::Create(_)) => break 'run,
                    // Nothing to use now (all claimed by others): filebench waits too.
                    None => std::thread::yield_now(),
                }
            }
        }
        self.close();
        Ok(t)
    }
}

/// Creates the directory tree and the share of files filebench preallocates, with a few
/// threads.
fn prepare(sets: &[Fileset], rng: &mut SmallRng) -> Result<(), String> {
    let buf = vec![0xa5u8; 1 << 20];
    for set in sets {
        for d in set.dirs() {
            fs::create_dir_all(&d).map_err(|e| io_err("mkdir", &d, e))?;
        }
        let mut pick: Vec<usize> = (0..set.paths.len()).collect();
        // A random prealloc% of the entries (Fisher-Yates prefix).
        let want = (set.paths.len() * set.spec.prealloc as usize).div_ceil(100);
        for k in 0..want {
            let j = rng.random_range(k..pick.len());
            pick.swap(k, j);
        }
        pick.truncate(want);
        let chunks: Vec<&[usize]> = pick.chunks(pick.len().div_ceil(4).max(1)).collect();
        std::thread::scope(|s| {
            let handles: Vec<_> = chunks
                .iter()
                .map(|chunk| {
                    let buf = &buf;
                    s.spawn(move || -> Result<(), String> {
                        for &i in chunk.iter() {
                            let (path, size) = (&set.paths[i], set.sizes[i]);
                            let f = File::create(path).map_err(|e| io_err("create", path, e))?;
                            let mut off = 0;
                            while off < size {
                                let n = (size - off).min(buf.len() as u64) as usize;
                                f.write_all_at(&buf[..n], off).map_err(|e| io_err("write", path, e))?;
                                off += n as u64;
                            }
                            set.mark_prepared(i);
                        }
                        Ok(())
                    })
                })
                .collect();
            handles.into_iter().try_for_each(|h| h.join().map_err(|_| "a preparing thread panicked".to_string())?)
        })?;
    }
    Ok(())
}

pub fn run(o: &Options) -> Result<(), Failure> {
    let mut p = personality::by_name(&o.personality).ok_or_else(|| {
        fail(format!("unknown personality {:?}: one of {}", o.personality, personality::NAMES.join(", ")))
    })?;
    if let Some(t) = o.threads {
        p.threads = t.max(1);
    }
    if !(o.files_scale > 0.0 && o.files_scale <= 1.0) {
        return Err(fail("--files-scale must be in (0, 1]"));
    }
    if !o.dir.is_dir() {
        return Err(fail(format!("{} is not a directory", o.dir.display())));
    }
    let mut rng = SmallRng::seed_from_u64(o.seed);
    let sets: Vec<Fileset> = p
        .sets
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.entries = ((s.entries as f64 * o.files_scale).ceil() as usize).max(1);
            Fileset::new(s, &o.dir, &mut rng)
        })
        .collect();
    if sets.iter().any(|s| s.paths[0].exists()) {
        return Err(fail(format!("{} already holds a fileset: give an empty directory", o.dir.display())));
    }
    let t0 = Instant::now();
    prepare(&sets, &mut rng).map_err(fail)?;
    let prepare_s = t0.elapsed().as_secs_f64();
    // As filebench: the prepared files reach the device and leave the page cache first.
    let synced = std::process::Command::new("sync").status().map(|s| s.success()).unwrap_or(false);
    let dropped = fs::write("/proc/sys/vm/drop_caches", "3").is_ok();
    eprintln!(
        "# {} in {}: {} threads, {} files prepared in {prepare_s:.1} s, {} s run",
        p.name,
        o.dir.display(),
        p.threads,
        sets.iter().map(|s| (s.paths.len() * s.spec.prealloc as usize).div_ceil(100)).sum::<usize>(),
        o.seconds
    );

    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(p.threads + 1);
    let seeds: Vec<u64> = (0..p.threads).map(|_| rng.random()).collect();
    let (tallies, elapsed) = std::thread::scope(|s| {
        let handles: Vec<_> = seeds
            .iter()
            .map(|&seed| {
                let (p, sets, stop, barrier) = (&p, &sets, &stop, &barrier);
                s.spawn(move || {
                    let mut w = Worker {
                        p,
                        sets,
                        rng: SmallRng::seed_from_u64(seed),
                        buf: vec![0x5au8; 1 << 20],
                        rbuf: vec![0u8; 1 << 20],
                        open: None,
                        log: None,
                    };
                    barrier.wait();
                    let r = w.run(stop);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    (r, Instant::now())
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let deadline = start + Duration::from_secs(o.seconds);
        while Instant::now() < deadline && !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
        let mut last = start;
        let tallies: Vec<Result<Tally, String>> = handles
            .into_iter()
            .map(|h| {
                let (r, end) = h.join().unwrap_or_else(|_| (Err("a worker thread panicked".into()), Instant::now()));
                last = last.max(end);
                r
            })
            .collect();
        (tallies, last - start)
    });
    let tallies = tallies.into_iter().collect::<Result<Vec<Tally>, String>>().map_err(fail)?;
    let filesets: Vec<_> = sets
        .iter()
        .map(|s| {
            let prepared: Vec<usize> = (0..s.paths.len()).filter(|&i| s.prepared(i)).collect();
            serde_json::json!({
                "name": s.spec.name, "entries": s.paths.len(), "dir_width": s.spec.dir_width,
                "mean_size": s.spec.mean_size, "prepared": prepared.len(),
                "prepared_bytes": prepared.iter().map(|&i| s.sizes[i]).sum::<u64>(),
            })
        })
        .collect();
    report(o, &p, &tallies, elapsed, (prepare_s, synced && dropped), filesets)
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((p / 100.0) * (sorted.len() - 1) as f64).round() as usize]
}

fn report(
    o: &Options,
    p: &Personality,
    tallies: &[Tally],
    elapsed: Duration,
    (prepare_s, caches_dropped): (f64, bool),
    filesets: Vec<serde_json::Value>,
) -> Result<(), Failure> {
    let secs = elapsed.as_secs_f64();
    let ms = |ns: u64| ns as f64 / 1e6;
    let mut ops = Vec::new();
    let (mut total, mut bytes) = (0usize, 0u64);
    println!(
        "{:<16} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9}",
        "flowop", "ops", "ops/s", "MB/s", "mean ms", "p50 ms", "p99 ms"
    );
    for (k, (name, _)) in p.flow.iter().enumerate() {
        let mut lat: Vec<u64> = tallies.iter().flat_map(|t| t.lat[k].iter().copied()).collect();
        lat.sort_unstable();
        let b: u64 = tallies.iter().map(|t| t.bytes[k]).sum();
        let mean = if lat.is_empty() { 0.0 } else { lat.iter().sum::<u64>() as f64 / lat.len() as f64 / 1e6 };
        println!(
            "{name:<16} {:>10} {:>10.0} {:>9.1} {mean:>9.3} {:>9.3} {:>9.3}",
            lat.len(),
            lat.len() as f64 / secs,
            b as f64 / secs / 1e6,
            ms(pct(&lat, 50.0)),
            ms(pct(&lat, 99.0))
        );
        total += lat.len();
        bytes += b;
        ops.push(serde_json::json!({
            "name": name, "ops": lat.len(), "bytes": b, "ops_per_s": lat.len() as f64 / secs, "mb_per_s": b as f64 / secs / 1e6,
            "mean_ms": mean, "p50_ms": ms(pct(&lat, 50.0)), "p99_ms": ms(pct(&lat, 99.0)),
            "max_ms": ms(lat.last().copied().unwrap_or(0)),
        }));
    }
    println!(
        "{}: {total} ops in {secs:.1} s: {:.0} ops/s, {:.1} MB/s",
        p.name,
        total as f64 / secs,
        bytes as f64 / secs / 1e6
    );
    if let Some(path) = &o.json {
        let j = serde_json::json!({
            "personality": p.name, "dir": o.dir, "mount": super::image_mount(&o.dir), "threads": p.threads,
            "seconds": secs, "requested_seconds": o.seconds, "files_scale": o.files_scale, "seed": o.seed,
            "prepare_s": prepare_s, "caches_dropped": caches_dropped, "filesets": filesets, "ops": total,
            "ops_per_s": total as f64 / secs, "mb_per_s": bytes as f64 / secs / 1e6, "flowops": ops,
            "git_commit": super::git_commit(), "kernel": super::kernel(), "cpu": super::cpu_model(),
        });
        fs::write(path, serde_json::to_string_pretty(&j)? + "\n")
            .map_err(|e| fail(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}
