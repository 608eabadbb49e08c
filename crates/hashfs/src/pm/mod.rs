//! The persistent-memory device: the one seam between the file system and the media.
//!
//! Every store to the image goes through a [`PmDevice`]: plain and non-temporal copies,
//! 8-byte atomic loads, stores and compare-and-swap, and the two ordering verbs, `flush`
//! (write back cache lines) and `fence` (order everything before it ahead of everything
//! after it). A store is durable only once it has been flushed *and* a fence has followed
//! (non-temporal stores need only the fence). [`MmapDevice`] is the real thing;
//! [`CrashDevice`] implements the same verbs over an in-memory image and can produce every
//! image a power failure could leave behind.
//!
//! What the code assumes of the media (see docs/design.md): aligned 8-byte stores are
//! atomic (never torn) with respect to power failure; nothing larger is.

pub(crate) mod cpu;
pub mod crash;
pub mod filemap;
pub mod holefault;
pub mod mem;
pub mod mmap;
pub mod overlay;
pub mod vspace;

pub use cpu::{cpu_model, current_cpu, flush_kind, FlushKind, CACHE_LINE_BYTES};
pub use crash::{CrashDevice, CrashPoint, LineStore};
pub use mmap::{is_kept, keep, kept_in, out_of_the_way, MmapDevice, OpenMode};

use std::sync::atomic::{AtomicU64, Ordering};

/// Blocks every signal that can be blocked on the calling thread: for the threads the
/// library and the shims start inside a program's process (pumps, the mappings' follower,
/// the hole-fault service, the populator, write-back). A signal sent to the process then
/// goes to one of the program's threads: one that blocks it in its main thread to take it
/// with `sigwait` or `signalfd`, as daemons do with SIGTERM, had it taken by such a thread
/// and its default action end the program (until 2026-12-07). A write to a pipe whose
/// reader is gone fails with EPIPE there instead of raising SIGPIPE.
pub fn block_signals() {
    // SAFETY: a full signal set, applied to this thread only.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

/// Writes back and orders the cache lines of `[ptr, ptr + len)` (for stores made through
/// another mapping of the image, such as a file mapped by an application).
///
/// # Safety
/// The range must lie inside one live mapping of this process.
pub unsafe fn persist_range(ptr: *const u8, len: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { cpu::flush_range(cpu::flush_kind(), ptr, len) };
    cpu::store_fence();
}

/// Evicts a DRAM object's cache lines from every CPU cache (the paper benchmark's cold
/// runs: the in-DRAM inode and translation cache).
pub fn evict_object<T>(obj: &T) {
    // SAFETY: a live reference covers size_of::<T>() mapped bytes.
    unsafe { cpu::evict_range(obj as *const T as *const u8, std::mem::size_of::<T>()) };
}

/// [`evict_object`] for every element of a slice.
pub fn evict_slice<T>(s: &[T]) {
    // SAFETY: a live slice covers size_of_val(s) mapped bytes.
    unsafe { cpu::evict_range(s.as_ptr() as *const u8, std::mem::size_of_val(s)) };
}

/// A byte address inside the image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DevOffset(pub u64);

impl std::ops::Add<u64> for DevOffset {
    type Output = DevOffset;
    #[inline]
    fn add(self, n: u64) -> DevOffset {
        DevOffset(self.0 + n)
    }
}

impl std::ops::AddAssign<u64> for DevOffset {
    #[inline]
    fn add_assign(&mut self, n: u64) {
        self.0 += n;
    }
}

/// The bytes from `rhs` up to `self`.
impl std::ops::Sub for DevOffset {
    type Output = u64;
    #[inline]
    fn sub(self, rhs: DevOffset) -> u64 {
        self.0 - rhs.0
    }
}

impl std::fmt::Display for DevOffset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The verbs the file system uses to reach persistent memory.
///
/// Offsets and lengths are bytes from the start of the image; a range outside the image is
/// a bug in the caller (the layers above validate everything they read from the media) and
/// panics rather than touching memory outside the mapping. 8-byte verbs take 8-aligned
/// offsets.
pub trait PmDevice: Send + Sync + 'static {
    fn len_bytes(&self) -> u64;
    /// Copies from the image into `buf`.
    fn read(&self, off: DevOffset, buf: &mut [u8]);
    /// Plain stores; durable after `flush` of the range and a `fence`.
    fn write(&self, off: DevOffset, data: &[u8]);
    /// Non-temporal stores for large copies; durable after the next `fence`, no flush needed.
    fn write_nt(&self, off: DevOffset, data: &[u8]);
    /// Plain zeroing stores; durable after `flush` and `fence`.
    fn zero(&self, off: DevOffset, len: u64);
    fn load_u64(&self, off: DevOffset) -> u64;
    /// The words at `off`, `off + 8`, ... into `out`, each loaded atomically as
    /// [`Self::load_u64`] does (words others may be storing meanwhile), counted once.
    fn load_u64s(&self, off: DevOffset, out: &mut [u64]) {
        for (i, w) in out.iter_mut().enumerate() {
            *w = self.load_u64(off + 8 * i as u64);
        }
    }
    /// An atomic 8-byte store (the unit of power-failure atomicity).
    fn store_u64(&self, off: DevOffset, value: u64);
    /// Atomic compare-and-swap; `Err(actual)` if the word did not hold `current`.
    fn cas_u64(&self, off: DevOffset, current: u64, new: u64) -> Result<u64, u64>;
    /// Writes back the cache lines of the range (clwb / clflushopt / clflush).
    fn flush(&self, off: DevOffset, len: u64);
    /// Store fence (sfence).
    fn fence(&self);
    /// A hint: the line at `off` will be read soon.
    fn prefetch(&self, _off: DevOffset) {}
    /// A hint: the `lines` cache lines from `off` will be read soon.
    fn prefetch_lines(&self, off: DevOffset, lines: u64) {
        for line in 0..lines {
            self.prefetch(off + line * 64);
        }
    }
    fn stats(&self) -> &DeviceStats;
    /// Makes the image durable on its host file when the host is not persistent memory
    /// (an image on a disk file system needs msync; DAX and tmpfs need nothing).
    fn sync_host(&self) -> std::io::Result<()> {
        Ok(())
    }
    /// Whether [`sync_host`](Self::sync_host) has nothing to do: what is written back and
    /// fenced is as durable as the host makes anything.
    fn host_needs_no_sync(&self) -> bool {
        true
    }
    /// Evicts the range's cache lines from every CPU cache and waits for it, so that the
    /// next access misses (the paper benchmark's cold runs; durability never needs it).
    /// Returns false when the device has no cache to evict from.
    fn evict(&self, _off: DevOffset, _len: u64) -> bool {
        false
    }
    /// Direct pointer to the image for zero-copy reads, if the device has one.
    fn base_ptr(&self) -> Option<*mut u8> {
        None
    }
    /// The image file, for devices that are one (ctFS maps its pages a second time).
    fn backing_fd(&self) -> Option<std::os::unix::io::RawFd> {
        None
    }
    /// Takes the image's lock exclusive if no other process holds it (the last
    /// participant of a shared mount, before it removes the image's region); false where
    /// there is no such lock.
    fn try_lock_alone(&self) -> bool {
        false
    }
    /// Lets go of this process's shared hold on the image's lock (a participant leaving
    /// while others stay, whose descriptor of the image may stay open until its process
    /// ends); nothing where there is no such lock.
    fn let_go_of_image(&self) {}
}

