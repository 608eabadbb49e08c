//! The entry points: each libc function the interposer exports, written once, generic in
//! the [`Backend`](crate::Backend) that serves it. Each takes the caller's arguments,
//! asks the backend (inside the guard, only for a call from the program, and for a
//! descriptor call only when the backend claims the descriptor), and otherwise forwards
//! the call to libc unchanged ([`crate::forward!`] has the argument for that).
//!
//! # Safety
//! Every function here is `unsafe` with the contract of libc's function of the same name:
//! [`crate::export!`] calls it from that exported function with that function's caller's
//! arguments. Where a pointer becomes a slice or a reference, the contract is what makes
//! it valid; a null pointer where the contract wants memory is EFAULT, as the kernel says.

#![allow(clippy::missing_safety_doc)] // the module's documentation states the one contract

use crate::call::{serve, CResult, Next, Served};

pub mod compose;
pub mod copy;
pub mod detach;
pub mod fd;
pub mod io;
pub mod library;
pub mod linked;
mod loader;
pub mod meta;
pub mod names;
pub mod process;
pub mod program;
pub mod realpath;
mod search;
pub mod spawn_dir;
pub mod stat;
pub mod streams;
pub mod syscall;
pub mod temp;
pub mod xattr;

#[cfg(test)]
mod tests;

/// Whether `path` would be the backend's file (the calls made here on its behalf:
/// program searches, `realpath`, a spawn's directory).
pub(crate) fn serves<B: crate::Backend>(path: &std::ffi::CStr) -> bool {
    crate::guarded(|| B::serves_program(path)) == Some(true)
}

/// Whether resolving `path` starts in the backend's files: it is the backend's, or it is
/// relative while the working directory is (`..` may lead out, and is resolved from there).
pub(crate) fn starts_in_backend<B: crate::Backend>(path: &std::ffi::CStr) -> bool {
    serves::<B>(path) || path.to_bytes().first() != Some(&b'/') && serves::<B>(c".")
}

/// A call on a descriptor: the backend's part (`serve_it`, given libc's call as `next`)
/// when it claims the descriptor and serves the call, else libc's (`raw`).
pub(crate) fn route<T: CResult>(
    claimed: bool,
    serve_it: impl FnOnce(Next<'_, T>) -> Served<T>,
    raw: impl Fn() -> T::C,
) -> T::C {
    if claimed {
        let next = |()| T::from_c(raw());
        if let Some(r) = serve(|| serve_it(Next(&next))) {
            return T::to_c(r);
        }
    }
    raw()
}

/// A call that fills a structure (`stat`, `statx`, `statfs`): the backend's part returns
/// the structure by value, written to `out` here; libc's part (`raw`) fills the pointer
/// it is given, which is the caller's when the backend passes the call on. `claimed`: a
/// descriptor the backend claims, or a path (which the backend judges itself).
pub(crate) fn route_out<T: Copy>(
    claimed: bool,
    out: *mut T,
    serve_it: impl FnOnce(Next<'_, T>) -> Served<T>,
    raw: impl Fn(*mut T) -> libc::c_int,
) -> libc::c_int {
    if claimed && !out.is_null() {
        let next = |()| {
            let mut v = std::mem::MaybeUninit::<T>::uninit();
            if raw(v.as_mut_ptr()) != 0 {
                return Err(crate::Errno::last());
            }
            // SAFETY: libc's call filled it (it returned 0).
            Ok(unsafe { v.assume_init() })
        };
        if let Some(r) = serve(|| serve_it(Next(&next))) {
            return match r {
                Ok(v) => {
                    // SAFETY: the call's contract: `out` (not null) points to a writable T.
                    unsafe { out.write(v) };
                    0
                }
                Err(e) => crate::fail(e.0),
            };
        }
    }
    raw(out)
}
