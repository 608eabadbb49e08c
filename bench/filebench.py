#!/usr/bin/env python3
"""Filebench's file server, mail server, web server and create-files personalities (not a
test) on four targets, interleaved:

  hashfs    `hashfs mount IMAGE DIR` (a fresh image on the tmpfs holding the images)
  ceiling   `hashfs-bench fuse-ceiling LOWER DIR`: a minimal FUSE passthrough over a tmpfs
            directory with hashfs mount's FUSE crate, threads and options (what FUSE allows)
  hashfs-uring, ceiling-uring
            (only when named in --targets) the same two through FUSE over io_uring (`-o
            io_uring`, `--io-uring`): requests on a ring per CPU instead of /dev/fuse; the
            script turns the kernel's enable_uring on for the run and back after
  tmpfs     a directory on that tmpfs (volatile; no FUSE)
  ext4      ext4 on a loop device (direct I/O) over a file on the disk (--disk-dir)
  shim      (only when named in --targets) the same workload with LD_PRELOAD=libhashfs_preload.so
            over a fresh image: HashFS without FUSE, the data path without system calls

Each round runs every personality on every target (the order of targets rotates), each
on a freshly made file system, with `hashfs-bench filebench` (filebench's workloads and
defaults, written in this project: filebench is not packaged here). Prints per personality
the mean ops/s of the rounds with its 95% interval and the ratios the issue asks for, and
writes JSON with every run's per-operation figures.

Usage: python3 bench/filebench.py [--rounds N] [--seconds S] [--json FILE]
         [--personalities fileserver,varmail,webserver,createfiles] [--targets ...]
         [--files-scale F] [--fuse-threads N] [--cache-timeout SECONDS]
Needs: the release build (cargo build --release --workspace; HASHFS_BIN names another), root,
/dev/fuse, mkfs.ext4 and losetup; the shim target also cargo build --release -p hashfs-preload
(HASHFS_PRELOAD names another).
"""
import argparse, json, os, shutil, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuse_io import machine, mean_ci, uring_on, uring_restore  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHFS = os.environ.get("HASHFS_BIN", os.path.join(ROOT, "target/release/hashfs"))
# The benchmarks' program, built beside it.
HASHFS_BENCH = os.path.join(os.path.dirname(HASHFS), "hashfs-bench")
PERSONALITIES = ["fileserver", "varmail", "webserver", "createfiles"]
TARGETS = ["hashfs", "ceiling", "tmpfs", "ext4"]
URING_TARGETS = ["hashfs-uring", "ceiling-uring"]
SHIM = os.environ.get("HASHFS_PRELOAD", os.path.join(ROOT, "target/release/libhashfs_preload.so"))
SHIM_PREFIX = "/hashfs-filebench"


