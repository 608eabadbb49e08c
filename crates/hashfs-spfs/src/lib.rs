//! SPFS's stacked mode (Woo et al., *On Stacking a Persistent Memory File System on Legacy
//! File Systems*, FAST '23): HashFS's PM stacked over an ordinary directory (ext4, XFS,
//! tmpfs), served through FUSE (`hashfs_fuse::stacked`) or inside a program's own process
//! by the preload shim (`crates/hashfs-spfs-shim`); both front ends run a file's data
//! through the same operations ([`file`]). This crate is the stack; it has no front end.
//!
//! Every file lives in the lower directory until the Sync Point Profiler
//! ([`profiler`]) sees it fsynced often with little written between syncs; then it is
//! *promoted*: its writes go to a PM copy in the HashFS image ([`absorb`]), reads merge
//! that copy over the lower file, and its fsync is a PM fence instead of a disk flush. A
//! background thread writes promoted files back to the lower file system when their Sync
//! Factor falls under the hard limit or PM passes its high-water mark ([`demote`]). A file
//! made to sync (SPFS's standalone rules: [`standalone`]) or made where files sync often
//! ([`dirs`]) starts in PM, with a record of where it was made, from which a mount makes it
//! again if the lower file system lost its creation ([`remake`]).
//! Everything else (directories, names, attributes, unpromoted files) is the lower file
//! system's (reached by O_PATH descriptors: [`lower`]).
//!
//! Differences from the released SPFS, on purpose: the PM side survives crashes and
//! remounts (SPFS formats PM at every mount), and so do the Sync Factors
//! ([`saved_profiles`]); write-back exists and is crash-safe (SPFS's
//! is on a side branch); a promoted file can be memory-mapped (the kernel's page cache
//! serves it; SPFS returns ENODEV). Promotion applies to the file as a whole, not to its
//! extents one by one, and a block reaches PM whole (the rest copied from the lower file
//! on its first write) where SPFS copies whole extents.

#![deny(unsafe_code)]

pub mod absorb;
#[cfg(test)]
mod crashtest;
mod demote;
pub mod dirs;
mod file;
#[allow(unsafe_code)]
pub mod lower;
pub mod profiler;
pub mod remake;
pub mod saved_profiles;
pub mod settled;
pub mod standalone;

pub use absorb::Recovery;
pub use profiler::ProfilerConfig;

use absorb::{Key, PmStore, Promoted};
use profiler::SyncProfile;
use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
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
    /// `dir_rule=on|off`: files made in a directory whose files sync often start in PM
    /// (`dirs.rs`); on by default (measured in docs/stacked.md, *The directory rule*).
    pub dir_rule: bool,
    /// `standalone=on|off`: SPFS's standalone placement of new files (`standalone.rs`): a
    /// file made with O_SYNC, O_DSYNC or O_DIRECT, in a directory marked `user.hashfs.boost`,
    /// or with one of [`StackConfig::extensions`], starts in PM; on by default.
    pub standalone: bool,
    /// `extension=EXT` (repeated): names with these extensions start in PM (SPFS's
    /// `extension=` mount option); none by default.
    pub extensions: Vec<String>,
    /// `settled=on|off`: a file below opened for writing in a hot directory, unchanged
    /// since the lower file system's last `syncfs`, is promoted at the open (`settled.rs`);
    /// on by default, with the directory rule.
    pub settled: bool,
    /// `passthrough=on`: the mount answers opens of files below that are not syncing with
    /// the kernel's passthrough to the lower file (when the kernel has it; docs/stacked.md,
    /// *Passthrough*); off by default. The shim ignores it.
    pub passthrough: bool,
    /// `dirty_limit=device|fuse`: the mount's dirty page limits, a block device's
    /// (`device`, the default) or the kernel's for FUSE (1%, strict;
    /// `hashfs_fuse::dirty_limit`). The shim ignores it.
    pub device_dirty_limit: bool,
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
            passthrough: false,
            dir_rule: true,
            settled: true,
            standalone: true,
            extensions: Vec::new(),
            device_dirty_limit: true,
            tick: Duration::from_millis(250),
            quiet: Duration::from_secs(1),
        }
    }
}

