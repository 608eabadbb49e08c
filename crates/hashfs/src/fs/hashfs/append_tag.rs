//! One-fence small appends: the tagged size word.
//!
//! A fast append (`fs/append.rs`) persists its data, fences, stores the size, fences. The
//! first fence is most of a small append's cost (a 100-byte append takes 393-429 ns with
//! both and 254-272 ns with one, docs/benchmarks.md), so an append of fewer than 4 KiB at
//! the end of a HashFS file takes one fence: it stores its new size with a check of the
//! bytes it appended, and recovery keeps that size only if the file's last `len` bytes on
//! the media still give the check; else it drops the append (the size goes back to
//! `size - len`, durable since the previous fence). This is the commit rule of ext4's
//! journal with `journal_async_commit` (the commit block carries a CRC32C of the
//! transaction's blocks, so it need not wait for them): a torn append would go unnoticed
//! only if its stale bytes gave the same 32-bit check.
//!
//! The two words (bytes 16..32 of the inode, one cache line, outside the inode's sum):
//! - the size word: the size (bits 0..45), the append's length (45..57; 0 is a plain
//!   size, trusted as it is), a parity bit (57), the check's top 2 bits (58..60), zeros;
//! - the block-count word: the block count (bits 0..33), the parity again (33) and the
//!   check's low 30 bits (34..64); only the block count when the size word is plain.
//!
//! A tagged append stores the block-count word, then the size word, into their one line:
//! a line's stores reach the media in program order (docs/design.md, "Persistence
//! model"), so a new size word comes with its block-count word. A crash may leave the new
//! block-count word beside the old size word: their parities differ (each tagged append
//! flips it), and the old size, durable since its own fence, stands. Making a size plain
//! stores the size word first, so a plain size word beside a tagged block-count word is the
//! middle of that (or corruption, on a cleanly unmounted image).
//!
//! The check covers bytes that later writes could change in place (an overwrite, an untorn
//! write, a punch or zeroed range, a pswap, a store through a memory mapping), after which
//! they would no longer match it. So before any of these the file's size is made plain
//! ([`FsInner::untag`]: one flush and fence, once per file until its next tagged append);
//! before an overwrite, only if it touches the appended bytes ([`FsInner::untag_for`]).
//! Writes past the end, truncation and metadata changes leave those bytes alone (an
//! interrupted transaction restores the tagged words with the same bytes under them). A
//! clean unmount makes every size plain; mount settles every tagged size before it reads
//! any ([`settle`]), and so does fsck.

#![forbid(unsafe_code)]

use crate::fs::inode::{InodeCell, InodeMem};
use crate::fs::FsInner;
use crate::layout::inode::{INODE_BLOCKS_OFF, INODE_SIZE_OFF};
use crate::layout::{Geometry, Ino, Lblk, Pblk, BLOCK_BYTES};
use crate::mapping::hashfs::{file_key, HashTable};
use crate::pm::PmDevice;
use std::sync::atomic::Ordering;

/// The longest append that takes one fence (its length has 12 bits).
pub(crate) const TAG_MAX_LEN: u64 = 4095;

const SIZE_BITS: u32 = 45;
const SIZE_MASK: u64 = (1 << SIZE_BITS) - 1;
const LEN_SHIFT: u32 = 45;
const LEN_MASK: u64 = 0xFFF;
const PARITY_BIT: u32 = 57;
const CHECK_HI_SHIFT: u32 = 58;
const BLOCKS_BITS: u32 = 33;
const BLOCKS_MASK: u64 = (1 << BLOCKS_BITS) - 1;
const BLOCKS_PARITY_BIT: u32 = 33;
const CHECK_LO_SHIFT: u32 = 34;

/// A tagged size word, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tag {
    pub size: u64,
    pub len: u64,
    pub parity: bool,
    check_hi: u64,
}

impl Tag {
    /// The tag of size word `w`, if it is one (a plain size is not; nor is a word with its
    /// top bits set, which the inode's checks call corrupt).
    pub(crate) fn of(w: u64) -> Option<Tag> {
        let len = (w >> LEN_SHIFT) & LEN_MASK;
        if len == 0 || w >> 60 != 0 {
            return None;
        }
        Some(Tag { size: w & SIZE_MASK, len, parity: (w >> PARITY_BIT) & 1 == 1, check_hi: (w >> CHECK_HI_SHIFT) & 3 })
    }

    /// The full check, with the low bits from block-count word `b`.
    fn check(&self, b: u64) -> u32 {
        ((self.check_hi << 30) | (b >> CHECK_LO_SHIFT)) as u32
    }
}

/// The check of an append of `data` that ends the file at `size`.
pub(crate) fn append_check(ino: Ino, size: u64, parity: bool, data: &[u8]) -> u32 {
    let mut head = [0u8; 24];
    head[..8].copy_from_slice(&ino.get().to_le_bytes());
    head[8..16].copy_from_slice(&size.to_le_bytes());
    head[16..24].copy_from_slice(&((data.len() as u64) | (u64::from(parity) << 16)).to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&head), data)
}

