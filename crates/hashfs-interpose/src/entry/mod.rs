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

pub mod fd;
pub mod io;

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
