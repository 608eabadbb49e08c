//! The stat family and access(): attributes and permission checks.

use super::*;

pub(super) fn fill_stat(m: &Metadata, st: *mut libc::stat) {
    // SAFETY: libc's contract: st points to a struct stat.
    let st = unsafe { &mut *st };
    // SAFETY: struct stat is plain data; all-zero is valid.
    *st = unsafe { std::mem::zeroed() };
    st.st_dev = 0x4853; // "HS"
    st.st_ino = m.ino.get();
    st.st_mode = m.mode();
    st.st_rdev = m.rdev;
    st.st_nlink = m.nlink as _;
    st.st_uid = m.uid;
    st.st_gid = m.gid;
    st.st_size = m.size as i64;
    st.st_blksize = 4096;
    st.st_blocks = m.st_blocks() as i64;
    st.st_atime = m.atime_ns.div_euclid(1_000_000_000);
    st.st_atime_nsec = m.atime_ns.rem_euclid(1_000_000_000);
    st.st_mtime = m.mtime_ns.div_euclid(1_000_000_000);
    st.st_mtime_nsec = m.mtime_ns.rem_euclid(1_000_000_000);
    st.st_ctime = m.ctime_ns.div_euclid(1_000_000_000);
    st.st_ctime_nsec = m.ctime_ns.rem_euclid(1_000_000_000);
}

pub(super) fn stat_path(p: &Path, follow: bool, st: *mut libc::stat) -> c_int {
    let s = shim();
    let r = s.fs().and_then(|fs| {
        let ino = if follow { fs.resolve(p) } else { fs.resolve_nofollow(p) };
        ino.and_then(|i| fs.getattr(i)).map_err(|e| e.errno())
    });
    ret_stat(r, st)
}

pub(super) fn stat_fd(fd: c_int, st: *mut libc::stat) -> c_int {
    let s = shim();
    let r =
        s.file(fd).ok_or(libc::EBADF).and_then(|of| s.fs().and_then(|fs| fs.getattr(of.ino).map_err(|e| e.errno())));
    ret_stat(r, st)
}

/// Fills `st` and returns 0, or sets errno and returns -1.
pub(super) fn ret_stat(r: Result<Metadata, c_int>, st: *mut libc::stat) -> c_int {
    match r {
        Ok(m) => {
            fill_stat(&m, st);
            0
        }
        Err(e) => fail(e),
    }
}

macro_rules! stat_fns {
    ($name:ident, $follow:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, st: *mut libc::stat) -> c_int {
            if let Some(Some(p)) = guarded(|| fs_path(path)) {
                return guarded(|| stat_path(&p, $follow, st)).unwrap_or(-1);
            }
            // SAFETY: forwarding.
            unsafe { real!($name: fn(*const c_char, *mut libc::stat) -> c_int)(path, st) }
        }
    };
}
stat_fns!(stat, true);
stat_fns!(stat64, true);
stat_fns!(lstat, false);
stat_fns!(lstat64, false);

#[no_mangle]
pub unsafe extern "C" fn fstat(fd: c_int, st: *mut libc::stat) -> c_int {
    if ours(fd) {
        return guarded(|| stat_fd(fd, st)).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fstat: fn(c_int, *mut libc::stat) -> c_int)(fd, st) }
}

#[no_mangle]
pub unsafe extern "C" fn fstat64(fd: c_int, st: *mut libc::stat) -> c_int {
    if ours(fd) {
        return guarded(|| stat_fd(fd, st)).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(fstat64: fn(c_int, *mut libc::stat) -> c_int)(fd, st) }
}

pub(super) fn fstatat_impl(dirfd: c_int, path: *const c_char, st: *mut libc::stat, flags: c_int) -> Option<c_int> {
    // SAFETY: libc's contract.
    let empty = !path.is_null() && unsafe { *path } == 0;
    if empty && flags & libc::AT_EMPTY_PATH != 0 && ours(dirfd) {
        return guarded(|| stat_fd(dirfd, st));
    }
    let p = guarded(|| fs_path_at(dirfd, path)).flatten()?;
    guarded(|| stat_path(&p, flags & libc::AT_SYMLINK_NOFOLLOW == 0, st))
}

