//! The scope of the image lock's holder's call: what it may have left half done if it dies
//! (docs/design.md, *A takeover scoped to the dead call*). The holder names, before it
//! makes the first store that could need repair, each inode it changes and each range of
//! logical blocks whose table slots it claims or frees, with what the inode's block count
//! was beside them; the survivor that takes the lock over from a dead holder repairs only
//! those (`fs/shared/takeover.rs`) instead of recovering the whole image. A call the record
//! cannot describe (more inodes or ranges than it holds, or a kind of change it does not
//! describe) marks it unscoped, and the survivor recovers the whole image as before.
//!
//! Only the holder of the image lock writes it, and a process death keeps every store it
//! made in order, so the survivor reads the record as the dead call left it after its
//! last store; the record is plain shared memory, never made durable (a power failure
//! recovers the whole image anyway).

use super::region::Shared;
use crate::layout::Ino;
use std::sync::atomic::{AtomicU64, Ordering};

/// Entries a call's scope holds.
pub const SCOPE_ENTRIES: usize = 8;
/// The longest range of logical blocks an entry covers; a longer one makes the call
/// unscoped (a repair by lookups would cost more than the table's scan).
pub const SCOPE_MAX_RANGE: u64 = 1 << 16;

/// `state` of a call the record does not describe.
const UNSCOPED: u64 = u64::MAX;
/// `state` while a new holder resets the record: no entries, and `used_before` not yet
/// its own (the table's count is the region's).
const RESETTING: u64 = u64::MAX - 1;

/// An entry's `blocks` when it carries no block count.
const NO_BLOCKS: u64 = u64::MAX;

/// One inode, and the logical blocks [lo, hi) of it whose slots the call claims or frees.
#[repr(C)]
pub struct ScopeEntry {
    ino: AtomicU64,
    lo: AtomicU64,
    hi: AtomicU64,
    /// The keys the range held when it was named.
    pre: AtomicU64,
    /// The inode's block count when its first range was named (NO_BLOCKS on the others).
    blocks: AtomicU64,
    /// The inode's bit in the region's inode bitmap when it was first named (1: taken).
    bit: AtomicU64,
}

/// The record (see the module).
#[repr(C)]
pub struct CallScope {
    /// Entries used (0 ..= [`SCOPE_ENTRIES`]), or UNSCOPED, or RESETTING.
    state: AtomicU64,
    /// The table's used count as the call began.
    used_before: AtomicU64,
    /// The inode bitmap's count as the call began.
    inodes_before: AtomicU64,
    entries: [ScopeEntry; SCOPE_ENTRIES],
}

const _: () = assert!(std::mem::size_of::<CallScope>() == 408, "docs/design.md gives the record's size");

// SAFETY: atomics only.
unsafe impl Shared for ScopeEntry {}
// SAFETY: atomics and an array of Shared.
unsafe impl Shared for CallScope {}

/// One entry as the survivor reads it. An inode's block count after the repair is the
/// `blocks` of its entry that has one plus, over its entries, the keys each range holds
/// less its `pre`; the table's used count moved by that sum over every entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scoped {
    pub ino: Ino,
    /// Logical blocks [lo, hi) whose slots were claimed or freed (empty: the inode only).
    pub lo: u64,
    pub hi: u64,
    /// The keys the range held when it was named.
    pub pre: u64,
    /// The inode's block count then (its first range only; None for a free inode's).
    pub blocks: Option<u64>,
    /// The inode's bit in the region's bitmap when the call first named it.
    pub bit: bool,
}

/// What a dead holder's record says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScopeRecord {
    /// The call is not described: recover the whole image.
    Unscoped,
    /// The call changed these; the table's count was `used_before` and the inode bitmap's
    /// `inodes_before` as it began (None: the region's counts stand, nothing was changed).
    Scoped { used_before: Option<u64>, inodes_before: Option<u64>, entries: Vec<Scoped> },
}

