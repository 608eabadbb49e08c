//! Descriptors: open, creat, close, dup and their placeholders.

use super::*;
use hashfs_interpose::{Descriptors, Errno, FcntlArg, Next, Served};
use io::served;

/// The process's one `O_PATH` descriptor of /dev/null, at a high number, or -1 before its
/// first use (or after the program closed that number). Every placeholder is a copy of it:
/// a copy costs the kernel a third of what an open's path walk does.
static BASE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// A placeholder for a HashFS descriptor, close-on-exec if `cloexec`: an `O_PATH`
/// descriptor of /dev/null, so that every call the shim does not intercept (read, write,
/// ioctl, mmap, poll's IO, the *at calls with it as a directory...) fails with EBADF in the
/// kernel instead of acting on a file. At the lowest free number, as open's.
pub(super) fn new_placeholder(cloexec: bool) -> c_int {
    let fcntl = real!(fcntl: fn(c_int, c_int, c_int) -> c_int);
    let cmd = if cloexec { libc::F_DUPFD_CLOEXEC } else { libc::F_DUPFD };
    for _ in 0..2 {
        let b = base();
        if b < 0 {
            break;
        }
        // SAFETY: a copy of our own descriptor.
        let fd = unsafe { fcntl(b, cmd, 0) };
        if fd >= 0 || hashfs_interpose::errno() != libc::EBADF {
            return fd;
        }
        // Closed behind the shim (close_range): another one.
        let _ = BASE.compare_exchange(b, -1, Ordering::AcqRel, Ordering::Acquire);
    }
    let fd = open_dev_null();
    if fd >= 0 && !cloexec {
        // SAFETY: fd is ours.
        unsafe { fcntl(fd, libc::F_SETFD, 0) };
    }
    fd
}

/// A new `O_PATH` descriptor of /dev/null, close-on-exec (-1 if the kernel refused).
fn open_dev_null() -> c_int {
    let open = real!(open: fn(*const c_char, c_int, c_uint) -> c_int);
    // SAFETY: a literal path.
    unsafe { open(c"/dev/null".as_ptr(), libc::O_PATH | libc::O_CLOEXEC, 0) }
}

/// BASE, opened now if it is not (-1 if the kernel refused).
fn base() -> c_int {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let b = BASE.load(Ordering::Acquire);
    if b >= 0 {
        return b;
    }
    let fd = open_dev_null();
    if fd < 0 {
        return -1;
    }
    // SAFETY: a descriptor just opened, owned by nothing else.
    let high = hashfs::pm::out_of_the_way(unsafe { std::fs::File::from_raw_fd(fd) }).into_raw_fd();
    match BASE.compare_exchange(-1, high, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => high,
        Err(other) => {
            // SAFETY: ours, and no one else's (another thread's won).
            unsafe { real!(close: fn(c_int) -> c_int)(high) };
            other
        }
    }
}

