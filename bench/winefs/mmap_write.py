"""Through the shim (LD_PRELOAD): fallocate a file of MIB MiB under the HashFS prefix, map it
shared and writable, memcpy into it sequentially in 1 MiB pieces (timed), and print one JSON
line: GB/s, minor page faults, and the KiB of the mapping the kernel maps with 2 MiB pages.
The file is deleted afterwards. With `sparse`, the file is sized with ftruncate instead,
all hole: its blocks are given when first written through the mapping.

    python3 bench/winefs/mmap_write.py PATH MIB [sparse]
"""
import ctypes
import json
import mmap
import os
import resource
import sys
import time

path, mib = sys.argv[1], int(sys.argv[2])
sparse = sys.argv[3:] == ["sparse"]
size = mib << 20
fd = os.open(path, os.O_CREAT | os.O_RDWR)
if sparse:
    os.ftruncate(fd, size)
else:
    os.posix_fallocate(fd, 0, size)
try:
    m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
except OSError as e:  # a file too scattered for the process's kernel mappings: ENOMEM
    os.close(fd)
    os.unlink(path)
    print(json.dumps({"mib": mib, "error": f"mmap: {e.strerror} (errno {e.errno})"}))
    sys.exit(0)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
piece = bytes(range(256)) * 4096  # 1 MiB
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
t = time.perf_counter()
for off in range(0, size, len(piece)):
    m[off:off + len(piece)] = piece
secs = time.perf_counter() - t
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
pmd = 0
with open("/proc/self/smaps") as f:
    inside = False
    for line in f:
        head = line.split()[0]
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo < addr + size and hi > addr
        elif inside and line.startswith("ShmemPmdMapped:"):
            pmd += int(line.split()[1])
ok = m[size - len(piece):] == piece
m.close()
os.close(fd)
os.unlink(path)
print(json.dumps({"mib": mib, "sparse": sparse, "gbps": size / secs / 1e9, "faults": faults, "pmd_kib": pmd, "data_ok": ok}))
