//! ctFS's live translation (§3.2): the process's own page table, built from the PPT by
//! mapping the image's pages into one reserved virtual range (`pm::vspace`) at the places
//! the PPT gives them, so that a read or an in-place write of a file is one copy at
//! `base + partition + offset` and the MMU does the rest.
//!
//! The range is filled on demand, file by file: a file's pages are mapped from its start
//! up to its first hole, as far as a request needs and at least doubling what was there
//! (rounded to 2 MiB), one `mmap` per run of consecutive blocks (a 2 MiB leaf of the PPT is
//! one run on an aligned image offset, so the kernel maps it with one 2 MiB page where the
//! image has them). Per inode a word says how many leading pages are mapped; a request
//! beyond them, or over a hole, takes the software walk (`ppt::lookup`).
//!
//! A change that removes a file's pages (truncation, hole punching, an untorn write's
//! copy-on-write) gives the file's mapped range back before its blocks can be reused
//! ([`View::forget`], run when the change's transaction has committed, under the file's
//! lock, before the blocks are released). A partition move and a pswap move the live
//! mappings with the page-table entries instead ([`View::moved`], [`View::exchanged`]:
//! `mremap`, no page faulted again), falling back to the give-back. Appends leave the view
//! as it is: new pages lie past the mapped prefix. Mappings are counted in the process's
//! ledger of HashFS's kernel mappings, shared with the preload shim (half of
//! `vm.max_map_count` in all, `pm::vspace::map_budget`); past that, requests take the
//! software walk until files or the shim give theirs back.
//!
//! Only the process that mounted the image sees its view (a remap changes only the calling
//! process's page table, and one process owns an image); the FUSE daemon serves other
//! processes through the same path.

use super::partition::Partition;
use super::Ctfs;
use crate::layout::mapping::ctfs::SPACE_PAGES;
use crate::layout::{Geometry, Ino, InodeRaw, Lblk, BLOCK_BYTES};
use crate::mapping::staged::MemRead;
use crate::pm::vspace::{map_budget, maps_fit, maps_given, maps_taken, VirtualSpace};
use crate::{Error, Result};
use parking_lot::Mutex;
use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Pages a fill maps at least (2 MiB: one leaf).
const FILL_MIN: u64 = 512;

/// A file as a request through the view sees it (its inode under the caller's lock).
pub struct FileRef<'a, M: MemRead> {
    pub m: &'a M,
    pub geo: &'a Geometry,
    pub ino: Ino,
    pub raw: &'a InodeRaw,
    /// The file's size in blocks (a fill maps no further).
    pub size_blocks: u64,
}

/// The mapped virtual space of one mounted image.
pub struct View {
    vs: VirtualSpace,
    data_off: u64,
    /// Per inode: leading pages of the file mapped in the space.
    pages: Vec<AtomicU64>,
    /// Per inode: `mmap` calls its mapped pages took.
    maps: Vec<AtomicU64>,
    /// Serializes fills and give-backs; holds the mappings counted.
    fill: Mutex<u64>,
    budget: u64,
    /// The count reached the budget: requests past the mapped prefixes walk, without
    /// taking the fill lock, until a give-back lowers it.
    full: AtomicBool,
}

/// Kernel mappings the view may hold: what HashFS's parts may hold together in the process
/// ([`map_budget`], which they share: the view also maps only while the shared count leaves
/// room), or `HASHFS_CTFS_VIEW_BUDGET` (tests: a budget a small image reaches).
fn budget() -> u64 {
    let env = std::env::var("HASHFS_CTFS_VIEW_BUDGET").ok().and_then(|v| v.parse().ok());
    env.unwrap_or_else(map_budget)
}

impl Drop for View {
    fn drop(&mut self) {
        // The space is unmapped with it (`VirtualSpace`'s drop).
        maps_given(*self.fill.get_mut());
    }
}

impl View {
    /// Reserves the virtual space for the image open as `fd`.
    pub fn new(fd: RawFd, geo: &Geometry) -> std::io::Result<View> {
        let vs = VirtualSpace::reserve(fd, (SPACE_PAGES * BLOCK_BYTES) as usize)?;
        let n = geo.inode_count as usize + 1;
        Ok(View {
            vs,
            data_off: geo.data_off,
            pages: (0..n).map(|_| AtomicU64::new(0)).collect(),
            maps: (0..n).map(|_| AtomicU64::new(0)).collect(),
            fill: Mutex::new(0),
            budget: budget(),
            full: AtomicBool::new(false),
        })
    }

