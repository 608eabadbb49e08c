# Run under the shim with HASHFS_MOUNT=$1: the calls beyond read/write, each checked
# against the bytes it must produce. Prints "ok" at the end.
import ctypes, errno, fcntl, mmap, os, socket, struct, sys, tempfile, termios

P = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def expect_errno(code, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except OSError as e:
        assert e.errno == code, (fn, e)
        return
    raise AssertionError(f"{fn} succeeded, expected errno {code}")


# --- vector and v2 calls ------------------------------------------------------------------
fd = os.open(P + "/v", os.O_CREAT | os.O_RDWR, 0o644)
assert os.pwritev(fd, [b"abc", b"", b"defgh"], 100) == 8
assert os.preadv(fd, [bytearray(3), bytearray(10)], 100) == 8
a, b = bytearray(3), bytearray(10)
os.preadv(fd, [a, b], 100)
assert bytes(a) + bytes(b[:5]) == b"abcdefgh" and os.fstat(fd).st_size == 108
bufs = [bytearray(50), bytearray(50)]
assert os.preadv(fd, bufs, 0) == 100 and bytes(bufs[0]) == bytes(50)  # the hole reads as zeros
# preadv2/pwritev2: offset -1 uses and moves the position; RWF_APPEND goes to the end.
os.lseek(fd, 101, os.SEEK_SET)
buf = bytearray(4)
assert os.preadv(fd, [buf], -1, os.RWF_HIPRI) == 4 and bytes(buf) == b"bcde"
assert os.lseek(fd, 0, os.SEEK_CUR) == 105
assert os.pwritev(fd, [b"XY"], -1, os.RWF_DSYNC) == 2 and os.lseek(fd, 0, os.SEEK_CUR) == 107
assert os.pwritev(fd, [b"END"], 0, os.RWF_APPEND) == 3 and os.fstat(fd).st_size == 111
assert os.pread(fd, 11, 100) == b"abcdeXYhEND"
# RWF_ATOMIC (untorn writes), with the units statx reports: one buffer, a power of two
# between the units, naturally aligned; anything else is EINVAL. Unknown flags: EOPNOTSUPP.
RWF_ATOMIC, STATX_WRITE_ATOMIC, STATX_ATTR_WRITE_ATOMIC = 0x40, 0x10000, 0x400000
stx = ctypes.create_string_buffer(256)
assert libc.statx(-100, (P + "/v").encode(), 0, 0x7FF | STATX_WRITE_ATOMIC, stx) == 0
mask, attrs, amask = struct.unpack_from("<I", stx, 0)[0], struct.unpack_from("<Q", stx, 8)[0], struct.unpack_from("<Q", stx, 56)[0]
unit_min, unit_max, segs = struct.unpack_from("<III", stx, 168)
assert mask & STATX_WRITE_ATOMIC and attrs & STATX_ATTR_WRITE_ATOMIC and amask & STATX_ATTR_WRITE_ATOMIC, hex(mask)
assert (unit_min, unit_max, segs) == (4096, 1 << 20, 1), (unit_min, unit_max, segs)
block = bytes(range(256)) * 16
assert os.pwritev(fd, [block], 4096, RWF_ATOMIC) == 4096 and os.pread(fd, 4096, 4096) == block
assert os.pwritev(fd, [block * 256], 1 << 20, RWF_ATOMIC) == 1 << 20 and os.fstat(fd).st_size == 2 << 20
assert os.pread(fd, 11, 100) == b"abcdeXYhEND", "bytes outside the untorn writes stay"
expect_errno(errno.EINVAL, os.pwritev, fd, [block * 2], 4096, RWF_ATOMIC)  # not aligned to its length
expect_errno(errno.EINVAL, os.pwritev, fd, [b"x" * 3000], 0, RWF_ATOMIC)  # not a power of two
expect_errno(errno.EINVAL, os.pwritev, fd, [b"x" * 2048], 0, RWF_ATOMIC)  # below the unit
expect_errno(errno.EINVAL, os.pwritev, fd, [block * 512], 0, RWF_ATOMIC)  # above the unit
expect_errno(errno.EINVAL, os.pwritev, fd, [block, block], 0, RWF_ATOMIC)  # two segments
assert os.pwritev(fd, [block], 0, RWF_ATOMIC | os.RWF_APPEND) == 4096 and os.fstat(fd).st_size == (2 << 20) + 4096
expect_errno(errno.EOPNOTSUPP, os.pwritev, fd, [b"x"], 0, 0x4000)  # a flag the shim does not know
os.ftruncate(fd, 111)
# preadv itself (not preadv2) takes no offset -1.
class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
one = ctypes.create_string_buffer(4)
vec = Iovec(ctypes.cast(one, ctypes.c_void_p), 4)
assert libc.preadv(fd, ctypes.byref(vec), 1, ctypes.c_long(-1)) == -1 and ctypes.get_errno() == errno.EINVAL
assert libc.preadv(fd, ctypes.byref(vec), 1, ctypes.c_long(100)) == 4 and one.raw == b"abcd"
ro = os.open(P + "/v", os.O_RDONLY)
expect_errno(errno.EBADF, os.pwritev, ro, [b"x"], 0)
os.close(ro)

# --- copies --------------------------------------------------------------------------------
src = os.open(P + "/src", os.O_CREAT | os.O_RDWR, 0o644)
data = bytes((i * 7 + 3) % 251 for i in range(300_000))
os.write(src, data)
dst = os.open(P + "/dst", os.O_CREAT | os.O_RDWR, 0o644)
assert os.copy_file_range(src, dst, 300_000, 0, 0) == 300_000  # ours to ours
assert os.pread(dst, 300_000, 0) == data
with tempfile.TemporaryFile() as host:  # ours to the host and back
    h = host.fileno()
    assert os.copy_file_range(src, h, 1000, 5000) == 1000
    assert os.pread(h, 1000, 0) == data[5000:6000]
    assert os.copy_file_range(h, dst, 1000, 0, 10) == 1000
    assert os.pread(dst, 1000, 10) == data[5000:6000]
    os.lseek(src, 0, os.SEEK_SET)
    assert os.sendfile(h, src, 200, 777) == 777  # the offset given; the position stays
    assert os.lseek(src, 0, os.SEEK_CUR) == 0
    assert os.pread(h, 777, 1000) == data[200:977]
r, w = os.pipe()  # splice through a pipe, both ways
assert os.splice(src, w, 4096, offset_src=8192) == 4096
assert os.read(r, 4096) == data[8192:12288]
os.write(w, b"spliced!")
assert os.splice(r, dst, 8, offset_dst=3) == 8
assert os.pread(dst, 8, 3) == b"spliced!"
s1, s2 = socket.socketpair()
os.lseek(src, 100, os.SEEK_SET)
assert os.sendfile(s1.fileno(), src, None, 50) == 50 and s2.recv(50) == data[100:150]
assert os.lseek(src, 0, os.SEEK_CUR) == 150

# --- UNIX sockets bound in the image are served (a kernel socket stands for each,
# shim/socket.rs); opening a socket's file is not (Linux: ENXIO)
us = socket.socket(socket.AF_UNIX)
us.bind(P + "/sock")
us.listen(1)
assert os.stat(P + "/sock").st_mode & 0o170000 == 0o140000
uc = socket.socket(socket.AF_UNIX)
uc.connect(P + "/sock")
ua, _ = us.accept()
uc.send(b"u")
assert ua.recv(1) == b"u"
expect_errno(errno.EOPNOTSUPP, os.open, P + "/sock", os.O_RDONLY)
for x in (ua, uc, us):
    x.close()
os.unlink(P + "/sock")
os.mkfifo(P + "/fifo")  # a FIFO can be made, seen and opened (a kernel FIFO stands for it)...
assert os.stat(P + "/fifo").st_mode & 0o170000 == 0o010000
os.close(os.open(P + "/fifo", os.O_RDONLY | os.O_NONBLOCK))
os.unlink(P + "/fifo")
if os.geteuid() == 0:  # ...a device made, seen, not opened
    os.mknod(P + "/null", 0o600 | 0o020000, os.makedev(1, 3))
    assert os.stat(P + "/null").st_mode & 0o170000 == 0o020000
    expect_errno(errno.EOPNOTSUPP, os.open, P + "/null", os.O_RDONLY)

# --- ioctl is answered as a file system without the features asked about (FIONREAD: what
# is left to read; a terminal's request: ENOTTY); anything not intercepted (a raw
# getdents64 by number) fails loudly (EBADF), never acts on /dev/null --------------------
assert struct.unpack("i", fcntl.ioctl(src, termios.FIONREAD, b"\0" * 4))[0] == os.fstat(src).st_size - 150
expect_errno(errno.ENOTTY, fcntl.ioctl, src, termios.TCGETS, b"\0" * 64)
libc_raw = ctypes.CDLL(None, use_errno=True)
libc_raw.syscall.restype = ctypes.c_long
assert libc_raw.syscall(ctypes.c_long(217), ctypes.c_long(src), ctypes.create_string_buffer(4096), ctypes.c_long(4096)) == -1
assert ctypes.get_errno() == errno.EBADF

# --- mmap: shared mappings map the image, whatever the protection -------------------------
m_fd = os.open(P + "/mapped", os.O_CREAT | os.O_RDWR, 0o644)
os.write(m_fd, b"a" * 5000)
ro_map = mmap.mmap(m_fd, 5000, mmap.MAP_SHARED, mmap.PROT_READ)
rw_map = mmap.mmap(m_fd, 5000, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
os.pwrite(m_fd, b"WRITTEN", 10)
assert ro_map[10:17] == b"WRITTEN" and rw_map[10:17] == b"WRITTEN"  # a write shows through both
rw_map[100:103] = b"MAP"
assert ro_map[100:103] == b"MAP" and os.pread(m_fd, 3, 100) == b"MAP"
# A mapping larger than the file: pages past EOF appear once the file grows over them.
big = libc.mmap(None, 65536, mmap.PROT_READ, mmap.MAP_SHARED, m_fd, 0)
os.pwrite(m_fd, b"far", 40_000)
assert ctypes.string_at(big + 40_000, 3) == b"far" and ctypes.string_at(big + 5000, 3) == bytes(3)
os.ftruncate(m_fd, 50_000)  # growing under a mapping is allowed, shrinking is not
os.pwrite(m_fd, b"grown", 49_000)
assert ctypes.string_at(big + 49_000, 5) == b"grown"
expect_errno(errno.EBUSY, os.ftruncate, m_fd, 5000)
assert libc.munmap(big, 65536) == 0
ro_map.close()
rw_map.close()
# Odd lengths and partial unmaps through libc: the record goes with the last page, so
# truncating the file afterwards works.
PROT_RW, SHARED = mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED
addr = libc.mmap(None, 3 * 4096 + 5, PROT_RW, SHARED, m_fd, 0)
assert addr not in (None, ctypes.c_void_p(-1).value)
assert ctypes.string_at(addr + 10, 7) == b"WRITTEN"
assert libc.munmap(addr + 4096, 4096) == 0  # a hole in the middle
expect_errno(errno.EBUSY, os.ftruncate, m_fd, 10)  # still mapped around the hole
assert ctypes.string_at(addr + 10, 7) == b"WRITTEN"
assert ctypes.string_at(addr + 2 * 4096, 1) == b"\0"  # past the first 5000 bytes: the hole
assert libc.munmap(addr, 4096 + 1) == 0 and libc.munmap(addr + 2 * 4096, 4096 + 5) == 0
os.ftruncate(m_fd, 10)
assert os.fstat(m_fd).st_size == 10
os.close(m_fd)

# --- holes stay holes until written through a mapping (as LMDB's MDB_WRITEMAP expects) ----
MIB = 1 << 20


def free_bytes():
    st = os.statvfs(P)
    return st.f_bfree * st.f_frsize


libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
h_fd = os.open(P + "/sparse", os.O_CREAT | os.O_RDWR, 0o644)
os.ftruncate(h_fd, 64 * MIB)
free0 = free_bytes()
hm = libc.mmap(None, 64 * MIB, PROT_RW, SHARED, h_fd, 0)
assert hm not in (None, ctypes.c_void_p(-1).value)
assert free_bytes() == free0, "mapping a hole allocates nothing"
assert ctypes.string_at(hm + 5 * MIB, 4096) == bytes(4096) and free_bytes() == free0, "nor does reading it"
ctypes.memmove(hm + 5 * MIB + 100, b"lazy", 4)  # the first store: its 2 MiB get blocks
used = free0 - free_bytes()
assert 4096 <= used <= 2 * MIB + 64 * 1024, used
assert os.pread(h_fd, 4, 5 * MIB + 100) == b"lazy"
assert ctypes.string_at(hm + 5 * MIB, 4096) == bytes(100) + b"lazy" + bytes(4096 - 104)
# A store into a page first read as a hole (its zero page is write-protected) is the file's.
assert ctypes.string_at(hm + 50 * MIB, 1) == b"\0"
ctypes.memmove(hm + 50 * MIB + 7, b"wp", 2)
assert os.pread(h_fd, 2, 50 * MIB + 7) == b"wp"
# The kernel writing into a hole (read(2) from a pipe) fills it too.
rp, wp = os.pipe()
os.write(wp, b"kernel")
assert libc.read(rp, hm + 9 * MIB + 1, 6) == 6
assert os.pread(h_fd, 6, 9 * MIB + 1) == b"kernel"
os.close(rp)
os.close(wp)
# The shim reading the file into a hole of its own mapping (the hole is filled first).
assert libc.pread(h_fd, hm + 20 * MIB, 4, 5 * MIB + 100) == 4
assert os.pread(h_fd, 4, 20 * MIB) == b"lazy"
# A pwrite into a hole shows through the mapping, also where the hole was read first.
os.pwrite(h_fd, b"pwrite", 30 * MIB)
assert ctypes.string_at(hm + 30 * MIB, 6) == b"pwrite"
assert ctypes.string_at(hm + 40 * MIB, 1) == b"\0"
os.pwrite(h_fd, b"after", 40 * MIB)
assert ctypes.string_at(hm + 40 * MIB, 5) == b"after"
# A page past EOF read through the mapping, then the file grown over it (all hole): a store
# there is the file's.
far = libc.mmap(None, 4 * 4096, PROT_RW, SHARED, h_fd, 64 * MIB - 4096)
assert ctypes.string_at(far + 2 * 4096, 1) == b"\0"  # past EOF
os.ftruncate(h_fd, 64 * MIB + 3 * 4096)
ctypes.memmove(far + 2 * 4096 + 5, b"grown", 5)
assert os.pread(h_fd, 5, 64 * MIB + 4096 + 5) == b"grown"
assert libc.munmap(far, 4 * 4096) == 0
assert libc.msync(hm, 64 * MIB, 4) == 0  # MS_SYNC
assert libc.munmap(hm, 64 * MIB) == 0
os.close(h_fd)

# --- private mappings: the file's blocks copy-on-write, nothing copied at mmap -----------
p_fd = os.open(P + "/private", os.O_CREAT | os.O_RDWR, 0o644)
os.pwrite(p_fd, b"p" * 3 * 4096, 0)
os.ftruncate(p_fd, 8 * 4096)  # pages 3..7 a hole
pm = libc.mmap(None, 8 * 4096, PROT_RW, mmap.MAP_PRIVATE, p_fd, 0)
assert pm not in (None, ctypes.c_void_p(-1).value)
assert ctypes.string_at(pm, 3) == b"ppp" and ctypes.string_at(pm + 5 * 4096, 2) == bytes(2)
os.pwrite(p_fd, b"NEW", 4096)  # a page not yet stored to sees the file's new bytes
assert ctypes.string_at(pm + 4096, 3) == b"NEW"
ctypes.memmove(pm, b"mine", 4)  # a store makes the page private: the file keeps its bytes
ctypes.memmove(pm + 6 * 4096, b"hole", 4)
got = (os.pread(p_fd, 4, 0), os.pread(p_fd, 4, 6 * 4096))
assert got == (b"pppp", bytes(4)), got
os.pwrite(p_fd, b"LATER", 0)
assert ctypes.string_at(pm, 5) == b"minep"
expect_errno(errno.EBUSY, os.ftruncate, p_fd, 4096)  # its blocks are still mapped
assert libc.munmap(pm, 8 * 4096) == 0
os.ftruncate(p_fd, 4096)
os.close(p_fd)

# --- extended attributes ------------------------------------------------------------------
x = P + "/xattrs"
open(x, "w").write("x")
os.setxattr(x, "user.a", b"1")
os.setxattr(x, "user.b", b"two", os.XATTR_CREATE)
expect_errno(errno.EEXIST, os.setxattr, x, "user.b", b"2", os.XATTR_CREATE)
expect_errno(errno.ENODATA, os.setxattr, x, "user.c", b"2", os.XATTR_REPLACE)
expect_errno(errno.ENODATA, os.getxattr, x, "user.none")
expect_errno(errno.E2BIG, os.setxattr, x, "user.big", bytes(65_537))
expect_errno(errno.EOPNOTSUPP, os.setxattr, x, "other.ns", b"")
os.setxattr(x, "user.big", bytes(range(256)) * 256)
assert os.getxattr(x, "user.big") == bytes(range(256)) * 256
assert sorted(os.listxattr(x)) == ["user.a", "user.b", "user.big"]
xfd = os.open(x, os.O_RDONLY)
assert os.getxattr(xfd, "user.b") == b"two"  # the descriptor forms
os.setxattr(xfd, "user.a", b"one")
os.removexattr(xfd, "user.big")
assert sorted(os.listxattr(xfd)) == ["user.a", "user.b"]
os.close(xfd)
libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
small = ctypes.create_string_buffer(1)
assert libc.getxattr(x.encode(), b"user.b", small, 1) == -1 and ctypes.get_errno() == errno.ERANGE
assert libc.getxattr(x.encode(), b"user.b", None, 0) == 3
os.symlink("xattrs", P + "/xlink")
expect_errno(errno.EPERM, os.setxattr, P + "/xlink", "user.a", b"", follow_symlinks=False)
assert os.getxattr(P + "/xlink", "user.a") == b"one"  # followed
os.removexattr(x, "user.a")
expect_errno(errno.ENODATA, os.removexattr, x, "user.a")

# --- chdir into the prefix -------------------------------------------------------------------
host_dir = os.getcwd()
os.chdir(P)
assert os.getcwd() == P
os.makedirs("a/b/c")  # relative paths: mkdir -p
os.chdir("a/b")
assert os.getcwd() == P + "/a/b"
with open("rel.txt", "w") as f:
    f.write("relative")
assert open(P + "/a/b/rel.txt").read() == "relative"
assert sorted(os.listdir(".")) == ["c", "rel.txt"]
d = os.open("c", os.O_RDONLY | os.O_DIRECTORY)
os.chdir("..")
assert os.getcwd() == P + "/a"
os.fchdir(d)
assert os.getcwd() == P + "/a/b/c"
os.close(d)
expect_errno(errno.ENOENT, os.chdir, P + "/nope")
expect_errno(errno.ENOTDIR, os.chdir, P + "/v")
os.chdir(host_dir)
assert os.getcwd() == host_dir
print("ok")
