//! ctFS's persistent page table (PPT, §3.2): one 4-level radix over the whole virtual
//! space, shaped like Linux's page table, holding relative addresses (virtual page number
//! in, data block out). Level 3 is the root (one entry per L9 partition), level 2 entries
//! span 1 GiB, level 1 entries 2 MiB (a node, or a 2 MiB leaf: 512 data blocks aligned to
//! 2 MiB on the image), level 0 entries one page. Entries are the words of
//! `layout::mapping::ctfs`.
//!
//! Every change runs on a [`Staged`] overlay and commits in the caller's undo-logged
//! transaction with the inode, so a partition upgrade (a [`swap`] of the old partition's
//! entries into the new one) is as atomic as ctFS's `pswap`, and the swapped range, the
//! new partition and the inode's partition word become durable together: the state the
//! released ctFS's recovery leaves to chance ("may be flushed or leaked") cannot arise.
//! [`swap`] works at the highest level both ranges' alignment allows (§3.3, Fig. 5): two
//! L6 partitions exchange one level-2 entry each, whatever they map. Nodes left empty are
//! freed.

#![forbid(unsafe_code)]

use super::super::extent_tree::NodeAlloc;
use super::super::staged::{MemRead, Staged};
use crate::alloc::Run;
use crate::layout::mapping::ctfs::{entry, FLAGS, HUGE, NODE_BITS, NODE_ENTRIES, PRESENT, ROOT_LEVEL, SPACE_PAGES};
use crate::layout::{Geometry, Pblk, BLOCK_BYTES};
use crate::pm::{DevOffset, PmDevice};
use crate::{Error, Result};

/// Pages an entry of a node at `level` spans.
fn span(level: u32) -> u64 {
    1 << (NODE_BITS * level)
}

fn index(level: u32, vpn: u64) -> u64 {
    (vpn >> (NODE_BITS * level)) & (NODE_ENTRIES - 1)
}

fn root(geo: &Geometry) -> DevOffset {
    geo.struct_off()
}

/// Whether data block `p` starts 2 MiB on the image (the condition for a 2 MiB leaf, and
/// for the kernel to map it with one PMD).
fn huge_aligned(geo: &Geometry, p: u64) -> bool {
    (geo.data_off / BLOCK_BYTES + p).is_multiple_of(NODE_ENTRIES)
}

/// The block an entry at `level` names, checked.
fn target(geo: &Geometry, e: u64, level: u32) -> Result<u64> {
    let b = e >> 12;
    let bad = e & PRESENT == 0
        || e & FLAGS & !(PRESENT | HUGE) != 0
        || (e & HUGE != 0 && (level != 1 || !huge_aligned(geo, b) || b + NODE_ENTRIES > geo.data_blocks))
        || b >= geo.data_blocks;
    if bad {
        return Err(Error::corrupt(format!("ctfs page table: bad level-{level} entry {e:#x}")));
    }
    Ok(b)
}

/// Pages a lookup looks ahead for a run of consecutive blocks (a read of one page needs
/// none; a run of a whole node costs one load per page).
const RUN_LOOKAHEAD: u64 = 64;

/// Where virtual page `vpn` lies: its data block and how many pages from it on are
/// mapped to consecutive blocks by the same node (at least 1; a 2 MiB leaf's rest, or up
/// to [`RUN_LOOKAHEAD`] page entries).
pub fn lookup<M: MemRead>(m: &M, geo: &Geometry, vpn: u64) -> Result<Option<(u64, u64)>> {
    if vpn >= SPACE_PAGES {
        return Ok(None);
    }
    let node = match node_at(m, geo, vpn, 0)? {
        Path::Missing => return Ok(None),
        Path::Leaf(e) => {
            let off = vpn & (NODE_ENTRIES - 1);
            return Ok(Some(((e >> 12) + off, NODE_ENTRIES - off)));
        }
        Path::Node(node) => node,
    };
    let i = index(0, vpn);
    let e = m.load_u64(node + i * 8);
    if e == 0 {
        return Ok(None);
    }
    let b = target(geo, e, 0)?;
    let mut run = 1;
    while run < RUN_LOOKAHEAD && i + run < NODE_ENTRIES && m.load_u64(node + (i + run) * 8) == entry(b + run, 0) {
        run += 1;
    }
    Ok(Some((b, run)))
}

/// Where a read-only descent from the root towards `vpn`'s node of some level ends.
enum Path {
    /// The node (its offset) holding `vpn`'s entries at that level.
    Node(DevOffset),
    /// An entry on the way is 0: no such node.
    Missing,
    /// A 2 MiB leaf (the entry, checked) above that level.
    Leaf(u64),
}

