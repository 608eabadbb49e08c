//! The per-file DRAM translation cache (paper §3.2: "a fixed-size translation cache ...
//! 8 entries ... embedded in an in-DRAM inode structure").
//!
//! Each entry packs (logical block, physical slot) into one atomic word, so readers that
//! share the inode's read lock can fill it without a lock and never see a torn pair.
//! Entries are indexed by the low bits of the logical block rather than by its hash: a
//! sequential run of 8 blocks, fetched together by a vector lookup, then fills all 8
//! entries instead of colliding.

#![forbid(unsafe_code)]

use crate::layout::{Lblk, Pblk};
use std::sync::atomic::{AtomicU64, Ordering};

pub const TCACHE_ENTRIES: usize = 8;
const INVALID: u64 = u64::MAX;

pub struct TranslationCache {
    entries: [AtomicU64; TCACHE_ENTRIES],
}

impl Default for TranslationCache {
    fn default() -> Self {
        TranslationCache { entries: std::array::from_fn(|_| AtomicU64::new(INVALID)) }
    }
}

impl TranslationCache {
    #[inline]
    pub fn get(&self, lblk: Lblk) -> Option<Pblk> {
        let l = lblk.to_u32()?;
        let e = self.entries[l as usize % TCACHE_ENTRIES].load(Ordering::Relaxed);
        (e != INVALID && (e >> 32) as u32 == l).then_some(Pblk(e & 0xFFFF_FFFF))
    }

    /// Remembers a translation (blocks past the largest file are never cached).
    #[inline]
    pub fn put(&self, lblk: Lblk, pblk: Pblk) {
        let Some(l) = lblk.to_u32() else { return };
        debug_assert!(pblk.0 < 0xFFFF_FFFF);
        self.entries[l as usize % TCACHE_ENTRIES].store(((l as u64) << 32) | pblk.0, Ordering::Relaxed);
    }

    /// Forgets translations of blocks at or beyond `first`.
    pub fn invalidate_from(&self, first: Lblk) {
        for e in &self.entries {
            let v = e.load(Ordering::Relaxed);
            if v != INVALID && (v >> 32) >= first.0 {
                e.store(INVALID, Ordering::Relaxed);
            }
        }
    }

    pub fn invalidate_all(&self) {
        for e in &self.entries {
            e.store(INVALID, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_miss_and_invalidate() {
        let c = TranslationCache::default();
        assert_eq!(c.get(Lblk(0)), None);
        assert_eq!(c.get(Lblk(u32::MAX as u64)), None, "the invalid marker is never a hit");
        assert_eq!(c.get(Lblk(1 << 32)), None, "past the largest file");
        c.put(Lblk(3), Pblk(100));
        c.put(Lblk(11), Pblk(200));
        assert_eq!(c.get(Lblk(3)), None, "11 evicted 3 (same entry)");
        assert_eq!(c.get(Lblk(11)), Some(Pblk(200)));
        c.put(Lblk(4), Pblk(5));
        c.invalidate_from(Lblk(5));
        assert_eq!(c.get(Lblk(4)), Some(Pblk(5)));
        assert_eq!(c.get(Lblk(11)), None);
    }
}
