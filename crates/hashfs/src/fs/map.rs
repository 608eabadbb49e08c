//! Memory-mapped files ([`File::map`]): a range of a file mapped `MAP_SHARED` onto its
//! blocks in the image, never a copy, as PM applications (LMDB, PmemKV) use DAX files. The
//! address is chosen congruent to the file offset modulo 2 MiB, so every whole 2 MiB of the
//! file that lies on a 2 MiB-aligned extent (the aligned allocator's placement) is mapped by
//! the kernel with one 2 MiB page on an image that has them (tmpfs `huge=always`, DAX):
//! WineFS's point (§2, Fig. 1). Holes read as zeros; in a writable mapping a hole gets
//! blocks when first written (the rest of its 2 MiB of the file with it, so the aligned
//! allocator can make it one huge page), through `pm::holefault`'s userfaultfd, as a DAX
//! file system's fault handler does; where userfaultfd is not allowed, holes get blocks
//! when mapped. Every mapping of a file sees the blocks a hole gets, whoever fills it (a
//! write, or another mapping's first write): the file's cell lists its mappings' holes
//! ([`MapView`]), and each request that may fill holes maps the new blocks into every one
//! of them ([`FsInner::refresh_views`]), as the kernel's page cache keeps the shared
//! mappings of a file coherent. While a mapping lives, the file may not shrink nor have
//! holes punched (Busy): the mapping would be left on freed blocks. The system calls are
//! in [`crate::pm::filemap`].

#![forbid(unsafe_code)]

use super::api::File;
use super::fallocate::SizeRule;
use super::inode::InodeCell;
use super::shared::PinOwner;
use super::FsInner;
use crate::layout::{Lblk, BLOCK_BYTES};
use crate::pm::filemap::{Protection, RawMapping, Run};
use crate::pm::holefault::{hole_faults, Filler, Ranges};
use crate::pm::{MmapDevice, PmDevice};
use crate::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

/// A mapped range of a file (see the module documentation); unmapped on drop. Access goes
/// through bounds-checked copies; [`Mapping::as_ptr`] gives the address for code that
/// copies by itself.
pub struct Mapping<'a> {
    raw: Arc<RawMapping>,
    /// Its holes, as the file's cell lists them (None: it has none).
    _view: Option<Arc<MapView>>,
    file: &'a File<MmapDevice>,
    prot: Protection,
}

/// The holes of one live mapping of a file (offsets from its start): bytes that read as
/// zeros until the file gets blocks there.
pub struct MapView {
    raw: Weak<RawMapping>,
    /// File offset of the mapping's first byte.
    off: u64,
    holes: Mutex<Ranges>,
}

impl File<MmapDevice> {
    /// Maps `len` bytes of the file from `off` (a multiple of 4 KiB; the range inside the
    /// file's size, rounded up to a page), writable or not (writable needs a file open
    /// for writing). Fails with Busy on nothing, Invalid on a bad range, NoSpace when the
    /// holes cannot be filled, and Io when the kernel refuses the mapping (ENOMEM when the
    /// file is too fragmented for the process's mapping count).
    pub fn map(&self, off: u64, len: usize, prot: Protection) -> Result<Mapping<'_>> {
        if self.fs.is_read_only() {
            return Err(Error::Unsupported("a process that may only read the image does not map its files yet"));
        }
        let _in = self.fs.enter();
        if prot == Protection::ReadWrite && !self.access.write {
            return Err(Error::BadDescriptor);
        }
        let size = self.metadata()?.size;
        let end = off.checked_add(len as u64).ok_or(Error::Invalid("mapping range overflows"))?;
        if len == 0 || !off.is_multiple_of(BLOCK_BYTES) || end > size.next_multiple_of(BLOCK_BYTES) {
            return Err(Error::Invalid("mapping range: page-aligned, non-empty, inside the file"));
        }
        let len = len.next_multiple_of(BLOCK_BYTES as usize);
        self.count_mapping();
        match self.map_counted(off, len, size, prot) {
            Ok((raw, view)) => Ok(Mapping { raw, _view: view, file: self, prot }),
            Err(e) => {
                uncount_mapping(&*self.fs, &self.cell);
                Err(e)
            }
        }
    }

    fn map_counted(
        &self,
        off: u64,
        len: usize,
        size: u64,
        prot: Protection,
    ) -> Result<(Arc<RawMapping>, Option<Arc<MapView>>)> {
        let writable = prot == Protection::ReadWrite;
        let lazy = writable && hole_faults().is_some();
        if writable && !lazy {
            self.fs.allocate(&self.cell, off, (len as u64).min(size - off), SizeRule::Keep)?;
        }
        // The list is held from before the runs are read until this mapping is on it: a
        // request that fills a hole meanwhile either committed before (its blocks are in
        // the runs) or lists the mappings after (and maps its blocks into this one).
        let mut views = self.cell.views.lock();
        let (runs, holes) = runs_of(&self.fs, &self.cell, off, 0, len)?;
        let raw = Arc::new(RawMapping::new(self.fs.dev.raw_fd(), len, &runs, prot, off).map_err(Error::Io)?);
        if holes.is_empty() {
            return Ok((raw, None));
        }
        let view = Arc::new(MapView { raw: Arc::downgrade(&raw), off, holes: Mutex::new(holes.clone()) });
        views.retain(|v| v.strong_count() > 0);
        views.push(Arc::downgrade(&view));
        drop(views);
        if lazy {
            let fill = HoleFill { fs: self.fs.clone(), cell: self.cell.clone(), view: view.clone() };
            raw.watch_holes(holes.spans(), Arc::new(fill)).map_err(Error::Io)?;
        }
        Ok((raw, Some(view)))
    }
}

