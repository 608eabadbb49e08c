//! Mount's recovery on the HashFS table: the stray slots the scan found (reservations,
//! keys past EOF or of free inodes) freed, and after a crash every probe path repaired.

#![forbid(unsafe_code)]

use crate::fs::recovery::RecoverVerbs;
use crate::fs::FsInner;
use crate::layout::Pblk;
use crate::mapping::hashfs::HashTable;
use crate::pm::PmDevice;
use crate::Result;

impl<D: PmDevice> RecoverVerbs<D> for HashTable<D> {
    fn drop_stray_slots(&self, slots: &[u64]) {
        for &s in slots {
            let _ = self.release(Pblk(s)); // the full purge after a crash covers its path
        }
    }

    /// None: the table's strays are slots, freed above.
    fn unmap_stray_ranges(&self, _fs: &FsInner<D>, _ranges: &[(u32, u64)], _sizes: &[u64]) -> Result<()> {
        Ok(())
    }

    /// Turns EMPTY slots on a key's path into tombstones, then purges the unneeded ones.
    fn repair_after_crash(&self, fs: &FsInner<D>) -> u64 {
        let n = self.repair_and_purge_all();
        fs.dev.fence();
        n
    }
}
