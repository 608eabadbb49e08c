//! Snapshots: standard input redirected from a file of the image opened read-only (`cmd <
//! f`, `exec < f`, a program's `dup2` of such a descriptor onto 0), when the file is at
//! most [`LIMIT`] long, becomes a memfd holding a copy of the file, at the description's
//! offset, sealed against any change (a write through it fails with EPERM, where Linux's
//! read-only descriptor says EBADF: a read-only description of the memfd, opened again
//! through `/proc/self/fd`, was the costliest step of the redirection, by hand). glibc's
//! stdio reads standard input with its internal `read`, which no preload sees, so the
//! descriptor must be the kernel's; a pump's
//! pipe (`pump.rs`, still used for larger files and `0<> f`) cannot be sought, and a
//! program that learns its input is a regular file seeks it: bash's `read` and `head`
//! give back what they read past their line (`{ head -n1; head -n1; } < f` prints two
//! lines, as on Linux), `split -n` measures its input, GNU cat compares it with its
//! output (`cat < f >> f` is refused, not copied onto itself until the image is full).
//!
//! The memfd's offset is the description's while it is on standard input: the kernel
//! moves it for every process that shares it (a fork's child, a program exec'd with it).
//! It is written back to the description's position ([`write_back`]) when standard input
//! is replaced or closed, at an exec (the next program adopts the description, named to
//! it: `exec.rs`) and at exit, so that another descriptor of the same description (`exec
//! 3< f; head -n1 <&3; read l <&3`) goes on where the reader stopped. fstat of it (and a
//! stat of `/dev/stdin`) answers the file.
//!
//! What it is not: a view of the file. Bytes written to the file after the redirection
//! are not in the snapshot (Linux's reader would see them); the memfd's own locks are not
//! the file's (`flock` on standard input locks the copy).

use super::*;
use pump::{StandardFile, STANDARD_FILES};

/// The largest file a redirected standard input is copied from (16 MiB, a few
/// milliseconds' copy); a larger one is pumped through a pipe, which cannot be sought.
pub(super) const LIMIT: u64 = 16 << 20;

/// What a snapshot's memfd is called, before the file's inode.
const NAME: &str = "hashfs-input-";

/// The device and inode of what descriptor `fd` refers to, if it is a regular file.
pub(super) fn identity(fd: c_int) -> Option<(u64, u64)> {
    let st = pump::kernel_stat(fd)?;
    (st.st_mode & libc::S_IFMT == libc::S_IFREG).then_some((st.st_dev, st.st_ino))
}

/// Puts a snapshot of `of`'s file on standard input, at `of`'s position; false when `of`
/// is not read-only, its file is longer than [`LIMIT`], or the kernel refused a step (then
/// standard input is as it was, or, if the refused step was its replacement, let go of
/// its file): the caller pumps it instead.
pub(super) fn put(of: &Arc<OpenFile>) -> bool {
    if of.flags.load(Ordering::Relaxed) & libc::O_ACCMODE != libc::O_RDONLY {
        return false;
    }
    let Some(file) = of.file.as_ref() else { return false };
    let Ok(size) = file.metadata().map(|m| m.size) else { return false };
    if size > LIMIT {
        return false;
    }
    let Some(reader) = filled(of.ino, file, size) else { return false };
    let (lseek, dup2, close) = (
        real!(lseek: fn(c_int, off_t, c_int) -> off_t),
        real!(dup2: fn(c_int, c_int) -> c_int),
        real!(close: fn(c_int) -> c_int),
    );
    let at = off_t::try_from(*of.pos.lock()).unwrap_or(off_t::MAX);
    pump::forget_standard(0);
    // SAFETY: our own descriptor, moved onto standard input, then closed.
    let placed = unsafe {
        // (The copy's writes left the offset at its end.)
        let placed = lseek(reader, at, libc::SEEK_SET) >= 0 && dup2(reader, 0) == 0;
        close(reader);
        placed
    };
    if !placed {
        return false;
    }
    let Some((dev, ino)) = identity(0) else { return false };
    STANDARD_FILES.lock()[0] = Some(StandardFile { object: ino, of: of.clone(), snapshot: Some(dev) });
    true
}

