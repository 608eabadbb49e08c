//! Shared libraries in the image, for `dlopen` (`hashfs_interpose::Process::library`): the
//! dynamic loader opens and maps with its own system calls, so it is given a copy of the
//! library in a memfd, by its `/proc/self/fd` name.
//!
//! - **One copy per version of a file**, kept for the rest of the process: the loader
//!   recognizes a library it has loaded by the name it was given, so a second `dlopen` of
//!   the same file gets the same name (and the same handle), and a name is never given to
//!   two copies (a descriptor number the program closed and reused is skipped). A file
//!   changed since its copy (size, times, inode generation) gets a new copy.
//! - **What it needs from the image is loaded first**: each `DT_NEEDED` name is looked for
//!   as the loader would (`DT_RPATH` when there is no `DT_RUNPATH`, then `LD_LIBRARY_PATH`,
//!   then `DT_RUNPATH`; `$ORIGIN` is the library's directory in the image); one found in
//!   the image first is copied and loaded before it, so that the loader finds it by its
//!   `DT_SONAME` among the loaded ones. One without a `DT_SONAME` has its copy given one,
//!   the name it is needed by (`soname.rs`); where its file has no room for it, that is
//!   said on standard error, and the loader's error follows.
//! - **Programs** in the image that need libraries in the image when they start (their
//!   `DT_NEEDED`, resolved by the loader before any code of ours runs): the same search,
//!   with the exec's `LD_LIBRARY_PATH`, gives a kernel directory of links named as each is
//!   needed, to copies the exec keeps open ([`for_program`]; `hashfs_interpose::entry::linked`
//!   puts the directory first in the program's `LD_LIBRARY_PATH` and takes it away before
//!   `main`). There a library without a `DT_SONAME` is found too: by the link's name.

use super::*;
use hashfs_interpose::entry::library::Library;
use hashfs_interpose::entry::linked::Libraries;
use hashfs_interpose::{Errno, Served};
use object::elf::{FileHeader64, DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME};
use object::read::elf::{Dyn, FileHeader};
use object::Endianness;
use std::os::unix::ffi::OsStringExt;

/// Libraries in the image a load may pull in, the first included (a chain of `DT_NEEDED`
/// deeper than this is refused: ELOOP).
const MAX_LIBRARIES: usize = 64;

/// A version of an image file, copied.
struct Copied {
    /// The file and the version copied: inode, generation, size, modification and change times.
    version: (Ino, u32, u64, i64, i64),
    /// The memfd and its inode number (a descriptor the program closed and reused is not it).
    fd: c_int,
    memfd_ino: u64,
    /// `/proc/self/fd/N`, for the loader.
    name: &'static CStr,
    /// What the library needs: `DT_NEEDED`, and its search paths.
    dynamic: Dynamic,
}

/// The parts of a library's dynamic section the search uses.
#[derive(Clone, Default)]
struct Dynamic {
    needed: Vec<Vec<u8>>,
    rpath: Option<Vec<u8>>,
    runpath: Option<Vec<u8>>,
    has_soname: bool,
}

/// Copies made in this process, and every descriptor number ever named to the loader.
pub(super) struct Copies {
    copies: Vec<Copied>,
    named: Vec<c_int>,
    /// Paths out of the image that links in it led to, given to the loader (each kept
    /// once, for the process's life).
    outside: Vec<&'static CStr>,
}

/// A lock a forked child can let go of (`hashfs::ForkMutex`: parking_lot's may be handed
/// to a parked thread of the parent's at its unlock).
static COPIES: hashfs::ForkMutex<Copies> =
    hashfs::ForkMutex::new(Copies { copies: Vec::new(), named: Vec::new(), outside: Vec::new() });

/// The copies' lock, held across a `fork` (`fork::before_fork`) so that a child never
/// inherits it locked by a thread it does not have.
pub(super) fn held_for_fork() -> hashfs::ForkMutexGuard<'static, Copies> {
    COPIES.lock()
}

