#!/usr/bin/env python3
"""Plots of `hashfs-bench paper` and docs/results.md, from the JSON files it wrote.

    python3 bench/plot.py [--results bench/results/paper/run1] [--rerun bench/results/paper/run2] [--docs docs]

Writes docs/results/<experiment>.png and docs/results.md. Every number in results.md is
computed here from the JSON files; each paragraph states the paper's claim, what this run
measured, and whether it agrees. Needs matplotlib (scripts/bench-paper.sh installs it).
"""

import argparse
import json
import math
import os
import sys
import tempfile

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("bench/plot.py needs matplotlib: apt-get install python3-matplotlib (or pip install matplotlib)")

MAPPINGS = ["hashfs", "cuckoo", "extent-hash", "extent-tree", "extent-tree-cached", "radix-tree"]
COLORS = {
    "hashfs": "#d62728",
    "cuckoo": "#ff7f0e",
    "extent-hash": "#9467bd",
    "extent-hash+fast": "#8c564b",
    "extent-tree": "#1f77b4",
    "extent-tree-cached": "#17becf",
    "radix-tree": "#2ca02c",
}
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_ctfs import atomic, large, micro, pswap, ycsb  # noqa: E402
from plot_untorn import untorn  # noqa: E402
from plot_winefs import wine_2mib, wine_aging  # noqa: E402
from plot_stacked import stacked_section  # noqa: E402
import estimator  # noqa: E402
import run_variance  # noqa: E402

GLOBAL = ["hashfs", "cuckoo"]
TREES = ["extent-tree", "radix-tree"]
OPS = ["seq_read", "rand_read", "append"]
# Panels of the share of the IO latency spent in mapping, in percent.
SHARE = {"metric": "map_share", "scale": 100, "ylabel": "% of IO latency in mapping"}


# How a point's images are summarized (bench/estimator.py): "trimmed" or "mean".
ESTIMATOR = ["trimmed"]


def load(results):
    out = {}
    for name in sorted(os.listdir(results)):
        if name.endswith(".json"):
            with open(os.path.join(results, name)) as f:
                d = json.load(f)
            estimator.apply(d, ESTIMATOR[0])
            out[d["experiment"]] = d
    return out


def pts(d, **kw):
    return [p for p in d["points"] if all(p.get(k) == v for k, v in kw.items()) and "error" not in p]


def val(d, metric="map_cycles", **kw):
    """(mean, ci95) of the one point matching kw, or (nan, nan)."""
    p = pts(d, **kw)
    if not p:
        return (math.nan, math.nan)
    f = p[0].get(metric) or {}
    nan = lambda v: math.nan if v is None else v  # noqa: E731 (JSON has null for NaN)
    return (nan(f.get("mean")), nan(f.get("ci95")))


def m(d, metric="map_cycles", **kw):
    return val(d, metric, **kw)[0]


def grouped(ax, d, groups, group_key, series, metric="map_cycles", scale=1.0, log=False, fixed=None, ylabel=None):
    fixed = fixed or {}
    n = len(series)
    width = 0.8 / max(n, 1)
    for i, s in enumerate(series):
        means, errs = [], []
        for g in groups:
            mean, ci = val(d, metric, **{group_key: g, "mapping": s, **fixed})
            means.append(mean * scale)
            errs.append(0 if math.isnan(ci) else ci * scale)
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(groups))]
        ax.bar(xs, means, width, yerr=errs, capsize=2, label=s, color=COLORS.get(s))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel or ("cycles" if metric == "map_cycles" else metric))
    ax.grid(axis="y", alpha=0.3)


def lines(ax, d, xs, x_key, series, metric="map_cycles", scale=1.0, log=False, fixed=None, ylabel=None):
    fixed = fixed or {}
    for s in series:
        ys, es = [], []
        for x in xs:
            mean, ci = val(d, metric, **{x_key: x, "mapping": s, **fixed})
            ys.append(mean * scale)
            es.append(0 if math.isnan(ci) else ci * scale)
        ax.errorbar(range(len(xs)), ys, yerr=es, marker="o", capsize=2, label=s, color=COLORS.get(s))
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels(xs)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel or "cycles")
    ax.grid(alpha=0.3)


def present(d, candidates):
    have = {p["mapping"] for p in d["points"]}
    return [c for c in candidates if c in have]


def xs_of(d):
    seen = []
    for p in d["points"]:
        if p["x"] not in seen:
            seen.append(p["x"])
    return seen


def fmt(x, digits=0):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:,.{digits}f}"


def ratio(a, b):
    return a / b if b and not math.isnan(a) and not math.isnan(b) and b > 0 else math.nan


# (section title, claim, measured figure or "", verdict) of every check, for the summary at
# the top of results.md; the claim text names a check across runs.
SUMMARY = []
SECTION = [""]

# Verdicts (the rules are written out in bench/results-intro.md, "How a verdict is reached").
AGREES, DIFFERS, INCONCLUSIVE = "agrees", "differs", "inconclusive"
INF = math.inf
# Claims of "unaffected", "static" or "the only major difference" give no number: such a
# ratio must lie within this factor of 1 (our bound, stated with each such check).
SAME = 1.10
# A single factor from a paper (15x, 906x) is matched within this factor: the papers report
# them to two significant figures at best, from runs on other hardware.
FACTOR = 1.25


