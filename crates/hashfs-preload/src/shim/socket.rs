//! UNIX sockets at paths in the prefix: `bind` and `connect` would reach the kernel with a
//! path it cannot see in the image (and, were the prefix a real host directory, bind a
//! socket there instead of in the image), so they fail loudly with EOPNOTSUPP. Through the
//! mount (`hashfs mount`), sockets in the image work.

use super::*;

/// Whether `addr` is a UNIX socket path (not abstract) under the prefix.
fn is_our_unix_path(addr: *const libc::sockaddr, len: libc::socklen_t) -> bool {
    if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() + 1 {
        return false;
    }
    // SAFETY: the caller's contract: addr holds len bytes; the family comes first.
    if unsafe { (*addr).sa_family } as c_int != libc::AF_UNIX {
        return false;
    }
    let un = addr as *const libc::sockaddr_un;
    let max = (len as usize - std::mem::size_of::<libc::sa_family_t>()).min(108);
    // SAFETY: sun_path holds at least `max` bytes of the caller's buffer.
    let path = unsafe { std::slice::from_raw_parts((*un).sun_path.as_ptr() as *const u8, max) };
    if path.first().is_none_or(|&b| b == 0) {
        return false; // abstract or unnamed
    }
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    let Ok(c) = CString::new(&path[..end]) else { return false };
    guarded(|| fs_path(c.as_ptr())).flatten().is_some()
}

macro_rules! socket_fn {
    ($name:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(fd: c_int, addr: *const libc::sockaddr, len: libc::socklen_t) -> c_int {
            if !in_shim() && prefix().is_some() && is_our_unix_path(addr, len) {
                return fail(libc::EOPNOTSUPP);
            }
            // SAFETY: forwarding.
            unsafe { real!($name: fn(c_int, *const libc::sockaddr, libc::socklen_t) -> c_int)(fd, addr, len) }
        }
    };
}
socket_fn!(bind);
socket_fn!(connect);
