//! [`CrashDevice`]: an in-memory device that knows what a power failure could leave.
//!
//! It keeps the *live* image that loads see and the *durable* image that a power failure
//! keeps for certain, and between them, per 64-byte cache line, the log of stores made to
//! the line since it was last made durable. The persistence model (docs/design.md,
//! "Persistence model") is x86's:
//!
//! - A cache line can be written back by the CPU at any moment, and what reaches the media
//!   is the line as it was at that moment: the durable contents plus a *prefix*, in program
//!   order, of the stores made to the line since. Lines are independent of each other.
//! - `flush` (clwb / clflushopt / clflush) writes back the line as it is; the stores it
//!   covered are durable at the next `fence` (sfence). Stores made after the flush stay
//!   pending.
//! - Non-temporal stores bypass the cache: each aligned 8-byte word of one is independently
//!   old or new until the next fence, and durable after it. A non-temporal store to a line
//!   that holds cached stores evicts the line first (Intel SDM, MOVNTI/MOVNTDQ), so those
//!   stores are durable at the next fence too, but, like the words, they may or may not
//!   have reached the media before it.
//!
//! With capture on, every fence records a [`CrashPoint`] (the state just before the fence
//! takes effect): the durable image and, per pending line, every contents a crash could
//! leave in it. [`CrashPoint::state_count`] says how many images that makes.
//!
//! For the other failure, a process killed while it changes a shared image, the device
//! also records every store in program order ([`CrashDevice::record_stores`]): the others
//! then see every store the dead process made (they share the cache) and none after, so
//! each prefix of that list applied to the live image before it is a state to recover.
//! A store is one device call's bytes in one line ([`LineStore`]): a kill inside a copy
//! of several lines stops it between two of them (the model does not split a line).

#![forbid(unsafe_code)]

use super::{lines_in, DevOffset, DeviceStats, PmDevice};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const LINE: usize = 64;

/// One store to a line: which bytes, with what, and whether it was non-temporal.
#[derive(Clone)]
struct Store {
    nt: bool,
    /// Bit `i` set: byte `i` of the line was written.
    mask: u64,
    data: [u8; LINE],
}

impl Store {
    fn apply(&self, line: &mut [u8; LINE], word_mask: u8) {
        for (i, b) in line.iter_mut().enumerate() {
            if self.mask >> i & 1 == 1 && word_mask >> (i / 8) & 1 == 1 {
                *b = self.data[i];
            }
        }
    }
}

/// One line's part of one storing device call, as a process death sees it.
#[derive(Clone)]
pub struct LineStore {
    /// The device call it is part of (numbered from device creation).
    pub call: u64,
    line: usize,
    mask: u64,
    data: [u8; LINE],
}

impl LineStore {
    /// Makes the store in `image`.
    pub fn apply(&self, image: &mut [u8]) {
        let at = self.line * LINE;
        for (i, b) in image[at..at + LINE].iter_mut().enumerate() {
            if self.mask >> i & 1 == 1 {
                *b = self.data[i];
            }
        }
    }

    /// The line's index (byte offset / 64).
    pub fn line(&self) -> usize {
        self.line
    }
}

/// The stores made to one line since it was last durable.
#[derive(Clone, Default)]
struct LineLog {
    stores: Vec<Store>,
    /// How many of `stores` a flush (or a non-temporal store) has written back since the
    /// last fence: they become durable at the next fence.
    written_back: usize,
}

impl LineLog {
    /// Every contents the line may hold after a crash, given its durable contents: a prefix
    /// of the cached stores, and each word written by non-temporal stores old or new.
    /// Deduplicated; the first is the durable contents, the last the latest.
    fn outcomes(&self, durable: &[u8; LINE]) -> Vec<[u8; LINE]> {
        let cached = self.stores.iter().filter(|s| !s.nt).count();
        let nt_words: u8 = self
            .stores
            .iter()
            .filter(|s| s.nt)
            .fold(0u8, |acc, s| acc | (0..8).fold(0u8, |w, i| w | (((s.mask >> (i * 8)) & 0xFF != 0) as u8) << i));
        // Every subset of the non-temporal words, as a mask over the line's 8 words.
        let mut subsets = vec![0u8];
        for w in 0..8 {
            if nt_words >> w & 1 == 1 {
                let more: Vec<u8> = subsets.iter().map(|s| s | 1 << w).collect();
                subsets.extend(more);
            }
        }
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        let mut push = |line: [u8; LINE], out: &mut Vec<[u8; LINE]>| {
            if seen.insert(line) {
                out.push(line);
            }
        };
        push(*durable, &mut out);
        for k in 0..=cached {
            for &nt in &subsets {
                let mut line = *durable;
                let mut taken = 0;
                for s in &self.stores {
                    if s.nt {
                        s.apply(&mut line, nt);
                    } else if taken < k {
                        s.apply(&mut line, 0xFF);
                        taken += 1;
                    }
                }
                push(line, &mut out);
            }
        }
        // The latest contents last (every store applied).
        let mut latest = *durable;
        for s in &self.stores {
            s.apply(&mut latest, 0xFF);
        }
        if let Some(i) = out.iter().position(|l| *l == latest) {
            let l = out.remove(i);
            out.push(l);
        }
        out
    }
}

