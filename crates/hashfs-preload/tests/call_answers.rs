//! Calls' flags, empty paths and descriptor modes answer as the kernel's: each script runs
//! on a tmpfs and through the shim and every line must be the same (`answers_as_the_kernels`).
//! Found by such scripts (2026-12-05): `unlinkat` with a flag it does not know **removed
//! the file** (Linux: EINVAL before anything), `fchmodat`, `fchownat` and `utimensat`
//! took unknown flags, an empty path with a descriptor walked to the descriptor's file
//! (ENOTDIR; Linux: ENOENT, or the file itself with AT_EMPTY_PATH), `readlink` into no room
//! succeeded, a write to a directory's descriptor was EISDIR (EBADF: it is open for
//! reading), `O_RDONLY|O_TRUNC` kept the bytes (Linux truncates), `fcntl` commands the
//! shim does not serve reached the placeholder (EBADF), and `posix_fadvise`,
//! `sync_file_range`, `readahead`, `statx` and `copy_file_range` took arguments Linux refuses.
//! And libc's functions that glibc builds on its internal calls, which no preload sees:
//! `remove`, `scandir`, `nftw` and `pathconf` said ENOENT and `glob` matched nothing on the
//! image's paths, `freopen` of the shim's stream crashed the process, and `telldir`/`seekdir`
//! were glibc's on the shim's stream (its next `readdir` said nothing more); `rewinddir`
//! did not show names made since the stream was opened.
//! And mappings: `mprotect` made a shared mapping of a file opened read-only writable
//! (Linux: EACCES; the kernel's mapping is of the image, open for writing), `msync` took
//! an address off a page and contradictory flags, and `mremap` of a mapping (Python's
//! `mmap.resize`) failed with EFAULT or left the shim's record of it stale.
//! And the working directory, which the shim kept by its path: after a rename of it,
//! relative paths went to the old name (here, to the new directory made there), and a
//! removed one's `getcwd` gave its old path (Linux: ENOENT).
//! And `lseek`'s SEEK_DATA and SEEK_HOLE took the whole file for data (2026-12-06).

mod common;

use common::answers_as_the_kernels;

/// libc through ctypes, and `cerr`: a -1 answer as the OSError of its errno (the scripts'
/// shared prelude, after `PY_ANSWERS`).
const PY_LIBC: &str = r#"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def cerr(r):
    if r < 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    return r
"#;

/// [`answers_as_the_kernels`] of `script` after [`PY_LIBC`].
fn answers_with_libc(script: &str, must: &[&str]) {
    answers_as_the_kernels(&format!("{PY_LIBC}{script}"), must);
}

const FLAGS: &str = r#"
import fcntl, stat
def w(path, data=b"0123456789"):
    with open(path, "wb") as f: f.write(data)
def L(n):
    return ctypes.c_long(n)