/// The program closes (or dup2s onto) descriptor `fd`, which is not one it got from the
/// shim: if it is BASE, the next placeholder opens another.
pub(super) fn kernel_descriptor_goes(fd: c_int) {
    if fd >= 0 && fd == BASE.load(Ordering::Relaxed) {
        let _ = BASE.compare_exchange(fd, -1, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// A descriptor for `of`, opened with `open_flags` (whose O_CLOEXEC it keeps).
pub(super) fn register(s: &Shim, of: Arc<OpenFile>, open_flags: c_int) -> Result<c_int, c_int> {
    let fd = new_placeholder(open_flags & libc::O_CLOEXEC != 0);
    if fd < 0 {
        return Err(hashfs_interpose::errno());
    }
    if fd as usize >= FdSet::LIMIT {
        let close = real!(close: fn(c_int) -> c_int);
        // SAFETY: fd is ours.
        unsafe { close(fd) };
        return Err(libc::EMFILE);
    }
    s.fds.lock().insert(fd, of);
    s.mark(fd);
    Ok(fd)
}

/// The process's file-mode creation mask, read without setting it
/// (`hashfs_interpose::process_umask`).
pub(super) fn process_umask() -> mode_t {
    hashfs_interpose::process_umask()
}

pub(super) fn do_open(path: &Path, flags: c_int, mode: mode_t) -> Result<c_int, c_int> {
    let mut path = std::borrow::Cow::Borrowed(path);
    for _ in 0..MAX_CREATE_FOLLOWS {
        match open_once(&path, flags, mode, None) {
            // O_CREAT through a symbolic link that leads nowhere makes the file it names,
            // as Linux does (not with O_EXCL or O_NOFOLLOW, which refuse the link).
            Err(libc::ENOENT) if flags & (libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW) == libc::O_CREAT => {
                match dangling_target(shim().fs()?, &path) {
                    Some(Ok(target)) => path = std::borrow::Cow::Owned(target),
                    Some(Err(out)) => return open_outside(&out, flags, mode),
                    None => return Err(libc::ENOENT),
                }
            }
            r => return r,
        }
    }
    Err(libc::ELOOP)
}

/// Symbolic links an O_CREAT open follows to the file it makes, at most (Linux's 40).
const MAX_CREATE_FOLLOWS: usize = 40;

/// Where the symbolic link at `path` leads, if it is one and leads to nothing: a path in
/// the image, or (Err) the kernel's path out of it.
fn dangling_target(fs: &FileSystem<MmapDevice>, path: &Path) -> Option<Result<PathBuf, Vec<u8>>> {
    let ino = fs.resolve_nofollow(path).ok()?;
    if !fs.peek_attr(ino).ok()?.is_symlink() || !matches!(fs.resolve(path), Err(Error::NotFound)) {
        return None;
    }
    let link = fs.readlink_ino(ino).ok()?;
    let target = Path::new(std::ffi::OsStr::from_bytes(&link));
    if !target.is_absolute() {
        return Some(Ok(path.parent().unwrap_or(Path::new("/")).join(target)));
    }
    match super::path::inside_prefix(target) {
        Some(p) => Some(Ok(p)),
        None => Some(Err(link)),
    }
}

/// A new open file description of the file `of` is open on, with `flags`: an open of the
/// kernel's link to one of the shim's descriptors (`/proc/self/fd/N`, `/dev/fd/N`:
/// `path.rs` `descriptor_link`), which Linux opens as the file the descriptor has open,
/// renamed or unlinked since or not, with the opener's permission checked again. The link
/// is a symbolic link: O_NOFOLLOW is ELOOP (with O_PATH the link itself, the kernel's).
/// None: the kernel's (O_PATH|O_NOFOLLOW, the link itself).
pub(super) fn reopen(of: &OpenFile, flags: c_int, mode: mode_t) -> Option<Result<c_int, c_int>> {
    if flags & libc::O_NOFOLLOW != 0 {
        return if flags & libc::O_PATH != 0 { None } else { Some(Err(libc::ELOOP)) };
    }
    Some(open_once(&of.fs_path, flags, mode, Some(of.ino)))
}

/// One open of `path`, or (`known`) of the inode a descriptor has open, found by it
/// ([`reopen`]).
fn open_once(path: &Path, flags: c_int, mode: mode_t, known: Option<Ino>) -> Result<c_int, c_int> {
    if flags & libc::O_CREAT != 0 && flags & libc::O_DIRECTORY != 0 {
        return Err(libc::EINVAL); // as Linux since 6.4: before anything is made
    }
    let s = shim();
    let fs = s.fs()?;
    let acc = flags & libc::O_ACCMODE;
    let access = Access {
        read: acc == libc::O_RDONLY || acc == libc::O_RDWR,
        write: acc == libc::O_WRONLY || acc == libc::O_RDWR,
        append: flags & libc::O_APPEND != 0,
    };
    // `resolved` is set once the path resolved: a NotFound after it means the inode was
    // freed before it was opened (a rename over it or an unlink, in another thread or
    // process), and the path is resolved again (`hashfs::OPEN_RETRIES`), as rename's
    // atomicity promises; so after a create that found the name taken and then lost it.
    // (One that found it free and lost it to another's create opens what the other made:
    // `FileSystem::create_unless_exists`.)
    // A FIFO's inode (its bytes are the kernel's: `fifo.rs`).
    let fifo = std::cell::Cell::new(None);
    // Whether this open made the file: then, as in Linux, O_TRUNC truncates nothing (a new
    // file is empty; a truncation would be a transaction for its times).
    let created = std::cell::Cell::new(false);
    let attempt = |resolved: &mut bool| -> Result<(Ino, Option<File<MmapDevice>>), Error> {
        fifo.set(None);
        created.set(false);
        let ino = if let Some(ino) = known {
            if flags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL {
                return Err(Error::Exists);
            }
            ino
        } else if flags & libc::O_CREAT != 0 {
            if path.as_os_str().as_bytes().ends_with(b"/") {
                // A trailing slash, "." or "..": as Linux's open_last_lookups.
                return Err(Error::IsDir);
            }
            let (p, name) = fs.resolve_parent(path).map_err(|e| match e {
                // A directory link out of the image: the file is the name in what it leads to.
                Error::LinkOutside(mut out) => {
                    out.push(b'/');
                    out.extend_from_slice(path.file_name().map_or(&b""[..], |n| n.as_bytes()));
                    Error::LinkOutside(out)
                }
                e => e,
            })?;
            let perm = mode & 0o7777 & !process_umask();
            match fs.create_unless_exists(p, &name, perm, Owner::current, flags & libc::O_EXCL != 0)? {
                Some(m) => {
                    created.set(true);
                    m.ino
                }
                // Taken: with O_NOFOLLOW a symbolic link is ELOOP, as without O_CREAT.
                None if flags & libc::O_NOFOLLOW != 0 => {
                    let ino = fs.resolve_nofollow(path)?;
                    if fs.peek_attr(ino)?.is_symlink() {
                        return Err(Error::Loop);
                    }
                    ino
                }
                None => fs.resolve(path)?,
            }
        } else if flags & libc::O_NOFOLLOW != 0 {
            let ino = fs.resolve_nofollow(path)?;
            if fs.peek_attr(ino)?.is_symlink() {
                if flags & libc::O_PATH != 0 {
                    *resolved = true;
                    return Ok((ino, None)); // O_PATH|O_NOFOLLOW: the link itself, as Linux
                }
                return Err(Error::Loop);
            }
            ino
        } else {
            fs.resolve(path)?
        };
        *resolved = true;
        let md = fs.peek_attr(ino)?;
        if flags & libc::O_DIRECTORY != 0 && !md.is_dir() {
            return Err(Error::NotDir);
        }
        if md.is_dir() && (access.write || flags & libc::O_TRUNC != 0) {
            return Err(Error::IsDir); // as Linux's may_open: O_TRUNC asks for write
        }
        // The opener's permission, as Linux's may_open: read and write as asked (both for
        // the access mode 3), write for O_TRUNC; none for O_PATH or for the file this open
        // made. On a read-only participant's mount a write is EROFS first, as on a
        // read-only file system.
        let want = if acc == libc::O_ACCMODE { hashfs::MAY_READ | hashfs::MAY_WRITE } else { 0 }
            | if access.read { hashfs::MAY_READ } else { 0 }
            | if access.write || flags & libc::O_TRUNC != 0 { hashfs::MAY_WRITE } else { 0 };
        if want & hashfs::MAY_WRITE != 0 && fs.is_read_only() && flags & libc::O_PATH == 0 {
            return Err(Error::ReadOnly);
        }
        if !created.get() && flags & libc::O_PATH == 0 && !md.permits(want) {
            return Err(Error::Access);
        }
        if md.is_dir() {
            return Ok((ino, None));
        }
        if md.file_type == FileType::Fifo {
            fifo.set(Some(md));
            return Ok((ino, None));
        }
        let f = fs.open_ino(ino, if access.read || access.write { access } else { Access { read: true, ..access } })?;
        if flags & libc::O_TRUNC != 0 && flags & libc::O_PATH == 0 && !created.get() {
            if access.write {
                f.set_len(0)?;
            } else {
                // O_RDONLY|O_TRUNC truncates on Linux too (write permission was checked).
                fs.open_ino(ino, Access { read: false, write: true, append: false })?.set_len(0)?;
            }
        }
        Ok((ino, Some(f)))
    };
    let mut tries = 0;
    let r = loop {
        tries += 1;
        let mut resolved = false;
        // The name resolved and the inode opened in one state of the image (another
        // participant may free the inode and make another file of it between two calls).
        let r = following_out(|| {
            if fs.is_read_only() {
                fs.read_together(|| attempt(&mut resolved))
            } else {
                // Resolved and opened under one hold of the image lock: another participant's
                // rename over the name and create between them could give the freed inode
                // number to a new file, which the open would then open (an atomic save's
                // reader read an empty file once, `fuse_shared.rs`).
                fs.hold_image(|| attempt(&mut resolved))
            }
        });
        match r {
            Err(Error::Stale(_)) if tries < hashfs::OPEN_RETRIES => {}
            Err(Error::NotFound) if tries < hashfs::OPEN_RETRIES && (resolved || flags & libc::O_CREAT != 0) => {}
            r => break r,
        }
    };
    if let Some(md) = fifo.take() {
        return super::fifo::open(&md, flags);
    }
    let (ino, file) = match r {
        Ok(found) => found,
        // A link out of the image: the kernel's file it leads to, by the kernel's descriptor.
        Err(Error::LinkOutside(out)) => return open_outside(&out, flags, mode),
        Err(e) => return Err(e.errno()),
    };
    let of = Arc::new(OpenFile {
        file,
        ino,
        fs_path: path.to_path_buf(),
        pos: fork::Position::new(),
        flags: std::sync::atomic::AtomicI32::new(flags),
        lock_owner: OnceLock::new(),
        found_at: Mutex::new(None),
    });
    register(s, of, flags)
}

/// The kernel's open of `out`, where a symbolic link in the image led.
fn open_outside(out: &[u8], flags: c_int, mode: mode_t) -> Result<c_int, c_int> {
    let c = CString::new(out).map_err(|_| libc::EINVAL)?;
    let open = real!(open: fn(*const c_char, c_int, c_uint) -> c_int);
    // SAFETY: a NUL-terminated path; the caller's flags and mode.
    let fd = unsafe { open(c.as_ptr(), flags, mode as c_uint) };
    if fd < 0 {
        return Err(hashfs_interpose::errno());
    }
    Ok(fd)
}

/// Binds `newfd`, which the kernel just made a copy of `old`'s placeholder, to `old`'s
/// open file.
fn dup_into(old: c_int, newfd: c_int) -> Result<c_int, c_int> {
    let s = shim();
    let of = s.file(old).ok_or(libc::EBADF)?;
    if s.is_ours(newfd) {
        s.unmark(newfd);
        s.fds.lock().remove(&newfd);
    }
    s.fds.lock().insert(newfd, of);
    s.mark(newfd);
    Ok(newfd)
}

/// Closes the shim's own descriptor `fd` (a stream's, from inside the shim, where the
/// interposed close would pass straight to the kernel).
pub(super) fn close_own(fd: c_int) {
    if let Some(s) = SHIM.get() {
        if s.is_ours(fd) {
            forget(s, fd);
        }
    }
    // SAFETY: the shim's descriptor.
    unsafe { real!(close: fn(c_int) -> c_int)(fd) };
}

/// Forgets `fd` (closed, or replaced by dup2 with another descriptor).
fn forget(s: &Shim, fd: c_int) {
    s.unmark(fd);
    let of = s.fds.lock().remove(&fd);
    if let Some(of) = of {
        locks::closed_a_descriptor_of(of.ino);
    }
}

impl Descriptors for Preload {
    fn open(dirfd: c_int, path: &CStr, flags: c_int, mode: mode_t, _: Next<'_, c_int, c_int>) -> Served<c_int> {
        if let Some((_, of, b"")) = super::path::descriptor_link(path.to_bytes()) {
            return served(reopen(&of, flags, mode)?);
        }
        let Some(p) = fs_path_at_of(dirfd, path) else {
            // Out of the image through it (`..` from a working directory inside it).
            let k = kernel_path_at(dirfd, path)?;
            // SAFETY: a NUL-terminated path (inside the shim, libc's openat is the kernel's).
            let fd = unsafe { libc::openat(libc::AT_FDCWD, k.as_ptr(), flags, mode as c_uint) };
            return served(if fd >= 0 { Ok(fd) } else { Err(hashfs_interpose::errno()) });
        };
        served(do_open(&p, flags, mode))
    }

    fn close(fd: c_int, next: Next<'_, ()>) -> Served<()> {
        let standard = (0..=2).contains(&fd);
        let s = SHIM.get()?;
        if !s.is_ours(fd) && !standard {
            // A pump's own pipe end, which the program does not know (a close of every
            // descriptor it does not keep, as Python's subprocess child makes when
            // close_range refuses an empty range): kept, as `close_range` keeps it. The
            // shim's ends lie out of the program's way, from 100 up.
            if fd >= 100 && !super::pump::own_ends_in(fd as c_uint, fd as c_uint).is_empty() {
                return served(Ok(()));
            }
            // The image's descriptor (a ctFS view maps the image through it) or a read-only
            // participant's pins (`hashfs::pm::keep`): not the program's, as a number it
            // never opened.
            if fd >= 100 && hashfs::pm::is_kept(fd) {
                return served(Err(libc::EBADF));
            }
            kernel_descriptor_goes(fd);
            return None;
        }
        if s.is_ours(fd) {
            forget(s, fd);
        }
        let pump = if standard { take_pump(fd) } else { None };
        // Closing the placeholder (or the caller's own descriptor).
        let r = next.call();
        settle_pump(pump, fd);
        Some(r)
    }

    /// The shim's descriptors in the range are closed as by `close`; the pumps' own pipe
    /// ends in it are kept (a program does not know them: Python's subprocess child, a
    /// fork whose standard input or output is a file of the image, closed its pump's end
    /// before its exec, and the next program read nothing or its output was lost), and so
    /// are the image's descriptor and a read-only participant's pins (`hashfs::pm::keep`:
    /// a daemon closing every descriptor from 3 up would leave a ctFS view mapping the
    /// image through a closed number). Marking close-on-exec (CLOSE_RANGE_CLOEXEC) is the
    /// kernel's.
    fn close_range(first: c_uint, last: c_uint, flags: c_int, _: Next<'_, ()>) -> Served<()> {
        let s = SHIM.get()?;
        if flags & libc::CLOSE_RANGE_CLOEXEC as c_int != 0 || first > last {
            return None;
        }
        let mut keep = super::pump::own_ends_in(first, last);
        if last >= 100 {
            keep.extend(hashfs::pm::kept_in(first.max(100), last));
            keep.sort_unstable();
        }
        let ours: Vec<c_int> =
            s.fds.lock().keys().copied().filter(|&fd| fd > 2 && (first..=last).contains(&(fd as c_uint))).collect();
        if keep.is_empty() && ours.is_empty() {
            return None;
        }
        for fd in ours {
            forget(s, fd);
        }
        let base = BASE.load(Ordering::Relaxed);
        if base >= 0 && (first..=last).contains(&(base as c_uint)) {
            kernel_descriptor_goes(base);
        }
        let close_range = real!(close_range: fn(c_uint, c_uint, c_int) -> c_int);
        // The range in pieces between the kept ends (each end a descriptor number below
        // `last`, so `k + 1` does not overflow past it).
        let mut from = u64::from(first);
        for k in keep.into_iter().map(|k| k as u64) {
            if k > from {
                // SAFETY: closing descriptors by number, as the caller asked.
                unsafe { close_range(from as c_uint, (k - 1) as c_uint, flags) };
            }
            from = k + 1;
        }
        if from <= u64::from(last) {
            // SAFETY: as above.
            unsafe { close_range(from as c_uint, last, flags) };
        }
        served(Ok(()))
    }

    fn dup(fd: c_int, next: Next<'_, c_int>) -> Served<c_int> {
        // dup of the placeholder gives a fresh kernel number.
        Some(next.call().and_then(|n| dup_into(fd, n).map_err(Errno)))
    }

    fn dup3(fd: c_int, newfd: c_int, flags: Option<c_int>, next: Next<'_, c_int>) -> Served<c_int> {
        let s = SHIM.get()?;
        let from_ours = s.is_ours(fd);
        let standard = (0..=2).contains(&newfd);
        if fd != newfd && newfd >= 100 && hashfs::pm::is_kept(newfd) {
            // The image's descriptor (a ctFS view maps the image through it) or a read-only
            // participant's pins: replaced, the file system would go on through the
            // program's file. Linux's dup2 says EBUSY when it cannot take the number now.
            eprintln!("hashfs_preload: dup2 onto descriptor {newfd}, which the shim keeps for the image: EBUSY");
            return served(Err(libc::EBUSY));
        }
        if fd != newfd {
            kernel_descriptor_goes(newfd);
        }
        if fd == newfd || !(from_ours || standard || s.is_ours(newfd)) {
            return None; // dup2 of a descriptor onto itself, dup3's EINVAL, or none of ours
        }
        if standard && from_ours {
            // A HashFS file onto a standard descriptor: glibc's stdio writes it with its
            // internal write, which no preload sees, so it becomes a pipe pumped into the file.
            return served(match s.file(fd) {
                Some(of) if of.file.is_some() => match start_pump(of, newfd) {
                    n if n < 0 => Err(hashfs_interpose::errno()),
                    n => Ok(n),
                },
                Some(_) => Err(libc::EISDIR),
                None => Err(libc::EBADF),
            });
        }
        if !from_ours && s.is_ours(newfd) {
            forget(s, newfd);
        }
        // A standard descriptor that fed a file through a pump, replaced (a shell restoring
        // its stdout): the file gets what the pipe still holds before dup2 returns.
        let pump = if standard { take_pump(newfd) } else { None };
        // The kernel makes newfd a copy of fd's placeholder (dup3's flags apply to it).
        let _ = flags;
        let n = next.call();
        settle_pump(pump, newfd);
        if standard && !from_ours && n.is_ok() {
            super::pump::rejoin(newfd); // a kept copy of a pump's pipe, back in its place
        }
        Some(match n {
            Ok(n) if from_ours => dup_into(fd, n).map_err(Errno),
            r => r,
        })
    }

    fn fcntl(fd: c_int, cmd: c_int, arg: FcntlArg<'_>, next: Next<'_, c_int>) -> Served<c_int> {
        const F_GETSIG: c_int = 11; // <fcntl.h>'s, which the libc crate lacks
        let of = shim().file(fd)?;
        match (cmd, arg) {
            (libc::F_GETFL, _) => {
                served(Ok(of.flags.load(Ordering::Relaxed)
                    & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_CLOEXEC)))
            }
            (libc::F_SETFL, FcntlArg::Word(arg)) => {
                // The flags Linux lets F_SETFL change; O_DIRECT and O_ASYNC are kept and
                // shown (every access to the image is direct; a regular file raises no
                // SIGIO on the kernel's file systems either).
                const CHANGE: c_int = libc::O_APPEND | libc::O_NONBLOCK | libc::O_DIRECT | libc::O_ASYNC;
                let keep = of.flags.load(Ordering::Relaxed) & !CHANGE;
                of.flags.store(keep | (arg as c_int & CHANGE), Ordering::Relaxed);
                served(Ok(0))
            }
            // Through the kernel's lock manager, on the image's range for this file.
            (
                libc::F_SETLK
                | libc::F_SETLKW
                | libc::F_OFD_SETLK
                | libc::F_OFD_SETLKW
                | libc::F_GETLK
                | libc::F_OFD_GETLK,
                FcntlArg::Lock(l),
            ) => {
                let write_lock = l.l_type == libc::F_WRLCK as i16 && !matches!(cmd, libc::F_GETLK | libc::F_OFD_GETLK);
                let acc = of.flags.load(Ordering::Relaxed) & libc::O_ACCMODE;
                if write_lock && acc == libc::O_RDONLY {
                    return served(Err(libc::EBADF)); // a write lock needs a descriptor open for writing
                }
                if l.l_type == libc::F_RDLCK as i16
                    && acc == libc::O_WRONLY
                    && !matches!(cmd, libc::F_GETLK | libc::F_OFD_GETLK)
                {
                    return served(Err(libc::EBADF));
                }
                served(locks::fcntl_lock(&of, cmd, l))
            }
            // On the placeholder, then bound to the same open file.
            (libc::F_DUPFD | libc::F_DUPFD_CLOEXEC, _) => {
                Some(next.call().and_then(|n| dup_into(fd, n).map_err(Errno)))
            }
            // The descriptor's own flags: the placeholder's, at the same number.
            (libc::F_GETFD | libc::F_SETFD, _) => None,
            // No lease, no signal owner, the default signal: what the kernel says of a file
            // no one set them on (setting them is refused below).
            (libc::F_GETLEASE, _) => served(Ok(libc::F_UNLCK)),
            (libc::F_GETOWN | F_GETSIG, _) => served(Ok(0)),
            (libc::F_GETPIPE_SZ | libc::F_SETPIPE_SZ, _) => served(Err(libc::EBADF)), // not a pipe
            // Seals, leases, directory notifications, signal owners, write hints and
            // commands Linux does not know: not served on HashFS files, and EINVAL (the
            // answer of a file system without them) rather than the placeholder's.
            _ => served(Err(libc::EINVAL)),
        }
    }

    fn flock(fd: c_int, op: c_int, _: Next<'_, ()>) -> Served<()> {
        let of = shim().file(fd)?;
        served(locks::flock(&of, op))
    }
}
