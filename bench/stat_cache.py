#!/usr/bin/env python3
"""What the kernel's cache of names and attributes saves on the mount (not a test): one
thread stats one file 20,000 times (fstatat, and statx as Rust's std asks: basic stats and
birth time), on a fresh mount with the default cache_timeout and with cache_timeout=0 (every
stat a lookup and a getattr round trip to the daemon), rounds interleaved. Prints the mean
time per call of each and writes JSON.

Usage: python3 bench/stat_cache.py [--rounds N] [--json FILE]
Needs: the release build (cargo build --release --workspace; HASHFS_BIN names another), root
and /dev/fuse.
"""
import argparse, ctypes, json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuse_io import machine, mean_ci  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHFS = os.environ.get("HASHFS_BIN", os.path.join(ROOT, "target/release/hashfs"))
CALLS = 20_000
LIBC = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
STATX_BASIC_STATS, STATX_BTIME = 0x7FF, 0x800


def per_call_us(f):
    t = time.perf_counter()
    for _ in range(CALLS):
        f()
    return (time.perf_counter() - t) / CALLS * 1e6


def measure(mnt):
    p = os.path.join(mnt, "f")
    with open(p, "w") as f:
        f.write("x")
    os.stat(p)
    buf = ctypes.create_string_buffer(256)
    path = p.encode()

    def statx():
        if LIBC.statx(AT_FDCWD, path, 0, STATX_BASIC_STATS | STATX_BTIME, buf) != 0:
            raise OSError(ctypes.get_errno(), "statx")

    return {"fstatat_us": per_call_us(lambda: os.stat(p)), "statx_us": per_call_us(statx)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--image-dir", default="/dev/shm")
    ap.add_argument("--json")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="hashfs-stat-cache-")
    img, mnt = os.path.join(a.image_dir, f"hashfs-stat-cache-{os.getpid()}.img"), os.path.join(work, "mnt")
    os.mkdir(mnt)
    configs = {"default (60 s)": [], "cache_timeout=0": ["-o", "cache_timeout=0"]}
    results = []
    try:
        for r in range(a.rounds):
            for name, opts in configs.items():
                subprocess.run([HASHFS, "mkfs", img, "--size", "256M"], check=True, capture_output=True)
                subprocess.run([HASHFS, "mount", img, mnt] + opts, check=True, capture_output=True)
                try:
                    results.append({"round": r, "config": name, **measure(mnt)})
                finally:
                    subprocess.run([HASHFS, "umount", mnt], check=True)
                    os.unlink(img)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cfg = {"rounds": a.rounds, "calls": CALLS, "threads": 1,
           "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip(),
           "date": time.strftime("%Y-%m-%d %H:%M"), **machine(a.image_dir)}
    print(f"# bench/stat_cache.py: {json.dumps(cfg)}")
    print("| mount | fstatat µs/call | statx µs/call |\n|---|---:|---:|")
    for name in configs:
        cells = []
        for k in ("fstatat_us", "statx_us"):
            m, ci = mean_ci([x[k] for x in results if x["config"] == name])
            cells.append(f"{m:.2f} ± {ci:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"config": cfg, "results": results}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
