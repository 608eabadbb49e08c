//! `daemon`, `forkpty` and `login_tty`: glibc forks, changes directory and moves
//! descriptors inside them with its own internal calls, which no preload sees. A `daemon`
//! child was a fork the backend never prepared (tmux's server: its socket's bind in the
//! image failed with EIO, found 2026-12-07), its `chdir("/")` left the backend's working
//! directory where it was, and the `/dev/null` it puts on the standard descriptors did not
//! replace what the backend served there. So each is written here as glibc writes it, from
//! this interposer's own `fork`, `chdir`, `open`, `dup2` and `close` (the backend's where
//! the paths and descriptors are its own, libc's else).

use super::{fd, process};
use crate::{forward, Backend};
use libc::{c_char, c_int};

/// `daemon(3)`: the process goes on in a child of a new session, its parent gone with
/// `_exit(0)`; unless `nochdir`, in `/`; unless `noclose`, with `/dev/null` (checked to be
/// that device, ENODEV else, as glibc) as its standard input, output and error.
pub unsafe fn daemon<B: Backend>(nochdir: c_int, noclose: c_int) -> c_int {
    // SAFETY: fork's and _exit's contracts (none).
    match unsafe { process::fork::<B>() } {
        -1 => return -1,
        0 => {}
        // SAFETY: as above; the parent leaves the image as at any `_exit`.
        _ => unsafe { process::exit_now::<B>(0) },
    }
    if forward!(setsid(): fn() -> libc::pid_t) == -1 {
        return -1;
    }
    if nochdir == 0 {
        // SAFETY: a NUL-terminated path. (glibc ignores a failure here.)
        unsafe { process::chdir::<B>(c"/".as_ptr()) };
    }
    if noclose == 0 {
        // SAFETY: a NUL-terminated path; the descriptor is ours to use and close.
        let null = unsafe { fd::open::<B>(c"/dev/null".as_ptr(), libc::O_RDWR, 0) };
        if null < 0 {
            return -1;
        }
        // SAFETY: a zeroed stat is a valid value for fstat to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let st_at = &raw mut st;
        let is_null = forward!(fstat(null, st_at): fn(c_int, *mut libc::stat) -> c_int) == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFCHR
            && st.st_rdev == libc::makedev(1, 3);
        if !is_null {
            // SAFETY: our descriptor.
            unsafe { fd::close::<B>(null) };
            crate::set_errno(libc::ENODEV);
            return -1;
        }
        // SAFETY: our descriptor, and the standard numbers, which the caller gives up.
        unsafe { on_standard::<B>(null) };
    }
    0
}

/// `login_tty(3)`: `tty` becomes the controlling terminal of a new session and the
/// process's standard input, output and error.
pub unsafe fn login_tty<B: Backend>(tty: c_int) -> c_int {
    forward!(setsid(): fn() -> libc::pid_t);
    let (request, steal) = (libc::TIOCSCTTY, std::ptr::null_mut::<libc::c_void>()); // 0: not from another session
    if forward!(ioctl(tty, request, steal): fn(c_int, libc::c_ulong, *mut libc::c_void) -> c_int) == -1 {
        return -1;
    }
    // SAFETY: the caller's descriptor, given up with the standard numbers.
    unsafe { on_standard::<B>(tty) };
    0
}

/// `forkpty(3)`: a child whose controlling terminal and standard descriptors are a new
/// pseudo-terminal, whose other end the parent gets in `master`.
pub unsafe fn forkpty<B: Backend>(
    master: *mut c_int,
    name: *mut c_char,
    termp: *const libc::termios,
    winp: *const libc::winsize,
) -> libc::pid_t {
    let (mut ptmx, mut tty) = (-1, -1);
    let (ptmx_at, tty_at) = (&raw mut ptmx, &raw mut tty);
    if forward!(openpty(ptmx_at, tty_at, name, termp, winp): fn(*mut c_int, *mut c_int, *mut c_char, *const libc::termios, *const libc::winsize) -> c_int)
        == -1
    {
        return -1;
    }
    // SAFETY: fork's contract (none); the two descriptors are ours.
    match unsafe { process::fork::<B>() } {
        -1 => {
            // SAFETY: as above.
            unsafe {
                fd::close::<B>(ptmx);
                fd::close::<B>(tty);
            }
            -1
        }
        0 => {
            // SAFETY: as above; `_exit` as glibc's child when the terminal cannot be its own.
            unsafe {
                fd::close::<B>(ptmx);
                if login_tty::<B>(tty) != 0 {
                    process::exit_now::<B>(1);
                }
            }
            0
        }
        pid => {
            // SAFETY: `master` is the caller's (forkpty's contract); `tty` is ours.
            unsafe {
                *master = ptmx;
                fd::close::<B>(tty);
            }
            pid
        }
    }
}

/// `from` onto descriptors 0, 1 and 2, then closed unless it is one of them.
///
/// # Safety
/// `from` is the caller's to give up, and so are the standard descriptors.
unsafe fn on_standard<B: Backend>(from: c_int) {
    // SAFETY: the caller's contract.
    unsafe {
        for to in 0..=2 {
            fd::dup2::<B>(from, to);
        }
        if from > 2 {
            fd::close::<B>(from);
        }
    }
}
