"""What the memory itself gives, with no file system: memcpy bandwidth into each 1 GiB region of
an 8 GiB file on the huge tmpfs, mapped directly, twice over (the first round also allocates
the pages). It shows how much the memory itself varies on this machine, which bounds what
the WineFS figures' bandwidth can tell (docs/results.md, discussion). One JSON line for the
machine, then one per round.

    python3 bench/winefs/region_bandwidth.py [DIR]     # default /mnt/hashfs-bench-huge
"""
import json
import mmap
import os
import sys
import time

path = (sys.argv[1] if len(sys.argv) > 1 else "/mnt/hashfs-bench-huge") + "/raw.img"
size = 8 << 30
fd = os.open(path, os.O_CREAT | os.O_RDWR)
os.ftruncate(fd, size)
piece = bytes(range(256)) * 4096
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
mount = next((" ".join(l.split()[2:4]) for l in open("/proc/mounts") if l.split()[1] == os.path.dirname(path)), "?")
print(json.dumps({"machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": os.uname().release, "image_mount": mount}}))
for rnd in range(2):
    out = []
    for g in range(8):
        m = mmap.mmap(fd, 1 << 30, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=g << 30)
        t = time.perf_counter()
        for off in range(0, 1 << 30, len(piece)):
            m[off:off + len(piece)] = piece
        out.append(round((1 << 30) / (time.perf_counter() - t) / 1e9, 1))
        m.close()
    print(json.dumps({"round": rnd, "gbps_per_gib_region": out}))
os.close(fd); os.unlink(path)
