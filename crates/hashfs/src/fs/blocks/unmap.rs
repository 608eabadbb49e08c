//! Unmapping a file's blocks on the mappings behind the block allocator: from the end, in
//! transactions that each fit the journal.

#![forbid(unsafe_code)]

use crate::fs::data::end_lblk;
use crate::fs::inode::{self, InodeCell, InodeMem};
use crate::fs::FsInner;
use crate::layout::Lblk;
use crate::mapping::BlockMap;
use crate::pm::PmDevice;
use crate::Result;
use std::sync::atomic::Ordering;

impl<D: PmDevice> FsInner<D> {
    /// Unmaps logical blocks [from, to) of a file of an allocator mapping, from the end,
    /// in transactions that each fit the journal and each commit the inode (block count,
    /// tree root) with the structure and bitmap changes.
    pub(crate) fn unmap_blocks(
        &self,
        b: &BlockMap<D>,
        cell: &InodeCell,
        st: &mut InodeMem,
        from: Lblk,
        to: Lblk,
    ) -> Result<()> {
        self.unmap_blocks_of(b, cell, st, from, to, true)
    }

    /// [`unmap_blocks`](Self::unmap_blocks); `write_inode` false for the entries a global
    /// table still holds for a free inode (recovery), whose inode stays zeroed.
    pub(crate) fn unmap_blocks_of(
        &self,
        b: &BlockMap<D>,
        cell: &InodeCell,
        st: &mut InodeMem,
        from: Lblk,
        to: Lblk,
        write_inode: bool,
    ) -> Result<()> {
        cell.tcache.invalidate_from(from);
        cell.cursor.store(0, Ordering::Relaxed);
        // No block lies past EOF (F1): a removal to the end of the file leaves nothing
        // mapped from `from` on once its last step (the lowest range) is done.
        let to_the_end = to >= end_lblk(st.raw.size);
        let budget = self.geo.journal_entries() * 3 / 4;
        let mut hi = b.removal_end(cell.ino, from, to)?;
        let mut step = b.removal_step();
        while hi > from {
            let lo = Lblk((hi.0 - 1) / step * step).max(from);
            let mut raw = st.raw;
            let mut tx = self.journals.begin();
            let mut mt = b.begin();
            let freed = match mt.remove(&mut tx, cell.ino, &mut raw, lo, hi, to_the_end && lo == from) {
                Ok(n) => n,
                Err(e) => {
                    mt.abort();
                    return Err(e);
                }
            };
            let entries = tx.undo_entries() + mt.undo_entries() + 4;
            if entries > budget && step > 1 {
                mt.abort();
                drop(tx);
                step = (step / 4).max(1);
                continue;
            }
            // Cheap steps (holes, or runs the structure removes with a few entries: ctFS's
            // 2 MiB leaves, long extents) grow, so that removing a large file takes a few
            // transactions rather than one per 64 blocks.
            if entries < budget / 8 && hi - lo == step {
                step = (step * 4).min(1 << 30);
            }
            raw.blocks = raw.blocks.saturating_sub(freed);
            mt.finish_with(&mut tx);
            if write_inode {
                inode::tx_write_inode(&mut tx, &self.geo, cell.ino, &mut raw);
            }
            tx.commit()?;
            st.raw = raw;
            hi = lo;
        }
        cell.cursor.store(0, Ordering::Relaxed);
        Ok(())
    }
}
