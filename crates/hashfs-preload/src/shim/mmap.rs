//! mmap of HashFS files.
//!
//! Shared mappings, read-only or writable, map every page onto its data block in the image
//! (MAP_FIXED over a reserved range), never a copy: a store through one is in the file, and
//! a `write`/`pwrite` is visible through every mapping at once, as in any Linux file
//! system. Holes inside the file become blocks when mapped, so that every page has a home.
//! Pages past the end of the file stay anonymous until the file grows over them (a write,
//! truncate up or fallocate through the shim), then they are mapped onto the new blocks;
//! this is how LMDB reads pages it wrote with `pwrite` through its read-only map. msync
//! writes the lines back and fences. Private mappings are copies taken at `mmap` time.
//!
//! Each mapping is recorded (range, file offset, pages mapped onto the image); `munmap` of
//! any length, whole or partial, trims or splits the record, and the open file goes with
//! its last page. Truncating a file down while it has shared mappings fails with EBUSY, and
//! a hole punched in it is zeroed in place instead, so no mapping is ever left on freed
//! blocks. Not intercepted: `mremap` of such a mapping.

use super::*;
use std::sync::atomic::AtomicUsize;

/// Kernel mappings (runs of physically consecutive blocks) one `mmap` may create: the
/// process has `vm.max_map_count` (65,530 by default) in all. A file allocated by the
/// aligned allocator needs one per 2 MiB at most; a fragmented file may need one per page,
/// and mapping it then fails with ENOMEM rather than exhausting the process's mappings.
const MAX_RUNS_PER_MAP: usize = 16_384;
/// Runs shorter than this are populated at `mmap` (the kernel's fault-around, 64 KiB).
const FAULT_AROUND_PAGES: usize = 16;
const PAGE: usize = 4096;
const HUGE: usize = 2 << 20;

struct SharedMap {
    start: usize,
    /// Bytes, a whole number of pages.
    len: usize,
    /// File offset of `start`.
    off: u64,
    /// Bytes from `start` mapped onto the image (the rest is past EOF, anonymous).
    mapped: usize,
    prot: c_int,
    file: Arc<OpenFile>,
    /// Keeps the file's blocks in place while the pages are mapped onto them.
    _pin: Option<hashfs::BlockPin>,
}

static SHARED_MAPS: Mutex<Vec<SharedMap>> = Mutex::new(Vec::new());
/// Records in SHARED_MAPS, read without the lock on every write.
static SHARED_COUNT: AtomicUsize = AtomicUsize::new(0);

pub(super) fn has_shared_maps(ino: Ino) -> bool {
    SHARED_COUNT.load(Ordering::Relaxed) > 0 && SHARED_MAPS.lock().iter().any(|m| m.file.ino == ino)
}

/// Maps `[from, to)` bytes of mapping `m` (page-aligned, inside the file) onto the image.
fn map_pages(fs: &FileSystem<MmapDevice>, m: &SharedMap, from: usize, to: usize) -> Result<(), c_int> {
    let real_mmap = real!(mmap: fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void);
    if to <= from {
        return Ok(());
    }
    // Holes become blocks, so that every page in the file has a home in the image.
    let f = fs.open_ino(m.file.ino, Access { read: true, write: true, append: false }).map_err(|e| e.errno())?;
    let size = f.metadata().map_err(|e| e.errno())?.size;
    let alloc_end = (m.off + to as u64).min(size);
    if alloc_end > m.off + from as u64 {
        f.allocate(m.off + from as u64, alloc_end - m.off - from as u64).map_err(|e| e.errno())?;
    }
    let geo = fs.geometry();
    let image_fd = fs.device().raw_fd();
    let pages = (to - from) / PAGE;
    let first = (m.off as usize + from) / PAGE;
    let block = |l: usize| fs.physical_block(m.file.ino, hashfs::Lblk(l as u64)).ok().flatten().map(|e| e.pblk.0);
    let mut i = 0;
    let mut runs = 0;
    while i < pages {
        let slot = block(first + i).ok_or(libc::EIO)?;
        runs += 1;
        if runs > MAX_RUNS_PER_MAP {
            return Err(libc::ENOMEM);
        }
        // Runs of physically consecutive blocks become one kernel mapping.
        let mut run = 1;
        while i + run < pages && block(first + i + run) == Some(slot + run as u64) {
            run += 1;
        }
        // A short run (HashFS's placement: one block) is filled now: the kernel's
        // fault-around maps up to 16 neighbouring pages per fault, but only within one
        // mapping, so a run this short would fault page by page (LevelDB's YCSB A through
        // the shim: 60,000 faults against 28,000 so, 1.25 ± 0.12x its throughput;
        // docs/benchmarks.md).
        let populate = if run < FAULT_AROUND_PAGES { libc::MAP_POPULATE } else { 0 };
        // SAFETY: replacing pages of our own reservation with pages of the image file.
        let r = unsafe {
            real_mmap(
                (m.start + from + i * PAGE) as *mut c_void,
                run * PAGE,
                m.prot,
                libc::MAP_SHARED | libc::MAP_FIXED | populate,
                image_fd,
                geo.block_off(slot).0 as off_t,
            )
        };
        if r == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOMEM));
        }
        i += run;
    }
    Ok(())
}

