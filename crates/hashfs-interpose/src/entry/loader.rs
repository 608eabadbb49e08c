//! Programs that load another program by its path with system calls of their own: the
//! dynamic loader run as a command (`ld.so PROG`, which `ldd` runs) and Valgrind's tools
//! (the `valgrind` launcher execs one with the program's path). Neither sees the backend's
//! files, so when the program they are given is one the backend serves, its argument
//! becomes the `/proc/self/fd/N` path of the program's copy (kept open across the exec),
//! and a program that needs libraries of the backend's when it starts gets them as a
//! program run directly does (`linked.rs`). The dynamic loader also gets `--argv0` with the
//! path as given, so that the program sees its own name.

use super::program::{fd_path, ArgList, Argv, ExecImage, Run};
use crate::call::c_str;
use crate::{forward, Backend};
use libc::c_int;
use std::ffi::CStr;

/// Which loader `path` is, by its file name.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Loader {
    /// glibc's dynamic loader (`ld-linux-x86-64.so.2`, `ld.so`, `ld64.so.2`...).
    Dynamic,
    /// A Valgrind tool (`/usr/libexec/valgrind/memcheck-amd64-linux`).
    Valgrind,
}

pub(crate) fn loader_of(path: &[u8]) -> Option<Loader> {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    if name.starts_with(b"ld-linux") || name == b"ld.so" || name.starts_with(b"ld64.so") {
        return Some(Loader::Dynamic);
    }
    let in_valgrind = path.windows(10).any(|w| w == b"/valgrind/");
    (in_valgrind && name.ends_with(b"-linux")).then_some(Loader::Valgrind)
}

/// The dynamic loader's options that take the next argument as their value.
const WITH_VALUE: [&[u8]; 7] = [
    b"--library-path",
    b"--inhibit-rpath",
    b"--audit",
    b"--preload",
    b"--argv0",
    b"--glibc-hwcaps-prepend",
    b"--glibc-hwcaps-mask",
];

/// The index in `args` (argv[0] first) of the program a loader is given: the first
/// argument that is not an option (nor an option's value); None if there is none.
pub(crate) fn program_index(loader: Loader, args: &[&[u8]]) -> Option<usize> {
    let mut i = 1;
    while i < args.len() {
        let a = args[i];
        if a == b"--" {
            return (i + 1 < args.len()).then_some(i + 1);
        }
        if !a.starts_with(b"-") {
            return Some(i);
        }
        i += if loader == Loader::Dynamic && WITH_VALUE.contains(&a) { 2 } else { 1 };
    }
    None
}

/// Runs `run` with the loader at `path` given the copy of a program the backend serves
/// in place of its path, when `path` is a loader and its program is the backend's; None
/// otherwise (the caller runs the call as it is).
///
/// # Safety
/// exec's contract for `argv` and `envp`.
pub(super) unsafe fn run_loader<B: Backend>(
    path: &CStr,
    argv: Argv,
    envp: Argv,
    library_path: Option<&CStr>,
    spawn: bool,
    run: &mut dyn FnMut(Run<'_>, Argv) -> c_int,
) -> Option<Result<c_int, c_int>> {
    let loader = loader_of(path.to_bytes())?;
    if argv.is_null() {
        return None;
    }
    let mut args: Vec<&CStr> = Vec::new();
    // SAFETY: argv is a null-terminated array of NUL-terminated strings (exec's contract).
    unsafe {
        let mut i = 0;
        while !(*argv.add(i)).is_null() {
            args.push(c_str(*argv.add(i))?);
            i += 1;
        }
    }
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.to_bytes()).collect();
    let at = program_index(loader, &bytes)?;
    let (fd, libs) = match crate::guarded(|| B::exec_image(args[at], library_path)).flatten()? {
        Ok(ExecImage::Copy(fd)) => (fd, None),
        Ok(ExecImage::Linked(fd, libs)) => (fd, Some(libs)),
        Ok(ExecImage::Script { .. }) | Ok(ExecImage::Elsewhere(_)) => return None,
        Err(e) => return Some(Err(e.0)),
    };
    // The copy is the loader's to open by its /proc path: kept across the exec.
    let (cmd, keep) = (libc::F_SETFD, 0);
    forward!(fcntl(fd, cmd, keep): fn(c_int, c_int, c_int) -> c_int);
    let by_fd = fd_path(fd);
    let mut list = ArgList::new();
    list.push(args[0].as_ptr());
    let names_argv0 = loader == Loader::Dynamic && bytes[1..at].contains(&&b"--argv0"[..]);
    if loader == Loader::Dynamic && !names_argv0 {
        list.push(c"--argv0".as_ptr());
        list.push(args[at].as_ptr());
    }
    for (i, a) in args.iter().enumerate().skip(1) {
        list.push(if i == at { by_fd.as_ptr() } else { a.as_ptr() });
    }
    list.push(std::ptr::null());
    let mut go = |env| run(Run::Path(path, env), list.as_ptr());
    let r = match libs {
        // SAFETY: the caller's contract for envp.
        Some(libs) => unsafe { super::linked::run_with(libs, envp, spawn, |env| go(Some(env))) },
        None => go(None),
    };
    let e = crate::errno();
    forward!(close(fd): fn(c_int) -> c_int);
    crate::set_errno(e);
    Some(Ok(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaders_are_known_by_name() {
        assert_eq!(loader_of(b"/lib64/ld-linux-x86-64.so.2"), Some(Loader::Dynamic));
        assert_eq!(loader_of(b"/usr/lib/ld.so"), Some(Loader::Dynamic));
        assert_eq!(loader_of(b"/usr/libexec/valgrind/memcheck-amd64-linux"), Some(Loader::Valgrind));
        assert_eq!(loader_of(b"/usr/bin/ld"), None);
        assert_eq!(loader_of(b"/usr/bin/x86_64-linux"), None);
    }

    #[test]
    fn the_program_is_the_first_argument_past_the_options() {
        let d = |a: &[&[u8]]| program_index(Loader::Dynamic, a);
        assert_eq!(d(&[b"ld.so", b"--list", b"/pm/p", b"x"]), Some(2));
        assert_eq!(d(&[b"ld.so", b"--library-path", b"/pm/lib", b"/pm/p"]), Some(3));
        assert_eq!(d(&[b"ld.so", b"--argv0", b"n", b"--", b"-odd"]), Some(4));
        assert_eq!(d(&[b"ld.so", b"--verify"]), None);
        let v = |a: &[&[u8]]| program_index(Loader::Valgrind, a);
        assert_eq!(v(&[b"memcheck", b"-q", b"--leak-check=full", b"/pm/p", b"-x"]), Some(3));
    }
}
