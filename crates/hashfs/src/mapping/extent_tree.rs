//! Per-file B-tree of extents (HashFS paper §3.1.1; ext4's and NOVA's structure): PM
//! nodes of 4 KiB, binary search in each node, the root in the inode.
//!
//! Node (one data block): a 16-byte header (magic, level, count) and up to 255 entries of
//! 16 bytes. Leaf entry: word 0 = logical block | length << 32 | VALID, word 1 = physical
//! block. Interior entry: word 0 = the smallest logical block of the child | VALID, word 1 =
//! the child's block. The root lives in the inode (its mapping area, two entries, with
//! their count and level; `layout/inode.rs`), so a file of one or two extents needs no node block.
//!
//! Invariants (T1): entries of a node are sorted and their logical ranges do not overlap;
//! an interior entry's key is exactly the smallest logical block of its subtree; every
//! entry below `count` carries VALID (a reader never takes a slot that is not one).
//!
//! Changes go through a [`Staged`] overlay and commit in one undo-logged transaction, so a
//! split, a merge of adjacent extents, a node freed when it empties and the root growing or
//! shrinking a level are all-or-nothing. Empty nodes are freed and a root with one child
//! absorbs it; partly empty siblings are not rebalanced (as in ext4).

#![forbid(unsafe_code)]

use super::staged::{MemRead, Staged};
use crate::alloc::Run;
use crate::layout::{Extent, Geometry, InodeRaw, Lblk, Pblk};
use crate::pm::{DevOffset, PmDevice};
use crate::{Error, Result};

use crate::layout::mapping::extent_tree::{entry_words, node_header as header_word, parse_entry, parse_node_header};
pub use crate::layout::mapping::extent_tree::{ENTRY_BYTES, MAX_EXTENT, MAX_LEVELS, NODE_CAP, ROOT_CAP};

/// One mapped run: `len` blocks from logical `lblk` at physical `pblk`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ext {
    pub lblk: u64,
    pub pblk: u64,
    pub len: u64,
}

impl Ext {
    fn end(&self) -> u64 {
        self.lblk + self.len
    }
}

/// A node in DRAM (for changes). For interior nodes `len` is 0 and `pblk` is the child.
#[derive(Clone, Debug)]
struct Node {
    level: u8,
    e: Vec<Ext>,
}

fn decode(w0: u64, w1: u64) -> Option<Ext> {
    parse_entry(w0, w1).map(|(lblk, len, pblk)| Ext { lblk, len, pblk })
}
fn encode(e: &Ext) -> [u64; 2] {
    entry_words(e.lblk, e.len, e.pblk)
}

fn root_info(raw: &InodeRaw) -> (u8, usize) {
    raw.extent_root_level()
}

fn root_node(raw: &InodeRaw) -> Result<Node> {
    let (level, count) = root_info(raw);
    if count > ROOT_CAP || level > MAX_LEVELS {
        return Err(Error::corrupt("extent tree: bad root in inode"));
    }
    let mut e = Vec::with_capacity(count + 1);
    for i in 0..count {
        e.push(
            decode(raw.extent_root_entry(i)[0], raw.extent_root_entry(i)[1])
                .ok_or_else(|| Error::corrupt("extent tree: invalid root entry"))?,
        );
    }
    Ok(Node { level, e })
}

fn set_root(raw: &mut InodeRaw, n: &Node) {
    debug_assert!(n.e.len() <= ROOT_CAP);
    let mut entries = [[0u64; 2]; ROOT_CAP];
    for (slot, e) in entries.iter_mut().zip(&n.e) {
        *slot = encode(e);
    }
    raw.set_extent_root(&entries[..n.e.len()], n.level);
}

fn node_header<M: MemRead>(m: &M, geo: &Geometry, pblk: u64) -> Result<(u8, usize)> {
    if pblk >= geo.data_blocks {
        return Err(Error::corrupt(format!("extent tree: node pointer {pblk} out of range")));
    }
    match parse_node_header(m.load_u64(geo.block_off(Pblk(pblk)))) {
        Some((level, count)) if count <= NODE_CAP && level <= MAX_LEVELS => Ok((level, count)),
        _ => Err(Error::corrupt(format!("extent tree: block {pblk} is not a valid node"))),
    }
}

