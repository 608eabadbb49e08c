//! The layout of an image's shared region as the file system uses it (`fs/shared/mod.rs`):
//! the participant table, the image's words (its lock, whether it is mounted, the count
//! of changes published, the table's used count, the next transaction id), the ring of
//! changed inodes, the open-inode table, the open file descriptions, the inode bitmap, and
//! on images of HashFS's grouped placements the table's volatile state ([`TableLayout`]).
//!
//! Every word here but the lock's is changed only by the holder of the image lock; a
//! participant killed while holding it leaves words that each had a value they could
//! have (one store each), and the survivor that takes the lock over recovers the image
//! as after a power failure and tells every participant to refresh all it caches.

use super::data_ring::DataRing;
use super::descriptions::Descriptions;
use super::lock::{Acquired, RobustLock};
use super::lock_table::RecordLocks;
use super::participant_set::{HoldCounts, Members, ParticipantSet, SET_WORDS};
use super::participants::{Participant, Participants};
use super::readers::Readers;
use super::region::{Region, Shared};
use super::scope::CallScope;
use super::HEADER_BYTES;
use crate::layout::Ino;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Changed inodes the ring remembers: a participant that fell further behind refreshes
/// everything it caches.
pub const CHANGE_RING: usize = 1024;
/// Inodes open at once across the image's participants.
pub const MAX_OPEN_INODES: usize = 4096;
/// Writer locks of the read side's overwrites: inode `i` takes lock `i % INODE_LOCKS`.
pub const INODE_LOCKS: usize = 256;
/// An entry of the change ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// This inode changed (its attributes, mapping, entries or data).
    Inode(Ino),
    /// Anything may have changed (a takeover's recovery, a participant that lost count):
    /// every cache is refreshed.
    Everything,
}

/// The ring's word for [`Change::Everything`]; no inode is numbered 0.
const EVERYTHING: u32 = 0;

/// The image's words.
#[repr(C)]
pub struct ImageWords {
    /// Held across every call of the file system that changes the image (the coarse lock
    /// of the first step: docs/design.md, "Many processes on one image"); the calls that
    /// change nothing the others cache run beside each other on its read side
    /// ([`ImageRegion::try_read`]).
    pub lock: RobustLock,
    /// 1 while the image is mounted by the participants (set by the first, which ran
    /// recovery; cleared by the last to leave, after it marked the image clean).
    pub mounted: AtomicU32,
    /// Changes published: the ring's entry `n % CHANGE_RING` names the inode of change `n`.
    pub changes: AtomicU64,
    /// HashFS's table: slots used, as of the last publication.
    pub table_used: AtomicU64,
    /// Above every transaction id any participant used.
    pub next_txid: AtomicU64,
    /// Children forked by participants that have not joined yet: while any has not, no
    /// participant leaving counts itself the last (`fs/shared/fork.rs`).
    pub forks: AtomicU64,
    /// The image lock's sequence: odd while a participant holds the lock (from its
    /// acquisition to its release), one more at each; a read-only participant, which may
    /// take no lock, reads under it and retries a call during which it moved
    /// (`fs/shared/read_only.rs`).
    pub writing: AtomicU64,
    /// Inodes in use: the bits set in the region's inode bitmap ([`ImageRegion::inode_bits`]).
    pub inodes_used: AtomicU64,
    /// Nonzero when the last participant to leave must look through the inode table: a
    /// participant was found dead (it may have left sizes tagged, and unlinked files that
    /// only its hold kept), or an unlinked file was kept for a read-only participant's pin
    /// or by a recovery for its holders. Otherwise nothing there needs it, and the last
    /// leaver's work does not grow with the image.
    pub leftovers: AtomicU64,
    /// Nonzero when the inode bitmap holds the image's inodes; 0 from a first participant
    /// that took a clean unmount's counts instead of scanning the inode table, until the
    /// first allocation builds the bitmap (`FsInner::build_inode_bits`); `inodes_used` is
    /// right either way.
    pub inode_bits_built: AtomicU64,
    /// What the holder's call changes, for a survivor's repair if it dies (`scope.rs`).
    pub scope: CallScope,
}

