//! Mount's recovery on the HashFS table: the scan of every slot (each file's blocks, the
//! used count, and what a crash left), the stray slots it found (reservations, keys past
//! EOF or of free inodes) freed, and after a crash every probe path repaired.

#![forbid(unsafe_code)]

use crate::fs::recovery::{mappable_blocks, MountReport, RecoverVerbs, Scan, Strays, CORRUPT, FREE};
use crate::fs::FsInner;
use crate::layout::{Geometry, Pblk};
use crate::mapping::hashfs::{classify, Entry, HashTable};
use crate::pm::PmDevice;
use crate::{Error, Result};

impl<D: PmDevice> RecoverVerbs<D> for HashTable<D> {
    fn settles_appends(&self) -> Option<&HashTable<D>> {
        Some(self)
    }

    fn scan(
        &self,
        geo: &Geometry,
        scan: &mut Scan,
        dirty: bool,
        _: &mut MountReport,
        progress: &dyn Fn(u64),
    ) -> Result<Strays> {
        scan_table(self, geo, scan, dirty, progress)
    }

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

/// The HashFS table: the used count, each file's blocks, and the slots a crash left
/// (`dirty`: the image was not cleanly unmounted, so a key may also have a second copy,
/// farther along its probe path, left by an untorn write's key switch: a stray).
fn scan_table<D: PmDevice>(
    table: &HashTable<D>,
    geo: &Geometry,
    scan: &mut Scan,
    dirty: bool,
    progress: &dyn Fn(u64),
) -> Result<Strays> {
    let mut strays = Strays::default();
    let mut used = 0u64;
    table.batches(|first, batch| {
        if first % 262_144 == 0 {
            progress(geo.inode_count + first);
        }
        for (s, &v) in (first..).zip(batch) {
            match classify(v, table.nslots()) {
                Entry::Empty | Entry::Tombstone => {}
                // Strays count as used until released (each release subtracts one).
                Entry::Reserved { .. } => {
                    strays.slots.push(s);
                    used += 1;
                }
                Entry::Invalid => {
                    return Err(Error::corrupt(format!(
                        "hash table slot {s} holds an invalid value; run hashfs fsck --repair"
                    )))
                }
                Entry::Key { ino, lblk } => {
                    let size = scan.sizes.get(ino as usize).copied().unwrap_or(FREE);
                    if size == CORRUPT {
                        used += 1;
                    } else if size == FREE
                        || lblk as u64 >= mappable_blocks(size)
                        || (dirty && !table.group_holds(v, s) && table.shadowed(v, s))
                    {
                        strays.slots.push(s);
                        used += 1;
                    } else {
                        scan.counts[ino as usize] += 1;
                        used += 1;
                    }
                }
            }
        }
        Ok(())
    })?;
    table.set_used(used);
    Ok(strays)
}
