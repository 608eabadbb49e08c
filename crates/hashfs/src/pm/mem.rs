//! `MemDevice`: an image in DRAM whose stores are plain and whose flushes and fences do
//! nothing. For runs that need a device but no crash states: the image fuzzer
//! (`fuzz.rs`), whose every input is mounted, repaired and mounted again, where
//! [`CrashDevice`](super::crash::CrashDevice)'s two copies of the image and its log of
//! pending lines cost most of an input's time. A range outside the image panics, as on
//! every device.

#![forbid(unsafe_code)]

use super::{DevOffset, DeviceStats, PmDevice};
use parking_lot::Mutex;
use std::ops::Range;

pub struct MemDevice {
    bytes: Mutex<Vec<u8>>,
    stats: DeviceStats,
}

impl MemDevice {
    /// A device holding `image`.
    pub fn from_image(image: Vec<u8>) -> MemDevice {
        MemDevice { bytes: Mutex::new(image), stats: DeviceStats::default() }
    }

    /// The image as it stands.
    pub fn image(&self) -> Vec<u8> {
        self.bytes.lock().clone()
    }
}

/// The byte range of `len` bytes at `off`, checked against the image's length.
fn range(bytes: &[u8], off: DevOffset, len: u64) -> Range<usize> {
    let end = off.0.checked_add(len).filter(|&e| e <= bytes.len() as u64);
    let Some(end) = end else {
        panic!("device access {:#x}+{len} past the image's {} bytes", off.0, bytes.len());
    };
    off.0 as usize..end as usize
}

/// The 8-byte word at `off` (8-aligned, as the trait requires).
fn word(bytes: &[u8], off: DevOffset) -> Range<usize> {
    assert!(off.0.is_multiple_of(8), "an 8-byte access at {:#x}, not 8-aligned", off.0);
    range(bytes, off, 8)
}

impl PmDevice for MemDevice {
    fn len_bytes(&self) -> u64 {
        self.bytes.lock().len() as u64
    }

    fn read(&self, off: DevOffset, buf: &mut [u8]) {
        let b = self.bytes.lock();
        buf.copy_from_slice(&b[range(&b, off, buf.len() as u64)]);
        self.stats.add_read(buf.len() as u64);
    }

    fn write(&self, off: DevOffset, data: &[u8]) {
        let mut b = self.bytes.lock();
        let r = range(&b, off, data.len() as u64);
        b[r].copy_from_slice(data);
        self.stats.add_write(data.len() as u64);
    }

    fn write_nt(&self, off: DevOffset, data: &[u8]) {
        self.write(off, data);
    }

    fn zero(&self, off: DevOffset, len: u64) {
        let mut b = self.bytes.lock();
        let r = range(&b, off, len);
        b[r].fill(0);
        self.stats.add_write(len);
    }

    fn load_u64(&self, off: DevOffset) -> u64 {
        let b = self.bytes.lock();
        u64::from_le_bytes(b[word(&b, off)].try_into().expect("8 bytes"))
    }

    fn store_u64(&self, off: DevOffset, value: u64) {
        let mut b = self.bytes.lock();
        let r = word(&b, off);
        b[r].copy_from_slice(&value.to_le_bytes());
        self.stats.add_write(8);
    }

    fn cas_u64(&self, off: DevOffset, current: u64, new: u64) -> Result<u64, u64> {
        let mut b = self.bytes.lock();
        let r = word(&b, off);
        let actual = u64::from_le_bytes(b[r.clone()].try_into().expect("8 bytes"));
        if actual != current {
            return Err(actual);
        }
        b[r].copy_from_slice(&new.to_le_bytes());
        Ok(actual)
    }

    fn flush(&self, off: DevOffset, len: u64) {
        let b = self.bytes.lock();
        range(&b, off, len);
    }

    fn fence(&self) {}

    fn stats(&self) -> &DeviceStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_bytes_round_trip_and_ranges_are_checked() {
        let d = MemDevice::from_image(vec![0; 128]);
        d.store_u64(DevOffset(8), 0x0102_0304_0506_0708);
        assert_eq!(d.load_u64(DevOffset(8)), 0x0102_0304_0506_0708);
        assert_eq!(d.cas_u64(DevOffset(8), 1, 2), Err(0x0102_0304_0506_0708));
        assert_eq!(d.cas_u64(DevOffset(8), 0x0102_0304_0506_0708, 2), Ok(0x0102_0304_0506_0708));
        d.write(DevOffset(100), b"abc");
        let mut buf = [0u8; 3];
        d.read(DevOffset(100), &mut buf);
        assert_eq!(&buf, b"abc");
        let d = std::panic::AssertUnwindSafe(d);
        assert!(std::panic::catch_unwind(|| d.read(DevOffset(126), &mut [0u8; 3])).is_err());
        assert!(std::panic::catch_unwind(|| d.load_u64(DevOffset(4))).is_err());
    }
}
