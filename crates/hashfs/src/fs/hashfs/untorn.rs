//! Untorn writes on the HashFS table: a moved block's key switched to its new slot in the
//! write's transaction (the old slot's tombstone with it), fresh blocks' keys published,
//! and a one-block overwrite inside the size switched without the journal.

#![forbid(unsafe_code)]

use crate::fs::inode::{InodeCell, InodeMem};
use crate::fs::untorn::{Block, How, UntornVerbs};
use crate::fs::FsInner;
use crate::layout::{Ino, InodeRaw, Lblk, Pblk, BLOCK_BYTES};
use crate::mapping::hashfs::{file_key, Freed, HashTable, TOMBSTONE};
use crate::pm::PmDevice;
use crate::{Error, Result};

impl<D: PmDevice> UntornVerbs<D> for HashTable<D> {
    /// The old slots, freed once the transaction committed.
    type Switched = Vec<Freed>;

    /// A moved block inside the size, without the grouped placements (whose groups
    /// place a key by its chunk, not its probe path): [`FsInner::switch_one_block`].
    fn switch_one(
        &self,
        fs: &FsInner<D>,
        cell: &InodeCell,
        st: &mut InodeMem,
        b: &Block,
        off: u64,
        data: &[u8],
        end: u64,
    ) -> Option<Result<()>> {
        match (b.how, b.old, self.groups(), end <= st.raw.size) {
            (How::Moved, Some(old), None, true) => Some(fs.switch_one_block(cell, st, self, b.lblk, old, off, data)),
            _ => None,
        }
    }

    /// At most its key's undo entry.
    fn fresh_cost(&self, _move_cost: u64) -> u64 {
        1
    }

    fn moves_in_one_range(&self) -> bool {
        false
    }

    /// Placed by a claimed group (the grouped placements).
    fn keeps_alignment(&self, _fs: &FsInner<D>, ino: Ino, l: Lblk, p: Pblk) -> bool {
        file_key(ino, l).is_some_and(|k| self.group_holds(k, p.0))
    }

    fn tx_switch<'a>(
        &'a self,
        tx: &mut crate::journal::Tx<'a, D>,
        ino: Ino,
        _raw: &mut InodeRaw,
        blocks: &[Block],
        old_end: Lblk,
    ) -> Result<Vec<Freed>> {
        let t = self;
        let mut switched = Vec::new();
        for b in blocks {
            let k = file_key(ino, b.lblk).ok_or(Error::FileTooBig)?;
            match (b.how, b.old) {
                (How::Moved, Some(p)) => {
                    tx.write_u64(t.slot_off(b.new.0), k);
                    tx.write_u64(t.slot_off(p.0), TOMBSTONE);
                    switched.push(t.switch_out(p));
                }
                (How::Fresh, _) if b.lblk < old_end => tx.write_u64(t.slot_off(b.new.0), k),
                (How::Fresh, _) => tx.publish_u64(t.slot_off(b.new.0), k),
                _ => {}
            }
        }
        Ok(switched)
    }

    /// The old slots freed; the new blocks into the translation cache.
    fn switched(&self, cell: &InodeCell, blocks: &[Block], switched: Vec<Freed>) {
        self.switched_out(&switched);
        for b in blocks.iter().filter(|b| b.how != How::Logged) {
            cell.tcache.put(b.lblk, b.new);
        }
    }
}

impl<D: PmDevice> FsInner<D> {
    /// HashFS, an untorn write inside one mapped block that leaves the size alone (the
    /// common strict overwrite, a database page): the key switch without the journal, in
    /// two fences. The new block is a reservation on the key's probe path; lookups, and
    /// recovery (which frees the other copy), take the copy of a key nearest its home, so
    /// the order of the two slot stores decides the moment the write takes effect:
    /// - the new slot after the old one: the new data and key are made durable together
    ///   (the old copy still wins), then the old slot's tombstone (the write takes effect);
    /// - the new slot before the old one: the new data first, then the key (the write
    ///   takes effect, the new copy winning); the old slot's tombstone needs no fence of
    ///   its own (a later fence, or recovery, makes it one).
    ///
    /// The write's times stay in DRAM until the file's fsync, as a relaxed overwrite's do.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::fs) fn switch_one_block(
        &self,
        cell: &InodeCell,
        st: &mut InodeMem,
        t: &HashTable<D>,
        lblk: Lblk,
        old: Pblk,
        off: u64,
        data: &[u8],
    ) -> Result<()> {
        let k = file_key(cell.ino, lblk).ok_or(Error::FileTooBig)?;
        let new = t.reserve(k)?;
        self.fill_moved(new, old, (off - lblk.0 * BLOCK_BYTES) as usize, data, &mut Vec::new());
        let (new_off, old_off) = (t.slot_off(new.0), t.slot_off(old.0));
        let freed = t.switch_out(old);
        let after = t.probe_distance(k, new.0) > t.probe_distance(k, old.0);
        if !after {
            self.dev.fence(); // the data before the key that makes it live
        }
        self.dev.store_u64(new_off, k);
        self.dev.flush(new_off, 8);
        self.dev.fence();
        self.dev.store_u64(old_off, TOMBSTONE);
        self.dev.flush(old_off, 8);
        if after {
            self.dev.fence(); // the tombstone makes the write take effect
        }
        t.switched_out(&[freed]);
        cell.tcache.put(lblk, new);
        self.set_write_times(cell.ino, st);
        Ok(())
    }
}
