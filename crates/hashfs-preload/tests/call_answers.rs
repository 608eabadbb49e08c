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

mod common;

use common::answers_as_the_kernels;

const FLAGS: &str = r#"
import ctypes, fcntl, stat
libc = ctypes.CDLL(None, use_errno=True)
def cerr(r):
    if r < 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    return r
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
    answers_as_the_kernels(
        FLAGS,
        &["unlinkat unknown flag EINVAL", "file still there True", "write to a directory's descriptor EBADF"],
    );
}
