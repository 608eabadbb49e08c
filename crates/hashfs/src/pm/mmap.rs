//! [`MmapDevice`]: an image file mapped `MAP_SHARED` (with `MAP_SYNC` on DAX).

use super::cpu::{self, FlushKind};
use super::{lines_in, DevOffset, DeviceStats, PmDevice};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Copies at least this large use non-temporal stores (the unaligned head and tail lines
/// through the cache and a flush); smaller ones a cached copy and a flush per line. 256
/// bytes rather than a block since 2026-12-04: a 4 KiB write at an unaligned offset (two
/// partial blocks, as SQLite's WAL frames are) paid the cached copy and its line flushes,
/// about twice an aligned one (bench/results/shared/sqlite-writers-intel-ab.json).
pub const NONTEMPORAL_MIN_BYTES: usize = 256;

/// Reads longer than this are copied in pieces that end at its multiples in the image.
/// On an Intel Xeon (glibc's `rep movsb` at every size from 2 KiB), by hand: a 1 MiB read
/// of a file's contiguous blocks took 98-100 us in pieces of 4 KiB, 104-106 in pieces of
/// 32 KiB (a read run's most) and 105-108 in one copy, 2 KiB pieces (a vector loop)
/// 105-109; `hashfs-bench micro`'s 1 MiB read on a regions image, before and after, is in
/// bench/results/micro/read-pieces/.
pub const READ_PIECE_BYTES: usize = 4096;

/// Lines of a read's next run (`fs/data.rs`) and of a long copy's next piece prefetched
/// while the one before is copied. On an image with 4 KiB pages, by hand (an Intel Xeon,
/// 256 scattered 4 KiB copies, as a 1 MiB read of the paper placement makes): none 181-190 us, 1 or 4 lines about 170, 8 lines 142-147,
/// 16 lines 139-158, all 64 lines 184-207; with 2 MiB pages none and 8 lines both 133-144.
pub const NEXT_RUN_PREFETCH_LINES: u64 = 8;

/// Copies `buf.len()` bytes from `p` (the address of offset `off`: in the image, or in
/// ctFS's virtual space) into `buf`: one copy up to [`READ_PIECE_BYTES`], longer ones in
/// pieces ([`copy_in_pieces`]).
///
/// # Safety
/// `p..p + buf.len()` is inside the mapping and does not overlap `buf`.
#[inline]
pub(crate) unsafe fn copy_out(p: *const u8, off: u64, buf: &mut [u8]) {
    if buf.len() <= READ_PIECE_BYTES {
        // SAFETY: the caller's promise.
        unsafe { std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), buf.len()) };
    } else {
        // SAFETY: the caller's promise.
        unsafe { copy_in_pieces(p, off, buf) };
    }
}

/// A long read's copy, in pieces that end at multiples of [`READ_PIECE_BYTES`] of offset
/// `off` (`p` is its address: in the image, or in ctFS's virtual space), each piece's
/// successor's first lines fetched during its copy ([`NEXT_RUN_PREFETCH_LINES`]).
///
/// # Safety
/// `p..p + buf.len()` is inside the mapping and does not overlap `buf`.
#[inline(never)]
unsafe fn copy_in_pieces(p: *const u8, off: u64, buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        let n = (READ_PIECE_BYTES - (off as usize + done) % READ_PIECE_BYTES).min(buf.len() - done);
        // The next piece's first lines, fetched during this one's copy.
        let ahead = (buf.len() - done - n).min(NEXT_RUN_PREFETCH_LINES as usize * 64);
        for line in (0..ahead).step_by(64) {
            cpu::prefetch(p.wrapping_add(done + n + line));
        }
        // SAFETY: the caller's promise, for the piece done..done + n.
        unsafe { std::ptr::copy_nonoverlapping(p.add(done), buf.as_mut_ptr().add(done), n) };
        done += n;
    }
}

/// How to open the image file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// The file must exist; its length is the image size.
    Existing,
    /// Create or truncate the file to `size_bytes`.
    CreateTruncate { size_bytes: u64 },
    /// The file must exist, opened by one of many processes sharing it (issue 55): the
    /// image's lock taken shared, so that participants exclude a single-owner mount (and
    /// it them) but not one another.
    Shared,
    /// As `Shared`, by a process that may only read the image file: opened and mapped
    /// read-only (a store faults), for a read-only participant (`fs/shared/read_only.rs`).
    SharedReadOnly,
}