/// The node of `level` that holds `vpn`'s entry, read from the root.
fn node_at<M: MemRead>(m: &M, geo: &Geometry, vpn: u64, level: u32) -> Result<Path> {
    let mut node = root(geo);
    for l in (level + 1..=ROOT_LEVEL).rev() {
        let e = m.load_u64(node + index(l, vpn) * 8);
        if e == 0 {
            return Ok(Path::Missing);
        }
        let b = target(geo, e, l)?;
        if e & HUGE != 0 {
            return Ok(Path::Leaf(e));
        }
        node = geo.block_off(Pblk(b));
    }
    Ok(Path::Node(node))
}

/// The slot of `vpn`'s entry at `level`, making the nodes above it (and splitting a 2 MiB
/// leaf when `level` is 0).
fn slot<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    vpn: u64,
    level: u32,
) -> Result<DevOffset> {
    let mut node = root(geo);
    for l in (level + 1..=ROOT_LEVEL).rev() {
        let at = node + index(l, vpn) * 8;
        let e = st.load_u64(at);
        let b = if e == 0 {
            let n = na.alloc_node(Pblk(0))?.0;
            st.store_u64(at, entry(n, 0));
            n
        } else if e & HUGE != 0 {
            let b = target(geo, e, l)?;
            let n = na.alloc_node(Pblk(b))?.0;
            let pages: Vec<u64> = (0..NODE_ENTRIES).map(|i| entry(b + i, 0)).collect();
            st.write_words(geo.block_off(Pblk(n)), &pages);
            st.store_u64(at, entry(n, 0));
            n
        } else {
            target(geo, e, l)?
        };
        node = geo.block_off(Pblk(b));
    }
    Ok(node + index(level, vpn) * 8)
}

/// Whether every entry of the node at `node` is 0.
fn node_empty<M: MemRead>(m: &M, node: DevOffset) -> bool {
    let mut words = vec![0u64; NODE_ENTRIES as usize];
    m.read_words(node, &mut words);
    words.iter().all(|&w| w == 0)
}

/// Maps pages [vpn, vpn + len) to blocks [pblk, pblk + len) (a hole of the space): 2 MiB
/// leaves where both sides are 2 MiB-aligned, page entries elsewhere.
pub fn map<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    vpn: u64,
    pblk: u64,
    len: u64,
) -> Result<()> {
    if vpn + len > SPACE_PAGES {
        return Err(Error::FileTooBig);
    }
    let mut i = 0;
    while i < len {
        let (v, p) = (vpn + i, pblk + i);
        if v.is_multiple_of(NODE_ENTRIES) && len - i >= NODE_ENTRIES && huge_aligned(geo, p) {
            let at = slot(st, geo, na, v, 1)?;
            let e = st.load_u64(at);
            let empty_node = e != 0 && e & HUGE == 0 && node_empty(st, geo.block_off(Pblk(target(geo, e, 1)?)));
            if e == 0 || empty_node {
                if empty_node {
                    na.free_node(Pblk(e >> 12));
                }
                st.store_u64(at, entry(p, HUGE));
                i += NODE_ENTRIES;
                continue;
            }
        }
        let n = (len - i).min(NODE_ENTRIES - index(0, v));
        let at = slot(st, geo, na, v, 0)?;
        let pages: Vec<u64> = (0..n).map(|k| entry(p + k, 0)).collect();
        st.write_words(at, &pages);
        i += n;
        if index(0, v) + n == NODE_ENTRIES {
            collapse(st, geo, na, v)?;
        }
    }
    Ok(())
}

/// A node of page entries that has become 512 consecutive blocks 2 MiB-aligned on the
/// image (a chunk written in several pieces) is replaced by a 2 MiB leaf.
fn collapse<D: PmDevice>(st: &mut Staged<'_, D>, geo: &Geometry, na: &mut dyn NodeAlloc, vpn: u64) -> Result<()> {
    let up = slot(st, geo, na, vpn, 1)?;
    let e = st.load_u64(up);
    let node = target(geo, e, 1)?;
    let mut words = vec![0u64; NODE_ENTRIES as usize];
    st.read_words(geo.block_off(Pblk(node)), &mut words);
    let first = words[0] >> 12;
    let whole = words[0] != 0
        && huge_aligned(geo, first)
        && words.iter().enumerate().all(|(k, &w)| w == entry(first + k as u64, 0));
    if whole {
        target(geo, entry(first, HUGE), 1)?; // checks the leaf lies inside the data region
        na.free_node(Pblk(node));
        st.store_u64(up, entry(first, HUGE));
    }
    Ok(())
}

