//! File-mapping structures, chosen at mkfs ([`MappingKind`]).
//!
//! - [`hashfs`]: the global linear-probing table of the HashFS paper (§3.2.2), which also
//!   allocates (slot = block); [`simd`] hashes eight keys at once; [`tcache`] is the
//!   per-file DRAM translation cache.
//! - The others map through [`BlockMap`]: a structure plus the baseline block allocator
//!   ([`crate::alloc`]): [`extent_tree`] (and its DRAM node cache, [`node_cache`]),
//!   [`radix`], [`cuckoo`] and [`extent_hash`]. Their changes are staged ([`staged`]) and
//!   committed in the caller's undo-logged transaction together with the bitmap words and
//!   the inode, under [`BlockMap::commit`]. [`ctfs`] (ctFS's partitions and persistent
//!   page table) maps through it too: its page table is the structure, its partitions are
//!   named by the inodes.

mod cold;
pub mod ctfs;
pub mod cuckoo;
pub mod extent_hash;
pub mod extent_tree;
pub mod hashfs;
pub mod node_cache;
pub mod radix;
pub mod simd;
mod space;
pub mod staged;
pub mod tcache;

use crate::alloc::{AllocParams, BlockAllocator, Run};
use crate::journal::{Outcome, Tx};
use crate::layout::superblock::extent_hash_slots;
use crate::layout::{AllocatorKind, Extent, Geometry, Ino, InodeRaw, Lblk, MappingKind, Pblk, Superblock, BLOCK_BYTES};
use crate::pm::{DevOffset, PmDevice};
use crate::{Error, Result};
use ctfs::partition::Partition;
use extent_tree::{Ext, NodeAlloc};
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockWriteGuard};
use staged::{Direct, MemRead, Staged};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The structure behind a [`BlockMap`].
pub enum Index<D: PmDevice> {
    ExtentTree,
    ExtentTreeCached(node_cache::NodeCache),
    Radix,
    Cuckoo(cuckoo::Cuckoo),
    ExtentHash(Box<extent_hash::ExtentHashTable<D>>),
    Ctfs(ctfs::Ctfs),
}

/// A mapping structure with the bitmap allocator.
pub struct BlockMap<D: PmDevice> {
    pub dev: Arc<D>,
    pub geo: Geometry,
    pub kind: MappingKind,
    pub alloc: BlockAllocator,
    /// Serializes staged changes (the bitmap is shared) from staging to commit.
    pub commit: Mutex<()>,
    /// Cuckoo: displacement moves other files' entries, so lookups read under this lock
    /// and changes hold it for writing until they are durable.
    pub global: RwLock<()>,
    pub index: Index<D>,
    /// Extent trees: how many committed changes have freed tree nodes. A file's cursor
    /// names a leaf only as of the count it was taken at ([`Cursor`]).
    node_frees: AtomicU64,
}

/// Per-file DRAM cursor word (trees), 0 = none. Extent tree: leaf + 1 in the low 32 bits,
/// and above them the low 32 bits of [`BlockMap`]'s count of node frees when it was
/// taken: a change can free the cursor's leaf (a merge that lets the root absorb its only
/// child; a removal), after which the block may hold anything (data, another file's node),
/// so a cursor from before a node free is not used (an old one would match again only if
/// the file saw no lookup across a multiple of 2^32 node-freeing changes). Radix tree: leaf + 1 | (first index
/// of the leaf / 512) << 32 (its inserts free no nodes; removals reset the cursor).
pub type Cursor = AtomicU64;

/// The bits of an extent-tree cursor that hold its leaf.
const CURSOR_LEAF_BITS: u32 = 32;

/// Undo entries a block moved by an untorn write may cost with HashFS: its new slot and
/// its old one.
const MOVE_COST_HASH: u64 = 2;
/// Undo entries a moved block may cost with a block mapping (removal and insertion in
/// the structure, two bitmap words); `tests/untorn_writes.rs` fills a journal to check.
pub const MOVE_COST_BLOCKMAP: u64 = 8;

impl MappingKind {
    /// The undo entries one block moved by an untorn write may cost in this mapping
    /// (what bounds the largest untorn write a journal holds, `fs/untorn.rs`).
    pub fn untorn_move_cost(self) -> u64 {
        match self {
            MappingKind::HashFs => MOVE_COST_HASH,
            _ => MOVE_COST_BLOCKMAP,
        }
    }
}

