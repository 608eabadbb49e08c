#!/usr/bin/env python3
"""What `mmap` of a HashFS file costs through the shim, per page, for two or more builds of
the shim in one run.

A file written through the shim under HashFS's placement has every block apart, so its
shared mapping is one kernel mapping per page (crates/hashfs-preload/src/shim/mmap/place.rs);
LevelDB maps each table it opens this way. Each child process (one per shim, the order
rotated from round to round) writes a file of --pages pages on a fresh image, then maps it
read-only --maps times, reads one byte of every page and unmaps it; it prints the time per
page of the map, of the reads and of the unmap. Each shim's mean over rounds with its 95%
interval, and the ratio of every shim to the first within each round. HASHFS_BIN names
another `hashfs` than the release build's (for mkfs). A shim may name environment
variables for its children after its path: `--shim pages=PATH,HASHFS_MAP_COPY_MAX=0` maps
the file's own pages where the default serves such a small mapping by a copy
(shim/mmap/copy.rs).

    python3 bench/shim_mmap.py --shim new=target/release/libhashfs_preload.so \\
        --shim old=/tmp/old/libhashfs_preload.so --rounds 5 --json FILE
"""

import argparse, json, os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuse_io import machine, mean_ci  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHFS = os.environ.get("HASHFS_BIN", os.path.join(ROOT, "target/release/hashfs"))
PREFIX = "/hashfs-bench"

CHILD = r"""
import mmap, os, sys, time
path, pages, maps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "wb") as f:
    f.write(bytes(range(256)) * (pages * 16))
fd = os.open(path, os.O_RDONLY)
t_map = t_read = t_unmap = 0
for _ in range(maps):
    t0 = time.perf_counter_ns()
    m = mmap.mmap(fd, pages * 4096, mmap.MAP_SHARED, mmap.PROT_READ)
    t1 = time.perf_counter_ns()
    s = sum(m[i] for i in range(0, pages * 4096, 4096))
    t2 = time.perf_counter_ns()
    m.close()
    t3 = time.perf_counter_ns()
    assert s == 0, s  # byte 0 of every page
    t_map, t_read, t_unmap = t_map + t1 - t0, t_read + t2 - t1, t_unmap + t3 - t2
n = maps * pages
print(f"{t_map / n / 1000:.3f} {t_read / n / 1000:.3f} {t_unmap / n / 1000:.3f}")
"""

METRICS = ("map_us_per_page", "read_us_per_page", "unmap_us_per_page")


def one(shim, work, pages, maps):
    img = os.path.join(work, "shim.img")
    subprocess.run([HASHFS, "mkfs", img, "--size", "1G"], check=True, capture_output=True)
    path, *extra = shim.split(",")
    env = dict(os.environ, **dict(v.split("=", 1) for v in extra), LD_PRELOAD=path, HASHFS_IMAGE=img,
               HASHFS_MOUNT=PREFIX)
    out = subprocess.run([sys.executable, "-c", CHILD, PREFIX + "/f", str(pages), str(maps)], env=env,
                         check=True, capture_output=True, text=True).stdout
    os.unlink(img)
    return dict(zip(METRICS, map(float, out.split())))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", action="append", required=True,
                    help="NAME=PATH[,VAR=VALUE...] of a libhashfs_preload.so and its environment (two or more)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pages", type=int, default=512, help="pages in the file (default 512: a 2 MiB table)")
    ap.add_argument("--maps", type=int, default=200, help="mappings per child")
    ap.add_argument("--json")
    a = ap.parse_args()
    shims = dict(s.split("=", 1) for s in a.shim)
    for name, spec in shims.items():
        path = spec.split(",")[0]
        if not os.path.exists(path):
            sys.exit(f"{name}: {path} missing")
    if not os.path.exists(HASHFS):
        sys.exit(f"{HASHFS} missing: cargo build --release --workspace")
    names = list(shims)
    results = {n: [] for n in names}
    work = tempfile.mkdtemp(prefix="hashfs-shim-mmap-", dir="/dev/shm")
    try:
        for r in range(a.rounds):
            for n in names[r % len(names):] + names[:r % len(names)]:
                results[n].append(one(shims[n], work, a.pages, a.maps))
                print(f"# round {r + 1}/{a.rounds} {n}: {json.dumps(results[n][-1])}", flush=True)
    finally:
        os.rmdir(work)
    summary = {}
    for metric in METRICS:
        row = {n: dict(zip(("mean", "ci95"), mean_ci([x[metric] for x in results[n]]))) for n in names}
        for n in names[1:]:
            ratios = [x[metric] / y[metric] for x, y in zip(results[n], results[names[0]])]
            row[f"{n}_vs_{names[0]}"] = dict(zip(("mean", "ci95"), mean_ci(ratios)))
        summary[metric] = row
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    cfg = dict(machine("/dev/shm"), shims=shims, rounds=a.rounds, pages=a.pages, maps=a.maps,
               commit=commit.stdout.strip(), date=time.strftime("%Y-%m-%d"))
    print("| metric | " + " | ".join(names) + " | " + " | ".join(f"{n} / {names[0]}" for n in names[1:]) + " |")
    print("|---|" + "---:|" * (2 * len(names) - 1))
    for metric, row in summary.items():
        cells = [f"{row[n]['mean']:.3f} ± {row[n]['ci95']:.3f}" for n in names]
        cells += [f"{row[f'{n}_vs_{names[0]}']['mean']:.3f} ± {row[f'{n}_vs_{names[0]}']['ci95']:.3f}" for n in names[1:]]
        print(f"| {metric} | " + " | ".join(cells) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(config=cfg, results=results, summary=summary), f, indent=1)


if __name__ == "__main__":
    main()
