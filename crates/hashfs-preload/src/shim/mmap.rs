//! mmap of HashFS files.
//!
//! Shared mappings, read-only or writable, map every page onto its data block in the image
//! (into a hole of the address space, or over a reserved range: `place.rs`), not a copy
//! (but for small read-only ones of scattered files, and read-only ones past the budget of
//! kernel mappings: `copy.rs`, copies kept in step with the file):
//! a store through one is in the file, and a `write`/`pwrite` is visible through every
//! mapping at once, as in any Linux file system. Holes stay holes until written: their
//! pages are anonymous and watched (`hashfs::pm::holefault`, userfaultfd); a read sees
//! zeros, and the first write through the mapping gives the hole blocks (its whole 2 MiB of
//! the file, so that the aligned allocator can make it one huge page) and maps them, as a
//! DAX file system's fault handler does (LMDB with `MDB_WRITEMAP` sizes its file to the
//! whole map). Where userfaultfd is not allowed (no `CAP_SYS_PTRACE`), holes get blocks
//! when mapped, as before. A write or fallocate through the shim that fills a hole remaps
//! it. Pages past the end of the file stay anonymous until the file grows over them (a
//! write, truncate up or fallocate through the shim); this is how LMDB reads pages it wrote
//! with `pwrite` through its read-only map. msync writes back the lines of the pages that
//! are the file's and fences.
//!
//! Private mappings map the same blocks copy-on-write (`MAP_PRIVATE`): nothing is copied
//! at `mmap` (but past the budget, `copy.rs`), a store makes a private copy of its page,
//! holes and pages past the end are private zeros.
//!
//! Each mapping is recorded (range, file offset, pages mapped onto the image, holes);
//! `munmap` of any length, whole or partial, trims or splits the record, and the open file
//! goes with its last page. Truncating a file down while it is mapped, in this process or
//! another (`hashfs/src/fs/shared/mapped.rs`), fails with EBUSY, and a hole punched in it
//! is zeroed in place instead, so no mapping is ever left on freed blocks. `mremap` of such
//! a mapping maps the file's longer range anew (`remap`).

use super::*;
use hashfs::pm::holefault::{hole_faults, Filler, Ranges};
use hashfs::pm::vspace;
use hashfs_interpose::{Address, Errno, Mappings, Next, Served};
use io::served;
use std::sync::atomic::AtomicUsize;

mod budget;
mod copy;
mod follow;
mod holes;
mod place;
mod self_mem;
pub(super) use holes::fill_holes_in;
use place::{Place, Populate};

/// Kernel mappings (runs of physically consecutive blocks, and watched holes) one `mmap`
/// may create: the process has `vm.max_map_count` (65,530 by default) in all. A file
/// allocated by the aligned allocator needs one per 2 MiB at most; a fragmented file may
/// need one per page, and mapping it then fails with ENOMEM (or is served by a copy,
/// `copy.rs`) rather than exhausting the process's mappings.
const MAX_RUNS_PER_MAP: usize = 16_384;
/// Runs shorter than this are populated at `mmap` (the kernel's fault-around, 64 KiB).
const FAULT_AROUND_PAGES: usize = 16;
const PAGE: usize = 4096;
const HUGE: usize = 2 << 20;

struct FileMap {
    start: usize,
    /// Bytes, a whole number of pages.
    len: usize,
    /// File offset of `start`.
    off: u64,
    /// Bytes from `start` that the file covered when last mapped (the rest is past EOF,
    /// anonymous).
    mapped: usize,
    prot: c_int,
    private: bool,
    /// Holes of the file inside `mapped`, watched for their first write: page-aligned byte
    /// ranges from `start`, sorted and disjoint (shared mappings only).
    holes: Ranges,
    /// Kernel mappings made for this record so far (runs and watched holes).
    runs: usize,
    /// Kernel mappings its next `map_pages` may bring `runs` to ([`growth_cap`]).
    cap: usize,
    /// Kernel mappings held for it in the ledger beyond `runs`: a writable shared
    /// mapping's worst case (`budget.rs`); 0 for the others.
    reserve: usize,
    /// Served by a copy of the file's bytes (`copy.rs`), one anonymous mapping.
    copy: bool,
    file: Arc<OpenFile>,
    /// Keeps the file's blocks in place while the pages are mapped onto them.
    _pin: Option<hashfs::BlockPin>,
}

impl FileMap {
    fn covers(&self, addr: usize) -> bool {
        self.start <= addr && addr < self.start + self.len
    }

