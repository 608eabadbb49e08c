//! What processes sharing one image share besides the image (docs/design.md, "Many
//! processes on one image"): a region of volatile state in a file on a tmpfs, mapped
//! `MAP_SHARED` by every participant ([`Region`]); the table of participants, each a live
//! process or a dead one's leftovers ([`Participants`]); and lock words that a waiter
//! takes over from a dead owner ([`RobustLock`]).
//!
//! This is the first piece of issue 55: the library and the shim do not use it yet.

mod lock;
mod participants;
mod region;

pub use lock::{Acquired, RobustLock};
pub use participants::{process_alive, Participants, Slot, MAX_PARTICIPANTS};
pub use region::{Region, Shared};
