//! The block allocator for the mappings other than HashFS (which allocates through its
//! table): the baseline of the HashFS paper's evaluation, a persistent bitmap on PM (one bit
//! per data block, changed inside metadata transactions) with a volatile free-extent index
//! in DRAM, rebuilt from the bitmap at mount.
//!
//! Fragmentation generator (paper §4, "Generating fragmentation"): with a layout score
//! `s` in [0, 1], an allocation of n blocks is cut into chunks whose lengths are drawn so
//! that a fraction `s` of the blocks after each file's first is contiguous with its
//! predecessor (the layout score of Smith and Seltzer), and every chunk is placed at a
//! random free position across the device. `s = 1` allocates contiguously (best fit, near
//! the hint); `s = 0` gives every block its own random place.
//!
//! Used by the extent-tree, radix-tree, cuckoo and extent-hash mappings (through
//! `mapping::BlockMap`); its runs of physical blocks are [`Run`]s, not mapping extents.

#![forbid(unsafe_code)]

use crate::journal::Tx;
use crate::layout::Pblk;
use crate::pm::{DevOffset, PmDevice};
use crate::{Error, Result};
use std::collections::BTreeMap;

/// A run of physical blocks: `len` blocks from block number `start` (the allocator's own
/// arithmetic is on the raw numbers; [`Run::blocks`] gives them typed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Run {
    pub start: u64,
    pub len: u64,
}

impl Run {
    /// One block.
    pub fn one(p: Pblk) -> Run {
        Run { start: p.0, len: 1 }
    }

    /// The run's blocks.
    pub fn blocks(&self) -> impl Iterator<Item = Pblk> {
        (self.start..self.start + self.len).map(Pblk)
    }
}

/// xorshift64*: the generator's randomness (seeded at mkfs, so runs are reproducible).
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Free extents of the device, indexed by start and by size.
#[derive(Default, Debug)]
struct FreeIndex {
    by_start: BTreeMap<u64, u64>,
    by_size: BTreeMap<(u64, u64), ()>,
    free_blocks: u64,
}

impl FreeIndex {
    fn insert(&mut self, mut e: Run) {
        // Coalesce with the neighbours.
        if let Some((&s, &l)) = self.by_start.range(..e.start).next_back() {
            if s + l == e.start {
                self.remove_exact(Run { start: s, len: l });
                e = Run { start: s, len: l + e.len };
            }
        }
        if let Some(&l) = self.by_start.get(&(e.start + e.len)) {
            self.remove_exact(Run { start: e.start + e.len, len: l });
            e.len += l;
        }
        self.by_start.insert(e.start, e.len);
        self.by_size.insert((e.len, e.start), ());
        self.free_blocks += e.len;
    }

    fn remove_exact(&mut self, e: Run) {
        self.by_start.remove(&e.start);
        self.by_size.remove(&(e.len, e.start));
        self.free_blocks -= e.len;
    }

    /// Takes `[start, start + len)`, which must lie inside one free extent.
    fn take(&mut self, start: u64, len: u64) {
        let (&s, &l) = self.by_start.range(..=start).next_back().expect("inside a free extent");
        debug_assert!(s <= start && start + len <= s + l);
        self.remove_exact(Run { start: s, len: l });
        if start > s {
            self.insert(Run { start: s, len: start - s });
        }
        if start + len < s + l {
            self.insert(Run { start: start + len, len: s + l - start - len });
        }
    }

    /// The free extent holding the `k`-th free block (for uniform random placement).
    /// The free extent holding block `b`, if `b` is free.
    fn extent_at(&self, b: u64) -> Option<Run> {
        let (&s, &l) = self.by_start.range(..=b).next_back()?;
        (b < s + l).then_some(Run { start: s, len: l })
    }

    /// The first free extent at or after block `b`, wrapping around.
    fn extent_from(&self, b: u64) -> Option<Run> {
        let (&s, &l) = self.by_start.range(b..).next().or_else(|| self.by_start.iter().next())?;
        Some(Run { start: s, len: l })
    }
}

