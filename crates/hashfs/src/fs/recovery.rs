//! Mount: superblock, journal rollback, and the scan that rebuilds DRAM state (free-inode
//! bitmap, used-block count) and, after an unclean shutdown, collects what a crash can
//! leave behind:
//! - table reservations of writes that never committed;
//! - keys past their inode's EOF (a write whose size update rolled back, or a truncate
//!   interrupted while freeing);
//! - keys of free inodes (an unlink interrupted while freeing);
//! - inodes with no links (unlinked while open, or interrupted while freeing);
//! - EMPTY slots on a key's probe path (concurrent inserts persisted out of order);
//! - inode block counts that disagree with the table.
//!
//! On a cleanly unmounted image none of these can exist, so finding one means corruption:
//! mount refuses and names `hashfs fsck --repair`.

#![forbid(unsafe_code)]

use super::inode::{self, InodeAllocator, InodeCache, InodeCell};
use super::{read_superblock, FsInner, Progress, SuperblockSource};
use crate::journal::{self, Journals};
use crate::layout::inode::InodeState;
use crate::layout::{Ino, MappingKind, BLOCK_BYTES, SB_STATE_CLEAN};
use crate::mapping::hashfs::{classify, Entry, HashTable};
use crate::mapping::{BlockMap, FileMap, Mapped};
use crate::pm::PmDevice;
use crate::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::AtomicBool;
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
    /// Inodes that failed their checks; they stay allocated and return a corruption
    /// error when used, until fsck deals with them.
    pub corrupt_inodes: Vec<u32>,
}

