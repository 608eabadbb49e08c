//! Global cuckoo hash table (HashFS paper §3.2.1): one table for the whole file system,
//! entries <inode, logical block> -> <physical block, run length>, two hash functions, so a
//! lookup reads at most two buckets.
//!
//! Bucket: one 64-byte cache line of four 16-byte entries. Entry word 0 is the key
//! (inode << 32 | logical block; 0 = empty, inode numbers start at 1); word 1 = physical
//! block | run << 32 | rev << 48, where `run` counts the blocks from this one to the end
//! of its physically contiguous run and `rev` the blocks before it (the paper's reverse
//! index), so that a large read needs one lookup per run and a change at one end of a run
//! can update every entry of it. Runs never cross a multiple of [`RUN_MAX`] logical blocks,
//! which bounds the entries an append rewrites.
//!
//! Inserts that find both buckets full move entries to their other bucket along a path
//! found by breadth-first search (bounded at [`MAX_PATH`] moves). Every change goes through
//! the undo-logged transaction, the key written with its value; the caller holds the
//! table's lock for writing from the first change to the commit, and lookups hold it for
//! reading (the paper uses TSX for this isolation; a lock gives the same guarantee).

#![forbid(unsafe_code)]

use super::simd::home_slot;
use super::staged::{MemRead, Staged};
use crate::layout::superblock::{cuckoo_buckets, CUCKOO_BUCKET_BYTES};
use crate::layout::{Extent, Geometry, Ino, Lblk, Pblk};
use crate::pm::{DevOffset, PmDevice};
use crate::{Error, Result};
use std::collections::VecDeque;
use std::ops::ControlFlow;

use crate::layout::mapping::cuckoo::{dec, enc};
pub use crate::layout::mapping::cuckoo::{Val, ENTRY_BYTES, WAYS};
pub const RUN_MAX: u64 = 64;
pub const MAX_PATH: usize = 6;
const SEED2: u64 = 0x9E37_79B9_7F4A_7C15;

/// (bucket, way).
type Slot = (u64, u64);

/// The table's key of logical block `lblk` of inode `ino`.
pub fn key(ino: Ino, lblk: Lblk) -> u64 {
    (u64::from(ino.0) << 32) | lblk.0
}

#[derive(Clone, Copy, Debug)]
pub struct Cuckoo {
    off: DevOffset,
    nbuckets: u64,
    seed: u64,
    data_blocks: u64,
}

impl Cuckoo {
    pub fn new(geo: &Geometry, seed: u64) -> Cuckoo {
        Cuckoo { off: geo.struct_off(), nbuckets: cuckoo_buckets(geo.data_blocks), seed, data_blocks: geo.data_blocks }
    }

    pub fn nbuckets(&self) -> u64 {
        self.nbuckets
    }

    pub fn region_bytes(&self) -> u64 {
        self.nbuckets * CUCKOO_BUCKET_BYTES
    }

    #[inline]
    fn buckets(&self, k: u64) -> (u64, u64) {
        let b1 = home_slot(k, self.seed, self.nbuckets);
        let mut b2 = home_slot(k, self.seed ^ SEED2, self.nbuckets);
        if b2 == b1 {
            b2 = (b1 + 1) % self.nbuckets;
        }
        (b1, b2)
    }

    #[inline]
    fn entry_off(&self, b: u64, w: u64) -> DevOffset {
        self.off + b * CUCKOO_BUCKET_BYTES + w * ENTRY_BYTES
    }

    fn find<M: MemRead>(&self, m: &M, k: u64) -> Option<DevOffset> {
        let (b1, b2) = self.buckets(k);
        for b in [b1, b2] {
            for w in 0..WAYS {
                let o = self.entry_off(b, w);
                if m.load_u64(o) == k {
                    return Some(o);
                }
            }
        }
        None
    }

    /// Where logical block `lblk` of `ino` lies: the extent from it to the end of its
    /// physically contiguous run.
    pub fn lookup<M: MemRead>(&self, m: &M, ino: Ino, lblk: Lblk) -> Result<Option<Extent>> {
        let found = self.lookup_key(m, key(ino, lblk))?;
        Ok(found.map(|(p, len)| Extent { lblk, pblk: Pblk(p), len }))
    }