def rint(a, b):
    """The ratio of two points A/B ((mean, ci95) each) with its 95% interval: the interval of
    log(A/B) is log(A/B) ± sqrt((ca/A)^2 + (cb/B)^2) (each ci95 a half-width; delta method)."""
    (ma, ca), (mb, cb) = a, b
    if any(math.isnan(v) for v in (ma, mb)) or ma <= 0 or mb <= 0:
        return (math.nan, math.nan, math.nan)
    ca, cb = (0.0 if math.isnan(ca) else ca), (0.0 if math.isnan(cb) else cb)
    w = math.sqrt((ca / ma) ** 2 + (cb / mb) ** 2)
    r = ma / mb
    return (r, r * math.exp(-w), r * math.exp(w))


def within(iv, lo, hi):
    """Rule R1: agrees when the ratio's whole 95% interval lies in [lo, hi], differs when it
    lies wholly outside, inconclusive when it straddles a bound (or is unknown)."""
    r, a, b = iv
    if math.isnan(r):
        return INCONCLUSIVE
    if lo <= a and b <= hi:
        return AGREES
    if b < lo or a > hi:
        return DIFFERS
    return INCONCLUSIVE


def all_of(vs):
    """Rule R2 (a claim about every member of a set): differs if any member differs, agrees
    if every member agrees, else inconclusive."""
    vs = list(vs)
    if any(v == DIFFERS for v in vs):
        return DIFFERS
    if vs and all(v == AGREES for v in vs):
        return AGREES
    return INCONCLUSIVE


def ivfmt(iv, digits=2):
    r, a, b = iv
    return f"{fmt(r, digits)}x [{fmt(a, digits)}, {fmt(b, digits)}]"


def verdict(v, claim=None, measured=""):
    """The word for a check; with `claim`, also a row of the summary."""
    if claim:
        SUMMARY.append((SECTION[0], claim, measured, v))
    return f"**{v}**"


