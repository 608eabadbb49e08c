//! Where a mapping's pieces go, and filling them at `mmap`.
//!
//! A file whose blocks lie apart (HashFS's placement: every block on its own) is one kernel
//! mapping per page, and `mmap` of it is mostly the kernel's work per piece: LevelDB's
//! YCSB A through the shim makes about 27,600 `mmap` calls where tmpfs makes 81, one per
//! page of every table it opens. Two things make a piece cheaper (4.39 -> 2.63 µs per page,
//! `bench/results/apps/shim-mmap-ab/`, docs/benchmarks.md):
//!
//! - Into a hole rather than over a reservation. `MAP_FIXED` over our own reservation
//!   first unmaps that page of it (the kernel splits the reserved mapping every time);
//!   `MAP_FIXED_NOREPLACE` into an empty range only inserts. The range is found by
//!   reserving it and giving it back; until the pieces fill it, another thread's `mmap`
//!   may land in it, and `MAP_FIXED_NOREPLACE` then fails with EEXIST instead of
//!   replacing that thread's mapping: the pieces placed so far are unmapped and the
//!   mapping is tried again elsewhere ([`HOLE_TRIES`] times, then over a reservation,
//!   which no other thread can take). A caller's own address (a hint or `MAP_FIXED`) is
//!   always served over a reservation, which keeps `MAP_FIXED`'s replacement atomic.
//! - One `madvise(MADV_POPULATE_READ)` over consecutive short runs instead of
//!   `MAP_POPULATE` on each (Linux 5.14; an older kernel refuses it with EINVAL, and the
//!   shim then goes back to `MAP_POPULATE`).

use super::*;

/// Attempts to place a mapping into a hole before it goes over a reservation.
const HOLE_TRIES: usize = 4;

/// How pieces go into a mapping's range.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Place {
    /// Over our own reservation (`MAP_FIXED`): the range is ours throughout.
    Over,
    /// Into an empty range (`MAP_FIXED_NOREPLACE`): EEXIST where another thread mapped
    /// something since the range was found.
    Hole,
}

impl Place {
    pub(super) fn flag(self) -> c_int {
        match self {
            Place::Over => libc::MAP_FIXED,
            Place::Hole => libc::MAP_FIXED_NOREPLACE,
        }
    }

    /// Maps `len` bytes of fresh private anonymous pages at `at` with `prot`: a hole's or
    /// a private mapping's zeros, pages past the end of the file, pages to watch.
    pub(super) fn anon(self, at: usize, len: usize, prot: c_int) -> Result<(), c_int> {
        let real_mmap = real!(mmap: fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void);
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | self.flag();
        // SAFETY: pages of our own reservation, or of the hole we place into.
        let r = unsafe { real_mmap(at as *mut c_void, len, prot, flags, -1, 0) };
        self.check(r, at, len)
    }

    /// The result of a real `mmap` of a piece at `want`: Ok when it is there.
    pub(super) fn check(self, r: *mut c_void, want: usize, len: usize) -> Result<(), c_int> {
        if r == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOMEM));
        }
        if r as usize != want {
            // A kernel before 4.17 takes MAP_FIXED_NOREPLACE for a hint.
            // SAFETY: the mapping the kernel just made for us elsewhere.
            unsafe { libc::munmap(r, len) };
            return Err(libc::EEXIST);
        }
        Ok(())
    }
}

/// Whether the kernel takes MADV_POPULATE_READ (cleared at its first EINVAL).
static POPULATE_MADVISE: AtomicBool = AtomicBool::new(true);

/// Consecutive runs of a mapping to fill once their pieces are mapped.
pub(super) struct Populate {
    start: usize,
    readable: bool,
    span: Option<(usize, usize)>,
}

impl Populate {
    pub(super) fn new(start: usize, prot: c_int) -> Populate {
        Populate { start, readable: prot & libc::PROT_READ != 0, span: None }
    }

    /// The flag a short run's `mmap` takes: none while the kernel populates by `madvise`.
    pub(super) fn flag(&self) -> c_int {
        if POPULATE_MADVISE.load(Ordering::Relaxed) {
            0
        } else {
            libc::MAP_POPULATE
        }
    }

    /// Adds a mapped short run, `[a, e)` bytes from the mapping's start.
    pub(super) fn add(&mut self, a: usize, e: usize) {
        match self.span {
            Some((s, t)) if t == a => self.span = Some((s, e)),
            _ => {
                self.flush();
                self.span = Some((a, e));
            }
        }
    }

    /// Fills the runs added since the last flush (their pages stay mapped if it fails: a
    /// fault fills them later).
    pub(super) fn flush(&mut self) {
        let Some((a, e)) = self.span.take() else { return };
        if !self.readable || !POPULATE_MADVISE.load(Ordering::Relaxed) {
            return;
        }
        // SAFETY: advice over pages of our own mapping.
        let r = unsafe { libc::madvise((self.start + a) as *mut c_void, e - a, libc::MADV_POPULATE_READ) };
        if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
            POPULATE_MADVISE.store(false, Ordering::Relaxed);
            for p in (a..e).step_by(PAGE) {
                // SAFETY: a readable page of our own mapping, faulted in.
                unsafe { std::ptr::read_volatile((self.start + p) as *const u8) };
            }
        }
    }
}

