//! Instruction backends for write ordering, chosen once at start-up.
//!
//! Cache-line write-back: `clwb` (keeps the line cached), else `clflushopt`, else `clflush`.
//! Ordering: `sfence`. Bulk copies use non-temporal stores (`movntdq` through AVX when the
//! CPU has it, else `movnti`), which bypass the cache and are durable after the next fence.
//! The environment variable `HASHFS_FLUSH` (`clwb`, `clflushopt`, `clflush`) forces a
//! weaker backend so that tests exercise every path on one machine.

use std::sync::OnceLock;

/// The cache-line write-back instruction in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushKind {
    Clwb,
    Clflushopt,
    Clflush,
}

impl FlushKind {
    pub fn name(self) -> &'static str {
        match self {
            FlushKind::Clwb => "clwb",
            FlushKind::Clflushopt => "clflushopt",
            FlushKind::Clflush => "clflush",
        }
    }
}

pub const CACHE_LINE_BYTES: u64 = 64;

/// The CPU's model name (/proc/cpuinfo), for the records benchmarks and crash runs keep
/// of the machine they ran on.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

#[derive(Clone, Copy, Debug)]
struct CpuFeatures {
    clwb: bool,
    clflushopt: bool,
}

fn cpu_features() -> CpuFeatures {
    // CPUID leaf 7, sub-leaf 0: EBX bit 24 = CLWB, bit 23 = CLFLUSHOPT.
    #[allow(unused_unsafe)]
    // SAFETY: CPUID leaf 7 exists on every x86_64 CPU that Rust targets (leaf 0 reports
    // the maximum leaf; on CPUs without leaf 7 the result is all zeros, i.e. "no feature").
    let r = unsafe { core::arch::x86_64::__cpuid_count(7, 0) };
    CpuFeatures { clwb: r.ebx & (1 << 24) != 0, clflushopt: r.ebx & (1 << 23) != 0 }
}

/// The best backend this CPU supports, weakened by `HASHFS_FLUSH` if set.
pub fn flush_kind() -> FlushKind {
    static KIND: OnceLock<FlushKind> = OnceLock::new();
    *KIND.get_or_init(|| {
        let f = cpu_features();
        let best = if f.clwb {
            FlushKind::Clwb
        } else if f.clflushopt {
            FlushKind::Clflushopt
        } else {
            FlushKind::Clflush
        };
        match std::env::var("HASHFS_FLUSH").ok().as_deref() {
            Some("clflush") => FlushKind::Clflush,
            Some("clflushopt") if f.clflushopt => FlushKind::Clflushopt,
            Some("clwb") if f.clwb => FlushKind::Clwb,
            _ => best,
        }
    })
}

/// Writes back every cache line overlapping `[addr, addr + len)`.
///
/// # Safety
/// The range must lie inside one live mapping of this process.
#[inline]
pub unsafe fn flush_range(kind: FlushKind, addr: *const u8, len: usize) {
    if len == 0 {
        return;
    }
    let start = (addr as usize) & !(CACHE_LINE_BYTES as usize - 1);
    let end = addr as usize + len;
    let mut line = start;
    while line < end {
        // SAFETY: `line` is inside the caller's mapping (rounding down to the line start
        // stays inside the same page). The instructions only write back a cache line.
        unsafe {
            match kind {
                FlushKind::Clwb => {
                    core::arch::asm!("clwb [{0}]", in(reg) line, options(nostack, preserves_flags))
                }
                FlushKind::Clflushopt => core::arch::asm!(
                    "clflushopt [{0}]",
                    in(reg) line,
                    options(nostack, preserves_flags)
                ),
                FlushKind::Clflush => {
                    core::arch::asm!("clflush [{0}]", in(reg) line, options(nostack, preserves_flags))
                }
            }
        }
        line += CACHE_LINE_BYTES as usize;
    }
}

/// Evicts every cache line overlapping `[addr, addr + len)` from all CPU caches
/// (`clflushopt`, else `clflush`) and waits for the evictions (`mfence`). For benchmarks
/// that start an operation with cold caches; durability never needs eviction.
///
/// # Safety
/// The range must lie inside one live mapping of this process.
pub unsafe fn evict_range(addr: *const u8, len: usize) {
    let kind = if cpu_features().clflushopt { FlushKind::Clflushopt } else { FlushKind::Clflush };
    // SAFETY: the caller's range is mapped; both instructions evict without changing data.
    unsafe { flush_range(kind, addr, len) };
    // SAFETY: mfence has no operands; it orders the evictions before later loads.
    unsafe { core::arch::x86_64::_mm_mfence() }
}

