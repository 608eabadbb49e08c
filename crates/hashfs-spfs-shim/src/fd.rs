//! Descriptors: which opens are the stack's, closing, duplicating, fcntl, and stdio
//! streams (which glibc writes with its internal calls: a streamed file is written back
//! and pinned below while the stream is open).

use crate::*;
use hashfs_interpose::{Descriptors, Errno, FcntlArg, Handle, LastLink, Next, Served, Streams};
use hashfs_spfs::standalone::Made;
use libc::{mode_t, FILE};
use std::ffi::CStr;

/// A lower inode: (st_dev, st_ino).
type Key = (u64, u64);

/// (st_dev, st_ino) of `fd` if it is a regular file under the lower directory.
fn lower_key(fd: c_int) -> Option<Key> {
    lower_key_at(fd).map(|(key, _)| key)
}

/// (st_dev, st_ino) of the directory a file at `path` is in (the directory rule counts its
/// fsyncs there).
fn dir_key(path: &std::path::Path) -> Option<Key> {
    let m = std::fs::metadata(path.parent()?).ok()?;
    Some((std::os::unix::fs::MetadataExt::dev(&m), std::os::unix::fs::MetadataExt::ino(&m)))
}

/// [`lower_key`] and the file's path.
fn lower_key_at(fd: c_int) -> Option<(Key, std::path::PathBuf)> {
    let l = lower()?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: room for a struct stat.
    if unsafe { real!(fstat: fn(c_int, *mut libc::stat) -> c_int)(fd, st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: filled by a successful fstat.
    let st = unsafe { st.assume_init() };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_dev != l.dev {
        return None;
    }
    let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    path.starts_with(&l.path).then_some(((st.st_dev, st.st_ino), path))
}

fn is_regular(fd: c_int) -> bool {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: room for a struct stat; filled when fstat succeeds.
    unsafe {
        real!(fstat: fn(c_int, *mut libc::stat) -> c_int)(fd, st.as_mut_ptr()) == 0
            && st.assume_init().st_mode & libc::S_IFMT == libc::S_IFREG
    }
}

/// (st_dev, st_ino) of the regular file at `path`, if under the lower directory.
pub(crate) fn path_key(dirfd: c_int, path: &CStr, last: LastLink) -> Option<(u64, u64)> {
    let l = lower()?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    let flags = match last {
        LastLink::Follow => 0,
        LastLink::NoFollow => libc::AT_SYMLINK_NOFOLLOW,
    };
    // SAFETY: a NUL-terminated path; room for a struct stat.
    let r = unsafe {
        real!(fstatat: fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int)(
            dirfd,
            path.as_ptr(),
            st.as_mut_ptr(),
            flags,
        )
    };
    if r != 0 {
        return None;
    }
    // SAFETY: filled by a successful fstatat.
    let st = unsafe { st.assume_init() };
    (st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_dev == l.dev).then_some((st.st_dev, st.st_ino))
}

fn close_quietly(fd: c_int) {
    // SAFETY: a descriptor this call opened.
    unsafe { real!(close: fn(c_int) -> c_int)(fd) };
}

/// Why files under the lower directory cannot be served here.
fn refusal(s: &Stacked) -> c_int {
    if FORKED.load(Ordering::Relaxed) {
        return libc::EIO;
    }
    s.error.as_ref().map_or(libc::EIO, |&(_, errno)| errno)
}

/// After the kernel opened `fd`: a regular file under the lower directory is tracked
/// (or, where the stack cannot serve it, closed again with an error). `trunc`: O_TRUNC
/// was held back (some file is promoted), to be done here the stack's way.
fn adopt(fd: c_int, flags: c_int, trunc: bool) -> Result<c_int, Errno> {
    let Some((key, path)) = lower_key_at(fd) else {
        if trunc && is_regular(fd) {
            // SAFETY: the caller's new descriptor, opened for writing.
            if unsafe { real!(ftruncate: fn(c_int, libc::off_t) -> c_int)(fd, 0) } != 0 {
                let e = errno();
                close_quietly(fd);
                return Err(Errno(e));
            }
        }
        return Ok(fd);
    };
    let s = stacked();
    let stack = match &s.stack {
        Some(st) if !FORKED.load(Ordering::Relaxed) => st,
        _ => {
            close_quietly(fd);
            return Err(Errno(refusal(s)));
        }
    };
    if fd as usize >= FdSet::LIMIT {
        close_quietly(fd);
        return Err(Errno(libc::EMFILE));
    }
    let mut made_in_pm = false;
    if flags & libc::O_CREAT != 0 && (stack.cfg.dir_rule || stack.cfg.standalone) {
        // A file made with O_SYNC, O_DSYNC or O_DIRECT, with one of the extensions, in a
        // boosted directory or in one whose files sync often starts in PM (`standalone.rs`,
        // `dirs.rs`).
        if let (Some(dir), Some(parent), Some(name)) = (dir_key(&path), path.parent(), path.file_name()) {
            let made = Made { dir, dir_path: parent, name: name.as_encoded_bytes(), flags };
            made_in_pm = stack.created_in(&made, key, &view(fd));
        }
    } else if let Some(dir) = stack.cfg.dir_rule.then(|| dir_key(&path)).flatten() {
        stack.file_in(key, dir);
    }
    if !made_in_pm && flags & libc::O_ACCMODE != libc::O_RDONLY {
        // A file below written in a hot directory starts in PM if a syncfs settled it
        // (`settled.rs`).
        stack.opened_for_writing(key, &view(fd));
    }
    let cell = stack.opened(key);
    if trunc {
        let r = stack.truncate(&mut cell.lock(), &view(fd), 0);
        if let Err(e) = r {
            stack.closed(key, &cell);
            close_quietly(fd);
            return Err(Errno::of_io(&e));
        }
    }
    s.track(fd, Arc::new(Desc { key, cell, pos: AtomicI64::new(KERNEL_POS), flags: AtomicI32::new(flags) }));
    Ok(fd)
}

/// O_TRUNC is held back from the kernel when a file is promoted (the PM copy is cut
/// first, then the lower file); `adopt` does it.
fn held_trunc(flags: c_int) -> bool {
    flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY && hashfs_spfs::any_promoted()
}

/// The state if `fd` is tracked (inside the interposer's guard, where [`ours`] says no).
fn tracked(fd: c_int) -> Option<&'static Stacked> {
    STACKED.get().filter(|s| s.tracked(fd))
}

/// After the kernel made `newfd` a copy of `fd`: the same description.
fn copied(fd: c_int, newfd: c_int) {
    if newfd == fd {
        return;
    }
    if let Some(s) = tracked(fd) {
        if let Some(d) = s.desc(fd) {
            s.track(newfd, d);
        }
    }
}

impl Descriptors for Spfs {
    fn open(dirfd: c_int, path: &CStr, flags: c_int, _: mode_t, next: Next<'_, c_int, c_int>) -> Served<c_int> {
        if lower().is_none() || flags & libc::O_PATH != 0 {
            return None;
        }
        if flags & libc::O_CREAT != 0 {
            // A file made in PM that a crash lost below is made again first (the stack's
            // opening), not created anew beside it.
            opened_now(dirfd, path);
        }
        let mut trunc = held_trunc(flags);
        // O_TRUNC perhaps held back, for `adopt`.
        let mut fd = next.call_with(if trunc { flags & !libc::O_TRUNC } else { flags });
        if fd.as_ref().is_err_and(|e| e.0 == libc::ENOENT) && opened_now(dirfd, path) {
            trunc = held_trunc(flags); // the stack may have promoted files now
            fd = next.call_with(if trunc { flags & !libc::O_TRUNC } else { flags });
        }
        Some(fd.and_then(|fd| adopt(fd, flags, trunc)))
    }

    fn close(fd: c_int, _: Next<'_, ()>) -> Served<()> {
        if let Some(s) = tracked(fd) {
            s.untrack(fd);
        }
        None // the kernel's close, of the caller's descriptor
    }

    fn dup(fd: c_int, next: Next<'_, c_int>) -> Served<c_int> {
        let n = next.call();
        if let Ok(n) = n {
            copied(fd, n);
        }
        Some(n)
    }

    fn dup3(fd: c_int, newfd: c_int, _: Option<c_int>, next: Next<'_, c_int>) -> Served<c_int> {
        STACKED.get()?;
        // Before the kernel closes `newfd` to make it a copy of `fd`.
        if fd != newfd {
            if let Some(s) = tracked(newfd) {
                s.untrack(newfd);
            }
        }
        let n = next.call();
        if let Ok(n) = n {
            copied(fd, n);
        }
        Some(n)
    }

    fn fcntl(fd: c_int, cmd: c_int, arg: FcntlArg<'_>, next: Next<'_, c_int>) -> Served<c_int> {
        let r = next.call();
        if let Ok(n) = r {
            match (cmd, arg) {
                (libc::F_DUPFD | libc::F_DUPFD_CLOEXEC, _) => copied(fd, n),
                (libc::F_SETFL, FcntlArg::Word(arg)) => {
                    if let Some(d) = tracked(fd).and_then(|s| s.desc(fd)) {
                        let keep = d.flags.load(Ordering::Relaxed) & !(libc::O_APPEND | libc::O_NONBLOCK);
                        d.flags.store(keep | (arg as c_int & (libc::O_APPEND | libc::O_NONBLOCK)), Ordering::Relaxed);
                    }
                }
                _ => {}
            }
        }
        Some(r)
    }
}

// ---------------------------------------------------------------------------------------
// Streams.

/// Writes the file back if it is promoted and pins it below; the pin's cell, to unpin.
pub(crate) fn pin_below(stack: &Stack, cell: &Shared) -> Result<(), c_int> {
    let mut st = cell.lock();
    if st.pm.is_some() {
        stack.write_back_locked(&mut st).map_err(|e| Errno::of_io(&e).0)?;
    }
    st.pinned += 1;
    Ok(())
}

pub(crate) fn unpin(cell: &Shared) {
    let mut st = cell.lock();
    st.pinned = st.pinned.saturating_sub(1);
}

/// A stream about to be opened on `path`: an existing lower file is written back and
/// pinned first (a "w" stream truncates it in the kernel, which must find it whole).
fn stream_pin(path: &CStr) -> Result<Option<Shared>, c_int> {
    let Some(key) = path_key(libc::AT_FDCWD, path, LastLink::Follow) else { return Ok(None) };
    if !at_under(libc::AT_FDCWD, path, LastLink::Follow) {
        return Ok(None);
    }
    let s = stacked();
    let Some(stack) = s.stack.as_ref().filter(|_| !FORKED.load(Ordering::Relaxed)) else {
        return Err(refusal(s));
    };
    let cell = stack.state(key);
    pin_below(stack, &cell)?;
    Ok(Some(cell))
}

/// After a stream opened: a lower file created by it is pinned too.
fn stream_opened(fp: usize, pinned: Option<Shared>) {
    let cell = match pinned {
        Some(c) => c,
        None => {
            // SAFETY: a stream fopen just returned.
            let n = unsafe { libc::fileno(fp as *mut FILE) };
            let Some(key) = lower_key(n) else { return };
            let Some(stack) = &stacked().stack else { return };
            let cell = stack.state(key);
            if pin_below(stack, &cell).is_err() {
                return;
            }
            cell
        }
    };
    stacked().streams.lock().insert(fp, cell);
}

impl Streams for Spfs {
    fn opendir(path: &CStr, _: Next<'_, Handle>) -> Served<Handle> {
        lower()?;
        // A listing under the lower directory, before the stack is open, shows the files its
        // opening makes again (`hashfs-spfs/src/remake.rs`); the kernel lists.
        opened_now(libc::AT_FDCWD, path);
        None
    }

    fn fopen(path: &CStr, _: Result<&CStr, Errno>, next: Next<'_, Handle>) -> Served<Handle> {
        lower()?;
        let pinned = match stream_pin(path) {
            Ok(p) => p,
            Err(e) => return Some(Err(Errno(e))),
        };
        let fp = next.call();
        match fp {
            Ok(Handle(fp)) => stream_opened(fp, pinned),
            Err(_) => {
                if let Some(c) = &pinned {
                    unpin(c);
                }
            }
        }
        Some(fp)
    }

    fn fdopen(fd: c_int, _: Result<&CStr, Errno>, next: Next<'_, Handle>) -> Served<Handle> {
        let s = stacked();
        let d = s.desc(fd)?;
        let stack = s.stack.as_ref()?;
        if let Err(e) = pin_below(stack, &d.cell) {
            return Some(Err(Errno(e)));
        }
        // The stream reads and writes at the kernel's offset.
        io::kernel_pos(&d, fd);
        let fp = next.call();
        match fp {
            Ok(Handle(fp)) => {
                s.streams.lock().insert(fp, d.cell.clone());
            }
            Err(_) => unpin(&d.cell),
        }
        Some(fp)
    }

    fn fclose(fp: usize, _: Next<'_, ()>) -> Served<()> {
        let s = STACKED.get()?;
        // fclose closes the descriptor with glibc's internal close, which is not seen.
        // SAFETY: the caller's open stream.
        let fd = unsafe { libc::fileno(fp as *mut FILE) };
        if let Some(cell) = s.streams.lock().remove(&fp) {
            unpin(&cell);
        }
        s.untrack(fd);
        None // glibc's fclose, then
    }
}