w(d + "/f"); os.mkdir(d + "/dir"); os.symlink("f", d + "/lnk")
ff = os.open(d + "/f", os.O_RDWR)
dd = os.open(d + "/dir", os.O_RDONLY)
buf = ctypes.create_string_buffer(256)
t("unlinkat unknown flag", lambda: cerr(libc.unlinkat(-100, (d + "/f").encode(), 1)))
t("file still there", lambda: os.path.exists(d + "/f"))
t("fstatat empty, no flag", lambda: cerr(libc.fstatat(ff, b"", buf, 0)))
t("fstatat empty, AT_EMPTY_PATH", lambda: cerr(libc.fstatat(ff, b"", buf, 0x1000)))
t("fstatat unknown flag", lambda: cerr(libc.fstatat(-100, (d + "/f").encode(), buf, 0x8)))
t("faccessat empty, AT_EMPTY_PATH", lambda: cerr(libc.faccessat(ff, b"", 2, 0x1000)))
t("faccessat empty, no flag", lambda: cerr(libc.faccessat(ff, b"", 0, 0)))
t("fchownat empty, AT_EMPTY_PATH", lambda: (cerr(libc.fchownat(ff, b"", 7, 8, 0x1000)), os.stat(d + "/f").st_uid)[1] == 7)
t("fchownat empty, no flag", lambda: cerr(libc.fchownat(ff, b"", 7, 8, 0)))
t("fchownat unknown flag", lambda: cerr(libc.fchownat(-100, (d + "/f").encode(), 7, 8, 0x2)))
t("fchmodat unknown flag", lambda: cerr(libc.fchmodat(-100, (d + "/f").encode(), 0o600, 0x2)))
t("utimensat empty, AT_EMPTY_PATH", lambda: cerr(libc.utimensat(ff, b"", None, 0x1000)))
t("utimensat empty, no flag", lambda: cerr(libc.utimensat(ff, b"", None, 0)))
t("utimensat unknown flag", lambda: cerr(libc.utimensat(-100, (d + "/f").encode(), None, 0x2)))
t("utimensat null path", lambda: cerr(libc.utimensat(ff, None, None, 0)))
t("linkat empty, AT_EMPTY_PATH", lambda: (cerr(libc.linkat(ff, b"", -100, (d + "/f2").encode(), 0x1000)), os.stat(d + "/f").st_nlink)[1] == 2)
t("linkat unknown flag", lambda: cerr(libc.linkat(-100, (d + "/f").encode(), -100, (d + "/f3").encode(), 0x2)))
t("readlinkat empty on a link's O_PATH", lambda: cerr(libc.readlinkat(os.open(d + "/lnk", os.O_PATH | os.O_NOFOLLOW), b"", buf, 100)))
t("readlink into no room", lambda: cerr(libc.readlink((d + "/lnk").encode(), buf, 0)))
t("unlinkat empty", lambda: cerr(libc.unlinkat(dd, b"", 0)))
t("mkdirat empty", lambda: cerr(libc.mkdirat(dd, b"", 0o755)))
t("openat empty", lambda: os.open("", os.O_RDONLY, dir_fd=dd))
t("renameat empty", lambda: cerr(libc.renameat(dd, b"", dd, b"x")))
t("statx reserved mask bit", lambda: cerr(libc.statx(-100, (d + "/f").encode(), 0, 0x80000000, buf)))
t("statx both sync types", lambda: cerr(libc.statx(-100, (d + "/f").encode(), 0x6000, 0x7ff, buf)))
t("write to a directory's descriptor", lambda: os.write(dd, b"x"))
t("ftruncate a directory's descriptor", lambda: os.ftruncate(dd, 0))
t("fallocate a directory's descriptor", lambda: cerr(libc.fallocate(dd, 0, L(0), L(10))))
t("pwritev a directory's descriptor", lambda: os.pwritev(dd, [b"x"], 0))
t("read a directory's descriptor", lambda: os.read(dd, 1))
t("copy_file_range to O_APPEND", lambda: os.copy_file_range(ff, os.open(d + "/app", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), 5, 0))
t("copy_file_range overlapping in one file", lambda: os.copy_file_range(ff, ff, 5, 0, 2))
t("copy_file_range in one file apart", lambda: (os.copy_file_range(ff, ff, 2, 0, 20), open(d + "/f", "rb").read())[1])
t("sendfile to O_APPEND", lambda: os.sendfile(os.open(d + "/app", os.O_WRONLY | os.O_APPEND), ff, 0, 5))
t("posix_fadvise unknown advice", lambda: os.posix_fadvise(ff, 0, 0, 99))
t("posix_fadvise negative length", lambda: os.posix_fadvise(ff, 0, -1, os.POSIX_FADV_NORMAL))
t("readahead a directory", lambda: cerr(libc.readahead(dd, L(0), ctypes.c_size_t(10))))
t("sync_file_range unknown flag", lambda: cerr(libc.sync_file_range(ff, L(0), L(0), 8)))
t("sync_file_range negative offset", lambda: cerr(libc.sync_file_range(ff, L(-1), L(0), 0)))
t("F_SETFL O_DIRECT shown", lambda: oct(fcntl.fcntl(ff, fcntl.F_SETFL, os.O_DIRECT) * 0 + fcntl.fcntl(ff, fcntl.F_GETFL) & ~0o100000))
t("F_GETOWN", lambda: str(fcntl.fcntl(ff, fcntl.F_GETOWN)))
t("F_GETSIG", lambda: str(fcntl.fcntl(ff, 11)))
t("F_GETLEASE", lambda: str(fcntl.fcntl(ff, 1025)))
t("F_GETPIPE_SZ", lambda: fcntl.fcntl(ff, 1032))
t("fcntl unknown command", lambda: fcntl.fcntl(ff, 9999))
w(d + "/g", b"abcdef" * 1000)
t("O_RDONLY|O_TRUNC truncates", lambda: (os.open(d + "/g", os.O_RDONLY | os.O_TRUNC), str(os.stat(d + "/g").st_size))[1])
print(sorted(os.listdir(d)))
"#;

