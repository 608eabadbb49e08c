//! Pipes between a test and the child it forks (the `shared_fork_*` tests, whose children
//! run the library's calls only when told).

/// A pipe's two ends.
pub fn pipe() -> [libc::c_int; 2] {
    let mut p = [0 as libc::c_int; 2];
    // SAFETY: pipe fills the two descriptors.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    p
}

/// One byte through a pipe's write end.
pub fn send(fd: libc::c_int) {
    // SAFETY: writes one byte from a static.
    assert_eq!(unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) }, 1);
}

/// One byte from a pipe's read end: false at its end of file.
pub fn receive(fd: libc::c_int) -> bool {
    let mut byte = 0u8;
    // SAFETY: reads one byte into `byte`.
    unsafe { libc::read(fd, (&raw mut byte).cast(), 1) == 1 }
}
