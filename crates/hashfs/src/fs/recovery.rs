//! Mount: superblock, journal rollback, and the scan that rebuilds DRAM state (free-inode
//! bitmap, used-block count) and, after an unclean shutdown, collects what a crash can
//! leave behind:
//! - table reservations of writes that never committed;
//! - keys past their inode's EOF (a write whose size update rolled back, or a truncate
//!   interrupted while freeing);
//! - keys of free inodes (an unlink interrupted while freeing);
//! - a second copy of a key, farther along its probe path than the live one (an untorn
//!   write's key switch without the journal, `fs/untorn.rs`, interrupted);
//! - inodes with no links (unlinked while open, or interrupted while freeing);
//! - EMPTY slots on a key's probe path (concurrent inserts persisted out of order);
//! - inode block counts that disagree with the table;
//! - bytes past a file's EOF in its last block (a shrink's size durable before its
//!   zeroing, an append's bytes before its size; `fs/eof_tail.rs`).
//!
//! On a cleanly unmounted image none of these can exist, so finding one means corruption:
//! mount refuses and names `hashfs fsck --repair`.

#![forbid(unsafe_code)]

use super::hashfs::append_tag::{self, Settled};
use super::inode::{self, InodeAllocator, InodeCache};
use super::verbs::{on_map, MapVerbs};
use super::{read_superblock, FsInner, Progress, SuperblockSource};
use crate::journal::{self, Journals};
use crate::layout::inode::InodeState;
use crate::layout::superblock::FORMAT_ZEROED_TAILS;
use crate::layout::{Geometry, Ino, BLOCK_BYTES, SB_STATE_CLEAN};
use crate::mapping::hashfs::HashTable;
use crate::mapping::FileMap;
use crate::pm::PmDevice;
use crate::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

/// What mount found and did.
#[derive(Clone, Debug, Default)]
pub struct MountReport {
    /// The image had been unmounted cleanly.
    pub was_clean: bool,
    pub used_superblock_copy: bool,
    pub rolled_back_txids: Vec<u64>,
    pub stray_slots_freed: u64,
    pub orphans_freed: u64,
    /// Unlinked inodes left allocated because a live participant of a shared mount has
    /// them open or a read-only one pins them.
    pub orphans_kept: u64,
    pub probe_paths_repaired: u64,
    pub block_counts_fixed: u64,
    /// Tagged sizes of one-fence appends settled (`fs/hashfs/append_tag.rs`), and of them the
    /// appends dropped because their bytes were not whole.
    pub appends_settled: u64,
    pub appends_dropped: u64,
    /// Files whose last block held bytes past EOF after a crash (or on an image of a
    /// format before 6), zeroed.
    pub tails_zeroed: u64,
    /// Inodes that failed their checks; they stay allocated and return a corruption
    /// error when used, until fsck deals with them.
    pub corrupt_inodes: Vec<Ino>,
    /// Neither table was read: the first participant of a shared mount took the counts
    /// the last clean unmount left in the superblock ([`MountAs::First`]).
    pub from_summary: bool,
}

pub(crate) const FREE: u64 = u64::MAX;
pub(crate) const CORRUPT: u64 = u64::MAX - 1;

/// Logical blocks that an inode of `size` bytes may map.
pub(crate) fn mappable_blocks(size: u64) -> u64 {
    size.div_ceil(BLOCK_BYTES)
}

/// What interrupted the calls whose leftovers a recovery repairs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Interruption {
    /// A power failure, or the end of the process of a mount of one (a mount cannot tell
    /// them apart): any store not made durable may be lost, in any order.
    Crash,
    /// A participant of a shared mount died inside a call ([`MountAs::Recovering`]): every
    /// store it made is visible, in the order it made them, none after. So a structure
    /// whose every store keeps its invariants (HashFS's probe paths: `fs/hashfs/recovery.rs`)
    /// needs no repair beyond freeing what the dead call left half made.
    Death,
}