#[test]
fn flags_empty_paths_and_descriptor_modes_answer_as_the_kernels() {
    answers_with_libc(
        FLAGS,
        &["unlinkat unknown flag EINVAL", "file still there True", "write to a directory's descriptor EBADF"],
    );
}

const LIBC: &str = r#"
def nz(p):
    if not p:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    return p
for f in ("opendir", "readdir", "fopen", "freopen"):
    getattr(libc, f).restype = ctypes.c_void_p
libc.readdir.argtypes = libc.closedir.argtypes = libc.rewinddir.argtypes = libc.telldir.argtypes = [ctypes.c_void_p]
libc.telldir.restype = ctypes.c_long
libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
libc.freopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p]
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.fputs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
libc.fgets.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
libc.fflush.argtypes = libc.fclose.argtypes = [ctypes.c_void_p]
def name(e):
    return ctypes.string_at(e + 19).decode()
def names(dp):
    out = []
    while True:
        e = libc.readdir(dp)
        if not e:
            return sorted(out)
        out.append(name(e))
os.mkdir(d + "/dir")
for i in range(20):
    open(d + "/dir/f%02d" % i, "w").close()
os.mkdir(d + "/dir/sub")
os.symlink("f00", d + "/dir/sub/link")
os.symlink("nowhere", d + "/dir/dangling")
dp = nz(libc.opendir((d + "/dir").encode()))
[libc.readdir(dp) for _ in range(5)]
pos = libc.telldir(dp)
after = [name(libc.readdir(dp)) for _ in range(3)]
libc.seekdir(dp, pos)
t("seekdir to telldir's position", lambda: [name(libc.readdir(dp)) for _ in range(3)] == after)
open(d + "/dir/new", "w").close()
libc.rewinddir(dp)
t("rewinddir shows a new name", lambda: "new" in names(dp))
libc.closedir(dp)
nl = ctypes.POINTER(ctypes.c_void_p)()
def scan():
    n = cerr(libc.scandir((d + "/dir").encode(), ctypes.byref(nl), None, libc.alphasort))
    return [name(nl[i]) for i in range(n)]
t("scandir, sorted", scan)
t("scandir of a file", lambda: cerr(libc.scandir((d + "/dir/f01").encode(), ctypes.byref(nl), None, None)))
class GLOB(ctypes.Structure):
    _fields_ = [("pathc", ctypes.c_size_t), ("pathv", ctypes.POINTER(ctypes.c_char_p)), ("offs", ctypes.c_size_t),
                ("flags", ctypes.c_int), ("fns", ctypes.c_void_p * 5), ("pad", ctypes.c_void_p * 4)]
def glob(pattern, flags=0):
    g = GLOB()
    r = libc.glob(pattern.encode(), flags, None, ctypes.byref(g))
    return r, [os.path.relpath(g.pathv[i].decode(), d) for i in range(g.pathc)]
t("glob f1*", lambda: glob(d + "/dir/f1*"))
t("glob */link, marked", lambda: glob(d + "/*/sub/l*", 1 << 1))
t("glob no match", lambda: glob(d + "/dir/zz*"))
FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int * 2))
def walk(flags):
    seen = []
    def cb(p, st, kind, ftw):
        seen.append((os.path.relpath(p.decode(), d), kind, ftw.contents[1], p.decode()[ftw.contents[0]:]))
        return 0
    r = cerr(libc.nftw((d + "/dir").encode(), FN(cb), 8, flags))
    return r, sorted(seen)
t("nftw", lambda: walk(0))
t("nftw FTW_PHYS|FTW_DEPTH", lambda: walk(1 | 8))
def stop_early():
    seen = []
    def cb(p, st, kind, ftw):
        seen.append(p)
        return 7 if len(seen) == 3 else 0
    return libc.nftw((d + "/dir").encode(), FN(cb), 8, 0), len(seen)
t("nftw stops at a callback's answer", stop_early)
FTWFN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int)
def old_walk():
    seen = []
    r = cerr(libc.ftw((d + "/dir").encode(), FTWFN(lambda p, st, kind: seen.append((os.path.relpath(p.decode(), d), kind)) or 0), 4))
    return r, sorted(seen)[:4]
