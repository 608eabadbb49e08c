//! Untorn writes on the structures behind the block allocator: the moved blocks' old
//! mappings removed in one range and every new block inserted, in the write's
//! transaction.

#![forbid(unsafe_code)]

use crate::fs::data::extents_of;
use crate::fs::inode::{InodeCell, InodeMem};
use crate::fs::untorn::{Block, How, UntornVerbs};
use crate::fs::FsInner;
use crate::layout::{AllocatorKind, Ino, InodeRaw, Lblk, Pblk, BLOCK_BYTES};
use crate::mapping::hashfs::GROUP_SLOTS;
use crate::mapping::BlockMap;
use crate::pm::PmDevice;
use crate::Result;
use std::sync::atomic::Ordering;

impl<D: PmDevice> UntornVerbs<D> for BlockMap<D> {
    type Switched = ();

    /// No switch without the journal: a structure's change is logged.
    fn switch_one(
        &self,
        _fs: &FsInner<D>,
        _cell: &InodeCell,
        _st: &mut InodeMem,
        _b: &Block,
        _off: u64,
        _data: &[u8],
        _end: u64,
    ) -> Option<Result<()>> {
        None
    }

    /// An insertion is bounded like a move.
    fn fresh_cost(&self, move_cost: u64) -> u64 {
        move_cost
    }

    /// One removal per structure change.
    fn moves_in_one_range(&self) -> bool {
        true
    }

    /// Congruent to its logical offset modulo 2 MiB on an aligned-allocator image.
    fn keeps_alignment(&self, fs: &FsInner<D>, _ino: Ino, l: Lblk, p: Pblk) -> bool {
        self.alloc.kind() == AllocatorKind::Aligned
            && (fs.geo.block_off(p).0 / BLOCK_BYTES) % GROUP_SLOTS == l.0 % GROUP_SLOTS
    }

    fn tx_switch<'a>(
        &'a self,
        tx: &mut crate::journal::Tx<'a, D>,
        ino: Ino,
        raw: &mut InodeRaw,
        blocks: &[Block],
        _old_end: Lblk,
    ) -> Result<()> {
        let mut mt = self.begin();
        let r = (|| {
            // The moved blocks' old mappings go, in one range (holes inside it have
            // nothing to remove).
            let moved = || blocks.iter().filter(|b| b.how == How::Moved).map(|b| b.lblk);
            if let (Some(a), Some(z)) = (moved().next(), moved().next_back()) {
                mt.remove(tx, ino, raw, a, z + 1, false)?;
            }
            // Every new block goes in, as runs contiguous on both sides.
            let new: Vec<(Lblk, Pblk)> =
                blocks.iter().filter(|b| b.how != How::Logged).map(|b| (b.lblk, b.new)).collect();
            for x in extents_of(&new) {
                mt.insert(tx, ino, raw, x)?;
            }
            Ok(())
        })();
        if let Err(e) = r {
            mt.abort();
            return Err(e);
        }
        mt.finish_with(tx);
        Ok(())
    }

    /// The file's cached translations from the first moved block on are stale.
    fn switched(&self, cell: &InodeCell, blocks: &[Block], _switched: ()) {
        if let Some(b) = blocks.iter().find(|b| b.how == How::Moved) {
            cell.tcache.invalidate_from(b.lblk);
            cell.cursor.store(0, Ordering::Relaxed);
        }
    }
}
