//! An unlink that frees its file in the transaction that removes its name (HashFS, the
//! paper placement; an rmdir, and a rename over a file's last link, likewise: `fs/ops.rs`,
//! `fs/rename.rs`): the name, the parent and the freed inode in one transaction, then the
//! file's slots tombstoned and fenced, then purged. Four fences where the general path
//! (`FsInner::free_inode_locked` after the name's transaction) takes nine: the name and
//! `nlink` 0 (three), the slots (three), the free (three). What makes it safe is that the
//! table's keys name their inode: a crash after the transaction leaves keys of a free
//! inode, which recovery frees (`fs/recovery.rs`), and so does a takeover after a death,
//! from the range the call named (`fs/shared/takeover.rs`). The inode number is given back
//! only after the tombstones are durable, so no new file of that number can meet the old
//! keys. Other mappings keep their blocks in structures the inode owns (or in the block
//! allocator), which a free inode no longer leads to: they take the general path.

#![forbid(unsafe_code)]

use super::slots::{free_slots_after_commit, mapped_slots};
use crate::fs::data::blocks_for;
use crate::fs::inode::{InodeCell, InodeMem};
use crate::fs::FsInner;
use crate::layout::{Lblk, Pblk};
use crate::mapping::FileMap;
use crate::pm::PmDevice;
use std::sync::atomic::Ordering;

impl<D: PmDevice> FsInner<D> {
    /// When the unlink that takes the last link of `cell` may free it in its own
    /// transaction: the slots to free after it, named in the call's scope. None: the file
    /// takes the general path (another mapping or placement, open handles here or in
    /// another process, an attribute inode, already freed).
    pub(crate) fn plan_free_with_name(&self, cell: &InodeCell, st: &InodeMem) -> Option<Vec<Pblk>> {
        let FileMap::Hash(t) = &self.map else { return None };
        if t.groups().is_some()
            || st.freed
            || st.raw.xattr_ino != 0
            || cell.open_count.load(Ordering::Acquire) != 0
            || self.open_elsewhere(cell.ino)
        {
            return None;
        }
        let (from, to) = (Lblk(0), Lblk(blocks_for(st.raw.size).max(1)));
        let planned = if st.raw.is_special() { Vec::new() } else { mapped_slots(t, cell.ino, from, to) };
        self.scope_range(cell.ino, from, to, planned.len() as u64, Some(st.raw.blocks));
        Some(planned)
    }

    /// After the transaction that removed the name and freed the inode: its slots
    /// `planned`, then what DRAM keeps of it, and its number given back.
    pub(crate) fn finish_free_with_name(&self, cell: &InodeCell, st: &mut InodeMem, planned: &[Pblk]) {
        cell.tcache.invalidate_all();
        if let FileMap::Hash(t) = &self.map {
            free_slots_after_commit(t, &*self.dev, planned);
        }
        self.forget_freed(cell, st);
    }
}