impl<D: PmDevice> FileMap<D> {
    /// The mapping the superblock names, over the image on `dev`: HashFS's table, or a
    /// structure behind the block allocator (mount and fsck open it so).
    pub fn open(dev: Arc<D>, geo: &Geometry, sb: &Superblock) -> Result<FileMap<D>> {
        let kind = MappingKind::from_u32(sb.mapping_kind).ok_or_else(|| Error::corrupt("unknown mapping kind"))?;
        Ok(match kind {
            MappingKind::HashFs => FileMap::Hash(self::hashfs::HashTable::of_image(dev, geo, sb)?),
            _ => FileMap::Blocks(Box::new(BlockMap::new(dev, *geo, sb, kind)?)),
        })
    }

    /// [`open`](Self::open) for a mount that takes HashFS's grouped placements' state from
    /// the image's shared region (`fs/shared/join.rs`) instead of counting it.
    pub fn open_to_adopt(dev: Arc<D>, geo: &Geometry, sb: &Superblock) -> Result<FileMap<D>> {
        match MappingKind::from_u32(sb.mapping_kind) {
            Some(MappingKind::HashFs) => Ok(FileMap::Hash(self::hashfs::HashTable::of_image_to_adopt(dev, geo, sb))),
            _ => FileMap::open(dev, geo, sb),
        }
    }
}

impl<D: PmDevice> BlockMap<D> {
    pub fn new(dev: Arc<D>, geo: Geometry, sb: &Superblock, kind: MappingKind) -> Result<Self> {
        let kind_a = AllocatorKind::from_u32(sb.allocator).ok_or(Error::Invalid("unknown allocator"))?;
        let alloc = BlockAllocator::load(
            &*dev,
            geo.bitmap_off(),
            AllocParams {
                kind: kind_a,
                blocks: geo.data_blocks,
                layout_score: sb.layout_score_ppm as f64 / 1e6,
                seed: sb.hash_seed ^ 0xA110C,
                pools: geo.journal_count,
                data_off_blocks: geo.data_off / BLOCK_BYTES,
            },
        )?;
        let index = match kind {
            MappingKind::ExtentTree => Index::ExtentTree,
            MappingKind::ExtentTreeCached => Index::ExtentTreeCached(node_cache::NodeCache::new(4096)),
            MappingKind::RadixTree => Index::Radix,
            MappingKind::Cuckoo => Index::Cuckoo(cuckoo::Cuckoo::new(&geo, sb.hash_seed)),
            MappingKind::ExtentHash => Index::ExtentHash(Box::new(extent_hash::ExtentHashTable::new(
                dev.clone(),
                geo.struct_off(),
                extent_hash_slots(geo.data_blocks),
                sb.hash_seed,
                extent_hash::ExtentLookup::Fast,
            ))),
            MappingKind::Ctfs => Index::Ctfs(ctfs::Ctfs::new(dev.backing_fd(), &geo)),
            MappingKind::HashFs => return Err(Error::Invalid("HashFS does not use a block map")),
        };
        let (commit, global, node_frees) = (Mutex::new(()), RwLock::new(()), AtomicU64::new(0));
        Ok(BlockMap { dev, geo, kind, alloc, commit, global, index, node_frees })
    }

