//! The explorer: runs a workload on the crash device with capture on, and for every crash
//! point (every fence, and the end) builds the images a power failure could leave (all of
//! them when there are at most [`Config::exhaustive_limit`], else a seeded sample), and for
//! each image checks that
//! 1. mount recovers it;
//! 2. what `stat`, `readlink`, `readdir` and `read` show equals the state before or after
//!    the interrupted operation (byte by byte old or new for relaxed-mode overwrites and
//!    hole punches), so every earlier operation is intact, except for the times of files
//!    written since their last fsync, which may be any they had since it;
//! 3. fsck finds nothing after a clean unmount;
//! 4. recovery itself survives a crash: the first recovery runs under capture, is crashed
//!    at each of its own fences into images sampled by the same rules as a crash point's
//!    (every one when they are few; else nothing of the fence, all of it, and mixes with
//!    lines out of step), and the second recovery must give the same state as the first,
//!    again fsck-clean; the second recovery is crashed in turn (from one image of one fence
//!    of the first, on the first image of each crash point), and so on to
//!    [`Config::recovery_depth`], after which a recovery runs uncrashed.

#![forbid(unsafe_code)]

use super::death::{explore_deaths, shared_image, Beside, Deaths, Survivor};
use super::descriptors::Descriptors;
use super::snapshot::{lagging_times_ok, torn_between, without_times, Lagging, Snapshot};
use super::workload::{Op, Workload};
use crate::fs::{fsck, FsckMode};
use crate::pm::{CrashDevice, CrashPoint};
use crate::FileSystem;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

/// Which failures to explore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureModel {
    /// A power failure at every fence (the images its cache lines may leave).
    PowerFailure,
    /// A process killed after every store (`crashtest/death.rs`).
    ProcessDeath,
    /// Both.
    Both,
}

impl FailureModel {
    fn power(self) -> bool {
        self != FailureModel::ProcessDeath
    }
    fn death(self) -> bool {
        self != FailureModel::PowerFailure
    }
}

/// How much to explore.
#[derive(Clone, Debug)]
pub struct Config {
    /// A crash point with at most this many states has every one of them checked.
    pub exhaustive_limit: u64,
    /// States checked at a crash point with more than `exhaustive_limit` (the two extremes
    /// and random ones).
    pub samples: u64,
    /// States checked at each fence of a crashed recovery: every one when there are at most
    /// this many, else this many sampled (the two extremes and mixes, as at a crash point).
    pub recovery_samples: u64,
    /// How many recoveries in a row are crashed: 1 crashes the first recovery only; 2 also
    /// crashes, on the first image of each crash point, the recovery of one image of one of
    /// the first recovery's fences (a seeded choice; every distinct image of that fence is
    /// recovered, the last under capture) at each of its own fences; and so on.
    pub recovery_depth: u32,
    /// Recovery crashes for at most this many images per crash point (0: none).
    pub recovery_images_per_point: u64,
    /// Seeds every sample.
    pub seed: u64,
    /// Only this crash point (and state, recovery point, recovery state), to rerun a failure.
    pub only: Option<Only>,
    /// HashFS's placement on the explored images (the other mappings ignore it).
    pub placement: crate::layout::HashPlacement,
    /// The write mode the explored images are made with (strict: every write of up to the
    /// untorn limit must be whole or absent).
    pub write_mode: crate::layout::WriteMode,
    /// The journals of the explored images (1: a machine with one CPU).
    pub journals: u32,
    /// Power failures, process deaths, or both.
    pub model: FailureModel,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            exhaustive_limit: 1 << 12,
            samples: 32,
            recovery_samples: 4,
            recovery_depth: 2,
            recovery_images_per_point: u64::MAX,
            seed: 0,
            only: None,
            placement: crate::layout::HashPlacement::Paper,
            write_mode: crate::layout::WriteMode::Relaxed,
            journals: super::EXPLORER_JOURNALS,
            model: FailureModel::PowerFailure,
        }
    }
}

/// One state to rerun.
#[derive(Clone, Copy, Debug, Default)]
pub struct Only {
    pub point: usize,
    pub state: Option<u64>,
    pub rpoint: Option<usize>,
    pub rstate: Option<u64>,
    /// A process death after this many stores (instead of a crash point).
    pub death: Option<usize>,
}

