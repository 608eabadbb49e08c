//! In-DRAM inode state: the cache of inode cells, the inode allocator, and reading and
//! writing inodes through transactions.

#![forbid(unsafe_code)]

use crate::fs::dir::DirIndex;
use crate::int_hash::IntHash;
use crate::layout::inode::{InodeRaw, InodeState as MediaState};
use crate::layout::{Geometry, Ino};
use crate::mapping::tcache::TranslationCache;
use crate::pm::PmDevice;
use crate::share::InodeBits;
use crate::{Error, Result};
use bytemuck::Zeroable;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// An inode in use: its DRAM copy of the media inode (kept equal to the media after every
/// committed transaction), its directory index and its translation cache.
pub struct InodeCell {
    pub ino: Ino,
    pub state: RwLock<InodeMem>,
    pub tcache: TranslationCache,
    /// Tree mappings: the DRAM cursor of the last lookup (see `mapping::Cursor`).
    pub cursor: crate::mapping::Cursor,
    /// Open file handles.
    pub open_count: AtomicU32,
    /// Live memory mappings ([`crate::File::map`]): while any exists, the file may not
    /// shrink nor have holes punched (a mapping would be left on freed blocks).
    pub map_count: AtomicU32,
    /// The holes of this file's live library mappings (`fs/map.rs`): blocks a write or
    /// another mapping gives the file are mapped into each of them.
    pub views: Mutex<Vec<std::sync::Weak<super::map::MapView>>>,
    /// Logical block after the last one read, for sequential-access detection.
    pub next_read_lblk: AtomicU64,
}

pub struct InodeMem {
    pub raw: InodeRaw,
    pub dir: Option<DirIndex>,
    /// Set once the inode has been freed; a stale handle sees NotFound.
    pub freed: bool,
    /// The DRAM times are newer than the media's: a write set them (`fs/times.rs`).
    pub times_pending: bool,
    /// The times were read (a stat) since a write last set them: the next write takes
    /// the fine clock ([`write_time_ns`]). Atomic because readers hold the shared lock.
    pub times_seen: AtomicBool,
    /// The media checksum is known to leave size and block count out (format 4), so they
    /// may be stored in place (`fs/append.rs`); checked once, and every transaction seals
    /// the inode so.
    pub sum_without_size: bool,
    /// The parity of the tagged size this mount's last one-fence append stored, while the
    /// media holds it tagged (`fs/hashfs/append_tag.rs`); None once the size is plain.
    pub tag: Option<bool>,
}

impl InodeMem {
    /// NotFound once the inode is freed (a caller that looked it up by number).
    pub fn live(&self) -> crate::Result<()> {
        if self.freed {
            return Err(crate::Error::NotFound);
        }
        Ok(())
    }

    /// Notes that the times were read (see `times_seen`); a plain load, and a store only
    /// when it changes.
    pub fn times_read(&self) {
        if !self.times_seen.load(Ordering::Relaxed) {
            self.times_seen.store(true, Ordering::Relaxed);
        }
    }

    /// NotFound for a freed inode, NotDir for anything but a directory.
    pub fn check_dir(&self) -> Result<()> {
        if self.freed {
            return Err(Error::NotFound);
        }
        if !self.raw.is_dir() {
            return Err(Error::NotDir);
        }
        Ok(())
    }
}

const SHARDS: usize = 64;

/// Inode cells by number, sharded to keep lock traffic apart.
pub struct InodeCache {
    shards: Vec<Mutex<HashMap<u32, Arc<InodeCell>, IntHash>>>,
}

impl Default for InodeCache {
    fn default() -> Self {
        InodeCache { shards: (0..SHARDS).map(|_| Mutex::new(HashMap::default())).collect() }
    }
}

impl InodeCache {
    fn shard(&self, ino: Ino) -> &Mutex<HashMap<u32, Arc<InodeCell>, IntHash>> {
        &self.shards[ino.0 as usize % SHARDS]
    }

