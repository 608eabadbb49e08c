//! Per-CPU undo journals (after NOVA's lite journals), with 64-byte checksummed entries
//! and global transaction ids.
//!
//! A transaction collects its writes in DRAM; `commit` then
//! 1. logs the old contents of every target range as undo entries, sets the journal
//!    header's `active_txid`, flushes, fences (the undo log is durable before any change);
//! 2. applies the writes in place (8-byte aligned words with atomic stores), flushes,
//!    fences;
//! 3. clears `active_txid`, flushes, fences (the transaction is durable and complete).
//!
//! Recovery undoes, newest transaction first, every journal whose `active_txid` is set,
//! using the entries that carry that txid and a valid checksum. Stale entries from older
//! transactions carry other txids; at mount the txid counter starts above every txid
//! found in any journal, so a stale entry can never be taken for a live one.

use crate::layout::{Geometry, Ino, INODE_BYTES};
use crate::pm::{DevOffset, PmDevice};
use crate::share::{Acquired, Participant, Participants, Region, RobustLock};
use crate::{Error, Result};
use bytemuck::Zeroable;
use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::layout::journal::{
    JournalHeader, UndoEntry, ACTIVE_TXID_OFF, ENTRY_BYTES, ENTRY_DATA_BYTES, JOURNAL_HEADER_BYTES, JOURNAL_MAGIC,
};

/// What recovery did.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    pub rolled_back_txids: Vec<u64>,
    pub undo_entries_applied: usize,
}

/// State of one journal, as fsck sees it.
#[derive(Clone, Debug)]
pub struct JournalStatus {
    pub index: u32,
    pub header_ok: bool,
    pub active_txid: u64,
}

/// The per-CPU journals of a mounted image.
pub struct Journals<D: PmDevice> {
    dev: Arc<D>,
    geo: Geometry,
    locks: Locks,
    next_txid: AtomicU64,
    /// Set once a shared mount is up: from then on every transaction is made inside a
    /// call, which holds the image lock and publishes what it changed (checked in debug
    /// builds: a call that skipped `enter` would do neither).
    calls_only: std::sync::atomic::AtomicBool,
    /// A shared mount's region, whose record of the lock holder's call scope
    /// (`share/scope.rs`) names each inode a transaction writes before it writes it.
    region: std::sync::OnceLock<Arc<crate::share::ImageRegion>>,
}

/// Where the journals' locks live: in this process, or in a region shared by the
/// processes of one image (issue 55), where a lock taken over from a dead holder has its
/// journal rolled back first ([`roll_back_one`]).
enum Locks {
    Local(Vec<Mutex<()>>),
    Shared(SharedLocks),
}

/// The journals' locks in a shared region: the participant table at `parts`, one
/// [`RobustLock`] per journal from `first`, taken as participant `me`.
pub struct SharedLocks {
    pub region: Arc<Region>,
    pub parts: usize,
    pub first: usize,
    pub me: Participant,
}

impl SharedLocks {
    fn who(&self) -> &Participants {
        self.region.at(self.parts)
    }
    fn lock(&self, i: usize) -> &RobustLock {
        self.region.at(self.first + i * std::mem::size_of::<RobustLock>())
    }
}

/// A held journal lock, released when dropped.
enum Held<'a> {
    /// Held for its drop, which unlocks.
    #[allow(dead_code)]
    Local(MutexGuard<'a, ()>),
    Shared(&'a RobustLock),
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Held::Shared(l) = self {
            l.unlock();
        }
    }
}

/// Writes the empty journal headers (mkfs).
pub fn format<D: PmDevice>(dev: &D, geo: &Geometry) {
    for i in 0..geo.journal_count {
        let base = geo.journal_base(i);
        dev.zero(base, geo.journal_blocks as u64 * crate::layout::BLOCK_BYTES);
        let h = JournalHeader { magic: JOURNAL_MAGIC, index: i, ..JournalHeader::zeroed() };
        dev.write(base, bytemuck::bytes_of(&h));
        dev.flush(base, geo.journal_blocks as u64 * crate::layout::BLOCK_BYTES);
    }
    dev.fence();
}

fn read_header<D: PmDevice>(dev: &D, geo: &Geometry, i: u32) -> JournalHeader {
    let mut h = JournalHeader::zeroed();
    dev.read(geo.journal_base(i), bytemuck::bytes_of_mut(&mut h));
    h
}

