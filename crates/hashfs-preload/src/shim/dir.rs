//! Directory streams: opendir, fdopendir, readdir, closedir, rewinddir, dirfd.

use super::*;

pub struct DirStream {
    entries: Vec<(Ino, FileType, CString)>,
    next: usize,
    fd: c_int,
    ent: libc::dirent64,
}

pub(super) fn open_dir_stream(path: &Path, fd: c_int) -> Result<*mut libc::DIR, c_int> {
    let s = shim();
    let fs = s.fs()?;
    let ino = fs.resolve(path).map_err(|e| e.errno())?;
    let md = fs.peek_attr(ino).map_err(|e| e.errno())?;
    if !md.is_dir() {
        return Err(libc::ENOTDIR);
    }
    let parent = fs.parent_of(ino).map_err(|e| e.errno())?;
    let mut entries =
        vec![(ino, FileType::Directory, c".".to_owned()), (parent, FileType::Directory, c"..".to_owned())];
    let mut cookie = 0;
    loop {
        let batch = fs.readdir_ino(ino, cookie, 1024).map_err(|e| e.errno())?;
        let Some(last) = batch.last() else { break };
        cookie = last.cookie;
        for e in batch {
            entries.push((e.ino, e.file_type, CString::new(e.name).map_err(|_| libc::EIO)?));
        }
    }
    // SAFETY: dirent64 is plain data.
    let ds = Box::new(DirStream { entries, next: 0, fd, ent: unsafe { std::mem::zeroed() } });
    let ptr = &*ds as *const DirStream as usize;
    s.dirs.lock().insert(ptr, ds);
    Ok(ptr as *mut libc::DIR)
}

pub(super) fn is_our_dir(d: *mut libc::DIR) -> bool {
    !in_shim() && SHIM.get().is_some_and(|s| s.dirs.lock().contains_key(&(d as usize)))
}

#[no_mangle]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut libc::DIR {
    if let Some(Some(p)) = guarded(|| fs_path(path)) {
        return guarded(|| match open_dir_stream(&p, -1) {
            Ok(d) => d,
            Err(e) => {
                set_errno(e);
                std::ptr::null_mut()
            }
        })
        .unwrap_or(std::ptr::null_mut());
    }
    // SAFETY: forwarding.
    unsafe { real!(opendir: fn(*const c_char) -> *mut libc::DIR)(path) }
}

#[no_mangle]
pub unsafe extern "C" fn fdopendir(fd: c_int) -> *mut libc::DIR {
    if ours(fd) {
        return guarded(|| {
            let r = shim().file(fd).ok_or(libc::EBADF).and_then(|of| open_dir_stream(&of.fs_path, fd));
            match r {
                Ok(d) => d,
                Err(e) => {
                    set_errno(e);
                    std::ptr::null_mut()
                }
            }
        })
        .unwrap_or(std::ptr::null_mut());
    }
    // SAFETY: forwarding.
    unsafe { real!(fdopendir: fn(c_int) -> *mut libc::DIR)(fd) }
}

pub(super) fn next_entry(d: *mut libc::DIR) -> *mut libc::dirent64 {
    let s = shim();
    let mut dirs = s.dirs.lock();
    let Some(ds) = dirs.get_mut(&(d as usize)) else { return std::ptr::null_mut() };
    let Some((ino, ft, name)) = ds.entries.get(ds.next) else { return std::ptr::null_mut() };
    ds.next += 1;
    ds.ent.d_ino = ino.get();
    ds.ent.d_off = ds.next as i64;
    ds.ent.d_reclen = std::mem::size_of::<libc::dirent64>() as u16;
    ds.ent.d_type = ft.to_u8();
    let b = name.as_bytes_with_nul();
    let n = b.len().min(ds.ent.d_name.len());
    for (dst, &src) in ds.ent.d_name[..n].iter_mut().zip(b) {
        *dst = src as c_char;
    }
    &mut ds.ent as *mut libc::dirent64
}

#[no_mangle]
pub unsafe extern "C" fn readdir(d: *mut libc::DIR) -> *mut libc::dirent {
    if is_our_dir(d) {
        return guarded(|| next_entry(d) as *mut libc::dirent).unwrap_or(std::ptr::null_mut());
    }
    // SAFETY: forwarding.
    unsafe { real!(readdir: fn(*mut libc::DIR) -> *mut libc::dirent)(d) }
}

#[no_mangle]
pub unsafe extern "C" fn readdir64(d: *mut libc::DIR) -> *mut libc::dirent64 {
    if is_our_dir(d) {
        return guarded(|| next_entry(d)).unwrap_or(std::ptr::null_mut());
    }
    // SAFETY: forwarding.
    unsafe { real!(readdir64: fn(*mut libc::DIR) -> *mut libc::dirent64)(d) }
}

#[no_mangle]
pub unsafe extern "C" fn closedir(d: *mut libc::DIR) -> c_int {
    if is_our_dir(d) {
        let fd = guarded(|| shim().dirs.lock().remove(&(d as usize)).map(|ds| ds.fd)).flatten();
        if let Some(fd) = fd {
            if fd >= 0 {
                // SAFETY: closing the descriptor the stream owned (fdopendir).
                unsafe { interposed::close(fd) };
            }
        }
        return 0;
    }
    // SAFETY: forwarding.
    unsafe { real!(closedir: fn(*mut libc::DIR) -> c_int)(d) }
}

#[no_mangle]
pub unsafe extern "C" fn rewinddir(d: *mut libc::DIR) {
    if is_our_dir(d) {
        guarded(|| {
            if let Some(ds) = shim().dirs.lock().get_mut(&(d as usize)) {
                ds.next = 0;
            }
        });
        return;
    }
    // SAFETY: forwarding.
    unsafe { real!(rewinddir: fn(*mut libc::DIR) -> ())(d) }
}

#[no_mangle]
pub unsafe extern "C" fn dirfd(d: *mut libc::DIR) -> c_int {
    if is_our_dir(d) {
        return guarded(|| shim().dirs.lock().get(&(d as usize)).map(|ds| ds.fd).unwrap_or(-1)).unwrap_or(-1);
    }
    // SAFETY: forwarding.
    unsafe { real!(dirfd: fn(*mut libc::DIR) -> c_int)(d) }
}