    /// The cell of `ino`, loading and checking the inode from the media if needed. A
    /// size another participant of a shared mount left tagged by a one-fence append is
    /// read as its plain value, and the cell keeps the tag (counted in `tagged`), so that
    /// this participant too makes it plain before it changes those bytes in place.
    pub fn get<D: PmDevice>(&self, dev: &D, geo: &Geometry, ino: Ino, tagged: &AtomicU64) -> Result<Arc<InodeCell>> {
        if ino.0 == 0 || ino.get() > geo.inode_count {
            return Err(Error::corrupt(format!("inode number {ino} out of range")));
        }
        let mut map = self.shard(ino).lock();
        if let Some(c) = map.get(&ino.0) {
            return Ok(c.clone());
        }
        let mut raw = read_raw(dev, geo, ino);
        let tag = crate::fs::hashfs::append_tag::read_plain(&mut raw);
        match raw.check(ino) {
            MediaState::Allocated => {}
            MediaState::Free => return Err(Error::Stale(ino.0)),
            MediaState::Corrupt(why) => return Err(Error::corrupt(format!("inode {ino}: {why}"))),
        }
        let cell = Arc::new(InodeCell::new(ino, raw));
        if tag.is_some() {
            cell.state.write().tag = tag;
            tagged.fetch_add(1, Ordering::Relaxed);
        }
        map.insert(ino.0, cell.clone());
        Ok(cell)
    }

    /// Registers a cell for a newly created inode.
    pub fn insert(&self, cell: Arc<InodeCell>) {
        self.shard(cell.ino).lock().insert(cell.ino.0, cell);
    }

    /// The cell of `ino` if this mount has it cached.
    pub fn cached(&self, ino: Ino) -> Option<Arc<InodeCell>> {
        self.shard(ino).lock().get(&ino.0).cloned()
    }

    pub fn remove(&self, ino: Ino) {
        self.shard(ino).lock().remove(&ino.0);
    }

    /// Every cell, collected without holding a shard's lock while the caller uses them.
    pub fn cells(&self) -> Vec<Arc<InodeCell>> {
        self.shards.iter().flat_map(|s| s.lock().values().cloned().collect::<Vec<_>>()).collect()
    }

    /// Number of cells with open handles.
    pub fn open_files(&self) -> usize {
        self.shards.iter().map(|s| s.lock().values().filter(|c| c.open_count.load(Ordering::Relaxed) > 0).count()).sum()
    }
}

impl InodeCell {
    pub fn new(ino: Ino, raw: InodeRaw) -> InodeCell {
        InodeCell {
            ino,
            state: RwLock::new(InodeMem {
                raw,
                dir: None,
                freed: false,
                times_pending: false,
                times_seen: AtomicBool::new(false),
                sum_without_size: false,
                tag: None,
            }),
            tcache: TranslationCache::default(),
            cursor: Default::default(),
            open_count: AtomicU32::new(0),
            map_count: AtomicU32::new(0),
            views: Mutex::new(Vec::new()),
            next_read_lblk: AtomicU64::new(u64::MAX),
        }
    }
}

pub fn read_raw<D: PmDevice>(dev: &D, geo: &Geometry, ino: Ino) -> InodeRaw {
    let mut raw = InodeRaw::zeroed();
    dev.read(geo.inode_off(ino), bytemuck::bytes_of_mut(&mut raw));
    raw
}

/// Every inode of the table in order, read a batch at a time (one device read per 256
/// inodes, rather than one per inode: a mount's scan and the last leaver's look for orphans
/// read them all). `f` gets each inode's number and its bytes as read; it may read or change
/// that inode on the device (the batch is a copy). Inodes whose bytes are all zero (free,
/// as `InodeRaw::check` has them) are passed over: most of a table is, and no caller has
/// anything to do for one (a batch of them costs one pass of wide ORs over its copy; looking
/// in place instead, without the copy, measured no faster: reading the table is the cost).
pub fn for_each_raw<D: PmDevice>(dev: &D, geo: &Geometry, f: impl FnMut(Ino, &mut InodeRaw)) {
    for_each_raw_in(dev, geo, None, f)
}

