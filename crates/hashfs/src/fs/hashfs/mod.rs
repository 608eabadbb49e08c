//! What the file system does only on HashFS images (the hash table, `mapping/hashfs/`):
//! the data path's verbs (`verbs.rs`, freeing and finding slots in `slots.rs`), one-fence
//! small appends (`append_tag.rs`), the read prefetch (`prefetch.rs`), the grouped
//! placements' claims (`grouped.rs`), the grouped placement's evacuation of a group
//! (`evacuate.rs`), the regions placement's openings (`regions.rs`) and the unlink that
//! frees its file in one transaction (`unlink.rs`). And the one
//! mapping many processes share an image on yet (`fs/shared/`): [`shared_by_processes`].

pub(crate) mod append_tag;
mod evacuate;
mod fsck;
mod grouped;
mod prefetch;
mod recovery;
mod regions;
pub(crate) mod slots;
mod stats;
mod unlink;
mod untorn;
mod verbs;

use crate::layout::{MappingKind, Superblock};

/// Whether the image `sb` describes may be mounted by many processes at once: HashFS's
/// mapping, every placement (the grouped placements' volatile state lives in the shared
/// region: `fs/shared/mod.rs`, `share_table`); the other mappings' allocation state is
/// not yet kept there.
pub(crate) fn shared_by_processes(sb: &Superblock) -> bool {
    sb.mapping_kind == MappingKind::HashFs as u32
}
