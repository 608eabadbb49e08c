//! Memory-mapped files ([`File::map`]): a range of a file mapped `MAP_SHARED` onto its
//! blocks in the image, never a copy, as PM applications (LMDB, PmemKV) use DAX files. The
//! address is chosen congruent to the file offset modulo 2 MiB, so every whole 2 MiB of the
//! file that lies on a 2 MiB-aligned extent (the aligned allocator's placement) is mapped by
//! the kernel with one 2 MiB page on an image that has them (tmpfs `huge=always`, DAX):
//! WineFS's point (§2, Fig. 1). Holes in a writable mapping's range become blocks first, so
//! every page has a home; a read-only mapping reads holes as zeros. While a mapping lives,
//! the file may not shrink nor have holes punched (Busy): the mapping would be left on freed
//! blocks. The system calls are in [`crate::pm::filemap`].

#![forbid(unsafe_code)]

use super::api::File;
use crate::layout::{Lblk, BLOCK_BYTES};
use crate::pm::filemap::{RawMapping, Run};
use crate::pm::MmapDevice;
use crate::{Error, Result};
use std::sync::atomic::Ordering;

/// A mapped range of a file (see the module documentation); unmapped on drop. Access goes
/// through bounds-checked copies; [`Mapping::as_ptr`] gives the address for code that
/// copies by itself.
pub struct Mapping<'a> {
    raw: RawMapping,
    file: &'a File<MmapDevice>,
    writable: bool,
}

impl File<MmapDevice> {
    /// Maps `len` bytes of the file from `off` (a multiple of 4 KiB; the range inside the
    /// file's size, rounded up to a page), writable or not (writable needs a file open
    /// for writing). Fails with Busy on nothing, Invalid on a bad range, NoSpace when the
    /// holes cannot be filled, and Io when the kernel refuses the mapping (ENOMEM when the
    /// file is too fragmented for the process's mapping count).
    pub fn map(&self, off: u64, len: usize, writable: bool) -> Result<Mapping<'_>> {
        if writable && !self.access.write {
            return Err(Error::BadDescriptor);
        }
        let size = self.metadata()?.size;
        let end = off.checked_add(len as u64).ok_or(Error::Invalid("mapping range overflows"))?;
        if len == 0 || !off.is_multiple_of(BLOCK_BYTES) || end > size.next_multiple_of(BLOCK_BYTES) {
            return Err(Error::Invalid("mapping range: page-aligned, non-empty, inside the file"));
        }
        let len = len.next_multiple_of(BLOCK_BYTES as usize);
        self.cell.map_count.fetch_add(1, Ordering::AcqRel);
        match self.map_counted(off, len, size, writable) {
            Ok(raw) => Ok(Mapping { raw, file: self, writable }),
            Err(e) => {
                self.cell.map_count.fetch_sub(1, Ordering::AcqRel);
                Err(e)
            }
        }
    }

    fn map_counted(&self, off: u64, len: usize, size: u64, writable: bool) -> Result<RawMapping> {
        if writable {
            self.fs.allocate(&self.cell, off, (len as u64).min(size - off), true)?;
        }
        let geo = self.fs.geo;
        let mut runs: Vec<Run> = Vec::new();
        {
            let st = self.cell.state.read();
            let size_blocks = st.raw.size.div_ceil(BLOCK_BYTES);
            let (first, last) = (off / BLOCK_BYTES, (off + len as u64) / BLOCK_BYTES);
            let mut l = first;
            while l < last {
                let Some(e) = self.fs.translate(&self.cell, &st.raw, Lblk(l), size_blocks)? else {
                    l += 1; // a hole (read-only mapping): the reservation's zero page
                    continue;
                };
                let n = e.len.clamp(1, last - l);
                let at = ((l - first) * BLOCK_BYTES) as usize;
                let image_off = geo.block_off(e.pblk.0).0;
                match runs.last_mut() {
                    Some(r) if r.at + r.len == at && r.image_off + r.len as u64 == image_off => {
                        r.len += (n * BLOCK_BYTES) as usize
                    }
                    _ => runs.push(Run { at, image_off, len: (n * BLOCK_BYTES) as usize }),
                }
                l += n;
            }
        }
        let fd = self.fs.dev.raw_fd();
        RawMapping::new(fd, len, &runs, writable, off).map_err(Error::Io)
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
        if !self.writable {
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
    /// mapping lives.
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
        self.file.cell.map_count.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Keeps a file's blocks where they are, as a live [`Mapping`] does: while one exists the
/// file may not shrink nor have holes punched, and HashFS's grouped placement never moves
/// its blocks (`fs/evacuate.rs`). For code that maps a file's blocks by itself (the preload
/// shim's `mmap`). Clones count as pins of their own.
pub struct BlockPin(std::sync::Arc<super::inode::InodeCell>);

impl<D: crate::pm::PmDevice> File<D> {
    pub fn pin_blocks(&self) -> BlockPin {
        self.cell.map_count.fetch_add(1, Ordering::AcqRel);
        BlockPin(self.cell.clone())
    }
}

impl Clone for BlockPin {
    fn clone(&self) -> BlockPin {
        self.0.map_count.fetch_add(1, Ordering::AcqRel);
        BlockPin(self.0.clone())
    }
}

impl Drop for BlockPin {
    fn drop(&mut self) {
        self.0.map_count.fetch_sub(1, Ordering::AcqRel);
    }
}
