//! ctFS's changes to a [`MapTx`]: partition moves (pswap of a file's pages into a larger
//! or smaller partition) and the giving up of a partition, staged in the change's
//! transaction like every other structure change.

use super::partition::Partition;
use super::{ppt, Ctfs};
use crate::layout::{Ino, InodeRaw};
use crate::mapping::{Index, MapTx, ViewChange};
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
        self.move_to(ino, raw, old, new)
    }

    /// Moves the file to `new`, a partition just taken from the hierarchy.
    fn move_to(&mut self, ino: Ino, raw: &mut InodeRaw, old: Option<Partition>, new: Partition) -> Result<Partition> {
        self.parts_taken.push(new);
        if let Some(old) = old {
            let n = old.pages().min(new.pages());
            let geo = &self.map.geo;
            self.with_staged(|st, na| ppt::swap(st, geo, na, old.base, new.base, n))?;
            self.parts_left.push(old);
            self.moved.push(ViewChange::Moved(ino, old, new));
        }
        raw.set_ctfs_partition(new.word());
        Ok(new)
    }

    /// After a removal to the end of the partition: moves the file down to `level`
    /// (ctFS's downgrade), or gives the partition up (`None`: nothing is mapped). A
    /// downgrade only saves virtual space, so when the space holds no free partition of
    /// `level` the file stays where it is: a truncation never fails for want of virtual
    /// space.
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
                let taken = c.parts.lock().allocate(l);
                if let Some(new) = taken {
                    self.move_to(ino, raw, Some(p), new)?;
                }
            }
            None => {
                raw.set_ctfs_partition(0);
                self.parts_left.push(p);
            }
        }
        Ok(())
    }
}

impl<D: PmDevice> MapTx<'_, D> {
    /// The file's partition, moved to a larger one if it does not hold `pages` pages.
    fn hold(&mut self, c: &Ctfs, ino: Ino, raw: &mut InodeRaw, pages: u64) -> Result<Partition> {
        match Partition::from_word(raw.ctfs_partition())? {
            Some(p) if p.pages() >= pages => Ok(p),
            old => {
                let level = Partition::level_for(pages).ok_or(Error::FileTooBig)?;
                self.move_partition(c, ino, raw, old, level)
            }
        }
    }

    /// ctFS's pswap between files: pages [la, la + n) of `a` and [lb, lb + n) of `b` (None:
    /// of `a` itself, the ranges apart) exchange their mappings, partitions growing to
    /// hold them. Returns the pages each range mapped before (for the block counts) and the
    /// page-table entries exchanged.
    pub fn ctfs_exchange(
        &mut self,
        (ino_a, raw_a): (Ino, &mut InodeRaw),
        la: u64,
        b: Option<(Ino, &mut InodeRaw)>,
        lb: u64,
        n: u64,
    ) -> Result<(u64, u64, u64)> {
        let map = self.map;
        let Index::Ctfs(c) = &map.index else { return Err(Error::Unsupported("pswap needs a ctfs image")) };
        let geo = &map.geo;
        let (pa, pb, ino_b) = match b {
            Some((ino_b, raw_b)) => {
                let pa = self.hold(c, ino_a, raw_a, la + n)?;
                (pa, self.hold(c, ino_b, raw_b, lb + n)?, ino_b)
            }
            None => {
                let p = self.hold(c, ino_a, raw_a, la.max(lb) + n)?;
                (p, p, ino_a)
            }
        };
        let (va, vb) = (pa.base + la, pb.base + lb);
        let count = |v: u64| -> Result<u64> {
            let mut pages = 0;
            ppt::walk(&self.st, geo, v, v + n, &mut |_, _, len| pages += len)?;
            Ok(pages)
        };
        let (ca, cb) = (count(va)?, count(vb)?);
        let entries = self.with_staged(|st, na| ppt::swap(st, geo, na, va, vb, n))?;
        self.moved.push(ViewChange::Exchanged((ino_a, pa, la), (ino_b, pb, lb), n));
        Ok((ca, cb, entries))
    }
}