#[inline]
fn entry_off(geo: &Geometry, pblk: u64, i: usize) -> DevOffset {
    geo.block_off(Pblk(pblk)) + 16 + i as u64 * ENTRY_BYTES
}

fn read_node<M: MemRead>(m: &M, geo: &Geometry, pblk: u64) -> Result<Node> {
    let (level, count) = node_header(m, geo, pblk)?;
    let mut w = vec![0u64; 2 * count];
    m.read_words(entry_off(geo, pblk, 0), &mut w);
    let mut e = Vec::with_capacity(count + 1);
    for (i, p) in w.chunks_exact(2).enumerate() {
        e.push(
            decode(p[0], p[1])
                .ok_or_else(|| Error::corrupt(format!("extent tree: node {pblk} entry {i} not valid")))?,
        );
    }
    Ok(Node { level, e })
}

fn write_node<D: PmDevice>(st: &mut Staged<'_, D>, geo: &Geometry, pblk: u64, n: &Node) {
    st.store_u64(geo.block_off(Pblk(pblk)), header_word(n.level, n.e.len()));
    let w: Vec<u64> = n.e.iter().flat_map(encode).collect();
    st.write_words(entry_off(geo, pblk, 0), &w);
}

/// What a change needs besides the overlay: blocks for new nodes, and a place to put the
/// nodes and data it frees.
pub trait NodeAlloc {
    fn alloc_node(&mut self, hint: Pblk) -> Result<Pblk>;
    fn free_node(&mut self, pblk: Pblk);
    fn free_data(&mut self, e: Run);
}

/// Index of the last entry whose key is <= `lblk`, by binary search on PM.
fn search_pm<M: MemRead>(m: &M, geo: &Geometry, pblk: u64, count: usize, lblk: u64) -> Option<usize> {
    let (mut lo, mut hi) = (0usize, count);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if m.load_u64(entry_off(geo, pblk, mid)) & 0xFFFF_FFFF <= lblk {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo.checked_sub(1)
}

/// Looks `lblk` up in leaf `pblk`: the physical block and how many blocks of the extent
/// follow from there.
fn leaf_lookup<M: MemRead>(m: &M, geo: &Geometry, pblk: u64, count: usize, lblk: u64) -> Option<(u64, u64)> {
    let i = search_pm(m, geo, pblk, count, lblk)?;
    let o = entry_off(geo, pblk, i);
    let e = decode(m.load_u64(o), m.load_u64(o + 8))?;
    (lblk < e.end()).then(|| (e.pblk + (lblk - e.lblk), e.end() - lblk))
}

/// Where `lblk` lies: the extent from it to the end of its entry; `cursor` is the leaf of
/// the last lookup (tried first), updated to this lookup's leaf.
pub fn lookup<M: MemRead>(
    m: &M,
    geo: &Geometry,
    raw: &InodeRaw,
    lblk: Lblk,
    cursor: &mut Option<u64>,
) -> Result<Option<Extent>> {
    let found = lookup_raw(m, geo, raw, lblk.0, cursor)?;
    Ok(found.map(|(p, len)| Extent { lblk, pblk: Pblk(p), len }))
}

/// [`lookup`] on raw numbers: (physical block, blocks from it to the end of its entry).
fn lookup_raw<M: MemRead>(
    m: &M,
    geo: &Geometry,
    raw: &InodeRaw,
    lblk: u64,
    cursor: &mut Option<u64>,
) -> Result<Option<(u64, u64)>> {
    if let Some(leaf) = *cursor {
        let (level, count) = node_header(m, geo, leaf)?;
        if level == 0 {
            if let Some(hit) = leaf_lookup(m, geo, leaf, count, lblk) {
                return Ok(Some(hit));
            }
        }
    }
    let root = root_node(raw)?;
    let Some(i) = root.e.iter().rposition(|e| e.lblk <= lblk) else { return Ok(None) };
    if root.level == 0 {
        let e = root.e[i];
        return Ok((lblk < e.end()).then(|| (e.pblk + (lblk - e.lblk), e.end() - lblk)));
    }
    let mut node = root.e[i].pblk;
    let mut expect = root.level - 1;
    loop {
        let (level, count) = node_header(m, geo, node)?;
        if level != expect {
            return Err(Error::corrupt(format!("extent tree: node {node} at the wrong level")));
        }
        if level == 0 {
            *cursor = Some(node);
            return Ok(leaf_lookup(m, geo, node, count, lblk));
        }
        let Some(i) = search_pm(m, geo, node, count, lblk) else { return Ok(None) };
        node = m.load_u64(entry_off(geo, node, i) + 8);
        expect = level - 1;
    }
}

fn leaf_insert(n: &mut Node, x: Ext) {
    let pos = n.e.partition_point(|e| e.lblk < x.lblk);
    if pos > 0 {
        let p = &mut n.e[pos - 1];
        if p.end() == x.lblk && p.pblk + p.len == x.pblk && p.len + x.len <= MAX_EXTENT {
            p.len += x.len;
            let merged = *p;
            if let Some(s) = n.e.get(pos).copied() {
                if merged.end() == s.lblk && merged.pblk + merged.len == s.pblk && merged.len + s.len <= MAX_EXTENT {
                    n.e[pos - 1].len += s.len;
                    n.e.remove(pos);
                }
            }
            return;
        }
    }
    if let Some(s) = n.e.get_mut(pos) {
        if x.end() == s.lblk && x.pblk + x.len == s.pblk && x.len + s.len <= MAX_EXTENT {
            s.lblk = x.lblk;
            s.pblk = x.pblk;
            s.len += x.len;
            return;
        }
    }
    n.e.insert(pos, x);
}

/// Writes a block node, splitting it in two when it overflowed; returns the new right
/// sibling's entry for the parent.
fn store<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    pblk: u64,
    mut n: Node,
) -> Result<Option<Ext>> {
    if n.e.len() <= NODE_CAP {
        write_node(st, geo, pblk, &n);
        return Ok(None);
    }
    let right = Node { level: n.level, e: n.e.split_off(n.e.len() / 2) };
    let np = na.alloc_node(Pblk(pblk))?.0;
    write_node(st, geo, pblk, &n);
    write_node(st, geo, np, &right);
    Ok(Some(Ext { lblk: right.e[0].lblk, pblk: np, len: 0 }))
}

