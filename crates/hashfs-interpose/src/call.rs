//! A call's result on its way between C and a backend: libc's conventions (-1 and errno,
//! or an error number returned, as `posix_fallocate` does) turned into `Result` and back,
//! the forwarding of a call to libc, and the guard around a backend's part.

use crate::{errno, fail, guarded, in_shim};
use libc::{c_int, c_void, off_t, ssize_t};

/// An error a backend fails a call with: the `errno` value the program sees. Each
/// backend turns its own errors into one here (the library's `Error::errno`, an
/// `io::Error`'s raw value), so no caller reads a reason out of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub c_int);

/// What a path call does with a symbolic link as its last component: follows it (`stat`,
/// `getxattr`) or names the link itself (`lstat`, `lgetxattr`, `AT_SYMLINK_NOFOLLOW`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LastLink {
    Follow,
    NoFollow,
}

impl LastLink {
    /// The `*at` calls' rule: `AT_SYMLINK_NOFOLLOW` in `flags` names the link.
    pub fn of_at_flags(flags: c_int) -> LastLink {
        if flags & libc::AT_SYMLINK_NOFOLLOW != 0 {
            LastLink::NoFollow
        } else {
            LastLink::Follow
        }
    }
}

impl Errno {
    pub const BADF: Errno = Errno(libc::EBADF);
    pub const FAULT: Errno = Errno(libc::EFAULT);
    pub const INVAL: Errno = Errno(libc::EINVAL);
    pub const IO: Errno = Errno(libc::EIO);

    /// The error an `io::Error` carries (EIO when it carries none).
    pub fn of_io(e: &std::io::Error) -> Errno {
        Errno(e.raw_os_error().unwrap_or(libc::EIO))
    }

    /// This thread's errno as it is now (after a libc call that failed).
    pub fn last() -> Errno {
        Errno(errno())
    }
}

impl From<std::io::Error> for Errno {
    fn from(e: std::io::Error) -> Errno {
        Errno::of_io(&e)
    }
}

impl From<c_int> for Errno {
    fn from(e: c_int) -> Errno {
        Errno(e)
    }
}

/// A backend's answer for one call: `None` when the call is not its to serve (libc gets
/// it, unchanged), else the call's result.
pub type Served<T> = Option<Result<T, Errno>>;

/// libc's own definition of the call being served, with the caller's arguments: what a
/// backend runs when the call is (also) the kernel's, such as a stacked file that lives
/// in the lower file system, or a descriptor's kernel half. `A` is what a backend may
/// change before passing the call on (open's flags); `()` for most calls.
pub struct Next<'a, T, A = ()>(pub(crate) &'a dyn Fn(A) -> Result<T, Errno>);

impl<T> Next<'_, T> {
    pub fn call(&self) -> Result<T, Errno> {
        (self.0)(())
    }
}

impl<T, A> Next<'_, T, A> {
    /// The call, with `a` in place of the argument the call names (a plain value, such
    /// as open's flags: the contract the caller met for the rest still holds).
    pub fn call_with(&self, a: A) -> Result<T, Errno> {
        (self.0)(a)
    }
}

/// Runs a backend's part of a call with the per-thread guard set (its own calls into
/// libc pass straight on); `None` when the call came from inside a backend (the guard was
/// set already) or the backend passed it on.
pub fn serve<T>(f: impl FnOnce() -> Served<T>) -> Served<T> {
    if in_shim() {
        return None;
    }
    guarded(f).flatten()
}

/// libc's conventions for each kind of result, both ways.
pub trait CResult: Sized {
    type C;
    fn to_c(r: Result<Self, Errno>) -> Self::C;
    fn from_c(c: Self::C) -> Result<Self, Errno>;
}

impl CResult for usize {
    type C = ssize_t;
    fn to_c(r: Result<usize, Errno>) -> ssize_t {
        r.map_or_else(|e| fail(e.0), |n| n as ssize_t)
    }
    fn from_c(c: ssize_t) -> Result<usize, Errno> {
        if c < 0 {
            Err(Errno::last())
        } else {
            Ok(c as usize)
        }
    }
}

