# LMDB (python3-lmdb) with N keys: puts in transactions of 10,000, then every value read back.
# $1 the directory, $2 N, $3 "default" (read-only shared map, pwrite) or "writemap".
import lmdb, sys
path, N = sys.argv[1], int(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "default"
env = lmdb.open(path, map_size=4096 << 20, writemap=(mode == "writemap"))
def value(i): return (b"%d:" % i) * (40 + i % 50)
for start in range(0, N, 10000):
    with env.begin(write=True) as txn:
        for i in range(start, min(N, start + 10000)):
            txn.put(b"key%08d" % i, value(i))
bad = 0
with env.begin() as txn:
    for i in range(N):
        if txn.get(b"key%08d" % i) != value(i):
            bad += 1
print("info", env.info()["last_pgno"] * 4096 >> 20, "MiB", "bad", bad)
env.close()
