//! Mappings served by a copy when the process's kernel mappings run short.
//!
//! A file whose blocks lie apart is one kernel mapping per page, and a process has
//! `vm.max_map_count` mappings in all (65,530 by default): LevelDB through the shim maps
//! every table it opens, 2 MiB each, and a database of 3 million YCSB records (about
//! 400 MB of tables) failed its load with ENOMEM from `mmap`, where tmpfs needs one mapping
//! per table. Once the shim's records hold [`budget`] kernel mappings (half the process's
//! limit, so the program keeps the rest for its own heap, stacks and libraries), or the
//! kernel refuses one, a new mapping that a copy can serve is made of one anonymous
//! mapping filled with the file's bytes:
//!
//! - a private mapping, whose view of later changes to the file POSIX leaves unspecified;
//! - a read-only shared mapping of a file that no writable shared mapping of this process
//!   maps. One process owns an image (the library's lock) and every change to a file's
//!   bytes goes through the shim (write, pwrite, writev, copies, fallocate, truncate:
//!   `file_changed`), which copies the changed bytes into it, so it reads what the file
//!   holds, as a shared mapping does.
//!
//! So that nothing could change the file behind such a copy, a writable shared mapping of
//! a file that has one fails with ENOMEM (the limit it stands in for), and `mprotect` that
//! would make one writable fails with EACCES (where Linux would store through it into a
//! file opened for writing). A writable shared mapping over the budget fails with ENOMEM,
//! as before. `HASHFS_MAP_BUDGET` sets the budget (the tests make copies with a small one).
//!
//! A live read-only shared mapping that cannot map pages its file has grown over or filled
//! (the same limits) becomes a copy the same way ([`take_over`]).

use super::*;
use std::sync::OnceLock;

/// Kernel mappings the shim's records may hold before new mappings are served by copies:
/// `HASHFS_MAP_BUDGET`, else half of `vm.max_map_count`.
pub(super) fn budget() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        if let Some(n) = std::env::var("HASHFS_MAP_BUDGET").ok().and_then(|v| v.trim().parse().ok()) {
            return n;
        }
        std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(65_530)
            / 2
    })
}

/// Whether `m` (not yet recorded) may be served by a copy, given the live records.
pub(super) fn allowed(maps: &[FileMap], m: &FileMap) -> bool {
    m.private
        || (m.prot & libc::PROT_WRITE == 0
            && !maps.iter().any(|x| x.file.ino == m.file.ino && !x.private && x.prot & libc::PROT_WRITE != 0))
}

/// Whether `ino` has a shared mapping served by a copy (a writable shared mapping of it
/// would change the file behind the copy's back).
pub(super) fn has_shared_copy(maps: &[FileMap], ino: Ino) -> bool {
    maps.iter().any(|x| x.copy && !x.private && x.file.ino == ino)
}

/// Serves `m` by a copy: one anonymous mapping at the caller's address (or one of the
/// kernel's choosing), its first `in_file` bytes the file's.
pub(super) fn make(m: &mut FileMap, addr: *mut c_void, fixed: c_int, in_file: usize) -> Result<(), c_int> {
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let region = place::reserve(addr, m.len, rw, fixed, m.off)?;
    m.start = region as usize;
    m.runs = 1;
    m.copy = true;
    m.holes = Ranges::default();
    let filled = fill(m, 0, in_file).and_then(|()| protect(m.start, m.len, m.prot));
    if filled.is_err() {
        // SAFETY: undoing our own mapping.
        unsafe { real!(munmap: fn(*mut c_void, size_t) -> c_int)(region, m.len) };
    }
    filled
}

/// Copies the file's bytes at `[a, e)` from the copy's start (inside its length) into it;
/// bytes past the end of the file are zeros. The pages stay as writable as they were.
fn fill(m: &FileMap, a: usize, e: usize) -> Result<(), c_int> {
    if e <= a {
        return Ok(());
    }
    let file = m.file.file.as_ref().ok_or(libc::ENODEV)?;
    // SAFETY: [a, e) lies in our own anonymous mapping, writable while we fill it.
    let buf = unsafe { std::slice::from_raw_parts_mut((m.start + a) as *mut u8, e - a) };
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
    let want = (size.saturating_sub(m.off) as usize).next_multiple_of(PAGE).min(m.len);
    let a = (lo.saturating_sub(m.off) as usize / PAGE * PAGE).min(m.mapped);
    let e = (hi.saturating_sub(m.off) as usize).next_multiple_of(PAGE).min(m.mapped);
    if copy_in(m, a, e) && (want <= m.mapped || copy_in(m, m.mapped, want)) {
        m.mapped = m.mapped.max(want);
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
pub(super) fn take_over(maps: &mut [FileMap], stale: &[Stale], size: u64) {
    for &(i, a, e) in stale {
        if maps[i].copy || (allowed(maps, &maps[i]) && convert(&mut maps[i], size).is_ok()) {
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
    let real_mmap = real!(mmap: fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void);
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED;
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: replacing the pages of our own record's range.
    if unsafe { real_mmap(m.start as *mut c_void, m.len, rw, flags, -1, 0) } == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOMEM));
    }
    if let Some(w) = hole_faults() {
        w.forget(m.start, m.start + m.len);
    }
    m.holes = Ranges::default();
    m.copy = true;
    m.runs = 1;
    m.mapped = (size.saturating_sub(m.off) as usize).next_multiple_of(PAGE).min(m.len);
    fill(m, 0, m.mapped).and_then(|()| protect(m.start, m.len, m.prot))
}

/// [`fill`] of `[a, e)` (pages) of a copy whatever its protection.
fn copy_in(m: &FileMap, a: usize, e: usize) -> bool {
    if e <= a {
        return true;
    }
    let writable = m.prot & libc::PROT_WRITE != 0;
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    (writable || protect(m.start + a, e - a, rw).is_ok())
        && fill(m, a, e).is_ok()
        && (writable || protect(m.start + a, e - a, m.prot).is_ok())
}

/// `mprotect` that would make a shared mapping served by a copy writable fails with
/// EACCES: stores into it would not reach the file.
#[no_mangle]
pub unsafe extern "C" fn mprotect(addr: *mut c_void, len: size_t, prot: c_int) -> c_int {
    if prot & libc::PROT_WRITE != 0 && !in_shim() && SHARED_COPIES.load(Ordering::Relaxed) > 0 {
        let (a, e) = (addr as usize, (addr as usize).saturating_add(len));
        let hits = guarded(|| MAPS.lock().iter().any(|m| m.copy && !m.private && a < m.start + m.len && m.start < e));
        if hits == Some(true) {
            return fail(libc::EACCES);
        }
    }
    // SAFETY: forwarding.
    unsafe { real!(mprotect: fn(*mut c_void, size_t, c_int) -> c_int)(addr, len, prot) }
}
