//! SPFS's directory rule (issue 58): files created in a directory whose files sync often
//! are absorbed from their first write, instead of after 30 fsyncs of their own, which a
//! short-lived file (a maildir message: created, synced once or twice, read, deleted) never
//! makes.
//!
//! The released SPFS moves a directory to PM when its files fsync at one per millisecond or
//! more. Here a directory is *hot* when its files made `promote_after` (30) small fsyncs
//! (each after less than `max_avg_bytes` written since the file's last one) within one
//! profiler interval (1 s): the evidence the profiler asks of one file before it promotes
//! it, pooled over the directory's files, so that the rule does not depend on how fast the
//! lower file system's fsync is (through FUSE over ext4 on this machine a directory rarely
//! reaches SPFS's 1,000 a second). It stays hot for ten intervals after its last such run.
//! A file created in a hot directory is promoted at once, empty; one that then does not
//! sync goes back down as any promoted file does (the Sync Factor's hard limit, or PM
//! pressure). Its fsyncs are all absorbed: the lower file system has not made the file's
//! creation durable yet, but its PM copy records where it was made, and a mount that finds
//! the lower inode gone makes it again (`remake.rs`).

use crate::absorb::Key;
use crate::profiler::ProfilerConfig;
use crate::remake::MadeRecord;
use crate::standalone::Made;
use crate::{lock, Stack};
use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Directories remembered at once; past it, those not hot are forgotten.
const MAX_DIRS: usize = 4096;

/// One directory's recent small fsyncs (of any of its files).
#[derive(Default)]
pub struct DirProfile {
    syncs: VecDeque<Instant>,
    hot_until: Option<Instant>,
}

impl DirProfile {
    /// A small fsync of one of the directory's files at `now`.
    pub fn synced(&mut self, cfg: &ProfilerConfig, now: Instant) {
        self.syncs.push_back(now);
        while self.syncs.front().is_some_and(|&t| now.saturating_duration_since(t) >= cfg.interval) {
            self.syncs.pop_front();
        }
        if self.syncs.len() >= cfg.promote_after as usize {
            self.hot_until = Some(now + cfg.interval * 10);
            self.syncs.pop_front();
        }
    }

    /// Whether files created in it now start in PM.
    pub fn hot(&self, now: Instant) -> bool {
        self.hot_until.is_some_and(|t| now < t)
    }
}

impl Stack {
    /// Lower file `key` is (one of) directory `dir`'s: its fsyncs count for the directory
    /// (nothing is kept while the rule is off).
    pub fn file_in(&self, key: Key, dir: Key) {
        if self.cfg.dir_rule {
            self.state(key).lock().dir = Some(dir);
        }
    }

    /// Lower file `key` was just made (`lower` open on it): noted in its directory, and
    /// promoted at once, if it is still empty, when SPFS's standalone rules ask for it
    /// (`standalone.rs`) or its directory is hot. Whether it was.
    pub fn created_in(&self, made: &Made, key: Key, lower: &File) -> bool {
        if !self.cfg.dir_rule && !self.cfg.standalone {
            return false;
        }
        let why = self.standalone_reason(made);
        let hot = self.cfg.dir_rule && lock(&self.dirs).get(&made.dir).is_some_and(|d| d.hot(Instant::now()));
        let sh = self.state(key);
        let mut st = sh.lock();
        if self.cfg.dir_rule {
            st.dir = Some(made.dir);
        }
        if (why.is_none() && !hot) || st.pm.is_some() || st.opens > 0 || !lower.metadata().is_ok_and(|m| m.len() == 0) {
            return false;
        }
        // Where it was made, for a mount that finds its creation lost below (`remake.rs`):
        // without it, the file stays below.
        let rec = match MadeRecord::of(lower.as_fd(), made.dir_path, made.name) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("hashfs: a file made in PM needs its directory's file handle ({e}); it stays below");
                return false;
            }
        };
        self.promote_with(&mut st, lower, Some(&rec));
        let promoted = st.pm.is_some();
        if promoted {
            let c = if why.is_some() { &self.counters.standalone_promotions } else { &self.counters.dir_promotions };
            c.fetch_add(1, Ordering::Relaxed);
        }
        promoted
    }

    /// A small fsync of a file of directory `dir` at `now`.
    pub(crate) fn dir_synced(&self, dir: Key, now: Instant) {
        let mut dirs = lock(&self.dirs);
        if dirs.len() >= MAX_DIRS && !dirs.contains_key(&dir) {
            dirs.retain(|_, d| d.hot(now));
        }
        dirs.entry(dir).or_default().synced(&self.cfg.profiler, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_directory_is_hot_after_a_run_of_small_syncs_within_an_interval() {
        let cfg = ProfilerConfig::default();
        let t0 = Instant::now();
        let mut d = DirProfile::default();
        for i in 0..29 {
            d.synced(&cfg, t0 + Duration::from_millis(i * 10));
        }
        assert!(!d.hot(t0 + Duration::from_millis(290)), "29 syncs made it hot");
        d.synced(&cfg, t0 + Duration::from_millis(290));
        assert!(d.hot(t0 + Duration::from_millis(300)));
        assert!(!d.hot(t0 + Duration::from_millis(290) + cfg.interval * 10), "hot forever");
        // Thirty syncs spread over more than an interval: not hot.
        let mut slow = DirProfile::default();
        for i in 0..60 {
            slow.synced(&cfg, t0 + Duration::from_millis(i * 40));
        }
        assert!(!slow.hot(t0 + Duration::from_millis(2400)), "25 a second made it hot");
    }
}