/// The runs of blocks and the holes of the file's `[off + from, off + to)` bytes, as
/// offsets in a mapping of the file from `off`.
fn runs_of<D: PmDevice>(
    fs: &FsInner<D>,
    cell: &InodeCell,
    off: u64,
    from: usize,
    to: usize,
) -> Result<(Vec<Run>, Ranges)> {
    let mut runs: Vec<Run> = Vec::new();
    let mut holes = Ranges::default();
    let st = cell.state.read();
    let size_blocks = st.raw.size.div_ceil(BLOCK_BYTES);
    let (first, last) = ((off + from as u64) / BLOCK_BYTES, (off + to as u64).div_ceil(BLOCK_BYTES));
    let at_of = |l: u64| (l * BLOCK_BYTES - off) as usize;
    let mut l = first;
    while l < last {
        let Some(e) = fs.translate(cell, &st.raw, Lblk(l), size_blocks)? else {
            holes.add(at_of(l), at_of(l + 1));
            l += 1;
            continue;
        };
        let n = e.len.clamp(1, last - l);
        let (at, image_off) = (at_of(l), fs.geo.block_off(e.pblk).0);
        match runs.last_mut() {
            Some(r) if r.at + r.len == at && r.image_off + r.len as u64 == image_off => {
                r.len += (n * BLOCK_BYTES) as usize
            }
            _ => runs.push(Run { at, image_off, len: (n * BLOCK_BYTES) as usize }),
        }
        l += n;
    }
    Ok((runs, holes))
}

/// The first write to a hole of a writable mapping (`pm::holefault`): the hole's part of
/// the page's 2 MiB of the file gets blocks (one aligned extent for the aligned allocator),
/// mapped into this mapping and every other of the file.
struct HoleFill {
    fs: Arc<FsInner<MmapDevice>>,
    cell: Arc<InodeCell>,
    view: Arc<MapView>,
}

impl HoleFill {
    fn fill_page(&self, rel: usize) -> Result<()> {
        let Some((lo, hi)) = self.view.holes.lock().fill_span(rel, self.view.off) else {
            return Ok(()); // filled by an earlier fault, or by a write
        };
        // KEEP_SIZE: up to the file's size (a mapping's last page may reach past it).
        let span = self.view.off + lo as u64..self.view.off + hi as u64;
        // allocate maps the span's blocks into every mapping of the file with a hole
        // there, this one included, also when another request gave them first.
        self.fs.allocate(&self.cell, span.start, span.end - span.start, SizeRule::Keep)?;
        match self.view.holes.lock().containing(rel) {
            Some(_) => Err(Error::NoSpace), // the page still has no block
            None => Ok(()),
        }
    }
}

impl Filler for HoleFill {
    fn fill(&self, addr: usize) -> bool {
        let Some(raw) = self.view.raw.upgrade() else { return false };
        let rel = addr.wrapping_sub(raw.addr() as usize);
        rel < raw.len() && self.fill_page(rel).is_ok()
    }
}

impl<D: PmDevice> FsInner<D> {
    /// After a request that may have given `cell`'s file blocks in the bytes `span`: maps
    /// them into every live mapping of the file where that mapping has a hole. A mapping
    /// the kernel refuses to change (ENOMEM: too many mappings) keeps its hole, and the
    /// next request over it tries again.
    pub(crate) fn refresh_views(&self, cell: &InodeCell, span: std::ops::Range<u64>) {
        if cell.map_count.load(Ordering::Acquire) == 0 {
            return;
        }
        let views: Vec<Arc<MapView>> = cell.views.lock().iter().filter_map(Weak::upgrade).collect();
        for v in views {
            let Some(raw) = v.raw.upgrade() else { continue };
            let a = span.start.saturating_sub(v.off).min(raw.len() as u64) as usize;
            let e = span.end.saturating_sub(v.off).min(raw.len() as u64) as usize;
            let mut holes = v.holes.lock();
            for (lo, hi) in holes.overlapping(a, e) {
                let Ok((runs, _)) = runs_of(self, cell, v.off, lo, hi) else { continue };
                if raw.map_runs(&runs).is_ok() {
                    for r in &runs {
                        holes.remove(r.at, r.at + r.len);
                    }
                }
            }
        }
    }
}