t("ftw", old_walk)
t("scandirat", lambda: str(cerr(libc.scandirat(os.open(d, os.O_RDONLY), b"dir/sub", ctypes.byref(nl), None, None))))
t("remove a file", lambda: (cerr(libc.remove((d + "/dir/f00").encode())), os.path.exists(d + "/dir/f00"))[1])
os.mkdir(d + "/dir/empty")
t("remove a directory", lambda: (cerr(libc.remove((d + "/dir/empty").encode())), os.path.exists(d + "/dir/empty"))[1])
t("remove a full directory", lambda: cerr(libc.remove((d + "/dir").encode())))
t("remove nothing", lambda: cerr(libc.remove((d + "/dir/nope").encode())))
t("pathconf NAME_MAX", lambda: str(os.pathconf(d + "/dir", "PC_NAME_MAX")))
t("pathconf of nothing", lambda: os.pathconf(d + "/nope", "PC_NAME_MAX"))
t("ftok of nothing", lambda: cerr(libc.ftok((d + "/nope").encode(), 1)))
t("ftok's id byte", lambda: hex(cerr(libc.ftok((d + "/dir").encode(), 0x41)) >> 24))
def reopen():
    f = nz(libc.fopen((d + "/dir/f01").encode(), b"w"))
    libc.fputs(b"first ", f)
    f = nz(libc.freopen((d + "/dir/f02").encode(), b"w", f))
    libc.fputs(b"second", f)
    libc.fclose(f)
    return open(d + "/dir/f01", "rb").read(), open(d + "/dir/f02", "rb").read()
t("freopen of a stream onto another file", reopen)
def new_mode():
    f = nz(libc.fopen((d + "/dir/f03").encode(), b"w"))
    libc.fputs(b"written, then read", f)
    f = nz(libc.freopen(None, b"r", f))
    buf = ctypes.create_string_buffer(64)
    libc.fgets(buf, 64, f)
    f = nz(libc.freopen(None, b"a", f))
    libc.fputs(b", then appended", f)
    libc.fclose(f)
    return buf.value, open(d + "/dir/f03", "rb").read()
t("freopen of a stream to a new mode (a null path)", new_mode)
def stdout_to_file():
    out = ctypes.c_void_p.in_dll(libc, "stdout")
    sys.stdout.flush()
    saved = os.dup(1)
    nz(libc.freopen((d + "/dir/out").encode(), b"w", out))
    libc.fputs(b"through stdout\n", out)
    libc.fflush(out)
    os.dup2(saved, 1)
    return open(d + "/dir/out", "rb").read()
t("freopen of stdout onto a file", stdout_to_file)
print(sorted(os.listdir(d + "/dir")))
"#;

#[test]
fn libc_functions_built_on_internal_calls_answer_as_the_kernels() {
    answers_with_libc(
        LIBC,
        &["remove a file False", "glob f1* (0, ['dir/f10'", "freopen of stdout onto a file b'through stdout\\n'"],
    );
}

const MAPS: &str = r#"
import errno, mmap
libc.mmap.restype = libc.mremap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int]
R, W, SHARED, PRIVATE = 1, 2, 1, 2
def m(fd, length, prot, flags, off):
    r = libc.mmap(None, length, prot, flags, fd, off)
    if r is None or r == 2**64 - 1:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    return r
with open(d + "/f", "wb") as f: f.write(b"A" * 10000)
ro, rw = os.open(d + "/f", os.O_RDONLY), os.open(d + "/f", os.O_RDWR)
t("shared writable map of O_RDONLY", lambda: m(ro, 4096, R | W, SHARED, 0) and "mapped")
t("private writable map of O_RDONLY", lambda: m(ro, 4096, R | W, PRIVATE, 0) and "mapped")
t("negative offset", lambda: m(rw, 4096, R, SHARED, -4096) and "mapped")
a = m(rw, 8192, R | W, SHARED, 0)
ctypes.memmove(a + 100, b"XYZ", 3)
# (after a writable shared mapping of the file: the shim maps its pages, no copy)
t("mprotect writable, shared map of O_RDONLY", lambda: cerr(libc.mprotect(m(ro, 4096, R, SHARED, 0), 4096, R | W)))
t("mprotect writable, private map of O_RDONLY", lambda: cerr(libc.mprotect(m(ro, 4096, R, PRIVATE, 0), 4096, R | W)))
t("msync", lambda: (cerr(libc.msync(a, 8192, 4)), os.pread(ro, 3, 100))[1])
t("msync, MS_SYNC|MS_ASYNC", lambda: cerr(libc.msync(a, 8192, 4 | 1)))
t("msync off a page", lambda: cerr(libc.msync(a + 1, 10, 4)))
def grow():
    mm = mmap.mmap(rw, 8192)
    mm[0:4] = b"grow"
    mm.resize(40000)
    mm[39990:39995] = b"tail!"
    mm.flush()
    return os.fstat(rw).st_size, os.pread(ro, 4, 0), os.pread(ro, 5, 39990), mm[0:4]
