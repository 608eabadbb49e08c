"""The untorn-write section of docs/results.md (`hashfs-bench paper untorn`): what strict
mode costs against relaxed, per mapping and allocator, for overwrites and appends of
4 KiB, 64 KiB and 1 MiB. Imported by bench/plot.py; no claim of a paper is checked here
(WineFS reports its strict mode only through applications), so it adds no verdict."""

import matplotlib.pyplot as plt

SIZES = ["4 KiB", "64 KiB", "1 MiB"]


def configs(d):
    seen = []
    for p in d["points"]:
        c = (p["mapping"], p["allocator"])
        if c not in seen and "error" not in p:
            seen.append(c)
    return seen


def point(d, mapping, allocator, op, x):
    for p in d["points"]:
        if (p.get("mapping"), p.get("allocator"), p.get("op"), p.get("x")) == (mapping, allocator, op, x):
            return p
    return None


def num(v):
    """A figure's number; NaN where the JSON holds null (an interval over one image)."""
    return float(v) if isinstance(v, (int, float)) else float("nan")


def ci(f):
    """A figure's 95% interval, 0 where it is not a number."""
    c = num(f.get("ci95"))
    return c if c == c else 0.0


def fmt(f):
    c = num(f.get("ci95"))
    return f"{num(f['mean']):.2f} ± {c:.2f}" if c == c else f"{num(f['mean']):.2f}"


def untorn(d, png):
    cfgs = configs(d)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    width = 0.8 / len(SIZES)
    for ax, op in zip(axes, ["overwrite", "append"]):
        for i, x in enumerate(SIZES):
            ratios, errs = [], []
            for m, a in cfgs:
                p = point(d, m, a, op, x)
                f = p["strict_over_relaxed"] if p else {"mean": None, "ci95": None}
                ratios.append(num(f["mean"]))
                errs.append(ci(f))
            xs = [k + (i - 1) * width for k in range(len(cfgs))]
            ax.bar(xs, ratios, width, yerr=errs, label=x, capsize=2)
        ax.axhline(1, color="black", linewidth=0.8)
        ax.axhline(2, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xticks(range(len(cfgs)))
        ax.set_xticklabels([f"{m}\n({a})" for m, a in cfgs], rotation=60, ha="right", fontsize=7)
        ax.set_title(f"{op}: strict time / relaxed time")
        ax.set_yscale("log")
    axes[0].set_ylabel("strict / relaxed (log)")
    axes[0].legend(title="write size")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    rows = []
    for m, a in cfgs:
        for op in ["overwrite", "append"]:
            cells = []
            for x in SIZES:
                p = point(d, m, a, op, x)
                cells.append(
                    f"{num(p['relaxed_us']['mean']):.1f} / {num(p['strict_us']['mean']):.1f} ({fmt(p['strict_over_relaxed'])}x)"
                    if p
                    else "n/a"
                )
            rows.append(f"| {m} ({a}) | {op} | " + " | ".join(cells) + " |")
    h = point(d, "hashfs", "table", "overwrite", "4 KiB")
    goal = ""
    if h:
        r = h["strict_over_relaxed"]
        m, c = num(r["mean"]), ci(r)
        met = "met" if m + c <= 2 else ("not met" if m - c > 2 else "not shown (the interval straddles 2x)")
        goal = (
            f"\nIssue 16's goal, a strict 4 KiB overwrite at most 2x a relaxed one on HashFS: "
            f"{fmt(r)}x, **{met}**.\n"
        )
    return (
        "\nEach cell: relaxed µs / strict µs per write (strict over relaxed, mean ± 95% interval of the "
        "per-trial ratios, the modes alternating trial by trial on one image). Strict overwrites move "
        "blocks (HashFS: the key switch; the structures: copy on write) or, for blocks of aligned 2 MiB "
        "extents, log the old bytes and write in place; appends map only new blocks in both modes.\n"
        + goal
        + "\n| mapping (allocator) | op | 4 KiB | 64 KiB | 1 MiB |\n|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n"
    )
