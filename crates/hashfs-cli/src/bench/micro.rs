//! `hashfs bench micro`: 4 KiB random read, 4 KiB overwrite, 4 KiB append, and small-file
//! create+write+close, each on three targets in one run:
//! - `hashfs`: the library's file API on a mapped image;
//! - `memcpy`: the physical limit, the same copies through the same device on the same
//!   mapped image (writes flushed and fenced), with no file system at all;
//! - `tmpfs`: the same operations with system calls on files in a plain tmpfs directory.
//!
//! memcpy uses the physical blocks of the benchmark file (translated before timing), after
//! HashFS is measured, so it scribbles over file contents of a scratch image, never over
//! metadata. The image is populated before the run (no page faults on any target), and the
//! tmpfs files are written in full first.

#![forbid(unsafe_code)]

use super::{cpu_model, git_commit, Samples};
use crate::{fail, Failure};
use hashfs::pm::{DevOffset, MmapDevice, OpenMode, PmDevice};
use hashfs::FormatOptions;
use hashfs::{FileSystem, OpenOptions};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use serde_json::json;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

const BLOCK: usize = 4096;

struct Config {
    file_bytes: u64,
    image_bytes: u64,
    ops: usize,
    small_files: usize,
}

fn time<F: FnMut(usize)>(n: usize, mut f: F) -> Samples {
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f(i);
        v.push(t.elapsed().as_nanos() as u64);
    }
    Samples(v)
}