impl Mapping<'_> {
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    fn check(&self, off: usize, n: usize) -> Result<()> {
        match off.checked_add(n) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(Error::Invalid("outside the mapping")),
        }
    }

    /// Copies bytes of the mapping from `off` into `buf`.
    pub fn read_at(&self, off: usize, buf: &mut [u8]) -> Result<()> {
        self.check(off, buf.len())?;
        self.raw.copy_out(off, buf);
        Ok(())
    }

    /// Copies `data` into the mapping at `off`: into the file, visible to every reader at
    /// once; durable after [`persist`](Self::persist).
    pub fn write_at(&self, off: usize, data: &[u8]) -> Result<()> {
        if self.prot == Protection::ReadOnly {
            return Err(Error::BadDescriptor);
        }
        self.check(off, data.len())?;
        self.raw.copy_in(off, data);
        Ok(())
    }

    /// Makes `[off, off + len)` durable (cache-line write-back and a fence), as msync on a
    /// DAX file.
    pub fn persist(&self, off: usize, len: usize) -> Result<()> {
        self.check(off, len)?;
        self.raw.persist(off, len);
        Ok(())
    }

    /// The first byte's address, for code that copies by itself (a benchmark's memcpy);
    /// dereferencing it is that code's `unsafe`, within `len()` bytes and while the
    /// mapping lives. Such code must not pass a hole of a writable mapping as the buffer
    /// of this file system's own `read_at` of the same file: the read holds the file's
    /// lock while it copies, and the hole's first write needs it (the shim fills such
    /// holes before reading; [`Mapping::write_at`] never meets this).
    pub fn as_ptr(&self) -> *mut u8 {
        self.raw.addr()
    }

    /// KiB of the mapping the kernel maps with 2 MiB pages.
    pub fn pmd_mapped_kib(&self) -> Result<u64> {
        self.raw.pmd_mapped_kib().map_err(Error::Io)
    }
}

impl Drop for Mapping<'_> {
    fn drop(&mut self) {
        uncount_mapping(&*self.file.fs, &self.file.cell);
    }
}

/// Keeps a file's blocks where they are, as a live [`Mapping`] does: while one exists, in
/// this process or (on a shared mount) another, the file may not shrink nor have holes
/// punched, and HashFS's grouped placement never moves its blocks
/// (`fs/hashfs/evacuate.rs`). For code that maps a file's blocks by itself (the preload
/// shim's `mmap`). Clones count as pins of their own.
pub struct BlockPin {
    cell: Arc<InodeCell>,
    fs: Arc<dyn PinOwner>,
}

impl<D: PmDevice> File<D> {
    pub fn pin_blocks(&self) -> BlockPin {
        let _in = self.fs.enter();
        self.count_mapping();
        BlockPin { cell: self.cell.clone(), fs: self.fs.clone() }
    }

    /// Counts a mapping of the file's blocks (inside a call), its size made plain first:
    /// stores through a mapping change bytes in place, which a tagged size's check covers,
    /// and while one is counted no append tags it (`fs/hashfs/append_tag.rs`). The
    /// process's first is marked in the shared region (`fs/shared/mapped.rs`), so that no
    /// other participant frees or moves the blocks either.
    fn count_mapping(&self) {
        let mut st = self.cell.state.write();
        self.fs.untag(&self.cell, &mut st);
        if self.cell.map_count.fetch_add(1, Ordering::AcqRel) == 0 {
            self.fs.pin_marked(&self.cell);
        }
    }
}

/// Uncounts a mapping of `cell`'s blocks; the process's last takes its mark away.
fn uncount_mapping(fs: &dyn PinOwner, cell: &Arc<InodeCell>) {
    if cell.map_count.fetch_sub(1, Ordering::AcqRel) == 1 {
        fs.unpinned(cell);
    }
}

impl Clone for BlockPin {
    fn clone(&self) -> BlockPin {
        self.cell.map_count.fetch_add(1, Ordering::AcqRel);
        BlockPin { cell: self.cell.clone(), fs: self.fs.clone() }
    }
}

impl Drop for BlockPin {
    fn drop(&mut self) {
        uncount_mapping(&*self.fs, &self.cell);
    }
}