pub(super) fn library(path: &CStr) -> Served<Library> {
    let p = fs_path_of(path)?;
    let fs = match shim().fs() {
        Ok(fs) => fs,
        Err(e) => return Some(Err(Errno(e))),
    };
    Some(load_order(fs, &p).map_err(Errno))
}

/// An image file opened to be copied: its inode, its attributes, and the file open for
/// reading where it is a regular file the caller may read.
struct Opened {
    ino: Ino,
    md: Metadata,
    file: Option<File<MmapDevice>>,
}

/// The file at image path `p` ([`Opened`]), the name resolved and the file opened under
/// one hold of the image (as an exec's, `program.rs`), so that another process's rename of
/// a new build over it cannot free the inode between the two (ESTALE), nor give its number
/// to another file (whose bytes the copy would take). A link out of the image is
/// `Error::LinkOutside`. Under the copies' lock or before it: a fork takes that lock
/// before the image's.
fn open_at(fs: &FileSystem<MmapDevice>, p: &Path) -> hashfs::Result<Opened> {
    let open = || {
        let ino = fs.resolve(p)?;
        let md = fs.peek_attr(ino)?;
        let readable = md.file_type == FileType::Regular && permitted(&md, libc::R_OK);
        let file = match readable {
            true => Some(fs.open_ino(ino, Access { read: true, write: false, append: false })?),
            false => None,
        };
        Ok(Opened { ino, md, file })
    };
    following_out(|| super::path::holding(fs, super::path::Hold::Lock, open))
}

/// The copy of the library at `p` and those of the libraries in the image it needs.
fn load_order(fs: &FileSystem<MmapDevice>, p: &Path) -> Result<Library, c_int> {
    let opened = match open_at(fs, p) {
        // A link out of the image: the loader opens what it leads to.
        Err(Error::LinkOutside(out)) => {
            let out = CString::new(out).map_err(|_| libc::EINVAL)?;
            let mut copies = COPIES.lock();
            let path = match copies.outside.iter().find(|o| o.to_bytes() == out.to_bytes()) {
                Some(kept) => *kept,
                None => {
                    let kept: &'static CStr = Box::leak(out.into_boxed_c_str());
                    copies.outside.push(kept);
                    kept
                }
            };
            return Ok(Library { path, first: Vec::new() });
        }
        r => r.map_err(|e| e.errno())?,
    };
    let mut copies = COPIES.lock();
    let mut seen = vec![opened.ino];
    let mut deps = Vec::new();
    let copy = copy_of(&mut copies, opened, p)?;
    let env = std::env::var_os("LD_LIBRARY_PATH").map(OsStringExt::into_vec);
    needs(&mut copies, fs, origin_of(p).as_deref(), &copy.dynamic, env.as_deref(), &mut seen, &mut deps)?;
    let named = shown(p);
    for d in deps.iter().filter(|d| !d.copy.dynamic.has_soname && !named_as(&mut copies, d)) {
        eprintln!(
            "hashfs shim: dlopen of {}: it needs {}, found in the image without a DT_SONAME, by which alone \
             the loader could take the copy given it (the load fails; through `hashfs mount` it works)",
            named.display(),
            shown(&d.path).display()
        );
    }
    Ok(Library { path: copy.name, first: deps.into_iter().map(|d| d.copy.name).collect() })
}

/// Gives dependency `d`'s copy, which has no `DT_SONAME`, the name it is needed by
/// (`soname.rs`), so that the loader takes the copy loaded first for it; false when it
/// could not.
fn named_as(copies: &mut Copies, d: &Dep) -> bool {
    let fd = d.copy.fd;
    let Some(st) = stat_of(fd) else { return false };
    let len = st.st_size as usize;
    let mut data = vec![0u8; len];
    // SAFETY: our own descriptor, `len` bytes into a buffer of `len` bytes.
    if unsafe { libc::pread(fd, data.as_mut_ptr().cast(), len, 0) } != len as isize {
        return false;
    }
    if !super::soname::give_soname(&mut data, &d.needed) {
        return false;
    }
    // SAFETY: as above, written back whole.
    if unsafe { libc::pwrite(fd, data.as_ptr().cast(), len, 0) } != len as isize {
        return false;
    }
    for c in copies.copies.iter_mut().filter(|c| c.fd == fd) {
        c.dynamic.has_soname = true;
    }
    true
}

