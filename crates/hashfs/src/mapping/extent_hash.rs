//! Extent Hashing (SPFS, FAST '23, §4.2, Algorithms 1 and 2): a hash table that indexes
//! extents rather than blocks. An extent of B clusters is stored at O(log B) positions
//! chosen from the binary representation of its cluster numbers (strides of growing powers
//! of two); a lookup of cluster c visits c, then c with its lowest set bit cleared, and so
//! on, until it meets a position that stores an extent covering c. The probabilistic fast
//! lookup first tries the position of the most common stride length.
//!
//! On PM: a linear-probing table of 32-byte entries. Word 0 is the tag (inode << 32 |
//! position) and doubles as the valid bit: an insert claims free slots with
//! compare-and-swap (BUSY), writes and flushes the other words, and sets the tags inside
//! the caller's undo-logged transaction; a rollback puts BUSY back and mount turns every
//! BUSY slot into a tombstone. Tombstones are all ones.

#![forbid(unsafe_code)]

use super::simd::home_slot;
use crate::journal::Tx;
use crate::pm::{DevOffset, PmDevice};
use crate::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub use crate::layout::mapping::extent_hash::ENTRY_BYTES;
use crate::layout::mapping::extent_hash::{tag, BUSY, EMPTY, TOMBSTONE};
use crate::layout::Ino;

/// An extent: `len` clusters from logical cluster `start`, at physical block `phys`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub start: u32,
    pub len: u32,
    pub phys: u64,
}

/// The positions at which Algorithm 1 stores an extent of `len` clusters from `start`.
pub fn insert_positions(start: u32, len: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let (mut c, mut left) = (start as u64, len as u64);
    while left > 0 {
        out.push(c as u32);
        if left == 1 {
            break;
        }
        let stride = if c % 2 == 1 {
            1
        } else if c != 0 {
            let tnz = c.trailing_zeros();
            prev_pow2(left.min(1 << tnz))
        } else {
            prev_pow2(left)
        };
        c += stride;
        left -= stride;
    }
    out
}

/// The positions of the extent an entry of tag `t` points into, and the entry's index
/// among them; `None` for an entry that cannot exist (inode 0, an empty or out-of-range
/// extent, a position outside it or not one of Algorithm 1's).
fn positions_of(t: u64, e: &Extent) -> Option<(Vec<u32>, usize)> {
    let (ino, pos) = ((t >> 32) as u32, t as u32);
    let end = e.start as u64 + e.len as u64;
    if ino == 0 || e.len == 0 || end > 1 << 32 || pos < e.start || pos as u64 >= end {
        return None;
    }
    let positions = insert_positions(e.start, e.len);
    let i = positions.iter().position(|&p| p == pos)?;
    Some((positions, i))
}

fn prev_pow2(x: u64) -> u64 {
    debug_assert!(x > 0);
    1 << (63 - x.leading_zeros())
}

/// log2 of the stride that follows the `i`-th stored position of extent `e` (the distance to
/// the next position, or to the extent's end), for the fast lookup's histogram.
fn stride_log(positions: &[u32], i: usize, e: &Extent) -> usize {
    let next = positions.get(i + 1).map(|&n| n as u64).unwrap_or(e.start as u64 + e.len as u64);
    let stride = next - positions[i] as u64;
    (63 - stride.leading_zeros()) as usize
}

/// The positions Algorithm 2 visits for cluster `c`, in order.
pub fn search_positions(c: u32) -> Vec<u32> {
    let mut out = vec![c];
    let mut pos = c;
    while pos != 0 {
        pos &= pos - 1; // clear the lowest set bit
        out.push(pos);
    }
    out
}

/// Counts for measuring the structure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LookupCost {
    /// Positions (buckets) visited.
    pub positions: u64,
    /// Table slots read.
    pub slots: u64,
}

pub struct ExtentHashTable<D: PmDevice> {
    dev: Arc<D>,
    off: DevOffset,
    nslots: u64,
    seed: u64,
    /// Pointers stored per stride length (index = log2 of the stride), for the fast lookup.
    stride_counts: [AtomicU64; 33],
    fast_lookup: AtomicBool,
}

/// How a lookup finds the extent that holds a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtentLookup {
    /// At every stride length in turn.
    Every,
    /// SPFS's probabilistic fast lookup: the stride lengths that hold the most pointers
    /// first.
    Fast,
}