const FREE: u64 = u64::MAX;
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

    // Inodes.
    let ialloc = InodeAllocator::new(geo.inode_count);
    let mut sizes = vec![FREE; geo.inode_count as usize + 1];
    let mut nlink_zero = Vec::new();
    let total_work = geo.inode_count + geo.data_blocks;
    for i in 1..=geo.inode_count {
        let ino = Ino(i as u32);
        let raw = inode::read_raw(&*dev, &geo, ino);
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
                report.corrupt_inodes.push(ino.0);
            }
        }
        if i % 65536 == 0 {
            progress(i, total_work);
        }
    }
    let root = inode::read_raw(&*dev, &geo, Ino::ROOT);
    if root.check(Ino::ROOT) != InodeState::Allocated || !root.is_dir() {
        return Err(Error::corrupt("root inode is missing or not a directory; run hashfs fsck"));
    }

    // The mapping: count each file's blocks and find what a crash left behind.
    let mut counts = vec![0u64; geo.inode_count as usize + 1];
    // HashFS: slots to free. Others: (inode, first logical block to unmap).
    let mut stray = Vec::new();
    let mut stray_ranges: Vec<(u32, u64)> = Vec::new();
    let map = if kind == MappingKind::HashFs {
        let table = HashTable::new(dev.clone(), &geo, sb.hash_seed);
        let mut used = 0u64;
        for s in 0..table.nslots() {
            match classify(table.load(s), table.nslots()) {
                Entry::Empty | Entry::Tombstone => {}
                Entry::Reserved { .. } => stray.push(s),
                Entry::Invalid => {
                    return Err(Error::corrupt(format!(
                        "hash table slot {s} holds an invalid value; run hashfs fsck --repair"
                    )))
                }
                Entry::Key { ino, lblk } => {
                    let size = sizes.get(ino as usize).copied().unwrap_or(FREE);
                    if size == CORRUPT {
                        used += 1;
                    } else if size == FREE || lblk as u64 >= mappable_blocks(size) {
                        stray.push(s);
                    } else {
                        counts[ino as usize] += 1;
                        used += 1;
                    }
                }
            }
            if s % 262_144 == 0 {
                progress(geo.inode_count + s, total_work);
            }
        }
        table.set_used(used);
        FileMap::Hash(table)
    } else {
        let bm = BlockMap::new(dev.clone(), geo, &sb, kind)?;
        let mut first_stray = std::collections::BTreeMap::<u32, u64>::new();
        let mut bad_inode = None;
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
        if bm.is_global() {
            let dummy: crate::layout::InodeRaw = bytemuck::Zeroable::zeroed();
            bm.walk(0, &dummy, &mut |m| {
                if let Mapped::Data { ino, lblk, len, .. } = m {
                    note(ino, lblk, len, &mut counts);
                }
            })
            .map_err(|e| Error::corrupt(format!("{e}; run hashfs fsck --repair")))?;
        } else {
            for i in 1..=geo.inode_count {
                if sizes[i as usize] == FREE || sizes[i as usize] == CORRUPT {
                    continue;
                }
                let raw = inode::read_raw(&*dev, &geo, Ino(i as u32));
                let mut found = Vec::new();
                let walked = bm.walk(i as u32, &raw, &mut |m| {
                    if let Mapped::Data { lblk, len, .. } = m {
                        found.push((lblk, len));
                    }
                });
                if walked.is_err() {
                    report.corrupt_inodes.push(i as u32);
                    continue;
                }
                for (lblk, len) in found {
                    note(i as u32, lblk, len, &mut counts);
                }
            }
        }
        if let Some(ino) = bad_inode {
            return Err(Error::corrupt(format!(
                "{} maps blocks of inode {ino}, which does not exist; run hashfs fsck --repair",
                kind.name()
            )));
        }
        stray_ranges.extend(first_stray);
        for &i in &report.corrupt_inodes {
            sizes[i as usize] = CORRUPT;
        }
        FileMap::Blocks(Box::new(bm))
    };
    let nstray = stray.len() + stray_ranges.len();
    if report.was_clean && (nstray > 0 || !nlink_zero.is_empty()) {
        return Err(Error::corrupt(format!(
            "cleanly unmounted image holds {nstray} stray mapping entries and {} unlinked inodes; run hashfs fsck --repair",
            nlink_zero.len()
        )));
    }
    if let FileMap::Hash(table) = &map {
        for &s in &stray {
            let _ = table.release(s); // the full purge below covers its path
        }
    }
    report.stray_slots_freed = nstray as u64;
    dev.fence();

    let inner = Arc::new(FsInner {
        journals: Journals::new(dev.clone(), geo, first_txid),
        map,
        inodes: InodeCache::default(),
        ialloc,
        rename_lock: Mutex::new(()),
        unmounted: AtomicBool::new(false),
        sb: Mutex::new(sb),
        geo,
        dev,
    });

    // Allocator mappings: unmap what lies past EOF or belongs to free inodes.
    if let FileMap::Blocks(bm) = &inner.map {
        for (ino, from) in stray_ranges {
            let free = sizes[ino as usize] == FREE;
            let raw = if free { bytemuck::Zeroable::zeroed() } else { inode::read_raw(&*inner.dev, &geo, Ino(ino)) };
            let cell = InodeCell::new(Ino(ino), raw);
            let mut st = cell.state.write();
            inner.unmap_blocks_of(bm, &cell, &mut st, from, 1 << 32, !free)?;
        }
    }

    // Block counts.
    for i in 1..=geo.inode_count as usize {
        let size = sizes[i];
        if size == FREE || size == CORRUPT {
            continue;
        }
        let ino = Ino(i as u32);
        let raw = inode::read_raw(&*inner.dev, &geo, ino);
        if raw.blocks != counts[i] {
            if report.was_clean {
                return Err(Error::corrupt(format!(
                    "inode {ino} counts {} blocks but maps {}; run hashfs fsck --repair",
                    raw.blocks, counts[i]
                )));
            }
            let mut fixed = raw;
            fixed.blocks = counts[i];
            let mut tx = inner.journals.begin();
            inode::tx_write_inode(&mut tx, &geo, ino, &mut fixed);
            tx.commit()?;
            report.block_counts_fixed += 1;
        }
    }
    if let (false, FileMap::Hash(table)) = (report.was_clean, &inner.map) {
        report.probe_paths_repaired = table.repair_and_purge_all();
        inner.dev.fence();
    }
    inner.mark_mounted();

    // Unlinked inodes (orphans of open-unlinked files, or interrupted frees).
    for ino in nlink_zero {
        let cell = inner.cell(ino)?;
        let mut st = cell.state.write();
        inner.free_inode_locked(&cell, &mut st)?;
        report.orphans_freed += 1;
    }
    progress(total_work, total_work);
    Ok((inner, report))
}