/// `$ORIGIN` of the library or program at image path `p`: its directory as the program
/// names it.
fn origin_of(p: &Path) -> Option<PathBuf> {
    shown(p).parent().map(Path::to_path_buf)
}

/// Image path `p` as the program names it (under the prefix).
fn shown(p: &Path) -> PathBuf {
    prefix().unwrap_or(Path::new("/")).join(p.strip_prefix("/").unwrap_or(p))
}

/// The libraries in the image that a program at image path `p` (its copy in memfd `fd`,
/// `len` bytes) needs when it starts, with `LD_LIBRARY_PATH` `env` (the exec's): a kernel
/// directory of links named as they are needed, each to `/proc/self/fd/N`, a copy kept
/// open for the exec (`hashfs_interpose::entry::linked`). None: it needs none of the image's.
pub(super) fn for_program(
    fs: &FileSystem<MmapDevice>,
    p: &Path,
    fd: c_int,
    len: u64,
    env: Option<&[u8]>,
) -> Result<Option<Libraries>, c_int> {
    linked(fs, origin_of(p).as_deref(), fd, len, env)
}

/// The libraries in the image that a program the kernel runs, at kernel path `path`,
/// needs when it starts, found along `LD_LIBRARY_PATH` `env` (the exec's): as
/// [`for_program`]'s. None (nothing done) unless `env` names a directory of the image.
pub(super) fn for_kernel_program(path: &CStr, env: &CStr) -> Served<Libraries> {
    let dirs = env.to_bytes().split(|&b| b == b':' || b == b';');
    if !dirs.filter_map(|d| CString::new(d).ok()).any(|d| fs_path_of(&d).is_some()) {
        return None;
    }
    let fs = shim().fs().ok()?;
    // SAFETY: a NUL-terminated path (inside the shim, libc's open is the kernel's).
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None; // the exec says why
    }
    let len = stat_of(fd).map_or(0, |st| st.st_size as u64);
    let origin = Path::new(std::ffi::OsStr::from_bytes(path.to_bytes())).parent().map(Path::to_path_buf);
    let r = linked(fs, origin.as_deref(), fd, len, Some(env.to_bytes()));
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
    r.transpose().map(|r| r.map_err(Errno))
}

