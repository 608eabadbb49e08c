//! Mount's recovery on the HashFS table: the scan of every slot (each file's blocks, the
//! used count, and what a crash left), the stray slots it found (reservations, keys past
//! EOF or of free inodes) freed, and after a crash every probe path repaired.

#![forbid(unsafe_code)]

use crate::fs::recovery::{
    mappable_blocks, Interruption, MountReport, RecoverVerbs, Scan, Sizes, Strays, CORRUPT, FREE,
};
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

    /// After a crash the full purge below covers their paths; after a death there is none,
    /// so their tombstones (and those on their paths only they needed) are purged here.
    fn drop_stray_slots(&self, slots: &[u64], after: Interruption) {
        let freed = self.release_all(&slots.iter().map(|&s| Pblk(s)).collect::<Vec<_>>());
        if paths_kept_whole(self, after) {
            self.purge(&freed);
        }
    }

    /// None: the table's strays are slots, freed above.
    fn unmap_stray_ranges(&self, _fs: &FsInner<D>, _ranges: &[(u32, u64)], _sizes: &Sizes) -> Result<()> {
        Ok(())
    }

    /// Turns EMPTY slots on a key's path into tombstones, then purges the unneeded ones.
    ///
    /// Not after a death on the paper placement: every store to the table keeps (I1) (no
    /// EMPTY slot on a key's probe path, `mapping/hashfs/mod.rs`) once the stores before
    /// it are visible, and a death leaves every store visible in the order it was made: a
    /// claim turns EMPTY into a reservation, a commit a reservation into a key, a free a
    /// key into a tombstone, an untorn write's switch puts its new key before it tombstones
    /// the old, and a purge empties a slot only once no key past it needs it. So a dead
    /// call leaves no EMPTY slot on a path, only its strays (freed and purged above). Both
    /// passes over the whole table were the largest stage of a takeover on a 4 GiB image
    /// (docs/design.md, *A takeover repairs no probe path*). The grouped and regions
    /// placements keep their repair: a dead call's group claims are found by it.
    fn repair_after_crash(&self, fs: &FsInner<D>, after: Interruption) -> u64 {
        if paths_kept_whole(self, after) {
            return 0;
        }
        let n = self.repair_and_purge_all();
        fs.dev.fence();
        n
    }
}

/// Whether what interrupted the calls (`after`) left every probe path whole: a death on the
/// paper placement ([`RecoverVerbs::repair_after_crash`] says why).
fn paths_kept_whole<D: PmDevice>(table: &HashTable<D>, after: Interruption) -> bool {
    after == Interruption::Death && table.groups().is_none()
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
                    let size = scan.sizes.get(ino);
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