/// How a mount treats the image it finds (`fs/shared/mod.rs`: a participant of a shared
/// mount joins one that others have mounted).
#[derive(Clone, Copy)]
pub(crate) enum MountAs<'a> {
    /// No one else uses the image: recover it if it was not unmounted cleanly.
    Alone,
    /// The first participant of a shared mount (`fs/shared/join.rs`): as `Alone`, but on
    /// an image whose last clean unmount left its counts in the superblock
    /// (`Superblock::summary`) nothing is scanned: the counts stand for the tables, and
    /// the region's inode bitmap is built at the first allocation
    /// (`FsInner::build_inode_bits`). So what a program alone on an image pays at its
    /// start does not grow with the image. What a scan would have found wrong on a clean
    /// image (corruption) is found where it is used, as by a participant that joins.
    First,
    /// Others have it mounted (a participant of a shared mount joins them): nothing is
    /// read but the superblock, nothing written (its unlinked files may be open
    /// elsewhere); the inode bitmap it allocates from is the region's.
    Joining,
    /// A read-only participant: as `Joining`, but the inode table is read as it is, for
    /// the counts of its own inode bitmap (it allocates nothing).
    Reading,
    /// A participant died inside a call: recovered as after a power failure, but the
    /// unlinked files `keep` names (open in live participants) stay. `in_use`: the region's
    /// inode bitmap when it is built (`ImageWords::inode_bits_built`); only the inodes it
    /// covers are read, so a takeover does not read the whole inode table. It covers every
    /// inode with a link after the rollback: a create takes its bit before it writes the
    /// inode. An inode a rolled-back free restores may be missed (a free gives its bit
    /// back after its commit, but nothing depends on it): it has no link, so its blocks
    /// are freed as strays, as recovery frees an orphan's, and a later create that takes
    /// its number writes it whole (docs/design.md, *Death*).
    Recovering { keep: &'a dyn Fn(Ino) -> bool, in_use: Option<&'a [std::sync::atomic::AtomicU64]> },
}

