//! Mappings served by a copy of the file's bytes.
//!
//! A file whose blocks lie apart (every block, under HashFS's placement) is one kernel
//! mapping per page: 2.6 µs a page to map and 0.8 to unmap, and a process has
//! `vm.max_map_count` mappings in all (65,530 by default), one `mmap` at most 16,384 pieces.
//! LevelDB through the shim maps every 2 MiB table it opens: a database of 3 million YCSB
//! records (about 400 MB of tables) failed its load with ENOMEM from `mmap`, RocksDB with
//! `--mmap_read` (64 MiB tables) its fill, and LMDB's read-only map, which grows with its
//! file, read zeros past 64 MiB (`bench/results/apps/map-copy/`). A mapping that a copy can serve
//! is made of one anonymous mapping filled with the file's bytes:
//!
//! - a private mapping, whose view of later changes to the file POSIX leaves unspecified;
//! - a read-only shared mapping of a file that no writable shared mapping of this process
//!   maps. Every change to a file's bytes goes through a shim or a mount (write, pwrite,
//!   writev, copies, fallocate, truncate): this process's own calls copy the changed bytes
//!   into it (`file_changed`), and the follower copies another process's change in within
//!   a millisecond or so (`follow.rs`, from 2026-12-06; until then a copy kept the bytes it
//!   was made with, written one process per image), so it reads what the file holds, as a
//!   shared mapping does. A read-only participant, which cannot watch the ring of data
//!   changes, makes a copy only past the budget (where another process's overwrite in
//!   place does not reach it).
//!
//! It is a copy when it is shared, small and its blocks lie apart ([`preferred`]:
//! LevelDB's tables), when HashFS's kernel mappings in the process (the shim's records and
//! any ctFS view's: `hashfs::pm::vspace::map_budget`, half the process's limit, so the
//! program keeps the rest for its heap, stacks and libraries) leave no room for its pieces,
//! or when the kernel refuses one; a live read-only mapping whose file grows or fills past
//! the budget becomes one too ([`take_over`]). Before a writable shared mapping of the
//! file is made, its shared copies become the file's pages again ([`give_back`]; where
//! the budget does not allow that, the writable mapping fails with ENOMEM), and `mprotect` that would
//! make one writable fails with EACCES (where Linux would let stores through it reach a
//! file opened for writing). A writable shared mapping past the budget fails with ENOMEM.
//! `HASHFS_MAP_BUDGET` sets the budget, `HASHFS_MAP_COPY_MAX` the largest mapping copied
//! for its scattered blocks (0: none; the tests use both). A copy is DRAM that a mapping
//! of the image's pages does not take: the price of LevelDB's mappings, 2 MiB a table.

use super::*;
use std::sync::OnceLock;

/// The largest mapping served by a copy because its blocks lie apart
/// (`HASHFS_MAP_COPY_MAX`, bytes; 8 MiB by default, 0: only past the budget).
fn copy_max() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var("HASHFS_MAP_COPY_MAX").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(8 << 20)
    })
}

/// Whether the new mapping `m` (its first `in_file` bytes the file's) is served by a copy
/// though the budget would take its pieces: it is shared and a copy can serve it
/// ([`allowed`]: read-only, the file mapped writable nowhere; a private mapping stays the
/// file's pages copy-on-write, whose untouched pages see the file's later writes as on
/// Linux), it is at most [`copy_max`] long, and its blocks lie apart (runs shorter on
/// average than the kernel's fault-around, as every block of a file under HashFS's
/// placement). Such a
/// mapping costs the kernel one mapping per run, 2.5 µs a page to make and 0.75 to undo,
/// where a copy on 2 MiB pages costs 0.21 and 0.02; LevelDB, which maps every 2 MiB table
/// it opens, ran YCSB's A and C 1.21x and 1.15x as fast through the shim with copies
/// (`bench/results/apps/map-copy/policy-ab/`, paired by run).
pub(super) fn preferred(fs: &FileSystem<MmapDevice>, maps: &[FileMap], m: &FileMap, in_file: usize) -> bool {
    let pages = in_file / PAGE;
    // A read-only participant's mappings are the file's pages while the budget allows
    // (its copies past it watch the ring of data changes by a lock on the image file,
    // which costs every writer a question to the kernel a millisecond while it overwrites:
    // `hashfs/src/fs/shared/read_only.rs`; not measured as a default).
    if pages == 0 || m.private || m.len > copy_max() || !allowed(maps, m) || fs.is_read_only() {
        return false;
    }
    let blocks = blocks_of(fs, m.file.ino, m.off as usize / PAGE, pages);
    let runs = 1 + blocks.windows(2).filter(|w| !matches!((w[0], w[1]), (Some(a), Some(b)) if b == a + 1)).count();
    runs * FAULT_AROUND_PAGES > pages
}

