#!/usr/bin/env python3
"""Application benchmarks (not tests): fio 4 KiB randread, randwrite and append, RocksDB's
db_bench, and the LevelDB YCSB driver, each on three targets in one run:

  shim   LD_PRELOAD=libhashfs_preload.so, the data path without system calls
  fuse   the same kind of image mounted with `hashfs mount`
  tmpfs  a plain tmpfs directory (/dev/shm), for reference

Each round formats fresh targets and runs every benchmark on every target in turn (the
targets' order rotated from round to round); the table gives each target's mean over the
rounds with its 95% interval and the ratio to tmpfs computed within each round.

Usage: python3 bench/apps.py [--quick] [--rounds N] [--targets shim,fuse,tmpfs]
                             [--only BENCH,...] [--json FILE]
Needs: the release build (cargo build --release --workspace), fio, rocksdb-tools,
libleveldb-dev and g++ (scripts/test.sh installs them), root and /dev/fuse for the mount.
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuse_io import machine, mean_ci  # noqa: E402 (the same statistics and machine stamp)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHFS = os.path.join(ROOT, "target/release/hashfs")
SHIM = os.path.join(ROOT, "target/release/libhashfs_preload.so")
PREFIX = "/hashfs-bench"


def run(cmd, env=None, check=True):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


class Target:
    def __init__(self, name, workdir, env):
        self.name, self.workdir, self.env = name, workdir, env
        self.wrote_randwrite = False  # fio's randread reads the file randwrite left


def fio(t, name, rw, size, runtime):
    out = run(["fio", f"--name={name}", f"--filename={t.workdir}/fio-{name}", f"--size={size}", "--bs=4k",
               f"--rw={rw}", "--ioengine=psync", "--thread", "--output-format=json"]
              + ([f"--runtime={runtime}", "--time_based"] if runtime else []), env=t.env)
    job = json.loads(out[out.index("{"):])["jobs"][0]
    side = job["read"] if "read" in rw else job["write"]
    return {"iops": side["iops"], "lat_p50_ns": side["clat_ns"]["percentile"]["50.000000"],
            "lat_p99_ns": side["clat_ns"]["percentile"]["99.000000"]}


def db_bench(t, num):
    out = run(["db_bench", f"--db={t.workdir}/rocksdb", "--benchmarks=fillrandom,readrandom", f"--num={num}",
               "--value_size=100", "--compression_type=none"], env=t.env)
    res = {}
    for line in out.splitlines():
        for b in ("fillrandom", "readrandom"):
            if line.startswith(b) and "ops/sec" in line:
                res[b + "_ops_per_s"] = float(line.split("ops/sec")[0].split()[-1])
    return res


def ycsb(t, exe, records, ops):
    out = run([exe, f"{t.workdir}/leveldb", str(records), str(ops), "AC"], env=t.env)
    res = {}
    for line in out.splitlines():
        if line.startswith("load"):
            res["load_ops_per_s"] = float(line.split(":")[-1].split()[0])
        if line.startswith("workload"):
            res[f"{line.split()[1][0]}_ops_per_s"] = float(line.split(":")[-1].split()[0])
    if "all correct" not in out:
        sys.exit("YCSB driver found a wrong value")
    return res


BENCHES = ("fio_randwrite_4k", "fio_randread_4k", "fio_append_4k", "rocksdb_db_bench", "leveldb_ycsb")
TARGETS = ("shim", "fuse", "tmpfs")


class Round:
    """One round's targets, each fresh: a new 4 GiB image for the shim and for the mount,
    an empty directory for tmpfs."""

    def __init__(self, work, names):
        self.work, self.mnt = work, None
        os.mkdir(work)
        env0, self.targets = dict(os.environ), {}
        if "shim" in names:
            img = os.path.join(work, "shim.img")
            run([HASHFS, "mkfs", img, "--size", "4G"])
            # HASHFS_POPULATE=1 in the environment makes every shim process fault the image
            # in on a thread of its own (as `hashfs mount` does); off by default: in these
            # short runs the thread competes with the benchmark for the 2 cores (quick run:
            # LevelDB load 43 K ops/s with it, 183 K without).
            env = dict(env0, LD_PRELOAD=SHIM, HASHFS_IMAGE=img, HASHFS_MOUNT=PREFIX)
            self.targets["shim"] = Target("shim", PREFIX, env)
        if "fuse" in names:
            img, self.mnt = os.path.join(work, "fuse.img"), os.path.join(work, "mnt")
            os.mkdir(self.mnt)
            run([HASHFS, "mkfs", img, "--size", "4G"])
            run([HASHFS, "mount", img, self.mnt])
            self.targets["fuse"] = Target("fuse", self.mnt, env0)
        if "tmpfs" in names:
            d = os.path.join(work, "tmpfs")
            os.mkdir(d)
            self.targets["tmpfs"] = Target("tmpfs", d, env0)

    def close(self):
        if self.mnt:
            subprocess.run([HASHFS, "umount", self.mnt], capture_output=True)
        shutil.rmtree(self.work, ignore_errors=True)


def one(t, bench, exe, size, runtime, num, records, ops):
    if bench == "fio_randwrite_4k":
        return fio(t, "randwrite", "randwrite", size, runtime)
    if bench == "fio_randread_4k":  # reads the file its randwrite left (run first if absent)
        if not t.wrote_randwrite:
            fio(t, "randwrite", "randwrite", size, 0)
        return fio(t, "randwrite", "randread", size, runtime)
    if bench == "fio_append_4k":
        return fio(t, "append", "write", size, 0)
    if bench == "rocksdb_db_bench":
        return db_bench(t, num)
    return ycsb(t, exe, records, ops)


def summarize(results, targets, benches):
    """Per benchmark and metric: each target's mean over rounds with its 95% interval, and
    the shim's and the mount's ratio to tmpfs computed within each round."""
    out = {}
    for b in benches:
        for metric in results[targets[0]][b][0]:
            row = {t: dict(zip(("mean", "ci95"), mean_ci([r[metric] for r in results[t][b]]))) for t in targets}
            if "tmpfs" in targets:
                for t in targets:
                    if t != "tmpfs":
                        ratios = [x[metric] / y[metric] for x, y in zip(results[t][b], results["tmpfs"][b])]
                        row[f"{t}_vs_tmpfs"] = dict(zip(("mean", "ci95"), mean_ci(ratios)))
            out[f"{b}.{metric}"] = row
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=1, help="rounds, each on fresh targets (default 1)")
    ap.add_argument("--targets", default=",".join(TARGETS), help="comma-separated subset of " + ",".join(TARGETS))
    ap.add_argument("--only", default=",".join(BENCHES), help="comma-separated subset of " + ",".join(BENCHES))
    ap.add_argument("--json")
    a = ap.parse_args()
    targets = [t for t in a.targets.split(",") if t]
    benches = [b for b in a.only.split(",") if b]
    for t in targets:
        if t not in TARGETS:
            sys.exit(f"unknown target {t!r}: choose from {', '.join(TARGETS)}")
    for b in benches:
        if b not in BENCHES:
            sys.exit(f"unknown benchmark {b!r}: choose from {', '.join(BENCHES)}")
    if a.rounds < 1:
        sys.exit("--rounds must be at least 1")
    size, runtime, num, records, ops = ("64m", 3, 50000, 50000, 50000) if a.quick else ("512m", 10, 500000, 300000, 200000)
    for p in (HASHFS, SHIM):
        if not os.path.exists(p):
            sys.exit(f"{p} missing: run cargo build --release --workspace")
    work = tempfile.mkdtemp(prefix="hashfs-apps-", dir="/dev/shm")
    results = {t: {b: [] for b in benches} for t in targets}
    try:
        exe = os.path.join(work, "leveldb_ycsb")
        # Inside the try: a failed build (LevelDB's headers missing) left its directory.
        run(["bash", os.path.join(ROOT, "apps/ycsb/build.sh"), exe])
        # Every round: fresh targets; each benchmark on every target in turn, the order of
        # the targets rotated from round to round (A B C, B C A, ...).
        for r in range(a.rounds):
            rnd = Round(os.path.join(work, f"round{r}"), targets)
            try:
                order = targets[r % len(targets):] + targets[:r % len(targets)]
                for b in benches:
                    for t in order:
                        tgt = rnd.targets[t]
                        results[t][b].append(one(tgt, b, exe, size, runtime, num, records, ops))
                        tgt.wrote_randwrite |= b == "fio_randwrite_4k"
                        print(f"# round {r + 1}/{a.rounds} {b} {t}: {json.dumps(results[t][b][-1])}", flush=True)
            finally:
                rnd.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cfg = dict(machine("/dev/shm"), quick=a.quick, rounds=a.rounds, targets=targets, benchmarks=benches,
               image_dir="/dev/shm", shim_populate=os.environ.get("HASHFS_POPULATE") == "1", fio_size=size,
               fio_runtime_s=runtime, db_bench_num=num, ycsb_records=records, ycsb_ops=ops,
               commit=run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False).strip(),
               date=time.strftime("%Y-%m-%d"))
    summary = summarize(results, targets, benches)
    print(f"# bench/apps.py{' --quick' if a.quick else ''}: {json.dumps(cfg)}")
    ratio_cols = [t for t in targets if t != "tmpfs"] if "tmpfs" in targets else []
    print("| benchmark | metric | " + " | ".join(targets + [f"{t} / tmpfs" for t in ratio_cols]) + " |")
    print("|---|---|" + "---:|" * (len(targets) + len(ratio_cols)))
    def fmt(m, ci, f, unit=""):
        return f"{m:{f}}{unit}" + ("" if ci != ci else f" ± {ci:{f}}")  # ci is nan with one round

    for key, row in summary.items():
        b, metric = key.split(".")
        cells = [fmt(row[t]["mean"], row[t]["ci95"], ",.0f") for t in targets]
        cells += [fmt(row[f"{t}_vs_tmpfs"]["mean"], row[f"{t}_vs_tmpfs"]["ci95"], ".2f", "x") for t in ratio_cols]
        print(f"| {b} | {metric} | " + " | ".join(cells) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"config": cfg, "results": results, "summary": summary}, f, indent=2)
        print(f"# wrote {a.json}")


if __name__ == "__main__":
    main()