    /// The file's partition if its pages [0, `need`) are mapped (mapping them if they can
    /// be); `size_blocks` bounds a fill.
    fn ensure<M: MemRead>(
        &self,
        m: &M,
        geo: &Geometry,
        ino: Ino,
        raw: &InodeRaw,
        need: u64,
        size_blocks: u64,
    ) -> Result<Option<Partition>> {
        let Some(p) = Partition::from_word(raw.ctfs_partition())? else { return Ok(None) };
        let slot = self.pages.get(ino.0 as usize).ok_or(Error::Invalid("inode number past the table"))?;
        if slot.load(Ordering::Acquire) >= need {
            return Ok(Some(p));
        }
        if self.full.load(Ordering::Relaxed) || !maps_fit(1) {
            return Ok(None);
        }
        let mut counted = self.fill.lock();
        let have = slot.load(Ordering::Acquire);
        if have >= need {
            return Ok(Some(p));
        }
        let target = need.max(have * 2).next_multiple_of(FILL_MIN).min(size_blocks).min(p.pages());
        let mut l = have;
        let mut run: Option<(u64, u64, u64)> = None; // (first page, first block, pages)
        let mut calls = 0u64;
        // The run still open when the loop stops is mapped after it: one call kept for it.
        while l < target && *counted + calls + 1 < self.budget && maps_fit(calls + 2) {
            let Some(e) = Ctfs::lookup(m, geo, raw, Lblk(l))? else { break };
            let n = e.len.min(target - l);
            match &mut run {
                Some((rl, rp, rn)) if *rl + *rn == l && *rp + *rn == e.pblk.0 => *rn += n,
                _ => {
                    if let Some(r) = run.replace((l, e.pblk.0, n)) {
                        self.map_run(p, r)?;
                        calls += 1;
                    }
                }
            }
            l += n;
        }
        if let Some(r) = run {
            self.map_run(p, r)?;
            calls += 1;
        }
        *counted += calls;
        maps_taken(calls);
        self.full.store(*counted >= self.budget, Ordering::Relaxed);
        self.maps[ino.0 as usize].fetch_add(calls, Ordering::Relaxed);
        slot.store(l, Ordering::Release);
        Ok((l >= need).then_some(p))
    }

    fn map_run(&self, p: Partition, (l, pblk, n): (u64, u64, u64)) -> Result<()> {
        let at = (p.base + l) * BLOCK_BYTES;
        self.vs.map(at, self.data_off + pblk * BLOCK_BYTES, n * BLOCK_BYTES).map_err(Error::Io)
    }

    /// Where bytes [off, off + len) of the file lie in the space, if its pages there are
    /// mapped (mapping them if they can be). Counted as translation by the probe: the
    /// check (and a fill), not the copy that follows.
    fn locate<M: MemRead>(&self, f: &FileRef<'_, M>, off: u64, len: u64) -> Result<Option<u64>> {
        let _span = crate::probe::translate();
        let need = (off + len).div_ceil(BLOCK_BYTES);
        let found = self.ensure(f.m, f.geo, f.ino, f.raw, need, f.size_blocks)?;
        Ok(found.map(|p| p.base * BLOCK_BYTES + off))
    }

    /// Reads `buf.len()` bytes of the file from `off` through the view; false when the
    /// range is not mapped and cannot be (a hole, the mapping budget): the caller walks.
    pub fn read<M: MemRead>(&self, f: &FileRef<'_, M>, off: u64, buf: &mut [u8]) -> Result<bool> {
        let Some(at) = self.locate(f, off, buf.len() as u64)? else { return Ok(false) };
        // SAFETY: the file's pages under the range are mapped (`locate`), and stay mapped
        // while the caller holds the file's lock: only `forget`, under the file's write
        // lock, gives them back.
        unsafe { self.vs.copy_out(at, buf) };
        Ok(true)
    }

