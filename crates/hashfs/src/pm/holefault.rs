//! Holes of memory-mapped files given blocks when first written, as a DAX file system does
//! in its page-fault handler (LMDB with `MDB_WRITEMAP` sizes its file to the whole map and
//! writes a few pages of it).
//!
//! A hole's pages stay anonymous and are registered with a userfaultfd in missing and
//! write-protect mode. One thread serves the faults: a read of a hole gets a zero page,
//! write-protected (so that a later write still reaches us, UFFDIO_COPY installs it
//! atomically with its protection); a write, or a write to such a zero page, calls the
//! region's [`Filler`], which gives the page a block and maps the image there
//! (`MAP_FIXED`, replacing the anonymous page and its registration); then the faulting
//! thread is woken and its access, user or kernel (a `read(2)` into the page), completes
//! on the file's block. A fill that fails (no space left) leaves the page inaccessible, so
//! the access faults (SIGSEGV) instead of writing into memory that is not the file.
//!
//! userfaultfd needs `CAP_SYS_PTRACE` (or `vm.unprivileged_userfaultfd`) to see faults
//! taken in the kernel; without it [`hole_faults`] is `None` and callers give holes blocks
//! when they map them.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::io;
use std::os::unix::io::RawFd;
use std::sync::{Arc, OnceLock};

const PAGE: usize = 4096;

const UFFD_API: u64 = 0xAA;
const UFFD_FEATURE_PAGEFAULT_FLAG_WP: u64 = 1;
const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
const UFFDIO_WAKE: libc::c_ulong = 0x8010_aa02;
const UFFDIO_COPY: libc::c_ulong = 0xc028_aa03;
const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;
const UFFDIO_REGISTER_MODE_WP: u64 = 2;
const UFFDIO_COPY_MODE_WP: u64 = 2;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
const UFFD_PAGEFAULT_FLAG_WRITE: u64 = 1;
const UFFD_PAGEFAULT_FLAG_WP: u64 = 2;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioCopy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

/// `struct uffd_msg` for a page fault: event at 0, flags at 8, address at 16.
#[repr(C, align(8))]
struct UffdMsg([u8; 32]);

/// What a region's write faults call.
pub trait Filler: Send + Sync {
    /// Gives the hole page at `addr` (page-aligned) a block and maps the image there with
    /// `MAP_FIXED` (it may fill more: the rest of its 2 MiB). True when the page is now the
    /// file's (also when another fault filled it first).
    fn fill(&self, addr: usize) -> bool;
}

/// The process's userfaultfd and the regions registered with it.
pub struct HoleFaults {
    uffd: RawFd,
    regions: Mutex<Regions>,
}

/// start -> (end, filler) of each watched range.
type Regions = BTreeMap<usize, (usize, Arc<dyn Filler>)>;

static HOLE_FAULTS: OnceLock<Option<&'static HoleFaults>> = OnceLock::new();

/// The process's hole-fault service, started on first use; `None` when userfaultfd is not
/// allowed here (then holes must get blocks when they are mapped).
pub fn hole_faults() -> Option<&'static HoleFaults> {
    *HOLE_FAULTS.get_or_init(|| match HoleFaults::open() {
        Ok(h) => {
            let h: &'static HoleFaults = Box::leak(Box::new(h));
            let spawned = std::thread::Builder::new().name("hashfs-holes".into()).spawn(move || h.serve());
            spawned.is_ok().then_some(h)
        }
        Err(_) => None,
    })
}