/// The allocator over `blocks` data blocks, with its bitmap at `bitmap_off` on the device.
pub struct BlockAllocator {
    bitmap_off: DevOffset,
    blocks: u64,
    layout_score: f64,
    free: FreeIndex,
    rng: Rng,
}

impl BlockAllocator {
    /// Rebuilds the DRAM index from the bitmap (mount).
    pub fn load<D: PmDevice>(
        dev: &D,
        bitmap_off: DevOffset,
        blocks: u64,
        layout_score: f64,
        seed: u64,
    ) -> Result<Self> {
        if !(0.0..=1.0).contains(&layout_score) {
            return Err(Error::InvalidParameter(format!("layout score {layout_score} is not in [0, 1]")));
        }
        let mut free = FreeIndex::default();
        let mut run_start = None;
        for w in 0..blocks.div_ceil(64) {
            let word = dev.load_u64(bitmap_off + w * 8);
            for b in 0..64 {
                let blk = w * 64 + b;
                if blk >= blocks {
                    break;
                }
                let used = word & (1 << b) != 0;
                match (used, run_start) {
                    (false, None) => run_start = Some(blk),
                    (true, Some(s)) => {
                        free.insert(Run { start: s, len: blk - s });
                        run_start = None;
                    }
                    _ => {}
                }
            }
        }
        if let Some(s) = run_start {
            free.insert(Run { start: s, len: blocks - s });
        }
        Ok(BlockAllocator { bitmap_off, blocks, layout_score, free, rng: Rng(seed | 1) })
    }

    pub fn free_blocks(&self) -> u64 {
        self.free.free_blocks
    }

    pub fn total_blocks(&self) -> u64 {
        self.blocks
    }

    /// Chooses `n` blocks (DRAM only; the caller records them with
    /// [`tx_mark`](Self::tx_mark) in the transaction that makes them reachable, or gives
    /// them back with [`release`](Self::release)).
    pub fn allocate(&mut self, n: u64, hint: Option<Pblk>) -> Result<Vec<Run>> {
        let hint = hint.map(|p| p.0);
        if n > self.free.free_blocks {
            return Err(Error::NoSpace);
        }
        let mut out: Vec<Run> = Vec::new();
        let mut left = n;
        while left > 0 {
            // Chunk length: geometric, so that the fraction of blocks contiguous with their
            // predecessor is the layout score (mean chunk 1 / (1 - s)).
            let want = if self.layout_score >= 1.0 {
                left
            } else {
                let p_break = 1.0 - self.layout_score;
                let mut len = 1;
                while len < left && self.rng.unit() >= p_break {
                    len += 1;
                }
                len
            };
            let e = if self.layout_score >= 1.0 {
                self.best_fit(want, hint.or(out.last().map(|e| e.start + e.len)))
            } else {
                // The first block of a call continues the file's previous block (`hint`)
                // with probability s, like every other block, so that files written in
                // many small calls reach the same score as files written at once.
                match hint.filter(|_| out.is_empty()).and_then(|h| self.free_run_at(h)) {
                    Some(run) if self.rng.unit() < self.layout_score => {
                        Run { start: run.start, len: want.min(run.len) }
                    }
                    _ => self.random_place(want),
                }
            };
            self.free.take(e.start, e.len);
            match out.last_mut() {
                Some(last) if last.start + last.len == e.start && self.layout_score >= 1.0 => last.len += e.len,
                _ => out.push(e),
            }
            left -= e.len;
        }
        Ok(out)
    }

    /// The free run that starts at block `h`, if `h` is free.
    fn free_run_at(&self, h: u64) -> Option<Run> {
        let (&s, &l) = self.free.by_start.range(..=h).next_back()?;
        (h < s + l).then(|| Run { start: h, len: s + l - h })
    }

