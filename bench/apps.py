#!/usr/bin/env python3
"""Application benchmarks (not tests): fio 4 KiB randread, randwrite and append, RocksDB's
db_bench, and the LevelDB YCSB driver, each on three targets in one run:

  shim   LD_PRELOAD=libhashfs_preload.so, the data path without system calls
  fuse   the same kind of image mounted with `hashfs mount`
  tmpfs  a plain tmpfs directory (/dev/shm), for reference

Usage: python3 bench/apps.py [--quick] [--json FILE]
Needs: the release build (cargo build --release --workspace), fio, rocksdb-tools,
libleveldb-dev and g++ (scripts/test.sh installs them), root and /dev/fuse for the mount.
"""
import argparse, json, os, platform, shutil, subprocess, sys, tempfile, time

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    size, runtime, num, records, ops = ("64m", 3, 50000, 50000, 50000) if a.quick else ("512m", 10, 500000, 300000, 200000)
    for p in (HASHFS, SHIM):
        if not os.path.exists(p):
            sys.exit(f"{p} missing: run cargo build --release --workspace")
    work = tempfile.mkdtemp(prefix="hashfs-apps-", dir="/dev/shm")
    exe = os.path.join(work, "leveldb_ycsb")
    run(["bash", os.path.join(ROOT, "apps/ycsb/build.sh"), exe])
    results, env0 = {}, dict(os.environ)
    try:
        # Targets: each gets a fresh 4 GiB image (or directory) per run.
        tmpfs_dir = os.path.join(work, "tmpfs")
        os.mkdir(tmpfs_dir)
        shim_img = os.path.join(work, "shim.img")
        fuse_img = os.path.join(work, "fuse.img")
        mnt = os.path.join(work, "mnt")
        os.mkdir(mnt)
        for img in (shim_img, fuse_img):
            run([HASHFS, "mkfs", img, "--size", "4G"])
        run([HASHFS, "mount", fuse_img, mnt])
        # HASHFS_POPULATE=1 in the environment makes every shim process fault the image in
        # on a thread of its own (as `hashfs mount` does); off by default: in these short
        # runs the thread competes with the benchmark for the 2 cores (quick run: LevelDB
        # load 43 K ops/s with it, 183 K without).
        shim_env = dict(env0, LD_PRELOAD=SHIM, HASHFS_IMAGE=shim_img, HASHFS_MOUNT=PREFIX)
        targets = [Target("shim", PREFIX, shim_env), Target("fuse", mnt, env0), Target("tmpfs", tmpfs_dir, env0)]
        for t in targets:
            r = results.setdefault(t.name, {})
            r["fio_randwrite_4k"] = fio(t, "randwrite", "randwrite", size, runtime)
            r["fio_randread_4k"] = fio(t, "randwrite", "randread", size, runtime)  # reads the file just written
            r["fio_append_4k"] = fio(t, "append", "write", size, 0)
            r["rocksdb_db_bench"] = db_bench(t, num)
            r["leveldb_ycsb"] = ycsb(t, exe, records, ops)
        run([HASHFS, "umount", mnt])
    finally:
        subprocess.run([HASHFS, "umount", mnt], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    flags = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "")
    cfg = {"quick": a.quick,
           "flush": "clwb" if " clwb" in flags else "clflushopt" if " clflushopt" in flags else "clflush",
           "simd": "avx512" if " avx512f" in flags else "avx2" if " avx2" in flags else "sse",
           "image_dir": "/dev/shm", "kernel": platform.release(), "shim_populate": os.environ.get("HASHFS_POPULATE") == "1", "fio_size": size, "fio_runtime_s": runtime, "db_bench_num": num, "ycsb_records": records,
           "ycsb_ops": ops, "cpu": platform.processor() or platform.machine(), "nproc": os.cpu_count(),
           "commit": run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False).strip(),
           "date": time.strftime("%Y-%m-%d")}
    print(f"# bench/apps.py{' --quick' if a.quick else ''}: {json.dumps(cfg)}")
    print("| benchmark | metric | shim | fuse | tmpfs |")
    print("|---|---|---:|---:|---:|")
    for bench in ("fio_randread_4k", "fio_randwrite_4k", "fio_append_4k", "rocksdb_db_bench", "leveldb_ycsb"):
        for metric in results["shim"][bench]:
            row = [f"{results[t][bench][metric]:,.0f}" for t in ("shim", "fuse", "tmpfs")]
            print(f"| {bench} | {metric} | " + " | ".join(row) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"config": cfg, "results": results}, f, indent=2)
        print(f"# wrote {a.json}")


if __name__ == "__main__":
    main()