/// Maps `m` (its `len`, `off`, `prot` and file set; `in_file` bytes of it are the file's)
/// at an address of the kernel's choice, into a hole where it can, else over a
/// reservation, and sets its start; on error nothing of it stays mapped.
pub(super) fn place(fs: &FileSystem<MmapDevice>, m: &mut FileMap, in_file: usize) -> Result<(), c_int> {
    for _ in 0..HOLE_TRIES {
        match try_hole(fs, m, in_file) {
            Err(libc::EEXIST) => continue,
            r => return r,
        }
    }
    let region = reserve(std::ptr::null_mut(), m.len, m.prot, 0, m.off)?;
    over(fs, m, region, in_file)
}

/// Maps `m` over a reservation at `region` (the caller's address, or where no hole held).
pub(super) fn over(
    fs: &FileSystem<MmapDevice>,
    m: &mut FileMap,
    region: *mut c_void,
    in_file: usize,
) -> Result<(), c_int> {
    reset(m, region as usize);
    map_pages(fs, m, 0, in_file, Place::Over).inspect_err(|_| {
        forget_watches(m);
        // SAFETY: undoing our own reservation.
        unsafe { libc::munmap(region, m.len) };
    })
}

/// One attempt at a hole: the range is reserved and given back, then filled piece by
/// piece, the file's pages and after them the anonymous pages past its end.
fn try_hole(fs: &FileSystem<MmapDevice>, m: &mut FileMap, in_file: usize) -> Result<(), c_int> {
    let region = reserve(std::ptr::null_mut(), m.len, libc::PROT_NONE, 0, m.off)?;
    // SAFETY: giving back the reservation we just made.
    unsafe { libc::munmap(region, m.len) };
    reset(m, region as usize);
    if let Err(e) = map_pages(fs, m, 0, in_file, Place::Hole) {
        forget_watches(m);
        return Err(e);
    }
    if in_file < m.len {
        // The rest of the hole, past the end of the file.
        if let Err(e) = Place::Hole.anon(m.start + in_file, m.len - in_file, m.prot) {
            forget_watches(m);
            // SAFETY: the pieces we placed, [start, start + in_file).
            unsafe { libc::munmap(region, in_file) };
            return Err(e);
        }
    }
    Ok(())
}

fn reset(m: &mut FileMap, start: usize) {
    m.start = start;
    m.runs = 0;
    m.holes = Ranges::default();
}

fn forget_watches(m: &FileMap) {
    if let Some(w) = hole_faults() {
        w.forget(m.start, m.start + m.len);
    }
}

/// Reserves `len` bytes of address space for a shared mapping of file offset `off`. Where
/// the caller leaves the address to us, it is chosen congruent to `off` modulo 2 MiB: the
/// aligned allocator puts each whole 2 MiB of a file on a 2 MiB-aligned extent of the
/// image, and the kernel maps 2 MiB of a file with one huge page only when the virtual
/// address and the image offset agree modulo 2 MiB.
pub(super) fn reserve(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    fixed: c_int,
    off: u64,
) -> Result<*mut c_void, c_int> {
    let real_mmap = real!(mmap: fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void);
    let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    let err = || std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOMEM);
    if fixed != 0 {
        // Over whatever is there, which may be one of our mappings: its records go with it.
        return super::unmap_recorded(addr as usize, len, || {
            // SAFETY: the caller's MAP_FIXED target, theirs to replace.
            let r = unsafe { real_mmap(addr, len, prot, anon | fixed, -1, 0) };
            if r == libc::MAP_FAILED {
                Err(err())
            } else {
                Ok(r)
            }
        });
    }
    if !addr.is_null() || len < HUGE {
        // SAFETY: reserving address space at the caller's hint (or anywhere).
        let r = unsafe { real_mmap(addr, len, prot, anon, -1, 0) };
        return if r == libc::MAP_FAILED { Err(err()) } else { Ok(r) };
    }
    // SAFETY: reserving address space anywhere, 2 MiB more than needed.
    let r = unsafe { real_mmap(std::ptr::null_mut(), len + HUGE, prot, anon | libc::MAP_NORESERVE, -1, 0) };
    if r == libc::MAP_FAILED {
        return Err(err());
    }
    let base = r as usize;
    let start = base + ((off as usize).wrapping_sub(base) % HUGE);
    // SAFETY: giving back the parts of our own reservation before and after the range.
    unsafe {
        if start > base {
            libc::munmap(r, start - base);
        }
        libc::munmap((start + len) as *mut c_void, base + HUGE - start);
    }
    Ok(start as *mut c_void)
}
