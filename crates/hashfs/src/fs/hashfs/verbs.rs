//! The data path's verbs on the HashFS table (`mapping/hashfs/`): a block's slot is its
//! key's, found by hashing; claiming a block reserves a slot, mapping it publishes the key.

#![forbid(unsafe_code)]

use super::grouped::in_whole_chunk;
use super::regions::OpenLock;
use super::slots::{free_slots, free_slots_after_commit, mapped_slots};
use crate::fs::data::{MapGroup, WRITE_CHUNK_BLOCKS};
use crate::fs::inode::{InodeCell, InodeMem};
use crate::fs::verbs::{merge_runs, MapVerbs};
use crate::fs::FsInner;
use crate::journal::Tx;
use crate::layout::{Extent, Geometry, Ino, InodeRaw, Lblk, Pblk};
use crate::mapping::hashfs::{classify, file_key, Entry, HashTable, SlotFlush};
use crate::pm::PmDevice;
use crate::{Error, Result};
use std::ops::Range;
use std::sync::atomic::Ordering;

/// Rounds of opening groups for a key whose chain is full before a claim fails (see
/// [`HashTable::claim_blocks`]).
const FULL_CHAIN_ROUNDS: u32 = 8;

impl<D: PmDevice> MapVerbs<D> for HashTable<D> {
    #[inline]
    fn translate(
        &self,
        _fs: &FsInner<D>,
        cell: &InodeCell,
        _raw: &InodeRaw,
        lblk: Lblk,
        end: Lblk,
        size_blocks: u64,
    ) -> Result<Option<Extent>> {
        Ok(translate_hash(self, cell, lblk, end, size_blocks))
    }

    /// None: a block's slot is its key's, so there is nothing to place it near.
    fn hint_for(
        &self,
        _fs: &FsInner<D>,
        _cell: &InodeCell,
        _raw: &InodeRaw,
        _first: Lblk,
        _before: Option<Pblk>,
    ) -> Result<Option<Pblk>> {
        Ok(None)
    }