impl<D: PmDevice> ExtentHashTable<D> {
    /// A table of `nslots` entries at `off` (the region must be zeroed at mkfs).
    pub fn new(dev: Arc<D>, off: DevOffset, nslots: u64, seed: u64, lookup: ExtentLookup) -> Self {
        assert!(nslots > 0 && nslots < (1 << 32));
        ExtentHashTable {
            dev,
            off,
            nslots,
            seed,
            stride_counts: std::array::from_fn(|_| AtomicU64::new(0)),
            fast_lookup: AtomicBool::new(lookup == ExtentLookup::Fast),
        }
    }

    /// Sets how lookups search (SPFS Fig. 7 measures both).
    pub fn set_lookup(&self, lookup: ExtentLookup) {
        self.fast_lookup.store(lookup == ExtentLookup::Fast, Ordering::Relaxed);
    }

    fn slot_off(&self, s: u64) -> DevOffset {
        self.off + s * ENTRY_BYTES
    }

    fn read_entry(&self, s: u64) -> (u64, Extent) {
        let o = self.slot_off(s);
        let t = self.dev.load_u64(o);
        let w1 = self.dev.load_u64(o + 8);
        let phys = self.dev.load_u64(o + 16);
        (t, Extent { start: w1 as u32, len: (w1 >> 32) as u32, phys })
    }

    /// Finds an entry at position `pos` of `ino` covering cluster `c`.
    fn probe(&self, ino: Ino, pos: u32, c: u32, cost: &mut LookupCost) -> Option<Extent> {
        let t = tag(ino.0, pos);
        let mut s = home_slot(t, self.seed, self.nslots);
        cost.positions += 1;
        for _ in 0..self.nslots {
            cost.slots += 1;
            let (et, e) = self.read_entry(s);
            if et == EMPTY {
                return None;
            }
            if et == t && e.start <= c && (c as u64) < e.start as u64 + e.len as u64 {
                return Some(e);
            }
            s = (s + 1) % self.nslots;
        }
        None
    }

    /// The extent of `ino` that holds cluster `c`, and what the search cost.
    pub fn lookup(&self, ino: Ino, c: u32) -> (Option<Extent>, LookupCost) {
        let mut cost = LookupCost::default();
        if self.fast_lookup.load(Ordering::Relaxed) {
            let (stride_log, n) = self
                .stride_counts
                .iter()
                .enumerate()
                .map(|(i, a)| (i, a.load(Ordering::Relaxed)))
                .max_by_key(|&(_, n)| n)
                .unwrap_or((0, 0));
            if n > 0 && stride_log > 0 {
                let stride = 1u64 << stride_log;
                let pos = (c as u64 - c as u64 % stride) as u32;
                if let Some(e) = self.probe(ino, pos, c, &mut cost) {
                    return (Some(e), cost);
                }
            }
        }
        for pos in search_positions(c) {
            if let Some(e) = self.probe(ino, pos, c, &mut cost) {
                return (Some(e), cost);
            }
        }
        (None, cost)
    }

    /// Stores `e` for `ino` (Algorithm 1): claims a slot per position, writes and flushes
    /// the entries, and adds their tags to `tx`; the extent becomes visible, all at once,
    /// when `tx` commits. Returns the pointers stored.
    pub fn insert(&self, tx: &mut Tx<'_, D>, ino: Ino, e: Extent) -> Result<usize> {
        if e.len == 0 || e.start as u64 + e.len as u64 > 1 << 32 {
            return Err(Error::Invalid("extent out of range"));
        }
        let positions = insert_positions(e.start, e.len);
        let mut claimed = Vec::with_capacity(positions.len());
        for &pos in &positions {
            match self.claim(tag(ino.0, pos)) {
                Ok(s) => claimed.push(s),
                Err(err) => {
                    for &s in &claimed {
                        self.dev.store_u64(self.slot_off(s), TOMBSTONE);
                    }
                    return Err(err);
                }
            }
        }
        for (i, (&pos, &s)) in positions.iter().zip(&claimed).enumerate() {
            let o = self.slot_off(s);
            self.dev.store_u64(o + 8, e.start as u64 | ((e.len as u64) << 32));
            self.dev.store_u64(o + 16, e.phys);
            self.dev.flush(o, ENTRY_BYTES);
            tx.write_u64(o, tag(ino.0, pos));
            self.stride_counts[stride_log(&positions, i, &e)].fetch_add(1, Ordering::Relaxed);
        }
        Ok(positions.len())
    }

