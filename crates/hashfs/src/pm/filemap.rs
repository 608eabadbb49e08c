//! The system-call half of [`crate::File::map`]: a range of virtual addresses whose pages
//! are the image file's pages of a file's blocks (`MAP_SHARED | MAP_FIXED` over a
//! reservation, one kernel mapping per run of physically consecutive blocks), placed so
//! that the virtual address agrees with the image offset modulo 2 MiB wherever the file's
//! blocks allow, as the kernel needs to map 2 MiB with one huge page.

use super::holefault::{hole_faults, Filler};
use std::io;
use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const HUGE: usize = 2 << 20;

/// Pages of `len` bytes at `addr`, unmapped on drop.
#[derive(Debug)]
pub struct RawMapping {
    addr: *mut u8,
    len: usize,
    /// The image, and the protection runs are mapped with.
    fd: RawFd,
    prot: libc::c_int,
    /// Holes of it are watched (forgotten on drop).
    watched: AtomicBool,
}

// SAFETY: the mapping is plain shared memory; every access goes through raw copies whose
// callers check bounds, and munmap happens once, on drop.
unsafe impl Send for RawMapping {}
// SAFETY: as above; concurrent copies into shared memory are what any mapping of a file
// allows between processes.
unsafe impl Sync for RawMapping {}

/// What a mapping lets its user do with the bytes it shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protection {
    ReadOnly,
    ReadWrite,
}

/// One run: `len` bytes at `at` in the mapping are the image's bytes from `image_off`.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub at: usize,
    pub image_off: u64,
    pub len: usize,
}

impl RawMapping {
    /// Maps `runs` (covering `len` bytes, page-aligned) of the image open as `fd`, read-only
    /// or writable, at an address congruent to `congruent_to` modulo 2 MiB. The pages no
    /// run covers (holes) are anonymous zeros until [`RawMapping::map_runs`] or a
    /// [`watch_holes`](RawMapping::watch_holes) fill maps them.
    pub fn new(fd: RawFd, len: usize, runs: &[Run], prot: Protection, congruent_to: u64) -> io::Result<RawMapping> {
        let prot = match prot {
            Protection::ReadOnly => libc::PROT_READ,
            Protection::ReadWrite => libc::PROT_READ | libc::PROT_WRITE,
        };
        let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        // SAFETY: reserving address space (2 MiB more than needed, to choose the start).
        let r = unsafe { libc::mmap(std::ptr::null_mut(), len + HUGE, prot, anon, -1, 0) };
        if r == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = r as usize;
        let start = base + ((congruent_to as usize).wrapping_sub(base) % HUGE);
        // SAFETY: giving back the parts of our own reservation before and after the range.
        unsafe {
            if start > base {
                libc::munmap(r, start - base);
            }
            libc::munmap((start + len) as *mut libc::c_void, base + HUGE - start);
        }
        let m = RawMapping { addr: start as *mut u8, len, fd, prot, watched: AtomicBool::new(false) };
        m.map_runs(runs)?; // on error `m` unmaps what was mapped
        Ok(m)
    }

    /// Maps `runs` of the image over the pages they cover (`MAP_FIXED`, replacing holes).
    pub fn map_runs(&self, runs: &[Run]) -> io::Result<()> {
        for run in runs {
            if run.at.checked_add(run.len).is_none_or(|e| e > self.len) {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            // SAFETY: replacing pages of our own mapping (bounds checked) with pages of the
            // image file.
            let p = unsafe {
                libc::mmap(
                    self.addr.add(run.at) as *mut libc::c_void,
                    run.len,
                    self.prot,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    self.fd,
                    run.image_off as libc::off_t,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Watches the holes `[a, e)` (offsets in the mapping) for their first write, which
    /// calls `filler` (`pm::holefault`).
    pub fn watch_holes(&self, holes: &[(usize, usize)], filler: Arc<dyn Filler>) -> io::Result<()> {
        let service = hole_faults().ok_or_else(|| io::Error::from_raw_os_error(libc::ENOSYS))?;
        for &(a, e) in holes {
            if a > e || e > self.len {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            self.watched.store(true, Ordering::Release);
            service.watch(self.addr as usize + a, e - a, filler.clone())?;
        }
        Ok(())
    }

    pub fn addr(&self) -> *mut u8 {
        self.addr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `buf.len()` bytes from offset `off` (the caller checked the bounds).
    pub fn copy_out(&self, off: usize, buf: &mut [u8]) {
        assert!(off + buf.len() <= self.len);
        // SAFETY: inside the mapping (asserted); the mapping's pages stay mapped until drop.
        unsafe { std::ptr::copy_nonoverlapping(self.addr.add(off), buf.as_mut_ptr(), buf.len()) };
    }

    /// Copies `data` in at offset `off` (the caller checked the bounds and that the
    /// mapping is writable).
    pub fn copy_in(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len);
        // SAFETY: inside the mapping (asserted), mapped writable by the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.addr.add(off), data.len()) };
    }

    /// Writes back the cache lines of `[off, off + len)` and fences (PM durability).
    pub fn persist(&self, off: usize, len: usize) {
        assert!(off + len <= self.len);
        let k = super::flush_kind();
        // SAFETY: inside the mapping (asserted).
        unsafe { super::cpu::flush_range(k, self.addr.add(off), len) };
        super::cpu::store_fence();
    }

    /// KiB of the mapping the kernel maps with 2 MiB pages (`ShmemPmdMapped` and
    /// `FilePmdMapped` of its ranges in /proc/self/smaps).
    pub fn pmd_mapped_kib(&self) -> io::Result<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps")?;
        let (lo, hi) = (self.addr as usize, self.addr as usize + self.len);
        let mut inside = false;
        let mut kib = 0;
        for line in smaps.lines() {
            let head = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) =
                head.split_once('-').filter(|_| head.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
            {
                let (a, b) = (usize::from_str_radix(a, 16).unwrap_or(0), usize::from_str_radix(b, 16).unwrap_or(0));
                inside = a < hi && b > lo;
            } else if inside && (line.starts_with("ShmemPmdMapped:") || line.starts_with("FilePmdMapped:")) {
                kib += line.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            }
        }
        Ok(kib)
    }
}

impl Drop for RawMapping {
    fn drop(&mut self) {
        if self.watched.load(Ordering::Acquire) {
            if let Some(service) = hole_faults() {
                service.forget(self.addr as usize, self.addr as usize + self.len);
            }
        }
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}
