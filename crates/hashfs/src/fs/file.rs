//! An open file ([`File`], `std::fs::File`'s shape: positioned and vectored IO, `Read`,
//! `Write`, `Seek`), the options that open one ([`OpenOptions`]) and the fallocate modes.
//! The file system handle that opens files is in `fs/api.rs`.

#![forbid(unsafe_code)]

use super::api::Metadata;
use super::fallocate::SizeRule;
use super::inode::InodeCell;
use super::ops::Owner;
use super::FsInner;
use crate::layout::Ino;
use crate::pm::{MmapDevice, PmDevice};
use crate::{Error, Result};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What a sync makes durable: everything (fsync) or the data and what reading it needs
/// (fdatasync: a write's times may stay in DRAM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncScope {
    All,
    DataOnly,
}

/// What fallocate does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FallocateMode {
    /// Mode 0: map the holes and grow the size to cover the range.
    Allocate,
    /// FALLOC_FL_KEEP_SIZE: map the holes up to the current size.
    AllocateKeepSize,
    /// FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: make the range read as zeros, freeing
    /// whole blocks.
    PunchHole,
    /// FALLOC_FL_ZERO_RANGE: make the range read as zeros, with blocks mapped (those
    /// already mapped keep their place), growing the size to cover it.
    ZeroRange,
    /// FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE: the same up to the current size.
    ZeroRangeKeepSize,
}

impl FallocateMode {
    /// The mode for Linux fallocate flags, or None for flags HashFS does not support
    /// (COLLAPSE_RANGE and INSERT_RANGE, which would re-key every block after the range in
    /// a per-block mapping, UNSHARE_RANGE, or PUNCH_HOLE without KEEP_SIZE, as Linux
    /// requires).
    pub fn from_linux_flags(flags: i32) -> Option<FallocateMode> {
        const KEEP_SIZE: i32 = 0x01;
        const PUNCH_HOLE: i32 = 0x02;
        const ZERO_RANGE: i32 = 0x10;
        match flags {
            0 => Some(FallocateMode::Allocate),
            KEEP_SIZE => Some(FallocateMode::AllocateKeepSize),
            f if f == KEEP_SIZE | PUNCH_HOLE => Some(FallocateMode::PunchHole),
            ZERO_RANGE => Some(FallocateMode::ZeroRange),
            f if f == ZERO_RANGE | KEEP_SIZE => Some(FallocateMode::ZeroRangeKeepSize),
            _ => None,
        }
    }
}

/// Access mode of an open file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub read: bool,
    pub write: bool,
    /// Every write goes to the end of the file.
    pub append: bool,
}

/// Options for [`FileSystem::open_file`], as `std::fs::OpenOptions`.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    pub(super) read: bool,
    pub(super) write: bool,
    pub(super) append: bool,
    pub(super) truncate: bool,
    pub(super) create: bool,
    pub(super) create_new: bool,
    pub(super) perm: u32,
    pub(super) owner: Option<Owner>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenOptions {
    pub fn new() -> Self {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            truncate: false,
            create: false,
            create_new: false,
            perm: 0o644,
            owner: None,
        }
    }
    pub fn read(&mut self, v: bool) -> &mut Self {
        self.read = v;
        self
    }
    pub fn write(&mut self, v: bool) -> &mut Self {
        self.write = v;
        self
    }
    pub fn append(&mut self, v: bool) -> &mut Self {
        self.append = v;
        self
    }
    pub fn truncate(&mut self, v: bool) -> &mut Self {
        self.truncate = v;
        self
    }
    pub fn create(&mut self, v: bool) -> &mut Self {
        self.create = v;
        self
    }
    pub fn create_new(&mut self, v: bool) -> &mut Self {
        self.create_new = v;
        self
    }
    /// Permission bits for a created file (default 0o644).
    pub fn mode(&mut self, perm: u32) -> &mut Self {
        self.perm = perm;
        self
    }
    /// Owner of a created file (default: this process's effective ids).
    pub fn owner(&mut self, owner: Owner) -> &mut Self {
        self.owner = Some(owner);
        self
    }
}

/// An open file. Closing (dropping) the last handle of an unlinked file frees it.
pub struct File<D: PmDevice = MmapDevice> {
    pub(crate) fs: Arc<FsInner<D>>,
    pub(crate) cell: Arc<InodeCell>,
    pub(crate) access: Access,
    pub(super) pos: u64,
    /// A read-only participant's file: the inode's generation when it was opened (0
    /// elsewhere). Such a participant names no open file in the region, so the inode may
    /// be freed and taken again meanwhile (`fs/shared/read_only.rs`): then ESTALE.
    pub(super) generation: u32,
}

