//! What the file system does only on HashFS images (the hash table, `mapping/hashfs/`):
//! the data path's verbs (`verbs.rs`, freeing and finding slots in `slots.rs`), one-fence
//! small appends (`append_tag.rs`), the read prefetch (`prefetch.rs`), the grouped
//! placements' claims (`grouped.rs`), the grouped placement's evacuation of a group
//! (`evacuate.rs`) and the regions placement's openings (`regions.rs`).

pub(crate) mod append_tag;
mod evacuate;
mod fsck;
mod grouped;
mod prefetch;
mod recovery;
mod regions;
pub(crate) mod slots;
mod stats;
mod untorn;
mod verbs;
