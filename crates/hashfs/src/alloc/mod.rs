//! Block allocation for the mappings other than HashFS (which allocates through its
//! table). The persistent state is one bitmap on PM (one bit per data block, changed inside
//! the metadata transaction that makes the blocks reachable or frees them); the free space
//! is indexed in DRAM, rebuilt from the bitmap at mount, by one of two policies chosen at
//! mkfs ([`AllocatorKind`], recorded in the superblock):
//!
//! - [`aligned`]: WineFS's alignment-aware allocator (aligned 2 MiB extents and holes,
//!   per-CPU pools), the default;
//! - [`bitmap`]: the baseline of the HashFS paper's evaluation, with its fragmentation
//!   generator (layout score).
//!
//! Both hand out [`Run`]s (runs of physical blocks, not mapping extents) and share the
//! bitmap code, so recovery and fsck see one format whichever policy placed the blocks.

#![forbid(unsafe_code)]

pub mod aligned;
pub mod bitmap;
pub mod runs;

use crate::layout::{AllocatorKind, Lblk, Pblk};
use crate::pm::{DevOffset, PmDevice};
use crate::{Error, Result};
use aligned::AlignedPools;
use bitmap::BitmapPolicy;
use parking_lot::Mutex;
pub use runs::{Run, HUGE_BLOCKS};
use std::ops::Range;

enum Policy {
    Bitmap(Mutex<BitmapPolicy>),
    Aligned(AlignedPools),
}

/// What the allocator is given at mount.
#[derive(Clone, Copy, Debug)]
pub struct AllocParams {
    pub kind: AllocatorKind,
    /// Data blocks.
    pub blocks: u64,
    /// The bitmap policy's layout score (1.0 for the aligned policy).
    pub layout_score: f64,
    pub seed: u64,
    /// Pools of the aligned policy (one per journal).
    pub pools: u32,
    /// The data region's offset in blocks (where 2 MiB alignment begins).
    pub data_off_blocks: u64,
}

/// The allocator over `blocks` data blocks, loaded from its bitmap on the device (which
/// the mapping's transactions keep: `MapTx::finish`).
/// Internally locked (the aligned policy locks one pool at a time).
pub struct BlockAllocator {
    blocks: u64,
    policy: Policy,
}

impl BlockAllocator {
    /// Rebuilds the DRAM index from the bitmap (mount).
    pub fn load<D: PmDevice>(dev: &D, bitmap_off: DevOffset, p: AllocParams) -> Result<Self> {
        if !(0.0..=1.0).contains(&p.layout_score) {
            return Err(Error::InvalidParameter(format!("layout score {} is not in [0, 1]", p.layout_score)));
        }
        if p.kind == AllocatorKind::Aligned && p.layout_score < 1.0 {
            return Err(Error::InvalidParameter(
                "the fragmentation generator (layout score below 1) is the bitmap allocator's".into(),
            ));
        }
        let free = free_runs(dev, bitmap_off, p.blocks);
        let policy = match p.kind {
            AllocatorKind::Bitmap => {
                let mut b = BitmapPolicy::new(p.blocks, p.layout_score, p.seed);
                for r in free {
                    b.free.insert(r);
                }
                Policy::Bitmap(Mutex::new(b))
            }
            AllocatorKind::Aligned => {
                let a = AlignedPools::new(p.blocks, p.pools, p.data_off_blocks);
                a.give_back(&free);
                Policy::Aligned(a)
            }
        };
        Ok(BlockAllocator { blocks: p.blocks, policy })
    }

    pub fn kind(&self) -> AllocatorKind {
        match self.policy {
            Policy::Bitmap(_) => AllocatorKind::Bitmap,
            Policy::Aligned(_) => AllocatorKind::Aligned,
        }
    }

    pub fn free_blocks(&self) -> u64 {
        match &self.policy {
            Policy::Bitmap(b) => b.lock().free.free_blocks,
            Policy::Aligned(a) => a.free_blocks(),
        }
    }

    pub fn total_blocks(&self) -> u64 {
        self.blocks
    }