    /// A file's extent-tree cursor with the generation it must carry to be used.
    fn cursor_of<'c>(&self, cursor: &'c Cursor) -> TreeCursor<'c> {
        TreeCursor { word: cursor, generation: self.node_frees.load(Ordering::Acquire) & ((1 << 32) - 1) }
    }

    /// Whether lookups go through the per-file translation cache (the global tables; the
    /// trees use their cursor instead, as in the paper).
    pub fn uses_tcache(&self) -> bool {
        self.is_global()
    }

    /// Where logical block `lblk` of `ino` lies: the extent from `lblk` to the end of its
    /// mapping entry (one block for block-granular structures).
    pub fn lookup(&self, ino: Ino, raw: &InodeRaw, cursor: &Cursor, lblk: Lblk) -> Result<Option<Extent>> {
        let geo = &self.geo;
        match &self.index {
            Index::ExtentTree => tree_lookup(&Direct(&*self.dev), geo, raw, self.cursor_of(cursor), lblk),
            Index::ExtentTreeCached(cache) => {
                tree_lookup(&cache.reader(&*self.dev), geo, raw, self.cursor_of(cursor), lblk)
            }
            Index::Radix => {
                let c = cursor.load(Ordering::Relaxed);
                let mut cur = (c != 0).then(|| ((c & 0xFFFF_FFFF) - 1, (c >> 32) << radix::FANOUT_BITS));
                let r = radix::lookup(&Direct(&*self.dev), geo, raw, lblk, &mut cur)?;
                if let Some((leaf, base)) = cur {
                    let w = (leaf + 1) | (base >> radix::FANOUT_BITS) << 32;
                    if w != c {
                        cursor.store(w, Ordering::Relaxed);
                    }
                }
                Ok(r.map(|pblk| Extent { lblk, pblk, len: 1 }))
            }
            Index::Cuckoo(t) => {
                let _g = self.global.read();
                t.lookup(&Direct(&*self.dev), ino, lblk)
            }
            Index::ExtentHash(t) => {
                let Some(l32) = lblk.to_u32() else { return Ok(None) }; // past the largest file
                let (e, _) = t.lookup(ino, l32);
                Ok(e.map(|e| {
                    let off = l32 as u64 - e.start as u64;
                    Extent { lblk, pblk: Pblk(e.phys + off), len: e.len as u64 - off }
                }))
            }
            Index::Ctfs(_) => ctfs::Ctfs::lookup(&Direct(&*self.dev), geo, raw, lblk),
        }
    }

    /// ctFS's DRAM state (its Empty partitions and live view), on a `ctfs` image.
    pub fn ctfs(&self) -> Option<&ctfs::Ctfs> {
        match &self.index {
            Index::Ctfs(c) => Some(c),
            _ => None,
        }
    }

    /// ctFS's live translation, when the image has one.
    pub fn ctfs_view(&self) -> Option<&ctfs::view::View> {
        self.ctfs().and_then(|c| c.view.as_ref())
    }

    /// Takes note of a file's structure while a mount reads the inodes (ctFS: its
    /// partition is taken).
    pub fn adopt(&self, raw: &InodeRaw) -> Result<()> {
        match &self.index {
            Index::Ctfs(c) if !raw.is_special() => c.adopt(raw),
            _ => Ok(()),
        }
    }

    /// Chooses a free block for each of `lblks` (DRAM only until a [`MapTx`] records
    /// them); `hint` is the block after the file's previous one; `whole` the blocks of the
    /// file the request this claim is part of writes.
    pub fn claim(
        &self,
        ino: Ino,
        lblks: &[Lblk],
        hint: Option<Pblk>,
        whole: std::ops::Range<Lblk>,
    ) -> Result<Vec<Run>> {
        self.alloc.allocate_for(lblks, hint, whole, ino.get())
    }

    /// Gives back claimed blocks that were never recorded.
    pub fn unclaim(&self, ext: &[Run]) {
        self.alloc.release(ext)
    }

    pub fn free_blocks(&self) -> u64 {
        self.alloc.free_blocks()
    }

    /// Starts a change (waits for other changes to commit first).
    pub fn begin(&self) -> MapTx<'_, D> {
        let commit = self.commit.lock();
        let global = matches!(self.index, Index::Cuckoo(_)).then(|| self.global.write());
        MapTx {
            map: self,
            st: Staged::new(&*self.dev),
            _commit: commit,
            _global: global,
            new_nodes: Vec::new(),
            freed_nodes: Vec::new(),
            freed_data: Vec::new(),
            recorded: Vec::new(),
            exthash_inserted: false,
            removed: false,
            parts_taken: Vec::new(),
            parts_left: Vec::new(),
            moved: Vec::new(),
        }
    }

    /// Every mapped extent and structure block of one file (trees) or of every file
    /// (global tables, `raw` ignored), checked for corruption.
    pub fn walk(&self, ino: Ino, raw: &InodeRaw, f: &mut dyn FnMut(Mapped)) -> Result<()> {
        if raw.is_special() && !self.is_global() {
            return Ok(()); // no mapping: the mapping area holds a device number, not a root
        }
        let m = Direct(&*self.dev);
        match &self.index {
            Index::ExtentTree | Index::ExtentTreeCached(_) => extent_tree::walk(&m, &self.geo, raw, &mut |it| {
                f(match it {
                    extent_tree::Item::Extent(e) => Mapped::data(ino, e.lblk, e.pblk, e.len),
                    extent_tree::Item::Node { pblk } => Mapped::Node { ino, pblk: Pblk(pblk) },
                })
            }),
            Index::Radix => radix::walk(&m, &self.geo, raw, &mut |l, p| {
                f(match l {
                    Some(lblk) => Mapped::data(ino, lblk, p, 1),
                    None => Mapped::Node { ino, pblk: Pblk(p) },
                })
            }),
            Index::Cuckoo(t) => t.scan(&m, &mut |i, lblk, pblk| f(Mapped::data(Ino(i), lblk, pblk, 1))),
            Index::ExtentHash(t) => {
                t.mount_scan(&mut |i, e| f(Mapped::data(Ino(i), e.start as u64, e.phys, e.len as u64)))
            }
            Index::Ctfs(_) => ctfs::Ctfs::walk(&m, &self.geo, raw, &mut |l, p, len| f(Mapped::data(ino, l, p, len))),
        }
    }

    /// The structure blocks no single file owns (ctFS's page-table nodes), reported as
    /// [`Mapped::Node`] of [`Mapped::SHARED`]; nothing for the other mappings. Walkers of
    /// per-file structures call it once beside the files' walks.
    pub fn walk_shared(&self, f: &mut dyn FnMut(Mapped)) -> Result<()> {
        match &self.index {
            Index::Ctfs(_) => ctfs::ppt::walk_nodes(&Direct(&*self.dev), &self.geo, &mut |b| {
                f(Mapped::Node { ino: Mapped::SHARED, pblk: Pblk(b) })
            }),
            _ => Ok(()),
        }
    }

    /// fsck: the global tables' entries that no lookup or removal treats as whole, each
    /// with the word that clears it; nothing for the per-file structures (whose damage a
    /// walk reports per file).
    pub fn stray_entries(&self) -> Vec<StrayEntry> {
        match &self.index {
            Index::Cuckoo(t) => t.stray_entries(&Direct(&*self.dev)),
            Index::ExtentHash(t) => t.stray_entries(self.geo.data_blocks),
            _ => Vec::new(),
        }
    }

    /// Whether [`walk`](Self::walk) covers every file at once.
    pub fn is_global(&self) -> bool {
        matches!(self.index, Index::Cuckoo(_) | Index::ExtentHash(_))
    }

    /// Bytes of the static structure region (global tables) beside the bitmap.
    pub fn table_bytes(&self) -> u64 {
        match &self.index {
            Index::Cuckoo(t) => t.region_bytes(),
            Index::ExtentHash(t) => t.nslots() * extent_hash::ENTRY_BYTES,
            _ => 0,
        }
    }

    /// The entries that map `len` blocks from `lblk` (one extent a walk reports) and the
    /// bytes of each, for `hashfs info`.
    pub fn entries_for(&self, lblk: Lblk, len: u64) -> (u64, u64) {
        match &self.index {
            Index::Cuckoo(_) => (len, cuckoo::ENTRY_BYTES),
            Index::Radix => (len, 8),
            // A page-table entry per page (a 2 MiB leaf counts 512: the walk does not tell
            // them apart).
            Index::Ctfs(_) => (len, 8),
            Index::ExtentHash(_) => (
                match (u32::try_from(lblk.0), u32::try_from(len)) {
                    (Ok(l), Ok(n)) => extent_hash::insert_positions(l, n).len() as u64,
                    _ => 0, // past the largest file: walk reports no such extent
                },
                extent_hash::ENTRY_BYTES,
            ),
            Index::ExtentTree | Index::ExtentTreeCached(_) => (1, extent_tree::ENTRY_BYTES),
        }
    }

    /// The blocks a removal's first transaction tries to unmap (each step ends on a
    /// multiple of it): ctFS's whole 2 MiB, so that a leaf goes as one entry, never split
    /// into pages first; 64 for the others.
    pub fn removal_step(&self) -> u64 {
        match &self.index {
            Index::Ctfs(_) => 512,
            _ => 64,
        }
    }

    /// The end of the range [from, to) worth visiting for a removal: global tables visit
    /// block by block, so a huge sparse range is first narrowed by one table scan (under
    /// the commit lock: the extent-hash scan must not meet an insert's claims).
    pub fn removal_end(&self, ino: Ino, from: Lblk, to: Lblk) -> Result<Lblk> {
        if self.is_global() && to - from > 65_536 {
            let _g = self.commit.lock();
            return Ok(self.last_mapped_by_scan(ino, from, to)?.map_or(from, |l| l + 1));
        }
        Ok(to)
    }

    /// Gives back the nodes, extent-hash claims and ctFS partitions of a change that did
    /// not commit.
    fn give_back(&self, new_nodes: &[u64], exthash_inserted: bool, parts: &[Partition]) {
        let nodes: Vec<Run> = new_nodes.iter().map(|&p| Run { start: p, len: 1 }).collect();
        self.alloc.release(&nodes);
        if let (true, Index::ExtentHash(t)) = (exthash_inserted, &self.index) {
            t.abandon_claims();
        }
        self.release_partitions(parts);
    }

    fn release_partitions(&self, parts: &[Partition]) {
        if let (false, Index::Ctfs(c)) = (parts.is_empty(), &self.index) {
            let mut ps = c.parts.lock();
            parts.iter().for_each(|&p| ps.release(p));
        }
    }

    /// The extents of `ino` (first logical block, count), in walk order: its structure's
    /// walk, or one scan of a global table (under the commit lock, as
    /// [`removal_end`](Self::removal_end)'s).
    pub fn mapped_extents(&self, ino: Ino, raw: &InodeRaw) -> Result<Vec<(u64, u64)>> {
        let _g = self.is_global().then(|| self.commit.lock());
        let mut out = Vec::new();
        self.walk(ino, raw, &mut |m| {
            if let Mapped::Data { ino: i, ext } = m {
                if i == ino {
                    out.push((ext.lblk.0, ext.len));
                }
            }
        })?;
        Ok(out)
    }

    /// The last mapped logical block of `ino` in [from, to), found by a scan (global
    /// tables, for ranges too large to visit block by block).
    fn last_mapped_by_scan(&self, ino: Ino, from: Lblk, to: Lblk) -> Result<Option<Lblk>> {
        let mut last = None;
        let dummy: InodeRaw = bytemuck::Zeroable::zeroed();
        self.walk(ino, &dummy, &mut |m| {
            if let Mapped::Data { ino: i, ext } = m {
                if i == ino && ext.lblk < to && ext.lblk_end() > from {
                    let l = Lblk((ext.lblk_end().0 - 1).min(to.0 - 1));
                    last = Some(last.map_or(l, |x: Lblk| x.max(l)));
                }
            }
        })?;
        Ok(last)
    }
}