/// What one exploration did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub workloads: u64,
    pub crash_points: u64,
    /// Distinct crash images recovered and checked.
    pub states: u64,
    /// Images of crashed recoveries recovered again and checked.
    pub recovery_states: u64,
    /// Distinct images of process deaths repaired and checked.
    pub deaths: u64,
}

impl Stats {
    pub fn add(&mut self, o: &Stats) {
        self.workloads += o.workloads;
        self.crash_points += o.crash_points;
        self.states += o.states;
        self.recovery_states += o.recovery_states;
        self.deaths += o.deaths;
    }
    pub fn total_states(&self) -> u64 {
        self.states + self.recovery_states + self.deaths
    }
}

/// A state that failed a check, with what it takes to rerun it.
#[derive(Clone, Debug)]
pub struct Failure {
    pub mapping: String,
    pub workload: String,
    pub ops: Vec<String>,
    pub seed: u64,
    pub point: usize,
    pub state: u64,
    pub rpoint: Option<(usize, u64)>,
    /// A process death after this many stores, instead of a crash point.
    pub death: Option<usize>,
    /// Which contents each pending line had in the failing image.
    pub persisted: String,
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "FAILED: {} on {}", self.workload, self.mapping)?;
        for (i, op) in self.ops.iter().enumerate() {
            writeln!(f, "  step {i}: {op}")?;
        }
        if let Some(n) = self.death {
            writeln!(f, "  process death after store {n} of the workload")?;
            writeln!(f, "  stores: {}", self.persisted)?;
            writeln!(f, "  {}", self.message.replace('\n', "\n  "))?;
            return write!(
                f,
                "  reproduce: hashfs crashtest --mapping {} --workload {} --model death --death {n}",
                self.mapping, self.workload
            );
        }
        write!(
            f,
            "  crash point {} (before fence {} of the workload, or at its end), state {}",
            self.point, self.point, self.state
        )?;
        if let Some((rp, rs)) = self.rpoint {
            write!(f, "; recovery crashed at its fence {rp}, state {rs}")?;
        }
        writeln!(f)?;
        writeln!(f, "  persisted: {}", self.persisted)?;
        writeln!(f, "  {}", self.message.replace('\n', "\n  "))?;
        write!(
            f,
            "  reproduce: hashfs crashtest --mapping {} --workload {} --seed {} --point {} --state {}",
            self.mapping, self.workload, self.seed, self.point, self.state
        )?;
        if let Some((rp, rs)) = self.rpoint {
            write!(f, " --rpoint {rp} --rstate {rs}")?;
        }
        Ok(())
    }
}

/// What a recovered image must equal.
pub(super) enum Allowed<'a> {
    /// Before or after an atomic operation (or, at the end, the final state alone).
    Exact(&'a [&'a Snapshot]),
    /// Between before and after of an overwrite or hole punch.
    Torn(&'a Snapshot, &'a Snapshot),
}

/// [`Allowed`], with its snapshots' lagging times cleared, and the lagging files' times
/// checked against the states since their last fsync (`window`, ending with the state
/// after the interrupted operation).
pub(super) struct Expect<'a> {
    pub allowed: Allowed<'a>,
    pub window: &'a [Snapshot],
    pub lag: &'a Lagging,
}

static NO_LAG: Lagging = Lagging::new();

impl Expect<'_> {
    pub(super) fn check(&self, r: &Snapshot) -> Result<(), String> {
        if self.lag.is_empty() {
            return self.allowed.check(r);
        }
        lagging_times_ok(r, self.window, self.lag)?;
        self.allowed.check(&without_times(r, self.lag))
    }
}

impl Allowed<'_> {
    fn check(&self, r: &Snapshot) -> Result<(), String> {
        let (list, ok): (Vec<&Snapshot>, bool) = match self {
            Allowed::Exact(l) => (l.to_vec(), false),
            Allowed::Torn(b, a) => (vec![*b, *a], torn_between(r, b, a)),
        };
        if ok || list.contains(&r) {
            return Ok(());
        }
        let mut msg = String::from("recovered state is not one the operation allows");
        for (i, s) in list.iter().enumerate() {
            msg += &format!("\nagainst allowed state {i}: {}", r.first_difference(s));
        }
        Err(msg)
    }
}