// SAFETY: atomics only (RobustLock is one).
unsafe impl Shared for ImageWords {}

/// The ring of changed inodes.
#[repr(C)]
pub struct ChangeRing {
    entries: [AtomicU32; CHANGE_RING],
}

// SAFETY: an array of atomics.
unsafe impl Shared for ChangeRing {}

/// One open inode: its number, a bit per participant that has it open, and the holders'
/// [`Mark`]s, a word each (a subset of the holders: a mapping holds its file open).
#[repr(C)]
pub struct OpenInode {
    ino: AtomicU32,
    _pad: AtomicU32,
    holders: ParticipantSet,
    marks: [ParticipantSet; MARKS],
}

/// What a holder of an open inode marks about its mappings of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// It maps the file writable and shared: stores reach the file without a call, so no
    /// other participant serves a mapping of it by a copy (`fs/shared/mapped.rs`).
    Writable = 0,
    /// It maps the file's blocks (pages onto the image): no other participant frees or
    /// moves them (a truncation down is refused, a punched hole zeroed in place, HashFS's
    /// placements leave them where they are), or its mapping would show another file's.
    Blocks = 1,
}
const MARKS: usize = 2;

/// Which participants have which inodes open, so that the last close anywhere frees an
/// unlinked file, and how they map them ([`Mark`]). Open-addressed by inode number;
/// changed under the image lock.
#[repr(C)]
pub struct OpenInodes {
    slots: [OpenInode; MAX_OPEN_INODES],
    /// How many slots each participant holds (a leave with none passes over the table's
    /// 416 KiB).
    held: HoldCounts,
}

// SAFETY: atomics only.
unsafe impl Shared for OpenInode {}
// SAFETY: an array of Shared.
unsafe impl Shared for OpenInodes {}

/// A robust lock alone on its cache line.
#[repr(C, align(64))]
pub struct LineLock {
    lock: RobustLock,
}

/// The read side's writer locks, one per class of inode numbers: two participants
/// overwriting one file in place take turns (POSIX's atomicity of writes to one file).
#[repr(C)]
pub struct InodeLocks {
    locks: [LineLock; INODE_LOCKS],
}

// SAFETY: a RobustLock (one atomic), and an array of them.
unsafe impl Shared for LineLock {}
// SAFETY: an array of Shared.
unsafe impl Shared for InodeLocks {}

const fn page_up(n: usize) -> usize {
    n.div_ceil(4096) * 4096
}

/// Where each part lies in the region.
pub const PARTICIPANTS_OFF: usize = HEADER_BYTES;
pub const WORDS_OFF: usize = PARTICIPANTS_OFF + page_up(std::mem::size_of::<Participants>());
pub const RING_OFF: usize = WORDS_OFF + page_up(std::mem::size_of::<ImageWords>());
pub const OPEN_OFF: usize = RING_OFF + page_up(std::mem::size_of::<ChangeRing>());
pub const DESCRIPTIONS_OFF: usize = OPEN_OFF + page_up(std::mem::size_of::<OpenInodes>());
pub const READERS_OFF: usize = DESCRIPTIONS_OFF + page_up(std::mem::size_of::<Descriptions>());
pub const INODE_LOCKS_OFF: usize = READERS_OFF + page_up(std::mem::size_of::<Readers>());
pub const DATA_RING_OFF: usize = INODE_LOCKS_OFF + page_up(std::mem::size_of::<InodeLocks>());
pub const RECORD_LOCKS_OFF: usize = DATA_RING_OFF + page_up(std::mem::size_of::<DataRing>());
/// The inode bitmap, the last part: the only one whose size depends on the image.
pub const INODE_BITS_OFF: usize = RECORD_LOCKS_OFF + page_up(std::mem::size_of::<RecordLocks>());
const _: () = assert!(INODE_BITS_OFF == 1024 << 10);

