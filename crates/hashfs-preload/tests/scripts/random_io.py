# Random IO with verification under the shim: argv = prefix, seed, operations. A model of
# the file's bytes follows every operation (pwritev, pwritev2 with -1 and RWF_APPEND,
# writev, truncate, punch and zero range, stores through shared mappings of odd lengths,
# partial and odd-length munmaps); every read (preadv, preadv2 at -1, mapping contents)
# is checked against it, and the whole file at the end. Prints "ok OPS".
import ctypes, errno, mmap, os, random, sys

P, seed, nops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
PAGE, MAXSZ = 4096, 200_000
fd = os.open(P + "/random", os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
model = bytearray()
maps = []  # [addr, length] of live shared mappings (from offset 0)


def put(off, data):
    global model
    if off > len(model):
        model += bytes(off - len(model))
    model[off:off + len(data)] = data


def check_maps():
    for addr, length in maps:
        n = min(length, len(model))
        got = ctypes.string_at(addr, n)
        assert got == bytes(model[:n]), f"mapping at {addr:#x} differs from the file"


def chunks(total):
    out, left = [], total
    while left > 0:
        n = min(left, rng.randint(1, 3000))
        out.append(bytes(rng.getrandbits(8) for _ in range(n)))
        left -= n
    return out


for i in range(nops):
    op = rng.randrange(10)
    size = len(model)
    if op == 0:  # pwritev at a random offset
        off = rng.randrange(0, MAXSZ // 2)
        bufs = chunks(rng.randint(1, 12_000))
        assert os.pwritev(fd, bufs, off) == sum(map(len, bufs))
        put(off, b"".join(bufs))
    elif op == 1:  # pwritev2 at the position (-1), or appending
        flags = os.RWF_APPEND if rng.random() < 0.5 else 0
        pos = os.lseek(fd, rng.randrange(0, size + 1), os.SEEK_SET)
        bufs = chunks(rng.randint(1, 5000))
        n = os.pwritev(fd, bufs, -1, flags)
        put(size if flags else pos, b"".join(bufs))
        assert n == sum(map(len, bufs))
    elif op == 2:  # writev at the position
        pos = os.lseek(fd, rng.randrange(0, size + 1), os.SEEK_SET)
        bufs = chunks(rng.randint(1, 5000))
        os.writev(fd, bufs)
        put(pos, b"".join(bufs))
    elif op == 3 and size:  # preadv and preadv2(-1) checks
        off = rng.randrange(0, size)
        bufs = [bytearray(rng.randint(1, 4000)) for _ in range(rng.randint(1, 4))]
        n = os.preadv(fd, bufs, off)
        assert b"".join(bufs)[:n] == model[off:off + n] and n == min(sum(map(len, bufs)), size - off)
        os.lseek(fd, off, os.SEEK_SET)
        b2 = [bytearray(rng.randint(1, 4000))]
        n2 = os.preadv(fd, b2, -1, os.RWF_HIPRI)
        assert bytes(b2[0][:n2]) == model[off:off + n2] and os.lseek(fd, 0, os.SEEK_CUR) == off + n2
    elif op == 4:  # truncate (down only without mappings: the shim refuses it, EBUSY)
        new = rng.randrange(0, MAXSZ)
        try:
            os.ftruncate(fd, new)
            assert new >= size or not maps
            model = model[:new] + bytes(max(0, new - size))
        except OSError as e:
            assert e.errno == errno.EBUSY and maps and new < size, e
    elif op == 5 and size:  # punch a hole or zero a range (keep size)
        off = rng.randrange(0, size)
        length = rng.randint(1, 20_000)
        mode = rng.choice([0x01 | 0x02, 0x10 | 0x01])  # PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE|KEEP_SIZE
        assert libc.fallocate(fd, mode, off, length) == 0, ctypes.get_errno()
        end = min(off + length, size)
        model[off:end] = bytes(end - off)
    elif op == 6 and size and len(maps) < 4:  # a shared mapping of an odd length
        length = rng.randint(1, size + 3 * PAGE)
        addr = libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        maps.append([addr, length])
    elif op == 7 and maps:  # stores through a mapping, inside the file
        addr, length = rng.choice(maps)
        n = min(length, len(model))
        if n:
            off = rng.randrange(0, n)
            data = bytes(rng.getrandbits(8) for _ in range(min(rng.randint(1, 300), n - off)))
            ctypes.memmove(addr + off, data, len(data))
            put(off, data)
            assert os.pread(fd, len(data), off) == data, "a store through a mapping is in the file"
    elif op == 8 and maps:  # munmap: whole with an odd length, or the tail pages
        k = rng.randrange(len(maps))
        addr, length = maps[k]
        pages = (length + PAGE - 1) // PAGE
        if pages > 1 and rng.random() < 0.5:
            keep = rng.randint(1, pages - 1)
            assert libc.munmap(addr + keep * PAGE, length - keep * PAGE) == 0
            maps[k][1] = keep * PAGE
        else:
            assert libc.munmap(addr, length) == 0
            maps.pop(k)
    check_maps()

for addr, length in maps:
    assert libc.munmap(addr, length) == 0
os.ftruncate(fd, len(model))  # works again: no mapping left
os.lseek(fd, 0, os.SEEK_SET)
got = b""
while True:
    b = os.read(fd, 65536)
    if not b:
        break
    got += b
assert got == bytes(model), "the file differs from the model"
os.close(fd)
print("ok", nops)