/// The (size word, block-count word) of a tagged append of `data` ending at `size`.
pub(crate) fn tagged_words(ino: Ino, size: u64, blocks: u64, parity: bool, data: &[u8]) -> (u64, u64) {
    debug_assert!(!data.is_empty() && data.len() as u64 <= TAG_MAX_LEN && size <= SIZE_MASK && blocks <= BLOCKS_MASK);
    let c = u64::from(append_check(ino, size, parity, data));
    let a = size | (data.len() as u64) << LEN_SHIFT | u64::from(parity) << PARITY_BIT | (c >> 30) << CHECK_HI_SHIFT;
    let b = blocks | u64::from(parity) << BLOCKS_PARITY_BIT | (c & ((1 << 30) - 1)) << CHECK_LO_SHIFT;
    (a, b)
}

/// What settling one inode's size found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Plain already.
    Plain,
    /// Tagged, and its bytes are whole (or the tag was an interrupted one's block-count word
    /// beside the older size): the size stands.
    Kept(u64),
    /// Tagged, and its bytes are not whole: the append is dropped, the size is `size - len`.
    Dropped(u64),
    /// A plain size word beside a tagged block-count word (the middle of making a size
    /// plain): the block count's tag bits are cleared.
    Cleared,
}

/// Settles inode `ino`'s size words on `dev`: a tagged size is checked against the file's
/// last bytes (found through `table`) and stored plain, kept or dropped (see the module).
/// Flushes what it stores; the caller fences. Stores nothing on a plain size, or on a
/// tag no append can have left (a length above the size).
pub(crate) fn settle<D: PmDevice>(dev: &D, geo: &Geometry, table: &HashTable<D>, ino: Ino) -> Settled {
    let ioff = geo.inode_off(ino);
    let (a, b) = (dev.load_u64(ioff + INODE_SIZE_OFF), dev.load_u64(ioff + INODE_BLOCKS_OFF));
    let Some(tag) = Tag::of(a) else {
        if a >> LEN_SHIFT == 0 && b >> BLOCKS_BITS != 0 {
            dev.store_u64(ioff + INODE_BLOCKS_OFF, b & BLOCKS_MASK);
            dev.flush(ioff + INODE_BLOCKS_OFF, 8);
            return Settled::Cleared;
        }
        return Settled::Plain;
    };
    if tag.len > tag.size {
        return Settled::Plain; // corrupt: the inode's checks see a size beyond any file
    }
    let whole = (b >> BLOCKS_PARITY_BIT) & 1 != u64::from(tag.parity) || {
        let data = file_bytes(dev, geo, table, ino, tag.size - tag.len, tag.len as usize);
        append_check(ino, tag.size, tag.parity, &data) == tag.check(b)
    };
    let size = if whole { tag.size } else { tag.size - tag.len };
    // The size word first: a crash between leaves a plain size and the next mount clears
    // the block-count word's tag bits (`Settled::Cleared`).
    dev.store_u64(ioff + INODE_SIZE_OFF, size);
    dev.store_u64(ioff + INODE_BLOCKS_OFF, b & BLOCKS_MASK);
    dev.flush(ioff + INODE_SIZE_OFF, 16);
    if whole {
        Settled::Kept(size)
    } else {
        Settled::Dropped(size)
    }
}

/// `len` bytes of inode `ino` from byte `off`, as the HashFS table maps them (zeros for
/// unmapped blocks).
fn file_bytes<D: PmDevice>(dev: &D, geo: &Geometry, table: &HashTable<D>, ino: Ino, off: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    let mut done = 0usize;
    while done < len {
        let at = off + done as u64;
        let in_blk = at % BLOCK_BYTES;
        let n = ((BLOCK_BYTES - in_blk) as usize).min(len - done);
        if let Some(slot) = file_key(ino, Lblk::of_byte(at)).and_then(|k| find_key(table, k)) {
            if slot < geo.data_blocks {
                dev.read(geo.block_off(Pblk(slot)) + in_blk, &mut out[done..done + n]);
            }
        }
        done += n;
    }
    out
}

/// The slot of `key`: its lookup, or, where that misses, the copy nearest its home
/// anywhere in the table. Before recovery repairs probe paths, an EMPTY slot may cut one
/// (concurrent claims persisted out of order) and hide a key that is on the media; its
/// bytes must not be taken for lost.
fn find_key<D: PmDevice>(table: &HashTable<D>, key: u64) -> Option<u64> {
    table
        .lookup(key)
        .map(|p| p.0)
        .or_else(|| (0..table.nslots()).filter(|&s| table.load(s) == key).min_by_key(|&s| table.probe_distance(key, s)))
}

