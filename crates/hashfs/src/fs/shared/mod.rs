//! A mount shared by many processes (issue 55; docs/design.md, "Many processes on one
//! image"): each participant mounts the image itself, with its own DRAM caches, and the
//! image's shared region (`share::ImageRegion`) coordinates them.
//!
//! This first step is coarse: every call of the file system holds the image's robust
//! lock, so that at most one participant (and in it one thread) is inside the file
//! system at a time. What a call changed is published as it lets go of the lock: each
//! inode whose media bytes it changed goes into the ring of changes, with the table's
//! used count and the next transaction id. The next participant to take the lock first
//! catches up: each inode named since it last held it is read again (its cached copy,
//! directory index and translation cache dropped), or every cached inode when it fell
//! further behind than the ring holds. The inode bitmap every participant allocates from
//! is the region's (`share::InodeBits`), put there by each mount that scans the inode
//! table (the first participant's, and a recovery's).
//!
//! A participant killed holding the lock is found by the next to want it, which recovers
//! the image exactly as a mount after a power failure does (journals rolled back, strays
//! freed, sizes settled), but keeps the unlinked files that live participants still have
//! open; then every participant refreshes everything it caches.
//!
//! The first participant to take the lock on an image no one has mounted runs the
//! ordinary mount (recovery included); later ones read the image as it is, beside the
//! others (`join.rs`). The last to leave marks the image clean. Only HashFS's mapping is
//! shared so far (the others keep allocation state in DRAM that is not yet published); its
//! grouped placements' volatile state lives in the region (`share::TableLayout`).

mod for_children;
mod fork;
mod fork_mutex;
mod join;
mod mapped;
mod read_only;
mod read_side;
pub mod record_locks;
mod takeover;
#[cfg(test)]
mod test_image;
pub use fork::Fork;
pub use fork_mutex::{ForkMutex, ForkMutexGuard, ForkRwLock};
pub(crate) use join::mount;
pub(crate) use mapped::PinOwner;
pub(crate) use read_only::{mount_read_only, ReadOnlyMount};

use super::hashfs::append_tag;
use super::recovery::{self, MountAs, MountReport};
use super::verbs::{on_map, MapVerbs};
use super::FsInner;
use crate::layout::inode::InodeState;
use crate::layout::{Ino, SB_STATE_CLEAN};
use crate::pm::PmDevice;
use crate::share::{Acquired, Change, ImageRegion, Participant, TableLayout, CHANGE_RING};
use crate::{Error, Result};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A participant's hold on an image's region.
pub(crate) struct SharedMount {
    region: std::sync::Arc<ImageRegion>,
    /// The region file (removed by the last participant to leave).
    path: std::path::PathBuf,
    /// This participant's slot (a forked child takes one of its own: `fork.rs`).
    me: std::sync::atomic::AtomicU32,
    /// Changes of the ring this participant's caches reflect.
    seen: AtomicU64,
    /// Times this participant took the lock over from a dead one and recovered the image.
    takeovers: AtomicU64,
    /// Of them, those scoped to the dead call (`takeover.rs`).
    scoped_takeovers: AtomicU64,
    /// Held while this participant's threads catch up (readers do it at once).
    catching: parking_lot::Mutex<()>,
    /// Unlinked inodes this participant left unfreed because a read-only participant
    /// pinned them (`read_only.rs`), freed by a later call once no longer pinned.
    kept_for_readers: parking_lot::Mutex<KeptForReaders>,
    /// Set before this process (or the one it was forked from) forked: its descriptor of
    /// the image, and the lock on it, are then shared with a child, and stay held when it
    /// leaves (`leave_shared`).
    forked: std::sync::atomic::AtomicBool,
    /// The last answer to whether a read-only participant that locks is there
    /// (`share/read_only_locks.rs`, [`crate::share::read_only_locks::Readers`]).
    pub(super) readers_asked: AtomicU64,
    /// The last answer to whether a read-only participant follows the ring of data changes
    /// (`read_only.rs`, [`FsInner::reader_watches_data`]).
    pub(super) data_readers_asked: AtomicU64,
    /// The positions of the two rings this process wrote itself ([`OwnMarks`]).
    pub(super) own: OwnMarks,
    /// What this process keeps for the children it forked until they join
    /// (`for_children.rs`).
    pub(super) for_children: for_children::ForChildren,
}

/// Which positions of the ring of changes and of the ring of data changes this process
/// wrote: slot `n % OWN_MARKS` holds `n + 1` for a position `n` it wrote (a slot a later
/// position took no longer names `n`). A front end that follows the others' changes into
/// caches of its own, which its own calls keep in step already, leaves these out
/// ([`FileSystem::changes_since_others`]). A forked child keeps its parent's marks: their
/// changes were in its caches when it was made.
///
/// They reach [`OWN_MARKS`] positions back, 32 rings: a reader a ring or more behind, whose
/// entries are gone, learns from them alone that every position it missed was its own
/// process's, so nothing changed for it. Marks only as far back as the rings (until
/// 2026-12-06) made a process that wrote faster than its mapping follower read (a writer
/// that kept copies mapped: 200,000 appends beside 50 copies of 2 MiB) refresh every copy
/// whole at each lap: 43 times in that run, by hand.
pub(crate) struct OwnMarks {
    changes: Box<[AtomicU64]>,
    data: Box<[AtomicU64]>,
}

