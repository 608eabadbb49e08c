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
use super::verbs::on_map;
use super::{read_superblock, FsInner, Progress, SuperblockSource};
use crate::journal::{self, Journals};
use crate::layout::inode::InodeState;
use crate::layout::superblock::FORMAT_ZEROED_TAILS;
use crate::layout::{Geometry, Ino, MappingKind, BLOCK_BYTES, SB_STATE_CLEAN};
use crate::mapping::hashfs::{classify, Entry, HashTable};
use crate::mapping::{BlockMap, FileMap, Mapped};
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
}

pub(crate) const FREE: u64 = u64::MAX;
const CORRUPT: u64 = u64::MAX - 1;

/// Logical blocks that an inode of `size` bytes may map.
pub(crate) fn mappable_blocks(size: u64) -> u64 {
    size.div_ceil(BLOCK_BYTES)
}

pub(crate) fn mount<D: PmDevice>(dev: Arc<D>, progress: Progress<'_>) -> Result<(Arc<FsInner<D>>, MountReport)> {
    let (sb, geo, source) = read_superblock(&*dev)?;
    let kind = MappingKind::from_u32(sb.mapping_kind).ok_or_else(|| Error::corrupt("unknown mapping kind"))?;
    let mut report = MountReport { used_superblock_copy: source == SuperblockSource::Secondary, ..Default::default() };
    let (jrep, first_txid) = journal::recover(&*dev, &geo)?;
    report.rolled_back_txids = jrep.rolled_back_txids;
    report.was_clean = sb.state == SB_STATE_CLEAN && report.rolled_back_txids.is_empty();
    let total_work = geo.inode_count + geo.data_blocks;

    let dirty = !report.was_clean;
    // HashFS's table first: after a crash, settling a tagged size reads the file's last
    // bytes through it (`fs/hashfs/append_tag.rs`).
    let table = if kind == MappingKind::HashFs { Some(HashTable::of_image(dev.clone(), &geo, &sb)?) } else { None };
    let settle_with = table.as_ref().filter(|_| dirty);
    let mut scan = scan_inodes(&*dev, &geo, settle_with, &mut report, &|d| progress(d, total_work));
    let root = inode::read_raw(&*dev, &geo, Ino::ROOT);
    if root.check(Ino::ROOT) != InodeState::Allocated || !root.is_dir() {
        return Err(Error::corrupt("root inode is missing or not a directory; run hashfs fsck"));
    }
    // The mapping: count each file's blocks and find what a crash left behind.
    let (map, strays) = if let Some(table) = table {
        let strays = scan_table(&table, &geo, &mut scan, dirty, &|d| progress(d, total_work))?;
        (FileMap::Hash(table), strays)
    } else {
        let (bm, strays) = scan_block_map(dev.clone(), &geo, &sb, kind, &mut scan, &mut report)?;
        (FileMap::Blocks(Box::new(bm)), strays)
    };
    let nstray = strays.slots.len() + strays.ranges.len();
    if report.was_clean && (nstray > 0 || !scan.nlink_zero.is_empty()) {
        return Err(Error::corrupt(format!(
            "cleanly unmounted image holds {nstray} stray mapping entries and {} unlinked inodes; run hashfs fsck --repair",
            scan.nlink_zero.len()
        )));
    }
    on_map!(map map, m => m.drop_stray_slots(&strays.slots));
    report.stray_slots_freed = nstray as u64;
    dev.fence();

    let inner = Arc::new(FsInner {
        journals: Journals::new(dev.clone(), geo, first_txid),
        map,
        inodes: InodeCache::default(),
        ialloc: std::mem::replace(&mut scan.ialloc, InodeAllocator::new(0)),
        rename_lock: Mutex::new(()),
        unmounted: AtomicBool::new(false),
        times_pending: AtomicU64::new(0),
        tagged: AtomicU64::new(0),
        strict: AtomicBool::new(sb.write_mode == crate::layout::WriteMode::Strict as u32),
        sb: Mutex::new(sb),
        geo,
        dev,
    });
    on_map!(inner, m => m.unmap_stray_ranges(&inner, &strays.ranges, &scan.sizes))?;
    fix_block_counts(&inner, &scan, &mut report)?;
    if !report.was_clean {
        report.probe_paths_repaired = on_map!(inner, m => m.repair_after_crash(&inner));
    }
    if !report.was_clean || sb.format_version < FORMAT_ZEROED_TAILS {
        // After the mapping is whole again: the tails are found through it. (Builds before
        // format 6 let them be stale.)
        let files = scan.sizes.iter().enumerate().skip(1).filter(|&(_, &s)| s != FREE && s != CORRUPT);
        report.tails_zeroed = inner.zero_tails_after_crash(files.map(|(i, &s)| (Ino(i as u32), s)))?;
    }
    inner.mark_mounted();
    // Unlinked inodes (orphans of open-unlinked files, or interrupted frees).
    for &ino in &scan.nlink_zero {
        let cell = inner.cell(ino)?;
        let mut st = cell.state.write();
        inner.free_inode_locked(&cell, &mut st)?;
        report.orphans_freed += 1;
    }
    progress(total_work, total_work);
    Ok((inner, report))
}