fn read_entry<D: PmDevice>(dev: &D, geo: &Geometry, i: u32, n: u64) -> UndoEntry {
    let mut e = UndoEntry::zeroed();
    dev.read(geo.journal_base(i) + JOURNAL_HEADER_BYTES + n * ENTRY_BYTES, bytemuck::bytes_of_mut(&mut e));
    e
}

/// Reports every journal's header state without changing anything.
pub fn inspect<D: PmDevice>(dev: &D, geo: &Geometry) -> Vec<JournalStatus> {
    (0..geo.journal_count)
        .map(|i| {
            let h = read_header(dev, geo, i);
            JournalStatus { index: i, header_ok: h.magic == JOURNAL_MAGIC && h.index == i, active_txid: h.active_txid }
        })
        .collect()
}

/// A journal's open transaction: its txid and its undo entries in the order logged.
type OpenTx = (u64, Vec<UndoEntry>);

/// Journal `i`'s open transaction, if it has one, and the largest txid the journal holds
/// anywhere.
fn open_transaction<D: PmDevice>(dev: &D, geo: &Geometry, i: u32) -> Result<(Option<OpenTx>, u64)> {
    let h = read_header(dev, geo, i);
    if h.magic != JOURNAL_MAGIC || h.index != i {
        return Err(Error::corrupt(format!("journal {i}: bad header")));
    }
    let mut max_txid = h.active_txid;
    let mut live = Vec::new();
    let mut in_prefix = h.active_txid != 0;
    for n in 0..geo.journal_entries() {
        let e = read_entry(dev, geo, i, n);
        if e.checksum == e.compute_checksum() {
            max_txid = max_txid.max(e.txid);
        }
        if in_prefix {
            if e.is_valid_for(h.active_txid, dev.len_bytes()) {
                live.push(e);
            } else {
                in_prefix = false;
            }
        }
    }
    Ok(((h.active_txid != 0).then_some((h.active_txid, live)), max_txid))
}

/// Undoes one transaction's entries, newest first (flushed, not fenced).
fn undo<D: PmDevice>(dev: &D, entries: &[UndoEntry], report: &mut RecoveryReport) {
    for e in entries.iter().rev() {
        dev.write(DevOffset(e.offset()), &e.data[..e.data_len()]);
        dev.flush(DevOffset(e.offset()), e.data_len() as u64);
        report.undo_entries_applied += 1;
    }
}

/// Marks journal `i` as holding no open transaction (flushed, not fenced).
fn close_journal<D: PmDevice>(dev: &D, geo: &Geometry, i: u32) {
    let off = geo.journal_base(i) + ACTIVE_TXID_OFF;
    dev.store_u64(off, 0);
    dev.flush(off, 8);
}

/// Rolls back every uncommitted transaction; returns the report and the first txid that
/// is safe to use.
pub fn recover<D: PmDevice>(dev: &D, geo: &Geometry) -> Result<(RecoveryReport, u64)> {
    let mut max_txid = 0u64;
    let mut txs: Vec<(u64, u32, Vec<UndoEntry>)> = Vec::new();
    for i in 0..geo.journal_count {
        let (open, max) = open_transaction(dev, geo, i)?;
        max_txid = max_txid.max(max);
        if let Some((txid, live)) = open {
            txs.push((txid, i, live));
        }
    }
    let mut report = RecoveryReport::default();
    txs.sort_by_key(|t| std::cmp::Reverse(t.0));
    for (txid, _, entries) in &txs {
        undo(dev, entries, &mut report);
        report.rolled_back_txids.push(*txid);
    }
    dev.fence();
    for (_, i, _) in &txs {
        close_journal(dev, geo, *i);
    }
    dev.fence();
    Ok((report, max_txid + 1))
}

/// Rolls back journal `i`'s open transaction alone, if it has one, leaving every other
/// journal as it is: what a survivor does with the journal of a process that died
/// holding it (docs/design.md, "Many processes on one image"; the locks the dead process
/// held keep every other transaction off the bytes it changed). The same two steps as
/// [`recover`]: the old bytes back and durable, then the journal closed. Shared journals
/// call it on taking a dead holder's lock.
pub fn roll_back_one<D: PmDevice>(dev: &D, geo: &Geometry, i: u32) -> Result<Option<u64>> {
    let (open, _) = open_transaction(dev, geo, i)?;
    let Some((txid, entries)) = open else { return Ok(None) };
    undo(dev, &entries, &mut RecoveryReport::default());
    dev.fence();
    close_journal(dev, geo, i);
    dev.fence();
    Ok(Some(txid))
}

