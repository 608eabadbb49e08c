#!/usr/bin/env python3
"""Two (or more) builds of the preload shim against each other, interleaved: fio's 4 KiB
psync jobs (random overwrite, random read, append, each followed by nothing: every write
through the shim is durable when it returns) and its 1 MiB sequential read (`--jobs`
picks some) on a fresh image per job, the builds taking
turns within each round and the first build changing from round to round. Reports each
build's mean IOPS with its 95% interval and the ratio to the first build computed within
each round. For A/Bs of the shim's call path (the interposer, many processes later), not
a comparison with other file systems (bench/apps.py does that).

Usage: python3 bench/shim_ab.py --shim before=PATH --shim after=PATH [--rounds N]
                                [--seconds S] [--size 256M] [--jobs a,b] [--json FILE]
Needs: fio, the release `hashfs` binary (cargo build --release --workspace).
"""
import argparse, json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuse_io import machine  # noqa: E402 (the same machine stamp)
from three_targets import ratio_table  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHFS = os.path.join(ROOT, "target/release/hashfs")
PREFIX = "/hashfs-ab"
JOBS = {"randwrite_4k": ("randwrite", "4k"), "randread_4k": ("randread", "4k"), "append_4k": ("write", "4k"),
        "seqread_1m": ("read", "1M")}


def run(cmd, env=None):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def fio_job(shim, image, job, seconds, size):
    env = dict(os.environ, LD_PRELOAD=shim, HASHFS_IMAGE=image, HASHFS_MOUNT=PREFIX)
    rw, bs = JOBS[job]
    path = f"{PREFIX}/fio-{job}"
    if rw in ("randread", "read"):  # lay the file out first, then read it
        run(["fio", "--name=lay", f"--filename={path}", f"--size={size}", "--bs=1M", "--rw=write",
             "--ioengine=psync", "--thread"], env=env)
    out = run(["fio", f"--name={job}", f"--filename={path}", f"--size={size}", f"--bs={bs}", f"--rw={rw}",
               "--ioengine=psync", "--thread", f"--runtime={seconds}", "--time_based", "--output-format=json"], env=env)
    side = json.loads(out[out.index("{"):])["jobs"][0]["read" if rw in ("randread", "read") else "write"]
    return side["iops"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", action="append", required=True, help="NAME=PATH of a libhashfs_preload.so")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--size", default="256M")
    ap.add_argument("--image-size", default="2G")
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--jobs", default=",".join(j for j in JOBS if j != "seqread_1m"))
    ap.add_argument("--json")
    a = ap.parse_args()
    jobs = a.jobs.split(",")
    if any(j not in JOBS for j in jobs):
        sys.exit(f"unknown job in {a.jobs}; the jobs: {', '.join(JOBS)}")
    shims = [tuple(s.split("=", 1)) for s in a.shim]
    res = {name: {job: [] for job in jobs} for name, _ in shims}
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        image = os.path.join(d, "ab.img")
        for r in range(a.rounds):
            order = shims[r % len(shims):] + shims[:r % len(shims)]
            for job in jobs:
                for name, path in order:
                    run([HASHFS, "mkfs", image, "--size", a.image_size])
                    iops = fio_job(path, image, job, a.seconds, a.size)
                    res[name][job].append(iops)
                    print(f"round {r + 1} {job:13} {name:10} {iops:12.0f} IOPS", flush=True)
    summary = ratio_table(res, [n for n, _ in shims], jobs, "iops", "job", 13, 26,
                          lambda m, h, rm: f"{m:10.0f} ±{h:7.0f} {rm:4.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"config": machine(a.dir), "command": " ".join(sys.argv), "shims": dict(shims),
                       "rounds": a.rounds, "seconds": a.seconds, "size": a.size, "results": summary}, f, indent=1)


if __name__ == "__main__":
    main()
