//! Tombstone purging and repair of the HashFS table (the invariant and the scheme are in
//! the module above): after frees, per group with the regions placement, and the whole
//! table at recovery.

#![forbid(unsafe_code)]

use super::{classify, Entry, Freed, HashTable, SlotFlush, EMPTY, GROUP_SLOTS, TOMBSTONE};
use crate::layout::Ino;
use crate::pm::PmDevice;

impl<D: PmDevice> HashTable<D> {
    /// Turns freed slots into EMPTY where no probe path needs them, together with the
    /// tombstones on the freed keys' own paths that only those keys needed.
    pub fn purge(&self, freed: &[Freed]) {
        if freed.is_empty() {
            return;
        }
        let _g = self.purge_lock.write();
        if let Some(r) = self.regions() {
            for g in r.take_unblocked() {
                self.purge_clusters(g * GROUP_SLOTS, GROUP_SLOTS);
            }
        }
        // From the highest slot down: a run of freed slots (a claimed group's blocks) then
        // becomes EMPTY at its top slot's purge, which finds EMPTY past it and walks the
        // tombstones below; from the bottom up, each purge walked the run above it.
        let mut order: Vec<&Freed> = freed.iter().collect();
        order.sort_unstable_by_key(|f| std::cmp::Reverse(f.slot));
        for f in order {
            self.purge_one(f.slot);
            let mut t = f.home;
            while t != f.slot {
                if self.load(t) == TOMBSTONE {
                    self.purge_one(t);
                }
                t = self.next(t);
            }
        }
    }

    /// The start of the probe path that reaches the entry `v` at `slot` (None for EMPTY
    /// and TOMBSTONE), and the slot after `s` on a path: for checks that walk paths.
    pub fn path_home(&self, v: u64, slot: u64) -> Option<u64> {
        self.home_at(v, slot)
    }
    pub fn next_slot(&self, s: u64) -> u64 {
        self.next(s)
    }

    /// Where the probe path of the entry `v` at `slot` starts: its key's home, the home a
    /// reservation records, or the slot itself for a key its group places.
    pub(super) fn home_at(&self, v: u64, slot: u64) -> Option<u64> {
        match classify(v, self.nslots) {
            Entry::Key { ino, lblk } => match self.placement.groups() {
                Some(g) if g.holds(Ino(ino), lblk, slot) => Some(slot),
                // A small key's path is in the group it lies in (its bucket's, or the
                // bucket it had before an opening whose moves are not done).
                Some(g) if self.placement.in_groups() && slot / GROUP_SLOTS < g.count() => {
                    g.regions.as_ref().map(|r| r.home_in(v, slot / GROUP_SLOTS))
                }
                _ => Some(self.home(v)),
            },
            Entry::Reserved { home } => Some(home),
            _ => None,
        }
    }

    fn purge_one(&self, i: u64) {
        if self.load(i) != TOMBSTONE {
            return;
        }
        let mut j = self.next(i);
        for _ in 1..self.span() {
            let v = self.load(j);
            if v == EMPTY {
                break;
            }
            if let Some(h) = self.home_at(v, j) {
                if self.dist(h, j) >= self.dist(i, j) {
                    return; // the key at j probes through i
                }
            }
            j = self.next(j);
        }
        if self.regions().is_some_and(|r| r.keeps_full(i)) {
            return; // keys spilled past this group: it stays without EMPTY slots
        }
        // A tombstone followed by EMPTY lies on no path that reaches a key. (The run of
        // them is flushed once: `SlotFlush`.)
        let mut flush = SlotFlush::new(self);
        self.dev.store_u64(self.slot_off(i), EMPTY);
        flush.stored(i);
        let mut k = self.prev(i);
        for _ in 1..self.span() {
            if self.load(k) != TOMBSTONE {
                break;
            }
            self.dev.store_u64(self.slot_off(k), EMPTY);
            flush.stored(k);
            k = self.prev(k);
        }
    }

    fn set_empty(&self, s: u64) {
        let off = self.slot_off(s);
        self.dev.store_u64(off, EMPTY);
        self.dev.flush(off, 8);
    }

    /// Recovery and repair: restores (I1) by turning EMPTY slots on a key's path into
    /// tombstones, then purges every unneeded tombstone in one linear pass. Returns the
    /// number of slots changed. Runs with the file system quiescent.
    pub fn repair_and_purge_all(&self) -> u64 {
        let _g = self.purge_lock.write();
        let mut changed = match self.placement.groups() {
            Some(g) => g.repair(self),
            None => 0,
        };
        // Regions placement: a group keys spilled past holds no EMPTY slot (the spills
        // were counted again by the repair's recount).
        if let Some(r) = self.regions() {
            for i in 0..r.len() {
                let base = r.group(i) * GROUP_SLOTS;
                if r.keeps_full(base) {
                    for s in (base..base + GROUP_SLOTS).filter(|&s| self.load(s) == EMPTY) {
                        self.dev.store_u64(self.slot_off(s), TOMBSTONE);
                        self.dev.flush(self.slot_off(s), 8);
                        changed += 1;
                    }
                }
            }
        }
        // The keys found a batch of slots at a time (`HashTable::batches`); their paths'
        // slots are read and stored on the device.
        let found: Result<(), std::convert::Infallible> = self.batches(|j0, batch| {
            for (j, &v) in (j0..).zip(batch) {
                if v == EMPTY || v == TOMBSTONE {
                    continue;
                }
                if let Some(h) = self.home_at(v, j) {
                    let mut s = h;
                    while s != j {
                        if self.load(s) == EMPTY {
                            self.dev.store_u64(self.slot_off(s), TOMBSTONE);
                            self.dev.flush(self.slot_off(s), 8);
                            changed += 1;
                        }
                        s = self.next(s);
                    }
                }
            }
            Ok(())
        });
        let Ok(()) = found;
        if self.placement.in_groups() {
            let groups = self.placement.groups().map_or(0, |g| g.count());
            for g in 0..groups {
                changed += self.purge_clusters(g * GROUP_SLOTS, GROUP_SLOTS);
            }
            changed
        } else {
            changed + self.purge_clusters(0, self.nslots)
        }
    }