    /// The bytes from its start that a file of `size` bytes covers, in whole pages (the
    /// rest of the mapping lies past the file's end).
    fn in_file(&self, size: u64) -> usize {
        (size.saturating_sub(self.off) as usize).next_multiple_of(PAGE).min(self.len)
    }
}

/// A lock held across `fork` and let go in both processes ([`held_for_fork`]).
static MAPS: hashfs::ForkMutex<Vec<FileMap>> = hashfs::ForkMutex::new(Vec::new());
/// Records in MAPS, read without the lock on every write.
static MAP_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Records in MAPS with watched holes, read without the lock on every read.
static HOLE_MAPS: AtomicUsize = AtomicUsize::new(0);
/// Kernel mappings the records in MAPS hold (a split record counts its parts' whole); the
/// process's ledger of HashFS's mappings (`hashfs::pm::vspace`) holds them too.
static KERNEL_MAPS: AtomicUsize = AtomicUsize::new(0);

/// The kernel mappings record `m` holds in the ledger: those it made, or its reserve.
fn held(m: &FileMap) -> usize {
    m.runs.max(m.reserve)
}

/// Publishes the counts of `maps` (under its lock, after any change).
fn recount(maps: &[FileMap]) {
    MAP_COUNT.store(maps.len(), Ordering::Relaxed);
    HOLE_MAPS.store(maps.iter().filter(|m| !m.holes.is_empty()).count(), Ordering::Relaxed);
    let runs: usize = maps.iter().map(held).sum();
    let before = KERNEL_MAPS.swap(runs, Ordering::Relaxed);
    if runs >= before {
        vspace::maps_taken((runs - before) as u64);
    } else {
        vspace::maps_given((before - runs) as u64);
    }
    mark_writable(maps);
    follow::after_recount(maps);
}

/// The inodes this process has marked in the image's region as mapped writable and shared
/// (sorted), and the process that marked them: a forked child, a participant of its own,
/// marked those it inherited under its own name as it joined, and takes them for its own
/// ([`follow_in_child`]).
static MARKED: std::sync::Mutex<(i32, Vec<Ino>)> = std::sync::Mutex::new((0, Vec::new()));

/// After the records changed (under MAPS's lock): the region's marks of this process's
/// writable shared mappings follow them (`hashfs/src/fs/shared/mapped.rs`), so that no
/// other process serves a mapping of such a file by a copy, and its copies become the
/// file's pages (`copy::yield_to_writers`). A new mapping is marked before `mmap` (or
/// `mprotect`) returns it, so before any store through it.
fn mark_writable(maps: &[FileMap]) {
    let me = current_pid();
    let mut marked = MARKED.lock().unwrap_or_else(|e| e.into_inner());
    if marked.0 != me {
        *marked = (me, Vec::new());
    }
    if marked.1.is_empty() && !maps.iter().any(copy::writable) {
        return;
    }
    let Ok(fs) = shim().fs() else { return };
    let now = writable_inos(maps);
    for &ino in now.iter().filter(|i| marked.1.binary_search(i).is_err()) {
        if let Err(e) = fs.note_mapped_writable(ino, true) {
            eprintln!("hashfs_preload: inode {}: marking its writable mapping for the other processes: {e}", ino.0);
        }
    }
    for &ino in marked.1.iter().filter(|i| now.binary_search(i).is_err()) {
        let _ = fs.note_mapped_writable(ino, false);
    }
    marked.1 = now;
}

/// At exit: drops every record (and with them their open files and pinned blocks), so
/// that the image can be marked clean; the kernel unmaps the pages with the process. A
/// thread that still faults on a watched hole then faults for good (no record fills it).
pub(super) fn forget_all() {
    let mut maps = MAPS.lock();
    maps.clear();
    recount(&maps);
}

