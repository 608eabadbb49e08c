#!/usr/bin/env python3
"""Processes sharing one image through the shim (issue 55), interleaved: fio's 4 KiB psync
jobs (random overwrite, append) run by one process, and by two processes at once on one
image, each on a file of its own, and the same two processes on two tmpfs files.
Reports each target's aggregate IOPS with its 95% interval, and the two processes'
aggregate over one process's, computed within each round. Not a test: the figures say
what the coarse image lock of the first step (docs/design.md, "Many processes on one
image") costs when processes do not share files.

Usage: python3 bench/shared_processes.py [--rounds N] [--seconds S] [--size 128M] [--json FILE]
Needs: fio and the release build (cargo build --release --workspace).
"""
import argparse, json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuse_io import machine, mean_ci  # noqa: E402 (the same statistics and machine stamp)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHFS = os.path.join(ROOT, "target/release/hashfs")
SHIM = os.path.join(ROOT, "target/release/libhashfs_preload.so")
PREFIX = "/hashfs-shared"
JOBS = {"randwrite_4k": "randwrite", "append_4k": "write"}


def fio_cmd(path, rw, seconds, size):
    return ["fio", "--name=j", f"--filename={path}", f"--size={size}", "--bs=4k", f"--rw={rw}",
            "--ioengine=psync", "--thread", f"--runtime={seconds}", "--time_based", "--output-format=json"]


def run_all(cmds, env):
    """Starts every command at once; the sum of their write IOPS."""
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    total = 0.0
    for p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"fio failed: {err}")
        total += json.loads(out[out.index("{"):])["jobs"][0]["write"]["iops"]
    return total


def lay_out(paths, rw, size, env):
    if rw == "randwrite":  # overwrites of laid-out blocks
        for p in paths:
            subprocess.run(["fio", "--name=lay", f"--filename={p}", f"--size={size}", "--bs=1M", "--rw=write",
                            "--ioengine=psync", "--thread"], env=env, check=True, capture_output=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--size", default="128M")
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--json")
    a = ap.parse_args()
    targets = ["shim-1", "shim-2", "tmpfs-2"]
    res = {t: {j: [] for j in JOBS} for t in targets}
    for r in range(a.rounds):
        order = targets[r % len(targets):] + targets[:r % len(targets)]
        for job, rw in JOBS.items():
            for t in order:
                with tempfile.TemporaryDirectory(dir=a.dir) as d:
                    n = 2 if t.endswith("-2") else 1
                    if t.startswith("shim"):
                        image = os.path.join(d, "img")
                        subprocess.run([HASHFS, "mkfs", image, "--size", "1G"], check=True, capture_output=True)
                        env = dict(os.environ, LD_PRELOAD=SHIM, HASHFS_IMAGE=image, HASHFS_MOUNT=PREFIX)
                        paths = [f"{PREFIX}/f{i}" for i in range(n)]
                    else:
                        env = dict(os.environ)
                        paths = [os.path.join(d, f"f{i}") for i in range(n)]
                    lay_out(paths, rw, a.size, env)
                    iops = run_all([fio_cmd(p, rw, a.seconds, a.size) for p in paths], env)
                res[t][job].append(iops)
                print(f"round {r + 1} {job:13s} {t:8s} {iops:10.0f} IOPS", flush=True)
    summary = {}
    print(f"\n{'job':14s}" + "".join(f"{t:>24s}" for t in targets) + "   shim-2 / shim-1")
    for job in JOBS:
        line = f"{job:14s}"
        for t in targets:
            m, ci = mean_ci(res[t][job])
            summary.setdefault(t, {})[job] = {"iops": res[t][job], "mean": m, "ci95": ci}
            line += f"{m:15.0f} ± {ci:6.0f}"
        ratios = [b / a1 for a1, b in zip(res["shim-1"][job], res["shim-2"][job])]
        m, ci = mean_ci(ratios)
        summary["shim-2"][job]["ratio_to_shim-1"] = {"rounds": ratios, "mean": m, "ci95": ci}
        print(f"{line}   {m:.2f} ± {ci:.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"config": machine(a.dir), "command": " ".join(sys.argv), "rounds": a.rounds,
                       "seconds": a.seconds, "size": a.size, "results": summary}, f, indent=1)


if __name__ == "__main__":
    main()
