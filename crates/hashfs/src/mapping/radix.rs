//! Per-file radix tree (HashFS paper §3.1.2; the structure of PMFS and ext2's indirect
//! blocks): 4 KiB nodes of 512 eight-byte pointers, each level resolving 9 bits of the
//! logical block, with a few direct pointers in the inode.
//!
//! Inode (its mapping area, `layout/inode.rs`): three direct pointers map logical blocks
//! 0..3; then the root node and the tree's height (0: no tree). The tree maps logical block
//! `DIRECT + i` at index i; a tree of height h holds indexes below 512^h. A pointer is a
//! block number plus one (0: nothing), so every update is one 8-byte atomic store, and
//! changes that add or remove levels or nodes are undo-logged with the rest of their
//! transaction. Nodes left with no pointers are freed, and the root gives up levels while
//! only its first pointer is used.

#![forbid(unsafe_code)]

use super::extent_tree::NodeAlloc;
use super::staged::{MemRead, Staged};
use crate::alloc::Run;
use crate::layout::{Geometry, InodeRaw, Lblk, Pblk};
use crate::pm::PmDevice;
use crate::{Error, Result};

pub use crate::layout::mapping::radix::{DIRECT, FANOUT, FANOUT_BITS, MAX_HEIGHT};

fn height(raw: &InodeRaw) -> Result<u32> {
    let h = raw.radix_height();
    if h > MAX_HEIGHT || (h == 0) != (raw.radix_root() == 0) {
        return Err(Error::corrupt("radix tree: bad height in inode"));
    }
    Ok(h)
}

fn span(h: u32) -> u64 {
    1u64 << (FANOUT_BITS * h)
}

fn ptr(v: u64, geo: &Geometry) -> Result<u64> {
    let p = v - 1;
    if p >= geo.data_blocks {
        return Err(Error::corrupt(format!("radix tree: pointer {p} out of range")));
    }
    Ok(p)
}

/// The physical block of `lblk`; `cursor` caches (leaf block, first index of the leaf)
/// of the last lookup.
pub fn lookup<M: MemRead>(
    m: &M,
    geo: &Geometry,
    raw: &InodeRaw,
    lblk: Lblk,
    cursor: &mut Option<(u64, u64)>,
) -> Result<Option<Pblk>> {
    Ok(lookup_raw(m, geo, raw, lblk.0, cursor)?.map(Pblk))
}

/// [`lookup`] on raw block numbers.
fn lookup_raw<M: MemRead>(
    m: &M,
    geo: &Geometry,
    raw: &InodeRaw,
    lblk: u64,
    cursor: &mut Option<(u64, u64)>,
) -> Result<Option<u64>> {
    if lblk < DIRECT {
        let v = raw.radix_direct(lblk as usize);
        return if v == 0 { Ok(None) } else { ptr(v, geo).map(Some) };
    }
    let i = lblk - DIRECT;
    if let Some((leaf, base)) = *cursor {
        if (base..base + FANOUT).contains(&i) {
            let v = m.load_u64(geo.block_off(Pblk(leaf)) + (i - base) * 8);
            return if v == 0 { Ok(None) } else { ptr(v, geo).map(Some) };
        }
    }
    let h = height(raw)?;
    if h == 0 || i >= span(h) {
        return Ok(None);
    }
    let mut node = ptr(raw.radix_root(), geo)?;
    for level in (0..h).rev() {
        let idx = (i >> (FANOUT_BITS * level)) & (FANOUT - 1);
        let v = m.load_u64(geo.block_off(Pblk(node)) + idx * 8);
        if v == 0 {
            return Ok(None);
        }
        if level == 0 {
            *cursor = Some((node, i & !(FANOUT - 1)));
            return ptr(v, geo).map(Some);
        }
        node = ptr(v, geo)?;
    }
    unreachable!("the loop returns at level 0")
}

/// Maps `lblk` to `pblk` (a hole of the file).
pub fn insert<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    raw: &mut InodeRaw,
    lblk: u64,
    pblk: u64,
) -> Result<()> {
    if lblk < DIRECT {
        raw.set_radix_direct(lblk as usize, pblk + 1);
        return Ok(());
    }
    let i = lblk - DIRECT;
    let mut h = height(raw)?;
    if h == 0 {
        raw.set_radix_root(na.alloc_node(Pblk(pblk))?.0 + 1);
        h = 1;
    }
    while i >= span(h) {
        // A new root whose first pointer is the old root.
        let nr = na.alloc_node(Pblk(pblk))?.0;
        st.store_u64(geo.block_off(Pblk(nr)), raw.radix_root());
        raw.set_radix_root(nr + 1);
        h += 1;
    }
    raw.set_radix_height(h);
    let mut node = ptr(raw.radix_root(), geo)?;
    for level in (1..h).rev() {
        let at = geo.block_off(Pblk(node)) + ((i >> (FANOUT_BITS * level)) & (FANOUT - 1)) * 8;
        let v = st.load_u64(at);
        node = if v == 0 {
            let n = na.alloc_node(Pblk(pblk))?.0;
            st.store_u64(at, n + 1);
            n
        } else {
            ptr(v, geo)?
        };
    }
    st.store_u64(geo.block_off(Pblk(node)) + (i & (FANOUT - 1)) * 8, pblk + 1);
    Ok(())
}

