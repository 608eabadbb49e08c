"""What the drivers that compare the shim, the FUSE mount and tmpfs in one run share
(`pgbench.py`, `redis_aof.py`, `sqlite_writers.py`): the targets' order per round, the
summary with its ratios computed within each round, and the JSON document; and the table
of ratios to the first target that the A/Bs of shim builds print (`shim_ab.py`,
`shim_files.py`)."""
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


def builds_in_rounds(targets, rounds, names, run_one, unit=""):
    """Runs `run_one(name, path)` (a figure per entry of `names`) for each (name, path) of
    `targets` in every round, in `rotated` order, printing each run's figures; returns
    {name: {figure name: [one value per round]}} (for `ratio_table`)."""
    res = {name: {n: [] for n in names} for name, _ in targets}
    for r in range(rounds):
        for name, path in rotated(targets, r):
            values = run_one(name, path)
            for n, v in zip(names, values):
                res[name][n].append(v)
            print(f"round {r + 1} {name:12} " + "  ".join(f"{n} {v:7.2f}{unit}" for n, v in zip(names, values)),
                  flush=True)
    return res


def write_builds_json(path, where, targets, rounds, config, summary):
    """`builds_in_rounds`' figures as JSON at `path`: the machine (its images in `where`),
    the command, each build's library, the rounds and `config`'s other settings."""
    with open(path, "w") as f:
        json.dump({"machine": machine(where), "command": " ".join(sys.argv),
                   "shims": {name: p for name, p in targets if p}, "rounds": rounds, **config,
                   "results": summary}, f, indent=1)


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


def ratio_table(res, names, rows, values_key, label, label_width, cell_width, cell):
    """Per row and target name: the values (under `values_key`), their mean with its 95%
    interval, and their ratios to the first name's within each round; printed as a table
    whose cells are `cell(mean, ci95, ratio_mean)`, and returned by name, then row."""
    base = names[0]
    summary = {}
    print(f"\n{label:{label_width}} " + " ".join(f"{n:>{cell_width}}" for n in names))
    for row in rows:
        cells = []
        for name in names:
            m, h = mean_ci(res[name][row])
            ratios = [x / y for x, y in zip(res[name][row], res[base][row])]
            rm, rh = mean_ci(ratios)
            summary.setdefault(name, {})[row] = {values_key: res[name][row], "mean": m, "ci95": h,
                                                 "ratio_to_" + base: ratios, "ratio_mean": rm, "ratio_ci95": rh}
            cells.append(cell(m, h, rm))
        print(f"{row:{label_width}} " + " ".join(f"{c:>{cell_width}}" for c in cells))
    return summary


def write_json(path, driver, config, figures_key, results, summary):
    """The run's JSON: its command, machine, commit, configuration and figures."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    doc = {"command": f"python3 bench/{driver} " + " ".join(sys.argv[1:]), "machine": machine("/dev/shm"),
           "commit": commit, "config": config, figures_key: results, "summary": summary}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
