//! Directory contents: 32-byte slots in the directory's data blocks (layout::dirent) and a
//! DRAM index (name -> entry, free runs by size) built on first use, so that lookup,
//! insert and remove are O(1) whatever the directory's size.

#![forbid(unsafe_code)]

use crate::layout::dirent::{
    slots_for, valid_name, DirentHeader, FileType, DIRENT_HEADER_BYTES, DIRENT_SLOT_BYTES, MAX_DIRENT_SLOTS,
    SLOTS_PER_BLOCK,
};
use crate::layout::{Geometry, Ino, Lblk, Pblk, BLOCK_BYTES, MAX_NAME_BYTES};
use crate::pm::{DevOffset, PmDevice};
use crate::{Error, Result};
use bytemuck::Zeroable;
use std::collections::HashMap;

/// Where a name lives in its directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef {
    pub ino: Ino,
    pub ftype: FileType,
    /// Slot index from the start of the directory.
    pub pos: u64,
    pub nslots: u8,
}

pub struct DirIndex {
    names: HashMap<Box<[u8]>, EntryRef>,
    /// Free runs, indexed by their length in slots (1..=9).
    free: [Vec<u64>; MAX_DIRENT_SLOTS as usize + 1],
    /// First slot of the never-used tail.
    tail: u64,
    /// Physical slot (data block) of each directory block.
    blocks: Vec<Pblk>,
}

/// A slot run chosen for a new entry; `new_block` is a directory block reserved in the
/// table and zeroed, to be published with the transaction that adds the entry.
pub struct SlotAlloc {
    pub pos: u64,
    pub nslots: u8,
    pub new_block: Option<(Lblk, Pblk)>,
}

/// Validates a name for a new entry.
pub fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::NameTooLong);
    }
    if !valid_name(name) {
        return Err(Error::Invalid("invalid file name"));
    }
    Ok(())
}

fn read_header<D: PmDevice>(dev: &D, off: DevOffset) -> DirentHeader {
    let mut h = DirentHeader::zeroed();
    dev.read(off, bytemuck::bytes_of_mut(&mut h));
    h
}

/// One parsed slot run of a directory block.
pub enum Run {
    Entry { pos: u64, nslots: u8, ino: Ino, ftype: u8, name: Vec<u8> },
    Free { pos: u64, nslots: u8 },
    Zero { pos: u64 },
}

/// Parses one 4 KiB directory block (lblk `lblk`) into runs; errors name the problem.
pub fn parse_block(buf: &[u8], lblk: u64) -> std::result::Result<Vec<Run>, String> {
    let mut runs = Vec::new();
    let mut i = 0u64;
    while i < SLOTS_PER_BLOCK {
        let off = (i * DIRENT_SLOT_BYTES) as usize;
        let h: DirentHeader = *bytemuck::from_bytes(&buf[off..off + DIRENT_HEADER_BYTES]);
        let pos = lblk * SLOTS_PER_BLOCK + i;
        if h.ino_hi != 0 {
            return Err(format!("slot {pos}: inode word beyond 32 bits"));
        }
        if h.nslots == 0 {
            // Unused. Its other bytes may hold the name of an entry whose creation was cut
            // short (the name and the header word persist independently); the inode word
            // is set only after the header is durable, so it must be 0.
            if h.ino != 0 {
                return Err(format!("slot {pos}: inode {} with a zero length", h.ino));
            }
            runs.push(Run::Zero { pos });
            i += 1;
            continue;
        }
        if h.nslots > MAX_DIRENT_SLOTS || i + h.nslots as u64 > SLOTS_PER_BLOCK {
            return Err(format!("slot {pos}: run of {} slots overruns its block", h.nslots));
        }
        if h.ino == 0 {
            runs.push(Run::Free { pos, nslots: h.nslots });
        } else {
            let len = h.name_len as usize;
            if len == 0 || DIRENT_HEADER_BYTES + len > h.nslots as usize * DIRENT_SLOT_BYTES as usize {
                return Err(format!("slot {pos}: name length {len} does not fit {} slots", h.nslots));
            }
            let name = buf[off + DIRENT_HEADER_BYTES..off + DIRENT_HEADER_BYTES + len].to_vec();
            if !valid_name(&name) {
                return Err(format!("slot {pos}: invalid name {:?}", String::from_utf8_lossy(&name)));
            }
            runs.push(Run::Entry { pos, nslots: h.nslots, ino: Ino(h.ino), ftype: h.file_type, name });
        }
        i += h.nslots as u64;
    }
    Ok(runs)
}

impl DirIndex {
    /// Directory block `lblk` now lies in `to` (the regions placement moved it).
    pub fn remap(&mut self, lblk: Lblk, to: Pblk) {
        if let Some(b) = self.blocks.get_mut(lblk.0 as usize) {
            *b = to;
        }
    }

