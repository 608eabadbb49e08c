//! Path routing: which paths and (dirfd, path) pairs are HashFS's, as paths inside the image.

use super::*;

/// The inode at `p` (a path inside the image), its last symbolic link followed or not.
pub(super) fn resolve(fs: &FileSystem<MmapDevice>, p: &Path, last: LastLink) -> hashfs::Result<Ino> {
    match last {
        LastLink::Follow => fs.resolve(p),
        LastLink::NoFollow => fs.resolve_nofollow(p),
    }
}

/// How a call on an inode by path holds the image while it resolves the name and runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Hold {
    /// The read side of the image lock (`FileSystem::read_held`), beside other readers:
    /// only for calls that take no more than the read side themselves (`getattr`,
    /// `peek_attr`; one that takes the image lock under it is a bug, which a debug build's
    /// assertion in `enter` reports).
    Read,
    /// The image lock (`FileSystem::hold_image`): for calls that take it (any change, and
    /// the reads of xattrs, links and directories). A read-only participant, which takes
    /// no lock, reads the calls in one state of the image instead (`read_held`).
    Lock,
}

/// Runs `calls` under `hold`.
pub(super) fn holding<T>(
    fs: &FileSystem<MmapDevice>,
    hold: Hold,
    calls: impl FnMut() -> hashfs::Result<T>,
) -> hashfs::Result<T> {
    match hold {
        Hold::Lock if !fs.is_read_only() => fs.hold_image(calls),
        _ => fs.read_held(calls),
    }
}

/// `op` on the inode at `p`, the name resolved and `op` run under one hold of the image
/// (`hold`), so that another process's rename over the name or unlink cannot come between
/// them: it would free the inode (the call failing with ESTALE, where a rename replaces a
/// name atomically) or give its number to a new file (the call acting on that file).
pub(super) fn on_inode<T>(
    fs: &FileSystem<MmapDevice>,
    p: &Path,
    last: LastLink,
    hold: Hold,
    mut op: impl FnMut(Ino) -> hashfs::Result<T>,
) -> hashfs::Result<T> {
    holding(fs, hold, || op(resolve(fs, p, last)?))
}

/// [`on_inode`] for an `op` that answers an errno.
pub(super) fn on_inode_errno<T>(
    fs: &FileSystem<MmapDevice>,
    p: &Path,
    last: LastLink,
    hold: Hold,
    mut op: impl FnMut(Ino) -> Result<T, c_int>,
) -> Result<T, c_int> {
    held(fs, hold, || op(resolve(fs, p, last).map_err(|e| e.errno())?))
}

/// `calls`, which answer an errno, run under one hold of the image (`hold`).
fn held<T>(fs: &FileSystem<MmapDevice>, hold: Hold, mut calls: impl FnMut() -> Result<T, c_int>) -> Result<T, c_int> {
    // The errno rides inside the file system's Ok, so that a read-only participant's
    // `read_held` reads again when a writer changed the image meanwhile, whatever the answer.
    holding(fs, hold, || Ok(calls())).map_err(|e| e.errno()).and_then(|r| r)
}

/// The file-system path for `path` if it lies under the prefix, or goes through the
/// kernel's link to one of the shim's descriptors ([`descriptor_link`]: the path of its
/// file now, and what the path goes on with).
pub(super) fn fs_path_of(path: &CStr) -> Option<PathBuf> {
    let bytes = path.to_bytes();
    let linked = cwd_link(bytes)
        .map(|(dir, removed, rest)| (if removed { PathBuf::from(REMOVED_DIR) } else { dir }, rest))
        .or_else(|| descriptor_link(bytes).map(|(_, of, rest)| (path_now(&of.fs_path, of.ino, &of.found_at), rest)));
    if let Some((mut p, rest)) = linked {
        if rest.len() > 1 {
            p.push(std::ffi::OsStr::from_bytes(&rest[1..]));
        }
        return Some(p);
    }
    if bytes.first() == Some(&b'/') {
        match super::plain_route(bytes) {
            Some(None) => return None, // without allocating (`prefix_bytes`)
            Some(Some(rest)) => return Some(below_prefix(rest)),
            None => {}
        }
    }
    let p = Path::new(std::ffi::OsStr::from_bytes(bytes));
    let abs = if p.is_absolute() { p.to_path_buf() } else { std::env::current_dir().ok()?.join(p) };
    normalized_under(prefix()?, &abs)
}

