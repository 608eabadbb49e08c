//! [`CrashDevice`]: an in-memory device that knows which stores are durable.
//!
//! It keeps two images, after redb's crash-test backend: the *live* image that loads see,
//! and the *durable* image that a power failure would keep for certain. A store makes its
//! 8-byte words *pending*; `flush` snapshots the pending words of its range; `fence` makes
//! those snapshots durable. A power failure can leave the durable image plus any subset of
//! the pending words (the CPU may write back any cache line at any time, but never tears an
//! aligned 8-byte word).
//!
//! With capture on, every fence records a [`CrashPoint`] (the state just before the fence
//! takes effect), from which tests build the images a crash at that instant could leave.

use super::{lines_in, DevOffset, DeviceStats, PmDevice};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};

struct State {
    live: Vec<u64>,
    durable: Vec<u64>,
    /// Words stored since they were last made durable, mapped to nothing (ordered set).
    pending: BTreeMap<usize, ()>,
    /// Words written back by `flush` since the last fence, with the value written back.
    flushed: HashMap<usize, u64>,
    capture: bool,
    points: Vec<CrashPoint>,
}

/// The durable image and the words that may or may not have reached the media.
#[derive(Clone)]
pub struct CrashPoint {
    /// Index of the fence (counted from device creation) this point precedes.
    pub fence_index: u64,
    pub durable: Vec<u64>,
    /// (word index, latest value) of every word stored but not yet durable.
    pub pending: Vec<(usize, u64)>,
}

impl CrashPoint {
    /// The image with exactly the pending words selected by `keep` applied.
    pub fn image_with(&self, mut keep: impl FnMut(usize) -> bool) -> Vec<u8> {
        let mut words = self.durable.clone();
        for (i, &(w, v)) in self.pending.iter().enumerate() {
            if keep(i) {
                words[w] = v;
            }
        }
        words_to_bytes(&words)
    }

    /// Only what was flushed and fenced.
    pub fn image_durable_only(&self) -> Vec<u8> {
        self.image_with(|_| false)
    }

    /// Everything that was stored, as if every cache line had been written back.
    pub fn image_all_pending(&self) -> Vec<u8> {
        self.image_with(|_| true)
    }
}

fn words_to_bytes(words: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(words.len() * 8);
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out
}

/// An in-memory device with crash simulation.
pub struct CrashDevice {
    len: u64,
    state: Mutex<State>,
    fences: std::sync::atomic::AtomicU64,
    stats: DeviceStats,
}

impl CrashDevice {
    /// A zeroed device of `len_bytes` (rounded up to 8).
    pub fn new(len_bytes: u64) -> CrashDevice {
        Self::from_image(&vec![0u8; len_bytes.div_ceil(8) as usize * 8])
    }

    /// A device whose live and durable images both hold `image`.
    pub fn from_image(image: &[u8]) -> CrashDevice {
        let mut words = vec![0u64; image.len().div_ceil(8)];
        for (i, chunk) in image.chunks(8).enumerate() {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            words[i] = u64::from_le_bytes(b);
        }
        CrashDevice {
            len: words.len() as u64 * 8,
            state: Mutex::new(State {
                durable: words.clone(),
                live: words,
                pending: BTreeMap::new(),
                flushed: HashMap::new(),
                capture: false,
                points: Vec::new(),
            }),
            fences: Default::default(),
            stats: DeviceStats::default(),
        }
    }

    /// Starts or stops recording a [`CrashPoint`] at every fence.
    pub fn set_capture(&self, on: bool) {
        self.state.lock().capture = on;
    }

    /// Takes the recorded crash points.
    pub fn take_points(&self) -> Vec<CrashPoint> {
        std::mem::take(&mut self.state.lock().points)
    }

    /// The crash point "now": what a power failure at this instant could leave.
    pub fn crash_point_now(&self) -> CrashPoint {
        let st = self.state.lock();
        Self::point(&st, self.fences.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn point(st: &State, fence_index: u64) -> CrashPoint {
        CrashPoint {
            fence_index,
            durable: st.durable.clone(),
            pending: st.pending.keys().filter(|&&w| st.live[w] != st.durable[w]).map(|&w| (w, st.live[w])).collect(),
        }
    }

    /// The live image (what loads see).
    pub fn live_image(&self) -> Vec<u8> {
        words_to_bytes(&self.state.lock().live)
    }

    /// The durable image (what survives a crash for certain).
    pub fn durable_image(&self) -> Vec<u8> {
        words_to_bytes(&self.state.lock().durable)
    }

    fn check(&self, off: DevOffset, len: u64) {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "device access out of range: {off}+{len} > {}",
            self.len
        );
    }
}

fn store_bytes(st: &mut State, off: u64, data: &[u8]) {
    let mut pos = 0usize;
    while pos < data.len() {
        let byte = off as usize + pos;
        let w = byte / 8;
        let in_word = byte % 8;
        let n = (8 - in_word).min(data.len() - pos);
        let mut b = st.live[w].to_le_bytes();
        b[in_word..in_word + n].copy_from_slice(&data[pos..pos + n]);
        st.live[w] = u64::from_le_bytes(b);
        st.pending.insert(w, ());
        pos += n;
    }
}

fn flush_words(st: &mut State, off: u64, len: u64) {
    if len == 0 {
        return;
    }
    let first = (off & !63) as usize / 8;
    let last = ((off + len - 1) as usize / 8) | 7;
    let last = last.min(st.live.len() - 1);
    let words: Vec<usize> = st.pending.range(first..=last).map(|(&w, _)| w).collect();
    for w in words {
        let v = st.live[w];
        st.flushed.insert(w, v);
    }
}

impl PmDevice for CrashDevice {
    fn len_bytes(&self) -> u64 {
        self.len
    }

