//! ctFS (Li et al., FAST '22): every file is one contiguous range of a virtual space, so
//! a file offset becomes a virtual page by one addition, and a persistent page table
//! translates virtual pages to data blocks.
//!
//! - [`partition`]: the hierarchy of partitions (L0 = 4 KiB to L9 = 512 GiB, 8x apart);
//!   a file lives in the smallest one that holds its last mapped page, named by one word
//!   of its inode.
//! - [`ppt`]: the persistent page table and `pswap`, the exchange of two page ranges'
//!   mappings at the highest page-table level their alignment allows.
//!
//! A write past the file's partition moves the file to a larger one by swapping the old
//! partition's entries into it (no data is copied), a truncation that leaves it two levels smaller moves it down,
//! and a file that maps nothing gives its partition back; each in the write's or
//! truncation's own transaction. Data blocks come from the image's block allocator (the
//! aligned allocator gives 2 MiB-aligned runs, which the table maps with 2 MiB leaves).
//!
//! - [`view`]: the live translation, the image's pages mapped into one reserved virtual
//!   range where the PPT places them, so that the process's page table and the MMU
//!   translate (on an image file; `HASHFS_CTFS_VIEW=0` turns it off).
//!
//! Where the view does not reach (another process, the FUSE daemon, a hole, a device that
//! is not a file) translation is the page-table walk in software, what ctFS's kernel does
//! on a fault: three reads below the root; a lookup returns the whole run of consecutive
//! blocks its node maps.

pub mod partition;
pub mod ppt;
mod tx;
pub mod view;

use super::staged::MemRead;
use crate::layout::{Extent, Geometry, InodeRaw, Lblk, Pblk};
use crate::Result;
use parking_lot::Mutex;
use partition::{Partition, Partitions};

/// The image's DRAM state: which partitions are Empty, and the live view.
#[derive(Default)]
pub struct Ctfs {
    pub parts: Mutex<Partitions>,
    pub view: Option<view::View>,
}

impl Ctfs {
    /// With a view of the image open as `fd` (None: software translation only).
    pub fn new(fd: Option<std::os::unix::io::RawFd>, geo: &Geometry) -> Ctfs {
        let on = std::env::var("HASHFS_CTFS_VIEW").map_or(true, |v| v != "0");
        let view = fd.filter(|_| on).and_then(|fd| view::View::new(fd, geo).ok());
        Ctfs { parts: Mutex::new(Partitions::new()), view }
    }

    /// Where logical block `lblk` of the file lies.
    pub fn lookup<M: MemRead>(m: &M, geo: &Geometry, raw: &InodeRaw, lblk: Lblk) -> Result<Option<Extent>> {
        let Some(p) = Partition::from_word(raw.ctfs_partition())? else { return Ok(None) };
        if lblk.0 >= p.pages() {
            return Ok(None);
        }
        Ok(ppt::lookup(m, geo, p.base + lblk.0)?.map(|(pblk, run)| Extent {
            lblk,
            pblk: Pblk(pblk),
            len: run.min(p.pages() - lblk.0),
        }))
    }

    /// Marks a file's partition taken while a mount rebuilds the hierarchy.
    pub fn adopt(&self, raw: &InodeRaw) -> Result<()> {
        match Partition::from_word(raw.ctfs_partition())? {
            Some(p) => self.parts.lock().carve(p),
            None => Ok(()),
        }
    }

    /// The file's mapped extents, in logical blocks.
    pub fn walk<M: MemRead>(m: &M, geo: &Geometry, raw: &InodeRaw, f: &mut dyn FnMut(u64, u64, u64)) -> Result<()> {
        let Some(p) = Partition::from_word(raw.ctfs_partition())? else { return Ok(()) };
        ppt::walk(m, geo, p.base, p.base + p.pages(), &mut |v, pblk, len| f(v - p.base, pblk, len))
    }
}