struct State {
    live: Vec<u8>,
    durable: Vec<u8>,
    /// Lines with stores that are not yet durable, by line index.
    pending: BTreeMap<usize, LineLog>,
    capture: bool,
    points: Vec<CrashPoint>,
    /// Every store in program order, while [`CrashDevice::record_stores`] is on.
    stores: Option<Vec<LineStore>>,
    /// While stores are recorded: what `probe` returned as each storing device call began,
    /// with the number of stores before it ([`CrashDevice::record_stores_with`]).
    probed: Vec<(usize, Vec<u8>)>,
    probe: Option<Arc<dyn Fn() -> Vec<u8> + Send + Sync>>,
    /// Storing device calls made so far.
    calls: u64,
}

/// One line that a crash may leave in more than one state.
#[derive(Clone, Debug)]
pub struct PendingLine {
    /// Line index (byte offset / 64).
    pub line: usize,
    /// Every contents the line may hold: `outcomes[0]` is the durable one, the last is the
    /// latest (every store reached the media).
    pub outcomes: Vec<[u8; LINE]>,
}

/// What a power failure at one instant could leave: the durable image, and the lines that
/// may hold any of several contents.
#[derive(Clone)]
pub struct CrashPoint {
    /// Index of the fence (counted from device creation) this point precedes.
    pub fence_index: u64,
    pub durable: Vec<u8>,
    /// Lines with more than one possible contents, in address order.
    pub lines: Vec<PendingLine>,
}

impl CrashPoint {
    /// The image with line `i` of [`CrashPoint::lines`] holding outcome `choice(i)`
    /// (clamped to the last).
    pub fn image_choosing(&self, mut choice: impl FnMut(usize) -> usize) -> Vec<u8> {
        let mut img = self.durable.clone();
        for (i, l) in self.lines.iter().enumerate() {
            let c = choice(i).min(l.outcomes.len() - 1);
            img[l.line * LINE..(l.line + 1) * LINE].copy_from_slice(&l.outcomes[c]);
        }
        img
    }

    /// The image with the lines selected by `keep` at their latest contents and the others
    /// at their durable ones.
    pub fn image_with(&self, mut keep: impl FnMut(usize) -> bool) -> Vec<u8> {
        self.image_choosing(|i| if keep(i) { usize::MAX } else { 0 })
    }

    /// Only what was flushed and fenced.
    pub fn image_durable_only(&self) -> Vec<u8> {
        self.image_with(|_| false)
    }

    /// Everything that was stored, as if every cache line had been written back.
    pub fn image_all_pending(&self) -> Vec<u8> {
        self.image_with(|_| true)
    }

    /// How many distinct images this point stands for (saturating).
    pub fn state_count(&self) -> u64 {
        self.lines.iter().fold(1u64, |acc, l| acc.saturating_mul(l.outcomes.len() as u64))
    }
}

/// An in-memory device with crash simulation.
pub struct CrashDevice {
    len: u64,
    state: Mutex<State>,
    fences: std::sync::atomic::AtomicU64,
    stats: DeviceStats,
}

impl CrashDevice {
    /// A zeroed device of `len_bytes` (rounded up to a cache line).
    pub fn new(len_bytes: u64) -> CrashDevice {
        Self::from_image(&vec![0u8; len_bytes.div_ceil(LINE as u64) as usize * LINE])
    }

    /// A device whose live and durable images both hold `image` (padded to a cache line).
    pub fn from_image(image: &[u8]) -> CrashDevice {
        let mut bytes = image.to_vec();
        bytes.resize(image.len().div_ceil(LINE) * LINE, 0);
        CrashDevice {
            len: bytes.len() as u64,
            state: Mutex::new(State {
                durable: bytes.clone(),
                live: bytes,
                pending: BTreeMap::new(),
                capture: false,
                points: Vec::new(),
                stores: None,
                probed: Vec::new(),
                probe: None,
                calls: 0,
            }),
            fences: Default::default(),
            stats: DeviceStats::default(),
        }
    }