    /// Chooses a block for each of `lblks` (DRAM only; the caller records them in the
    /// bitmap in the transaction that makes them reachable, `MapTx::finish`, or gives
    /// them back with [`release`](Self::release)); `hint` is the block after the file's
    /// previous one; `whole` the file's blocks that the request this allocation is part of
    /// writes (the aligned policy gives every 2 MiB of the file inside it an aligned
    /// extent, even when `lblks` is only its first part). The runs come in the order of
    /// `lblks`.
    pub fn allocate(&self, lblks: &[Lblk], hint: Option<Pblk>, whole: Range<Lblk>) -> Result<Vec<Run>> {
        self.allocate_for(lblks, hint, whole, 0)
    }

    /// [`allocate`](Self::allocate) on behalf of `owner` (a file's inode number): the rest
    /// of an aligned extent it starts is kept for its next allocation until
    /// [`end_request`](Self::end_request).
    pub fn allocate_for(&self, lblks: &[Lblk], hint: Option<Pblk>, whole: Range<Lblk>, owner: u64) -> Result<Vec<Run>> {
        let n = lblks.len() as u64;
        let hint = hint.map(|p| p.0);
        match &self.policy {
            Policy::Bitmap(b) => {
                let mut b = b.lock();
                if n > b.free.free_blocks {
                    return Err(Error::NoSpace);
                }
                Ok(b.allocate(n, hint))
            }
            Policy::Aligned(a) => {
                let cpu = crate::pm::current_cpu();
                a.allocate(lblks, hint, whole.start.0..whole.end.0, cpu, owner).ok_or(Error::NoSpace)
            }
        }
    }

    /// `owner`'s request (a write, a fallocate) has ended: its reservation goes back.
    pub fn end_request(&self, owner: u64) {
        if let Policy::Aligned(a) = &self.policy {
            a.end_request(owner);
        }
    }

    /// One block for metadata (a tree node), near `hint`.
    pub fn allocate_one(&self, hint: Option<Pblk>) -> Result<Run> {
        Ok(self.allocate(&[Lblk(1)], hint, Lblk(0)..Lblk(0))?[0])
    }

    /// Gives back blocks that were allocated but never recorded (a failed operation), or
    /// whose free has committed.
    pub fn release(&self, runs: &[Run]) {
        match &self.policy {
            Policy::Bitmap(b) => {
                let mut b = b.lock();
                for &r in runs {
                    b.free.insert(r);
                }
            }
            Policy::Aligned(a) => a.give_back(runs),
        }
    }

    /// Free aligned 2 MiB extents: whole free chunks of 512 blocks that start 2 MiB-aligned
    /// in the image (WineFS Fig. 3), whichever policy placed the blocks.
    pub fn free_aligned_extents(&self, data_off_blocks: u64) -> u64 {
        match &self.policy {
            Policy::Bitmap(b) => b
                .lock()
                .free
                .runs()
                .map(|r| runs::aligned_chunks(r, data_off_blocks % HUGE_BLOCKS).count() as u64)
                .sum(),
            Policy::Aligned(a) => a.free_aligned_extents(),
        }
    }
}