/// A path through the kernel's links to this process's descriptors (`/proc/self/fd/N`,
/// `/proc/thread-self/fd/N`, `/proc/PID/fd/N` of this process, `/dev/fd/N`, `/dev/stdin`,
/// `/dev/stdout`, `/dev/stderr`) that names one of the shim's: N, its open file, and what
/// the path goes on with (empty, or from a slash on). The kernel's link is the
/// descriptor's placeholder, `/dev/null`: a write through `/dev/fd/3` went there, lost, and
/// a read found nothing, until 2026-12-05.
pub(super) fn descriptor_link(path: &[u8]) -> Option<(c_int, Arc<OpenFile>, &[u8])> {
    if !path.starts_with(b"/proc/") && !path.starts_with(b"/dev/") {
        return None;
    }
    let (n, rest) = link_number(path)?;
    let of = SHIM.get()?.file(n)?;
    Some((n, of, rest))
}

/// A path through the kernel's links to this process's descriptors ([`descriptor_link`]'s
/// forms), alone, that names a standard descriptor whose pipe an output pump writes into a
/// file: that file, for the stat calls (`pump::stat_file`).
pub(super) fn pumped_link(path: &[u8]) -> Option<Arc<OpenFile>> {
    if !path.starts_with(b"/proc/") && !path.starts_with(b"/dev/") {
        return None;
    }
    match link_number(path)? {
        (n @ 0..=2, b"") => super::pump::stat_file(n),
        _ => None,
    }
}

/// What `readlink` of [`descriptor_link`]'s link to `of` answers, as Linux's: the file's
/// path now (under the prefix), or the path it had with " (deleted)" once unlinked. The
/// name it was opened by, while that still leads to it; else (renamed since, or a
/// descriptor inherited across `execve`, which `exec.rs` gives the prefix for a name) one
/// found by reading the directories ([`name_by_search`]: a file has no way up to its
/// directory); else a path that names the inode, which opens nothing rather than another
/// file. An unlinked inherited file's old name is not known.
pub(super) fn link_target(of: &OpenFile) -> Vec<u8> {
    let unlinked = shim().fs().ok().and_then(|fs| fs.peek_attr(of.ino).ok()).is_some_and(|m| m.nlink == 0);
    let inherited = Some(of.fs_path.as_path()) == prefix();
    let name = match (unlinked, inherited) {
        (true, false) => Some(of.fs_path.clone()),
        (true, true) => None,
        (false, false) => Some(path_now(&of.fs_path, of.ino, &of.found_at))
            .filter(|p| p != Path::new(REMOVED_DIR))
            .or_else(|| name_by_search(of.ino)),
        (false, true) => name_by_search(of.ino),
    };
    let name = name.unwrap_or_else(|| PathBuf::from(format!("/(inode {}, name unknown)", of.ino.0)));
    link_answer(&name, unlinked)
}

/// What follows `/proc/self`, `/proc/thread-self` or `/proc/PID` of this process in
/// `path` (from a slash on).
fn own_proc_entry(path: &[u8]) -> Option<&[u8]> {
    let r = path.strip_prefix(b"/proc/")?;
    let slash = r.iter().position(|&c| c == b'/')?;
    let who = &r[..slash];
    let mine = who == b"self"
        || who == b"thread-self"
        || std::str::from_utf8(who).ok().and_then(|w| w.parse::<i32>().ok()) == Some(super::current_pid());
    mine.then(|| &r[slash..])
}