    /// The physical block of key `k` and the blocks of its run from there.
    fn lookup_key<M: MemRead>(&self, m: &M, k: u64) -> Result<Option<(u64, u64)>> {
        let Some(o) = self.find(m, k) else { return Ok(None) };
        let v = dec(m.load_u64(o + 8));
        if v.pblk >= self.data_blocks || v.run == 0 {
            return Err(Error::corrupt(format!("cuckoo table: bad entry at offset {o}")));
        }
        Ok(Some((v.pblk, v.run.min(self.data_blocks - v.pblk))))
    }

    /// Breadth-first search for a chain of moves that frees a slot in one of `k`'s buckets.
    /// Returns the slots to move, from the one that ends in a free slot back to a bucket
    /// of `k`.
    fn find_path<M: MemRead>(&self, m: &M, k: u64) -> Option<(Vec<Slot>, Slot)> {
        let (b1, b2) = self.buckets(k);
        // Each node: (bucket, way, parent index).
        let mut nodes: Vec<(u64, u64, usize, usize)> = Vec::new();
        let mut queue = VecDeque::new();
        for b in [b1, b2] {
            for w in 0..WAYS {
                if m.load_u64(self.entry_off(b, w)) == 0 {
                    return Some((Vec::new(), (b, w)));
                }
                nodes.push((b, w, usize::MAX, 1));
                queue.push_back(nodes.len() - 1);
            }
        }
        while let Some(i) = queue.pop_front() {
            let (b, w, _, depth) = nodes[i];
            let victim = m.load_u64(self.entry_off(b, w));
            let (v1, v2) = self.buckets(victim);
            let alt = if v1 == b { v2 } else { v1 };
            for aw in 0..WAYS {
                if m.load_u64(self.entry_off(alt, aw)) == 0 {
                    // Move (b, w) -> (alt, aw), then its parent into (b, w), and so on.
                    let mut path = vec![(b, w)];
                    let mut p = nodes[i].2;
                    while p != usize::MAX {
                        path.push((nodes[p].0, nodes[p].1));
                        p = nodes[p].2;
                    }
                    return Some((path, (alt, aw)));
                }
            }
            if depth < MAX_PATH {
                for aw in 0..WAYS {
                    nodes.push((alt, aw, i, depth + 1));
                    queue.push_back(nodes.len() - 1);
                }
            }
        }
        None
    }

    /// Inserts `k` (absent) with value `v`.
    pub fn insert<D: PmDevice>(&self, st: &mut Staged<'_, D>, k: u64, v: Val) -> Result<()> {
        let (path, mut free) = self.find_path(st, k).ok_or(Error::NoSpace)?;
        for (b, w) in path {
            let from = self.entry_off(b, w);
            let to = self.entry_off(free.0, free.1);
            st.store_u64(to, st.load_u64(from));
            st.store_u64(to + 8, st.load_u64(from + 8));
            free = (b, w);
        }
        let o = self.entry_off(free.0, free.1);
        st.store_u64(o, k);
        st.store_u64(o + 8, enc(v));
        Ok(())
    }

    /// Removes `k` if present; returns its physical block.
    pub fn remove<D: PmDevice>(&self, st: &mut Staged<'_, D>, k: u64) -> Option<u64> {
        let o = self.find(st, k)?;
        let p = dec(st.load_u64(o + 8)).pblk;
        st.store_u64(o, 0);
        st.store_u64(o + 8, 0);
        Some(p)
    }

