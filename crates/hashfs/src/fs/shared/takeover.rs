//! A takeover scoped to the dead participant's call (docs/design.md, *A takeover scoped to
//! the dead call*). The holder of the image lock names in the region, before the stores
//! that could need repair, the inodes its call changes and the ranges of logical blocks
//! whose table slots it claims or frees (`share/scope.rs`); a survivor that takes the
//! lock over from a dead holder rolls back the open journal and repairs only those: the
//! strays among their slots (reservations, keys past EOF or of a free inode, a second copy
//! of a key), their tagged sizes, block counts, tails and links, and their bits in the
//! inode bitmap. What it costs follows the dead call, not the image. A call the record
//! does not describe, and every placement but the paper's, get the whole recovery.
//!
//! Why the ranges suffice: no other call was in progress (the holder's lock excludes
//! every other change; the read side changes no slot and no inode), so every slot outside
//! them is as the last finished call left it, and a death keeps each store the dead call
//! made, in order (`fs/recovery.rs`, `Interruption::Death`), so each probe path is whole
//! and each stray lies on the path of a key in a named range (a reservation records its
//! key's home).

#![forbid(unsafe_code)]

use super::{note_leftovers, recording, SharedMount};
use crate::fs::hashfs::append_tag;
use crate::fs::recovery::{self, mappable_blocks, Interruption, RecoverVerbs};
use crate::fs::FsInner;
use crate::layout::inode::InodeState;
use crate::layout::{Ino, Lblk};
use crate::mapping::hashfs::{classify, file_key, Entry, HashTable};
use crate::mapping::FileMap;
use crate::pm::PmDevice;
use crate::share::scope::{ScopeRecord, Scoped};
use crate::share::{Change, ImageRegion, Participant};
use crate::Result;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

impl<D: PmDevice> FsInner<D> {
    /// The region of this thread's call, when it holds a shared mount's image lock.
    fn call_region(&self) -> Option<&ImageRegion> {
        if !recording() {
            return None;
        }
        self.shared.get().map(|sh| &*sh.region)
    }

    /// The call is about to change inode `ino` (see [`crate::share::scope::CallScope::inode`]).
    pub(crate) fn scope_inode(&self, ino: Ino) {
        if let Some(r) = self.call_region() {
            r.words().scope.inode(ino, || r.inode_bit(ino));
        }
    }

    /// The call is about to claim fresh blocks `lblks` (sorted) of `ino`, whose block count
    /// is `blocks` (None: free on the media): each run of them is named before any is
    /// claimed. Nothing outside a shared mount's call (no pass over the blocks either).
    pub(crate) fn scope_claims(&self, ino: Ino, lblks: &[Lblk], blocks: Option<u64>) {
        let Some(r) = self.call_region() else { return };
        let mut rest = lblks;
        while let Some(&first) = rest.first() {
            let n = rest.iter().zip(first.0..).take_while(|(l, i)| l.0 == *i).count();
            r.words().scope.range(ino, first.0, first.0 + n as u64, 0, blocks, || r.inode_bit(ino));
            rest = &rest[n..];
        }
    }

    /// The call is about to claim or free the slots of `ino`'s logical blocks [lo, hi)
    /// (see [`crate::share::scope::CallScope::range`]).
    pub(crate) fn scope_range(&self, ino: Ino, lo: Lblk, hi: Lblk, mapped: u64, blocks: Option<u64>) {
        if let Some(r) = self.call_region() {
            r.words().scope.range(ino, lo.0, hi.0, mapped, blocks, || r.inode_bit(ino));
        }
    }

