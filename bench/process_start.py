#!/usr/bin/env python3
"""What a short-lived process costs through the shim (issue 55): a shell runs `cat` of a
small file N times, and the time per `cat` (its start, its join of the image, the read,
its exit) is measured on images of several sizes, for each shim build given and for the
same loop on tmpfs without the shim, the targets taking turns within each round (the
first changing from round to round). Two modes:

  beside  the shell wrote the file through the shim first, so it is a participant and each
          `cat` joins the image beside it (a shell script, make, a server's children)
  alone   the shell never touches the image, so each `cat` is its only participant: it
          mounts the image and, leaving last, marks it clean
  crowd   as beside, with 20 more participants (`sleep`s holding a file of the image open,
          killed at the end) that each `cat` finds as it joins and leaves (a server's
          children, `make -j`); only the loop is timed, from inside the shell

Reports each target's milliseconds per process with its 95% interval and the ratios to
tmpfs and to the first build, computed within each round. Not a test.

Usage: python3 bench/process_start.py --shim before=PATH --shim after=PATH [--sizes 64M,1G,4G]
                                      [--modes beside,alone] [--procs N] [--rounds N] [--json FILE]
                                      [--placement NAME=PLACEMENT]...

`--placement regions=regions` makes the images of the shim named `regions` with `hashfs mkfs
--placement regions` (one build may be named twice: `--shim paper=PATH --shim regions=PATH`).
Needs: the release `hashfs` binary (cargo build --release --workspace).
"""
import argparse, os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuse_io import mean_ci  # noqa: E402 (the same statistics)
from three_targets import HASHFS, ROOT, write_json  # noqa: E402

PREFIX = "/hashfs-starts"
LOOPS = {
    "beside": 'echo hi > {d}/a; for i in $(seq {n}); do cat {d}/a >/dev/null; done',
    "alone": 'for i in $(seq {n}); do cat {d}/a >/dev/null; done',
    "crowd": 'echo hi > {d}/a; for k in $(seq 20); do (exec 3<{d}/a; exec sleep 600) & done; sleep 1; '
             's=$EPOCHREALTIME; for i in $(seq {n}); do cat {d}/a >/dev/null; done; e=$EPOCHREALTIME; '
             'kill $(jobs -p); wait; echo "$s $e"',
}


def loop_seconds(mode, dt, out):
    """The loop's time: the whole run's, or what the shell measured around its loop."""
    if mode != "crowd":
        return dt
    s, e = (float(x) for x in out.split())
    return e - s


def timed(cmd, env):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0 or r.stderr:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return dt, r.stdout


def one(target, shims, placements, mode, size, procs, work):
    """Milliseconds per `cat` of `target` (a shim build's name, or tmpfs)."""
    if target == "tmpfs":
        d = os.path.join(work, "tmpfs")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "a"), "w") as f:
            f.write("hi\n")
        dt, out = timed(["bash", "-c", LOOPS[mode].format(d=d, n=procs)], dict(os.environ))
        return 1000 * loop_seconds(mode, dt, out) / procs
    image = os.path.join(work, f"starts-{size}.img")
    placement = ["--placement", placements[target]] if target in placements else []
    subprocess.run([HASHFS, "mkfs", image, "--size", size, *placement], check=True, capture_output=True)
    env = dict(os.environ, LD_PRELOAD=shims[target], HASHFS_IMAGE=image, HASHFS_MOUNT=PREFIX)
    subprocess.run(["bash", "-c", f"echo hi > {PREFIX}/a"], env=env, check=True)
    dt, out = timed(["bash", "-c", LOOPS[mode].format(d=PREFIX, n=procs)], env)
    ms = 1000 * loop_seconds(mode, dt, out) / procs
    fsck = subprocess.run([HASHFS, "fsck", image], capture_output=True, text=True)
    if fsck.returncode != 0:
        sys.exit(f"fsck after {target} {mode} {size}:\n{fsck.stdout}{fsck.stderr}")
    os.remove(image)
    return ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", action="append", required=True, help="NAME=PATH of a libhashfs_preload.so")
    ap.add_argument("--sizes", default="64M,1G,4G")
    ap.add_argument("--modes", default="beside,alone")
    ap.add_argument("--procs", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--json")
    ap.add_argument("--placement", action="append", default=[], help="NAME=PLACEMENT for the images of shim NAME")
    a = ap.parse_args()
    shims = dict(s.split("=", 1) for s in a.shim)
    placements = dict(s.split("=", 1) for s in a.placement)
    names = list(shims)
    targets = names + ["tmpfs"]
    points = [(m, s) for m in a.modes.split(",") for s in a.sizes.split(",")]
    res = {f"{m} {s}": {t: [] for t in targets} for m, s in points}
    with tempfile.TemporaryDirectory(dir=a.dir) as work:
        for r in range(a.rounds):
            for m, s in points:
                for t in targets[r % len(targets):] + targets[:r % len(targets)]:
                    res[f"{m} {s}"][t].append(one(t, shims, placements, m, s, a.procs, work))
            print(f"round {r + 1} of {a.rounds} done", file=sys.stderr)
    summary = {}
    for point, row in res.items():
        out = {t: dict(zip(("mean", "ci95"), mean_ci(v))) for t, v in row.items()}
        for t in names:
            for base in ["tmpfs"] + names[:1]:
                if t != base:
                    ratios = [x / y for x, y in zip(row[t], row[base])]
                    out[f"{t}_vs_{base}"] = dict(zip(("mean", "ci95"), mean_ci(ratios)))
        summary[point] = out
        print(f"{point}: " + "  ".join(f"{k} {v['mean']:.2f} ± {v['ci95']:.2f}" + ("x" if "_vs_" in k else " ms")
                                      for k, v in out.items()))
    if a.json:
        config = {"shims": shims, "placements": placements, "sizes": a.sizes, "modes": a.modes, "procs": a.procs, "rounds": a.rounds,
                  "dir": a.dir, "root": ROOT}
        write_json(a.json, "process_start.py", config, "ms_per_process", res, summary)


if __name__ == "__main__":
    main()
