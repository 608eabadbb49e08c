//! The temporary-name makers: `mkstemp` and its kin, and `mkdtemp`. glibc makes the file
//! (or directory) with its internal open, which no preload sees, so a template inside a
//! backend's tree reached the kernel (git makes each object and index this way, and
//! failed with ENOENT). Here the name is made and the file created through the backend,
//! exclusively, until a name is free; a template the backend does not take goes to libc
//! unchanged.

use crate::call::{serve, CResult, Next};
use crate::{forward, Backend, Errno};
use libc::{c_char, c_int, c_uint, mode_t};
use std::ffi::CStr;

/// Names tried before EEXIST is given up on.
const TRIES: u32 = 10_000;

const LETTERS: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// The template's six `X`s before its `suffix` last bytes, or None (libc's EINVAL).
///
/// # Safety
/// `template` is null or a writable NUL-terminated string that nothing else uses meanwhile.
unsafe fn xs<'a>(template: *mut c_char, suffix: c_int) -> Option<&'a mut [u8]> {
    if template.is_null() {
        return None;
    }
    // SAFETY: the contract: a NUL-terminated string, writable for its length.
    let all = unsafe { std::slice::from_raw_parts_mut(template.cast::<u8>(), libc::strlen(template)) };
    let end = all.len().checked_sub(usize::try_from(suffix).ok()?)?;
    let start = end.checked_sub(6)?;
    let x = &mut all[start..end];
    (x == b"XXXXXX").then_some(x)
}

/// Six letters of the 62 that names use, from the state `seed` (xorshift).
fn fill(x: &mut [u8], seed: &mut u64) {
    for c in x.iter_mut() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *c = LETTERS[(*seed % 62) as usize];
    }
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    // SAFETY: getpid has no preconditions.
    (t ^ (u64::from(unsafe { libc::getpid() } as u32) << 32)) | 1
}

/// Makes a name from `template` and asks the backend to create it (`create`), again while
/// the name exists. None: the backend does not take the template (it is restored for
/// libc).
///
/// # Safety
/// As [`xs`].
unsafe fn make<T>(
    template: *mut c_char,
    suffix: c_int,
    create: impl Fn(&CStr) -> Option<Result<T, Errno>>,
) -> Option<Result<T, Errno>> {
    // SAFETY: the caller's contract.
    let x = unsafe { xs(template, suffix) }?;
    let mut state = seed();
    for _ in 0..TRIES {
        fill(x, &mut state);
        // SAFETY: still the caller's NUL-terminated string (six of its bytes replaced).
        let path = unsafe { CStr::from_ptr(template) };
        match create(path) {
            None => {
                x.copy_from_slice(b"XXXXXX");
                return None;
            }
            Some(Err(e)) if e.0 == libc::EEXIST => continue,
            done => return done,
        }
    }
    Some(Err(Errno(libc::EEXIST)))
}

pub unsafe fn mkostemps<B: Backend>(template: *mut c_char, suffix: c_int, flags: c_int) -> c_int {
    let how = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | (flags & !libc::O_ACCMODE);
    let create = |path: &CStr| {
        let raw = |fl: c_int| {
            let (p, m): (*const c_char, c_uint) = (path.as_ptr(), 0o600);
            c_int::from_c(forward!(open(p, fl, m): fn(*const c_char, c_int, c_uint) -> c_int))
        };
        serve(|| B::open(libc::AT_FDCWD, path, how, 0o600, Next(&raw)))
    };
    // SAFETY: mkostemps's contract is `make`'s.
    match unsafe { make(template, suffix, create) } {
        Some(r) => c_int::to_c(r),
        None => forward!(mkostemps(template, suffix, flags): fn(*mut c_char, c_int, c_int) -> c_int),
    }
}

pub unsafe fn mkstemp<B: Backend>(template: *mut c_char) -> c_int {
    // SAFETY: mkstemp is mkostemps with no suffix and no flags.
    unsafe { mkostemps::<B>(template, 0, 0) }
}

pub unsafe fn mkostemp<B: Backend>(template: *mut c_char, flags: c_int) -> c_int {
    // SAFETY: as mkstemp, with flags.
    unsafe { mkostemps::<B>(template, 0, flags) }
}

pub unsafe fn mkstemps<B: Backend>(template: *mut c_char, suffix: c_int) -> c_int {
    // SAFETY: as mkstemp, with a suffix.
    unsafe { mkostemps::<B>(template, suffix, 0) }
}

pub unsafe fn mkdtemp<B: Backend>(template: *mut c_char) -> *mut c_char {
    let create = |path: &CStr| {
        let raw = |()| {
            let (p, m): (*const c_char, mode_t) = (path.as_ptr(), 0o700);
            <()>::from_c(forward!(mkdir(p, m): fn(*const c_char, mode_t) -> c_int))
        };
        serve(|| B::mkdir_at(libc::AT_FDCWD, path, 0o700, Next(&raw)))
    };
    // SAFETY: mkdtemp's contract is `make`'s.
    match unsafe { make(template, 0, create) } {
        Some(Ok(())) => template,
        Some(Err(e)) => {
            crate::set_errno(e.0);
            std::ptr::null_mut()
        }
        None => forward!(mkdtemp(template): fn(*mut c_char) -> *mut c_char),
    }
}
