//! Staged changes to PM structures: a DRAM overlay of the 4 KiB pages an operation
//! modifies, read back by the same operation, then turned into undo-logged writes of
//! only the words that changed.
//!
//! A transaction ([`Tx`]) applies its writes at commit, so a multi-step change (a B-tree
//! split followed by an insert into the new node, a cuckoo displacement chain, several
//! extents inserted by one write) must see its own earlier steps before they reach PM.
//! The overlay gives it that, and [`Staged::into_tx`] logs the difference word by word,
//! so a node update costs journal space in proportion to what changed, and single-word
//! changes (radix pointers, bitmap words) are applied as 8-byte atomic stores.

#![forbid(unsafe_code)]

use crate::journal::Tx;
use crate::pm::{DevOffset, PmDevice};
use std::collections::BTreeMap;

const PAGE: u64 = 4096;
const WORDS: usize = (PAGE / 8) as usize;

/// Read access to PM structures, directly or through an overlay.
pub trait MemRead {
    fn load_u64(&self, off: DevOffset) -> u64;
    fn read(&self, off: DevOffset, buf: &mut [u8]) {
        debug_assert!(off.0.is_multiple_of(8) && buf.len().is_multiple_of(8));
        for (i, c) in buf.chunks_exact_mut(8).enumerate() {
            c.copy_from_slice(&self.load_u64(off + i as u64 * 8).to_le_bytes());
        }
    }
    /// The words at `off..off + 8 * out.len()`.
    fn read_words(&self, off: DevOffset, out: &mut [u64]) {
        for (i, w) in out.iter_mut().enumerate() {
            *w = self.load_u64(off + i as u64 * 8);
        }
    }
}

/// The device itself.
pub struct Direct<'a, D: PmDevice>(pub &'a D);

impl<D: PmDevice> MemRead for Direct<'_, D> {
    #[inline]
    fn load_u64(&self, off: DevOffset) -> u64 {
        self.0.load_u64(off)
    }
    fn read(&self, off: DevOffset, buf: &mut [u8]) {
        self.0.read(off, buf)
    }
    fn read_words(&self, off: DevOffset, out: &mut [u64]) {
        self.0.read(off, bytemuck::cast_slice_mut(out))
    }
}

/// Splits the words at `off..off + 8 * n` at page boundaries: (page, first word, index
/// into the caller's slice, words).
fn page_pieces(off: u64, n: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let mut i = 0;
    std::iter::from_fn(move || {
        if i >= n {
            return None;
        }
        let o = off + i as u64 * 8;
        let w0 = ((o % PAGE) / 8) as usize;
        let k = (WORDS - w0).min(n - i);
        let piece = (o & !(PAGE - 1), w0, i, k);
        i += k;
        Some(piece)
    })
}

struct Page {
    orig: Box<[u64; WORDS]>,
    cur: Box<[u64; WORDS]>,
}

/// Pages changed by one operation, over the device.
pub struct Staged<'a, D: PmDevice> {
    dev: &'a D,
    pages: BTreeMap<u64, Page>,
}

impl<'a, D: PmDevice> Staged<'a, D> {
    pub fn new(dev: &'a D) -> Self {
        Staged { dev, pages: BTreeMap::new() }
    }

    fn page_mut(&mut self, page: u64) -> &mut Page {
        let dev = self.dev;
        self.pages.entry(page).or_insert_with(|| {
            let mut orig = Box::new([0u64; WORDS]);
            dev.read(DevOffset(page), bytemuck::cast_slice_mut(&mut orig[..]));
            Page { cur: orig.clone(), orig }
        })
    }

    pub fn store_u64(&mut self, off: DevOffset, v: u64) {
        let off = off.0;
        debug_assert!(off.is_multiple_of(8));
        let p = self.page_mut(off & !(PAGE - 1));
        p.cur[((off % PAGE) / 8) as usize] = v;
    }

    /// Stores `words` at `off` (a page copy per page instead of a lookup per word).
    pub fn write_words(&mut self, off: DevOffset, words: &[u64]) {
        let off = off.0;
        debug_assert!(off.is_multiple_of(8));
        for (page, w0, i, k) in page_pieces(off, words.len()) {
            self.page_mut(page).cur[w0..w0 + k].copy_from_slice(&words[i..i + k]);
        }
    }