/// What the inode table and the mapping say, for the stages of a mount.
struct Scan {
    ialloc: InodeAllocator,
    /// Each inode's size, or FREE / CORRUPT.
    sizes: Vec<u64>,
    /// Inodes with no links.
    nlink_zero: Vec<Ino>,
    /// Each inode's mapped blocks inside its size.
    counts: Vec<u64>,
}

/// What a crash left in the mapping.
#[derive(Default)]
struct Strays {
    /// HashFS: slots to free (reservations, keys past EOF or of free inodes).
    slots: Vec<u64>,
    /// Allocator mappings: (inode, first logical block to unmap).
    ranges: Vec<(u32, u64)>,
}

/// The inode table: the free-inode bitmap, sizes, unlinked and corrupt inodes. With
/// `settle` (after a crash, on HashFS), each tagged size is settled first.
fn scan_inodes<D: PmDevice>(
    dev: &D,
    geo: &Geometry,
    settle: Option<&HashTable<D>>,
    report: &mut MountReport,
    progress: &dyn Fn(u64),
) -> Scan {
    let ialloc = InodeAllocator::new(geo.inode_count);
    let mut sizes = vec![FREE; geo.inode_count as usize + 1];
    let mut nlink_zero = Vec::new();
    for i in 1..=geo.inode_count {
        let ino = Ino(i as u32);
        let mut raw = inode::read_raw(dev, geo, ino);
        if let (Some(table), true) = (settle, append_tag::needs_settling(raw.size, raw.blocks)) {
            match append_tag::settle(dev, geo, table, ino) {
                Settled::Kept(_) | Settled::Cleared => report.appends_settled += 1,
                Settled::Dropped(_) => {
                    report.appends_settled += 1;
                    report.appends_dropped += 1;
                }
                Settled::Plain => {}
            }
            raw = inode::read_raw(dev, geo, ino);
        }
        match raw.check(ino) {
            InodeState::Free => {}
            InodeState::Allocated => {
                ialloc.mark_used(ino);
                sizes[i as usize] = raw.size;
                if raw.nlink == 0 {
                    nlink_zero.push(ino);
                }
            }
            InodeState::Corrupt(_) => {
                ialloc.mark_used(ino);
                sizes[i as usize] = CORRUPT;
                report.corrupt_inodes.push(ino);
            }
        }
        if i % 65536 == 0 {
            progress(i);
        }
    }
    Scan { ialloc, sizes, nlink_zero, counts: vec![0; geo.inode_count as usize + 1] }
}

/// The HashFS table: the used count, each file's blocks, and the slots a crash left
/// (`dirty`: the image was not cleanly unmounted, so a key may also have a second copy,
/// farther along its probe path, left by an untorn write's key switch: a stray).
fn scan_table<D: PmDevice>(
    table: &HashTable<D>,
    geo: &Geometry,
    scan: &mut Scan,
    dirty: bool,
    progress: &dyn Fn(u64),
) -> Result<Strays> {
    let mut strays = Strays::default();
    let mut used = 0u64;
    for s in 0..table.nslots() {
        let v = table.load(s);
        match classify(v, table.nslots()) {
            Entry::Empty | Entry::Tombstone => {}
            // Strays count as used until released (each release subtracts one).
            Entry::Reserved { .. } => {
                strays.slots.push(s);
                used += 1;
            }
            Entry::Invalid => {
                return Err(Error::corrupt(format!(
                    "hash table slot {s} holds an invalid value; run hashfs fsck --repair"
                )))
            }
            Entry::Key { ino, lblk } => {
                let size = scan.sizes.get(ino as usize).copied().unwrap_or(FREE);
                if size == CORRUPT {
                    used += 1;
                } else if size == FREE
                    || lblk as u64 >= mappable_blocks(size)
                    || (dirty && !table.group_holds(v, s) && table.shadowed(v, s))
                {
                    strays.slots.push(s);
                    used += 1;
                } else {
                    scan.counts[ino as usize] += 1;
                    used += 1;
                }
            }
        }
        if s % 262_144 == 0 {
            progress(geo.inode_count + s);
        }
    }
    table.set_used(used);
    Ok(strays)
}