    /// Rewrites the run and reverse-index fields of `ino`'s entries in logical blocks
    /// [lo, hi) (within one RUN_MAX group) from the physical blocks they map.
    pub fn relink<D: PmDevice>(&self, st: &mut Staged<'_, D>, ino: Ino, lo: u64, hi: u64) {
        debug_assert!(hi <= (lo / RUN_MAX + 1) * RUN_MAX);
        let offs: Vec<Option<DevOffset>> = (lo..hi).map(|l| self.find(st, key(ino, Lblk(l)))).collect();
        let pbs: Vec<Option<u64>> = offs.iter().map(|o| o.map(|o| dec(st.load_u64(o + 8)).pblk)).collect();
        let mut i = 0;
        while i < pbs.len() {
            let Some(p0) = pbs[i] else {
                i += 1;
                continue;
            };
            let mut j = i + 1;
            while j < pbs.len() && pbs[j] == Some(p0 + (j - i) as u64) {
                j += 1;
            }
            for (k, off) in offs.iter().enumerate().take(j).skip(i) {
                let v = enc(Val { pblk: p0 + (k - i) as u64, run: (j - k) as u64, rev: (k - i) as u64 });
                let o = off.expect("mapped") + 8;
                if st.load_u64(o) != v {
                    st.store_u64(o, v);
                }
            }
            i = j;
        }
    }

    /// The RUN_MAX-aligned span of the runs next to logical blocks [lo, hi) of `ino`, to
    /// relink after a change there.
    pub fn group_span(lo: u64, hi: u64) -> impl Iterator<Item = (u64, u64)> {
        let g0 = lo / RUN_MAX;
        let g1 = (hi + 1).div_ceil(RUN_MAX);
        (g0..g1).map(|g| (g * RUN_MAX, (g + 1) * RUN_MAX))
    }