pub(crate) fn mount<D: PmDevice>(
    dev: Arc<D>,
    progress: Progress<'_>,
    how: MountAs<'_>,
) -> Result<(Arc<FsInner<D>>, MountReport)> {
    let (sb, geo, source) = read_superblock(&*dev)?;
    let mut report = MountReport { used_superblock_copy: source == SuperblockSource::Secondary, ..Default::default() };
    let total_work = geo.inode_count + geo.data_blocks;
    if matches!(how, MountAs::Joining | MountAs::Reading) {
        let scan = matches!(how, MountAs::Reading);
        return join(dev, sb, geo, report, scan, &|d| progress(d, total_work));
    }
    let (jrep, first_txid) = journal::recover(&*dev, &geo)?;
    report.rolled_back_txids = jrep.rolled_back_txids;
    report.was_clean = matches!(how, MountAs::Alone | MountAs::First)
        && sb.state == SB_STATE_CLEAN
        && report.rolled_back_txids.is_empty();
    if let (MountAs::First, true, Some(summary)) = (how, report.was_clean, sb.summary()) {
        return from_summary(dev, sb, geo, summary, report, first_txid);
    }

    let dirty = !report.was_clean;
    // The mapping first: after a crash, settling a tagged size reads the file's last bytes
    // through HashFS's table (`fs/hashfs/append_tag.rs`).
    let map = FileMap::open(dev.clone(), &geo, &sb)?;
    let settle_with = on_map!(map map, m => m.settles_appends()).filter(|_| dirty);
    let in_use = match how {
        MountAs::Recovering { in_use, .. } => in_use,
        _ => None,
    };
    let mut scan = scan_inodes(&*dev, &geo, settle_with, in_use, &mut report, &|d| progress(d, total_work));
    check_root(&*dev, &geo)?;
    // The mapping: count each file's blocks and find what a crash left behind.
    let strays = on_map!(map map, m => m.scan(&geo, &mut scan, dirty, &mut report, &|d| progress(d, total_work)))?;
    let nstray = strays.slots.len() + strays.ranges.len();
    if report.was_clean && (nstray > 0 || !scan.nlink_zero.is_empty()) {
        return Err(Error::corrupt(format!(
            "cleanly unmounted image holds {nstray} stray mapping entries and {} unlinked inodes; run hashfs fsck --repair",
            scan.nlink_zero.len()
        )));
    }
    if let (true, Some(s)) = (report.was_clean, sb.summary()) {
        // What the last clean unmount counted, against what the scans found: a mount that
        // takes the counts instead of scanning (`MountAs::First`) relies on them.
        let inodes = scan.ialloc.own().used.load(std::sync::atomic::Ordering::Relaxed);
        let slots = on_map!(map map, m => m.shared_count());
        if inodes != s.inodes || slots.is_some_and(|n| n != s.slots) {
            return Err(Error::corrupt(format!(
                "cleanly unmounted image: its superblock counts {} inodes and {} table slots in use, the tables \
                 {inodes} and {}; run hashfs fsck --repair",
                s.inodes,
                s.slots,
                slots.unwrap_or(0)
            )));
        }
    }
    let after = match how {
        MountAs::Recovering { .. } => Interruption::Death,
        _ => Interruption::Crash,
    };
    on_map!(map map, m => m.drop_stray_slots(&strays.slots, after));
    report.stray_slots_freed = nstray as u64;
    dev.fence();

    let inner = file_system(dev, sb, geo, map, &mut scan, first_txid);
    on_map!(inner, m => m.unmap_stray_ranges(&inner, &strays.ranges, &scan.sizes))?;
    fix_block_counts(&inner, &scan, &mut report)?;
    if !report.was_clean {
        report.probe_paths_repaired = on_map!(inner, m => m.repair_after_crash(&inner, after));
    }
    if !report.was_clean || sb.format_version < FORMAT_ZEROED_TAILS {
        // After the mapping is whole again: the tails are found through it. (Builds before
        // format 6 let them be stale.)
        let files = scan.sizes.found().filter(|&(_, s)| s != CORRUPT);
        report.tails_zeroed = inner.zero_tails_after_crash(files)?;
    }
    inner.mark_mounted();
    // Unlinked inodes (orphans of open-unlinked files, or interrupted frees), but those
    // a live participant of a shared mount has open or a read-only one pins
    // (`fs/shared/read_only.rs`).
    let kept = |ino: Ino| matches!(how, MountAs::Recovering { keep, .. } if keep(ino)) || inner.pinned_by_reader(ino);
    report.orphans_kept = scan.nlink_zero.iter().filter(|&&ino| kept(ino)).count() as u64;
    for &ino in scan.nlink_zero.iter().filter(|&&ino| !kept(ino)) {
        let cell = inner.cell(ino)?;
        let mut st = cell.state.write();
        inner.free_inode_locked(&cell, &mut st)?;
        report.orphans_freed += 1;
    }
    progress(total_work, total_work);
    Ok((inner, report))
}

fn check_root<D: PmDevice>(dev: &D, geo: &Geometry) -> Result<()> {
    let root = inode::read_raw(dev, geo, Ino::ROOT);
    if root.check(Ino::ROOT) != InodeState::Allocated || !root.is_dir() {
        return Err(Error::corrupt("root inode is missing or not a directory; run hashfs fsck"));
    }
    Ok(())
}

/// The first participant's mount of a clean image whose last unmount left its counts
/// (`MountAs::First`): the journals were read (none open), the tables are not; the
/// mapping takes the table's count, the region the inode count (`fs/shared/join.rs`).
fn from_summary<D: PmDevice>(
    dev: Arc<D>,
    sb: crate::layout::Superblock,
    geo: Geometry,
    summary: crate::layout::superblock::Summary,
    mut report: MountReport,
    first_txid: u64,
) -> Result<(Arc<FsInner<D>>, MountReport)> {
    let map = FileMap::open(dev.clone(), &geo, &sb)?;
    if on_map!(map map, m => m.shared_count()).is_none() {
        return Err(Error::corrupt("superblock: a clean unmount's counts on an image whose mapping keeps none"));
    }
    on_map!(map map, m => m.adopt_shared_count(summary.slots));
    check_root(&*dev, &geo)?;
    let mut scan = Scan {
        ialloc: InodeAllocator::without_bits(geo.inode_count),
        sizes: Sizes::default(),
        nlink_zero: Vec::new(),
        counts: Vec::new(),
    };
    let inner = file_system(dev, sb, geo, map, &mut scan, first_txid);
    inner.mark_mounted();
    report.from_summary = true;
    Ok((inner, report))
}