/// A path through the kernel's link to this process's working directory
/// (`/proc/self/cwd`, and its `thread-self` and PID forms) while that directory is in the
/// image: the directory's path now (a removed one's names nothing), and what the path goes
/// on with. The kernel's link is the removed directory the shim parks the process's own
/// working directory in: a listing of it was empty and an open under it ENOENT, until
/// 2026-12-05.
pub(super) fn cwd_link(path: &[u8]) -> Option<(PathBuf, bool, &[u8])> {
    let rest = own_proc_entry(path)?.strip_prefix(b"/cwd")?;
    if !rest.is_empty() && rest[0] != b'/' {
        return None;
    }
    let (dir, removed) = super::cwd::image_cwd()?;
    Some((dir, removed, rest))
}

/// Entries [`name_by_search`] reads at most before it gives up.
const NAME_SEARCH_ENTRIES: usize = 100_000;

/// A path of file `ino`, found by reading the image's directories from the root, breadth
/// first (a file has no way up to its directory): for a descriptor whose name is not known
/// ([`link_target`]); None past [`NAME_SEARCH_ENTRIES`] entries.
fn name_by_search(ino: Ino) -> Option<PathBuf> {
    let fs = shim().fs().ok()?;
    let mut queue = std::collections::VecDeque::from([(Ino::ROOT, PathBuf::from("/"))]);
    let mut read = 0;
    while let Some((dir, path)) = queue.pop_front() {
        let mut cookie = 0;
        loop {
            let batch = fs.readdir_ino(dir, cookie, 1024).ok()?;
            let Some(last) = batch.last() else { break };
            cookie = last.cookie;
            for e in batch {
                read += 1;
                if read > NAME_SEARCH_ENTRIES {
                    return None;
                }
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                let p = path.join(std::ffi::OsStr::from_bytes(&e.name));
                if e.ino == ino {
                    return Some(p);
                }
                if e.file_type == FileType::Directory {
                    queue.push_back((e.ino, p));
                }
            }
        }
    }
    None
}

/// What `readlink` of a link to the image's `path` answers ([`cwd_link`]'s, and
/// [`link_target`]'s): the path under the prefix, with " (deleted)" once removed.
pub(super) fn link_answer(path: &Path, removed: bool) -> Vec<u8> {
    let mut out = prefix().map_or_else(Vec::new, |p| p.as_os_str().as_bytes().to_vec());
    if path != Path::new("/") || out.is_empty() {
        out.extend_from_slice(path.as_os_str().as_bytes());
    }
    if removed {
        out.extend_from_slice(b" (deleted)");
    }
    out
}

/// [`descriptor_link`]'s descriptor number and rest, whoever's the descriptor is.
fn link_number(path: &[u8]) -> Option<(c_int, &[u8])> {
    let goes_on = |r: &[u8]| r.is_empty() || r[0] == b'/';
    for (name, n) in [(&b"/dev/stdin"[..], 0), (b"/dev/stdout", 1), (b"/dev/stderr", 2)] {
        if let Some(r) = path.strip_prefix(name).filter(|r| goes_on(r)) {
            return Some((n, r));
        }
    }
    let after = match path.strip_prefix(b"/dev/fd/") {
        Some(r) => r,
        None => own_proc_entry(path)?.strip_prefix(b"/fd/")?,
    };
    let end = after.iter().position(|&c| c == b'/').unwrap_or(after.len());
    let digits = &after[..end];
    if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some((n, &after[end..]))
}

/// The path inside the image for `rest`, a plain path's part after the prefix.
fn below_prefix(rest: &[u8]) -> PathBuf {
    if rest.is_empty() {
        PathBuf::from("/")
    } else {
        PathBuf::from(std::ffi::OsStr::from_bytes(rest))
    }
}

/// Absolute path `abs` with its "." and ".." resolved lexically (never above `/`).
fn lexical(abs: &Path) -> PathBuf {
    let mut norm = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                norm.pop();
            }
            Component::Normal(n) => norm.push(n),
            _ => {}
        }
    }
    norm
}