/// A memory-mapped image file.
pub struct MmapDevice {
    base: *mut u8,
    len: u64,
    _file: File,
    flush_kind: FlushKind,
    /// True when mapped with MAP_SYNC (the file sits on a DAX file system).
    map_sync: bool,
    /// False when mapped read-only ([`OpenMode::SharedReadOnly`]).
    writable: bool,
    /// True when this process holds the image file's lock exclusive (a mount of one
    /// process, a format): let go explicitly when dropped, so that a child another thread
    /// forked meanwhile, which shares the lock through its copy of the descriptor until it
    /// execs, does not keep the next open of the image out.
    exclusive: bool,
    /// True when the host file system keeps the image only in memory or in PM
    /// (tmpfs, DAX), so that cache write-back is all durability needs.
    host_is_memory: bool,
    stats: DeviceStats,
    /// The background populator's stop flag and thread (`populate_in_background`).
    populator: std::sync::Mutex<Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>>,
}

// SAFETY: the mapping is shared memory that lives as long as the device; all access goes
// through the verbs below, which use atomics or copies whose concurrency is the caller's
// (the file system's locks), exactly as with any shared-memory buffer.
unsafe impl Send for MmapDevice {}
// SAFETY: as above.
unsafe impl Sync for MmapDevice {}

const MAP_SHARED_VALIDATE: i32 = 0x03;
const MAP_SYNC: i32 = 0x80000;
const TMPFS_MAGIC: i64 = 0x0102_1994;
/// madvise: fault pages in for writing (Linux 5.14).
const MADV_POPULATE_WRITE: i32 = 23;

/// `file`'s descriptor moved to a high number (its close-on-exec flag set), out of the way
/// of a program in whose process the file system runs (the LD_PRELOAD shim): a shell's
/// `exec 3>file` makes `dup2(new, 3)`, which would close a descriptor of ours at 3 and
/// with it the image's lock. The number is below the soft limit of open files, near its
/// top (at most 4,000, so that the kernel does not grow a table of a million entries for
/// it); where no such number is free, the descriptor stays where it is.
pub fn out_of_the_way(file: File) -> File {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return file;
    }
    let floor = (lim.rlim_cur.saturating_sub(100)).clamp(100, 4000) as libc::c_int;
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own returns a new one, or -1.
    let high = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD_CLOEXEC, floor) };
    if high < 0 {
        return file;
    }
    // SAFETY: `high` is a new descriptor nothing else owns; `file`'s is closed as it drops.
    unsafe { File::from_raw_fd(high) }
}

/// Descriptors this library keeps for as long as the process uses an image and goes on
/// using by number (a ctFS view maps the image's pages through the image's descriptor,
/// `mapping/ctfs/view.rs`; a writer probes read-only participants' pins through it; a
/// read-only participant's pins are locks on its own descriptor's description): their
/// numbers and the files they were (device and inode), so that a number the library closed
/// and the kernel gave to another file is not taken for one. The LD_PRELOAD shim refuses a
/// program's close of them as of a number it never opened (EBADF), and a `dup2` onto one
/// (EBUSY): a daemon's "close every descriptor from 3 up" would otherwise leave the view
/// mapping through a closed number, and a `dup2` the program's file in the image's place.
/// (The image's `flock` is not at stake: its mapping keeps the description open.)
static KEPT: std::sync::Mutex<Vec<(i32, u64, u64)>> = std::sync::Mutex::new(Vec::new());

