"""HashFS's placements on an aged image (issue 15, item 2): for each placement (and the regions
placement at several target loads), a fresh 1 GiB image made with one hash seed (`hashfs
mkfs --seed 3`: the table places blocks alike on every run) is aged to 75% full with one
seed (`hashfs-bench age --to 75% --churn 1 --seed 7`), then `hashfs info` reports the free whole
2 MiB groups, the large files' chunks on groups, and the small keys' probe lengths and
tombstones. Counts, not timings (the aging's own time is printed for scale only).

    python3 bench/winefs/placement_aging.py [--json bench/results/winefs/placement-aging.json]
"""
import argparse, json, os, re, subprocess, sys, tempfile, time

HASHFS = "./target/release/hashfs"
HASHFS_BENCH = "./target/release/hashfs-bench"
CONFIGS = [("paper", None), ("grouped", None), ("regions", "85%"), ("regions", "80%"), ("regions", "75%")]


def run(*args):
    program = HASHFS_BENCH if args[0] == "age" else HASHFS
    return subprocess.run([program, *args], check=True, capture_output=True, text=True).stdout


def one(placement, load, d):
    img = os.path.join(d, "aging.img")
    if os.path.exists(img):
        os.remove(img)
    run("mkfs", img, "--size", "1G", "--seed", "3", "--placement", placement, *(["--region-load", load] if load else []))
    t = time.monotonic()
    aged = run("age", img, "--to", "75%", "--churn", "1", "--seed", "7")
    secs = time.monotonic() - t
    info = run("info", img)
    os.remove(img)
    num = lambda pat, text: float(re.search(pat, text).group(1))  # noqa: E731
    return {
        "placement": placement,
        "region_load": load,
        "aging_s": round(secs, 2),
        "full_percent": num(r"([\d.]+)% full", aged),
        "free_groups": int(num(r"aligned 2 MiB\s+(\d+) free", info)),
        "chunks_on_groups": re.search(r"aligned extent \(2 MiB pages when mapped\): (\d+ of \d+)", aged).group(1),
        "open_groups": int(num(r"\nregion\s+(\d+) groups", info)) if "\nregion " in info else None,
        "hit_probes_mean": num(r"probe length\s+([\d.]+) mean", info),
        "hit_probes_max": int(num(r"mean, (\d+) max", info)),
        "miss_probes_mean": num(r"\(lookups that hit\); ([\d.]+) mean", info),
        "tombstones": int(num(r"\(misses\); (\d+) tombstones", info)),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="bench/results/winefs/placement-aging.json")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "--workspace"], check=True)
    rows = []
    with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
        for placement, load in CONFIGS:
            r = one(placement, load, d)
            rows.append(r)
            print(json.dumps(r))
    # The code measured (as the binary's own build script counts it: docs and results do not).
    git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    commit = git("rev-parse", "--short", "HEAD") + ("-dirty" if git("status", "--porcelain", "--", "crates", "Cargo.toml", "Cargo.lock") else "")
    doc = {"command": "python3 bench/winefs/placement_aging.py", "git_commit": commit,
           "image": "1 GiB on /dev/shm, made with hashfs mkfs --seed 3, aged with hashfs-bench age --to 75% --churn 1 --seed 7", "rows": rows}
    json.dump(doc, open(a.json, "w"), indent=1)
    print("wrote", a.json, file=sys.stderr)


if __name__ == "__main__":
    main()