/// [`for_program`] for a program whose copy (or file) is `fd`, `len` bytes, with
/// `$ORIGIN` `origin`.
fn linked(
    fs: &FileSystem<MmapDevice>,
    origin: Option<&Path>,
    fd: c_int,
    len: u64,
    env: Option<&[u8]>,
) -> Result<Option<Libraries>, c_int> {
    let dynamic = dynamic_of(fd, len);
    if dynamic.needed.is_empty() {
        return Ok(None);
    }
    let mut copies = COPIES.lock();
    let mut deps = Vec::new();
    needs(&mut copies, fs, origin, &dynamic, env, &mut Vec::new(), &mut deps)?;
    drop(copies);
    if deps.is_empty() {
        return Ok(None);
    }
    let base = if Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
    sweep_links(Path::new(base));
    let mut template = format!("{base}/hashfs-libs.XXXXXX\0").into_bytes();
    // SAFETY: a NUL-terminated template, written in place (inside the shim, the kernel's mkdir).
    if unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) }.is_null() {
        return Err(hashfs_interpose::errno());
    }
    template.pop();
    let dir = PathBuf::from(std::ffi::OsString::from_vec(template));
    let mut libs =
        Libraries { dir: CString::new(dir.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?, fds: Vec::new() };
    let mut made = Vec::new();
    for d in deps {
        if made.contains(&d.needed) {
            continue; // the first one found, as the loader takes
        }
        // SAFETY: our own descriptor, copied without close-on-exec for the exec, high (out of
        // the program's way) unless the descriptor limit is lower.
        let inherited = match unsafe { libc::fcntl(d.copy.fd, libc::F_DUPFD, 900) } {
            // SAFETY: as above.
            -1 if hashfs_interpose::errno() == libc::EINVAL => unsafe { libc::fcntl(d.copy.fd, libc::F_DUPFD, 3) },
            fd => fd,
        };
        let link = dir.join(std::ffi::OsStr::from_bytes(&d.needed));
        if inherited < 0 || std::os::unix::fs::symlink(format!("/proc/self/fd/{inherited}"), &link).is_err() {
            let e = if inherited < 0 { hashfs_interpose::errno() } else { libc::EIO };
            if inherited >= 0 {
                // SAFETY: our own descriptor.
                unsafe { libc::close(inherited) };
            }
            for fd in &libs.fds {
                // SAFETY: our own descriptors.
                unsafe { libc::close(*fd) };
            }
            for m in &made {
                let _ = std::fs::remove_file(dir.join(std::ffi::OsStr::from_bytes(m)));
            }
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
        libs.fds.push(inherited);
        made.push(d.needed);
    }
    Ok(Some(libs))
}

/// Removes this user's directories of links (`for_program`'s) in `base` that are a minute
/// old: a program started with one whose own shim did not run (its exec's environment did
/// not preload it) left it there; any other's loader is done with it long before.
fn sweep_links(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    // SAFETY: no preconditions.
    let euid = unsafe { libc::geteuid() };
    let old =
        |m: &std::fs::Metadata| m.modified().ok().and_then(|t| t.elapsed().ok()).is_some_and(|a| a.as_secs() >= 60);
    for e in entries.flatten() {
        if !e.file_name().as_bytes().starts_with(b"hashfs-libs.") {
            continue;
        }
        let Ok(m) = std::fs::symlink_metadata(e.path()) else { continue };
        if !m.is_dir() || std::os::unix::fs::MetadataExt::uid(&m) != euid || !old(&m) {
            continue;
        }
        if let Ok(links) = std::fs::read_dir(e.path()) {
            for l in links.flatten() {
                if l.file_type().is_ok_and(|t| t.is_symlink()) {
                    let _ = std::fs::remove_file(l.path());
                }
            }
        }
        let _ = std::fs::remove_dir(e.path());
    }
}

/// A library in the image that another needs: the name it is needed by, its image path
/// and its copy.
struct Dep {
    needed: Vec<u8>,
    path: PathBuf,
    copy: Got,
}

/// Appends to `deps`, deepest first, what an object at image path `p` with `dynamic` needs
/// from the image, searched with `LD_LIBRARY_PATH` `env` (`seen`: the inodes already placed).
fn needs(
    copies: &mut Copies,
    fs: &FileSystem<MmapDevice>,
    origin: Option<&Path>,
    dynamic: &Dynamic,
    env: Option<&[u8]>,
    seen: &mut Vec<Ino>,
    deps: &mut Vec<Dep>,
) -> Result<(), c_int> {
    let dirs = search_dirs(dynamic, origin, env);
    for needed in &dynamic.needed {
        if needed.contains(&b'/') {
            continue; // a path: the loader opens it as it is
        }
        let Some((path, opened)) = find(fs, &dirs, needed) else { continue };
        if seen.contains(&opened.ino) {
            continue;
        }
        if seen.len() >= MAX_LIBRARIES {
            return Err(libc::ELOOP);
        }
        seen.push(opened.ino);
        let copy = copy_of(copies, opened, &path)?;
        needs(copies, fs, origin_of(&path).as_deref(), &copy.dynamic, env, seen, deps)?;
        deps.push(Dep { needed: needed.clone(), path, copy });
    }
    Ok(())
}

/// The directories the loader searches for a library's `DT_NEEDED` names before its
/// cache and the system's (ld.so(8)): `DT_RPATH` (only without `DT_RUNPATH`),
/// `LD_LIBRARY_PATH`, `DT_RUNPATH`. `$ORIGIN` is `origin`; a directory with another
/// token (`$LIB`, `$PLATFORM`) is left out. `env`: `LD_LIBRARY_PATH`.
fn search_dirs(dynamic: &Dynamic, origin: Option<&Path>, env: Option<&[u8]>) -> Vec<PathBuf> {
    let rpath = if dynamic.runpath.is_none() { dynamic.rpath.as_deref() } else { None };
    let lists = [rpath, env, dynamic.runpath.as_deref()];
    let mut dirs = Vec::new();
    for list in lists.into_iter().flatten() {
        for d in list.split(|&b| b == b':' || b == b';') {
            let d = if d.is_empty() { &b"."[..] } else { d };
            let expanded = match origin {
                Some(o) => {
                    let o = o.as_os_str().as_bytes();
                    let mut out = d.to_vec();
                    for token in [&b"${ORIGIN}"[..], b"$ORIGIN"] {
                        while let Some(i) = out.windows(token.len()).position(|w| w == token) {
                            out.splice(i..i + token.len(), o.iter().copied());
                        }
                    }
                    out
                }
                None => d.to_vec(),
            };
            if !expanded.contains(&b'$') {
                dirs.push(PathBuf::from(std::ffi::OsString::from_vec(expanded)));
            }
        }
    }
    dirs
}

/// Where the loader would find `name` along `dirs`, if that is in the image: its path in
/// the image, and the file there ([`open_at`]). None when a kernel directory has it first,
/// or none has it.
fn find(fs: &FileSystem<MmapDevice>, dirs: &[PathBuf], name: &[u8]) -> Option<(PathBuf, Opened)> {
    for d in dirs {
        let candidate = d.join(std::ffi::OsStr::from_bytes(name));
        let Ok(c) = CString::new(candidate.as_os_str().as_bytes()) else { continue };
        match fs_path_of(&c) {
            Some(ip) => {
                if let Ok(opened) = open_at(fs, &ip) {
                    if opened.md.file_type == FileType::Regular {
                        return Some((ip, opened));
                    }
                }
            }
            // A shim's own call: the kernel's file system.
            None if candidate.is_file() => return None,
            None => {}
        }
    }
    None
}

/// A copy: the loader's name for it, its descriptor (close-on-exec) and its dynamic section.
struct Got {
    name: &'static CStr,
    fd: c_int,
    dynamic: Dynamic,
}

/// The loader's name for the copy of the file `opened` (at image path `p`) as it is now,
/// made if there is none, and its dynamic section.
fn copy_of(copies: &mut Copies, opened: Opened, p: &Path) -> Result<Got, c_int> {
    let Opened { ino, md, file } = opened;
    if md.file_type != FileType::Regular {
        return Err(libc::ENOEXEC);
    }
    let file = file.ok_or(libc::EACCES)?;
    let version = (ino, md.generation, md.size, md.mtime_ns, md.ctime_ns);
    if let Some(c) = copies.copies.iter().find(|c| c.version == version && memfd_ino(c.fd) == Some(c.memfd_ino)) {
        return Ok(Got { name: c.name, fd: c.fd, dynamic: c.dynamic.clone() });
    }
    let mut fd = super::program::memfd_copy(&file, p)?;
    if copies.named.contains(&fd) {
        // A number the loader knows by another copy: this one goes above every named one.
        let above = copies.named.iter().max().copied().unwrap_or(0) + 1;
        // SAFETY: our own descriptor.
        let moved = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, above) };
        // SAFETY: our own descriptor, replaced by `moved` (or failed).
        unsafe { libc::close(fd) };
        if moved < 0 {
            return Err(hashfs_interpose::errno());
        }
        fd = moved;
    }
    let (Some(ino_of_copy), dynamic) = (memfd_ino(fd), dynamic_of(fd, md.size)) else {
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        return Err(libc::EIO);
    };
    let name = CString::new(format!("/proc/self/fd/{fd}")).map_err(|_| libc::EINVAL)?;
    let name: &'static CStr = Box::leak(name.into_boxed_c_str());
    copies.named.push(fd);
    copies.copies.retain(|c| c.version.0 != ino || memfd_ino(c.fd) == Some(c.memfd_ino));
    copies.copies.push(Copied { version, fd, memfd_ino: ino_of_copy, name, dynamic: dynamic.clone() });
    Ok(Got { name, fd, dynamic })
}

