//! WineFS's alignment-aware allocator (WineFS §3.4 and §3.6, "Alignment-aware
//! Allocation"): free space is kept as whole, 2 MiB-aligned extents of 512 blocks and as
//! unaligned *holes*; a request is cut at the file's 2 MiB logical boundaries, each whole
//! logical 2 MiB chunk gets an aligned extent (so a memory-mapped file can be mapped with
//! 2 MiB pages), and everything smaller comes from holes first, breaking an aligned extent
//! only when no hole is left. Freed blocks merge with neighbouring holes, and every aligned
//! 2 MiB the merge covers goes back to the aligned set.
//!
//! The device is split into pools, one per journal, as WineFS gives every CPU its own
//! pool: a request is served from the pool of the CPU it runs on, or from the pool the
//! file's previous block lies in; a whole chunk comes from the pool with the most free
//! aligned extents when the home pool has none.
//!
//! Two choices differ from WineFS's code, each because it kept fewer aligned extents whole
//! on an aged image (`hashfs-bench age`, docs/mappings.md): holes are chosen by best fit (the
//! smallest that holds the piece) rather than first fit by address, and a piece smaller
//! than a chunk takes a hole in any pool before it breaks an aligned extent (WineFS breaks
//! one of the local pool's as soon as the local pool has no hole).
//!
//! Persistence is the bitmap's (staged by `MapTx::finish` in the mapping's transaction), as for the baseline:
//! the pools are DRAM only and rebuilt from the bitmap at mount, so a crash needs nothing
//! more than the bitmap words the transaction already logs. (WineFS saves its free lists
//! at unmount and rebuilds them by scanning inodes after a crash; here the scan is of the
//! bitmap, always.)
//!
//! WineFS sees a request whole; here a large write or fallocate is committed in several
//! transactions of a few hundred blocks, so the allocator is told which of the file's
//! blocks the whole request writes: the first piece of a 2 MiB chunk written whole takes an
//! aligned extent, and the pieces after it continue in the rest of it.
//!
//! Beyond WineFS: a request continues at the file's previous block when that block's
//! successor is free in a hole (so a file grown by small writes stays contiguous), and a
//! whole chunk takes the aligned extent right after the file's previous block when it is
//! free.

#![forbid(unsafe_code)]

use super::runs::{aligned_chunks, FreeIndex, Run, HUGE_BLOCKS};
use crate::layout::Lblk;
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

/// One pool: blocks `range.start..range.end` (whole aligned chunks, except at the
/// device's ends).
#[derive(Debug, Default)]
struct Pool {
    /// Free aligned extents, by first block.
    aligned: BTreeSet<u64>,
    /// Free blocks outside `aligned`; no hole covers a whole aligned chunk.
    holes: FreeIndex,
}

impl Pool {
    fn free_blocks(&self) -> u64 {
        self.aligned.len() as u64 * HUGE_BLOCKS + self.holes.free_blocks
    }

    /// Returns a free run to the pool: merged with neighbouring holes, every aligned
    /// chunk the merged hole covers moved to the aligned set.
    fn give_back(&mut self, run: Run, phase: u64) {
        let merged = self.holes.insert(run);
        let chunks: Vec<u64> = aligned_chunks(merged, phase).collect();
        if chunks.is_empty() {
            return;
        }
        self.holes.remove_exact(merged);
        let mut at = merged.start;
        for c in chunks {
            if c > at {
                self.holes.insert(Run { start: at, len: c - at });
            }
            self.aligned.insert(c);
            at = c + HUGE_BLOCKS;
        }
        if at < merged.end() {
            self.holes.insert(Run { start: at, len: merged.end() - at });
        }
    }

    /// Takes aligned extent `c` (which must be free) out of the aligned set.
    fn take_chunk(&mut self, c: u64) -> Run {
        self.aligned.remove(&c);
        Run { start: c, len: HUGE_BLOCKS }
    }

    /// At most `want` blocks from a hole: continuing at `hint` when it is free in one,
    /// else the smallest hole that holds them (else the largest, taken whole).
    fn take_hole(&mut self, want: u64, hint: Option<u64>) -> Option<Run> {
        let hole = hint.and_then(|h| self.holes.run_at(h).map(|r| Run { start: h, len: r.end() - h }));
        let r = hole.or_else(|| self.holes.best_fit(want))?;
        let r = Run { start: r.start, len: want.min(r.len) };
        self.holes.take(r.start, r.len);
        Some(r)
    }