/// Before a writable shared mapping of `ino` is made: its shared copies become the file's
/// pages again, so that they see the stores through it. ENOMEM where one cannot (the
/// budget): it stays a copy, and the writable mapping is refused.
pub(super) fn give_back(fs: &FileSystem<MmapDevice>, maps: &mut [FileMap], ino: Ino) -> Result<(), c_int> {
    let mut r = Ok(());
    for m in maps.iter_mut().filter(|m| m.copy && !m.private && m.file.ino == ino) {
        // The file's pages sit on its blocks: pinned first (a copy holds no pin), and only
        // as far as the file now goes (another process may have shrunk it under the copy:
        // the copy's pages past its end, zeros, stay).
        if m._pin.is_none() {
            m._pin = m.file.file.as_ref().map(|f| f.pin_blocks());
        }
        let size = fs.peek_attr(ino).map(|a| a.size).unwrap_or(0);
        let now = m.in_file(size);
        if now < m.mapped && copy_in(m, now, m.mapped) {
            m.mapped = now;
        }
        m.copy = false;
        m.runs = 0;
        m.cap = growth_cap(m);
        if map_pages(fs, m, 0, m.mapped, Place::Over).is_err() {
            // Some pieces may be the file's pages now, the rest the copy's: one copy again
            // (or, if even that fails, pages that fault, as in take_over).
            if convert(m, size).is_err() {
                let _ = protect(m.start, m.len, libc::PROT_NONE);
                eprintln!(
                    "hashfs_preload: {}: a mapping could not be made a copy again: it faults",
                    m.file.fs_path.display()
                );
            }
            r = Err(libc::ENOMEM);
        }
    }
    recount(maps);
    r
}

/// Whether `m` (not yet recorded) may be served by a copy, given the live records: it is
/// private, or read-only and no writable shared mapping of this process ([`writable`])
/// maps its file. (Another process's: [`yield_to_writers`].)
pub(super) fn allowed(maps: &[FileMap], m: &FileMap) -> bool {
    m.private || (m.prot & libc::PROT_WRITE == 0 && !maps.iter().any(|x| x.file.ino == m.file.ino && writable(x)))
}

/// Whether stores through record `m` reach its file: a shared mapping made writable, or
/// made so since by `mprotect`.
pub(super) fn writable(m: &FileMap) -> bool {
    !m.private && m.prot & libc::PROT_WRITE != 0
}

/// If another process maps `ino` writable and shared (its mark in the image's region:
/// `hashfs/src/fs/shared/mapped.rs`), this process's shared copies of it become its pages
/// ([`give_back`]): stores through such a mapping reach no call and no ring, so a copy
/// would keep the old bytes. Called wherever a copy is recorded (after the record is in,
/// so that a mark stored meanwhile, whose publication the follower read before the record
/// was there, is seen) and by the follower for each change of `ino` another process
/// published (a mark is published so). Where the budget does not allow it, the copies'
/// pages fault from then on rather than show old bytes, and the shim says so.
pub(super) fn yield_to_writers(fs: &FileSystem<MmapDevice>, maps: &mut [FileMap], ino: Ino) {
    let copied = |m: &FileMap| m.copy && !m.private && m.file.ino == ino && m.prot != libc::PROT_NONE;
    if !maps.iter().any(copied) || !fs.mapped_writable_elsewhere(ino) || give_back(fs, maps, ino).is_ok() {
        return;
    }
    for m in maps.iter_mut().filter(|m| copied(m)) {
        m.prot = libc::PROT_NONE;
        let _ = protect(m.start, m.len, libc::PROT_NONE);
        eprintln!(
            "hashfs_preload: {}: another process maps the file writable, and a mapping of it here, a \
             copy, cannot become the file's pages (too many kernel mappings, vm.max_map_count): its \
             pages fault",
            m.file.fs_path.display()
        );
    }
}

