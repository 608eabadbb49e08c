#!/usr/bin/env python3
"""SQLite with two writer processes on one database, on three targets, interleaved
(issue 55): the database in

  shim   an image, both processes through LD_PRELOAD=libhashfs_preload.so (their locks
         in the image's shared region since 2026-12-05; before, the kernel's lock
         manager on ranges of the image file)
  fuse   the same kind of image mounted with `hashfs mount`
  tmpfs  a plain tmpfs directory (/dev/shm), for reference

Two processes start at once, each committing TXNS transactions of one row (journal mode
WAL or DELETE, synchronous=FULL, a busy timeout so that each waits for the other's lock);
the figure is committed transactions per second over both. Each round makes fresh targets
and runs each mode on each in turn (the order rotated from round to round); reports the
mean with its 95% interval and the ratios within each round. Not a test.

An A/B of shim builds: `--shim-build NAME=PATH` (repeatable) adds a target NAME served by
the preload library at PATH, beside `shim` (this tree's release build). `--alone` adds the
modes `wal-alone` and `delete-alone`: one process commits the 2 x TXNS transactions by
itself, in the same rounds. `--retry` adds `wal-retry` and `delete-retry`: the two writers
with SQLite's busy handler off (timeout 0), each retrying a refused BEGIN or COMMIT after
50 us, so that they interleave. With the busy handler (the plain modes), a writer refused
sleeps 1, 2, 5, 10, 15, 20, 25... ms, and the other, which takes the lock again at once
after each commit, mostly runs its whole share meanwhile: the figure then turns on where
the first writer's end falls in that schedule (tmpfs's 5,000 WAL transactions end at about
32 ms, just before the sleeper's wake at 33 ms; the shim's at 37, and the sleeper wakes at
53: 16 ms idle in a 90 ms run, measured 2026-12-05). The retry modes show the file
systems under contention instead.

The time is from the start signal to the last writer's last commit (each writer prints
when its loop ends): the processes' exits are not in it.

Usage: python3 bench/sqlite_writers.py [--rounds N] [--txns N] [--targets shim,fuse,tmpfs]
                                       [--shim-build NAME=PATH] [--alone] [--retry] [--json FILE]
Needs: python3's sqlite3 module, the release build (cargo build --release --workspace),
/dev/fuse for the mount.
"""
import argparse, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from three_targets import HASHFS, SHIM, TARGETS, rotated, summarize, write_json  # noqa: E402

PREFIX = "/hashfs-sqlite"
MODES = ["wal", "delete"]

SETUP = """
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("pragma journal_mode=" + sys.argv[2])
c.execute("create table t(who text, i integer, pad blob)")
"""

WRITER = """
import sqlite3, sys, time
db, mode, who, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
retry = mode.endswith("-retry")
c = sqlite3.connect(db, timeout=0 if retry else 60, isolation_level=None)
def run(sql):
    while True:
        try:
            return c.execute(sql)
        except sqlite3.OperationalError as e:
            if not retry or "locked" not in str(e):
                raise
            time.sleep(50e-6)
run("pragma synchronous=full")
sys.stdout.write("ready\\n"); sys.stdout.flush(); sys.stdin.readline()
for i in range(n):
    run("begin immediate")
    c.execute("insert into t values (?, ?, zeroblob(200))", (who, i))
    run("commit")
print(time.perf_counter(), flush=True)
"""


def run_mode(directory, env, name, txns):
    """Mode `name` (a journal mode; `-alone`: one writer of both writers' share; `-retry`: two
    writers retrying without the busy handler)."""
    mode, alone = name.removesuffix("-alone").removesuffix("-retry"), name.endswith("-alone")
    db = os.path.join(directory, f"{name}.db")
    subprocess.run([sys.executable, "-c", SETUP, db, mode], env=env, check=True, capture_output=True)
    shares = [("a", 2 * txns)] if alone else [("a", txns), ("b", txns)]
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, db, name, w, str(n)], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for w, n in shares]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            sys.exit(f"a writer failed: {p.communicate()[1]}")
    start = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    ends = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"a writer failed: {err}")
        ends.append(float(out.split()[-1]))
    elapsed = max(ends) - start
    out = subprocess.run([sys.executable, "-c",
                          "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); "
                          "print(c.execute('select count(*) from t').fetchone()[0], "
                          "c.execute('pragma integrity_check').fetchone()[0])", db],
                         env=env, capture_output=True, text=True, check=True).stdout.split()
    if out != [str(2 * txns), "ok"]:
        sys.exit(f"rows or integrity wrong after the run: {out}")
    return 2 * txns / elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--txns", type=int, default=2000)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--shim-build", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--alone", action="store_true", help="also one writer committing both writers' share")
    ap.add_argument("--retry", action="store_true", help="also two writers retrying after 50 us, no busy handler")
    ap.add_argument("--json")
    a = ap.parse_args()
    modes = MODES + ([m + "-alone" for m in MODES] if a.alone else []) + ([m + "-retry" for m in MODES] if a.retry else [])
    builds = dict(b.split("=", 1) for b in a.shim_build)
    targets = a.targets.split(",") + list(builds)
    results = {t: {m: [] for m in modes} for t in targets}
    work = tempfile.mkdtemp(prefix="hashfs-sqlite-", dir="/dev/shm")
    try:
        for rnd in range(a.rounds):
            order = rotated(targets, rnd)
            for name in order:
                d = os.path.join(work, name)
                os.mkdir(d)
                env, mnt = dict(os.environ), None
                if name == "shim" or name in builds:
                    img = os.path.join(d, "db.img")
                    subprocess.run([HASHFS, "mkfs", img, "--size", "512M"], check=True, capture_output=True)
                    env.update(LD_PRELOAD=builds.get(name, SHIM), HASHFS_IMAGE=img, HASHFS_MOUNT=PREFIX)
                    where = PREFIX
                elif name == "fuse":
                    img, mnt = os.path.join(d, "db.img"), os.path.join(d, "mnt")
                    os.mkdir(mnt)
                    subprocess.run([HASHFS, "mkfs", img, "--size", "512M"], check=True, capture_output=True)
                    subprocess.run([HASHFS, "mount", img, mnt], check=True, capture_output=True)
                    where = mnt
                else:
                    where = d
                try:
                    for mode in modes:
                        tps = run_mode(where, env, mode, a.txns)
                        results[name][mode].append(tps)
                        print(f"round {rnd + 1} {name:5} {mode:6} {tps:8.0f} txn/s", flush=True)
                finally:
                    if mnt:
                        subprocess.run([HASHFS, "umount", mnt], capture_output=True)
                    shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = summarize(results, targets, modes)
    if a.json:
        config = {"rounds": a.rounds, "txns_per_writer": a.txns, "writers": 2, "alone": a.alone, "retry": a.retry,
                  "synchronous": "full", "timed": "start signal to the last writer's last commit",
                  "shim_builds": builds}
        write_json(a.json, "sqlite_writers.py", config, "txn_per_second", results, summary)


if __name__ == "__main__":
    main()
