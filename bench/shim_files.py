#!/usr/bin/env python3
"""Many small files made and removed through the shim, as a shell, `make` or `tar x` make
them (issue 55): one process opens N new files with O_CREAT|O_WRONLY|O_TRUNC, writes 100
bytes to each and closes it, then unlinks them all. Builds of the preload shim (each on a
fresh image) and tmpfs take turns within each round, the first changing from round to
round. Reports microseconds per file for each phase, with its 95% interval, and the ratio
to the first build within each round. Not a test.

Usage: python3 bench/shim_files.py --shim NAME=PATH [--shim NAME=PATH ...] [--rounds N]
                                   [--files N] [--json FILE]
Needs: the release `hashfs` binary (cargo build --release --workspace).
"""
import argparse, os, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from three_targets import builds_in_rounds, ratio_table, write_builds_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHFS = os.path.join(ROOT, "target/release/hashfs")
PREFIX = "/hashfs-files"
PHASES = ["create_write_close", "unlink"]

LOOP = """
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
os.mkdir(d)
buf = b"x" * 100
t = time.perf_counter()
for i in range(n):
    fd = os.open(f"{d}/f{i}", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.write(fd, buf)
    os.close(fd)
t1 = time.perf_counter()
for i in range(n):
    os.unlink(f"{d}/f{i}")
t2 = time.perf_counter()
print(1e6 * (t1 - t) / n, 1e6 * (t2 - t1) / n)
"""


def one(target, path, n, tmp):
    if path is None:  # tmpfs
        d = os.path.join(tmp, "files")
        out = subprocess.run([sys.executable, "-c", LOOP, d, str(n)], capture_output=True, text=True, check=True)
        shutil.rmtree(d)
    else:
        image = os.path.join(tmp, "files.img")
        subprocess.run([HASHFS, "mkfs", image, "--size", "1G"], check=True, capture_output=True)
        env = dict(os.environ, LD_PRELOAD=path, HASHFS_IMAGE=image, HASHFS_MOUNT=PREFIX)
        out = subprocess.run([sys.executable, "-c", LOOP, f"{PREFIX}/d", str(n)], env=env, capture_output=True,
                             text=True)
        if out.returncode != 0:
            sys.exit(f"{target}: {out.stderr}")
        os.remove(image)
    return [float(x) for x in out.stdout.split()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", action="append", required=True, help="NAME=PATH of a libhashfs_preload.so")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--json")
    a = ap.parse_args()
    targets = [tuple(s.split("=", 1)) for s in a.shim] + [("tmpfs", None)]
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        res = builds_in_rounds(targets, a.rounds, PHASES, lambda name, path: one(name, path, a.files, tmp), " us")
    summary = ratio_table(res, [n for n, _ in targets], PHASES, "us_per_file", "phase", 20, 24,
                          lambda m, h, rm: f"{m:7.2f} ±{h:5.2f} {rm:5.2f}x")
    if a.json:
        write_builds_json(a.json, a.dir, targets, a.rounds, {"files": a.files}, summary)


if __name__ == "__main__":
    main()
