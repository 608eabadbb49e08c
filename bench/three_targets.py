"""What the drivers that compare the shim, the FUSE mount and tmpfs in one run share
(`pgbench.py`, `redis_aof.py`, `sqlite_writers.py`): the targets' order per round, the
summary with its ratios computed within each round, and the JSON document."""
import json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuse_io import machine, mean_ci  # noqa: E402 (the same statistics and machine stamp)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHFS = os.path.join(ROOT, "target/release/hashfs")
SHIM = os.path.join(ROOT, "target/release/libhashfs_preload.so")
TARGETS = ["shim", "fuse", "tmpfs"]


def rotated(targets, rnd):
    """Round `rnd`'s order: the targets rotated, so that none always runs first."""
    return targets[rnd % len(targets):] + targets[:rnd % len(targets)]


def summarize(results, targets, names):
    """Per name: each target's mean with its 95% interval, and the ratios (the shim's and
    the mount's to tmpfs, the shim's to the mount) computed within each round; printed."""
    summary = {}
    for n in names:
        row = {t: dict(zip(("mean", "ci95"), mean_ci(results[t][n]))) for t in targets}
        for x in targets:
            for y in targets:
                if x != y and x != "tmpfs" and (y == "tmpfs" or x == "shim"):
                    ratios = [p / q for p, q in zip(results[x][n], results[y][n])]
                    row[f"{x}_vs_{y}"] = dict(zip(("mean", "ci95"), mean_ci(ratios)))
        summary[n] = row
        print(f"{n}: " + "  ".join(f"{k} {v['mean']:.2f} ± {v['ci95']:.2f}" if "_vs_" in k
                                   else f"{k} {v['mean']:.0f} ± {v['ci95']:.0f}" for k, v in row.items()))
    return summary


def write_json(path, driver, config, figures_key, results, summary):
    """The run's JSON: its command, machine, commit, configuration and figures."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    doc = {"command": f"python3 bench/{driver} " + " ".join(sys.argv[1:]), "machine": machine("/dev/shm"),
           "commit": commit, "config": config, figures_key: results, "summary": summary}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
