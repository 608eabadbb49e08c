//! Directory streams (opendir, fdopendir, readdir, closedir, rewinddir, telldir, seekdir,
//! dirfd) and the
//! interposer's [`Streams`] calls, stdio's included (their work is in `stdio`).

use super::*;
use hashfs_interpose::{Errno, Handle, Next, Served, Streams};
use io::served;

pub struct DirStream {
    ino: Ino,
    entries: Vec<(Ino, FileType, CString)>,
    next: usize,
    fd: c_int,
    ent: libc::dirent64,
}

pub(super) fn open_dir_stream(path: &Path, fd: c_int) -> Result<*mut libc::DIR, c_int> {
    let s = shim();
    let fs = s.fs()?;
    // The name resolved and its entries read in one state of the image (`path::on_inode`).
    let (ino, entries) = super::path::on_inode_errno(fs, path, LastLink::Follow, super::path::Hold::Lock, |ino| {
        if !fs.peek_attr(ino).map_err(|e| e.errno())?.is_dir() {
            return Err(libc::ENOTDIR);
        }
        Ok((ino, list(fs, ino)?))
    })?;
    // SAFETY: dirent64 is plain data.
    let ds = Box::new(DirStream { ino, entries, next: 0, fd, ent: unsafe { std::mem::zeroed() } });
    let ptr = &*ds as *const DirStream as usize;
    s.dirs.lock().insert(ptr, ds);
    Ok(ptr as *mut libc::DIR)
}

/// Directory `ino`'s entries, "." and ".." first.
fn list(fs: &FileSystem<MmapDevice>, ino: Ino) -> Result<Vec<(Ino, FileType, CString)>, c_int> {
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
    Ok(entries)
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

impl Streams for Preload {
    fn claims_dir(d: usize) -> bool {
        SHIM.get().is_some_and(|s| s.dirs.lock().contains_key(&d))
    }

    /// The stream owns a descriptor of the directory, as glibc's does: `dirfd` gives it
    /// (perl's in-place edit renames its work file with `renameat` on it; a stream
    /// without one gave -1, and the rename failed with EBADF).
    fn opendir(path: &CStr, next: Next<'_, Handle>) -> Served<Handle> {
        let Some(p) = fs_path_of(path) else {
            // Out of the image through it (`ls ..` at its root): the kernel's stream.
            let k = kernel_path_at(libc::AT_FDCWD, path)?;
            // SAFETY: a NUL-terminated path (inside the shim, libc's opendir is the kernel's).
            let d = unsafe { libc::opendir(k.as_ptr()) };
            let _ = next;
            return served(if d.is_null() { Err(hashfs_interpose::errno()) } else { Ok(Handle(d as usize)) });
        };
        let fd = match fd::do_open(&p, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC, 0) {
            Ok(fd) => fd,
            Err(e) => return served(Err(e)),
        };
        let r = open_dir_stream(&p, fd);
        if r.is_err() {
            fd::close_own(fd);
        }
        served(r.map(|d| Handle(d as usize)))
    }

    fn fdopendir(fd: c_int, _: Next<'_, Handle>) -> Served<Handle> {
        let r = shim().file(fd).ok_or(libc::EBADF).and_then(|of| open_dir_stream(&super::path::dir_path_now(&of), fd));
        served(r.map(|d| Handle(d as usize)))
    }

    fn readdir(d: usize) -> Served<Handle> {
        served(Ok(Handle(next_entry(d as *mut libc::DIR) as usize)))
    }

    fn closedir(d: usize) -> Served<()> {
        let fd = shim().dirs.lock().remove(&d).map(|ds| ds.fd);
        if let Some(fd) = fd.filter(|&fd| fd >= 0) {
            fd::close_own(fd); // the descriptor the stream owned (fdopendir)
        }
        served(Ok(()))
    }

    /// Reads the directory again, as POSIX has rewinddir (names made or removed since the
    /// stream was opened show); a directory removed since has none.
    fn rewinddir(d: usize) -> Served<()> {
        let s = shim();
        let Some(ino) = s.dirs.lock().get(&d).map(|ds| ds.ino) else { return served(Ok(())) };
        let entries = s.fs().and_then(|fs| list(fs, ino)).unwrap_or_default();
        if let Some(ds) = s.dirs.lock().get_mut(&d) {
            (ds.entries, ds.next) = (entries, 0);
        }
        served(Ok(()))
    }

    /// A position is the index of the next entry in the stream's list (read whole at
    /// open), so a position `telldir` gave stays good until the stream is closed.
    fn telldir(d: usize) -> Served<hashfs_interpose::Offset> {
        served(shim().dirs.lock().get(&d).map(|ds| hashfs_interpose::Offset(ds.next as i64)).ok_or(libc::EBADF))
    }

    fn seekdir(d: usize, pos: libc::c_long) -> Served<()> {
        if let Some(ds) = shim().dirs.lock().get_mut(&d) {
            ds.next = usize::try_from(pos).unwrap_or(0).min(ds.entries.len());
        }
        served(Ok(()))
    }

    fn dirfd(d: usize) -> Served<c_int> {
        served(Ok(shim().dirs.lock().get(&d).map_or(-1, |ds| ds.fd)))
    }

    fn fopen(path: &CStr, mode: Result<&CStr, Errno>, _: Next<'_, Handle>) -> Served<Handle> {
        if let Some((_, of, b"")) = super::path::descriptor_link(path.to_bytes()) {
            // The descriptor's file, opened again by its inode.
            return Some(mode.and_then(|m| stdio::reopen(&of, m).map_err(Errno)));
        }
        let p = fs_path_of(path)?;
        Some(mode.and_then(|m| stdio::open(&p, m).map_err(Errno)))
    }

    fn fdopen(fd: c_int, mode: Result<&CStr, Errno>, _: Next<'_, Handle>) -> Served<Handle> {
        Some(mode.and_then(|m| stdio::stream_for(fd, m).ok_or_else(Errno::last)))
    }

    fn fileno(fp: usize) -> Served<c_int> {
        stdio::stream_fd(fp).map(Ok)
    }
}
