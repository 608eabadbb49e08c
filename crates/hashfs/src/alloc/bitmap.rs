//! The baseline allocation policy of the HashFS paper's evaluation, with its
//! fragmentation generator (paper §4, "Generating fragmentation"): with a layout score `s`
//! in [0, 1], an allocation of n blocks is cut into chunks whose lengths are drawn so that
//! a fraction `s` of the blocks after each file's first is contiguous with its predecessor
//! (the layout score of Smith and Seltzer), and every chunk is placed at a random free
//! position across the device. `s = 1` allocates contiguously (best fit, near the hint);
//! `s = 0` gives every block its own random place. One free-run index for the whole
//! device; nothing here knows about 2 MiB alignment.

#![forbid(unsafe_code)]

use super::runs::{FreeIndex, Run};

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

pub(super) struct BitmapPolicy {
    pub free: FreeIndex,
    blocks: u64,
    layout_score: f64,
    rng: Rng,
}

impl BitmapPolicy {
    pub fn new(blocks: u64, layout_score: f64, seed: u64) -> Self {
        BitmapPolicy { free: FreeIndex::default(), blocks, layout_score, rng: Rng(seed | 1) }
    }

    /// `n` blocks (the caller has checked that they are free), the first continuing at
    /// `hint` when the layout score says so.
    pub fn allocate(&mut self, n: u64, hint: Option<u64>) -> Vec<Run> {
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
                self.best_fit(want, hint.or(out.last().map(Run::end)))
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
                Some(last) if last.end() == e.start && self.layout_score >= 1.0 => last.len += e.len,
                _ => out.push(e),
            }
            left -= e.len;
        }
        out
    }

    /// The free run that starts at block `h`, if `h` is free.
    fn free_run_at(&self, h: u64) -> Option<Run> {
        self.free.run_at(h).map(|r| Run { start: h, len: r.end() - h })
    }

    /// Contiguous placement: right at the hint if free, else the smallest run that holds
    /// `want`, else the largest there is (the rest comes in later chunks).
    fn best_fit(&self, want: u64, hint: Option<u64>) -> Run {
        if let Some(r) = hint.and_then(|h| self.free_run_at(h)) {
            return Run { start: r.start, len: want.min(r.len) };
        }
        if let Some((&(_, s), _)) = self.free.by_size.range((want, 0)..).next() {
            return Run { start: s, len: want };
        }
        let (&(l, s), _) = self.free.by_size.iter().next_back().expect("free blocks remain");
        Run { start: s, len: l.min(want) }
    }

    /// Random placement: a uniformly chosen free block with room for the whole chunk after
    /// it (a chunk cut short by an allocated block would add a break the layout score did
    /// not ask for); after 16 misses, any free run that holds it, else as much as fits.
    fn random_place(&mut self, want: u64) -> Run {
        for _ in 0..16 {
            let (ext, blk) = self.random_free_block();
            if ext.end() - blk >= want {
                return Run { start: blk, len: want };
            }
        }
        if let Some((&(_, s), _)) = self.free.by_size.range((want, 0)..).next() {
            return Run { start: s, len: want };
        }
        let (ext, blk) = self.random_free_block();
        Run { start: blk, len: want.min(ext.end() - blk) }
    }

    /// A free block chosen uniformly at random (rejection sampling over all blocks, each
    /// try O(log runs)), and its free run. On a nearly full device, after 64 misses: the
    /// start of the free run after a random block.
    fn random_free_block(&mut self) -> (Run, u64) {
        for _ in 0..64 {
            let b = self.rng.next() % self.blocks;
            if let Some(e) = self.free.run_at(b) {
                return (e, b);
            }
        }
        let b = self.rng.next() % self.blocks;
        let e = self.free.run_from(b).expect("callers check that a block is free");
        (e, e.start)
    }
}
