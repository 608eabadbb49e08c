#!/usr/bin/env python3
"""SPFS's stacked mode, measured (not a test): the paper's Figures 11-13 on this machine.

Four targets, interleaved in every round (the order rotates), each workload on a fresh
directory after the caches are dropped:

  ext4     ext4 on a loop device over a file on the real disk (direct I/O):
           scripts/stacked-lower.sh sets it up
  stacked  `hashfs mount --lower` over another directory of that same ext4, the PM image
           on /dev/shm (extent-hash mapping, as SPFS)
  shim     the same stack in the process: LD_PRELOAD=libhashfs_spfs_shim.so with
           HASHFS_LOWER set to a third directory of that ext4 (its own PM image on
           /dev/shm), no FUSE round trip
  hashfs   a HashFS image mounted alone through FUSE (same FUSE path, no lower file system)
  stacked-pt  (only when chosen) the stacked mount with `-o passthrough=on`: files below
           that are not syncing served by the kernel from the lower file (issue 58)
  NAME     (only when chosen) `--mount-variant NAME=OPTS`: another stacked mount, with
           `-o OPTS`; `--shim-variant NAME=OPTS`: the shim with HASHFS_STACK_OPTIONS=OPTS
           (an A/B of a stack option within one run)

Workloads:
  fsync-append, fsync-overwrite  fio 4 KiB writes, each followed by fdatasync (the issue's
                                 latency figure; the paper's Fig. 11c)
  rocksdb-syncN                  db_bench fillrandom, 1 KB values (YCSB's Load), a synced
                                 write batch of N records, N = 16, 256, 4096, 65536 (Fig. 13;
                                 the paper sets setSync on every Nth write: the WAL sees the
                                 same N records per fsync)
  mail-mbox                      our generator: deliveries of 1-16 KiB to 64 mailboxes,
                                 each appended and fsynced, reads and emptying mixed in
                                 (a mail server of the FIU traces' kind, Fig. 12), timed
                                 after an untimed warm-up of 3,000 deliveries
  mail-maildir                   our generator, Filebench varmail's flow: create+append+fsync,
                                 append+fsync, read whole, delete, over 1,000 small files,
                                 timed after an untimed warm-up of 3,000 operations
                                 (Filebench runs varmail for a minute; SPFS's directory rule
                                 learns in the first fraction of a second of it)
  rocksdb-nosync, fio-rand-nosync  never sync (the stacking overhead, Fig. 11a/b)

The mail generators run in a child Python (`--mail-worker`) so that the shim can be
loaded into it, and fio runs its job as a thread (`--thread`: a process forked from the one
that laid the file out may not use the shim's image); every target runs them that way.

Usage: python3 bench/stacked.py [--quick] [--rounds N] [--only W1,W2] [--targets T1,T2] [--json FILE]
Needs root, /dev/fuse, fio and db_bench (scripts/test.sh installs them), the release build.
"""
import argparse, json, os, random, shutil, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHFS = os.path.join(ROOT, "target/release/hashfs")
SHIM = os.path.join(ROOT, "target/release/libhashfs_spfs_shim.so")
LOWER = "/mnt/hashfs-lower"
# The environment a workload runs in (the shim target's, set per run).
ENV = {}
# What the shim printed at its last exit (HASHFS_STACK_STATUS=1).
LAST_STDERR = [""]


def run(cmd, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **ENV}, **kw)
    if check and r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    LAST_STDERR[0] = r.stderr
    return r.stdout


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


def fio_sync(d, rw, size, runtime):
    out = run(["fio", "--name=s", "--thread", f"--filename={d}/fio", f"--size={size}", "--bs=4k", f"--rw={rw}",
               "--ioengine=psync", "--fdatasync=1", f"--runtime={runtime}", "--time_based", "--output-format=json"])
    job = json.loads(out[out.index("{"):])["jobs"][0]
    w, s = job["write"], job.get("sync", {})
    return {"ops_per_s": w["iops"], "write_p50_us": w["clat_ns"]["percentile"]["50.000000"] / 1e3,
            "sync_p50_us": s.get("lat_ns", {}).get("percentile", {}).get("50.000000", 0) / 1e3,
            "sync_p99_us": s.get("lat_ns", {}).get("percentile", {}).get("99.000000", 0) / 1e3}


