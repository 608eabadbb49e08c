//! HashFS's grouped placement when no group is free (`mapping/hashfs/groups.rs`): a
//! whole-chunk write takes the unclaimed group with the fewest keys and moves them out,
//! one block at a time, each move one transaction, before claiming the group.
//!
//! Hashing spreads small files' blocks over every group (at 4% full hardly any group of
//! 512 slots is empty), so without moving blocks a large file gets 2 MiB groups only on an
//! almost empty image. A move copies the block to a new slot on its key's probe path
//! (reserved, so invisible), then one transaction maps the key there and leaves the old
//! slot reserved for the claim: after a crash the block is in one place or the other,
//! never both, never neither. Only blocks of other regular files are moved, each under
//! its file's lock taken without waiting (a busy file makes the claim try another group),
//! never while the file is memory-mapped; the file's translation cache is cleared.

#![forbid(unsafe_code)]

use crate::fs::FsInner;
use crate::layout::{Ino, Pblk, BLOCK_BYTES};
use crate::mapping::hashfs::groups::Groups;
use crate::mapping::hashfs::{classify, Entry, HashTable, RESERVED_TAG};
use crate::pm::PmDevice;
use crate::{Error, Result};

/// The most blocks one claim moves (half a group).
const MAX_MOVES: u32 = 256;
/// Groups one claim tries.
const MAX_TRIES: usize = 4;

impl<D: PmDevice> FsInner<D> {
    /// Claims a group for chunk `chunk` of `own` by moving other files' blocks out of the
    /// emptiest candidate. None if no candidate could be emptied.
    pub(crate) fn claim_by_evacuation(&self, t: &HashTable<D>, g: &Groups<D>, own: Ino, chunk: u64) -> Option<u64> {
        for gi in g.candidates(own, chunk, MAX_MOVES).into_iter().take(MAX_TRIES) {
            let Some(keys) = g.reserve_free_slots(t, gi, own) else { continue };
            if keys.iter().all(|&s| self.move_block(t, own, s).is_ok()) && g.finish_claim(t, own, chunk, gi) {
                return Some(gi);
            }
            g.abandon(t, gi);
        }
        None
    }

    /// Moves the block in slot `s` (a key of another regular file) to a new slot and
    /// leaves `s` reserved for the claim.
    fn move_block(&self, t: &HashTable<D>, own: Ino, s: u64) -> Result<()> {
        let v = t.load(s);
        let Entry::Key { ino, .. } = classify(v, t.nslots()) else { return Err(Error::Busy) };
        if ino == own.0 {
            return Err(Error::Busy); // the caller may hold translations of its own blocks
        }
        let cell = self.cell(Ino(ino))?;
        let st = cell.state.try_write().ok_or(Error::Busy)?;
        if st.freed || !st.raw.is_reg() || self.mapped_anywhere(&cell) || t.load(s) != v {
            return Err(Error::Busy);
        }
        let to = t.reserve(v)?;
        self.relocate(t, s, v, to, RESERVED_TAG | s)?;
        cell.tcache.invalidate_all();
        drop(st);
        Ok(())
    }

    /// Moves key `v` from slot `s` to `to` (reserved on its path): copies the block,
    /// flushes the copy, then one transaction maps the key at `to` and leaves `old_becomes`
    /// in `s` (a reservation for a claim, or a tombstone). A crash leaves the block in one
    /// place or the other. The caller holds the file's lock; on failure `to` is freed.
    pub(in crate::fs) fn relocate(&self, t: &HashTable<D>, s: u64, v: u64, to: Pblk, old_becomes: u64) -> Result<()> {
        let (from_off, to_off) = (self.geo.block_off(Pblk(s)), self.geo.block_off(to));
        let mut buf = vec![0u8; BLOCK_BYTES as usize];
        self.dev.read(from_off, &mut buf);
        self.dev.write(to_off, &buf);
        self.dev.flush(to_off, BLOCK_BYTES);
        let mut tx = self.journals.begin();
        tx.write_u64(t.slot_off(to.0), v);
        tx.write_u64(t.slot_off(s), old_becomes);
        if let Err(e) = tx.commit() {
            super::slots::free_slots(t, &*self.dev, &[to]);
            return Err(e);
        }
        // The file's inode bytes are as they were, but not where its block lies: on a
        // shared mount the others drop their translations of it (`fs/shared/mod.rs`).
        crate::fs::shared::touched(crate::layout::Ino((v >> 32) as u32));
        Ok(())
    }
}