/// Serves `m` by a copy: one anonymous mapping at the caller's address (or one of the
/// kernel's choosing), its first `in_file` bytes the file's.
pub(super) fn make(m: &mut FileMap, addr: *mut c_void, fixed: c_int, in_file: usize) -> Result<(), c_int> {
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let region = place::reserve(addr, m.len, rw, fixed, m.off)?;
    m.start = region as usize;
    let filled = become_copy(m, in_file);
    if filled.is_err() {
        // SAFETY: undoing our own mapping.
        unsafe { real!(munmap: fn(*mut c_void, size_t) -> c_int)(region, m.len) };
    }
    filled
}

/// Asks for 2 MiB pages under a copy (transparent huge pages in `madvise` mode, the
/// default): a 2 MiB copy is then one page fault and one page to free instead of 512
/// (`bench/results/apps/map-copy/shim-mmap-copies.json`: 0.20 µs a page to map, 0.02 to unmap,
/// against 1.65 and 0.24 without). Where none is free the kernel uses 4 KiB pages.
fn huge_pages(at: usize, len: usize) {
    // SAFETY: advice over our own anonymous mapping.
    unsafe { libc::madvise(at as *mut c_void, len, libc::MADV_HUGEPAGE) };
}

/// Copies the file's bytes at `[a, e)` from the copy's start (inside its length) into it;
/// bytes past the end of the file are zeros. The pages stay as writable as they were.
fn fill(m: &FileMap, a: usize, e: usize) -> Result<(), c_int> {
    if e <= a {
        return Ok(());
    }
    // SAFETY: [a, e) lies in our own anonymous mapping, writable while we fill it.
    let buf = unsafe { std::slice::from_raw_parts_mut((m.start + a) as *mut u8, e - a) };
    read_into(m, a, buf)
}

/// The file's bytes that the copy shows from `a` on, into `buf` (zeros past the file's end).
fn read_into(m: &FileMap, a: usize, buf: &mut [u8]) -> Result<(), c_int> {
    let file = m.file.file.as_ref().ok_or(libc::ENODEV)?;
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(m.off + (a + done) as u64, &mut buf[done..]).map_err(|e| e.errno())? {
            0 => break,
            n => done += n,
        }
    }
    buf[done..].fill(0);
    Ok(())
}

/// [`fill`] of part of a read-only copy through `/proc/self/mem` (`self_mem.rs`), in
/// pieces of at most 256 KiB read into a buffer first; None where that cannot be done (the
/// caller makes the pages writable instead).
fn fill_through_mem(m: &FileMap, a: usize, e: usize) -> Option<bool> {
    const PIECE: usize = 256 << 10;
    let mut buf = vec![0u8; (e - a).min(PIECE)];
    let mut at = a;
    while at < e {
        let n = (e - at).min(PIECE);
        if read_into(m, at, &mut buf[..n]).is_err() {
            return Some(false);
        }
        if !super::self_mem::write(m.start + at, &buf[..n]) {
            return None;
        }
        at += n;
    }
    Some(true)
}

fn protect(at: usize, len: usize, prot: c_int) -> Result<(), c_int> {
    // SAFETY: changing the protection of our own mapping.
    let r = unsafe { real!(mprotect: fn(*mut c_void, size_t, c_int) -> c_int)(at as *mut c_void, len, prot) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
    }
}

/// After the file's bytes `[lo, hi)` changed (and maybe its size, now `size`): the shared
/// copy `m` takes the changed bytes it shows, and the pages the file has grown over.
pub(super) fn refresh(m: &mut FileMap, lo: u64, hi: u64, size: u64) {
    let want = m.in_file(size);
    let a = (lo.saturating_sub(m.off) as usize / PAGE * PAGE).min(m.mapped);
    let e = (hi.saturating_sub(m.off) as usize).next_multiple_of(PAGE).min(m.mapped);
    // Pages the file grew over are filled; pages it shrank from (another process's
    // truncation: a copy holds no pin) read zeros again, where Linux would raise SIGBUS.
    let (from, to) = (want.min(m.mapped), want.max(m.mapped));
    if copy_in(m, a, e) && copy_in(m, from, to) {
        m.mapped = want;
        return;
    }
    // Stale bytes must not be read as the file's: those pages fault from now on.
    let (a, e) = (a.min(m.mapped), want.max(e));
    let _ = protect(m.start + a, e - a, libc::PROT_NONE);
    eprintln!(
        "hashfs_preload: {}: a mapping served by a copy could not take a change of the file's bytes {}..{}: \
         those pages fault",
        m.file.fs_path.display(),
        m.off + a as u64,
        m.off + e as u64
    );
}

