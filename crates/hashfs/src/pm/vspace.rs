//! The system-call half of ctFS's live translation (`mapping/ctfs/view.rs`): one reserved
//! range of virtual addresses, 1 GiB-aligned, in which pages of the image file are mapped
//! `MAP_SHARED | MAP_FIXED` at chosen places and given back (`PROT_NONE`) on demand, so
//! that the process's own page table, and the MMU, translate a file's virtual pages to
//! its blocks (ctFS §3.2, with `mmap` standing in for ctFS's kernel module).
//!
//! Whole 2 MiB of the image placed at a 2 MiB-aligned address inside one mapping get one
//! PMD entry from the kernel on an image that has 2 MiB pages (tmpfs `huge=always`, DAX).
//! Adjacent mappings of consecutive image offsets merge into one kernel mapping (VMA); the
//! caller counts mappings against `vm.max_map_count`, in one ledger with the preload
//! shim's ([`map_budget`]).

use std::io;
use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

const ALIGN: usize = 1 << 30;

/// A reserved range of `len` bytes at `base`, unmapped on drop.
#[derive(Debug)]
pub struct VirtualSpace {
    base: *mut u8,
    len: usize,
    fd: RawFd,
}

// SAFETY: plain shared memory; every access is a bounds-checked copy whose concurrency is
// the caller's (the file system's per-file locks), as with the device's own mapping.
unsafe impl Send for VirtualSpace {}
// SAFETY: as above.
unsafe impl Sync for VirtualSpace {}

impl VirtualSpace {
    /// Reserves `len` bytes (no memory, no swap) for pages of the image open as `fd`.
    pub fn reserve(fd: RawFd, len: usize) -> io::Result<VirtualSpace> {
        let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        let total = len.checked_add(ALIGN).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        // SAFETY: reserving address space, 1 GiB more than needed to choose the start.
        let r = unsafe { libc::mmap(std::ptr::null_mut(), total, libc::PROT_NONE, anon, -1, 0) };
        if r == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = r as usize;
        let start = base.next_multiple_of(ALIGN);
        // SAFETY: giving back the parts of our own reservation before and after the range.
        unsafe {
            if start > base {
                libc::munmap(r, start - base);
            }
            if base + total > start + len {
                libc::munmap((start + len) as *mut libc::c_void, base + total - start - len);
            }
        }
        Ok(VirtualSpace { base: start as *mut u8, len, fd })
    }

    fn check(&self, at: u64, len: u64) -> usize {
        let end = at.checked_add(len).expect("range overflows");
        assert!(end <= self.len as u64, "outside the virtual space");
        at as usize
    }