/// `n` atomics, 0, in memory that is the system's zero pages until written (a process
/// that never writes the rings, a `cat` through the shim, takes none of it; written one by
/// one, every page was taken at each participant's start).
fn zeroed(n: usize) -> Box<[AtomicU64]> {
    let zeros: Box<[u64]> = vec![0u64; n].into_boxed_slice();
    // SAFETY: AtomicU64 has the size, alignment and bit validity of u64 (its documentation),
    // so the boxed slice of zeroed words is one of atomics holding 0, freed as it was made.
    unsafe { Box::from_raw(Box::into_raw(zeros) as *mut [AtomicU64]) }
}

/// Positions each of [`OwnMarks`]' two lists remembers (256 KiB a list, taken in pages as a
/// process writes).
const OWN_MARKS: usize = 32 * CHANGE_RING;
const _: () = assert!(OWN_MARKS >= 32 * crate::share::DATA_RING);

impl OwnMarks {
    pub(super) fn new() -> OwnMarks {
        OwnMarks { changes: zeroed(OWN_MARKS), data: zeroed(OWN_MARKS) }
    }

    fn mark(slots: &[AtomicU64], n: u64) {
        slots[(n % slots.len() as u64) as usize].store(n + 1, Ordering::Relaxed);
    }

    fn marked(slots: &[AtomicU64], n: u64) -> bool {
        slots[(n % slots.len() as u64) as usize].load(Ordering::Relaxed) == n + 1
    }

    /// Whether every position in `[since, now)` is marked: this process wrote all of them
    /// (false past what the marks remember).
    fn all_marked(slots: &[AtomicU64], since: u64, now: u64) -> bool {
        since <= now && now - since <= slots.len() as u64 && (since..now).all(|n| Self::marked(slots, n))
    }
}

/// Unlinked inodes a read-only participant pinned (see [`SharedMount`]).
#[derive(Default)]
pub(crate) struct KeptForReaders {
    inos: Vec<Ino>,
    /// When they were last looked at (a call looks at most once a millisecond).
    looked: Option<std::time::Instant>,
}

/// What an image's shared region keeps of its table's volatile state (the grouped
/// placements'; none for the paper placement's and the other mappings').
pub(crate) fn table_layout(sb: &crate::layout::Superblock, geo: &crate::layout::Geometry) -> TableLayout {
    let grouped = sb.mapping_kind == crate::layout::MappingKind::HashFs as u32 && geo.groups > 0;
    match grouped && sb.placement != crate::layout::superblock::HashPlacement::Paper as u32 {
        true => crate::mapping::hashfs::groups::table_layout(geo.groups),
        false => TableLayout::default(),
    }
}

/// Moves `inner`'s table state (the grouped placements') into `region`'s cells: its own
/// published into them (`publish`: a mount that counted it from the table as it is, the
/// first or a recovering one) or theirs adopted (a mount beside others, whose state they
/// keep). Before `inner` serves any call.
pub(crate) fn share_table<D: PmDevice>(inner: &FsInner<D>, region: &Arc<ImageRegion>, publish: bool) -> Result<()> {
    let crate::mapping::FileMap::Hash(t) = &inner.map else { return Ok(()) };
    match t.groups() {
        Some(g) if !g.share(region, publish) => {
            Err(Error::corrupt("the shared region does not fit the image's table state (another HashFS version?)"))
        }
        _ => Ok(()),
    }
}

impl SharedMount {
    fn me(&self) -> Participant {
        Participant(self.me.load(Ordering::Relaxed))
    }
}

thread_local! {
    /// How deep this thread is in calls of a shared mount (the lock is taken at 0 → 1). A
    /// plain `Cell` of a `const` thread-local: it has no destructor, so it stays right
    /// after the thread's storage is torn down, where a program's `atexit` handler may
    /// still make calls (nested ones among them, which must not take the lock again).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Inodes the call changed on the media (kept with its capacity from call to call).
    static TOUCHED: RefCell<Vec<Ino>> = const { RefCell::new(Vec::new()) };
}

/// A change that could not be noted (the thread's storage was being torn down, at its
/// exit or the process's): the next publication, by whichever thread, tells everyone to
/// refresh everything.
static LOST_ANYWHERE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// This thread's depth in calls of a shared mount.
fn depth() -> u32 {
    DEPTH.with(Cell::get)
}

/// Adds `by` to this thread's depth; the new depth.
fn add_depth(by: i32) -> u32 {
    DEPTH.with(|d| {
        let n = d.get().saturating_add_signed(by);
        d.set(n);
        n
    })
}

/// Whether this thread is inside a call of a shared mount (changes are noted).
pub(crate) fn recording() -> bool {
    depth() > 0
}

/// Notes that inode `ino`'s media bytes changed (called where they are written: a
/// transaction's commit, the in-place size and time stores). Nothing outside a shared
/// mount's call.
pub(crate) fn touched(ino: Ino) {
    debug_assert_eq!(read_side::reading(), 0, "a read-side call changes nothing");
    if depth() == 0 {
        return;
    }
    if TOUCHED.try_with(|t| t.borrow_mut().push(ino)).is_err() {
        LOST_ANYWHERE.store(true, Ordering::Release);
    }
}

