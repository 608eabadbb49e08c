//! A shared region: a file of a fixed size on a tmpfs, mapped `MAP_SHARED` by every
//! process that opens it, so that its bytes are one set for all of them. What lies in it
//! is plain words (atomics), laid out by its users at fixed offsets after its header
//! (`attach.rs`: how a process finds or makes it).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// A mapped region (unmapped when dropped).
pub struct Region {
    base: NonNull<u8>,
    len: usize,
    /// The region file, kept open while it is mapped for the participants' locks of the
    /// kernel's (`liveness.rs`); None for an anonymous region, or a file this process could
    /// not register.
    file: Option<File>,
}

// SAFETY: the region is plain shared memory; every access to it goes through atomics
// (its users' types), which are Sync.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    /// Maps the region file `f` (`len` bytes, checked).
    pub(super) fn map(f: &File, len: usize) -> io::Result<Region> {
        Region::map_with(f, len, libc::PROT_READ | libc::PROT_WRITE)
    }

    /// Maps the region file `f` (`len` bytes, checked) and keeps it open, moved out of the
    /// program's way, for the participants' locks (`liveness.rs`).
    pub(super) fn map_kept(f: File, len: usize) -> io::Result<Region> {
        Region::map_with(&f, len, libc::PROT_READ | libc::PROT_WRITE).map(|r| r.keeping(f))
    }

    /// Maps the region file `f` for reading only: a store through it faults, so a process
    /// that may only read the image cannot change the state the others share. The file is
    /// kept, to ask the writers' locks (`liveness.rs`).
    pub(super) fn map_read_only(f: &File, len: usize) -> io::Result<Region> {
        let r = Region::map_with(f, len, libc::PROT_READ)?;
        Ok(match f.try_clone() {
            Ok(f) => r.keeping(f),
            Err(_) => r,
        })
    }

    fn map_with(f: &File, len: usize, prot: i32) -> io::Result<Region> {
        let have = f.metadata()?.len();
        if have != len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("shared region is {have} bytes, not {len}"),
            ));
        }
        // The file stays mapped after the descriptor closes.
        Region::mapped(len, prot, libc::MAP_SHARED, f.as_raw_fd())
    }

    /// This mapping, its file `f` kept open (`liveness.rs`).
    fn keeping(mut self, f: File) -> Region {
        let f = crate::pm::out_of_the_way(f);
        let start = self.base.as_ptr() as usize;
        if super::liveness::register(start, start + self.len, f.as_raw_fd()) {
            crate::pm::keep(&f); // a program's close of it is refused (the shim)
            self.file = Some(f);
        }
        self
    }

    /// A region of `len` zero bytes that no file holds: what a mount of one process keeps
    /// of the state others would share (its record locks, `lock_table.rs`), and tests.
    pub fn anonymous(len: usize) -> io::Result<Region> {
        Region::mapped(len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1)
    }

    /// A new shared mapping of `len` bytes of `fd` (-1 with MAP_ANONYMOUS).
    fn mapped(len: usize, prot: i32, flags: i32, fd: i32) -> io::Result<Region> {
        // SAFETY: a new mapping of `len` bytes, of our descriptor or anonymous; the kernel
        // picks the address.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Region { base: NonNull::new(p as *mut u8).expect("mmap returned null"), len, file: None })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value of type `T` at byte `off` of the region.
    ///
    /// # Panics
    /// If `T` does not fit at `off` or `off` is not aligned for it (a layout bug).
    pub fn at<T: Shared>(&self, off: usize) -> &T {
        assert!(off.is_multiple_of(std::mem::align_of::<T>()) && off + std::mem::size_of::<T>() <= self.len, "layout");
        // SAFETY: in bounds and aligned (checked); `T: Shared` is made of atomics, valid
        // for every bit pattern (all zero included) and shared between processes.
        unsafe { &*(self.base.as_ptr().add(off) as *const T) }
    }

    /// The `n` values of type `T` from byte `off` of the region.
    ///
    /// # Panics
    /// If they do not fit at `off` or `off` is not aligned for `T` (a layout bug).
    pub fn slice<T: Shared>(&self, off: usize, n: usize) -> &[T] {
        let fits =
            n.checked_mul(std::mem::size_of::<T>()).and_then(|b| b.checked_add(off)).is_some_and(|e| e <= self.len);
        assert!(off.is_multiple_of(std::mem::align_of::<T>()) && fits, "layout");
        // SAFETY: in bounds and aligned (checked); `T: Shared` as in `at`.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off) as *const T, n) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if self.file.is_some() {
            super::liveness::unregister(self.base.as_ptr() as usize);
        }
        // SAFETY: our mapping, unmapped once; nothing borrowed from it outlives `self`.
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len) };
    }
}

/// Types that may live in a shared region: made only of atomics (and padding), valid for
/// every bit pattern, with no pointer into one process's memory.
///
/// # Safety
/// Implementors must be `repr(C)` of atomic integers (or arrays of `Shared` types).
pub unsafe trait Shared: Sync {}

// SAFETY: atomic integers: valid for every bit pattern, shared by address.
unsafe impl Shared for std::sync::atomic::AtomicU32 {}
// SAFETY: as above.
unsafe impl Shared for std::sync::atomic::AtomicU64 {}
// SAFETY: as above.
unsafe impl Shared for std::sync::atomic::AtomicU8 {}
