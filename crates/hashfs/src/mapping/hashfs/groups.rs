//! Grouped placement (ours; no paper has it): whole 2 MiB logical chunks of a file in
//! whole 2 MiB groups of slots, so that a large HashFS file gets 2 MiB-aligned physical
//! extents (WineFS's point: memory-mapped files keep 2 MiB pages) while a lookup stays a
//! hash and one slot read.
//!
//! The table is cut into groups of [`GROUP_SLOTS`] slots. A write that covers a whole
//! aligned chunk of a file (512 blocks; a fallocate, a mapping's first touch, a large
//! write) claims a *free* group (no key or reservation in any of its slots) for it and
//! places block `i` of the chunk in slot `i` of the group. The claim is recorded in the
//! group directory (the format is in `layout/mapping.rs`): a second linear-probing table,
//! one word per group, whose slot index is the group, exactly as the table's slot index is
//! the block. A lookup of a block first probes the directory for its chunk (usually one
//! word of a table 4,096 times smaller than the table) and reads the one slot the chunk's
//! group gives; if the slot holds another key (the chunk was not placed whole, or not
//! that block), it probes the table as the paper does. Every other block (small files,
//! partial chunks, groups that ran out) is placed as the paper places it.
//!
//! A grouped key needs no probe path in the table: its "home" is its own slot, which is
//! what tombstone purging and repair see. The directory word is flushed before any key of
//! its chunk is published (the transaction's first fence orders it), and cleared only
//! after every slot of the group is free and that is durable, so a key in a group is
//! never left without the word that finds it (a punched block cannot come back).
//!
//! What the design gives up: a group is claimable only when all 512 slots are free, and
//! the paper's placement spreads small files' blocks over every group, so on an aged,
//! full image few groups are free (`docs/mappings.md` has the measurements).

#![forbid(unsafe_code)]

use super::cells::Cells;
use super::regions::{open_word, Regions};
use super::{key, Freed, HashTable, EMPTY, RESERVED_TAG, TOMBSTONE};
use crate::layout::mapping::hashfs::GROUP_SLOTS;
use crate::layout::{Geometry, Ino, Lblk};
use crate::pm::PmDevice;
use crate::share::{ImageRegion, RegionCells, TableLayout};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Directory words a claim examines from the chunk's home, and so the most any lookup
/// reads: a chunk's word lies at most this far from its home (four cache lines).
const MAX_CLAIM_PROBES: u64 = 32;
/// The same with the regions placement, whose claims move nothing and so must find a
/// free group further away on an aged image (its open groups' words fill the directory
/// too); only lookups whose chunk may be claimed read the directory (`claim_filter`).
const REGIONS_CLAIM_PROBES: u64 = 1024;
/// Cells of the claim filter per group (one byte each, 64 bytes per 2 MiB of image). With
/// every group claimed, a lookup of a chunk without a claim finds its cell non-zero one
/// time in 64; each such lookup walks the directory to an EMPTY word or the claim window's
/// end, which on a full image (no EMPTY word) is the whole window.
const FILTER_CELLS_PER_GROUP: u64 = 64;
/// A cell that reached this count stays there (never counted down).
const FILTER_STUCK: u8 = u8::MAX;

/// Whether a directory word holds a claim (a key: neither EMPTY nor TOMBSTONE; the
/// directory holds no reservations).
#[inline]
fn is_claim(v: u64) -> bool {
    v >> 32 != 0 && v != TOMBSTONE
}

/// The claim filter's cells for an image of `groups` groups (a power of two).
fn filter_cells(groups: u64) -> u64 {
    (groups * FILTER_CELLS_PER_GROUP).next_power_of_two().max(64)
}

/// What the shared region of an image of `groups` groups keeps of this state
/// (`share::TableLayout`): 80 bytes a group.
pub fn table_layout(groups: u64) -> TableLayout {
    TableLayout { groups: groups as usize, filter_cells: filter_cells(groups) as usize }
}

/// A group claimed by an unfinished request and the offsets in it not yet handed out.
struct Pending {
    group: u64,
    left: [u64; 8],
}