/// [`for_each_raw`], over the inodes whose bits `in_use` sets (bit `i - 1` of its words
/// for inode `i`, as an inode bitmap's) if given: 64 inodes a device read for a word with
/// any bit set, none for a word of zeros.
pub fn for_each_raw_in<D: PmDevice>(
    dev: &D,
    geo: &Geometry,
    in_use: Option<&[AtomicU64]>,
    mut f: impl FnMut(Ino, &mut InodeRaw),
) {
    let Some(words) = in_use else { return every_raw(dev, geo, f) };
    let mut buf = [InodeRaw::zeroed(); 64];
    for (w, word) in words.iter().enumerate() {
        let bits = word.load(Ordering::Acquire);
        let first = w as u64 * 64 + 1;
        if bits == 0 || first > geo.inode_count {
            continue;
        }
        let n = 64.min(geo.inode_count - first + 1) as usize;
        dev.read(geo.inode_off(Ino(first as u32)), bytemuck::cast_slice_mut(&mut buf[..n]));
        visit(&mut buf[..n], first, |k| bits & (1 << k) != 0, &mut f);
    }
}

/// `f` for each inode of `batch` (inode `first` on) that `wanted` (by its index in the
/// batch) and is not all zeros.
fn visit(batch: &mut [InodeRaw], first: u64, wanted: impl Fn(usize) -> bool, f: &mut impl FnMut(Ino, &mut InodeRaw)) {
    for (k, raw) in batch.iter_mut().enumerate() {
        if wanted(k) && !crate::pm::all_zero(bytemuck::cast_slice(std::slice::from_ref(raw))) {
            f(Ino((first + k as u64) as u32), raw);
        }
    }
}

/// Every inode of the table that is not all zeros (a free one), 256 a device read.
fn every_raw<D: PmDevice>(dev: &D, geo: &Geometry, mut f: impl FnMut(Ino, &mut InodeRaw)) {
    const BATCH: u64 = 256;
    let mut buf = vec![InodeRaw::zeroed(); BATCH as usize];
    let mut first = 1;
    while first <= geo.inode_count {
        let n = BATCH.min(geo.inode_count - first + 1) as usize;
        dev.read(geo.inode_off(Ino(first as u32)), bytemuck::cast_slice_mut(&mut buf[..n]));
        if !crate::pm::all_zero(bytemuck::cast_slice(&buf[..n])) {
            visit(&mut buf[..n], first, |_| true, &mut f);
        }
        first += n as u64;
    }
}

/// A new inode's contents: `mode`, owner, a generation and every time set to `now`; no
/// links, size or blocks yet.
pub fn fresh_raw(mode: u32, uid: u32, gid: u32, now: i64) -> InodeRaw {
    let mut raw = InodeRaw::zeroed();
    raw.mode = mode;
    raw.uid = uid;
    raw.gid = gid;
    raw.generation = (now as u32) | 1;
    raw.atime_ns = now;
    raw.mtime_ns = now;
    raw.ctime_ns = now;
    raw.btime_ns = now;
    raw
}

/// Adds the inode's new contents to a transaction (sealing the checksum first).
pub fn tx_write_inode<D: PmDevice>(tx: &mut crate::journal::Tx<'_, D>, geo: &Geometry, ino: Ino, raw: &mut InodeRaw) {
    raw.seal(ino);
    tx.write(geo.inode_off(ino), bytemuck::bytes_of(raw));
}

/// Adds the freeing of an inode (all bytes zero) to a transaction.
pub fn tx_free_inode<D: PmDevice>(tx: &mut crate::journal::Tx<'_, D>, geo: &Geometry, ino: Ino) {
    tx.write(geo.inode_off(ino), &[0u8; crate::layout::INODE_BYTES]);
}