/// Frees data runs as they are met, coalescing contiguous blocks.
struct Freer {
    run: Option<Run>,
}

impl Freer {
    fn add(&mut self, na: &mut dyn NodeAlloc, start: u64, len: u64) {
        match &mut self.run {
            Some(r) if r.start + r.len == start => r.len += len,
            _ => {
                if let Some(r) = self.run.replace(Run { start, len }) {
                    na.free_data(r);
                }
            }
        }
    }
}

/// Unmaps pages [from, to), freeing their data blocks and the nodes left empty.
pub fn unmap<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    from: u64,
    to: u64,
) -> Result<()> {
    let mut fr = Freer { run: None };
    clear_rec(st, geo, na, Some(&mut fr), root(geo), ROOT_LEVEL, 0, from, to.min(SPACE_PAGES))?;
    if let Some(r) = fr.run {
        na.free_data(r);
    }
    Ok(())
}

/// Under the node at `node` (level `level`, first page `base`): with `fr`, clears the
/// entries of pages [from, to) (splitting a 2 MiB leaf that is partly inside); then frees
/// the child nodes in the range left empty. Returns whether the node is now empty.
#[allow(clippy::too_many_arguments)]
fn clear_rec<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    mut fr: Option<&mut Freer>,
    node: DevOffset,
    level: u32,
    base: u64,
    from: u64,
    to: u64,
) -> Result<bool> {
    let sp = span(level);
    let (first, last) = (from.max(base), to.min(base + sp * NODE_ENTRIES));
    if first < last {
        for idx in (first - base) / sp..(last - base).div_ceil(sp) {
            let at = node + idx * 8;
            let e = st.load_u64(at);
            if e == 0 {
                continue;
            }
            let b = target(geo, e, level)?;
            let (lo, hi) = (base + idx * sp, base + (idx + 1) * sp);
            let whole = from <= lo && hi <= to;
            if level == 0 || (e & HUGE != 0 && whole) {
                if let Some(fr) = fr.as_deref_mut() {
                    fr.add(na, b, sp);
                    st.store_u64(at, 0);
                }
                continue;
            }
            let child = if e & HUGE != 0 {
                if fr.is_none() {
                    continue;
                }
                slot(st, geo, na, lo, 0)?; // splits the leaf into a node of pages
                target(geo, st.load_u64(at), level)?
            } else {
                b
            };
            if clear_rec(st, geo, na, fr.as_deref_mut(), geo.block_off(Pblk(child)), level - 1, lo, from, to)? {
                na.free_node(Pblk(child));
                st.store_u64(at, 0);
            }
        }
    }
    Ok(level < ROOT_LEVEL && node_empty(st, node))
}

/// Read through an entry one level down, None when it is 0.
fn child_slot<M: MemRead>(m: &M, geo: &Geometry, vpn: u64, level: u32) -> Result<Option<u64>> {
    Ok(match node_at(m, geo, vpn, level)? {
        Path::Missing => None,
        Path::Leaf(e) => Some(e), // a 2 MiB leaf above `level`: its pages are mapped
        Path::Node(node) => Some(m.load_u64(node + index(level, vpn) * 8)),
    })
}

/// ctFS's `pswap` on the page table: pages [a, a + n) and [b, b + n) exchange their
/// mappings, entry by entry at the highest level whose span both ranges' alignment and
/// the remaining length allow (§3.3, Fig. 5); entries both 0 are skipped. Returns the
/// entries exchanged.
pub fn swap<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    a: u64,
    b: u64,
    n: u64,
) -> Result<u64> {
    if a.max(b) + n > SPACE_PAGES || (a < b + n && b < a + n) {
        return Err(Error::Invalid("ctfs: swap of overlapping or out-of-space ranges"));
    }
    let (mut i, mut swapped) = (0, 0);
    let mut touched: Vec<(u64, u32)> = Vec::new(); // (page, level) of the nodes swapped in
    while i < n {
        let level = (0..ROOT_LEVEL)
            .rev()
            .find(|&l| (a + i).is_multiple_of(span(l)) && (b + i).is_multiple_of(span(l)) && n - i >= span(l))
            .unwrap_or(0);
        let (ea, eb) = (child_slot(st, geo, a + i, level)?, child_slot(st, geo, b + i, level)?);
        if ea.unwrap_or(0) != 0 || eb.unwrap_or(0) != 0 {
            let sa = slot(st, geo, na, a + i, level)?;
            let sb = slot(st, geo, na, b + i, level)?;
            let (va, vb) = (st.load_u64(sa), st.load_u64(sb));
            st.store_u64(sa, vb);
            st.store_u64(sb, va);
            swapped += 1;
            for v in [a + i, b + i] {
                let key = (v >> (NODE_BITS * (level + 1)), level);
                if touched.last() != Some(&key) {
                    touched.push(key);
                }
            }
        }
        i += span(level);
    }
    // Only the nodes entries were taken from can have become empty (the entries moved
    // whole, their subtrees with them): those, and their ancestors in turn.
    touched.sort_unstable();
    touched.dedup();
    for (node, level) in touched {
        prune_up(st, geo, na, node << (NODE_BITS * (level + 1)), level)?;
    }
    Ok(swapped)
}

