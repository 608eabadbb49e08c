//! ctFS's partition hierarchy (§3.1, Figs. 3 and 4): the virtual space is a few L9
//! partitions (512 GiB); a partition is Empty, Allocated to one file, or Partitioned into
//! eight of the level below; every partition starts at a multiple of its size. A file
//! lives in the smallest partition that holds its last mapped page.
//!
//! Where ours differs from ctFS: the states are not stored in header pages inside the
//! partitions. An Allocated partition is named by its file's inode (the one field ctFS's
//! inode has too), and Partitioned and Empty follow from the set of Allocated ones, so the
//! inode table already holds the whole hierarchy; a mount rebuilds it in DRAM
//! ([`Partitions::carve`]) while it reads the inodes. Nothing on PM can then disagree with
//! the inodes, an allocation costs no header write, and no first child is lost to a header
//! page (ctFS must keep the first child of a partitioned partition partitioned, and L3
//! partitions split only one way). Allocation is a buddy allocator with eight buddies:
//! the lowest free partition of the level, else a split of the level above; a free
//! partition whose seven buddies are free merges into its parent.

#![forbid(unsafe_code)]

use crate::layout::mapping::ctfs::{partition_pages, ASSIGNED, LEVELS, LEVEL_BITS, SPACE_PAGES, TOP_PARTITIONS};
use crate::{Error, Result};
use std::collections::BTreeSet;

/// One partition: its level and first virtual page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    pub level: u32,
    pub base: u64,
}

impl Partition {
    pub fn pages(self) -> u64 {
        partition_pages(self.level)
    }

    /// The inode's word for this partition.
    pub fn word(self) -> u64 {
        crate::layout::mapping::ctfs::partition_word(self.base, self.level)
    }

    /// Decodes an inode's partition word (None: no partition), checking it.
    pub fn from_word(w: u64) -> Result<Option<Partition>> {
        if w == 0 {
            return Ok(None);
        }
        let (level, base) = ((w & 0x7F) as u32, w >> 8);
        if w & ASSIGNED == 0 || level >= LEVELS || base % partition_pages(level) != 0 || base >= SPACE_PAGES {
            return Err(Error::corrupt(format!("ctfs: bad partition word {w:#x} in inode")));
        }
        Ok(Some(Partition { level, base }))
    }

    /// The smallest level whose partitions hold `pages` pages (None: larger than L9).
    pub fn level_for(pages: u64) -> Option<u32> {
        (0..LEVELS).find(|&l| partition_pages(l) >= pages)
    }
}

/// The Empty partitions of each level (DRAM); everything else is Allocated or
/// Partitioned.
#[derive(Debug)]
pub struct Partitions {
    free: Vec<BTreeSet<u64>>,
}

impl Default for Partitions {
    fn default() -> Self {
        Self::new()
    }
}

impl Partitions {
    /// A space with no file: every L9 partition Empty.
    pub fn new() -> Self {
        let mut free = vec![BTreeSet::new(); LEVELS as usize];
        let top = partition_pages(LEVELS - 1);
        free[LEVELS as usize - 1] = (0..TOP_PARTITIONS).map(|i| i * top).collect();
        Partitions { free }
    }

    /// Takes the lowest Empty partition of `level`, splitting a larger one if none is.
    pub fn allocate(&mut self, level: u32) -> Option<Partition> {
        let l = level as usize;
        if let Some(base) = self.free[l].pop_first() {
            return Some(Partition { level, base });
        }
        if level + 1 >= LEVELS {
            return None;
        }
        let parent = self.allocate(level + 1)?;
        let size = partition_pages(level);
        self.free[l].extend((1..8).map(|i| parent.base + i * size));
        Some(Partition { level, base: parent.base })
    }

    /// Gives a partition back (merging it with its buddies when all eight are Empty).
    pub fn release(&mut self, p: Partition) {
        let l = p.level as usize;
        debug_assert!(!self.free[l].contains(&p.base), "partition released twice");
        if p.level + 1 < LEVELS {
            let parent = p.base & !(partition_pages(p.level + 1) - 1);
            let size = partition_pages(p.level);
            let buddies = (0..8).map(|i| parent + i * size).filter(|&b| b != p.base);
            if buddies.clone().all(|b| self.free[l].contains(&b)) {
                for b in buddies {
                    self.free[l].remove(&b);
                }
                return self.release(Partition { level: p.level + 1, base: parent });
            }
        }
        self.free[l].insert(p.base);
    }