impl StackConfig {
    /// The defaults changed by `key=value` options (the mount's `-o`, the shim's
    /// `HASHFS_STACK_OPTIONS`): `promote_after=N`, `sync_interval_ms=N`, `sf_limit=X|none`,
    /// `high_water=X`, `dir_rule=on|off`, `settled=on|off`, `passthrough=on|off`, `standalone=on|off`,
    /// `extension=EXT` (repeated), `dirty_limit=device|fuse`. An error names the option.
    pub fn from_options<S: AsRef<str>>(opts: &[S]) -> Result<StackConfig, String> {
        let mut c = StackConfig::default();
        for opt in opts {
            let opt = opt.as_ref();
            let (k, v) = opt.split_once('=').unwrap_or((opt, ""));
            let bad = || format!("{opt}: not a valid value");
            match k {
                "promote_after" => {
                    c.profiler.promote_after = v.parse().ok().filter(|&n: &u32| n >= 1).ok_or_else(bad)?
                }
                "sync_interval_ms" => c.profiler.interval = Duration::from_millis(v.parse().map_err(|_| bad())?),
                "sf_limit" if v == "none" => c.profiler.sf_limit = None,
                "sf_limit" => {
                    c.profiler.sf_limit = Some(v.parse().ok().filter(|x: &f64| (0.0..1.0).contains(x)).ok_or_else(bad)?)
                }
                "dir_rule" => c.dir_rule = on_off(v).ok_or_else(bad)?,
                "settled" => c.settled = on_off(v).ok_or_else(bad)?,
                "passthrough" => c.passthrough = on_off(v).ok_or_else(bad)?,
                "standalone" => c.standalone = on_off(v).ok_or_else(bad)?,
                "dirty_limit" if v == "device" || v == "fuse" => c.device_dirty_limit = v == "device",
                "extension" if standalone::valid_extension(v) && c.extensions.len() < standalone::MAX_EXTENSIONS => {
                    c.extensions.push(v.to_ascii_lowercase())
                }
                "high_water" => {
                    c.high_water = v.parse().ok().filter(|x: &f64| *x > 0.0 && *x <= 1.0).ok_or_else(bad)?;
                    c.low_water = c.low_water.min(c.high_water * 0.75);
                }
                _ => return Err(bad()),
            }
        }
        Ok(c)
    }
}

/// `on` (or nothing) and `off`, as an option's value.
fn on_off(v: &str) -> Option<bool> {
    match v {
        "on" | "" => Some(true),
        "off" => Some(false),
        _ => None,
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
    /// Opens the kernel serves from the lower file (the mount's passthrough).
    pub passthrough_opens: AtomicU64,
    /// Promotions that waited for passthrough handles to close.
    pub promotions_deferred: AtomicU64,
    /// Files promoted as they were made, by the directory rule (`dirs.rs`).
    pub dir_promotions: AtomicU64,
    /// Files promoted as they were made, by SPFS's standalone rules (`standalone.rs`).
    pub standalone_promotions: AtomicU64,
    /// Files below promoted at an open, settled since the last syncfs (`settled.rs`).
    pub settled_promotions: AtomicU64,
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
    /// Uses the front end cannot follow (the shim's memory mappings and streams of the
    /// file): a promoted file's writes would not reach them, so the file is not promoted.
    pub pinned: u32,
    /// Of `opens`, those the kernel serves from the lower file itself (the mount's
    /// passthrough, docs/stacked.md): their reads, writes and mappings never reach the
    /// daemon, so the file is not promoted while any is open.
    pub passthrough: u32,
    /// The profiler asked for a promotion while passthrough handles were open: it is made
    /// at the next open that finds none.
    pub promote_pending: bool,
    /// The directory the file was last seen in (its fsyncs count for it: `dirs.rs`).
    pub dir: Option<Key>,
    /// The lower inode's file handle, once the file's Sync Factor is worth keeping across
    /// remounts (`saved_profiles.rs`): taken at its fsync, or from a saved table.
    pub handle: Option<lower::LowerHandle>,
}

impl FileState {
    pub fn pinned(&self) -> bool {
        self.pinned > 0
    }
}

/// A lower file's state, with a flag that says without the lock whether it is promoted:
/// front ends read an unpromoted file straight from the lower file system on that flag.
/// The flag follows `pm` whenever a [`FileGuard`] is dropped, so it is never stale after
/// the change that made it so.
#[derive(Default)]
pub struct FileCell {
    promoted: AtomicBool,
    /// Reads of the file below made without the lock (the shim's), for the Sync Factor:
    /// folded in by [`FileGuard::fold_reads`].
    reads_below: AtomicU64,
    state: Mutex<FileState>,
}

/// The locked state of a [`FileCell`]; dropping it publishes whether the file is promoted.
pub struct FileGuard<'a> {
    cell: &'a FileCell,
    state: MutexGuard<'a, FileState>,
}