    /// Stores `data` at `off` of the file's mapped blocks, flushed (durable after the
    /// caller's fence); false when the range is not mapped and cannot be.
    pub fn write_in_place<M: MemRead>(&self, f: &FileRef<'_, M>, off: u64, data: &[u8]) -> Result<bool> {
        let Some(at) = self.locate(f, off, data.len() as u64)? else { return Ok(false) };
        // SAFETY: as in `read`; the caller holds the file's write lock.
        unsafe { self.vs.copy_in_flushed(at, data) };
        Ok(true)
    }

    /// Gives back the pages of `ino` mapped in partition `p` from page `from` on (a change
    /// removed or moved them); run under the file's write lock, before the change's blocks
    /// are released. The pages before `from` stay mapped.
    pub fn forget(&self, ino: Ino, p: Partition, from: u64) {
        let Some(slot) = self.pages.get(ino.0 as usize) else { return };
        let mut counted = self.fill.lock();
        let have = slot.load(Ordering::Acquire);
        if have <= from {
            return;
        }
        slot.store(from, Ordering::Release);
        let end = have.min(p.pages());
        if end > from {
            // A failure leaves pages mapped that nothing reads again (past the prefix).
            let _ = self.vs.discard((p.base + from) * BLOCK_BYTES, (end - from) * BLOCK_BYTES);
        }
        if from == 0 {
            let n = self.maps[ino.0 as usize].swap(0, Ordering::Relaxed).min(*counted);
            *counted -= n;
            maps_given(n);
            self.full.store(*counted >= self.budget, Ordering::Relaxed);
        }
    }

    /// After a committed change that moved file `ino` from partition `old` to `new` (its
    /// pages swapped into the new partition's range): the mapped prefix moves with it,
    /// page-table entries and all (`mremap`), and the old range is given back; when the
    /// move fails, the file's mapping is given back (the next request maps it again).
    pub fn moved(&self, ino: Ino, old: Partition, new: Partition) {
        let Some(slot) = self.pages.get(ino.0 as usize) else { return };
        let have = slot.load(Ordering::Acquire).min(old.pages());
        if have == 0 {
            return;
        }
        let keep = have.min(new.pages());
        let fill = self.fill.lock();
        let (from, to) = (old.base * BLOCK_BYTES, new.base * BLOCK_BYTES);
        if self.vs.move_pages(from, to, keep * BLOCK_BYTES).is_ok() && self.vs.discard(from, have * BLOCK_BYTES).is_ok()
        {
            slot.store(keep, Ordering::Release);
            return;
        }
        drop(fill); // forget takes it
        self.forget(ino, old, 0);
        // The new range may hold some of the moved entries: give it back too.
        let _ = self.vs.discard(to, keep * BLOCK_BYTES);
    }

    /// After a committed pswap: pages [la, la + n) of file `a` in partition `pa` and
    /// [lb, lb + n) of `b` in `pb` exchanged their blocks. Where both ranges lie inside
    /// their files' mapped prefixes, the live mappings are exchanged too (`mremap`: the
    /// page-table entries move, no page is faulted again; ctFS §3.3 swaps them in its
    /// kernel); otherwise, or when that fails, both files' mappings are given back from the
    /// ranges on.
    pub fn exchanged(&self, (a, pa, la): (Ino, Partition, u64), (b, pb, lb): (Ino, Partition, u64), n: u64) {
        let have = |i: Ino| self.pages.get(i.0 as usize).map_or(0, |s| s.load(Ordering::Acquire));
        if n > 0 && la + n <= have(a) && lb + n <= have(b) {
            let mut counted = self.fill.lock();
            let (va, vb) = ((pa.base + la) * BLOCK_BYTES, (pb.base + lb) * BLOCK_BYTES);
            if self.vs.exchange(va, vb, n * BLOCK_BYTES).is_ok() {
                // Each range may split the kernel mappings at its two ends.
                *counted += 4;
                maps_taken(4);
                self.maps[a.0 as usize].fetch_add(2, Ordering::Relaxed);
                self.maps[b.0 as usize].fetch_add(2, Ordering::Relaxed);
                self.full.store(*counted >= self.budget, Ordering::Relaxed);
                return;
            }
        }
        self.forget(a, pa, la);
        self.forget(b, pb, lb);
    }

    /// Leading pages of `ino` mapped now (tests and statistics).
    pub fn mapped_pages(&self, ino: Ino) -> u64 {
        self.pages.get(ino.0 as usize).map_or(0, |s| s.load(Ordering::Acquire))
    }
}