    /// Starts or stops recording a [`CrashPoint`] at every fence.
    pub fn set_capture(&self, on: bool) {
        self.state.lock().capture = on;
    }

    /// Starts recording every store in program order (for process deaths), from none.
    pub fn record_stores(&self) {
        self.state.lock().stores = Some(Vec::new());
    }

    /// As [`Self::record_stores`], and calls `probe` as each storing device call begins
    /// (state outside the device that a process changes between its calls: a shared
    /// region's), kept with the number of stores before the call ([`Self::take_probed`]).
    pub fn record_stores_with(&self, probe: Arc<dyn Fn() -> Vec<u8> + Send + Sync>) {
        let mut st = self.state.lock();
        st.stores = Some(Vec::new());
        st.probed.clear();
        st.probe = Some(probe);
    }

    /// What the probe returned, with the stores before each call; the probe stops.
    pub fn take_probed(&self) -> Vec<(usize, Vec<u8>)> {
        let mut st = self.state.lock();
        st.probe = None;
        std::mem::take(&mut st.probed)
    }

    /// How many stores were recorded so far (0 when not recording).
    pub fn stores_recorded(&self) -> usize {
        self.state.lock().stores.as_ref().map_or(0, Vec::len)
    }

    /// Stops recording stores and takes them.
    pub fn take_stores(&self) -> Vec<LineStore> {
        self.state.lock().stores.take().unwrap_or_default()
    }

    /// Takes the recorded crash points.
    pub fn take_points(&self) -> Vec<CrashPoint> {
        std::mem::take(&mut self.state.lock().points)
    }

    /// Fences issued since the device was created.
    pub fn fence_count(&self) -> u64 {
        self.fences.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The crash point "now": what a power failure at this instant could leave.
    pub fn crash_point_now(&self) -> CrashPoint {
        let st = self.state.lock();
        Self::point(&st, self.fence_count())
    }

    fn point(st: &State, fence_index: u64) -> CrashPoint {
        let lines = st
            .pending
            .iter()
            .filter_map(|(&line, log)| {
                let durable: [u8; LINE] = st.durable[line * LINE..(line + 1) * LINE].try_into().expect("a line");
                let outcomes = log.outcomes(&durable);
                (outcomes.len() > 1).then_some(PendingLine { line, outcomes })
            })
            .collect();
        CrashPoint { fence_index, durable: st.durable.clone(), lines }
    }

    /// Every byte, live and durable, becomes `image`'s (same length), nothing pending: the
    /// image a process death left, under a survivor that has this device mounted
    /// (`crashtest/death.rs`).
    pub fn set_image(&self, image: &[u8]) {
        let mut st = self.state.lock();
        assert_eq!(image.len(), st.live.len(), "an image of the device's length");
        st.live.copy_from_slice(image);
        st.durable.copy_from_slice(image);
        st.pending.clear();
    }

    /// The live image (what loads see).
    pub fn live_image(&self) -> Vec<u8> {
        self.state.lock().live.clone()
    }

    /// The durable image (what survives a crash for certain).
    pub fn durable_image(&self) -> Vec<u8> {
        self.state.lock().durable.clone()
    }

    fn check(&self, off: u64, len: u64) {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "device access out of range: {off}+{len} > {}",
            self.len
        );
    }
}

/// Records a store of `data` at `off`: the live image changes, and each line it touches
/// logs the store.
fn store_bytes(st: &mut State, off: usize, data: &[u8], nt: bool) {
    st.live[off..off + data.len()].copy_from_slice(data);
    let call = st.calls;
    if let (Some(v), Some(probe)) = (&st.stores, &st.probe) {
        if v.last().is_none_or(|s| s.call != call) {
            let seen = probe();
            st.probed.push((v.len(), seen));
        }
    }
    let mut pos = 0usize;
    while pos < data.len() {
        let byte = off + pos;
        let line = byte / LINE;
        let in_line = byte % LINE;
        let n = (LINE - in_line).min(data.len() - pos);
        let mut s = Store { nt, mask: 0, data: [0; LINE] };
        s.data[in_line..in_line + n].copy_from_slice(&data[pos..pos + n]);
        s.mask = if n == LINE { u64::MAX } else { ((1u64 << n) - 1) << in_line };
        if let Some(v) = &mut st.stores {
            v.push(LineStore { call, line, mask: s.mask, data: s.data });
        }
        let log = st.pending.entry(line).or_default();
        log.stores.push(s);
        if nt {
            // The line is evicted before the streaming store: what it held is on its way.
            log.written_back = log.stores.len();
        }
        pos += n;
    }
}