/// The byte ranges of a region file that a call changes between its stores to the image:
/// the inode bitmap and the table's state (to the end of the region), the bitmap's count and
/// whether it is built, and the record of the call's scope. The crash explorer's process deaths take these as of the
/// death (the rest of the region as the operation began: `crashtest/death.rs`).
pub fn inode_state_ranges(region_len: usize) -> [std::ops::Range<usize>; 4] {
    let word = |off: usize| WORDS_OFF + off..WORDS_OFF + off + 8;
    let scope = WORDS_OFF + std::mem::offset_of!(ImageWords, scope);
    [
        word(std::mem::offset_of!(ImageWords, inodes_used)),
        word(std::mem::offset_of!(ImageWords, inode_bits_built)),
        scope..scope + std::mem::size_of::<CallScope>(),
        INODE_BITS_OFF..region_len,
    ]
}

/// The region's size for an image of `inode_count` inodes: 700 KiB, a bit per inode
/// rounded up to 4 KiB (8 KiB for the 65,536 inodes of a 1 GiB image), and the table's
/// state `table` (none on images of the paper placement).
pub fn region_bytes(inode_count: u64, table: TableLayout) -> usize {
    table_off(inode_count) + page_up(table.bytes())
}

/// Where the table's state lies: after the inode bitmap.
fn table_off(inode_count: u64) -> usize {
    INODE_BITS_OFF + page_up(bitmap_words(inode_count) * 8)
}

/// The volatile state of HashFS's grouped placements (`mapping/hashfs/groups.rs`,
/// `regions.rs`) on a mount many processes share: what a mount of one process keeps in
/// DRAM and rebuilds from the table at mount, kept here so that every participant sees
/// each change as it is made (every change is made under the image lock). In order:
/// [`TableLayout::WORDS`] words (claimed groups; the regions placement's count of open
/// groups, the count before the opening in progress, keys spilled and keys in open
/// groups), four arrays of a `u32` per group (keys and reservations in each group, the
/// list of open groups, each group's place in it, keys spilled past each), and the claim
/// filter's one-byte cells: 80 bytes per 2 MiB group, 0.004% of the image (320 KiB for
/// an 8 GiB image).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableLayout {
    /// Groups of the image (0: no table state here).
    pub groups: usize,
    /// Cells of the claim filter.
    pub filter_cells: usize,
}

impl TableLayout {
    /// Scalar words.
    pub const WORDS: usize = 8;
    /// Arrays of a `u32` per group.
    pub const ARRAYS: usize = 4;
    fn bytes(&self) -> usize {
        match self.groups {
            0 => 0,
            g => Self::WORDS * 8 + Self::ARRAYS * 4 * g + self.filter_cells,
        }
    }
}

fn bitmap_words(inode_count: u64) -> usize {
    usize::try_from(inode_count.div_ceil(64)).expect("an image's inode count fits the address space")
}

/// The inode bitmap a shared mount allocates from (`fs/inode.rs`, `InodeAllocator`): bit
/// `i - 1` of the words is set while inode `i` is in use, or being made by the holder of
/// the image lock; `used` counts the bits set. Changed under the image lock only.
pub struct InodeBits<'a> {
    pub words: &'a [AtomicU64],
    pub used: &'a AtomicU64,
}

/// The parts of a mapped image region.
pub struct ImageRegion {
    region: Region,
    inode_count: u64,
    table: TableLayout,
}