    /// Builds the index of directory `ino` (size `size_bytes`) from the media.
    pub fn build<D: PmDevice>(
        dev: &D,
        geo: &Geometry,
        lookup: &dyn Fn(Lblk) -> Result<Option<Pblk>>,
        ino: Ino,
        size_bytes: u64,
    ) -> Result<DirIndex> {
        let nblocks = size_bytes / BLOCK_BYTES;
        // A size read from the media: a directory holds no more blocks than the device
        // (a damaged size would otherwise size the index's vector, found by the fuzzer).
        if nblocks > geo.data_blocks {
            return Err(Error::corrupt(format!(
                "directory {ino}: size {size_bytes} is more blocks than the device has"
            )));
        }
        let mut idx = DirIndex {
            names: HashMap::new(),
            free: Default::default(),
            tail: 0,
            blocks: Vec::with_capacity(nblocks as usize),
        };
        let mut zeros = Vec::new();
        let mut buf = vec![0u8; BLOCK_BYTES as usize];
        for lblk in 0..nblocks {
            let slot = lookup(Lblk(lblk))?
                .ok_or_else(|| Error::corrupt(format!("directory {ino}: block {lblk} is not mapped")))?;
            idx.blocks.push(slot);
            dev.read(geo.block_off(slot), &mut buf);
            let runs = parse_block(&buf, lblk).map_err(|e| Error::corrupt(format!("directory {ino}: {e}")))?;
            for run in runs {
                match run {
                    Run::Zero { pos } => zeros.push(pos),
                    Run::Free { pos, nslots } => {
                        idx.free[nslots as usize].push(pos);
                        idx.tail = pos + nslots as u64;
                    }
                    Run::Entry { pos, nslots, ino: e_ino, ftype, name } => {
                        let ftype = FileType::from_u8(ftype)
                            .ok_or_else(|| Error::corrupt(format!("directory {ino}: slot {pos}: bad file type")))?;
                        // An entry naming its own directory (or the root, which no entry
                        // names) is damage: followed, it would loop, and an unlink would take
                        // the directory's lock twice.
                        if e_ino == ino || e_ino == Ino::ROOT {
                            return Err(Error::corrupt(format!("directory {ino}: slot {pos} names inode {e_ino}")));
                        }
                        let r = EntryRef { ino: e_ino, ftype, pos, nslots };
                        if idx.names.insert(name.into_boxed_slice(), r).is_some() {
                            return Err(Error::corrupt(format!("directory {ino}: duplicate name at slot {pos}")));
                        }
                        idx.tail = pos + nslots as u64;
                    }
                }
            }
        }
        idx.free[1].extend(zeros.into_iter().filter(|&p| p < idx.tail));
        Ok(idx)
    }

    pub fn get(&self, name: &[u8]) -> Option<EntryRef> {
        self.names.get(name).copied()
    }

    /// Device offset of slot `pos`.
    pub fn slot_dev_off(&self, geo: &Geometry, pos: u64) -> DevOffset {
        let blk = self.blocks[(pos / SLOTS_PER_BLOCK) as usize];
        geo.block_off(blk) + (pos % SLOTS_PER_BLOCK) * DIRENT_SLOT_BYTES
    }

    /// Chooses slots for a name of `name_len` bytes, reserving and zeroing a new
    /// directory block if needed (its key is published by the caller's transaction).
    pub fn alloc<D: PmDevice>(
        &mut self,
        dev: &D,
        geo: &Geometry,
        claim: &dyn Fn(Lblk) -> Result<Pblk>,
        name_len: usize,
    ) -> Result<SlotAlloc> {
        let c = slots_for(name_len);
        if let Some(pos) = self.free[c as usize].pop() {
            return Ok(SlotAlloc { pos, nslots: c, new_block: None });
        }
        if self.tail % SLOTS_PER_BLOCK + c as u64 > SLOTS_PER_BLOCK {
            let next = (self.tail / SLOTS_PER_BLOCK + 1) * SLOTS_PER_BLOCK;
            self.free[1].extend(self.tail..next);
            self.tail = next;
        }
        let mut new_block = None;
        if self.tail == self.blocks.len() as u64 * SLOTS_PER_BLOCK {
            let lblk = Lblk(self.blocks.len() as u64);
            let slot = claim(lblk)?;
            dev.zero(geo.block_off(slot), BLOCK_BYTES);
            dev.flush(geo.block_off(slot), BLOCK_BYTES);
            new_block = Some((lblk, slot));
            self.blocks.push(slot);
        }
        let pos = self.tail;
        self.tail += c as u64;
        Ok(SlotAlloc { pos, nslots: c, new_block })
    }

    /// Gives back an allocation whose transaction failed. The header written for it (if
    /// any) marks a free run, so the slots return to the free list.
    pub fn unalloc(&mut self, release: &dyn Fn(Pblk), a: &SlotAlloc) {
        self.free[a.nslots as usize].push(a.pos);
        if let Some((_, slot)) = a.new_block {
            // The block stays in `blocks` (its slots are free); the table slot is released
            // and the block removed only if it is the last one and unused.
            if self.blocks.last() == Some(&slot) {
                self.blocks.pop();
                let start = self.blocks.len() as u64 * SLOTS_PER_BLOCK;
                for list in self.free.iter_mut() {
                    list.retain(|&p| p < start);
                }
                self.tail = self.tail.min(start);
                release(slot);
            }
        }
    }