impl<D: PmDevice> Journals<D> {
    /// Journals of a recovered image; `first_txid` comes from [`recover`].
    pub fn new(dev: Arc<D>, geo: Geometry, first_txid: u64) -> Journals<D> {
        Journals {
            locks: Locks::Local((0..geo.journal_count).map(|_| Mutex::new(())).collect()),
            dev,
            geo,
            next_txid: AtomicU64::new(first_txid.max(1)),
            calls_only: Default::default(),
            region: Default::default(),
        }
    }

    /// From now on every transaction is made inside a call of a shared mount (checked in
    /// debug builds).
    pub(crate) fn only_in_calls(&self, region: &Arc<crate::share::ImageRegion>) {
        self.calls_only.store(true, Ordering::Relaxed);
        let _ = self.region.set(region.clone());
    }

    /// Journals whose locks are shared with the other processes of the image (issue 55;
    /// nothing uses them yet but their test). `first_txid` must be above every txid any
    /// participant uses.
    #[allow(dead_code)]
    pub fn shared(dev: Arc<D>, geo: Geometry, first_txid: u64, locks: SharedLocks) -> Journals<D> {
        Journals {
            locks: Locks::Shared(locks),
            dev,
            geo,
            next_txid: AtomicU64::new(first_txid.max(1)),
            calls_only: Default::default(),
            region: Default::default(),
        }
    }

    /// The transaction id the next transaction gets.
    pub fn next_txid(&self) -> u64 {
        self.next_txid.load(Ordering::Relaxed)
    }

    /// Raises the next transaction id to at least `n` (a shared mount: ids another
    /// participant used are not used again).
    pub fn raise_next_txid(&self, n: u64) {
        if self.next_txid.load(Ordering::Relaxed) < n {
            self.next_txid.fetch_max(n, Ordering::Relaxed);
        }
    }

    /// Takes journal `i`'s lock if it is free (or its holder died: its transaction is
    /// rolled back first; a journal that cannot be stays held, out of use until the next
    /// mount's recovery).
    fn try_take(&self, i: usize) -> Option<Held<'_>> {
        match &self.locks {
            Locks::Local(l) => l[i].try_lock().map(Held::Local),
            Locks::Shared(sh) => {
                let got = sh.lock(i).try_lock(sh.me, sh.who())?;
                self.taken(i, got, sh).then_some(Held::Shared(sh.lock(i)))
            }
        }
    }

    /// Waits for journal `i`'s lock.
    fn take(&self, i: usize) -> Option<Held<'_>> {
        match &self.locks {
            Locks::Local(l) => Some(Held::Local(l[i].lock())),
            Locks::Shared(sh) => {
                let got = sh.lock(i).lock(sh.me, sh.who());
                self.taken(i, got, sh).then_some(Held::Shared(sh.lock(i)))
            }
        }
    }

    /// After taking journal `i`'s shared lock: whether it may be used (a dead holder's
    /// transaction rolled back).
    fn taken(&self, i: usize, got: Acquired, sh: &SharedLocks) -> bool {
        let Acquired::FromDead(dead) = got else { return true };
        match roll_back_one(&*self.dev, &self.geo, i as u32) {
            Ok(_) => true,
            Err(e) => {
                eprintln!(
                    "hashfs: journal {i} of dead participant {dead} cannot be rolled back ({e}); left to recovery"
                );
                let _ = sh; // the lock stays ours: nobody else uses the journal either
                false
            }
        }
    }

    fn count(&self) -> usize {
        match &self.locks {
            Locks::Local(l) => l.len(),
            Locks::Shared(_) => self.geo.journal_count as usize,
        }
    }

    /// Starts a transaction on this CPU's journal (or any free one).
    pub fn begin(&self) -> Tx<'_, D> {
        let n = self.count();
        let cpu = crate::pm::current_cpu();
        let mut chosen = None;
        for k in 0..n {
            let i = (cpu + k) % n;
            if let Some(g) = self.try_take(i) {
                chosen = Some((i, g));
                break;
            }
        }
        // Every journal busy: wait for this CPU's (or, shared, the next one whose dead
        // holder's transaction could be rolled back: with none left, the media is corrupt
        // in every journal, which a mount refuses too; shared journals are not used by
        // the file system yet, and `begin` must become fallible before they are).
        let (index, guard) = match chosen {
            Some(c) => c,
            None => (0..n)
                .map(|k| (cpu + k) % n)
                .find_map(|i| self.take(i).map(|g| (i, g)))
                .expect("every journal is corrupt; run hashfs fsck"),
        };
        Tx {
            journals: self,
            _guard: guard,
            index: index as u32,
            txid: self.next_txid.fetch_add(1, Ordering::Relaxed),
            writes: Vec::new(),
            unlogged: Vec::new(),
            hooks: Vec::new(),
        }
    }
}

