# LMDB through the shim, under the prefix $1: puts in several transactions, then every
# value read back in new transactions, after deletes and overwrites, and after reopening.
# Prints "ok N". $2 is the mode: "default" (read-only shared map, writes with pwrite) or
# "writemap" (MDB_WRITEMAP: LMDB sizes the file to the map and writes through a writable
# shared map); $3 the map size in MiB (default 256).
import lmdb, sys

mode = sys.argv[2] if len(sys.argv) > 2 else "default"
MAP = (int(sys.argv[3]) if len(sys.argv) > 3 else 256) << 20
path = sys.argv[1] + "/lmdb-" + mode
N = 10_000
WRITEMAP = mode == "writemap"


def value(i, gen):
    return (b"%d:%d:" % (gen, i)) * (1 + i % 37)


env = lmdb.open(path, map_size=MAP, writemap=WRITEMAP)
assert env.flags()["writemap"] == WRITEMAP, "LMDB must run in the mode asked for"
for start in range(0, N, 1000):
    with env.begin(write=True) as txn:
        for i in range(start, start + 1000):
            assert txn.put(b"key%06d" % i, value(i, 0))
with env.begin() as txn:
    for i in range(N):
        got = txn.get(b"key%06d" % i)
        assert got == value(i, 0), (i, got[:40] if got else got)
with env.begin(write=True) as txn:
    for i in range(0, N, 3):
        txn.delete(b"key%06d" % i)
    for i in range(1, N, 3):
        txn.put(b"key%06d" % i, value(i, 1))


def check(env):
    n = 0
    with env.begin() as txn:
        for i in range(N):
            want = None if i % 3 == 0 else value(i, 1 if i % 3 == 1 else 0)
            assert txn.get(b"key%06d" % i) == want, i
            n += want is not None
        assert txn.stat()["entries"] == n
    return n


n = check(env)
env.close()
env = lmdb.open(path, map_size=MAP, writemap=WRITEMAP)
assert check(env) == n
env.close()
print("ok", n)