/// A file's extent-tree cursor word and the node-free generation now ([`Cursor`]).
struct TreeCursor<'c> {
    word: &'c Cursor,
    generation: u64,
}

/// An extent-tree lookup through `m`, with the file's cursor (used only when it was taken
/// in this generation of node frees).
fn tree_lookup<M: MemRead>(
    m: &M,
    geo: &Geometry,
    raw: &InodeRaw,
    cursor: TreeCursor<'_>,
    lblk: Lblk,
) -> Result<Option<Extent>> {
    let c = cursor.word.load(Ordering::Relaxed);
    let leaf_mask = (1u64 << CURSOR_LEAF_BITS) - 1;
    let current = c >> CURSOR_LEAF_BITS == cursor.generation;
    let mut cur = if current { (c & leaf_mask).checked_sub(1) } else { None };
    let r = extent_tree::lookup(m, geo, raw, lblk, &mut cur)?;
    let w = cur.filter(|&l| l < leaf_mask).map_or(0, |l| (l + 1) | cursor.generation << CURSOR_LEAF_BITS);
    if w != c {
        cursor.word.store(w, Ordering::Relaxed);
    }
    Ok(r)
}

/// What [`BlockMap::walk`] reports: a file's mapped extent, or a structure block (a tree
/// node) of a file.
#[derive(Clone, Copy, Debug)]
pub enum Mapped {
    Data { ino: Ino, ext: Extent },
    Node { ino: Ino, pblk: Pblk },
}

