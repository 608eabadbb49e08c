//! Mount's recovery on the mappings behind the block allocator: the scan of each file's
//! mapping (its blocks, and what a crash left mapped past its end or to a free inode),
//! which is unmapped once the file system exists.

#![forbid(unsafe_code)]

use crate::fs::inode::{self, InodeCell};
use crate::fs::recovery::{
    mappable_blocks, Interruption, MountReport, RecoverVerbs, Scan, Sizes, Strays, CORRUPT, FREE,
};
use crate::fs::FsInner;
use crate::layout::{Geometry, Ino, Lblk};
use crate::mapping::hashfs::HashTable;
use crate::mapping::{BlockMap, Mapped};
use crate::pm::PmDevice;
use crate::{Error, Result};

impl<D: PmDevice> RecoverVerbs<D> for BlockMap<D> {
    /// None: only HashFS tags sizes.
    fn settles_appends(&self) -> Option<&HashTable<D>> {
        None
    }

    fn scan(
        &self,
        _: &Geometry,
        scan: &mut Scan,
        _: bool,
        report: &mut MountReport,
        _: &dyn Fn(u64),
    ) -> Result<Strays> {
        scan_block_map(self, scan, report)
    }

    /// None: the structures' strays are ranges, unmapped below.
    fn drop_stray_slots(&self, _slots: &[u64], _: Interruption) {}

    fn unmap_stray_ranges(&self, fs: &FsInner<D>, ranges: &[(u32, u64)], sizes: &Sizes) -> Result<()> {
        for &(ino, from) in ranges {
            let free = sizes.get(ino) == FREE;
            let raw = if free { bytemuck::Zeroable::zeroed() } else { inode::read_raw(&*fs.dev, &fs.geo, Ino(ino)) };
            let cell = InodeCell::new(Ino(ino), raw);
            let mut st = cell.state.write();
            fs.unmap_blocks_of(self, &cell, &mut st, Lblk(from), Lblk(1 << 32), !free)?;
        }
        Ok(())
    }

    /// Nothing to repair: a structure's change is whole after the journal's rollback.
    fn repair_after_crash(&self, _fs: &FsInner<D>, _: Interruption) -> u64 {
        0
    }
}

/// An allocator mapping: each file's blocks, and the ranges past EOF or of free inodes.
fn scan_block_map<D: PmDevice>(bm: &BlockMap<D>, scan: &mut Scan, report: &mut MountReport) -> Result<Strays> {
    let (dev, geo) = (&*bm.dev, &bm.geo);
    let mut first_stray = std::collections::BTreeMap::<u32, u64>::new();
    let mut bad_inode = None;
    let sizes = &scan.sizes;
    let mut note = |ino: u32, lblk: u64, len: u64, counts: &mut [u64]| {
        if ino == 0 || ino as u64 > geo.inode_count {
            bad_inode = Some(ino);
            return;
        }
        let size = sizes.get(ino);
        if size == CORRUPT {
            return;
        }
        let limit = if size == FREE { 0 } else { mappable_blocks(size) };
        let inside = limit.saturating_sub(lblk).min(len);
        counts[ino as usize] += inside;
        if inside < len {
            let f = first_stray.entry(ino).or_insert(u64::MAX);
            *f = (*f).min(limit.max(lblk));
        }
    };
    let counts = &mut scan.counts;
    // An entry past the data area is corruption (freeing it would write the bitmap out of
    // bounds).
    let outside = |ext: &crate::layout::Extent| !geo.holds_blocks(ext.pblk, ext.len);
    if bm.is_global() {
        let dummy: crate::layout::InodeRaw = bytemuck::Zeroable::zeroed();
        let mut past = None;
        bm.walk(Ino(0), &dummy, &mut |m| {
            if let Mapped::Data { ino, ext } = m {
                if outside(&ext) {
                    past = Some((ino, ext));
                    return;
                }
                note(ino.0, ext.lblk.0, ext.len, counts);
            }
        })
        .map_err(|e| Error::corrupt(format!("{e}; run hashfs fsck --repair")))?;
        if let Some((ino, ext)) = past {
            return Err(Error::corrupt(format!(
                "{} maps block {} of inode {ino} to {}, past the data area; run hashfs fsck --repair",
                bm.kind.name(),
                ext.lblk.0,
                ext.pblk.0
            )));
        }
    } else {
        for (ino, size) in sizes.found() {
            if size == CORRUPT {
                continue;
            }
            let raw = inode::read_raw(dev, geo, ino);
            let mut found = Vec::new();
            let walked = bm.adopt(&raw).and_then(|()| {
                bm.walk(ino, &raw, &mut |m| {
                    if let Mapped::Data { ext, .. } = m {
                        found.push((ext.lblk.0, ext.len, outside(&ext)));
                    }
                })
            });
            if walked.is_err() || found.iter().any(|f| f.2) {
                report.corrupt_inodes.push(ino);
                continue;
            }
            for (lblk, len, _) in found {
                note(ino.0, lblk, len, counts);
            }
        }
    }
    if let Some(ino) = bad_inode {
        return Err(Error::corrupt(format!(
            "{} maps blocks of inode {ino}, which does not exist; run hashfs fsck --repair",
            bm.kind.name()
        )));
    }
    for &i in &report.corrupt_inodes {
        scan.sizes.set(i, CORRUPT);
    }
    Ok(Strays { slots: Vec::new(), ranges: first_stray.into_iter().collect() })
}