/// The image's path for absolute host path `abs` (taken lexically), if it lies under the
/// prefix.
pub(super) fn inside_prefix(abs: &Path) -> Option<PathBuf> {
    normalized_under(prefix()?, abs)
}

/// The path inside the image for absolute path `abs` if it lies under `prefix`, its "."
/// and ".." resolved lexically (the prefix is not a real directory).
fn normalized_under(prefix: &Path, abs: &Path) -> Option<PathBuf> {
    let norm = lexical(abs);
    let rest = norm.strip_prefix(prefix).ok()?;
    Some(Path::new("/").join(rest))
}

/// For (dirfd, path) that the image does not serve: the absolute path the kernel is to take
/// instead, when the caller's leads out of the image through it: `..` from a working
/// directory inside the image (the kernel's is a placeholder elsewhere, so `ls ..` at the
/// image's root listed the placeholder's parent), `..` under one of the shim's directory
/// descriptors, or an absolute path through the prefix (`/pm/..`, which the kernel, with
/// no `/pm`, could not find). Taken lexically, as the image's own paths are. None: the
/// caller's path is the kernel's as it is.
pub(super) fn kernel_path_at(dirfd: c_int, path: &CStr) -> Option<CString> {
    let prefix = prefix()?;
    let bytes = path.to_bytes();
    let rel = Path::new(std::ffi::OsStr::from_bytes(bytes));
    let abs = if bytes.first() == Some(&b'/') {
        if !rel.starts_with(prefix) {
            return None;
        }
        rel.to_path_buf()
    } else if dirfd == libc::AT_FDCWD {
        let cwd = std::env::current_dir().ok()?;
        if !cwd.starts_with(prefix) {
            return None;
        }
        cwd.join(rel)
    } else {
        let dir = SHIM.get()?.file(dirfd)?;
        let now = dir_path_now(&dir);
        prefix.join(now.strip_prefix("/").ok()?).join(rel)
    };
    let norm = lexical(&abs);
    if norm.starts_with(prefix) {
        return None; // the image's (not served for another reason)
    }
    CString::new(std::os::unix::ffi::OsStringExt::into_vec(norm.into_os_string())).ok()
}

/// A call on (dirfd, path) that the image does not serve, when the path leads out of the
/// image through it ([`kernel_path_at`]): `op`, the kernel's call of that name with
/// `AT_FDCWD` and the kernel's path, its result as the call's (negative: errno). None: the
/// kernel takes the caller's path as written.
pub(super) fn kernel_call(
    dirfd: c_int,
    path: &CStr,
    op: impl FnOnce(&CStr) -> isize,
) -> hashfs_interpose::Served<usize> {
    let k = kernel_path_at(dirfd, path)?;
    let r = op(&k);
    Some(if r >= 0 { Ok(r as usize) } else { Err(hashfs_interpose::Errno(hashfs_interpose::errno())) })
}

/// [`kernel_call`] of a call that answers 0 or -1.
pub(super) fn kernel_call0(dirfd: c_int, path: &CStr, op: impl FnOnce(&CStr) -> c_int) -> hashfs_interpose::Served<()> {
    kernel_call(dirfd, path, |k| op(k) as isize).map(|r| r.map(drop))
}

