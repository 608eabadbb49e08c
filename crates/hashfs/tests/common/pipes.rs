//! A test and the child it forks, which runs the library's calls only when told (the
//! `shared_fork_*` tests): three pipes between them.

fn pipe() -> [libc::c_int; 2] {
    let mut p = [0 as libc::c_int; 2];
    // SAFETY: pipe fills the two descriptors.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    p
}

/// One byte through a pipe's write end.
fn send(fd: libc::c_int) {
    // SAFETY: writes one byte from a static.
    assert_eq!(unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) }, 1);
}

/// One byte from a pipe's read end: false at its end of file.
fn receive(fd: libc::c_int) -> bool {
    let mut byte = 0u8;
    // SAFETY: reads one byte into `byte`.
    unsafe { libc::read(fd, (&raw mut byte).cast(), 1) == 1 }
}

/// The pipes: the test tells the child to join, the child says it did, the test tells it
/// to finish.
pub struct Told {
    join: [libc::c_int; 2],
    joined: [libc::c_int; 2],
    done: [libc::c_int; 2],
}

impl Told {
    /// Made before the fork.
    pub fn new() -> Told {
        Told { join: pipe(), joined: pipe(), done: pipe() }
    }

    /// In the child, first: its copies of the ends the test writes closed, so that a test
    /// that failed leaves it at an end of file.
    pub fn child_side(&self) {
        // SAFETY: this process's copies of two pipe ends, closed once.
        unsafe {
            libc::close(self.join[1]);
            libc::close(self.done[1]);
        }
    }

    /// In the child: waits to be told to join (false: the test is gone).
    pub fn wait_to_join(&self) -> bool {
        receive(self.join[0])
    }

    /// In the child: says it joined, then waits to be told to finish.
    pub fn joined_then_wait(&self) -> bool {
        send(self.joined[1]);
        receive(self.done[0])
    }

    /// In the test, after the fork: its copies of the ends the child writes and reads
    /// closed.
    pub fn test_side(&self) {
        // SAFETY: this process's copies of three pipe ends, closed once.
        unsafe {
            libc::close(self.join[0]);
            libc::close(self.done[0]);
            libc::close(self.joined[1]);
        }
    }

    /// In the test: tells the child to join; whether it said it did.
    pub fn tell_to_join(&self) -> bool {
        send(self.join[1]);
        receive(self.joined[0])
    }

    /// In the test: tells the child to finish.
    pub fn tell_to_finish(&self) {
        send(self.done[1]);
    }
}

/// Waits for child `pid`: its wait status, and whether it exited with 0.
pub fn exited_ok(pid: libc::pid_t) -> (libc::c_int, bool) {
    let mut status = 0;
    // SAFETY: waiting for the caller's own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    (status, libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0)
}