fn insert_rec<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    n: &mut Node,
    x: Ext,
) -> Result<()> {
    if n.level == 0 {
        leaf_insert(n, x);
        return Ok(());
    }
    if n.e.is_empty() {
        return Err(Error::corrupt("extent tree: empty interior node"));
    }
    let i = n.e.iter().rposition(|e| e.lblk <= x.lblk).unwrap_or(0);
    let cp = n.e[i].pblk;
    let mut child = read_node(st, geo, cp)?;
    if child.level + 1 != n.level {
        return Err(Error::corrupt(format!("extent tree: node {cp} at the wrong level")));
    }
    insert_rec(st, geo, na, &mut child, x)?;
    n.e[i].lblk = child.e[0].lblk;
    if let Some(right) = store(st, geo, na, cp, child)? {
        n.e.insert(i + 1, right);
    }
    Ok(())
}

fn remove_rec<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    n: &mut Node,
    from: u64,
    to: u64,
) -> Result<()> {
    let mut out = Vec::with_capacity(n.e.len() + 1);
    if n.level == 0 {
        for &e in &n.e {
            if e.end() <= from || e.lblk >= to {
                out.push(e);
                continue;
            }
            let (a, b) = (e.lblk.max(from), e.end().min(to));
            na.free_data(Run { start: e.pblk + (a - e.lblk), len: b - a });
            if e.lblk < from {
                out.push(Ext { lblk: e.lblk, pblk: e.pblk, len: from - e.lblk });
            }
            if e.end() > to {
                out.push(Ext { lblk: to, pblk: e.pblk + (to - e.lblk), len: e.end() - to });
            }
        }
    } else {
        for (i, &c) in n.e.iter().enumerate() {
            let hi = n.e.get(i + 1).map(|x| x.lblk).unwrap_or(u64::MAX);
            if hi <= from || c.lblk >= to {
                out.push(c);
                continue;
            }
            let mut child = read_node(st, geo, c.pblk)?;
            if child.level + 1 != n.level {
                return Err(Error::corrupt(format!("extent tree: node {} at the wrong level", c.pblk)));
            }
            remove_rec(st, geo, na, &mut child, from, to)?;
            if child.e.is_empty() {
                na.free_node(Pblk(c.pblk));
                continue;
            }
            out.push(Ext { lblk: child.e[0].lblk, pblk: c.pblk, len: 0 });
            if let Some(right) = store(st, geo, na, c.pblk, child)? {
                out.push(right);
            }
        }
    }
    n.e = out;
    Ok(())
}