impl CResult for c_int {
    type C = c_int;
    fn to_c(r: Result<c_int, Errno>) -> c_int {
        r.unwrap_or_else(|e| fail(e.0))
    }
    fn from_c(c: c_int) -> Result<c_int, Errno> {
        if c < 0 {
            Err(Errno::last())
        } else {
            Ok(c)
        }
    }
}

impl CResult for () {
    type C = c_int;
    fn to_c(r: Result<(), Errno>) -> c_int {
        r.map_or_else(|e| fail(e.0), |()| 0)
    }
    fn from_c(c: c_int) -> Result<(), Errno> {
        if c < 0 {
            Err(Errno::last())
        } else {
            Ok(())
        }
    }
}

/// A file offset (lseek's result).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offset(pub off_t);

impl CResult for Offset {
    type C = off_t;
    fn to_c(r: Result<Offset, Errno>) -> off_t {
        r.map_or_else(|e| fail(e.0), |o| o.0)
    }
    fn from_c(c: off_t) -> Result<Offset, Errno> {
        if c < 0 {
            Err(Errno::last())
        } else {
            Ok(Offset(c))
        }
    }
}

/// A pointer a call returns (a `DIR *`, a `FILE *`, a `dirent *`): null on error, with
/// errno, except that readdir's null at the end of a stream is `Ok(Handle(0))`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle(pub usize);

impl CResult for Handle {
    type C = *mut c_void;
    fn to_c(r: Result<Handle, Errno>) -> *mut c_void {
        r.map_or_else(
            |e| {
                crate::set_errno(e.0);
                std::ptr::null_mut()
            },
            |h| h.0 as *mut c_void,
        )
    }
    fn from_c(c: *mut c_void) -> Result<Handle, Errno> {
        if c.is_null() {
            Err(Errno::last())
        } else {
            Ok(Handle(c as usize))
        }
    }
}

/// An address (mmap's result; MAP_FAILED on error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Address(pub usize);

impl CResult for Address {
    type C = *mut c_void;
    fn to_c(r: Result<Address, Errno>) -> *mut c_void {
        match r {
            Ok(a) => a.0 as *mut c_void,
            Err(e) => {
                crate::set_errno(e.0);
                libc::MAP_FAILED
            }
        }
    }
    fn from_c(c: *mut c_void) -> Result<Address, Errno> {
        if c == libc::MAP_FAILED {
            Err(Errno::last())
        } else {
            Ok(Address(c as usize))
        }
    }
}

/// The calls that return their error number instead of setting errno
/// (`posix_fallocate`, `posix_fadvise`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posix;

impl CResult for Posix {
    type C = c_int;
    fn to_c(r: Result<Posix, Errno>) -> c_int {
        r.map_or_else(|e| e.0, |_| 0)
    }
    fn from_c(c: c_int) -> Result<Posix, Errno> {
        if c == 0 {
            Ok(Posix)
        } else {
            Err(Errno(c))
        }
    }
}

/// The caller's buffer of `count` bytes as a slice (EFAULT for a null pointer with a
/// length, as the kernel says).
///
/// # Safety
/// libc's contract for the call: `buf`, when not null, is valid for `count` bytes.
pub(crate) unsafe fn bytes<'a>(buf: *const c_void, count: usize) -> Result<&'a [u8], Errno> {
    if count == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(Errno::FAULT);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(buf as *const u8, count) })
}

/// As [`bytes`], writable.
///
/// # Safety
/// As [`bytes`], and the buffer is writable.
pub(crate) unsafe fn bytes_mut<'a>(buf: *mut c_void, count: usize) -> Result<&'a mut [u8], Errno> {
    if count == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(Errno::FAULT);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, count) })
}