    /// Frees the slots an insert claimed whose transaction did not commit (they hold BUSY
    /// or, after a rollback, BUSY again).
    pub fn abandon_claims(&self) {
        // Claims are few and rare to abandon; a scan keeps the insert path free of
        // bookkeeping.
        for s in 0..self.nslots {
            let o = self.slot_off(s);
            if self.dev.load_u64(o) == BUSY {
                let _ = self.dev.cas_u64(o, BUSY, TOMBSTONE);
            }
        }
    }

    /// Mount: turns claims of inserts that never committed into tombstones, rebuilds the
    /// stride histogram, and reports every extent once (by the entry at its first
    /// position), or the first corrupt entry.
    pub fn mount_scan(&self, f: &mut dyn FnMut(u32, Extent)) -> Result<()> {
        for a in &self.stride_counts {
            a.store(0, Ordering::Relaxed);
        }
        for s in 0..self.nslots {
            let o = self.slot_off(s);
            let (t, e) = self.read_entry(s);
            match t {
                EMPTY | TOMBSTONE => continue,
                BUSY => {
                    self.dev.store_u64(o, TOMBSTONE);
                    self.dev.flush(o, 8);
                    continue;
                }
                _ => {}
            }
            let Some((positions, i)) = positions_of(t, &e) else {
                return Err(Error::corrupt(format!("extent hash: slot {s} holds an invalid entry")));
            };
            self.stride_counts[stride_log(&positions, i, &e)].fetch_add(1, Ordering::Relaxed);
            if i == 0 {
                f((t >> 32) as u32, e);
            }
        }
        self.dev.fence();
        Ok(())
    }

    /// fsck: the entries that no lookup or removal would treat as part of a whole extent,
    /// each to be cleared with a tombstone (so that the probe paths through it stay whole):
    /// an invalid entry, an extent past the `data_blocks` of the data area, an entry its
    /// key's probe path does not reach (a removal would not find it), and every pointer of
    /// an extent whose pointers are not exactly Algorithm 1's positions (a lookup at a
    /// missing one fails; a walk reports an extent by its first pointer only, so an extent
    /// without one would translate blocks that the allocator counts free). A fuzzer's
    /// image with a key changed in place left such an entry through `fsck --repair`.
    pub fn stray_entries(&self, data_blocks: u64) -> Vec<super::StrayEntry> {
        let stray = |s: u64, why| super::StrayEntry { off: self.slot_off(s), clear: TOMBSTONE, why };
        let mut out = Vec::new();
        let mut extents = std::collections::HashMap::<(u32, u32, u32, u64), Vec<(u32, u64)>>::new();
        for s in 0..self.nslots {
            let (t, e) = self.read_entry(s);
            if matches!(t, EMPTY | TOMBSTONE | BUSY) {
                continue;
            }
            if positions_of(t, &e).is_none() {
                out.push(stray(s, "an invalid entry"));
            } else if e.phys.checked_add(e.len as u64).is_none_or(|end| end > data_blocks) {
                out.push(stray(s, "an extent past the data area"));
            } else if !self.reaches(t, s) {
                out.push(stray(s, "an entry its key's probe path does not reach"));
            } else {
                let (ino, pos) = ((t >> 32) as u32, t as u32);
                extents.entry((ino, e.start, e.len, e.phys)).or_default().push((pos, s));
            }
        }
        for ((_, start, len, _), mut found) in extents {
            found.sort_unstable();
            if found.iter().map(|f| f.0).ne(insert_positions(start, len)) {
                out.extend(found.iter().map(|f| stray(f.1, "a pointer of an extent that lacks or repeats another")));
            }
        }
        out.sort_unstable_by_key(|e| e.off);
        out
    }

    /// Whether the probe path of tag `t` reaches slot `s` (no empty slot before it).
    fn reaches(&self, t: u64, mut s_at: u64) -> bool {
        let home = home_slot(t, self.seed, self.nslots);
        loop {
            if s_at == home {
                return true;
            }
            s_at = (s_at + self.nslots - 1) % self.nslots;
            if self.dev.load_u64(self.slot_off(s_at)) == EMPTY {
                return false;
            }
        }
    }

    pub fn nslots(&self) -> u64 {
        self.nslots
    }

    fn claim(&self, t: u64) -> Result<u64> {
        let mut s = home_slot(t, self.seed, self.nslots);
        for _ in 0..self.nslots {
            let v = self.dev.load_u64(self.slot_off(s));
            if (v == EMPTY || v == TOMBSTONE) && self.dev.cas_u64(self.slot_off(s), v, BUSY).is_ok() {
                return Ok(s);
            }
            s = (s + 1) % self.nslots;
        }
        Err(Error::NoSpace)
    }