/// The inode number of descriptor `fd` (the kernel's).
fn memfd_ino(fd: c_int) -> Option<u64> {
    stat_of(fd).map(|st| st.st_ino)
}

/// The kernel's fstat of our descriptor `fd`.
fn stat_of(fd: c_int) -> Option<libc::stat> {
    // SAFETY: an all-zero stat is a valid buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above (a shim's own call: the kernel's fstat).
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st)
}

/// The dynamic section of the ELF file in memfd `fd` (`len` bytes), read through a private
/// mapping of it. Not ELF, or without a dynamic section: nothing needed (the loader says
/// what is wrong with it).
fn dynamic_of(fd: c_int, len: u64) -> Dynamic {
    if len == 0 {
        return Dynamic::default();
    }
    // SAFETY: a read-only private mapping of our own descriptor, unmapped below.
    let at = unsafe { libc::mmap(std::ptr::null_mut(), len as usize, libc::PROT_READ, libc::MAP_PRIVATE, fd, 0) };
    if at == libc::MAP_FAILED {
        return Dynamic::default();
    }
    // SAFETY: the mapping just made, `len` bytes, alive until the munmap below.
    let data = unsafe { std::slice::from_raw_parts(at as *const u8, len as usize) };
    let d = parse_dynamic(data).unwrap_or_default();
    // SAFETY: the mapping made above, no longer borrowed.
    unsafe { libc::munmap(at, len as usize) };
    d
}