/// How a transaction ended, for what must happen after it ([`Tx::after_commit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Its writes are durable.
    Committed,
    /// It failed, or was dropped: none of its writes happened.
    Abandoned,
}

/// A metadata transaction: writes are collected, then made atomic and durable by
/// [`Tx::commit`]. Dropping a transaction without committing discards its writes.
pub struct Tx<'a, D: PmDevice> {
    journals: &'a Journals<D>,
    _guard: Held<'a>,
    index: u32,
    txid: u64,
    writes: Vec<(u64, Vec<u8>)>,
    unlogged: Vec<(u64, u64)>,
    /// Run once the transaction committed or will not.
    hooks: Vec<Box<dyn FnOnce(Outcome) + 'a>>,
}

impl<D: PmDevice> Drop for Tx<'_, D> {
    fn drop(&mut self) {
        for h in std::mem::take(&mut self.hooks) {
            h(Outcome::Abandoned);
        }
    }
}

impl<'a, D: PmDevice> Tx<'a, D> {
    /// Runs `f(Outcome::Committed)` after the commit, or `f(Outcome::Abandoned)` if the
    /// transaction fails or is dropped (for locks and allocations that must outlive the
    /// commit).
    pub fn after_commit(&mut self, f: impl FnOnce(Outcome) + 'a) {
        self.hooks.push(Box::new(f));
    }

    /// Journal entries the transaction needs so far.
    pub fn undo_entries(&self) -> u64 {
        self.writes.iter().map(|(_, d)| d.len().div_ceil(ENTRY_DATA_BYTES) as u64).sum()
    }

    pub fn write(&mut self, off: DevOffset, data: &[u8]) {
        let off = off.0;
        self.writes.push((off, data.to_vec()));
    }

    pub fn write_u64(&mut self, off: DevOffset, value: u64) {
        let off = off.0;
        debug_assert!(off.is_multiple_of(8));
        self.writes.push((off, value.to_le_bytes().to_vec()));
    }

    /// An 8-byte store applied with the transaction's writes but without an undo record:
    /// for HashFS keys of newly written blocks, which recovery frees by itself when the
    /// transaction that would have made them reachable (the inode size) rolls back. It is
    /// ordered after every flush issued before `commit` (the data the key points to).
    pub fn publish_u64(&mut self, off: DevOffset, value: u64) {
        let off = off.0;
        debug_assert!(off.is_multiple_of(8));
        self.unlogged.push((off, value));
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.unlogged.is_empty()
    }

    /// Makes every write of the transaction durable, all or nothing.
    pub fn commit(mut self) -> Result<()> {
        let r = self.apply();
        let outcome = if r.is_ok() { Outcome::Committed } else { Outcome::Abandoned };
        for h in std::mem::take(&mut self.hooks) {
            h(outcome);
        }
        r
    }