/// After a write, truncate or fallocate of `of`'s file through the shim: pages of shared
/// mappings that the file now covers are mapped onto their blocks.
pub(super) fn file_changed(of: &OpenFile) {
    file_changed_ino(of.ino)
}

pub(super) fn file_changed_ino(ino: Ino) {
    if SHARED_COUNT.load(Ordering::Relaxed) == 0 {
        return;
    }
    let Ok(fs) = shim().fs() else { return };
    let Ok(size) = fs.getattr(ino).map(|m| m.size) else { return };
    let mut maps = SHARED_MAPS.lock();
    for m in maps.iter_mut().filter(|m| m.file.ino == ino) {
        let want = (size.saturating_sub(m.off) as usize).next_multiple_of(PAGE).min(m.len);
        if want > m.mapped && map_pages(fs, m, m.mapped, want).is_ok() {
            m.mapped = want;
        }
    }
}

/// Reserves `len` bytes of address space for a shared mapping of file offset `off`. Where
/// the caller leaves the address to us, it is chosen congruent to `off` modulo 2 MiB: the
/// aligned allocator puts each whole 2 MiB of a file on a 2 MiB-aligned extent of the
/// image, and the kernel maps 2 MiB of a file with one huge page only when the virtual
/// address and the image offset agree modulo 2 MiB.
fn reserve(addr: *mut c_void, len: usize, prot: c_int, fixed: c_int, off: u64) -> Result<*mut c_void, c_int> {
    let real_mmap = real!(mmap: fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void);
    let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    let err = || std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOMEM);
    if !addr.is_null() || fixed != 0 || len < HUGE {
        // SAFETY: reserving address space (at the caller's hint or MAP_FIXED target).
        let r = unsafe { real_mmap(addr, len, prot, anon | fixed, -1, 0) };
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

fn map_file(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> Result<*mut c_void, c_int> {
    let real_mmap = real!(mmap: fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void);
    let s = shim();
    let fs = s.fs()?;
    let of = s.file(fd).ok_or(libc::EBADF)?;
    let file = of.file.as_ref().ok_or(libc::ENODEV)?;
    if len == 0 || off < 0 || !(off as usize).is_multiple_of(PAGE) {
        return Err(libc::EINVAL);
    }
    let acc = of.flags.load(Ordering::Relaxed) & libc::O_ACCMODE;
    if acc == libc::O_WRONLY {
        return Err(libc::EACCES); // every mapping needs read access, as on Linux
    }
    let size = fs.getattr(of.ino).map_err(|e| e.errno())?.size;
    let fixed = flags & libc::MAP_FIXED;
    let shared = flags & (libc::MAP_SHARED | libc::MAP_SHARED_VALIDATE) != 0;
    if !shared {
        // SAFETY: an anonymous mapping; addr is the caller's hint (or MAP_FIXED target).
        let region = unsafe {
            real_mmap(
                addr,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | fixed,
                -1,
                0,
            )
        };
        if region == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOMEM));
        }
        let avail = size.saturating_sub(off as u64).min(len as u64) as usize;
        // SAFETY: region holds len >= avail bytes.
        let buf = unsafe { std::slice::from_raw_parts_mut(region as *mut u8, avail) };
        let mut done = 0;
        while done < avail {
            match file.read_at(off as u64 + done as u64, &mut buf[done..]) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) => return Err(e.errno()),
            }
        }
        // SAFETY: region is ours, of len bytes.
        unsafe { libc::mprotect(region, len, prot) };
        return Ok(region);
    }
    if prot & libc::PROT_WRITE != 0 && acc != libc::O_RDWR {
        return Err(libc::EACCES);
    }
    let pages = len.div_ceil(PAGE);
    let region = reserve(addr, pages * PAGE, prot, fixed, off as u64)?;
    let _pin = Some(file.pin_blocks());
    let mut m = SharedMap {
        start: region as usize,
        len: pages * PAGE,
        off: off as u64,
        mapped: 0,
        prot,
        file: of.clone(),
        _pin,
    };
    let in_file = (size.saturating_sub(off as u64) as usize).next_multiple_of(PAGE).min(m.len);
    if let Err(e) = map_pages(fs, &m, 0, in_file) {
        // SAFETY: undoing our own reservation.
        unsafe { libc::munmap(region, m.len) };
        return Err(e);
    }
    m.mapped = in_file;
    SHARED_MAPS.lock().push(m);
    SHARED_COUNT.fetch_add(1, Ordering::Relaxed);
    Ok(region)
}