#[no_mangle]
pub unsafe extern "C" fn fstatat(dirfd: c_int, path: *const c_char, st: *mut libc::stat, flags: c_int) -> c_int {
    if let Some(r) = fstatat_impl(dirfd, path, st, flags) {
        return r;
    }
    // SAFETY: forwarding.
    unsafe { real!(fstatat: fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int)(dirfd, path, st, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn fstatat64(dirfd: c_int, path: *const c_char, st: *mut libc::stat, flags: c_int) -> c_int {
    if let Some(r) = fstatat_impl(dirfd, path, st, flags) {
        return r;
    }
    // SAFETY: forwarding.
    unsafe { real!(fstatat64: fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int)(dirfd, path, st, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    stx: *mut libc::statx,
) -> c_int {
    // SAFETY: struct stat is plain data.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if let Some(r) = fstatat_impl(dirfd, path, &mut st, flags) {
        if r == 0 {
            // SAFETY: libc's contract: stx points to a struct statx.
            let x = unsafe { &mut *stx };
            // SAFETY: plain data.
            *x = unsafe { std::mem::zeroed() };
            x.stx_mask = libc::STATX_BASIC_STATS;
            x.stx_blksize = st.st_blksize as u32;
            x.stx_nlink = st.st_nlink as u32;
            x.stx_uid = st.st_uid;
            x.stx_gid = st.st_gid;
            x.stx_mode = st.st_mode as u16;
            x.stx_ino = st.st_ino;
            x.stx_size = st.st_size as u64;
            x.stx_blocks = st.st_blocks as u64;
            x.stx_atime.tv_sec = st.st_atime;
            x.stx_atime.tv_nsec = st.st_atime_nsec as u32;
            x.stx_mtime.tv_sec = st.st_mtime;
            x.stx_mtime.tv_nsec = st.st_mtime_nsec as u32;
            x.stx_ctime.tv_sec = st.st_ctime;
            x.stx_ctime.tv_nsec = st.st_ctime_nsec as u32;
            x.stx_dev_major = 0;
            x.stx_dev_minor = 0x4853;
            x.stx_rdev_major = libc::major(st.st_rdev);
            x.stx_rdev_minor = libc::minor(st.st_rdev);
            // Untorn writes (pwritev2 with RWF_ATOMIC), on regular files.
            if st.st_mode & libc::S_IFMT == libc::S_IFREG {
                if let Ok(fs) = shim().fs() {
                    x.stx_mask |= libc::STATX_WRITE_ATOMIC;
                    x.stx_attributes |= libc::STATX_ATTR_WRITE_ATOMIC as u64;
                    x.stx_attributes_mask |= libc::STATX_ATTR_WRITE_ATOMIC as u64;
                    x.stx_atomic_write_unit_min = super::vector::ATOMIC_UNIT_MIN as u32;
                    x.stx_atomic_write_unit_max = fs.untorn_write_max_aligned() as u32;
                    x.stx_atomic_write_segments_max = 1;
                }
            }
        }
        return r;
    }
    // SAFETY: forwarding.
    unsafe {
        real!(statx: fn(c_int, *const c_char, c_int, c_uint, *mut libc::statx) -> c_int)(dirfd, path, flags, mask, stx)
    }
}

/// Whether the process (by its effective ids) may access `m` as `mode` asks (R_OK, W_OK,
/// X_OK), as the kernel would: root may read and write anything, and execute anything with
/// some execute bit or a directory.
pub(super) fn permitted(m: &Metadata, mode: c_int) -> bool {
    // SAFETY: these have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let want = (mode & (libc::R_OK | libc::W_OK | libc::X_OK)) as u32;
    if uid == 0 {
        return want & libc::X_OK as u32 == 0 || m.is_dir() || m.perm & 0o111 != 0;
    }
    let bits = if m.uid == uid {
        (m.perm >> 6) & 7
    } else if m.gid == gid || in_supplementary_groups(m.gid) {
        (m.perm >> 3) & 7
    } else {
        m.perm & 7
    };
    bits & want == want
}

pub(super) fn in_supplementary_groups(gid: u32) -> bool {
    let mut groups = [0 as libc::gid_t; 256];
    // SAFETY: the buffer holds 256 entries.
    let n = unsafe { libc::getgroups(groups.len() as c_int, groups.as_mut_ptr()) };
    n > 0 && groups[..n as usize].contains(&gid)
}

/// access() and friends for our paths: existence, then the permission bits.
pub(super) fn access_ours(path: *const c_char, mode: c_int) -> Option<c_int> {
    path_op(path, |fs, p| {
        let m = fs.metadata(p)?;
        if mode != libc::F_OK && !permitted(&m, mode) {
            return Err(Error::Access);
        }
        Ok(())
    })
    .map(ret0)
}

#[no_mangle]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    if let Some(r) = access_ours(path, mode) {
        return r;
    }
    // SAFETY: forwarding.
    unsafe { real!(access: fn(*const c_char, c_int) -> c_int)(path, mode) }
}

/// glibc implements euidaccess with an internal stat that no preload sees.
#[no_mangle]
pub unsafe extern "C" fn euidaccess(path: *const c_char, mode: c_int) -> c_int {
    if let Some(r) = access_ours(path, mode) {
        return r;
    }
    // SAFETY: forwarding.
    unsafe { real!(euidaccess: fn(*const c_char, c_int) -> c_int)(path, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn eaccess(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: same contract.
    unsafe { euidaccess(path, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn faccessat(dirfd: c_int, path: *const c_char, mode: c_int, flags: c_int) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path_at(dirfd, path)) {
        return guarded(|| {
            ret0(shim().fs().and_then(|fs| {
                let m = fs.metadata(&p).map_err(|e| e.errno())?;
                if mode != libc::F_OK && !permitted(&m, mode) {
                    return Err(libc::EACCES);
                }
                Ok(())
            }))
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(faccessat: fn(c_int, *const c_char, c_int, c_int) -> c_int)(dirfd, path, mode, flags) }
}