    fn apply(&self) -> Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        debug_assert!(
            !self.journals.calls_only.load(Ordering::Relaxed) || crate::fs::shared::recording(),
            "a transaction on a shared image outside a call"
        );
        self.scope_inodes();
        self.log_undo()?;
        self.write_in_place();
        self.finish();
        self.note_inodes();
        Ok(())
    }

    /// Names the inodes the transaction writes in a shared mount's record of the call's
    /// scope, before any of its stores (`share/scope.rs`).
    fn scope_inodes(&self) {
        let Some(region) = self.journals.region.get().filter(|_| crate::fs::shared::recording()) else { return };
        self.for_each_inode(|ino| region.words().scope.inode(ino, || region.inode_bit(ino)));
    }

    /// The inodes whose bytes in the inode table the transaction writes.
    fn for_each_inode(&self, mut f: impl FnMut(Ino)) {
        let geo = &self.journals.geo;
        let table = geo.inode_table_off..geo.inode_table_off + geo.inode_count * INODE_BYTES as u64;
        for (off, data) in &self.writes {
            if table.contains(off) {
                let first = (off - geo.inode_table_off) / INODE_BYTES as u64;
                let last = (off + data.len() as u64 - 1 - geo.inode_table_off) / INODE_BYTES as u64;
                for i in first..=last.min(geo.inode_count - 1) {
                    f(Ino(i as u32 + 1));
                }
            }
        }
    }

    /// Tells a shared mount which inodes the transaction changed (`fs/shared/mod.rs`).
    fn note_inodes(&self) {
        if !crate::fs::shared::recording() {
            return;
        }
        self.for_each_inode(crate::fs::shared::touched);
    }

    /// Step 1: the undo log and the header's `active_txid`, durable before any change.
    fn log_undo(&self) -> Result<()> {
        let dev = &*self.journals.dev;
        let geo = &self.journals.geo;
        let base = geo.journal_base(self.index);
        let needed = self.undo_entries();
        if needed > geo.journal_entries() {
            return Err(Error::JournalFull(geo.journal_entries()));
        }
        let mut n = 0u64;
        let mut old = [0u8; ENTRY_DATA_BYTES];
        for (off, data) in &self.writes {
            let mut pos = 0;
            while pos < data.len() {
                let len = (data.len() - pos).min(ENTRY_DATA_BYTES);
                dev.read(DevOffset(off + pos as u64), &mut old[..len]);
                let e = UndoEntry::new(self.txid, off + pos as u64, &old[..len]);
                let eoff = base + JOURNAL_HEADER_BYTES + n * ENTRY_BYTES;
                dev.write(eoff, bytemuck::bytes_of(&e));
                dev.flush(eoff, ENTRY_BYTES);
                pos += len;
                n += 1;
            }
        }
        dev.store_u64(base + ACTIVE_TXID_OFF, self.txid);
        dev.flush(base + ACTIVE_TXID_OFF, 8);
        dev.fence();
        Ok(())
    }

    /// Step 2: the writes in place.
    fn write_in_place(&self) {
        let dev = &*self.journals.dev;
        for &(off, v) in &self.unlogged {
            dev.store_u64(DevOffset(off), v);
            dev.flush(DevOffset(off), 8);
        }
        for (off, data) in &self.writes {
            if data.len() == 8 && off % 8 == 0 {
                dev.store_u64(DevOffset(*off), u64::from_le_bytes(data[..8].try_into().expect("8 bytes")));
            } else {
                dev.write(DevOffset(*off), data);
            }
            dev.flush(DevOffset(*off), data.len() as u64);
        }
        dev.fence();
    }

    /// Step 3: the commit.
    fn finish(&self) {
        let dev = &*self.journals.dev;
        let off = self.journals.geo.journal_base(self.index) + ACTIVE_TXID_OFF;
        dev.store_u64(off, 0);
        dev.flush(off, 8);
        dev.fence();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::superblock::GeometryParams;
    use crate::pm::{CrashDevice, MmapDevice, OpenMode};
    use crate::share::{Participants, Region, RobustLock};

    /// The geometry of every test image here: 1 MiB, two journals of two blocks.
    fn test_geo() -> Geometry {
        Geometry::compute(&GeometryParams {
            image_bytes: 1 << 20,
            inode_count: Some(64),
            journal_count: 2,
            journal_blocks: 2,
            mapping: crate::layout::MappingKind::HashFs,
            grouped: false,
        })
        .unwrap()
    }

    fn setup() -> (Arc<CrashDevice>, Geometry) {
        let geo = test_geo();
        let dev = Arc::new(CrashDevice::new(1 << 20));
        format(&*dev, &geo);
        (dev, geo)
    }

    #[test]
    fn crash_at_every_fence_gives_old_or_new() {
        let (dev, geo) = setup();
        let target = geo.inode_table_off;
        dev.write(DevOffset(target), &[1u8; 100]);
        dev.flush(DevOffset(target), 100);
        dev.fence();
        dev.set_capture(true);
        {
            let j = Journals::new(dev.clone(), geo, 1);
            let mut tx = j.begin();
            tx.write(DevOffset(target), &[2u8; 100]);
            tx.write_u64(DevOffset(target + 200), 0xABCD);
            tx.commit().unwrap();
        }
        let points = dev.take_points();
        assert_eq!(points.len(), 3);
        let mut outcomes = std::collections::HashSet::new();
        for p in &points {
            let images = [p.image_durable_only(), p.image_all_pending()];
            for img in images.iter() {
                let d = CrashDevice::from_image(img);
                recover(&d, &geo).unwrap();
                let mut buf = [0u8; 100];
                d.read(DevOffset(target), &mut buf);
                let w = d.load_u64(DevOffset(target + 200));
                let state = if buf == [1u8; 100] && w == 0 {
                    "old"
                } else if buf == [2u8; 100] && w == 0xABCD {
                    "new"
                } else {
                    panic!("torn state at fence {}: {:?} {w:#x}", p.fence_index, &buf[..4])
                };
                outcomes.insert(state);
            }
        }
        assert!(outcomes.contains("old") && outcomes.contains("new"));
    }

    /// Two transactions open at once in two journals, the newer one over bytes the older
    /// one changed: recovery must undo the newer first, so the bytes go back to what they
    /// were before both, from every crash state, and a crashed recovery recovers the same.
    #[test]
    fn transactions_open_in_two_journals_roll_back_newest_first() {
        let (dev, geo) = setup();
        let x = geo.inode_table_off;
        let y = geo.inode_table_off + 64;
        dev.store_u64(DevOffset(x), 1);
        dev.store_u64(DevOffset(y), 10);
        dev.flush(DevOffset(x), 128);
        dev.fence();
        let j = Journals::new(dev.clone(), geo, 1);
        dev.set_capture(true);
        let mut a = j.begin();
        let mut b = j.begin();
        assert_ne!(a.index, b.index, "the second transaction takes the other journal");
        a.write_u64(DevOffset(x), 2);
        a.write_u64(DevOffset(y), 20);
        a.log_undo().unwrap();
        a.write_in_place();
        b.write_u64(DevOffset(x), 3);
        b.log_undo().unwrap();
        b.write_in_place();
        dev.set_capture(false);
        let mut points = dev.take_points();
        points.push(dev.crash_point_now());
        let mut states = 0;
        for p in &points {
            assert!(p.state_count() <= 1 << 12);
            for state in 0..p.state_count() {
                let mut rest = state;
                let img = p.image_choosing(|i| {
                    let n = p.lines[i].outcomes.len() as u64;
                    let c = rest % n;
                    rest /= n;
                    c as usize
                });
                let d = CrashDevice::from_image(&img);
                d.set_capture(true);
                recover(&d, &geo).unwrap();
                d.set_capture(false);
                assert_eq!(
                    (d.load_u64(DevOffset(x)), d.load_u64(DevOffset(y))),
                    (1, 10),
                    "fence {}, state {state}",
                    p.fence_index
                );
                states += 1;
                // Recovery crashed at each of its fences recovers to the same.
                for rp in d.take_points() {
                    for rimg in [rp.image_durable_only(), rp.image_all_pending()] {
                        let d2 = CrashDevice::from_image(&rimg);
                        recover(&d2, &geo).unwrap();
                        assert_eq!((d2.load_u64(DevOffset(x)), d2.load_u64(DevOffset(y))), (1, 10), "crashed recovery");
                    }
                }
            }
        }
        // The last point has both transactions open and both changes in place.
        let last = CrashDevice::from_image(&points.last().unwrap().image_durable_only());
        assert_eq!(inspect(&last, &geo).iter().filter(|j| j.active_txid != 0).count(), 2);
        assert_eq!(last.load_u64(DevOffset(x)), 3);
        assert!(states > 10);
        drop((a, b));
    }

    /// A participant dies inside its transaction, after logging its undo entries and with
    /// any subset of its in-place stores made (a process's stores are all visible to the
    /// others, flushed or not), while another participant's transaction is open in the
    /// other journal: rolling back the dead one's journal alone restores its bytes, and
    /// leaves the live transaction open and able to commit.
    #[test]
    fn one_journal_rolls_back_alone() {
        let (dev0, geo) = setup();
        let (x, y, z) = (geo.inode_table_off, geo.inode_table_off + 64, geo.inode_table_off + 128);
        for (o, v) in [(x, 1u64), (y, 10), (z, 100)] {
            dev0.store_u64(DevOffset(o), v);
        }
        dev0.flush(DevOffset(x), 192);
        dev0.fence();
        let base = dev0.live_image();
        for subset in 0..4u32 {
            let dev = Arc::new(CrashDevice::from_image(&base));
            let j = Journals::new(dev.clone(), geo, 1);
            let mut dead = j.begin();
            let mut live = j.begin();
            assert_ne!(dead.index, live.index);
            dead.write_u64(DevOffset(x), 2);
            dead.write_u64(DevOffset(y), 20);
            dead.log_undo().unwrap();
            // The dead participant's in-place stores, some of them.
            for (bit, (o, v)) in [(x, 2u64), (y, 20)].into_iter().enumerate() {
                if subset & (1 << bit) != 0 {
                    dev.store_u64(DevOffset(o), v);
                }
            }
            live.write_u64(DevOffset(z), 300);
            live.log_undo().unwrap();
            let dead_index = dead.index;
            std::mem::forget(dead); // it runs no more code: no hooks, no unlock
            let txid = roll_back_one(&*dev, &geo, dead_index).unwrap();
            assert!(txid.is_some(), "subset {subset}");
            assert_eq!((dev.load_u64(DevOffset(x)), dev.load_u64(DevOffset(y))), (1, 10), "subset {subset}");
            assert_eq!(inspect(&*dev, &geo)[dead_index as usize].active_txid, 0);
            assert_ne!(inspect(&*dev, &geo)[live.index as usize].active_txid, 0, "the live transaction stays open");
            assert_eq!(roll_back_one(&*dev, &geo, dead_index).unwrap(), None, "nothing left to roll back");
            live.commit().unwrap();
            assert_eq!(dev.load_u64(DevOffset(z)), 300);
            assert_eq!((dev.load_u64(DevOffset(x)), dev.load_u64(DevOffset(y))), (1, 10));
            // And durably: a crash now recovers the same.
            let after = CrashDevice::from_image(&dev.durable_image());
            recover(&after, &geo).unwrap();
            assert_eq!(
                (after.load_u64(DevOffset(x)), after.load_u64(DevOffset(y)), after.load_u64(DevOffset(z))),
                (1, 10, 300)
            );
        }
    }

    // The region of the shared-journal tests (on /dev/shm: shared with the child process
    // they run as).
    const PARTS_OFF: usize = crate::share::HEADER_BYTES;
    const LOCKS_OFF: usize = PARTS_OFF + std::mem::size_of::<Participants>().next_multiple_of(4096);
    const MARK_OFF: usize = LOCKS_OFF + 64;
    const REGION_LEN: usize = LOCKS_OFF + 4096;

    fn shared_journals(
        img: &std::path::Path,
        region: &std::path::Path,
    ) -> (Arc<MmapDevice>, Journals<MmapDevice>, Arc<Region>) {
        let geo = test_geo();
        let dev = Arc::new(MmapDevice::open(img, OpenMode::Shared).unwrap());
        let id = crate::share::Identity::of_image([0x4A; 16]).unwrap();
        let region = Arc::new(Region::attach(region, &id, REGION_LEN, 0o600).unwrap());
        let me = region.at::<Participants>(PARTS_OFF).join().unwrap();
        let locks = SharedLocks { region: region.clone(), parts: PARTS_OFF, first: LOCKS_OFF, me };
        (dev.clone(), Journals::shared(dev, geo, 1000, locks), region)
    }

    /// The other process of the next test: opens a transaction, logs its undo entries,
    /// makes one of its two in-place stores, says which journal it holds, and waits to be
    /// killed.
    #[test]
    fn shared_journal_child() {
        let (Ok(img), Ok(reg)) =
            (std::env::var("HASHFS_JOURNAL_CHILD_IMAGE"), std::env::var("HASHFS_JOURNAL_CHILD_REGION"))
        else {
            return;
        };
        let geo = test_geo();
        let (dev, j, region) = shared_journals(std::path::Path::new(&img), std::path::Path::new(&reg));
        let x = geo.inode_table_off;
        let mut tx = j.begin();
        tx.write_u64(DevOffset(x), 2);
        tx.write_u64(DevOffset(x + 64), 20);
        tx.log_undo().unwrap();
        dev.store_u64(DevOffset(x), 2);
        region.at::<AtomicU64>(MARK_OFF).store(1 + tx.index as u64, Ordering::Release);
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }

    /// Many processes on one image (issue 55): a process killed inside a transaction
    /// leaves its journal locked and its bytes half changed; the next process to take that
    /// journal rolls it back first, and goes on.
    #[test]
    fn a_journal_held_by_a_killed_process_is_rolled_back_by_the_next_to_take_it() {
        if std::env::var_os("HASHFS_JOURNAL_CHILD_IMAGE").is_some() {
            return;
        }
        let geo = test_geo();
        let dir = tempfile::Builder::new().prefix("hashfs-shared-journal").tempdir_in("/dev/shm").unwrap();
        let (img, reg) = (dir.path().join("img"), dir.path().join("region"));
        let x = geo.inode_table_off;
        {
            let dev = MmapDevice::open(&img, OpenMode::CreateTruncate { size_bytes: 1 << 20 }).unwrap();
            format(&dev, &geo);
            dev.store_u64(DevOffset(x), 1);
            dev.store_u64(DevOffset(x + 64), 10);
            dev.flush(DevOffset(x), 128);
            dev.fence();
        }
        let (dev, j, region) = shared_journals(&img, &reg);
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "journal::tests::shared_journal_child", "--nocapture", "--test-threads", "1"])
            .env("HASHFS_JOURNAL_CHILD_IMAGE", &img)
            .env("HASHFS_JOURNAL_CHILD_REGION", &reg)
            .spawn()
            .unwrap();
        let mark = region.at::<AtomicU64>(MARK_OFF);
        let t = std::time::Instant::now();
        while mark.load(Ordering::Acquire) == 0 {
            assert!(t.elapsed() < std::time::Duration::from_secs(20), "the child never opened its transaction");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let dead_journal = (mark.load(Ordering::Acquire) - 1) as u32;
        assert_eq!(dev.load_u64(DevOffset(x)), 2, "the child's in-place store is visible");
        child.kill().unwrap();
        let who = region.at::<Participants>(PARTS_OFF);
        let owner = region.at::<RobustLock>(LOCKS_OFF + dead_journal as usize * 4).owner().unwrap();
        while who.alive(owner) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // Take journals until the dead one's comes: at most one per journal.
        let mut held = Vec::new();
        let tx = loop {
            let tx = j.begin();
            if tx.index == dead_journal {
                break tx;
            }
            held.push(tx);
            assert!(held.len() < geo.journal_count as usize, "never got the dead process's journal");
        };
        assert_eq!((dev.load_u64(DevOffset(x)), dev.load_u64(DevOffset(x + 64))), (1, 10), "rolled back");
        assert_eq!(inspect(&*dev, &geo)[dead_journal as usize].active_txid, 0);
        let mut tx = tx;
        tx.write_u64(DevOffset(x + 128), 7);
        tx.commit().unwrap();
        assert_eq!(dev.load_u64(DevOffset(x + 128)), 7);
        drop(held);
        child.wait().unwrap();
    }

    #[test]
    fn recovery_restarts_txids_above_stale_entries() {
        let (dev, geo) = setup();
        let j = Journals::new(dev.clone(), geo, 500);
        let mut tx = j.begin();
        tx.write_u64(DevOffset(geo.inode_table_off), 9);
        tx.commit().unwrap();
        let (report, next) = recover(&*dev, &geo).unwrap();
        assert!(report.rolled_back_txids.is_empty());
        assert!(next > 500);
    }

    #[test]
    fn oversized_transaction_is_refused_before_any_change() {
        let (dev, geo) = setup();
        let j = Journals::new(dev.clone(), geo, 1);
        let mut tx = j.begin();
        let big = vec![7u8; (geo.journal_entries() as usize + 1) * ENTRY_DATA_BYTES];
        tx.write(DevOffset(geo.inode_table_off), &big);
        assert!(matches!(tx.commit(), Err(Error::JournalFull(_))));
        assert_eq!(dev.load_u64(DevOffset(geo.inode_table_off)), 0);
    }
}
