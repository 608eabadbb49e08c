//! Process death: the failure of one participant of a shared image (issue 55), beside
//! power failure. A process killed at any instruction leaves every store it made visible
//! to the others (they share the cache) and makes none after; nothing is lost from the
//! cache, and nothing it did not store appears. The states to recover are therefore the
//! prefixes of the workload's stores in program order, applied to the live image before
//! it ([`crate::pm::CrashDevice::record_stores`]). Each is repaired by recovery (what the
//! survivor that finds the dead process runs), checked as a power failure's image is (the
//! state before or after the interrupted operation, fsck clean), and then the survivor goes
//! on: it creates, writes, renames and removes a file on the repaired image, and fsck must
//! find nothing again.
//!
//! Every image of power failure's model includes these (a prefix of each line's stores),
//! but a power failure's crash point is sampled when it has many states; here every
//! store is a state, except inside one device call over many lines (a copy of data),
//! where the states are after its first line, its middle one, its last but one and its
//! last.
//!
//! On an image many processes may share (HashFS's paper placement), the workload runs as
//! one participant of two, **beside a survivor** that mounted the image first, walked
//! its tree (so it caches every inode and directory) and holds every other regular file
//! of it open; the region's bytes are kept as each operation begins. Each death is then
//! checked twice: as above (no one left: the next to mount recovers), and by the survivor
//! itself, rebuilt to the same state in a fresh region: the region as the operation found
//! it, its lock taken by the dying participant, which is then dead, and the image of the
//! death under the survivor's caches. The survivor's next call must take the lock over
//! and recover (`fs/shared/mod.rs`, `take_over`), and what it then sees must be the state
//! before or after the operation; the files it holds open must read, and after its own
//! operations and its leaving (the last participant, which marks the image clean) fsck
//! must find nothing.

#![forbid(unsafe_code)]

use super::explore::{image_hash, recover_and_check, Found, Recording};
use super::snapshot::Snapshot;
use super::Stats;
use crate::fs::{fsck, FsckMode};
use crate::layout::FileType;
use crate::pm::{CrashDevice, LineStore};
use crate::share::{Access, Participant};
use crate::{File, FileSystem, OpenOptions};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a workload's run recorded for process deaths.
pub(crate) struct Deaths {
    /// The live image when the workload began.
    pub base: Vec<u8>,
    /// Every store the workload made, in program order.
    pub stores: Vec<LineStore>,
    /// How many stores were made before each operation began.
    pub marks: Vec<usize>,
    /// The run beside a survivor, on an image many processes may share.
    pub beside: Option<Beside>,
}

/// What a run beside a survivor recorded (see the module).
pub(crate) struct Beside {
    /// The image before the survivor mounted it.
    pub base: Vec<u8>,
    /// The region's bytes as each operation began.
    pub regions: Vec<Vec<u8>>,
    /// The participant that ran each operation.
    pub dying: Vec<Participant>,
    /// The region's record of the inodes in use (`share::inode_state_ranges`) as each
    /// storing device call began, with the number of stores before it: a process's stores
    /// to the region between its stores to the image are visible to the others as those
    /// are (a create's bit taken before its inode is written, a free's given back after its
    /// commit), and a takeover's recovery reads the inodes the bitmap covers.
    pub inodes_in_use: Vec<(usize, Vec<u8>)>,
}

/// A region file of the explorer's own, removed when dropped.
pub(crate) struct RegionFile(PathBuf);

impl RegionFile {
    fn new() -> RegionFile {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        RegionFile(PathBuf::from(format!("/dev/shm/hashfs-explorer-{}-{n}.region", std::process::id())))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Its bytes now.
    pub fn bytes(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.0).map_err(|e| format!("reading the region {}: {e}", self.0.display()))
    }

    /// Puts `bytes` in it, under the participants that map it.
    fn restore(&self, bytes: &[u8]) -> Result<(), String> {
        self.restore_at(0, bytes)
    }