impl ImageRegion {
    /// The region of an image of `inode_count` inodes and table state `table`, attached
    /// with [`region_bytes`]`(inode_count, table)` bytes.
    pub fn new(region: Region, inode_count: u64, table: TableLayout) -> ImageRegion {
        assert_eq!(region.len(), region_bytes(inode_count, table), "an image region is attached with region_bytes");
        ImageRegion { region, inode_count, table }
    }
    /// The table state's layout (its `groups` 0 when the region has none).
    pub fn table_layout(&self) -> TableLayout {
        self.table
    }
    /// The table state's words (see [`TableLayout`]).
    pub fn table_words(&self) -> &[AtomicU64] {
        let n = if self.table.groups == 0 { 0 } else { TableLayout::WORDS };
        self.region.slice(table_off(self.inode_count), n)
    }
    /// The table state's `k`th array of a `u32` per group (`k < TableLayout::ARRAYS`).
    pub fn table_array(&self, k: usize) -> &[AtomicU32] {
        assert!(k < TableLayout::ARRAYS, "layout");
        let off = table_off(self.inode_count) + TableLayout::WORDS * 8 + k * 4 * self.table.groups;
        self.region.slice(off, self.table.groups)
    }
    /// The claim filter's cells.
    pub fn table_filter(&self) -> &[AtomicU8] {
        let off = table_off(self.inode_count) + TableLayout::WORDS * 8 + TableLayout::ARRAYS * 4 * self.table.groups;
        self.region.slice(off, if self.table.groups == 0 { 0 } else { self.table.filter_cells })
    }
    /// The inode bitmap (see [`InodeBits`]).
    pub fn inode_bits(&self) -> InodeBits<'_> {
        InodeBits {
            words: self.region.slice(INODE_BITS_OFF, bitmap_words(self.inode_count)),
            used: &self.words().inodes_used,
        }
    }
    /// Whether inode `ino`'s bit is set in the inode bitmap.
    pub fn inode_bit(&self, ino: Ino) -> bool {
        let i = u64::from(ino.0).wrapping_sub(1);
        let words = self.inode_bits().words;
        words.get((i / 64) as usize).is_some_and(|w| w.load(Ordering::Acquire) & (1 << (i % 64)) != 0)
    }
    pub fn participants(&self) -> &Participants {
        self.region.at(PARTICIPANTS_OFF)
    }
    pub fn words(&self) -> &ImageWords {
        self.region.at(WORDS_OFF)
    }
    pub fn ring(&self) -> &ChangeRing {
        self.region.at(RING_OFF)
    }
    pub fn open_inodes(&self) -> &OpenInodes {
        self.region.at(OPEN_OFF)
    }
    pub fn descriptions(&self) -> &Descriptions {
        self.region.at(DESCRIPTIONS_OFF)
    }
    pub fn readers(&self) -> &Readers {
        self.region.at(READERS_OFF)
    }
    fn inode_locks(&self) -> &InodeLocks {
        self.region.at(INODE_LOCKS_OFF)
    }
    pub fn data_ring(&self) -> &DataRing {
        self.region.at(DATA_RING_OFF)
    }
    pub fn record_locks(&self) -> &RecordLocks {
        self.region.at(RECORD_LOCKS_OFF)
    }

    /// Takes the image lock for `me` and waits until no participant is inside a
    /// read-side call. The lock's sequence is odd from here to [`Self::unlock_image`]
    /// (already odd when a dead holder left it so).
    pub fn lock_image(&self, me: Participant) -> Acquired {
        let parts = self.participants();
        let acquired = self.words().lock.lock(me, parts);
        super::sequence::hold(&self.words().writing);
        self.readers().drain(&|p| parts.alive(p));
        acquired
    }

    /// Lets go of the image lock: the sequence even again, after every store of the call.
    pub fn unlock_image(&self) {
        let was = super::sequence::release(&self.words().writing);
        debug_assert_eq!(was % 2, 1, "the image lock is taken with lock_image");
        self.words().lock.unlock();
    }

    /// The lock's sequence as a read-only participant starts a call: even (no holder),
    /// waited for while odd. Err when the holder is dead and no live participant takes
    /// the lock over within `patience` (a read-only participant cannot recover the image);
    /// a live holder is waited for as long as it holds the lock.
    pub fn sequence_even(&self, patience: std::time::Duration) -> Result<u64, Option<Participant>> {
        let mut dead_since: Option<std::time::Instant> = None;
        loop {
            if let Some(s) = super::sequence::even(&self.words().writing) {
                return Ok(s);
            }
            let owner = self.words().lock.owner();
            if owner.is_some_and(|p| self.participants().alive(p)) {
                dead_since = None;
            } else if dead_since.get_or_insert_with(std::time::Instant::now).elapsed() > patience {
                return Err(owner);
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }

    /// Whether the sequence is still `s` after a read-only participant's call read the
    /// image (nothing held the lock meanwhile).
    pub fn sequence_unchanged(&self, s: u64) -> bool {
        super::sequence::unchanged(&self.words().writing, s)
    }

    /// Participant `me` enters a read-side call if no one holds the image lock; false
    /// when someone does (then wait with [`Self::lock_image`] and downgrade with
    /// [`Self::read_holding`]).
    pub fn try_read(&self, me: Participant) -> bool {
        self.readers().try_enter(self.words().lock.word(), me)
    }

    /// Participant `me`, holding the image lock, enters a read-side call; the caller
    /// then lets go of the lock.
    pub fn read_holding(&self, me: Participant) {
        self.readers().enter_holding(me)
    }

    /// Participant `me` leaves a read-side call.
    pub fn leave_read(&self, me: Participant) {
        self.readers().leave(self.words().lock.word(), me)
    }

    /// The read side's writer lock of inode `ino`.
    pub fn inode_lock(&self, ino: Ino) -> &RobustLock {
        &self.inode_locks().locks[ino.0 as usize % INODE_LOCKS].lock
    }

    /// Clears what dead participant `p` holds on the read side (its count, its inode
    /// locks), before its slot is reaped. The image lock's holder only.
    pub fn release_read_side(&self, p: Participant) {
        self.readers().clear(p);
        for l in &self.inode_locks().locks {
            l.lock.release_if_owned_by(p);
        }
    }
}

impl ChangeRing {
    /// Publishes change `n` (the image lock's holder only).
    pub fn put(&self, n: u64, change: Change) {
        let word = match change {
            Change::Inode(ino) => ino.0,
            Change::Everything => EVERYTHING,
        };
        self.entries[(n % CHANGE_RING as u64) as usize].store(word, Ordering::Release);
    }
    /// Change `n`, which must be among the last [`CHANGE_RING`].
    pub fn get(&self, n: u64) -> Change {
        match self.entries[(n % CHANGE_RING as u64) as usize].load(Ordering::Acquire) {
            EVERYTHING => Change::Everything,
            ino => Change::Inode(Ino(ino)),
        }
    }
}

impl OpenInodes {
    fn home(ino: Ino) -> usize {
        (ino.0 as usize).wrapping_mul(0x9E37_79B9) % MAX_OPEN_INODES
    }

    /// Participant `me` has `ino` open (its first descriptor); false when the table is
    /// full (the caller's ENFILE). The image lock's holder only.
    pub fn hold(&self, ino: Ino, me: Participant) -> bool {
        let mut free = None;
        for k in 0..MAX_OPEN_INODES {
            let s = &self.slots[(Self::home(ino) + k) % MAX_OPEN_INODES];
            let (i, unheld) = (s.ino.load(Ordering::Acquire), s.holders.is_empty());
            if i == ino.0 && !unheld {
                self.held.up(me);
                crate::fs::race_point::reached("open inodes: a hold counted");
                if s.holders.insert(me) {
                    self.held.down(me);
                }
                return true;
            }
            if unheld && free.is_none() {
                free = Some(s);
            }
            if i == 0 {
                break; // never used: the inode lies nowhere after it
            }
        }
        let Some(s) = free else { return false };
        self.held.up(me);
        crate::fs::race_point::reached("open inodes: a hold counted");
        s.ino.store(ino.0, Ordering::Release);
        for m in &s.marks {
            m.clear();
        }
        s.holders.set_only(me);
        true
    }

    /// Participant `me`, which has `ino` open, sets (`on`) or clears its `mark` on it;
    /// false when `me` does not have it open (a mapping holds its file open). The image
    /// lock's holder only.
    pub fn set_mark(&self, ino: Ino, me: Participant, mark: Mark, on: bool) -> bool {
        let Some(s) = self.find(ino).filter(|s| s.holders.contains(me)) else {
            return !on;
        };
        if on {
            s.marks[mark as usize].insert(me);
        } else {
            s.marks[mark as usize].remove(me);
        }
        true
    }

    /// The participants that set `mark` on `ino`. Read without the image lock: a mark
    /// stays on its slot while its participant holds the inode, and a slot holding an
    /// inode is found by a search beside the holder's changes (`forget_run_end`).
    pub fn marked(&self, ino: Ino, mark: Mark) -> Members {
        self.find(ino).map_or(Members::default(), |s| s.marks[mark as usize].load())
    }

    /// Whether a participant other than `me` (any, for None: a read-only participant, which
    /// has no slot) set `mark` on `ino`.
    pub fn marked_by_others(&self, ino: Ino, me: Option<Participant>, mark: Mark) -> bool {
        self.marked(ino, mark).without(me).any()
    }

    /// Participant `me` closed its last descriptor of `ino`; whether anyone still has it
    /// open. The image lock's holder only.
    pub fn release(&self, ino: Ino, me: Participant) -> bool {
        let Some(i) = self.find_index(ino) else { return false };
        for m in &self.slots[i].marks {
            m.remove(me);
        }
        if self.slots[i].holders.remove(me) {
            self.held.down(me);
        }
        let left = !self.slots[i].holders.is_empty();
        if !left {
            self.forget_run_end(i);
        }
        left
    }

    /// Slot `i`, no longer held: if it ends its run (the next slot was never used), it and
    /// the unheld slots before it become never used again, so that a search for an inode
    /// no one has open stops where the run now ends. Without this every slot a closed
    /// inode once took stayed on every search's path: once each had been used, each open
    /// and each unlink of a file no one had open passed all of them (a shell's creates
    /// through the shim spent a quarter of their time there). Safe beside searches: every
    /// slot it empties has no held slot after it in its run, and only the image lock's
    /// holder changes the table. The image lock's holder only.
    fn forget_run_end(&self, mut i: usize) {
        let n = MAX_OPEN_INODES;
        if self.slots[(i + 1) % n].ino.load(Ordering::Acquire) != 0 {
            return;
        }
        loop {
            let s = &self.slots[i];
            if s.ino.load(Ordering::Acquire) == 0 || !s.holders.is_empty() {
                return;
            }
            s.ino.store(0, Ordering::Release);
            i = (i + n - 1) % n;
        }
    }

    /// Whether any participant has `ino` open.
    pub fn held(&self, ino: Ino) -> bool {
        self.find(ino).is_some()
    }

    /// Whether any participant but `me` has `ino` open.
    pub fn held_by_others(&self, ino: Ino, me: Participant) -> bool {
        self.find(ino).is_some_and(|s| s.holders.any_but(Some(me)))
    }

    fn find(&self, ino: Ino) -> Option<&OpenInode> {
        self.find_index(ino).map(|i| &self.slots[i])
    }

    fn find_index(&self, ino: Ino) -> Option<usize> {
        for k in 0..MAX_OPEN_INODES {
            let at = (Self::home(ino) + k) % MAX_OPEN_INODES;
            let s = &self.slots[at];
            let i = s.ino.load(Ordering::Acquire);
            if i == ino.0 && !s.holders.is_empty() {
                return Some(at);
            }
            if i == 0 {
                return None;
            }
        }
        None
    }

    /// The inodes on which a participant other than `me` (any, for None) set `mark`: a
    /// look through the whole table, read without the image lock.
    pub fn marked_inodes(&self, me: Option<Participant>, mark: Mark) -> Vec<Ino> {
        let marked = |s: &&OpenInode| s.marks[mark as usize].any_but(me);
        self.slots.iter().filter(marked).map(|s| Ino(s.ino.load(Ordering::Acquire))).filter(|i| i.0 != 0).collect()
    }

    /// Whether participant `p` has any inode open (its bit in some slot).
    pub fn any_held_by(&self, p: Participant) -> bool {
        !self.held.none(p) && self.slots.iter().any(|s| s.holders.contains(p))
    }

    /// Clears dead participant `dead`'s bits everywhere (its holds, and its writable
    /// mappings, which died with it); the inodes no one has open any more (the survivor
    /// frees those that are unlinked). The image lock's holder only. (Also a participant's
    /// own at its leave.) Only `dead` sets its bit, and it is dead or
    /// leaving, so a slot whose word lacks the bit is passed by a load: a read-modify-write
    /// of every slot dirtied every line of the table, 320 KiB of shared memory a leave.
    pub fn release_all_of(&self, dead: Participant) -> Vec<Ino> {
        let mut closed = Vec::new();
        if self.held.none(dead) {
            return closed;
        }
        for (i, s) in self.slots.iter().enumerate().filter(|(_, s)| s.holders.contains(dead)) {
            for m in &s.marks {
                m.remove_if_in(dead);
            }
            s.holders.remove(dead);
            if s.holders.is_empty() {
                closed.push(Ino(s.ino.load(Ordering::Acquire)));
                self.forget_run_end(i);
            }
        }
        self.held.reset(dead);
        closed
    }
}

const _: () = assert!(std::mem::size_of::<OpenInode>() == 8 + 3 * 8 * SET_WORDS);

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Box<OpenInodes> {
        let slot = || OpenInode {
            ino: AtomicU32::new(0),
            _pad: AtomicU32::new(0),
            holders: ParticipantSet::new(),
            marks: [ParticipantSet::new(), ParticipantSet::new()],
        };
        Box::new(OpenInodes { slots: std::array::from_fn(|_| slot()), held: HoldCounts::new() })
    }

    fn used(t: &OpenInodes) -> usize {
        t.slots.iter().filter(|s| s.ino.load(Ordering::Relaxed) != 0).count()
    }

    /// A participant's mark is seen by the others, not by itself, needs its hold, and
    /// goes with its clearing, its close and its death; a slot taken again by another
    /// inode starts unmarked; the two marks are apart.
    #[test]
    fn a_mark_is_the_holders_and_dies_with_it() {
        let t = table();
        let (a, b) = (Participant(0), Participant(1));
        let (w, k) = (Mark::Writable, Mark::Blocks);
        let others = |i: u32, me: Option<Participant>, m: Mark| t.marked_by_others(Ino(i), me, m);
        assert!(t.hold(Ino(7), a));
        assert!(!t.set_mark(Ino(7), b, w, true), "b does not have it open");
        assert!(!others(7, Some(a), w));
        assert!(t.set_mark(Ino(7), a, w, true));
        assert!(others(7, Some(b), w) && others(7, None, w) && !others(7, None, k));
        assert!(!others(7, Some(a), w), "its own mark");
        assert!(t.set_mark(Ino(7), a, k, true) && t.set_mark(Ino(7), a, w, false));
        assert!(!others(7, Some(b), w) && others(7, Some(b), k), "one mark cleared, the other kept");
        assert!(t.set_mark(Ino(7), a, w, true));
        assert!(!t.release(Ino(7), a));
        assert!(t.hold(Ino(7), b));
        assert!(!others(7, None, w) && !others(7, None, k), "closed: a's marks went with its hold");
        assert!(t.hold(Ino(8), a) && t.set_mark(Ino(8), a, w, true) && t.set_mark(Ino(7), b, w, true));
        assert!(t.hold(Ino(9), a) && t.hold(Ino(9), b) && t.set_mark(Ino(9), a, w, true));
        assert!(t.set_mark(Ino(9), a, k, true));
        assert_eq!(t.marked_inodes(Some(b), k), vec![Ino(9)]);
        assert_eq!(t.release_all_of(a), vec![Ino(8)]);
        assert!(!others(9, Some(b), w) && !others(9, Some(b), k), "a died: its marks of a file b has open went");
        assert!(others(7, Some(a), w), "a died: b's mark stays");
        assert!(t.hold(Ino(8), b));
        assert!(!others(8, None, w), "a new hold of the slot starts unmarked");
    }

    /// A participant killed between counting a hold and setting its bit (on a slot of its
    /// own, and on one another holds) leaves no bit its leave or its reaper would pass
    /// over: each skips the table when the count is 0.
    #[test]
    fn a_holder_killed_between_its_count_and_its_bit_leaves_no_hold_unseen() {
        let t = table();
        let (a, b) = (Participant(2), Participant(70));
        for shared in [false, true] {
            if shared {
                assert!(t.hold(Ino(9), b));
            }
            let hook = crate::fs::race_point::on_this_thread(|name| {
                if name == "open inodes: a hold counted" {
                    panic!("killed at {name}");
                }
            });
            let killed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.hold(Ino(9), a)));
            drop(hook);
            assert!(killed.is_err(), "the point was not reached");
            t.release_all_of(a);
            assert!(!t.slots.iter().any(|s| s.holders.contains(a)), "a hold of the dead one is left (shared {shared})");
            assert!(t.held.none(a));
        }
        assert!(t.held_by_others(Ino(9), a), "b's hold stays");
    }

    /// Inodes opened and closed one after another, many more than the table's slots
    /// (a shell making files): each close leaves no slot behind, so a search for an inode
    /// no one has open stays short.
    #[test]
    fn closed_inodes_leave_no_slot_on_the_searches_path() {
        let t = table();
        let me = Participant(3);
        for i in 1..=3 * MAX_OPEN_INODES as u32 {
            assert!(t.hold(Ino(i), me));
            assert!(t.held(Ino(i)));
            assert!(!t.release(Ino(i), me), "{i}: no one else has it");
            assert_eq!(used(&t), 0, "after inode {i}'s close");
        }
    }

    /// Inodes whose runs cross: one closed in the middle of a run keeps its slot (an inode
    /// after it is found past it), the run's end goes back with every unheld slot before it.
    #[test]
    fn a_run_keeps_the_slots_before_a_held_one() {
        let t = table();
        let (a, b) = (Participant(0), Participant(1));
        // Four inodes of one home: a run of four slots.
        let home = OpenInodes::home(Ino(1));
        let same: Vec<Ino> = (2..u32::MAX).map(Ino).filter(|&i| OpenInodes::home(i) == home).take(3).collect();
        let run: Vec<Ino> = std::iter::once(Ino(1)).chain(same).collect();
        for &i in &run {
            assert!(t.hold(i, a));
        }
        assert!(t.hold(run[3], b));
        assert!(!t.release(run[1], a));
        assert!(t.held(run[2]) && t.held(run[3]), "found past a slot closed in the middle");
        assert_eq!(used(&t), 4);
        assert!(t.release(run[3], a), "b still has it");
        assert!(!t.release(run[2], a));
        assert_eq!(used(&t), 4, "the run ends at a held slot");
        assert_eq!(t.release_all_of(b), vec![run[3]]);
        assert_eq!(used(&t), 1, "the run's end and the unheld slots before it go");
        assert!(t.held(run[0]) && !t.held(run[3]));
        assert!(!t.release(run[0], a));
        assert_eq!(used(&t), 0);
    }
}
