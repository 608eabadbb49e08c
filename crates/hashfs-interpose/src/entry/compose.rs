//! libc functions that glibc builds on its own internal calls, which no preload sees:
//! `remove`, `scandir`, `glob`, `nftw`/`ftw`, `freopen`, `pathconf` and `ftok`. Before these were served, each
//! took a path of the backend's to the kernel (`remove` and `scandir` said ENOENT, `glob`
//! matched nothing, `nftw` walked nothing) and `freopen` of a backend's stream crashed.
//! Here each is composed of the interposed calls, which route every path and descriptor
//! as the program's own calls do, when its path starts in the backend's files (or its
//! stream is the backend's); any other call is libc's, unchanged.

use super::{fd, names, process, starts_in_backend, stat, streams};
use crate::call::c_str;
use crate::{errno, forward, set_errno, Backend};
use libc::{c_char, c_int, c_void, dirent64, size_t, DIR, FILE};
use std::ffi::{CStr, CString};

/// scandir's filter.
pub type Filter = Option<unsafe extern "C" fn(*const dirent64) -> c_int>;
/// scandir's comparison of two entries.
pub type Compare = Option<unsafe extern "C" fn(*mut *const dirent64, *mut *const dirent64) -> c_int>;

pub unsafe fn remove<B: Backend>(path: *const c_char) -> c_int {
    // SAFETY: remove's contract: path is a NUL-terminated string.
    if !unsafe { c_str(path) }.is_some_and(starts_in_backend::<B>) {
        return forward!(remove(path): fn(*const c_char) -> c_int);
    }
    // As glibc's: unlink, and a directory's EISDIR tries rmdir.
    // SAFETY: the caller's path, as above.
    if unsafe { names::unlink::<B>(path) } == 0 {
        return 0;
    }
    if errno() != libc::EISDIR {
        return -1;
    }
    // SAFETY: as above.
    unsafe { names::rmdir::<B>(path) }
}

pub unsafe fn scandir<B: Backend>(
    dir: *const c_char,
    list: *mut *mut *mut dirent64,
    filter: Filter,
    compar: Compare,
) -> c_int {
    // SAFETY: scandir's contract: dir is a NUL-terminated string.
    if !unsafe { c_str(dir) }.is_some_and(starts_in_backend::<B>) {
        return forward!(scandir(dir, list, filter, compar): fn(*const c_char, *mut *mut *mut dirent64, Filter, Compare) -> c_int);
    }
    // SAFETY: the caller's arguments, as scandirat's contract has them.
    unsafe { scan::<B>(libc::AT_FDCWD, dir, list, filter, compar) }
}

pub unsafe fn scandirat<B: Backend>(
    dirfd: c_int,
    dir: *const c_char,
    list: *mut *mut *mut dirent64,
    filter: Filter,
    compar: Compare,
) -> c_int {
    // SAFETY: scandirat's contract: dir is a NUL-terminated string.
    let ours = unsafe { c_str(dir) }.is_some_and(|p| {
        if dirfd == libc::AT_FDCWD || p.to_bytes().first() == Some(&b'/') {
            starts_in_backend::<B>(p)
        } else {
            B::claims(dirfd)
        }
    });
    if !ours {
        return forward!(scandirat(dirfd, dir, list, filter, compar): fn(c_int, *const c_char, *mut *mut *mut dirent64, Filter, Compare) -> c_int);
    }
    // SAFETY: as above.
    unsafe { scan::<B>(dirfd, dir, list, filter, compar) }
}