fn flush_lines(st: &mut State, off: usize, len: usize) {
    if len == 0 {
        return;
    }
    let first = off / LINE;
    let last = (off + len - 1) / LINE;
    for (_, log) in st.pending.range_mut(first..=last) {
        log.written_back = log.stores.len();
    }
}

impl PmDevice for CrashDevice {
    fn len_bytes(&self) -> u64 {
        self.len
    }

    fn read(&self, off: DevOffset, buf: &mut [u8]) {
        let off = off.0;
        self.check(off, buf.len() as u64);
        let st = self.state.lock();
        buf.copy_from_slice(&st.live[off as usize..off as usize + buf.len()]);
        self.stats.add_read(buf.len() as u64);
    }

    fn write(&self, off: DevOffset, data: &[u8]) {
        let off = off.0;
        self.check(off, data.len() as u64);
        let mut st = self.state.lock();
        st.calls += 1;
        store_bytes(&mut st, off as usize, data, false);
        self.stats.add_write(data.len() as u64);
    }

    fn write_nt(&self, off: DevOffset, data: &[u8]) {
        let off = off.0;
        self.check(off, data.len() as u64);
        // Streaming stores cover whole aligned words; the head and tail of an unaligned
        // range are plain stores (as the real device does them).
        let off = off as usize;
        let end = off + data.len();
        let a = off.next_multiple_of(8).min(end);
        let b = (end / 8 * 8).max(a);
        let mut st = self.state.lock();
        st.calls += 1;
        store_bytes(&mut st, off, &data[..a - off], false);
        store_bytes(&mut st, a, &data[a - off..b - off], true);
        store_bytes(&mut st, b, &data[b - off..], false);
        flush_lines(&mut st, off, a - off);
        flush_lines(&mut st, b, end - b);
        self.stats.add_write(data.len() as u64);
    }

    fn zero(&self, off: DevOffset, len: u64) {
        let off = off.0;
        self.check(off, len);
        let mut st = self.state.lock();
        st.calls += 1;
        store_bytes(&mut st, off as usize, &vec![0u8; len as usize], false);
        self.stats.add_write(len);
    }

    fn load_u64(&self, off: DevOffset) -> u64 {
        let off = off.0;
        assert!(off.is_multiple_of(8));
        self.check(off, 8);
        self.stats.add_read(8);
        let st = self.state.lock();
        u64::from_le_bytes(st.live[off as usize..off as usize + 8].try_into().expect("8 bytes"))
    }

    fn store_u64(&self, off: DevOffset, value: u64) {
        let off = off.0;
        assert!(off.is_multiple_of(8));
        self.check(off, 8);
        let mut st = self.state.lock();
        st.calls += 1;
        store_bytes(&mut st, off as usize, &value.to_le_bytes(), false);
        self.stats.add_write(8);
    }

    fn cas_u64(&self, off: DevOffset, current: u64, new: u64) -> Result<u64, u64> {
        let off = off.0;
        assert!(off.is_multiple_of(8));
        self.check(off, 8);
        let mut st = self.state.lock();
        self.stats.add_write(8);
        let o = off as usize;
        let actual = u64::from_le_bytes(st.live[o..o + 8].try_into().expect("8 bytes"));
        if actual == current {
            st.calls += 1;
            store_bytes(&mut st, o, &new.to_le_bytes(), false);
            Ok(current)
        } else {
            Err(actual)
        }
    }

    fn flush(&self, off: DevOffset, len: u64) {
        let off = off.0;
        self.check(off, len);
        flush_lines(&mut self.state.lock(), off as usize, len as usize);
        self.stats.add_flush(lines_in(off, len));
    }

