"""The SPFS stacked-mode section of docs/results.md, from `bench/stacked.py`'s JSON:
ext4 alone, HashFS stacked over that ext4 through FUSE (`hashfs mount --lower`) and in the
process (`libhashfs_spfs_shim.so`, when the run has it), and HashFS alone through FUSE,
interleaved in each round. Ratios are per round (target / ext4 of the same round); the
range over the rounds is shown. Imported by bench/plot.py."""

import matplotlib.pyplot as plt

# (workload, metric, label, the paper's figure or None, the goal's test or None)
ROWS = [
    ("fsync-append", "ops_per_s", "4 KiB append + fdatasync", None, None),
    ("fsync-overwrite", "ops_per_s", "4 KiB overwrite + fdatasync", None, None),
    ("rocksdb-sync16", "ops_per_s", "RocksDB load, sync every 16", 7.7, ("issue 18: at least 5x", lambda r: r >= 5.0)),
    ("rocksdb-sync256", "ops_per_s", "RocksDB load, sync every 256", 1.6, None),
    ("rocksdb-sync4096", "ops_per_s", "RocksDB load, sync every 4,096", None, None),
    ("rocksdb-sync65536", "ops_per_s", "RocksDB load, sync every 65,536", 1.0, None),
    ("mail-mbox", "ops_per_s", "mail: mbox deliveries (fsync each)", None, None),
    ("mail-maildir", "ops_per_s", "mail: maildir (varmail's flow)", None, None),
    ("rocksdb-nosync", "ops_per_s", "RocksDB load, never syncs", 1.0, ("issue 18: within 15% of ext4", lambda r: r >= 0.85)),
    ("fio-rand-nosync", "randwrite_ops_per_s", "4 KiB random writes, no sync", None, ("within 15%", lambda r: r >= 0.85)),
    ("fio-rand-nosync", "randread_ops_per_s", "4 KiB random reads, no sync", 1 / 1.0989, None),
]


def ratios(d, w, m, t):
    return [s[m] / e[m] for s, e in zip(d["runs"][w][t], d["runs"][w]["ext4"]) if e[m]]


def rng(v):
    lo, hi = min(v), max(v)
    return f"{lo:.2f}x" if abs(hi - lo) < 0.005 else f"{lo:.2f}-{hi:.2f}x"


def stacked_section(d, png, source):
    c = d["config"]
    rows = [r for r in ROWS if r[0] in d["runs"]]
    shim = "shim" in next(iter(d["runs"].values()))
    bars = [("stacked", "#d62728", "HashFS stacked over ext4 (FUSE mount)")]
    if shim:
        bars.append(("shim", "#1f77b4", "HashFS stacked over ext4 (in the process)"))
    bars.append(("hashfs", "#7f7f7f", "HashFS alone (FUSE)"))
    h = 0.8 / len(bars)
    fig, ax = plt.subplots(figsize=(9, 5.4 if shim else 4.8))
    ys = list(range(len(rows)))
    for i, (t, color, label) in enumerate(bars):
        off = (i - (len(bars) - 1) / 2) * h
        med, lo, hi = [], [], []
        for w, m, *_ in rows:
            v = ratios(d, w, m, t)
            v.sort()
            mid = v[len(v) // 2]
            med.append(mid)
            lo.append(mid - v[0])
            hi.append(v[-1] - mid)
        ax.barh([y + off for y in ys], med, height=h * 0.95, xerr=[lo, hi], color=color, label=label)
    for y, (w, m, label, paper, goal) in zip(ys, rows):
        if paper:
            ax.plot([paper], [y], marker="D", color="black", ms=5, zorder=5)
    ax.plot([], [], marker="D", color="black", ls="", label="SPFS+ext4 in the paper")
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks(ys)
    ax.set_yticklabels([r[2] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("throughput relative to ext4 alone in the same round (log; bars: range over rounds)")
    ax.set_title("SPFS stacked mode on this machine (ext4 on a loop device over the disk)")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    out = [
        "## SPFS stacked mode (SPFS Figs. 11-13)\n",
        f"![stacked](results/{png.rsplit('/', 1)[-1]})\n",
        f"From `{source}`, made by `{c['command']}` at commit `{c['commit']}` on {c['date']}: {c['cpu']}, "
        f"{c['nproc']} cores, kernel {c['kernel']}, flush `{c['flush']}`, SIMD `{c['simd']}`, PM image on "
        f"{c['pm_image_fs']}; lower file system: {c['lower']}; guest halt polling {c['guest_halt_poll_ns']} ns; "
        f"{c['rounds']} rounds, the {len(bars) + 1} targets interleaved in each (order rotated), caches dropped "
        f"before every run. Figures are medians over the rounds; ratios are taken within a round.\n",
    ]
    stacks = [t for t, *_ in bars if t != "hashfs"]
    names = {"stacked": "mount", "shim": "in the process"}
    if shim:
        out += [
            "| workload | ext4 | stacked: mount | stacked: in the process | HashFS alone | mount / ext4 "
            "| in the process / ext4 | SPFS paper | goal |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
    else:
        out += [
            "| workload | ext4 | stacked | HashFS alone | stacked / ext4 | SPFS paper | goal |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]

    def verdict(goal, r):
        ok = all(goal[1](x) for x in r)
        bad = not any(goal[1](x) for x in r)
        return "met" if ok else "not met" if bad else "met in some rounds"

    for w, m, label, paper, goal in rows:
        s = d["summary"][w]
        rs = {t: ratios(d, w, m, t) for t in stacks}
        g = ""
        if goal:
            g = f"{goal[0]}: " + ", ".join(
                (f"{names[t]} " if shim else "") + verdict(goal, rs[t]) for t in stacks
            )
        out.append(
            f"| {label} ({m.replace('_', ' ')}) | {s['ext4'][m]:,.0f} | "
            + " | ".join(f"{s[t][m]:,.0f}" for t in stacks)
            + f" | {s['hashfs'][m]:,.0f} | "
            + " | ".join(rng(rs[t]) for t in stacks)
            + f" | {f'{paper:.2f}x' if paper else '-'} | {g} |"
        )
    sync = [
        f"{w}: fdatasync p50 {d['summary'][w]['ext4']['sync_p50_us']:.0f} µs on ext4, "
        f"{d['summary'][w]['stacked']['sync_p50_us']:.0f} µs stacked through the mount, "
        + (f"{d['summary'][w]['shim']['sync_p50_us']:.2f} µs in the process, " if shim else "")
        + f"{d['summary'][w]['hashfs']['sync_p50_us']:.0f} µs HashFS alone"
        for w in ("fsync-append", "fsync-overwrite")
        if w in d["summary"]
    ]
    out.append("\nLatencies: " + "; ".join(sync) + ".\n")
    return "\n".join(out) + "\n"