/// scandirat's work: the entries `filter` keeps, each in memory of its own from malloc,
/// sorted by `compar`, in an array from malloc (the caller frees them all, as glibc's).
unsafe fn scan<B: Backend>(
    dirfd: c_int,
    dir: *const c_char,
    list: *mut *mut *mut dirent64,
    filter: Filter,
    compar: Compare,
) -> c_int {
    if list.is_null() {
        return crate::fail(libc::EFAULT);
    }
    // SAFETY: the caller's path; the descriptor and stream are the ones just made.
    let d = unsafe {
        let fd = fd::openat::<B>(dirfd, dir, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC, 0);
        if fd < 0 {
            return -1;
        }
        let d = streams::fdopendir::<B>(fd);
        if d.is_null() {
            let e = errno();
            fd::close::<B>(fd);
            return crate::fail(e);
        }
        d
    };
    let mut kept: Vec<*mut dirent64> = Vec::new();
    // SAFETY: each entry is from malloc, freed once.
    let free_all = |kept: &[*mut dirent64]| kept.iter().for_each(|&e| unsafe { libc::free(e.cast()) });
    let failed = loop {
        set_errno(0);
        // SAFETY: the stream made above.
        let e = unsafe { streams::readdir64::<B>(d) };
        if e.is_null() {
            break (errno() != 0).then(errno);
        }
        // SAFETY: the caller's filter, given the entry, valid until the next readdir.
        if filter.is_some_and(|f| unsafe { f(e) } == 0) {
            continue;
        }
        // SAFETY: a whole dirent64 from malloc, filled from the entry.
        let copy = unsafe { libc::malloc(std::mem::size_of::<dirent64>()) }.cast::<dirent64>();
        if copy.is_null() {
            break Some(libc::ENOMEM);
        }
        // SAFETY: both are whole dirent64s.
        unsafe { std::ptr::copy_nonoverlapping(e, copy, 1) };
        kept.push(copy);
    };
    // SAFETY: the stream made above, closed once (its descriptor with it).
    unsafe { streams::closedir::<B>(d) };
    let n = kept.len();
    // SAFETY: an array of n pointers from malloc (one at least, as glibc's is never null).
    let arr = unsafe { libc::malloc(n.max(1) * std::mem::size_of::<*mut dirent64>()) }.cast::<*mut dirent64>();
    if let Some(e) = failed.or(arr.is_null().then_some(libc::ENOMEM)) {
        free_all(&kept);
        if !arr.is_null() {
            // SAFETY: from malloc above.
            unsafe { libc::free(arr.cast()) };
        }
        return crate::fail(e);
    }
    // SAFETY: arr holds n pointers; qsort's comparison gets pointers to two of them, as
    // scandir's (const struct dirent **) comparison expects.
    unsafe {
        std::ptr::copy_nonoverlapping(kept.as_ptr(), arr, n);
        if let Some(c) = compar {
            let c: unsafe extern "C" fn(*const c_void, *const c_void) -> c_int = std::mem::transmute(c);
            libc::qsort(arr.cast(), n, std::mem::size_of::<*mut dirent64>(), Some(c));
        }
        *list = arr;
    }
    n as c_int
}

/// glibc's `glob_t` (64-bit): the directory functions it calls with GLOB_ALTDIRFUNC.
#[repr(C)]
pub struct Glob {
    pathc: size_t,
    pathv: *mut *mut c_char,
    offs: size_t,
    flags: c_int,
    closedir: Option<unsafe extern "C" fn(*mut c_void)>,
    readdir: Option<unsafe extern "C" fn(*mut c_void) -> *mut dirent64>,
    opendir: Option<unsafe extern "C" fn(*const c_char) -> *mut c_void>,
    lstat: Option<unsafe extern "C" fn(*const c_char, *mut libc::stat) -> c_int>,
    stat: Option<unsafe extern "C" fn(*const c_char, *mut libc::stat) -> c_int>,
}

/// glob's error callback.
pub type GlobErr = Option<unsafe extern "C" fn(*const c_char, c_int) -> c_int>;

const GLOB_ALTDIRFUNC: c_int = 1 << 9;

/// glob: libc's own matching, its directory reads and stats through the interposed
/// calls (GLOB_ALTDIRFUNC), so that a pattern in the backend's files matches its names.
pub unsafe fn glob<B: Backend>(pattern: *const c_char, flags: c_int, errfunc: GlobErr, g: *mut Glob) -> c_int {
    // SAFETY: glob's contract: pattern is a NUL-terminated string.
    let ours = unsafe { c_str(pattern) }.is_some_and(starts_in_backend::<B>);
    if ours && flags & GLOB_ALTDIRFUNC == 0 && !g.is_null() {
        // SAFETY: g is the caller's glob_t, glibc's layout.
        unsafe {
            (*g).closedir = Some(alt_closedir::<B>);
            (*g).readdir = Some(alt_readdir::<B>);
            (*g).opendir = Some(alt_opendir::<B>);
            (*g).lstat = Some(alt_lstat::<B>);
            (*g).stat = Some(alt_stat::<B>);
        }
        let flags = flags | GLOB_ALTDIRFUNC;
        return forward!(glob(pattern, flags, errfunc, g): fn(*const c_char, c_int, GlobErr, *mut Glob) -> c_int);
    }
    forward!(glob(pattern, flags, errfunc, g): fn(*const c_char, c_int, GlobErr, *mut Glob) -> c_int)
}