    /// At most `want` blocks from the lowest aligned extent, broken up (its rest becomes a
    /// hole).
    fn break_chunk(&mut self, want: u64) -> Option<Run> {
        let c = *self.aligned.iter().next()?;
        self.aligned.remove(&c);
        self.holes.insert(Run { start: c, len: HUGE_BLOCKS });
        let r = Run { start: c, len: want.min(HUGE_BLOCKS) };
        self.holes.take(r.start, r.len);
        Some(r)
    }
}

/// The pools of the whole device.
pub(super) struct AlignedPools {
    pools: Vec<Mutex<Pool>>,
    /// The rest of an aligned extent a request took for a 2 MiB of a file it writes in
    /// several allocations, kept for that request's next allocation (by owner: the file)
    /// so that nothing else (the file's own tree nodes included) takes blocks from it;
    /// given back when the request ends ([`AlignedPools::end_request`]).
    reserved: Mutex<HashMap<u64, Run>>,
    /// First block of each pool (pool `i` ends where pool `i + 1` begins).
    starts: Vec<u64>,
    blocks: u64,
    /// The data region's offset in blocks modulo 512: block `b` starts an aligned chunk
    /// when `(b + phase) % 512 == 0`.
    phase: u64,
}

/// A piece of a request: `len` blocks from logical block `first`; `whole` when it starts
/// a logical 2 MiB chunk that the request writes whole (in this allocation or the ones
/// after it, in the same request).
struct Piece {
    first: u64,
    len: u64,
    whole: bool,
}

/// Cuts a request for the logical blocks `lblks` (in order) at their 2 MiB logical
/// boundaries and at gaps; `whole` is the range of logical blocks the request writes.
fn pieces(lblks: &[Lblk], whole: &Range<u64>) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    let mut prev: Option<u64> = None;
    for l in lblks.iter().map(|l| l.0) {
        let cont = prev.is_some_and(|p| p + 1 == l && !l.is_multiple_of(HUGE_BLOCKS));
        match out.last_mut() {
            Some(p) if cont => p.len += 1,
            _ => out.push(Piece { first: l, len: 1, whole: false }),
        }
        let p = out.last_mut().expect("pushed");
        let chunk_written = whole.start <= p.first && p.first + HUGE_BLOCKS <= whole.end;
        p.whole = p.first.is_multiple_of(HUGE_BLOCKS) && (p.len == HUGE_BLOCKS || chunk_written);
        prev = Some(l);
    }
    out
}

impl AlignedPools {
    /// Empty pools over `blocks` blocks (every block in use until [`give_back`]).
    pub fn new(blocks: u64, pools: u32, phase: u64) -> Self {
        let phase = phase % HUGE_BLOCKS;
        let chunks = blocks.div_ceil(HUGE_BLOCKS);
        let n = (pools.max(1) as u64).min(chunks.max(1));
        // Pool boundaries on aligned chunk starts, so no aligned extent spans two pools.
        let mut starts: Vec<u64> = (0..n)
            .map(|i| {
                let b = i * chunks / n * HUGE_BLOCKS;
                if i == 0 {
                    0
                } else {
                    ((b + phase).next_multiple_of(HUGE_BLOCKS) - phase).min(blocks)
                }
            })
            .collect();
        starts.dedup();
        let pools = starts.iter().map(|_| Mutex::new(Pool::default())).collect();
        AlignedPools { pools, reserved: Mutex::new(HashMap::new()), starts, blocks, phase }
    }

    fn pool_of(&self, b: u64) -> usize {
        self.starts.partition_point(|&s| s <= b).saturating_sub(1)
    }

    fn pool_end(&self, i: usize) -> u64 {
        self.starts.get(i + 1).copied().unwrap_or(self.blocks)
    }

    /// Returns free runs (mount, a free, or a failed operation's blocks).
    pub fn give_back(&self, runs: &[Run]) {
        for &r in runs {
            let mut at = r.start;
            while at < r.end() {
                let i = self.pool_of(at);
                let end = r.end().min(self.pool_end(i));
                self.pools[i].lock().give_back(Run { start: at, len: end - at }, self.phase);
                at = end;
            }
        }
    }