/// What a read-only participant's file keeps of its inode's generation (`File::generation`):
/// never 0, which means unchecked.
pub(super) fn opened_generation(raw: &crate::layout::InodeRaw) -> u32 {
    raw.generation | 1
}

impl<D: PmDevice> File<D> {
    pub fn ino(&self) -> Ino {
        self.cell.ino
    }

    pub fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.fs.read_call(|| {
            // On a shared mount, beside other participants' reads and overwrites.
            let _read = self.fs.enter_read();
            if !self.access.read {
                return Err(Error::BadDescriptor);
            }
            self.still_the_file()?;
            self.fs.read_at(&self.cell, off, buf)
        })
    }

    /// Writes at `off` (at the end in append mode); returns the bytes written, which is
    /// short only when the device fills up part way.
    pub fn write_at(&self, off: u64, data: &[u8]) -> Result<usize> {
        if !self.access.write {
            return Err(Error::BadDescriptor);
        }
        if !self.access.append {
            // On a shared mount, an overwrite that changes only bytes runs beside other
            // participants' calls of its kind.
            if let Some(_read) = self.fs.enter_read() {
                if let Some(n) = self.fs.overwrite_shared(&self.cell, off, data)? {
                    return Ok(n);
                }
            }
        }
        let _in = self.fs.enter();
        if self.access.append {
            return self.fs.append(&self.cell, data).map(|(n, _)| n);
        }
        self.fs.write_at(&self.cell, off, data)
    }

    /// An untorn write: all of `data` at `off` (at the end in append mode) or, after a
    /// crash, none of it, its size change included; `data` at most
    /// [`FileSystem::untorn_write_max`] bytes (else Invalid). Fails with Busy when the
    /// file is memory-mapped through the shim and the journal cannot hold the old bytes.
    /// Returns the end of the write.
    pub fn write_atomic_at(&self, off: u64, data: &[u8]) -> Result<u64> {
        let _in = self.fs.enter();
        if !self.access.write {
            return Err(Error::BadDescriptor);
        }
        let off = if self.access.append { None } else { Some(off) };
        self.fs.write_untorn(&self.cell, off, data)
    }

    /// ctFS's pswap (`ctfs` images): `len` bytes at `off` of this file and `len` bytes at
    /// `other_off` of `other` (this file again, in a range apart, is allowed) exchange
    /// their contents by exchanging page-table entries: atomic, durable, and no data
    /// copied (ctFS §3.3). Offsets and length multiples of 4 KiB, both ranges inside their
    /// files (Invalid otherwise); Unsupported on other mappings; Busy while either file is
    /// memory-mapped. Returns the page-table entries exchanged (one per 1 GiB or 2 MiB
    /// where both ranges are aligned to it, one per page elsewhere).
    pub fn swap_pages(&self, off: u64, other: &File<D>, other_off: u64, len: u64) -> Result<u64> {
        let _in = self.fs.enter();
        if !self.access.write || !other.access.write {
            return Err(Error::BadDescriptor);
        }
        if !Arc::ptr_eq(&self.fs, &other.fs) {
            return Err(Error::Invalid("pswap: the files are on different file systems"));
        }
        self.fs.swap_pages(&self.cell, off, &other.cell, other_off, len)
    }

    /// [`write_atomic_at`](Self::write_atomic_at) at the current end of file, whatever
    /// the open mode; returns the new end.
    pub fn append_atomic(&self, data: &[u8]) -> Result<u64> {
        let _in = self.fs.enter();
        if !self.access.write {
            return Err(Error::BadDescriptor);
        }
        self.fs.write_untorn(&self.cell, None, data)
    }

    /// Writes at the current end of file, whatever the open mode (atomically with respect
    /// to other appends); returns the bytes written and the new end.
    pub fn append(&self, data: &[u8]) -> Result<(usize, u64)> {
        let _in = self.fs.enter();
        if !self.access.write {
            return Err(Error::BadDescriptor);
        }
        self.fs.append(&self.cell, data)
    }

    /// Stale if this is a read-only participant's file whose inode was freed (and maybe
    /// taken by another file) since it was opened.
    fn still_the_file(&self) -> Result<()> {
        if self.generation != 0 {
            let st = self.cell.state.read();
            if st.freed || opened_generation(&st.raw) != self.generation {
                return Err(Error::Stale(self.cell.ino.0));
            }
        }
        Ok(())
    }

    pub fn metadata(&self) -> Result<Metadata> {
        self.fs.read_call(|| {
            let _read = self.fs.enter_read();
            self.still_the_file()?;
            let st = self.cell.state.read();
            st.times_read();
            Ok(Metadata::from_raw(self.cell.ino, &st.raw))
        })
    }

    pub fn set_len(&self, size: u64) -> Result<()> {
        let _in = self.fs.enter();
        if !self.access.write {
            return Err(Error::BadDescriptor);
        }
        let mut st = self.cell.state.write();
        self.fs.set_len_locked(&self.cell, &mut st, size)
    }

    /// posix_fallocate: maps the holes of [off, off + len) with zeroed blocks, so later
    /// writes there cannot fail for lack of space, and extends the size to cover it.
    pub fn allocate(&self, off: u64, len: u64) -> Result<()> {
        let _in = self.fs.enter();
        self.fallocate(off, len, FallocateMode::Allocate)
    }

    /// fallocate(2) with the modes HashFS supports.
    pub fn fallocate(&self, off: u64, len: u64, mode: FallocateMode) -> Result<()> {
        let _in = self.fs.enter();
        if !self.access.write {
            return Err(Error::BadDescriptor);
        }
        match mode {
            FallocateMode::Allocate => self.fs.allocate(&self.cell, off, len, SizeRule::Extend),
            FallocateMode::AllocateKeepSize => self.fs.allocate(&self.cell, off, len, SizeRule::Keep),
            // A hole punched under another process's mapping of the blocks is zeroed in
            // place (as the shim does under its own): freed, they would be left mapped.
            FallocateMode::PunchHole if self.fs.pinned_elsewhere(self.cell.ino) => {
                self.fs.zero_range(&self.cell, off, len, SizeRule::Keep)
            }
            FallocateMode::PunchHole => self.fs.punch_hole(&self.cell, off, len),
            FallocateMode::ZeroRange => self.fs.zero_range(&self.cell, off, len, SizeRule::Extend),
            FallocateMode::ZeroRangeKeepSize => self.fs.zero_range(&self.cell, off, len, SizeRule::Keep),
        }
    }

    /// fsync: every write's data and size are durable when it returns; this makes the
    /// file's times durable too (`fs/times.rs`), and the image on a host that is not
    /// persistent memory.
    pub fn sync_all(&self) -> Result<()> {
        if self.fs.is_read_only() {
            return Ok(()); // a read-only participant's files have nothing to make durable
        }
        // On a shared mount, beside other participants' reads and overwrites when the
        // times are on the media already.
        if let Some(_read) = self.fs.enter_read() {
            if self.fs.sync_times_shared(&self.cell) {
                return self.fs.sync_data();
            }
        }
        let _in = self.fs.enter();
        {
            let mut st = self.cell.state.write();
            self.fs.persist_times(&self.cell, &mut st);
        }
        self.fs.sync_data()
    }

    /// fdatasync: as [`Self::sync_all`] without the times, which a read does not need.
    /// (Every write is durable when it returns: nothing changes here.)
    pub fn sync_data(&self) -> Result<()> {
        if self.fs.is_read_only() {
            return Ok(());
        }
        let _read = self.fs.enter_read();
        self.fs.sync_data()
    }

    /// [`Self::sync_all`] or [`Self::sync_data`], as `scope` says.
    pub fn sync(&self, scope: SyncScope) -> Result<()> {
        match scope {
            SyncScope::All => self.sync_all(),
            SyncScope::DataOnly => self.sync_data(),
        }
    }
}

