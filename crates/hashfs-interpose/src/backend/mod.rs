//! What a front end implements to serve calls through the interposer: [`Backend`], and
//! one trait per family of calls (each in the module of its name) with one associated
//! function per operation, with the caller's arguments made safe (slices, C strings,
//! references) and libc's own call at hand as [`Next`](crate::Next). Every method's default passes the
//! call on to libc, so a backend states only what it serves.
//!
//! Each method runs with the per-thread guard set (a backend's own calls into libc go
//! straight through), and only for a call from the program, never for one the backend
//! made itself. A method returns `None` to pass the call on (libc then serves it
//! unchanged), or the call's result.

use libc::c_int;

mod copy;
mod data;
mod fd;
mod meta;
mod names;
mod process;
mod stat;
mod streams;
mod xattr;
pub use copy::{Copies, Mappings, RangeCopy};
pub use data::Data;
pub use fd::{Descriptors, FcntlArg};
pub use meta::{Metadata, Times};
pub use names::Names;
pub use process::{Child, ChildKnown, FsStats, IoctlArg, Process};
pub use stat::Attributes;
pub use streams::Streams;
pub use xattr::{XattrTarget, Xattrs};

pub trait Backend:
    Data + Descriptors + Attributes + Names + Metadata + Copies + Mappings + Xattrs + Streams + Process + 'static
{
    /// Whether `fd` may be one of this backend's descriptors: the first thing every call
    /// on a descriptor asks, so it must be cheap and must not allocate or lock (a bitmap).
    /// The descriptor calls of the family traits are made only for descriptors it claims.
    fn claims(fd: c_int) -> bool;

    /// Whether `fd` may name one of this backend's files for the calls that change or read
    /// the file's attributes rather than its bytes (the time, mode and owner setters, the
    /// extended attributes, fstat):
    /// [`claims`](Self::claims) by default. A backend that serves a descriptor's bytes
    /// through the kernel (the preload's pumps: a standard descriptor redirected to a
    /// file is a pipe) claims it here too, so that those calls reach the file and not the
    /// pipe. Its calls answer None (to the kernel) for a descriptor that is not one.
    fn claims_file(fd: c_int) -> bool {
        Self::claims(fd)
    }
}