/// Frees data runs as they are met, coalescing contiguous blocks.
struct Freer<'a> {
    na: &'a mut dyn NodeAlloc,
    run: Option<Run>,
}

impl Freer<'_> {
    fn block(&mut self, p: u64) {
        match &mut self.run {
            Some(r) if r.start + r.len == p => r.len += 1,
            _ => {
                if let Some(r) = self.run.take() {
                    self.na.free_data(r);
                }
                self.run = Some(Run { start: p, len: 1 });
            }
        }
    }
    fn finish(mut self) {
        if let Some(r) = self.run.take() {
            self.na.free_data(r);
        }
    }
}

/// Clears indexes [from, to) of the subtree at `node` (level `level`, first index
/// `base`); returns whether the node is now empty.
#[allow(clippy::too_many_arguments)]
fn remove_rec<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    fr: &mut Freer<'_>,
    node: u64,
    level: u32,
    base: u64,
    from: u64,
    to: u64,
) -> Result<bool> {
    let child_span = span(level);
    let off = geo.block_off(Pblk(node));
    let mut live = false;
    for idx in 0..FANOUT {
        let at = off + idx * 8;
        let v = st.load_u64(at);
        if v == 0 {
            continue;
        }
        let lo = base + idx * child_span;
        let hi = lo + child_span;
        if hi <= from || lo >= to {
            live = true;
            continue;
        }
        let p = ptr(v, geo)?;
        if level == 0 {
            fr.block(p);
            st.store_u64(at, 0);
        } else if remove_rec(st, geo, fr, p, level - 1, lo, from, to)? {
            fr.na.free_node(Pblk(p));
            st.store_u64(at, 0);
        } else {
            live = true;
        }
    }
    Ok(!live)
}

/// Unmaps logical blocks [from, to).
pub fn remove<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    raw: &mut InodeRaw,
    from: u64,
    to: u64,
) -> Result<()> {
    let mut fr = Freer { na, run: None };
    for l in from.min(DIRECT)..to.min(DIRECT) {
        let v = raw.radix_direct(l as usize);
        if v != 0 {
            fr.block(ptr(v, geo)?);
            raw.set_radix_direct(l as usize, 0);
        }
    }
    let mut h = height(raw)?;
    if h > 0 && to > DIRECT {
        let (f, t) = (from.saturating_sub(DIRECT), to - DIRECT);
        let root = ptr(raw.radix_root(), geo)?;
        if remove_rec(st, geo, &mut fr, root, h - 1, 0, f, t)? {
            fr.na.free_node(Pblk(root));
            raw.set_radix_root(0);
            h = 0;
        }
        // Drop levels while only the root's first pointer is used.
        while h > 1 {
            let root = ptr(raw.radix_root(), geo)?;
            let off = geo.block_off(Pblk(root));
            if (1..FANOUT).any(|i| st.load_u64(off + i * 8) != 0) {
                break;
            }
            let first = st.load_u64(off);
            fr.na.free_node(Pblk(root));
            raw.set_radix_root(first);
            h -= 1;
        }
        raw.set_radix_height(h);
    }
    fr.finish();
    Ok(())
}

/// Visits every mapped block (logical, physical) and node block, checking pointers.
pub fn walk<M: MemRead>(m: &M, geo: &Geometry, raw: &InodeRaw, f: &mut dyn FnMut(Option<u64>, u64)) -> Result<()> {
    for l in 0..DIRECT {
        let v = raw.radix_direct(l as usize);
        if v != 0 {
            f(Some(l), ptr(v, geo)?);
        }
    }
    let h = height(raw)?;
    if h > 0 {
        walk_rec(m, geo, ptr(raw.radix_root(), geo)?, h - 1, 0, f)?;
    }
    Ok(())
}

fn walk_rec<M: MemRead>(
    m: &M,
    geo: &Geometry,
    node: u64,
    level: u32,
    base: u64,
    f: &mut dyn FnMut(Option<u64>, u64),
) -> Result<()> {
    f(None, node);
    let off = geo.block_off(Pblk(node));
    for idx in 0..FANOUT {
        let v = m.load_u64(off + idx * 8);
        if v == 0 {
            continue;
        }
        let p = ptr(v, geo)?;
        let lo = base + idx * span(level);
        if level == 0 {
            if lo + DIRECT >= 1 << 32 {
                return Err(Error::corrupt("radix tree: block beyond the file size limit"));
            }
            f(Some(lo + DIRECT), p);
        } else {
            walk_rec(m, geo, p, level - 1, lo, f)?;
        }
    }
    Ok(())
}