    /// Regions placement: purges every unneeded tombstone of group `g` (after an
    /// opening moved keys out of it).
    pub fn purge_group(&self, g: u64) {
        if self.placement.in_groups() {
            let _g = self.purge_lock.write();
            self.purge_clusters(g * GROUP_SLOTS, GROUP_SLOTS);
        }
    }

    /// Purges every unneeded tombstone of the cycle `base .. base + len` (the table, or a
    /// group) in one pass. Clusters are runs of non-EMPTY slots; each is walked backward,
    /// tracking the earliest home (as an offset from the cluster start) among the keys
    /// after the position.
    fn purge_clusters(&self, base: u64, len: u64) -> u64 {
        if self.regions().is_some_and(|r| r.keeps_full(base)) {
            return 0;
        }
        let mut changed = 0;
        if self.placement.in_groups() {
            // A group: mark the slots some entry's path crosses (a group kept full by
            // spills may have no EMPTY slot to start a cluster walk from).
            let mut crossed = [false; GROUP_SLOTS as usize];
            for p in base..base + len {
                if let Some(mut h) = self.home_at(self.load(p), p) {
                    while h != p {
                        crossed[(h - base) as usize] = true;
                        h = self.next(h);
                    }
                }
            }
            for p in base..base + len {
                if !crossed[(p - base) as usize] && self.load(p) == TOMBSTONE {
                    self.set_empty(p);
                    changed += 1;
                }
            }
            return changed;
        }
        // The whole table, at recovery (the only caller outside a group): read a window at
        // a time.
        debug_assert!(base == 0 && len == self.nslots);
        let mut w = Window::default();
        let Some(start) = (base..base + len).find(|&s| w.get(self, s) == EMPTY) else {
            return 0; // no EMPTY slot at all: every tombstone may be needed
        };
        let ahead = |a: u64, k: u64| base + (a - base + k) % len;
        let mut s = self.next(start);
        let mut visited = 1;
        while visited < len {
            if w.get(self, s) == EMPTY {
                // The EMPTY slots after it in the window, at once (the table's cycle is
                // `0..nslots` here, and a window never crosses its end).
                let run = w.empty_run(s).min(len - visited);
                s = (s + run) % self.nslots;
                visited += run;
                continue;
            }
            let a = s;
            let mut run = 0u64;
            while w.get(self, s) != EMPTY && visited < len {
                run += 1;
                s = self.next(s);
                visited += 1;
            }
            let mut min_home = u64::MAX;
            for k in (0..run).rev() {
                let p = ahead(a, k);
                let v = w.get(self, p);
                if let Some(h) = self.home_at(v, p) {
                    min_home = min_home.min(self.dist(a, h).min(k));
                } else if v == TOMBSTONE && min_home > k {
                    self.set_empty(p);
                    w.set(p, EMPTY);
                    changed += 1;
                }
            }
        }
        changed
    }
}

/// The table's slots read a batch at a time (as [`HashTable::batches`] reads them) for the
/// purge's walk over the whole table after a crash, which goes backward through clusters
/// and across batches: where the file system is quiescent (nothing but the pass changes a
/// slot), a device load of each slot, with its count in the device's statistics, made
/// that pass much of a takeover (2.2-7.1 ms of a 1 GiB image's recovery after a
/// participant died, with the key pass above). The pass's own stores go to the device and,
/// through [`Window::set`], to the window.
#[derive(Default)]
struct Window {
    first: u64,
    slots: Vec<u64>,
}

impl Window {
    const SLOTS: u64 = super::BATCH_SLOTS;

    fn get<D: PmDevice>(&mut self, t: &HashTable<D>, s: u64) -> u64 {
        if !(self.first..self.first + self.slots.len() as u64).contains(&s) {
            self.first = s - s % Self::SLOTS;
            self.slots.resize(Self::SLOTS.min(t.nslots - self.first) as usize, 0);
            t.read_slots(self.first, &mut self.slots);
        }
        self.slots[(s - self.first) as usize]
    }

    /// How many EMPTY slots follow from `s` on (itself included) in the window, which
    /// holds `s`.
    fn empty_run(&self, s: u64) -> u64 {
        let rest = &self.slots[(s - self.first) as usize..];
        rest.iter().position(|&v| v != EMPTY).unwrap_or(rest.len()) as u64
    }

    fn set(&mut self, s: u64, v: u64) {
        if let Some(x) = s.checked_sub(self.first).and_then(|i| self.slots.get_mut(i as usize)) {
            *x = v;
        }
    }
}