t("mmap.resize larger", grow)
def c_mremap(flags):
    a = m(rw, 8192, R | W, SHARED, 0)
    r = libc.mremap(a, 8192, 16384, flags)
    if r is None or r == 2**64 - 1:
        return errno.errorcode[ctypes.get_errno()]
    ctypes.memmove(r + 12000, b"C", 1)
    return os.pread(ro, 1, 12000)
t("mremap, MREMAP_MAYMOVE", lambda: c_mremap(1))
t("mremap, MREMAP_FIXED", lambda: c_mremap(2))
"#;

#[test]
fn mappings_answer_as_the_kernels() {
    answers_with_libc(
        MAPS,
        &["mprotect writable, shared map of O_RDONLY EACCES", "mmap.resize larger (40000, b'grow', b'tail!', b'grow')"],
    );
}

const CWD: &str = r#"
import subprocess
os.mkdir(d + "/a")
os.chdir(d + "/a")
open("x", "w").write("1")
os.rename(d + "/a", d + "/b")
t("getcwd after a rename of it", lambda: os.getcwd() == d + "/b")
t("relative create after the rename", lambda: (open("y", "w").write("2"), sorted(os.listdir(d + "/b")))[1])
t("relative read", lambda: open("x").read())
t("stat .", lambda: os.stat(".").st_ino == os.stat(d + "/b").st_ino)
os.mkdir(d + "/a")
t("the old name is another directory", lambda: sorted(os.listdir(d + "/a")))
t("relative listing", lambda: sorted(os.listdir(".")))
t("a child starts where it is now", lambda: subprocess.run(["pwd"], capture_output=True, text=True).stdout.strip() == d + "/b")
os.unlink("x"); os.unlink("y")
os.rmdir(d + "/b")
t("getcwd of a removed one", lambda: os.getcwd())
t("create in a removed one", lambda: open("z", "w"))
os.chdir(d)
t("back", lambda: os.getcwd() == d)
print(sorted(os.listdir(d)))
"#;

#[test]
fn the_working_directory_follows_renames_as_the_kernels() {
    answers_as_the_kernels(CWD, &["relative create after the rename ['x', 'y']", "getcwd of a removed one ENOENT"]);
}

/// A child's working directory is its own: Python's subprocess changes into `cwd=` in a
/// `vfork` child, which runs in the parent's memory, and the shim's record of the working
/// directory is memory: the parent's relative paths went to the child's directory.
const CHILD_CWD: &str = r#"
import subprocess
start = os.getcwd()
os.mkdir(d + "/sub")
pwd = lambda **kw: subprocess.run(["pwd"], capture_output=True, text=True, **kw).stdout.strip()
t("a child in the image", lambda: pwd(cwd=d + "/sub") == d + "/sub")
t("its parent where it was", lambda: os.getcwd() == start)
os.chdir(d)
t("a child out of it", lambda: pwd(cwd="/"))
t("its parent in the image", lambda: os.getcwd() == d)
t("a child by a relative path", lambda: pwd(cwd="sub") == d + "/sub")
t("its parent still", lambda: os.getcwd() == d)
t("a relative name in the parent", lambda: os.path.isdir("sub"))
"#;

#[test]
fn a_childs_working_directory_is_its_own() {
    answers_as_the_kernels(CHILD_CWD, &["its parent where it was True", "its parent still True"]);
}