/// The image for state `state` of `point`: a mixed-radix index over the lines' outcomes
/// when the point is explored exhaustively; else state 0 is the durable image, 1 the
/// latest, and the others are drawn from a generator seeded by (seed, point, state).
pub(crate) fn image_for(
    point: &CrashPoint,
    state: u64,
    exhaustive: bool,
    seed: u64,
    pidx: usize,
) -> (Vec<u8>, Vec<usize>) {
    let choices: Vec<usize> = if exhaustive {
        let mut rest = state;
        point
            .lines
            .iter()
            .map(|l| {
                let n = l.outcomes.len() as u64;
                let c = rest % n;
                rest /= n;
                c as usize
            })
            .collect()
    } else if state < 2 {
        point.lines.iter().map(|l| if state == 0 { 0 } else { l.outcomes.len() - 1 }).collect()
    } else {
        let mut rng = SmallRng::seed_from_u64(seed ^ (pidx as u64) << 32 ^ state.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        // Mostly old, mostly new, or even: the states with a single line out of step are
        // where ordering bugs show.
        let bias = [0.05, 0.5, 0.95][(state % 3) as usize];
        point
            .lines
            .iter()
            .map(|l| {
                let n = l.outcomes.len();
                if rng.random_bool(0.85) {
                    if rng.random_bool(bias) {
                        n - 1
                    } else {
                        0
                    }
                } else {
                    rng.random_range(0..n)
                }
            })
            .collect()
    };
    (point.image_choosing(|i| choices[i]), choices)
}

fn describe(point: &CrashPoint, choices: &[usize]) -> String {
    let mut parts: Vec<String> = point
        .lines
        .iter()
        .zip(choices)
        .take(24)
        .map(|(l, &c)| format!("@{:#x}:{}/{}", l.line * 64, c, l.outcomes.len() - 1))
        .collect();
    if point.lines.len() > 24 {
        parts.push(format!("... {} lines in all", point.lines.len()));
    }
    if parts.is_empty() {
        return "only what was fenced (no line pending)".into();
    }
    format!("line@offset:outcome/latest (0 = durable) {}", parts.join(" "))
}

pub(super) fn image_hash(img: &[u8]) -> u64 {
    (crc32c::crc32c(img) as u64) << 32 | crc32c::crc32c_append(0x5EED_5EED, img) as u64
}

/// Mounts `img`, checks the state against `allowed` and fsck; returns the state and the
/// crash points of the recovery when `capture` is on.
pub(super) fn recover_and_check(
    img: &[u8],
    allowed: &Expect,
    capture: bool,
) -> Result<(Snapshot, Vec<CrashPoint>, Arc<CrashDevice>), String> {
    let dev = Arc::new(CrashDevice::from_image(img));
    dev.set_capture(capture);
    let (fs, _report) = FileSystem::mount(dev.clone(), &|_, _| {}).map_err(|e| format!("mount failed: {e}"))?;
    dev.set_capture(false);
    let rpoints = dev.take_points();
    let snap = Snapshot::of(&fs).map_err(|e| format!("walking the recovered tree failed: {e}"))?;
    allowed.check(&snap)?;
    fs.unmount().map_err(|e| format!("unmount after recovery failed: {e}"))?;
    let r = fsck(dev.clone(), FsckMode::Check, &|_, _| {}).map_err(|e| format!("fsck failed to run: {e}"))?;
    if !r.findings.is_empty() {
        return Err(format!("fsck findings after recovery: {:#?}", r.findings));
    }
    Ok((snap, rpoints, dev))
}

/// What running a workload under capture recorded.
pub(super) struct Recording {
    /// The file system before the workload and after each operation.
    states: Vec<Snapshot>,
    /// The fence index (relative to the start) at which each operation began.
    boundaries: Vec<u64>,
    /// Whether each operation may leave a byte-wise mix of before and after.
    torn: Vec<bool>,
    /// The files whose times may lag during each operation, and (last) after the workload.
    lagging: Vec<Lagging>,
    /// Every fence, and the end.
    points: Vec<CrashPoint>,
    /// The fence count when capture began.
    start: u64,
    /// The stores, for process deaths (when the model has them).
    deaths: Option<Deaths>,
}

impl Recording {
    /// The operation a crash at point `pidx` interrupts (the number of operations: the end).
    fn step(&self, pidx: usize) -> usize {
        if pidx == self.points.len() - 1 {
            return self.torn.len();
        }
        let rel = self.points[pidx].fence_index - self.start;
        self.boundaries.iter().rposition(|&b| b <= rel).expect("inside a step")
    }

    /// The states a crash during operation `k` (or at the end) may recover to, out of
    /// `states` (the recorded ones, their lagging times cleared when files lag).
    /// Runs `check` with what a failure during operation `k` (or at the end) must recover
    /// to: the allowed states, their lagging times cleared when files lag.
    pub(super) fn with_expect<R>(&self, k: usize, check: impl FnOnce(&Expect<'_>) -> R) -> R {
        let lag = &self.lagging[k];
        let cleared: Vec<Snapshot> =
            if lag.is_empty() { Vec::new() } else { self.states.iter().map(|s| without_times(s, lag)).collect() };
        let states = if lag.is_empty() { &self.states } else { &cleared };
        let mut pair = [&states[0], &states[0]];
        let allowed = self.allowed(states, k, &mut pair);
        check(&Expect { allowed, window: &self.states[..=(k + 1).min(self.states.len() - 1)], lag })
    }

    fn allowed<'a>(&self, states: &'a [Snapshot], k: usize, pair: &'a mut [&'a Snapshot; 2]) -> Allowed<'a> {
        if k == self.torn.len() {
            *pair = [&states[k], &states[k]];
            return Allowed::Exact(&pair[..1]);
        }
        if self.torn[k] {
            Allowed::Torn(&states[k], &states[k + 1])
        } else {
            *pair = [&states[k], &states[k + 1]];
            Allowed::Exact(&pair[..])
        }
    }
}