    /// Contiguous placement: right at the hint if free, else the smallest extent that
    /// holds `want`, else the largest there is (the rest comes in later chunks).
    fn best_fit(&self, want: u64, hint: Option<u64>) -> Run {
        if let Some(h) = hint {
            if let Some((&s, &l)) = self.free.by_start.range(..=h).next_back() {
                if h < s + l {
                    return Run { start: h, len: want.min(s + l - h) };
                }
            }
        }
        if let Some((&(_, s), _)) = self.free.by_size.range((want, 0)..).next() {
            return Run { start: s, len: want };
        }
        let (&(l, s), _) = self.free.by_size.iter().next_back().expect("free blocks remain");
        Run { start: s, len: l.min(want) }
    }

    /// Random placement: a uniformly chosen free block with room for the whole chunk after
    /// it (a chunk cut short by an allocated block would add a break the layout score did
    /// not ask for); after 16 misses, any free extent that holds it, else as much as fits.
    fn random_place(&mut self, want: u64) -> Run {
        for _ in 0..16 {
            let (ext, blk) = self.random_free_block();
            if ext.start + ext.len - blk >= want {
                return Run { start: blk, len: want };
            }
        }
        if let Some((&(_, s), _)) = self.free.by_size.range((want, 0)..).next() {
            return Run { start: s, len: want };
        }
        let (ext, blk) = self.random_free_block();
        Run { start: blk, len: want.min(ext.start + ext.len - blk) }
    }

    /// A free block chosen uniformly at random (rejection sampling over all blocks, each
    /// try O(log extents)), and its free extent. On a nearly full device, after 64
    /// misses: the start of the free extent after a random block.
    fn random_free_block(&mut self) -> (Run, u64) {
        for _ in 0..64 {
            let b = self.rng.next() % self.blocks;
            if let Some(e) = self.free.extent_at(b) {
                return (e, b);
            }
        }
        let b = self.rng.next() % self.blocks;
        let e = self.free.extent_from(b).expect("callers check that a block is free");
        (e, e.start)
    }

    /// Gives back blocks that were allocated but never recorded (a failed operation).
    pub fn release(&mut self, extents: &[Run]) {
        for &e in extents {
            self.free.insert(e);
        }
    }

    /// Adds the bitmap words that record `extents` as used (`used = true`) or free to `tx`;
    /// for frees, the caller calls [`release`](Self::release) after the commit.
    pub fn tx_mark<D: PmDevice>(&self, dev: &D, tx: &mut Tx<'_, D>, extents: &[Run], used: bool) {
        let mut words: BTreeMap<u64, u64> = BTreeMap::new();
        for e in extents {
            for b in e.start..e.start + e.len {
                let w = b / 64;
                let cur = *words.entry(w).or_insert_with(|| dev.load_u64(self.bitmap_off + w * 8));
                let bit = 1u64 << (b % 64);
                words.insert(w, if used { cur | bit } else { cur & !bit });
            }
        }
        for (w, v) in words {
            tx.write_u64(self.bitmap_off + w * 8, v);
        }
    }
}