impl CallScope {
    /// A new holder's call begins: no entries, the table's count `used` and the inode
    /// bitmap's `inodes` (the region's, which it caught up with).
    pub fn reset(&self, used: u64, inodes: u64) {
        self.state.store(RESETTING, Ordering::Release);
        self.used_before.store(used, Ordering::Release);
        self.inodes_before.store(inodes, Ordering::Release);
        self.state.store(0, Ordering::Release);
    }

    /// The call makes a change the record does not describe.
    pub fn unscope(&self) {
        self.state.store(UNSCOPED, Ordering::Release);
    }

    /// Entries in use, or None when unscoped (or resetting: the holder's own reset).
    fn used(&self) -> Option<usize> {
        match self.state.load(Ordering::Acquire) {
            n if n <= SCOPE_ENTRIES as u64 => Some(n as usize),
            _ => None,
        }
    }

    /// Inode `ino` is changed (its inode, not its slots); `bit`: its bit in the inode
    /// bitmap now, kept if this names it first (every change of a bit comes after the
    /// inode is named: an allocation names it before it takes the bit, a free's
    /// transaction before it gives it back).
    pub fn inode(&self, ino: Ino, bit: impl FnOnce() -> bool) {
        let Some(n) = self.used() else { return };
        if self.entries[..n].iter().any(|e| e.ino.load(Ordering::Relaxed) == ino.0 as u64) {
            return;
        }
        self.push(n, ino, 0, 0, 0, NO_BLOCKS, bit());
    }

    /// Slots of `ino`'s logical blocks [lo, hi) are claimed (`mapped`: how many of them
    /// the file maps now, 0 for fresh blocks) or freed (`mapped`: the slots freed), the
    /// inode's block count being `blocks` now, if it is in use (None: free on the media,
    /// so every key of it the repair finds is the call's); `bit` as for [`Self::inode`].
    #[allow(clippy::too_many_arguments)]
    pub fn range(&self, ino: Ino, lo: u64, hi: u64, mapped: u64, blocks: Option<u64>, bit: impl FnOnce() -> bool) {
        let Some(n) = self.used() else { return };
        if hi <= lo {
            return;
        }
        if hi - lo > SCOPE_MAX_RANGE {
            return self.unscope();
        }
        let i = ino.0 as u64;
        let mine = || self.entries[..n].iter().filter(move |e| e.ino.load(Ordering::Relaxed) == i);
        let counted = mine().any(|e| e.blocks.load(Ordering::Relaxed) != NO_BLOCKS);
        for e in mine() {
            let (elo, ehi) = (e.lo.load(Ordering::Relaxed), e.hi.load(Ordering::Relaxed));
            if elo == ehi || hi < elo || ehi < lo {
                continue;
            }
            if mapped == 0 {
                // Fresh blocks next to or over a range named before join it: they hold no
                // key, so its `pre` stands.
                e.lo.store(elo.min(lo), Ordering::Release);
                e.hi.store(ehi.max(hi), Ordering::Release);
                return;
            }
            if lo < ehi && elo < hi {
                return self.unscope(); // mapped blocks counted twice
            }
        }
        let blocks = match (counted, blocks) {
            (false, Some(b)) => b,
            _ => NO_BLOCKS,
        };
        // An inode-only entry of this inode takes the range.
        if let Some(e) = mine().find(|e| e.lo.load(Ordering::Relaxed) == e.hi.load(Ordering::Relaxed)) {
            e.pre.store(mapped, Ordering::Release);
            e.blocks.store(blocks, Ordering::Release);
            e.lo.store(lo, Ordering::Release);
            e.hi.store(hi, Ordering::Release);
            return;
        }
        // A later range of a named inode: its bit as first named.
        let bit = mine().next().map_or_else(bit, |e| e.bit.load(Ordering::Relaxed) != 0);
        self.push(n, ino, lo, hi, mapped, blocks, bit);
    }

