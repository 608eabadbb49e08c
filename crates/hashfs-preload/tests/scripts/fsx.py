# Random operations on one file under the shim, as fsx (the file system exerciser of
# xfstests) runs them: argv = path, seed, operations. Writes, mapped writes (the file grown
# by ftruncate first, as fsx does), reads, mapped reads, truncates up and down, fallocate,
# punched holes and zeroed ranges, checked against a model of the file's bytes. Every
# mapped read also checks that the bytes past EOF in the file's last page read as zeros
# (fsx's check_eofpage): data a truncate took away must not be readable through a mapping.
# Prints "ok OPS" and the count of each operation.
import ctypes, mmap, os, random, sys

path, seed, nops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
PAGE, MAXLEN, MAXOP = 4096, 256 << 10, 64 << 10  # fsx's defaults: a 256 KiB file, 64 KiB operations
KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE, MS_SYNC = 0x01, 0x02, 0x10, 4
MAP_FAILED = ctypes.c_void_p(-1).value
fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
model = bytearray()
counts = {}
history = []  # the last operations, printed with a failure


def fail(msg):
    print(f"seed {seed}: {msg}\nlast operations:\n  " + "\n  ".join(history[-12:]), file=sys.stderr)
    sys.exit(1)


def resize(n):
    global model
    model = model[:n] + bytes(max(0, n - len(model)))


def span():
    off = rng.randrange(0, MAXLEN)
    return off, rng.randint(1, min(MAXOP, MAXLEN - off))


def span_to_eof(size):
    """A range ending at EOF (a third of the mapped operations: the last page is where
    bytes past EOF show)."""
    n = rng.randint(1, min(MAXOP, size))
    return size - n, n


def map_range(off, length, prot):
    """Maps [off, off + length) from its page; returns (address, page offset, length)."""
    pg = off - off % PAGE
    n = off + length - pg
    addr = libc.mmap(None, n, prot, mmap.MAP_SHARED, fd, pg)
    if addr in (None, MAP_FAILED):
        fail(f"mmap of {n} bytes at {pg}: errno {ctypes.get_errno()}")
    return addr, pg, n


def check_eof_page(addr, pg, n):
    """fsx's check_eofpage: past EOF, up to the end of the file's last page, zeros."""
    size = len(model)
    covered = pg + (n + PAGE - 1) // PAGE * PAGE  # the kernel maps whole pages
    if size % PAGE == 0 or not pg <= size < covered:
        return
    got = ctypes.string_at(addr + (size - pg), PAGE - size % PAGE)
    if any(got):
        i = next(i for i, b in enumerate(got) if b)
        fail(f"non-zero data past EOF: byte {size + i} (EOF {size}) is {got[i]:#04x} through a mapping")


def step(i):
    size = len(model)
    op = rng.choice(["read", "write", "mapread", "mapwrite", "truncate", "fallocate", "punch", "zero"])
    counts[op] = counts.get(op, 0) + 1
    if op == "read" and size:
        off = rng.randrange(0, size)
        n = rng.randint(1, min(MAXOP, size - off))
        history.append(f"read {off} {n}")
        got = os.pread(fd, n, off)
        if got != model[off:off + n]:
            fail(f"read {off}+{n} differs from the model")
    elif op == "write":
        off, n = span()
        history.append(f"write {off} {n} (size {size})")
        data = rng.randbytes(n)
        if os.pwrite(fd, data, off) != n:
            fail("short write")
        resize(max(size, off + n))
        model[off:off + n] = data
    elif op == "mapread" and size:
        off = rng.randrange(0, size)
        n = rng.randint(1, min(MAXOP, size - off))
        if rng.random() < 1 / 3:
            off, n = span_to_eof(size)
        history.append(f"mapread {off} {n} (size {size})")
        addr, pg, mlen = map_range(off, n, mmap.PROT_READ)
        got = ctypes.string_at(addr + off - pg, n)
        check_eof_page(addr, pg, mlen)
        libc.munmap(addr, mlen)
        if got != model[off:off + n]:
            j = next(j for j in range(n) if got[j] != model[off + j])
            fail(f"mapread {off}+{n}: byte {off + j} is {got[j]:#04x}, the model has {model[off + j]:#04x}")
    elif op == "mapwrite":
        off, n = span_to_eof(size) if size and rng.random() < 1 / 3 else span()
        history.append(f"mapwrite {off} {n} (size {size})")
        if off + n > size:
            os.ftruncate(fd, off + n)
            resize(off + n)
        addr, pg, mlen = map_range(off, n, mmap.PROT_READ | mmap.PROT_WRITE)
        data = rng.randbytes(n)
        ctypes.memmove(addr + off - pg, data, n)
        if libc.msync(addr, mlen, MS_SYNC) != 0:
            fail(f"msync: errno {ctypes.get_errno()}")
        check_eof_page(addr, pg, mlen)
        libc.munmap(addr, mlen)
        model[off:off + n] = data
    elif op == "truncate":
        new = rng.randrange(0, MAXLEN)
        history.append(f"truncate {size} -> {new}")
        os.ftruncate(fd, new)
        resize(new)
    elif op == "fallocate":
        off, n = span()
        keep = rng.random() < 0.5
        history.append(f"fallocate {off} {n} keep_size={keep} (size {size})")
        if keep and off + n > size:  # this file system maps no block past EOF
            n = size - off
            if n <= 0:
                return
        if libc.fallocate(fd, KEEP_SIZE if keep else 0, off, n) != 0:
            fail(f"fallocate: errno {ctypes.get_errno()}")
        if not keep:
            resize(max(size, off + n))
    elif op in ("punch", "zero") and size:
        off = rng.randrange(0, size)
        n = rng.randint(1, MAXOP)
        keep = op == "punch" or rng.random() < 0.5
        mode = (PUNCH_HOLE | KEEP_SIZE) if op == "punch" else ZERO_RANGE | (KEEP_SIZE if keep else 0)
        history.append(f"{op} {off} {n} keep_size={keep} (size {size})")
        if libc.fallocate(fd, mode, off, n) != 0:
            fail(f"{op}: errno {ctypes.get_errno()}")
        end = min(off + n, size) if keep else off + n
        resize(max(size, end))
        model[off:end] = bytes(end - off)
    if i % 1000 == 999 or i == nops - 1:  # the whole file, now and then
        st = os.fstat(fd)
        if st.st_size != len(model):
            fail(f"size {st.st_size}, the model has {len(model)}")
        got = os.pread(fd, len(model) + 1, 0)
        if got != model:
            fail("the file differs from the model")

for i in range(nops):
    try:
        step(i)
    except OSError as e:
        fail(f"{e} ({history[-1] if history else 'no operation yet'})")

os.close(fd)
print("ok", nops, " ".join(f"{k}={v}" for k, v in sorted(counts.items())))
