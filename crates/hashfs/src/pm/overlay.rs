//! A copy-on-write view of a device, for fsck's check mode: reads see the device under
//! the words written so far; writes land in DRAM only, so journal recovery can run on the
//! view without touching the image.

#![forbid(unsafe_code)]

use super::{DevOffset, DeviceStats, PmDevice};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// A copy-on-write view of a device: writes land in DRAM, so check mode can run journal
/// recovery without touching the image.
pub struct Overlay<D: PmDevice> {
    base: Arc<D>,
    words: Mutex<HashMap<u64, u64>>,
    stats: DeviceStats,
}

impl<D: PmDevice> Overlay<D> {
    pub fn new(base: Arc<D>) -> Overlay<D> {
        Overlay { base, words: Mutex::new(HashMap::new()), stats: DeviceStats::default() }
    }

    fn word(&self, w: u64) -> u64 {
        if let Some(v) = self.words.lock().get(&w) {
            return *v;
        }
        let mut b = [0u8; 8];
        self.base.read(DevOffset(w * 8), &mut b);
        u64::from_le_bytes(b)
    }
}

impl<D: PmDevice> PmDevice for Overlay<D> {
    fn len_bytes(&self) -> u64 {
        self.base.len_bytes()
    }
    fn read(&self, off: DevOffset, buf: &mut [u8]) {
        self.base.read(off, buf);
        let off = off.0;
        let words = self.words.lock();
        if words.is_empty() {
            return;
        }
        for (i, b) in buf.iter_mut().enumerate() {
            let byte = off + i as u64;
            if let Some(v) = words.get(&(byte / 8)) {
                *b = v.to_le_bytes()[(byte % 8) as usize];
            }
        }
    }
    fn write(&self, off: DevOffset, data: &[u8]) {
        let off = off.0;
        for (i, &b) in data.iter().enumerate() {
            let byte = off + i as u64;
            let mut v = self.word(byte / 8).to_le_bytes();
            v[(byte % 8) as usize] = b;
            self.words.lock().insert(byte / 8, u64::from_le_bytes(v));
        }
    }
    fn write_nt(&self, off: DevOffset, data: &[u8]) {
        self.write(off, data)
    }
    fn zero(&self, off: DevOffset, len: u64) {
        self.write(off, &vec![0u8; len as usize])
    }
    fn load_u64(&self, off: DevOffset) -> u64 {
        let off = off.0;
        self.word(off / 8)
    }
    fn store_u64(&self, off: DevOffset, value: u64) {
        let off = off.0;
        self.words.lock().insert(off / 8, value);
    }
    fn cas_u64(&self, off: DevOffset, current: u64, new: u64) -> std::result::Result<u64, u64> {
        let off = off.0;
        let v = self.word(off / 8);
        if v == current {
            self.store_u64(DevOffset(off), new);
            Ok(v)
        } else {
            Err(v)
        }
    }
    // The overlay is a scratch view in DRAM that is dropped after the check; nothing in it
    // is ever meant to persist, so there is nothing to write back or order.
    fn flush(&self, _off: DevOffset, _len: u64) {}
    fn fence(&self) {}
    fn stats(&self) -> &DeviceStats {
        &self.stats
    }
}