def fio_nosync(d, size, runtime):
    # --invalidate=0: fio's default drops the file's cached pages before each job
    # (fadvise DONTNEED), which reaches ext4's page cache directly but not the lower file's
    # through a FUSE passthrough handle (the kernel does not pass fadvise on), so the
    # targets would not start alike; drop_caches before each workload starts them alike.
    res = {}
    for rw in ("randwrite", "randread"):
        out = run(["fio", "--name=n", "--thread", f"--filename={d}/fio", f"--size={size}", "--bs=4k", f"--rw={rw}",
                   "--ioengine=psync", f"--runtime={runtime}", "--time_based", "--invalidate=0", "--output-format=json"])
        job = json.loads(out[out.index("{"):])["jobs"][0]
        res[f"{rw}_ops_per_s"] = job["read" if rw == "randread" else "write"]["iops"]
    return res


def db_bench(d, num, batch, sync):
    out = run(["db_bench", f"--db={d}/db", "--benchmarks=fillrandom", f"--num={num}", f"--batch_size={batch}",
               f"--sync={'true' if sync else 'false'}", "--value_size=1000", "--compression_type=none"])
    for line in out.splitlines():
        if line.startswith("fillrandom") and "ops/sec" in line:
            return {"ops_per_s": float(line.split("ops/sec")[0].split()[-1])}
    sys.exit(f"db_bench printed no result:\n{out}")


def mail(kind, d, ops, seed, warmup=0):
    out = run(["/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable, os.path.abspath(__file__),
               "--mail-worker", kind, d, str(ops), str(seed), str(warmup)])
    return json.loads(out.strip().splitlines()[-1])


def mail_mbox(d, ops, seed, warmup):
    """`warmup` deliveries first, untimed on every target (a mail server runs for days; SPFS
    promotes a mailbox after its 30th quick fsync in a row), then `ops` timed."""
    rng = random.Random(seed)
    boxes = [os.path.join(d, f"user{i:02}.mbox") for i in range(64)]
    for b in boxes:
        open(b, "wb").close()
    t = time.perf_counter()
    for i in range(warmup + ops):
        if i == warmup:
            t = time.perf_counter()
        b = rng.choice(boxes)
        r = rng.random()
        if r < 0.8:
            with open(b, "ab") as f:
                f.write(os.urandom(rng.randint(1024, 16384)))
                f.flush()
                os.fdatasync(f.fileno())
        elif r < 0.99:
            with open(b, "rb") as f:
                while f.read(1 << 20):
                    pass
        else:
            with open(b, "r+b") as f:
                f.truncate(0)
                os.fsync(f.fileno())
    return {"ops_per_s": ops / (time.perf_counter() - t)}


def mail_maildir(d, ops, seed, warmup):
    """`warmup` operations first, untimed on every target (as mail-mbox), then `ops` timed."""
    rng = random.Random(seed)
    dirs = [os.path.join(d, f"dir{i}") for i in range(8)]
    files = []
    for i, x in enumerate(dirs):
        os.mkdir(x)
    for i in range(1000):
        p = os.path.join(rng.choice(dirs), f"m{i}")
        with open(p, "wb") as f:
            f.write(os.urandom(rng.randint(1024, 16384)))
        files.append(p)
    n = len(files)
    t = time.perf_counter()
    for i in range(warmup + ops):
        if i == warmup:
            t = time.perf_counter()
        r = rng.random()
        if r < 0.25 and files:  # delete
            os.unlink(files.pop(rng.randrange(len(files))))
        elif r < 0.5:  # create, append, fsync
            p = os.path.join(rng.choice(dirs), f"m{n}")
            n += 1
            with open(p, "wb") as f:
                f.write(os.urandom(rng.randint(1024, 16384)))
                f.flush()
                os.fdatasync(f.fileno())
            files.append(p)
        elif r < 0.75 and files:  # open, append, fsync
            with open(rng.choice(files), "ab") as f:
                f.write(os.urandom(rng.randint(1024, 16384)))
                f.flush()
                os.fdatasync(f.fileno())
        elif files:  # read whole
            with open(rng.choice(files), "rb") as f:
                f.read()
    return {"ops_per_s": ops / (time.perf_counter() - t)}