fn identity(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: a plain C struct, valid zeroed.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat fills the struct it is given; a closed number fails.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

/// Counts `file`'s descriptor among those kept ([`is_kept`]).
pub fn keep(file: &File) {
    let fd = file.as_raw_fd();
    if let (Some((dev, ino)), Ok(mut kept)) = (identity(fd), KEPT.lock()) {
        kept.retain(|&(n, _, _)| n != fd);
        kept.push((fd, dev, ino));
    }
}

/// Whether descriptor `fd` is one this library keeps ([`keep`]) and still the file it was.
pub fn is_kept(fd: i32) -> bool {
    let Ok(mut kept) = KEPT.lock() else { return false };
    let Some(i) = kept.iter().position(|&(n, _, _)| n == fd) else { return false };
    if identity(fd) == Some((kept[i].1, kept[i].2)) {
        return true;
    }
    kept.swap_remove(i); // closed by the library, its number the kernel's again
    false
}

/// The kept descriptors in [first, last] ([`is_kept`]).
pub fn kept_in(first: u32, last: u32) -> Vec<i32> {
    let numbers: Vec<i32> = match KEPT.lock() {
        Ok(kept) => kept.iter().map(|&(n, _, _)| n).filter(|&n| (first..=last).contains(&(n as u32))).collect(),
        Err(_) => Vec::new(),
    };
    numbers.into_iter().filter(|&n| is_kept(n)).collect()
}

impl MmapDevice {
    pub fn open(path: &Path, mode: OpenMode) -> io::Result<MmapDevice> {
        let file = match mode {
            OpenMode::Existing | OpenMode::Shared => OpenOptions::new().read(true).write(true).open(path)?,
            OpenMode::SharedReadOnly => OpenOptions::new().read(true).open(path)?,
            OpenMode::CreateTruncate { size_bytes } => {
                let f = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
                f.set_len(size_bytes)?;
                f
            }
        };
        let file = out_of_the_way(file);
        // One process at a time: two mounts of one image would corrupt it. A lock that is
        // busy for a moment only is waited for (up to half a second): a child forked by
        // another thread of this process holds our earlier descriptor of the image (from a
        // format or an unmount just before) until it execs.
        let mut tries = 0;
        let how =
            if matches!(mode, OpenMode::Shared | OpenMode::SharedReadOnly) { libc::LOCK_SH } else { libc::LOCK_EX };
        // SAFETY: flock on a descriptor we own; the lock goes with the descriptor.
        while unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(e);
            }
            tries += 1;
            if tries > 50 {
                return Err(io::Error::new(io::ErrorKind::ResourceBusy, "image is in use by another process"));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        keep(&file);
        let len = file.metadata()?.len();
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "image file is empty"));
        }
        let len_usize =
            usize::try_from(len).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "image too large"))?;
        let fd = file.as_raw_fd();
        let writable = mode != OpenMode::SharedReadOnly;
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: mmap of a file descriptor we own; a failure returns MAP_FAILED.
        let mut base =
            unsafe { libc::mmap(std::ptr::null_mut(), len_usize, prot, MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0) };
        let mut map_sync = true;
        if base == libc::MAP_FAILED {
            map_sync = false;
            // SAFETY: as above, without MAP_SYNC (the host is not DAX).
            base = unsafe { libc::mmap(std::ptr::null_mut(), len_usize, prot, libc::MAP_SHARED, fd, 0) };
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
        }
        let host_is_memory = map_sync || is_tmpfs(&file);
        Ok(MmapDevice {
            base: base as *mut u8,
            len,
            _file: file,
            flush_kind: cpu::flush_kind(),
            map_sync,
            writable,
            exclusive: how == libc::LOCK_EX,
            host_is_memory,
            stats: DeviceStats::default(),
            populator: std::sync::Mutex::new(None),
        })
    }

    /// Whether the image is mapped for writing (not [`OpenMode::SharedReadOnly`]).
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// Faults in every page of the mapping for writing (MADV_POPULATE_WRITE, Linux 5.14),
    /// so that first accesses do not pay page faults: what a pre-allocated PM region is.
    pub fn populate(&self) -> io::Result<()> {
        // SAFETY: base/len describe our live mapping; the advice changes no contents.
        let rc = unsafe { libc::madvise(self.base as *mut libc::c_void, self.len as usize, MADV_POPULATE_WRITE) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Allocates the whole image file on its host file system (fallocate, zero-filled), so
    /// that writes never wait for the host to allocate a page. On a memory host (tmpfs)
    /// that is not enough: tmpfs leaves a fallocated page to be zeroed at its first access,
    /// a write fault of several microseconds (a LevelDB run through the shim spent 5.4% of
    /// its cycles in `clear_page` under HashFS's stores); so there every page is also faulted
    /// in once, here ([`Self::populate`]), and later mappings, in any process, make only
    /// minor faults (no zeroing), as on PM.
    pub fn preallocate(&self) -> io::Result<()> {
        let len =
            i64::try_from(self.len).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "image too large"))?;
        // SAFETY: fallocate on a descriptor we own; mode 0 allocates and changes no contents.
        let rc = unsafe { libc::fallocate(self._file.as_raw_fd(), 0, 0, len) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        if self.host_is_memory {
            // Before Linux 5.14 (no MADV_POPULATE_WRITE) the pages are zeroed at first
            // use instead: slower, not wrong.
            let _ = self.populate();
        }
        Ok(())
    }

    /// Faults the mapping in on a thread of its own, 64 MiB at a time, when the image file
    /// is allocated whole on a memory or DAX host (`mkfs` without `--sparse`): a write fault on a
    /// shared tmpfs mapping costs several microseconds per 4 KiB page, more than the
    /// copy it interrupts, and a real PM mount has none. A sparse image is left alone
    /// (populating it would allocate it). Returns whether the thread was started; it
    /// stops when the device is dropped.
    pub fn populate_in_background(&self) -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let allocated = self._file.metadata()?.blocks().saturating_mul(512);
        let mut slot = self.populator.lock().unwrap_or_else(|e| e.into_inner());
        // On a disk file system a write fault dirties the page: populating would write the
        // whole image back. Only memory (tmpfs) and DAX hosts are populated.
        if !self.host_is_memory || !self.writable || allocated < self.len || slot.is_some() {
            return Ok(false);
        }
        const CHUNK: usize = 64 << 20;
        let stop = Arc::new(AtomicBool::new(false));
        let (base, len, flag) = (self.base as usize, self.len as usize, stop.clone());
        let t = std::thread::Builder::new().name("hashfs-populate".into()).spawn(move || {
            super::block_signals();
            // Only spare CPU: on a busy machine the threads serving requests come first
            // (each of them faults in what it touches itself). Measured under filebench
            // on 2 cores: zeroing the pages of a fresh 4 GiB image took a fifth of the
            // daemon's CPU at normal priority. A refusal leaves the normal priority.
            let idle = libc::sched_param { sched_priority: 0 };
            // SAFETY: pid 0 is this thread; the parameter is a valid sched_param.
            let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &idle) };
            let mut off = 0;
            while off < len && !flag.load(Ordering::Relaxed) {
                let n = CHUNK.min(len - off);
                // SAFETY: [base + off, + n) lies inside the mapping, which Drop unmaps only
                // after this thread has been stopped and joined; the advice changes no
                // contents. A failure (EINTR, ENOMEM) only leaves pages to fault later.
                if unsafe { libc::madvise((base + off) as *mut libc::c_void, n, MADV_POPULATE_WRITE) } != 0 {
                    break;
                }
                off += n;
            }
        })?;
        *slot = Some((stop, t));
        Ok(true)
    }

    /// The image file's descriptor (to map file blocks elsewhere, e.g. by the shim's mmap).
    pub fn raw_fd(&self) -> std::os::unix::io::RawFd {
        self._file.as_raw_fd()
    }

    pub fn is_map_sync(&self) -> bool {
        self.map_sync
    }

    pub fn flush_kind(&self) -> FlushKind {
        self.flush_kind
    }

    #[inline]
    fn ptr(&self, off: u64, len: u64) -> *mut u8 {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "device access out of range: {off}+{len} > {}",
            self.len
        );
        // SAFETY: the range was just checked to lie inside the mapping.
        unsafe { self.base.add(off as usize) }
    }

    #[inline]
    fn atomic(&self, off: u64) -> &AtomicU64 {
        assert!(off.is_multiple_of(8), "unaligned 8-byte access at {off}");
        let p = self.ptr(off, 8);
        // SAFETY: p is 8-aligned (the mapping is page-aligned), inside the mapping, and
        // lives as long as &self. Other accesses to the word also use atomics or plain
        // copies serialized by the file system's locks.
        unsafe { &*(p as *const AtomicU64) }
    }
}