/// Runs the workload on a crash device made from `base`, capturing every fence (and, for
/// process deaths, every store).
///
/// Deaths on an image many processes may share are those of a participant beside a
/// survivor (`death.rs`): the workload runs as the second participant.
fn record(base: &[u8], w: &Workload, model: FailureModel) -> Result<Recording, String> {
    let dev = Arc::new(CrashDevice::from_image(base));
    let survivor =
        if model == FailureModel::ProcessDeath && shared_image(&dev) { Some(Survivor::start(&dev)?) } else { None };
    let mount = || match &survivor {
        Some(s) => s.region.join(&dev),
        None => FileSystem::mount(dev.clone(), &|_, _| {}).map(|(fs, _)| fs).map_err(|e| format!("mount: {e}")),
    };
    let mut fs = mount().map_err(|e| format!("the base image does not mount: {e}"))?;
    let snap =
        |fs: &FileSystem<CrashDevice>| Snapshot::of(fs).map_err(|e| format!("the live file system does not walk: {e}"));
    let mut states = vec![snap(&fs)?];
    let mut boundaries = Vec::new();
    let mut torn = Vec::new();
    let mut lagging = Vec::new();
    let mut lag = Lagging::new();
    dev.set_capture(true);
    let start = dev.fence_count();
    let death_base = model.death().then(|| dev.live_image());
    match &survivor {
        // The inodes in use as the region says at each device call: a takeover's recovery
        // reads those (`death.rs`).
        Some(s) if model.death() => {
            let path = s.region.path().to_path_buf();
            dev.record_stores_with(Arc::new(move || super::death::read_inodes_in_use(&path)));
        }
        _ if model.death() => dev.record_stores(),
        _ => {}
    }
    let mut marks = Vec::new();
    let (mut regions, mut dying) = (Vec::new(), Vec::new());
    let mut fds = Descriptors::default();
    for (k, op) in w.ops.iter().enumerate() {
        boundaries.push(dev.fence_count() - start);
        marks.push(dev.stores_recorded());
        if let Some(s) = &survivor {
            regions.push(s.region.bytes()?);
            dying.push(Survivor::participant(&fs));
        }
        torn.push(op.is_torn_on(&fs, &fds));
        op.start_lag(&fs, &fds, &mut lag, k);
        lagging.push(lag.clone());
        // A failing operation must change nothing, which is checked too.
        let ok = op.apply(&fs, &mut fds).is_ok();
        // Unmounted by the operation (beside a survivor, which stays, an unmount is a
        // leaving, and the workload's participant joins again for what follows).
        if ok && (matches!(op, Op::Remount) || survivor.is_some() && matches!(op, Op::Unmount)) {
            drop(fs);
            fs = mount().map_err(|e| format!("the remount failed: {e}"))?;
        }
        op.end_lag(&fs, &fds, &mut lag, ok);
        states.push(snap(&fs)?);
    }
    lagging.push(lag);
    dev.set_capture(false);
    let probed = dev.take_probed();
    let beside = survivor.as_ref().map(|_| Beside { base: base.to_vec(), regions, dying, inodes_in_use: probed });
    let deaths = death_base.map(|base| Deaths { base, stores: dev.take_stores(), marks, beside });
    drop(fs);
    drop(survivor);
    let mut points = dev.take_points();
    let mut end = dev.crash_point_now();
    end.fence_index = dev.fence_count();
    points.push(end);
    Ok(Recording { states, boundaries, torn, lagging, points, start, deaths })
}