/// Inodes whose size word is tagged or whose block-count word has tag bits beside a plain
/// size (a pass over the inode table, read in batches, for fsck and the last participant
/// of a shared mount to leave; mount finds them in its own scan).
pub(crate) fn tagged_inodes<D: PmDevice>(dev: &D, geo: &Geometry) -> Vec<Ino> {
    let mut tagged = Vec::new();
    crate::fs::inode::for_each_raw(dev, geo, |ino, raw| {
        if raw.size >> LEN_SHIFT != 0 || raw.blocks >> BLOCKS_BITS != 0 {
            tagged.push(ino);
        }
    });
    tagged
}

/// Makes the size words of `raw` (read from the media while the image is in use, by a
/// participant of a shared mount) plain: a tagged size is taken as it stands, since the
/// participant that tagged it finished its append before it let go of the image lock
/// (only a crash or a death leaves one to check, and both are recovered first). Returns
/// the tag's parity, which the reader keeps as its own ([`InodeMem::tag`]).
pub(crate) fn read_plain(raw: &mut crate::layout::InodeRaw) -> Option<bool> {
    let tag = Tag::of(raw.size);
    if let Some(t) = tag {
        raw.size = t.size;
    }
    raw.blocks &= BLOCKS_MASK;
    tag.map(|t| t.parity)
}

/// Whether the size words `a`, `b` (as read from the media) need [`settle`].
pub(crate) fn needs_settling(a: u64, b: u64) -> bool {
    Tag::of(a).is_some() || (a >> LEN_SHIFT == 0 && b >> BLOCKS_BITS != 0)
}

impl<D: PmDevice> FsInner<D> {
    /// Makes the file's size plain on the media if a tagged append of this mount left it
    /// tagged: the size word, then the block-count word, their flush, a fence. Call before
    /// anything may change the file's bytes in place (see the module).
    pub(crate) fn untag(&self, cell: &InodeCell, st: &mut InodeMem) {
        if st.tag.is_none() {
            return;
        }
        if !st.freed {
            self.scope_inode(cell.ino);
            crate::fs::shared::touched(cell.ino);
            let ioff = self.geo.inode_off(cell.ino);
            self.dev.store_u64(ioff + INODE_SIZE_OFF, st.raw.size);
            self.dev.store_u64(ioff + INODE_BLOCKS_OFF, st.raw.blocks);
            self.dev.flush(ioff + INODE_SIZE_OFF, 16);
            self.dev.fence();
        }
        st.tag = None;
        self.tagged.fetch_sub(1, Ordering::Relaxed);
    }

    /// [`Self::untag`] before an overwrite of the bytes `range` if any of them is one the
    /// tagged size's check covers (the file's last `len` bytes, as the size word on the
    /// media gives them: another participant's append may have tagged it). An overwrite
    /// of other bytes leaves the check as it was (SQLite's journal: a header rewritten
    /// at offset 0 after a 4-byte record appended at the end).
    pub(crate) fn untag_for(&self, cell: &InodeCell, st: &mut InodeMem, range: std::ops::Range<u64>) {
        if st.tag.is_none() {
            return;
        }
        let w = self.dev.load_u64(self.geo.inode_off(cell.ino) + INODE_SIZE_OFF);
        match Tag::of(w) {
            Some(t) if range.end <= t.size.saturating_sub(t.len) || range.start >= t.size => {}
            _ => self.untag(cell, st),
        }
    }

    /// [`Self::untag`] for every file that needs it (unmount).
    pub(crate) fn untag_all(&self) {
        if self.tagged.load(Ordering::Relaxed) == 0 {
            return;
        }
        for cell in self.inodes.cells() {
            let mut st = cell.state.write();
            self.untag(&cell, &mut st);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_words_decode_to_what_was_stored() {
        let data = b"a record of a log";
        for parity in [false, true] {
            let (a, b) = tagged_words(Ino(7), (1 << 44) - 3, (1 << 32) + 1, parity, data);
            let t = Tag::of(a).expect("tagged");
            assert_eq!((t.size, t.len, t.parity), ((1 << 44) - 3, data.len() as u64, parity));
            assert_eq!(b & BLOCKS_MASK, (1 << 32) + 1);
            assert_eq!((b >> BLOCKS_PARITY_BIT) & 1, u64::from(parity));
            assert_eq!(t.check(b), append_check(Ino(7), (1 << 44) - 3, parity, data));
            assert!(needs_settling(a, b));
        }
        assert_eq!(Tag::of(12345), None);
        assert!(!needs_settling(12345, 3));
        assert!(needs_settling(12345, 3 | 1 << 40));
        // The check depends on the inode, the size, the parity and every byte.
        let c = append_check(Ino(7), 100, false, data);
        assert_ne!(c, append_check(Ino(8), 100, false, data));
        assert_ne!(c, append_check(Ino(7), 101, false, data));
        assert_ne!(c, append_check(Ino(7), 100, true, data));
        assert_ne!(c, append_check(Ino(7), 100, false, b"a record of a loh"));
    }
}
