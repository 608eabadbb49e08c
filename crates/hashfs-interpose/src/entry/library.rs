//! `dlopen` of a shared library that is the backend's (a compiled Python extension in a
//! virtual environment in the image, a plugin built there): the dynamic loader opens and
//! maps with its own system calls, which no preload sees, so the backend gives a copy the
//! kernel can open ([`crate::Process::library`]) and the loader is asked for that instead.
//!
//! A name with a slash is the backend's to judge; a bare name only when a directory of
//! `LD_LIBRARY_PATH` that is the backend's holds it first ([`along_library_path`]; the
//! variable as it is now, where the loader reads it at start). Else a bare name is
//! searched for by the loader along the *caller's* RUNPATH, which it finds from the return
//! address of `dlopen`. So the exported `dlopen` is a naked function that jumps to libc's
//! (or calls nothing of libc's at all) with the caller's return address left in place
//! ([`crate::export!`]); [`dlopen_target`] only chooses the path and the target.
//!
//! Libraries the backend's library needs that are the backend's too (found by its RUNPATH
//! or RPATH, `$ORIGIN` read as the library's own directory, or by `LD_LIBRARY_PATH`) are
//! loaded first, deepest first, so that the loader finds each by its `DT_SONAME` among the
//! loaded ones rather than looking for it on disk. The interposer's own hold on each is let
//! go at the next `dlopen` (the library holds them by then, if it loaded): a library closed
//! and loaded again after one of them was rebuilt then gets the new one.

use crate::call::c_str;
use crate::{Backend, Errno};
use libc::{c_char, c_int, c_void};
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Handles of the dependencies the last `dlopen`s loaded first (0: a free slot). Slots of
/// their own, without a lock, so that a `fork` while another thread is here leaves the
/// child nothing locked; a hold with no free slot left is kept (a reference the library
/// never loses).
static HELD: [AtomicUsize; 64] = [const { AtomicUsize::new(0) }; 64];

/// A library of the backend's, ready for the loader ([`crate::Process::library`]).
pub struct Library {
    /// The path the loader is to open: the backend keeps it (and what it names) for the
    /// rest of the process, since the loader matches later requests against it by name.
    pub path: &'static CStr,
    /// Copies of the libraries it needs that are the backend's, in the order to load them.
    pub first: Vec<&'static CStr>,
}

/// Where the naked `dlopen` goes next: the function (libc's) and the path argument for it.
/// Two words, returned in `rax` and `rdx` (x86-64 System V).
#[repr(C)]
pub struct Target {
    pub path: *const c_char,
    pub function: *const c_void,
}

/// What `dlopen(file, mode)` becomes: libc's `dlopen` of `file`, or of the backend's copy
/// when `file` names one of its libraries (its dependencies loaded first). A library the
/// backend cannot copy is said on standard error and left to the loader, whose error
/// (`dlerror`) then tells the caller (as it does alone for a file that is not there).
///
/// # Safety
/// dlopen's contract: `file` is null or a NUL-terminated string.
pub unsafe fn dlopen_target<B: Backend>(file: *const c_char, mode: c_int) -> Target {
    let real = crate::real!(dlopen: fn(*const c_char, c_int) -> *mut c_void);
    let keep = Target { path: file, function: real as *const c_void };
    for slot in &HELD {
        let h = slot.swap(0, Ordering::AcqRel);
        if h != 0 {
            // SAFETY: a handle our own dlopen returned, taken from its slot once.
            unsafe { libc::dlclose(h as *mut c_void) };
        }
    }
    // SAFETY: the caller's contract.
    let Some(p) = (unsafe { c_str(file) }) else { return keep };
    let chosen = if p.to_bytes().contains(&b'/') {
        crate::guarded(|| B::library(p)).flatten()
    } else {
        along_library_path::<B>(p)
    };
    let Some(chosen) = chosen else { return keep };
    match chosen {
        Ok(lib) => {
            // Outside the guard: each library's constructors are the program's code.
            let bind = mode & (libc::RTLD_LAZY | libc::RTLD_NOW);
            for dep in lib.first {
                // SAFETY: a NUL-terminated path. A dependency that fails to load makes the
                // library's own load fail with the loader's message.
                let h = unsafe { real(dep.as_ptr(), bind | libc::RTLD_LOCAL) };
                if !h.is_null() {
                    let _ = HELD
                        .iter()
                        .find(|s| s.compare_exchange(0, h as usize, Ordering::AcqRel, Ordering::Relaxed).is_ok());
                }
            }
            Target { path: lib.path.as_ptr(), function: real as *const c_void }
        }
        // Nothing there: the loader's own error says so.
        Err(Errno(libc::ENOENT | libc::ENOTDIR)) => keep,
        Err(Errno(e)) => {
            let why = std::io::Error::from_raw_os_error(e);
            eprintln!(
                "hashfs shim: dlopen {}: the library in the image could not be copied for the loader: {why}",
                p.to_string_lossy()
            );
            keep
        }
    }
}

/// A bare name's library when a directory of `LD_LIBRARY_PATH` that is the backend's
/// holds it before any of the kernel's does (the loader searches that variable in order;
/// it finds a kernel directory's file itself): Some(the backend's copy, or why there is
/// none); None when the loader is to search as it does. (Only the variable: a caller's
/// `DT_RPATH`, which the loader searches before it, is not read here.)
fn along_library_path<B: Backend>(name: &CStr) -> Option<Result<Library, Errno>> {
    // SAFETY: a NUL-terminated name; getenv returns null or a NUL-terminated string.
    let v = unsafe { libc::getenv(c"LD_LIBRARY_PATH".as_ptr()) };
    // SAFETY: as above.
    let dirs = unsafe { c_str(v) }?.to_bytes();
    for dir in dirs.split(|&b| b == b':' || b == b';') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let Ok(candidate) = std::ffi::CString::new([dir, b"/", name.to_bytes()].concat()) else { continue };
        if super::starts_in_backend::<B>(&candidate) {
            match crate::guarded(|| B::library(&candidate)).flatten() {
                Some(Err(Errno(libc::ENOENT | libc::ENOTDIR))) | None => continue,
                found => return found,
            }
        }
        let path = candidate.as_ptr();
        let mode = libc::F_OK;
        if crate::forward!(access(path, mode): fn(*const c_char, c_int) -> c_int) == 0 {
            return None; // the kernel's, first: the loader's to find
        }
    }
    None
}