impl<D: PmDevice> Drop for File<D> {
    fn drop(&mut self) {
        if self.fs.is_read_only() {
            // Never freed here (`fs/shared/read_only.rs`): the last close lets go of the pin.
            self.fs.release_read_only(&self.cell);
            return;
        }
        let _in = self.fs.enter();
        let mut st = self.cell.state.write();
        if self.cell.open_count.fetch_sub(1, Ordering::AcqRel) == 1 {
            if self.fs.close_waits(&self.cell) {
                return; // kept for a child on its way (`fs/shared/for_children.rs`)
            }
            self.fs.note_close(self.cell.ino);
            // Errors here cannot be returned; the next mount frees an orphan left behind.
            let _ = self.fs.maybe_free(&self.cell, &mut st);
        }
    }
}

impl<D: PmDevice> Read for File<D> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.read_at(self.pos, buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<D: PmDevice> Write for File<D> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.access.append {
            let _in = self.fs.enter();
            let (n, end) = self.fs.append(&self.cell, buf)?;
            self.pos = end;
            return Ok(n);
        }
        let n = self.write_at(self.pos, buf)?;
        self.pos += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<D: PmDevice> Seek for File<D> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let size = self.metadata()?.size;
        let new = match pos {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => size.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        match new {
            Some(p) => {
                self.pos = p;
                Ok(p)
            }
            None => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }
}
