//! The `PATH` search of `execvp`, `execvpe`, `execlp` and `posix_spawnp` when a directory
//! of the search path is the backend's. libc searches with its own `execve`, which no
//! preload sees: a program in the backend's files (a tool a build made, a virtual
//! environment's `python`) would not be found, or one of the same name further down the
//! path would run instead (`#!/usr/bin/env python3` with a virtual environment's `bin`
//! first in `PATH` ran the system's python). So when any directory of the path is the
//! backend's, the search is made here, as glibc makes it: each directory in order (an
//! empty one the working directory), the name joined; an error that says the file is not
//! there (ENOENT, ENOTDIR, ESTALE, ENODEV, ETIMEDOUT) or not permitted (EACCES,
//! remembered) goes on to the next, any other ends the search; a file found that is no
//! program the kernel recognizes (ENOEXEC) runs by `/bin/sh` (exec only: glibc's
//! `posix_spawnp` no longer does that). Otherwise libc searches, as before.
//!
//! Nothing here allocates (a `vfork` child shares its parent's heap): the candidate path
//! is built on the stack.

use super::program::{execve, posix_spawn, ArgList, Argv, SpawnActions, SpawnAttr};
use crate::{forward, Backend};
use libc::{c_char, c_int};
use std::ffi::CStr;

/// glibc's search path when `PATH` is unset (its `confstr(_CS_PATH)`).
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";
const NAME_MAX: usize = 255;
const PATH_MAX: usize = 4096;

/// A directory of the search path with the name joined, on the stack.
struct Candidate {
    buf: [u8; PATH_MAX + NAME_MAX + 2],
}

impl Candidate {
    /// `dir/file` (an empty `dir`: `file`, in the working directory), or None when it
    /// does not fit (glibc skips such a directory).
    fn join(&mut self, dir: &[u8], file: &[u8]) -> Option<&CStr> {
        let sep = usize::from(!dir.is_empty());
        let len = dir.len() + sep + file.len();
        if dir.len() >= PATH_MAX || len + 1 > self.buf.len() {
            return None;
        }
        self.buf[..dir.len()].copy_from_slice(dir);
        self.buf[dir.len()] = b'/';
        self.buf[dir.len() + sep..len].copy_from_slice(file);
        self.buf[len] = 0;
        CStr::from_bytes_with_nul(&self.buf[..=len]).ok()
    }
}

/// What a search gives: the file to run was searched for and this is the outcome (a
/// result of the call, or the error number), or libc should search as it does.
enum Searched {
    Done(c_int),
    Libc,
}

/// The search path: `PATH` of the calling process (glibc's rule for `execvpe` too), or the
/// default.
fn search_path() -> &'static [u8] {
    // SAFETY: getenv returns null or a NUL-terminated string of the environment, which
    // the process does not change under an exec or a spawn.
    let p = unsafe { libc::getenv(c"PATH".as_ptr()) };
    if p.is_null() {
        DEFAULT_PATH
    } else {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(p) }.to_bytes()
    }
}

/// Whether the search ends at error `e` (false: it goes on to the next directory).
fn ends_search(e: c_int) -> bool {
    !matches!(e, libc::EACCES | libc::ENOENT | libc::ESTALE | libc::ENOTDIR | libc::ENODEV | libc::ETIMEDOUT)
}

/// Runs `each` on `file` joined to each directory of the search path, in order, until it
/// returns an error that ends the search or a success; None when some directory is the
/// backend's is false (libc searches). The error of the whole search is EACCES if any
/// directory gave it, else the last.
fn search<B: Backend>(file: &CStr, mut each: impl FnMut(&CStr) -> Result<c_int, c_int>) -> Searched {
    let (file, path) = (file.to_bytes(), search_path());
    if file.len() > NAME_MAX {
        return Searched::Done(-libc::ENAMETOOLONG);
    }
    let mut cand = Candidate { buf: [0; PATH_MAX + NAME_MAX + 2] };
    let served = path.split(|&b| b == b':').any(|dir| cand.join(dir, file).is_some_and(super::serves::<B>));
    if !served {
        return Searched::Libc;
    }
    let (mut eacces, mut last) = (false, libc::ENOENT);
    for dir in path.split(|&b| b == b':') {
        let Some(c) = cand.join(dir, file) else { continue };
        match each(c) {
            Ok(r) => return Searched::Done(r),
            Err(e) if ends_search(e) => return Searched::Done(-e),
            Err(e) => {
                eacces |= e == libc::EACCES;
                last = e;
            }
        }
    }
    Searched::Done(-if eacces { libc::EACCES } else { last })
}

