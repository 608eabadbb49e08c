//! SPFS's stacked mode (`../shared/papers/spfs-stackable-pm-fs-fast23.txt`): HashFS's PM
//! stacked over an ordinary directory (ext4, XFS, tmpfs), served through FUSE.
//!
//! Every file lives in the lower directory until the Sync Point Profiler
//! ([`profiler`]) sees it fsynced often with little written between syncs; then it is
//! *promoted*: its writes go to a PM copy in the HashFS image ([`absorb`]), reads merge
//! that copy over the lower file, and its fsync is a PM fence instead of a disk flush. A
//! background thread writes promoted files back to the lower file system when their Sync
//! Factor falls under the hard limit or PM passes its high-water mark ([`demote`]).
//! Everything else (directories, names, attributes, unpromoted files) is the lower file
//! system's, reached through O_PATH descriptors ([`ops`]).
//!
//! Differences from the released SPFS, on purpose: the PM side survives crashes and
//! remounts (SPFS formats PM at every mount); write-back exists and is crash-safe (SPFS's
//! is on a side branch); a promoted file can be memory-mapped (the kernel's page cache
//! serves it; SPFS returns ENODEV). Promotion applies to the file as a whole, not to its
//! extents one by one, and a block reaches PM whole (the rest copied from the lower file
//! on its first write) where SPFS copies whole extents.

#![deny(unsafe_code)]

pub mod absorb;
#[cfg(test)]
mod crashtest;
mod demote;
#[allow(unsafe_code)]
mod lower;
mod ops;
pub mod profiler;

pub use absorb::Recovery;
pub use profiler::ProfilerConfig;

use absorb::{Key, PmStore, Promoted};
use profiler::SyncProfile;
use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The stack's parameters.
#[derive(Clone, Debug)]
pub struct StackConfig {
    pub profiler: ProfilerConfig,
    /// PM use above which files are written back (fraction of the image's blocks).
    pub high_water: f64,
    /// Write-back on pressure stops under this.
    pub low_water: f64,
    /// How often the write-back thread looks.
    pub tick: Duration,
    /// A file with I/O this recently is written back only under pressure (SPFS suspends
    /// demotion while the foreground does I/O).
    pub quiet: Duration,
}

impl Default for StackConfig {
    fn default() -> Self {
        StackConfig {
            profiler: ProfilerConfig::default(),
            high_water: 0.8,
            low_water: 0.6,
            tick: Duration::from_millis(250),
            quiet: Duration::from_secs(1),
        }
    }
}

/// Counters, shown by `hashfs info` on the mount point.
#[derive(Default)]
pub struct Counters {
    pub promotions: AtomicU64,
    pub write_backs: AtomicU64,
    pub absorbed_syncs: AtomicU64,
    pub lower_syncs: AtomicU64,
    pub pm_full_demotions: AtomicU64,
}

/// One lower file's state in the daemon: its profile and, once promoted, its PM copy.
#[derive(Default)]
pub struct FileState {
    pub profile: SyncProfile,
    pub pm: Option<Promoted>,
    /// Open handles through this mount.
    pub opens: u32,
    /// The lower file's last name is gone: drop the PM copy at the last close.
    pub gone: bool,
}

pub type Shared = Arc<Mutex<FileState>>;

