#!/usr/bin/env python3
"""File IO through the HashFS FUSE mount (not a test): fio with one job, psync, on

  fuse            `hashfs mount IMAGE DIR` (every write durable when it returns)
  fuse-direct_io  the same with `-o direct_io` (no page cache for file data)
  fuse-writeback  the same with `-o writeback_cache` (the kernel's write-back cache:
                  durable at fsync or close, as a disk file system)
  tmpfs           a directory on the tmpfs that holds the images (volatile)
  fuse-uring      (with --io-uring) the default mount through FUSE over io_uring (`-o
                  io_uring`; the script turns the kernel's enable_uring on for the run)

and four operations, each in every round on every target in turn (interleaved): 1 MiB
writes to a new 1 GiB file (deleted first, untimed), 1 MiB overwrites of that file, and
4 KiB random writes and reads in it. Prints per target and operation the mean of the
rounds with its 95% interval, and writes JSON with every round's figure.

Before the rounds, one warm-up round (`--warmup 0`: none) runs the same operations on
every target; its figures are kept in the JSON under "warmup" and left out of the
statistics. In a VM the first gigabytes a run writes land in guest memory the host must
back first, and the first round of every target runs several times slower: in
bench/results/goals/fuse-10rounds-shm.json (no warm-up), tmpfs's own new-file writes ran at
0.50 GB/s in round 1 and 5.6-9.6 in the other nine, the mount's at 0.35 against 1.2-2.0.

Usage: python3 bench/fuse_io.py [--rounds N] [--warmup N] [--image-dir DIR] [--io-uring] [--json FILE]
Needs: the release build (cargo build --release --workspace), fio, root and /dev/fuse.
"""
import argparse, json, os, platform, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHFS = os.path.join(ROOT, "target/release/hashfs")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from estimator import t975  # noqa: E402


def run(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def mean_ci(v):
    m = statistics.mean(v)
    if len(v) < 2:
        return m, float("nan")
    return m, t975(len(v) - 1) * statistics.stdev(v) / len(v) ** 0.5


def fio(path, rw, bs, size, runtime=None):
    cmd = ["fio", "--name=j", f"--filename={path}", f"--size={size}", f"--bs={bs}", f"--rw={rw}",
           "--ioengine=psync", "--output-format=json", "--end_fsync=0"]
    if runtime:
        cmd += [f"--runtime={runtime}", "--time_based", "--randrepeat=0"]
    out = run(cmd)
    job = json.loads(out[out.index("{"):])["jobs"][0]
    side = job["read"] if "read" in rw else job["write"]
    return side


ENABLE_URING = "/sys/module/fuse/parameters/enable_uring"


def uring_on(what):
    """Turns the kernel's switch for FUSE over io_uring on; returns what it was, for
    uring_restore. Exits when it cannot (`what` needs it)."""
    try:
        with open(ENABLE_URING) as fh:
            was = fh.read().strip()
        with open(ENABLE_URING, "w") as fh:
            fh.write("1")
    except OSError as e:
        sys.exit(f"{ENABLE_URING}: {e}: {what} needs a kernel with FUSE over io_uring (6.14+) and root")
    return was


def uring_restore(was):
    """Puts the switch back as uring_on found it (nothing when `was` is None)."""
    if was is not None:
        with open(ENABLE_URING, "w") as fh:
            fh.write("1" if was in ("Y", "1") else "0")


def machine(image_dir):
    mounts = open("/proc/mounts").read().splitlines()
    best = max((l.split() for l in mounts if os.path.realpath(image_dir).startswith(l.split()[1])),
               key=lambda f: len(f[1]))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    flags = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "")
    return {"cpu": cpu, "nproc": os.cpu_count(), "kernel": platform.release(),
            "flush": "clwb" if " clwb" in flags else "clflushopt" if " clflushopt" in flags else "clflush",
            "simd": "avx512" if " avx512f" in flags else "avx2" if " avx2" in flags else "sse",
            "image_mount": f"{best[2]} {best[3]}",
            "image_page_size": "2M" if "huge=always" in best[3] else "4K",
            "fuse_max_pages_limit": open("/proc/sys/fs/fuse/max_pages_limit").read().strip()
            if os.path.exists("/proc/sys/fs/fuse/max_pages_limit") else "?",
            "free_page_reporting": free_page_reporting()}