/// Free-inode bitmap, rebuilt at mount from the inode table: in DRAM, or on a mount
/// shared by many processes in the image's region, where every participant allocates from
/// one set of bits (`share::InodeBits`; the `_in` methods, which `FsInner::inode_bits`
/// points at the right one).
pub struct InodeAllocator {
    words: Vec<AtomicU64>,
    count: u64,
    cursor: AtomicU64,
    used: AtomicU64,
}

impl InodeAllocator {
    pub fn new(count: u64) -> InodeAllocator {
        InodeAllocator {
            words: (0..count.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            count,
            cursor: AtomicU64::new(0),
            used: AtomicU64::new(0),
        }
    }

    /// An allocator of `count` inodes with no bits of its own (a participant of a shared
    /// mount allocates from the region's): its own allocate nothing.
    pub fn without_bits(count: u64) -> InodeAllocator {
        InodeAllocator { words: Vec::new(), count, cursor: AtomicU64::new(0), used: AtomicU64::new(0) }
    }

    /// Its own bits, in DRAM.
    pub fn own(&self) -> InodeBits<'_> {
        InodeBits { words: &self.words, used: &self.used }
    }

    /// Marks `ino` in use (mount-time scan).
    pub fn mark_used(&self, ino: Ino) {
        let i = ino.get() - 1;
        let prev = self.words[(i / 64) as usize].fetch_or(1 << (i % 64), Ordering::Relaxed);
        if prev & (1 << (i % 64)) == 0 {
            self.used.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Clears `ino`'s bit if it is set: the media says the inode is free (a read-only
    /// participant's refresh, `fs/shared/mod.rs`, where another process may have freed it).
    pub fn mark_free(&self, ino: Ino) {
        let i = ino.get() - 1;
        let bit = 1u64 << (i % 64);
        if self.words[(i / 64) as usize].fetch_and(!bit, Ordering::AcqRel) & bit != 0 {
            self.used.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Takes a free inode of `bits` (this allocator's own or a region's, of as many
    /// inodes), looking from where this allocator last found one.
    /// `naming` is called with the inode before its bit is taken (a shared mount names it
    /// in its call's record: `fs/shared/takeover.rs`).
    pub fn alloc_in(&self, bits: InodeBits<'_>, naming: impl Fn(Ino)) -> Result<Ino> {
        let nwords = bits.words.len() as u64;
        if nwords == 0 {
            return Err(Error::NoSpace);
        }
        let start = self.cursor.load(Ordering::Relaxed) % nwords;
        for k in 0..nwords {
            let w = (start + k) % nwords;
            let word = &bits.words[w as usize];
            let mut cur = word.load(Ordering::Relaxed);
            loop {
                let free = !cur;
                if free == 0 {
                    break;
                }
                let bit = free.trailing_zeros() as u64;
                let i = w * 64 + bit;
                if i >= self.count {
                    break;
                }
                naming(Ino(i as u32 + 1));
                match word.compare_exchange_weak(cur, cur | (1 << bit), Ordering::AcqRel, Ordering::Relaxed) {
                    Ok(_) => {
                        self.cursor.store(w, Ordering::Relaxed);
                        bits.used.fetch_add(1, Ordering::Relaxed);
                        return Ok(Ino(i as u32 + 1));
                    }
                    Err(now) => cur = now,
                }
            }
        }
        Err(Error::NoSpace)
    }

    /// Gives `ino` back to `bits`; nothing on a bitmap of no words (the allocator of a
    /// mount that keeps none: a scoped takeover's, which sets the region's bits from the
    /// inode table, `fs/shared/takeover.rs`).
    pub fn free_in(&self, bits: InodeBits<'_>, ino: Ino) {
        if bits.words.is_empty() {
            return;
        }
        let i = ino.get() - 1;
        let prev = bits.words[(i / 64) as usize].fetch_and(!(1 << (i % 64)), Ordering::AcqRel);
        debug_assert!(prev & (1 << (i % 64)) != 0, "double free of inode {ino}");
        bits.used.fetch_sub(1, Ordering::Relaxed);
    }

    /// Copies this allocator's bits over `bits` (of as many inodes): what a shared mount's
    /// recovery found, for every participant to allocate from (under the image lock).
    pub fn publish_to(&self, bits: InodeBits<'_>) {
        debug_assert_eq!(bits.words.len(), self.words.len(), "bitmaps of one image");
        for (to, from) in bits.words.iter().zip(&self.words) {
            to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        bits.used.store(self.used.load(Ordering::Relaxed), Ordering::Release);
    }
}

/// The latest fine-grained time handed out (ns since the epoch); a write's coarse time is
/// never earlier ([`write_time_ns`]).
static TIME_FLOOR: AtomicI64 = AtomicI64::new(0);

/// The wall clock, fine-grained (a change's time for everything but a write's).
pub fn now_ns() -> i64 {
    let t =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0);
    if t > TIME_FLOOR.load(Ordering::Relaxed) {
        TIME_FLOOR.fetch_max(t, Ordering::Relaxed);
    }
    t
}

/// A write's modification and change time, as Linux's multigrain timestamps (6.13+, the
/// kernel's tmpfs, ext4 and XFS): the clock at its last tick unless the file's times were
/// read since they last changed (`seen`: a stat), then the fine clock, so that a stat
/// always sees a later write's change. Never earlier than a fine time handed out before
/// (a global floor), so that files' times keep the order of the changes as they were
/// observed. The fine clock's read, right after a write's fences, cost a 4 KiB append
/// about 200 ns (docs/design.md).
pub fn write_time_ns(seen: bool) -> i64 {
    if seen {
        return now_ns();
    }
    crate::pm::cpu::coarse_realtime_ns().max(TIME_FLOOR.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocator_hands_out_each_inode_once() {
        let a = InodeAllocator::new(130);
        a.mark_used(Ino(1));
        let mut seen = std::collections::HashSet::new();
        while let Ok(i) = a.alloc_in(a.own(), |_| {}) {
            assert!(i.0 >= 2 && i.0 <= 130);
            assert!(seen.insert(i));
        }
        assert_eq!(seen.len(), 129);
        a.free_in(a.own(), Ino(77));
        assert_eq!(a.alloc_in(a.own(), |_| {}).unwrap(), Ino(77));
    }

    /// A participant of a shared mount allocates from bits it does not own (the region's),
    /// as many as the image has inodes; its own, none, allocate nothing; a recovery's
    /// bits and count are copied over the shared ones whole.
    #[test]
    fn an_allocator_without_bits_allocates_from_anothers() {
        let scanned = InodeAllocator::new(70);
        for i in [1, 2, 65] {
            scanned.mark_used(Ino(i));
        }
        let words: Vec<AtomicU64> = (0..2).map(|_| AtomicU64::new(u64::MAX)).collect();
        let used = AtomicU64::new(99);
        let shared = || InodeBits { words: &words, used: &used };
        scanned.publish_to(shared());
        assert_eq!(used.load(Ordering::Relaxed), 3);
        let joiner = InodeAllocator::without_bits(70);
        assert!(matches!(joiner.alloc_in(joiner.own(), |_| {}), Err(Error::NoSpace)));
        let mut got = Vec::new();
        while let Ok(i) = joiner.alloc_in(shared(), |_| {}) {
            got.push(i.0);
        }
        let expected: Vec<u32> = (3..=70).filter(|&i| i != 65).collect();
        assert_eq!(got, expected, "each free inode of the shared bits once, none past the count");
        assert_eq!(used.load(Ordering::Relaxed), 70);
        joiner.free_in(shared(), Ino(40));
        assert_eq!(scanned.alloc_in(shared(), |_| {}).unwrap(), Ino(40), "freed by one, taken by another");
    }
}