pub struct Groups<D: PmDevice> {
    /// The group directory.
    pub(super) dir: HashTable<D>,
    /// Keys and reservations per group (counted at mount).
    counts: Cells<AtomicU32>,
    /// Directory words holding a claim (0: lookups skip the directory): the one word.
    claimed: Cells<AtomicU64>,
    /// Claims of requests in progress, by inode.
    pending: Mutex<HashMap<u32, Vec<Pending>>>,
    /// Entries in `pending`: a request without claims reads this (a plain load) and
    /// skips the mutex, whose locked instruction would wait for the write-backs the
    /// request has just issued (6.7% of the samples of a profile of 4 KiB appends on a
    /// regions image).
    pending_n: AtomicU64,
    /// The regions placement's open groups (None: the grouped placement's small keys
    /// hash over the whole table).
    pub regions: Option<Regions>,
    /// Directory words a claim examines (see [`MAX_CLAIM_PROBES`]).
    window: u64,
    /// A counting filter of the claimed chunks (DRAM; counted up at each claim, down when
    /// a claim is dropped, rebuilt from the directory at mount and repair): a count of
    /// the claims whose (inode, chunk) hashes to each cell, [`FILTER_CELLS_PER_GROUP`] cells
    /// per group. A lookup whose cell is zero skips the directory; the others probe it.
    /// Without it, every block of a file with claims outside them (a large file's first
    /// chunk, its tail) missed in the directory first, and a miss walks it to an EMPTY
    /// word or the claim window's end: on a full image, where claims and open groups take
    /// every word, all 1,024 words. It counts (a set of bits, as it was, kept the chunks of
    /// every claim dropped since the mount: on an aged image 90% full, 4 to 18 of each 31
    /// cold lookups walked the whole window for nothing, most of their time).
    claim_filter: Cells<AtomicU8>,
    /// log2 of the filter's cells.
    filter_bits: u32,
}

impl<D: PmDevice> Groups<D> {
    /// `regions`: the regions placement's target load (None: the grouped placement).
    pub fn new(dev: Arc<D>, geo: &Geometry, seed: u64, regions: Option<f64>) -> Groups<D> {
        let dir = HashTable::region(dev, geo.group_dir_off().0, geo.groups, seed ^ 0x6A09_E667_F3BC_C909);
        Groups::with_dir(dir, geo.groups, regions.map(|load| (seed, load)))
    }

    /// The state of `groups` groups whose directory is `dir` (`regions`: the regions
    /// placement's seed and target load), empty until counted.
    fn with_dir(dir: HashTable<D>, groups: u64, regions: Option<(u64, f64)>) -> Groups<D> {
        let filter_bits = filter_cells(groups).trailing_zeros();
        Groups {
            dir,
            counts: Cells::new((0..groups).map(|_| AtomicU32::new(0))),
            claimed: Cells::new(std::iter::once(AtomicU64::new(0))),
            pending: Mutex::new(HashMap::new()),
            pending_n: AtomicU64::new(0),
            regions: regions.map(|(seed, load)| Regions::new(groups, seed, load)),
            window: if regions.is_some() { REGIONS_CLAIM_PROBES } else { MAX_CLAIM_PROBES },
            claim_filter: Cells::new((0..1u64 << filter_bits).map(|_| AtomicU8::new(0))),
            filter_bits,
        }
    }

    /// Takes the shared region's cells for this state on a mount many processes share
    /// (`cells.rs`): publishing this mount's own (counted from the table) into them, or
    /// adopting theirs (a mount joining others, whose state they keep). False if they do
    /// not fit the region (whose layout [`table_layout`] gives).
    pub(crate) fn share(&self, region: &Arc<ImageRegion>, publish: bool) -> bool {
        self.claimed.share(RegionCells::of(region, |r| r.table_words().get(..1).unwrap_or(&[])), publish)
            && self.counts.share(RegionCells::of(region, |r| r.table_array(0)), publish)
            && self.claim_filter.share(RegionCells::of(region, ImageRegion::table_filter), publish)
            && self.regions.as_ref().is_none_or(|r| r.share(region, 1, publish))
    }