    /// Removes every pointer to extent `e` of `ino` (tombstones, in `tx`).
    pub fn remove(&self, tx: &mut Tx<'_, D>, ino: Ino, e: Extent) -> usize {
        let positions = insert_positions(e.start, e.len);
        let mut removed = 0;
        for (i, &pos) in positions.iter().enumerate() {
            let t = tag(ino.0, pos);
            let mut s = home_slot(t, self.seed, self.nslots);
            for _ in 0..self.nslots {
                let (et, x) = self.read_entry(s);
                if et == EMPTY {
                    break;
                }
                if et == t && x == e {
                    tx.write_u64(self.slot_off(s), TOMBSTONE);
                    removed += 1;
                    self.stride_counts[stride_log(&positions, i, &e)].fetch_sub(1, Ordering::Relaxed);
                    break;
                }
                s = (s + 1) % self.nslots;
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{self, Journals};
    use crate::layout::superblock::GeometryParams;
    use crate::layout::Geometry;
    use crate::pm::CrashDevice;
    use rand::{rngs::SmallRng, Rng, SeedableRng};

    #[test]
    fn the_papers_example() {
        // Figure 6: inserting clusters [1, 12] stores 5 pointers, at 1, 2, 4, 8 and 12.
        assert_eq!(insert_positions(1, 12), vec![1, 2, 4, 8, 12]);
        // Searching 7 visits 7, 6 and 4.
        assert_eq!(search_positions(7), vec![7, 6, 4, 0]);
        // Figure 5(b): [0, 16) from 0 is one pointer.
        assert_eq!(insert_positions(0, 16), vec![0]);
    }

    #[test]
    fn pointers_are_bounded_by_two_log_b_and_every_cluster_is_found() {
        let mut rng = SmallRng::seed_from_u64(5);
        for _ in 0..20_000 {
            let start: u32 = rng.random_range(0..1 << 20);
            let len: u32 = rng.random_range(1..4096);
            let pos = insert_positions(start, len);
            let bound = 2 * (32 - len.leading_zeros()) as usize;
            assert!(pos.len() <= bound.max(1), "[{start}, +{len}) took {} pointers", pos.len());
            // Every cluster of the extent reaches one of the stored positions by its search.
            for c in [start, start + len / 2, start + len - 1] {
                assert!(search_positions(c).iter().any(|p| pos.contains(p)), "cluster {c} of [{start}, +{len})");
            }
        }
    }

    fn test_geometry() -> Geometry {
        Geometry::compute(&GeometryParams {
            image_bytes: 4 << 20,
            inode_count: Some(16),
            journal_count: 1,
            journal_blocks: 64,
            mapping: crate::layout::MappingKind::HashFs,
            grouped: false,
        })
        .unwrap()
    }

    fn setup(lookup: ExtentLookup) -> (Arc<CrashDevice>, Journals<CrashDevice>, ExtentHashTable<CrashDevice>) {
        let geo = test_geometry();
        let dev = Arc::new(CrashDevice::new(4 << 20));
        journal::format(&*dev, &geo);
        let t = ExtentHashTable::new(dev.clone(), DevOffset(geo.map_off), 50_000, 99, lookup);
        let j = Journals::new(dev.clone(), geo, 1);
        (dev, j, t)
    }

    #[test]
    fn lookups_match_a_model_and_removal_works() {
        for lookup in [ExtentLookup::Every, ExtentLookup::Fast] {
            let (_dev, j, t) = setup(lookup);
            let mut rng = SmallRng::seed_from_u64(8);
            let mut model: Vec<(Ino, Extent)> = Vec::new();
            for i in 0..500u32 {
                let ino = Ino(1 + i % 5);
                let start = model.iter().filter(|(n, _)| *n == ino).map(|(_, e)| e.start + e.len).max().unwrap_or(0)
                    + rng.random_range(0..3);
                let e = Extent { start, len: rng.random_range(1..300), phys: rng.random_range(0..1 << 30) };
                let mut tx = j.begin();
                t.insert(&mut tx, ino, e).unwrap();
                tx.commit().unwrap();
                model.push((ino, e));
            }
            for &(ino, e) in model.iter().step_by(3) {
                for c in [e.start, e.start + e.len / 3, e.start + e.len - 1] {
                    assert_eq!(t.lookup(ino, c).0, Some(e), "{lookup:?}: ino {ino:?} cluster {c}");
                }
                assert_eq!(
                    t.lookup(ino, e.start + e.len).0.map(|x| x.start),
                    model.iter().find(|(n, x)| *n == ino && x.start == e.start + e.len).map(|(_, x)| x.start)
                );
            }
            // Remove half; they are gone, the rest stay.
            for (k, &(ino, e)) in model.iter().enumerate() {
                if k % 2 == 0 {
                    let mut tx = j.begin();
                    assert_eq!(t.remove(&mut tx, ino, e), insert_positions(e.start, e.len).len());
                    tx.commit().unwrap();
                }
            }
            for (k, &(ino, e)) in model.iter().enumerate() {
                let found = t.lookup(ino, e.start + e.len / 2).0;
                assert_eq!(found, if k % 2 == 0 { None } else { Some(e) });
            }
        }
    }

    #[test]
    fn fast_lookup_visits_fewer_positions_for_large_extents() {
        let mut visits = [0u64; 2];
        for (i, lookup) in [ExtentLookup::Every, ExtentLookup::Fast].into_iter().enumerate() {
            let (_dev, j, t) = setup(lookup);
            // 1 MiB extents (256 clusters), aligned: one stride length dominates.
            for k in 0..100u32 {
                let mut tx = j.begin();
                t.insert(&mut tx, Ino(1), Extent { start: k * 256, len: 256, phys: k as u64 * 256 }).unwrap();
                tx.commit().unwrap();
            }
            for c in (0..25_600u32).step_by(7) {
                let (e, cost) = t.lookup(Ino(1), c);
                assert_eq!(e.unwrap().start, c / 256 * 256);
                visits[i] += cost.positions;
            }
        }
        assert!(visits[1] * 2 < visits[0], "fast lookup {} vs plain {}", visits[1], visits[0]);
    }

    #[test]
    fn an_interrupted_insert_is_invisible() {
        let (dev, j, t) = setup(ExtentLookup::Every);
        dev.set_capture(true);
        let e = Extent { start: 3, len: 100, phys: 7 };
        let mut tx = j.begin();
        t.insert(&mut tx, Ino(2), e).unwrap();
        tx.commit().unwrap();
        dev.set_capture(false);
        for p in dev.take_points() {
            let d = Arc::new(CrashDevice::from_image(&p.image_with(|i| i % 2 == 0)));
            let geo = test_geometry();
            journal::recover(&*d, &geo).unwrap();
            let t2 = ExtentHashTable::new(d, DevOffset(geo.map_off), 50_000, 99, ExtentLookup::Every);
            // Either no pointer is visible, or a complete, correct one.
            for c in [3, 50, 102] {
                let found = t2.lookup(Ino(2), c).0;
                assert!(found.is_none() || found == Some(e), "{found:?}");
            }
        }
    }

    /// fsck's strays: none on a table that inserts and removals made; a key changed in
    /// place, a pointer lost and an extent past the device are each found, with every
    /// pointer of the extent that lost one.
    #[test]
    fn stray_entries_are_what_lookups_and_removals_cannot_treat_as_whole() {
        let (dev, j, t) = setup(ExtentLookup::Every);
        let extents =
            [(Ino(2), Extent { start: 0, len: 13, phys: 100 }), (Ino(3), Extent { start: 5, len: 1, phys: 200 })];
        for &(ino, e) in &extents {
            let mut tx = j.begin();
            t.insert(&mut tx, ino, e).unwrap();
            tx.commit().unwrap();
        }
        let mut tx = j.begin();
        t.remove(&mut tx, Ino(3), extents[1].1);
        tx.commit().unwrap();
        let live = |t: &ExtentHashTable<CrashDevice>| {
            (0..t.nslots).filter(|&s| !matches!(t.read_entry(s).0, EMPTY | TOMBSTONE)).collect::<Vec<_>>()
        };
        let slots = live(&t);
        assert_eq!(slots.len(), insert_positions(0, 13).len());
        assert_eq!(t.stray_entries(1000), Vec::new());
        // Past the data area.
        assert_eq!(t.stray_entries(105).len(), slots.len());
        // A key changed in place (another inode): its probe path does not reach it, and the
        // extent's other pointers lack it.
        let o = t.slot_off(slots[0]);
        let old = dev.load_u64(o);
        dev.store_u64(o, old + (1 << 32));
        let found = t.stray_entries(1000);
        assert_eq!(found.len(), slots.len(), "{found:?}");
        assert!(found.iter().any(|e| e.why.contains("does not reach")));
        // The key back, another pointer tombstoned: the rest of its extent is stray.
        dev.store_u64(o, old);
        dev.store_u64(t.slot_off(slots[1]), TOMBSTONE);
        assert_eq!(t.stray_entries(1000).len(), slots.len() - 1);
    }
}