impl Mapped {
    /// The owner of structure blocks shared by every file ([`BlockMap::walk_shared`]).
    pub const SHARED: Ino = Ino(u32::MAX);

    fn data(ino: Ino, lblk: u64, pblk: u64, len: u64) -> Mapped {
        Mapped::Data { ino, ext: Extent { lblk: Lblk(lblk), pblk: Pblk(pblk), len } }
    }
}

/// An entry of a global table that fsck clears ([`BlockMap::stray_entries`]): the word
/// at `off` becomes `clear`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrayEntry {
    pub off: DevOffset,
    pub clear: u64,
    pub why: &'static str,
}

/// One change to a [`BlockMap`], staged, then added to a transaction by
/// [`finish`](Self::finish).
pub struct MapTx<'a, D: PmDevice> {
    map: &'a BlockMap<D>,
    st: Staged<'a, D>,
    _commit: MutexGuard<'a, ()>,
    _global: Option<RwLockWriteGuard<'a, ()>>,
    new_nodes: Vec<u64>,
    freed_nodes: Vec<u64>,
    freed_data: Vec<Run>,
    /// Claimed data blocks this change makes reachable.
    recorded: Vec<Run>,
    exthash_inserted: bool,
    /// A removal is staged: the extent hash's entries on the media no longer tell what the
    /// change leaves mapped (its removals are in the transaction, not yet applied).
    removed: bool,
    /// ctFS: partitions this change takes (given back if it does not commit) and leaves
    /// (given back once it has).
    parts_taken: Vec<Partition>,
    parts_left: Vec<Partition>,
    /// ctFS: what this change does to files' pages, for their live view, in order.
    moved: Vec<ViewChange>,
}

/// A change to files' pages that ctFS's live view follows once it has committed
/// (`mapping/ctfs/view.rs`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum ViewChange {
    /// Pages of the file in the partition removed from this page on: given back.
    Removed(Ino, Partition, u64),
    /// The file moved to a new partition: its mapped pages follow it.
    Moved(Ino, Partition, Partition),
    /// pswap: two ranges of pages (file, partition, first page) exchanged, `n` pages each.
    Exchanged((Ino, Partition, u64), (Ino, Partition, u64), u64),
}

