//! `hashfs-bench takeover`: what a participant of a shared mount pays when another dies
//! holding the image lock, timed alone. A victim (this program again, `takeover-victim`)
//! joins the image and writes and renames files until it is killed at a random moment; once
//! it is reaped, the survivor (this process, a participant since the image was made) makes
//! one call, a stat and a 4 KiB overwrite of its own file, and the call is timed. When the
//! victim died inside a call, that call takes the lock over and recovers the image
//! (`fs/shared/mod.rs`, `take_over`); the others are the plain calls beside them. Nothing
//! else runs during the timed call: the kill loop of `bench/shared_processes.py` measures
//! the same beside process starts and the kernel's time to end a killed process, which
//! vary far more from run to run than a takeover costs.
//!
//! Each round makes a fresh image of each size in turn (interleaved; sparse, as the
//! library formats by default), with `--kills` victims each; fsck must find every image
//! clean after its round.

use crate::{cpu_model, fail, git_commit, image_mount, kernel, Failure, Samples};
use hashfs::fsck::{fsck, FsckMode};
use hashfs::{FileSystem, FormatOptions, OpenOptions};
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Options {
    pub sizes: Vec<u64>,
    pub rounds: u32,
    pub kills: u32,
    /// Victims that fill a file of this many MiB and truncate it (0: small files).
    pub victim_file_mib: u64,
    pub dir: PathBuf,
    pub json: Option<PathBuf>,
}

/// The victim: joins the image at `image`, says so, then writes 8 KiB files and renames
/// them over each other until it is killed; with `file_mib`, fills a file of that many
/// MiB a MiB a call and truncates it to nothing, again and again (a death inside the
/// truncation leaves a takeover the most to repair).
pub fn victim(image: &Path, file_mib: u64) -> Result<(), Failure> {
    let (fs, _) = FileSystem::open_shared(image).map_err(|e| fail(format!("victim: {}: {e}", image.display())))?;
    fs.create_dir_all(Path::new("/v"), 0o755)?;
    println!("joined");
    if file_mib > 0 {
        let f = fs.open_file(Path::new("/v/big"), OpenOptions::new().read(true).write(true).create(true))?;
        let mib = vec![0x62u8; 1 << 20];
        loop {
            for i in 0..file_mib {
                f.write_at(i << 20, &mib)?;
            }
            f.set_len(0)?;
        }
    }
    let data = vec![0x76u8; 8192];
    for i in 0u64.. {
        let (t, f) = (format!("/v/t{}", i % 50), format!("/v/f{}", i % 50));
        fs.write(Path::new(&t), &data)?;
        fs.rename(Path::new(&t), Path::new(&f))?;
    }
    Ok(())
}

/// Call times (ns) after the victims' deaths, split by whether the call took over.
struct Times {
    takeover: Samples,
    plain: Samples,
    /// Of the takeovers, those scoped to the dead call (docs/design.md).
    scoped: usize,
}