/// The stacked file system: the state the FUSE operations and the write-back thread share.
pub struct Stack {
    pub cfg: StackConfig,
    pub store: PmStore,
    lower_root: OwnedFd,
    root_key: Key,
    files: Mutex<HashMap<Key, Shared>>,
    pub counters: Counters,
    stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Stack {
    /// Opens the stack: the lower directory and the mounted image, with the PM side's
    /// crash repairs done.
    pub fn open(
        fs: hashfs::FileSystem<hashfs::pm::MmapDevice>,
        lower: &Path,
        cfg: StackConfig,
    ) -> Result<(Arc<Stack>, Recovery), String> {
        let lower = std::fs::canonicalize(lower).map_err(|e| format!("lower directory {}: {e}", lower.display()))?;
        let dir = File::open(&lower).map_err(|e| format!("lower directory {}: {e}", lower.display()))?;
        if !dir.metadata().map_err(|e| e.to_string())?.is_dir() {
            return Err(format!("lower {} is not a directory", lower.display()));
        }
        if let Err(e) = lower::LowerHandle::of(dir.as_fd()) {
            return Err(format!(
                "the file system under {} does not export file handles ({e}); stacking needs them to find promoted files again",
                lower.display()
            ));
        }
        let root_fd: OwnedFd = rustix::fs::open(
            &lower,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| format!("lower directory {}: {e}", lower.display()))?;
        let st = rustix::fs::fstat(&root_fd).map_err(|e| e.to_string())?;
        let (store, promoted, rec) = PmStore::open(fs, OwnedFd::from(dir), &lower)?;
        let mut files = HashMap::new();
        for (key, p) in promoted {
            let profile = SyncProfile::recovered(&cfg.profiler);
            files.insert(key, Arc::new(Mutex::new(FileState { pm: Some(p), profile, ..FileState::default() })));
        }
        let stack = Stack {
            cfg,
            store,
            lower_root: root_fd,
            root_key: (st.st_dev, st.st_ino),
            files: Mutex::new(files),
            counters: Counters::default(),
            stop: AtomicBool::new(false),
        };
        Ok((Arc::new(stack), rec))
    }

    /// The state of lower file `key`, made on first use.
    pub fn state(&self, key: Key) -> Shared {
        lock(&self.files).entry(key).or_default().clone()
    }

    fn existing(&self, key: Key) -> Option<Shared> {
        lock(&self.files).get(&key).cloned()
    }

    /// Forgets a file's state when nothing needs it (not promoted, not open): when the
    /// kernel forgets the inode, or its last name and handle are gone.
    fn prune(&self, key: Key) {
        let mut files = lock(&self.files);
        if let Some(s) = files.get(&key) {
            let st = lock(s);
            if st.pm.is_none() && st.opens == 0 {
                drop(st);
                files.remove(&key);
            }
        }
    }

    /// Every promoted file now.
    pub fn promoted(&self) -> Vec<(Key, Shared)> {
        lock(&self.files).iter().filter(|(_, s)| lock(s).pm.is_some()).map(|(k, s)| (*k, s.clone())).collect()
    }

    /// Writes one file back (the caller holds its state); it stays promoted on an error.
    pub fn write_back_locked(&self, st: &mut FileState) -> std::io::Result<()> {
        if let Some(p) = st.pm.as_ref() {
            self.store.write_back(p)?;
            st.pm = None;
            st.profile.restart();
            self.counters.write_backs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Writes every promoted file back (`hashfs umount --writeback`).
    pub fn write_back_all(&self) -> std::io::Result<usize> {
        let mut n = 0;
        for (_, s) in self.promoted() {
            let mut st = lock(&s);
            if st.pm.is_some() {
                self.write_back_locked(&mut st)?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// A human-readable status: PM use, counters, and each promoted file.
    pub fn status(&self) -> String {
        use std::fmt::Write;
        let (used, total) = self.store.usage();
        let mut s = String::new();
        let c = &self.counters;
        let _ = writeln!(
            s,
            "pm: {used} of {total} blocks in use ({:.1}%), high water {:.0}%",
            used as f64 * 100.0 / total.max(1) as f64,
            self.cfg.high_water * 100.0
        );
        let _ = writeln!(
            s,
            "promotions: {}  write-backs: {} ({} for space)  fsyncs absorbed in PM: {}  fsyncs on the lower file system: {}",
            c.promotions.load(Ordering::Relaxed),
            c.write_backs.load(Ordering::Relaxed),
            c.pm_full_demotions.load(Ordering::Relaxed),
            c.absorbed_syncs.load(Ordering::Relaxed),
            c.lower_syncs.load(Ordering::Relaxed)
        );
        let mut rows: Vec<(String, u64, f64)> = self
            .promoted()
            .into_iter()
            .filter_map(|(_, sh)| {
                let st = lock(&sh);
                let p = st.pm.as_ref()?;
                let path = PmStore::lower_path(p).map(|p| p.display().to_string()).unwrap_or_else(|| "?".into());
                Some((path, p.size, st.profile.sync_factor()))
            })
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        let _ = writeln!(s, "promoted files: {}", rows.len());
        for (path, size, sf) in rows {
            let _ = writeln!(s, "  {path}  size {size}  sync factor {sf:.3}");
        }
        s
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// The FUSE file system over a [`Stack`].
pub use ops::StackedFuse;

/// Starts the write-back thread.
pub fn spawn_demoter(stack: Arc<Stack>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new().name("hashfs-writeback".into()).spawn(move || demote::run(&stack)).expect("thread")
}
