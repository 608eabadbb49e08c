//! ctFS's `pswap` as a file operation ([`crate::File::swap_pages`], `ctfs` images): two
//! page ranges of files exchange their contents by exchanging page-table entries, at the
//! highest level their alignment allows (`mapping/ctfs/ppt.rs`), in one undo-logged
//! transaction with both inodes' block counts and times; no data is copied. Both ranges
//! are whole pages inside the files' sizes; a file memory-mapped through the shim is Busy
//! (its mapping would keep the old pages).

#![forbid(unsafe_code)]

use crate::fs::inode::{self, InodeCell};
use crate::fs::FsInner;
use crate::journal::Tx;
use crate::layout::{Ino, InodeRaw, MappingKind, BLOCK_BYTES};
use crate::mapping::{FileMap, MapTx};
use crate::pm::PmDevice;
use crate::{Error, Result};
use std::sync::atomic::Ordering;

impl<D: PmDevice> FsInner<D> {
    /// [`MapTx::ctfs_exchange`] in `tx`, within three quarters of the journal (else
    /// Unsupported with `too_large`); on an error the structure change is aborted. Returns
    /// the change and the exchange's counts.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::fs) fn exchange_in_tx<'a>(
        &self,
        tx: &Tx<'a, D>,
        mut mt: MapTx<'a, D>,
        a: (Ino, &mut InodeRaw),
        la: u64,
        b: Option<(Ino, &mut InodeRaw)>,
        lb: u64,
        n: u64,
        too_large: &'static str,
    ) -> Result<(MapTx<'a, D>, (u64, u64, u64))> {
        match mt.ctfs_exchange(a, la, b, lb, n) {
            Ok(c) if tx.undo_entries() + mt.undo_entries() <= self.geo.journal_entries() * 3 / 4 => Ok((mt, c)),
            Ok(_) => {
                mt.abort();
                Err(Error::Unsupported(too_large))
            }
            Err(e) => {
                mt.abort();
                Err(e)
            }
        }
    }

    /// Returns the page-table entries exchanged.
    pub(crate) fn swap_pages(&self, a: &InodeCell, off_a: u64, b: &InodeCell, off_b: u64, len: u64) -> Result<u64> {
        let FileMap::Blocks(bm) = &self.map else { return Err(Error::Unsupported("pswap needs a ctfs image")) };
        if bm.kind != MappingKind::Ctfs {
            return Err(Error::Unsupported("pswap needs a ctfs image"));
        }
        if [off_a, off_b, len].iter().any(|x| !x.is_multiple_of(BLOCK_BYTES)) {
            return Err(Error::Invalid("pswap: offsets and length must be multiples of 4 KiB"));
        }
        let same = a.ino == b.ino;
        if same && off_a < off_b.saturating_add(len) && off_b < off_a.saturating_add(len) {
            return Err(Error::Invalid("pswap: the ranges overlap"));
        }
        if len == 0 {
            return Ok(0);
        }
        // Two files: locked in inode order, as rename does.
        let (mut ga, mut gb) = if same {
            (a.state.write(), None)
        } else if a.ino < b.ino {
            let ga = a.state.write();
            (ga, Some(b.state.write()))
        } else {
            let gb = b.state.write();
            (a.state.write(), Some(gb))
        };
        self.untag(a, &mut ga); // both files' bytes change in place (`fs/hashfs/append_tag.rs`)
        if let Some(gb) = gb.as_deref_mut() {
            self.untag(b, gb);
        }
        for (cell, st) in [(a, &*ga), (b, gb.as_deref().unwrap_or(&*ga))] {
            if st.freed {
                return Err(Error::NotFound);
            }
            if st.raw.is_dir() {
                return Err(Error::IsDir);
            }
            if cell.map_count.load(Ordering::Acquire) > 0 {
                return Err(Error::Busy);
            }
        }
        let size_b = gb.as_deref().unwrap_or(&*ga).raw.size;
        if off_a.checked_add(len).is_none_or(|e| e > ga.raw.size) || off_b.checked_add(len).is_none_or(|e| e > size_b) {
            return Err(Error::Invalid("pswap: a range reaches past the end of its file"));
        }
        let (mut ra, mut rb) = (ga.raw, gb.as_deref().map(|g| g.raw));
        let mut tx = self.journals.begin();
        let (mt, (ca, cb, entries)) = self.exchange_in_tx(
            &tx,
            bm.begin(),
            (a.ino, &mut ra),
            off_a / BLOCK_BYTES,
            rb.as_mut().map(|r| (b.ino, r)),
            off_b / BLOCK_BYTES,
            len / BLOCK_BYTES,
            "pswap: ranges this misaligned need more page-table entries than one transaction holds",
        )?;
        let now = inode::now_ns();
        for raw in std::iter::once(&mut ra).chain(rb.as_mut()) {
            raw.mtime_ns = now;
            raw.ctime_ns = now;
        }
        if let Some(rb) = rb.as_mut() {
            ra.blocks = ra.blocks - ca + cb;
            rb.blocks = rb.blocks - cb + ca;
        }
        mt.finish_with(&mut tx);
        inode::tx_write_inode(&mut tx, &self.geo, a.ino, &mut ra);
        if let Some(rb) = rb.as_mut() {
            inode::tx_write_inode(&mut tx, &self.geo, b.ino, rb);
        }
        tx.commit()?;
        ga.raw = ra;
        if let (Some(g), Some(rb)) = (gb.as_deref_mut(), rb) {
            g.raw = rb;
        }
        Ok(entries)
    }
}