/// Where a failure was found, for its report.
pub(super) struct Found {
    pub point: usize,
    pub state: u64,
    pub rpoint: Option<(usize, u64)>,
    pub death: Option<usize>,
    pub persisted: String,
    pub message: String,
}

/// Runs one workload from the base image and explores every crash point.
pub fn explore(cfg: &Config, mapping: &str, base: &[u8], w: &Workload, failures: &mut Vec<Failure>) -> Stats {
    if cfg.model == FailureModel::Both {
        // Two recordings: power failures of the mount of one process, and, on an image
        // many processes may share, deaths of a participant beside a survivor (`death.rs`).
        let mut stats =
            explore(&Config { model: FailureModel::PowerFailure, ..cfg.clone() }, mapping, base, w, failures);
        stats.add(&explore(&Config { model: FailureModel::ProcessDeath, ..cfg.clone() }, mapping, base, w, failures));
        stats.workloads = 1;
        return stats;
    }
    let mut stats = Stats { workloads: 1, ..Default::default() };
    let fail = |f: Found| Failure {
        mapping: mapping.to_string(),
        workload: w.id.clone(),
        ops: w.ops.iter().map(Op::to_string).collect(),
        seed: cfg.seed,
        point: f.point,
        state: f.state,
        rpoint: f.rpoint,
        death: f.death,
        persisted: f.persisted,
        message: f.message,
    };
    let rec = match record(base, w, cfg.model) {
        Ok(r) => r,
        Err(message) => {
            let f = Found { point: 0, state: 0, rpoint: None, death: None, persisted: String::new(), message };
            failures.push(fail(f));
            return stats;
        }
    };
    if let Some(d) = &rec.deaths {
        if let Err(f) = explore_deaths(&rec, d, cfg.only.and_then(|o| o.death), &mut stats) {
            failures.push(fail(f));
            return stats;
        }
    }
    let power = cfg.model.power() && cfg.only.is_none_or(|o| o.death.is_none());
    for pidx in (0..rec.points.len()).filter(|_| power) {
        if cfg.only.is_some_and(|o| o.point != pidx) {
            continue;
        }
        stats.crash_points += 1;
        let k = rec.step(pidx);
        if let Err(f) = rec.with_expect(k, |expect| explore_point(cfg, &rec.points[pidx], pidx, expect, &mut stats)) {
            failures.push(fail(f));
            return stats;
        }
    }
    stats
}