    fn fence(&self) {
        let capture = {
            let mut guard = self.state.lock();
            let index = self.fences.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if guard.capture {
                let p = Self::point(&guard, index);
                guard.points.push(p);
            }
            let st = &mut *guard;
            st.pending.retain(|&line, log| {
                let n = log.written_back;
                if n == 0 {
                    return true;
                }
                let mut contents: [u8; LINE] = st.durable[line * LINE..(line + 1) * LINE].try_into().expect("a line");
                for s in &log.stores[..n] {
                    s.apply(&mut contents, 0xFF);
                }
                st.durable[line * LINE..(line + 1) * LINE].copy_from_slice(&contents);
                log.stores.drain(..n);
                log.written_back = 0;
                !log.stores.is_empty()
            });
            st.capture
        };
        self.stats.add_fence();
        if capture {
            // Lets other threads' transactions interleave with this one's, so that crash
            // points with several journals open are recorded.
            std::thread::yield_now();
        }
    }

    fn stats(&self) -> &DeviceStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(img: &[u8], w: usize) -> u64 {
        u64::from_le_bytes(img[w * 8..w * 8 + 8].try_into().unwrap())
    }

    #[test]
    fn unflushed_store_is_not_durable() {
        let d = CrashDevice::new(4096);
        d.store_u64(DevOffset(64), 7);
        d.fence();
        assert_eq!(d.durable_image()[64], 0);
        let p = d.crash_point_now();
        assert_eq!(p.lines.len(), 1);
        assert_eq!(p.lines[0].line, 1);
        assert_eq!(p.state_count(), 2);
    }

    #[test]
    fn flush_then_fence_is_durable() {
        let d = CrashDevice::new(4096);
        d.write(DevOffset(100), &[1, 2, 3]);
        d.flush(DevOffset(100), 3);
        assert_eq!(d.durable_image()[100], 0, "flush alone does not persist");
        d.fence();
        assert_eq!(&d.durable_image()[100..103], &[1, 2, 3]);
        assert!(d.crash_point_now().lines.is_empty());
    }

    #[test]
    fn store_after_flush_stays_pending() {
        let d = CrashDevice::new(4096);
        d.store_u64(DevOffset(0), 1);
        d.flush(DevOffset(0), 8);
        d.store_u64(DevOffset(0), 2);
        d.fence();
        // The write-back carried value 1; value 2 may or may not have followed.
        let p = d.crash_point_now();
        assert_eq!(word(&p.durable, 0), 1);
        assert_eq!(p.state_count(), 2);
        assert_eq!(word(&p.image_all_pending(), 0), 2);
    }

    #[test]
    fn a_word_stored_twice_may_persist_with_its_first_value() {
        let d = CrashDevice::new(4096);
        d.store_u64(DevOffset(8), 1);
        d.store_u64(DevOffset(8), 2);
        let p = d.crash_point_now();
        let values: Vec<u64> = p.lines[0].outcomes.iter().map(|l| word(l, 1)).collect();
        assert_eq!(values, vec![0, 1, 2]);
    }

    #[test]
    fn stores_to_one_line_persist_in_program_order() {
        // Word 1 then word 0: "word 0 new, word 1 old" is not a possible state.
        let d = CrashDevice::new(4096);
        d.store_u64(DevOffset(8), 5);
        d.store_u64(DevOffset(0), 6);
        let p = d.crash_point_now();
        let states: Vec<(u64, u64)> = p.lines[0].outcomes.iter().map(|l| (word(l, 0), word(l, 1))).collect();
        assert_eq!(states, vec![(0, 0), (0, 5), (6, 5)]);
        // Two different lines are independent: four states.
        d.store_u64(DevOffset(64), 1);
        assert_eq!(d.crash_point_now().state_count(), 6);
    }

    #[test]
    fn streaming_words_are_independent_until_the_fence() {
        let d = CrashDevice::new(4096);
        d.write_nt(DevOffset(128), &[9u8; 24]);
        let p = d.crash_point_now();
        assert_eq!(p.state_count(), 8, "three words, each old or new");
        d.fence();
        assert_eq!(&d.durable_image()[128..152], &[9u8; 24]);
        assert!(d.crash_point_now().lines.is_empty());
    }

    #[test]
    fn capture_records_state_before_each_fence() {
        let d = CrashDevice::new(4096);
        d.set_capture(true);
        d.store_u64(DevOffset(8), 5);
        d.flush(DevOffset(8), 8);
        d.fence();
        d.store_u64(DevOffset(16), 6);
        d.fence();
        let pts = d.take_points();
        assert_eq!(pts.len(), 2);
        assert_eq!(word(&pts[0].durable, 1), 0);
        assert_eq!(word(&pts[0].image_all_pending(), 1), 5);
        assert_eq!(word(&pts[1].durable, 1), 5);
        assert_eq!(pts[1].image_all_pending()[16], 6);
        assert_eq!(pts[1].image_durable_only()[16], 0);
    }
}
