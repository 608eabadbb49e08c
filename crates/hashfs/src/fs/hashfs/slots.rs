//! Freeing HashFS table slots and finding a file's slots.

#![forbid(unsafe_code)]

use crate::layout::{Ino, Lblk, Pblk};
use crate::mapping::hashfs::{classify, file_key, Entry, HashTable};
use crate::pm::PmDevice;

/// Frees HashFS table slots: a fence, tombstones, a fence, then purge. The first fence
/// makes every earlier flush durable before a live key's tombstone can be: an untorn
/// write's key switch may have left the tombstone of the key's older copy flushed but not
/// fenced (`fs/untorn.rs`), and if the live copy's tombstone reached the media first, a
/// crash would bring the older copy's data back.
pub(crate) fn free_slots<D: PmDevice>(t: &HashTable<D>, dev: &D, slots: &[Pblk]) {
    if slots.is_empty() {
        return;
    }
    dev.fence();
    free_slots_after_commit(t, dev, slots);
    dev.fence();
}

/// [`free_slots`] right after a transaction's commit, with nothing flushed since, whose
/// last fence stands for the first; the tombstones' fence; the purge not fenced: the
/// tombstones are durable, and a crash that keeps one the purge had emptied leaves the
/// table as if the purge had not run (an unlink's, `unlink.rs`, and a truncation's,
/// `fs/data.rs`: nothing they store afterwards depends on the purge).
pub(crate) fn free_slots_after_commit<D: PmDevice>(t: &HashTable<D>, dev: &D, slots: &[Pblk]) {
    if slots.is_empty() {
        return;
    }
    let freed = t.release_all(slots);
    dev.fence();
    for chunk in freed.chunks(1024) {
        t.release_done(chunk);
    }
}

/// Slots of the mapped blocks of `ino` in [from, to): by lookups when the range is small,
/// else by one scan of the table.
pub(crate) fn mapped_slots<D: PmDevice>(t: &HashTable<D>, ino: Ino, from: Lblk, to: Lblk) -> Vec<Pblk> {
    let mut out = Vec::new();
    if from >= to {
        return out;
    }
    if to - from > (t.nslots() / 64).max(4096) {
        for s in 0..t.nslots() {
            if let Entry::Key { ino: i, lblk } = classify(t.load(s), t.nslots()) {
                if i == ino.0 && (from.0..to.0).contains(&(lblk as u64)) {
                    out.push(Pblk(s));
                }
            }
        }
        return out;
    }
    // Blocks past the largest file have no key (and hold nothing).
    let to = to.min(Lblk(1 << 32));
    let mut lblk = from;
    while lblk < to {
        let n = (to - lblk).min(8) as usize;
        let mut keys = [0u64; 8];
        for (i, k) in keys[..n].iter_mut().enumerate() {
            *k = file_key(ino, lblk + i as u64).expect("below 2^32");
        }
        let mut found = [None; 8];
        t.lookup_batch(&keys[..n], &mut found[..n]);
        out.extend(found[..n].iter().flatten());
        lblk += n as u64;
    }
    out
}