/// Every state (or a seeded sample) of one crash point: recovered and checked, and for the
/// first few, recovery itself crashed at each of its fences.
fn explore_point(
    cfg: &Config,
    point: &CrashPoint,
    pidx: usize,
    allowed: &Expect<'_>,
    stats: &mut Stats,
) -> Result<(), Found> {
    let count = point.state_count();
    let exhaustive = count <= cfg.exhaustive_limit;
    let n = if exhaustive { count } else { cfg.samples.max(2) };
    let mut seen = HashSet::new();
    let mut recovery_crashed = 0;
    for state in 0..n {
        if cfg.only.is_some_and(|o| o.state.is_some_and(|s| s != state)) {
            continue;
        }
        let (img, choices) = image_for(point, state, exhaustive, cfg.seed, pidx);
        if !seen.insert(image_hash(&img)) {
            continue;
        }
        stats.states += 1;
        let capture = recovery_crashed < cfg.recovery_images_per_point;
        let persisted = || describe(point, &choices);
        let (clean, rpoints, _) = recover_and_check(&img, allowed, capture).map_err(|message| Found {
            point: pidx,
            state,
            rpoint: None,
            death: None,
            persisted: persisted(),
            message,
        })?;
        if !capture {
            continue;
        }
        recovery_crashed += 1;
        // The recoveries after it are crashed too, from one of its fences (a seeded choice)
        // on the first image of the point.
        let deep = (cfg.seed ^ (pidx as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) % rpoints.len().max(1) as u64;
        for (ridx, rp) in rpoints.iter().enumerate() {
            if cfg.only.is_some_and(|o| o.rpoint.is_some_and(|r| r != ridx)) {
                continue;
            }
            // A fence before which recovery had changed nothing crashes into the image just
            // checked.
            if rp.lines.is_empty() && rp.durable == img {
                continue;
            }
            let deeper = recovery_crashed == 1 && ridx as u64 == deep;
            let depth = Depth { now: 1, max: if deeper { cfg.recovery_depth } else { 1 } };
            explore_recovery_point(cfg, rp, ridx, state, depth, &clean, stats).map_err(|(rstate, rdesc, msg)| {
                Found {
                    point: pidx,
                    state,
                    rpoint: Some((ridx, rstate)),
                    death: None,
                    persisted: format!("{}; in the crashed recovery: {rdesc}", persisted()),
                    message: format!("a second recovery differs from the first: {msg}"),
                }
            })?;
        }
    }
    Ok(())
}

/// Which crashed recovery in a row a fence belongs to, and how many may be crashed.
#[derive(Clone, Copy)]
struct Depth {
    now: u32,
    max: u32,
}

/// The states of one fence of a crashed recovery (the `depth.now`th in a row): each must
/// recover to `clean`, the state the first recovery reached, and the recovery of the last
/// distinct one is crashed in turn while `depth.now` is below `depth.max`. Errs with the
/// state, what it persisted (and what the crashed recoveries after it did), and the message.
fn explore_recovery_point(
    cfg: &Config,
    rp: &CrashPoint,
    ridx: usize,
    seed: u64,
    depth: Depth,
    clean: &Snapshot,
    stats: &mut Stats,
) -> Result<(), (u64, String, String)> {
    let same = [clean];
    let again = Expect { allowed: Allowed::Exact(&same), window: &[], lag: &NO_LAG };
    let rcount = rp.state_count();
    let rex = rcount <= cfg.recovery_samples;
    let rn = if rex { rcount } else { cfg.recovery_samples.max(2) };
    let mut rseen = HashSet::new();
    let mut last = None;
    for rstate in 0..rn {
        if depth.now == 1 && cfg.only.is_some_and(|o| o.rstate.is_some_and(|s| s != rstate)) {
            continue;
        }
        let (rimg, rchoices) = image_for(rp, rstate, rex, seed, ridx);
        if !rseen.insert(image_hash(&rimg)) {
            continue;
        }
        stats.recovery_states += 1;
        recover_and_check(&rimg, &again, false).map_err(|msg| (rstate, describe(rp, &rchoices), msg))?;
        last = Some((rstate, rimg, rchoices));
    }
    // The next recovery, crashed at each of its fences: on the last image (a mix when the
    // fence was sampled), which the recovery above has just passed uncrashed.
    let Some((rstate, rimg, rchoices)) = last.filter(|_| depth.now < depth.max) else {
        return Ok(());
    };
    let (_, next, _) = recover_and_check(&rimg, &again, true).map_err(|msg| (rstate, describe(rp, &rchoices), msg))?;
    for (nidx, np) in next.iter().enumerate() {
        if np.lines.is_empty() && np.durable == rimg {
            continue;
        }
        let nseed = seed ^ rstate.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(depth.now) << 48;
        let deeper = Depth { now: depth.now + 1, ..depth };
        explore_recovery_point(cfg, np, nidx, nseed, deeper, clean, stats).map_err(|(s, d, m)| {
            let then = format!("then recovery {} crashed at its fence {nidx}, state {s}", deeper.now);
            (rstate, format!("{}; {then}: {d}", describe(rp, &rchoices)), m)
        })?;
    }
    Ok(())
}
