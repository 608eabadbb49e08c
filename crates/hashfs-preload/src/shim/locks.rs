//! Record locks (`fcntl` F_SETLK, F_SETLKW, F_GETLK and their OFD forms) and `flock`
//! between the processes that share an image: each is taken, through the kernel's own lock
//! manager, on a range of the image file that stands for the HashFS file's range. Inode
//! `ino`'s bytes [s, e) are the image file's [ino·2^40 + s, ino·2^40 + e); its `flock` is
//! one byte past every inode's range. So the kernel gives exactly its semantics: conflicts
//! between processes, F_SETLKW's wait and its deadlock detection (EDEADLK), the holder's
//! pid in F_GETLK, and release when a holder dies.
//!
//! What is whose: POSIX locks belong to the process, so they are taken on one descriptor
//! of the image the process keeps, and (as POSIX has it) a close of any descriptor of a
//! file drops the process's locks on that file. OFD locks and `flock` belong to the open
//! file description, so each description gets a descriptor of the image of its own.
//!
//! The kernel drops a process's POSIX locks on a file at the close of *any* of its
//! descriptors of that file, and every HashFS file's locks lie in one file, the image. So
//! while the process may hold a POSIX lock ([`Held`]), the shim closes no descriptor of
//! the image: a description's descriptor has its OFD locks and `flock` cleared and is kept
//! for the next description (a spare), and one that a forked process may share (its locks
//! are that process's too) is closed only once no POSIX lock is held. (Before, a `flock`
//! or an OFD lock anywhere in the process, or the close of such a description, dropped
//! every POSIX lock the process held in the image.)

use super::*;

use hashfs::share::record_locks::{span_start, FLOCK_BASE, SPAN};
use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;

/// What the process may hold as POSIX locks, and the descriptors of the image it keeps
/// because of them. Its lock is held across `fork` (`fork::before_fork`).
pub(super) struct Held {
    /// Inodes the process took a POSIX lock on since a close of one of their descriptors.
    inos: BTreeSet<u32>,
    /// POSIX lock calls under way (one may be granted before it is counted in `inos`).
    calls: usize,
    /// Descriptors of descriptions that a forked process may share, closed once nothing is
    /// held.
    deferred: Vec<c_int>,
    /// Descriptors for descriptions to come: this process's alone, with no lock on them.
    spare: Vec<c_int>,
}

static HELD: hashfs::ForkMutex<Held> =
    hashfs::ForkMutex::new(Held { inos: BTreeSet::new(), calls: 0, deferred: Vec::new(), spare: Vec::new() });

/// Spares kept at most (more are closed, or deferred while a POSIX lock is held).
const SPARES: usize = 16;

/// Forks this process took part in (as parent or child): a description's descriptor
/// opened before the last one may be shared with another process.
static FORKS: AtomicU64 = AtomicU64::new(0);

impl Held {
    fn none(&self) -> bool {
        self.inos.is_empty() && self.calls == 0
    }

    /// Closes the deferred descriptors once no POSIX lock can be held.
    fn settle(&mut self) {
        if self.none() {
            let close = real!(close: fn(c_int) -> c_int);
            for fd in self.deferred.drain(..) {
                // SAFETY: a descriptor of the image that only this table names.
                unsafe { close(fd) };
            }
        }
    }
}

/// HELD's lock, for `fork::before_fork`.
pub(super) fn held_for_fork() -> hashfs::ForkMutexGuard<'static, Held> {
    HELD.lock()
}

/// After a fork, in both processes: every description's descriptor opened so far may be
/// shared. In the child, which holds no POSIX lock, the spares and the deferred
/// descriptors (the parent's) are closed.
pub(super) fn after_fork(held: &mut Held, child: bool) {
    FORKS.fetch_add(1, Ordering::Relaxed);
    if child {
        held.inos.clear();
        held.calls = 0;
        let spare = std::mem::take(&mut held.spare);
        held.deferred.extend(spare);
        held.settle();
    }
}

/// A descriptor of the image file (O_RDWR, or O_RDONLY when that is all the process may:
/// its write locks then fail with EBADF, as on a file opened read-only), at a high number
/// (`hashfs::pm::out_of_the_way`: a program's dup2 onto a low one must not drop its
/// locks) unless moving it there would drop a POSIX lock (the low one's close).
fn open_image_fd() -> Result<c_int, c_int> {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let fd = open_image_fd_low()?;
    let held = HELD.lock();
    if !held.none() {
        return Ok(fd);
    }
    // SAFETY: a descriptor just opened, owned by nothing else.
    Ok(hashfs::pm::out_of_the_way(unsafe { std::fs::File::from_raw_fd(fd) }).into_raw_fd())
}

