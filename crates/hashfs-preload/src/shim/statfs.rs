//! statfs and statvfs of the prefix.

use super::*;

/// The image's statistics, as the interposer fills statfs and statvfs with them.
pub(super) fn stats() -> Result<hashfs_interpose::FsStats, c_int> {
    let st = shim().fs()?.statfs();
    Ok(hashfs_interpose::FsStats {
        magic: 0x4853_4653, // "HSFS"
        block_bytes: st.block_bytes,
        blocks_total: st.blocks_total,
        blocks_free: st.blocks_free,
        inodes_total: st.inodes_total,
        inodes_free: st.inodes_free,
        name_max: st.name_max,
    })
}
