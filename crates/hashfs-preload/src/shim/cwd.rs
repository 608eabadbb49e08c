//! The working directory inside the prefix: `chdir`/`fchdir` into a HashFS directory set a
//! virtual working directory, which `getcwd` reports (as the prefix path) and relative
//! paths of every intercepted call resolve against (`openat(AT_FDCWD, ...)` included).
//!
//! The kernel's working directory meanwhile is an empty directory that no longer exists,
//! so a relative path given to a call the shim does not intercept fails with ENOENT
//! instead of reaching the directory the program was in before. The directory is found
//! where it is now at each use (a rename moves relative paths with it, as Linux's start at
//! the directory's inode; `current`). Limits: a relative path
//! that leaves the prefix (`..` above its root) fails the same way while the working
//! directory is inside it. A program exec'd from there starts there too: the exec passes
//! the directory on (`exec.rs`).

use super::*;
use hashfs_interpose::{Child, ChildKnown, Errno, FsStats, IoctlArg, Next, Process, Served};
use io::served;

/// The working directory inside the image ("/a/b"), when there is one: where it was
/// entered, or where it was last found (`current`).
static VCWD: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The working directory's inode, with the path it was entered by and where it was last
/// found (`path::path_now`): relative paths start where the directory is now, as Linux's
/// start at its inode (a rename of it by another process, or another call, moved them to
/// the new name; a removed one's are ENOENT).
struct Dir {
    path: PathBuf,
    ino: Ino,
    found_at: Mutex<Option<(u64, PathBuf)>>,
}

static VCWD_DIR: Mutex<Option<Arc<Dir>>> = Mutex::new(None);

/// A `vfork` child's own working directory, which its chdir sets: the child runs in its
/// parent's memory, so a chdir there must not change the parent's (Python's subprocess with
/// `cwd=` in the image moved the parent's relative paths into the child's directory).
/// `Some(None)`: the child left the image. The parent clears it before each vfork.
static VFORK_CWD: Mutex<Option<Option<PathBuf>>> = Mutex::new(None);

/// Whether this is a `vfork` child, running in its parent's memory.
fn in_vfork_child() -> bool {
    super::exec::PROCESS_PID.load(Ordering::Relaxed) != current_pid()
}

/// Before a vfork, in the parent: no child's directory is left over from the last one.
pub(super) fn before_vfork() {
    *VFORK_CWD.lock() = None;
}

/// Leaves the working directory inside the image (a chdir out of it).
fn leave() {
    if in_vfork_child() {
        *VFORK_CWD.lock() = Some(None);
        return;
    }
    *VCWD.lock() = None;
    *VCWD_DIR.lock() = None;
}

/// The working directory inside the image where it is now (None: not in the image), and
/// whether it was removed (its path then names nothing, so relative paths are ENOENT).
/// Asked on every getcwd, outside the guard (`Process::working_dir`): it never makes the
/// shim (whose start-up asks again) and runs the file system's calls inside the guard.
fn current() -> Option<(PathBuf, bool)> {
    // The pid's system call only when a vfork child set a directory (every getcwd and
    // relative path asks here).
    if let Some(own) = VFORK_CWD.lock().clone().filter(|_| in_vfork_child()) {
        return own.map(|p| (p, false));
    }
    let kept = VCWD.lock().clone()?;
    let Some(fs) = SHIM.get().and_then(|s| s.fs.as_ref()) else { return Some((kept, false)) };
    let inside = |f: &mut dyn FnMut() -> Option<PathBuf>| if in_shim() { f() } else { guarded(f).flatten() };
    let found = VCWD_DIR.lock().clone();
    let dir = match found {
        Some(d) => d,
        None => {
            // Inherited across an exec, or entered before the image was mounted.
            let mut ino = None;
            inside(&mut || {
                ino = fs.resolve(&kept).ok();
                None
            });
            let Some(ino) = ino else { return Some((kept, false)) };
            let d = Arc::new(Dir { path: kept.clone(), ino, found_at: Mutex::new(None) });
            *VCWD_DIR.lock() = Some(d.clone());
            d
        }
    };
    let now = inside(&mut || Some(super::path::path_now(&dir.path, dir.ino, &dir.found_at))).unwrap_or(kept.clone());
    let removed = now.as_os_str() == super::path::REMOVED_DIR;
    if !removed && now != kept {
        *VCWD.lock() = Some(now.clone()); // what an exec passes on
    }
    Some((now, removed))
}

/// The working directory inside the image where it is now, and whether it was removed
/// (None: not in the image): for `/proc/self/cwd` (`path.rs` `cwd_link`).
pub(super) fn image_cwd() -> Option<(PathBuf, bool)> {
    current()
}

/// `f` with the working directory inside the image, if the process is in one (an exec or a
/// spawn passes it on: `exec.rs`), without a copy (a `vfork` child, which runs in its
/// parent's memory, must not allocate).
pub(super) fn with_virtual_cwd<T>(f: impl FnOnce(&Path) -> T) -> Option<T> {
    if let Some(own) = VFORK_CWD.lock().as_ref().filter(|_| in_vfork_child()) {
        return own.as_deref().map(f);
    }
    VCWD.lock().as_deref().map(f)
}

/// A program exec'd from inside the image starts there (its kernel working directory is
/// the removed one its predecessor parked it in).
pub(super) fn inherit_cwd(dir: PathBuf) {
    *VCWD.lock() = Some(dir);
    *VCWD_DIR.lock() = None; // found from the path at its first use
}

