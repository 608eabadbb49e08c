//! statfs and statvfs of the prefix.

use super::*;

pub(super) fn fill_statvfs(out: *mut libc::statvfs) -> c_int {
    let st = match shim().fs() {
        Ok(fs) => fs.statfs(),
        Err(e) => return fail(e),
    };
    // SAFETY: libc's contract: out points to a struct statvfs (plain data).
    unsafe {
        *out = std::mem::zeroed();
        (*out).f_bsize = st.block_bytes;
        (*out).f_frsize = st.block_bytes;
        (*out).f_blocks = st.blocks_total;
        (*out).f_bfree = st.blocks_free;
        (*out).f_bavail = st.blocks_free;
        (*out).f_files = st.inodes_total;
        (*out).f_ffree = st.inodes_free;
        (*out).f_favail = st.inodes_free;
        (*out).f_namemax = st.name_max;
    }
    0
}

pub(super) fn fill_statfs(out: *mut libc::statfs) -> c_int {
    let st = match shim().fs() {
        Ok(fs) => fs.statfs(),
        Err(e) => return fail(e),
    };
    // SAFETY: libc's contract: out points to a struct statfs (plain data).
    unsafe {
        *out = std::mem::zeroed();
        (*out).f_type = 0x4853_4653; // "HSFS"
        (*out).f_bsize = st.block_bytes as _;
        (*out).f_frsize = st.block_bytes as _;
        (*out).f_blocks = st.blocks_total;
        (*out).f_bfree = st.blocks_free;
        (*out).f_bavail = st.blocks_free;
        (*out).f_files = st.inodes_total;
        (*out).f_ffree = st.inodes_free;
        (*out).f_namelen = st.name_max as _;
    }
    0
}

macro_rules! statfs_fns {
    ($path_fn:ident, $fd_fn:ident, $ty:ty, $fill:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $path_fn(path: *const c_char, out: *mut $ty) -> c_int {
            if guarded(|| fs_path(path)).flatten().is_some() {
                return guarded(|| $fill(out)).unwrap_or(-1);
            }
            // SAFETY: forwarding.
            unsafe { real!($path_fn: fn(*const c_char, *mut $ty) -> c_int)(path, out) }
        }
        #[no_mangle]
        pub unsafe extern "C" fn $fd_fn(fd: c_int, out: *mut $ty) -> c_int {
            if ours(fd) {
                return guarded(|| $fill(out)).unwrap_or(-1);
            }
            // SAFETY: forwarding.
            unsafe { real!($fd_fn: fn(c_int, *mut $ty) -> c_int)(fd, out) }
        }
    };
}
statfs_fns!(statfs, fstatfs, libc::statfs, fill_statfs);
statfs_fns!(statfs64, fstatfs64, libc::statfs, fill_statfs);
statfs_fns!(statvfs, fstatvfs, libc::statvfs, fill_statvfs);
statfs_fns!(statvfs64, fstatvfs64, libc::statvfs, fill_statvfs);