/// `DT_NEEDED`, `DT_RPATH`, `DT_RUNPATH` and whether there is a `DT_SONAME`, from a 64-bit
/// ELF file's section headers.
fn parse_dynamic(data: &[u8]) -> Option<Dynamic> {
    let header = FileHeader64::<Endianness>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, data).ok()?;
    let (entries, link) = sections.dynamic(endian, data).ok()??;
    let strings = sections.strings(endian, data, link).ok()?;
    let mut d = Dynamic::default();
    for e in entries {
        let s = || e.string(endian, strings).ok().map(<[u8]>::to_vec);
        match e.tag(endian) {
            DT_NEEDED => d.needed.extend(s()),
            DT_RPATH => d.rpath = s(),
            DT_RUNPATH => d.runpath = s(),
            DT_SONAME => d.has_soname = true,
            _ => {}
        }
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `$ORIGIN` in both spellings, the order of the three lists, RPATH ignored beside
    /// RUNPATH, and a directory with another token left out.
    #[test]
    fn search_directories_follow_the_loaders_order() {
        let env = Some(&b"/env/a:/env/$LIB"[..]);
        let d = Dynamic {
            rpath: Some(b"/rpath".to_vec()),
            runpath: Some(b"$ORIGIN/../lib:${ORIGIN}:/run".to_vec()),
            ..Dynamic::default()
        };
        let got = search_dirs(&d, Some(Path::new("/pm/x")), env);
        let want: Vec<PathBuf> = ["/env/a", "/pm/x/../lib", "/pm/x", "/run"].iter().map(PathBuf::from).collect();
        assert_eq!(got, want);
        let d = Dynamic { rpath: Some(b"/rpath".to_vec()), ..Dynamic::default() };
        assert_eq!(search_dirs(&d, None, env)[0], PathBuf::from("/rpath"));
    }

    /// The dynamic section of this test's own libc: it needs ld-linux and has a soname.
    #[test]
    fn a_system_librarys_dynamic_section_reads() {
        let Some(libc_path) = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"]
            .into_iter()
            .find(|p| Path::new(p).exists())
        else {
            return;
        };
        let d = parse_dynamic(&std::fs::read(libc_path).unwrap()).unwrap();
        assert!(d.has_soname);
        assert!(d.needed.iter().any(|n| n.starts_with(b"ld-linux")), "{:?}", d.needed);
        assert!(parse_dynamic(b"not an ELF file").is_none());
    }
}
