//! Runs of physical blocks and the DRAM index of free runs that both allocators keep
//! (rebuilt from the persistent bitmap at mount).

#![forbid(unsafe_code)]

use crate::layout::Pblk;
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

    pub fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// Free runs, indexed by start and by size, coalesced on insertion.
#[derive(Default, Debug)]
pub(super) struct FreeIndex {
    pub by_start: BTreeMap<u64, u64>,
    pub by_size: BTreeMap<(u64, u64), ()>,
    pub free_blocks: u64,
}

impl FreeIndex {
    /// Adds a free run, merging it with free neighbours; returns the merged run.
    pub fn insert(&mut self, mut e: Run) -> Run {
        if let Some((&s, &l)) = self.by_start.range(..e.start).next_back() {
            if s + l == e.start {
                self.remove_exact(Run { start: s, len: l });
                e = Run { start: s, len: l + e.len };
            }
        }
        if let Some(&l) = self.by_start.get(&e.end()) {
            self.remove_exact(Run { start: e.end(), len: l });
            e.len += l;
        }
        self.by_start.insert(e.start, e.len);
        self.by_size.insert((e.len, e.start), ());
        self.free_blocks += e.len;
        e
    }

    pub fn remove_exact(&mut self, e: Run) {
        self.by_start.remove(&e.start);
        self.by_size.remove(&(e.len, e.start));
        self.free_blocks -= e.len;
    }

    /// Takes `[start, start + len)`, which must lie inside one free run.
    pub fn take(&mut self, start: u64, len: u64) {
        let (&s, &l) = self.by_start.range(..=start).next_back().expect("inside a free run");
        debug_assert!(s <= start && start + len <= s + l);
        self.remove_exact(Run { start: s, len: l });
        if start > s {
            self.insert(Run { start: s, len: start - s });
        }
        if start + len < s + l {
            self.insert(Run { start: start + len, len: s + l - start - len });
        }
    }

    /// The free run holding block `b`, if `b` is free.
    pub fn run_at(&self, b: u64) -> Option<Run> {
        let (&s, &l) = self.by_start.range(..=b).next_back()?;
        (b < s + l).then_some(Run { start: s, len: l })
    }

    /// The first free run at or after block `b`, wrapping around.
    pub fn run_from(&self, b: u64) -> Option<Run> {
        let (&s, &l) = self.by_start.range(b..).next().or_else(|| self.by_start.iter().next())?;
        Some(Run { start: s, len: l })
    }

    /// The smallest free run that holds `want` blocks (the lowest of those of that size),
    /// else the largest run there is.
    pub fn best_fit(&self, want: u64) -> Option<Run> {
        let (&(len, start), _) = self.by_size.range((want, 0)..).next().or_else(|| self.by_size.iter().next_back())?;
        Some(Run { start, len })
    }

    pub fn runs(&self) -> impl Iterator<Item = Run> + '_ {
        self.by_start.iter().map(|(&start, &len)| Run { start, len })
    }
}

/// Blocks per 2 MiB huge page.
pub const HUGE_BLOCKS: u64 = 512;

/// The whole, aligned 2 MiB chunks inside `run`: block `b` starts one when
/// `(b + phase) % 512 == 0` (`phase` is the data region's offset in blocks, so aligned
/// chunks are 2 MiB-aligned in the image).
pub fn aligned_chunks(run: Run, phase: u64) -> impl Iterator<Item = u64> {
    let first = (run.start + phase).next_multiple_of(HUGE_BLOCKS) - phase;
    (first..run.end()).step_by(HUGE_BLOCKS as usize).filter(move |&c| c + HUGE_BLOCKS <= run.end())
}