    /// Repairs what dead participant `dead`'s call named (`record`, read before the
    /// takeover marked it unscoped, so that a survivor that dies repairing is itself
    /// followed by the whole recovery). `closed`: the inodes no one has open any more now
    /// that the dead one's holds are gone. Ok(false), having changed nothing, when the
    /// record or the image does not allow it.
    pub(super) fn take_over_scoped(
        &self,
        sh: &SharedMount,
        dead: Participant,
        record: &ScopeRecord,
        closed: &[Ino],
    ) -> Result<bool> {
        let ScopeRecord::Scoped { used_before, inodes_before, entries } = record else { return Ok(false) };
        let region = &sh.region;
        let fits = |ino: Ino| ino.0 != 0 && ino.get() <= self.geo.inode_count;
        let paper = matches!(&self.map, FileMap::Hash(t) if t.groups().is_none());
        let built = region.words().inode_bits_built.load(Ordering::Acquire) != 0;
        if !paper || !built || !entries.iter().all(|e| fits(e.ino)) || !closed.iter().all(|&i| fits(i)) {
            return Ok(false);
        }
        let (tmp, _) = recovery::mount_scoped(self.dev.clone())?;
        tmp.unmounted.store(true, Ordering::Release); // its Drop must not mark the image clean
        let FileMap::Hash(table) = &tmp.map else { return Ok(false) };
        let changed = repair(&tmp, table, region, *used_before, entries)?;
        // Unlinked files only the dead participant had open, and unlinked ones its call
        // left (an unlink, or a rename over a file, that died before the free); not those
        // a live participant has open or a read-only one pins (`read_only.rs`), which the
        // last to leave looks for.
        let opens = region.open_inodes();
        let kept = |ino: Ino| opens.held(ino) || tmp.pinned_by_reader(ino);
        let mut freed = Vec::new();
        for ino in changed.iter().chain(closed).copied() {
            let raw = crate::fs::inode::read_raw(&*tmp.dev, &tmp.geo, ino);
            if raw.check(ino) == InodeState::Allocated && raw.nlink == 0 && !kept(ino) && !freed.contains(&ino) {
                let cell = tmp.cell(ino)?;
                let mut st = cell.state.write();
                tmp.free_inode_locked(&cell, &mut st)?;
                freed.push(ino);
                // Its attributes' inode goes with it (`free_inode_locked`): its bit too.
                if raw.xattr_ino != 0 {
                    freed.push(Ino(raw.xattr_ino));
                }
            }
        }
        if !freed.is_empty() {
            // Their blocks: the count of what the frees released (the tmp table's, which
            // started from the repaired count).
            region.words().table_used.store(table.used(), Ordering::Release);
        }
        // Each inode's bit as the call found it: as first named, or (one only the dead one
        // had open, which it did not name) as it is.
        let before = |ino: Ino| entries.iter().find(|e| e.ino == ino).map_or_else(|| region.inode_bit(ino), |e| e.bit);
        let inos: Vec<(Ino, bool)> = changed.iter().chain(&freed).map(|&i| (i, before(i))).collect();
        publish_scoped(region, &tmp, &inos, *inodes_before);
        note_leftovers(region);
        drop(tmp);
        region.participants().reap(dead);
        sh.takeovers.fetch_add(1, Ordering::Relaxed);
        sh.scoped_takeovers.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }
}

/// The inodes `entries` name, repaired on `fs` (a mount of the image after the dead call's
/// journal was rolled back): their tagged sizes settled, the strays among their named
/// slots freed, their block counts and tails set right, the table's used count recomputed
/// from `used_before`; returns the inodes named.
fn repair<D: PmDevice>(
    fs: &FsInner<D>,
    table: &HashTable<D>,
    region: &ImageRegion,
    used_before: Option<u64>,
    entries: &[Scoped],
) -> Result<Vec<Ino>> {
    let mut inos: Vec<Ino> = entries.iter().map(|e| e.ino).collect();
    inos.sort_unstable();
    inos.dedup();
    // Sizes first: a tagged one is settled through the table, before strays are judged
    // against it.
    let mut sizes = BTreeMap::new();
    for &ino in &inos {
        append_tag::settle(&*fs.dev, &fs.geo, table, ino); // stores nothing on a plain size
        let raw = crate::fs::inode::read_raw(&*fs.dev, &fs.geo, ino);
        let found = match raw.check(ino) {
            InodeState::Allocated => Found::InUse,
            InodeState::Free => Found::Free,
            InodeState::Corrupt(_) => Found::Corrupt,
        };
        sizes.insert(ino, (found, raw));
    }
    fs.dev.fence();
    // The named slots: what is left of the call's claims and frees.
    let mut strays = Vec::new();
    let mut counts: BTreeMap<Ino, (Option<u64>, i64)> = BTreeMap::new();
    let mut moved = 0i64;
    for e in entries.iter().filter(|e| e.lo < e.hi) {
        let (state, raw) = sizes[&e.ino];
        let limit = match state {
            Found::InUse => mappable_blocks(raw.size),
            Found::Free => 0,
            // As the whole recovery leaves a corrupt inode's keys: counted, never freed.
            Found::Corrupt => u64::MAX,
        };
        let mut now = 0i64;
        for lblk in e.lo..e.hi {
            let Some(key) = file_key(e.ino, Lblk(lblk)) else { break };
            now += i64::from(walk_path(table, key, lblk < limit, &mut strays));
        }
        let c = counts.entry(e.ino).or_default();
        c.0 = c.0.or(e.blocks);
        c.1 += now - e.pre as i64;
        moved += now - e.pre as i64;
    }
    // A reservation lies on the paths of every key of its home: found once per key.
    strays.sort_unstable();
    strays.dedup();
    let before = used_before.unwrap_or_else(|| region.words().table_used.load(Ordering::Acquire));
    table.set_used(before.wrapping_add_signed(moved) + strays.len() as u64);
    table.drop_stray_slots(&strays, Interruption::Death);
    fs.dev.fence();
    region.words().table_used.store(table.used(), Ordering::Release);
    // Block counts, where the call named an inode's count beside its first range.
    for (&ino, &(blocks, change)) in &counts {
        let ((Found::InUse, raw), Some(blocks)) = (sizes[&ino], blocks) else { continue };
        let count = blocks.wrapping_add_signed(change);
        if raw.blocks == count {
            continue;
        }
        let mut fixed = raw;
        fixed.blocks = count;
        let mut tx = fs.journals.begin();
        crate::fs::inode::tx_write_inode(&mut tx, &fs.geo, ino, &mut fixed);
        tx.commit()?;
    }
    let files = inos.iter().filter_map(|ino| match sizes[ino] {
        (Found::InUse, raw) => Some((*ino, raw.size)),
        _ => None,
    });
    fs.zero_tails_after_crash(files)?;
    Ok(inos)
}