    pub fn free_blocks(&self) -> u64 {
        let reserved: u64 = self.reserved.lock().values().map(|r| r.len).sum();
        self.pools.iter().map(|p| p.lock().free_blocks()).sum::<u64>() + reserved
    }

    /// The request of `owner` has ended: what it reserved and did not use goes back.
    pub fn end_request(&self, owner: u64) {
        let r = self.reserved.lock().remove(&owner);
        if let Some(r) = r {
            self.give_back(&[r]);
        }
    }

    /// Up to `want` blocks of `owner`'s reservation, if it continues at `hint`.
    fn take_reserved(&self, owner: u64, hint: Option<u64>, want: u64) -> Option<Run> {
        let mut res = self.reserved.lock();
        let r = res.get_mut(&owner).filter(|r| Some(r.start) == hint)?;
        let got = Run { start: r.start, len: want.min(r.len) };
        r.start += got.len;
        r.len -= got.len;
        if r.len == 0 {
            res.remove(&owner);
        }
        Some(got)
    }

    /// Keeps `rest` for `owner`'s next allocation (giving back an older reservation).
    fn reserve(&self, owner: u64, rest: Run) {
        let old = self.reserved.lock().insert(owner, rest);
        if let Some(old) = old {
            self.give_back(&[old]);
        }
    }

    pub fn free_aligned_extents(&self) -> u64 {
        self.pools.iter().map(|p| p.lock().aligned.len() as u64).sum()
    }

    /// Blocks for `lblks` (one per logical block, in order), the first continuing after
    /// `hint` when it can; `cpu` picks the home pool; `owner` (a file, or 0 for none)
    /// holds the reservation of a 2 MiB written in several allocations. None when the
    /// device runs out (what was taken is given back).
    pub fn allocate(
        &self,
        lblks: &[Lblk],
        hint: Option<u64>,
        whole: Range<u64>,
        cpu: usize,
        owner: u64,
    ) -> Option<Vec<Run>> {
        let home = cpu % self.pools.len();
        let mut out: Vec<Run> = Vec::new();
        let mut next = hint;
        for piece in pieces(lblks, &whole) {
            let got = if piece.whole { self.take_chunk(next, home) } else { None };
            // A chunk this allocation fills only in part: the rest is reserved for the
            // request's next allocation (which continues at its hint).
            let got = got.map(|r| {
                if piece.len < r.len {
                    let rest = Run { start: r.start + piece.len, len: r.len - piece.len };
                    if owner != 0 {
                        self.reserve(owner, rest);
                    } else {
                        self.give_back(&[rest]);
                    }
                }
                Run { start: r.start, len: piece.len }
            });
            let got = match got {
                Some(r) => Some(r),
                None if owner != 0 => self.take_reserved(owner, next, piece.len),
                None => None,
            };
            // What a reservation could not give comes from the pools.
            let got = match got {
                Some(r) if r.len < piece.len => match self.take_small(piece.len - r.len, Some(r.end()), home) {
                    Some(mut more) => {
                        more.insert(0, r);
                        Some(more)
                    }
                    None => {
                        self.give_back(&[r]);
                        None
                    }
                },
                Some(r) => Some(vec![r]),
                None => None,
            };
            let got = match got {
                Some(v) => v,
                None => match self.take_small(piece.len, next, home) {
                    Some(v) => v,
                    None => {
                        self.give_back(&out);
                        return None;
                    }
                },
            };
            next = got.last().map(Run::end);
            for r in got {
                match out.last_mut() {
                    Some(last) if last.end() == r.start => last.len += r.len,
                    _ => out.push(r),
                }
            }
        }
        Some(out)
    }

    /// A whole aligned extent: the one right after `hint` if free, else the lowest of the
    /// home pool, else of the pool with the most.
    fn take_chunk(&self, hint: Option<u64>, home: usize) -> Option<Run> {
        if let Some(h) = hint.filter(|&h| h < self.blocks && (h + self.phase).is_multiple_of(HUGE_BLOCKS)) {
            let mut p = self.pools[self.pool_of(h)].lock();
            if p.aligned.contains(&h) {
                return Some(p.take_chunk(h));
            }
        }
        self.first_then(
            home,
            |p| p.aligned.len() as u64,
            |p| {
                let c = *p.aligned.iter().next()?;
                Some(p.take_chunk(c))
            },
        )
    }