/// Records that could not map pages of their file (`stale`: a remap of filled holes or a
/// growth past their kernel mappings, or refused by the kernel): each that a copy can serve
/// becomes one, its pieces replaced at once by one anonymous mapping filled with the file's
/// bytes; in the others those pages are made inaccessible, so that a program faults on them
/// rather than read bytes that are not the file's, and the shim says so. (Before, they were
/// left as they were: LMDB, whose read-only map grows with its file, read zeros where its
/// pages were once the file passed 64 MiB, and stopped with MDB_CORRUPTED.)
pub(super) fn take_over(fs: &FileSystem<MmapDevice>, maps: &mut [FileMap], stale: &[Stale], size: u64) {
    for &(i, a, e) in stale {
        if maps[i].copy {
            continue;
        }
        if allowed(maps, &maps[i]) && convert(&mut maps[i], size).is_ok() {
            let ino = maps[i].file.ino;
            yield_to_writers(fs, maps, ino);
            continue;
        }
        let m = &maps[i];
        let _ = protect(m.start + a, e - a, libc::PROT_NONE);
        eprintln!(
            "hashfs_preload: {}: a shared mapping cannot show the file's bytes {}..{} (too many kernel \
             mappings, vm.max_map_count): those pages fault (on an image made with `--placement \
             regions` a mapped file's whole 2 MiB chunks are one mapping each)",
            m.file.fs_path.display(),
            m.off + a as u64,
            m.off + e as u64
        );
    }
}

/// Makes the live record `m` a copy: one anonymous mapping over its whole range (replacing
/// its pieces and watched holes), filled with the file's bytes up to `size`.
fn convert(m: &mut FileMap, size: u64) -> Result<(), c_int> {
    // Fresh anonymous pages over the record's whole range, which is ours.
    Place::Over.anon(m.start, m.len, libc::PROT_READ | libc::PROT_WRITE)?;
    if let Some(w) = hole_faults() {
        w.forget(m.start, m.start + m.len);
    }
    m.mapped = m.in_file(size);
    become_copy(m, m.mapped)
}

/// Makes the writable anonymous mapping at `m.start` the record's copy: 2 MiB pages asked
/// for, its first `in_file` bytes the file's, then `m.prot`.
fn become_copy(m: &mut FileMap, in_file: usize) -> Result<(), c_int> {
    if let (false, Ok(fs)) = (m.private, shim().fs()) {
        super::follow::before_copy(fs);
    }
    huge_pages(m.start, m.len);
    m.runs = 1;
    m.copy = true;
    m.holes = Ranges::default();
    // A copy maps none of the file's blocks: no pin, so that another process may shrink
    // the file (the copy then shows zeros past its new end, `refresh`), as it could before
    // pins were shared (docs/design.md, *Writable mappings across processes*).
    m._pin = None;
    fill(m, 0, in_file).and_then(|()| protect(m.start, m.len, m.prot))
}

/// [`fill`] of `[a, e)` (pages) of a copy whatever its protection: part of a read-only
/// copy through `/proc/self/mem` (`self_mem.rs`: made writable and back, those pages would
/// split the copy's kernel mapping and its 2 MiB page), the whole copy, or where that
/// cannot be done, with its pages made writable for the while.
fn copy_in(m: &FileMap, a: usize, e: usize) -> bool {
    if e <= a {
        return true;
    }
    let writable = m.prot & libc::PROT_WRITE != 0;
    if !writable && (a > 0 || e < m.len) {
        if let Some(done) = fill_through_mem(m, a, e) {
            return done;
        }
    }
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    (writable || protect(m.start + a, e - a, rw).is_ok())
        && fill(m, a, e).is_ok()
        && (writable || protect(m.start + a, e - a, m.prot).is_ok())
}
