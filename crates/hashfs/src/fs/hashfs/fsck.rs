//! fsck on the HashFS table: every slot's entry against its inode, duplicates, probe
//! paths; after a crash, the tagged sizes of one-fence appends settled first; a file's
//! blocks found by key.

#![forbid(unsafe_code)]

use crate::fs::fsck::{Findings, Fix, FsckVerbs};
use crate::fs::hashfs::append_tag::{self, Settled};
use crate::fs::recovery::mappable_blocks;
use crate::fs::Progress;
use crate::layout::inode::InodeRaw;
use crate::layout::{Geometry, Ino, Lblk, Pblk};
use crate::mapping::hashfs::{classify, file_key, Entry, HashTable};
use crate::pm::PmDevice;
use crate::Result;
use std::collections::HashMap;
use std::sync::Arc;

impl<D: PmDevice> FsckVerbs<D> for HashTable<D> {
    /// After a crash, the tagged sizes of one-fence appends, settled as mount settles them
    /// (`fs/hashfs/append_tag.rs`; on the caller's device: in check mode, the overlay). An append
    /// whose bytes are not whole is a finding that mount fixes.
    fn settle_appends(&self, dev: &Arc<D>, geo: &Geometry, out: &mut Findings) -> Result<()> {
        let tagged = append_tag::tagged_inodes(&**dev, geo);
        if tagged.is_empty() {
            return Ok(());
        }
        for ino in tagged {
            if let Settled::Dropped(size) = append_tag::settle(&**dev, geo, self, ino) {
                out.add(
                    format!(
                        "inode {ino}: its last append did not reach the media whole (recovery drops it: size {size})"
                    ),
                    Fix::Mount,
                );
            }
        }
        dev.fence();
        Ok(())
    }

    fn check(
        &self,
        geo: &Geometry,
        inodes: &[Option<InodeRaw>],
        counts: &mut [u64],
        dirty: bool,
        progress: Progress<'_>,
        out: &mut Findings,
    ) -> u64 {
        check_table(self, geo, inodes, counts, dirty, progress, out)
    }

    fn block_of(&self, ino: Ino, _: &InodeRaw, lblk: Lblk) -> Option<Pblk> {
        file_key(ino, lblk).and_then(|k| self.lookup(k))
    }

    /// Nothing: the table is its own allocation state.
    fn rebuild_allocation(&self, _: &Arc<D>, _: &Geometry) -> Result<()> {
        Ok(())
    }
}

/// The HashFS table: every slot's entry, keys against their inodes, duplicates, probe
/// paths; counts each inode's blocks. Returns the blocks in use.
fn check_table<D: PmDevice>(
    table: &HashTable<D>,
    geo: &Geometry,
    inodes: &[Option<InodeRaw>],
    counts: &mut [u64],
    dirty: bool,
    progress: Progress<'_>,
    out: &mut Findings,
) -> u64 {
    let n = inodes.len() as u64 - 1;
    let mut used_blocks = 0;
    let mut seen: HashMap<u64, u64> = HashMap::new();
    let mut unreachable_keys = 0u64;
    // After a crash, what recovery frees is a leftover; on a clean image, an error.
    let leftover = |fix| if dirty { Fix::Mount } else { fix };
    for slot in 0..table.nslots() {
        let v = table.load(slot);
        match classify(v, table.nslots()) {
            Entry::Empty | Entry::Tombstone => {}
            Entry::Invalid => out.add(format!("table slot {slot}: invalid value {v:#x}"), Fix::TombstoneSlot(slot)),
            Entry::Reserved { .. } => {
                let what = format!("table slot {slot}: reservation left by an interrupted write");
                out.add(what, leftover(Fix::TombstoneSlot(slot)));
            }
            Entry::Key { ino, lblk } => {
                used_blocks += 1;
                let Some(raw) = inodes.get(ino as usize).and_then(|r| r.as_ref()) else {
                    out.add(
                        format!("table slot {slot}: maps block {lblk} of free or invalid inode {ino}"),
                        leftover(Fix::TombstoneSlot(slot)),
                    );
                    continue;
                };
                if lblk as u64 >= mappable_blocks(raw.size) {
                    out.add(
                        format!(
                            "table slot {slot}: block {lblk} of inode {ino} lies past its end ({} bytes)",
                            raw.size
                        ),
                        leftover(Fix::TombstoneSlot(slot)),
                    );
                    continue;
                }
                if let Some(other) = seen.insert(v, slot) {
                    // Lookups find one copy, the nearer on the probe path: an untorn
                    // write's key switch interrupted by a crash leaves the other, which
                    // recovery frees. Neither found: an error.
                    let live = table.lookup(v).map(|p| p.0);
                    let (far, fix) = match live {
                        Some(l) if l == slot => {
                            unreachable_keys = unreachable_keys.saturating_sub(1); // `other` was counted
                            (other, leftover(Fix::TombstoneSlot(other)))
                        }
                        Some(l) if l == other => {
                            seen.insert(v, other);
                            (slot, leftover(Fix::TombstoneSlot(slot)))
                        }
                        _ => (slot, Fix::TombstoneSlot(slot)),
                    };
                    out.add(
                        format!("table slots {other} and {slot} both map block {lblk} of inode {ino}; slot {far} goes"),
                        fix,
                    );
                    continue;
                }
                if table.lookup(v) != Some(Pblk(slot)) {
                    unreachable_keys += 1;
                }
                counts[ino as usize] += 1;
            }
        }
        if slot % 262_144 == 0 {
            progress(n + slot, n + geo.data_blocks);
        }
    }
    if unreachable_keys > 0 {
        out.add(
            format!("table: {unreachable_keys} keys cannot be reached from their home slot"),
            leftover(Fix::RepairProbePaths),
        );
    }
    used_blocks
}