#[cfg(test)]
/// The layout score of a file's physical blocks in logical order (Smith and Seltzer): the
/// fraction of blocks after the first that directly follow their predecessor. 1.0 for a
/// file of one block.
pub fn layout_score(blocks_in_order: &[u64]) -> f64 {
    if blocks_in_order.len() < 2 {
        return 1.0;
    }
    let contiguous = blocks_in_order.windows(2).filter(|w| w[1] == w[0] + 1).count();
    contiguous as f64 / (blocks_in_order.len() - 1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{self, Journals};
    use crate::layout::superblock::GeometryParams;
    use crate::layout::Geometry;
    use crate::pm::CrashDevice;
    use std::sync::Arc;

    fn blocks_of(ext: &[Run]) -> Vec<u64> {
        ext.iter().flat_map(|e| e.start..e.start + e.len).collect()
    }

    #[test]
    fn allocations_never_overlap_and_frees_coalesce() {
        let dev = CrashDevice::new(1 << 20);
        let mut a = BlockAllocator::load(&dev, DevOffset(0), 10_000, 0.85, 7).unwrap();
        let mut owned: Vec<Vec<Run>> = Vec::new();
        let mut seen = vec![false; 10_000];
        for i in 0..300u64 {
            let ext = a.allocate(1 + i % 40, None).unwrap();
            for b in blocks_of(&ext) {
                assert!(!seen[b as usize], "block {b} handed out twice");
                seen[b as usize] = true;
            }
            owned.push(ext);
            if i % 3 == 0 {
                let gone = owned.swap_remove((i as usize * 7) % owned.len());
                for b in blocks_of(&gone) {
                    seen[b as usize] = false;
                }
                a.release(&gone);
            }
        }
        let in_use: u64 = owned.iter().map(|e| blocks_of(e).len() as u64).sum();
        assert_eq!(a.free_blocks(), 10_000 - in_use);
        for e in owned {
            a.release(&e);
        }
        assert_eq!(a.free.by_start.len(), 1, "everything coalesced back into one extent");
        assert!(matches!(a.allocate(10_001, None), Err(Error::NoSpace)));
    }

    #[test]
    fn generated_files_have_the_requested_layout_score() {
        for target in [1.0, 0.85, 0.7, 0.3, 0.0] {
            let dev = CrashDevice::new(1 << 20);
            let mut a = BlockAllocator::load(&dev, DevOffset(0), 200_000, target, 11).unwrap();
            let mut scores = Vec::new();
            for i in 0..200u64 {
                let ext = a.allocate(64 + i % 200, None).unwrap();
                scores.push(layout_score(&blocks_of(&ext)));
            }
            let mean = scores.iter().sum::<f64>() / scores.len() as f64;
            assert!((mean - target).abs() < 0.03, "target {target}: mean layout score {mean:.3}");
        }
    }

    #[test]
    fn the_bitmap_records_allocations_through_transactions() {
        let geo = Geometry::compute(&GeometryParams {
            image_bytes: 1 << 20,
            inode_count: Some(16),
            journal_count: 1,
            journal_blocks: 4,
            mapping: crate::layout::MappingKind::HashFs,
        })
        .unwrap();
        let dev = Arc::new(CrashDevice::new(1 << 20));
        journal::format(&*dev, &geo);
        let j = Journals::new(dev.clone(), geo, 1);
        let bitmap_off = DevOffset(geo.inode_table_off); // any spare region of the test image
        let mut a = BlockAllocator::load(&*dev, bitmap_off, 1000, 1.0, 3).unwrap();
        let ext = a.allocate(100, Some(Pblk(50))).unwrap();
        assert_eq!(ext, vec![Run { start: 50, len: 100 }]);
        let mut tx = j.begin();
        a.tx_mark(&*dev, &mut tx, &ext, true);
        tx.commit().unwrap();
        // Mount again: the index comes back from the bitmap.
        let b = BlockAllocator::load(&*dev, bitmap_off, 1000, 1.0, 3).unwrap();
        assert_eq!(b.free_blocks(), 900);
        assert_eq!(b.free.by_start.get(&0), Some(&50));
        assert_eq!(b.free.by_start.get(&150), Some(&850));
        // Free through a transaction.
        let mut tx = j.begin();
        b.tx_mark(&*dev, &mut tx, &ext, false);
        tx.commit().unwrap();
        assert_eq!(BlockAllocator::load(&*dev, bitmap_off, 1000, 1.0, 3).unwrap().free_blocks(), 1000);
    }

    #[test]
    fn layout_score_definition() {
        assert_eq!(layout_score(&[5]), 1.0);
        assert_eq!(layout_score(&[1, 2, 3, 4]), 1.0);
        assert_eq!(layout_score(&[1, 3, 5, 7]), 0.0);
        assert!((layout_score(&[1, 2, 9, 10, 11]) - 0.75).abs() < 1e-9);
    }
}
