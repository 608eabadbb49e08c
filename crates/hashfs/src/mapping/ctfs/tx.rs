//! ctFS's changes to a [`MapTx`]: partition moves (pswap of a file's pages into a larger
//! or smaller partition) and the giving up of a partition, staged in the change's
//! transaction like every other structure change.

use super::partition::Partition;
use super::{ppt, Ctfs};
use crate::layout::{Ino, InodeRaw};
use crate::mapping::MapTx;
use crate::pm::PmDevice;
use crate::{Error, Result};

impl<D: PmDevice> MapTx<'_, D> {
    /// Moves the file to a new partition of `level`: pswap of the old partition's pages
    /// into it (ctFS §3.1's upgrade, without copying data).
    pub(in crate::mapping) fn move_partition(
        &mut self,
        c: &Ctfs,
        ino: Ino,
        raw: &mut InodeRaw,
        old: Option<Partition>,
        level: u32,
    ) -> Result<Partition> {
        let new = c.parts.lock().allocate(level).ok_or(Error::NoSpace)?;
        self.parts_taken.push(new);
        if let Some(old) = old {
            let n = old.pages().min(new.pages());
            let geo = &self.map.geo;
            self.with_staged(|st, na| ppt::swap(st, geo, na, old.base, new.base, n))?;
            self.parts_left.push(old);
            self.moved.push((ino, old));
        }
        raw.set_ctfs_partition(new.word());
        Ok(new)
    }

    /// After a removal to the end of the partition: moves the file down to `level`
    /// (ctFS's downgrade), or gives the partition up (`None`: nothing is mapped).
    pub(in crate::mapping) fn leave_partition(
        &mut self,
        c: &Ctfs,
        ino: Ino,
        raw: &mut InodeRaw,
        p: Partition,
        level: Option<u32>,
    ) -> Result<()> {
        match level {
            Some(l) => {
                self.move_partition(c, ino, raw, Some(p), l)?;
            }
            None => {
                raw.set_ctfs_partition(0);
                self.parts_left.push(p);
            }
        }
        Ok(())
    }
}