    /// Maps `len` bytes of the image from `image_off` at offset `at` of the space.
    pub fn map(&self, at: u64, image_off: u64, len: u64) -> io::Result<()> {
        let at = self.check(at, len);
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: replacing pages of our own reservation (bounds checked) with pages of the
        // image file.
        let p = unsafe {
            libc::mmap(
                self.base.add(at) as *mut libc::c_void,
                len as usize,
                prot,
                libc::MAP_SHARED | libc::MAP_FIXED,
                self.fd,
                image_off as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Gives `len` bytes from `at` back to the reservation (the next access would fault).
    pub fn discard(&self, at: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let at = self.check(at, len);
        let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED;
        // SAFETY: replacing pages of our own reservation (bounds checked) with no access.
        let p =
            unsafe { libc::mmap(self.base.add(at) as *mut libc::c_void, len as usize, libc::PROT_NONE, anon, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Moves the page-table entries of `len` bytes at `from` to `to` (both in the space;
    /// `to`'s old mapping is replaced) without touching the data: `mremap` with
    /// `MREMAP_DONTUNMAP`, so that `from` stays mapped to the same image pages (faulted
    /// again on access) and the space never has a hole another `mmap` could land in.
    pub fn move_pages(&self, from: u64, to: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let (from, to) = (self.check(from, len), self.check(to, len));
        // SAFETY: both ranges lie in our reservation (bounds checked); the move replaces
        // `to`'s pages and leaves `from` mapped.
        unsafe { remap(self.base.add(from), self.base.add(to), len as usize, libc::MREMAP_DONTUNMAP) }
    }

    /// Exchanges the mappings of two ranges of `len` bytes that do not overlap, by way of
    /// a scratch range outside the space: a's entries to the scratch, b's to a, the
    /// scratch's to b; no page is faulted again. On an error the ranges may hold either
    /// mapping: the caller gives both back.
    pub fn exchange(&self, a: u64, b: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let (a, b) = (self.check(a, len), self.check(b, len));
        let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        // SAFETY: a new mapping of our own, at an address the kernel chooses.
        let scratch = unsafe { libc::mmap(std::ptr::null_mut(), len as usize, libc::PROT_NONE, anon, -1, 0) };
        if scratch == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let scratch = scratch as *mut u8;
        let (pa, pb) = (self.base.wrapping_add(a), self.base.wrapping_add(b));
        // SAFETY: `a` and `b` lie in our reservation (bounds checked) and `scratch` is ours;
        // each move replaces its target's pages. The last move leaves no scratch behind.
        let r = unsafe {
            remap(pa, scratch, len as usize, libc::MREMAP_DONTUNMAP)
                .and_then(|()| remap(pb, pa, len as usize, libc::MREMAP_DONTUNMAP))
                .and_then(|()| remap(scratch, pb, len as usize, 0))
        };
        if r.is_err() {
            // SAFETY: the scratch range is ours (whatever it holds now).
            unsafe { libc::munmap(scratch as *mut libc::c_void, len as usize) };
        }
        r
    }

    /// Copies `buf.len()` bytes from offset `at`.
    ///
    /// # Safety
    /// The range must be mapped ([`Self::map`]) and stay mapped during the copy.
    pub unsafe fn copy_out(&self, at: u64, buf: &mut [u8]) {
        let at = self.check(at, buf.len() as u64);
        // SAFETY: inside the space (checked) and mapped (the caller's contract).
        unsafe { super::mmap::copy_out(self.base.add(at), at as u64, buf) };
    }

    /// Stores `data` at offset `at` and writes its cache lines back (durable after the
    /// next fence): non-temporal stores for large copies, as the device's own writes.
    ///
    /// # Safety
    /// The range must be mapped ([`Self::map`]) and stay mapped during the copy.
    pub unsafe fn copy_in_flushed(&self, at: u64, data: &[u8]) {
        let at = self.check(at, data.len() as u64);
        let k = super::flush_kind();
        // SAFETY: inside the space (checked) and mapped writable (the caller's contract).
        unsafe {
            let dst = self.base.add(at);
            if data.len() >= super::mmap::NONTEMPORAL_MIN_BYTES {
                super::cpu::copy_nontemporal(k, dst, data.as_ptr(), data.len());
            } else {
                std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len());
                super::cpu::flush_range(k, dst, data.len());
            }
        }
    }
}

impl Drop for VirtualSpace {
    fn drop(&mut self) {
        // SAFETY: our own reservation and what was mapped in it, unmapped once.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// The kernel's limit on a process's mappings (`vm.max_map_count`), 65,530 if unreadable.
pub fn max_map_count() -> u64 {
    std::fs::read_to_string("/proc/sys/vm/max_map_count").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(65_530)
}

/// Kernel mappings HashFS's parts hold in this process: the ctFS views of every mounted
/// image and the preload shim's mappings of files. They share one budget
/// ([`map_budget`]), so that together they leave the program the rest of
/// `vm.max_map_count` for its heap, stacks and libraries (each taking half of it for
/// itself, a shim process on a `ctfs` image could have left it none).
static MAPS_HELD: AtomicU64 = AtomicU64::new(0);

/// The kernel mappings HashFS's parts may hold together in this process:
/// `HASHFS_MAP_BUDGET`, else half of `vm.max_map_count`.
pub fn map_budget() -> u64 {
    static BUDGET: OnceLock<u64> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        let env = std::env::var("HASHFS_MAP_BUDGET").ok().and_then(|v| v.trim().parse().ok());
        env.unwrap_or_else(|| max_map_count() / 2)
    })
}

/// The kernel mappings HashFS's parts hold now ([`MAPS_HELD`]).
pub fn maps_held() -> u64 {
    MAPS_HELD.load(Ordering::Relaxed)
}

/// Whether `more` mappings fit [`map_budget`] beside what every part holds now.
pub fn maps_fit(more: u64) -> bool {
    maps_held().saturating_add(more) <= map_budget()
}

/// A part of HashFS now holds `n` more kernel mappings.
pub fn maps_taken(n: u64) {
    MAPS_HELD.fetch_add(n, Ordering::Relaxed);
}

/// A part of HashFS gave back `n` kernel mappings (never below zero).
pub fn maps_given(n: u64) {
    let _ = MAPS_HELD.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| Some(h.saturating_sub(n)));
}

/// `mremap` of `len` bytes from `from` to exactly `to`, with `flags` besides.
///
/// # Safety
/// Both ranges must be mappings the caller owns; `to`'s pages are replaced.
unsafe fn remap(from: *mut u8, to: *mut u8, len: usize, flags: libc::c_int) -> io::Result<()> {
    let f = libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED | flags;
    // SAFETY: as the caller promises.
    let r = unsafe { libc::mremap(from as *mut libc::c_void, len, len, f, to as *mut libc::c_void) };
    if r == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