/// A participant joins a shared mount others have mounted (`fs/shared/join.rs`): nothing
/// is written, and nothing read that the others keep in the region. The journals are not
/// read (an open one is another participant's call in progress: the region holds the next
/// transaction id), the mapping is not scanned (a mapping shared by processes keeps no DRAM
/// state but its used count, which the region holds), and neither is the inode table (the
/// region holds the inode bitmap); so a join takes the same time on an image of any size.
/// With `scan` (a read-only participant, which keeps a bitmap of its own for its counts),
/// the inode table is read as it is, maybe while the others change it (what they change is
/// named in the region's ring of changes, which it catches up with before its first call),
/// with nothing checked that a change in progress could make look wrong.
fn join<D: PmDevice>(
    dev: Arc<D>,
    sb: crate::layout::Superblock,
    geo: Geometry,
    mut report: MountReport,
    scan: bool,
    progress: &dyn Fn(u64),
) -> Result<(Arc<FsInner<D>>, MountReport)> {
    report.was_clean = true;
    // A joining writer takes the grouped placements' state from the region (`join.rs`); a
    // reader may find no region (no writer), and counts it.
    let map = match scan {
        true => FileMap::open(dev.clone(), &geo, &sb)?,
        false => FileMap::open_to_adopt(dev.clone(), &geo, &sb)?,
    };
    debug_assert!(on_map!(map map, m => m.shared_count()).is_some(), "only a mapping the region describes is joined");
    let mut scan = if scan {
        scan_inodes(&*dev, &geo, None, None, &mut report, progress)
    } else {
        // No bits of its own: it allocates from the region's (`FsInner::inode_bits`).
        Scan {
            ialloc: InodeAllocator::without_bits(geo.inode_count),
            sizes: Sizes::default(),
            nlink_zero: Vec::new(),
            counts: Vec::new(),
        }
    };
    let inner = file_system(dev, sb, geo, map, &mut scan, 1);
    progress(geo.inode_count + geo.data_blocks);
    Ok((inner, report))
}

/// A survivor's repair scoped to a dead participant's call (`fs/shared/takeover.rs`): the
/// journals rolled back (an open one is the dead call's: no other holds the image lock),
/// nothing scanned; the caller repairs what the call's record names.
pub(crate) fn mount_scoped<D: PmDevice>(dev: Arc<D>) -> Result<(Arc<FsInner<D>>, MountReport)> {
    let (sb, geo, source) = read_superblock(&*dev)?;
    let mut report = MountReport { used_superblock_copy: source == SuperblockSource::Secondary, ..Default::default() };
    let (jrep, first_txid) = journal::recover(&*dev, &geo)?;
    report.rolled_back_txids = jrep.rolled_back_txids;
    let map = FileMap::open(dev.clone(), &geo, &sb)?;
    let mut scan = Scan {
        ialloc: InodeAllocator::without_bits(geo.inode_count),
        sizes: Sizes::default(),
        nlink_zero: Vec::new(),
        counts: Vec::new(),
    };
    Ok((file_system(dev, sb, geo, map, &mut scan, first_txid), report))
}

