//! Permission checks for a front end whose callers the kernel does not check: the shim,
//! which serves opens and name changes in the caller's process. A mount with
//! [`FileSystem::check_access`] on checks, as Linux's `generic_permission` and
//! `may_delete` do, with the calling process's effective user and group (and its
//! supplementary groups): search permission on every directory a lookup reads, write and
//! search permission on a directory whose entries a call adds or removes, the sticky
//! directory's rule for removals and renames (the caller owns the file or the directory),
//! write permission on a directory a rename moves to another parent (its `..`), and
//! `fs.protected_hardlinks`'s rule for links to others' files. The
//! opener's read and write permission on the file itself is the front end's to check
//! ([`Metadata::permits`]), since it alone knows the open's flags. The FUSE mount leaves
//! checks off: the kernel makes them (`default_permissions`).
//!
//! Root (effective uid 0) may read and write anything and search any directory, and may
//! execute a file with any execute bit (CAP_DAC_OVERRIDE). The group class is the mode's,
//! whose bits are an ACL's mask; ACLs' named entries are not consulted (docs/shim.md).
//!
//! This is POSIX's behaviour, not a boundary: a process that may write the image could
//! change any byte of it (docs/design.md, *Trust*).
//!
//! [`FileSystem::check_access`]: crate::FileSystem::check_access
//! [`Metadata::permits`]: crate::Metadata::permits

use super::FsInner;
use crate::layout::inode::InodeRaw;
use crate::pm::PmDevice;
use crate::{Error, Result};
use std::sync::atomic::Ordering;

/// Read permission (`R_OK`).
pub const MAY_READ: u32 = 4;
/// Write permission (`W_OK`).
pub const MAY_WRITE: u32 = 2;
/// Execute or search permission (`X_OK`).
pub const MAY_EXEC: u32 = 1;

const S_IFMT: u32 = 0o170_000;
const S_IFDIR: u32 = 0o040_000;
const S_ISVTX: u32 = 0o1000;

/// Whose ids a check takes: the effective ones (every call but `access`), or the real
/// ones (`access` and `faccessat` without `AT_EACCESS`, as POSIX has it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ids {
    Effective,
    Real,
}

thread_local! {
    /// The ids this thread's checks take ([`with_ids`]).
    static IDS: std::cell::Cell<Ids> = const { std::cell::Cell::new(Ids::Effective) };
}

/// Runs `f` with this thread's checks by `ids` (the walk's search checks included, as
/// Linux's `access` takes the real ids for the whole call).
pub fn with_ids<T>(ids: Ids, f: impl FnOnce() -> T) -> T {
    struct Restore(Ids);
    impl Drop for Restore {
        fn drop(&mut self) {
            IDS.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(IDS.with(|c| c.replace(ids)));
    f()
}

/// Whether the calling process may have `want` (of `MAY_*`) on a file of `mode`, `uid` and
/// `gid`, by its effective ids (or those [`with_ids`] chose). Asks the kernel for the
/// caller's ids only when the mode does not grant `want` to every class (a 0755
/// directory's search, a 0644 file's read need no system call).
pub fn permits(mode: u32, uid: u32, gid: u32, want: u32) -> bool {
    let want = want & 7;
    let all = want * 0o111;
    if mode & all == all {
        return true;
    }
    let ids = IDS.with(|c| c.get());
    // SAFETY: geteuid and getuid have no preconditions and cannot fail.
    let me = unsafe {
        if ids == Ids::Real {
            libc::getuid()
        } else {
            libc::geteuid()
        }
    };
    if me == 0 {
        return want & MAY_EXEC == 0 || mode & S_IFMT == S_IFDIR || mode & 0o111 != 0;
    }
    let bits = if uid == me {
        mode >> 6
    } else if in_group(ids, gid) {
        mode >> 3
    } else {
        mode
    };
    bits & want == want
}

/// Whether `gid` is the calling process's group (by its effective ids, or those
/// [`with_ids`] chose) or one of its supplementary groups: the group class's test, and
/// chown's and chmod's rules for the group a caller may give or keep.
pub fn in_caller_group(gid: u32) -> bool {
    in_group(IDS.with(|c| c.get()), gid)
}

/// Whether `gid` is the caller's group (by `ids`) or one of its supplementary groups.
fn in_group(ids: Ids, gid: u32) -> bool {
    // SAFETY: getegid and getgid have no preconditions and cannot fail.
    if unsafe {
        if ids == Ids::Real {
            libc::getgid()
        } else {
            libc::getegid()
        }
    } == gid
    {
        return true;
    }
    let mut groups = [0 as libc::gid_t; 256];
    // SAFETY: the buffer holds 256 entries.
    let n = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
    if n < 0 {
        // More than 256 groups: ask for them all.
        // SAFETY: a null buffer with size 0 returns the count.
        let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) }.max(0) as usize;
        let mut all = vec![0 as libc::gid_t; n];
        // SAFETY: the buffer holds n entries.
        let n = unsafe { libc::getgroups(n as libc::c_int, all.as_mut_ptr()) };
        return n > 0 && all[..n as usize].contains(&gid);
    }
    groups[..n as usize].contains(&gid)
}