    /// `want` blocks in pieces smaller than a chunk: from holes (at the hint, else in the
    /// home pool, else in the pools with the most hole blocks), and only when no pool has a
    /// hole left, from a broken aligned extent (the home pool's, else the pool's with the
    /// most). WineFS breaks a local aligned extent as soon as the local pool has no hole;
    /// looking for holes in the other pools first keeps more aligned extents whole on an
    /// aged image, at the price of a cross-pool allocation.
    fn take_small(&self, want: u64, hint: Option<u64>, home: usize) -> Option<Vec<Run>> {
        let mut out = Vec::new();
        let mut left = want;
        let mut next = hint.filter(|&h| h < self.blocks);
        while left > 0 {
            let start = next.map_or(home, |h| self.pool_of(h));
            let got = self
                .first_then(start, |p| p.holes.free_blocks, |p| p.take_hole(left, next))
                .or_else(|| self.first_then(home, |p| p.aligned.len() as u64, |p| p.break_chunk(left)));
            let Some(r) = got else {
                self.give_back(&out);
                return None;
            };
            left -= r.len;
            next = Some(r.end());
            out.push(r);
        }
        Some(out)
    }

    /// `take` from pool `first`; only when it has nothing, from the others by `score`,
    /// highest first (so the common case locks one pool, not all of them).
    fn first_then<T>(
        &self,
        first: usize,
        score: impl Fn(&Pool) -> u64,
        mut take: impl FnMut(&mut Pool) -> Option<T>,
    ) -> Option<T> {
        if let Some(x) = take(&mut self.pools[first].lock()) {
            return Some(x);
        }
        let mut rest: Vec<(u64, usize)> =
            (0..self.pools.len()).filter(|&i| i != first).map(|i| (score(&self.pools[i].lock()), i)).collect();
        rest.sort_by(|a, b| b.cmp(a));
        rest.into_iter().find_map(|(_, i)| take(&mut self.pools[i].lock()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lblks(r: std::ops::Range<u64>) -> Vec<Lblk> {
        r.map(Lblk).collect()
    }

    impl AlignedPools {
        /// A request that is this allocation alone.
        fn allocate_t(&self, l: &[Lblk], hint: Option<u64>, cpu: usize) -> Option<Vec<Run>> {
            let whole = l.first().map_or(0, |f| f.0)..l.last().map_or(0, |e| e.0 + 1);
            self.allocate(l, hint, whole, cpu, 1)
        }
    }

    fn full(blocks: u64, pools: u32, phase: u64) -> AlignedPools {
        let a = AlignedPools::new(blocks, pools, phase);
        a.give_back(&[Run { start: 0, len: blocks }]);
        a
    }

    #[test]
    fn whole_logical_chunks_get_aligned_extents() {
        let a = full(8 * 512, 2, 0);
        assert_eq!(a.free_aligned_extents(), 8);
        // Blocks 100..1124 of a file: a head of 412, one whole chunk, a tail of 100.
        let runs = a.allocate_t(&lblks(100..1124), None, 0).unwrap();
        let total: u64 = runs.iter().map(|r| r.len).sum();
        assert_eq!(total, 1024);
        // The whole logical chunk 512..1024 is one aligned extent.
        let mut at = 0;
        let mut phys_of_512 = None;
        for r in &runs {
            if at <= 412 && 412 < at + r.len {
                phys_of_512 = Some(r.start + (412 - at));
            }
            at += r.len;
        }
        let p = phys_of_512.unwrap();
        assert_eq!(p % 512, 0, "{runs:?}");
        // Small pieces broke at most two aligned extents (no holes existed).
        assert!(a.free_aligned_extents() >= 8 - 3, "{}", a.free_aligned_extents());
    }

    #[test]
    fn small_requests_use_holes_before_aligned_extents() {
        let a = full(4 * 512, 1, 0);
        // Make a hole: take a chunk, free part of it.
        let r = a.allocate_t(&lblks(0..512), None, 0).unwrap();
        assert_eq!(r, vec![Run { start: 0, len: 512 }]);
        a.give_back(&[Run { start: 10, len: 20 }]);
        assert_eq!(a.free_aligned_extents(), 3);
        let s = a.allocate_t(&lblks(0..5), None, 0).unwrap();
        assert_eq!(s, vec![Run { start: 10, len: 5 }]);
        // Too big for the hole: the hole is taken whole, the rest breaks an extent.
        let s = a.allocate_t(&lblks(0..40), None, 0).unwrap();
        assert_eq!(s[0], Run { start: 15, len: 15 });
        assert_eq!(s.iter().map(|r| r.len).sum::<u64>(), 40);
        assert_eq!(a.free_aligned_extents(), 2);
    }

    #[test]
    fn a_file_grown_by_small_writes_stays_contiguous() {
        let a = full(4 * 512, 1, 0);
        let mut hint = None;
        let mut blocks = Vec::new();
        for i in 0..500u64 {
            let r = a.allocate_t(&lblks(i..i + 1), hint, 0).unwrap();
            hint = Some(r[0].end());
            blocks.push(r[0].start);
        }
        assert!(blocks.windows(2).all(|w| w[1] == w[0] + 1), "contiguous");
    }

    #[test]
    fn frees_reform_aligned_extents() {
        let a = full(4 * 512, 2, 0);
        let mut owned = Vec::new();
        for i in 0..100u64 {
            owned.push(a.allocate_t(&lblks(0..(1 + i % 30)), None, i as usize).unwrap());
        }
        assert!(a.free_aligned_extents() < 4);
        for r in owned {
            a.give_back(&r);
        }
        assert_eq!(a.free_aligned_extents(), 4);
        assert_eq!(a.free_blocks(), 4 * 512);
    }

    #[test]
    fn the_phase_shifts_chunk_boundaries() {
        // Data starting 12 blocks past a 2 MiB boundary: chunks start at 500, 1012, ...
        let a = full(3 * 512, 1, 12);
        assert_eq!(a.free_aligned_extents(), 2);
        let r = a.allocate_t(&lblks(0..512), None, 0).unwrap();
        assert_eq!((r[0].start + 12) % 512, 0);
    }

    #[test]
    fn exhaustion_gives_everything_back() {
        let a = full(2 * 512, 2, 0);
        assert!(a.allocate_t(&lblks(0..2000), None, 0).is_none());
        assert_eq!(a.free_blocks(), 1024);
        assert_eq!(a.free_aligned_extents(), 2);
        // Every block can still be had, across both pools.
        let r = a.allocate_t(&lblks(0..1024), None, 1).unwrap();
        assert_eq!(r.iter().map(|r| r.len).sum::<u64>(), 1024);
        assert_eq!(a.free_blocks(), 0);
    }

    #[test]
    fn pieces_cut_at_logical_chunks_and_gaps() {
        let p = pieces(&lblks(500..1100), &(500..1100));
        let lens: Vec<(u64, bool)> = p.iter().map(|p| (p.len, p.whole)).collect();
        assert_eq!(lens, vec![(12, false), (512, true), (76, false)]);
        let mut gap = lblks(0..3);
        gap.extend(lblks(10..12));
        let lens: Vec<u64> = pieces(&gap, &(0..12)).iter().map(|p| p.len).collect();
        assert_eq!(lens, vec![3, 2]);
        // The first 100 blocks of a request that writes blocks 0..2048: a whole chunk's start.
        let p = pieces(&lblks(0..100), &(0..2048));
        assert!(p[0].whole && p[0].len == 100);
        // The same blocks of a request that ends inside the chunk: not whole.
        assert!(!pieces(&lblks(0..100), &(0..300))[0].whole);
    }

    #[test]
    fn a_chunk_written_in_several_allocations_stays_on_one_aligned_extent() {
        let a = full(8 * 512, 2, 0);
        a.allocate_t(&lblks(0..3), None, 0).unwrap(); // a small file breaks an extent
        let mut hint = None;
        let mut blocks = Vec::new();
        for part in 0..10u64 {
            let l = lblks(part * 103..((part + 1) * 103).min(1024));
            let r = a.allocate(&l, hint, 0..1024, 0, 1).unwrap();
            // The file's own tree node, between two allocations, stays out of the chunk.
            a.allocate(&lblks(0..1), None, 0..0, 0, 0).unwrap();
            hint = r.last().map(Run::end);
            blocks.extend(r.iter().flat_map(|r| r.start..r.end()));
        }
        a.end_request(1);
        assert_eq!(blocks.len(), 1024);
        for c in 0..2 {
            assert_eq!(blocks[c * 512] % 512, 0, "chunk {c}");
            assert!((0..512).all(|i| blocks[c * 512 + i] == blocks[c * 512] + i as u64), "chunk {c} contiguous");
        }
    }
}