/// The mounted file system, over `map` and the inode allocator `scan` built.
fn file_system<D: PmDevice>(
    dev: Arc<D>,
    sb: crate::layout::Superblock,
    geo: Geometry,
    map: FileMap<D>,
    scan: &mut Scan,
    first_txid: u64,
) -> Arc<FsInner<D>> {
    Arc::new(FsInner {
        journals: Journals::new(dev.clone(), geo, first_txid),
        map,
        inodes: InodeCache::default(),
        ialloc: std::mem::replace(&mut scan.ialloc, InodeAllocator::new(0)),
        rename_lock: Mutex::new(()),
        unmounted: AtomicBool::new(false),
        shared: std::sync::OnceLock::new(),
        read_only: std::sync::OnceLock::new(),
        local_locks: std::sync::OnceLock::new(),
        mount_point: std::sync::OnceLock::new(),
        checks_access: AtomicBool::new(false),
        times_pending: AtomicU64::new(0),
        tagged: AtomicU64::new(0),
        strict: AtomicBool::new(sb.write_mode == crate::layout::WriteMode::Strict as u32),
        sb: Mutex::new(sb),
        geo,
        dev,
    })
}

/// What the inode table and the mapping say, for the stages of a mount.
pub(crate) struct Scan {
    pub(crate) ialloc: InodeAllocator,
    /// Each inode's size, or FREE / CORRUPT.
    pub(crate) sizes: Sizes,
    /// Inodes with no links.
    pub(crate) nlink_zero: Vec<Ino>,
    /// Each inode's mapped blocks inside its size.
    pub(crate) counts: Vec<u64>,
}

/// Each inode's size as the inode table gives it, [`FREE`] or [`CORRUPT`], and the inodes
/// that are not free, in the order they were found. The sizes are kept as size + 2 in a
/// zeroed vector (0: free, 1: corrupt): a large zeroed allocation is mapped as it is
/// touched, so a takeover's recovery, which reads only the inodes in use
/// ([`MountAs::Recovering`]), touches only their pages, and its later stages go through
/// the inodes found, not every number. (A vector filled with FREE, and the passes over
/// every entry, were much of a 4 GiB image's takeover: docs/design.md, *A takeover
/// repairs no probe path*.)
#[derive(Default)]
pub(crate) struct Sizes {
    coded: Vec<u64>,
    found: Vec<Ino>,
}

impl Sizes {
    fn new(inode_count: u64) -> Sizes {
        Sizes { coded: vec![0; inode_count as usize + 1], found: Vec::new() }
    }

    /// Inode `ino`'s size, FREE (also for a number outside the table) or CORRUPT.
    pub(crate) fn get(&self, ino: u32) -> u64 {
        match self.coded.get(ino as usize) {
            None | Some(0) => FREE,
            Some(1) => CORRUPT,
            Some(&c) => c - 2,
        }
    }

    /// Sets inode `ino`'s size (or CORRUPT); not FREE. (An inode's checks bound its size
    /// far below where size + 2 would overflow.)
    pub(crate) fn set(&mut self, ino: Ino, size: u64) {
        debug_assert_ne!(size, FREE);
        let c = &mut self.coded[ino.get() as usize];
        if *c == 0 {
            self.found.push(ino);
        }
        *c = if size == CORRUPT { 1 } else { size.saturating_add(2) };
    }

    /// The inodes that are not free, with their sizes (CORRUPT among them).
    pub(crate) fn found(&self) -> impl Iterator<Item = (Ino, u64)> + '_ {
        self.found.iter().map(|&ino| (ino, self.get(ino.0)))
    }
}

/// What a crash left in the mapping.
#[derive(Default)]
pub(crate) struct Strays {
    /// HashFS: slots to free (reservations, keys past EOF or of free inodes).
    pub(crate) slots: Vec<u64>,
    /// Allocator mappings: (inode, first logical block to unmap).
    pub(crate) ranges: Vec<(u32, u64)>,
}

