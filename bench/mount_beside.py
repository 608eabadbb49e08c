#!/usr/bin/env python3
"""The cost to a shim process of a mount beside it on one live image (issue 56),
interleaved: fio's 4 KiB psync jobs (random overwrite, append) through the shim on an
image that (1) no mount has, (2) a shared mount (`hashfs mount -o shared`) has, idle,
and (3) a shared mount has while a reader through it stats and reads a file of the image
in a loop. Reports each target's IOPS with its 95% interval, and each target's IOPS over
the first's, computed within each round; and the reader's calls per second. Not a test.

Usage: python3 bench/mount_beside.py [--rounds N] [--seconds S] [--size 128M] [--json FILE]
Needs: fio, FUSE and the release build (cargo build --release --workspace).
"""
import argparse, json, os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuse_io import machine, mean_ci  # noqa: E402 (the same statistics and machine stamp)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHFS = os.path.join(ROOT, "target/release/hashfs")
SHIM = os.path.join(ROOT, "target/release/libhashfs_preload.so")
PREFIX = "/hashfs-beside"
JOBS = {"randwrite_4k": "randwrite", "append_4k": "write"}
TARGETS = ["shim alone", "shim, shared mount idle", "shim, shared mount read"]

READER = """
import os, sys, time
path, until, n = sys.argv[1], time.time() + float(sys.argv[2]), 0
while time.time() < until:
    os.stat(path)
    with open(path, "rb") as f:
        f.read(4096)
    n += 1
print(n)
"""


def fio(path, rw, seconds, size, env):
    if rw == "randwrite":  # overwrites of laid-out blocks
        subprocess.run(["fio", "--name=lay", f"--filename={path}", f"--size={size}", "--bs=1M", "--rw=write",
                        "--ioengine=psync"], env=env, check=True, capture_output=True)
    out = subprocess.run(["fio", "--name=j", f"--filename={path}", f"--size={size}", "--bs=4k", f"--rw={rw}",
                          "--ioengine=psync", f"--runtime={seconds}", "--time_based", "--output-format=json"],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]["write"]["iops"]


def one(target, rw, a, work):
    img, mnt = os.path.join(work, "fs.img"), os.path.join(work, "mnt")
    for p in (img,):
        if os.path.exists(p):
            os.remove(p)
    os.makedirs(mnt, exist_ok=True)
    subprocess.run([HASHFS, "mkfs", img, "--size", a.image_size], check=True, capture_output=True)
    env = dict(os.environ, LD_PRELOAD=SHIM, HASHFS_IMAGE=img, HASHFS_MOUNT=PREFIX)
    mounted, reader, reads = target != TARGETS[0], None, None
    if mounted:
        subprocess.run([HASHFS, "mount", "-o", "shared", img, mnt], check=True, capture_output=True)
        with open(os.path.join(mnt, "seen"), "wb") as f:
            f.write(b"r" * 4096)
    try:
        if target == TARGETS[2]:
            reader = subprocess.Popen([sys.executable, "-c", READER, os.path.join(mnt, "seen"), str(a.seconds + 2)],
                                      stdout=subprocess.PIPE, text=True)
        iops = fio(f"{PREFIX}/f", rw, a.seconds, a.size, env)
        if reader:
            reads = int(reader.communicate()[0]) / (a.seconds + 2)
    finally:
        if mounted:
            subprocess.run([HASHFS, "umount", mnt], check=True, capture_output=True)
    os.remove(img)
    return iops, reads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--size", default="128M")
    ap.add_argument("--image-size", default="512M")
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--json")
    a = ap.parse_args()
    for p in (HASHFS, SHIM):
        if not os.path.exists(p):
            sys.exit(f"{p} is missing: cargo build --release --workspace")
    res = {t: {j: [] for j in JOBS} for t in TARGETS}
    reads = []
    with tempfile.TemporaryDirectory(dir=a.dir) as work:
        for r in range(a.rounds):
            for job, rw in JOBS.items():
                order = TARGETS[r % 3:] + TARGETS[:r % 3]  # rotated each round
                for t in order:
                    iops, rd = one(t, rw, a, work)
                    res[t][job].append(iops)
                    if rd is not None:
                        reads.append(rd)
                    print(f"round {r + 1} {job:13} {t:26} {iops:10.0f} IOPS", flush=True)
    summary = {}
    print(f"\n{'job':13} {'target':26} {'IOPS':>16} {'over alone':>18}")
    for job in JOBS:
        for t in TARGETS:
            m, ci = mean_ci(res[t][job])
            ratios = [x / y for x, y in zip(res[t][job], res[TARGETS[0]][job])]
            rm, rci = mean_ci(ratios)
            summary.setdefault(job, {})[t] = {"iops": m, "ci": ci, "over_alone": rm, "over_alone_ci": rci}
            print(f"{job:13} {t:26} {m:9.0f} ± {ci:5.0f} {rm:9.3f} ± {rci:5.3f}")
    rm, rci = mean_ci(reads)
    print(f"reader through the mount: {rm:.0f} ± {rci:.0f} stat+read per second")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"config": machine(a.dir), "command": " ".join(sys.argv), "rounds": a.rounds,
                       "seconds": a.seconds, "size": a.size, "image_size": a.image_size, "raw": res,
                       "reader_calls_per_s": reads, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