/// `execvp` and `execvpe` of a name without a slash (`envp`: the environment to pass):
/// None when libc is to search.
///
/// # Safety
/// execvpe's contract for `file`, `argv` and `envp`.
pub(super) unsafe fn exec_searched<B: Backend>(file: &CStr, argv: Argv, envp: Argv) -> Option<c_int> {
    let each = |c: &CStr| {
        // SAFETY: the caller's contract; `c` is NUL-terminated and alive across the call.
        unsafe { execve::<B>(c.as_ptr(), argv, envp) }; // returns only when it failed
        let mut e = crate::errno();
        if e == libc::ENOEXEC {
            // SAFETY: as above.
            unsafe { exec_by_shell::<B>(c, argv, envp) };
            e = crate::errno();
        }
        Err(e)
    };
    match search::<B>(file, each) {
        Searched::Libc => None,
        Searched::Done(r) => Some(crate::fail(-r)),
    }
}

/// A file the kernel does not recognize as a program runs by `/bin/sh` (glibc's
/// `execvp` rule): `/bin/sh path argv[1..]`. Returns only when that exec failed.
///
/// # Safety
/// exec's contract for `argv` and `envp`.
pub(super) unsafe fn exec_by_shell<B: Backend>(path: &CStr, argv: Argv, envp: Argv) {
    let mut list = ArgList::new();
    list.push(c"/bin/sh".as_ptr());
    list.push(path.as_ptr());
    // SAFETY: exec's contract: argv is null or null-terminated.
    unsafe { list.push_after_first(argv) };
    let args = list.as_ptr();
    // SAFETY: args is null-terminated, its strings alive across the call.
    unsafe { execve::<B>(c"/bin/sh".as_ptr(), args, envp) };
}

/// `posix_spawnp` of a name without a slash: the result (0 or an error number), or None
/// when libc is to search. A candidate of the backend's is spawned if the backend finds a
/// program there; one of the kernel's, if it is a regular file this process may execute
/// (the child's exec would fail otherwise, and glibc's child go on searching).
///
/// # Safety
/// posix_spawnp's contract for every argument.
pub(super) unsafe fn spawn_searched<B: Backend>(
    pid: *mut libc::pid_t,
    file: &CStr,
    actions: SpawnActions,
    attr: SpawnAttr,
    argv: Argv,
    envp: Argv,
) -> Option<c_int> {
    let each = |c: &CStr| {
        if !super::serves::<B>(c) {
            // SAFETY: a zeroed stat is a valid buffer; `c` is NUL-terminated.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            let p = c.as_ptr();
            let sp = &mut st as *mut libc::stat;
            if forward!(stat(p, sp): fn(*const c_char, *mut libc::stat) -> c_int) != 0 {
                return Err(crate::errno());
            }
            let x = libc::X_OK;
            if st.st_mode & libc::S_IFMT != libc::S_IFREG
                || forward!(access(p, x): fn(*const c_char, c_int) -> c_int) != 0
            {
                return Err(libc::EACCES);
            }
        }
        // SAFETY: the caller's contract; `c` is NUL-terminated and alive across the call.
        match unsafe { posix_spawn::<B>(pid, c.as_ptr(), actions, attr, argv, envp) } {
            0 => Ok(0),
            e => Err(e),
        }
    };
    match search::<B>(file, each) {
        Searched::Libc => None,
        Searched::Done(r) => Some(-r),
    }
}

#[cfg(test)]
mod tests {
    use super::Candidate;

    #[test]
    fn a_candidate_joins_a_directory_and_a_name_as_glibc_does() {
        let mut c = Candidate { buf: [0; super::PATH_MAX + super::NAME_MAX + 2] };
        assert_eq!(c.join(b"/pm/bin", b"tool").unwrap().to_bytes(), b"/pm/bin/tool");
        assert_eq!(c.join(b"", b"tool").unwrap().to_bytes(), b"tool", "an empty directory: the working one");
        assert_eq!(c.join(b"/", b"tool").unwrap().to_bytes(), b"//tool");
        assert!(c.join(&[b'd'; super::PATH_MAX], b"tool").is_none());
    }
}