    /// Writes whole words (`off` and `data.len()` multiples of 8).
    pub fn write(&mut self, off: DevOffset, data: &[u8]) {
        let off = off.0;
        debug_assert!(off.is_multiple_of(8) && data.len().is_multiple_of(8));
        for (i, c) in data.chunks_exact(8).enumerate() {
            self.store_u64(DevOffset(off + i as u64 * 8), u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
    }

    /// Pages this operation changed (for caches of PM pages to drop).
    pub fn dirty_pages(&self) -> impl Iterator<Item = u64> + '_ {
        self.pages.iter().filter(|(_, p)| p.orig != p.cur).map(|(&o, _)| o)
    }

    /// Journal entries the changes will need (an upper bound).
    pub fn undo_entries(&self) -> u64 {
        self.runs().map(|(_, w)| (w.len() as u64 * 8).div_ceil(44)).sum()
    }

    /// Runs of changed words, merging runs separated by fewer than 5 unchanged words (one
    /// journal entry holds 44 bytes).
    fn runs(&self) -> impl Iterator<Item = (u64, &[u64])> + '_ {
        self.pages.iter().flat_map(|(&page, p)| {
            let mut out = Vec::new();
            let mut i = 0;
            while i < WORDS {
                if p.orig[i] == p.cur[i] {
                    i += 1;
                    continue;
                }
                let start = i;
                let mut end = i + 1;
                let mut j = end;
                while j < WORDS && j < end + 5 {
                    if p.orig[j] != p.cur[j] {
                        end = j + 1;
                    }
                    j += 1;
                }
                out.push((page + start as u64 * 8, &p.cur[start..end]));
                i = end;
            }
            out
        })
    }

    /// Adds every change to `tx` (undo-logged).
    pub fn into_tx(self, tx: &mut Tx<'_, D>) {
        for (off, words) in self.runs() {
            if words.len() == 1 {
                tx.write_u64(DevOffset(off), words[0]);
            } else {
                tx.write(DevOffset(off), bytemuck::cast_slice(words));
            }
        }
    }
}

impl<D: PmDevice> MemRead for Staged<'_, D> {
    #[inline]
    fn load_u64(&self, off: DevOffset) -> u64 {
        let off = off.0;
        match self.pages.get(&(off & !(PAGE - 1))) {
            Some(p) => p.cur[((off % PAGE) / 8) as usize],
            None => self.dev.load_u64(DevOffset(off)),
        }
    }
    fn read_words(&self, off: DevOffset, out: &mut [u64]) {
        let off = off.0;
        for (page, w0, i, k) in page_pieces(off, out.len()) {
            match self.pages.get(&page) {
                Some(p) => out[i..i + k].copy_from_slice(&p.cur[w0..w0 + k]),
                None => self.dev.read(DevOffset(page + w0 as u64 * 8), bytemuck::cast_slice_mut(&mut out[i..i + k])),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pm::CrashDevice;

    #[test]
    fn reads_see_staged_words_and_runs_cover_only_changes() {
        let dev = CrashDevice::new(1 << 16);
        dev.store_u64(DevOffset(4096 + 8), 7);
        let mut s = Staged::new(&dev);
        assert_eq!(s.load_u64(DevOffset(4096 + 8)), 7);
        s.store_u64(DevOffset(4096 + 8), 9);
        s.store_u64(DevOffset(4096 + 16), 10);
        s.store_u64(DevOffset(4096 + 8 * 100), 11);
        s.store_u64(DevOffset(8192), 0); // unchanged
        s.store_u64(DevOffset(12288), 5);
        s.store_u64(DevOffset(12288), 0); // changed back
        assert_eq!(s.load_u64(DevOffset(4096 + 8)), 9);
        assert_eq!(dev.load_u64(DevOffset(4096 + 8)), 7, "PM untouched until commit");
        let runs: Vec<_> = s.runs().map(|(o, w)| (o, w.to_vec())).collect();
        assert_eq!(runs, vec![(4096 + 8, vec![9, 10]), (4096 + 800, vec![11])]);
        assert_eq!(s.dirty_pages().collect::<Vec<_>>(), vec![4096]);
        assert_eq!(s.undo_entries(), 2);
        // Word ranges across a page boundary, staged and not.
        s.write_words(DevOffset(8192 - 16), &[1, 2, 3, 4]);
        let mut w = [0u64; 6];
        s.read_words(DevOffset(8192 - 24), &mut w);
        assert_eq!(w, [0, 1, 2, 3, 4, 0]);
        dev.store_u64(DevOffset(20480), 42);
        let mut w = [0u64; 2];
        s.read_words(DevOffset(20480), &mut w);
        assert_eq!(w, [42, 0]);
    }
}
