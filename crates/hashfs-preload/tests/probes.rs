//! Feature probes on HashFS descriptors get the answers of a file system without the
//! feature, so programs fall back (issue 52): `ioctl` (clone and dedupe ranges
//! EOPNOTSUPP, inode flags, FIONREAD, FIGETBSZ, close-on-exec; ENOTTY otherwise), and libc's
//! `syscall()` for the calls the shim serves. Before, every one failed with EBADF (the
//! descriptor is an O_PATH placeholder) and `syscall(SYS_copy_file_range, ...)` reached
//! the kernel with it.

mod common;

use common::{answers_as_the_kernels, image, p};

const SCRIPT: &str = r#"
import ctypes, errno, fcntl, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
FICLONE, FICLONERANGE, FIDEDUPERANGE = 0x40049409, 0x4020940D, 0xC0189436
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FIGETBSZ, FIONREAD, FIOCLEX = 0x80086601, 0x40086602, 2, 0x541B, 0x5451
SYS_openat, SYS_read, SYS_close, SYS_copy_file_range, SYS_fstat, SYS_lseek = 257, 0, 3, 326, 5, 8
d = sys.argv[1]
with open(d + "/src", "wb") as f:
    f.write(b"0123456789" * 1000)
src = os.open(d + "/src", os.O_RDONLY)
dst = os.open(d + "/dst", os.O_CREAT | os.O_RDWR, 0o644)
def err(f):
    try:
        f()
    except OSError as e:
        return errno.errorcode[e.errno]
    return "ok"
print("ficlone", err(lambda: fcntl.ioctl(dst, FICLONE, src)))
print("ficlonerange", err(lambda: fcntl.ioctl(dst, FICLONERANGE, struct.pack("qQQQ", src, 0, 4096, 0))))
print("dedupe", err(lambda: fcntl.ioctl(dst, FIDEDUPERANGE, bytearray(24 + 32))))
host = os.open("/tmp", os.O_TMPFILE | os.O_RDWR, 0o600)
print("ficlone-from-hashfs", err(lambda: fcntl.ioctl(host, FICLONE, src)))
print("getflags", struct.unpack("i", fcntl.ioctl(src, FS_IOC_GETFLAGS, b"\xff" * 4))[0])
print("setflags-none", err(lambda: fcntl.ioctl(dst, FS_IOC_SETFLAGS, struct.pack("i", 0))))
print("setflags-append", err(lambda: fcntl.ioctl(dst, FS_IOC_SETFLAGS, struct.pack("i", 0x20))))
os.lseek(src, 1000, os.SEEK_SET)
print("fionread", struct.unpack("i", fcntl.ioctl(src, FIONREAD, b"\0" * 4))[0])
print("figetbsz", struct.unpack("i", fcntl.ioctl(src, FIGETBSZ, b"\0" * 4))[0])
print("isatty", os.isatty(src))
fcntl.ioctl(dst, FIOCLEX)
print("cloexec", bool(fcntl.fcntl(dst, fcntl.F_GETFD) & fcntl.FD_CLOEXEC))
# syscall() by number, as a program without glibc's wrappers makes them.
n = libc.syscall(L(SYS_copy_file_range), L(src), None, L(dst), None, L(10000), L(0))
print("copy_file_range", n, ctypes.get_errno() if n < 0 else "")
os.lseek(dst, 0, os.SEEK_SET)
print("copied", os.read(dst, 20000) == (b"0123456789" * 1000)[1000:])  # from src's position
fd = libc.syscall(L(SYS_openat), L(-100), ctypes.c_char_p((d + "/src").encode()), L(os.O_RDONLY), L(0))
buf = ctypes.create_string_buffer(10)
print("openat+read", fd >= 0, libc.syscall(L(SYS_read), L(fd), buf, L(10)), buf.raw)
st = ctypes.create_string_buffer(144)
print("fstat", libc.syscall(L(SYS_fstat), L(fd), st), struct.unpack_from("q", st, 48)[0])
print("close", libc.syscall(L(SYS_close), L(fd)))
sfs = ctypes.create_string_buffer(120)
print("fstatfs", libc.syscall(L(138), L(src), sfs), hex(struct.unpack_from("q", sfs, 0)[0]))
print("getpid", libc.syscall(L(39)) == os.getpid())
"#;

#[test]
fn ioctl_probes_and_syscall_by_number_are_answered() {
    let img = image();
    let out = img.ok("python3", &["-c", SCRIPT, &p("")]);
    let want = [
        "ficlone ENOTSUP", // EOPNOTSUPP: the same number on Linux
        "ficlonerange ENOTSUP",
        "dedupe ENOTSUP",
        "ficlone-from-hashfs EXDEV",
        "getflags 0",
        "setflags-none ok",
        "setflags-append ENOTSUP",
        "fionread 9000",
        "figetbsz 4096",
        "isatty False",
        "cloexec True",
        "copy_file_range 9000 ",
        "copied True",
        "openat+read True 10 b'0123456789'",
        "fstat 0 10000",
        "close 0",
        "fstatfs 0 0x48534653", // HashFS's f_type ("HSFS"), not /dev/null's file system
        "getpid True",
    ];
    assert_eq!(out.lines().collect::<Vec<_>>(), want, "{out}");
    img.fsck_clean();
}