fn open_image_fd_low() -> Result<c_int, c_int> {
    let Some(img) = std::env::var_os("HASHFS_IMAGE") else { return Err(libc::ENOLCK) };
    let Ok(c) = CString::new(img.as_bytes()) else { return Err(libc::ENOLCK) };
    let open = real!(open: fn(*const c_char, c_int, c_uint) -> c_int);
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
    if fd >= 0 {
        return Ok(fd);
    }
    // SAFETY: as above.
    match unsafe { open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC, 0) } {
        fd if fd >= 0 => Ok(fd),
        _ => Err(libc::ENOLCK),
    }
}

/// The process's descriptor for its POSIX locks, opened at its first lock.
static PROCESS_FD: OnceLock<Result<c_int, c_int>> = OnceLock::new();

fn process_fd() -> Result<c_int, c_int> {
    *PROCESS_FD.get_or_init(open_image_fd)
}

/// A description's descriptor of the image, and the forks counted when it was opened.
#[derive(Clone, Copy)]
pub(super) struct DescriptionFd {
    fd: c_int,
    forks: u64,
}

impl OpenFile {
    /// The description's descriptor for its OFD locks and `flock`: a spare, or one opened
    /// at first use.
    fn description_fd(&self) -> Result<c_int, c_int> {
        let d = self.lock_fd.get_or_init(|| {
            let forks = FORKS.load(Ordering::Relaxed);
            let spare = HELD.lock().spare.pop();
            spare.map_or_else(open_image_fd, Ok).map(|fd| DescriptionFd { fd, forks })
        });
        d.map(|d| d.fd)
    }
}

/// Drops a description's locks with it: its descriptor's OFD locks and `flock` are
/// cleared and the descriptor kept as a spare. One that a forked process may share still
/// (opened before a fork, and `last` is false: this process was not the description's
/// last holder) keeps its locks for that process and is closed (later, while a POSIX lock
/// may be held).
pub(super) fn close_description(of: &OpenFile, last: bool) {
    let Some(Ok(d)) = of.lock_fd.get() else { return };
    let mine = last || d.forks == FORKS.load(Ordering::Relaxed);
    let mut held = HELD.lock();
    // Cleared even when no spare is wanted: the descriptor may wait in `deferred`.
    let cleared = mine && clear_description(d.fd, of.ino);
    if cleared && held.spare.len() < SPARES {
        held.spare.push(d.fd);
    } else {
        held.deferred.push(d.fd);
        held.settle();
    }
}

/// Unlocks every lock description descriptor `fd` can hold (inode `ino`'s span and its
/// `flock` byte); false if the kernel refused.
fn clear_description(fd: c_int, ino: Ino) -> bool {
    let fcntl = real!(fcntl: fn(c_int, c_int, *mut libc::flock) -> c_int);
    let mut span = whole_span(ino);
    span.l_type = libc::F_UNLCK as i16;
    let mut one = span;
    one.l_start = FLOCK_BASE + ino.0 as i64;
    one.l_len = 1;
    // SAFETY: F_OFD_SETLK with valid struct flocks on our descriptor.
    unsafe { fcntl(fd, libc::F_OFD_SETLK, &mut span) == 0 && fcntl(fd, libc::F_OFD_SETLK, &mut one) == 0 }
}

/// POSIX: a close of any of the process's descriptors of inode `ino` drops every record
/// lock the process holds on it (a call to the kernel only when it took one).
pub(super) fn closed_a_descriptor_of(ino: Ino) {
    let mut held = HELD.lock();
    if !held.inos.remove(&ino.0) {
        return;
    }
    // (Opened: the lock taken on `ino` went through it.)
    if let Some(&Ok(fd)) = PROCESS_FD.get() {
        let mut l = whole_span(ino);
        l.l_type = libc::F_UNLCK as i16;
        let fcntl = real!(fcntl: fn(c_int, c_int, *mut libc::flock) -> c_int);
        // SAFETY: F_SETLK with a valid struct flock on our descriptor.
        unsafe { fcntl(fd, libc::F_SETLK, &mut l) };
    }
    held.settle();
}

fn whole_span(ino: Ino) -> libc::flock {
    // SAFETY: a plain C struct, valid zeroed.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_whence = libc::SEEK_SET as i16;
    l.l_start = span_start(ino);
    l.l_len = SPAN;
    l
}