/// The inode table: the free-inode bitmap, sizes, unlinked and corrupt inodes. With
/// `settle` (after a crash, on HashFS), each tagged size is settled first. With `in_use`
/// (a takeover's recovery: [`MountAs::Recovering`]), only the inodes whose bits it sets.
fn scan_inodes<D: PmDevice>(
    dev: &D,
    geo: &Geometry,
    settle: Option<&HashTable<D>>,
    in_use: Option<&[std::sync::atomic::AtomicU64]>,
    report: &mut MountReport,
    progress: &dyn Fn(u64),
) -> Scan {
    let ialloc = InodeAllocator::new(geo.inode_count);
    let mut sizes = Sizes::new(geo.inode_count);
    let mut nlink_zero = Vec::new();
    inode::for_each_raw_in(dev, geo, in_use, |ino, raw| {
        let i = ino.get();
        if let (Some(table), true) = (settle, append_tag::needs_settling(raw.size, raw.blocks)) {
            match append_tag::settle(dev, geo, table, ino) {
                Settled::Kept(_) | Settled::Cleared => report.appends_settled += 1,
                Settled::Dropped(_) => {
                    report.appends_settled += 1;
                    report.appends_dropped += 1;
                }
                Settled::Plain => {}
            }
            *raw = inode::read_raw(dev, geo, ino);
        }
        match raw.check(ino) {
            InodeState::Free => {}
            InodeState::Allocated => {
                ialloc.mark_used(ino);
                sizes.set(ino, raw.size);
                if raw.nlink == 0 {
                    nlink_zero.push(ino);
                }
            }
            InodeState::Corrupt(_) => {
                ialloc.mark_used(ino);
                sizes.set(ino, CORRUPT);
                report.corrupt_inodes.push(ino);
            }
        }
        if i % 65536 == 0 {
            progress(i);
        }
    });
    Scan { ialloc, sizes, nlink_zero, counts: vec![0; geo.inode_count as usize + 1] }
}

/// Block counts that disagree with the mapping: rewritten after a crash, corruption on a
/// cleanly unmounted image.
fn fix_block_counts<D: PmDevice>(inner: &FsInner<D>, scan: &Scan, report: &mut MountReport) -> Result<()> {
    for (ino, size) in scan.sizes.found() {
        if size == CORRUPT {
            continue;
        }
        let i = ino.get() as usize;
        let raw = inode::read_raw(&*inner.dev, &inner.geo, ino);
        if raw.blocks != scan.counts[i] {
            if report.was_clean {
                return Err(Error::corrupt(format!(
                    "inode {ino} counts {} blocks but maps {}; run hashfs fsck --repair",
                    raw.blocks, scan.counts[i]
                )));
            }
            let mut fixed = raw;
            fixed.blocks = scan.counts[i];
            let mut tx = inner.journals.begin();
            inode::tx_write_inode(&mut tx, &inner.geo, ino, &mut fixed);
            tx.commit()?;
            report.block_counts_fixed += 1;
        }
    }
    Ok(())
}

/// What mount's recovery asks of the mapping it found (implemented beside each mapping:
/// `fs/hashfs/recovery.rs`, `fs/blocks/recovery.rs`).
pub(crate) trait RecoverVerbs<D: PmDevice> {
    /// The table a tagged size is settled through after a crash (HashFS's one-fence
    /// appends, `fs/hashfs/append_tag.rs`); None where no size is ever tagged.
    fn settles_appends(&self) -> Option<&HashTable<D>>;

    /// Counts each file's mapped blocks inside its size into `scan.counts` and finds what
    /// a crash left (`dirty`: the image was not cleanly unmounted); inodes whose mapping
    /// cannot be read go to `report.corrupt_inodes`.
    fn scan(
        &self,
        geo: &Geometry,
        scan: &mut Scan,
        dirty: bool,
        report: &mut MountReport,
        progress: &dyn Fn(u64),
    ) -> Result<Strays>;

    /// Before the file system exists: frees the stray slots the scan found.
    fn drop_stray_slots(&self, slots: &[u64], after: Interruption);

    /// Once it exists: unmaps the stray ranges the scan found, (inode, first logical
    /// block), what lies past EOF or belongs to a free inode (`sizes`: the scan's).
    fn unmap_stray_ranges(&self, fs: &FsInner<D>, ranges: &[(u32, u64)], sizes: &Sizes) -> Result<()>;

    /// After a crash, once block counts are right: repairs what the crash left of the
    /// structure; returns the slots changed.
    fn repair_after_crash(&self, fs: &FsInner<D>, after: Interruption) -> u64;
}
