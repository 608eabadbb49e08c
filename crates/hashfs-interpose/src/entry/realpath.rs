//! `realpath` and `canonicalize_file_name`: glibc resolves with its own `lstat` and
//! `readlink`, which no preload sees, so a path in the backend's files did not resolve
//! (cargo: "could not canonicalize path", then a build that could not read its own dep-info
//! files). For a path the backend serves (or a relative one while the working directory is
//! the backend's), the resolution is made here with this interposer's `lstat`, `readlink`
//! and `getcwd`, one component at a time as the kernel walks: `.` skipped, `..` one up (never
//! above `/`), each symbolic link's target spliced in (an absolute one from `/`, 40 at most:
//! ELOOP), every component but the last a directory (ENOTDIR), the last one there (ENOENT).
//! A link out of the backend's files continues in the kernel's, by the same calls.

use super::stat::lstat;
use crate::call::c_str;
use crate::{forward, Backend};
use libc::{c_char, c_int};
use std::ffi::{CStr, CString};

/// Symbolic links followed in one resolution at most (the kernel's limit, ELOOP past it).
const MAX_LINKS: u32 = 40;

pub unsafe fn realpath<B: Backend>(path: *const c_char, resolved: *mut c_char) -> *mut c_char {
    let raw = || forward!(realpath(path, resolved): fn(*const c_char, *mut c_char) -> *mut c_char);
    // SAFETY: realpath's contract: path is a NUL-terminated string.
    let Some(p) = (unsafe { c_str(path) }).filter(|p| !p.is_empty()) else { return raw() };
    if !super::starts_in_backend::<B>(p) {
        return raw();
    }
    let relative = p.to_bytes()[0] != b'/';
    // SAFETY: the calls it makes are this interposer's, with NUL-terminated paths.
    match unsafe { resolve::<B>(p.to_bytes(), relative) } {
        Err(e) => {
            crate::set_errno(e);
            std::ptr::null_mut()
        }
        Ok(out) if out.len() >= libc::PATH_MAX as usize => {
            crate::set_errno(libc::ENAMETOOLONG);
            std::ptr::null_mut()
        }
        Ok(out) => {
            let dst = if resolved.is_null() {
                // SAFETY: malloc, as glibc's realpath allocates (the caller frees it).
                unsafe { libc::malloc(out.len() + 1) as *mut c_char }
            } else {
                resolved // PATH_MAX bytes, by the contract
            };
            if dst.is_null() {
                crate::set_errno(libc::ENOMEM);
                return dst;
            }
            // SAFETY: dst holds out.len() + 1 bytes (allocated, or PATH_MAX > out.len()).
            unsafe {
                std::ptr::copy_nonoverlapping(out.as_ptr() as *const c_char, dst, out.len());
                *dst.add(out.len()) = 0;
            }
            dst
        }
    }
}

pub unsafe fn canonicalize_file_name<B: Backend>(path: *const c_char) -> *mut c_char {
    // SAFETY: canonicalize_file_name is realpath with a buffer it allocates.
    unsafe { realpath::<B>(path, std::ptr::null_mut()) }
}

/// The resolved absolute path of `path` (see the module), or the error number.
///
/// # Safety
/// The calls made (`lstat`, `readlink`, `getcwd`) are this interposer's exports, which
/// libc's contracts cover.
unsafe fn resolve<B: Backend>(path: &[u8], relative: bool) -> Result<Vec<u8>, c_int> {
    let mut out: Vec<u8> = if relative { cwd()? } else { b"/".to_vec() };
    // The components still to walk, last first.
    let mut rest: Vec<Vec<u8>> = path.split(|&b| b == b'/').rev().map(<[u8]>::to_vec).collect();
    let mut links = 0;
    while let Some(c) = rest.pop() {
        match &c[..] {
            b"" | b"." => continue,
            b".." => {
                let cut = out.iter().rposition(|&b| b == b'/').unwrap_or(0);
                out.truncate(cut.max(1));
                continue;
            }
            _ => {}
        }
        let mut next = out.clone();
        if next.last() != Some(&b'/') {
            next.push(b'/');
        }
        next.extend_from_slice(&c);
        let cn = CString::new(next).map_err(|_| libc::EINVAL)?;
        // SAFETY: a zeroed stat is a valid buffer; cn is NUL-terminated.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above (this interposer's lstat).
        if unsafe { lstat::<B>(cn.as_ptr(), &mut st) } != 0 {
            return Err(crate::errno());
        }
        match st.st_mode & libc::S_IFMT {
            libc::S_IFLNK => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(libc::ELOOP);
                }
                let target = link_target::<B>(&cn)?;
                if target.first() == Some(&b'/') {
                    out = b"/".to_vec();
                }
                rest.extend(target.split(|&b| b == b'/').rev().map(<[u8]>::to_vec));
            }
            libc::S_IFDIR => out = cn.into_bytes(),
            _ => {
                if rest.iter().any(|r| !r.is_empty()) {
                    return Err(libc::ENOTDIR);
                }
                out = cn.into_bytes();
            }
        }
    }
    Ok(out)
}

/// The working directory, by this interposer's `getcwd` (the backend's when it is there).
pub(super) fn cwd() -> Result<Vec<u8>, c_int> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: buf holds PATH_MAX bytes; libc's getcwd (interposed) fills a NUL-terminated path.
    let r = unsafe { libc::getcwd(buf.as_mut_ptr() as *mut c_char, buf.len()) };
    if r.is_null() {
        return Err(crate::errno());
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    buf.truncate(n);
    Ok(buf)
}

/// The target of the symbolic link at `p`, by this interposer's `readlink`.
fn link_target<B: Backend>(p: &CStr) -> Result<Vec<u8>, c_int> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: buf holds PATH_MAX bytes; p is NUL-terminated.
    let n = unsafe { super::names::readlink::<B>(p.as_ptr(), buf.as_mut_ptr() as *mut c_char, buf.len()) };
    if n < 0 {
        return Err(crate::errno());
    }
    buf.truncate(n as usize);
    Ok(buf)
}
