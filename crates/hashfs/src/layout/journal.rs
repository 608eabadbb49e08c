//! The undo journals' on-media format (the protocol is in `journal.rs`): per CPU, one
//! 64-byte header and a ring of 64-byte checksummed undo entries.

#![forbid(unsafe_code)]

use bytemuck::{Pod, Zeroable};

pub const JOURNAL_HEADER_BYTES: u64 = 64;
pub const ENTRY_BYTES: u64 = 64;
pub const ENTRY_DATA_BYTES: usize = 44;
pub const JOURNAL_MAGIC: u64 = u64::from_le_bytes(*b"HFSJRNL\x01");
pub const ACTIVE_TXID_OFF: u64 = 16;

#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct JournalHeader {
    pub magic: u64,
    pub index: u32,
    pub reserved0: u32,
    /// The transaction whose undo entries are live, 0 when none.
    pub active_txid: u64,
    pub reserved: [u64; 5],
}
const _: () = assert!(std::mem::size_of::<JournalHeader>() == JOURNAL_HEADER_BYTES as usize);
const _: () = assert!(std::mem::offset_of!(JournalHeader, active_txid) == ACTIVE_TXID_OFF as usize);

/// One undo record: the old contents of up to 44 bytes at `target`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct UndoEntry {
    pub txid: u64,
    /// Bits 0..48: device offset; bits 48..56: length (1..=44); bits 56..64: reserved (0).
    pub target: u64,
    pub data: [u8; ENTRY_DATA_BYTES],
    /// CRC32C of bytes 0..60.
    pub checksum: u32,
}
const _: () = assert!(std::mem::size_of::<UndoEntry>() == ENTRY_BYTES as usize);

impl UndoEntry {
    pub fn new(txid: u64, off: u64, old: &[u8]) -> UndoEntry {
        debug_assert!(old.len() <= ENTRY_DATA_BYTES && off < (1 << 48));
        let mut e = UndoEntry::zeroed();
        e.txid = txid;
        e.target = off | ((old.len() as u64) << 48);
        e.data[..old.len()].copy_from_slice(old);
        e.checksum = e.compute_checksum();
        e
    }
    pub fn compute_checksum(&self) -> u32 {
        crc32c::crc32c(&bytemuck::bytes_of(self)[..60])
    }
    pub fn offset(&self) -> u64 {
        self.target & ((1 << 48) - 1)
    }
    pub fn data_len(&self) -> usize {
        ((self.target >> 48) & 0xFF) as usize
    }
    pub fn is_valid_for(&self, txid: u64, image_len: u64) -> bool {
        self.txid == txid
            && self.checksum == self.compute_checksum()
            && self.target >> 56 == 0
            && (1..=ENTRY_DATA_BYTES).contains(&self.data_len())
            && self.offset() + self.data_len() as u64 <= image_len
    }
}