    fn restore_at(&self, off: usize, bytes: &[u8]) -> Result<(), String> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&self.0);
        f.and_then(|f| f.write_all_at(bytes, off as u64)).map_err(|e| format!("restoring the region: {e}"))
    }

    /// Puts the record of the inodes in use that `b` took as the call of store `after`
    /// (1-based) began over what the region holds.
    fn restore_inodes_in_use(&self, b: &Beside, after: usize) -> Result<(), String> {
        let Some((_, seen)) = b.inodes_in_use.iter().rev().find(|(before, _)| *before < after) else { return Ok(()) };
        let mut at = 0;
        for r in inode_state_ranges(&self.0).map_err(|e| format!("the region's size: {e}"))? {
            let n = r.len();
            let part = seen.get(at..at + n).ok_or("the record of the inodes in use is short")?;
            self.restore_at(r.start, part)?;
            at += n;
        }
        Ok(())
    }

    /// A participant of the image on `dev` through this region.
    pub fn join(&self, dev: &Arc<CrashDevice>) -> Result<FileSystem<CrashDevice>, String> {
        let access = Access { mode: 0o600, owner: None };
        let (fs, _) = FileSystem::mount_shared(dev.clone(), &self.0, access, &|_, _| {})
            .map_err(|e| format!("a participant could not join the image: {e}"))?;
        Ok(fs)
    }
}

/// The ranges of the region file at `path` that say which inodes are in use
/// (`share::inode_state_ranges`).
fn inode_state_ranges(path: &Path) -> std::io::Result<[std::ops::Range<usize>; 4]> {
    Ok(crate::share::inode_state_ranges(std::fs::metadata(path)?.len() as usize))
}

/// The region file at `path`'s record of the inodes in use, its ranges one after another
/// (what a death's survivor takes as of the death: [`Beside::inodes_in_use`]); read as each
/// storing device call of the recorded workload begins, so only those bytes.
pub(crate) fn read_inodes_in_use(path: &Path) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let Ok(f) = std::fs::File::open(path) else { return Vec::new() };
    let Ok(len) = f.metadata().map(|m| m.len() as usize) else { return Vec::new() };
    let mut out = Vec::new();
    for r in crate::share::inode_state_ranges(len) {
        let at = out.len();
        out.resize(at + r.len(), 0);
        if f.read_exact_at(&mut out[at..], r.start as u64).is_err() {
            return Vec::new();
        }
    }
    out
}