    #[allow(clippy::too_many_arguments)]
    fn push(&self, n: usize, ino: Ino, lo: u64, hi: u64, pre: u64, blocks: u64, bit: bool) {
        let Some(e) = self.entries.get(n) else { return self.unscope() };
        e.ino.store(ino.0 as u64, Ordering::Release);
        e.lo.store(lo, Ordering::Release);
        e.hi.store(hi, Ordering::Release);
        e.pre.store(pre, Ordering::Release);
        e.blocks.store(blocks, Ordering::Release);
        e.bit.store(u64::from(bit), Ordering::Release);
        self.state.store(n as u64 + 1, Ordering::Release);
    }

    /// The record as a dead holder left it.
    pub fn read(&self) -> ScopeRecord {
        let n = match self.state.load(Ordering::Acquire) {
            UNSCOPED => return ScopeRecord::Unscoped,
            RESETTING => return ScopeRecord::Scoped { used_before: None, inodes_before: None, entries: Vec::new() },
            n if n > SCOPE_ENTRIES as u64 => return ScopeRecord::Unscoped,
            n => n as usize,
        };
        let entries = self.entries[..n]
            .iter()
            .map(|e| Scoped {
                ino: Ino(e.ino.load(Ordering::Acquire) as u32),
                lo: e.lo.load(Ordering::Acquire),
                hi: e.hi.load(Ordering::Acquire),
                pre: e.pre.load(Ordering::Acquire),
                blocks: Some(e.blocks.load(Ordering::Acquire)).filter(|&b| b != NO_BLOCKS),
                bit: e.bit.load(Ordering::Acquire) != 0,
            })
            .collect();
        ScopeRecord::Scoped {
            used_before: Some(self.used_before.load(Ordering::Acquire)),
            inodes_before: Some(self.inodes_before.load(Ordering::Acquire)),
            entries,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Box<CallScope> {
        // SAFETY: atomics are valid all zero.
        let s: Box<CallScope> = unsafe { Box::new(std::mem::zeroed()) };
        s.reset(100, 10);
        s
    }

    fn entries(s: &CallScope) -> Vec<Scoped> {
        match s.read() {
            ScopeRecord::Scoped { entries, .. } => entries,
            ScopeRecord::Unscoped => panic!("unscoped"),
        }
    }

    #[test]
    fn fresh_claims_next_to_each_other_join_one_range_with_the_first_block_count() {
        let s = scope();
        s.range(Ino(5), 10, 12, 0, Some(7), || true);
        s.range(Ino(5), 12, 20, 0, Some(9), || true);
        s.inode(Ino(5), || true);
        assert_eq!(entries(&s), vec![Scoped { ino: Ino(5), lo: 10, hi: 20, pre: 0, blocks: Some(7), bit: true }]);
    }

    #[test]
    fn an_inode_named_first_takes_its_range_and_a_free_subtracts_what_it_maps() {
        let s = scope();
        s.inode(Ino(3), || false);
        s.range(Ino(3), 4, 9, 5, Some(12), || true);
        s.range(Ino(3), 20, 22, 0, Some(7), || true);
        assert_eq!(
            entries(&s),
            vec![
                Scoped { ino: Ino(3), lo: 4, hi: 9, pre: 5, blocks: Some(12), bit: false },
                Scoped { ino: Ino(3), lo: 20, hi: 22, pre: 0, blocks: None, bit: false },
            ]
        );
    }

    #[test]
    fn what_it_cannot_describe_makes_the_call_unscoped() {
        let s = scope();
        s.range(Ino(3), 4, 9, 0, Some(1), || true);
        s.range(Ino(3), 6, 12, 3, Some(1), || true); // mapped blocks over a range named before
        assert_eq!(s.read(), ScopeRecord::Unscoped);
        let s = scope();
        for i in 1..=SCOPE_ENTRIES as u32 + 1 {
            s.inode(Ino(i), || true);
        }
        assert_eq!(s.read(), ScopeRecord::Unscoped);
        let s = scope();
        s.range(Ino(3), 0, SCOPE_MAX_RANGE + 1, 0, Some(0), || true);
        assert_eq!(s.read(), ScopeRecord::Unscoped);
        s.reset(4, 2);
        assert_eq!(s.read(), ScopeRecord::Scoped { used_before: Some(4), inodes_before: Some(2), entries: Vec::new() });
    }
}