pub fn run(o: &Options) -> Result<(), Failure> {
    if o.sizes.is_empty() || o.rounds == 0 || o.kills == 0 {
        return Err(fail("takeover: --sizes, --rounds and --kills must each name at least one"));
    }
    let exe = std::env::current_exe()?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let mut times: Vec<Times> = o
        .sizes
        .iter()
        .map(|_| Times { takeover: Samples(Vec::new()), plain: Samples(Vec::new()), scoped: 0 })
        .collect();
    let flush = hashfs::pm::flush_kind().name();
    let simd = hashfs::simd_kind().name();
    let mount = image_mount(&o.dir);
    println!(
        "# hashfs-bench takeover: {} rounds, {} victims per image per round ({}); cpu {}, flush {flush}, \
         simd {simd}, images in {} ({mount}), commit {}",
        o.rounds,
        o.kills,
        match o.victim_file_mib {
            0 => "writing and renaming 8 KiB files".to_string(),
            n => format!("filling a {n} MiB file and truncating it"),
        },
        cpu_model(),
        o.dir.display(),
        git_commit()
    );
    for round in 0..o.rounds {
        for (k, &size) in o.sizes.iter().enumerate() {
            let image = o.dir.join(format!("hashfs-takeover-{}.img", std::process::id()));
            let r = one_image(&exe, &image, size, o, &mut rng, &mut times[k]);
            let _ = std::fs::remove_file(&image);
            r?;
            let t = &times[k];
            println!(
                "round {} {:>6} MiB: {} takeovers so far, median {:.3} ms",
                round + 1,
                size >> 20,
                t.takeover.0.len(),
                t.takeover.median() as f64 / 1e6
            );
        }
    }
    println!(
        "{:>8} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "MiB", "takeovers", "scoped", "median_ms", "p90_ms", "max_ms", "plain", "plain_med_ms"
    );
    let mut rows = Vec::new();
    for (k, &size) in o.sizes.iter().enumerate() {
        let t = &times[k];
        let ms = |v: &Samples, p: f64| v.pct(p) as f64 / 1e6;
        println!(
            "{:>8} {:>9} {:>7} {:>10.3} {:>10.3} {:>10.3} {:>10} {:>12.3}",
            size >> 20,
            t.takeover.0.len(),
            t.scoped,
            ms(&t.takeover, 50.0),
            ms(&t.takeover, 90.0),
            ms(&t.takeover, 100.0),
            t.plain.0.len(),
            ms(&t.plain, 50.0)
        );
        rows.push(json!({
            "image_bytes": size,
            "takeovers": t.takeover.0.len(),
            "scoped_takeovers": t.scoped,
            "takeover_median_ms": ms(&t.takeover, 50.0),
            "takeover_p90_ms": ms(&t.takeover, 90.0),
            "takeover_max_ms": ms(&t.takeover, 100.0),
            "plain_calls": t.plain.0.len(),
            "plain_median_ms": ms(&t.plain, 50.0),
            "takeover_ns": t.takeover.0,
        }));
    }
    if let Some(path) = &o.json {
        let doc = json!({
            "benchmark": "takeover",
            "command": std::env::args().collect::<Vec<_>>().join(" "),
            "config": {
                "rounds": o.rounds, "victims_per_image_per_round": o.kills,
                "victim_file_mib": o.victim_file_mib,
                "image_dir": o.dir.display().to_string(), "image_mount": mount, "sparse": true,
                "image_page_size": if mount.contains("huge=always") { "2M" } else { "4K" },
                "cpu": cpu_model(), "kernel": kernel(), "flush": flush, "simd": simd,
                "git_commit": git_commit(),
            },
            "results": rows,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .map_err(|e| fail(format!("{}: {e}", path.display())))?;
        println!("# wrote {}", path.display());
    }
    Ok(())
}

/// One image of `size` bytes: the survivor mounts it, `kills` victims join and die, the
/// survivor's call after each death is timed; then the survivor unmounts and fsck checks.
fn one_image(
    exe: &Path,
    image: &Path,
    size: u64,
    o: &Options,
    rng: &mut rand::rngs::SmallRng,
    times: &mut Times,
) -> Result<(), Failure> {
    FileSystem::format_file(image, size, &FormatOptions::default(), &|_, _| {})?;
    let (fs, _) = FileSystem::open_shared(image)?;
    let f = fs.open_file(Path::new("/s"), OpenOptions::new().read(true).write(true).create(true))?;
    let block = vec![0x73u8; 4096];
    f.write_at(0, &block)?;
    for _ in 0..o.kills {
        let mut child = Command::new(exe)
            .arg("takeover-victim")
            .arg(image)
            .arg("--file-mib")
            .arg(o.victim_file_mib.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut line = String::new();
        let out = child.stdout.take().ok_or_else(|| fail("victim: no standard output"))?;
        BufReader::new(out).read_line(&mut line)?;
        if line.trim() != "joined" {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail("a victim could not join the image"));
        }
        std::thread::sleep(Duration::from_micros(rng.random_range(2_000..40_000)));
        child.kill()?;
        child.wait()?;
        let before = fs.shared_takeovers().unwrap_or(0);
        let scoped_before = fs.shared_takeovers_scoped().unwrap_or(0);
        let t = Instant::now();
        fs.metadata(Path::new("/s"))?;
        f.write_at(0, &block)?;
        let ns = t.elapsed().as_nanos() as u64;
        if fs.shared_takeovers().unwrap_or(0) > before {
            times.takeover.0.push(ns);
            times.scoped += (fs.shared_takeovers_scoped().unwrap_or(0) - scoped_before) as usize;
        } else {
            times.plain.0.push(ns);
        }
    }
    drop(f);
    fs.unmount()?;
    let dev = std::sync::Arc::new(hashfs::pm::MmapDevice::open(image, hashfs::pm::OpenMode::Existing)?);
    let report = fsck(dev, FsckMode::Check, &|_, _| {})?;
    if !report.findings.is_empty() {
        return Err(fail(format!("fsck after the victims: {:#?}", report.findings)));
    }
    Ok(())
}