impl Drop for RegionFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Whether the image on `dev` may be shared by many processes (its deaths then run beside
/// a survivor).
pub(crate) fn shared_image(dev: &CrashDevice) -> bool {
    crate::fs::read_superblock(dev).is_ok_and(|(sb, _, _)| crate::fs::hashfs::shared_by_processes(&sb))
}

/// The survivor: the first participant of the image on `dev`, its tree walked, every other
/// regular file of it held open. Done the same way for the recording and for each death's
/// check, so that its caches and the region's record of it are the same.
pub(crate) struct Survivor {
    pub region: RegionFile,
    pub fs: FileSystem<CrashDevice>,
    held: Vec<File<CrashDevice>>,
}

impl Survivor {
    pub fn start(dev: &Arc<CrashDevice>) -> Result<Survivor, String> {
        let region = RegionFile::new();
        let fs = region.join(dev)?;
        {
            // Its inode bitmap built (a first participant that took a clean unmount's
            // counts builds it at the first allocation): a takeover's recovery reads the
            // inodes it covers. (Before it is built a recovery reads them all:
            // `tests/shared_mount.rs`.)
            let _in = fs.inner.enter();
            let (r, _) = fs.inner.shared_parts().expect("a shared mount");
            fs.inner.build_inode_bits(r);
        }
        let tree = Snapshot::of(&fs).map_err(|e| format!("the survivor could not walk the tree: {e}"))?;
        let mut held = Vec::new();
        for (path, _) in tree.0.iter().filter(|(_, e)| e.file_type == FileType::Regular).step_by(2) {
            let f = fs.open_file(Path::new(path), OpenOptions::new().read(true));
            held.push(f.map_err(|e| format!("the survivor could not open {path}: {e}"))?);
        }
        Ok(Survivor { region, fs, held })
    }

    /// The participant `fs` is.
    pub fn participant(fs: &FileSystem<CrashDevice>) -> Participant {
        fs.inner.shared_parts().expect("a shared mount").1
    }
}

impl Deaths {
    /// The operation a death after `n` stores interrupts.
    fn step(&self, n: usize) -> usize {
        self.marks.iter().rposition(|&m| m < n).unwrap_or(0)
    }
}

/// Whether a death after store `p` (1-based) of a call of `n` line stores is explored:
/// every one of a short call; of a longer one (a copy of data, homogeneous), the first,
/// the middle, the last but one and the last.
fn explored(p: usize, n: usize) -> bool {
    n <= 4 || p == 1 || p == n / 2 || p + 1 >= n
}

/// Explores every process death of the recorded workload (or the one `only` names): the
/// number of stores made before the death identifies it.
pub(crate) fn explore_deaths(rec: &Recording, d: &Deaths, only: Option<usize>, stats: &mut Stats) -> Result<(), Found> {
    let mut img = d.base.clone();
    let mut seen = HashSet::new();
    seen.insert(image_hash(&img));
    let mut i = 0;
    while i < d.stores.len() {
        let call = d.stores[i].call;
        let n = d.stores[i..].iter().take_while(|s| s.call == call).count();
        for p in 1..=n {
            d.stores[i + p - 1].apply(&mut img);
            let after = i + p;
            if !explored(p, n) || only.is_some_and(|o| o != after) || !seen.insert(image_hash(&img)) {
                continue;
            }
            stats.deaths += 1;
            check_death(rec, d, after, &img).map_err(|message| Found {
                point: 0,
                state: 0,
                rpoint: None,
                death: Some(after),
                persisted: format!(
                    "the {after} first stores of the workload (the last one to the line at {:#x}, in device call {})",
                    d.stores[after - 1].line() * 64,
                    call
                ),
                message,
            })?;
        }
        i += n;
    }
    Ok(())
}

/// A death after `after` stores: recovered by the next to mount (the operation whole or
/// absent, fsck clean; then it goes on), and, beside a survivor, by the survivor's takeover.
fn check_death(rec: &Recording, d: &Deaths, after: usize, img: &[u8]) -> Result<(), String> {
    let k = d.step(after);
    let (_, _, dev) = rec.with_expect(k, |expect| recover_and_check(img, expect, false))?;
    let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {}).map_err(|e| format!("mount: {e}"))?;
    go_on(fs, dev).map_err(|e| format!("the next to mount could not go on after the repair: {e}"))?;
    let Some(b) = &d.beside else { return Ok(()) };
    // Each way a survivor repairs: what the dead call's record names, and (for a call the
    // record could not describe) the whole image.
    for whole in [false, true] {
        let how = if whole { "recovering the whole image" } else { "repairing what the dead call named" };
        survivor_takes_over(rec, b, k, after, img, whole).map_err(|e| format!("beside a survivor {how}: {e}"))?;
    }
    Ok(())
}