/// What the inode table says of a named inode after the rollback.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Found {
    InUse,
    Free,
    Corrupt,
}

/// Walks `key`'s probe path to its end: every reservation made for a key of this home is a
/// stray (no call but the dead one claims slots), and so is every copy of the key when
/// `inside` is false (past EOF, or a free inode's) and every copy after the first when it
/// is true. Whether a copy stays.
fn walk_path<D: PmDevice>(table: &HashTable<D>, key: u64, inside: bool, strays: &mut Vec<u64>) -> bool {
    let home = table.home(key);
    let (n, mut s) = (table.nslots(), home);
    let mut kept = false;
    for _ in 0..n {
        let v = table.load(s);
        match classify(v, n) {
            Entry::Empty => break,
            Entry::Reserved { home: h } if h == home => strays.push(s),
            Entry::Key { .. } if v == key => {
                if inside && !kept {
                    kept = true;
                } else {
                    strays.push(s);
                }
            }
            _ => {}
        }
        s = table.next_slot(s);
    }
    kept
}

/// What a scoped takeover tells the others: each inode it repaired or freed is read again
/// (nothing else changed), the next transaction id, and the inodes' bits in the bitmap as
/// the inode table now has them. `inos`: each with its bit as the dead call found it;
/// the bitmap's count is the call's `inodes_before` moved by those bits' changes (a death
/// between a bit's store and the count's leaves them apart; None: the count stands).
fn publish_scoped<D: PmDevice>(
    region: &ImageRegion,
    fs: &FsInner<D>,
    inos: &[(Ino, bool)],
    inodes_before: Option<u64>,
) {
    let words = region.words();
    words.next_txid.fetch_max(fs.journals.next_txid(), Ordering::AcqRel);
    let bits = region.inode_bits();
    let mut count = inodes_before.unwrap_or_else(|| bits.used.load(Ordering::Acquire));
    let mut n = words.changes.load(Ordering::Acquire);
    let mut seen = Vec::with_capacity(inos.len());
    for &(ino, was) in inos {
        if seen.contains(&ino) {
            continue;
        }
        seen.push(ino);
        let used = crate::fs::inode::read_raw(&*fs.dev, &fs.geo, ino).check(ino) != InodeState::Free;
        let i = ino.get() - 1;
        let (word, mask) = (&bits.words[(i / 64) as usize], 1u64 << (i % 64));
        if used {
            word.fetch_or(mask, Ordering::AcqRel);
        } else {
            word.fetch_and(!mask, Ordering::AcqRel);
        }
        count = (count + u64::from(used)).saturating_sub(u64::from(was));
        region.ring().put(n, Change::Inode(ino));
        n += 1;
    }
    bits.used.store(count, Ordering::Release);
    words.changes.store(n, Ordering::Release);
}