unsafe extern "C" fn alt_opendir<B: Backend>(p: *const c_char) -> *mut c_void {
    // SAFETY: glob passes a NUL-terminated path.
    unsafe { streams::opendir::<B>(p) }.cast()
}

unsafe extern "C" fn alt_readdir<B: Backend>(d: *mut c_void) -> *mut dirent64 {
    // SAFETY: a stream alt_opendir made.
    unsafe { streams::readdir64::<B>(d.cast::<DIR>()) }
}

unsafe extern "C" fn alt_closedir<B: Backend>(d: *mut c_void) {
    // SAFETY: as above.
    unsafe { streams::closedir::<B>(d.cast::<DIR>()) };
}

unsafe extern "C" fn alt_stat<B: Backend>(p: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: glob passes a path and a stat buffer.
    unsafe { stat::stat::<B>(p, st) }
}

unsafe extern "C" fn alt_lstat<B: Backend>(p: *const c_char, st: *mut libc::stat) -> c_int {
    // SAFETY: as above.
    unsafe { stat::lstat::<B>(p, st) }
}

/// nftw's `struct FTW`.
#[repr(C)]
pub struct Ftw {
    base: c_int,
    level: c_int,
}

/// nftw's callback.
pub type NftwFn = Option<unsafe extern "C" fn(*const c_char, *const libc::stat, c_int, *mut Ftw) -> c_int>;
/// ftw's callback.
pub type FtwFn = Option<unsafe extern "C" fn(*const c_char, *const libc::stat, c_int) -> c_int>;

const FTW_PHYS: c_int = 1;
const FTW_MOUNT: c_int = 2;
const FTW_CHDIR: c_int = 4;
const FTW_DEPTH: c_int = 8;
const FTW_ACTIONRETVAL: c_int = 16;
const FTW_F: c_int = 0;
const FTW_D: c_int = 1;
const FTW_DNR: c_int = 2;
const FTW_NS: c_int = 3;
const FTW_SL: c_int = 4;
const FTW_DP: c_int = 5;
const FTW_SLN: c_int = 6;
const FTW_STOP: c_int = 1;
const FTW_SKIP_SUBTREE: c_int = 2;
const FTW_SKIP_SIBLINGS: c_int = 3;

pub unsafe fn nftw<B: Backend>(dir: *const c_char, f: NftwFn, fds: c_int, flags: c_int) -> c_int {
    // SAFETY: nftw's contract: dir is a NUL-terminated string.
    let Some(p) = unsafe { c_str(dir) }.filter(|p| starts_in_backend::<B>(p)) else {
        return forward!(nftw(dir, f, fds, flags): fn(*const c_char, NftwFn, c_int, c_int) -> c_int);
    };
    let Some(f) = f else { return crate::fail(libc::EINVAL) };
    // SAFETY: the callback is the caller's nftw callback.
    walk_from::<B>(p, flags, true, &mut |path, st, kind, ftw| unsafe { f(path, st, kind, ftw) })
}

pub unsafe fn ftw<B: Backend>(dir: *const c_char, f: FtwFn, fds: c_int) -> c_int {
    // SAFETY: ftw's contract: dir is a NUL-terminated string.
    let Some(p) = unsafe { c_str(dir) }.filter(|p| starts_in_backend::<B>(p)) else {
        return forward!(ftw(dir, f, fds): fn(*const c_char, FtwFn, c_int) -> c_int);
    };
    let Some(f) = f else { return crate::fail(libc::EINVAL) };
    // SAFETY: the callback is the caller's ftw callback.
    walk_from::<B>(p, 0, false, &mut |path, st, kind, _| unsafe { f(path, st, kind) })
}

type Visit<'a> = dyn FnMut(*const c_char, *const libc::stat, c_int, *mut Ftw) -> c_int + 'a;

