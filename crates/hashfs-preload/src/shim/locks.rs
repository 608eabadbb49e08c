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
//! file description, so each description gets a descriptor of the image of its own,
//! closed (its locks dropped) with the description's last descriptor.

use super::*;

use hashfs::share::record_locks::{span_start, FLOCK_BASE, SPAN};

/// A descriptor of the image file (O_RDWR, or O_RDONLY when that is all the process may:
/// its write locks then fail with EBADF, as on a file opened read-only), at a high number
/// (`hashfs::pm::out_of_the_way`: a program's dup2 onto a low one must not drop its locks).
fn open_image_fd() -> Result<c_int, c_int> {
    use std::os::fd::{FromRawFd, IntoRawFd};
    // SAFETY: a descriptor just opened, owned by nothing else.
    open_image_fd_low().map(|fd| hashfs::pm::out_of_the_way(unsafe { std::fs::File::from_raw_fd(fd) }).into_raw_fd())
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

/// The process's descriptor for its POSIX locks.
fn process_fd() -> Result<c_int, c_int> {
    static FD: OnceLock<Result<c_int, c_int>> = OnceLock::new();
    *FD.get_or_init(open_image_fd)
}

impl OpenFile {
    /// The description's descriptor for its OFD locks and `flock`, opened at first use.
    fn description_fd(&self) -> Result<c_int, c_int> {
        *self.lock_fd.get_or_init(open_image_fd)
    }
}

/// Drops a description's locks with it.
pub(super) fn close_description(of: &OpenFile) {
    if let Some(Ok(fd)) = of.lock_fd.get() {
        let close = real!(close: fn(c_int) -> c_int);
        // SAFETY: the description's own descriptor, closed once (the description is
        // being dropped).
        unsafe { close(*fd) };
    }
}

/// POSIX: a close of any of the process's descriptors of inode `ino` drops every record
/// lock the process holds on it.
pub(super) fn closed_a_descriptor_of(ino: Ino) {
    let Ok(fd) = process_fd() else { return };
    let mut l = whole_span(ino);
    l.l_type = libc::F_UNLCK as i16;
    let fcntl = real!(fcntl: fn(c_int, c_int, *mut libc::flock) -> c_int);
    // SAFETY: F_SETLK with a valid struct flock on our descriptor.
    unsafe { fcntl(fd, libc::F_SETLK, &mut l) };
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
    // SAFETY: a lock command with a valid struct flock on our descriptor of the image.
    if unsafe { fcntl(fd, cmd, &mut k) } < 0 {
        return Err(hashfs_interpose::errno());
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
