//! UNIX sockets at paths in the prefix: `bind` and `connect` would reach the kernel with a
//! path it cannot see in the image (and, were the prefix a real host directory, bind a
//! socket there instead of in the image), so they fail loudly with EOPNOTSUPP. Through the
//! mount (`hashfs mount`), sockets in the image work.

use super::*;

/// bind or connect of a UNIX socket at `path`: EOPNOTSUPP under the prefix.
pub(super) fn refused(path: &CStr) -> Option<Result<(), c_int>> {
    fs_path_of(path)?;
    Some(Err(libc::EOPNOTSUPP))
}