/// nftw's walk from `root` (glibc's order: a directory's names as read, each directory
/// before its entries, or after them with FTW_DEPTH). With FTW_CHDIR the working
/// directory is each entry's directory during its callback, and the first again after.
fn walk_from<B: Backend>(root: &CStr, flags: c_int, nftw: bool, visit: &mut Visit<'_>) -> c_int {
    let start = (flags & FTW_CHDIR != 0).then(|| cwd::<B>());
    let mut w = Walk::<B> { flags, nftw, visit, dev: None, _b: std::marker::PhantomData };
    // The root's name starts after its last slash (a trailing one aside), as glibc's.
    let bytes = root.to_bytes();
    let trimmed = bytes.strip_suffix(b"/").filter(|t| !t.is_empty()).unwrap_or(bytes);
    let base = trimmed.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    let r = w.entry(bytes.to_vec(), 0, base, None).map_or_else(|r| r, |_| 0);
    if let Some(Some(c)) = start {
        // SAFETY: a NUL-terminated path.
        unsafe { process::chdir::<B>(c.as_ptr()) };
    }
    if flags & FTW_ACTIONRETVAL != 0 && r != FTW_STOP {
        return 0;
    }
    r
}

fn cwd<B: Backend>() -> Option<CString> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: buf is valid for its length.
    let r = unsafe { process::getcwd::<B>(buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: getcwd wrote a NUL-terminated path into buf.
    (!r.is_null()).then(|| unsafe { CStr::from_ptr(buf.as_ptr().cast()) }.to_owned())
}

struct Walk<'a, 'v, B> {
    flags: c_int,
    /// nftw's walk (a dangling link is FTW_SLN; ftw's is FTW_NS).
    nftw: bool,
    visit: &'a mut Visit<'v>,
    dev: Option<libc::dev_t>,
    _b: std::marker::PhantomData<B>,
}

/// What a callback's answer asks of the walk (Err: stop with this value).
enum Next {
    Go,
    SkipSiblings,
}

impl<B: Backend> Walk<'_, '_, B> {
    fn call(&mut self, path: &CStr, st: &libc::stat, kind: c_int, base: usize, level: c_int) -> Result<c_int, c_int> {
        let mut ftw = Ftw { base: base as c_int, level };
        let r = (self.visit)(path.as_ptr(), st, kind, &mut ftw);
        match r {
            0 => Ok(0),
            r if self.flags & FTW_ACTIONRETVAL == 0 => Err(r),
            FTW_STOP => Err(FTW_STOP),
            r => Ok(r),
        }
    }

    /// One entry at `path` (its name at `base`), `level` deep, in directory `dir` (for
    /// FTW_CHDIR).
    fn entry(&mut self, path: Vec<u8>, level: c_int, base: usize, dir: Option<&CStr>) -> Result<Next, c_int> {
        let c = CString::new(path).map_err(|_| libc::EINVAL)?;
        // SAFETY: plain data.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path and our buffer.
        let stat_ok = |st: &mut libc::stat, phys: bool| unsafe {
            if phys {
                stat::lstat::<B>(c.as_ptr(), st) == 0
            } else {
                stat::stat::<B>(c.as_ptr(), st) == 0
            }
        };
        let kind = if stat_ok(&mut st, self.flags & FTW_PHYS != 0) {
            match st.st_mode & libc::S_IFMT {
                libc::S_IFDIR => FTW_D,
                libc::S_IFLNK => FTW_SL,
                _ => FTW_F,
            }
        } else if !matches!(errno(), libc::EACCES | libc::ENOENT) {
            return Err(-1);
        } else if self.nftw
            && self.flags & FTW_PHYS == 0
            && stat_ok(&mut st, true)
            && st.st_mode & libc::S_IFMT == libc::S_IFLNK
        {
            FTW_SLN
        } else {
            FTW_NS
        };
        let dev = *self.dev.get_or_insert(st.st_dev);
        if self.flags & FTW_MOUNT != 0 && kind == FTW_D && st.st_dev != dev {
            return Ok(Next::Go);
        }
        if let Some(d) = dir.filter(|_| self.flags & FTW_CHDIR != 0) {
            // SAFETY: a NUL-terminated path.
            unsafe { process::chdir::<B>(d.as_ptr()) };
        }
        if kind != FTW_D {
            return Ok(match self.call(&c, &st, kind, base, level)? {
                FTW_SKIP_SIBLINGS => Next::SkipSiblings,
                _ => Next::Go,
            });
        }
        let depth = self.flags & FTW_DEPTH != 0;
        if !depth {
            match self.call(&c, &st, FTW_D, base, level)? {
                FTW_SKIP_SUBTREE => return Ok(Next::Go),
                FTW_SKIP_SIBLINGS => return Ok(Next::SkipSiblings),
                _ => {}
            }
        }
        let Some(names) = names_in::<B>(&c) else {
            // Unreadable: FTW_DNR in place of the directory's visit (after it, if any).
            if depth {
                return self.call(&c, &st, FTW_DNR, base, level).map(|_| Next::Go);
            }
            return Ok(Next::Go);
        };
        let abs = if self.flags & FTW_CHDIR != 0 { absolute::<B>(&c) } else { None };
        for name in names {
            let mut child = c.as_bytes().to_vec();
            if child.last() != Some(&b'/') {
                child.push(b'/');
            }
            let base = child.len();
            child.extend_from_slice(&name);
            if let Next::SkipSiblings = self.entry(child, level + 1, base, abs.as_deref())? {
                break;
            }
        }
        if let Some(parent) = dir.filter(|_| self.flags & FTW_CHDIR != 0) {
            // SAFETY: a NUL-terminated path.
            unsafe { process::chdir::<B>(parent.as_ptr()) };
        }
        if depth {
            if let FTW_SKIP_SIBLINGS = self.call(&c, &st, FTW_DP, base, level)? {
                return Ok(Next::SkipSiblings);
            }
        }
        Ok(Next::Go)
    }
}

/// The names in directory `dir` but "." and "..", as read; None if it cannot be read.
fn names_in<B: Backend>(dir: &CStr) -> Option<Vec<Vec<u8>>> {
    // SAFETY: a NUL-terminated path; the stream is closed once below.
    let d = unsafe { streams::opendir::<B>(dir.as_ptr()) };
    if d.is_null() {
        return None;
    }
    let mut names = Vec::new();
    loop {
        // SAFETY: the stream opened above.
        let e = unsafe { streams::readdir64::<B>(d) };
        if e.is_null() {
            break;
        }
        // SAFETY: a dirent64 with a NUL-terminated name.
        let name = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) }.to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.push(name);
        }
    }
    // SAFETY: as above.
    unsafe { streams::closedir::<B>(d) };
    Some(names)
}

