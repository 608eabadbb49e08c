//! The grouped placements' side of a write (HashFS's `grouped` and `regions`,
//! `mapping/hashfs/groups.rs`): which part of a request may claim whole 2 MiB groups, and
//! the claim of a block's slot in its chunk's group.

#![forbid(unsafe_code)]

use crate::fs::FsInner;
use crate::layout::{Ino, Lblk, BLOCK_BYTES};
use crate::mapping::hashfs::groups::Groups;
use crate::mapping::hashfs::{HashTable, GROUP_SLOTS};
use crate::mapping::FileMap;
use crate::pm::PmDevice;
use std::ops::Range;

/// The least write that claims the chunk a large file grows into ([`FsInner::claim_span`]).
pub(crate) const GROWTH_CLAIM_BYTES: u64 = 64 << 10;

/// Whether logical block `l` lies in a whole 2 MiB chunk of the file that `whole` covers
/// (one the grouped placements give a group).
pub(in crate::fs) fn in_whole_chunk(l: Lblk, whole: &Range<Lblk>) -> bool {
    let chunk = l.0 / GROUP_SLOTS;
    let (lo, hi) = (Lblk(chunk * GROUP_SLOTS), Lblk((chunk + 1) * GROUP_SLOTS));
    whole.start <= lo && hi <= whole.end && hi.0 <= 1 << 32
}

impl<D: PmDevice> FsInner<D> {
    /// The bytes of a request over `span` (of a file of `size` bytes) whose whole 2 MiB
    /// chunks may claim groups (HashFS's grouped and regions placements; the other
    /// mappings' allocators get `span` itself). A large file grown in pieces smaller than
    /// a chunk (`cp` writes 128 KiB, many programs 1 MiB) would get no group: a write of at
    /// least [`GROWTH_CLAIM_BYTES`] that starts a chunk other than the first, at or past
    /// the end of file, claims the chunk, and the file's next writes fill its group. A
    /// file that stops short leaves the rest of that group unused, as a large file's last
    /// extent does under an aligned allocator; a file's first chunk never claims this way.
    pub(crate) fn claim_span(&self, span: Range<u64>, size: u64) -> Range<u64> {
        const CHUNK: u64 = GROUP_SLOTS * BLOCK_BYTES;
        let FileMap::Hash(t) = &self.map else { return span };
        let grows = span.start.is_multiple_of(CHUNK) && span.start >= CHUNK.max(size);
        match span.end.checked_next_multiple_of(CHUNK) {
            Some(end) if t.groups().is_some() && grows && span.end - span.start >= GROWTH_CLAIM_BYTES => {
                span.start..end
            }
            _ => span,
        }
    }

    /// Grouped placement: the slot of block `l` of `ino` in its chunk's group, claiming a
    /// group (a free one, else one emptied by moving other files' blocks out) when the
    /// request writes the whole chunk (`whole`) and the chunk has none yet.
    pub(in crate::fs) fn claim_grouped(
        &self,
        t: &HashTable<D>,
        g: &Groups<D>,
        ino: Ino,
        l: Lblk,
        whole: &Range<Lblk>,
    ) -> Option<u64> {
        if let Some(s) = g.take(t, ino, l) {
            return Some(s);
        }
        let chunk = l.0 / GROUP_SLOTS;
        if in_whole_chunk(l, whole) && g.group_for(ino, chunk).is_none() {
            // The regions placement keeps free groups whole: none is emptied by moves.
            if g.claim(t, ino, chunk).is_none() {
                if g.regions.is_some() {
                    return None;
                }
                self.claim_by_evacuation(t, g, ino, chunk)?;
            }
            return g.take(t, ino, l);
        }
        None
    }
}