/// The records held across `fork` (`fork.rs`): the follower thread changes them, and a
/// child must not start with them taken.
pub(super) struct MapsHeld(hashfs::ForkMutexGuard<'static, Vec<FileMap>>);

pub(super) fn held_for_fork() -> MapsHeld {
    MapsHeld(MAPS.lock())
}

impl MapsHeld {
    /// The inodes mapped writable and shared here: a forked child marks them under its own
    /// name as it joins (`Fork::mapped_writable`), and [`follow_in_child`] takes them for
    /// its own marks.
    pub(super) fn writable(&self) -> Vec<Ino> {
        writable_inos(&self.0)
    }
}

fn writable_inos(maps: &[FileMap]) -> Vec<Ino> {
    let mut inos: Vec<Ino> = maps.iter().filter(|m| copy::writable(m)).map(|m| m.file.ino).collect();
    inos.sort_unstable();
    inos.dedup();
    inos
}

/// In a forked child that joined the image: follows the mappings it inherited
/// (`follow.rs`; the parent's thread is not the child's).
pub(super) fn follow_in_child() {
    if MAP_COUNT.load(Ordering::Relaxed) > 0 {
        follow::watch_in_child();
        let maps = MAPS.lock();
        // Marked under this process's name as it joined (`Fork::mapped_writable`): its
        // marks from now on, which `mark_writable` keeps equal to the records.
        *MARKED.lock().unwrap_or_else(|e| e.into_inner()) = (current_pid(), writable_inos(&maps));
        follow::after_recount(&maps);
    }
}

/// Whether `ino` is memory-mapped (its blocks are pinned: it may not shrink).
pub(super) fn is_mapped(ino: Ino) -> bool {
    MAP_COUNT.load(Ordering::Relaxed) > 0 && MAPS.lock().iter().any(|m| m.file.ino == ino)
}

/// Maps `[from, to)` bytes of mapping `m` (page-aligned, inside the file) onto the image:
/// blocks as runs, holes watched (or, without userfaultfd, given blocks first). Placed
/// [`Place::Hole`], it fails with EEXIST where another thread mapped something into the
/// range meanwhile, and then unmaps what it had mapped of `[from, to)`.
fn map_pages(fs: &FileSystem<MmapDevice>, m: &mut FileMap, from: usize, to: usize, place: Place) -> Result<(), c_int> {
    if to <= from {
        return Ok(());
    }
    let mut done = from;
    let r = map_runs(fs, m, from, to, place, &mut done);
    if r.is_err() && place == Place::Hole && done > from {
        // SAFETY: only the pieces this call mapped into the hole, [from, done).
        unsafe { libc::munmap((m.start + from) as *mut c_void, done - from) };
    }
    r
}

/// [`map_pages`]'s work; `done` follows the end of what is mapped.
fn map_runs(
    fs: &FileSystem<MmapDevice>,
    m: &mut FileMap,
    from: usize,
    to: usize,
    place: Place,
    done: &mut usize,
) -> Result<(), c_int> {
    let real_mmap = real!(mmap: fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void);
    let mut populate = Populate::new(m.start, m.prot);
    let watch = if m.private { None } else { hole_faults() };
    if !m.private && watch.is_none() {
        give_blocks(fs, m.file.ino, m.off + from as u64, m.off + to as u64)?;
    }
    let geo = fs.geometry();
    let image_fd = fs.device().raw_fd();
    let pages = (to - from) / PAGE;
    let first = (m.off as usize + from) / PAGE;
    // Each page's block, looked up once.
    let blocks = blocks_of(fs, m.file.ino, first, pages);
    let block = |i: usize| blocks[i];
    let mut i = 0;
    while i < pages {
        m.runs += 1;
        if m.runs > m.cap {
            return Err(libc::ENOMEM);
        }
        let at = from + i * PAGE;
        let Some(slot) = block(i) else {
            // A hole: private zeros, or watched for its first write.
            let mut run = 1;
            while i + run < pages && block(i + run).is_none() {
                run += 1;
            }
            if !m.private && watch.is_none() {
                return Err(libc::EIO); // given blocks above
            }
            if watch.is_some() || place == Place::Hole {
                // Anonymous pages: a private mapping's zeros where no reservation holds
                // them, or fresh ones to watch (a page past EOF that was touched before the
                // file grew over it would otherwise be present, and a missing-page watch
                // would never see a store to it).
                place.anon(m.start + at, run * PAGE, m.prot)?;
                *done = at + run * PAGE;
            }
            if let Some(w) = watch {
                w.watch(m.start + at, run * PAGE, Arc::new(ShimFiller))
                    .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
                m.holes.add(at, at + run * PAGE);
            }
            i += run;
            continue;
        };
        // Runs of physically consecutive blocks become one kernel mapping.
        let mut run = 1;
        while i + run < pages && block(i + run) == Some(slot + run as u64) {
            run += 1;
        }
        // A short run (HashFS's placement: one block) is filled now: the kernel's
        // fault-around maps up to 16 neighbouring pages per fault, but only within one
        // mapping, so a run this short would fault page by page (LevelDB's YCSB A through
        // the shim: 60,000 faults against 28,000 so, 1.25 ± 0.12x its throughput;
        // docs/benchmarks.md). Not for private mappings: populating a writable one would
        // copy every page.
        let short = run < FAULT_AROUND_PAGES && !m.private;
        let share = if m.private { libc::MAP_PRIVATE } else { libc::MAP_SHARED };
        // SAFETY: pages of our own reservation, or of the hole we place into, onto pages of
        // the image file.
        let r = unsafe {
            real_mmap(
                (m.start + at) as *mut c_void,
                run * PAGE,
                m.prot,
                share | place.flag() | if short { populate.flag() } else { 0 },
                image_fd,
                geo.block_off(hashfs::Pblk(slot)).0 as off_t,
            )
        };
        place.check(r, m.start + at, run * PAGE)?;
        *done = at + run * PAGE;
        if short {
            populate.add(at, at + run * PAGE);
        }
        if m.holes.remove(at, at + run * PAGE) {
            if let Some(w) = watch {
                w.forget(m.start + at, m.start + at + run * PAGE);
            }
        }
        i += run;
    }
    populate.flush();
    Ok(())
}

/// The blocks (slots) of the file's pages `[first, first + pages)`, None for holes.
fn blocks_of(fs: &FileSystem<MmapDevice>, ino: Ino, first: usize, pages: usize) -> Vec<Option<u64>> {
    (first..first + pages)
        .map(|l| fs.physical_block(ino, hashfs::Lblk(l as u64)).ok().flatten().map(|e| e.pblk.0))
        .collect()
}

/// Maps the holes of the file's `[lo, hi)` bytes, up to its size (fallocate with
/// KEEP_SIZE: a mapping's last page may reach past the end).
fn give_blocks(fs: &FileSystem<MmapDevice>, ino: Ino, lo: u64, hi: u64) -> Result<(), c_int> {
    let f = fs.open_ino(ino, Access { read: true, write: true, append: false }).map_err(|e| e.errno())?;
    f.fallocate(lo, hi - lo, hashfs::FallocateMode::AllocateKeepSize).map_err(|e| e.errno())
}

/// Maps the pages of `ino`'s shared mappings that were holes in the file's `[lo, hi)`
/// bytes and may have blocks now (a write, fallocate or fill through another mapping).
/// Returns the records that could not take them (index, and the bytes from its start).
fn remap_filled(fs: &FileSystem<MmapDevice>, maps: &mut [FileMap], ino: Ino, lo: u64, hi: u64) -> Vec<Stale> {
    let mut stale = Vec::new();
    for (i, m) in maps.iter_mut().enumerate() {
        if m.file.ino != ino || m.private || m.copy || m.holes.is_empty() {
            continue;
        }
        let (rlo, rhi) = (lo.saturating_sub(m.off) as usize / PAGE * PAGE, hi.saturating_sub(m.off) as usize);
        for (a, e) in m.holes.overlapping(rlo, rhi.next_multiple_of(PAGE).min(m.mapped)) {
            m.cap = growth_cap(m);
            if map_pages(fs, m, a, e, Place::Over).is_err() {
                stale.push((i, a, e));
            }
        }
    }
    stale
}

/// The kernel mappings a live record may grow to: what the budget leaves beside every
/// other kernel mapping HashFS holds in the process, the ctFS views' among them (`copy.rs`).
fn growth_cap(m: &FileMap) -> usize {
    let others = vspace::maps_held().saturating_sub(held(m) as u64);
    MAX_RUNS_PER_MAP.min(vspace::map_budget().saturating_sub(others) as usize)
}

/// A record that could not map pages of its file (index in MAPS, bytes from its start).
type Stale = (usize, usize, usize);

/// Write faults of watched holes.
struct ShimFiller;

impl Filler for ShimFiller {
    fn fill(&self, addr: usize) -> bool {
        guarded(|| holes::fill(addr)).is_some_and(|r| r.is_ok())
    }
}

/// After a write, truncate or fallocate of `of`'s file through the shim that touched
/// `[lo, hi)`: pages of shared mappings that the file now covers are mapped onto their
/// blocks, and holes the change filled are remapped.
pub(super) fn file_changed(of: &OpenFile, lo: u64, hi: u64) {
    file_changed_ino(of.ino, lo, hi)
}

pub(super) fn file_changed_ino(ino: Ino, lo: u64, hi: u64) {
    if MAP_COUNT.load(Ordering::Relaxed) == 0 {
        return;
    }
    let mut maps = MAPS.lock();
    // Mappings of other files only (SQLite's `-shm` beside its WAL): no size to read.
    if !maps.iter().any(|m| m.file.ino == ino && !m.private) {
        return;
    }
    let Ok(fs) = shim().fs() else { return };
    let Ok(size) = fs.peek_attr(ino).map(|m| m.size) else { return };
    bring_up_to_date(fs, &mut maps, ino, lo, hi, size);
}

/// After `ino`'s bytes `[lo, hi)` changed, its size now `size`: in its shared records,
/// the holes there that have blocks now mapped, the pages the file grew over mapped, and
/// copies copied again there (this process's calls, and the follower's for the others',
/// `follow.rs`).
fn bring_up_to_date(fs: &FileSystem<MmapDevice>, maps: &mut [FileMap], ino: Ino, lo: u64, hi: u64, size: u64) {
    let mut stale = remap_filled(fs, maps, ino, lo, hi);
    for (i, m) in maps.iter_mut().enumerate() {
        if m.file.ino != ino || m.private {
            continue;
        }
        if m.copy {
            copy::refresh(m, lo, hi, size);
            continue;
        }
        let want = m.in_file(size);
        if want > m.mapped {
            m.cap = growth_cap(m);
            match map_pages(fs, m, m.mapped, want, Place::Over) {
                Ok(()) => m.mapped = want,
                Err(_) => stale.push((i, m.mapped, want)),
            }
        }
    }
    copy::take_over(fs, maps, &stale, size);
    recount(maps);
}

fn map_file(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> Result<*mut c_void, c_int> {
    let of = shim().file(fd).ok_or(libc::EBADF)?;
    map_open_file(addr, len, prot, flags, &of, off)
}

/// [`map_file`] of open file `of` (a mapping's own, for mremap).
fn map_open_file(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    of: &Arc<OpenFile>,
    off: off_t,
) -> Result<*mut c_void, c_int> {
    let fs = shim().fs()?;
    let file = of.file.as_ref().ok_or(libc::ENODEV)?;
    if len == 0 || !off.unsigned_abs().is_multiple_of(PAGE as u64) {
        return Err(libc::EINVAL);
    }
    if off < 0 {
        return Err(libc::EOVERFLOW); // as Linux: the page offset wraps
    }
    let acc = of.flags.load(Ordering::Relaxed) & libc::O_ACCMODE;
    if acc == libc::O_WRONLY {
        return Err(libc::EACCES); // every mapping needs read access, as on Linux
    }
    follow::before_mapping(fs);
    let size = fs.peek_attr(of.ino).map_err(|e| e.errno())?.size;
    let fixed = flags & libc::MAP_FIXED;
    // The mapping type is the low bits: MAP_SHARED (1), MAP_PRIVATE (2), MAP_SHARED_VALIDATE
    // (3). (Testing `flags & (MAP_SHARED | MAP_SHARED_VALIDATE)` took MAP_PRIVATE for shared:
    // a private mapping's stores went into the file.)
    let private = match flags & 0x0f {
        libc::MAP_PRIVATE => true,
        libc::MAP_SHARED | libc::MAP_SHARED_VALIDATE => false,
        _ => return Err(libc::EINVAL),
    };
    if !private && prot & libc::PROT_WRITE != 0 && acc != libc::O_RDWR {
        return Err(libc::EACCES);
    }
    if !private && prot & libc::PROT_WRITE != 0 {
        // Stores through it would change the file behind a copy's back: the copies of the
        // file go back to being its pages first (copy.rs).
        copy::give_back(fs, &mut MAPS.lock(), of.ino)?;
    }
    let pages = len.div_ceil(PAGE);
    let mut m = FileMap {
        start: 0,
        len: pages * PAGE,
        off: off as u64,
        mapped: 0,
        prot,
        private,
        holes: Ranges::default(),
        runs: 0,
        cap: 0,
        reserve: 0,
        copy: false,
        file: of.clone(),
        _pin: Some(file.pin_blocks()),
    };
    m.cap = growth_cap(&m);
    let in_file = m.in_file(size);
    if !private && prot & libc::PROT_WRITE != 0 {
        let worst = budget::worst_case(fs, &m, in_file);
        if worst > m.cap {
            return Err(budget::refuse(&m, worst));
        }
        m.reserve = worst;
    }
    let placed = if copy::preferred(fs, &MAPS.lock(), &m, in_file) {
        Err(libc::ENOMEM)
    } else if addr.is_null() && fixed == 0 {
        place::place(fs, &mut m, in_file)
    } else {
        place::reserve(addr, m.len, prot, fixed, off as u64).and_then(|region| place::over(fs, &mut m, region, in_file))
    };
    match placed {
        // Over the budget, refused by the kernel, or cheaper: a copy where one can serve.
        Err(libc::ENOMEM) if copy::allowed(&MAPS.lock(), &m) => copy::make(&mut m, addr, fixed, in_file)?,
        r => r?,
    }
    m.mapped = in_file;
    let (start, ino) = (m.start, m.file.ino);
    let mut maps = MAPS.lock();
    maps.push(m);
    // Another process may have marked the file since `allowed` asked (its publication read
    // by the follower before this record was there).
    copy::yield_to_writers(fs, &mut maps, ino);
    recount(&maps);
    Ok(start as *mut c_void)
}

/// mremap of a range inside one of the shim's mappings (`a`, `old_len` and `new_len` as
/// the caller gave them): a shrink unmaps the tail; a growth maps the longer range of the
/// file anew, in place after the old range if that is free, else (MREMAP_MAYMOVE) wherever
/// it fits, a private mapping's pages copied over (its own stores kept), and the old range
/// goes. MREMAP_FIXED and MREMAP_DONTUNMAP are EINVAL, with a line on stderr: the kernel's
/// mremap would move the image's pages under the shim's record of them (and a mapping of
/// many runs is several kernel mappings, which it refuses: EFAULT).
fn remap(a: usize, old_len: usize, new_len: usize, flags: c_int) -> Result<usize, c_int> {
    let (old_len, new_len) = (old_len.next_multiple_of(PAGE), new_len.next_multiple_of(PAGE));
    let rec = MAPS
        .lock()
        .iter()
        .find(|m| m.start <= a && a < m.start + m.len)
        .map(|m| (m.start, m.len, m.off, m.prot, m.private, m.file.clone()));
    let Some((start, len, off, prot, private, of)) = rec else { return Err(libc::EFAULT) };
    if flags & !libc::MREMAP_MAYMOVE != 0 {
        eprintln!("hashfs_preload: mremap with flags {flags:#x} of a HashFS mapping is not served");
        return Err(libc::EINVAL);
    }
    if !a.is_multiple_of(PAGE) || new_len == 0 {
        return Err(libc::EINVAL);
    }
    if a + old_len > start + len {
        return Err(libc::EFAULT); // past the mapping: more than one of the kernel's
    }
    let munmap = real!(munmap: fn(*mut c_void, size_t) -> c_int);
    let unmap = |from: usize, n: usize| {
        let _ = unmap_recorded(from, n, || {
            // SAFETY: pages of our own mapping, dropped from its record with them.
            if unsafe { munmap(from as *mut c_void, n) } == 0 {
                Ok(())
            } else {
                Err(())
            }
        });
    };
    if new_len <= old_len {
        if new_len < old_len {
            unmap(a + new_len, old_len - new_len);
        }
        return Ok(a);
    }
    let file_off = off + (a - start) as u64;
    let kind = if private { libc::MAP_PRIVATE } else { libc::MAP_SHARED };
    // In place: the pages after the old range, if nothing is there.
    let after = map_open_file(
        (a + old_len) as *mut c_void,
        new_len - old_len,
        prot,
        kind | libc::MAP_FIXED_NOREPLACE,
        &of,
        (file_off + old_len as u64) as off_t,
    );
    match after {
        Ok(p) if p as usize == a + old_len => return Ok(a),
        Ok(p) => unmap(p as usize, new_len - old_len), // placed elsewhere: not in place
        Err(_) => {}
    }
    if flags & libc::MREMAP_MAYMOVE == 0 {
        return Err(libc::ENOMEM);
    }
    let to = map_open_file(
        std::ptr::null_mut(),
        new_len,
        if private { prot | libc::PROT_WRITE } else { prot },
        kind,
        &of,
        file_off as off_t,
    )? as usize;
    if private {
        // SAFETY: both ranges are ours and mapped for `old_len` bytes; the new one writable.
        unsafe { std::ptr::copy_nonoverlapping(a as *const u8, to as *mut u8, old_len) };
        if prot & libc::PROT_WRITE == 0 {
            // SAFETY: our new mapping, back to the caller's protection.
            unsafe { libc::mprotect(to as *mut c_void, new_len, prot) };
        }
    }
    unmap(a, old_len);
    Ok(to)
}

/// Runs `unmap`, a kernel call that takes the pages of `[addr, addr + len)` away (munmap,
/// or a MAP_FIXED mapping over them: whole pages, the last rounded up), and, if it
/// succeeds, drops them from the records, the records' lock held throughout. The follower thread (`follow.rs`) writes a copy's
/// bytes and maps a record's pages under that lock, so a record must go no later than its
/// pages do: until 2026-12-06 munmap dropped it after the kernel's call, and a follower
/// that refreshed the copy meanwhile wrote into pages already unmapped (the process died
/// of SIGSEGV: stop 95's CI, fsx with copies, whose follower fell behind its own writes
/// and refreshed the copies whole) or changed the protection of the pages of the mapping
/// made next at that address.
fn unmap_recorded<T, E>(addr: usize, len: usize, unmap: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    let (a, e) = (addr, addr.saturating_add(len).next_multiple_of(PAGE));
    let mut maps = MAPS.lock();
    let r = unmap();
    if r.is_ok() {
        forget_range(&mut maps, a, e);
        recount(&maps);
        if let Some(w) = hole_faults() {
            w.forget(a, e);
        }
    }
    r
}

/// Removes `[a, e)` (page-aligned) from the records: a record inside it goes, one that
/// overlaps it is trimmed, one that holds it is split in two.
fn forget_range(maps: &mut Vec<FileMap>, a: usize, e: usize) {
    let mut out = Vec::with_capacity(maps.len() + 1);
    for m in maps.drain(..) {
        let end = m.start + m.len;
        if e <= m.start || end <= a {
            out.push(m);
            continue;
        }
        if m.start < a {
            let len = a - m.start;
            out.push(FileMap {
                len,
                mapped: m.mapped.min(len),
                holes: m.holes.clip(0, len, 0),
                file: m.file.clone(),
                _pin: m._pin.clone(),
                ..m
            });
        }
        if e < end {
            let cut = e - m.start;
            out.push(FileMap {
                start: e,
                len: end - e,
                off: m.off + cut as u64,
                mapped: m.mapped.saturating_sub(cut),
                holes: m.holes.clip(cut, m.len, cut),
                file: m.file.clone(),
                _pin: m._pin.clone(),
                ..m
            });
        }
    }
    *maps = out;
}

impl Mappings for Preload {
    #[allow(clippy::too_many_arguments)] // mmap's own six, and libc's call
    fn mmap(
        addr: usize,
        len: usize,
        prot: c_int,
        flags: c_int,
        fd: c_int,
        off: off_t,
        _: Next<'_, Address>,
    ) -> Served<Address> {
        served(map_file(addr as *mut c_void, len, prot, flags, fd, off).map(|p| Address(p as usize)))
    }

    /// A MAP_FIXED mapping that is not ours replaces pages that may be (a program's
    /// anonymous mapping over the range of a file mapping it keeps reserved): their
    /// records go with them, as at munmap.
    fn mmap_over(addr: usize, len: usize, next: Next<'_, Address>) -> Served<Address> {
        if MAP_COUNT.load(Ordering::Relaxed) == 0 {
            return None;
        }
        Some(unmap_recorded(addr, len, || next.call()))
    }

    fn mremap(
        old: usize,
        old_len: usize,
        new_len: usize,
        flags: c_int,
        _: usize,
        _: Next<'_, Address>,
    ) -> Served<Address> {
        if MAP_COUNT.load(Ordering::Relaxed) == 0
            || !MAPS.lock().iter().any(|m| m.start <= old && old < m.start + m.len)
        {
            return None; // not a mapping of ours: the kernel's
        }
        served(remap(old, old_len, new_len, flags).map(Address))
    }

    fn munmap(addr: usize, len: usize, next: Next<'_, ()>) -> Served<()> {
        if MAP_COUNT.load(Ordering::Relaxed) == 0 {
            return None;
        }
        Some(unmap_recorded(addr, len, || next.call()))
    }

    /// EACCES for write access to a shared mapping of a file the descriptor could not
    /// write (Linux's rule, which the kernel cannot apply here: its mapping is of the image,
    /// open for writing), or to one served by a copy (`copy.rs`: stores into it would not
    /// reach the file); else the kernel's, after a shared mapping made writable is
    /// recorded so (its later pages mapped writable, as Linux keeps a mapping's protection),
    /// this process's copies of its file given back (ENOMEM where the budget does not allow
    /// it) and the file marked for the other processes, as at a writable `mmap`.
    fn mprotect(addr: usize, len: usize, prot: c_int, _: Next<'_, ()>) -> Served<()> {
        if prot & libc::PROT_WRITE == 0 || MAP_COUNT.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let (a, e) = (addr, addr.saturating_add(len));
        let read_only = |m: &FileMap| m.file.flags.load(Ordering::Relaxed) & libc::O_ACCMODE != libc::O_RDWR;
        let meets = |m: &FileMap| !m.private && a < m.start + m.len && m.start < e;
        let mut maps = MAPS.lock();
        if maps.iter().any(|m| meets(m) && (m.copy || read_only(m))) {
            return Some(Err(Errno(libc::EACCES)));
        }
        let mut newly: Vec<Ino> = maps.iter().filter(|m| meets(m) && !copy::writable(m)).map(|m| m.file.ino).collect();
        if newly.is_empty() {
            return None;
        }
        let fs = match shim().fs() {
            Ok(fs) => fs,
            Err(e) => return Some(Err(Errno(e))),
        };
        newly.sort_unstable();
        newly.dedup();
        for &ino in &newly {
            if let Err(e) = copy::give_back(fs, &mut maps, ino) {
                return Some(Err(Errno(e)));
            }
        }
        for m in maps.iter_mut().filter(|m| meets(m)) {
            // A mapping part of which is made writable is counted writable whole.
            m.prot = if a <= m.start && m.start + m.len <= e { prot } else { m.prot | libc::PROT_WRITE };
        }
        recount(&maps);
        None
    }

    /// msync of a range that meets a shared mapping of ours: the lines of its pages that
    /// are the file's (not holes, not past the end) are written back and fenced.
    fn msync(addr: usize, len: usize, flags: c_int, _: Next<'_, ()>) -> Served<()> {
        let (a, e) = (addr, addr.saturating_add(len));
        if MAP_COUNT.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let maps = MAPS.lock();
        let ours: Vec<&FileMap> = maps.iter().filter(|m| a < m.start + m.len && m.start < e).collect();
        if ours.is_empty() {
            return None;
        }
        // As Linux: an address off a page, an unknown flag, or both MS_SYNC and MS_ASYNC.
        let both = libc::MS_SYNC | libc::MS_ASYNC;
        if !a.is_multiple_of(PAGE) || flags & !(both | libc::MS_INVALIDATE) != 0 || flags & both == both {
            return Some(Err(Errno(libc::EINVAL)));
        }
        for m in ours.into_iter().filter(|m| !m.private && !m.copy) {
            let (lo, hi) = (a.max(m.start) - m.start, (e.min(m.start + m.mapped)).saturating_sub(m.start));
            for (s, t) in m.holes.gaps(lo, hi) {
                // SAFETY: these pages of a live mapping are the image's.
                unsafe { hashfs::pm::persist_range((m.start + s) as *const u8, t - s) };
            }
        }
        Some(Ok(()))
    }
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
            pos: fork::Position::new(),
            flags: std::sync::atomic::AtomicI32::new(0),
            lock_owner: OnceLock::new(),
            found_at: Mutex::new(None),
        });
        let rec = |start, len, off, mapped| FileMap {
            start,
            len,
            off,
            mapped,
            prot: 0,
            private: false,
            holes: Ranges::default(),
            runs: 0,
            cap: MAX_RUNS_PER_MAP,
            reserve: 0,
            copy: false,
            file: of.clone(),
            _pin: None,
        };
        let spans = |v: &Vec<FileMap>| v.iter().map(|m| (m.start, m.len, m.off, m.mapped)).collect::<Vec<_>>();
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
        // The holes go with their pages, counted from each part's start.
        let mut r = rec(0x10000, 8 * PAGE, 0, 8 * PAGE);
        r.holes.add(PAGE, 3 * PAGE);
        r.holes.add(5 * PAGE, 7 * PAGE);
        let mut v = vec![r];
        forget_range(&mut v, 0x10000 + 2 * PAGE, 0x10000 + 6 * PAGE);
        assert_eq!(v[0].holes.spans(), &[(PAGE, 2 * PAGE)]);
        assert_eq!(v[1].holes.spans(), &[(0, PAGE)]);
        // A range that misses every record changes nothing.
        let mut v = vec![rec(0x10000, PAGE, 0, PAGE)];
        forget_range(&mut v, 0x20000, 0x30000);
        assert_eq!(v.len(), 1);
    }
}