const STAT_SHARDS: usize = 16;

#[repr(align(64))]
#[derive(Default)]
struct StatShard {
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    flushes: AtomicU64,
    fences: AtomicU64,
}

/// Counts of device traffic, sharded by thread so that counting does not bounce one
/// cache line between cores. A count is a plain load and store, not a locked add: a
/// locked instruction is ordered after every cache-line write-back the thread has issued
/// and waits for them, so counting each flush with one made every flush a fence (4 KiB
/// appends on a huge-page image: 873-879 ns with locked counts, 730-738 without,
/// `bench/results/micro/stats-unlocked-ab/`). Threads that
/// share a shard (more than [`STAT_SHARDS`]) may lose counts; the figures are for display.
#[derive(Default)]
pub struct DeviceStats {
    shards: [StatShard; STAT_SHARDS],
}

/// A snapshot of [`DeviceStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Cache lines written back.
    pub flushes: u64,
    pub fences: u64,
}

impl StatsSnapshot {
    pub fn since(&self, earlier: &StatsSnapshot) -> StatsSnapshot {
        StatsSnapshot {
            bytes_read: self.bytes_read - earlier.bytes_read,
            bytes_written: self.bytes_written - earlier.bytes_written,
            flushes: self.flushes - earlier.flushes,
            fences: self.fences - earlier.fences,
        }
    }
}

fn shard_index() -> usize {
    thread_local! {
        static INDEX: usize = {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            NEXT.fetch_add(1, Ordering::Relaxed) as usize % STAT_SHARDS
        };
    }
    INDEX.with(|i| *i)
}

/// Adds `n` to a count without a locked instruction (see [`DeviceStats`]).
#[inline]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl DeviceStats {
    #[inline]
    fn shard(&self) -> &StatShard {
        &self.shards[shard_index()]
    }
    #[inline]
    pub fn add_read(&self, bytes: u64) {
        bump(&self.shard().bytes_read, bytes);
    }
    #[inline]
    pub fn add_write(&self, bytes: u64) {
        bump(&self.shard().bytes_written, bytes);
    }
    #[inline]
    pub fn add_flush(&self, lines: u64) {
        bump(&self.shard().flushes, lines);
    }
    #[inline]
    pub fn add_fence(&self) {
        bump(&self.shard().fences, 1);
    }
    pub fn snapshot(&self) -> StatsSnapshot {
        let mut s = StatsSnapshot::default();
        for sh in &self.shards {
            s.bytes_read += sh.bytes_read.load(Ordering::Relaxed);
            s.bytes_written += sh.bytes_written.load(Ordering::Relaxed);
            s.flushes += sh.flushes.load(Ordering::Relaxed);
            s.fences += sh.fences.load(Ordering::Relaxed);
        }
        s
    }
}

/// Number of cache lines that `[off, off + len)` touches.
pub fn lines_in(off: u64, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    let first = off / CACHE_LINE_BYTES;
    let last = (off + len - 1) / CACHE_LINE_BYTES;
    last - first + 1
}

/// Whether every word read from the device is zero (free inodes, EMPTY slots): an OR of
/// them all, which the compiler vectorizes, where a comparison that stops at the first
/// nonzero byte is not.
pub(crate) fn all_zero(words: &[u64]) -> bool {
    words.iter().fold(0, |acc, &w| acc | w) == 0
}