/// An allocator mapping: each file's blocks, and the ranges past EOF or of free inodes.
fn scan_block_map<D: PmDevice>(
    dev: Arc<D>,
    geo: &Geometry,
    sb: &crate::layout::Superblock,
    kind: MappingKind,
    scan: &mut Scan,
    report: &mut MountReport,
) -> Result<(BlockMap<D>, Strays)> {
    let bm = BlockMap::new(dev.clone(), *geo, sb, kind)?;
    let mut first_stray = std::collections::BTreeMap::<u32, u64>::new();
    let mut bad_inode = None;
    let sizes = &scan.sizes;
    let mut note = |ino: u32, lblk: u64, len: u64, counts: &mut [u64]| {
        if ino == 0 || ino as u64 > geo.inode_count {
            bad_inode = Some(ino);
            return;
        }
        let size = sizes[ino as usize];
        if size == CORRUPT {
            return;
        }
        let limit = if size == FREE { 0 } else { mappable_blocks(size) };
        let inside = limit.saturating_sub(lblk).min(len);
        counts[ino as usize] += inside;
        if inside < len {
            let f = first_stray.entry(ino).or_insert(u64::MAX);
            *f = (*f).min(limit.max(lblk));
        }
    };
    let counts = &mut scan.counts;
    if bm.is_global() {
        let dummy: crate::layout::InodeRaw = bytemuck::Zeroable::zeroed();
        bm.walk(Ino(0), &dummy, &mut |m| {
            if let Mapped::Data { ino, ext } = m {
                note(ino.0, ext.lblk.0, ext.len, counts);
            }
        })
        .map_err(|e| Error::corrupt(format!("{e}; run hashfs fsck --repair")))?;
    } else {
        for i in 1..=geo.inode_count {
            if sizes[i as usize] == FREE || sizes[i as usize] == CORRUPT {
                continue;
            }
            let raw = inode::read_raw(&*dev, geo, Ino(i as u32));
            let mut found = Vec::new();
            let walked = bm.adopt(&raw).and_then(|()| {
                bm.walk(Ino(i as u32), &raw, &mut |m| {
                    if let Mapped::Data { ext, .. } = m {
                        found.push((ext.lblk.0, ext.len));
                    }
                })
            });
            if walked.is_err() {
                report.corrupt_inodes.push(Ino(i as u32));
                continue;
            }
            for (lblk, len) in found {
                note(i as u32, lblk, len, counts);
            }
        }
    }
    if let Some(ino) = bad_inode {
        return Err(Error::corrupt(format!(
            "{} maps blocks of inode {ino}, which does not exist; run hashfs fsck --repair",
            kind.name()
        )));
    }
    for &i in &report.corrupt_inodes {
        scan.sizes[i.0 as usize] = CORRUPT;
    }
    Ok((bm, Strays { slots: Vec::new(), ranges: first_stray.into_iter().collect() }))
}

/// Block counts that disagree with the mapping: rewritten after a crash, corruption on a
/// cleanly unmounted image.
fn fix_block_counts<D: PmDevice>(inner: &FsInner<D>, scan: &Scan, report: &mut MountReport) -> Result<()> {
    for (i, &size) in scan.sizes.iter().enumerate().skip(1) {
        if size == FREE || size == CORRUPT {
            continue;
        }
        let ino = Ino(i as u32);
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
    /// Before the file system exists: frees the stray slots the scan found.
    fn drop_stray_slots(&self, slots: &[u64]);

    /// Once it exists: unmaps the stray ranges the scan found, (inode, first logical
    /// block), what lies past EOF or belongs to a free inode (`sizes`: the scan's).
    fn unmap_stray_ranges(&self, fs: &FsInner<D>, ranges: &[(u32, u64)], sizes: &[u64]) -> Result<()>;

    /// After a crash, once block counts are right: repairs what the crash left of the
    /// structure; returns the slots changed.
    fn repair_after_crash(&self, fs: &FsInner<D>) -> u64;
}