    /// The filter cell of chunk `chunk` of `ino`.
    #[inline]
    fn filter_at(&self, ino: Ino, chunk: u64) -> &AtomicU8 {
        let h = key(ino.0, chunk as u32).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.filter_bits);
        &self.claim_filter[h as usize]
    }

    /// Notes a claim of chunk `chunk` of `ino`, before its directory word is set (a
    /// lookup that can see one of its keys sees the count).
    fn mark_claim(&self, ino: Ino, chunk: u64) {
        let _ = self
            .filter_at(ino, chunk)
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| (c < FILTER_STUCK).then(|| c + 1));
    }

    /// Forgets a claim of chunk `chunk` of `ino` noted by [`Self::mark_claim`], once its
    /// directory word is gone or was never set (no key of it can be in its group).
    fn unmark_claim(&self, ino: Ino, chunk: u64) {
        let _ = self
            .filter_at(ino, chunk)
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| (c > 0 && c < FILTER_STUCK).then(|| c - 1));
    }

    /// For a prefetch before a lookup of key `k`: the slot `k` has in its chunk's home
    /// group, where a claim most likely put it ([`Self::group_for_key`] reads it first), with
    /// the claim filter's word and the chunk's directory home word fetched meanwhile; no
    /// read of any. None when no group is claimed.
    #[inline]
    pub fn likely_claimed_slot(&self, k: u64) -> Option<u64> {
        if self.claimed() == 0 {
            return None;
        }
        let (ino, lblk) = (Ino((k >> 32) as u32), k & 0xFFFF_FFFF);
        let chunk = lblk / GROUP_SLOTS;
        crate::pm::cpu::prefetch(self.filter_at(ino, chunk) as *const AtomicU8 as *const u8);
        let home = self.dir.home(key(ino.0, chunk as u32));
        self.dir.dev.prefetch(self.dir.slot_off(home)); // read when the claim is not there
        Some(home * GROUP_SLOTS + lblk % GROUP_SLOTS)
    }

    /// Whether chunk `chunk` of `ino` may be claimed (false: it certainly is not).
    #[inline]
    fn may_be_claimed(&self, ino: Ino, chunk: u64) -> bool {
        self.filter_at(ino, chunk).load(Ordering::Relaxed) != 0
    }

    /// The claim filter's memory, for benchmarks that evict the mapping's state from the
    /// CPU caches before a cold lookup.
    pub fn filter_cells(&self) -> &[AtomicU8] {
        &self.claim_filter
    }

    /// Reads the regions placement's list of open groups from the directory.
    pub(super) fn load_regions(&self) -> crate::Result<()> {
        match &self.regions {
            Some(r) => r.load((0..self.dir.nslots()).map(|g| (g, self.dir.load(g)))),
            None => Ok(()),
        }
    }

    /// Keys and reservations in group `g`.
    pub fn keys_in(&self, g: u64) -> u32 {
        self.counts.get(g as usize).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Whether group `g` can be claimed or opened: no key or reservation, directory word
    /// EMPTY or TOMBSTONE.
    pub fn free_group(&self, g: u64) -> bool {
        self.keys_in(g) == 0 && super::regions::word_free(self.dir.load(g))
    }

    /// Free groups (a scan of the counts and the directory).
    pub fn free_groups(&self) -> u64 {
        (0..self.dir.nslots()).filter(|&g| self.free_group(g)).count() as u64
    }

    /// Regions placement: opens `want` free groups as the newest buckets (fewer if fewer
    /// are free), their directory words set, flushed and fenced
    /// before any key can be placed there. Returns how many, 0 when no group is free. The
    /// caller holds `open_lock` and has finished the previous opening's moves.
    pub fn open_groups(&self, want: u64) -> u64 {
        let Some(r) = &self.regions else { return 0 };
        let n = r.len();
        let mut got = Vec::new();
        let _dg = self.dir.purge_lock.read();
        for k in 0..want.max(1) {
            let i = n + got.len() as u64;
            let Some(g) = r.pick_free(self.dir.nslots(), n + k, |g| self.free_group(g)) else { break };
            let v = self.dir.load(g);
            if self.dir.dev.cas_u64(self.dir.slot_off(g), v, open_word(i, true)).is_ok() {
                self.dir.dev.flush(self.dir.slot_off(g), 8);
                got.push(g);
            }
        }
        if got.is_empty() {
            return 0;
        }
        self.dir.dev.fence();
        self.dir.used.fetch_add(got.len() as u64, Ordering::Relaxed);
        r.publish(&got);
        got.len() as u64
    }

    /// Regions placement: opens the first group if none is (it has no key to move).
    pub fn open_first(&self) {
        let Some(r) = &self.regions else { return };
        let _one = r.open_lock.lock();
        if r.is_empty() && self.open_groups(1) > 0 {
            self.finish_opening();
        }
    }

    /// Regions placement: the newest groups' moves are done; their words lose the mark.
    pub fn finish_opening(&self) {
        let Some(r) = &self.regions else { return };
        let (from, n) = (r.from(), r.len());
        if from == n {
            return;
        }
        for i in from..n {
            let g = r.group(i);
            self.dir.dev.store_u64(self.dir.slot_off(g), open_word(i, false));
            self.dir.dev.flush(self.dir.slot_off(g), 8);
        }
        self.dir.dev.fence();
        r.opened();
    }

    pub fn count(&self) -> u64 {
        self.dir.nslots()
    }

    /// Claimed groups.
    #[inline]
    pub fn claimed(&self) -> u64 {
        self.claimed[0].load(Ordering::Relaxed)
    }

    fn group_of(&self, slot: u64) -> Option<usize> {
        let g = slot / GROUP_SLOTS;
        (g < self.dir.nslots()).then_some(g as usize)
    }

    /// A slot became a key or a reservation.
    pub(super) fn count_add(&self, slot: u64) {
        if let Some(g) = self.group_of(slot) {
            self.counts[g].fetch_add(1, Ordering::Relaxed);
            if let Some(r) = &self.regions {
                r.count_in(g as u64);
            }
        }
    }

    /// A slot was freed.
    pub(super) fn count_sub(&self, slot: u64) {
        if let Some(g) = self.group_of(slot) {
            self.counts[g].fetch_sub(1, Ordering::Relaxed);
            if let Some(r) = &self.regions {
                r.count_out(g as u64);
            }
        }
    }

    /// Sets every group's count from a scan of the table (mount, repair).
    pub(super) fn recount(&self, t: &HashTable<D>) {
        let mut claimed = 0;
        for c in self.claim_filter.iter() {
            c.store(0, Ordering::Relaxed);
        }
        // Each group's slots with one device read (the state is counted with nothing changing
        // the table: a first participant's mount, a takeover under the image lock, a repair);
        // a load of each slot, with its count in the device's statistics, made this count
        // most of a short-lived process's start on a regions image.
        let mut slots = vec![0u64; GROUP_SLOTS as usize];
        for (g, c) in self.counts.iter().enumerate() {
            t.read_slots(g as u64 * GROUP_SLOTS, &mut slots);
            let n = slots.iter().filter(|&&v| v != EMPTY && v != TOMBSTONE).count();
            c.store(n as u32, Ordering::Relaxed);
            let v = self.dir.load(g as u64);
            if is_claim(v) {
                claimed += 1;
                self.mark_claim(Ino((v >> 32) as u32), v & 0xFFFF_FFFF);
            }
        }
        self.claimed[0].store(claimed, Ordering::Relaxed);
        match &self.regions {
            Some(r) => {
                let n = r.len();
                r.clear_spills();
                for j in 0..n {
                    t.read_slots(r.group(j) * GROUP_SLOTS, &mut slots);
                    for &v in &slots {
                        if let super::Entry::Key { .. } = super::classify(v, t.nslots()) {
                            if let Some(top) = r.spilled_from(v, j) {
                                r.note_spill(top, j);
                            }
                        }
                    }
                }
                r.set_used((0..n).map(|i| u64::from(self.counts[r.group(i) as usize].load(Ordering::Relaxed))).sum());
                self.dir.set_used(claimed + n);
            }
            None => self.dir.set_used(claimed),
        }
    }

    /// Compares this state with a count from the directory and the table as they are now
    /// (tests; nothing may change the table meanwhile): the keys of each group, the
    /// claims, the claim filter, the open groups and the keys in them must agree exactly,
    /// each group's spills be at least those counted (a reservation freed before it became
    /// a key stays counted: `regions.rs`). The first disagreement found.
    pub fn verify(&self, t: &HashTable<D>) -> Result<(), String> {
        let groups = self.dir.nslots();
        let dir = HashTable::region(self.dir.dev.clone(), self.dir.off, groups, self.dir.seed);
        let fresh = Groups::with_dir(dir, groups, self.regions.as_ref().map(|r| (r.seed(), r.target())));
        fresh.load_regions().map_err(|e| e.to_string())?;
        fresh.recount(t);
        for g in 0..groups as usize {
            let (have, want) = (self.counts[g].load(Ordering::Relaxed), fresh.counts[g].load(Ordering::Relaxed));
            if have != want {
                return Err(format!("group {g}: {have} keys and reservations counted, {want} in the table"));
            }
        }
        if self.claimed() != fresh.claimed() {
            return Err(format!("{} claims counted, {} in the directory", self.claimed(), fresh.claimed()));
        }
        for (i, (have, want)) in self.claim_filter.iter().zip(fresh.claim_filter.iter()).enumerate() {
            let (have, want) = (have.load(Ordering::Relaxed), want.load(Ordering::Relaxed));
            if have != want {
                return Err(format!("claim filter cell {i}: {have}, the directory's claims give {want}"));
            }
        }
        match (&self.regions, &fresh.regions) {
            (Some(have), Some(want)) => have.verify(want),
            _ => Ok(()),
        }
    }

    /// The group claimed for chunk `chunk` of `ino`.
    #[inline]
    pub fn group_for(&self, ino: Ino, chunk: u64) -> Option<u64> {
        if self.claimed() == 0 || !self.may_be_claimed(ino, chunk) {
            return None;
        }
        let dk = key(ino.0, chunk as u32);
        let mut i = self.dir.home(dk);
        for _ in 0..self.dir.nslots().min(self.window) {
            match self.dir.load(i) {
                v if v == dk => return Some(i),
                EMPTY => return None,
                _ => i = self.dir.next(i),
            }
        }
        None
    }

    /// The slot of `k` if it lies in its chunk's group.
    #[inline]
    pub fn find(&self, t: &HashTable<D>, k: u64) -> Option<u64> {
        let g = self.group_for_key(t, k)?;
        let s = g * GROUP_SLOTS + (k & 0xFFFF_FFFF) % GROUP_SLOTS;
        (t.load(s) == k).then_some(s)
    }

    /// The group that may hold key `k` of a claimed chunk. A claim takes the group at its
    /// chunk's directory home when that one is free (on a fresh image, most do), so the
    /// slot `k` would have there is read first: holding `k`, it answers with one read
    /// instead of the directory word's and the slot's. Otherwise the directory. Callers
    /// check that the slot they use holds their key (a key of another chunk's group, or a
    /// small key, may sit at that slot of the home group).
    #[inline]
    pub fn group_for_key(&self, t: &HashTable<D>, k: u64) -> Option<u64> {
        let (ino, lblk) = (Ino((k >> 32) as u32), k & 0xFFFF_FFFF);
        let chunk = lblk / GROUP_SLOTS;
        if self.claimed() == 0 || !self.may_be_claimed(ino, chunk) {
            return None;
        }
        let home = self.dir.home(key(ino.0, chunk as u32));
        if t.load(home * GROUP_SLOTS + lblk % GROUP_SLOTS) == k {
            return Some(home);
        }
        self.group_for(ino, chunk)
    }

    /// Whether the key (ino, lblk) at `slot` is placed by its group (needs no probe path).
    /// One read: the directory word at the slot's group (the word's index is the group).
    #[inline]
    pub(super) fn holds(&self, ino: Ino, lblk: u32, slot: u64) -> bool {
        let (lblk, g) = (lblk as u64, slot / GROUP_SLOTS);
        slot % GROUP_SLOTS == lblk % GROUP_SLOTS
            && g < self.dir.nslots()
            && self.dir.load(g) == key(ino.0, (lblk / GROUP_SLOTS) as u32)
    }

    /// A slot for block `lblk` of `ino` in its chunk's claimed group: one this request
    /// reserved, or a free one there. None if the chunk has no group or the slot is taken.
    pub fn take(&self, t: &HashTable<D>, ino: Ino, lblk: Lblk) -> Option<u64> {
        let g = self.group_for(ino, lblk.0 / GROUP_SLOTS)?;
        let off = lblk.0 % GROUP_SLOTS;
        let s = g * GROUP_SLOTS + off;
        if self.pending_n.load(Ordering::Relaxed) > 0 {
            let mut pending = self.pending.lock();
            if let Some(p) = pending.get_mut(&ino.0).and_then(|v| v.iter_mut().find(|p| p.group == g)) {
                let bit = 1u64 << (off % 64);
                if p.left[(off / 64) as usize] & bit != 0 {
                    p.left[(off / 64) as usize] &= !bit;
                    return Some(s);
                }
            }
        }
        let _guard = t.purge_lock.read();
        let v = t.load(s);
        if (v == EMPTY || v == TOMBSTONE) && t.dev.cas_u64(t.slot_off(s), v, RESERVED_TAG | s).is_ok() {
            t.used.fetch_add(1, Ordering::Relaxed);
            self.count_add(s);
            return Some(s);
        }
        None
    }

    /// Claims a free group for chunk `chunk` of `ino` (which has none): reserves all its
    /// slots for the request (not with the regions placement, where only open groups take
    /// small keys), then writes and flushes the directory word. Later blocks of the chunk
    /// come from [`take`](Self::take); what the request leaves unused goes back at
    /// [`end_request`](Self::end_request), and a claim it did not use is dropped there.
    /// None when no free group is near the chunk's directory home.
    pub fn claim(&self, t: &HashTable<D>, ino: Ino, chunk: u64) -> Option<u64> {
        let dk = key(ino.0, u32::try_from(chunk).ok()?);
        let mut marked = Vec::new();
        let mut rolled = Vec::new();
        let got = {
            let _tg = t.purge_lock.read();
            let _dg = self.dir.purge_lock.read();
            let mut gi = self.dir.home(dk);
            let mut got = None;
            for _ in 0..self.dir.nslots().min(self.window) {
                let v = self.dir.load(gi);
                if v == EMPTY || v == TOMBSTONE {
                    // The regions placement reserves nothing: no small key enters a group
                    // that is not open, so the directory word alone keeps the group.
                    if self.counts[gi as usize].load(Ordering::Relaxed) == 0
                        && (self.regions.is_some() || self.reserve_group(t, gi, &mut rolled))
                    {
                        self.mark_claim(ino, chunk);
                        if self.dir.dev.cas_u64(self.dir.slot_off(gi), v, dk).is_ok() {
                            self.dir.dev.flush(self.dir.slot_off(gi), 8);
                            self.dir.used.fetch_add(1, Ordering::Relaxed);
                            self.claimed[0].fetch_add(1, Ordering::Relaxed);
                            got = Some(gi);
                            break;
                        }
                        self.unmark_claim(ino, chunk);
                        if self.regions.is_none() {
                            self.unreserve_group(t, gi, &mut rolled);
                        }
                    }
                    // The chunk's word will lie past this one: keep the directory's
                    // probe paths unbroken (purged below if the claim fails).
                    if self.dir.load(gi) == EMPTY
                        && self.dir.dev.cas_u64(self.dir.slot_off(gi), EMPTY, TOMBSTONE).is_ok()
                    {
                        self.dir.dev.flush(self.dir.slot_off(gi), 8);
                        marked.push(gi);
                    }
                }
                gi = self.dir.next(gi);
            }
            got
        };
        if !rolled.is_empty() {
            t.dev.fence();
            t.purge(&rolled);
        }
        match got {
            Some(g) => {
                let left = if self.regions.is_some() { [0; 8] } else { [u64::MAX; 8] };
                self.add_pending(ino, Pending { group: g, left });
                Some(g)
            }
            None => {
                self.dir.dev.fence();
                let freed: Vec<Freed> = marked.iter().map(|&s| Freed::at(s, s)).collect();
                self.dir.purge(&freed);
                None
            }
        }
    }

    /// Groups an evacuating claim of `ino`'s chunk `chunk` may take, fewest keys first:
    /// unclaimed groups near the chunk's directory home holding at most `max_keys` keys.
    pub fn candidates(&self, ino: Ino, chunk: u64, max_keys: u32) -> Vec<u64> {
        let Ok(c32) = u32::try_from(chunk) else { return Vec::new() };
        let dk = key(ino.0, c32);
        let mut gi = self.dir.home(dk);
        let mut out = Vec::new();
        for _ in 0..self.dir.nslots().min(self.window) {
            let v = self.dir.load(gi);
            let n = self.counts[gi as usize].load(Ordering::Relaxed);
            if (v == EMPTY || v == TOMBSTONE) && n <= max_keys {
                out.push((n, gi));
            }
            gi = self.dir.next(gi);
        }
        out.sort_unstable();
        out.into_iter().map(|(_, g)| g).collect()
    }

    /// Reserves the free slots of unclaimed group `g` for an evacuating claim and returns
    /// the slots holding keys (to be moved out). None, with nothing reserved, if the
    /// group is claimed or holds another write's reservation.
    pub fn reserve_free_slots(&self, t: &HashTable<D>, g: u64, own: Ino) -> Option<Vec<u64>> {
        let _tg = t.purge_lock.read();
        if !matches!(self.dir.load(g), EMPTY | TOMBSTONE) {
            return None;
        }
        let base = g * GROUP_SLOTS;
        // A group with a reservation or a block of the claiming file is refused before
        // anything is taken (giving slots back costs a purge of each).
        if (base..base + GROUP_SLOTS).any(|s| {
            let v = t.load(s);
            v != TOMBSTONE && (v & RESERVED_TAG == RESERVED_TAG || (v >> 32) as u32 == own.0)
        }) {
            return None;
        }
        let mut keys = Vec::new();
        let mut taken = Vec::new();
        for s in base..base + GROUP_SLOTS {
            let v = t.load(s);
            let ok = match v {
                EMPTY | TOMBSTONE => t.dev.cas_u64(t.slot_off(s), v, RESERVED_TAG | s).is_ok(),
                _ if v & RESERVED_TAG == RESERVED_TAG => false,
                _ => {
                    keys.push(s);
                    true
                }
            };
            if !ok {
                for &r in &taken {
                    t.dev.store_u64(t.slot_off(r), TOMBSTONE);
                    t.dev.flush(t.slot_off(r), 8);
                }
                drop(_tg);
                self.purge_taken(t, &taken);
                return None;
            }
            if matches!(v, EMPTY | TOMBSTONE) {
                taken.push(s);
            }
        }
        t.used.fetch_add(taken.len() as u64, Ordering::Relaxed);
        self.counts[g as usize].fetch_add(taken.len() as u32, Ordering::Relaxed);
        Some(keys)
    }

    fn purge_taken(&self, t: &HashTable<D>, taken: &[u64]) {
        if !taken.is_empty() {
            t.dev.fence();
            let freed: Vec<Freed> = taken.iter().map(|&s| Freed::at(s, s)).collect();
            t.purge(&freed);
        }
    }

    /// Gives up an evacuating claim: every slot of `g` this claim reserved (those whose
    /// word is `RESERVED | slot`; moved keys' old slots included) is freed.
    pub fn abandon(&self, t: &HashTable<D>, g: u64) {
        let base = g * GROUP_SLOTS;
        let freed: Vec<Freed> = (base..base + GROUP_SLOTS)
            .filter(|&s| t.load(s) == RESERVED_TAG | s)
            .map(|s| t.release(crate::layout::Pblk(s)))
            .collect();
        t.dev.fence();
        t.purge(&freed);
    }

    /// Completes an evacuating claim once every slot of `g` holds this claim's
    /// reservation: records the claim (as [`claim`](Self::claim) does). False, with the
    /// group abandoned, if some slot does not.
    pub fn finish_claim(&self, t: &HashTable<D>, ino: Ino, chunk: u64, g: u64) -> bool {
        let base = g * GROUP_SLOTS;
        let dk = key(ino.0, chunk as u32);
        let recorded = {
            let _dg = self.dir.purge_lock.read();
            let v = self.dir.load(g);
            let all_ours = (base..base + GROUP_SLOTS).all(|s| t.load(s) == RESERVED_TAG | s);
            all_ours && matches!(v, EMPTY | TOMBSTONE) && {
                // Every EMPTY word from the chunk's directory home up to g becomes a
                // tombstone first (the directory's probe paths), then g's word is set.
                let mut i = self.dir.home(dk);
                while i != g {
                    if self.dir.dev.cas_u64(self.dir.slot_off(i), EMPTY, TOMBSTONE).is_ok() {
                        self.dir.dev.flush(self.dir.slot_off(i), 8);
                    }
                    i = self.dir.next(i);
                }
                self.dir.dev.cas_u64(self.dir.slot_off(g), v, dk).is_ok()
            }
        };
        if !recorded {
            self.abandon(t, g);
            return false;
        }
        self.mark_claim(ino, chunk);
        self.dir.dev.flush(self.dir.slot_off(g), 8);
        self.dir.used.fetch_add(1, Ordering::Relaxed);
        self.claimed[0].fetch_add(1, Ordering::Relaxed);
        self.add_pending(ino, Pending { group: g, left: [u64::MAX; 8] });
        true
    }

    /// Reserves every slot of group `g` (all free); on a lost race gives back what it took
    /// (tombstones, listed in `rolled` for purging).
    fn reserve_group(&self, t: &HashTable<D>, g: u64, rolled: &mut Vec<Freed>) -> bool {
        let base = g * GROUP_SLOTS;
        for s in base..base + GROUP_SLOTS {
            let v = t.load(s);
            if !((v == EMPTY || v == TOMBSTONE) && t.dev.cas_u64(t.slot_off(s), v, RESERVED_TAG | s).is_ok()) {
                for r in base..s {
                    t.dev.store_u64(t.slot_off(r), TOMBSTONE);
                    t.dev.flush(t.slot_off(r), 8);
                    rolled.push(Freed::at(r, r));
                }
                return false;
            }
        }
        t.used.fetch_add(GROUP_SLOTS, Ordering::Relaxed);
        self.counts[g as usize].fetch_add(GROUP_SLOTS as u32, Ordering::Relaxed);
        true
    }

    /// Gives back a group reserved by [`reserve_group`](Self::reserve_group).
    fn unreserve_group(&self, t: &HashTable<D>, g: u64, rolled: &mut Vec<Freed>) {
        let base = g * GROUP_SLOTS;
        for s in base..base + GROUP_SLOTS {
            t.dev.store_u64(t.slot_off(s), TOMBSTONE);
            t.dev.flush(t.slot_off(s), 8);
            rolled.push(Freed::at(s, s));
        }
        t.used.fetch_sub(GROUP_SLOTS, Ordering::Relaxed);
        self.counts[g as usize].fetch_sub(GROUP_SLOTS as u32, Ordering::Relaxed);
    }

    fn add_pending(&self, ino: Ino, p: Pending) {
        self.pending.lock().entry(ino.0).or_default().push(p);
        self.pending_n.fetch_add(1, Ordering::Relaxed);
    }

    /// The end of a request of `ino`: the reserved slots it did not use are freed (and
    /// purged), and a claim none of whose slots was used is dropped.
    pub fn end_request(&self, t: &HashTable<D>, ino: Ino) {
        if self.pending_n.load(Ordering::Relaxed) == 0 {
            return; // (a request's own claims are counted by its own thread)
        }
        let Some(list) = self.pending.lock().remove(&ino.0) else { return };
        self.pending_n.fetch_sub(list.len() as u64, Ordering::Relaxed);
        let mut freed = Vec::new();
        for p in &list {
            for off in 0..GROUP_SLOTS {
                if p.left[(off / 64) as usize] & (1 << (off % 64)) != 0 {
                    freed.push(t.release(crate::layout::Pblk(p.group * GROUP_SLOTS + off)));
                }
            }
        }
        t.dev.fence();
        let claims: Vec<Freed> = list.iter().map(|p| Freed::at(p.group * GROUP_SLOTS, 0)).collect();
        self.drop_empty(t, &claims);
        t.purge(&freed);
    }

    /// After freed slots' tombstones are durable: clears the directory word of every
    /// group among them that no longer holds a key or reservation.
    pub(super) fn drop_empty(&self, t: &HashTable<D>, freed: &[Freed]) {
        let mut groups: Vec<usize> = freed.iter().filter_map(|f| self.group_of(f.slot)).collect();
        groups.sort_unstable();
        groups.dedup();
        let mut dropped = Vec::new();
        for g in groups {
            let v = self.dir.load(g as u64);
            if self.counts[g].load(Ordering::Relaxed) == 0 && is_claim(v) {
                let base = g as u64 * GROUP_SLOTS;
                if (base..base + GROUP_SLOTS).all(|s| matches!(t.load(s), EMPTY | TOMBSTONE)) {
                    dropped.push(self.dir.release(crate::layout::Pblk(g as u64)));
                    self.claimed[0].fetch_sub(1, Ordering::Relaxed);
                    self.unmark_claim(Ino((v >> 32) as u32), v & 0xFFFF_FFFF);
                }
            }
        }
        if !dropped.is_empty() {
            self.dir.dev.fence();
            self.dir.purge(&dropped);
        }
    }

    /// Recovery: drops every claim whose group holds no key of its chunk (a claim whose
    /// write never committed), then restores the directory's probe paths. Returns the
    /// words changed.
    pub(super) fn repair(&self, t: &HashTable<D>) -> u64 {
        let mut changed = 0;
        for g in 0..self.dir.nslots() {
            let v = self.dir.load(g);
            if !is_claim(v) {
                continue;
            }
            let (ino, chunk) = ((v >> 32) as u32, v & 0xFFFF_FFFF);
            let base = g * GROUP_SLOTS;
            let used = (0..GROUP_SLOTS).any(|i| t.load(base + i) == key(ino, (chunk * GROUP_SLOTS + i) as u32));
            if !used {
                self.dir.dev.store_u64(self.dir.slot_off(g), TOMBSTONE);
                self.dir.dev.flush(self.dir.slot_off(g), 8);
                changed += 1;
            }
        }
        self.dir.dev.fence();
        let changed = changed + self.dir.repair_and_purge_all();
        self.recount(t);
        changed
    }
}