/// Whether `file` lives on tmpfs (memory: nothing to msync).
pub fn is_tmpfs(file: &File) -> bool {
    // SAFETY: fstatfs writes into the zeroed struct we pass.
    unsafe {
        let mut s: libc::statfs = std::mem::zeroed();
        libc::fstatfs(file.as_raw_fd(), &mut s) == 0 && s.f_type as i64 == TMPFS_MAGIC
    }
}

impl Drop for MmapDevice {
    fn drop(&mut self) {
        if let Some((stop, t)) = self.populator.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            stop.store(true, Ordering::Relaxed);
            let _ = t.join();
        }
        // SAFETY: base/len came from a successful mmap and no references outlive self.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len as usize);
        }
        if self.exclusive {
            // SAFETY: flock on our own descriptor (closed right after, with `_file`).
            unsafe { libc::flock(self._file.as_raw_fd(), libc::LOCK_UN) };
        }
    }
}

impl PmDevice for MmapDevice {
    fn len_bytes(&self) -> u64 {
        self.len
    }

    #[inline]
    fn read(&self, off: DevOffset, buf: &mut [u8]) {
        let off = off.0;
        let p = self.ptr(off, buf.len() as u64);
        // SAFETY: p..p+len is inside the mapping; buf is a distinct DRAM buffer.
        unsafe { copy_out(p, off, buf) };
        self.stats.add_read(buf.len() as u64);
    }

