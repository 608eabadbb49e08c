//! Jump regions (ours; no paper has it; `--placement regions`): the grouped placement's
//! whole 2 MiB chunks in whole groups, and every other block ("small keys": small files,
//! tails, appends, directories) in a *region* of whole groups that grows a few groups at a
//! time, so that free space stays in whole groups on an aged, full image.
//!
//! The region is an ordered list of *open* groups. A small key's bucket is its jump
//! consistent hash (Lamping and Veach, "A Fast, Minimal Memory, Consistent Hash
//! Algorithm", 2014) over the list's length `n`, and its slot in the bucket's group its
//! own hash, probing linearly and cyclically inside the group: each open group is a
//! 512-slot linear-probing table of its own, with the table's invariant and purging per
//! group. A lookup reads one group.
//!
//! When the small keys pass the target load of the open groups' slots, free groups are
//! opened ([`Regions::batch`]): jump hashing moves to the new buckets exactly the keys
//! whose bucket becomes one of them (about their share, taken evenly from every open
//! group), and no other key. The file system moves them (`fs/hashfs/regions.rs`: copy, flush, one
//! transaction per block).
//!
//! The list is persistent in the group directory: an open group's directory word is
//! `OPEN_BIT | index + 1` (no key has its upper half zero), with [`OPENING_BIT`] while
//! moves into it are not all done. While some are not (since the count was `from`), a
//! lookup tries every bucket the key had since then, newest first ([`Regions::tops`]), so
//! a crash or a memory-mapped file in the middle of the moves loses nothing.
//!
//! A group can fill up (jump hashing spreads keys binomially, and a file whose keys wait
//! to move keeps them): a key whose group has no free slot goes to the next higher
//! bucket's group, up its *chain*, and every group it passed is kept without EMPTY slots
//! while it is there ([`Regions::keeps_full`]), since a lookup goes on up a chain only past
//! a group without one. Opened groups are appended, so they extend chains; a key whose
//! chain is full up to the newest group makes the file system open more.
//!
//! The design study, with its numbers, is `bench/winefs/hashfs_jump_regions_sim.py` and
//! docs/mappings.md.

#![forbid(unsafe_code)]

use super::cells::Cells;
use super::{EMPTY, GROUP_SLOTS, TOMBSTONE};
use crate::share::{ImageRegion, RegionCells};
use crate::{Error, Result};
use parking_lot::{Mutex, RwLock};
use smallvec::SmallVec;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// The default small keys' load of the open groups above which groups are opened. On a
/// 1 GiB image aged to 75% full (`bench/results/winefs/placement-aging.json`): 0.85 left 89 whole
/// groups free but small keys probed 8.4 slots per hit and 195 per miss (tombstones fill
/// what keys leave); 0.80 left 79 and probed 6.3 and 90; 0.75 left 68 and probed 4.9 and
/// 41 (the paper's placement: no group free, 5.3 and 53). 0.80 keeps enough whole groups
/// for a file of an eighth of the image on an image aged to 75%, with a margin. An image
/// may set its own (`FormatOptions::region_load`).
pub const TARGET_LOAD: f64 = 0.80;

/// Requests that pass without trying again after an opening could not finish (a busy
/// file) or found no free group. A count, not a time, so that runs replay exactly.
const RETRY_EVERY: u64 = 64;
const RETRY_MAX: u64 = 1 << 16;

/// A directory word with its upper half zero and this bit set is an open group's.
const OPEN_BIT: u64 = 1 << 31;
/// Set in an open group's word while moves into it are not all done.
pub const OPENING_BIT: u64 = 1 << 30;
const INDEX_MASK: u64 = OPENING_BIT - 1;

/// The directory word of the open group at list index `i`.
pub fn open_word(i: u64, opening: bool) -> u64 {
    OPEN_BIT | (i + 1) | if opening { OPENING_BIT } else { 0 }
}

/// The list index of an open group's directory word, and whether its opening is in
/// progress; None for any other word.
pub fn parse_open_word(v: u64) -> Option<(u64, bool)> {
    (v >> 32 == 0 && v & OPEN_BIT != 0 && v & INDEX_MASK != 0).then(|| ((v & INDEX_MASK) - 1, v & OPENING_BIT != 0))
}