/// A sealed memfd holding `file`'s `size` bytes (named after its inode), close-on-exec and
/// above the standard descriptors.
fn filled(ino: Ino, file: &hashfs::File<MmapDevice>, size: u64) -> Option<c_int> {
    let close = real!(close: fn(c_int) -> c_int);
    let name = CString::new(format!("{NAME}{}", ino.0)).ok()?;
    // SAFETY: a NUL-terminated name.
    let m = above_standard(
        unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) },
        libc::F_DUPFD_CLOEXEC,
    )?;
    let copied = copy_into(m, file, size);
    // SAFETY: sealing our own memfd: its length and bytes stay as copied.
    let sealed = copied
        && unsafe {
            libc::fcntl(
                m,
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL,
            )
        } == 0;
    if !sealed {
        // SAFETY: our memfd, not used.
        unsafe { close(m) };
        return None;
    }
    Some(m)
}

/// Copies `size` bytes of `file` into memfd `m` (fewer if the file shrank meanwhile).
fn copy_into(m: c_int, file: &hashfs::File<MmapDevice>, size: u64) -> bool {
    let write = real!(write: fn(c_int, *const c_void, size_t) -> ssize_t);
    let mut buf = vec![0u8; size.min(1 << 20) as usize];
    let mut off = 0u64;
    while off < size {
        let want = (size - off).min(buf.len() as u64) as usize;
        let n = match file.read_at(off, &mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(_) => return false,
        };
        let mut done = 0;
        while done < n {
            // SAFETY: buf holds n bytes.
            let w = unsafe { write(m, buf[done..n].as_ptr().cast(), n - done) };
            if w <= 0 {
                return false; // out of memory for the copy: pumped instead
            }
            done += w as usize;
        }
        off += n as u64;
    }
    true
}

/// `fd`, or a copy of it from 3 up (made with `dup`, `F_DUPFD` or `F_DUPFD_CLOEXEC`) if it
/// is a standard descriptor, one that was closed when `fd` was made (the caller is about to
/// replace standard input, or the program had closed it and keeps it so); None for a
/// failed call's -1.
pub(super) fn above_standard(fd: c_int, dup: c_int) -> Option<c_int> {
    if fd < 0 {
        return None;
    }
    if fd > 2 {
        return Some(fd);
    }
    let (fcntl, close) = (real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int), real!(close: fn(c_int) -> c_int));
    // SAFETY: duplicating, then closing, our own descriptor.
    unsafe {
        let moved = fcntl(fd, dup, 3);
        close(fd);
        (moved >= 0).then_some(moved)
    }
}

/// The file standard descriptor `fd` is a snapshot of, if it is one (its memfd still).
pub(super) fn on(fd: c_int) -> Option<Arc<OpenFile>> {
    let slot = usize::try_from(fd).ok().filter(|&i| i < 3)?;
    let files = STANDARD_FILES.lock();
    let sf = files[slot].as_ref()?;
    is_on(fd, sf).then(|| sf.of.clone())
}

/// Whether `sf` is a snapshot and descriptor `fd` its memfd still.
fn is_on(fd: c_int, sf: &StandardFile) -> bool {
    sf.snapshot.is_some_and(|dev| identity(fd) == Some((dev, sf.object)))
}

/// The memfd's offset, as descriptor `fd` (a standard one, about to be replaced or
/// handed over) has it, becomes `sf`'s description's position, if `sf` is a snapshot and
/// `fd` its memfd still (true then).
pub(super) fn write_back(fd: c_int, sf: &StandardFile) -> bool {
    if !is_on(fd, sf) {
        return false;
    }
    // SAFETY: a seek that moves nothing, on a descriptor number.
    let at = unsafe { real!(lseek: fn(c_int, off_t, c_int) -> off_t)(fd, 0, libc::SEEK_CUR) };
    if at >= 0 {
        *sf.of.pos.lock() = at as u64;
    }
    true
}

/// Standard input, if it is a snapshot, with its memfd's inode (the name an exec or a
/// spawn passes it by: `exec.rs`), its offset written back first.
pub(super) fn handed_over() -> Option<(u64, Arc<OpenFile>)> {
    let sf = STANDARD_FILES.lock()[0].clone()?;
    write_back(0, &sf).then_some((sf.object, sf.of))
}

/// In a program an exec or a spawn started: standard input is the snapshot of `of`'s
/// file that its parent named as memfd `object` (`exec.rs`'s `named_pump`); false if it
/// is not (then a pump, or a snapshot, is put there as for any inherited descriptor).
pub(super) fn adopt(of: &Arc<OpenFile>, object: u64) -> bool {
    let Some((dev, ino)) = identity(0) else { return false };
    if ino != object {
        return false;
    }
    STANDARD_FILES.lock()[0] = Some(StandardFile { object: ino, of: of.clone(), snapshot: Some(dev) });
    true
}