    #[inline]
    fn write(&self, off: DevOffset, data: &[u8]) {
        let off = off.0;
        let p = self.ptr(off, data.len() as u64);
        // SAFETY: p..p+len is inside the mapping; data is a distinct DRAM buffer.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        self.stats.add_write(data.len() as u64);
    }

    fn write_nt(&self, off: DevOffset, data: &[u8]) {
        let off = off.0;
        if data.len() < NONTEMPORAL_MIN_BYTES {
            self.write(DevOffset(off), data);
            self.flush(DevOffset(off), data.len() as u64);
            return;
        }
        let p = self.ptr(off, data.len() as u64);
        // SAFETY: p..p+len is inside the mapping; data is a distinct DRAM buffer.
        unsafe { cpu::copy_nontemporal(self.flush_kind, p, data.as_ptr(), data.len()) };
        self.stats.add_write(data.len() as u64);
    }

    fn zero(&self, off: DevOffset, len: u64) {
        let off = off.0;
        let p = self.ptr(off, len);
        // SAFETY: p..p+len is inside the mapping.
        unsafe { std::ptr::write_bytes(p, 0, len as usize) };
        self.stats.add_write(len);
    }

    #[inline]
    fn load_u64(&self, off: DevOffset) -> u64 {
        let off = off.0;
        self.stats.add_read(8);
        self.atomic(off).load(Ordering::Acquire)
    }

    fn load_u64s(&self, off: DevOffset, out: &mut [u64]) {
        self.stats.add_read(8 * out.len() as u64);
        for (i, w) in out.iter_mut().enumerate() {
            *w = self.atomic(off.0 + 8 * i as u64).load(Ordering::Acquire);
        }
    }

    #[inline]
    fn store_u64(&self, off: DevOffset, value: u64) {
        let off = off.0;
        self.stats.add_write(8);
        self.atomic(off).store(value, Ordering::Release)
    }

    #[inline]
    fn cas_u64(&self, off: DevOffset, current: u64, new: u64) -> Result<u64, u64> {
        let off = off.0;
        self.stats.add_write(8);
        self.atomic(off).compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
    }

    #[inline]
    fn flush(&self, off: DevOffset, len: u64) {
        let off = off.0;
        let p = self.ptr(off, len);
        // SAFETY: the range is inside the mapping.
        unsafe { cpu::flush_range(self.flush_kind, p, len as usize) };
        self.stats.add_flush(lines_in(off, len));
    }

    #[inline]
    fn fence(&self) {
        cpu::store_fence();
        self.stats.add_fence();
    }

    #[inline]
    fn prefetch(&self, off: DevOffset) {
        let off = off.0;
        if off < self.len {
            // SAFETY: off is inside the mapping (prefetch would not fault anyway).
            cpu::prefetch(unsafe { self.base.add(off as usize) });
        }
    }

