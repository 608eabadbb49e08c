//! The interposer HashFS's two LD_PRELOAD shims share (`hashfs-preload`, which serves a
//! prefix from an image, and `hashfs-spfs-shim`, SPFS's stacked mode in the process):
//! libc's own function behind a name the shim interposes ([`real!`]), a per-thread guard
//! through which the shim's own calls into libc (the library's, Rust's std) pass straight
//! on, errno, and the set of descriptor numbers a shim serves ([`FdSet`]).
//!
//! The entry points themselves are here too, written once ([`entry`]): a shim is a
//! [`Backend`] (what it serves, with safe arguments and libc's own call at hand) and
//! exports libc's names with [`export!`]. Forwarding a call to libc is one macro,
//! [`forward!`], whose documentation is the one argument for its soundness.
//!
//! Each shim links its own copy of this crate, so each has its own guard.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

pub use libc;

mod backend;
mod call;
pub mod entry;
mod export;

pub use backend::{
    Attributes, Backend, Child, ChildKnown, Copies, Data, Descriptors, FcntlArg, FsStats, IoctlArg, Mappings, Metadata,
    Names, Process, RangeCopy, Streams, Times, XattrTarget, Xattrs,
};
pub use call::{serve, Address, CResult, Errno, Handle, IoVecs, LastLink, Next, Offset, Posix, Served};
pub use entry::process::process_umask;

/// libc's function `$name` of the given type, found once with `dlsym(RTLD_NEXT)`: the
/// definition the interposed one hides.
#[macro_export]
macro_rules! real {
    ($name:ident : fn($($arg:ty),*) -> $ret:ty) => {{
        static PTR: std::sync::atomic::AtomicPtr<$crate::libc::c_void> =
            std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
        #[allow(unused_unsafe)] // the macro is used both inside and outside unsafe blocks
        let f = {
            let mut p = PTR.load(std::sync::atomic::Ordering::Relaxed);
            if p.is_null() {
                // SAFETY: the name is a NUL-terminated literal; RTLD_NEXT finds libc's symbol.
                p = unsafe {
                    $crate::libc::dlsym(
                        $crate::libc::RTLD_NEXT,
                        concat!(stringify!($name), "\0").as_ptr() as *const $crate::libc::c_char,
                    )
                };
                PTR.store(p, std::sync::atomic::Ordering::Relaxed);
            }
            assert!(!p.is_null(), concat!("hashfs shim: libc has no ", stringify!($name)));
            // SAFETY: the symbol is libc's function of this signature.
            unsafe { std::mem::transmute::<*mut $crate::libc::c_void, unsafe extern "C" fn($($arg),*) -> $ret>(p) }
        };
        f
    }};
}

thread_local! {
    static IN_SHIM: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with the guard set (calls into libc it makes pass straight through); None if
/// the guard was already set (the caller then goes to libc itself).
pub fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    if IN_SHIM.with(|g| g.replace(true)) {
        return None;
    }
    let r = f();
    IN_SHIM.with(|g| g.set(false));
    Some(r)
}

/// Whether this thread is inside the shim (its libc calls are the shim's own).
pub fn in_shim() -> bool {
    IN_SHIM.with(|g| g.get())
}

/// Sets the guard for the rest of this thread's life: for the shim's own threads (pumps,
/// write-back), every call of which is the shim's.
pub fn shim_thread() {
    IN_SHIM.with(|g| g.set(true));
}

pub fn set_errno(e: libc::c_int) {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() = e };
}

pub fn errno() -> libc::c_int {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() }
}

/// Sets errno to `e` and returns -1 (libc's failure).
pub fn fail<T: From<i8>>(e: libc::c_int) -> T {
    set_errno(e);
    T::from(-1)
}

/// The descriptor numbers a shim serves, as a bitmap: the check every read and write
/// makes first is one load, with no lock.
pub struct FdSet {
    bits: Vec<AtomicU64>,
}

impl FdSet {
    /// Descriptors at or past this are never the shim's.
    pub const LIMIT: usize = 1 << 20;

    pub fn new() -> FdSet {
        FdSet { bits: (0..Self::LIMIT / 64).map(|_| AtomicU64::new(0)).collect() }
    }

    pub fn contains(&self, fd: libc::c_int) -> bool {
        fd >= 0
            && (fd as usize) < Self::LIMIT
            && self.bits[fd as usize / 64].load(Ordering::Relaxed) & (1 << (fd as usize % 64)) != 0
    }

    /// Marks `fd` (below [`FdSet::LIMIT`]: the caller checks) as the shim's.
    pub fn insert(&self, fd: libc::c_int) {
        self.bits[fd as usize / 64].fetch_or(1u64 << (fd as usize % 64), Ordering::Relaxed);
    }

    /// Marks `fd` (below [`FdSet::LIMIT`]) as not the shim's.
    pub fn remove(&self, fd: libc::c_int) {
        self.bits[fd as usize / 64].fetch_and(!(1u64 << (fd as usize % 64)), Ordering::Relaxed);
    }
}

impl Default for FdSet {
    fn default() -> Self {
        FdSet::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_nests_once_and_is_per_thread() {
        assert!(!in_shim());
        assert_eq!(guarded(|| (in_shim(), guarded(|| 1))), Some((true, None)));
        assert!(!in_shim());
        std::thread::spawn(|| {
            shim_thread();
            assert!(in_shim() && guarded(|| ()).is_none());
        })
        .join()
        .unwrap();
        assert!(!in_shim());
    }

    #[test]
    fn fd_sets_hold_what_was_set_below_the_limit() {
        let s = FdSet::new();
        let set = [0, 63, 64, 1000, FdSet::LIMIT as i32 - 1];
        for fd in set {
            s.insert(fd);
        }
        for fd in [0, 1, 62, 63, 64, 65, 999, 1000, 1001, FdSet::LIMIT as i32 - 1] {
            assert_eq!(s.contains(fd), set.contains(&fd), "descriptor {fd}");
        }
        s.remove(64);
        assert!(!s.contains(64) && s.contains(63));
        assert!(!s.contains(-1) && !s.contains(FdSet::LIMIT as i32));
    }

    #[test]
    fn real_finds_libc_and_fail_sets_errno() {
        let getpid = real!(getpid: fn() -> libc::pid_t);
        // SAFETY: getpid has no preconditions.
        assert_eq!(unsafe { getpid() } as u32, std::process::id());
        assert_eq!(fail::<isize>(libc::ENOENT), -1);
        assert_eq!(errno(), libc::ENOENT);
    }
}
