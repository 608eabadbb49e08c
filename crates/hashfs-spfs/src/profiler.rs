//! SPFS's Sync Point Profiler (§3.2) and Sync Factor (§3.2.1).
//!
//! The profiler judges a file at its fsyncs, not at its writes: an fsync *qualifies* when
//! the previous fsync of the same file came less than `interval` before it and the
//! average number of bytes written between the fsyncs of the current run stays under
//! `max_avg_bytes`. `promote_after` consecutive qualifying fsyncs promote the file. The
//! defaults are the paper's (1 s, 4 MiB) and the released code's run length (30,
//! `migr_continual_cnt`, which the paper does not mention).
//!
//! The Sync Factor is SPFS's exponential moving average over a file's I/O requests,
//! `SF = α·w + (1−α)·SF`, where `w` is 1 for a qualifying fsync and 0 for any other
//! request (a read, a fsync that does not qualify); α = 5 %. A promoted file whose Sync
//! Factor falls under the hard limit is written back to the lower file system.

use std::time::{Duration, Instant};

/// The profiler's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProfilerConfig {
    /// Longest gap between two fsyncs of a file for the second to qualify.
    pub interval: Duration,
    /// Largest average of bytes written between the fsyncs of a qualifying run.
    pub max_avg_bytes: u64,
    /// Consecutive qualifying fsyncs that promote a file.
    pub promote_after: u32,
    /// The Sync Factor's attenuation α (0 < α < 1).
    pub alpha: f64,
    /// A promoted file whose Sync Factor falls under this is written back; None: only
    /// when PM runs short (the paper's default when no hard limit is set).
    pub sf_limit: Option<f64>,
}

impl Default for ProfilerConfig {
    fn default() -> Self {
        ProfilerConfig {
            interval: Duration::from_millis(1000),
            max_avg_bytes: 4 << 20,
            promote_after: 30,
            alpha: 0.05,
            sf_limit: Some(0.05),
        }
    }
}

/// What one fsync told the profiler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncVerdict {
    pub qualifies: bool,
    /// The run reached `promote_after`: promote the file now.
    pub promote: bool,
    /// Less than `max_avg_bytes` were written since the file's last fsync (the directory
    /// rule counts such fsyncs: `dirs.rs`).
    pub small: bool,
}

/// One file's profile (kept in DRAM by the daemon, as SPFS keeps it in the VFS inode).
#[derive(Clone, Debug, Default)]
pub struct SyncProfile {
    last_sync: Option<Instant>,
    bytes_since_sync: u64,
    run_bytes: u64,
    run_syncs: u64,
    consecutive: u32,
    sf: f64,
    last_io: Option<Instant>,
}

impl SyncProfile {
    /// `n` bytes were written to the file.
    pub fn wrote(&mut self, n: u64, now: Instant) {
        self.bytes_since_sync = self.bytes_since_sync.saturating_add(n);
        self.last_io = Some(now);
    }

    /// A read request: weight 0 in the Sync Factor.
    pub fn read(&mut self, cfg: &ProfilerConfig, now: Instant) {
        self.sf *= 1.0 - cfg.alpha;
        self.last_io = Some(now);
    }

    /// `n` read requests counted without the state's lock (the shim's reads of a file
    /// below), applied before the next request that is not a read: each multiplies the
    /// Sync Factor by 1 - α, in whatever order they came between the two.
    pub fn reads(&mut self, cfg: &ProfilerConfig, n: u64) {
        if n > 0 {
            self.sf *= (1.0 - cfg.alpha).powf(n as f64);
        }
    }