/// Frees the node of `level` that holds `vpn`'s entry if it holds no entry, then its
/// parent in turn (never the root).
fn prune_up<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    vpn: u64,
    level: u32,
) -> Result<()> {
    for l in level..ROOT_LEVEL {
        // The entry above the node of level `l`, in its parent found from the root.
        let Path::Node(node) = node_at(st, geo, vpn, l + 1)? else { return Ok(()) }; // already gone
        let at = node + index(l + 1, vpn) * 8;
        let e = st.load_u64(at);
        if e == 0 || e & HUGE != 0 {
            return Ok(());
        }
        let child = target(geo, e, l + 1)?;
        if !node_empty(st, geo.block_off(Pblk(child))) {
            return Ok(());
        }
        na.free_node(Pblk(child));
        st.store_u64(at, 0);
    }
    Ok(())
}

/// The mapped pages of [from, to): `f(first page, first block, pages)` per run of
/// consecutive blocks within a node.
pub fn walk<M: MemRead>(m: &M, geo: &Geometry, from: u64, to: u64, f: &mut dyn FnMut(u64, u64, u64)) -> Result<()> {
    let mut run: Option<(u64, u64, u64)> = None;
    walk_rec(
        m,
        geo,
        root(geo),
        ROOT_LEVEL,
        0,
        from,
        to.min(SPACE_PAGES),
        &mut |v, p, len| match &mut run {
            Some((rv, rp, rl)) if *rv + *rl == v && *rp + *rl == p => *rl += len,
            _ => {
                if let Some((rv, rp, rl)) = run.replace((v, p, len)) {
                    f(rv, rp, rl);
                }
            }
        },
        &mut |_| {},
    )?;
    if let Some((rv, rp, rl)) = run {
        f(rv, rp, rl);
    }
    Ok(())
}

/// Every node of the table but the root (which lives in the mapping region).
pub fn walk_nodes<M: MemRead>(m: &M, geo: &Geometry, f: &mut dyn FnMut(u64)) -> Result<()> {
    walk_rec(m, geo, root(geo), ROOT_LEVEL, 0, 0, SPACE_PAGES, &mut |_, _, _| {}, f)
}

