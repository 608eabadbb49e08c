//! A program of the backend's that needs libraries of the backend's when it starts (its
//! `DT_NEEDED`: a program built in the image against a library built there, found by its
//! RUNPATH or by `LD_LIBRARY_PATH`). The dynamic loader resolves those before any code of
//! ours runs in the new program, with its own system calls, so the backend gives, beside
//! the program's copy, a kernel directory of symbolic links named as the program and its
//! libraries name what they need, each to `/proc/self/fd/N`, a copy the exec keeps open
//! ([`Libraries`]). The exec's environment puts that directory first in `LD_LIBRARY_PATH`
//! (which the loader searches before a RUNPATH), and the new program's interposer, before
//! `main` ([`at_start`]), gives `LD_LIBRARY_PATH` back as it was, closes the copies and
//! removes the directory.

use super::program::Argv;
use libc::{c_char, c_int};
use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;

/// A program's libraries, ready for its exec ([`crate::entry::program::ExecImage::Linked`]).
pub struct Libraries {
    /// The kernel directory of links (made by the backend: `mkdtemp`).
    pub dir: CString,
    /// The copies' descriptors, without close-on-exec (the caller closes them after the
    /// exec or spawn).
    pub fds: Vec<c_int>,
}

/// The environment variable naming the directory to the next program.
const DIR_VAR: &str = "HASHFS_LIBRARIES";
/// `LD_LIBRARY_PATH` before: `=` and its value, or empty when there was none.
const WAS_VAR: &str = "HASHFS_LIBRARY_PATH_WAS";

/// The value of `LD_LIBRARY_PATH` in environment `envp`.
///
/// # Safety
/// `envp` is null or a null-terminated array of NUL-terminated strings.
pub(super) unsafe fn library_path<'a>(envp: Argv) -> Option<&'a CStr> {
    // SAFETY: the caller's contract.
    unsafe { entries(envp) }.find_map(|e| {
        e.to_bytes().strip_prefix(b"LD_LIBRARY_PATH=").map(|v| {
            // SAFETY: a suffix of a NUL-terminated string is one.
            unsafe { CStr::from_ptr(v.as_ptr().cast()) }
        })
    })
}

/// The entries of environment `envp`.
///
/// # Safety
/// As [`library_path`].
unsafe fn entries<'a>(envp: Argv) -> impl Iterator<Item = &'a CStr> {
    let mut i = 0;
    std::iter::from_fn(move || {
        if envp.is_null() {
            return None;
        }
        // SAFETY: the caller's contract: the array is null-terminated.
        let p = unsafe { *envp.add(i) };
        if p.is_null() {
            return None;
        }
        i += 1;
        // SAFETY: as above.
        Some(unsafe { CStr::from_ptr(p) })
    })
}

/// An environment built for an exec: its strings and the null-terminated array of them.
pub(super) struct Env {
    _strings: Vec<CString>,
    ptrs: Vec<*const c_char>,
}

impl Env {
    pub(super) fn as_ptr(&self) -> Argv {
        self.ptrs.as_ptr()
    }
}

/// `envp` with `libs`'s directory first in `LD_LIBRARY_PATH`, and what the next program
/// needs to give it back.
///
/// # Safety
/// As [`library_path`].
pub(super) unsafe fn env_with(envp: Argv, libs: &Libraries) -> Env {
    // SAFETY: the caller's contract.
    let was = unsafe { library_path(envp) };
    let mut strings = Vec::new();
    let dir = libs.dir.to_bytes();
    let path = match was {
        Some(w) if !w.is_empty() => [b"LD_LIBRARY_PATH=", dir, b":", w.to_bytes()].concat(),
        _ => [b"LD_LIBRARY_PATH=", dir].concat(),
    };
    strings.push(CString::new(path).expect("no NUL inside"));
    strings.push(CString::new([DIR_VAR.as_bytes(), b"=", dir].concat()).expect("no NUL inside"));
    let was_value = was.map_or(Vec::new(), |w| [b"=", w.to_bytes()].concat());
    strings.push(CString::new([WAS_VAR.as_bytes(), b"=", &was_value].concat()).expect("no NUL inside"));
    let ours = |e: &CStr| {
        let b = e.to_bytes();
        [&b"LD_LIBRARY_PATH="[..], DIR_VAR.as_bytes(), WAS_VAR.as_bytes()]
            .iter()
            .any(|n| b.starts_with(n) && (n.ends_with(b"=") || b.get(n.len()) == Some(&b'=')))
    };
    // SAFETY: the caller's contract.
    let kept: Vec<*const c_char> = unsafe { entries(envp) }.filter(|e| !ours(e)).map(CStr::as_ptr).collect();
    let mut ptrs: Vec<*const c_char> = strings.iter().map(|s| s.as_ptr()).collect();
    ptrs.extend(kept);
    ptrs.push(std::ptr::null());
    Env { _strings: strings, ptrs }
}

/// Runs `run` (an exec or a spawn) with `envp` given `libs`'s directory ([`env_with`]),
/// then lets `libs` go ([`release`]: kept for a spawned child that started); errno as
/// `run` left it.
///
/// # Safety
/// As [`library_path`].
pub(super) unsafe fn run_with(libs: Libraries, envp: Argv, spawn: bool, run: impl FnOnce(Argv) -> c_int) -> c_int {
    // SAFETY: the caller's contract.
    let env = unsafe { env_with(envp, &libs) };
    let r = run(env.as_ptr());
    let e = crate::errno();
    release(libs, spawn && r == 0);
    crate::set_errno(e);
    r
}

/// After an exec or a spawn of a program with `libs`: the caller's copies of the
/// descriptors go, and the directory too unless the new program started (its own
/// [`at_start`] removes it once the loader is done with it).
pub(super) fn release(libs: Libraries, started: bool) {
    for fd in libs.fds {
        crate::forward!(close(fd): fn(c_int) -> c_int);
    }
    if !started {
        remove_links(OsStr::from_bytes(libs.dir.to_bytes()), false);
    }
}

/// Removes the links in `dir` (closing the descriptors they name, in the new program,
/// `close_targets`) and `dir` once empty.
fn remove_links(dir: &OsStr, close_targets: bool) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else { continue };
        let Some(n) = target.to_str().and_then(|t| t.strip_prefix("/proc/self/fd/")) else { continue };
        let Ok(fd) = n.parse::<c_int>() else { continue };
        if close_targets {
            crate::forward!(close(fd): fn(c_int) -> c_int);
        }
        let _ = std::fs::remove_file(e.path());
    }
    let _ = std::fs::remove_dir(dir);
}

/// Before `main` of a program started with a directory of libraries: `LD_LIBRARY_PATH` as
/// the program that started it gave it, the copies closed, the directory gone. Nothing
/// when the environment names none.
pub fn at_start() {
    let Some(dir) = std::env::var_os(DIR_VAR) else { return };
    let was = std::env::var_os(WAS_VAR);
    // The constructors run before any thread of the program's is started.
    std::env::remove_var(DIR_VAR);
    std::env::remove_var(WAS_VAR);
    match was.as_ref().map(|w| w.as_bytes()).and_then(|w| w.strip_prefix(b"=")) {
        Some(w) => std::env::set_var("LD_LIBRARY_PATH", OsStr::from_bytes(w)),
        None => std::env::remove_var("LD_LIBRARY_PATH"),
    }
    remove_links(&dir, true);
}
