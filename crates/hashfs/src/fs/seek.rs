//! `lseek(SEEK_DATA)` and `lseek(SEEK_HOLE)`: where a file's next mapped block or next hole
//! begins, so that `cp`, `tar -S` and `rsync` copy a sparse file's data and not its holes'
//! zeros. A walk of the file's blocks through its mapping's translation (each mapped run
//! stepped over whole; a hole longer than the device, through the file's mapped runs); the
//! end of the file counts as a hole, and preallocated blocks as data (they read as zeros:
//! the mappings keep no unwritten state, where tmpfs, ext4 and XFS report blocks allocated
//! and never written as holes).

#![forbid(unsafe_code)]

use super::api::FileSystem;
use super::verbs::{on_map, MapVerbs};
use crate::layout::{Ino, Lblk, BLOCK_BYTES};
use crate::pm::PmDevice;
use crate::{Error, Result};

/// Which of lseek's two searches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seek {
    Data,
    Hole,
}

impl<D: PmDevice> FileSystem<D> {
    /// The first byte at or after `off` of `ino` that lies in a mapped block
    /// ([`Seek::Data`]) or in a hole ([`Seek::Hole`], the end of the file being one); None
    /// when `off` is at or past the end, or no data follows it (lseek's ENXIO). A
    /// directory is Invalid (EINVAL).
    pub fn seek(&self, ino: Ino, off: u64, what: Seek) -> Result<Option<u64>> {
        self.inner.read_call(|| {
            let _in = self.inner.enter();
            let cell = self.inner.cell(ino)?;
            let st = cell.state.read();
            st.live()?;
            if st.raw.is_dir() {
                // (As tmpfs answers.)
                return Err(Error::Invalid("SEEK_DATA or SEEK_HOLE on a directory"));
            }
            let size = st.raw.size;
            if off >= size {
                return Ok(None);
            }
            let size_blocks = size.div_ceil(BLOCK_BYTES);
            let mut lblk = off / BLOCK_BYTES;
            if what == Seek::Data && size_blocks - lblk > self.inner.geo.data_blocks {
                // More blocks to walk than the device has (a sparse file of a terabyte): one
                // walk of the file's mapping (on the global tables a scan of the table, as
                // long as the device) finds its next run instead.
                let runs = on_map!(self.inner, m => m.mapped_runs(ino, &st.raw))?;
                let next = runs.iter().find(|&&(first, n)| first.0 + n > lblk).map(|&(first, _)| first.0.max(lblk));
                return Ok(next.filter(|&b| b < size_blocks).map(|b| off.max(b * BLOCK_BYTES)));
            }
            while lblk < size_blocks {
                let run = self.inner.translate(&cell, &st.raw, Lblk(lblk), size_blocks)?;
                match (run, what) {
                    (Some(_), Seek::Data) | (None, Seek::Hole) => return Ok(Some(off.max(lblk * BLOCK_BYTES))),
                    (Some(e), Seek::Hole) => lblk += e.len.max(1),
                    (None, Seek::Data) => lblk += 1,
                }
            }
            Ok(match what {
                Seek::Data => None,
                Seek::Hole => Some(size),
            })
        })
    }
}
