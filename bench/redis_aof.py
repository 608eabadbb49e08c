#!/usr/bin/env python3
"""Redis with its append-only file synced at every write (`appendfsync always`) on three
targets, interleaved (issue 55): the server's directory

  shim   in an image, through LD_PRELOAD=libhashfs_preload.so (a BGREWRITEAOF's or BGSAVE's
         forked child joins the image as a participant of its own)
  fuse   in the same kind of image mounted with `hashfs mount`
  tmpfs  in a plain tmpfs directory (/dev/shm), for reference

Each round starts a fresh server on each target in turn (the order rotated from round to
round) and runs `redis-benchmark -t set,lpush -n N -c 4` against it: every command appends
to the file and syncs it before the reply. Reports requests per second with the 95%
interval over the rounds and the shim's and the mount's ratios to tmpfs and to each other,
computed within each round. Not a test.

Usage: python3 bench/redis_aof.py [--rounds N] [--requests N] [--targets shim,fuse,tmpfs] [--json FILE]
Needs: redis-server and redis-tools (redis-benchmark), the release build
(cargo build --release --workspace), /dev/fuse for the mount.
"""
import argparse, csv, io, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from three_targets import HASHFS, SHIM, TARGETS, rotated, summarize, write_json  # noqa: E402

PREFIX = "/hashfs-redis"
TESTS = ["SET", "LPUSH"]
PORT = 26379


class Target:
    """A fresh directory on one target, a server started in it."""

    def __init__(self, name, work):
        self.name, self.mnt = name, None
        self.dir = os.path.join(work, name)
        os.mkdir(self.dir)
        env = dict(os.environ)
        if name == "shim":
            img = os.path.join(self.dir, "redis.img")
            subprocess.run([HASHFS, "mkfs", img, "--size", "1G"], check=True, capture_output=True)
            env.update(LD_PRELOAD=SHIM, HASHFS_IMAGE=img, HASHFS_MOUNT=PREFIX)
            data = PREFIX
        elif name == "fuse":
            img, self.mnt = os.path.join(self.dir, "redis.img"), os.path.join(self.dir, "mnt")
            os.mkdir(self.mnt)
            subprocess.run([HASHFS, "mkfs", img, "--size", "1G"], check=True, capture_output=True)
            subprocess.run([HASHFS, "mount", img, self.mnt], check=True, capture_output=True)
            data = self.mnt
        else:
            data = os.path.join(self.dir, "data")
            os.mkdir(data)
        self.server = subprocess.Popen(
            ["redis-server", "--port", str(PORT), "--bind", "127.0.0.1", "--dir", data, "--save", "",
             "--appendonly", "yes", "--appendfsync", "always"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while subprocess.run(["redis-cli", "-p", str(PORT), "ping"], capture_output=True, text=True).stdout.strip() \
                != "PONG":
            if time.time() > deadline or self.server.poll() is not None:
                sys.exit(f"{name}: redis-server did not start")
            time.sleep(0.05)

    def bench(self, requests):
        out = subprocess.run(["redis-benchmark", "-p", str(PORT), "-t", ",".join(t.lower() for t in TESTS), "-n",
                              str(requests), "-c", "4", "--csv"], capture_output=True, text=True, check=True).stdout
        rows = {r[0]: float(r[1]) for r in csv.reader(io.StringIO(out)) if r and r[0] in TESTS}
        if set(rows) != set(TESTS):
            sys.exit(f"{self.name}: redis-benchmark printed {out!r}")
        return rows

    def close(self):
        subprocess.run(["redis-cli", "-p", str(PORT), "shutdown", "nosave"], capture_output=True)
        self.server.wait(timeout=30)
        if self.mnt:
            subprocess.run([HASHFS, "umount", self.mnt], capture_output=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=50000)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--json")
    a = ap.parse_args()
    targets = a.targets.split(",")
    results = {t: {x: [] for x in TESTS} for t in targets}
    work = tempfile.mkdtemp(prefix="hashfs-redis-", dir="/dev/shm")
    try:
        for rnd in range(a.rounds):
            order = rotated(targets, rnd)
            for name in order:
                t = Target(name, work)
                try:
                    for test, rps in t.bench(a.requests).items():
                        results[name][test].append(rps)
                        print(f"round {rnd + 1} {name:5} {test:6} {rps:9.0f} requests/s", flush=True)
                finally:
                    t.close()
                    shutil.rmtree(t.dir, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = summarize(results, targets, TESTS)
    if a.json:
        config = {"rounds": a.rounds, "requests": a.requests, "clients": 4, "appendfsync": "always"}
        write_json(a.json, "redis_aof.py", config, "requests_per_second", results, summary)


if __name__ == "__main__":
    main()
