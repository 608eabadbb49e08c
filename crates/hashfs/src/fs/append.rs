//! Fast appends (NOVA's and ext4-DAX's): a growing write that needs no new mapping
//! structure persists its data, then its size, with two fences and no transaction; its
//! times stay in DRAM until the file's fsync (`fs/times.rs`). A small append at the end of
//! a HashFS file takes one fence, its size tagged with a check of its bytes
//! (`fs/hashfs/append_tag.rs`). The protocols and their crash states are in docs/design.md ("Fast
//! appends", "One-fence small appends").

use super::data::{blocks_for, Planned};
use super::hashfs::append_tag::tagged_words;
use super::inode::{InodeCell, InodeMem};
use super::verbs::{on_map, MapVerbs};
use super::FsInner;
use crate::layout::inode::{INODE_BLOCKS_OFF, INODE_SIZE_OFF};
use crate::layout::Lblk;
use crate::pm::PmDevice;
use std::sync::atomic::Ordering;

impl<D: PmDevice> FsInner<D> {
    /// Whether a growing write may persist without a transaction ([`append_fast`]): every
    /// block it maps is new and past the old end of file (so that a crash before the new
    /// size leaves only mappings recovery frees), and each is mapped by one word that is
    /// not logged, which HashFS does with every placement (its key in the block's slot; a
    /// group the grouped and regions placements claim for the chunk, and any opening of
    /// regions, was made durable on its own before the plan returned, as for a
    /// transaction's write; the other mappings' structures change shared state); or it
    /// maps no block at all. The inode's sum must leave size and block count out
    /// (format 4: an inode sealed by an older build waits for its next transaction).
    ///
    /// [`append_fast`]: Self::append_fast
    pub(super) fn can_append_fast(&self, cell: &InodeCell, st: &mut InodeMem, plan: &[Planned]) -> bool {
        let old_blocks = Lblk(blocks_for(st.raw.size));
        let maps_fresh_past_eof =
            || on_map!(self, m => m.maps_past_eof_unlogged()) && plan.iter().all(|p| !p.fresh || p.lblk >= old_blocks);
        if !(plan.iter().all(|p| !p.fresh) || maps_fresh_past_eof()) {
            return false;
        }
        if !st.sum_without_size {
            st.sum_without_size = st.raw.sealed_without_size(cell.ino);
        }
        st.sum_without_size
    }

    /// NOVA's and ext4-DAX's fast append: the data (already stored) and the new blocks'
    /// keys, fence; then size and block count in place (8-byte stores in one line), its
    /// flush, fence; the times in DRAM. Two fences and no journal; a crash between them
    /// leaves the old size and, at most, keys past it, which recovery frees.
    ///
    /// `tail`: the appended bytes, for an append at the end of file of at most
    /// [`TAG_MAX_LEN`](super::hashfs::append_tag::TAG_MAX_LEN) bytes on HashFS, which takes one
    /// fence: size and block count are stored tagged with the bytes' check before it
    /// (`fs/hashfs/append_tag.rs`).
    pub(super) fn append_fast(
        &self,
        cell: &InodeCell,
        st: &mut InodeMem,
        plan: &[Planned],
        new_size: u64,
        tail: Option<&[u8]>,
    ) {
        let ino = cell.ino;
        let fresh = plan.iter().filter(|p| p.fresh).map(|p| (p.lblk, p.pblk));
        let added = on_map!(self, m => m.map_unlogged(self, cell, fresh));
        const _: () = assert!(INODE_BLOCKS_OFF == INODE_SIZE_OFF + 8 && INODE_SIZE_OFF % 64 + 16 <= 64);
        let ioff = self.geo.inode_off(ino);
        self.scope_inode(ino);
        super::shared::touched(ino);
        if let Some(data) = tail {
            // One fence for data, keys and size: the block-count word, then the size word,
            // both tagged with the bytes' check and a parity the last tag did not have.
            let parity = !st.tag.unwrap_or(false);
            let (a, b) = tagged_words(ino, new_size, st.raw.blocks + added, parity, data);
            self.dev.store_u64(ioff + INODE_BLOCKS_OFF, b);
            self.dev.store_u64(ioff + INODE_SIZE_OFF, a);
            if st.tag.replace(parity).is_none() {
                self.tagged.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            self.dev.fence();
            // A tagged size is made plain size word first (`fs/hashfs/append_tag.rs`).
            self.dev.store_u64(ioff + INODE_SIZE_OFF, new_size);
            if added > 0 || st.tag.is_some() {
                self.dev.store_u64(ioff + INODE_BLOCKS_OFF, st.raw.blocks + added);
            }
            if st.tag.take().is_some() {
                self.tagged.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.dev.flush(ioff + INODE_SIZE_OFF, 16);
        self.dev.fence();
        st.raw.size = new_size;
        st.raw.blocks += added;
        self.set_write_times(ino, st);
        if added > 0 {
            on_map!(self, m => m.prefetch_next_append(self, ino, Lblk(blocks_for(new_size))));
        }
    }
}