def table(d, rows, cols, row_key, col_key, fixed, metric="map_cycles", scale=1.0, digits=0, suffix=""):
    out = ["| | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for r in rows:
        cells = []
        for c in cols:
            mean, ci = val(d, metric, **{row_key: r, col_key: c, **fixed})
            if math.isnan(mean):
                cells.append("n/a")
            else:
                cells.append(f"{mean * scale:,.{digits}f}{suffix} ± {ci * scale:,.{digits}f}")
        out.append(f"| {r} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def save(fig, axes, title, png):
    """Legend on the first panel, title, and the PNG."""
    if axes is not None:
        axes[0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def op_figure(d, png, title, draw, series, xs, ops=OPS, label="{op} (cold)", log=False, xlabel=None, **kw):
    """One panel per operation, each drawing `series` over `xs` with `draw` (grouped or
    lines); `log` is a bool or a function of the operation."""
    fig, axes = plt.subplots(1, len(ops), figsize=(14, 4) if len(ops) > 2 else (12, 4))
    for ax, op in zip(axes, ops):
        draw(ax, d, xs, "x", series, log=log(op) if callable(log) else log, fixed={"op": op}, **kw)
        ax.set_title(label.format(op=op))
        if xlabel:
            ax.set_xlabel(xlabel)
    save(fig, axes, title, png)


def op_tables(d, heading, rows, xs, ops, **kw):
    """One table per operation: rows by mapping, columns by x."""
    return "".join(f"\n{op}{heading}:\n\n" + table(d, rows, xs, "mapping", "x", {"op": op}, **kw) + "\n" for op in ops)


def images_note(d):
    """What a run's confidence intervals cover: several images, or one image's trials."""
    n = d.get("images") or d["config"].get("images", 1)
    if n > 1:
        return f"the confidence intervals cover the variation between {n} images per point."
    return "far more than the confidence intervals, which cover the variation between trials on one image only."


def variation(data):
    """The same cold points measured twice in one run (§4.1 and the 4 KiB column of §4.4:
    same file size, layout score and image size, each on its own freshly made image)."""
    loc, io = data.get("locality"), data.get("iosize")
    if not loc or not io:
        return ""
    x = xs_of(loc)[0]
    if loc["config"].get("file_bytes") != io["config"].get("file_bytes"):
        return ""
    small = xs_of(io)[0]
    maps = present(loc, MAPPINGS)
    rows, worst = [], 1.0
    for k in maps:
        cells = []
        for op in OPS:
            a, b = m(loc, op=op, cache="cold", mapping=k), m(io, op=op, x=small, mapping=k)
            r = ratio(a, b)
            if not math.isnan(r):
                worst = max(worst, r, 1 / r)
            cells.append(f"{fmt(a)} / {fmt(b)}")
        rows.append(f"| {k} | " + " | ".join(cells) + " |")
    return (
        f"""
## Run-to-run variation

The cold single-block points of §4.1 and the {small} points of §4.4 have the same
configuration ({x} file, same layout score and image size), each measured on its own
freshly formatted image in this run. Their means (§4.1 / §4.4, cycles) differ by up to
{fmt(worst, 1)}x; {images_note(loc)} The cold figures depend on where each image lands in physical
memory (cache sets, DRAM rows, and on this virtual machine the host's mapping of guest
memory), so a verdict whose margin is smaller than this factor can change between runs.

| | """ + " | ".join(OPS) + " |\n|---" * 1 + "|---" * len(OPS) + "|\n" + "\n".join(rows) + "\n"
    )


def mount_note(mount):
    """How the images were mapped, from the `type options` of their mount."""
    if not mount:
        return ""
    fstype, _, opts = mount.partition(" ")
    opts = opts.split(",")
    huge = fstype == "hugetlbfs" or "dax" in opts or any(o in ("huge=always", "huge=within_size") for o in opts)
    pages = "2 MiB pages" if huge else "4 KiB pages"
    shown = ", ".join(o for o in opts if o.startswith("huge=") or o == "dax")
    return f" ({fstype}{', ' + shown if shown else ''}: {pages})"


def load_discussion(path):
    """The '## <experiment>' sections of the hand-written discussion, each as text to append."""
    if not os.path.exists(path):
        return {}
    out, key = {}, None
    with open(path) as f:
        for line in f:
            if line.startswith("## "):
                key = line[3:].strip()
                out[key] = ""
            elif key:
                out[key] += line
    return {k: f"\n*Discussion (hand-written, `{path}`):*\n\n" + v.strip() + "\n" for k, v in out.items() if v.strip()}


# ---- experiments: each draws its figure and returns its section of results.md ----


def locality(d, png):
    maps = present(d, MAPPINGS)
    x = xs_of(d)[0]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, cache in zip(axes, ["cold", "hot"]):
        grouped(ax, d, OPS, "op", maps, log=True, fixed={"cache": cache})
        ax.set_title(f"{cache} ({x} file)")
    save(fig, axes, "Locality: mapping latency (HashFS §4.1, Fig. 5)", png)

    glob, trees = [g for g in GLOBAL if g in maps], [t for t in TREES if t in maps]
    pairs = {(op, g, t): rint(val(d, op=op, cache="cold", mapping=t), val(d, op=op, cache="cold", mapping=g))
             for op in ["seq_read", "rand_read"] for g in glob for t in trees}
    faster = all_of(within(iv, 1, INF) for iv in pairs.values())
    top = max(pairs, key=lambda k: pairs[k][0]) if pairs else None
    top_iv = pairs[top] if top else (math.nan,) * 3
    up_to = within(top_iv, 15 / FACTOR, 15 * FACTOR)
    h = val(d, op="append", cache="cold", mapping="hashfs")
    others = [k for k in ["cuckoo", "extent-tree", "radix-tree"] if k in maps]
    ins = {k: rint(val(d, op="append", cache="cold", mapping=k), h) for k in others}
    cheapest = all_of(within(iv, 1, INF) for iv in ins.values())
    factor = all_of(within(iv, 14, 20) for iv in ins.values())
    hot = [val(d, op=op, cache="hot", mapping=k) for op in ["seq_read", "rand_read"] for k in maps]
    hot_max = max((mn for mn, _ in hot), default=math.nan)
    hot_v = DIFFERS if any(mn - ci > 2000 for mn, ci in hot) else AGREES if all(mn + ci < 2000 for mn, ci in hot) else INCONCLUSIVE
    text = f"""
Claim (HashFS §4.1): cold, "global file mapping is up to 15x faster than per-file mapping";
for cold inserts "HashFS ... is between 14-20x faster than all other file-mapping
structures"; hot operations are cheap for every structure. Global: {', '.join(glob)}; per-file:
{', '.join(trees)}; "all other" structures of the paper: {', '.join(others)}.

Measured ({x} file, layout score {d['config']['layout_score']}), cold reads, per-file over global
(ratio [95% interval]): """ + "; ".join(f"{op} {t}/{g} {ivfmt(iv)}" for (op, g, t), iv in pairs.items()) + f""".
Every global table faster than every per-file tree, R2 over R1 with (1, ∞): {verdict(faster, 'global tables faster than per-file trees (cold reads)')}.
The largest factor, {ivfmt(top_iv, 1)}, against 15x (R1 with [15/{FACTOR}, 15·{FACTOR}]): {verdict(up_to, 'global up to 15x faster cold', f'{fmt(top_iv[0], 1)}x')}.
Cold appends, other over HashFS ({fmt(h[0])} cycles): """ + "; ".join(f"{k} {ivfmt(iv, 1)}" for k, iv in ins.items()) + f""".
HashFS the cheapest insert, (1, ∞) for each: {verdict(cheapest, 'HashFS the cheapest cold insert')}; 14-20x, [14, 20] for each: {verdict(factor, 'HashFS inserts 14-20x faster cold')}.
Hot reads cost at most {fmt(hot_max)} cycles; every hot read below 2,000 cycles (our bound: the paper gives
no number), by its interval: {verdict(hot_v, 'hot reads cheap in every structure')}.
"""
    text += "\n" + table(d, maps, OPS, "mapping", "op", {"cache": "cold"}) + "\n"
    text += "\nCold mapping cycles (mean ± 95% CI). Hot:\n\n" + table(d, maps, OPS, "mapping", "op", {"cache": "hot"}) + "\n"
    return text


def fragmentation(d, png):
    maps = present(d, MAPPINGS)
    groups = xs_of(d)
    op_figure(d, png, "Fragmentation: layout score 1.0 vs 0.7 (HashFS §4.2, Fig. 6)", grouped, maps, groups, log=lambda op: op == "append")
    a, b = groups[0], groups[-1]
    chg = {k: rint(val(d, op="rand_read", x=b, mapping=k), val(d, op="rand_read", x=a, mapping=k)) for k in maps}
    ins = {k: rint(val(d, op="append", x=b, mapping=k), val(d, op="append", x=a, mapping=k)) for k in maps}
    extent_trees = [k for k in ["extent-tree", "extent-tree-cached"] if k in maps]
    others = [k for k in maps if k not in extent_trees]
    hurt = all_of([within(chg[k], 1, INF) for k in extent_trees] + [within(chg[k], 1 / SAME, SAME) for k in others])
    allocators = [k for k in maps if k != "hashfs"]
    text = f"""
Claim (HashFS §4.2): "the only major difference is the performance of the extent trees";
the other structures are unaffected for reads; for insertions the allocator slows down,
"giving HashFS an advantage"; HashFS is unaffected. Extent trees: {', '.join(extent_trees)}; the
others: {', '.join(others)}; allocator-based: {', '.join(allocators)}.

Measured, cold random read, {b} over {a} (ratio [95% interval]): """ + "; ".join(f"{k} {ivfmt(iv)}" for k, iv in chg.items()) + f""".
Extent trees slower ((1, ∞)) and every other structure unaffected (within {SAME}x either way, our bound:
the paper gives no number): {verdict(hurt, 'fragmentation hurts the extent trees, not the others')}.
Appends, {b} over {a}: """ + "; ".join(f"{k} {ivfmt(iv)}" for k, iv in ins.items()) + f""".
HashFS appends unaffected (within {SAME}x): {verdict(within(ins.get('hashfs', (math.nan,) * 3), 1 / SAME, SAME), 'HashFS inserts unaffected by fragmentation')}; every
allocator-based mapping's appends slower at {b} ((1, ∞)): {verdict(all_of(within(ins[k], 1, INF) for k in allocators), 'allocator-based inserts slower when fragmented')}.
"""
    text += op_tables(d, " (cold, cycles)", maps, groups, OPS)
    return text


def filesize(d, png):
    maps = present(d, MAPPINGS)
    xs = xs_of(d)
    op_figure(d, png, "File size (HashFS §4.3, Fig. 7)", lines, maps, xs, log=True)
    a, b = xs[0], xs[-1]
    g = {k: rint(val(d, op="rand_read", x=b, mapping=k), val(d, op="rand_read", x=a, mapping=k)) for k in maps}
    trees = [t for t in TREES if t in g]
    tables = [k for k in GLOBAL if k in g]
    text = f"""
Claim (HashFS §4.3): per-file trees get slower as files grow (34% for random reads from
4 KB to 4 GB); "the mapping overhead for the hash tables ... is static". Per-file trees:
{', '.join(trees)}; hash tables: {', '.join(tables)}.

Measured, cold random read, {b} over {a} (ratio [95% interval]): """ + "; ".join(f"{k} {ivfmt(iv)}" for k, iv in g.items()) + f""".
Trees slower ((1, ∞) for each): {verdict(all_of(within(g[t], 1, INF) for t in trees), 'per-file trees slower for larger files')}; hash tables static (within {SAME}x, our
bound: the paper gives no number): {verdict(all_of(within(g[k], 1 / SAME, SAME) for k in tables), 'hash-table mapping cost independent of file size')}.
"""
    text += op_tables(d, " (cold, cycles)", maps, xs, OPS)
    return text


def iosize(d, png):
    maps = present(d, MAPPINGS)
    xs = xs_of(d)
    op_figure(d, png, "IO size: share of the IO path spent in mapping (HashFS §4.4, Fig. 8)", grouped, maps, xs, **SHARE)
    big, small = xs[-1], xs[0]
    shares = {op: {k: m(d, "map_share", op=op, x=big, mapping=k) for k in maps} for op in ["seq_read", "rand_read"]}
    best = {op: min(v, key=v.get) for op, v in shares.items()}
    radix_share = shares["seq_read"].get("radix-tree", math.nan)
    rivals = [k for k in maps if k != "radix-tree"]
    radix_vs = {(op, k): rint(val(d, op=op, x=big, mapping="radix-tree"), val(d, op=op, x=big, mapping=k)) for op in ["seq_read", "rand_read"] for k in rivals}
    radix_best = all_of(within(iv, 0, 1) for iv in radix_vs.values()) if "radix-tree" in maps else INCONCLUSIVE
    drop = {k: rint(val(d, "map_share", op="rand_read", x=big, mapping=k), val(d, "map_share", op="rand_read", x=small, mapping=k)) for k in maps}
    text = f"""
Claim (HashFS §4.4): the share of the IO path in mapping drops as IO grows; at 1 MB "radix
tree mapping takes only 3% of the IO path for reads" and "radix trees perform best for
both sequential and random reads"; HashFS has the lowest insertion time.

Measured at {big}: lowest mapping share for sequential reads: {best['seq_read']}
({fmt(100 * shares['seq_read'][best['seq_read']], 1)}%), for random reads: {best['rand_read']}
({fmt(100 * shares['rand_read'][best['rand_read']], 1)}%); radix tree {fmt(100 * radix_share, 1)}% for sequential reads.
Radix tree over each other mapping, mapping cycles at {big}: """ + "; ".join(f"{op} /{k} {ivfmt(iv)}" for (op, k), iv in radix_vs.items()) + f""".
Radix tree faster than every other mapping for both ([0, 1] for each): {verdict(radix_best, 'radix tree best for 1 MiB reads')}.
The share falls from {small} to {big} for every mapping ([0, 1] for each; random reads, ratio of shares: """ + "; ".join(f"{k} {ivfmt(iv)}" for k, iv in drop.items()) + f"""): {verdict(all_of(within(iv, 0, 1) for iv in drop.values()), 'mapping share falls as IO grows')}.
"""
    text += op_tables(d, ", % of the IO latency in mapping (cold)", maps, xs, OPS, metric="map_share", scale=100, digits=1, suffix="%")
    return text


def utilization(d, png):
    maps = present(d, MAPPINGS)
    xs = xs_of(d)
    op_figure(d, png, "Space utilization (HashFS §4.5, Fig. 9)", grouped, maps, xs, **SHARE)
    hi, lo = xs[-1], xs[0]
    r = {lvl: {op: rint(val(d, op=op, x=lvl, mapping="hashfs"), val(d, op=op, x=lvl, mapping="cuckoo")) for op in OPS} for lvl in xs}
    errs = [p for p in d["points"] if "error" in p]
    glob, trees = [g for g in GLOBAL if g in maps], [t for t in TREES if t in maps]
    beat = all_of(within(rint(val(d, op="rand_read", x=hi, mapping=t), val(d, op="rand_read", x=hi, mapping=g)), 1, INF) for g in glob for t in trees)
    text = f"""
Claim (HashFS §4.5): at 80% full HashFS and cuckoo hashing read within ±3%; at 95%
"HashFS incurs between 12-14% more latency for reads than the global cuckoo hash table,
and has equivalent performance for insertions"; both beat the per-file trees ({', '.join(trees)}).

Measured, HashFS over cuckoo mapping cycles (cold, ratio [95% interval]): at {lo} """ + "; ".join(f"{op} {ivfmt(iv)}" for op, iv in r[lo].items()) + f"""; at {hi} """ + "; ".join(f"{op} {ivfmt(iv)}" for op, iv in r[hi].items()) + f""".
HashFS and cuckoo random reads equivalent at {lo} ([1/1.03, 1.03]): {verdict(within(r[lo]['rand_read'], 1 / 1.03, 1.03), 'HashFS = cuckoo reads at 80% full')}.
HashFS random reads slower than cuckoo at {hi} ((1, ∞)): {verdict(within(r[hi]['rand_read'], 1, INF), 'HashFS reads slower than cuckoo at 95% full')}; by 12-14% ([1.12, 1.14]):
{verdict(within(r[hi]['rand_read'], 1.12, 1.14), 'HashFS reads 12-14% slower than cuckoo at 95% full', f"{fmt(100 * (r[hi]['rand_read'][0] - 1), 0)}%")}. Every global table below every per-file tree for random reads at {hi}
((1, ∞) for each tree over each table): {verdict(beat, 'global tables beat per-file trees at 95% full')}.
"""
    if errs:
        text += "\nPoints that could not be measured: " + "; ".join(f"{p['mapping']} at {p['x']}: {p['error']}" for p in errs[:: len(OPS)]) + "\n"
    text += op_tables(d, ", mapping cycles (cold)", maps, xs, OPS)
    return text


def concurrency(d, png):
    maps = present(d, MAPPINGS)
    xs = xs_of(d)
    title = f"Concurrency: threads reading and appending one file (HashFS §4.6, Fig. 10; {d['machine']['cores']} cores)"
    op_figure(d, png, title, lines, maps, xs, ops=["rand_read", "append"], label="{op}", log=True)
    a, b = xs[0], xs[-1]
    growth = {op: {k: rint(val(d, op=op, x=b, mapping=k), val(d, op=op, x=a, mapping=k)) for k in maps} for op in ["rand_read", "append"]}

    def order(x, op, p, q):
        """'<' or '>' when p's and q's intervals are apart at x, else '?'."""
        return {AGREES: "<", DIFFERS: ">"}.get(within(rint(val(d, op=op, x=x, mapping=p), val(d, op=op, x=x, mapping=q)), 0, 1), "?")

    def rank(op):
        """Per pair: a significant order at both counts that is the same agrees, opposite
        differs, anything else is inconclusive (R2 over the pairs)."""
        out, flips = [], []
        for i, p in enumerate(maps):
            for q in maps[i + 1 :]:
                oa, ob = order(a, op, p, q), order(b, op, p, q)
                if "?" in (oa, ob):
                    out.append(INCONCLUSIVE)
                elif oa == ob:
                    out.append(AGREES)
                else:
                    out.append(DIFFERS)
                    flips.append((p, q) if oa == "<" else (q, p))
        return all_of(out), flips

    ranks = {op: rank(op) for op in ["rand_read", "append"]}
    text = f"""
Claim (HashFS §4.6): from 1 to 8 threads mapping latency rises "slightly (up to 13% for
extent trees)", and "the ranking among approaches does not change".

Measured ({d['scale_note']}), {b} over {a} (ratio [95% interval]): reads """ + "; ".join(f"{k} {ivfmt(iv)}" for k, iv in growth["rand_read"].items()) + """;
appends """ + "; ".join(f"{k} {ivfmt(iv)}" for k, iv in growth["append"].items()) + f""".
Ranking unchanged (every pair significantly ordered the same way at {a} and {b} agrees, the opposite
way differs, not significant at either is inconclusive): reads {verdict(ranks['rand_read'][0], 'ranking unchanged by threads (reads)')},
appends {verdict(ranks['append'][0], 'ranking unchanged by threads (appends)')}.""" + "".join(
        f" Swapped for {op}: " + ", ".join(f"{p} before {q} at {a}" for p, q in v[1]) + "." for op, v in ranks.items() if v[1]
    ) + f"""
Reads rise at most 13% ([0, 1.13] for each mapping): {verdict(all_of(within(iv, 0, 1.13) for iv in growth['rand_read'].values()), 'latency rises at most 13% with threads (reads)')}.
"""
    text += op_tables(d, ", mapping cycles", maps, xs, ["rand_read", "append"])
    return text


def pagecache(d, png):
    maps = present(d, ["extent-tree", "extent-tree-cached"])
    fig, ax = plt.subplots(figsize=(6, 4))
    grouped(ax, d, ["rand_read", "append"], "op", maps, log=True)
    ax.legend(fontsize=8)
    ax.set_title(f"Page caching (HashFS §4.7, Fig. 11), {xs_of(d)[0]}")
    save(fig, None, None, png)
    r = {op: rint(val(d, op=op, mapping="extent-tree-cached"), val(d, op=op, mapping="extent-tree")) for op in ["rand_read", "append"]}
    text = f"""
Claim (HashFS §4.7): reading extent-tree nodes through a DRAM page cache is slower than
reading them in place on PM, for reads ("the dynamic allocation overhead of the page cache
is not amortized") and for inserts.

Measured, page-cached over in-place (ratio [95% interval]): reads {ivfmt(r['rand_read'])}, appends {ivfmt(r['append'])}.
Page cache slower for reads ((1, ∞)): {verdict(within(r['rand_read'], 1, INF), 'page cache slower (reads)')}; for appends: {verdict(within(r['append'], 1, INF), 'page cache slower (appends)')}. Here "PM" is DRAM, so the page cache
cannot win on memory latency; what it adds is a hash lookup and, on a miss, a 4 KiB copy.
"""
    text += "\n" + table(d, maps, ["rand_read", "append"], "mapping", "op", {}) + "\n"
    return text


def spfs(d, png):
    variants = [v for v in ["extent-tree", "hashfs", "extent-hash", "extent-hash+fast"] if v in {p["mapping"] for p in d["points"]}]
    xs = xs_of(d)
    title = "Extent hashing vs block hashing vs extent tree (SPFS Fig. 7)"
    op_figure(d, png, title, lines, variants, xs, ops=["insert", "lookup"], label="{op} latency", log=True, xlabel="extent size")
    big = xs[-1]

    def iv(op, x, p, q):
        return rint(val(d, op=op, x=x, mapping=p), val(d, op=op, x=x, mapping=q))

    bh_vs_tree = iv("insert", big, "hashfs", "extent-tree")
    eh_fastest = all_of(within(iv("insert", x, "extent-hash", k), 0, 1) for x in xs for k in ["extent-tree", "hashfs"])
    # The extents below 128 KiB, where the paper has block hashing look up fastest.
    small_xs = [x for x, e in zip(xs, d["config"].get("extent_bytes", [])) if e < 128 << 10] or xs[:1]
    small = ", ".join(small_xs)
    bh_small = all_of(within(iv("lookup", x, "hashfs", k), 0, 1) for x in small_xs for k in ["extent-tree", "extent-hash"])
    fast_vs_bh = {x: iv("lookup", x, "extent-hash+fast", "hashfs") for x in xs}
    text = f"""
Claim (SPFS §5.2): block hashing's insert latency grows with the extent size, "up to 906x
higher than that of ExtentTree" at 4 MB extents; Extent Hashing inserts fastest; block
hashing looks up fastest below 128 KB extents; with fast lookup, Extent Hashing beats block
hashing.

Measured ({d['scale_note']}): at {big} extents block hashing (HashFS) inserts over the extent tree's:
{ivfmt(bh_vs_tree, 0)}. Slower ((1, ∞)): {verdict(within(bh_vs_tree, 1, INF), 'block hashing inserts slower than the extent tree at 4 MiB extents')}; against 906x ([906/{FACTOR}, 906·{FACTOR}]):
{verdict(within(bh_vs_tree, 906 / FACTOR, 906 * FACTOR), 'block hashing inserts up to 906x the extent tree at 4 MiB extents', f'{fmt(bh_vs_tree[0], 0)}x')} (the paper's figure comes from 1024 `clwb` per 4 MB extent
on Optane against one tree entry). Extent hashing the fastest insert at every size ([0, 1] against
the extent tree and block hashing at each): {verdict(eh_fastest, 'extent hashing the fastest insert')}. Block hashing the fastest lookup at {small}
([0, 1] against the extent tree and extent hashing): {verdict(bh_small, 'block hashing the fastest lookup below 128 KiB extents')}.
Lookups with fast lookup over block hashing: """ + "; ".join(f"{x} {ivfmt(v)}" for x, v in fast_vs_bh.items()) + f""";
below 1 at every size: {verdict(all_of(within(v, 0, 1) for v in fast_vs_bh.values()), 'extent hashing with fast lookup beats block hashing on lookups')}.
"""
    text += op_tables(d, ", mapping cycles", variants, xs, ["insert", "lookup"])
    return text


SECTIONS = [
    ("locality", "Locality (HashFS §4.1)", locality),
    ("fragmentation", "Fragmentation (HashFS §4.2)", fragmentation),
    ("filesize", "File size (HashFS §4.3)", filesize),
    ("iosize", "IO size (HashFS §4.4)", iosize),
    ("utilization", "Space utilization (HashFS §4.5)", utilization),
    ("concurrency", "Concurrency (HashFS §4.6)", concurrency),
    ("pagecache", "Page caching (HashFS §4.7)", pagecache),
    ("spfs-extents", "Extent hashing (SPFS Fig. 7)", spfs),
    ("winefs-aging", "Memory-mapped files on aged images (WineFS Figs. 1 and 3)", lambda d, png: wine_aging(d, png, sys.modules[__name__])),
    ("winefs-2mib", "Mapping a 2 MiB file (WineFS Fig. 2)", lambda d, png: wine_2mib(d, png, sys.modules[__name__])),
    ("untorn", "Untorn writes: strict against relaxed mode (WineFS §3.3)", untorn),
    ("ctfs-micro", "Indexing in six microbenchmarks (ctFS Table 1, Fig. 1)", lambda d, png: micro(d, png, sys.modules[__name__])),
    ("ctfs-large", "Translation on one large file (ctFS §2)", lambda d, png: large(d, png, sys.modules[__name__])),
    ("ctfs-pswap", "pswap against memcpy (ctFS Fig. 6)", lambda d, png: pswap(d, png, sys.modules[__name__])),
    ("ctfs-atomic", "Atomic writes by staging and pswap (ctFS §3.3)", lambda d, png: atomic(d, png, sys.modules[__name__])),
    ("ctfs-ycsb", "LevelDB under YCSB (ctFS Fig. 7)", lambda d, png: ycsb(d, png, sys.modules[__name__])),
]


UNSTABLE = "unstable"


def run_sections(data, figdir, discussion, results):
    """Every section of one run, drawing its figures into `figdir`: (sections, summary rows)."""
    SUMMARY.clear()
    sections = []
    for key, title, fn in SECTIONS:
        if key not in data:
            sections.append(f"\n## {title}\n\nNot in this run.\n")
            continue
        d = data[key]
        png = os.path.join(figdir, f"{key}.png")
        SECTION[0] = title
        body = fn(d, png)
        body += discussion.get(key, "")
        note = f"Scale **{d['scale']}**" + (f" ({d['scale_note']})" if d.get("scale_note") else "") + ". "
        sections.append(
            f"\n## {title}\n\n![{key}](results/{key}.png)\n\n{note}Run time {d['seconds']:.0f} s on {image_range(d)}, commit "
            f"`{d.get('git_commit', '?')}`; configuration in `{results}/{key}.json`.\n{body}"
        )
    return sections, list(SUMMARY)


def compare(first, second):
    """Two runs' checks matched by section and claim: rows (section, claim, (measured,
    verdict) of each run or None where a run lacks the check, and the verdict of both: the
    runs' verdict when they give the same one, else UNSTABLE)."""
    index = {(sec, claim): (meas, v) for sec, claim, meas, v in second}
    rows, seen = [], set()
    for sec, claim, meas, v in first:
        other = index.get((sec, claim))
        seen.add((sec, claim))
        rows.append((sec, claim, (meas, v), other, v if other and other[1] == v else UNSTABLE))
    for sec, claim, meas, v in second:
        if (sec, claim) not in seen:
            rows.append((sec, claim, None, (meas, v), UNSTABLE))
    return rows


def by_majority(data, value):
    """A per-experiment value as the most common one and its exceptions:
    (most common, {other value: [experiments]})."""
    groups = {}
    for key, d in data.items():
        groups.setdefault(value(d), []).append(key)
    common = max(groups, key=lambda v: len(groups[v]))
    return common, {v: keys for v, keys in groups.items() if v != common}


# What makes two runs comparable: one machine (as the stamp names it) and one commit.
SAME_MACHINE = ["cpu", "cores", "kernel", "flush", "simd", "image_mount", "free_page_reporting"]


def runs_differ(data, data2):
    """Every experiment of both runs whose machine stamp or commit differs between them, as
    'experiment: field a / b' (a field that one run's stamp lacks is not compared): the
    run-to-run check is about runs of one machine and commit, not about two machines."""
    out = []
    for key in sorted(set(data) & set(data2)):
        a, b = data[key], data2[key]
        pairs = [("commit", a.get("git_commit"), b.get("git_commit"))]
        pairs += [(f, a["machine"].get(f), b["machine"].get(f)) for f in SAME_MACHINE]
        out += [f"{key}: {f} {x} / {y}" for f, x, y in pairs if x is not None and y is not None and x != y]
    return out


def image_range(d):
    n = d.get("images") or 1
    first = d.get("first_image", 0)
    return f"image {first}" if n == 1 else f"images {first}-{first + n - 1}"


def majority_text(data, value):
    """A per-experiment value as text: the most common one, each other one with the
    experiments that have it in parentheses."""
    common, others = by_majority(data, value)
    return f"{common}" + "".join(f" ({v} for {', '.join(keys)})" for v, keys in others.items())


def images_of(data):
    """Which images a run measured, as 'images a-b', with the experiments that measured others."""
    return majority_text(data, image_range)


def cell(r):
    if r is None:
        return "not run"
    meas, v = r
    return f"{verdict(v)}" + (f" ({meas})" if meas else "")


def summary_one(summary):
    count = {v: sum(1 for *_, w in summary if w == v) for v in (AGREES, DIFFERS, INCONCLUSIVE)}
    return [
        f"\n## Summary\n\nOf {len(summary)} checks against the papers' claims, {count[AGREES]} agree, {count[DIFFERS]} differ and "
        f"{count[INCONCLUSIVE]} are inconclusive (the rules: \"How a verdict is reached\" above); each section below gives the numbers.\n",
        "| experiment | claim | measured | verdict |\n|---|---|---|---|",
        "\n".join(f"| {sec} | {claim} | {meas} | {verdict(v)} |" for sec, claim, meas, v in summary),
    ]


def summary_two(rows, data, data2):
    both = [r[4] for r in rows]
    count = {v: both.count(v) for v in (AGREES, DIFFERS, INCONCLUSIVE, UNSTABLE)}
    return [
        f"""
## Summary

Two full runs, each on its own freshly formatted images (run 1: {images_of(data)}; run 2:
{images_of(data2)}; each image has its own placement). Of {len(rows)} checks against the papers'
claims, {len(rows) - count[UNSTABLE]} give the same verdict in both runs: {count[AGREES]} agree, {count[DIFFERS]} differ and
{count[INCONCLUSIVE]} are inconclusive in both; {count[UNSTABLE]} differ between the runs (marked **unstable** in the last column,
and counted as no verdict). The rules are in "How a verdict is reached" above; every interval includes
the run effect the two runs measure (R0, "Variation between the runs" below). The sections below give
run 1's numbers and figures, run 2's are in its JSON.
""",
        "| experiment | claim | run 1 (measured) | run 2 (measured) | both runs |\n|---|---|---|---|---|",
        "\n".join(
            f"| {sec} | {claim} | {cell(a)} | {cell(b)} | {verdict(v)}{' ⚠' if v == UNSTABLE else ''} |"
            for sec, claim, a, b, v in rows
        ),
    ]


def machine_line(data, results):
    """The machine and image count of a run; experiments measured on another kernel, with
    another flush instruction or SIMD level, or with another number of images per point are
    named."""
    d = next(iter(data.values()))
    mach = d["machine"]

    def stamp(field):
        return majority_text(data, lambda e: e["machine"].get(field, "n/a"))

    n, other_n = by_majority(data, lambda e: e.get("images") or 1)
    per_point = f"between {n} images per point" if n > 1 else "over the trials on one image"
    per_point += "".join(f"; {v} for {', '.join(keys)}" for v, keys in other_n.items())
    return (
        f"Generated by `bench/plot.py` from `{results}` (scale **{d['scale']}**; each section names the commit "
        f"of its experiment's binary) on {stamp('cpu')}, {mach['cores']} cores, {mach['memory_gib']:.0f} GiB, "
        f"kernel {stamp('kernel')}, TSC {mach['tsc_ghz']:.2f} GHz, flush `{stamp('flush')}`, images in "
        f"`{mach['image_dir']}`{mount_note(mach.get('image_mount'))}. Cycles are time-stamp-counter cycles; ± is the "
        f"95% confidence interval ({per_point}); SIMD `{stamp('simd')}`; free page reporting to the hypervisor "
        f"{stamp('free_page_reporting')}.\n"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="bench/results/paper/run1")
    ap.add_argument(
        "--rerun",
        help="a second full run's results: the summary gives both runs' verdicts side by side and flags every check whose verdict differs",
    )
    ap.add_argument("--docs", default="docs")
    ap.add_argument("--intro", default="bench/results-intro.md", help="text placed before the generated sections")
    ap.add_argument(
        "--discussion",
        default="bench/results-discussion.md",
        help="hand-written notes on why results differ, one '## <experiment>' section each, appended to that section",
    )
    ap.add_argument(
        "--stacked", default="bench/results/stacked/run2.json", help="bench/stacked.py's JSON: the SPFS stacked-mode section"
    )
    ap.add_argument(
        "--estimator",
        choices=["trimmed", "mean"],
        default="trimmed",
        help="a point over its images: 20%% trimmed mean with Yuen's interval (bench/estimator.py), or the plain mean",
    )
    args = ap.parse_args()
    ESTIMATOR[0] = args.estimator
    data = load(args.results)
    discussion = load_discussion(args.discussion)
    if not data:
        sys.exit(f"no results in {args.results}: run `hashfs-bench paper` first")
    data2 = load(args.rerun) if args.rerun else None
    if args.rerun and not data2:
        sys.exit(f"no results in {args.rerun}")
    figdir = os.path.join(args.docs, "results")
    os.makedirs(figdir, exist_ok=True)
    out = []
    if os.path.exists(args.intro):
        with open(args.intro) as f:
            out.append(f.read().rstrip() + "\n")
    out.append(("Run 1: " if data2 else "") + machine_line(data, args.results))
    run_effect = ""
    if data2:
        # Each run's intervals include the run effect both runs measure (bench/run_variance.py);
        # the verdicts without it are computed first, to say how many would have flipped.
        sigmas = run_variance.estimate(data, data2)
        with tempfile.TemporaryDirectory() as scratch:
            rows0 = compare(run_sections(data, scratch, {}, args.results)[1], run_sections(data2, scratch, {}, args.rerun)[1])
        for run in (data, data2):
            for key, d in run.items():
                run_variance.widen(d, sigmas, key)
        run_effect = run_variance.section(sigmas, sum(r[4] == UNSTABLE for r in rows0))
    sections, summary = run_sections(data, figdir, discussion, args.results)
    if data2:
        out.append("Run 2: " + machine_line(data2, args.rerun))
        with tempfile.TemporaryDirectory() as scratch:  # run 2's figures are not kept
            _, summary2 = run_sections(data2, scratch, {}, args.rerun)
        rows = compare(summary, summary2)
        differ = runs_differ(data, data2)
        if differ:
            print("WARNING: the two runs differ in machine or commit: " + "; ".join(differ), file=sys.stderr)
            out.append(
                "\n**Warning: the two runs were not made on one machine at one commit** (" + "; ".join(differ)
                + "), so a verdict that changes between them may be the machine's or the code's, not the run's.\n"
            )
        out.extend(summary_two(rows, data, data2))
        same = [r for r in rows if r[4] != UNSTABLE]
        print(
            f"{len(rows)} checks: {sum(r[4] == AGREES for r in same)} agree in both runs, "
            f"{sum(r[4] == DIFFERS for r in same)} differ in both, {sum(r[4] == INCONCLUSIVE for r in same)} "
            f"inconclusive in both, {len(rows) - len(same)} unstable"
        )
    else:
        out.extend(summary_one(summary))
    out.append(run_effect)
    out.append(variation(data))
    out.extend(sections)
    if os.path.exists(args.stacked):
        with open(args.stacked) as f:
            out.append(stacked_section(json.load(f), os.path.join(figdir, "spfs-stacked.png"), args.stacked))
        if "spfs-stacked" in discussion:
            out.append(discussion["spfs-stacked"])
    path = os.path.join(args.docs, "results.md")
    with open(path, "w") as f:
        f.write("\n".join(out))
    print(f"wrote {path} and {len(data)} plots in {figdir}")


if __name__ == "__main__":
    main()
