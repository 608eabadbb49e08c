//! `hashfs crashtest` (and the `hashfs-crashtest` program): the crash-state explorer
//! (hashfs::testing::crashtest) for users: which mappings and workloads, a progress bar, the
//! figures, and a reproducer per failure.

#![forbid(unsafe_code)]

use clap::Args;
use hashfs::testing::crashtest::{self, concurrent, Config, FailureModel, Only, Stats, Workload};
use hashfs::MappingKind;
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Instant;

#[derive(Args)]
pub struct CrashtestArgs {
    /// Mappings to explore, comma-separated, or "all".
    #[arg(long, default_value = "all")]
    mapping: String,
    /// Sequences of 1, or of 1 and 2, named operations over the base tree.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=2))]
    seq: u8,
    /// The named operations to build sequences from (default: every one; see --list).
    #[arg(long, value_delimiter = ',')]
    ops: Vec<String>,
    /// Random sequences of --random-len operations, generated so that most succeed.
    #[arg(long, default_value_t = 0)]
    random: u64,
    #[arg(long, default_value_t = crashtest::workload::RANDOM_LEN)]
    random_len: usize,
    /// Rounds of two threads running operations at once (transactions open in two journals).
    #[arg(long, default_value_t = 0)]
    two_threads: u64,
    /// Seeds the samples and the random workloads (default: $HASHFS_CRASH_SEED, else a
    /// fresh one, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Rerun one workload by its id (as a reproducer prints it).
    #[arg(long)]
    workload: Option<String>,
    /// With --workload: only this crash point ...
    #[arg(long)]
    point: Option<usize>,
    /// ... and this state of it ...
    #[arg(long)]
    state: Option<u64>,
    /// ... and this fence of the crashed recovery ...
    #[arg(long)]
    rpoint: Option<usize>,
    /// ... and this state of it.
    #[arg(long)]
    rstate: Option<u64>,
    /// The failures explored: power (a power failure at every fence), death (a process
    /// killed after every store, its stores seen by the survivor that repairs the image),
    /// or both.
    #[arg(long, default_value = "power")]
    model: String,
    /// With --workload and --model death: only the death after this many stores.
    #[arg(long)]
    death: Option<usize>,
    /// Crash points with at most this many states are explored exhaustively.
    #[arg(long, default_value_t = 1 << 12)]
    exhaustive_limit: u64,
    /// States sampled at a larger crash point.
    #[arg(long, default_value_t = 32)]
    samples: u64,
    /// States checked at each fence of a crashed recovery: all when there are at most this
    /// many, else this many sampled as at a crash point (the extremes and mixes).
    #[arg(long, default_value_t = Config::default().recovery_samples)]
    recovery_samples: u64,
    /// Recoveries crashed in a row: 2 also crashes the recovery of a crashed recovery (on
    /// the first image of each crash point), 3 the one after, ...
    #[arg(long, default_value_t = Config::default().recovery_depth)]
    recovery_depth: u32,
    /// Journals of the explored images (1: as on a machine with one CPU).
    #[arg(long, default_value_t = Config::default().journals, value_parser = clap::value_parser!(u32).range(1..))]
    journals: u32,
    /// Crash recovery on at most this many images of each crash point (default: all).
    #[arg(long)]
    recovery_images: Option<u64>,
    /// Layout score of the allocator mappings' base image (fragmentation generator).
    #[arg(long, default_value_t = 1.0)]
    layout_score: f64,
    /// HashFS's placement on its images: paper, grouped or regions (8 MiB images, and the
    /// named operations that write whole 2 MiB chunks added; regions images start with
    /// their one open group just below its target load, so that writes open another).
    #[arg(long, default_value = "paper")]
    placement: String,
    /// The write mode of the explored images: relaxed, or strict (every write of up to
    /// the untorn limit must then be whole or absent after a crash).
    #[arg(long, default_value = "relaxed")]
    write_mode: String,
    /// Worker threads (default: one per CPU).
    #[arg(long)]
    threads: Option<usize>,
    /// List the named operations and exit.
    #[arg(long)]
    list: bool,
    /// Also write the figures (per mapping and in total, with the configuration, the
    /// machine and the commit) to this JSON file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

fn stats_json(s: &Stats, secs: f64, failures: usize) -> serde_json::Value {
    serde_json::json!({
        "workloads": s.workloads,
        "crash_points": s.crash_points,
        "states": s.total_states(),
        "crash_images": s.states,
        "recovery_states": s.recovery_states,
        "death_states": s.deaths,
        "seconds": secs,
        "states_per_second": s.total_states() as f64 / secs,
        "failures": failures,
    })
}

fn mappings(spec: &str) -> Result<Vec<MappingKind>, String> {
    if spec == "all" {
        return Ok(MappingKind::ALL.to_vec());
    }
    spec.split(',').map(|m| MappingKind::from_name(m).ok_or_else(|| format!("unknown mapping {m:?}"))).collect()
}

/// Runs the explorer; returns the number of failures.
pub fn run(a: CrashtestArgs) -> Result<usize, String> {
    let placement = hashfs::HashPlacement::parse(&a.placement)?;
    let write_mode = hashfs::WriteMode::from_name(&a.write_mode)
        .ok_or_else(|| format!("unknown write mode {:?} (choose relaxed or strict)", a.write_mode))?;
    if a.list {
        let mut names: Vec<&str> = Vec::new();
        for m in mappings(&a.mapping)? {
            for n in crashtest::ace_ops(m, placement) {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        println!("{}", names.join("\n"));
        println!("(in --workload sequences only: {})", crashtest::MOUNT_OPS.join(", "));
        return Ok(0);
    }
    let seed = match a.seed {
        Some(s) => s,
        None => match std::env::var("HASHFS_CRASH_SEED") {
            Ok(v) => v.parse().map_err(|_| format!("HASHFS_CRASH_SEED={v:?} is not a number"))?,
            Err(_) => {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
            }
        },
    };
    let model = match a.model.as_str() {
        "power" => FailureModel::PowerFailure,
        "death" => FailureModel::ProcessDeath,
        "both" => FailureModel::Both,
        m => return Err(format!("unknown failure model {m:?} (choose power, death or both)")),
    };
    if a.death.is_some() && (a.point.is_some() || model == FailureModel::PowerFailure) {
        return Err("--death reruns one process death: with --model death, without --point".into());
    }
    let only = match (a.point, a.death) {
        (Some(point), _) => Some(Only { point, state: a.state, rpoint: a.rpoint, rstate: a.rstate, death: None }),
        (None, Some(n)) => Some(Only { death: Some(n), ..Only::default() }),
        (None, None) => None,
    };
    if only.is_some() && a.workload.is_none() {
        return Err("--point and --death need --workload".into());
    }
    let cfg = Config {
        exhaustive_limit: a.exhaustive_limit,
        samples: a.samples,
        recovery_samples: a.recovery_samples,
        recovery_depth: a.recovery_depth,
        journals: a.journals,
        recovery_images_per_point: a.recovery_images.unwrap_or(u64::MAX),
        seed,
        only,
        placement,
        write_mode,
        model,
    };
    // The named operations: those given, else each mapping's own (`ace_ops`).
    let names_for = |m: MappingKind| -> Vec<&str> {
        if a.ops.is_empty() {
            crashtest::ace_ops(m, placement)
        } else {
            a.ops.iter().map(|s| s.as_str()).collect()
        }
    };
    if let Some(bad) = a.ops.iter().find(|n| crashtest::named::ace_op(n).is_none()) {
        return Err(format!("unknown operation {bad:?} (hashfs crashtest --list names them)"));
    }
    let workloads_for = |m: MappingKind| -> Result<Vec<Workload>, String> {
        Ok(match &a.workload {
            Some(id) => vec![Workload::from_id(id).ok_or_else(|| format!("not a workload id: {id:?}"))?],
            None => {
                let names = names_for(m);
                let mut w = if a.seq > 0 { crashtest::ace_workloads(&names, a.seq as usize) } else { Vec::new() };
                w.extend((0..a.random).map(|i| crashtest::random_workload(seed, i, a.random_len)));
                w
            }
        })
    };
    let workloads = workloads_for(MappingKind::HashFs)?;
    let threads = a.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    println!(
        "crash explorer: {} workloads per mapping (more on a mapping with operations of its own), seed {seed} (HASHFS_CRASH_SEED={seed} reruns it), exhaustive up to {} states per crash point, else {} sampled; {} threads",
        workloads.len(),
        cfg.exhaustive_limit,
        cfg.samples,
        threads
    );
    let mut total = Stats::default();
    let mut failures = Vec::new();
    let mut per_mapping = serde_json::Map::new();
    // The commit of the code that runs, taken now: the checkout may move during a long run.
    let commit = env!("HASHFS_BUILD_COMMIT").to_string();
    let started = Instant::now();
    for m in mappings(&a.mapping)? {
        let t0 = Instant::now();
        let workloads = workloads_for(m)?;
        let bar = ProgressBar::new(workloads.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{prefix:>18} [{bar:30}] {pos}/{len} workloads {msg} ({elapsed})")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(m.name());
        let (mut st, mut f) = crashtest::run(&cfg, m, a.layout_score, &workloads, threads, &|done, s, new| {
            for f in new {
                bar.suspend(|| println!("\n{f}\n"));
            }
            bar.set_position(done as u64);
            bar.set_message(format!("{} states", s.total_states()));
        });
        bar.finish_and_clear();
        if a.two_threads > 0 {
            let base = crashtest::base_image_in(m, a.layout_score, placement, write_mode, a.journals);
            let mut open2 = 0;
            for round in 0..a.two_threads {
                let (s, o) = concurrent::explore_two_threads(&cfg, m.name(), &base, round, 6, &mut f);
                st.add(&s);
                open2 += o;
            }
            println!(
                "{:>18}: two threads, {} rounds: {open2} crash points with transactions open in two journals",
                m.name(),
                a.two_threads
            );
        }
        let secs = t0.elapsed().as_secs_f64();
        println!(
            "{:>18}: {} workloads, {} crash points, {} states ({} crash images + {} of crashed recoveries + {} of process deaths) in {:.1} s, {:.0} states/s, {} failures",
            m.name(),
            st.workloads,
            st.crash_points,
            st.total_states(),
            st.states,
            st.recovery_states,
            st.deaths,
            secs,
            st.total_states() as f64 / secs,
            f.len()
        );
        let mut js = stats_json(&st, secs, f.len());
        js["ops"] = serde_json::json!(names_for(m));
        per_mapping.insert(m.name().to_string(), js);
        total.add(&st);
        failures.extend(f);
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "total: {} states explored ({} crash images, {} of crashed recoveries, {} of process deaths) in {:.1} s ({:.0} states/s), {} failures",
        total.total_states(),
        total.states,
        total.recovery_states,
        total.deaths,
        secs,
        total.total_states() as f64 / secs,
        failures.len()
    );
    if let Some(path) = &a.json {
        let doc = serde_json::json!({
            "command": std::env::args().collect::<Vec<_>>().join(" "),
            "seed": seed,
            "config": {
                "seq": a.seq, "ops": if a.ops.is_empty() { serde_json::json!("each mapping's (see mappings)") } else { serde_json::json!(a.ops) },
                "random": a.random, "random_len": a.random_len,
                "two_threads": a.two_threads, "exhaustive_limit": cfg.exhaustive_limit,
                "samples": cfg.samples, "recovery_samples": cfg.recovery_samples, "recovery_depth": cfg.recovery_depth,
                "layout_score": a.layout_score, "threads": threads,
                "image_bytes": crashtest::image_bytes(placement), "placement": placement.name(),
                "write_mode": write_mode.name(), "model": a.model,
            },
            "machine": {
                "cpu": hashfs::pm::cpu_model(),
                "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
                "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
            },
            "git_commit": commit,
            "mappings": per_mapping,
            "total": stats_json(&total, secs, failures.len()),
            "failures": failures.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if !failures.is_empty() {
        println!("\n{} failures (each printed above with its reproducer):", failures.len());
        for f in &failures {
            match f.death {
                Some(n) => println!("  {} on {}, process death after store {n}", f.workload, f.mapping),
                None => println!("  {} on {}, point {} state {}", f.workload, f.mapping, f.point, f.state),
            }
        }
    }
    Ok(failures.len())
}