/// The kernel's links to a process's descriptors (`/proc/self/fd/N`, `/proc/PID/fd/N`,
/// `/dev/fd/N`) name a shim descriptor's placeholder, `/dev/null`: an open of one read
/// nothing and a write through it was lost (a shell's `echo two > /dev/fd/3` after
/// `exec 3> f`, `tee /dev/fd/3`), stat said a character device and readlink `/dev/null`.
/// Served now: an open is a new open file description of the descriptor's file (its own
/// offset, O_TRUNC and O_APPEND as asked, the permission checked again, an unlinked file
/// too), stat and access follow to the file, readlink gives its path, a directory's link
/// walks on below it. The same for `/proc/self/cwd` while the working directory is in the
/// image (the kernel's is the removed directory the shim parks the process in: a listing
/// of it was empty).
const DESCRIPTOR_LINKS: &str = r#"
import stat, subprocess
base = d.rstrip('/')
f = os.path.join(d, 'f'); open(f, 'w').write('hello')
fd = os.open(f, os.O_RDWR)
def reopen(path, flags):
    g = os.open(path, flags)
    try:
        return os.read(g, 10) if flags & 3 != os.O_WRONLY else b''
    finally:
        os.close(g)
t('reopen /proc/self/fd', lambda: reopen(f'/proc/self/fd/{fd}', os.O_RDONLY))
t('reopen /dev/fd', lambda: reopen(f'/dev/fd/{fd}', os.O_RDONLY))
t('reopen /proc/pid/fd', lambda: reopen(f'/proc/{os.getpid()}/fd/{fd}', os.O_RDONLY))
t('reopen /proc/thread-self/fd', lambda: reopen(f'/proc/thread-self/fd/{fd}', os.O_RDONLY))
t('python open /dev/fd', lambda: open(f'/dev/fd/{fd}').read())
t('stat /dev/fd', lambda: (str(os.stat(f'/dev/fd/{fd}').st_size), stat.S_ISREG(os.stat(f'/dev/fd/{fd}').st_mode), os.stat(f'/dev/fd/{fd}').st_ino == os.stat(f).st_ino))
t('lstat of the link', lambda: stat.S_ISLNK(os.lstat(f'/proc/self/fd/{fd}').st_mode))
t('access /dev/fd', lambda: os.access(f'/dev/fd/{fd}', os.R_OK | os.W_OK))
t('readlink', lambda: os.readlink(f'/proc/self/fd/{fd}').replace(base, 'D'))
t('O_EXCL', lambda: os.open(f'/dev/fd/{fd}', os.O_CREAT | os.O_EXCL | os.O_RDWR))
t('O_NOFOLLOW', lambda: os.open(f'/proc/self/fd/{fd}', os.O_NOFOLLOW | os.O_RDONLY))
t('O_DIRECTORY', lambda: os.open(f'/proc/self/fd/{fd}', os.O_DIRECTORY | os.O_RDONLY))
def own_offset():
    os.lseek(fd, 2, 0)
    g = os.open(f'/proc/self/fd/{fd}', os.O_RDONLY)
    r = (os.read(g, 2), str(os.lseek(fd, 0, 1)))
    os.close(g)
    return r
t('a new description', own_offset)
def write_through():
    g = os.open(f'/dev/fd/{fd}', os.O_WRONLY | os.O_APPEND)
    os.write(g, b' world'); os.close(g)
    return open(f).read()