/// `path` from the root (for FTW_CHDIR's returns).
fn absolute<B: Backend>(path: &CStr) -> Option<CString> {
    if path.to_bytes().first() == Some(&b'/') {
        return Some(path.to_owned());
    }
    let mut p = cwd::<B>()?.into_bytes();
    p.push(b'/');
    p.extend_from_slice(path.to_bytes());
    CString::new(p).ok()
}

/// freopen onto a file of the backend, or of a stream of the backend's: the stream's
/// descriptor is made the new file's (dup2 through the interposed calls, which make a
/// standard descriptor a pump into the file), so the stream and its number stay. A stream
/// of the kernel's other than the standard three cannot write into the backend's files
/// (glibc's own calls write it): EOPNOTSUPP, with a line on stderr, and the stream is
/// closed as a failed freopen's is. A null path reopens the stream's file in the new mode.
pub unsafe fn freopen<B: Backend>(path: *const c_char, mode: *const c_char, fp: *mut FILE) -> *mut FILE {
    let ours_stream = !fp.is_null() && crate::serve(|| B::fileno(fp as usize)).is_some();
    // SAFETY: freopen's contract: path is null or a NUL-terminated string.
    let ours_path = unsafe { c_str(path) }.is_some_and(starts_in_backend::<B>);
    if !ours_stream && !ours_path {
        return forward!(freopen(path, mode, fp): fn(*const c_char, *const c_char, *mut FILE) -> *mut FILE);
    }
    // SAFETY: fp is the caller's stream; mode a NUL-terminated string (or null: EFAULT).
    unsafe {
        let fd = streams::fileno::<B>(fp);
        let flags = c_str(mode).and_then(|m| mode_flags(m.to_bytes()));
        let refuse = |e: c_int| {
            libc::fclose(fp);
            set_errno(e);
            std::ptr::null_mut()
        };
        let Some(flags) = flags else { return refuse(libc::EINVAL) };
        // A null path: the same file in a new mode, opened as glibc opens it, by the
        // kernel's link to the descriptor (which the backend serves for its own).
        let link;
        let path = if path.is_null() {
            let Ok(l) = CString::new(format!("/proc/self/fd/{fd}")) else { return refuse(libc::EINVAL) };
            link = l;
            link.as_ptr()
        } else {
            path
        };
        if !ours_stream && fd > 2 {
            eprintln!(
                "hashfs: freopen of a stream the shim did not open (descriptor {fd}) onto its files is not served"
            );
            return refuse(libc::EOPNOTSUPP);
        }
        libc::fflush(fp);
        let new = fd::open::<B>(path, flags, 0o666);
        if new < 0 {
            return refuse(errno());
        }
        if new != fd {
            let r = fd::dup2::<B>(new, fd);
            let e = errno();
            fd::close::<B>(new);
            if r < 0 {
                return refuse(e);
            }
        }
        set_stream_mode(fp, flags);
        libc::clearerr(fp);
        fp
    }
}

