#!/usr/bin/env python3
"""Processes sharing one image through the shim (issue 55), interleaved: fio's 4 KiB psync
jobs (random overwrite, append) run by one process, and by two processes at once on one
image, each on a file of its own, and the same two processes on two tmpfs files.
Reports each target's aggregate IOPS with its 95% interval, and the two processes'
aggregate over one process's, computed within each round. Not a test: the figures say
what the coarse image lock of the first step (docs/design.md, "Many processes on one
image") costs when processes do not share files.

With --kill SECONDS it measures instead a survivor's latency while other processes die:
one process through the shim stats and overwrites a file in a loop and records each
call's time, while others, started one after another through the shim on the same image,
write and rename files until each is killed with SIGKILL at a random moment; prints the
survivor's median, 99th percentile and longest call, how many calls took over 1 ms and
over 5 ms, and the number of kills. With --joins as well, the others kill no one: each
joins the image, stats a directory and exits (what a join costs the participants already
there).

Usage: python3 bench/shared_processes.py [--rounds N] [--seconds S] [--size 128M] [--shim PATH] [--json FILE]
       python3 bench/shared_processes.py --kill SECONDS [--joins] [--image-size 1G] [--shim PATH] [--json FILE]
Needs: fio and the release build (cargo build --release --workspace).
"""
import argparse, json, os, random, signal, subprocess, sys, tempfile, time

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


SURVIVOR = """
import os, sys, time
path, until = sys.argv[1], time.time() + float(sys.argv[2])
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"x" * 4096, 0)
print("ready", flush=True)
lat = []
while time.time() < until:
    t = time.perf_counter_ns()
    os.stat(path)
    os.pwrite(fd, b"y" * 4096, 0)
    lat.append(time.perf_counter_ns() - t)
print(",".join(map(str, lat)))
"""

VICTIM = """
import os, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
print("joined", flush=True)
i = 0
while True:
    p = f"{d}/t{i % 50}"
    with open(p, "wb") as f:
        f.write(b"v" * 8192)
    os.rename(p, f"{d}/f{i % 50}")
    i += 1
"""

JOINER = """
import os, sys
os.makedirs(sys.argv[1], exist_ok=True)
print("joined", flush=True)
"""


def kill_loop(a):
    """The survivor's call latencies while victims die (see the module)."""
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        image = os.path.join(d, "img")
        subprocess.run([HASHFS, "mkfs", image, "--size", a.image_size], check=True, capture_output=True)
        env = dict(os.environ, LD_PRELOAD=a.shim, HASHFS_IMAGE=image, HASHFS_MOUNT=PREFIX)
        surv = subprocess.Popen([sys.executable, "-c", SURVIVOR, f"{PREFIX}/s", str(a.kill)], env=env,
                                stdout=subprocess.PIPE, text=True)
        assert surv.stdout.readline().strip() == "ready"
        kills, rng, until = 0, random.Random(1), time.time() + a.kill - 0.5
        while time.time() < until:
            v = subprocess.Popen([sys.executable, "-c", JOINER if a.joins else VICTIM, f"{PREFIX}/v"], env=env,
                                 stdout=subprocess.PIPE, text=True)
            if v.stdout.readline().strip() != "joined":
                sys.exit("a victim could not join the image")
            if a.joins:
                if v.wait() != 0:
                    sys.exit("a joining process failed")
            else:
                time.sleep(rng.uniform(0.02, 0.2))
                v.send_signal(signal.SIGKILL)
                v.wait()
            kills += 1
        out, _ = surv.communicate()
        if surv.returncode != 0:
            sys.exit("the survivor failed")
        lat = sorted(int(x) for x in out.strip().split(","))
        pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] / 1e6
        res = {"calls": len(lat), "processes": kills, "killed": not a.joins, "median_ms": pick(0.5),
               "p99_ms": pick(0.99), "p999_ms": pick(0.999), "max_ms": lat[-1] / 1e6,
               "over_1ms": sum(x > 1_000_000 for x in lat), "over_5ms": sum(x > 5_000_000 for x in lat)}
        print(f"survivor: {res['calls']} calls (stat + 4 KiB pwrite), {kills} processes "
              f"{'joined and left' if a.joins else 'killed'}; median {res['median_ms']:.3f} ms, p99 "
              f"{res['p99_ms']:.3f} ms, p99.9 {res['p999_ms']:.3f} ms, longest {res['max_ms']:.1f} ms; "
              f"{res['over_1ms']} over 1 ms, {res['over_5ms']} over 5 ms")
        subprocess.run([HASHFS, "fsck", image], check=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"config": machine(a.dir), "command": " ".join(sys.argv), "image_size": a.image_size,
                           "seconds": a.kill, "results": res}, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kill", type=float, help="measure a survivor's latency while others die, for SECONDS")
    ap.add_argument("--joins", action="store_true", help="with --kill: the others join and exit, killed by no one")
    ap.add_argument("--image-size", default="1G")
    ap.add_argument("--shim", default=SHIM, help="the libhashfs_preload.so to run (default: the release build's)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--size", default="128M")
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.kill:
        return kill_loop(a)
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
                        env = dict(os.environ, LD_PRELOAD=a.shim, HASHFS_IMAGE=image, HASHFS_MOUNT=PREFIX)
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