#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    if flags & libc::MAP_ANONYMOUS == 0 && ours(fd) {
        return guarded(|| match map_file(addr, len, prot, flags, fd, off) {
            Ok(p) => p,
            Err(e) => {
                set_errno(e);
                libc::MAP_FAILED
            }
        })
        .unwrap_or(libc::MAP_FAILED);
    }
    // SAFETY: forwarding.
    unsafe {
        real!(mmap: fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void)(addr, len, prot, flags, fd, off)
    }
}

#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    // SAFETY: same contract.
    unsafe { mmap(addr, len, prot, flags, fd, off) }
}

/// Removes `[a, e)` (page-aligned) from the records: a record inside it goes, one that
/// overlaps it is trimmed, one that holds it is split in two.
fn forget_range(maps: &mut Vec<SharedMap>, a: usize, e: usize) {
    let mut out = Vec::with_capacity(maps.len() + 1);
    for m in maps.drain(..) {
        let end = m.start + m.len;
        if e <= m.start || end <= a {
            out.push(m);
            continue;
        }
        if m.start < a {
            let len = a - m.start;
            out.push(SharedMap { len, mapped: m.mapped.min(len), file: m.file.clone(), _pin: m._pin.clone(), ..m });
        }
        if e < end {
            let cut = e - m.start;
            out.push(SharedMap {
                start: e,
                len: end - e,
                off: m.off + cut as u64,
                mapped: m.mapped.saturating_sub(cut),
                file: m.file.clone(),
                _pin: m._pin.clone(),
                ..m
            });
        }
    }
    *maps = out;
}

#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    // SAFETY: forwarding.
    let r = unsafe { real!(munmap: fn(*mut c_void, size_t) -> c_int)(addr, len) };
    if r == 0 && !IN_SHIM.with(|g| g.get()) && SHARED_COUNT.load(Ordering::Relaxed) > 0 {
        // The kernel unmaps whole pages: [addr, addr + len rounded up to a page).
        let (a, e) = (addr as usize, (addr as usize).saturating_add(len).next_multiple_of(PAGE));
        guarded(|| {
            let mut maps = SHARED_MAPS.lock();
            forget_range(&mut maps, a, e);
            SHARED_COUNT.store(maps.len(), Ordering::Relaxed);
        });
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
    let (a, e) = (addr as usize, addr as usize + len);
    let ours = !IN_SHIM.with(|g| g.get())
        && SHARED_COUNT.load(Ordering::Relaxed) > 0
        && SHARED_MAPS.lock().iter().any(|m| a < m.start + m.len && m.start < e);
    if ours {
        // SAFETY: the range is part of a live mapping of the image.
        unsafe { hashfs::pm::persist_range(addr as *const u8, len) };
        return 0;
    }
    // SAFETY: forwarding.
    unsafe { real!(msync: fn(*mut c_void, size_t, c_int) -> c_int)(addr, len, flags) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmapping_trims_and_splits_records() {
        let of = Arc::new(OpenFile {
            file: None,
            ino: Ino(5),
            fs_path: PathBuf::from("/f"),
            pos: Mutex::new(0),
            flags: std::sync::atomic::AtomicI32::new(0),
        });
        let rec =
            |start, len, off, mapped| SharedMap { start, len, off, mapped, prot: 0, file: of.clone(), _pin: None };
        let spans = |v: &Vec<SharedMap>| v.iter().map(|m| (m.start, m.len, m.off, m.mapped)).collect::<Vec<_>>();
        // A hole punched in the middle splits the record; the right part's file offset moves.
        let mut v = vec![rec(0x10000, 10 * PAGE, 0, 6 * PAGE)];
        forget_range(&mut v, 0x10000 + 2 * PAGE, 0x10000 + 4 * PAGE);
        assert_eq!(
            spans(&v),
            vec![(0x10000, 2 * PAGE, 0, 2 * PAGE), (0x10000 + 4 * PAGE, 6 * PAGE, 4 * PAGE as u64, 2 * PAGE)]
        );
        // The head goes; then the rest, unmapped with a length that is not a page multiple.
        forget_range(&mut v, 0x10000, 0x10000 + 2 * PAGE);
        assert_eq!(v.len(), 1);
        let (a, len) = (0x10000 + 4 * PAGE, 6 * PAGE - 100);
        forget_range(&mut v, a, (a + len).next_multiple_of(PAGE));
        assert!(v.is_empty(), "an odd-length munmap of the whole mapping leaves no record");
        // A range that misses every record changes nothing.
        let mut v = vec![rec(0x10000, PAGE, 0, PAGE)];
        forget_range(&mut v, 0x20000, 0x30000);
        assert_eq!(v.len(), 1);
    }
}