/// Makes stream `fp` (flushed) one of open flags `flags`' mode, as glibc's freopen does
/// when it opens the stream anew: its reads and writes allowed or not, appending or not.
/// These are the first word of glibc's `struct _IO_FILE` and its `_IO_NO_READS`,
/// `_IO_NO_WRITES` and `_IO_IS_APPENDING` bits, unchanged since libio's public header
/// (glibc 2.1); a stream left putting switches to reading by itself, as after an fflush.
///
/// # Safety
/// `fp` is a live glibc stream, flushed, that no other thread uses.
unsafe fn set_stream_mode(fp: *mut FILE, flags: c_int) {
    const NO_READS: c_int = 0x4;
    const NO_WRITES: c_int = 0x8;
    const IS_APPENDING: c_int = 0x1000;
    let word = fp.cast::<c_int>();
    // SAFETY: the caller's live stream, whose first field is the int `_flags`.
    let mut f = unsafe { word.read() } & !(NO_READS | NO_WRITES | IS_APPENDING);
    match flags & libc::O_ACCMODE {
        libc::O_RDONLY => f |= NO_WRITES,
        libc::O_WRONLY => f |= NO_READS,
        _ => {}
    }
    if flags & libc::O_APPEND != 0 {
        f |= IS_APPENDING;
    }
    // SAFETY: as above.
    unsafe { word.write(f) };
}

pub unsafe fn pathconf<B: Backend>(path: *const c_char, name: c_int) -> libc::c_long {
    // SAFETY: pathconf's contract: path is a NUL-terminated string.
    if !unsafe { c_str(path) }.is_some_and(starts_in_backend::<B>) {
        return forward!(pathconf(path, name): fn(*const c_char, c_int) -> libc::c_long);
    }
    // As fpathconf on the file the path names (ENOENT and the like first).
    // SAFETY: the caller's path; the descriptor is closed once.
    unsafe {
        let fd = fd::open::<B>(path, libc::O_PATH | libc::O_CLOEXEC, 0);
        if fd < 0 {
            return -1;
        }
        let r = libc::fpathconf(fd, name);
        let e = errno();
        fd::close::<B>(fd);
        set_errno(e);
        r
    }
}

/// ftok: glibc's key (the file's inode number, device and `id`), from the interposed stat.
pub unsafe fn ftok<B: Backend>(path: *const c_char, id: c_int) -> libc::key_t {
    // SAFETY: ftok's contract: path is a NUL-terminated string.
    if !unsafe { c_str(path) }.is_some_and(starts_in_backend::<B>) {
        return forward!(ftok(path, id): fn(*const c_char, c_int) -> libc::key_t);
    }
    // SAFETY: plain data, filled by stat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: the caller's path and our buffer.
    if unsafe { stat::stat::<B>(path, &mut st) } != 0 {
        return -1;
    }
    ((st.st_ino & 0xffff) as u32 | ((st.st_dev & 0xff) as u32) << 16 | ((id as u32) & 0xff) << 24) as libc::key_t
}

/// open's flags for an fopen mode ("r", "w+", "ae", ...): `freopen`'s here, and a shim's
/// `fopen`.
pub fn mode_flags(mode: &[u8]) -> Option<c_int> {
    let plus = mode.contains(&b'+');
    let rw = |only| if plus { libc::O_RDWR } else { only };
    let base = match mode.first()? {
        b'r' => rw(libc::O_RDONLY),
        b'w' => rw(libc::O_WRONLY) | libc::O_CREAT | libc::O_TRUNC,
        b'a' => rw(libc::O_WRONLY) | libc::O_CREAT | libc::O_APPEND,
        _ => return None,
    };
    let x = if mode.contains(&b'x') { libc::O_EXCL } else { 0 };
    let e = if mode.contains(&b'e') { libc::O_CLOEXEC } else { 0 };
    Some(base | x | e)
}