t('append through the link', write_through)
t('O_TRUNC', lambda: str((os.close(os.open(f'/proc/self/fd/{fd}', os.O_WRONLY | os.O_TRUNC)), os.fstat(fd).st_size)[1]))
os.write(fd, b'again')
ro = os.open(f, os.O_RDONLY)
dd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
os.rename(f, f + '2')
t('readlink after a rename', lambda: os.readlink(f'/proc/self/fd/{fd}').replace(base, 'D'))
child = ['readlink', f'/proc/self/fd/{fd}']
t('readlink in a child', lambda: subprocess.run(child, pass_fds=[fd], capture_output=True, text=True).stdout.replace(base, 'D'))
os.rename(f + '2', f)
t('listdir of a directory link', lambda: sorted(os.listdir(f'/proc/self/fd/{dd}')))
t('a name below a directory link', lambda: open(f'/dev/fd/{dd}/f').read())
t('below a file link', lambda: open(f'/dev/fd/{fd}/x').read())
os.unlink(f)
t('reopen an unlinked file', lambda: reopen(f'/proc/self/fd/{ro}', os.O_RDONLY))
t('readlink unlinked', lambda: os.readlink(f'/proc/self/fd/{ro}').replace(base, 'D'))
t('stat unlinked', lambda: str(os.stat(f'/proc/self/fd/{ro}').st_nlink))
os.mkdir(d + '/w'); open(d + '/w/f', 'w').write('inside'); os.chdir(d + '/w')
t('readlink of the cwd link', lambda: os.readlink('/proc/self/cwd').replace(base, 'D'))
t('open under the cwd link', lambda: open(f'/proc/{os.getpid()}/cwd/f').read())
t('listdir of the cwd link', lambda: sorted(os.listdir('/proc/self/cwd')))
t('lstat of the cwd link', lambda: stat.S_ISLNK(os.lstat('/proc/self/cwd').st_mode))
os.chdir('/')
sh = 'exec 3>"$1"/log; echo one >&3; echo two > /dev/fd/3; echo three | tee -a /dev/fd/3 >/dev/null; exec 3>&-; cat "$1"/log'
t('a shell writing through /dev/fd', lambda: subprocess.run(['bash', '-c', sh, 'sh', d], capture_output=True, text=True).stdout)
"#;

#[test]
fn descriptor_links_answer_as_the_kernels() {
    answers_as_the_kernels(
        DESCRIPTOR_LINKS,
        &[
            "reopen /dev/fd b'hello'",
            "append through the link hello world",
            "listdir of the cwd link ['f']",
            "a shell writing through /dev/fd two\nthree",
        ],
    );
}

const SEEK: &str = r#"
B = 4096
fd = os.open(d + "/sparse", os.O_RDWR | os.O_CREAT, 0o644)
t("empty file, SEEK_DATA", lambda: str(os.lseek(fd, 0, os.SEEK_DATA)))
t("empty file, SEEK_HOLE", lambda: str(os.lseek(fd, 0, os.SEEK_HOLE)))
os.pwrite(fd, b"a" * 3 * B, 0)
os.pwrite(fd, b"b", 7 * B + 10)
os.ftruncate(fd, 10 * B)
def both(label):
    for off in [0, 100, 2 * B + 5, 3 * B, 4 * B + 1, 7 * B, 8 * B, 9 * B, 10 * B, 10**9, -1]:
        t(f"{label}: SEEK_DATA {off}", lambda: str(os.lseek(fd, off, os.SEEK_DATA)))
        t(f"{label}: SEEK_HOLE {off}", lambda: str(os.lseek(fd, off, os.SEEK_HOLE)))
        t(f"{label}: offset after {off}", lambda: str(os.lseek(fd, 0, os.SEEK_CUR)))
both("written")
# (Not a preallocation: tmpfs reports its blocks allocated and never written as holes,
# HashFS's mappings, which keep no unwritten state, as data: fs/seek.rs.)
os.pwrite(fd, b"c" * 2 * B, 4 * B)
both("filled")
cerr(libc.fallocate(fd, 3, ctypes.c_long(B), ctypes.c_long(B)))
both("punched")
t("SEEK_DATA on a directory", lambda: str(os.lseek(os.open(d, os.O_RDONLY), 0, os.SEEK_DATA)))
"#;

/// lseek's SEEK_DATA and SEEK_HOLE over runs, holes, a hole at the end, a filled hole and
/// a punched block, at and past the end and below zero, on a directory, and where each
/// leaves the offset.
#[test]
fn seek_data_and_seek_hole_answer_as_the_kernels() {
    answers_with_libc(
        SEEK,
        &["written: SEEK_HOLE 0 12288", "filled: SEEK_DATA 12288 16384", "punched: SEEK_HOLE 0 4096"],
    );
}

