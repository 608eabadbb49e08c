"""Through the shim: fallocate a file, map it shared, write every byte through the
mapping, check it back with read(), and print how much of the mapping the kernel maps
with 2 MiB pages (ShmemPmdMapped of the mapping's ranges in /proc/self/smaps), in KiB.

    python3 pmd_mapped.py PATH MIB
"""
import ctypes
import mmap
import os
import sys

path, mib = sys.argv[1], int(sys.argv[2])
size = mib << 20
fd = os.open(path, os.O_CREAT | os.O_RDWR)
os.posix_fallocate(fd, 0, size)
m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
pattern = bytes(range(256)) * 4096  # 1 MiB
for off in range(0, size, len(pattern)):
    m[off:off + len(pattern)] = pattern
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
m.flush()
os.lseek(fd, 0, 0)
got = b""
while len(got) < size:
    chunk = os.read(fd, size - len(got))
    if not chunk:
        break
    got += chunk
assert got == pattern * mib, "data read back differs"
m.close()
os.close(fd)
print(pmd)