/// `cp --reflink=auto` probes FICLONE and falls back to copying.
#[test]
fn cp_reflink_auto_falls_back_to_a_copy() {
    let img = image();
    img.ok("sh", &["-c", &format!("seq 1 20000 > {}", p("/a"))]);
    img.ok("cp", &["--reflink=auto", &p("/a"), &p("/b")]);
    img.ok("cmp", &[&p("/a"), &p("/b")]);
    let o = img.run("cp", &["--reflink=always", &p("/a"), &p("/c")]);
    assert!(!o.status.success(), "no clones: --reflink=always fails");
    img.fsck_clean();
}

/// lseek answers as the kernel's does on tmpfs, for a file without holes: every `whence`
/// (SEEK_DATA and SEEK_HOLE as the probes `cp` and `tar` make), ENXIO past the end,
/// EINVAL before the start or for an unknown `whence`.
const SEEKS: &str = r#"
fd = os.open(d + "/s", os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
os.write(fd, b"x" * 10000)
def seek(off, whence):
    try:
        return os.lseek(fd, off, whence)
    except OSError as e:
        return errno.errorcode[e.errno]
print([seek(*a) for a in [(100, os.SEEK_SET), (-10, os.SEEK_CUR), (5, os.SEEK_CUR), (0, os.SEEK_END),
    (-1, os.SEEK_END), (7, os.SEEK_END), (-20000, os.SEEK_END), (-1, os.SEEK_SET),
    (0, os.SEEK_DATA), (4096, os.SEEK_DATA), (9999, os.SEEK_DATA), (10000, os.SEEK_DATA),
    (0, os.SEEK_HOLE), (9999, os.SEEK_HOLE), (10000, os.SEEK_HOLE), (12000, os.SEEK_HOLE),
    (0, 99)]])
print(os.lseek(fd, 0, os.SEEK_CUR), len(os.read(fd, 20000)))
"#;

#[test]
fn lseek_answers_as_the_kernels() {
    answers_as_the_kernels(SEEKS, &["ENXIO"]);
}

/// Paths that end in a slash, "." or "..", and the calls on names that POSIX answers by
/// the entry's kind, answered as the kernel does on tmpfs. Before, the shim's normalized
/// paths lost their end: `rmdir("x/.")` removed x, `open("f/")` opened a file and
/// `open("new/", O_CREAT)` made one; O_TRUNC opened a directory, what was made in a
/// set-group-ID directory took the caller's group (the mount's daemon did it right), and a
/// path past PATH_MAX was ENOENT (ENAMETOOLONG).
const ENDS: &str = r#"
open(d + "/a", "w").write("a")
os.mkdir(d + "/x"); os.mkdir(d + "/e"); os.symlink("x", d + "/lx"); os.symlink("a", d + "/la")
t("stat file/", lambda: os.stat(d + "/a/"))
t("stat dir/", lambda: os.stat(d + "/x/"))
t("stat dir/.", lambda: os.stat(d + "/x/."))
t("lstat link-to-dir/", lambda: oct(os.lstat(d + "/lx/").st_mode >> 12))
t("lstat link-to-file/", lambda: os.lstat(d + "/la/"))
t("open file/", lambda: os.open(d + "/a/", os.O_RDONLY))
t("open file/.", lambda: os.open(d + "/a/.", os.O_RDONLY))
t("open dir/.", lambda: os.open(d + "/x/.", os.O_RDONLY))
t("create new/", lambda: os.open(d + "/n/", os.O_CREAT | os.O_WRONLY))
t("create dir/.", lambda: os.open(d + "/x/.", os.O_CREAT | os.O_RDONLY))
t("chmod file/", lambda: os.chmod(d + "/a/", 0o644))
t("unlink file/", lambda: os.unlink(d + "/a/"))
t("unlink dir/", lambda: os.unlink(d + "/x/"))
t("unlink dir/.", lambda: os.unlink(d + "/x/."))
t("unlink missing/", lambda: os.unlink(d + "/m/"))
t("unlink dir", lambda: os.unlink(d + "/x"))
t("rmdir dir/.", lambda: os.rmdir(d + "/x/."))
t("rmdir dir/..", lambda: os.rmdir(d + "/x/.."))
t("rmdir file", lambda: os.rmdir(d + "/a"))
t("mkdir dir/.", lambda: os.mkdir(d + "/x/."))
t("mkdir new/", lambda: os.mkdir(d + "/nd/"))
t("rename file/ away", lambda: os.rename(d + "/a/", d + "/c"))
t("rename file to c/", lambda: os.rename(d + "/a", d + "/c/"))
t("rename dir/. away", lambda: os.rename(d + "/x/.", d + "/y"))
t("rename onto dir/.", lambda: os.rename(d + "/e", d + "/x/."))
t("rename dir/ to y/", lambda: os.rename(d + "/e/", d + "/y/"))
t("rename file over dir", lambda: os.rename(d + "/a", d + "/x"))
t("rename dir over file", lambda: os.rename(d + "/x", d + "/a"))
t("symlink at new/", lambda: os.symlink("t", d + "/s/"))
t("symlink at dir/", lambda: os.symlink("t", d + "/x/"))
t("link at dir/.", lambda: os.link(d + "/a", d + "/x/."))
t("link to dir", lambda: os.link(d + "/x", d + "/xl"))
t("mkfifo at new/", lambda: os.mkfifo(d + "/f/"))
t("rmdir dir/", lambda: os.rmdir(d + "/nd/"))
t("read dir", lambda: os.read(os.open(d + "/x", os.O_RDONLY), 1))
t("write-open dir", lambda: os.open(d + "/x", os.O_WRONLY))
t("O_TRUNC of dir", lambda: os.open(d + "/x", os.O_RDONLY | os.O_TRUNC))
t("stat past PATH_MAX", lambda: os.stat(d + "/" + "x/" * 2100))
t("create past PATH_MAX", lambda: os.open(d + "/" + "/" * 4100 + "n", os.O_CREAT | os.O_WRONLY))
os.chmod(d + "/x", 0o2775); os.chown(d + "/x", 0, 100)
open(d + "/x/f", "w").close(); os.mkdir(d + "/x/sub", 0o755)
t("in a set-group-ID dir", lambda: [os.stat(d + "/x/f").st_gid, os.stat(d + "/x/sub").st_gid, oct(os.stat(d + "/x/sub").st_mode)])
print(sorted(os.listdir(d)))
"#;

/// A directory descriptor walks from its directory wherever it is now, and O_CREAT makes
/// the file a dangling symbolic link names, as on Linux. Before, a descriptor walked from
/// the path it was opened by: after a rename of its directory, `openat` found nothing, or
/// the file of whatever directory took the old name; and O_CREAT through a dangling link
/// was ENOENT.
const DIRFDS: &str = r#"
os.mkdir(d + "/dir"); open(d + "/dir/f", "w").write("in dir")
dfd = os.open(d + "/dir", os.O_RDONLY | os.O_DIRECTORY)
t("openat before the move", lambda: os.read(os.open("f", os.O_RDONLY, dir_fd=dfd), 20))
os.rename(d + "/dir", d + "/moved")
t("openat after the dir moved", lambda: os.read(os.open("f", os.O_RDONLY, dir_fd=dfd), 20))
os.mkdir(d + "/dir"); open(d + "/dir/f", "w").write("new dir")
t("openat after another took the name", lambda: os.read(os.open("f", os.O_RDONLY, dir_fd=dfd), 20))
t("mkdir via the moved dir's fd", lambda: os.mkdir("sub", dir_fd=dfd))
t("listdir via fd", lambda: sorted(os.listdir(dfd)))
t("fchdir then relative", lambda: (os.fchdir(dfd), open("f").read())[1])
os.chdir("/")
os.mkdir(d + "/gone"); gfd = os.open(d + "/gone", os.O_RDONLY); os.rmdir(d + "/gone")
t("openat in a removed dir", lambda: os.open("x", os.O_RDONLY, dir_fd=gfd))
t("create in a removed dir", lambda: os.open("x", os.O_CREAT | os.O_WRONLY, dir_fd=gfd))
os.symlink("target", d + "/dang")
t("O_CREAT through a dangling link", lambda: (os.close(os.open(d + "/dang", os.O_CREAT | os.O_WRONLY)), os.path.exists(d + "/target"))[1])
os.symlink("t2", d + "/dang2")
t("O_EXCL on a dangling link", lambda: os.open(d + "/dang2", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
t("O_NOFOLLOW on a dangling link", lambda: os.open(d + "/dang2", os.O_CREAT | os.O_NOFOLLOW | os.O_WRONLY))
print(sorted(os.listdir(d)))
"#;

/// renameat2's flags: RENAME_NOREPLACE and RENAME_EXCHANGE (of files, of a file and a
/// directory, with a missing name, into the source's own child), and the flags Linux
/// refuses. Before, NOREPLACE|EXCHANGE together exchanged and an unknown flag renamed.
/// (RENAME_WHITEOUT, which tmpfs has, is EINVAL through the shim, as on a file system
/// without it.)
const RENAMES: &str = r#"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def r2(a, b, flags):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), flags) != 0:
        raise OSError(ctypes.get_errno(), "")
open(d + "/a", "w").write("A"); open(d + "/b", "w").write("B")
os.mkdir(d + "/x"); os.mkdir(d + "/y"); open(d + "/x/in", "w").close()
t("noreplace over a file", lambda: r2(d + "/a", d + "/b", 1))
t("noreplace to a new name", lambda: (r2(d + "/a", d + "/c", 1), sorted(os.listdir(d)))[1])
t("exchange files", lambda: (r2(d + "/c", d + "/b", 2), open(d + "/b").read(), open(d + "/c").read())[1:])
t("exchange a file and a dir", lambda: (r2(d + "/b", d + "/x", 2), os.path.isdir(d + "/b"), os.path.isfile(d + "/x"))[1:])
t("exchange with a missing name", lambda: r2(d + "/b", d + "/nope", 2))
t("noreplace and exchange", lambda: r2(d + "/b", d + "/c", 3))
t("an unknown flag", lambda: r2(d + "/b", d + "/c", 8))
t("exchange into its own child", lambda: r2(d + "/b", d + "/b/in", 2))
t("link counts after", lambda: (os.stat(d).st_nlink, os.stat(d + "/b").st_nlink))
t("dot-dot of the exchanged dir", lambda: os.stat(d + "/b/..").st_ino == os.stat(d).st_ino)
t("rename a dir over a non-empty one", lambda: os.rename(d + "/y", d + "/b"))
print(sorted(os.listdir(d)))
"#;

/// open's flags as Linux takes them. Before, O_CREAT|O_DIRECTORY made a file and then
/// failed (Linux 6.4 on: EINVAL first), O_PATH|O_NOFOLLOW on a symbolic link was ELOOP (the
/// link itself), and an O_PATH descriptor read the file (EBADF).
const OPENS: &str = r#"
import fcntl
open(d + "/a", "w").write("abc"); os.mkdir(d + "/x"); os.symlink("a", d + "/l")
t("O_EXCL without O_CREAT", lambda: os.open(d + "/a", os.O_RDONLY | os.O_EXCL))
t("O_CREAT|O_DIRECTORY of a new name", lambda: os.open(d + "/nd", os.O_CREAT | os.O_DIRECTORY | os.O_RDONLY))
t("O_CREAT|O_DIRECTORY of a dir", lambda: os.open(d + "/x", os.O_CREAT | os.O_DIRECTORY | os.O_RDONLY))
t("O_PATH|O_NOFOLLOW of a link", lambda: oct(os.fstat(os.open(d + "/l", os.O_PATH | os.O_NOFOLLOW)).st_mode >> 12))
t("read from O_PATH", lambda: os.read(os.open(d + "/a", os.O_PATH), 1))
t("write to O_PATH", lambda: os.write(os.open(d + "/a", os.O_PATH), b"x"))
t("fstat of O_PATH", lambda: str(os.fstat(os.open(d + "/a", os.O_PATH)).st_size))
t("O_DSYNC kept", lambda: bool(fcntl.fcntl(os.open(d + "/a", os.O_WRONLY | os.O_DSYNC), fcntl.F_GETFL) & os.O_DSYNC))
t("O_CLOEXEC", lambda: str(fcntl.fcntl(os.open(d + "/a", os.O_RDONLY | os.O_CLOEXEC), fcntl.F_GETFD)))
t("O_APPEND|O_RDONLY write", lambda: os.write(os.open(d + "/a", os.O_RDONLY | os.O_APPEND), b"x"))
t("O_CREAT's mode on an existing file", lambda: (os.chmod(d + "/a", 0o640), os.open(d + "/a", os.O_CREAT | os.O_WRONLY, 0o777), oct(os.stat(d + "/a").st_mode))[2])
print(sorted(os.listdir(d)))
"#;

#[test]
fn names_ending_in_a_slash_or_dot_answer_as_the_kernels() {
    answers_as_the_kernels(ENDS, &["rmdir dir/. EINVAL", "ENOTDIR"]);
}

#[test]
fn open_flags_answer_as_the_kernels() {
    answers_as_the_kernels(OPENS, &["O_CREAT|O_DIRECTORY of a new name EINVAL", "read from O_PATH EBADF"]);
}

#[test]
fn renameat2_flags_answer_as_the_kernels() {
    answers_as_the_kernels(RENAMES, &["noreplace and exchange EINVAL", "exchange files ('A', 'B')"]);
}

#[test]
fn directory_descriptors_and_dangling_links_answer_as_the_kernels() {
    answers_as_the_kernels(DIRFDS, &["openat after another took the name b'in dir'", "link True"]);
}