impl HoleFaults {
    fn open() -> io::Result<HoleFaults> {
        // SAFETY: a plain system call; no user-mode-only flag, so that faults taken inside
        // the kernel (a read(2) into a hole) reach us too.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) } as RawFd;
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut api = UffdioApi { api: UFFD_API, features: UFFD_FEATURE_PAGEFAULT_FLAG_WP, ioctls: 0 };
        // SAFETY: UFFDIO_API with its struct.
        if unsafe { libc::ioctl(fd, UFFDIO_API, &mut api) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: our descriptor.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        Ok(HoleFaults { uffd: fd, regions: Mutex::new(BTreeMap::new()) })
    }

    /// Watches `[start, start + len)`, anonymous private pages of the caller's (page-aligned),
    /// for faults; writes call `filler`. Replaces any earlier watch of the same addresses.
    pub fn watch(&self, start: usize, len: usize, filler: Arc<dyn Filler>) -> io::Result<()> {
        let mut reg = UffdioRegister {
            range: UffdioRange { start: start as u64, len: len as u64 },
            mode: UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_REGISTER of the caller's own anonymous range.
        if unsafe { libc::ioctl(self.uffd, UFFDIO_REGISTER, &mut reg) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut regions = self.regions.lock();
        forget_locked(&mut regions, start, start + len);
        regions.insert(start, (start + len, filler));
        Ok(())
    }

    /// Forgets the watches of `[start, end)` (the pages were unmapped or filled).
    pub fn forget(&self, start: usize, end: usize) {
        forget_locked(&mut self.regions.lock(), start, end);
    }

    fn filler(&self, addr: usize) -> Option<Arc<dyn Filler>> {
        let regions = self.regions.lock();
        let (_, (end, f)) = regions.range(..=addr).next_back()?;
        (addr < *end).then(|| f.clone())
    }

    fn serve(&self) {
        super::block_signals();
        static ZERO: [u8; PAGE] = [0; PAGE];
        loop {
            let mut msg = UffdMsg([0; 32]);
            // SAFETY: reading one message into our buffer.
            let n = unsafe { libc::read(self.uffd, msg.0.as_mut_ptr().cast(), 32) };
            if n != 32 {
                if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return;
            }
            if msg.0[0] != UFFD_EVENT_PAGEFAULT {
                continue;
            }
            let word = |at: usize| u64::from_ne_bytes(msg.0[at..at + 8].try_into().expect("8 bytes"));
            let (flags, addr) = (word(8), word(16) as usize & !(PAGE - 1));
            if flags & (UFFD_PAGEFAULT_FLAG_WRITE | UFFD_PAGEFAULT_FLAG_WP) == 0 {
                // A read: a zero page that stays write-protected. If the page was filled
                // meanwhile the copy fails (EEXIST/ENOENT) and the wake below retries.
                let mut copy = UffdioCopy {
                    dst: addr as u64,
                    src: ZERO.as_ptr() as u64,
                    len: PAGE as u64,
                    mode: UFFDIO_COPY_MODE_WP,
                    copy: 0,
                };
                // SAFETY: UFFDIO_COPY of a static zero page into a registered page.
                if unsafe { libc::ioctl(self.uffd, UFFDIO_COPY, &mut copy) } == 0 {
                    continue;
                }
            } else if let Some(f) = self.filler(addr) {
                if !f.fill(addr) {
                    deny(addr);
                }
            }
            // No region holds the page any more: a fault of another thread on the same hole,
            // read before this one, filled it (its 2 MiB) and the image is mapped there now,
            // or the mapping went. Woken, the access retries on what is there. (Denying it
            // put an inaccessible page over the file's block: rust-lld, writing its output
            // from several threads, died with SIGSEGV.)
            let mut range = UffdioRange { start: addr as u64, len: PAGE as u64 };
            // SAFETY: UFFDIO_WAKE of the faulting page.
            unsafe { libc::ioctl(self.uffd, UFFDIO_WAKE, &mut range) };
        }
    }
}

/// A hole that could not be filled: the page becomes inaccessible, so the access faults.
fn deny(addr: usize) {
    eprintln!(
        "hashfs: a write through a memory mapping at {addr:#x} fell in a hole that could not be \
         given a block (no space left, or the mapping is too fragmented); the access faults"
    );
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE;
    // SAFETY: replacing one page of a watched hole (ours) with an inaccessible one.
    unsafe { libc::mmap(addr as *mut libc::c_void, PAGE, libc::PROT_NONE, flags, -1, 0) };
}

fn forget_locked(regions: &mut Regions, start: usize, end: usize) {
    let hit: Vec<usize> = regions.range(..end).filter(|(_, (e, _))| *e > start).map(|(s, _)| *s).collect();
    for s in hit {
        let (e, f) = regions.remove(&s).expect("listed");
        if s < start {
            regions.insert(s, (start, f.clone()));
        }
        if end < e {
            regions.insert(end, (e, f));
        }
    }
}

/// Disjoint, sorted byte ranges (a mapping's holes, from its start).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ranges(Vec<(usize, usize)>);

impl Ranges {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn spans(&self) -> &[(usize, usize)] {
        &self.0
    }

    /// The range holding `x`.
    pub fn containing(&self, x: usize) -> Option<(usize, usize)> {
        self.0.iter().copied().find(|&(a, e)| a <= x && x < e)
    }

    /// What a write fault at `rel` in a mapping of file offset `map_off` fills: the part of
    /// the page's 2 MiB of the file that lies in the same range (a hole), as offsets in the
    /// mapping; one aligned extent for the aligned allocator, so one huge page. None when
    /// `rel` is in no range (filled already).
    pub fn fill_span(&self, rel: usize, map_off: u64) -> Option<(usize, usize)> {
        const HUGE: u64 = 2 << 20;
        let (h0, h1) = self.containing(rel)?;
        let chunk = (map_off + rel as u64) / HUGE * HUGE;
        let lo = (chunk.saturating_sub(map_off) as usize).max(h0);
        let hi = ((chunk + HUGE - map_off) as usize).min(h1);
        Some((lo, hi))
    }

    /// Adds `[a, e)`, merging with its neighbours.
    pub fn add(&mut self, a: usize, e: usize) {
        let (mut a, mut e) = (a, e);
        self.0.retain(|&(s, t)| {
            let touches = s <= e && a <= t;
            if touches {
                (a, e) = (a.min(s), e.max(t));
            }
            !touches
        });
        let at = self.0.partition_point(|&(s, _)| s < a);
        self.0.insert(at, (a, e));
    }

    /// Takes `[a, e)` out; true when it held any of it.
    pub fn remove(&mut self, a: usize, e: usize) -> bool {
        let mut out = Vec::with_capacity(self.0.len() + 1);
        let mut hit = false;
        for &(s, t) in &self.0 {
            if t <= a || e <= s {
                out.push((s, t));
                continue;
            }
            hit = true;
            if s < a {
                out.push((s, a));
            }
            if e < t {
                out.push((e, t));
            }
        }
        self.0 = out;
        hit
    }

    /// The parts of the ranges inside `[a, e)`.
    pub fn overlapping(&self, a: usize, e: usize) -> Vec<(usize, usize)> {
        self.0.iter().filter(|&&(s, t)| s < e && a < t).map(|&(s, t)| (s.max(a), t.min(e))).collect()
    }

    /// The ranges inside `[a, e)`, moved down by `shift` (a mapping split or trimmed).
    pub fn clip(&self, a: usize, e: usize, shift: usize) -> Ranges {
        Ranges(self.overlapping(a, e).into_iter().map(|(s, t)| (s - shift, t - shift)).collect())
    }

    /// The parts of `[a, e)` outside the ranges.
    pub fn gaps(&self, a: usize, e: usize) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut at = a;
        for (s, t) in self.overlapping(a, e) {
            if at < s {
                out.push((at, s));
            }
            at = t;
        }
        if at < e {
            out.push((at, e));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Fills the whole watched range at its first fault, slowly (so that a second thread's
    /// fault on another page of it is queued meanwhile): maps `file` over it and forgets the
    /// watch, as the shim's fill of a 2 MiB chunk does.
    struct SlowWholeFill {
        file: std::fs::File,
        start: usize,
        len: usize,
    }

    impl Filler for SlowWholeFill {
        fn fill(&self, _addr: usize) -> bool {
            std::thread::sleep(std::time::Duration::from_millis(200));
            let (prot, flags) = (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_FIXED);
            // SAFETY: replacing our own watched range with a shared mapping of our file.
            let p =
                unsafe { libc::mmap(self.start as *mut libc::c_void, self.len, prot, flags, self.file.as_raw_fd(), 0) };
            if p == libc::MAP_FAILED {
                return false;
            }
            hole_faults().expect("watching").forget(self.start, self.start + self.len);
            true
        }
    }

    /// Two threads write two pages of one hole at once: the first fault fills both; the
    /// second, read after that fill, finds no watch left and must let its access retry on
    /// the file's page. Denying it put an inaccessible page over the file's block and the
    /// thread died with SIGSEGV (rust-lld writing its output from several threads:
    /// `hole-fault-after-fill-denied`).
    #[test]
    fn a_fault_on_a_page_another_fault_filled_retries_on_the_file() {
        let Some(h) = hole_faults() else {
            assert!(std::env::var_os("CI").is_none(), "CI runs as root, where userfaultfd is allowed");
            eprintln!("SKIPPED: userfaultfd is not allowed here");
            return;
        };
        let len = 2 * PAGE;
        let file = tempfile::tempfile().unwrap();
        file.set_len(len as u64).unwrap();
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        // SAFETY: a fresh anonymous mapping, ours.
        let start = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        assert_ne!(start, libc::MAP_FAILED);
        let start = start as usize;
        let filler = Arc::new(SlowWholeFill { file: file.try_clone().unwrap(), start, len });
        h.watch(start, len, filler).unwrap();
        let writer = |page: usize, delay: u64| {
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(delay));
                // SAFETY: a page of the watched range, mapped for as long as the test runs.
                unsafe { std::ptr::write_volatile((start + page * PAGE) as *mut u8, 0x40 + page as u8) };
            })
        };
        let (a, b) = (writer(0, 0), writer(1, 50));
        a.join().unwrap();
        b.join().unwrap();
        let mut got = [0u8; 1];
        for page in 0..2 {
            std::os::unix::fs::FileExt::read_at(&file, &mut got, (page * PAGE) as u64).unwrap();
            assert_eq!(got[0], 0x40 + page as u8, "page {page}'s write reached the file");
        }
        // SAFETY: our mapping, no longer used.
        unsafe { libc::munmap(start as *mut libc::c_void, len) };
    }

    #[test]
    fn ranges_merge_split_and_clip() {
        let mut h = Ranges::default();
        h.add(8, 12);
        h.add(0, 4);
        h.add(4, 6); // touches [0, 4): merged
        assert_eq!(h.0, vec![(0, 6), (8, 12)]);
        assert!(h.remove(2, 3));
        assert_eq!(h.0, vec![(0, 2), (3, 6), (8, 12)]);
        assert!(!h.remove(6, 8), "nothing of a gap to take");
        assert_eq!(h.overlapping(1, 9), vec![(1, 2), (3, 6), (8, 9)]);
        assert_eq!(h.gaps(1, 14), vec![(2, 3), (6, 8), (12, 14)]);
        assert_eq!(h.gaps(3, 6), vec![]);
        assert_eq!(h.clip(4, 10, 4).0, vec![(0, 2), (4, 6)]);
        assert_eq!(h.containing(9), Some((8, 12)));
        assert_eq!(h.containing(7), None);
        // A fault fills its 2 MiB of the file within the hole: the mapping starts 1 MiB
        // into the file, so its 2 MiB chunks begin at offsets 1 MiB, 3 MiB, ...
        let mib = 1 << 20;
        let mut big = Ranges::default();
        big.add(0, 10 * mib);
        assert_eq!(big.fill_span(2 * mib, mib as u64), Some((mib, 3 * mib)));
        assert_eq!(big.fill_span(100, mib as u64), Some((0, mib)));
        assert_eq!(big.fill_span(9 * mib + 5, mib as u64), Some((9 * mib, 10 * mib)));
        assert_eq!(big.fill_span(11 * mib, 0), None);
    }
}