/// The host path (prefix + directory) of the virtual working directory.
fn host_cwd() -> Option<PathBuf> {
    let (d, _) = current()?;
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
    let ino = super::path::on_inode_errno(fs, path, LastLink::Follow, super::path::Hold::Read, |ino| {
        let md = fs.peek_attr(ino).map_err(|e| e.errno())?;
        if !md.is_dir() {
            return Err(libc::ENOTDIR);
        }
        if !super::permitted(&md, libc::X_OK) {
            return Err(libc::EACCES);
        }
        Ok(ino)
    })?;
    park_kernel_cwd()?;
    if in_vfork_child() {
        *VFORK_CWD.lock() = Some(Some(path.to_path_buf()));
        return Ok(());
    }
    *VCWD.lock() = Some(path.to_path_buf());
    *VCWD_DIR.lock() = Some(Arc::new(Dir { path: path.to_path_buf(), ino, found_at: Mutex::new(None) }));
    Ok(())
}

impl Process for Preload {
    fn chdir(path: &CStr, next: Next<'_, (), Option<CString>>) -> Served<()> {
        if let Some(p) = fs_path_of(path) {
            return served(enter(&p));
        }
        // A path outside the prefix; relative ones are taken from the virtual directory.
        let bytes = path.to_bytes();
        let abs = if bytes.first() == Some(&b'/') {
            None
        } else {
            host_cwd().and_then(|cwd| {
                let joined = cwd.join(std::ffi::OsStr::from_bytes(bytes));
                CString::new(joined.into_os_string().into_encoded_bytes()).ok()
            })
        };
        let r = next.call_with(abs);
        if r.is_ok() {
            leave();
        }
        Some(r)
    }

    fn fchdir(fd: c_int, next: Next<'_, ()>) -> Served<()> {
        if shim().is_ours(fd) {
            return served(shim().file(fd).ok_or(libc::EBADF).and_then(|of| {
                if of.file.is_some() {
                    return Err(libc::ENOTDIR);
                }
                enter(&super::path::dir_path_now(&of))
            }));
        }
        let r = next.call();
        if r.is_ok() {
            leave();
        }
        Some(r)
    }

    fn working_dir() -> Option<PathBuf> {
        host_cwd()
    }

    fn working_dir_removed() -> bool {
        current().is_some_and(|(_, removed)| removed)
    }

    fn statfs(path: &CStr) -> Served<FsStats> {
        fs_path_of(path)?;
        served(statfs::stats())
    }

    fn fstatfs(_: c_int) -> Served<FsStats> {
        served(statfs::stats())
    }

    fn bind_unix(fd: c_int, path: &CStr) -> Served<()> {
        Some(socket::bind(fd, path)?.map_err(Errno))
    }

    fn connect_unix(fd: c_int, path: &CStr) -> Served<()> {
        Some(socket::connect(fd, path)?.map_err(Errno))
    }

    fn unix_peer(path: &CStr) -> Served<CString> {
        Some(socket::peer(path)?.map_err(Errno))
    }

    fn ioctl(fd: c_int, request: libc::c_ulong, arg: IoctlArg, _: Next<'_, c_int>) -> Served<c_int> {
        served(ioctl::ioctl(fd, request, &arg))
    }

    /// `_exit` ends a process without its exit handlers (dash ends every shell that way,
    /// and so do many children after fork): the exit work runs here first.
    fn before_exit() {
        if SHIM.get().is_some_and(|s| s.fs.is_some()) {
            super::at_exit();
        }
    }

    fn before_fork() -> Option<Box<dyn std::any::Any>> {
        super::fork::before_fork()
    }

    fn after_fork(prepared: Option<Box<dyn std::any::Any>>, pid: libc::pid_t) {
        super::fork::after_fork(prepared, pid)
    }

    fn vfork_as_fork() -> bool {
        before_vfork(); // asked in the parent before each vfork
        super::exec::vfork_needs_fork()
    }

    fn before_exec() -> Option<Box<dyn std::any::Any>> {
        super::exec::before_exec()
    }

    fn exec_image(path: &CStr, library_path: Option<&CStr>) -> Served<hashfs_interpose::entry::program::ExecImage> {
        super::program::exec_image(path, library_path)
    }
    fn kernel_program_libraries(
        path: &CStr,
        library_path: &CStr,
    ) -> Served<hashfs_interpose::entry::linked::Libraries> {
        super::library::for_kernel_program(path, library_path)
    }

    fn serves_program(path: &CStr) -> bool {
        fs_path_of(path).is_some()
    }

    fn dir_path(fd: c_int) -> Option<CString> {
        let of = shim().file(fd).filter(|of| of.file.is_none())?;
        let now = super::path::dir_path_now(&of);
        let p = prefix()?.join(now.strip_prefix("/").unwrap_or(&now));
        CString::new(p.into_os_string().into_encoded_bytes()).ok()
    }

    fn library(path: &CStr) -> Served<hashfs_interpose::entry::library::Library> {
        super::library::library(path)
    }

    fn exec_failed(prepared: Option<Box<dyn std::any::Any>>) {
        super::exec::exec_failed(prepared)
    }

    fn before_spawn(known: ChildKnown) -> Option<Box<dyn std::any::Any>> {
        super::exec::before_spawn(known)
    }

    fn spawn_in(dir: Option<&CStr>) {
        super::exec::spawn_in(dir.and_then(fs_path_of));
    }

    fn after_spawn(prepared: Option<Box<dyn std::any::Any>>, child: Child) {
        super::exec::after_spawn(prepared, super::exec::Spawn::Started(child))
    }

    fn spawn_failed(prepared: Option<Box<dyn std::any::Any>>) {
        super::exec::after_spawn(prepared, super::exec::Spawn::Failed)
    }
}
