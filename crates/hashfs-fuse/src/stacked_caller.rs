//! New lower objects are made with the caller's identity. The daemon runs as root, so a
//! `mkdir` it makes in the lower directory would belong to root; changing the owner after
//! the fact gets the details wrong (an `O_PATH` descriptor refuses `fchown`; a chown by
//! root clears the set-ID bits the caller asked for; a set-group-ID directory's group is
//! replaced by the caller's). Instead the creating thread takes the caller's effective user
//! and group and supplementary groups for the one system call, so that the lower file
//! system applies Linux's rules itself: the owner, the group (the parent's under a
//! set-group-ID directory, whose new subdirectories inherit the bit), which set-ID bits
//! stay, and the permission to create at all.
//!
//! The credentials are the thread's own (rustix's `set_thread_*` make the raw system
//! calls; glibc's wrappers would change every thread of the daemon), and the saved user ID
//! stays root, so the thread takes root back afterwards. The umask is the kernel's to
//! apply (it sends the mode masked); the daemon's own is cleared at start.

use fuser::{Errno, Request};
use rustix::process::{Gid, Uid};
use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};

/// The supplementary groups of process `pid` (its `Groups:` line), or none when it is gone.
fn groups_of(pid: u32) -> Vec<Gid> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| g.split_whitespace().filter_map(|x| x.parse().ok()).map(Gid::from_raw).collect())
        .unwrap_or_default()
}

/// Runs `f` (one system call that makes a lower object) with the identity of the request's
/// caller on this thread, then takes root back. A caller that is root runs `f` as it is.
pub(crate) fn as_caller<T>(req: &Request, f: impl FnOnce() -> Result<T, Errno>) -> Result<T, Errno> {
    if req.uid() == 0 {
        return f();
    }
    let groups = groups_of(req.pid());
    let own_groups = rustix::process::getgroups().map_err(|e| Errno::from_i32(e.raw_os_error()))?;
    let errno = |e: rustix::io::Errno| Errno::from_i32(e.raw_os_error());
    set_thread_groups(&groups).map_err(errno)?;
    let taken = set_thread_res_gid(None, Some(Gid::from_raw(req.gid())), None)
        .and_then(|()| set_thread_res_uid(None, Some(Uid::from_raw(req.uid())), None));
    let r = match taken {
        Ok(()) => f(),
        Err(e) => Err(errno(e)),
    };
    // The saved user ID is still root, so these cannot fail; a thread left with another
    // identity would make every later request wrong, so that is fatal.
    set_thread_res_uid(None, Some(Uid::ROOT), None).expect("the daemon's thread takes root back");
    set_thread_res_gid(None, Some(Gid::ROOT), None).expect("the daemon's thread takes its group back");
    set_thread_groups(&own_groups).expect("the daemon's thread takes its groups back");
    r
}