/// The path for (dirfd, path) of the *at functions, if it is ours.
pub(super) fn fs_path_at_of(dirfd: c_int, path: &CStr) -> Option<PathBuf> {
    let bytes = path.to_bytes();
    if bytes.is_empty() {
        // An empty path names nothing: the kernel's ENOENT, whatever the descriptor (the
        // calls that take AT_EMPTY_PATH look at the descriptor before they come here).
        return None;
    }
    let mut p = if dirfd == libc::AT_FDCWD || bytes.first() == Some(&b'/') {
        fs_path_of(path)?
    } else {
        // Without the shim made yet no descriptor is its own.
        match SHIM.get().and_then(|s| s.file(dirfd)) {
            Some(dir) => dir_path_now(&dir).join(std::ffi::OsStr::from_bytes(bytes)),
            None => under_kernel_dir(dirfd, bytes)?,
        }
    };
    // A path that names a directory by its end keeps saying so to the library, which then
    // refuses anything else (ENOTDIR): normalizing dropped "." and the trailing slash.
    if PathEnd::of(bytes).names_dir() && !p.as_os_str().as_bytes().ends_with(b"/") {
        p.push("");
    }
    Some(p)
}

/// Where directory descriptor `dir`'s directory is now, for a walk from it: the path it
/// was opened by while that still names it, else the path found from its inode up (a
/// rename moved it since: Linux's walk from a descriptor starts at its inode, and taking
/// the old path went to whatever had the name then, or nowhere). A removed directory gets
/// a path that names nothing, so that a walk from it is ENOENT, as Linux's.
///
/// Found once, the path is kept until the next change any participant publishes (a walk
/// from a descriptor in a tree that nothing changes, as `find` or `du` make, resolves its
/// directory once).
pub(super) fn dir_path_now(dir: &OpenFile) -> PathBuf {
    path_now(&dir.fs_path, dir.ino, &dir.found_at)
}

/// [`dir_path_now`] of directory `ino`, found at `path` when it was opened (or entered:
/// the working directory, `cwd.rs`), with its cache `found_at`.
pub(super) fn path_now(path: &Path, ino: Ino, found_at: &Mutex<Option<(u64, PathBuf)>>) -> PathBuf {
    let Ok(fs) = shim().fs() else { return path.to_path_buf() };
    let epoch = fs.changes_published();
    if let (Some(e), Some((seen, p))) = (epoch, found_at.lock().as_ref()) {
        if *seen == e {
            return p.clone();
        }
    }
    let now = match fs.resolve(path) {
        Ok(i) if i == ino => path.to_path_buf(),
        _ => path_from_inode(fs, ino).unwrap_or_else(|| PathBuf::from(REMOVED_DIR)),
    };
    if let Some(e) = epoch {
        *found_at.lock() = Some((e, now.clone()));
    }
    now
}

/// The path a walk from a removed directory takes: a name no one makes (a name's first
/// byte may not be NUL, but a path's components are the library's to refuse, so the
/// walk's answer is ENOENT, not EINVAL).
pub(super) const REMOVED_DIR: &str = "/.hashfs-removed-directory-of-a-descriptor";

/// Directory `ino`'s path now, found from the inode up: at each level, the name in its
/// parent that names it (None once it or an ancestor is removed).
fn path_from_inode(fs: &FileSystem<MmapDevice>, ino: Ino) -> Option<PathBuf> {
    let mut names = Vec::new();
    let mut cur = ino;
    for _ in 0..4096 {
        if cur == Ino::ROOT {
            let mut p = PathBuf::from("/");
            p.extend(names.iter().rev().map(|n: &Vec<u8>| std::ffi::OsStr::from_bytes(n)));
            return Some(p);
        }
        if fs.peek_attr(cur).ok()?.nlink == 0 {
            return None;
        }
        let parent = fs.parent_of(cur).ok()?;
        let mut cookie = 0;
        let name = 'find: loop {
            let batch = fs.readdir_ino(parent, cookie, 1024).ok()?;
            cookie = batch.last()?.cookie;
            if let Some(e) = batch.into_iter().find(|e| e.ino == cur) {
                break 'find e.name;
            }
        };
        names.push(name);
        cur = parent;
    }
    None
}

/// How a path ends, as Linux's lookup takes it: its last component, and whether a slash
/// follows it (either asks for a directory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PathEnd {
    pub last: Last,
    pub slash: bool,
}

/// A path's last component, as Linux's `last_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Last {
    /// A name.
    Name,
    /// ".".
    Dot,
    /// "..".
    DotDot,
    /// None: the path is slashes only (the root).
    Root,
}

