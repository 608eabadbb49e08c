//! What processes sharing one image share besides the image (docs/design.md, "Many
//! processes on one image"): a region of volatile state in a file on a tmpfs, mapped
//! `MAP_SHARED` by every participant ([`Region`], found or made whole by any number of
//! processes at once with [`Region::attach`]); the table of participants, each a live
//! process or a dead one's leftovers ([`Participants`]); lock words that a waiter
//! takes over from a dead owner ([`RobustLock`]); and the processes' record locks
//! ([`lock_table`]).
//!
//! The file system's own layout of an image's region is [`ImageRegion`] (`image.rs`),
//! used by a shared mount (`fs/shared/mod.rs`).

mod attach;
mod cells;
mod data_ring;
mod descriptions;
mod image;
mod liveness;
mod lock;
pub mod lock_table;
mod participant_set;
mod participants;
pub(crate) mod pins;
pub mod read_only_locks;
mod readers;
mod region;
pub mod scope;
pub mod sequence;
mod sweep;

pub(crate) use attach::remove_region;
pub use attach::{fifo_dir_path, region_path, Access, Identity, HEADER_BYTES, LAYOUT_VERSION};
pub use cells::RegionCells;
pub use data_ring::{DataChanges, DataRing, DATA_RING};
pub use descriptions::{Description, Descriptions, Handle, OffsetGuard, MAX_DESCRIPTIONS};
pub use image::{
    inode_state_ranges, region_bytes, Change, ImageRegion, ImageWords, InodeBits, Mark, TableLayout, CHANGE_RING,
    MAX_OPEN_INODES,
};
pub use lock::{Acquired, LockWord, RobustLock};
/// The robust lock's protocol on any word (its model drives it with loom's atomics).
pub mod lock_protocol {
    pub use super::lock::{lock, try_lock, unlock};
    pub use super::readers::{drain_one, leave as leave_read, try_enter as try_read};
}
/// The participant sets' protocol on any word (its model drives it with loom's atomics).
pub mod set_protocol {
    pub use super::participant_set::{is_empty, remove, try_claim, SetWord};
}
pub use liveness::SLOT_BYTES;
pub use participant_set::{HoldCounts, Members, ParticipantSet, SET_WORDS};
pub use participants::{process_alive, process_runs, start_time, Participant, Participants, Slot, MAX_PARTICIPANTS};
pub use region::{Region, Shared};
pub use sweep::sweep_left_regions;