impl FileCell {
    pub fn lock(&self) -> FileGuard<'_> {
        FileGuard { cell: self, state: lock(&self.state) }
    }

    /// Whether the file is promoted, as of the last unlock (Acquire: a false here comes
    /// after the write-back that made it so).
    pub fn promoted(&self) -> bool {
        self.promoted.load(Ordering::Acquire)
    }

    /// A read of the file below, made without the lock.
    pub fn read_below(&self) {
        self.reads_below.fetch_add(1, Ordering::Relaxed);
    }
}

impl FileGuard<'_> {
    /// Applies the reads made without the lock to the Sync Factor (before an fsync).
    pub fn fold_reads(&mut self, cfg: &ProfilerConfig) {
        let n = self.cell.reads_below.swap(0, Ordering::Relaxed);
        self.state.profile.reads(cfg, n);
    }
}

impl std::ops::Deref for FileGuard<'_> {
    type Target = FileState;
    fn deref(&self) -> &FileState {
        &self.state
    }
}

impl std::ops::DerefMut for FileGuard<'_> {
    fn deref_mut(&mut self) -> &mut FileState {
        &mut self.state
    }
}

impl Drop for FileGuard<'_> {
    fn drop(&mut self) {
        let now = self.state.pm.is_some();
        if self.cell.promoted.swap(now, Ordering::AcqRel) != now {
            if now {
                PROMOTED_FILES.fetch_add(1, Ordering::AcqRel);
            } else {
                PROMOTED_FILES.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// The status lists promoted files up to this many bytes: the mount answers it as an
/// extended attribute, which the kernel caps at 64 KiB (a longer one fails with E2BIG; a
/// mount whose directory rule had promoted hundreds of messages could not be inspected).
pub const STATUS_LISTED_BYTES: usize = 60 << 10;

/// Files promoted now, over every stack of the process (a stack dropped with promoted
/// files leaves them counted: the count is never lower than the truth).
static PROMOTED_FILES: AtomicU64 = AtomicU64::new(0);

/// Whether any file of the process may be promoted now: when false, no stat result or
/// name needs looking up in a stack. Never false while one is.
pub fn any_promoted() -> bool {
    PROMOTED_FILES.load(Ordering::Acquire) > 0
}

pub type Shared = Arc<FileCell>;

/// The stacked file system: the state the front ends' operations and the write-back thread share.
pub struct Stack {
    pub cfg: StackConfig,
    pub store: PmStore,
    lower_root: OwnedFd,
    root_key: Key,
    files: Mutex<HashMap<Key, Shared>>,
    /// Directories' recent fsyncs, for the directory rule (`dirs.rs`).
    dirs: Mutex<HashMap<Key, dirs::DirProfile>>,
    /// Directories' `user.hashfs.boost` as last read (`standalone.rs`).
    boosts: standalone::Boosts,
    /// The lower file system's last syncfs (`settled.rs`).
    pub(crate) settled: settled::Settled,
    pub counters: Counters,
    stop: AtomicBool,
    /// The bytes of the last table of Sync Factors saved (`saved_profiles.rs`).
    profiles_saved: Mutex<Vec<u8>>,
}

/// Locks `m`, a poisoned lock included (a panic elsewhere leaves the state as it was:
/// every change under these locks is whole before the next can fail).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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
            let cell = FileCell::default();
            {
                let mut st = cell.lock();
                st.pm = Some(p);
                st.profile = profile;
            }
            files.insert(key, Arc::new(cell));
        }
        let stack = Stack {
            cfg,
            store,
            lower_root: root_fd,
            root_key: (st.st_dev, st.st_ino),
            files: Mutex::new(files),
            dirs: Mutex::new(HashMap::new()),
            boosts: standalone::Boosts::default(),
            settled: settled::Settled::default(),
            counters: Counters::default(),
            stop: AtomicBool::new(false),
            profiles_saved: Mutex::new(Vec::new()),
        };
        let mut rec = rec;
        stack.restore_profiles(&mut rec);
        Ok((Arc::new(stack), rec))
    }

    /// The state of lower file `key`, made on first use.
    pub fn state(&self, key: Key) -> Shared {
        lock(&self.files).entry(key).or_default().clone()
    }

    /// The lower directory (an `O_PATH` descriptor the front ends resolve names from).
    pub fn lower_root(&self) -> BorrowedFd<'_> {
        self.lower_root.as_fd()
    }

    /// The lower directory's (st_dev, st_ino).
    pub fn root_key(&self) -> Key {
        self.root_key
    }

    /// The state of lower file `key`, if it has one.
    pub fn existing(&self, key: Key) -> Option<Shared> {
        lock(&self.files).get(&key).cloned()
    }

    /// Forgets a file's state when nothing needs it (not promoted, not open, no Sync
    /// Factor worth keeping): when the kernel forgets the inode, or its last name and
    /// handle are gone. A factor kept lives until the file drops out of the saved ones
    /// (`saved_profiles.rs`) or its name goes ([`Stack::name_removed`]).
    pub fn prune(&self, key: Key) {
        self.forget_if(key, |st| st.handle.is_none() || st.profile.sync_factor() < saved_profiles::KEEP_MIN)
    }

    /// Forgets a file's state kept only for its Sync Factor.
    pub(crate) fn prune_unkept(&self, key: Key) {
        self.forget_if(key, |_| true)
    }

    fn forget_if(&self, key: Key, unkept: impl Fn(&FileState) -> bool) {
        let mut files = lock(&self.files);
        if let Some(s) = files.get(&key) {
            let st = s.lock();
            if st.pm.is_none() && st.opens == 0 && unkept(&st) {
                drop(st);
                files.remove(&key);
            }
        }
    }

    /// Every promoted file now.
    pub fn promoted(&self) -> Vec<(Key, Shared)> {
        lock(&self.files).iter().filter(|(_, s)| s.promoted()).map(|(k, s)| (*k, s.clone())).collect()
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
            let mut st = s.lock();
            if st.pm.is_some() {
                self.write_back_locked(&mut st)?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Closes every promoted file's PM copy and forgets it, leaving the copy in the image
    /// for the next stack: for a process that exits without writing its files back.
    /// Nothing may be done through the stack afterwards.
    pub fn close_all(&self) {
        for (_, s) in self.promoted() {
            drop(s.lock().pm.take());
        }
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
        let _ = writeln!(
            s,
            "passthrough opens: {}  promotions deferred to the next open: {}  promoted as made (directory rule): {}  \
             promoted as made (standalone): {}  promoted at open (settled below): {}",
            c.passthrough_opens.load(Ordering::Relaxed),
            c.promotions_deferred.load(Ordering::Relaxed),
            c.dir_promotions.load(Ordering::Relaxed),
            c.standalone_promotions.load(Ordering::Relaxed),
            c.settled_promotions.load(Ordering::Relaxed)
        );
        let cells: Vec<Shared> = lock(&self.files).values().cloned().collect();
        let (open, through) = cells.iter().fold((0, 0), |(o, p), c| {
            let st = c.lock();
            (o + st.opens, p + st.passthrough)
        });
        // The kernel sends a handle's release after close(2) returns: these lag behind it.
        let _ = writeln!(s, "handles open: {open}  of them passthrough: {through}");
        let saved = lock(&self.profiles_saved).get(8..12).map_or(0, |c| u32::from_le_bytes(c.try_into().expect("4")));
        let _ = writeln!(s, "sync factors saved for the next mount: {saved}");
        let mut rows: Vec<(String, u64, f64)> = self
            .promoted()
            .into_iter()
            .filter_map(|(_, sh)| {
                let st = sh.lock();
                let p = st.pm.as_ref()?;
                let path = PmStore::lower_path(p).map(|p| p.display().to_string()).unwrap_or_else(|| "?".into());
                Some((path, p.size, st.profile.sync_factor()))
            })
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        let _ = writeln!(s, "promoted files: {}", rows.len());
        let total = rows.len();
        for (listed, (path, size, sf)) in rows.into_iter().enumerate() {
            let line = format!("  {path}  size {size}  sync factor {sf:.3}\n");
            if s.len() + line.len() > STATUS_LISTED_BYTES {
                let _ = writeln!(s, "  ... and {} more", total - listed);
                break;
            }
            s.push_str(&line);
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

pub use file::MergedAttr;

/// The write-back thread's loop, until [`Stack::stop`] (for front ends that make their
/// own thread).
pub fn run_demoter(stack: &Stack) {
    demote::run(stack)
}

/// Starts the write-back thread.
pub fn spawn_demoter(stack: Arc<Stack>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new().name("hashfs-writeback".into()).spawn(move || demote::run(&stack)).expect("thread")
}
