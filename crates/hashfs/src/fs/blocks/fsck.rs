//! fsck on the mappings behind the block allocator: every file's structure, blocks mapped
//! twice, the bitmap against the blocks the files reach (and its rebuild); a file's
//! blocks found through its structure.

#![forbid(unsafe_code)]

use crate::fs::fsck::{Findings, Fix, FsckVerbs};
use crate::fs::inode::read_raw;
use crate::fs::recovery::mappable_blocks;
use crate::fs::Progress;
use crate::layout::inode::{InodeRaw, InodeState};
use crate::layout::{Geometry, Ino, Lblk, Pblk};
use crate::mapping::{BlockMap, Cursor, Mapped};
use crate::pm::PmDevice;
use crate::Result;
use bytemuck::Zeroable;
use std::sync::Arc;

impl<D: PmDevice> FsckVerbs<D> for BlockMap<D> {
    /// Nothing: only HashFS tags sizes.
    fn settle_appends(&self, _: &Arc<D>, _: &Geometry, _: &mut Findings) -> Result<()> {
        Ok(())
    }

    fn check(
        &self,
        _: &Geometry,
        inodes: &[Option<InodeRaw>],
        counts: &mut [u64],
        _: bool,
        _: Progress<'_>,
        out: &mut Findings,
    ) -> u64 {
        check_block_map(self, inodes, counts, &mut |w, f| out.add(w, f))
    }

    /// A tree cursor remembers one file's last leaf, so each lookup takes a fresh one:
    /// consecutive lookups here are of different files (a shared cursor answered for one
    /// file with another's leaf).
    fn block_of(&self, ino: Ino, raw: &InodeRaw, lblk: Lblk) -> Option<Pblk> {
        let cursor = Cursor::default();
        self.lookup(ino, raw, &cursor, lblk).ok().flatten().map(|e| e.pblk)
    }

    fn rebuild_allocation(&self, dev: &Arc<D>, geo: &Geometry) -> Result<()> {
        rebuild_bitmap(self, dev, geo)
    }
}

/// Checks an allocator mapping: every file's structure, blocks mapped twice, and the
/// bitmap against the blocks the files reach. Returns the blocks in use.
fn check_block_map<D: PmDevice>(
    bm: &BlockMap<D>,
    inodes: &[Option<InodeRaw>],
    counts: &mut [u64],
    add: &mut dyn FnMut(String, Fix),
) -> u64 {
    let geo = bm.geo;
    let mut owner: Vec<u32> = vec![0; geo.data_blocks as usize];
    let mut twice = 0u64;
    let mut past_end = Vec::new();
    let mut claim = |p: u64, len: u64, ino: u32, twice: &mut u64| {
        for b in p..(p + len).min(geo.data_blocks) {
            if owner[b as usize] != 0 {
                *twice += 1;
            }
            owner[b as usize] = ino;
        }
    };
    let mut visit = |m: Mapped, twice: &mut u64, past_end: &mut Vec<u32>, counts: &mut [u64]| match m {
        Mapped::Data { ino, ext } => {
            claim(ext.pblk.0, ext.len, ino.0, twice);
            match inodes.get(ino.0 as usize).and_then(|r| r.as_ref()) {
                Some(raw) if ext.lblk_end().0 <= mappable_blocks(raw.size) => counts[ino.0 as usize] += ext.len,
                _ => past_end.push(ino.0),
            }
        }
        Mapped::Node { ino, pblk } => claim(pblk.0, 1, ino.0, twice),
    };
    for e in bm.stray_entries() {
        let what = format!("{} table: {} at offset {}", bm.kind.name(), e.why, e.off);
        add(what, Fix::ClearTableEntry { off: e.off, clear: e.clear });
    }
    if bm.is_global() {
        let dummy = InodeRaw::zeroed();
        if let Err(e) = bm.walk(Ino(0), &dummy, &mut |m| visit(m, &mut twice, &mut past_end, counts)) {
            add(format!("{} table: {e}", bm.kind.name()), Fix::None);
        }
    } else {
        for (i, raw) in inodes.iter().enumerate() {
            let Some(raw) = raw else { continue };
            let mut found = Vec::new();
            // `adopt` checks that the file's ctFS partition overlaps no other file's.
            match bm.adopt(raw).and_then(|()| bm.walk(Ino(i as u32), raw, &mut |m| found.push(m))) {
                Ok(()) => found.into_iter().for_each(|m| visit(m, &mut twice, &mut past_end, counts)),
                Err(e) => add(format!("inode {i}: {e}"), Fix::ClearInode(Ino(i as u32))),
            }
        }
        if let Err(e) = bm.walk_shared(&mut |m| visit(m, &mut twice, &mut past_end, counts)) {
            add(format!("{} structure: {e}", bm.kind.name()), Fix::None);
        }
    }
    past_end.sort_unstable();
    past_end.dedup();
    for ino in past_end {
        let what = format!("inode {ino}: the {} maps blocks past its end or it is free", bm.kind.name());
        add(what, Fix::Mount);
    }
    if twice > 0 {
        add(format!("{twice} blocks are mapped more than once"), Fix::None);
    }
    let (mut leaked, mut unmarked, mut used) = (0u64, 0u64, 0u64);
    for b in 0..geo.data_blocks {
        let marked = bm.dev.load_u64(geo.bitmap_off() + (b / 64) * 8) & (1 << (b % 64)) != 0;
        let reached = owner[b as usize] != 0;
        used += u64::from(reached);
        match (marked, reached) {
            (true, false) => leaked += 1,
            (false, true) => unmarked += 1,
            _ => {}
        }
    }
    if leaked > 0 || unmarked > 0 {
        add(
            format!("bitmap: {leaked} blocks marked used but unreachable, {unmarked} in use but marked free"),
            Fix::RebuildBitmap,
        );
    }
    used
}

/// Rewrites the allocation bitmap from the blocks that valid inodes reach.
fn rebuild_bitmap<D: PmDevice>(bm: &BlockMap<D>, dev: &Arc<D>, geo: &Geometry) -> Result<()> {
    let mut words = vec![0u64; geo.data_blocks.div_ceil(64) as usize];
    let mut mark = |m: Mapped| {
        let (p, len) = match m {
            Mapped::Data { ext, .. } => (ext.pblk.0, ext.len),
            Mapped::Node { pblk, .. } => (pblk.0, 1),
        };
        for b in p..(p + len).min(geo.data_blocks) {
            words[(b / 64) as usize] |= 1 << (b % 64);
        }
    };
    if bm.is_global() {
        bm.walk(Ino(0), &InodeRaw::zeroed(), &mut mark)?;
    } else {
        for i in 1..=geo.inode_count {
            let raw = read_raw(&**dev, geo, Ino(i as u32));
            if raw.check(Ino(i as u32)) == InodeState::Allocated {
                let _ = bm.walk(Ino(i as u32), &raw, &mut mark);
            }
        }
        bm.walk_shared(&mut mark)?;
    }
    for (i, w) in words.iter().enumerate() {
        dev.store_u64(geo.bitmap_off() + i as u64 * 8, *w);
    }
    dev.flush(geo.bitmap_off(), words.len() as u64 * 8);
    dev.fence();
    Ok(())
}