/// A call's hold on the image lock (nothing on a mount of one process); released, and
/// what the call changed published, when dropped.
pub(crate) struct Entered<'a, D: PmDevice> {
    fs: &'a FsInner<D>,
    outer: bool,
}

impl<D: PmDevice> Drop for Entered<'_, D> {
    fn drop(&mut self) {
        let Some(sh) = self.fs.shared.get() else { return };
        let depth = add_depth(-1);
        if self.outer {
            debug_assert_eq!(depth, 0);
            self.fs.publish(sh);
            sh.region.unlock_image();
        }
    }
}

impl<D: PmDevice> FsInner<D> {
    /// Enters a call: on a shared mount, takes the image lock (unless this thread holds
    /// it already) and catches up with what others changed.
    pub(crate) fn enter(&self) -> Entered<'_, D> {
        let Some(sh) = self.shared.get() else { return Entered { fs: self, outer: false } };
        let depth = add_depth(1);
        if depth > 1 {
            return Entered { fs: self, outer: false };
        }
        debug_assert_eq!(read_side::reading(), 0, "a read-side call changes nothing");
        let guard = Entered { fs: self, outer: true };
        if let Acquired::FromDead(dead) = sh.region.lock_image(sh.me()) {
            if let Err(e) = self.take_over(sh, dead) {
                // The image could not be recovered: what it holds is reported by every
                // call from here on, as by a mount that finds it so.
                eprintln!("hashfs: recovering after participant {dead} died: {e}");
            }
        }
        self.catch_up(sh);
        // Before the call's first store: nothing named yet (`takeover.rs`).
        let words = sh.region.words();
        words.scope.reset(words.table_used.load(Ordering::Acquire), words.inodes_used.load(Ordering::Acquire));
        // Both may free inodes (stores the scope names, as the call's own).
        self.settle_for_children(sh);
        self.free_unpinned(sh);
        guard
    }

    /// On a shared mount, the changes published so far (`FileSystem::changes_published`).
    pub(crate) fn changes_published(&self) -> Option<u64> {
        self.shared.get().map(|sh| sh.region.words().changes.load(Ordering::Acquire))
    }

    /// Frees the unlinked inodes this participant kept for read-only participants that no
    /// longer pin them (at most once a millisecond; inside a call, under the image lock).
    fn free_unpinned(&self, sh: &SharedMount) {
        let inos = {
            let mut kept = sh.kept_for_readers.lock();
            if kept.inos.is_empty() || kept.looked.is_some_and(|t| t.elapsed() < std::time::Duration::from_millis(1)) {
                return;
            }
            kept.looked = Some(std::time::Instant::now());
            std::mem::take(&mut kept.inos)
        };
        for ino in inos {
            let Ok(cell) = self.cell(ino) else { continue };
            let mut st = cell.state.write();
            // Kept again (noted once more) while still pinned or open anywhere.
            let _ = self.maybe_free(&cell, &mut st);
        }
    }

    /// Reads again what others changed since this participant last held the lock (or
    /// entered a read-side call).
    fn catch_up(&self, sh: &SharedMount) {
        self.catch_up_with(&sh.region, &sh.seen, &sh.catching);
    }

    /// [`Self::catch_up`] with `region`'s ring, from `seen` (a read-only participant's
    /// too: it changes nothing but this process's caches).
    ///
    /// A read-only participant catches up while others may change the image: an inode it
    /// reads torn is one a call in progress changes, which that call names in the ring
    /// when it ends, after `now`, so the next catch-up reads it again.
    fn catch_up_with(&self, region: &ImageRegion, seen_at: &AtomicU64, catching: &parking_lot::Mutex<()>) {
        let _one = catching.lock();
        let words = region.words();
        self.journals.raise_next_txid(words.next_txid.load(Ordering::Acquire));
        let (seen, now) = (seen_at.load(Ordering::Relaxed), words.changes.load(Ordering::Acquire));
        if seen == now {
            return;
        }
        let ring = region.ring();
        let full = now - seen > CHANGE_RING as u64 || (seen..now).any(|n| ring.get(n) == Change::Everything);
        if full && self.shared.get().is_some() {
            // The inode bitmap is the region's: only what this participant caches.
            for cell in self.inodes.cells() {
                self.refresh_inode(cell.ino);
            }
        } else if full {
            // A read-only participant's own bitmap (for its counts) as well.
            for i in 1..=self.geo.inode_count {
                self.refresh_inode(Ino(i as u32));
            }
        } else {
            let mut inos: Vec<Ino> = (seen..now)
                .filter_map(|n| match ring.get(n) {
                    Change::Inode(ino) => Some(ino),
                    Change::Everything => None,
                })
                .collect();
            inos.sort_unstable();
            inos.dedup();
            for ino in inos {
                self.refresh_inode(ino);
            }
        }
        on_map!(self, m => m.adopt_shared_count(words.table_used.load(Ordering::Acquire)));
        seen_at.store(now, Ordering::Relaxed);
    }

    /// Inode `ino` as the media has it now: the cached cell (its inode copy, directory
    /// index and translations), if this participant has one, and a read-only participant's
    /// bit of its own inode bitmap (a writer's is the region's, changed where inodes are
    /// made and freed).
    fn refresh_inode(&self, ino: Ino) {
        if ino.0 == 0 || ino.get() > self.geo.inode_count {
            return;
        }
        let own_bits = self.shared.get().is_none();
        let cached = self.inodes.cached(ino);
        if cached.is_none() && !own_bits {
            return;
        }
        let mut raw = super::inode::read_raw(&*self.dev, &self.geo, ino);
        let tag = append_tag::read_plain(&mut raw);
        let state = raw.check(ino);
        if own_bits && state == InodeState::Free {
            self.ialloc.mark_free(ino);
        } else if own_bits {
            self.ialloc.mark_used(ino);
        }
        let Some(cell) = cached else { return };
        if self.is_read_only()
            && (matches!(state, InodeState::Corrupt(_))
                || cell.open_count.load(Ordering::Acquire) > 0 && state == InodeState::Free)
        {
            // Read torn (a read-only participant reads beside the calls that change the
            // image; one it has open is pinned, never freed): read again when named.
            return;
        }
        let mut st = cell.state.write();
        if state == InodeState::Free {
            st.freed = true;
            if st.tag.take().is_some() {
                self.tagged.fetch_sub(1, Ordering::Relaxed);
            }
            if std::mem::take(&mut st.times_pending) {
                self.times_pending.fetch_sub(1, Ordering::Relaxed);
            }
            drop(st);
            self.inodes.remove(ino);
            return;
        }
        st.raw = raw;
        st.dir = None;
        match (st.tag.is_some(), tag.is_some()) {
            (false, true) => self.tagged.fetch_add(1, Ordering::Relaxed),
            (true, false) => self.tagged.fetch_sub(1, Ordering::Relaxed),
            _ => 0,
        };
        st.tag = tag;
        if std::mem::take(&mut st.times_pending) {
            self.times_pending.fetch_sub(1, Ordering::Relaxed);
        }
        cell.tcache.invalidate_all();
        cell.cursor.store(0, Ordering::Relaxed);
        cell.next_read_lblk.store(u64::MAX, Ordering::Relaxed);
    }

    /// Makes what this call changed visible to the others: the ring, the table's count and
    /// the next transaction id. (A write's DRAM times were stored where the others read
    /// them as it set them, `fs/times.rs`; a size a one-fence append left tagged is read
    /// by the others as it stands, `append_tag::read_plain`.)
    fn publish(&self, sh: &SharedMount) {
        let words = sh.region.words();
        let txid = self.journals.next_txid();
        if words.next_txid.load(Ordering::Acquire) < txid {
            words.next_txid.fetch_max(txid, Ordering::AcqRel);
        }
        if let Some(used) = on_map!(self, m => m.shared_count()) {
            if words.table_used.load(Ordering::Relaxed) != used {
                words.table_used.store(used, Ordering::Release);
            }
        }
        let lost = LOST_ANYWHERE.load(Ordering::Relaxed) && LOST_ANYWHERE.swap(false, Ordering::AcqRel);
        let ring = sh.region.ring();
        let mut n = words.changes.load(Ordering::Acquire);
        debug_assert_eq!(n, sh.seen.load(Ordering::Relaxed), "a holder of the lock has caught up");
        let start = n;
        let noted = TOUCHED.try_with(|t| {
            let mut inos = t.borrow_mut();
            inos.sort_unstable();
            inos.dedup();
            for &ino in inos.iter() {
                ring.put(n, Change::Inode(ino));
                OwnMarks::mark(&sh.own.changes, n);
                n += 1;
            }
            inos.clear();
        });
        if lost || noted.is_err() {
            ring.put(n, Change::Everything);
            n += 1;
        }
        if n != start {
            words.changes.store(n, Ordering::Release);
            sh.seen.store(n, Ordering::Relaxed);
        }
    }

    /// Participant `dead` died holding the image lock, maybe inside a transaction: repairs
    /// what its call's record names (`takeover.rs`), or, when the record does not describe
    /// the call, recovers the image as after a power failure, keeping the unlinked files
    /// that live participants have open, and has everyone refresh everything.
    fn take_over(&self, sh: &SharedMount, dead: Participant) -> Result<()> {
        // What the dead call named; from here a death of this survivor is followed by the
        // whole recovery (its repair changes what the record does not describe).
        let scope = &sh.region.words().scope;
        let record = scope.read();
        scope.unscope();
        // Unlinked files only the dead participant had open are freed by the recovery.
        let closed = release_dead(&sh.region, dead);
        if self.take_over_scoped(sh, dead, &record, &closed)? {
            return Ok(());
        }
        let opens = sh.region.open_inodes();
        let keep = |ino: Ino| opens.held(ino);
        let how = MountAs::Recovering { keep: &keep, in_use: in_use(&sh.region) };
        let (tmp, report) = recovery::mount(self.dev.clone(), &|_, _| {}, how)?;
        tmp.unmounted.store(true, Ordering::Release); // its Drop must not mark the image clean
        publish_recovered(&sh.region, &tmp, &report);
        self.recount_table()?;
        note_leftovers(&sh.region); // a death: the last to leave looks through the inode table
        drop(tmp);
        sh.region.participants().reap(dead);
        sh.takeovers.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Counts the table's volatile state again from the table (the grouped placements;
    /// `mapping/hashfs/cells.rs`), into the region's cells on a shared mount: after a
    /// takeover's recovery changed the table under every participant's state.
    fn recount_table(&self) -> Result<()> {
        match &self.map {
            crate::mapping::FileMap::Hash(t) => t.recount_state(),
            crate::mapping::FileMap::Blocks(_) => Ok(()),
        }
    }

    /// The inode bitmap this mount allocates from: the region's on a shared mount (every
    /// participant's), else its own.
    pub(crate) fn inode_bits(&self) -> crate::share::InodeBits<'_> {
        match self.shared.get() {
            Some(sh) => sh.region.inode_bits(),
            None => self.ialloc.own(),
        }
    }

    /// A free inode, taken (see [`Self::inode_bits`]).
    pub(crate) fn alloc_ino(&self) -> Result<Ino> {
        if let Some(sh) = self.shared.get() {
            self.build_inode_bits(&sh.region);
        }
        self.ialloc.alloc_in(self.inode_bits(), |ino| self.scope_inode(ino))
    }

    /// Gives inode `ino` back (see [`Self::inode_bits`]); before the region's bitmap is
    /// built, only its count.
    pub(crate) fn free_ino(&self, ino: Ino) {
        match self.shared.get() {
            Some(sh) if sh.region.words().inode_bits_built.load(Ordering::Acquire) == 0 => {
                sh.region.words().inodes_used.fetch_sub(1, Ordering::Relaxed);
            }
            _ => self.ialloc.free_in(self.inode_bits(), ino),
        }
    }

    /// Builds the region's inode bitmap from the inode table if the first participant
    /// took the counts of a clean unmount instead of scanning it (`MountAs::First`): at
    /// the first allocation, under the image lock, so no create is half done (a dead
    /// participant's is undone by the takeover's recovery, which publishes its own bits).
    /// Its count is the bits set, as the table says.
    pub(crate) fn build_inode_bits(&self, region: &ImageRegion) {
        let words = region.words();
        if words.inode_bits_built.load(Ordering::Acquire) != 0 {
            return;
        }
        let scanned = super::inode::InodeAllocator::new(self.geo.inode_count);
        super::inode::for_each_raw(&*self.dev, &self.geo, |ino, raw| {
            if raw.check(ino) != InodeState::Free {
                scanned.mark_used(ino);
            }
        });
        scanned.publish_to(region.inode_bits());
        words.inode_bits_built.store(1, Ordering::Release);
    }

    /// Inodes in use (see [`Self::inode_bits`]).
    pub(crate) fn inodes_used(&self) -> u64 {
        self.inode_bits().used.load(Ordering::Relaxed)
    }

    /// The counts a clean unmount leaves in the superblock (`Superblock::summary`): on
    /// HashFS's mapping, whose table is the only allocation state; none on the others.
    pub(crate) fn summary(&self) -> Option<crate::layout::superblock::Summary> {
        let slots = on_map!(self, m => m.shared_count())?;
        Some(crate::layout::superblock::Summary { inodes: self.inodes_used(), slots })
    }

    /// On a shared mount, this participant's slot and the region (the crash explorer's
    /// process deaths, `crashtest/death.rs`, leave a participant dead holding the lock).
    pub(crate) fn shared_parts(&self) -> Option<(&ImageRegion, Participant)> {
        self.shared.get().map(|sh| (&*sh.region, sh.me()))
    }

    /// On a shared mount, how often this participant recovered the image after another
    /// died holding its lock.
    pub(crate) fn takeovers(&self) -> Option<u64> {
        self.shared.get().map(|sh| sh.takeovers.load(Ordering::Relaxed))
    }

    /// Of [`Self::takeovers`], those scoped to the dead call (`takeover.rs`).
    pub(crate) fn scoped_takeovers(&self) -> Option<u64> {
        self.shared.get().map(|sh| sh.scoped_takeovers.load(Ordering::Relaxed))
    }

    /// An overwrite of `ino`'s bytes in place: noted in the ring of data changes when a
    /// participant watches it (`share/data_ring.rs`).
    pub(crate) fn note_data(&self, ino: Ino) {
        if let Some(sh) = self.shared.get() {
            let ring = sh.region.data_ring();
            if ring.watched() || self.reader_watches_data(sh) {
                OwnMarks::mark(&sh.own.data, ring.note(ino));
            }
        }
    }

    /// Whether a participant other than this one has `ino` open (a shared mount; false on
    /// a mount of one process), or a child of this one on its way to join may have it
    /// (`for_children.rs`). A read-only participant's pin counts as open
    /// (`read_only.rs`); a pinned inode is noted, to be freed by a later call.
    pub(crate) fn open_elsewhere(&self, ino: Ino) -> bool {
        let Some(sh) = self.shared.get() else { return false };
        if sh.region.open_inodes().held_by_others(ino, sh.me()) || self.kept_for_children(sh, ino) {
            return true;
        }
        // A program on its way (counted in `forks` until it has opened the files it was
        // handed, `fork.rs`) may hold the file by a description alone: an exec'd one's
        // predecessor let go of its holds as it joined, before it opened the file.
        if sh.region.words().forks.load(Ordering::Acquire) != 0 && sh.region.descriptions().any_of(ino, sh.me()) {
            return true;
        }
        if self.pinned_by_reader(ino) {
            note_leftovers(&sh.region);
            let mut kept = sh.kept_for_readers.lock();
            if !kept.inos.contains(&ino) {
                kept.inos.push(ino);
            }
            return true;
        }
        false
    }

    /// Whether a read-only participant has `ino` open (its pin: `read_only.rs`).
    pub(crate) fn pinned_by_reader(&self, ino: Ino) -> bool {
        self.dev.backing_fd().is_some_and(|fd| crate::share::pins::pinned(fd, ino))
    }

    /// This participant opened its first handle of `ino` (called under the lock).
    pub(crate) fn note_open(&self, ino: Ino) -> Result<()> {
        match self.shared.get() {
            Some(sh) if !sh.region.open_inodes().hold(ino, sh.me()) => Err(Error::TooManyOpen),
            _ => Ok(()),
        }
    }

    /// This participant closed its last handle of `ino` (called under the lock).
    pub(crate) fn note_close(&self, ino: Ino) {
        if let Some(sh) = self.shared.get() {
            sh.region.open_inodes().release(ino, sh.me());
        }
    }

    /// A shared mount's unmount: the last participant to leave marks the image clean.
    /// Returns false on a mount of one process (the caller marks it clean itself).
    pub(crate) fn leave_shared(&self) -> bool {
        let Some(sh) = self.shared.get() else { return false };
        let alone = {
            let _in = self.enter();
            let parts = sh.region.participants();
            // Marked leaving under the lock, so that a participant leaving right after
            // does not count this one as staying (then neither would mark the image clean);
            // the slot stays this one's until the lock is let go, so that no waiter takes
            // the lock for a dead owner's meanwhile.
            parts.set_leaving(sh.me());
            // Slots of participants that died, which no one has reaped yet (asked once:
            // each is a read of /proc).
            let dead: Vec<Participant> = (0..crate::share::MAX_PARTICIPANTS as u32)
                .map(Participant)
                .filter(|&p| p != sh.me() && !parts.is_free(p) && !parts.alive(p))
                .collect();
            // What this participant still counts in `forks` (a program that adopted no
            // description), and what dead ones do (a program exec'd without the shim,
            // ended): no child is on its way for them.
            for &p in dead.iter().chain([sh.me()].iter()) {
                if parts.take_counted(p) {
                    fork::uncount_forks(&sh.region);
                }
            }
            // A child forked but not yet joined counts as staying (`fork.rs`).
            let others = sh.region.words().forks.load(Ordering::Acquire) != 0
                || (0..crate::share::MAX_PARTICIPANTS as u32)
                    .map(Participant)
                    .any(|p| p != sh.me() && parts.staying(p));
            // What this participant keeps in DRAM only becomes durable and plain (as at
            // any unmount), and the last one also settles the sizes that participants
            // which died left tagged.
            self.persist_all_times();
            self.untag_all();
            if !others {
                // A clean image holds no unlinked inode (a mount refuses one that does). No
                // one else is left to have one open: those this participant does not hold
                // are freed; one it still holds leaves the image unclean, for the next mount
                // to recover. Sizes tagged by participants that died are settled. Both are
                // looked for in the whole inode table only when something may have left
                // them (`ImageWords::leftovers`, or a dead participant's slot not yet
                // reaped); else only this participant's own open files can be unlinked.
                let words = sh.region.words();
                let look = words.leftovers.load(Ordering::Acquire) != 0
                    || !dead.is_empty()
                    || !sh.kept_for_readers.lock().inos.is_empty();
                let left = if look {
                    on_map!(self, m => m.settle_tagged_sizes(self));
                    self.dev.fence();
                    self.free_unheld_orphans()
                } else {
                    self.held_orphans()
                };
                if left == 0 {
                    words.leftovers.store(0, Ordering::Release);
                    let summary = self.summary();
                    let mut sb = self.sb.lock();
                    sb.state = SB_STATE_CLEAN;
                    sb.set_summary(summary);
                    super::write_superblock(&*self.dev, &mut sb);
                    let _ = self.dev.sync_host();
                }
                sh.region.words().mounted.store(0, Ordering::Release);
            }
            !others
        };
        // What it still holds in the region (descriptions a fork shared, open inodes)
        // is let go with its slot, which the next participant to join may take.
        release_leftovers(&sh.region, sh.me());
        if !alone && !sh.forked.load(Ordering::Acquire) {
            // Its hold on the image goes before its slot: its process may keep the image
            // open for a while yet (an exit runs on after the shim left), and the last to
            // leave, which waits for the slots of those leaving, must not find it still
            // held and keep the region (`leaver-keeps-image-lock`). A process that forked
            // shares the hold with its child, which may still need it.
            self.dev.let_go_of_image();
        }
        sh.region.participants().leave(sh.me());
        // No other process has the image open (every participant holds its lock shared
        // from before it attaches until it is gone): the region goes too, and the next
        // participant makes one with the image's permissions as they are then.
        if alone {
            wait_for_leavers(&sh.region, sh.me());
            if self.dev.try_lock_alone() {
                let _ = crate::share::remove_region(&sh.path);
            }
        }
        true
    }
}

