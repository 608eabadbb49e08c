//! The regions placement's openings (`mapping/hashfs/regions.rs`): when the small keys
//! pass their target load, free groups become the newest buckets and the file system
//! moves into them every key whose jump bucket they now are.
//!
//! A write request calls [`FsInner::regions_upkeep`] before it takes its file's lock, for
//! as many small keys as it may place, so the thread that opens holds no lock of the file
//! system: it may wait for other requests' reservations and take any file's lock (without
//! waiting), its own file's included. Under the lock, a request calls
//! [`FsInner::regions_upkeep_for`] again before its small keys (room is short only if
//! another request held the openings off) and when a key's chain is full; its own blocks
//! then wait to move. The steps:
//!
//! 1. The groups' directory words are set to "open, in progress", flushed and fenced,
//!    then the buckets are published (under the placement's layout lock, which every
//!    small key's reservation holds while it picks its group: after this, no reservation
//!    picks a bucket by the old count).
//! 2. Reservations made before that may become keys of a new bucket in an old group:
//!    every reservation seen in the region is waited for (it ends when its request
//!    publishes or frees it).
//! 3. Every key that lies neither in its bucket's group nor below it on its chain is
//!    moved: copied into a slot reserved on its path, flushed, then one transaction maps
//!    it there and frees the old slot ([`FsInner::relocate`]). A crash leaves it in one
//!    place or the other; while marks remain, lookups try every bucket a key had since
//!    the first marked group.
//! 4. The words lose their marks (flushed, fenced).
//!
//! A key that cannot move now (its file is busy, memory-mapped, or a reservation did not
//! end in time) leaves the marks; a later request tries again (after a back-off), and
//! openings go on meanwhile: their moves are tried with the ones that wait.

#![forbid(unsafe_code)]

use crate::fs::inode::InodeCell;
use crate::fs::FsInner;
use crate::layout::{Ino, Lblk, Pblk};
use crate::mapping::hashfs::groups::Groups;
use crate::mapping::hashfs::regions::Regions;
use crate::mapping::hashfs::{classify, Entry, HashTable, GROUP_SLOTS};
use crate::mapping::FileMap;
use crate::pm::PmDevice;
use crate::{Error, Result};
use std::ops::Range;

/// Polls of an old group's reservations before an opening gives up for now.
const RESERVATION_POLLS: u32 = 2000;

/// How an upkeep takes the lock that serializes group openings.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenLock {
    /// Waits for it (a request whose keys found no room).
    Wait,
    /// Leaves the opening to whoever holds it.
    Try,
}

impl<D: PmDevice> FsInner<D> {
    /// Regions placement: before a request writes `len` bytes at `off` (None: at the end
    /// of file) of `cell`'s file, opens groups if the small keys it may place (its blocks
    /// outside the chunks it claims) want them, and finishes an opening whose moves are
    /// not done. Called with no lock of the file system held, so that the moves reach every
    /// file, the requester's too: a large file written in pieces smaller than a chunk would
    /// otherwise keep its keys in old groups that fill up, and lookups would walk the
    /// chains of full groups past them.
    pub(crate) fn regions_upkeep(&self, cell: &InodeCell, off: Option<u64>, len: u64) {
        let FileMap::Hash(t) = &self.map else { return };
        if t.regions().is_none() {
            return;
        }
        let small = match off {
            // A small append claims nothing: its blocks, wherever the end of file is,
            // without taking the file's lock to read it.
            None if len < super::grouped::GROWTH_CLAIM_BYTES => len / crate::layout::BLOCK_BYTES + 2,
            _ => {
                let size = cell.state.read().raw.size;
                let off = off.unwrap_or(size);
                small_blocks(&self.claim_span(off..off.saturating_add(len), size))
            }
        };
        self.regions_upkeep_for(small.max(1), OpenLock::Try);
    }

    /// [`regions_upkeep`](Self::regions_upkeep) before `incoming` more small keys (a
    /// request that may place more than a group holds). `OpenLock::Wait`: take the opening
    /// lock even if another request holds it (a request whose keys found no room).
    pub(crate) fn regions_upkeep_for(&self, incoming: u64, lock: OpenLock) {
        let wait = lock == OpenLock::Wait;
        let FileMap::Hash(t) = &self.map else { return };
        let Some(g) = t.groups() else { return };
        let Some(r) = &g.regions else { return };
        // A request whose key found its chain full (`Wait`) opens groups even under the
        // target load: a new group tops every key's chain. Concurrent writers found this
        // (issue 53): while their openings lag, keys spill up into the newest groups and
        // fill them though the older ones below have room, which no chain reaches.
        let wants = wait || r.wants_open(incoming);
        if !r.opening() && !wants {
            return;
        }
        // The back-off spares retries of waiting moves and of openings that found no free
        // group, not openings the load asks for.
        if !wait && (!wants || r.no_free()) && !r.may_try() {
            return;
        }
        let _one = match lock {
            OpenLock::Wait => r.open_lock.lock(),
            OpenLock::Try => match r.open_lock.try_lock() {
                Some(l) => l,
                None => return,
            },
        };
        let mut done = !r.opening() || self.finish_moves(t, g, r);
        if wants {
            // Opens even when earlier moves wait (a memory-mapped file): lookups try
            // every bucket a key had since the first unfinished opening.
            if g.open_groups(r.to_open(incoming)) == 0 {
                r.set_no_free(true); // the open ones fill up
                r.try_failed();
                return;
            }
            r.set_no_free(false);
            done = self.finish_moves(t, g, r);
        }
        if done {
            r.try_succeeded();
        } else {
            r.try_failed();
        }
    }

