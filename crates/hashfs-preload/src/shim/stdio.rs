//! stdio: FILE streams over HashFS files through fopencookie, so every stdio function of glibc works on them; fileno.

use super::*;
use hashfs_interpose::Handle;

#[repr(C)]
pub(super) struct CookieIo {
    read: Option<unsafe extern "C" fn(*mut c_void, *mut c_char, size_t) -> ssize_t>,
    write: Option<unsafe extern "C" fn(*mut c_void, *const c_char, size_t) -> ssize_t>,
    seek: Option<unsafe extern "C" fn(*mut c_void, *mut i64, c_int) -> c_int>,
    close: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

extern "C" {
    fn fopencookie(cookie: *mut c_void, mode: *const c_char, io: CookieIo) -> *mut libc::FILE;
}

unsafe extern "C" fn cookie_read(c: *mut c_void, buf: *mut c_char, n: size_t) -> ssize_t {
    // SAFETY: the cookie is the descriptor we stored.
    unsafe { interposed::read(c as usize as c_int, buf as *mut c_void, n) }
}
unsafe extern "C" fn cookie_write(c: *mut c_void, buf: *const c_char, n: size_t) -> ssize_t {
    // SAFETY: as above.
    unsafe { interposed::write(c as usize as c_int, buf as *const c_void, n) }
}
unsafe extern "C" fn cookie_seek(c: *mut c_void, off: *mut i64, whence: c_int) -> c_int {
    // SAFETY: as above; off is glibc's in/out offset.
    let r = unsafe { interposed::lseek(c as usize as c_int, *off, whence) };
    if r < 0 {
        return -1;
    }
    // SAFETY: as above.
    unsafe { *off = r };
    0
}
unsafe extern "C" fn cookie_close(c: *mut c_void) -> c_int {
    let fd = c as usize as c_int;
    STREAMS.lock().retain(|(_, d)| *d != fd);
    // SAFETY: as above.
    unsafe { interposed::close(fd) }
}

/// Streams made by `stream_for`, with their descriptors (fileno of a cookie stream is -1 in
/// glibc; programs such as sort fstat it).
pub(super) static STREAMS: Mutex<Vec<(usize, c_int)>> = Mutex::new(Vec::new());

/// A stream over descriptor `fd` (a `FILE *`), or None with errno set.
pub(super) fn stream_for(fd: c_int, mode: &CStr) -> Option<Handle> {
    let io = CookieIo {
        read: Some(cookie_read),
        write: Some(cookie_write),
        seek: Some(cookie_seek),
        close: Some(cookie_close),
    };
    // SAFETY: the cookie is a descriptor number; glibc calls our functions with it.
    let f = unsafe { fopencookie(fd as usize as *mut c_void, mode.as_ptr(), io) };
    if f.is_null() {
        return None;
    }
    STREAMS.lock().push((f as usize, fd));
    Some(Handle(f as usize))
}

/// The descriptor of a stream made here.
pub(super) fn stream_fd(f: usize) -> Option<c_int> {
    STREAMS.lock().iter().find(|(p, _)| *p == f).map(|(_, fd)| *fd)
}

/// fopen of HashFS file `p`.
pub(super) fn open(p: &Path, mode: &CStr) -> Result<Handle, c_int> {
    let flags = hashfs_interpose::entry::compose::mode_flags(mode.to_bytes()).ok_or(libc::EINVAL)?;
    stream_on(fd::do_open(p, flags, 0o666)?, mode)
}

/// [`open`] of the kernel's link to the descriptor `of` is open on (`path.rs`
/// `descriptor_link`): a new open of its file.
pub(super) fn reopen(of: &OpenFile, mode: &CStr) -> Result<Handle, c_int> {
    let flags = hashfs_interpose::entry::compose::mode_flags(mode.to_bytes()).ok_or(libc::EINVAL)?;
    stream_on(fd::reopen(of, flags, 0o666).unwrap_or(Err(libc::ELOOP))?, mode)
}

/// A stream on the shim's descriptor `fd`, which is closed if none can be made.
fn stream_on(fd: c_int, mode: &CStr) -> Result<Handle, c_int> {
    stream_for(fd, mode).ok_or_else(|| {
        let e = hashfs_interpose::errno();
        fd::close_own(fd);
        e
    })
}