/// The survivor of a death during operation `k` that left `img`: rebuilt, given the region
/// and the image the death left, it must take the lock over, recover, see the state before
/// or after the operation, read the files it holds, and go on.
///
/// `whole`: the dead call's record of its scope says it is not described, so the survivor
/// recovers the whole image (`fs/shared/takeover.rs`), as after a call it could not name.
fn survivor_takes_over(
    rec: &Recording,
    b: &Beside,
    k: usize,
    after: usize,
    img: &[u8],
    whole: bool,
) -> Result<(), String> {
    let dev = Arc::new(CrashDevice::from_image(&b.base));
    let s = Survivor::start(&dev)?;
    s.region.restore(&b.regions[k])?;
    s.region.restore_inodes_in_use(b, after)?;
    let dying = b.dying[k];
    let (region, me) = s.fs.inner.shared_parts().expect("a shared mount");
    if whole {
        region.words().scope.unscope();
    }
    let described = !matches!(region.words().scope.read(), crate::share::scope::ScopeRecord::Unscoped);
    if me == dying {
        return Err(format!("the survivor rebuilt is participant {me}, the dying one's"));
    }
    // The dying participant's call took the lock; it dies with it, after its stores.
    let _ = region.lock_image(dying);
    region.participants().pretend_dead(dying);
    dev.set_image(img);
    let seen = Snapshot::of(&s.fs).map_err(|e| format!("the survivor's walk after the death failed: {e}"))?;
    if s.fs.shared_takeovers() != Some(1) {
        return Err(format!(
            "the survivor's next call did not take the lock over ({:?} takeovers)",
            s.fs.shared_takeovers()
        ));
    }
    // The grouped placements' takeovers recover the whole image (`fs/shared/takeover.rs`)
    // and count their table state again, which must then be the recovered table's.
    let grouped = crate::testing::table(&s.fs).and_then(|t| t.groups().map(|g| g.verify(t)));
    if let Some(Err(e)) = grouped {
        return Err(format!("after the takeover the table state in the region is not the table's: {e}"));
    }
    if described && grouped.is_none() && s.fs.shared_takeovers_scoped() != Some(1) {
        return Err("the dead call's record described it, but the takeover recovered the whole image".into());
    }
    if described && grouped.is_none() {
        bits_agree(region, &s.fs)?;
    }
    // The takeover released what the dead one held: its open inodes (else an unlinked
    // file it had open stays until the last participant leaves) and its descriptions.
    if region.open_inodes().any_held_by(dying) || region.descriptions().any_held_by(dying) {
        return Err("after the takeover the dead participant still holds open inodes or descriptions".into());
    }
    rec.with_expect(k, |expect| expect.check(&seen)).map_err(|e| format!("after the survivor's takeover: {e}"))?;
    for mut f in s.held {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut bytes).map_err(|e| format!("a file the survivor holds: {e}"))?;
    }
    go_on(s.fs, dev)
}

/// After a scoped takeover, the region's inode bitmap says of every inode what the inode
/// table says, and its count is the bits set. (Not after the whole recovery: an inode a
/// rolled-back free restores may keep its bit cleared, `fs/recovery.rs`, `MountAs`.)
fn bits_agree(region: &crate::share::ImageRegion, fs: &FileSystem<CrashDevice>) -> Result<(), String> {
    if region.words().inode_bits_built.load(std::sync::atomic::Ordering::Acquire) == 0 {
        return Ok(());
    }
    let (dev, geo) = (&*fs.inner.dev, &fs.inner.geo);
    let mut set = 0;
    for i in 1..=geo.inode_count as u32 {
        let ino = crate::layout::Ino(i);
        let (bit, state) = (region.inode_bit(ino), crate::fs::inode::read_raw(dev, geo, ino).check(ino));
        if bit != (state != crate::layout::inode::InodeState::Free) {
            return Err(format!("after the takeover inode {i}'s bit in the region is {bit}, its inode {state:?}"));
        }
        set += u64::from(bit);
    }
    let count = region.inode_bits().used.load(std::sync::atomic::Ordering::Acquire);
    if count != set {
        return Err(format!("after the takeover the region counts {count} inodes in use, its bitmap {set}"));
    }
    Ok(())
}

/// The next operations on the repaired image, then the unmount and fsck.
fn go_on(fs: FileSystem<CrashDevice>, dev: Arc<CrashDevice>) -> Result<(), String> {
    let a = Path::new("/survivor");
    let b = Path::new("/survivor-renamed");
    fs.write(a, &[0x5A; 5000]).map_err(|e| format!("write: {e}"))?;
    fs.rename(a, b).map_err(|e| format!("rename: {e}"))?;
    if fs.read(b).map_err(|e| format!("read: {e}"))? != [0x5A; 5000] {
        return Err("the file written after the repair reads back wrong".into());
    }
    fs.remove_file(b).map_err(|e| format!("unlink: {e}"))?;
    fs.unmount().map_err(|e| format!("unmount: {e}"))?;
    let r = fsck(dev, FsckMode::Check, &|_, _| {}).map_err(|e| format!("fsck failed to run: {e}"))?;
    if !r.findings.is_empty() {
        return Err(format!("fsck findings after the survivor's operations: {:#?}", r.findings));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::explored;

    #[test]
    fn long_calls_are_cut_at_four_places_short_ones_everywhere() {
        assert_eq!((1..=3).filter(|&p| explored(p, 3)).count(), 3);
        let long: Vec<usize> = (1..=64).filter(|&p| explored(p, 64)).collect();
        assert_eq!(long, [1, 32, 63, 64]);
    }
}