    /// Steps 2 to 4 for every opening in progress. True when they are finished.
    fn finish_moves(&self, t: &HashTable<D>, g: &Groups<D>, r: &Regions) -> bool {
        let n = r.len();
        let region = |f: &mut dyn FnMut(u64, u64, u64)| {
            for i in 0..n {
                let base = r.group(i) * GROUP_SLOTS;
                for s in base..base + GROUP_SLOTS {
                    f(i, s, t.load(s));
                }
            }
        };
        let mut waiting = Vec::new();
        region(&mut |_, s, v| {
            if matches!(classify(v, t.nslots()), Entry::Reserved { .. }) {
                waiting.push((s, v));
            }
        });
        for _ in 0..RESERVATION_POLLS {
            waiting.retain(|&(s, v)| t.load(s) == v);
            if waiting.is_empty() {
                break;
            }
            std::thread::yield_now();
        }
        if !waiting.is_empty() {
            return false;
        }
        // A key belongs in its bucket's group, or below it where it spilled from there.
        let mut movers = Vec::new();
        region(&mut |i, s, v| {
            if let Entry::Key { .. } = classify(v, t.nslots()) {
                let b = r.bucket(v, n);
                if b != i && r.spilled_from(v, i) != Some(b) {
                    movers.push((s, v));
                }
            }
        });
        let mut done = true;
        let mut left: Vec<u64> = Vec::new();
        for (s, v) in movers {
            match self.move_to_bucket(t, s, v) {
                Ok(true) => left.push(s / GROUP_SLOTS),
                Ok(false) => {}
                Err(_) => done = false,
            }
        }
        // The moves' own purges kept tombstones that later moves' keys needed: the groups
        // keys left are purged once more.
        left.dedup();
        for g in left {
            t.purge_group(g);
        }
        if done {
            g.finish_opening();
        }
        done
    }

    /// Moves key `v` from slot `s` to a slot on its path now (in its new bucket's group):
    /// Ok(true). Ok(false) when the key is no longer there (freed, or moved by its file's
    /// own write).
    fn move_to_bucket(&self, t: &HashTable<D>, s: u64, v: u64) -> Result<bool> {
        let Entry::Key { ino, lblk } = classify(v, t.nslots()) else { return Ok(false) };
        let cell = self.cell(Ino(ino))?;
        let mut st = cell.state.try_write().ok_or(Error::Busy)?;
        if t.load(s) != v {
            return Ok(false);
        }
        if st.freed || self.mapped_anywhere(&cell) {
            return Err(Error::Busy);
        }
        let to = t.reserve(v)?;
        let freed = t.switch_out(Pblk(s));
        self.relocate(t, s, v, to, crate::mapping::hashfs::TOMBSTONE)?;
        t.switched_out(&[freed]);
        t.purge(&[freed]);
        cell.tcache.invalidate_all();
        if let Some(dir) = st.dir.as_mut() {
            dir.remap(Lblk(u64::from(lblk)), to);
        }
        Ok(true)
    }
}

/// The blocks of the bytes `span` that lie outside the whole 2 MiB chunks it covers: the
/// most small keys a request over it can place.
fn small_blocks(span: &Range<u64>) -> u64 {
    if span.is_empty() {
        return 0;
    }
    let blocks = crate::fs::data::blocks_for(span.end) - span.start / crate::layout::BLOCK_BYTES;
    let whole = crate::fs::data::whole_blocks(span);
    let chunks = (whole.end.0 / GROUP_SLOTS).saturating_sub(whole.start.0.div_ceil(GROUP_SLOTS));
    blocks - chunks * GROUP_SLOTS
}

#[cfg(test)]
mod tests {
    use super::small_blocks;

    #[test]
    fn small_blocks_leave_out_whole_chunks() {
        const MIB: u64 = 1 << 20;
        assert_eq!(small_blocks(&(0..4096)), 1);
        assert_eq!(small_blocks(&(100..4097)), 2);
        assert_eq!(small_blocks(&(0..MIB)), 256);
        assert_eq!(small_blocks(&(0..2 * MIB)), 0);
        assert_eq!(small_blocks(&(MIB..5 * MIB)), 512);
        assert_eq!(small_blocks(&(4096..2 * MIB + 4096)), 512);
        assert_eq!(small_blocks(&(0..1 << 30)), 0);
        assert_eq!(small_blocks(&(5..5)), 0);
    }
}