impl<D: PmDevice> NodeAlloc for MapTx<'_, D> {
    fn alloc_node(&mut self, hint: Pblk) -> Result<Pblk> {
        let p = self.map.alloc.allocate_one(Some(Pblk(hint.0 + 1)))?.start;
        // A free block: zeroed in place (no undo needed: nothing points to it until the
        // transaction commits, and the commit's first fence orders this flush first).
        let off = self.map.geo.block_off(Pblk(p));
        self.map.dev.zero(off, BLOCK_BYTES);
        self.map.dev.flush(off, BLOCK_BYTES);
        self.new_nodes.push(p);
        Ok(Pblk(p))
    }
    fn free_node(&mut self, pblk: Pblk) {
        self.freed_nodes.push(pblk.0);
    }
    fn free_data(&mut self, e: Run) {
        self.freed_data.push(e);
    }
}

impl<'a, D: PmDevice> MapTx<'a, D> {
    /// Runs a tree change on the overlay, with this change as its node allocator.
    fn with_staged<R>(&mut self, f: impl FnOnce(&mut Staged<'a, D>, &mut dyn NodeAlloc) -> R) -> R {
        let mut st = std::mem::replace(&mut self.st, Staged::new(&*self.map.dev));
        let r = f(&mut st, self);
        self.st = st;
        r
    }

    /// Maps extent `x` of `ino` (claimed physical blocks over a hole of the file).
    pub fn insert(&mut self, tx: &mut Tx<'_, D>, ino: Ino, raw: &mut InodeRaw, x: Extent) -> Result<()> {
        let (lblk, pblk, len) = (x.lblk.0, x.pblk.0, x.len);
        let map = self.map;
        let geo = &map.geo;
        match &map.index {
            Index::ExtentTree | Index::ExtentTreeCached(_) => {
                let mut done = 0;
                while done < len {
                    let n = (len - done).min(extent_tree::MAX_EXTENT);
                    let x = Ext { lblk: lblk + done, pblk: pblk + done, len: n };
                    self.with_staged(|st, na| extent_tree::insert(st, geo, na, raw, x))?;
                    done += n;
                }
            }
            Index::Radix => {
                for i in 0..len {
                    self.with_staged(|st, na| radix::insert(st, geo, na, raw, lblk + i, pblk + i))?;
                }
            }
            Index::Cuckoo(t) => {
                for i in 0..len {
                    t.insert(
                        &mut self.st,
                        cuckoo::key(ino, Lblk(lblk + i)),
                        cuckoo::Val { pblk: pblk + i, run: 1, rev: 0 },
                    )?;
                }
                for (lo, hi) in cuckoo::Cuckoo::group_span(lblk.saturating_sub(1), lblk + len) {
                    t.relink(&mut self.st, ino, lo, hi);
                }
            }
            Index::ExtentHash(t) => {
                let (Ok(start), Ok(len32)) = (u32::try_from(lblk), u32::try_from(len)) else {
                    return Err(Error::FileTooBig);
                };
                if lblk + len > 1 << 32 {
                    return Err(Error::FileTooBig);
                }
                self.exthash_inserted = true;
                // Merge on append: an extent that continues the previous one replaces it
                // (not after a removal in this change, which the lookup would not see).
                let mut e = extent_hash::Extent { start, len: len32, phys: pblk };
                if let Some(prev) = start.checked_sub(1).filter(|_| !self.removed) {
                    if let (Some(p), _) = t.lookup(ino, prev) {
                        if p.start as u64 + p.len as u64 == lblk
                            && p.phys + p.len as u64 == pblk
                            && p.len as u64 + len < 1 << 31
                        {
                            t.remove(tx, ino, p);
                            e = extent_hash::Extent { start: p.start, len: p.len + len32, phys: p.phys };
                        }
                    }
                }
                t.insert(tx, ino, e)?;
            }
            Index::Ctfs(c) => {
                let part = match Partition::from_word(raw.ctfs_partition())? {
                    Some(p) if p.pages() >= lblk + len => p,
                    old => {
                        let level = Partition::level_for(lblk + len).ok_or(Error::FileTooBig)?;
                        self.move_partition(c, ino, raw, old, level)?
                    }
                };
                self.with_staged(|st, na| ctfs::ppt::map(st, geo, na, part.base + lblk, pblk, len))?;
            }
        }
        self.recorded.push(Run { start: pblk, len });
        Ok(())
    }

    /// Unmaps logical blocks [from, to) of `ino`; returns the data blocks freed. At most
    /// one removal per change: the extent hash's removals are not seen by its own lookups
    /// until the transaction commits. `last`: the last step of a removal to the end of the
    /// file, so that it maps nothing from `from` on afterwards: ctFS then moves it to a
    /// smaller partition, or gives its partition up when `from` is 0 (the earlier steps,
    /// and removals inside the file, leave the partition as it is).
    pub fn remove(
        &mut self,
        tx: &mut Tx<'_, D>,
        ino: Ino,
        raw: &mut InodeRaw,
        from: Lblk,
        to: Lblk,
        last: bool,
    ) -> Result<u64> {
        debug_assert!(!self.removed, "one removal per change");
        self.removed = true;
        let (from, mut to) = (from.0, to.0);
        let map = self.map;
        let geo = &map.geo;
        let before: u64 = self.freed_data.iter().map(|e| e.len).sum();
        match &map.index {
            Index::ExtentTree | Index::ExtentTreeCached(_) => {
                self.with_staged(|st, na| extent_tree::remove(st, geo, na, raw, from, to))?
            }
            Index::Radix => self.with_staged(|st, na| radix::remove(st, geo, na, raw, from, to))?,
            Index::Cuckoo(t) => {
                to = to.min(1 << 32);
                for l in from..to {
                    if let Some(p) = t.remove(&mut self.st, cuckoo::key(ino, Lblk(l))) {
                        self.free_data(Run { start: p, len: 1 });
                    }
                }
                if from < to {
                    for (lo, hi) in cuckoo::Cuckoo::group_span(from.saturating_sub(1), from + 1) {
                        t.relink(&mut self.st, ino, lo, hi);
                    }
                    for (lo, hi) in cuckoo::Cuckoo::group_span(to.saturating_sub(1), to + 1) {
                        t.relink(&mut self.st, ino, lo, hi);
                    }
                }
            }
            Index::ExtentHash(t) => {
                to = to.min(1 << 32);
                let mut c = from;
                while let Some(c32) = u32::try_from(c).ok().filter(|_| c < to) {
                    let (found, _) = t.lookup(ino, c32);
                    let Some(e) = found else {
                        c += 1;
                        continue;
                    };
                    let (s, end) = (e.start as u64, e.start as u64 + e.len as u64);
                    t.remove(tx, ino, e);
                    let (a, b) = (s.max(from), end.min(to));
                    self.free_data(Run { start: e.phys + (a - s), len: b - a });
                    if s < from {
                        t.insert(
                            tx,
                            ino,
                            extent_hash::Extent { start: e.start, len: (from - s) as u32, phys: e.phys },
                        )?;
                        self.exthash_inserted = true;
                    }
                    if end > to {
                        let phys = e.phys + (to - s);
                        // The tail: an offset and a length inside `e` (both below its u32 length).
                        let start = e.start + (to - s) as u32;
                        t.insert(tx, ino, extent_hash::Extent { start, len: (end - to) as u32, phys })?;
                        self.exthash_inserted = true;
                    }
                    c = end;
                }
            }
            Index::Ctfs(c) => {
                let Some(p) = Partition::from_word(raw.ctfs_partition())? else { return Ok(0) };
                self.moved.push(ViewChange::Removed(ino, p, from));
                if from < p.pages() {
                    self.with_staged(|st, na| {
                        ctfs::ppt::unmap(st, geo, na, p.base + from, p.base + to.min(p.pages()))
                    })?;
                }
                if last && from < p.pages() {
                    // Nothing is left at or past `from`: a partition two levels smaller (or
                    // more) holds the file, or none when it maps nothing. One level smaller
                    // is not worth a move: a file that shrinks and grows again across a
                    // level's boundary (a log truncated and appended to) would move at
                    // every turn.
                    let level = if from == 0 { None } else { Partition::level_for(from) };
                    if level.is_none_or(|l| l + 1 < p.level) {
                        self.leave_partition(c, ino, raw, p, level)?;
                    }
                }
            }
        }
        let after: u64 = self.freed_data.iter().map(|e| e.len).sum();
        Ok(after - before)
    }

    /// Journal entries this change needs so far (to keep transactions within a journal).
    pub fn undo_entries(&self) -> u64 {
        self.st.undo_entries() + (self.recorded.len() + self.freed_data.len() + self.new_nodes.len()) as u64 * 2
    }

    /// Stages the bitmap words and adds every change to `tx`. Keep the result until `tx`
    /// has committed, then call [`Finished::done`].
    pub fn finish(mut self, tx: &mut Tx<'_, D>) -> Finished<'a, D> {
        let bitmap = self.map.geo.bitmap_off();
        let new_nodes = self.new_nodes.iter().map(|&p| Run { start: p, len: 1 });
        for e in self.recorded.iter().copied().chain(new_nodes) {
            for b in e.start..e.start + e.len {
                let o = bitmap + (b / 64) * 8;
                let w = self.st.load_u64(o);
                self.st.store_u64(o, w | 1u64 << (b % 64));
            }
        }
        // Only blocks whose bit this change clears go back to the allocator: on a damaged
        // image a file can map a block the bitmap counts free (or map one block twice), and
        // giving it back twice would put it in the free-run index twice (fsck reports the
        // image; the allocator's index stays the bitmap's).
        let mut freed: Vec<Run> = Vec::with_capacity(self.freed_data.len() + self.freed_nodes.len());
        let nodes = self.freed_nodes.iter().map(|&p| Run { start: p, len: 1 });
        for e in self.freed_data.iter().copied().chain(nodes) {
            for b in e.start..e.start + e.len {
                let o = bitmap + (b / 64) * 8;
                let w = self.st.load_u64(o);
                let bit = 1u64 << (b % 64);
                if w & bit == 0 {
                    continue;
                }
                self.st.store_u64(o, w & !bit);
                match freed.last_mut() {
                    Some(r) if r.end() == b => r.len += 1,
                    _ => freed.push(Run { start: b, len: 1 }),
                }
            }
        }
        let mut dirty: Vec<u64> = self.st.dirty_pages().collect();
        dirty.extend(self.freed_nodes.iter().map(|&p| self.map.geo.block_off(Pblk(p)).0));
        self.st.into_tx(tx);
        Finished {
            map: self.map,
            _commit: self._commit,
            _global: self._global,
            new_nodes: self.new_nodes,
            nodes_freed: !self.freed_nodes.is_empty(),
            freed,
            dirty,
            exthash_inserted: self.exthash_inserted,
            parts_taken: self.parts_taken,
            parts_left: self.parts_left,
            moved: self.moved,
        }
    }

    /// [`finish`](Self::finish), with [`Finished::done`] run when `tx` commits or fails.
    pub fn finish_with(self, tx: &mut Tx<'a, D>) {
        let fin = self.finish(tx);
        tx.after_commit(move |outcome| fin.done(outcome));
    }

    /// Drops a change that will not be committed (gives back the nodes it took).
    pub fn abort(self) {
        self.map.give_back(&self.new_nodes, self.exthash_inserted, &self.parts_taken);
    }
}

/// A change whose writes are in a transaction.
pub struct Finished<'a, D: PmDevice> {
    map: &'a BlockMap<D>,
    _commit: MutexGuard<'a, ()>,
    _global: Option<RwLockWriteGuard<'a, ()>>,
    new_nodes: Vec<u64>,
    freed: Vec<Run>,
    /// Whether `freed` holds structure nodes.
    nodes_freed: bool,
    dirty: Vec<u64>,
    exthash_inserted: bool,
    parts_taken: Vec<Partition>,
    parts_left: Vec<Partition>,
    moved: Vec<ViewChange>,
}

impl<D: PmDevice> Finished<'_, D> {
    /// After the commit or its failure: freed blocks become allocatable only once their
    /// release is durable.
    pub fn done(self, outcome: Outcome) {
        let committed = outcome == Outcome::Committed;
        if let Index::ExtentTreeCached(cache) = &self.map.index {
            cache.invalidate(&self.dirty);
        }
        if let Some(v) = self.map.ctfs_view() {
            // Before any block can be reused; harmless when nothing committed.
            for &c in &self.moved {
                match c {
                    ViewChange::Removed(ino, p, from) => v.forget(ino, p, from),
                    ViewChange::Moved(ino, old, new) if committed => v.moved(ino, old, new),
                    ViewChange::Moved(ino, old, _) => v.forget(ino, old, 0),
                    ViewChange::Exchanged(a, b, n) if committed => v.exchanged(a, b, n),
                    ViewChange::Exchanged((a, pa, la), (b, pb, lb), _) => {
                        v.forget(a, pa, la);
                        v.forget(b, pb, lb);
                    }
                }
            }
        }
        if committed {
            if self.nodes_freed {
                // Before the nodes can be reused: every cursor taken so far is stale.
                self.map.node_frees.fetch_add(1, Ordering::AcqRel);
            }
            self.map.alloc.release(&self.freed);
            self.map.release_partitions(&self.parts_left);
        } else {
            self.map.give_back(&self.new_nodes, self.exthash_inserted, &self.parts_taken);
        }
    }
}

/// The mapping of an image.
pub enum FileMap<D: PmDevice> {
    Hash(hashfs::HashTable<D>),
    Blocks(Box<BlockMap<D>>),
}

impl<D: PmDevice> FileMap<D> {
    pub fn kind(&self) -> MappingKind {
        match self {
            FileMap::Hash(_) => MappingKind::HashFs,
            FileMap::Blocks(b) => b.kind,
        }
    }

    /// ctFS's live translation, on an image that has one.
    #[inline]
    pub fn ctfs_view(&self) -> Option<&ctfs::view::View> {
        match self {
            FileMap::Blocks(b) => b.ctfs_view(),
            FileMap::Hash(_) => None,
        }
    }
}