    /// An fsync (or an O_SYNC/O_DSYNC write's implied one) at `now`.
    pub fn synced(&mut self, cfg: &ProfilerConfig, now: Instant) -> SyncVerdict {
        let bytes = std::mem::take(&mut self.bytes_since_sync);
        let soon = self.last_sync.is_some_and(|t| now.saturating_duration_since(t) < cfg.interval);
        self.last_sync = Some(now);
        self.last_io = Some(now);
        let qualifies = soon && {
            let avg = (self.run_bytes + bytes) / (self.run_syncs + 1);
            avg < cfg.max_avg_bytes
        };
        if qualifies {
            self.run_bytes += bytes;
            self.run_syncs += 1;
            self.consecutive = self.consecutive.saturating_add(1);
        } else {
            self.run_bytes = 0;
            self.run_syncs = 0;
            self.consecutive = 0;
        }
        self.sf = cfg.alpha * f64::from(u8::from(qualifies)) + (1.0 - cfg.alpha) * self.sf;
        SyncVerdict {
            qualifies,
            promote: qualifies && self.consecutive >= cfg.promote_after,
            small: bytes < cfg.max_avg_bytes,
        }
    }

    pub fn sync_factor(&self) -> f64 {
        self.sf
    }

    pub fn consecutive(&self) -> u32 {
        self.consecutive
    }

    /// Whether the file is in a run of qualifying fsyncs, its last one less than ten
    /// intervals before `now` (the mount opens such a file through the daemon, where it
    /// can be promoted while open, not by passthrough).
    pub fn syncing(&self, cfg: &ProfilerConfig, now: Instant) -> bool {
        self.consecutive > 0 && self.last_sync.is_some_and(|t| now.saturating_duration_since(t) < cfg.interval * 10)
    }

    /// Whether the file saw no I/O for `quiet` before `now`.
    pub fn idle(&self, quiet: Duration, now: Instant) -> bool {
        self.last_io.is_none_or(|t| now.saturating_duration_since(t) >= quiet)
    }

    /// Under the hard limit: a promoted file to write back.
    pub fn below_limit(&self, cfg: &ProfilerConfig) -> bool {
        cfg.sf_limit.is_some_and(|l| self.sf < l)
    }

    /// A file found promoted at mount: the Sync Factor is not kept across mounts, so it
    /// starts where a promotion leaves it (`promote_after` qualifying fsyncs from 0).
    pub fn recovered(cfg: &ProfilerConfig) -> SyncProfile {
        let sf = 1.0 - (1.0 - cfg.alpha).powi(cfg.promote_after as i32);
        SyncProfile { sf, ..SyncProfile::default() }
    }

    /// A file whose Sync Factor was saved before a remount (`saved_profiles.rs`): the
    /// factor comes back, the run of fsyncs does not (its clock did not survive).
    pub fn kept(sf: f64) -> SyncProfile {
        SyncProfile { sf, ..SyncProfile::default() }
    }

    /// Whether the file's fsyncs qualified often enough, lately, to keep it promoted: its
    /// Sync Factor at or above the hard limit (0.05 without one). The mount opens such a
    /// file through the daemon, not by passthrough (docs/stacked.md, *Passthrough*).
    pub fn syncs_often(&self, cfg: &ProfilerConfig) -> bool {
        self.sf >= cfg.sf_limit.unwrap_or(0.05)
    }

