//! The bytes past EOF in a file's last block (invariant F2 of `fs/data.rs`): they read as
//! zeros, because a mapping of the block shows them (the shim maps the image's blocks, and
//! ctFS's view maps them too) where `read` stops at EOF.
//!
//! Three places keep it:
//! - a shrink zeroes the rest of its new last block after the smaller size is durable
//!   (before it, a crash would leave the old size with some of its bytes zeroed);
//! - a growth zeroes, before the size grows, the bytes it brings inside the file and does
//!   not write itself (a store through a mapping past EOF may have put bytes there, which
//!   Linux never makes part of the file either);
//! - recovery after a crash zeroes every file's tail: a crash between a shrink's size and
//!   its zeroing, or an append whose bytes reached the block and whose size did not, leaves
//!   bytes there.

#![forbid(unsafe_code)]

use super::inode::InodeCell;
use super::FsInner;
use crate::layout::{Ino, InodeRaw, Lblk, BLOCK_BYTES};
use crate::pm::{DevOffset, PmDevice};
use crate::Result;

impl<D: PmDevice> FsInner<D> {
    /// Where the bytes past EOF in the last block of `raw` lie on the device, and how many
    /// there are; None when the size ends on a block boundary or the last block is a hole.
    pub(crate) fn tail_past_eof(&self, cell: &InodeCell, raw: &InodeRaw) -> Result<Option<(DevOffset, u64)>> {
        let in_blk = raw.size % BLOCK_BYTES;
        if in_blk == 0 {
            return Ok(None);
        }
        let lblk = Lblk::of_byte(raw.size);
        let e = self.translate(cell, raw, lblk, lblk.0 + 1)?;
        Ok(e.map(|e| (self.geo.block_off(e.pblk) + in_blk, BLOCK_BYTES - in_blk)))
    }

    /// Zeroes and flushes the bytes past EOF in the last block (after a shrink); the caller
    /// fences. Returns whether there were any.
    pub(crate) fn zero_tail_past_eof(&self, cell: &InodeCell, raw: &InodeRaw) -> Result<bool> {
        let Some((at, len)) = self.tail_past_eof(cell, raw)? else { return Ok(false) };
        self.zero_flushed(at, len);
        Ok(true)
    }

    fn zero_flushed(&self, at: DevOffset, len: u64) {
        self.dev.zero(at, len);
        self.dev.flush(at, len);
    }

    /// Zeroes the bytes past EOF in the last block before the size grows, up to `upto`: a
    /// write from `upto` stores its own bytes over the rest (an append, whose `upto` is the
    /// old size, zeroes nothing). They are zero already unless a store through a mapping
    /// put bytes past EOF.
    pub(crate) fn zero_tail_before_growth(&self, cell: &InodeCell, raw: &InodeRaw, upto: u64) -> Result<()> {
        let Some((at, len)) = self.tail_past_eof(cell, raw)? else { return Ok(()) };
        let len = len.min(upto.saturating_sub(raw.size));
        if len > 0 {
            self.zero_flushed(at, len);
        }
        Ok(())
    }

    /// The bytes stored past EOF in the last block of `ino` (empty when there are none):
    /// for checks of F2 (the crash explorer's snapshots, tests).
    pub(crate) fn bytes_past_eof(&self, cell: &InodeCell, raw: &InodeRaw) -> Result<Vec<u8>> {
        Ok(self.tail_past_eof(cell, raw)?.map(|(at, len)| self.read_tail(at, len)).unwrap_or_default())
    }

    fn read_tail(&self, at: DevOffset, len: u64) -> Vec<u8> {
        let mut buf = vec![0u8; len as usize];
        self.dev.read(at, &mut buf);
        buf
    }

    /// Recovery after a crash: zeroes the bytes past EOF of every regular file in `files`
    /// (inode, size) whose tail holds any; returns how many did. Idempotent, so a crash
    /// during it is recovered by running it again.
    pub(crate) fn zero_tails_after_crash(&self, files: impl Iterator<Item = (Ino, u64)>) -> Result<u64> {
        let mut zeroed = 0;
        for (ino, size) in files {
            if size % BLOCK_BYTES == 0 {
                continue;
            }
            let raw = super::inode::read_raw(&*self.dev, &self.geo, ino);
            if raw.is_dir() || raw.is_special() || raw.is_symlink() {
                continue;
            }
            let Some((at, len)) = self.tail_past_eof(&InodeCell::new(ino, raw), &raw)? else { continue };
            if self.read_tail(at, len).iter().any(|&b| b != 0) {
                self.zero_flushed(at, len);
                zeroed += 1;
            }
        }
        if zeroed > 0 {
            self.dev.fence();
        }
        Ok(zeroed)
    }
}