def free_page_reporting():
    """Whether freed memory goes back to the hypervisor (virtio-balloon free page reporting),
    which makes a fresh image's first touch many times slower; orders above 10 are never
    reported (scripts/bench-paper.sh sets 11 for its run)."""
    p = "/sys/module/page_reporting/parameters/page_reporting_order"
    if not os.path.exists(p):
        return "none"
    order = open(p).read().strip()
    if not order.isdigit():
        return f"unknown ({order})"
    return f"{'off' if int(order) > 10 else 'on'} (page_reporting_order {order})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first (kept in the JSON)")
    ap.add_argument("--image-dir", default="/dev/shm")
    ap.add_argument("--io-uring", action="store_true", help="add the target fuse-uring (-o io_uring)")
    ap.add_argument("--json")
    a = ap.parse_args()
    if not os.path.exists(HASHFS):
        sys.exit(f"{HASHFS} missing: run cargo build --release --workspace")
    targets = {"fuse": [], "fuse-direct_io": ["-o", "direct_io"], "fuse-writeback": ["-o", "writeback_cache"],
               "tmpfs": None}
    uring_was = None
    if a.io_uring:
        targets["fuse-uring"] = ["-o", "io_uring"]
        uring_was = uring_on("--io-uring")
    work = tempfile.mkdtemp(prefix="hashfs-fuseio-", dir=a.image_dir)
    dirs = {}
    ops = ["write_new_1m", "overwrite_1m", "randwrite_4k", "randread_4k"]
    res = {t: {o: [] for o in ops} for t in targets}
    warm = {t: {o: [] for o in ops} for t in targets}
    try:
        for t, opts in targets.items():
            d = os.path.join(work, t)
            os.mkdir(d)
            if opts is not None:
                img = os.path.join(work, t + ".img")
                run([HASHFS, "mkfs", img, "--size", "2G"])
                run([HASHFS, "mount", img, d] + opts)
            dirs[t] = d
        time.sleep(5)  # the mounts fault their images in (a background pass)
        for r in range(a.warmup + a.rounds):
            out = warm if r < a.warmup else res
            for t in targets:
                f = os.path.join(dirs[t], "f")
                if os.path.exists(f):
                    os.unlink(f)
                s = fio(f, "write", "1M", "1G")
                out[t]["write_new_1m"].append(s["bw_bytes"] / 1e9)
                s = fio(f, "write", "1M", "1G")
                out[t]["overwrite_1m"].append(s["bw_bytes"] / 1e9)
                s = fio(f, "randwrite", "4k", "1G", runtime=3)
                out[t]["randwrite_4k"].append(s["clat_ns"]["percentile"]["50.000000"])
                s = fio(f, "randread", "4k", "1G", runtime=3)
                out[t]["randread_4k"].append(s["clat_ns"]["percentile"]["50.000000"])
            what = f"warm-up round {r + 1} of {a.warmup}" if r < a.warmup else f"round {r - a.warmup + 1} of {a.rounds}"
            print(f"# {what} done", file=sys.stderr)
    finally:
        for t, opts in targets.items():
            if opts is not None and t in dirs:
                subprocess.run([HASHFS, "umount", dirs[t]], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
        uring_restore(uring_was)
    cfg = {"rounds": a.rounds, "warmup_rounds": a.warmup, "image_dir": a.image_dir, "image_bytes": 2 << 30, "file_bytes": 1 << 30,
           "fio": run(["fio", "--version"]).strip(),
           "commit": run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False).strip(),
           "date": time.strftime("%Y-%m-%d %H:%M"), **machine(a.image_dir)}
    print(f"# bench/fuse_io.py: {json.dumps(cfg)}")
    print("| operation | unit | " + " | ".join(targets) + " |")
    print("|---|---|" + "---:|" * len(targets))
    for o in ops:
        unit = "GB/s" if o.endswith("_1m") else "median latency, µs"
        cells = []
        for t in targets:
            m, ci = mean_ci(res[t][o])
            cells.append(f"{m:.2f} ± {ci:.2f}" if o.endswith("_1m") else f"{m / 1000:.1f} ± {ci / 1000:.1f}")
        print(f"| {o} | {unit} | " + " | ".join(cells) + " |")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"config": cfg, "results": res, "warmup": warm}, fh, indent=2)
        print(f"# wrote {a.json}")


if __name__ == "__main__":
    main()