    /// Writes the header (with inode word 0) and name of a new entry and flushes them;
    /// the caller's transaction then sets the inode word.
    pub fn write_pending_entry<D: PmDevice>(
        &self,
        dev: &D,
        geo: &Geometry,
        a: &SlotAlloc,
        name: &[u8],
        ftype: FileType,
    ) {
        let off = self.slot_dev_off(geo, a.pos);
        let mut bytes = vec![0u8; a.nslots as usize * DIRENT_SLOT_BYTES as usize];
        let h = DirentHeader {
            ino: 0,
            ino_hi: 0,
            nslots: a.nslots,
            name_len: name.len() as u8,
            file_type: ftype.to_u8(),
            reserved: [0; 5],
        };
        bytes[..DIRENT_HEADER_BYTES].copy_from_slice(bytemuck::bytes_of(&h));
        bytes[DIRENT_HEADER_BYTES..DIRENT_HEADER_BYTES + name.len()].copy_from_slice(name);
        // The inode word is left as it is (0): write from byte 8 on. A run taken from the
        // never-used tail has no durable length yet; if it spans several slots, the header
        // must be durable before the name, or a crash could leave name bytes in the
        // following slots that a scan would read as headers.
        if a.nslots > 1 && read_header(dev, off).nslots != a.nslots {
            dev.write(off + 8, &bytes[8..16]);
            dev.flush(off + 8, 8);
            dev.fence();
        }
        dev.write(off + 8, &bytes[8..]);
        dev.flush(off, bytes.len() as u64);
    }

    /// The second header word (nslots, name length, type) for a transaction that changes
    /// an entry's type in place (rename over an entry of another type).
    pub fn header_word1(nslots: u8, name_len: usize, ftype: FileType) -> u64 {
        u64::from_le_bytes([nslots, name_len as u8, ftype.to_u8(), 0, 0, 0, 0, 0])
    }

    /// Records a committed new entry.
    pub fn insert(&mut self, name: &[u8], r: EntryRef) {
        self.names.insert(name.into(), r);
    }

    /// Records a committed removal.
    pub fn remove(&mut self, name: &[u8]) -> Option<EntryRef> {
        let r = self.names.remove(name)?;
        self.free[r.nslots as usize].push(r.pos);
        Some(r)
    }

    /// Records a committed in-place change of an entry's inode (rename over it).
    pub fn replace(&mut self, name: &[u8], ino: Ino, ftype: FileType) {
        if let Some(r) = self.names.get_mut(name) {
            r.ino = ino;
            r.ftype = ftype;
        }
    }
}

/// An entry returned by readdir; `cookie` resumes the listing after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawDirEntry {
    pub name: Vec<u8>,
    pub ino: Ino,
    pub file_type: FileType,
    pub cookie: u64,
}

/// Lists live entries from slot `from_pos` on, in slot order, reading the media.
pub fn list_from<D: PmDevice>(
    dev: &D,
    geo: &Geometry,
    idx: &DirIndex,
    from_pos: u64,
    max: usize,
) -> Result<Vec<RawDirEntry>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; BLOCK_BYTES as usize];
    let mut lblk = from_pos / SLOTS_PER_BLOCK;
    while (lblk as usize) < idx.blocks.len() && out.len() < max {
        dev.read(geo.block_off(idx.blocks[lblk as usize]), &mut buf);
        let runs = parse_block(&buf, lblk).map_err(|e| Error::corrupt(format!("directory: {e}")))?;
        for run in runs {
            if let Run::Entry { pos, nslots, ino, ftype, name } = run {
                if pos >= from_pos && out.len() < max {
                    let file_type =
                        FileType::from_u8(ftype).ok_or_else(|| Error::corrupt("directory: bad file type"))?;
                    out.push(RawDirEntry { name, ino, file_type, cookie: pos + nslots as u64 });
                }
            }
        }
        lblk += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry's inode word with a high half (inode numbers are 32 bits on the media) is
    /// corruption, not an inode past 2^32.
    #[test]
    fn inode_word_high_half_is_corruption() {
        let mut blk = vec![0u8; BLOCK_BYTES as usize];
        let h = DirentHeader { ino: 5, ino_hi: 0, nslots: 1, name_len: 1, file_type: 8, reserved: [0; 5] };
        blk[..DIRENT_HEADER_BYTES].copy_from_slice(bytemuck::bytes_of(&h));
        blk[DIRENT_HEADER_BYTES] = b'a';
        let runs = parse_block(&blk, 0).unwrap();
        assert!(matches!(runs[0], Run::Entry { ino: Ino(5), .. }));
        blk[4] = 1; // ino_hi
        let e = parse_block(&blk, 0).err().expect("refused");
        assert!(e.contains("beyond 32 bits"), "{e}");
    }
}