/// The caller's lock `l` on `of` as a range of the image file: [start, end) of the file
/// made absolute (SEEK_CUR from the descriptor's offset, SEEK_END from the size), end
/// None for "to the end".
fn translate(of: &OpenFile, fs: &FileSystem<MmapDevice>, l: &libc::flock) -> Result<libc::flock, c_int> {
    let base = match l.l_whence as c_int {
        libc::SEEK_SET => 0,
        libc::SEEK_CUR => *of.pos.lock() as i64,
        libc::SEEK_END => fs.peek_attr(of.ino).map_err(|e| e.errno())?.size as i64,
        _ => return Err(libc::EINVAL),
    };
    let start = base.checked_add(l.l_start).ok_or(libc::EOVERFLOW)?;
    let (start, len) = match l.l_len {
        0 => (start, 0),
        n if n > 0 => (start, n),
        n => (start.checked_add(n).ok_or(libc::EINVAL)?, -n),
    };
    if start < 0 {
        return Err(libc::EINVAL);
    }
    if start >= SPAN || (len > 0 && start + len > SPAN) {
        return Err(libc::EOVERFLOW); // past what the image's ranges hold for one file
    }
    let mut k = *l;
    k.l_whence = libc::SEEK_SET as i16;
    k.l_start = span_start(of.ino) + start;
    k.l_len = if len == 0 { SPAN - start } else { len };
    Ok(k)
}

/// F_GETLK's answer back in the file's terms.
fn untranslate(of: &OpenFile, k: &libc::flock, l: &mut libc::flock) {
    l.l_type = k.l_type;
    if k.l_type == libc::F_UNLCK as i16 {
        return;
    }
    let base = span_start(of.ino);
    let start = k.l_start - base;
    l.l_whence = libc::SEEK_SET as i16;
    l.l_start = start;
    l.l_len = if start + k.l_len >= SPAN { 0 } else { k.l_len };
    l.l_pid = k.l_pid;
}

/// fcntl's lock commands on `of`.
pub(super) fn fcntl_lock(of: &OpenFile, cmd: c_int, l: &mut libc::flock) -> Result<c_int, c_int> {
    let s = shim();
    let fs = s.fs()?;
    let ofd = matches!(cmd, libc::F_OFD_SETLK | libc::F_OFD_SETLKW | libc::F_OFD_GETLK);
    let fd = if ofd { of.description_fd()? } else { process_fd()? };
    let mut k = translate(of, fs, l)?;
    let fcntl = real!(fcntl: fn(c_int, c_int, *mut libc::flock) -> c_int);
    // A POSIX lock taken: counted while the call is under way, then its inode kept
    // (`Held`), so that no descriptor of the image is closed meanwhile.
    let takes = matches!(cmd, libc::F_SETLK | libc::F_SETLKW) && k.l_type != libc::F_UNLCK as i16;
    if takes {
        HELD.lock().calls += 1;
    }
    // SAFETY: a lock command with a valid struct flock on our descriptor of the image.
    let r = unsafe { fcntl(fd, cmd, &mut k) };
    let e = hashfs_interpose::errno();
    if takes {
        let mut held = HELD.lock();
        held.calls -= 1;
        if r == 0 {
            held.inos.insert(of.ino.0);
        }
        held.settle();
    }
    if r < 0 {
        return Err(e);
    }
    if matches!(cmd, libc::F_GETLK | libc::F_OFD_GETLK) {
        untranslate(of, &k, l);
    }
    Ok(0)
}

/// flock(2) on `of`: an OFD lock of the inode's byte past every record lock.
pub(super) fn flock(of: &OpenFile, op: c_int) -> Result<(), c_int> {
    let fd = of.description_fd()?;
    // SAFETY: a plain C struct, valid zeroed.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_whence = libc::SEEK_SET as i16;
    l.l_start = FLOCK_BASE + of.ino.0 as i64;
    l.l_len = 1;
    l.l_type = match op & !libc::LOCK_NB {
        libc::LOCK_SH => libc::F_RDLCK,
        libc::LOCK_EX => libc::F_WRLCK,
        libc::LOCK_UN => libc::F_UNLCK,
        _ => return Err(libc::EINVAL),
    } as i16;
    let cmd = if op & libc::LOCK_NB != 0 { libc::F_OFD_SETLK } else { libc::F_OFD_SETLKW };
    let fcntl = real!(fcntl: fn(c_int, c_int, *mut libc::flock) -> c_int);
    // SAFETY: as above.
    if unsafe { fcntl(fd, cmd, &mut l) } < 0 {
        let e = hashfs_interpose::errno();
        // flock says EWOULDBLOCK where fcntl says EAGAIN or EACCES.
        return Err(if e == libc::EACCES { libc::EWOULDBLOCK } else { e });
    }
    Ok(())
}