/// Lamping and Veach's jump consistent hash: the bucket of `key` among `n` (> 0).
pub fn jump(key: u64, n: u64) -> u64 {
    jump_candidates(key, n).last().unwrap_or(0)
}

/// Every bucket `key` takes as the count of buckets grows to `n`, ascending (the last is
/// its bucket among `n`): jump hashing's candidates.
fn jump_candidates(mut key: u64, n: u64) -> impl Iterator<Item = u64> {
    let mut j = 0i64;
    std::iter::from_fn(move || {
        if j >= n as i64 {
            return None;
        }
        let b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
        Some(b as u64)
    })
}

/// The key's hash for jump hashing (independent of its in-group slot's hash).
#[inline]
fn mix(key: u64, seed: u64) -> u64 {
    let mut x = key ^ seed ^ 0x9E37_79B9_7F4A_7C15;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Words of [`Regions::words`].
const N: usize = 0;
const FROM: usize = 1;
const NSPILLED: usize = 2;
const USED: usize = 3;
const NWORDS: usize = 4;

/// The region's state (rebuilt from the directory and the table at mount; in the image's
/// shared region on a mount many processes share: `cells.rs`).
pub struct Regions {
    /// `list[i]` is the group of bucket `i`, for `i < n`.
    list: Cells<AtomicU32>,
    /// The count of open groups (`n`); the count before the opening in progress (`from`,
    /// equal to `n` when none is: buckets from there on are new and their moves not all
    /// done); keys spilled; keys and reservations in open groups.
    words: Cells<AtomicU64>,
    /// Per group: its list index + 1 (0: not open).
    index: Cells<AtomicU32>,
    /// Per list index: keys whose chain passes through it to a higher one (spilled past
    /// its group when that was full), counted when the key is reserved, and counted out
    /// when it is freed (its chain's start found again from the key; a reservation freed
    /// unpublished stays counted until the next mount or takeover counts again, which only
    /// keeps its groups full longer). While any does, the group gets no EMPTY slot:
    /// lookups go on up a chain only past a group without one.
    spill: Cells<AtomicU32>,
    /// Groups no key spills past any more, whose tombstones the next purge clears.
    unblocked: Mutex<Vec<u64>>,
    seed: u64,
    /// Held (shared) by a small key's reservation while it picks its group, and
    /// (exclusive) by an opening while it publishes the new bucket.
    pub(super) layout: RwLock<()>,
    /// One opening, or one pass of its moves, at a time.
    pub open_lock: Mutex<()>,
    /// The small keys' load of the open groups above which groups are opened.
    target: f64,
    /// The last opening found no free group.
    no_free: AtomicBool,
    /// Requests left before the next try, and the last wait (see [`RETRY_EVERY`]).
    skip: AtomicU64,
    backoff: AtomicU64,
}

impl Regions {
    pub fn new(groups: u64, seed: u64, target: f64) -> Regions {
        Regions {
            target,
            list: Cells::new((0..groups).map(|_| AtomicU32::new(0))),
            words: Cells::new((0..NWORDS).map(|_| AtomicU64::new(0))),
            index: Cells::new((0..groups).map(|_| AtomicU32::new(0))),
            spill: Cells::new((0..groups).map(|_| AtomicU32::new(0))),
            unblocked: Mutex::new(Vec::new()),
            seed,
            layout: RwLock::new(()),
            open_lock: Mutex::new(()),
            no_free: AtomicBool::new(false),
            skip: AtomicU64::new(0),
            backoff: AtomicU64::new(0),
        }
    }

    /// Takes the region's cells for this state (`words_from`: where its words start among
    /// the region's table words), publishing its own into them or adopting theirs
    /// (`cells.rs`). False if they do not fit.
    pub(super) fn share(&self, region: &Arc<ImageRegion>, words_from: usize, publish: bool) -> bool {
        self.words.share(
            RegionCells::of(region, |r| r.table_words().get(words_from..words_from + NWORDS).unwrap_or(&[])),
            publish,
        ) && self.list.share(RegionCells::of(region, |r| r.table_array(1)), publish)
            && self.index.share(RegionCells::of(region, |r| r.table_array(2)), publish)
            && self.spill.share(RegionCells::of(region, |r| r.table_array(3)), publish)
    }

    pub(super) fn seed(&self) -> u64 {
        self.seed
    }
    pub(super) fn target(&self) -> f64 {
        self.target
    }

    /// Compares this state with `want`, counted from the directory and the table as they
    /// are (`Groups::verify`): the list of open groups and the keys in them exactly, the
    /// spills at least.
    pub(super) fn verify(&self, want: &Regions) -> std::result::Result<(), String> {
        let (n, from) = (self.len(), self.from());
        if (n, from) != (want.len(), want.from()) {
            return Err(format!(
                "{n} open groups from {from} counted, {} from {} in the directory",
                want.len(),
                want.from()
            ));
        }
        for i in 0..n {
            if self.group(i) != want.group(i) {
                return Err(format!("open group {i}: group {}, the directory says {}", self.group(i), want.group(i)));
            }
        }
        for (g, (have, w)) in self.index.iter().zip(want.index.iter()).enumerate() {
            if have.load(Ordering::Relaxed) != w.load(Ordering::Relaxed) {
                return Err(format!("group {g}'s place in the list: {have:?}, the directory says {w:?}"));
            }
        }
        if self.used() != want.used() {
            return Err(format!("{} keys in open groups counted, {} in the table", self.used(), want.used()));
        }
        for i in 0..n as usize {
            let (have, w) = (self.spill[i].load(Ordering::Relaxed), want.spill[i].load(Ordering::Relaxed));
            if have < w {
                return Err(format!("open group {i}: {have} keys counted spilled past it, {w} in the table"));
            }
        }
        Ok(())
    }

    /// Whether the last opening found no free group.
    pub fn no_free(&self) -> bool {
        self.no_free.load(Ordering::Relaxed)
    }
    pub fn set_no_free(&self, v: bool) {
        self.no_free.store(v, Ordering::Relaxed);
    }

    /// Whether a request may try to open or finish opening now.
    pub fn may_try(&self) -> bool {
        let s = self.skip.load(Ordering::Relaxed);
        if s > 0 {
            self.skip.store(s - 1, Ordering::Relaxed);
        }
        s == 0
    }

    /// A try finished what it had to do: the next request may try again.
    pub fn try_succeeded(&self) {
        self.backoff.store(0, Ordering::Relaxed);
        self.skip.store(0, Ordering::Relaxed);
    }

    /// A try left work undone: the next [`RETRY_EVERY`] requests pass, twice as many after
    /// each further failure (a file mapped for hours costs a scan of the region now and
    /// then, not at every write), up to [`RETRY_MAX`].
    pub fn try_failed(&self) {
        let wait = (self.backoff.load(Ordering::Relaxed) * 2).clamp(RETRY_EVERY, RETRY_MAX);
        self.backoff.store(wait, Ordering::Relaxed);
        self.skip.store(wait, Ordering::Relaxed);
    }

    /// Open groups.
    pub fn len(&self) -> u64 {
        self.words[N].load(Ordering::Acquire)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether the newest groups' moves are not all done.
    pub fn opening(&self) -> bool {
        self.from() < self.len()
    }
    /// The count of open groups before the opening in progress (`len` when none is).
    pub fn from(&self) -> u64 {
        self.words[FROM].load(Ordering::Acquire)
    }
    pub fn is_open(&self, g: u64) -> bool {
        self.index_of(g).is_some()
    }
    /// The list index of open group `g`.
    #[inline]
    pub fn index_of(&self, g: u64) -> Option<u64> {
        match self.index.get(g as usize).map(|i| i.load(Ordering::Acquire)) {
            Some(i) if i > 0 => Some(u64::from(i) - 1),
            _ => None,
        }
    }
    /// Whether slot `s` lies in an open group that keys spilled past (no EMPTY there).
    #[inline]
    pub fn keeps_full(&self, s: u64) -> bool {
        self.words[NSPILLED].load(Ordering::Relaxed) > 0
            && self.index_of(s / GROUP_SLOTS).is_some_and(|i| self.spill[i as usize].load(Ordering::Relaxed) > 0)
    }

    /// A key reserved at list index `at` past the start of its chain `top` (the groups
    /// `top .. at` were full).
    pub(super) fn note_spill(&self, top: u64, at: u64) {
        self.words[NSPILLED].fetch_add(1, Ordering::Relaxed);
        for k in top..at {
            self.spill[k as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Slot `slot`, which held key `v`, was freed: if `v` spilled past the start of its
    /// chain (found again from the key: [`Self::spilled_from`]), its chain no longer needs
    /// to stay full. (A reservation freed before it became a key stays counted: `spill`.)
    pub(super) fn freed(&self, slot: u64, v: u64) {
        if self.words[NSPILLED].load(Ordering::Relaxed) == 0 {
            return;
        }
        let Some(at) = self.index_of(slot / GROUP_SLOTS) else { return };
        let Some(top) = self.spilled_from(v, at) else { return };
        self.words[NSPILLED].fetch_sub(1, Ordering::Relaxed);
        for k in top..at {
            if self.spill[k as usize].fetch_sub(1, Ordering::Relaxed) == 1 {
                self.unblocked.lock().push(self.group(k));
            }
        }
    }

    /// The groups [`freed`](Self::freed) left with no key spilled past them.
    pub(super) fn take_unblocked(&self) -> Vec<u64> {
        if self.words[NSPILLED].load(Ordering::Relaxed) == 0 && self.unblocked.lock().is_empty() {
            return Vec::new();
        }
        std::mem::take(&mut *self.unblocked.lock())
    }

    /// Forgets every spill (before a rebuild from a scan of the table).
    pub(super) fn clear_spills(&self) {
        self.words[NSPILLED].store(0, Ordering::Relaxed);
        for c in self.spill.iter() {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// The group of bucket `i` (< len).
    #[inline]
    pub fn group(&self, i: u64) -> u64 {
        u64::from(self.list[i as usize].load(Ordering::Acquire))
    }
    /// Keys and reservations in open groups.
    pub fn used(&self) -> u64 {
        self.words[USED].load(Ordering::Relaxed)
    }
    /// A key or reservation went into group `g`: counted if the group is open.
    pub(super) fn count_in(&self, g: u64) {
        if self.is_open(g) {
            self.words[USED].fetch_add(1, Ordering::Relaxed);
        }
    }
    /// A key or reservation left group `g`.
    pub(super) fn count_out(&self, g: u64) {
        if self.is_open(g) {
            self.words[USED].fetch_sub(1, Ordering::Relaxed);
        }
    }
    pub(super) fn set_used(&self, n: u64) {
        self.words[USED].store(n, Ordering::Relaxed);
    }

    /// The key's bucket among `n` open groups. The last one this thread computed is kept:
    /// a request computes a key's bucket two or three times (a read's prefetch, then its
    /// lookup; an append's prefetch of the next key, then that key's reservation), each
    /// time about ln n rounds with a division.
    #[inline]
    pub fn bucket(&self, key: u64, n: u64) -> u64 {
        thread_local! {
            /// (seed, key, count, bucket): a function of the first three alone.
            static LAST: Cell<(u64, u64, u64, u64)> = const { Cell::new((0, 0, 0, 0)) };
        }
        LAST.with(|last| {
            let (seed, k, c, b) = last.get();
            if (seed, k, c) == (self.seed, key, n) && n > 0 {
                return b;
            }
            let b = jump(mix(key, self.seed), n);
            last.set((self.seed, key, n, b));
            b
        })
    }

    /// The count of open groups and `key`'s bucket among them (the first of its
    /// [`tops`](Self::tops)), for a reservation made soon after. None when no group is open.
    #[inline]
    pub fn bucket_now(&self, key: u64) -> Option<(u64, u64)> {
        let n = self.len();
        (n > 0).then(|| (n, self.bucket(key, n)))
    }

    /// The key's home slot in group `g` (its in-group slot is its own hash).
    #[inline]
    pub fn home_in(&self, key: u64, g: u64) -> u64 {
        g * GROUP_SLOTS + crate::mapping::simd::home_slot(key, self.seed, GROUP_SLOTS)
    }

    /// The start of the chain key `v` at list index `at` spilled from, if it spilled (the
    /// start lies below `at`). Exactly the start its reservation counted
    /// ([`Self::note_spill`]): a reservation takes its key's first chain start (its bucket
    /// among the groups open then), which is the highest of the starts a lookup walks at
    /// or below `at` as long as the key is not moved (an opening that changes its bucket
    /// moves it before it ends).
    pub fn spilled_from(&self, v: u64, at: u64) -> Option<u64> {
        self.top_for(v, at).filter(|&t| t < at)
    }

    /// The start of the chain that reaches key `v` at list index `at`: `at` itself if it
    /// is one of the starts a lookup tries, else the highest of those below it (the key
    /// spilled up from there). None if no chain a lookup walks can reach it.
    pub fn top_for(&self, v: u64, at: u64) -> Option<u64> {
        self.tops(v).iter().copied().filter(|&t| t <= at).max()
    }

    /// The starts of the chains a lookup of `key` walks, highest first: its bucket, and
    /// while openings are in progress (since the count was `from`) every bucket it had
    /// since then, down to its bucket under `from`, where it lies until moved. A chain
    /// runs from its start up the list: a key goes to the next higher bucket's group only
    /// when its group is full (new groups extend chains, never cut into one). Empty when
    /// no group is open.
    #[inline]
    pub fn tops(&self, key: u64) -> SmallVec<[u64; 4]> {
        let (from, n) = (self.from(), self.len());
        let mut out = SmallVec::new();
        if n == 0 {
            return out;
        }
        if from == n {
            out.push(self.bucket(key, n));
            return out;
        }
        let h = mix(key, self.seed);
        // Jump hashing's candidates below n, ascending; those from the last one below
        // `from` (the bucket under `from`) on, every one when `from` is 0 (an opening
        // of the first group whose mark a crash or a timed-out wait left).
        let all: SmallVec<[u64; 16]> = jump_candidates(h, n).collect();
        let first = all.iter().rposition(|&c| c < from).unwrap_or(0);
        out.extend(all[first..].iter().rev().copied());
        out
    }

    /// How many groups an opening adds to `n` open ones: one in sixteen (at least one),
    /// so that the scan of the open groups for keys to move is paid once per many
    /// groups' worth of small keys.
    pub fn batch(n: u64) -> u64 {
        (n / 16).max(1)
    }

    /// Whether the region wants more groups before `incoming` more small keys.
    pub fn wants_open(&self, incoming: u64) -> bool {
        let n = self.len();
        n == 0 || (self.used() + incoming) as f64 > self.target * (n * GROUP_SLOTS) as f64
    }

    /// Groups to open so that `incoming` more small keys stay under the target load: at
    /// least [`batch`](Self::batch), more for a request larger than that.
    pub fn to_open(&self, incoming: u64) -> u64 {
        let n = self.len();
        let need = ((self.used() + incoming) as f64 / (self.target * GROUP_SLOTS as f64)).ceil() as u64;
        need.saturating_sub(n).max(Self::batch(n))
    }

    /// Rebuilds the list from the directory's words (mount, repair). Fails on a list
    /// with a gap or a duplicate index, or whose in-progress marks are not its end.
    pub fn load(&self, words: impl Iterator<Item = (u64, u64)>) -> Result<()> {
        let mut found: Vec<(u64, u64, bool)> =
            words.filter_map(|(g, v)| parse_open_word(v).map(|(i, o)| (i, g, o))).collect();
        found.sort_unstable();
        let from = found.iter().position(|f| f.2).unwrap_or(found.len());
        for (k, &(i, g, opening)) in found.iter().enumerate() {
            if i != k as u64 || opening != (k >= from) {
                return Err(Error::corrupt(format!(
                    "group directory: open group {g} has list index {i} (expected {k})"
                )));
            }
        }
        for o in self.index.iter() {
            o.store(0, Ordering::Relaxed);
        }
        for &(i, g, _) in &found {
            self.list[i as usize].store(g as u32, Ordering::Relaxed);
            self.index[g as usize].store(i as u32 + 1, Ordering::Relaxed);
        }
        self.words[FROM].store(from as u64, Ordering::Relaxed);
        self.words[N].store(found.len() as u64, Ordering::Release);
        Ok(())
    }

    /// Publishes groups `gs` (free: no key, reservation or claim; their directory words
    /// already set to [`open_word`]`(len + i, true)` and durable) as the newest buckets.
    pub(super) fn publish(&self, gs: &[u64]) {
        let _l = self.layout.write();
        let n = self.len();
        for (i, &g) in gs.iter().enumerate() {
            self.list[n as usize + i].store(g as u32, Ordering::Release);
            self.index[g as usize].store((n as usize + i) as u32 + 1, Ordering::Release);
        }
        self.words[N].store(n + gs.len() as u64, Ordering::Release);
    }

    /// The newest buckets' moves are done (their words already cleared of the mark).
    pub(super) fn opened(&self) {
        self.words[FROM].store(self.len(), Ordering::Release);
    }

    /// A group to open: free (no key or reservation, directory word EMPTY or TOMBSTONE),
    /// searched from a point that depends on the list's length so that open groups spread
    /// over the directory (a chunk's claim looks for a free group near its home).
    pub(super) fn pick_free(&self, groups: u64, nth: u64, free: impl Fn(u64) -> bool) -> Option<u64> {
        let start = mix(nth, self.seed ^ 0x5EED) % groups.max(1);
        (0..groups).map(|i| (start + i) % groups).find(|&g| free(g))
    }
}

/// Whether a directory word leaves its group claimable (neither a claim nor an open
/// group's).
pub fn word_free(v: u64) -> bool {
    v == EMPTY || v == TOMBSTONE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jump_moves_only_keys_to_the_new_bucket() {
        for key in 0..2000u64 {
            let k = mix(key, 7);
            let mut prev = jump(k, 1);
            assert_eq!(prev, 0);
            for n in 2..200 {
                let b = jump(k, n);
                assert!(b < n);
                assert!(b == prev || b == n - 1, "key {key}: {prev} -> {b} at {n}");
                prev = b;
            }
        }
    }

    #[test]
    fn jump_spreads_evenly() {
        let n = 50;
        let mut counts = vec![0u32; n as usize];
        for key in 0..100_000u64 {
            counts[jump(mix(key, 1), n) as usize] += 1;
        }
        let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*lo > 1700 && *hi < 2300, "{lo}..{hi}");
    }

    /// The bucket a thread keeps is its key's under the same seed and count only: two
    /// tables' buckets and counts interleaved get what jump hashing gives each.
    #[test]
    fn kept_buckets_are_each_tables_own() {
        let (a, b) = (Regions::new(64, 1, TARGET_LOAD), Regions::new(64, 2, TARGET_LOAD));
        for key in 0..2_000u64 {
            for n in [7u64, 7, 40] {
                for r in [&a, &b, &a] {
                    assert_eq!(r.bucket(key, n), jump(mix(key, r.seed), n), "key {key}, count {n}, seed {}", r.seed);
                }
            }
        }
    }

    #[test]
    fn open_words_round_trip_and_are_not_keys() {
        for i in [0u64, 1, 4095, INDEX_MASK - 1] {
            for o in [false, true] {
                let w = open_word(i, o);
                assert_eq!(w >> 32, 0);
                assert_eq!(parse_open_word(w), Some((i, o)));
            }
        }
        assert_eq!(parse_open_word(EMPTY), None);
        assert_eq!(parse_open_word(TOMBSTONE), None);
        assert_eq!(parse_open_word(super::super::key(1, 0)), None);
    }

    #[test]
    fn load_rejects_gaps_and_misplaced_marks() {
        let r = Regions::new(8, 1, TARGET_LOAD);
        assert!(r.load([(3, open_word(0, false)), (5, open_word(1, true))].into_iter()).is_ok());
        assert_eq!((r.len(), r.group(0), r.group(1), r.opening(), r.from()), (2, 3, 5, true, 1));
        assert!(r
            .load([(3, open_word(0, false)), (5, open_word(1, true)), (6, open_word(2, true))].into_iter())
            .is_ok());
        assert_eq!((r.len(), r.from()), (3, 1));
        assert!(r.load([(3, open_word(0, false)), (5, open_word(2, false))].into_iter()).is_err());
        assert!(r.load([(3, open_word(0, true)), (5, open_word(1, false))].into_iter()).is_err());
        assert!(r.load([(3, open_word(0, false)), (5, open_word(0, false))].into_iter()).is_err());
        assert!(r.load([(3, open_word(0, true)), (5, open_word(1, true))].into_iter()).is_ok());
        assert_eq!(r.from(), 0);
    }
}