    /// A file just written back starts a new profile: it must earn its promotion again.
    pub fn restart(&mut self) {
        let sf = self.sf;
        *self = SyncProfile { sf, ..SyncProfile::default() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ProfilerConfig {
        ProfilerConfig { promote_after: 3, ..ProfilerConfig::default() }
    }

    #[test]
    fn reads_counted_apart_lower_the_sync_factor_as_reads_do() {
        let cfg = ProfilerConfig::default();
        let now = Instant::now();
        let (mut a, mut b) =
            (SyncProfile { sf: 0.8, ..Default::default() }, SyncProfile { sf: 0.8, ..Default::default() });
        for _ in 0..7 {
            a.read(&cfg, now);
        }
        b.reads(&cfg, 7);
        assert!((a.sync_factor() - b.sync_factor()).abs() < 1e-12, "{} {}", a.sync_factor(), b.sync_factor());
        b.reads(&cfg, 0);
        assert!((a.sync_factor() - b.sync_factor()).abs() < 1e-12);
    }

    #[test]
    fn small_frequent_syncs_promote_after_the_run() {
        let c = cfg();
        let mut p = SyncProfile::default();
        let t0 = Instant::now();
        let mut verdicts = Vec::new();
        for i in 0..5u64 {
            p.wrote(4096, t0 + Duration::from_millis(10 * i));
            verdicts.push(p.synced(&c, t0 + Duration::from_millis(10 * i + 1)));
        }
        // The first has no predecessor; the next three make the run of three.
        assert!(!verdicts[0].qualifies);
        assert_eq!(verdicts.iter().map(|v| v.promote).collect::<Vec<_>>(), [false, false, false, true, true]);
        assert_eq!(p.consecutive(), 4);
    }

    #[test]
    fn a_slow_sync_breaks_the_run() {
        let c = cfg();
        let mut p = SyncProfile::default();
        let t0 = Instant::now();
        p.synced(&c, t0);
        assert!(p.synced(&c, t0 + Duration::from_millis(100)).qualifies);
        assert!(p.synced(&c, t0 + Duration::from_millis(200)).qualifies);
        assert!(!p.synced(&c, t0 + Duration::from_millis(1200)).qualifies, "1 s apart does not qualify");
        assert_eq!(p.consecutive(), 0);
        assert!(p.synced(&c, t0 + Duration::from_millis(1300)).qualifies);
        assert_eq!(p.consecutive(), 1);
    }

    #[test]
    fn large_writes_between_syncs_do_not_qualify() {
        let c = cfg();
        let mut p = SyncProfile::default();
        let t0 = Instant::now();
        p.synced(&c, t0);
        p.wrote(8 << 20, t0);
        assert!(!p.synced(&c, t0 + Duration::from_millis(5)).qualifies, "8 MiB average");
        p.wrote(1 << 20, t0);
        assert!(p.synced(&c, t0 + Duration::from_millis(10)).qualifies);
        // The run's average counts every sync of the run: 1 MiB then 7 MiB averages 4 MiB.
        p.wrote(7 << 20, t0);
        assert!(!p.synced(&c, t0 + Duration::from_millis(15)).qualifies);
        p.wrote((3 << 20) - 1, t0);
        assert!(p.synced(&c, t0 + Duration::from_millis(20)).qualifies);
        p.wrote(5 << 20, t0);
        assert!(p.synced(&c, t0 + Duration::from_millis(25)).qualifies, "average just under 4 MiB");
    }

    #[test]
    fn sync_factor_rises_with_qualifying_syncs_and_decays_with_reads() {
        let c = cfg();
        let mut p = SyncProfile::default();
        let t0 = Instant::now();
        for i in 0..31u64 {
            p.synced(&c, t0 + Duration::from_millis(i));
        }
        let expect = 1.0 - 0.95f64.powi(30);
        assert!((p.sync_factor() - expect).abs() < 1e-9, "{} vs {expect}", p.sync_factor());
        assert!(!p.below_limit(&c));
        let mut reads = 0;
        while !p.below_limit(&c) {
            p.read(&c, t0);
            reads += 1;
        }
        // ln(0.05 / 0.785) / ln(0.95) = 53.7
        assert_eq!(reads, 54);
        assert!(!ProfilerConfig { sf_limit: None, ..c }.sf_limit.is_some_and(|l| p.sync_factor() < l));
    }

    #[test]
    fn idle_and_restart() {
        let c = cfg();
        let mut p = SyncProfile::default();
        let t0 = Instant::now();
        assert!(p.idle(Duration::from_secs(1), t0));
        p.wrote(1, t0);
        assert!(!p.idle(Duration::from_secs(1), t0 + Duration::from_millis(999)));
        assert!(p.idle(Duration::from_secs(1), t0 + Duration::from_millis(1000)));
        p.synced(&c, t0);
        p.synced(&c, t0);
        let sf = p.sync_factor();
        p.restart();
        assert_eq!(p.consecutive(), 0);
        assert_eq!(p.sync_factor(), sf);
    }
}