    /// Marks `p` Allocated in a hierarchy being rebuilt from the inodes (mount): splits the
    /// Empty ancestor that holds it. Fails when `p` overlaps a partition already taken.
    pub fn carve(&mut self, p: Partition) -> Result<()> {
        for level in p.level..LEVELS {
            let anc = p.base & !(partition_pages(level) - 1);
            if self.free[level as usize].remove(&anc) {
                // Split down to p's level, keeping every child that does not hold p.
                for l in (p.level..level).rev() {
                    let size = partition_pages(l);
                    let parent = p.base & !(partition_pages(l + 1) - 1);
                    let mine = p.base & !(size - 1);
                    self.free[l as usize].extend((0..8).map(|i| parent + i * size).filter(|&b| b != mine));
                }
                return Ok(());
            }
        }
        Err(Error::corrupt(format!(
            "ctfs: partition L{} at page {} overlaps another file's partition",
            p.level, p.base
        )))
    }

    /// Empty partitions of `level` (for statistics).
    pub fn empty_at(&self, level: u32) -> u64 {
        self.free.get(level as usize).map_or(0, |s| s.len() as u64)
    }

    /// Empty pages of the space (for statistics).
    pub fn free_pages(&self) -> u64 {
        self.free.iter().enumerate().map(|(l, s)| s.len() as u64 * partition_pages(l as u32)).sum()
    }
}

const _: () = assert!(LEVEL_BITS * (LEVELS - 1) == 27);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smallest_level_that_holds() {
        assert_eq!(Partition::level_for(0), Some(0));
        assert_eq!(Partition::level_for(1), Some(0));
        assert_eq!(Partition::level_for(2), Some(1));
        assert_eq!(Partition::level_for(8), Some(1));
        assert_eq!(Partition::level_for(512), Some(3));
        assert_eq!(Partition::level_for(513), Some(4));
        assert_eq!(Partition::level_for(1 << 27), Some(9));
        assert_eq!(Partition::level_for((1 << 27) + 1), None);
    }

    #[test]
    fn allocations_are_aligned_disjoint_and_merge_back() {
        let mut ps = Partitions::new();
        let full = ps.free_pages();
        let mut taken = Vec::new();
        for i in 0..200u32 {
            let p = ps.allocate(i % 7).unwrap();
            assert_eq!(p.base % p.pages(), 0);
            for q in &taken {
                let q: &Partition = q;
                assert!(p.base + p.pages() <= q.base || q.base + q.pages() <= p.base, "{p:?} overlaps {q:?}");
            }
            taken.push(p);
        }
        let used: u64 = taken.iter().map(|p| p.pages()).sum();
        assert_eq!(ps.free_pages() + used, full);
        for p in taken.into_iter().rev() {
            ps.release(p);
        }
        assert_eq!(ps.free_pages(), full);
        assert_eq!(ps.free[LEVELS as usize - 1].len() as u64, TOP_PARTITIONS, "buddies merged back to L9");
    }

    #[test]
    fn carve_rebuilds_what_allocate_made() {
        let mut a = Partitions::new();
        let taken: Vec<Partition> = (0..50u32).map(|i| a.allocate((i * 5) % 10 % 8).unwrap()).collect();
        let mut b = Partitions::new();
        for &p in &taken {
            b.carve(p).unwrap();
        }
        assert_eq!(a.free, b.free);
        assert!(b.carve(taken[3]).is_err(), "a partition taken twice is corruption");
        let inside = Partition { level: 0, base: taken.iter().find(|p| p.level > 0).unwrap().base + 1 };
        assert!(b.carve(inside).is_err(), "a partition inside another is corruption");
    }

    #[test]
    fn words_round_trip_and_bad_ones_are_corruption() {
        let p = Partition { level: 4, base: 3 * 4096 };
        assert_eq!(Partition::from_word(p.word()).unwrap(), Some(p));
        assert_eq!(Partition::from_word(0).unwrap(), None);
        assert!(Partition::from_word(Partition { level: 4, base: 8 }.word()).is_err(), "misaligned");
        assert!(Partition::from_word(1 << 8 | 12).is_err(), "not assigned");
        assert!(Partition::from_word(Partition { level: 0, base: SPACE_PAGES }.word()).is_err());
    }
}