    /// Reserves each block's slot: in its chunk's group under the grouped placements when
    /// the request writes the chunk whole, else at or after its key's home (with the
    /// regions placement, in the open groups, opening more first when they are full).
    fn claim_blocks(
        &self,
        fs: &FsInner<D>,
        ino: Ino,
        lblks: &[Lblk],
        _hint: Option<Pblk>,
        whole: Range<Lblk>,
    ) -> Result<Vec<Pblk>> {
        let t = self;
        // Grouped placements: the claim filter's word and the slots the first block most
        // likely takes, fetched at once, so that the filter, read first, no longer delays
        // the slot's miss; its bucket among the open groups is kept for its reservation.
        let first_bucket = match (t.groups(), lblks.first().and_then(|&l| file_key(ino, l))) {
            (Some(_), Some(k)) => t.likely_slots(k, |s| fs.dev.prefetch(t.slot_off(s))),
            _ => None,
        };
        let mut out = Vec::with_capacity(lblks.len());
        let mut upkept = t.regions().is_none();
        for (i, &l) in lblks.iter().enumerate() {
            if let Some(s) = t.groups().and_then(|g| fs.claim_grouped(t, g, ino, l, &whole)) {
                out.push(Pblk(s));
                continue;
            }
            if !upkept {
                // The regions placement: room for this request's small keys (those
                // outside the whole chunks it writes) before the first of them.
                let small = lblks[i..].iter().filter(|l| !in_whole_chunk(**l, &whole)).count();
                fs.regions_upkeep_for(small.max(1) as u64, OpenLock::Try);
                upkept = true;
            }
            let hint = if i == 0 { first_bucket } else { None };
            let reserve = || file_key(ino, l).ok_or(Error::FileTooBig).and_then(|k| t.reserve_hinted(k, hint));
            let mut got = reserve();
            // The regions placement: its chain is full, so more groups (even if another
            // request is opening some), then again. Other writers may fill a new group
            // first (issue 53's race test), hence a few rounds; the device is full only
            // when no group is left to open.
            for _ in 0..FULL_CHAIN_ROUNDS {
                if !matches!(got, Err(Error::NoSpace)) || t.regions().is_none_or(|r| r.no_free()) {
                    break;
                }
                fs.regions_upkeep_for((lblks.len() - i) as u64, OpenLock::Wait);
                got = reserve();
            }
            match got {
                Ok(s) => out.push(s),
                Err(e) => {
                    free_slots(t, &*fs.dev, &out);
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    fn unclaim_blocks(&self, fs: &FsInner<D>, blocks: &[Pblk]) {
        free_slots(self, &*fs.dev, blocks)
    }

    /// Each block's key into its slot: logged inside the file's durable size (recovery
    /// would keep a key published there), published unlogged past it.
    fn tx_map<'a>(&'a self, tx: &mut Tx<'a, D>, groups: &mut [MapGroup<'_>]) -> Result<()> {
        for g in groups.iter() {
            for &(l, s) in g.pairs {
                let k = file_key(g.ino, l).ok_or(Error::FileTooBig)?;
                if l < g.logged_below {
                    tx.write_u64(self.slot_off(s.0), k);
                } else {
                    tx.publish_u64(self.slot_off(s.0), k);
                }
            }
        }
        Ok(())
    }

    /// The new blocks go into the file's translation cache.
    fn mapped(&self, cell: &InodeCell, pairs: &[(Lblk, Pblk)]) {
        for &(lblk, slot) in pairs {
            cell.tcache.put(lblk, slot);
        }
    }

    /// One unlogged word per block.
    fn write_chunk_blocks(&self, _geo: &Geometry) -> u64 {
        WRITE_CHUNK_BLOCKS
    }

    fn end_request(&self, ino: Ino) {
        if let Some(g) = self.groups() {
            g.end_request(self, ino);
        }
    }

    fn one_fence_appends(&self) -> bool {
        true
    }

    fn shared_count(&self) -> Option<u64> {
        Some(self.used())
    }

    fn adopt_shared_count(&self, n: u64) {
        self.set_used(n);
    }

    fn settle_tagged_sizes(&self, fs: &FsInner<D>) {
        for ino in super::append_tag::tagged_inodes(&*fs.dev, &fs.geo) {
            super::append_tag::settle(&*fs.dev, &fs.geo, self, ino);
        }
    }

    /// A key in the block's slot (with every placement: a group the grouped placements
    /// claim for the chunk, and any opening of regions, was made durable before the plan
    /// returned, as for a transaction's write).
    fn maps_past_eof_unlogged(&self) -> bool {
        true
    }

    /// The keys' words flushed by runs of consecutive slots ([`SlotFlush`]).
    fn map_unlogged(&self, fs: &FsInner<D>, cell: &InodeCell, fresh: impl Iterator<Item = (Lblk, Pblk)>) -> u64 {
        let mut n = 0;
        let mut flush = SlotFlush::new(self);
        for (lblk, pblk) in fresh {
            let k = file_key(cell.ino, lblk).expect("checked by the plan");
            fs.dev.store_u64(self.slot_off(pblk.0), k);
            flush.stored(pblk.0);
            cell.tcache.put(lblk, pblk);
            n += 1;
        }
        drop(flush);
        n
    }

    /// The next append's block most likely lands at its key's home: fetch that slot's
    /// line (its reservation reads it) and touch the block's page translation now, while
    /// the caller does other work, instead of missing both in the next call.
    fn prefetch_next_append(&self, fs: &FsInner<D>, ino: Ino, next: Lblk) {
        if let Some(k) = file_key(ino, next) {
            fs.prefetch_key_home(self, k, 0);
        }
    }

    /// The slots, found while the keys are still the file's (a shrink commits the smaller
    /// size first; F1 lets recovery free the rest).
    fn release_plan(&self, cell: &InodeCell, from: Lblk, to: Lblk) -> Vec<Pblk> {
        mapped_slots(self, cell.ino, from, to)
    }

    /// One scan of the table for the keys of `ino`.
    fn mapped_runs(&self, ino: Ino, _raw: &InodeRaw) -> Result<Vec<(Lblk, u64)>> {
        let n = self.nslots();
        let lblks = (0..n).filter_map(|s| match classify(self.load(s), n) {
            Entry::Key { ino: i, lblk } if i == ino.0 => Some((lblk as u64, 1)),
            _ => None,
        });
        Ok(merge_runs(lblks.collect()))
    }

    fn release_blocks(
        &self,
        fs: &FsInner<D>,
        _cell: &InodeCell,
        _st: &mut InodeMem,
        planned: &[Pblk],
        _from: Lblk,
        _to: Lblk,
    ) -> Result<()> {
        free_slots(self, &*fs.dev, planned);
        Ok(())
    }

    fn release_blocks_after_commit(
        &self,
        fs: &FsInner<D>,
        _cell: &InodeCell,
        _st: &mut InodeMem,
        planned: &[Pblk],
        _from: Lblk,
        _to: Lblk,
    ) -> Result<()> {
        // The grouped placements' drop of an emptied group keeps its fences.
        match self.groups() {
            None => free_slots_after_commit(self, &*fs.dev, planned),
            Some(_) => free_slots(self, &*fs.dev, planned),
        }
        Ok(())
    }
}

/// The most blocks one translation's run extends to past its batch of 8 (1 MiB).
const RUN_MAX_BLOCKS: u64 = 256;

/// Translation through the HashFS table: translation cache, then the table. A request of
/// several blocks (up to `end`) looks up to 8 of them with one vector hash, and so does a
/// cache miss during sequential access (paper §3.2.2: spare SIMD lanes prefetch following
/// entries); the blocks found are cached. A random single-block access looks up only its
/// block. Returns the slot and how many of the blocks looked up follow it physically; a
/// batch of 8 that does goes on through the next slots that hold the next keys (at most
/// [`RUN_MAX_BLOCKS`] more).
#[inline]
fn translate_hash<D: PmDevice>(
    t: &HashTable<D>,
    cell: &InodeCell,
    lblk: Lblk,
    end: Lblk,
    size_blocks: u64,
) -> Option<Extent> {
    if let Some(p) = cell.tcache.get(lblk) {
        return Some(Extent { lblk, pblk: p, len: 1 });
    }
    let sequential = cell.next_read_lblk.load(Ordering::Relaxed) == lblk.0;
    let limit = if sequential { Lblk(size_blocks).max(end) } else { end };
    if lblk + 1 < limit {
        let n = (limit - lblk).min(8) as usize;
        let mut keys = [0u64; 8];
        for (i, k) in keys[..n].iter_mut().enumerate() {
            *k = file_key(cell.ino, lblk + i as u64)?;
        }
        let mut out = [None; 8];
        t.lookup_batch(&keys[..n], &mut out[..n]);
        for (i, s) in out[..n].iter().enumerate() {
            if let Some(s) = s {
                cell.tcache.put(lblk + i as u64, *s);
            }
        }
        let first = out[0]?;
        let mut run = out[..n].iter().zip(0..).take_while(|&(s, i)| *s == Some(first + i)).count() as u64;
        if run == 8 {
            // A whole batch in consecutive slots: the run goes on while the next slots hold
            // the next keys (the regions placement's claimed chunks), up to the request.
            let max = end.0.saturating_sub(lblk.0 + 8).min(RUN_MAX_BLOCKS);
            run += t.consecutive_keys(first.0 + 8, keys[7] + 1, max);
        }
        return Some(Extent { lblk, pblk: first, len: run });
    }
    let p = t.lookup(file_key(cell.ino, lblk)?)?;
    cell.tcache.put(lblk, p);
    Some(Extent { lblk, pblk: p, len: 1 })
}
