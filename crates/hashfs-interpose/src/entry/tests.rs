//! The entry points' routing, with a backend that claims descriptor 900 and the path
//! "/virtual": what it serves comes back in libc's conventions, what it passes on (or
//! does not claim, or is asked from inside the guard) reaches libc unchanged.

use super::*;
use crate::{
    errno, guarded, set_errno, Attributes, Backend, Copies, Data, Descriptors, Errno, FcntlArg, Mappings, Metadata,
    Names, Next, Process, Served, Streams, Xattrs,
};
use libc::c_int;
use std::ffi::CStr;

struct Test;

const OURS: c_int = 900;

impl Backend for Test {
    fn claims(fd: c_int) -> bool {
        fd == OURS
    }
}

impl Data for Test {
    fn read(_: c_int, buf: &mut [u8], _: Next<'_, usize>) -> Served<usize> {
        buf.fill(7);
        Some(Ok(buf.len()))
    }
    fn write(_: c_int, _: &[u8], _: Next<'_, usize>) -> Served<usize> {
        Some(Err(Errno(libc::ENOSPC)))
    }
    fn pread(_: c_int, _: &mut [u8], _: libc::off_t, next: Next<'_, usize>) -> Served<usize> {
        Some(next.call()) // descriptor 900 is not open in the kernel: EBADF
    }
}

impl Descriptors for Test {
    fn fcntl(_: c_int, cmd: c_int, arg: FcntlArg<'_>, _: Next<'_, c_int>) -> Served<c_int> {
        match (cmd, arg) {
            (libc::F_GETLK, FcntlArg::Lock(l)) => {
                l.l_type = libc::F_UNLCK as i16;
                Some(Ok(0))
            }
            _ => None,
        }
    }
}

impl Attributes for Test {
    fn stat_at(_: c_int, path: &CStr, _: c_int, _: Next<'_, libc::stat>) -> Served<libc::stat> {
        if path != c"/virtual" {
            return None;
        }
        // SAFETY: plain data.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        st.st_size = 42;
        Some(Ok(st))
    }
}

impl Names for Test {}
impl Metadata for Test {}
impl Copies for Test {}
impl Mappings for Test {}
impl Xattrs for Test {}
impl Streams for Test {}
impl Process for Test {}

#[test]
fn a_claimed_descriptor_is_served_in_libcs_conventions() {
    let mut buf = [0u8; 5];
    // SAFETY: buf holds 5 bytes.
    assert_eq!(unsafe { io::read::<Test>(OURS, buf.as_mut_ptr().cast(), 5) }, 5);
    assert_eq!(buf, [7; 5]);
    set_errno(0);
    // SAFETY: as above.
    assert_eq!(unsafe { io::write::<Test>(OURS, buf.as_ptr().cast(), 5) }, -1);
    assert_eq!(errno(), libc::ENOSPC);
    // A null buffer with a length is EFAULT, as the kernel says, before the backend.
    // SAFETY: the pointer is null; the entry checks it.
    assert_eq!(unsafe { io::read::<Test>(OURS, std::ptr::null_mut(), 5) }, -1);
    assert_eq!(errno(), libc::EFAULT);
}

#[test]
fn next_is_libcs_own_call() {
    let mut buf = [0u8; 5];
    set_errno(0);
    // SAFETY: buf holds 5 bytes.
    assert_eq!(unsafe { io::pread::<Test>(OURS, buf.as_mut_ptr().cast(), 5, 0) }, -1);
    assert_eq!(errno(), libc::EBADF);
}

#[test]
fn unclaimed_descriptors_and_the_backends_own_calls_reach_libc() {
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds holds two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: plain descriptor calls on the pipe, with valid buffers.
    unsafe {
        assert_eq!(libc::write(fds[1], b"abc".as_ptr().cast(), 3), 3);
        let mut buf = [0u8; 3];
        assert_eq!(io::read::<Test>(fds[0], buf.as_mut_ptr().cast(), 3), 3);
        assert_eq!(&buf, b"abc");
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    // Inside the guard (a backend's own call), even a claimed descriptor is libc's.
    let mut buf = [0u8; 5];
    set_errno(0);
    // SAFETY: buf holds 5 bytes.
    let r = guarded(|| unsafe { io::read::<Test>(OURS, buf.as_mut_ptr().cast(), 5) });
    assert_eq!((r, errno(), buf), (Some(-1), libc::EBADF, [0; 5]));
}

#[test]
fn a_filled_structure_is_written_to_the_callers_pointer() {
    // SAFETY: plain data.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and room for a stat.
    assert_eq!(unsafe { stat::stat::<Test>(c"/virtual".as_ptr(), &mut st) }, 0);
    assert_eq!(st.st_size, 42);
    // A path the backend passes on is the kernel's.
    // SAFETY: as above.
    assert_eq!(unsafe { stat::stat::<Test>(c"/".as_ptr(), &mut st) }, 0);
    assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFDIR);
}

#[test]
fn fcntl_lock_commands_get_their_struct() {
    // SAFETY: plain data.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = libc::F_WRLCK as i16;
    // SAFETY: F_GETLK's argument is a struct flock.
    assert_eq!(unsafe { fd::fcntl::<Test>(OURS, libc::F_GETLK, &mut l as *mut _ as libc::c_ulong) }, 0);
    assert_eq!(l.l_type, libc::F_UNLCK as i16);
}

#[test]
fn getcwds_buffer_rules() {
    let p = std::path::Path::new("/pm/a");
    let mut small = [0 as libc::c_char; 4];
    assert_eq!(process::give_path(p, small.as_mut_ptr(), small.len()), Err(Errno(libc::ERANGE)));
    assert_eq!(process::give_path(p, small.as_mut_ptr(), 0), Err(Errno::INVAL));
    let mut big = [0 as libc::c_char; 16];
    assert!(process::give_path(p, big.as_mut_ptr(), big.len()).is_ok());
    // SAFETY: give_path wrote a NUL-terminated string.
    assert_eq!(unsafe { CStr::from_ptr(big.as_ptr()) }, c"/pm/a");
    let h = process::give_path(p, std::ptr::null_mut(), 0).unwrap();
    // SAFETY: a malloc'd NUL-terminated copy, freed here.
    unsafe {
        assert_eq!(CStr::from_ptr(h.0 as *const libc::c_char), c"/pm/a");
        libc::free(h.0 as *mut libc::c_void);
    }
}