/// Puts the root back in the inode: a root that overflowed moves into a new node one
/// level down; a root with one child that fits in the inode absorbs it.
fn settle_root<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    raw: &mut InodeRaw,
    mut root: Node,
) -> Result<()> {
    loop {
        if root.level > 0 && root.e.is_empty() {
            root = Node { level: 0, e: Vec::new() };
        } else if root.level > 0 && root.e.len() == 1 {
            let cp = root.e[0].pblk;
            let child = read_node(st, geo, cp)?;
            if child.e.len() <= ROOT_CAP {
                na.free_node(Pblk(cp));
                root = child;
                continue;
            }
        }
        break;
    }
    if root.e.len() > ROOT_CAP {
        if root.level >= MAX_LEVELS {
            return Err(Error::FileTooBig);
        }
        let np = na.alloc_node(Pblk(root.e[0].pblk))?.0;
        let key = root.e[0].lblk;
        let level = root.level;
        write_node(st, geo, np, &root);
        root = Node { level: level + 1, e: vec![Ext { lblk: key, pblk: np, len: 0 }] };
    }
    set_root(raw, &root);
    Ok(())
}

/// Maps `x` (a hole of the file), merging it with adjacent extents.
pub fn insert<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    raw: &mut InodeRaw,
    x: Ext,
) -> Result<()> {
    debug_assert!(x.len > 0 && x.len <= MAX_EXTENT && x.end() <= 1 << 32);
    let mut root = root_node(raw)?;
    insert_rec(st, geo, na, &mut root, x)?;
    settle_root(st, geo, na, raw, root)
}

/// Unmaps logical blocks [from, to), handing the freed data runs to `na`.
pub fn remove<D: PmDevice>(
    st: &mut Staged<'_, D>,
    geo: &Geometry,
    na: &mut dyn NodeAlloc,
    raw: &mut InodeRaw,
    from: u64,
    to: u64,
) -> Result<()> {
    let mut root = root_node(raw)?;
    remove_rec(st, geo, na, &mut root, from, to)?;
    settle_root(st, geo, na, raw, root)
}

/// What a walk of the tree meets.
pub enum Item {
    Extent(Ext),
    Node { pblk: u64 },
}

/// Visits every node and extent in logical order, checking T1.
pub fn walk<M: MemRead>(m: &M, geo: &Geometry, raw: &InodeRaw, f: &mut dyn FnMut(Item)) -> Result<()> {
    let root = root_node(raw)?;
    let mut last_end = 0u64;
    walk_node(m, geo, &root, None, &mut last_end, f, 0)
}

fn walk_node<M: MemRead>(
    m: &M,
    geo: &Geometry,
    n: &Node,
    bound: Option<(u64, u64)>,
    last_end: &mut u64,
    f: &mut dyn FnMut(Item),
    depth: u32,
) -> Result<()> {
    if depth > MAX_LEVELS as u32 + 1 {
        return Err(Error::corrupt("extent tree: too deep"));
    }
    for (i, e) in n.e.iter().enumerate() {
        if let Some((lo, hi)) = bound {
            if e.lblk < lo || e.lblk >= hi || (i == 0 && e.lblk != lo) {
                return Err(Error::corrupt("extent tree: key outside its parent's range"));
            }
        }
        if n.level == 0 {
            if e.len == 0 || e.lblk < *last_end || e.end() > 1 << 32 || e.pblk + e.len > geo.data_blocks {
                return Err(Error::corrupt(format!("extent tree: bad extent {e:?}")));
            }
            *last_end = e.end();
            f(Item::Extent(*e));
        } else {
            let child = read_node(m, geo, e.pblk)?;
            if child.level + 1 != n.level || child.e.is_empty() {
                return Err(Error::corrupt(format!("extent tree: node {} malformed", e.pblk)));
            }
            f(Item::Node { pblk: e.pblk });
            let hi = n.e.get(i + 1).map(|x| x.lblk).unwrap_or(bound.map(|b| b.1).unwrap_or(u64::MAX));
            walk_node(m, geo, &child, Some((e.lblk, hi)), last_end, f, depth + 1)?;
        }
    }
    Ok(())
}