/// The free runs the bitmap records.
fn free_runs<D: PmDevice>(dev: &D, bitmap_off: DevOffset, blocks: u64) -> Vec<Run> {
    let mut out = Vec::new();
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
                    out.push(Run { start: s, len: blk - s });
                    run_start = None;
                }
                _ => {}
            }
        }
    }
    if let Some(s) = run_start {
        out.push(Run { start: s, len: blocks - s });
    }
    out
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
    use crate::journal::Tx;

    /// Records `runs` in the bitmap in `tx` as used (`set`) or free, as `MapTx::finish`
    /// stages them.
    fn stage_bits<D: PmDevice>(bitmap_off: DevOffset, dev: &D, tx: &mut Tx<'_, D>, runs: &[Run], set: bool) {
        let mut words: std::collections::BTreeMap<u64, u64> = Default::default();
        for e in runs {
            for b in e.start..e.end() {
                let w = b / 64;
                let cur = *words.entry(w).or_insert_with(|| dev.load_u64(bitmap_off + w * 8));
                let bit = 1u64 << (b % 64);
                words.insert(w, if set { cur | bit } else { cur & !bit });
            }
        }
        for (w, v) in words {
            tx.write_u64(bitmap_off + w * 8, v);
        }
    }

    fn mark_used<D: PmDevice>(bitmap_off: DevOffset, dev: &D, tx: &mut Tx<'_, D>, runs: &[Run]) {
        stage_bits(bitmap_off, dev, tx, runs, true)
    }

    fn mark_free<D: PmDevice>(bitmap_off: DevOffset, dev: &D, tx: &mut Tx<'_, D>, runs: &[Run]) {
        stage_bits(bitmap_off, dev, tx, runs, false)
    }
    use crate::journal::{self, Journals};
    use crate::layout::superblock::GeometryParams;
    use crate::layout::Geometry;
    use crate::pm::CrashDevice;
    use std::sync::Arc;

    fn blocks_of(ext: &[Run]) -> Vec<u64> {
        ext.iter().flat_map(|e| e.start..e.start + e.len).collect()
    }

    fn none() -> Range<Lblk> {
        Lblk(0)..Lblk(0)
    }

    fn lb(n: u64) -> Vec<Lblk> {
        (0..n).map(Lblk).collect()
    }

    fn params(kind: AllocatorKind, blocks: u64, layout_score: f64, seed: u64) -> AllocParams {
        AllocParams { kind, blocks, layout_score, seed, pools: 2, data_off_blocks: 0 }
    }

    #[test]
    fn allocations_never_overlap_and_frees_coalesce() {
        const N: u64 = 40 * 512;
        for (kind, score) in
            [(AllocatorKind::Bitmap, 0.85), (AllocatorKind::Bitmap, 1.0), (AllocatorKind::Aligned, 1.0)]
        {
            let dev = CrashDevice::new(1 << 20);
            let a = BlockAllocator::load(&dev, DevOffset(0), params(kind, N, score, 7)).unwrap();
            let mut owned: Vec<Vec<Run>> = Vec::new();
            let mut seen = vec![false; N as usize];
            for i in 0..300u64 {
                // Mostly small requests, every tenth one of more than a whole chunk.
                let n = if i % 10 == 0 { 1100 } else { 1 + (i * 37) % 60 };
                let ext = a.allocate(&lb(n), None, none()).unwrap();
                assert_eq!(blocks_of(&ext).len() as u64, n);
                for b in blocks_of(&ext) {
                    assert!(!seen[b as usize], "{kind:?}: block {b} handed out twice");
                    seen[b as usize] = true;
                }
                owned.push(ext);
                if i % 3 != 0 {
                    let gone = owned.swap_remove((i as usize * 7) % owned.len());
                    for b in blocks_of(&gone) {
                        seen[b as usize] = false;
                    }
                    a.release(&gone);
                }
            }
            let in_use: u64 = owned.iter().map(|e| blocks_of(e).len() as u64).sum();
            assert_eq!(a.free_blocks(), N - in_use, "{kind:?}");
            for e in owned {
                a.release(&e);
            }
            assert_eq!(a.free_blocks(), N);
            assert_eq!(a.free_aligned_extents(0), 40, "{kind:?}: everything coalesced back");
            assert!(matches!(a.allocate(&lb(N + 1), None, none()), Err(Error::NoSpace)));
            assert_eq!(a.free_blocks(), N, "{kind:?}: a failed allocation keeps nothing");
        }
    }

    #[test]
    fn the_aligned_allocator_refuses_a_layout_score() {
        let dev = CrashDevice::new(1 << 20);
        let e = BlockAllocator::load(&dev, DevOffset(0), params(AllocatorKind::Aligned, 1000, 0.85, 7));
        assert!(matches!(e, Err(Error::InvalidParameter(_))));
    }

    /// On an aged device (free space in holes between used blocks), a request of whole
    /// logical 2 MiB chunks gets aligned extents from the aligned policy; the bitmap
    /// policy's best fit ignores alignment.
    #[test]
    fn whole_chunks_land_on_aligned_extents_after_aging() {
        let mut aligned_runs = Vec::new();
        for kind in [AllocatorKind::Aligned, AllocatorKind::Bitmap] {
            let dev = CrashDevice::new(1 << 20);
            let a = BlockAllocator::load(&dev, DevOffset(0), params(kind, 64 * 512, 1.0, 3)).unwrap();
            let files: Vec<Vec<Run>> =
                (0..2000u64).map(|i| a.allocate(&lb(1 + i % 15), None, none()).unwrap()).collect();
            for f in files.iter().step_by(2) {
                a.release(f);
            }
            let big = a.allocate(&lb(4 * 512), None, none()).unwrap();
            let blocks = blocks_of(&big);
            let n = (0..4).filter(|c| {
                let first = blocks[c * 512];
                first.is_multiple_of(512) && (0..512).all(|i| blocks[c * 512 + i] == first + i as u64)
            });
            aligned_runs.push(n.count());
        }
        assert_eq!(aligned_runs[0], 4, "aligned policy: {aligned_runs:?}");
        assert!(aligned_runs[1] < 4, "bitmap policy: {aligned_runs:?}");
    }

    #[test]
    fn generated_files_have_the_requested_layout_score() {
        for target in [1.0, 0.85, 0.7, 0.3, 0.0] {
            let dev = CrashDevice::new(1 << 20);
            let a =
                BlockAllocator::load(&dev, DevOffset(0), params(AllocatorKind::Bitmap, 200_000, target, 11)).unwrap();
            let mut scores = Vec::new();
            for i in 0..200u64 {
                let ext = a.allocate(&lb(64 + i % 200), None, none()).unwrap();
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
            grouped: false,
        })
        .unwrap();
        for kind in [AllocatorKind::Bitmap, AllocatorKind::Aligned] {
            let dev = Arc::new(CrashDevice::new(1 << 20));
            journal::format(&*dev, &geo);
            let j = Journals::new(dev.clone(), geo, 1);
            let bitmap_off = DevOffset(geo.inode_table_off); // any spare region of the test image
            let p = params(kind, 1000, 1.0, 3);
            let a = BlockAllocator::load(&*dev, bitmap_off, p).unwrap();
            let ext = a.allocate(&lb(100), Some(Pblk(50)), none()).unwrap();
            if kind == AllocatorKind::Bitmap {
                assert_eq!(ext, vec![Run { start: 50, len: 100 }]);
            }
            let mut tx = j.begin();
            mark_used(bitmap_off, &*dev, &mut tx, &ext);
            tx.commit().unwrap();
            // Mount again: the index comes back from the bitmap.
            let b = BlockAllocator::load(&*dev, bitmap_off, p).unwrap();
            assert_eq!(b.free_blocks(), 900);
            assert_eq!(free_runs(&*dev, bitmap_off, 1000).iter().map(|r| r.len).sum::<u64>(), 900);
            for blk in blocks_of(&ext) {
                let w = dev.load_u64(bitmap_off + (blk / 64) * 8);
                assert!(w & (1 << (blk % 64)) != 0, "{kind:?}: block {blk} not marked");
            }
            // Free through a transaction.
            let mut tx = j.begin();
            mark_free(bitmap_off, &*dev, &mut tx, &ext);
            tx.commit().unwrap();
            assert_eq!(BlockAllocator::load(&*dev, bitmap_off, p).unwrap().free_blocks(), 1000);
        }
    }

    #[test]
    fn layout_score_definition() {
        assert_eq!(layout_score(&[5]), 1.0);
        assert_eq!(layout_score(&[1, 2, 3, 4]), 1.0);
        assert_eq!(layout_score(&[1, 3, 5, 7]), 0.0);
        assert!((layout_score(&[1, 2, 9, 10, 11]) - 0.75).abs() < 1e-9);
    }
}