/// Orders all earlier stores and write-backs before all later stores.
#[inline]
pub fn store_fence() {
    // SAFETY: sfence has no operands and no memory effects beyond ordering.
    unsafe { core::arch::x86_64::_mm_sfence() }
}

/// Copies whole destination lines with non-temporal stores; the partial lines at either
/// end use ordinary stores and are written back with `flush_range`. The data is durable
/// after the next `store_fence`.
///
/// No line takes both kinds of store, and none is streamed in part: an unaligned 4 KiB
/// copy whose streamed body began and ended on 32-byte boundaries (half lines, beside the
/// ordinary stores of the same lines) took 617 ns with its fence, and 400 ns streamed by
/// whole lines (by hand on an Intel Xeon, `clwb`, not kept).
///
/// # Safety
/// `dst..dst+len` and `src..src+len` must be valid and must not overlap.
pub unsafe fn copy_nontemporal(kind: FlushKind, dst: *mut u8, src: *const u8, len: usize) {
    const LINE: usize = CACHE_LINE_BYTES as usize;
    let head = ((LINE - (dst as usize % LINE)) % LINE).min(len);
    // SAFETY: within the caller's ranges.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, head);
        flush_range(kind, dst, head);
    }
    let body = (len - head) / LINE * LINE;
    // SAFETY: dst+head is line aligned (so 32-byte aligned), the body is whole lines (a
    // multiple of 32 bytes) and lies in the caller's ranges.
    unsafe {
        if std::arch::is_x86_feature_detected!("avx") {
            stream_avx(dst.add(head), src.add(head), body);
        } else {
            stream_movnti(dst.add(head), src.add(head), body);
        }
    }
    let tail = len - head - body;
    // SAFETY: within the caller's ranges.
    unsafe {
        std::ptr::copy_nonoverlapping(src.add(head + body), dst.add(head + body), tail);
        flush_range(kind, dst.add(head + body), tail);
    }
}

/// Streams `len` bytes (a multiple of 32) with 32-byte non-temporal stores.
///
/// # Safety
/// The CPU has AVX; `src` and `dst` are valid for `len` bytes and do not overlap; `dst` is
/// 32-byte aligned.
#[target_feature(enable = "avx")]
unsafe fn stream_avx(dst: *mut u8, src: *const u8, len: usize) {
    use core::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_stream_si256};
    let mut i = 0;
    while i < len {
        // SAFETY: i + 32 <= len, dst + i is 32-byte aligned, both ranges are valid.
        unsafe {
            let v = _mm256_loadu_si256(src.add(i) as *const __m256i);
            _mm256_stream_si256(dst.add(i) as *mut __m256i, v);
        }
        i += 32;
    }
}

/// Streams `len` bytes (a multiple of 8) with 8-byte non-temporal stores.
///
/// # Safety
/// `src` and `dst` are valid for `len` bytes and do not overlap; `dst` is 8-byte aligned.
unsafe fn stream_movnti(dst: *mut u8, src: *const u8, len: usize) {
    let mut i = 0;
    while i < len {
        // SAFETY: i + 8 <= len, dst + i is 8-byte aligned, both ranges are valid.
        unsafe {
            let v = std::ptr::read_unaligned(src.add(i) as *const i64);
            core::arch::x86_64::_mm_stream_si64(dst.add(i) as *mut i64, v);
        }
        i += 8;
    }
}

/// Hints the CPU to fetch the line holding `addr`.
#[inline]
pub fn prefetch(addr: *const u8) {
    // SAFETY: prefetch never faults, even on an invalid address.
    unsafe { core::arch::x86_64::_mm_prefetch(addr as *const i8, core::arch::x86_64::_MM_HINT_T0) }
}

/// The CPU this thread runs on (0 when the kernel cannot say): picks a per-CPU journal or
/// allocation pool.
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu has no preconditions; it returns -1 on failure.
    let cpu = unsafe { libc::sched_getcpu() };
    cpu.max(0) as usize
}

/// The wall clock at the kernel's last tick, in nanoseconds since the epoch
/// (`CLOCK_REALTIME_COARSE`: one tick, 4 ms at HZ=250; about 5 ns to read where the fine
/// clock takes 22). `fs/inode.rs`'s write times use it.
pub fn coarse_realtime_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write; the clock id is a constant the kernel has
    // had since 2.6.32.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec.saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec)
}
