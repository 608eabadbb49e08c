# SQLite transactions for the untorn-write cost (scripts/untorn-sqlite.sh): a table of
# ROWS rows of 100 bytes, then TXNS transactions each updating UPDATES random rows, with
# synchronous=FULL in the given journal mode (delete: the rollback journal; wal). Prints
# one JSON object: transactions per second over the timed part, and the check that every
# row reads back.
import json, random, sqlite3, sys, time

path, journal, txns = sys.argv[1], sys.argv[2], int(sys.argv[3])
ROWS, UPDATES = 20_000, 10
db = sqlite3.connect(path, isolation_level=None)
db.execute(f"pragma journal_mode={journal}")
db.execute("pragma synchronous=full")
db.execute("create table if not exists kv(k integer primary key, v blob)")
if db.execute("select count(*) from kv").fetchone()[0] == 0:
    db.execute("begin")
    db.executemany("insert into kv values(?, ?)", ((i, bytes(100)) for i in range(ROWS)))
    db.execute("commit")
rng = random.Random(7)
t = time.perf_counter()
for n in range(txns):
    db.execute("begin")
    for _ in range(UPDATES):
        db.execute("update kv set v = ? where k = ?", (rng.randbytes(100), rng.randrange(ROWS)))
    db.execute("commit")
secs = time.perf_counter() - t
ok = db.execute("pragma integrity_check").fetchone()[0] == "ok" and db.execute("select count(*) from kv").fetchone()[0] == ROWS
db.close()
print(json.dumps({"journal": journal, "txns": txns, "seconds": secs, "tps": txns / secs, "integrity_ok": ok}))