impl<D: PmDevice> FsInner<D> {
    /// With checks on: Access unless the caller may have `want` on `raw`.
    pub(crate) fn may(&self, raw: &InodeRaw, want: u32) -> Result<()> {
        if !self.checks_access.load(Ordering::Relaxed) || permits(raw.mode, raw.uid, raw.gid, want) {
            return Ok(());
        }
        Err(Error::Access)
    }

    /// With checks on: whether the caller may remove (or rename away, or replace) the entry
    /// for `victim` in directory `dir`: write and search on `dir`, and under a sticky
    /// directory, owning `victim` or `dir` (or being root).
    pub(crate) fn may_delete(&self, dir: &InodeRaw, victim: &InodeRaw) -> Result<()> {
        self.may(dir, MAY_WRITE | MAY_EXEC)?;
        if !self.checks_access.load(Ordering::Relaxed) || dir.mode & S_ISVTX == 0 {
            return Ok(());
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if me == 0 || me == victim.uid || me == dir.uid {
            return Ok(());
        }
        Err(Error::NotPermitted)
    }
}

impl<D: PmDevice> FsInner<D> {
    /// With checks on, and Linux's `fs.protected_hardlinks` set (read once): a link to a
    /// file the caller does not own only when it is a regular file without set-user-ID
    /// (nor set-group-ID with group execute) that the caller may read and write, as
    /// Linux's `may_linkat`; root may link anything.
    pub(crate) fn may_link(&self, raw: &InodeRaw) -> Result<()> {
        static PROTECTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if !self.checks_access.load(Ordering::Relaxed)
            || !*PROTECTED.get_or_init(|| {
                std::fs::read_to_string("/proc/sys/fs/protected_hardlinks").is_ok_and(|v| v.trim() != "0")
            })
        {
            return Ok(());
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let safe = raw.mode & S_IFMT == 0o100_000
            && raw.mode & 0o4000 == 0
            && raw.mode & 0o2010 != 0o2010
            && permits(raw.mode, raw.uid, raw.gid, MAY_READ | MAY_WRITE);
        if me == 0 || me == raw.uid || safe {
            return Ok(());
        }
        Err(Error::NotPermitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The classes as Linux takes them, for root and for another user, without a system
    /// call where every class agrees (this test's process is whoever runs it: root's
    /// answers are checked only when it is root).
    #[test]
    fn classes_and_root_as_linux() {
        // Every class grants it: anyone.
        assert!(permits(0o100_644, 12345, 12345, MAY_READ));
        assert!(permits(S_IFDIR | 0o755, 12345, 12345, MAY_EXEC));
        // A file with no execute bit: no one executes it, root neither.
        assert!(!permits(0o100_666, 12345, 12345, MAY_EXEC));
        // SAFETY: no preconditions.
        let me = unsafe { libc::geteuid() };
        if me == 0 {
            assert!(permits(0o100_000, 12345, 12345, MAY_READ | MAY_WRITE));
            assert!(permits(S_IFDIR, 12345, 12345, MAY_EXEC | MAY_WRITE));
            assert!(permits(0o100_001, 12345, 12345, MAY_EXEC));
        } else {
            // The owner class decides for the owner, even when "other" grants more.
            assert!(!permits(0o100_044, me, 12345, MAY_READ));
            assert!(permits(0o100_400, me, 12345, MAY_READ));
            assert!(!permits(0o100_600, me.wrapping_add(1), 12345, MAY_READ));
        }
    }
}