    /// Each occupied way: (its bucket, its offset, its key, its value), until `f` breaks.
    fn each_entry<M: MemRead, B>(
        &self,
        m: &M,
        f: &mut dyn FnMut(u64, DevOffset, u64, Val) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        for b in 0..self.nbuckets {
            for w in 0..WAYS {
                let o = self.entry_off(b, w);
                let k = m.load_u64(o);
                if k != 0 {
                    f(b, o, k, dec(m.load_u64(o + 8)))?;
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// Whether key `k`, found in bucket `b`, is one no lookup finds there (outside its two
    /// buckets) or can be (inode 0).
    fn misplaced(&self, b: u64, k: u64) -> bool {
        let (b1, b2) = self.buckets(k);
        (b != b1 && b != b2) || k >> 32 == 0
    }

    /// fsck: the entries no lookup would find or trust, each cleared by a zero key (which
    /// frees the way): a key outside its two buckets or of inode 0, a value past the data
    /// area or of an empty run, and a key stored twice (all but the copy lookups find).
    pub fn stray_entries<M: MemRead>(&self, m: &M) -> Vec<super::StrayEntry> {
        let mut out = Vec::new();
        let _ = self.each_entry::<M, ()>(m, &mut |b, o, k, v| {
            let why = if self.misplaced(b, k) {
                "a key outside its buckets"
            } else if v.pblk >= self.data_blocks || v.run == 0 {
                "a value past the data area"
            } else if self.find(m, k) != Some(o) {
                "a key stored twice"
            } else {
                return ControlFlow::Continue(());
            };
            out.push(super::StrayEntry { off: o, clear: 0, why });
            ControlFlow::Continue(())
        });
        out
    }

    /// Every entry: (inode, logical block, physical block), with corrupt entries reported.
    pub fn scan<M: MemRead>(&self, m: &M, f: &mut dyn FnMut(u32, u64, u64)) -> Result<()> {
        let bad = self.each_entry(m, &mut |b, _, k, v| {
            if self.misplaced(b, k) || v.pblk >= self.data_blocks {
                return ControlFlow::Break(b);
            }
            f((k >> 32) as u32, k & 0xFFFF_FFFF, v.pblk);
            ControlFlow::Continue(())
        });
        match bad {
            ControlFlow::Break(b) => Err(Error::corrupt(format!("cuckoo table: bad entry in bucket {b}"))),
            ControlFlow::Continue(()) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::superblock::GeometryParams;
    use crate::layout::MappingKind;
    use crate::pm::CrashDevice;

    /// An 8 MiB image's geometry on the cuckoo table.
    fn small_geometry() -> Geometry {
        Geometry::compute(&GeometryParams {
            image_bytes: 8 << 20,
            inode_count: Some(64),
            journal_count: 1,
            journal_blocks: 2,
            mapping: MappingKind::Cuckoo,
            grouped: false,
        })
        .unwrap()
    }

    #[test]
    fn fills_past_ninety_percent_with_bounded_moves_and_keeps_runs() {
        let geo = small_geometry();
        let dev = CrashDevice::new(8 << 20);
        let t = Cuckoo::new(&geo, 7);
        let cap = t.nbuckets() * WAYS;
        let n = cap * 92 / 100;
        let mut st = Staged::new(&dev);
        for i in 0..n {
            let ino = 1 + (i % 5) as u32;
            let l = i / 5;
            t.insert(&mut st, key(Ino(ino), Lblk(l)), Val { pblk: i % geo.data_blocks, run: 1, rev: 0 }).unwrap();
        }
        for i in 0..n {
            let (p, _) = t.lookup_key(&st, key(Ino(1 + (i % 5) as u32), Lblk(i / 5))).unwrap().expect("present");
            assert_eq!(p, i % geo.data_blocks);
        }
        assert_eq!(t.lookup_key(&st, key(Ino(9), Lblk(0))).unwrap(), None);
        // Runs: blocks 0..10 of inode 7 at 100..110 except block 4.
        for l in 0..10u64 {
            if l != 4 {
                let _ = t.remove(&mut st, key(Ino(1), Lblk(l)));
                t.insert(&mut st, key(Ino(1), Lblk(l)), Val { pblk: 100 + l, run: 1, rev: 0 }).unwrap();
            }
        }
        t.relink(&mut st, Ino(1), 0, 64);
        assert_eq!(t.lookup_key(&st, key(Ino(1), Lblk(0))).unwrap(), Some((100, 4)));
        assert_eq!(t.lookup_key(&st, key(Ino(1), Lblk(2))).unwrap(), Some((102, 2)));
        assert_eq!(t.lookup_key(&st, key(Ino(1), Lblk(5))).unwrap(), Some((105, 5)));
    }

    /// fsck's strays: none after inserts; a key moved out of its buckets, a second copy
    /// of a key and a value past the data area are each found.
    #[test]
    fn stray_entries_are_what_lookups_cannot_find_or_trust() {
        let geo = small_geometry();
        let dev = CrashDevice::new(8 << 20);
        let t = Cuckoo::new(&geo, 7);
        let mut st = Staged::new(&dev);
        for l in 0..100 {
            t.insert(&mut st, key(Ino(2), Lblk(l)), Val { pblk: l, run: 1, rev: 0 }).unwrap();
        }
        assert_eq!(t.stray_entries(&st), Vec::new());
        let k = key(Ino(2), Lblk(7));
        let o = t.find(&st, k).unwrap();
        let (b1, b2) = t.buckets(k);
        let other = (0..t.nbuckets()).find(|&b| b != b1 && b != b2).unwrap();
        let free_way =
            |st: &Staged<'_, CrashDevice>, b| (0..WAYS).map(|w| t.entry_off(b, w)).find(|&o| st.load_u64(o) == 0);
        // Moved out of its buckets.
        let to = free_way(&st, other).unwrap();
        st.store_u64(to, k);
        st.store_u64(to + 8, st.load_u64(o + 8));
        st.store_u64(o, 0);
        assert_eq!(
            t.stray_entries(&st).iter().map(|e| (e.off, e.why)).collect::<Vec<_>>(),
            [(to, "a key outside its buckets")]
        );
        // Back, and a second copy in its other bucket (or the same one).
        st.store_u64(to, 0);
        st.store_u64(o, k);
        let copy = free_way(&st, b2).or_else(|| free_way(&st, b1)).unwrap();
        st.store_u64(copy, k);
        st.store_u64(copy + 8, st.load_u64(o + 8));
        assert_eq!(t.stray_entries(&st).iter().map(|e| e.why).collect::<Vec<_>>(), ["a key stored twice"]);
        st.store_u64(copy, 0);
        // A value past the data area.
        st.store_u64(o + 8, enc(Val { pblk: geo.data_blocks, run: 1, rev: 0 }));
        assert_eq!(t.stray_entries(&st).iter().map(|e| e.why).collect::<Vec<_>>(), ["a value past the data area"]);
    }
}