impl PathEnd {
    pub(super) fn of(bytes: &[u8]) -> PathEnd {
        let trimmed = &bytes[..bytes.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1)];
        let last = match trimmed.rsplit(|&b| b == b'/').next() {
            _ if trimmed.is_empty() && !bytes.is_empty() => Last::Root,
            Some(b".") => Last::Dot,
            Some(b"..") => Last::DotDot,
            _ => Last::Name,
        };
        PathEnd { last, slash: trimmed.len() < bytes.len() }
    }

    /// Whether the end asks for a directory (a trailing slash, "." or "..").
    pub(super) fn names_dir(&self) -> bool {
        self.slash || self.last != Last::Name
    }
}

/// The path for `rel` under the kernel's directory `dirfd`, if it leads into the prefix:
/// a walk that starts from a descriptor of `/` (rsync's receiver opens `/` and looks up
/// each component of its destination from there) reaches the image at the prefix's name.
/// Only a name whose first component is `..` or one of the prefix's costs a look at the
/// directory's path (`/proc/self/fd`); ".." is taken lexically, as everywhere here.
fn under_kernel_dir(dirfd: c_int, rel: &[u8]) -> Option<PathBuf> {
    let prefix = prefix()?;
    let first = rel.split(|&b| b == b'/').find(|c| !c.is_empty() && *c != b".")?;
    if first != b".." && !prefix.components().any(|c| c.as_os_str().as_bytes() == first) {
        return None;
    }
    let dir = std::fs::read_link(format!("/proc/self/fd/{dirfd}")).ok()?;
    if !dir.is_absolute() {
        return None; // not a directory of a file system (a pipe, a socket)
    }
    normalized_under(prefix, &dir.join(std::ffi::OsStr::from_bytes(rel)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paths_end_is_linuxs_last_type() {
        let end = |p: &str| PathEnd::of(p.as_bytes());
        assert_eq!(end("a"), PathEnd { last: Last::Name, slash: false });
        assert_eq!(end("/pm/a//"), PathEnd { last: Last::Name, slash: true });
        assert_eq!(end("/pm/x/."), PathEnd { last: Last::Dot, slash: false });
        assert_eq!(end("x/./"), PathEnd { last: Last::Dot, slash: true });
        assert_eq!(end(".."), PathEnd { last: Last::DotDot, slash: false });
        assert_eq!(end("/"), PathEnd { last: Last::Root, slash: true });
        assert_eq!(end("a.b/..c"), PathEnd { last: Last::Name, slash: false });
        assert!(!end("/pm/a").names_dir() && end("/pm/a/").names_dir() && end("a/.").names_dir());
    }

    /// A plain path's route (no normalizing, `shim::plain_route`) answers what the
    /// normalizing one does, and is taken for the paths a program names most.
    #[test]
    fn a_plain_path_routes_as_its_normalized_form() {
        let paths = [
            "/pm",
            "/pm/",
            "/pm/a",
            "/pm/a/b.db-journal",
            "/pm/a/",
            "/pmx",
            "/pmx/a",
            "/p",
            "/",
            "/tmp/pm/a",
            "/pm//a",
            "/pm/./a",
            "/pm/a/../b",
            "/pm/..",
            "/x/../pm/a",
            "/mnt/pm/a",
            "/mnt/pmq",
        ];
        let mut plain = 0;
        for pre in ["/pm", "/mnt/pm"] {
            for p in paths {
                let slow = normalized_under(Path::new(pre), Path::new(p));
                match crate::shim::plain_route_under(pre.as_bytes(), p.as_bytes()) {
                    None => {}
                    Some(fast) => {
                        plain += 1;
                        assert_eq!(fast.map(below_prefix), slow, "{p} under {pre}");
                    }
                }
            }
        }
        assert!(plain >= 20, "only {plain} paths took the plain route");
    }
}
