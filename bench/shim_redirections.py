#!/usr/bin/env python3
"""A shell's redirections into the image through the shim (issue 55): bash runs N times
`echo LINE >> FILE` (each an open, a dup2 onto standard output and its undoing) and N times
`echo LINE >&5` onto a file it opened once (`exec 5>> FILE`: a dup2 and its undoing, as
configure scripts write config.log). Through the shim each redirection of standard output
to a file of the image starts a pump (a pipe and a thread, `shim/pump.rs`) and writes it
out when the shell puts its output back. Builds of the preload shim (each on a fresh image)
and tmpfs take turns within each round, the first changing from round to round. Reports
microseconds per redirection for each loop, with its 95% interval, and the ratio to the
first build within each round. Not a test.

Usage: python3 bench/shim_redirections.py --shim NAME=PATH [--shim NAME=PATH ...] [--rounds N]
                                          [--lines N] [--json FILE]
Needs: the release `hashfs` binary (cargo build --release --workspace), bash.
"""
import argparse, json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuse_io import machine  # noqa: E402 (the same machine stamp)
from three_targets import ratio_table  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHFS = os.path.join(ROOT, "target/release/hashfs")
PREFIX = "/hashfs-redirections"
LOOPS = ["append_redirection", "dup_onto_stdout"]

# $1 the directory, $2 the count; prints the times at the loops' starts and end, and fails
# unless every line reached its file.
SCRIPT = r"""
set -e
d=$1 n=$2
t0=$EPOCHREALTIME
for ((i = 0; i < n; i++)); do echo "line $i" >> "$d/a"; done
t1=$EPOCHREALTIME
exec 5>> "$d/b"
for ((i = 0; i < n; i++)); do echo "line $i" >&5; done
t2=$EPOCHREALTIME
exec 5>&-
[ "$(wc -l < "$d/a")" -eq "$n" ] && [ "$(wc -l < "$d/b")" -eq "$n" ]
echo "$t0 $t1 $t2"
"""


def one(target, path, n, tmp):
    if path is None:  # tmpfs
        d = os.path.join(tmp, "files")
        os.mkdir(d)
        out = subprocess.run(["bash", "-c", SCRIPT, "bash", d, str(n)], capture_output=True, text=True)
        subprocess.run(["rm", "-rf", d], check=True)
    else:
        image = os.path.join(tmp, "redirections.img")
        subprocess.run([HASHFS, "mkfs", image, "--size", "256M"], check=True, capture_output=True)
        env = dict(os.environ, LD_PRELOAD=path, HASHFS_IMAGE=image, HASHFS_MOUNT=PREFIX)
        out = subprocess.run(["bash", "-c", SCRIPT, "bash", PREFIX, str(n)], env=env, capture_output=True, text=True)
        os.remove(image)
    if out.returncode != 0:
        sys.exit(f"{target}: {out.stderr}")
    t = [float(x) for x in out.stdout.split()]
    return [1e6 * (t[1] - t[0]) / n, 1e6 * (t[2] - t[1]) / n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", action="append", required=True, help="NAME=PATH of a libhashfs_preload.so")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--json")
    a = ap.parse_args()
    targets = [tuple(s.split("=", 1)) for s in a.shim] + [("tmpfs", None)]
    res = {name: {loop: [] for loop in LOOPS} for name, _ in targets}
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        for r in range(a.rounds):
            order = targets[r % len(targets):] + targets[:r % len(targets)]
            for name, path in order:
                us = one(name, path, a.lines, tmp)
                for loop, v in zip(LOOPS, us):
                    res[name][loop].append(v)
                print(f"round {r + 1} {name:12} " + "  ".join(f"{loop} {v:7.2f} us" for loop, v in zip(LOOPS, us)),
                      flush=True)
    summary = ratio_table(res, [n for n, _ in targets], LOOPS, "us_per_redirection", "loop", 20, 24,
                          lambda m, h, rm: f"{m:7.2f} ±{h:5.2f} {rm:5.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": machine(a.dir), "command": " ".join(sys.argv),
                       "shims": {name: path for name, path in targets if path}, "rounds": a.rounds,
                       "lines": a.lines, "results": summary}, f, indent=1)


if __name__ == "__main__":
    main()