    fn stats(&self) -> &DeviceStats {
        &self.stats
    }

    fn host_needs_no_sync(&self) -> bool {
        self.host_is_memory
    }

    fn sync_host(&self) -> io::Result<()> {
        if self.host_is_memory {
            return Ok(());
        }
        // SAFETY: base/len describe our live mapping.
        let rc = unsafe { libc::msync(self.base as *mut libc::c_void, self.len as usize, libc::MS_SYNC) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn evict(&self, off: DevOffset, len: u64) -> bool {
        let off = off.0;
        let p = self.ptr(off, len);
        // SAFETY: the range is inside the mapping.
        unsafe { cpu::evict_range(p, len as usize) };
        true
    }

    fn base_ptr(&self) -> Option<*mut u8> {
        Some(self.base)
    }

    fn backing_fd(&self) -> Option<std::os::unix::io::RawFd> {
        Some(self.raw_fd())
    }

    fn try_lock_alone(&self) -> bool {
        // A shared holder converting to exclusive: the conversion fails while any other
        // open of the image holds it (and may drop ours, which its caller no longer needs).
        // SAFETY: flock on our own descriptor.
        unsafe { libc::flock(self.raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
    }

    fn let_go_of_image(&self) {
        if !self.exclusive {
            // SAFETY: flock on our own descriptor.
            unsafe { libc::flock(self.raw_fd(), libc::LOCK_UN) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_image(name: &str) -> std::path::PathBuf {
        let dir = if Path::new("/dev/shm").is_dir() { Path::new("/dev/shm") } else { Path::new("/tmp") };
        dir.join(format!("hashfs-mmap-test-{name}-{}", std::process::id()))
    }

    /// A child forked while the image is open shares its lock until it execs or exits; a
    /// device dropped meanwhile lets go of it anyway, so the next open is not refused as
    /// "in use" (the quick tier's flake in `tests/file_map.rs`, where another test thread
    /// forks: format, then open).
    #[test]
    fn a_forked_child_does_not_keep_a_dropped_devices_lock() {
        let path = temp_image("forked");
        let d = MmapDevice::open(&path, OpenMode::CreateTruncate { size_bytes: 1 << 20 }).unwrap();
        // SAFETY: the child only sleeps and exits (async-signal-safe calls).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                libc::usleep(1_500_000);
                libc::_exit(0);
            }
        }
        assert!(pid > 0);
        drop(d);
        let again = MmapDevice::open(&path, OpenMode::Existing);
        let mut status = 0;
        // SAFETY: our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let _ = std::fs::remove_file(&path);
        assert!(again.is_ok(), "{:?}", again.err());
    }

    #[test]
    fn verbs_work_on_a_mapped_file() {
        let path = temp_image("verbs");
        let d = MmapDevice::open(&path, OpenMode::CreateTruncate { size_bytes: 1 << 20 }).unwrap();
        d.write(DevOffset(100), b"abc");
        d.flush(DevOffset(100), 3);
        d.store_u64(DevOffset(4096), 7);
        assert_eq!(d.cas_u64(DevOffset(4096), 7, 8), Ok(7));
        assert_eq!(d.cas_u64(DevOffset(4096), 7, 9), Err(8));
        let big: Vec<u8> = (0..NONTEMPORAL_MIN_BYTES * 2 + 5).map(|i| i as u8).collect();
        d.write_nt(DevOffset(8192 + 3), &big); // unaligned head and tail around streaming stores
        d.fence();
        let mut back = vec![0u8; big.len()];
        d.read(DevOffset(8192 + 3), &mut back);
        assert_eq!(back, big);
        d.zero(DevOffset(100), 3);
        let mut b = [1u8; 3];
        d.read(DevOffset(100), &mut b);
        assert_eq!(b, [0, 0, 0]);
        let s = d.stats().snapshot();
        assert!(s.fences >= 1 && s.flushes >= 1 && s.bytes_written > big.len() as u64);
        drop(d);
        // Reopened, the contents are there.
        let d = MmapDevice::open(&path, OpenMode::Existing).unwrap();
        assert_eq!(d.load_u64(DevOffset(4096)), 8);
        drop(d);
        std::fs::remove_file(&path).unwrap();
    }

    /// Reads longer than a piece, from offsets on, beside and between piece boundaries,
    /// return the image's bytes in order.
    #[test]
    fn long_reads_copied_in_pieces_return_every_byte() {
        let path = temp_image("pieces");
        let d = MmapDevice::open(&path, OpenMode::CreateTruncate { size_bytes: 1 << 20 }).unwrap();
        let image: Vec<u8> = (0..5 * READ_PIECE_BYTES).map(|i| (i * 7 + i / 251) as u8).collect();
        d.write(DevOffset(0), &image);
        for off in [0, 1, 100, READ_PIECE_BYTES - 1, READ_PIECE_BYTES, READ_PIECE_BYTES + 3] {
            for len in [READ_PIECE_BYTES + 1, 2 * READ_PIECE_BYTES, 3 * READ_PIECE_BYTES + 17] {
                let mut back = vec![0u8; len];
                d.read(DevOffset(off as u64), &mut back);
                assert!(back == image[off..off + len], "read of {len} bytes at {off}");
            }
        }
        drop(d);
        std::fs::remove_file(&path).unwrap();
    }

    /// Streaming writes from every offset in a line, of lengths that end on, beside and
    /// between lines, land every byte and none outside their range.
    #[test]
    fn streaming_writes_land_every_byte_at_every_alignment() {
        let path = temp_image("streaming");
        let d = MmapDevice::open(&path, OpenMode::CreateTruncate { size_bytes: 1 << 20 }).unwrap();
        let base = 8192;
        for off in 0..64usize {
            for len in [NONTEMPORAL_MIN_BYTES, NONTEMPORAL_MIN_BYTES + 33, 4096, 4096 + 63 - off] {
                d.zero(DevOffset(base), 3 * 4096);
                let data: Vec<u8> = (0..len).map(|i| (i * 13 + off + len) as u8 | 1).collect();
                d.write_nt(DevOffset(base + off as u64), &data);
                d.fence();
                let mut back = vec![0u8; 3 * 4096];
                d.read(DevOffset(base), &mut back);
                assert!(back[..off].iter().all(|&b| b == 0), "bytes before a write of {len} at {off}");
                assert!(back[off..off + len] == data[..], "a write of {len} at {off}");
                assert!(back[off + len..].iter().all(|&b| b == 0), "bytes after a write of {len} at {off}");
            }
        }
        drop(d);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn every_flush_instruction_this_cpu_has_runs() {
        let buf = vec![0u8; 4096];
        let kinds = [FlushKind::Clwb, FlushKind::Clflushopt, FlushKind::Clflush];
        // SAFETY: CPUID as in cpu_features.
        #[allow(unused_unsafe)]
        let ebx = unsafe { core::arch::x86_64::__cpuid_count(7, 0) }.ebx;
        for k in kinds {
            let supported = match k {
                FlushKind::Clwb => ebx & (1 << 24) != 0,
                FlushKind::Clflushopt => ebx & (1 << 23) != 0,
                FlushKind::Clflush => true,
            };
            if supported {
                // SAFETY: buf is a live allocation of 4096 bytes.
                unsafe { cpu::flush_range(k, buf.as_ptr(), buf.len()) };
                cpu::store_fence();
            }
        }
    }

    #[test]
    fn a_second_open_of_one_image_is_refused() {
        let path = temp_image("lock");
        let d = MmapDevice::open(&path, OpenMode::CreateTruncate { size_bytes: 1 << 20 }).unwrap();
        let err = MmapDevice::open(&path, OpenMode::Existing).err().expect("refused");
        assert!(err.to_string().contains("in use"), "{err}");
        drop(d);
        MmapDevice::open(&path, OpenMode::Existing).expect("free again");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn empty_or_missing_files_are_errors() {
        let path = temp_image("empty");
        std::fs::write(&path, b"").unwrap();
        assert!(MmapDevice::open(&path, OpenMode::Existing).is_err());
        std::fs::remove_file(&path).unwrap();
        assert!(MmapDevice::open(&path, OpenMode::Existing).is_err());
    }
}