/// The caller's path, or None for a null pointer (the kernel then fails it, EFAULT) and for
/// one of PATH_MAX bytes or more with its NUL (the kernel fails it, ENAMETOOLONG, before
/// any lookup: the image's walk had said ENOENT).
///
/// # Safety
/// libc's contract for the call: `path`, when not null, is a NUL-terminated string.
pub(crate) unsafe fn c_str<'a>(path: *const libc::c_char) -> Option<&'a std::ffi::CStr> {
    // SAFETY: the caller's contract.
    (!path.is_null())
        .then(|| unsafe { std::ffi::CStr::from_ptr(path) })
        .filter(|p| p.to_bytes().len() < libc::PATH_MAX as usize)
}

/// The caller's iovec array: its buffers, one at a time.
pub struct IoVecs<'a> {
    iov: &'a [libc::iovec],
}

impl<'a> IoVecs<'a> {
    /// The array of `n` iovecs at `iov`; EINVAL for a count past `UIO_MAXIOV` or below 0,
    /// as the kernel says.
    ///
    /// # Safety
    /// libc's contract for the call: `iov` points to `n` iovecs, each describing a buffer
    /// valid (and for a read, writable) for its length, for the call's duration.
    pub(crate) unsafe fn new(iov: *const libc::iovec, n: c_int) -> Result<IoVecs<'a>, Errno> {
        if !(0..=libc::UIO_MAXIOV).contains(&n) {
            return Err(Errno::INVAL);
        }
        if n == 0 {
            return Ok(IoVecs { iov: &[] });
        }
        if iov.is_null() {
            return Err(Errno::FAULT);
        }
        // SAFETY: the caller's contract.
        Ok(IoVecs { iov: unsafe { std::slice::from_raw_parts(iov, n as usize) } })
    }

    pub fn count(&self) -> usize {
        self.iov.len()
    }

    /// The sum of the lengths; EINVAL past `isize::MAX`, as the kernel says.
    pub fn total(&self) -> Result<usize, Errno> {
        self.iov
            .iter()
            .try_fold(0usize, |t, v| t.checked_add(v.iov_len).filter(|&t| t <= isize::MAX as usize))
            .ok_or(Errno::INVAL)
    }

    /// Buffer `i`, to read from.
    pub fn buf(&self, i: usize) -> &[u8] {
        let v = self.iov[i];
        // SAFETY: IoVecs::new's contract (a null base with a length faults in the kernel
        // too; here it reads as empty).
        unsafe { bytes(v.iov_base, v.iov_len) }.unwrap_or(&[])
    }

    /// Buffer `i`, to fill (one at a time: iovecs may overlap).
    pub fn buf_mut(&mut self, i: usize) -> &mut [u8] {
        let v = self.iov[i];
        // SAFETY: as buf; the buffer is writable for a read call, and `&mut self` keeps
        // one such slice alive at a time.
        unsafe { bytes_mut(v.iov_base, v.iov_len) }.unwrap_or(&mut [])
    }

    /// Every buffer's bytes, in order, as one.
    pub fn gather(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.iov.iter().map(|v| v.iov_len).sum());
        for i in 0..self.count() {
            out.extend_from_slice(self.buf(i));
        }
        out
    }

    /// Spreads `data` over the buffers in order.
    pub fn scatter(&mut self, mut data: &[u8]) {
        for i in 0..self.count() {
            if data.is_empty() {
                break;
            }
            let b = self.buf_mut(i);
            let k = b.len().min(data.len());
            b[..k].copy_from_slice(&data[..k]);
            data = &data[k..];
        }
    }
}

/// libc's function `$name`, called with the caller's own arguments.
///
/// This is the forwarding every entry point ends in, and the one argument for its
/// soundness: the entry point has libc's name and type, so its caller met libc's
/// contract for the call; the arguments go on unchanged to libc's definition of the same
/// name and type (found by [`crate::real!`]), which therefore gets a call its contract
/// allows. Nothing the entry point did before changes them: the arguments are its own
/// parameters, by name.
#[macro_export]
macro_rules! forward {
    ($name:ident($($arg:ident),*) : fn($($ty:ty),*) -> $ret:ty) => {{
        $(let $arg = $arg;)*
        // SAFETY: forwarding, as the macro's documentation argues.
        unsafe { $crate::real!($name: fn($($ty),*) -> $ret)($($arg),*) }
    }};
}