pub fn run(quick: bool, json_out: Option<&Path>, image: &Path, tmpfs_dir: &Path) -> Result<(), Failure> {
    let cfg = if quick {
        Config { file_bytes: 256 << 20, image_bytes: 1 << 30, ops: 20_000, small_files: 5_000 }
    } else {
        Config { file_bytes: 1 << 30, image_bytes: 4 << 30, ops: 200_000, small_files: 50_000 }
    };
    let tmp = tmpfs_dir.join(format!("hashfs-bench-tmpfs-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| fail(format!("{}: {e}", tmp.display())))?;
    let result = run_in(&cfg, quick, json_out, image, &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

fn run_in(cfg: &Config, quick: bool, json_out: Option<&Path>, image: &Path, tmp: &Path) -> Result<(), Failure> {
    FileSystem::format_file(image, cfg.image_bytes, &FormatOptions::default(), &|_, _| {})?;
    let dev = Arc::new(MmapDevice::open(image, OpenMode::Existing)?);
    // Every target runs on memory that is already there, as PM is: no first-touch faults.
    dev.populate().map_err(|e| fail(format!("populating {}: {e}", image.display())))?;
    let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {})?;
    let geo = fs.geometry();
    let blocks = cfg.file_bytes / BLOCK as u64;
    let mut rng = SmallRng::seed_from_u64(1);
    let offsets: Vec<u64> = (0..cfg.ops).map(|_| rng.random_range(0..blocks) * BLOCK as u64).collect();
    let mut buf = vec![0u8; BLOCK];
    let wbuf = vec![0x5Au8; BLOCK];
    let chunk = vec![0xC3u8; 1 << 20];

    // Files of the same size on both targets.
    let f = fs.open_file(Path::new("/bench"), OpenOptions::new().read(true).write(true).create(true))?;
    let tf = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(tmp.join("bench"))?;
    for m in 0..cfg.file_bytes >> 20 {
        f.write_at(m << 20, &chunk)?;
        tf.write_all_at(&chunk, m << 20)?;
    }
    // memcpy copies exactly the physical blocks that hold the HashFS file, translated
    // before timing: the same memory, without the file system.
    let ino = f.ino();
    let block_of: Vec<DevOffset> = (0..blocks)
        .map(|b| match fs.physical_block(ino, hashfs::Lblk(b)) {
            Ok(Some(e)) => Ok(geo.block_off(e.pblk.0)),
            _ => Err(std::io::Error::other(format!("block {b} of the benchmark file is not mapped"))),
        })
        .collect::<Result<_, _>>()?;
    let phys = |off: u64| block_of[(off / BLOCK as u64 % blocks) as usize];
    // The random offsets' addresses, computed before timing and read in order.
    let phys_random: Vec<DevOffset> = offsets.iter().map(|&o| phys(o)).collect();
    let phys_seq: Vec<DevOffset> = (0..cfg.ops.max(cfg.small_files) as u64).map(|i| phys(i * BLOCK as u64)).collect();

    let mut results: Vec<(&str, [(&str, Samples); 3])> = Vec::new();

    // 4 KiB random read.
    let h = time(cfg.ops, |i| {
        f.read_at(offsets[i], &mut buf).expect("read");
    });
    let m = time(cfg.ops, |i| dev.read(phys_random[i], &mut buf));
    let t = time(cfg.ops, |i| {
        tf.read_at(&mut buf, offsets[i]).expect("pread");
    });
    results.push(("randread_4k", [("hashfs", h), ("memcpy", m), ("tmpfs", t)]));

    // 4 KiB overwrite.
    let h = time(cfg.ops, |i| {
        f.write_at(offsets[i], &wbuf).expect("write");
    });
    let m = time(cfg.ops, |i| {
        dev.write_nt(phys_random[i], &wbuf);
        dev.fence();
    });
    let t = time(cfg.ops, |i| {
        tf.write_at(&wbuf, offsets[i]).expect("pwrite");
    });
    results.push(("overwrite_4k", [("hashfs", h), ("memcpy", m), ("tmpfs", t)]));

    // 4 KiB append.
    let af = fs.open_file(Path::new("/append"), OpenOptions::new().append(true).create(true))?;
    let h = time(cfg.ops, |_| {
        af.write_at(0, &wbuf).expect("append");
    });
    drop(af);
    let m = time(cfg.ops, |i| {
        dev.write_nt(phys_seq[i], &wbuf);
        dev.fence();
    });
    let mut ta = std::fs::OpenOptions::new().append(true).create(true).open(tmp.join("append"))?;
    let t = time(cfg.ops, |_| {
        ta.write_all(&wbuf).expect("append");
    });
    results.push(("append_4k", [("hashfs", h), ("memcpy", m), ("tmpfs", t)]));
    fs.remove_file(Path::new("/append"))?;

    // Small files: create, write 4 KiB, close.
    fs.create_dir(Path::new("/small"), 0o755)?;
    std::fs::create_dir_all(tmp.join("small"))?;
    let names: Vec<String> = (0..cfg.small_files).map(|i| format!("f{i:06}")).collect();
    let h = time(cfg.small_files, |i| {
        let p = format!("/small/{}", names[i]);
        let g = fs.open_file(Path::new(&p), OpenOptions::new().write(true).create(true)).expect("create");
        g.write_at(0, &wbuf).expect("write");
    });
    let m = time(cfg.small_files, |i| {
        dev.write_nt(phys_seq[i], &wbuf);
        dev.fence();
    });
    let small = tmp.join("small");
    let t = time(cfg.small_files, |i| {
        let mut g = std::fs::File::create(small.join(&names[i])).expect("create");
        g.write_all(&wbuf).expect("write");
    });
    results.push(("create_write_close_4k", [("hashfs", h), ("memcpy", m), ("tmpfs", t)]));
    drop(f);

    // Report.
    let simd = hashfs::simd_kind().name();
    let flush = dev.flush_kind().name();
    let commit = git_commit();
    println!(
        "# hashfs bench micro{}: single thread, {} ops per test ({} for small files)",
        if quick { " --quick" } else { "" },
        cfg.ops,
        cfg.small_files
    );
    println!(
        "# image {} ({} MiB, MAP_SYNC {}), file {} MiB, tmpfs dir {}",
        image.display(),
        cfg.image_bytes >> 20,
        dev.is_map_sync(),
        cfg.file_bytes >> 20,
        tmp.display()
    );
    println!("# cpu {}, flush {flush}, simd {simd}, commit {commit}", cpu_model());
    println!(
        "{:<22} {:<7} {:>10} {:>10} {:>12} {:>12}",
        "operation", "target", "median_ns", "p99_ns", "ops_per_s", "vs memcpy"
    );
    let mut json_results = serde_json::Map::new();
    for (op, targets) in &results {
        let mem_median = targets[1].1.median() as f64;
        let mut jt = serde_json::Map::new();
        for (name, s) in targets {
            println!(
                "{:<22} {:<7} {:>10} {:>10} {:>12.0} {:>11.2}x",
                op,
                name,
                s.median(),
                s.pct(99.0),
                s.ops_per_s(),
                s.median() as f64 / mem_median
            );
            jt.insert(
                name.to_string(),
                json!({ "median_ns": s.median(), "p99_ns": s.pct(99.0), "ops_per_s": s.ops_per_s() }),
            );
        }
        json_results.insert(op.to_string(), serde_json::Value::Object(jt));
    }
    let rr = &results[0].1;
    println!(
        "# 4 KiB random read: hashfs median is {:.2}x memcpy (target <= 1.3x) and {:.2}x tmpfs pread (target < 1x)",
        rr[0].1.median() as f64 / rr[1].1.median() as f64,
        rr[0].1.median() as f64 / rr[2].1.median() as f64
    );
    if let Some(path) = json_out {
        let doc = json!({
            "benchmark": "micro",
            "config": {
                "quick": quick,
                "ops": cfg.ops,
                "small_files": cfg.small_files,
                "file_bytes": cfg.file_bytes,
                "image_bytes": cfg.image_bytes,
                "image": image.display().to_string(),
                "map_sync": dev.is_map_sync(),
                "tmpfs_dir": tmp.display().to_string(),
                "cpu": cpu_model(),
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
    drop(fs);
    let _ = std::fs::remove_file(image);
    Ok(())
}