def info(path):
    return run([HASHFS, "info", path])


def field(text, key):
    for line in text.splitlines():
        if line.split() and line.split()[0] == key:
            return line.split(None, 1)[1].strip()
    return "?"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--mail-worker":
        kind, d, ops, seed, warmup = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
        r = mail_mbox(d, ops, seed, warmup) if kind == "mbox" else mail_maildir(d, ops, seed, warmup)
        print(json.dumps(r))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes: a few minutes, the figures mean little")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--only", help="comma-separated workloads (default: all)")
    ap.add_argument("--targets", default="ext4,stacked,shim,hashfs", help="comma-separated targets (ext4 always runs)")
    ap.add_argument("--mount-variant", action="append", default=[], metavar="NAME=OPTS",
                    help="a stacked mount with -o OPTS, target NAME (repeatable)")
    ap.add_argument("--shim-variant", action="append", default=[], metavar="NAME=OPTS",
                    help="the shim with HASHFS_STACK_OPTIONS=OPTS, target NAME (repeatable)")
    a = ap.parse_args()
    for f in (HASHFS, SHIM):
        if not os.path.exists(f):
            sys.exit(f"{f} missing: cargo build --release --workspace")
    q = a.quick
    fio_rt = 3 if q else 10
    n16, nbig, nnosync = (20000, 60000, 100000) if q else (160000, 400000, 500000)
    mail_ops = 1000 if q else 8000
    mail_warmup = 1000 if q else 3000
    run([os.path.join(ROOT, "scripts/stacked-lower.sh"), "up", LOWER, "8G"])
    pm_dir = "/dev/shm/hashfs-stacked-bench"
    shutil.rmtree(pm_dir, ignore_errors=True)
    os.makedirs(pm_dir)
    stacked_img, alone_img, shim_img = f"{pm_dir}/stacked.img", f"{pm_dir}/alone.img", f"{pm_dir}/shim.img"
    mnt_s, mnt_h = f"{pm_dir}/mnt-stacked", f"{pm_dir}/mnt-hashfs"
    lower_s, ext4, lower_shim = f"{LOWER}/stacked-lower", f"{LOWER}/ext4", f"{LOWER}/shim-lower"
    for x in (mnt_s, mnt_h):
        os.makedirs(x)
    for x in (lower_s, ext4, lower_shim):
        shutil.rmtree(x, ignore_errors=True)
        os.makedirs(x)
    shim_env = {"LD_PRELOAD": SHIM, "HASHFS_IMAGE": shim_img, "HASHFS_LOWER": lower_shim, "HASHFS_STACK_STATUS": "1"}
    for img in (stacked_img, alone_img, shim_img):
        run([HASHFS, "mkfs", img, "--size", "4G", "--mapping", "extent-hash"])
    probe = f"{pm_dir}/probe.img"  # flush and SIMD level, as `hashfs info` of a hashfs-mapped image prints them
    run([HASHFS, "mkfs", probe, "--size", "64M"])
    img_info = info(probe)
    os.unlink(probe)
    run([HASHFS, "mount", stacked_img, mnt_s, "--lower", lower_s])
    # Variants of the stack, for an A/B of one of its options within a run (issue 58): a
    # target each, made only when chosen. stacked-pt: the kernel's passthrough for files
    # below (and no write-back cache, which the kernel refuses beside it).
    chosen_names = set(a.targets.split(","))
    mount_variants = {"stacked-pt": "passthrough=on", **dict(v.split("=", 1) for v in a.mount_variant)}
    mounted_variants = {}
    # FUSE over io_uring (`-o io_uring`) needs the kernel's switch, global: on for the run
    # when a chosen variant asks for it, put back after.
    uring_switch, uring_was = "/sys/module/fuse/parameters/enable_uring", None
    if any("io_uring" in o for n, o in mount_variants.items() if n in chosen_names):
        uring_was = open(uring_switch).read().strip()
        with open(uring_switch, "w") as f:
            f.write("1")
    for name, opts in mount_variants.items():
        if name not in chosen_names:
            continue
        img, mnt, low = f"{pm_dir}/{name}.img", f"{pm_dir}/mnt-{name}", f"{LOWER}/{name}-lower"
        os.makedirs(mnt)
        shutil.rmtree(low, ignore_errors=True)
        os.makedirs(low)
        run([HASHFS, "mkfs", img, "--size", "4G", "--mapping", "extent-hash"])
        run([HASHFS, "mount", img, mnt, "--lower", low, "-o", opts])
        mounted_variants[name] = mnt
    shim_envs, shim_dirs = {"shim": shim_env}, {}
    for name, opts in (v.split("=", 1) for v in a.shim_variant):
        if name not in chosen_names:
            continue
        img, low = f"{pm_dir}/{name}.img", f"{LOWER}/{name}-lower"
        shutil.rmtree(low, ignore_errors=True)
        os.makedirs(low)
        run([HASHFS, "mkfs", img, "--size", "4G", "--mapping", "extent-hash"])
        shim_envs[name] = {**shim_env, "HASHFS_IMAGE": img, "HASHFS_LOWER": low, "HASHFS_STACK_OPTIONS": opts}
        shim_dirs[name] = low
    run([HASHFS, "mount", alone_img, mnt_h])
    targets = {"ext4": ext4, "stacked": mnt_s, "shim": lower_shim, "hashfs": mnt_h, **mounted_variants, **shim_dirs}
    chosen = set(a.targets.split(",")) | {"ext4"}
    if chosen - set(targets):
        sys.exit(f"unknown targets {sorted(chosen - set(targets))}; choose from {list(targets)}")
    targets = {t: d for t, d in targets.items() if t in chosen}
    workloads = {
        "fsync-append": lambda d, r: fio_sync(d, "write", "1g", fio_rt),
        "fsync-overwrite": lambda d, r: fio_sync(d, "randwrite", "64m", fio_rt),
        "rocksdb-sync16": lambda d, r: db_bench(d, n16, 16, True),
        "rocksdb-sync256": lambda d, r: db_bench(d, nbig, 256, True),
        "rocksdb-sync4096": lambda d, r: db_bench(d, nbig, 4096, True),
        "rocksdb-sync65536": lambda d, r: db_bench(d, 10 * 65536, 65536, True),
        "mail-mbox": lambda d, r: mail("mbox", d, mail_ops, r, mail_warmup),
        "mail-maildir": lambda d, r: mail("maildir", d, mail_ops, r, mail_warmup),
        "rocksdb-nosync": lambda d, r: db_bench(d, nnosync, 1, False),
        "fio-rand-nosync": lambda d, r: fio_nosync(d, "256m", fio_rt),
    }
    if a.only:
        unknown = set(a.only.split(",")) - set(workloads)
        if unknown:
            sys.exit(f"unknown workloads {sorted(unknown)}; choose from {list(workloads)}")
        workloads = {w: f for w, f in workloads.items() if w in a.only.split(",")}
    results = {w: {t: [] for t in targets} for w in workloads}
    stack_status = {}
    try:
        for rnd in range(a.rounds):
            order = list(targets)
            order = order[rnd % len(order):] + order[:rnd % len(order)]
            for w, fn in workloads.items():
                for t in order:
                    d = os.path.join(targets[t], w)
                    shutil.rmtree(d, ignore_errors=True)
                    os.makedirs(d)
                    drop_caches()
                    ENV.clear()
                    if t in shim_envs:
                        ENV.update(shim_envs[t])
                    r = fn(d, rnd)
                    ENV.clear()
                    if t in shim_envs:
                        st = LAST_STDERR[0]
                        r["promotions"] = int(field(st.replace(":", " "), "promotions").split()[0]) if "promotions:" in st else 0
                        stack_status[w + " (" + t + ")"] = st[st.find("pm: "):] if "pm: " in st else st[-2000:]
                    if t == "stacked" or t in mounted_variants:
                        st = info(targets[t])
                        r["promoted_files"] = int(field(st, "promoted").split()[-1]) if "promoted files" in st else 0
                        stack_status[w if t == "stacked" else w + " (" + t + ")"] = st
                    results[w][t].append(r)
                    print(f"round {rnd} {w:18} {t:8} {json.dumps(r)}", flush=True)
                    shutil.rmtree(d, ignore_errors=True)
    finally:
        run([HASHFS, "umount", mnt_s], check=False)
        for mnt in mounted_variants.values():
            run([HASHFS, "umount", mnt], check=False)
        run([HASHFS, "umount", mnt_h], check=False)
        if uring_was is not None:
            with open(uring_switch, "w") as f:
                f.write("1" if uring_was in ("Y", "1") else "0")
    summary = {}
    for w, per in results.items():
        summary[w] = {}
        for t, rs in per.items():
            summary[w][t] = {k: statistics.median(r[k] for r in rs) for k in rs[0] if k not in ("promoted_files", "promotions")}
    page = run(["stat", "-f", "-c", "%T", pm_dir]).strip()
    # Three 4 GiB images in memory: gone once measured (a fourth, or another benchmark's,
    # would not fit beside them in this machine's 24 GiB).
    shutil.rmtree(pm_dir, ignore_errors=True)
    cfg = {"quick": q, "rounds": a.rounds, "fio_runtime_s": fio_rt, "rocksdb_num_sync16": n16,
           "rocksdb_num_other": nbig, "rocksdb_num_nosync": nnosync, "mail_ops": mail_ops, "mail_mbox_warmup": mail_warmup,
           "mail_maildir_warmup": mail_warmup,
           "cpu": open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].split("\n")[0].strip(),
           "nproc": os.cpu_count(), "kernel": os.uname().release, "flush": field(img_info, "flush"),
           "simd": field(img_info, "simd"), "pm_image_fs": page + " (/dev/shm, 4 KiB pages)",
           "lower": "ext4 on a loop device (direct I/O) over /var/tmp on " + run(["findmnt", "-n", "-o", "SOURCE", "--target", "/var/tmp"]).strip(),
           "guest_halt_poll_ns": open("/sys/module/haltpoll/parameters/guest_halt_poll_ns").read().strip()
           if os.path.exists("/sys/module/haltpoll/parameters/guest_halt_poll_ns") else "n/a",
           "commit": run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False).strip()
           + ("" if subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "HEAD", "--", "crates"]).returncode == 0 else "-dirty"),
           "date": time.strftime("%Y-%m-%d"), "command": "python3 bench/stacked.py " + " ".join(sys.argv[1:])}
    print(f"# {json.dumps(cfg)}")
    others = [t for t in targets if t != "ext4"]
    print("| workload | metric | ext4 | " + " | ".join(others) + " | " + " | ".join(f"{t} / ext4" for t in others) + " |")
    print("|---|---|---:|" + "---:|" * (2 * len(others)))
    for w, per in summary.items():
        for m in per["ext4"]:
            e = per["ext4"][m]
            vals = [per[t][m] for t in others]
            print(f"| {w} | {m} | {e:,.1f} | " + " | ".join(f"{v:,.1f}" for v in vals) + " | "
                  + " | ".join(f"{v / e if e else 0:.2f}x" for v in vals) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"config": cfg, "summary": summary, "runs": results, "stacked_status": stack_status}, f, indent=2)
        print(f"# wrote {a.json}")


if __name__ == "__main__":
    main()
