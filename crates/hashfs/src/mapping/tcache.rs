//! The per-file DRAM translation cache (paper §3.2: "a fixed-size translation cache ...
//! 8 entries ... embedded in an in-DRAM inode structure").
//!
//! Each entry packs (logical block, physical slot) into one atomic word, so readers that
//! share the inode's read lock can fill it without a lock and never see a torn pair.
//! Entries are indexed by the low bits of the logical block rather than by its hash: a
//! sequential run of 8 blocks, fetched together by a vector lookup, then fills all 8
//! entries instead of colliding.

#![forbid(unsafe_code)]

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
    pub fn get(&self, lblk: u32) -> Option<u64> {
        let e = self.entries[lblk as usize % TCACHE_ENTRIES].load(Ordering::Relaxed);
        (e != INVALID && (e >> 32) as u32 == lblk).then_some(e & 0xFFFF_FFFF)
    }

    #[inline]
    pub fn put(&self, lblk: u32, slot: u64) {
        debug_assert!(slot < 0xFFFF_FFFF);
        self.entries[lblk as usize % TCACHE_ENTRIES].store(((lblk as u64) << 32) | slot, Ordering::Relaxed);
    }

    /// Forgets translations of blocks at or beyond `first_lblk`.
    pub fn invalidate_from(&self, first_lblk: u64) {
        for e in &self.entries {
            let v = e.load(Ordering::Relaxed);
            if v != INVALID && (v >> 32) >= first_lblk {
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
        assert_eq!(c.get(0), None);
        assert_eq!(c.get(u32::MAX), None, "the invalid marker is never a hit");
        c.put(3, 100);
        c.put(11, 200);
        assert_eq!(c.get(3), None, "11 evicted 3 (same entry)");
        assert_eq!(c.get(11), Some(200));
        c.put(4, 5);
        c.invalidate_from(5);
        assert_eq!(c.get(4), Some(5));
        assert_eq!(c.get(11), None);
    }
}
