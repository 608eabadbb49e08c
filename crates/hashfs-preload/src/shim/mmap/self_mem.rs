//! Writes into this process's read-only copies through `/proc/self/mem` (`copy.rs`).
//!
//! A copy (`copy.rs`) has the protection the program asked for, read-only for a shared
//! one, and takes the file's changed bytes as they come: this process's writes to the file
//! and the follower's refreshes of another process's changes. Making a few of its pages
//! writable and back (two `mprotect`s) splits the copy's kernel mapping in three and
//! back, and its 2 MiB page into 4 KiB ones for good. `/proc/self/mem` writes through the
//! page tables as a debugger does and keeps the huge page: measured by hand (Python's
//! `ctypes`, AMD EPYC host, Linux 6.18, 2026-12-06), 2-byte stores into a read-only 2 MiB
//! anonymous mapping took 17.5 µs each with the two `mprotect`s (the huge page gone) and
//! 2.9 µs through it; 1-byte `pwrite`s to a file mapped as a 2 MiB copy through the shim,
//! 8.8-11.5 µs before and 5.6-6.0 after (release builds, interleaved). A copy's whole
//! range is still made writable and back (no split: the whole kernel mapping changes), and
//! the shim falls back to that where the kernel refuses such writes
//! (`proc_mem.force_override=never`) or the descriptor is gone.
//!
//! The descriptor is this process's own: a forked child's inherited one writes into its
//! parent's memory, so a child opens its own (closing the parent's) at its first write. It
//! is kept high and among the descriptors a program may not close (`hashfs::pm::keep`), and
//! checked before each write, so that a number the program closed behind the shim's back
//! (a raw `close_range`) and reused is never written.

use super::*;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::AtomicBool;

/// This process's `/proc/self/mem` (None: not opened yet, or refused), and the process
/// that opened it.
static SELF_MEM: std::sync::Mutex<(i32, Option<std::fs::File>)> = std::sync::Mutex::new((0, None));
/// Set once the kernel refused a write: the fallback for good.
static REFUSED: AtomicBool = AtomicBool::new(false);

/// Writes `bytes` at address `at` of this process's memory, whatever the pages'
/// protection; false (nothing known written) where it cannot.
pub(super) fn write(at: usize, bytes: &[u8]) -> bool {
    if REFUSED.load(Ordering::Relaxed) {
        return false;
    }
    let me = current_pid();
    let mut mem = SELF_MEM.lock().unwrap_or_else(|e| e.into_inner());
    if mem.0 != me {
        // A forked child's inherited descriptor is its parent's memory: closed here, unless
        // the child closed its number already (then it may be another file's).
        if let Some(inherited) = mem.1.take().filter(|f| !hashfs::pm::is_kept(f.as_raw_fd())) {
            std::mem::forget(inherited);
        }
        mem.1 = open();
        mem.0 = me;
    }
    let Some(f) = mem.1.as_ref() else { return false };
    if !hashfs::pm::is_kept(f.as_raw_fd()) {
        // Closed behind the shim's back: the number may be another file's now, not ours
        // to close.
        std::mem::forget(mem.1.take());
        return false;
    }
    match f.write_all_at(bytes, at as u64) {
        Ok(()) => true,
        Err(_) => {
            REFUSED.store(true, Ordering::Relaxed);
            false
        }
    }
}

fn open() -> Option<std::fs::File> {
    let f = std::fs::OpenOptions::new().read(true).write(true).open("/proc/self/mem").ok()?;
    let f = hashfs::pm::out_of_the_way(f);
    hashfs::pm::keep(&f);
    Some(f)
}