/// UNIX sockets bound and connected at paths in the image (`shim/socket.rs`): the socket
/// file and its mode, a second bind of the name, a connect from another process, through a
/// symbolic link and after a rename, to a file that is no socket, to a socket nothing listens
/// on or whose listener closed, to a missing name and after an unlink, a bind by a relative
/// path, a failed bind's name, datagrams sent with `sendto` and `sendmsg`; each answers
/// as the kernel's on a tmpfs. (Before 2026-12-07
/// bind and connect at a path in the image failed with EOPNOTSUPP: `socket-bind-refused`;
/// with the kernel node kept per process, another process's connect is refused:
/// `socket-node-unshared`; a failed bind that keeps the name it made: `socket-failed-bind-named`;
/// datagrams to a path in the image sent to the path as written: `socket-datagram-unserved`.)
#[test]
fn unix_sockets_in_the_image_answer_as_the_kernels() {
    answers_as_the_kernels(
        r#"
import socket, stat, subprocess
U = socket.AF_UNIX
s = socket.socket(U)
t("bind", lambda: s.bind(d + "/sock"))
t("listen", lambda: s.listen(4))
t("a socket", lambda: stat.S_ISSOCK(os.lstat(d + "/sock").st_mode))
t("mode", lambda: oct(os.lstat(d + "/sock").st_mode & 0o777))
t("bind again", lambda: socket.socket(U).bind(d + "/sock"))
t("bind a bound socket", lambda: s.bind(d + "/second"))
t("its second name", lambda: os.path.exists(d + "/second"))
client = "import socket, sys\nc = socket.socket(socket.AF_UNIX)\nc.connect(sys.argv[1])\nc.send(b'from ' + sys.argv[1][-4:].encode())"
p = subprocess.Popen([sys.executable, "-c", client, d + "/sock"], stderr=subprocess.DEVNULL)
s.settimeout(10) # (a connect refused in the other process leaves no one to accept)
def accepted():
    a, _ = s.accept()
    return a.recv(20)
t("another process's", accepted)
t("its exit", lambda: p.wait())
c = socket.socket(U)
t("connect", lambda: c.connect(d + "/sock"))
a, _ = s.accept()
t("send", lambda: c.send(b"x"))
t("recv", lambda: a.recv(1))
os.symlink("sock", d + "/ln")
t("connect by a link", lambda: socket.socket(U).connect(d + "/ln"))
os.rename(d + "/sock", d + "/moved")
t("connect renamed", lambda: socket.socket(U).connect(d + "/moved"))
t("connect old name", lambda: socket.socket(U).connect(d + "/sock"))
open(d + "/f", "w").close()
t("connect a file", lambda: socket.socket(U).connect(d + "/f"))
t("bind over a file", lambda: socket.socket(U).bind(d + "/f"))
t("connect missing", lambda: socket.socket(U).connect(d + "/none"))
t("bind in a missing dir", lambda: socket.socket(U).bind(d + "/no/s"))
idle = socket.socket(U)
t("bind idle", lambda: idle.bind(d + "/idle"))
t("connect idle", lambda: socket.socket(U).connect(d + "/idle"))
s.close()
t("connect closed", lambda: socket.socket(U).connect(d + "/moved"))
t("unlink", lambda: os.unlink(d + "/moved"))
t("connect unlinked", lambda: socket.socket(U).connect(d + "/moved"))
t("bind after unlink", lambda: socket.socket(U).bind(d + "/moved"))
D = socket.SOCK_DGRAM
g = socket.socket(U, D)
t("bind a datagram socket", lambda: g.bind(d + "/dg"))
g.setblocking(False) # (a datagram sent elsewhere leaves nothing to wait for)
t("sendto", lambda: socket.socket(U, D).sendto(b"to", d + "/dg"))
t("received", lambda: g.recv(2))
t("sendmsg", lambda: socket.socket(U, D).sendmsg([b"msg"], [], 0, d + "/dg"))
t("received by message", lambda: g.recv(3))
t("sendto a file", lambda: socket.socket(U, D).sendto(b"x", d + "/f"))
t("sendto missing", lambda: socket.socket(U, D).sendto(b"x", d + "/none"))
os.chdir(d)
r = socket.socket(U)
t("bind relative", lambda: r.bind("rel"))
t("listen relative", lambda: r.listen(1))
t("connect relative", lambda: socket.socket(U).connect(d + "/rel"))
"#,
        &[
            "bind ok",
            "a socket True",
            "bind again EADDRINUSE",
            "bind a bound socket EINVAL",
            "its second name False",
            "another process's b'from sock'",
            "connect renamed ok",
            "connect old name ENOENT",
            "connect a file ECONNREFUSED",
            "connect idle ECONNREFUSED",
            "connect closed ECONNREFUSED",
            "connect unlinked ENOENT",
            "connect relative ok",
            "received b'to'",
            "received by message b'msg'",
            "sendto a file ECONNREFUSED",
            "sendto missing ENOENT",
        ],
    );
}