#[allow(clippy::too_many_arguments)]
fn walk_rec<M: MemRead>(
    m: &M,
    geo: &Geometry,
    node: DevOffset,
    level: u32,
    base: u64,
    from: u64,
    to: u64,
    data: &mut dyn FnMut(u64, u64, u64),
    nodes: &mut dyn FnMut(u64),
) -> Result<()> {
    let sp = span(level);
    let (first, last) = (from.max(base), to.min(base + sp * NODE_ENTRIES));
    if first >= last {
        return Ok(());
    }
    let mut words = vec![0u64; NODE_ENTRIES as usize];
    m.read_words(node, &mut words);
    if level == ROOT_LEVEL && words[(SPACE_PAGES / sp) as usize..].iter().any(|&w| w != 0) {
        return Err(Error::corrupt("ctfs page table: root entry past the virtual space"));
    }
    for idx in (first - base) / sp..(last - base).div_ceil(sp) {
        let e = words[idx as usize];
        if e == 0 {
            continue;
        }
        let b = target(geo, e, level)?;
        let lo = base + idx * sp;
        if level == 0 {
            data(lo, b, 1);
        } else if e & HUGE != 0 {
            let (s, t) = (from.max(lo), to.min(lo + sp));
            data(s, b + (s - lo), t - s);
        } else {
            nodes(b);
            walk_rec(m, geo, geo.block_off(Pblk(b)), level - 1, lo, from, to, data, nodes)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::superblock::GeometryParams;
    use crate::layout::MappingKind;
    use crate::pm::CrashDevice;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::{BTreeMap, BTreeSet};

    /// Nodes from the top of the data region, never reused (a fresh device is zero).
    struct Nodes {
        next: u64,
        live: BTreeSet<u64>,
        freed_data: u64,
    }

    impl NodeAlloc for Nodes {
        fn alloc_node(&mut self, _hint: Pblk) -> Result<Pblk> {
            self.next -= 1;
            self.live.insert(self.next);
            Ok(Pblk(self.next))
        }
        fn free_node(&mut self, pblk: Pblk) {
            assert!(self.live.remove(&pblk.0), "node {} freed twice or never allocated", pblk.0);
        }
        fn free_data(&mut self, e: Run) {
            self.freed_data += e.len;
        }
    }

    fn test_geometry(image_bytes: u64) -> Geometry {
        let params = GeometryParams {
            image_bytes,
            inode_count: None,
            journal_count: 1,
            journal_blocks: 4,
            mapping: MappingKind::Ctfs,
            grouped: false,
        };
        Geometry::compute(&params).unwrap()
    }

    fn check(st: &Staged<'_, CrashDevice>, geo: &Geometry, model: &BTreeMap<u64, u64>, rng: &mut SmallRng) {
        let mut walked = BTreeMap::new();
        walk(st, geo, 0, SPACE_PAGES, &mut |v, p, len| {
            for i in 0..len {
                assert!(walked.insert(v + i, p + i).is_none(), "page {} walked twice", v + i);
            }
        })
        .unwrap();
        assert_eq!(&walked, model, "the walk differs from the model");
        walk_nodes(st, geo, &mut |b| assert!(!node_empty(st, geo.block_off(Pblk(b))), "node {b} is empty but kept"))
            .unwrap();
        for _ in 0..200 {
            let v = if rng.random_bool(0.7) && !model.is_empty() {
                *model.keys().nth(rng.random_range(0..model.len())).unwrap()
            } else {
                rng.random_range(0..1 << 20)
            };
            match lookup(st, geo, v).unwrap() {
                None => assert!(!model.contains_key(&v), "page {v} lost"),
                Some((p, run)) => {
                    for i in 0..run {
                        assert_eq!(model.get(&(v + i)), Some(&(p + i)), "page {} in the run of {v}", v + i);
                    }
                }
            }
        }
    }

    /// Map, unmap and swap at every alignment against a model: lookups and walks agree
    /// with it, 2 MiB leaves are used where both sides allow and split where needed, and
    /// once everything is unmapped no node is left and every block was freed once.
    #[test]
    fn page_table_follows_a_model_through_maps_swaps_and_unmaps() {
        let geo = test_geometry(256 << 20);
        let dev = CrashDevice::new(geo.image_bytes);
        for seed in 0..12 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut st = Staged::new(&dev);
            let mut na = Nodes { next: geo.data_blocks, live: BTreeSet::new(), freed_data: 0 };
            let mut model: BTreeMap<u64, u64> = BTreeMap::new();
            // Data blocks: a 2 MiB-aligned area first (for leaves), handed out in order.
            let mut next_blk = (0..NODE_ENTRIES).find(|&p| huge_aligned(&geo, p)).unwrap();
            let (mut mapped, mut huge_seen) = (0u64, false);
            for step in 0..300 {
                match rng.random_range(0..10) {
                    0..=4 => {
                        let (v, len) = if rng.random_bool(0.3) {
                            (rng.random_range(0..1024u64) * NODE_ENTRIES, NODE_ENTRIES * rng.random_range(1..3u64))
                        } else {
                            (rng.random_range(0..1 << 19), rng.random_range(1..40))
                        };
                        if (v..v + len).any(|x| model.contains_key(&x)) {
                            continue;
                        }
                        if len >= NODE_ENTRIES {
                            next_blk = next_blk.next_multiple_of(NODE_ENTRIES);
                            while !huge_aligned(&geo, next_blk) {
                                next_blk += 1;
                            }
                        }
                        if next_blk + len > na.next - 1000 {
                            break;
                        }
                        map(&mut st, &geo, &mut na, v, next_blk, len).unwrap();
                        for i in 0..len {
                            model.insert(v + i, next_blk + i);
                        }
                        next_blk += len;
                        mapped += len;
                    }
                    5..=6 => {
                        let from = rng.random_range(0..1 << 19);
                        let to = from + rng.random_range(1..2000);
                        let before = na.freed_data;
                        unmap(&mut st, &geo, &mut na, from, to).unwrap();
                        let gone = model.range(from..to).count() as u64;
                        assert_eq!(na.freed_data - before, gone, "step {step}: unmap freed the wrong blocks");
                        model.retain(|&v, _| !(from..to).contains(&v));
                    }
                    _ => {
                        // Equal ranges at random, 2 MiB-aligned or 1 GiB-aligned places.
                        let (a, b, n) = match rng.random_range(0..3) {
                            0 => (rng.random_range(0..1 << 19), rng.random_range(0..1 << 19), rng.random_range(1..600)),
                            1 => {
                                let k = rng.random_range(1..4u64) * NODE_ENTRIES;
                                (
                                    rng.random_range(0..512u64) * NODE_ENTRIES,
                                    rng.random_range(0..1024u64) * NODE_ENTRIES,
                                    k,
                                )
                            }
                            _ => (0, rng.random_range(1..8u64) << 18, 1 << 18),
                        };
                        if a < b + n && b < a + n {
                            continue;
                        }
                        swap(&mut st, &geo, &mut na, a, b, n).unwrap();
                        let ma: Vec<(u64, u64)> = model.range(a..a + n).map(|(&v, &p)| (v - a, p)).collect();
                        let mb: Vec<(u64, u64)> = model.range(b..b + n).map(|(&v, &p)| (v - b, p)).collect();
                        model.retain(|&v, _| !(a..a + n).contains(&v) && !(b..b + n).contains(&v));
                        model.extend(ma.into_iter().map(|(o, p)| (b + o, p)));
                        model.extend(mb.into_iter().map(|(o, p)| (a + o, p)));
                    }
                }
                let root_words: Vec<u64> = (0..NODE_ENTRIES).map(|i| st.load_u64(root(&geo) + i * 8)).collect();
                huge_seen |= na
                    .live
                    .iter()
                    .any(|&n| (0..NODE_ENTRIES).any(|i| st.load_u64(geo.block_off(Pblk(n)) + i * 8) & HUGE != 0))
                    && root_words.iter().all(|&w| w & HUGE == 0);
                if step % 25 == 0 {
                    check(&st, &geo, &model, &mut rng);
                }
            }
            check(&st, &geo, &model, &mut rng);
            let mut nodes = BTreeSet::new();
            walk_nodes(&st, &geo, &mut |b| assert!(nodes.insert(b), "node {b} reached twice")).unwrap();
            assert_eq!(nodes, na.live, "seed {seed}: nodes reached differ from nodes allocated");
            let before = na.freed_data;
            unmap(&mut st, &geo, &mut na, 0, SPACE_PAGES).unwrap();
            assert_eq!(na.freed_data - before, model.len() as u64);
            assert!(na.live.is_empty(), "seed {seed}: {} nodes left after unmapping everything", na.live.len());
            assert!(mapped > 1000 && huge_seen, "seed {seed}: the run mapped too little to prove anything");
        }
    }

    #[test]
    fn swap_uses_the_highest_level_alignment_allows() {
        let geo = test_geometry(64 << 20);
        let dev = CrashDevice::new(geo.image_bytes);
        let mut st = Staged::new(&dev);
        let mut na = Nodes { next: geo.data_blocks, live: BTreeSet::new(), freed_data: 0 };
        // 512 + 512 * 3 + 2 pages at a 1 GiB boundary: one level-2 entry when the whole
        // 1 GiB moves, else level-1 entries for each 2 MiB and level-0 ones for the rest.
        map(&mut st, &geo, &mut na, 1 << 18, 0, 4 * 512 + 2).unwrap();
        assert_eq!(swap(&mut st, &geo, &mut na, 1 << 18, 3 << 18, 1 << 18).unwrap(), 1);
        assert_eq!(swap(&mut st, &geo, &mut na, 3 << 18, 5 << 18, 4 * 512 + 2).unwrap(), 4 + 2);
        assert_eq!(lookup(&st, &geo, (5 << 18) + 4 * 512 + 1).unwrap().map(|x| x.0), Some(4 * 512 + 1));
        // Misaligned by one page: every page entry moves.
        assert_eq!(swap(&mut st, &geo, &mut na, 5 << 18, (7 << 18) + 1, 600).unwrap(), 600);
        assert_eq!(lookup(&st, &geo, (7 << 18) + 1).unwrap().map(|x| x.0), Some(0));
    }
}
