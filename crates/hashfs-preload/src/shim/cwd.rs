//! The working directory inside the prefix: `chdir`/`fchdir` into a HashFS directory set a
//! virtual working directory, which `getcwd` reports (as the prefix path) and relative
//! paths of every intercepted call resolve against (`openat(AT_FDCWD, ...)` included).
//!
//! The kernel's working directory meanwhile is an empty directory that no longer exists,
//! so a relative path given to a call the shim does not intercept fails with ENOENT
//! instead of reaching the directory the program was in before. Limits: a relative path
//! that leaves the prefix (`..` above its root) fails the same way while the working
//! directory is inside it; a program exec'd from there starts in that removed directory.

use super::*;

/// The working directory inside the image ("/a/b"), when there is one.
static VCWD: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The host path (prefix + directory) of the virtual working directory.
fn host_cwd() -> Option<PathBuf> {
    let d = VCWD.lock().clone()?;
    let rel = d.strip_prefix("/").unwrap_or(&d).to_path_buf();
    let pre = prefix()?;
    Some(if rel.as_os_str().is_empty() { pre.to_path_buf() } else { pre.join(rel) })
}

/// Points the kernel's working directory at a fresh, removed empty directory.
fn park_kernel_cwd() -> Result<(), c_int> {
    let mut template = *b"/tmp/hashfs-cwd-XXXXXX\0";
    let chdir = real!(chdir: fn(*const c_char) -> c_int);
    // SAFETY: template is a writable NUL-terminated buffer; the other calls take its path.
    unsafe {
        if libc::mkdtemp(template.as_mut_ptr() as *mut c_char).is_null() {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
        }
        let p = template.as_ptr() as *const c_char;
        let r = chdir(p);
        libc::rmdir(p);
        if r != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
        }
    }
    Ok(())
}

/// Enters directory `path` of the image (search permission checked as the kernel would).
fn enter(path: &Path) -> Result<(), c_int> {
    let fs = shim().fs()?;
    let ino = fs.resolve(path).map_err(|e| e.errno())?;
    let md = fs.peek_attr(ino).map_err(|e| e.errno())?;
    if !md.is_dir() {
        return Err(libc::ENOTDIR);
    }
    if !super::permitted(&md, libc::X_OK) {
        return Err(libc::EACCES);
    }
    park_kernel_cwd()?;
    *VCWD.lock() = Some(path.to_path_buf());
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn chdir(path: *const c_char) -> c_int {
    if let Some(Some(p)) = guarded(|| fs_path(path)) {
        return guarded(|| ret0(enter(&p))).unwrap_or(-1);
    }
    // A path outside the prefix; relative ones are taken from the virtual directory.
    let abs = guarded(|| {
        // SAFETY: libc's contract: a NUL-terminated path (checked for null).
        let bytes = (!path.is_null()).then(|| unsafe { CStr::from_ptr(path) }.to_bytes().to_vec())?;
        if bytes.first() == Some(&b'/') {
            return None;
        }
        let joined = host_cwd()?.join(std::ffi::OsStr::from_bytes(&bytes));
        CString::new(joined.into_os_string().into_encoded_bytes()).ok()
    })
    .flatten();
    let target = abs.as_ref().map_or(path, |c| c.as_ptr());
    // SAFETY: forwarding a valid path.
    let r = unsafe { real!(chdir: fn(*const c_char) -> c_int)(target) };
    if r == 0 {
        *VCWD.lock() = None;
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn fchdir(fd: c_int) -> c_int {
    if ours(fd) {
        return guarded(|| {
            let r = shim().file(fd).ok_or(libc::EBADF).and_then(|of| {
                if of.file.is_some() {
                    return Err(libc::ENOTDIR);
                }
                enter(&of.fs_path)
            });
            ret0(r)
        })
        .unwrap_or(-1);
    }
    // SAFETY: forwarding.
    let r = unsafe { real!(fchdir: fn(c_int) -> c_int)(fd) };
    if r == 0 {
        *VCWD.lock() = None;
    }
    r
}

/// getcwd's contract for a path we know: into `buf` of `size` bytes, or a new buffer from
/// malloc when `buf` is null (glibc's extension; `size` 0 means as large as needed).
fn give_path(p: &Path, buf: *mut c_char, size: size_t) -> *mut c_char {
    let bytes = p.as_os_str().as_bytes();
    if buf.is_null() {
        if size != 0 && size < bytes.len() + 1 {
            set_errno(libc::ERANGE);
            return std::ptr::null_mut();
        }
        let c = CString::new(bytes).expect("paths have no NUL");
        // SAFETY: strdup copies a valid NUL-terminated string into malloc'd memory.
        return unsafe { libc::strdup(c.as_ptr()) };
    }
    if size == 0 {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    }
    if size < bytes.len() + 1 {
        set_errno(libc::ERANGE);
        return std::ptr::null_mut();
    }
    // SAFETY: buf holds size > bytes.len() bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, bytes.len());
        *buf.add(bytes.len()) = 0;
    }
    buf
}

#[no_mangle]
pub unsafe extern "C" fn getcwd(buf: *mut c_char, size: size_t) -> *mut c_char {
    if let Some(p) = host_cwd() {
        return give_path(&p, buf, size);
    }
    // SAFETY: forwarding.
    unsafe { real!(getcwd: fn(*mut c_char, size_t) -> *mut c_char)(buf, size) }
}

#[no_mangle]
pub unsafe extern "C" fn get_current_dir_name() -> *mut c_char {
    if let Some(p) = host_cwd() {
        return give_path(&p, std::ptr::null_mut(), 0);
    }
    // SAFETY: forwarding.
    unsafe { real!(get_current_dir_name: fn() -> *mut c_char)() }
}