    fn read(&self, off: DevOffset, buf: &mut [u8]) {
        self.check(off, buf.len() as u64);
        let st = self.state.lock();
        for (i, b) in buf.iter_mut().enumerate() {
            let byte = off as usize + i;
            *b = st.live[byte / 8].to_le_bytes()[byte % 8];
        }
        self.stats.add_read(buf.len() as u64);
    }

    fn write(&self, off: DevOffset, data: &[u8]) {
        self.check(off, data.len() as u64);
        store_bytes(&mut self.state.lock(), off, data);
        self.stats.add_write(data.len() as u64);
    }

    fn write_nt(&self, off: DevOffset, data: &[u8]) {
        self.check(off, data.len() as u64);
        let mut st = self.state.lock();
        store_bytes(&mut st, off, data);
        flush_words(&mut st, off, data.len() as u64);
        self.stats.add_write(data.len() as u64);
    }

    fn zero(&self, off: DevOffset, len: u64) {
        self.check(off, len);
        store_bytes(&mut self.state.lock(), off, &vec![0u8; len as usize]);
        self.stats.add_write(len);
    }

    fn load_u64(&self, off: DevOffset) -> u64 {
        assert!(off.is_multiple_of(8));
        self.check(off, 8);
        self.stats.add_read(8);
        self.state.lock().live[off as usize / 8]
    }

    fn store_u64(&self, off: DevOffset, value: u64) {
        assert!(off.is_multiple_of(8));
        self.check(off, 8);
        let mut st = self.state.lock();
        st.live[off as usize / 8] = value;
        st.pending.insert(off as usize / 8, ());
        self.stats.add_write(8);
    }

    fn cas_u64(&self, off: DevOffset, current: u64, new: u64) -> Result<u64, u64> {
        assert!(off.is_multiple_of(8));
        self.check(off, 8);
        let mut st = self.state.lock();
        let w = off as usize / 8;
        self.stats.add_write(8);
        if st.live[w] == current {
            st.live[w] = new;
            st.pending.insert(w, ());
            Ok(current)
        } else {
            Err(st.live[w])
        }
    }

    fn flush(&self, off: DevOffset, len: u64) {
        self.check(off, len);
        flush_words(&mut self.state.lock(), off, len);
        self.stats.add_flush(lines_in(off, len));
    }

    fn fence(&self) {
        let index = self.fences.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut st = self.state.lock();
        if st.capture {
            let p = Self::point(&st, index);
            st.points.push(p);
        }
        let flushed = std::mem::take(&mut st.flushed);
        for (w, v) in flushed {
            st.durable[w] = v;
            if st.live[w] == v {
                st.pending.remove(&w);
            }
        }
        self.stats.add_fence();
    }

    fn stats(&self) -> &DeviceStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unflushed_store_is_not_durable() {
        let d = CrashDevice::new(4096);
        d.store_u64(64, 7);
        d.fence();
        assert_eq!(d.durable_image()[64], 0);
        assert_eq!(d.crash_point_now().pending, vec![(8, 7)]);
    }

    #[test]
    fn flush_then_fence_is_durable() {
        let d = CrashDevice::new(4096);
        d.write(100, &[1, 2, 3]);
        d.flush(100, 3);
        assert_eq!(d.durable_image()[100], 0, "flush alone does not persist");
        d.fence();
        assert_eq!(&d.durable_image()[100..103], &[1, 2, 3]);
        assert!(d.crash_point_now().pending.is_empty());
    }

    #[test]
    fn store_after_flush_stays_pending() {
        let d = CrashDevice::new(4096);
        d.store_u64(0, 1);
        d.flush(0, 8);
        d.store_u64(0, 2);
        d.fence();
        // The write-back carried value 1; value 2 may or may not have followed.
        let p = d.crash_point_now();
        assert_eq!(p.durable[0], 1);
        assert_eq!(p.pending, vec![(0, 2)]);
    }

    #[test]
    fn capture_records_state_before_each_fence() {
        let d = CrashDevice::new(4096);
        d.set_capture(true);
        d.store_u64(8, 5);
        d.flush(8, 8);
        d.fence();
        d.store_u64(16, 6);
        d.fence();
        let pts = d.take_points();
        assert_eq!(pts.len(), 2);
        assert_eq!(pts[0].durable[1], 0);
        assert_eq!(pts[0].pending, vec![(1, 5)]);
        assert_eq!(pts[1].durable[1], 5);
        assert_eq!(pts[1].pending, vec![(2, 6)]);
        assert_eq!(pts[1].image_all_pending()[16], 6);
        assert_eq!(pts[1].image_durable_only()[16], 0);
    }
}
