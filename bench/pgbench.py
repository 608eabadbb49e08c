#!/usr/bin/env python3
"""PostgreSQL's pgbench on three targets, interleaved (issue 55): the data directory

  shim   in an image, the server and every backend through LD_PRELOAD=libhashfs_preload.so
         (each a participant of the image's shared mount)
  fuse   in the same kind of image mounted with `hashfs mount` (allow_other, as always)
  tmpfs  in a plain tmpfs directory (/dev/shm), for reference

with fsync on (PostgreSQL's default: every commit syncs its WAL). Each round makes fresh
targets; on each in turn (the order rotated from round to round) it runs initdb, starts
the server, loads `pgbench -i -s SCALE`, and runs TPC-B-like and select-only transactions
from 4 clients for SECONDS each. Reports each target's tps with its 95% interval over the
rounds and the shim's and mount's ratios to tmpfs and to each other, computed within each
round. Not a test.

Usage: python3 bench/pgbench.py [--rounds N] [--seconds S] [--scale N] [--targets shim,fuse,tmpfs]
                                [--json FILE]
Needs: root, Debian's postgresql (the postgres account), the release build
(cargo build --release --workspace), /dev/fuse for the mount.
"""
import argparse, glob, os, pwd, re, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from three_targets import HASHFS, SHIM, TARGETS, rotated, summarize, write_json  # noqa: E402

PREFIX = "/hashfs-pg"
RUNS = {"tpcb": [], "select_only": ["-S"]}


def pg_bin():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pgbench"))
    if not found:
        sys.exit("PostgreSQL's server is not installed (Debian's postgresql)")
    return os.path.dirname(found[-1])


def as_postgres(cmd, env, check=True):
    pw = pwd.getpwnam("postgres")

    def demote():
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)

    r = subprocess.run(cmd, env=env, preexec_fn=demote, capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: {r.stdout}{r.stderr}")
    return r.stdout


class Target:
    """A fresh data directory on one target, its server started."""

    def __init__(self, name, work, binary, scale):
        self.name, self.bin, self.mnt = name, binary, None
        pw = pwd.getpwnam("postgres")
        self.dir = os.path.join(work, name)
        os.mkdir(self.dir)
        os.chmod(self.dir, 0o777)
        self.sock = os.path.join(self.dir, "sock")
        os.mkdir(self.sock)
        os.chown(self.sock, pw.pw_uid, pw.pw_gid)
        self.env = dict(os.environ, HOME="/tmp", PGHOST=self.sock, PGPORT="5432")
        self.server_env = dict(self.env)
        if name == "shim":
            img = os.path.join(self.dir, "pg.img")
            subprocess.run([HASHFS, "mkfs", img, "--size", "4G"], check=True, capture_output=True)
            os.chown(img, pw.pw_uid, pw.pw_gid)
            self.server_env.update(LD_PRELOAD=SHIM, HASHFS_IMAGE=img, HASHFS_MOUNT=PREFIX)
            self.data = PREFIX + "/data"
            # The image's root is root's (the shim checks permissions): /data made for postgres.
            subprocess.run(["sh", "-c", f"mkdir {self.data} && chown postgres:postgres {self.data}"],
                           env=self.server_env, check=True, capture_output=True)
        elif name == "fuse":
            img, self.mnt = os.path.join(self.dir, "pg.img"), os.path.join(self.dir, "mnt")
            os.mkdir(self.mnt)
            subprocess.run([HASHFS, "mkfs", img, "--size", "4G"], check=True, capture_output=True)
            subprocess.run([HASHFS, "mount", img, self.mnt], check=True, capture_output=True)  # allow_other
            self.data = os.path.join(self.mnt, "data")
            os.mkdir(self.data)
            os.chown(self.data, pw.pw_uid, pw.pw_gid)
        else:
            self.data = os.path.join(self.dir, "data")
            os.mkdir(self.data)
            os.chown(self.data, pw.pw_uid, pw.pw_gid)
        as_postgres([os.path.join(binary, "initdb"), "-D", self.data, "-A", "trust", "-U", "postgres"],
                    self.server_env)
        self.ctl("start")
        as_postgres([os.path.join(binary, "pgbench"), "-i", "-q", "-s", str(scale), "postgres"], self.env)

    def ctl(self, what):
        opts = f"-k {self.sock} -c listen_addresses=''"
        log = os.path.join(self.dir, "server.log")
        as_postgres([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-w", "-t", "120", "-l", log, "-o", opts,
                     what], self.server_env)

    def pgbench(self, extra, seconds):
        out = as_postgres([os.path.join(self.bin, "pgbench"), "-c", "4", "-j", "2", "-T", str(seconds)] + extra
                          + ["postgres"], self.env)
        if "number of failed transactions: 0" not in out:
            sys.exit(f"{self.name}: pgbench reported failures:\n{out}")
        return float(re.search(r"tps = ([0-9.]+)", out).group(1))

    def close(self):
        self.ctl("stop")
        if self.mnt:
            subprocess.run([HASHFS, "umount", self.mnt], capture_output=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--scale", type=int, default=4)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--json")
    a = ap.parse_args()
    targets = a.targets.split(",")
    binary = pg_bin()
    results = {t: {r: [] for r in RUNS} for t in targets}
    work = tempfile.mkdtemp(prefix="hashfs-pgbench-", dir="/dev/shm")
    os.chmod(work, 0o777)
    try:
        for rnd in range(a.rounds):
            order = rotated(targets, rnd)
            for name in order:
                t = Target(name, work, binary, a.scale)
                try:
                    for run, extra in RUNS.items():
                        tps = t.pgbench(extra, a.seconds)
                        results[name][run].append(tps)
                        print(f"round {rnd + 1} {name:5} {run:11} {tps:9.0f} tps", flush=True)
                finally:
                    t.close()
                    shutil.rmtree(t.dir, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = summarize(results, targets, RUNS)
    if a.json:
        config = {"rounds": a.rounds, "seconds": a.seconds, "scale": a.scale, "clients": 4, "threads": 2, "fsync": "on"}
        write_json(a.json, "pgbench.py", config, "tps", results, summary)


if __name__ == "__main__":
    main()