/// Waits (50 ms at most) until no other participant is leaving: one that began to leave
/// when the last one found itself alone still holds the image until it gives its slot back.
fn wait_for_leavers(region: &ImageRegion, me: Participant) {
    let parts = region.participants();
    let leaving = |p: Participant| p != me && parts.marked_leaving(p) && parts.alive(p);
    let t = std::time::Instant::now();
    while (0..crate::share::MAX_PARTICIPANTS as u32).map(Participant).any(leaving)
        && t.elapsed() < std::time::Duration::from_millis(50)
    {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

impl<D: PmDevice> FsInner<D> {
    /// Unlinked files this participant has open (the last to leave, when nothing else can
    /// have left one: `leave_shared`).
    fn held_orphans(&self) -> usize {
        let held = |c: &super::inode::InodeCell| {
            let st = c.state.read();
            c.open_count.load(Ordering::Acquire) != 0 && st.raw.nlink == 0 && !st.freed
        };
        self.inodes.cells().iter().filter(|c| held(c)).count()
    }

    /// The last participant to leave: frees every unlinked inode it does not hold open
    /// itself (an orphan whose last holder's close found another participant still holding
    /// it, which then went without freeing it); returns how many it had to leave.
    fn free_unheld_orphans(&self) -> usize {
        let mut orphans = Vec::new();
        super::inode::for_each_raw(&*self.dev, &self.geo, |ino, raw| {
            if raw.nlink == 0 && raw.check(ino) == InodeState::Allocated {
                orphans.push(ino);
            }
        });
        let mut left = 0;
        for ino in orphans {
            let Ok(cell) = self.cell(ino) else { continue };
            let mut st = cell.state.write();
            if st.freed || st.raw.nlink != 0 {
                continue;
            }
            if cell.open_count.load(Ordering::Acquire) != 0
                || self.pinned_by_reader(ino)
                || self.free_inode_locked(&cell, &mut st).is_err()
            {
                left += 1;
            }
        }
        left
    }
}

/// The region's inode bitmap for a takeover's recovery to read only the inodes it covers
/// (`MountAs::Recovering`), if it is built; else (a first participant took a clean
/// unmount's counts and nothing allocated since) the recovery reads the whole table.
pub(super) fn in_use(region: &ImageRegion) -> Option<&[std::sync::atomic::AtomicU64]> {
    (region.words().inode_bits_built.load(Ordering::Acquire) != 0).then(|| region.inode_bits().words)
}

/// Tells the last participant to leave to look through the inode table
/// (`ImageWords::leftovers`).
fn note_leftovers(region: &ImageRegion) {
    region.words().leftovers.store(1, Ordering::Release);
}

/// Releases what participant `p` (dead, or leaving) held in the region: its bits on open
/// inodes, on open file descriptions and among the watchers of the ring of data changes.
fn release_leftovers(region: &ImageRegion, p: Participant) -> Vec<Ino> {
    region.data_ring().unwatch(p);
    let closed = region.open_inodes().release_all_of(p);
    region.descriptions().release_all_of(p);
    closed
}

/// Releases what dead participant `p` held, its read side too (its count of read-side
/// calls, the inode locks of its overwrites), its descriptions' offset locks and what it
/// left in the record locks' table, before its slot is reaped; the image lock's holder
/// only.
fn release_dead(region: &ImageRegion, p: Participant) -> Vec<Ino> {
    if region.participants().take_counted(p) {
        fork::uncount_forks(region); // a child that died before it joined, a program that never did
    }
    region.release_read_side(p);
    region.descriptions().release_locks_of(p);
    region.record_locks().release_dead(p);
    release_leftovers(region, p)
}

/// What a mount that recovered the image (or ran first) tells the others: the inode bitmap
/// its scan built, its next transaction id and the table's used count, and a
/// [`Change::Everything`] in the ring, so that every participant reads all it caches again.
fn publish_recovered<D: PmDevice>(region: &ImageRegion, fs: &FsInner<D>, report: &MountReport) {
    let words = region.words();
    if report.from_summary {
        // Nothing scanned: the count the superblock gave, the bits at the first allocation.
        let inodes = fs.sb.lock().summary_inodes;
        words.inode_bits_built.store(0, Ordering::Release);
        words.inodes_used.store(inodes, Ordering::Release);
    } else {
        fs.ialloc.publish_to(region.inode_bits());
        words.inode_bits_built.store(1, Ordering::Release);
    }
    words.next_txid.fetch_max(fs.journals.next_txid(), Ordering::AcqRel);
    if let Some(used) = on_map!(fs, m => m.shared_count()) {
        words.table_used.store(used, Ordering::Release);
    }
    let n = words.changes.load(Ordering::Acquire);
    region.ring().put(n, Change::Everything);
    words.changes.store(n + 1, Ordering::Release);
}

/// What the participants of a shared mount changed ([`crate::FileSystem::changes_since`],
/// [`crate::FileSystem::data_changes_since`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Changed {
    /// These inodes (their attributes, mapping, entries or data; in no order, maybe twice).
    Inodes(Vec<Ino>),
    /// Anything: more changes than the ring remembers, or a recovery's.
    Everything,
}

impl<D: PmDevice> crate::FileSystem<D> {
    /// On a mount shared by many processes: how many changes have been published (a point
    /// to ask [`Self::changes_since`] from). None on a mount of one process.
    pub fn changes_now(&self) -> Option<u64> {
        Some(self.change_region()?.words().changes.load(Ordering::Acquire))
    }

    /// The region whose ring names the changes: a participant's, or the one a read-only
    /// participant attached (once a writer made it).
    fn change_region(&self) -> Option<&ImageRegion> {
        if let Some(sh) = self.inner.shared.get() {
            return Some(&sh.region);
        }
        self.inner.read_only.get()?.region().ok().flatten().map(|r| &**r)
    }

    /// On a mount shared by many processes: the changes published after change `since`
    /// (by any participant, this one included) and the count up to which they go; read
    /// without the image lock, for a front end that keeps caches of its own (a mount's
    /// daemon, whose kernel caches pages and attributes). None on a mount of one process.
    pub fn changes_since(&self, since: u64) -> Option<(u64, Changed)> {
        self.changes_skipping(since, false)
    }

    /// [`Self::changes_since`], less the changes this process published itself (a front
    /// end whose own calls keep its caches in step: the shim's mappings, `follow.rs`).
    pub fn changes_since_others(&self, since: u64) -> Option<(u64, Changed)> {
        self.changes_skipping(since, true)
    }

    fn changes_skipping(&self, since: u64, skip_own: bool) -> Option<(u64, Changed)> {
        let region = self.change_region()?;
        // A read-only participant publishes nothing.
        let own = self.inner.shared.get().map(|sh| &sh.own);
        let words = region.words();
        let now = words.changes.load(Ordering::Acquire);
        if now == since {
            return Some((now, Changed::Inodes(Vec::new())));
        }
        let ring = region.ring();
        let behind = |n: u64| n.saturating_sub(since) > CHANGE_RING as u64 || since > n;
        // Every position a lap took (or one it overwrote as it was read) this process's own:
        // nothing changed for it (`OwnMarks`).
        let all_own = || skip_own && own.is_some_and(|o| OwnMarks::all_marked(&o.changes, since, now));
        if behind(now) {
            return Some((now, if all_own() { Changed::Inodes(Vec::new()) } else { Changed::Everything }));
        }
        let mut inos = Vec::with_capacity((now - since) as usize);
        for n in since..now {
            match ring.get(n) {
                Change::Inode(_) if skip_own && own.is_some_and(|o| OwnMarks::marked(&o.changes, n)) => {}
                Change::Inode(ino) => inos.push(ino),
                Change::Everything => return Some((now, Changed::Everything)),
            }
        }
        // Entries a publisher overwrote while they were read (it went a whole ring past
        // `since`): anything may have changed.
        if behind(words.changes.load(Ordering::Acquire)) && !all_own() {
            return Some((now, Changed::Everything));
        }
        Some((now, Changed::Inodes(inos)))
    }

    /// On a mount shared by many processes: from now on, every participant's overwrite of
    /// a file's bytes in place is noted in the image's ring of data changes (which the ring
    /// of changes does not name), until this participant leaves; the position to read
    /// [`Self::data_changes_since`] from. None on a mount of one process.
    pub fn watch_data(&self) -> Option<u64> {
        if let Some(sh) = self.inner.shared.get() {
            return Some(sh.region.data_ring().watch(sh.me()));
        }
        // A read-only participant marks itself by a lock (`read_only.rs`); the ring starts
        // at 0 in a region a writer makes later.
        self.inner.read_only.get()?.watch_data().ok()?;
        Some(self.change_region().map_or(0, |r| r.data_ring().head()))
    }

    /// On a watched shared mount ([`Self::watch_data`]): the inodes whose bytes were
    /// overwritten in place from position `since` on, and the position to read from next.
    pub fn data_changes_since(&self, since: u64) -> Option<(u64, Changed)> {
        self.data_changes_skipping(since, false)
    }

    /// [`Self::data_changes_since`], less this process's own overwrites.
    pub fn data_changes_since_others(&self, since: u64) -> Option<(u64, Changed)> {
        self.data_changes_skipping(since, true)
    }

    fn data_changes_skipping(&self, since: u64, skip_own: bool) -> Option<(u64, Changed)> {
        let Some(sh) = self.inner.shared.get() else {
            // A read-only participant overwrites nothing itself.
            self.inner.read_only.get()?;
            let Some(region) = self.change_region() else { return Some((since, Changed::Inodes(Vec::new()))) };
            return Some(match region.data_ring().since_skipping(since, &|_| false) {
                (next, crate::share::DataChanges::Inodes(v)) => (next, Changed::Inodes(v)),
                (next, crate::share::DataChanges::Everything) => (next, Changed::Everything),
            });
        };
        let own = |n: u64| skip_own && OwnMarks::marked(&sh.own.data, n);
        Some(match sh.region.data_ring().since_skipping(since, &own) {
            (next, crate::share::DataChanges::Inodes(v)) => (next, Changed::Inodes(v)),
            // Every position up to where it stopped this process's own: nothing changed for
            // it (`OwnMarks`), whether the ring lapped before or while it was read.
            (next, crate::share::DataChanges::Everything)
                if skip_own && OwnMarks::all_marked(&sh.own.data, since, next) =>
            {
                (next, Changed::Inodes(Vec::new()))
            }
            (next, crate::share::DataChanges::Everything) => (next, Changed::Everything),
        })
    }

    /// The inodes this participant caches (a front end invalidates its own copies of them
    /// when [`Self::changes_since`] says everything may have changed).
    pub fn cached_inodes(&self) -> Vec<Ino> {
        self.inner.inodes.cells().iter().map(|c| c.ino).collect()
    }
}