def run(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def is_mount(d):
    d = os.path.realpath(d)
    return any(l.split()[1] == d for l in open("/proc/mounts"))


def wait_mount(d, proc=None, secs=15):
    end = time.time() + secs
    while time.time() < end:
        if is_mount(d):
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the FUSE ceiling exited: {proc.stderr.read()}")
        time.sleep(0.05)
    raise RuntimeError(f"{d} was not mounted within {secs} s")


class Target:
    """Makes a fresh file system for one run and takes it down after."""

    def __init__(self, name, work, disk_dir, image_size, disk_size, fuse_threads, cache_timeout):
        self.name, self.work, self.disk_dir, self.size = name, work, disk_dir, image_size
        self.disk_size = disk_size
        self.fuse_threads = fuse_threads
        self.cache_timeout = cache_timeout
        self.mnt = os.path.join(work, f"mnt-{name}")
        self.kind = name.removesuffix("-uring")
        self.uring = name.endswith("-uring")
        self.proc = self.loop = None

    def env(self):
        """The environment of the workload (the shim's variables for the shim target)."""
        if self.name != "shim":
            return None
        return dict(os.environ, LD_PRELOAD=SHIM, HASHFS_IMAGE=os.path.join(self.work, "shim.img"),
                    HASHFS_MOUNT=SHIM_PREFIX)

    def up(self):
        if self.name == "shim":
            run([HASHFS, "mkfs", os.path.join(self.work, "shim.img"), "--size", self.size])
            return SHIM_PREFIX  # the fresh image's root
        os.makedirs(self.mnt, exist_ok=True)
        if self.kind == "hashfs":
            img = os.path.join(self.work, "hashfs.img")
            run([HASHFS, "mkfs", img, "--size", self.size])
            opts = [f"threads={self.fuse_threads}"] if self.fuse_threads else []
            if self.cache_timeout is not None:
                opts.append(f"cache_timeout={self.cache_timeout}")
            if self.uring:
                opts.append("io_uring")
            run([HASHFS, "mount", img, self.mnt] + (["-o", ",".join(opts)] if opts else []))
        elif self.kind == "ceiling":
            lower = os.path.join(self.work, "ceiling-lower")
            os.makedirs(lower)
            cmd = [HASHFS_BENCH, "fuse-ceiling", lower, self.mnt]
            if self.fuse_threads:
                cmd += ["--threads", str(self.fuse_threads)]
            if self.cache_timeout is not None:
                cmd += ["--cache-timeout", str(self.cache_timeout)]
            if self.uring:
                cmd += ["--io-uring", "4"]
            self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
            wait_mount(self.mnt, self.proc)
        elif self.name == "ext4":
            disk = os.path.join(self.disk_dir, "hashfs-filebench-ext4.img")
            run(["truncate", "-s", self.disk_size, disk])
            self.disk = disk
            self.loop = run(["losetup", "--direct-io=on", "-f", "--show", disk]).strip()
            run(["mkfs.ext4", "-q", "-F", self.loop])
            run(["mount", self.loop, self.mnt])
        d = os.path.join(self.mnt, "fb")
        os.mkdir(d)
        return d

    def down(self):
        if self.name == "shim":
            os.unlink(os.path.join(self.work, "shim.img"))
        elif self.kind == "hashfs":
            run([HASHFS, "umount", self.mnt], check=False)
            os.unlink(os.path.join(self.work, "hashfs.img"))
        elif self.kind == "ceiling":
            run(["umount", self.mnt], check=False)
            self.proc.wait(timeout=30)
            shutil.rmtree(os.path.join(self.work, "ceiling-lower"), ignore_errors=True)
        elif self.name == "ext4":
            run(["umount", self.mnt], check=False)
            run(["losetup", "-d", self.loop], check=False)
            os.unlink(self.disk)
        else:
            shutil.rmtree(os.path.join(self.mnt, "fb"), ignore_errors=True)


def one(target, personality, a, out):
    d = target.up()
    try:
        cmd = [HASHFS_BENCH, "filebench", personality, d, "--seconds", str(a.seconds),
               "--files-scale", str(a.files_scale), "--json", out]
        r = subprocess.run(cmd, capture_output=True, text=True, env=target.env())
        if r.returncode != 0:
            raise RuntimeError(f"{personality} on {target.name} failed:\n{r.stdout}\n{r.stderr}")
        with open(out) as f:
            return json.load(f)
    finally:
        target.down()


def flowop(res, name):
    return next(f for f in res["flowops"] if f["name"] == name)


def summary(results, personalities, targets):
    shim = "shim" in targets
    # The ratios the issue names, and with the io_uring targets the same over the rings.
    pairs = [("hashfs", "ceiling"), ("hashfs", "ext4")]
    pairs += [(x, y) for x, y in [("hashfs-uring", "ceiling-uring"), ("hashfs-uring", "ext4"), ("hashfs-uring", "hashfs")]
              if x in targets and y in targets]
    pairs += [("shim", "ext4")] if shim else []
    lines = ["| personality | " + " | ".join(f"{t} ops/s" for t in targets) + " | "
             + " | ".join(f"{x} / {y}" for x, y in pairs) + " |",
             "|---|" + "---:|" * (len(targets) + len(pairs))]
    for p in personalities:
        cells, means = [], {}
        for t in targets:
            v = [r["result"]["ops_per_s"] for r in results if r["personality"] == p and r["target"] == t]
            m, ci = mean_ci(v)
            means[t] = m
            cells.append(f"{m:,.0f} ± {ci:,.0f}")
        ratio = lambda x, y: f"{means[x] / means[y]:.2f}x" if x in means and y in means else "-"  # noqa: E731
        lines.append(f"| {p} | " + " | ".join(cells) + " | " + " | ".join(ratio(x, y) for x, y in pairs) + " |")
    # The latencies the "done when" names: create and delete under 50 threads (file
    # server) and the web server's shared-log append, median of each run, mean of the rounds.
    checks = [("fileserver", "createfile1"), ("fileserver", "deletefile1"), ("fileserver", "statfile1"),
              ("varmail", "createfile2"), ("varmail", "deletefile1"), ("webserver", "appendlog"),
              ("createfiles", "createfile1")]
    uring = "hashfs-uring" in targets and "ceiling-uring" in targets
    lines += ["", "| personality | operation | " + " | ".join(f"{t} p50 ms" for t in targets) + " | hashfs / ceiling |"
              + (" hashfs-uring / ceiling-uring |" if uring else ""),
              "|---|---|" + "---:|" * (len(targets) + 1 + uring)]
    for p, op in checks:
        means = {}
        for t in targets:
            v = [flowop(r["result"], op)["p50_ms"] for r in results if r["personality"] == p and r["target"] == t]
            if v:
                means[t] = mean_ci(v)
        if not means:
            continue
        cells = [f"{means[t][0]:.3f}" if t in means else "-" for t in targets]
        ratio = lambda x, y: f"{means[x][0] / means[y][0]:.2f}x" if x in means and y in means else "-"  # noqa: E731
        lines.append(f"| {p} | {op} | " + " | ".join(cells) + f" | {ratio('hashfs', 'ceiling')} |"
                     + (f" {ratio('hashfs-uring', 'ceiling-uring')} |" if uring else ""))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--personalities", default=",".join(PERSONALITIES))
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--files-scale", type=float, default=1.0)
    ap.add_argument("--image-dir", default="/dev/shm")
    ap.add_argument("--disk-dir", default="/var/tmp")
    # The shim's web server outgrew a 4 GiB image in 30 s (ENOSPC; its shared log grows with
    # its speed, which FUSE does not limit), so its default is larger.
    ap.add_argument("--image-size", default=None,
                    help="the HashFS image (in memory, allocated whole; default 4G, the shim's 12G)")
    # ext4's web server outran a 4 GiB disk: its shared log grows by about 6 GB in 30 s.
    ap.add_argument("--disk-size", default="16G", help="ext4's disk file (sparse)")
    ap.add_argument("--fuse-threads", type=int, default=0, help="daemon threads of both FUSE targets (0: the default)")
    ap.add_argument("--cache-timeout", type=float, default=None,
                    help="seconds the kernel may cache names and attributes on both FUSE targets (default: the tools')")
    ap.add_argument("--json")
    a = ap.parse_args()
    for tool in (HASHFS, HASHFS_BENCH):
        if not os.path.exists(tool):
            sys.exit(f"{tool} missing: run cargo build --release --workspace")
    personalities, targets = a.personalities.split(","), a.targets.split(",")
    for t in targets:
        if t not in TARGETS + URING_TARGETS + ["shim"]:
            sys.exit(f"unknown target {t}: one of {', '.join(TARGETS + URING_TARGETS + ['shim'])}")
    uring_was = uring_on("the -uring targets") if any(t in URING_TARGETS for t in targets) else None
    work = os.path.join(a.image_dir, "hashfs-filebench")
    if os.path.exists(work):
        sys.exit(f"{work} exists: a run is under way, or an earlier one was interrupted (remove it)")
    os.makedirs(work)
    def image_size(t):
        return a.image_size or ("12G" if t == "shim" else "4G")

    objs = {t: Target(t, work, a.disk_dir, image_size(t), a.disk_size, a.fuse_threads, a.cache_timeout)
            for t in targets}
    results = []
    try:
        for r in range(a.rounds):
            for i, p in enumerate(personalities):
                k = (r + i) % len(targets)
                for t in targets[k:] + targets[:k]:
                    res = one(objs[t], p, a, os.path.join(work, "out.json"))
                    results.append({"round": r, "personality": p, "target": t, "result": res})
                    print(f"# round {r + 1}: {p} on {t}: {res['ops_per_s']:,.0f} ops/s", file=sys.stderr)
    finally:
        for t in objs.values():
            if is_mount(t.mnt):
                t.down()
        shutil.rmtree(work, ignore_errors=True)
        uring_restore(uring_was)
    cfg = {"rounds": a.rounds, "seconds": a.seconds, "files_scale": a.files_scale,
           "image_size": a.image_size or {t: image_size(t) for t in targets},
           "image_dir": a.image_dir, "disk_dir": a.disk_dir, "disk_size": a.disk_size, "fuse_threads": a.fuse_threads or "default",
           "cache_timeout": a.cache_timeout if a.cache_timeout is not None else "default",
           "ext4": "mkfs.ext4 defaults on a loop device with direct I/O over a file in disk_dir",
           "commit": run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False).strip(),
           "date": time.strftime("%Y-%m-%d %H:%M"), **machine(a.image_dir)}
    print(f"# bench/filebench.py: {json.dumps(cfg)}")
    print(summary(results, personalities, targets))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"config": cfg, "results": results}, fh, indent=1)
        print(f"# wrote {a.json}")


if __name__ == "__main__":
    main()
