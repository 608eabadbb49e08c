"""HashFS's regions placement in the HashFS paper's experiments (issue 15, item 2): reads the
JSON of one `hashfs-bench paper` run that measured `hashfs` (the paper's placement),
`hashfs-regions` and `extent-tree` side by side, and prints a markdown table of the mapping
cycles per operation (mean and 95% interval over every trial of every image), with the
regions placement's ratio to the paper's placement.

    target/probe/release/hashfs-bench paper --mappings hashfs,hashfs-regions,extent-tree \\
        --image-dir /mnt/hashfs-bench-huge --out bench/results/paper/regions \\
        locality utilization filesize iosize concurrency
    python3 bench/winefs/regions_paper.py [bench/results/paper/regions]

A run with `--mappings hashfs,hashfs-regions,hashfs-regions-jump` (the regions placement's
two bucket functions side by side, issue 57; `bench/results/paper/regions-back`, made at
ac6176c, whose walk down was reverted after it) gets a column for each instead of the
extent tree's.

`python3 bench/winefs/regions_paper.py --verdict DIR DIR`: issue 57's verdict per point from
two runs of `--mappings hashfs,hashfs-regions` on other images (`--first-image 0` and `3`),
with the whole call's ratio beside the mapping's (`bench/results/paper/regions-verdict/`).

Several directories (`python3 bench/winefs/regions_paper.py DIR DIR...`): one column per
run of the regions placement's mapping cycles over the paper placement's, each within its
own run (issue 57's A/B of the regions placement's prefetches, `bench/results/paper/regions-prefetch/`:
the runs of the build before them and after them on the same images).
"""
import json, os, sys

EXPERIMENTS = ["locality", "fragmentation", "filesize", "iosize", "utilization", "concurrency"]
# A point within this ratio of the paper placement's (issue 57, item 1).
WITHIN = 1.1


def points(d, metric="map_cycles"):
    """(experiment, op, cache, x) -> mapping -> `metric`, in one run's order; and a doc."""
    rows, first = {}, None
    for e in EXPERIMENTS:
        path = os.path.join(d, e + ".json")
        if not os.path.exists(path):
            continue
        doc = json.load(open(path))
        first = first or doc
        for p in doc["points"]:
            if metric in p:
                rows.setdefault((e, p["op"], p["cache"], p["x"]), {})[p["mapping"]] = p[metric]
    return rows, first


def ratios(dirs):
    runs = [points(d) for d in dirs]
    print("| experiment | op | cache | x | " + " | ".join(os.path.basename(d.rstrip("/")) for d in dirs) + " |")
    print("|---|---|---|---|" + "---:|" * len(dirs))
    for k, m in runs[0][0].items():
        if "hashfs" not in m or "hashfs-regions" not in m:
            continue
        cells = []
        for rows, _ in runs:
            r = rows.get(k, {})
            ok = "hashfs" in r and "hashfs-regions" in r
            cells.append(f"{r['hashfs-regions']['mean'] / r['hashfs']['mean']:.2f}" if ok else "-")
        print("| " + " | ".join(k) + " | " + " | ".join(cells) + " |")
    print("\nThe regions placement's mapping cycles over the paper placement's, each within its run; runs: "
          + "; ".join(f"{os.path.basename(d.rstrip('/'))} commit {doc['git_commit']}, {doc['images']} images "
                      f"(first {doc.get('first_image', 0)}), {doc['machine']['cpu']}, flush {doc['machine']['flush']}, "
                      f"images on {doc['machine']['image_mount']}" for d, (_, doc) in zip(dirs, runs) if doc) + ".")


def verdicts(dirs):
    """Issue 57's verdict over two runs on other images (`--first-image 0` and `3`): per point,
    the regions placement's mapping cycles over the paper placement's in each run, and its
    whole call's cycles (`io_cycles`: the operation as the application sees it) the same way.
    A point is within when both runs' mapping ratios are at most WITHIN, over when both
    exceed it, and split otherwise."""
    maps = [points(d)[0] for d in dirs]
    calls = [points(d, "io_cycles")[0] for d in dirs]
    names = [os.path.basename(d.rstrip("/")) for d in dirs]
    print("| experiment | op | cache | x | " + " | ".join(f"mapping, {n}" for n in names) + " | "
          + " | ".join(f"whole call, {n}" for n in names) + " | verdict |")
    print("|---|---|---|---|" + "---:|" * (2 * len(dirs)) + "---|")
    count = {}
    for k in maps[0]:
        def ratio(rows):
            r = rows.get(k, {})
            return r["hashfs-regions"]["mean"] / r["hashfs"]["mean"] if "hashfs" in r and "hashfs-regions" in r else None
        mr, cr = [ratio(m) for m in maps], [ratio(c) for c in calls]
        if None in mr:
            continue
        v = "within" if max(mr) <= WITHIN else "over" if min(mr) > WITHIN else "split"
        count[v] = count.get(v, 0) + 1
        cell = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
        print("| " + " | ".join(k) + " | " + " | ".join(cell(x) for x in mr + cr) + f" | {v} |")
    doc = points(dirs[0])[1]
    print(f"\nPoints: {', '.join(f'{n} {v}' for v, n in sorted(count.items()))}. Ratios of means, regions over paper "
          f"placement, each within its run; runs: " + "; ".join(
              f"{n}: commit {points(d)[1]['git_commit']}, images {points(d)[1].get('first_image', 0)}.."
              f"{points(d)[1].get('first_image', 0) + points(d)[1]['images'] - 1}" for n, d in zip(names, dirs))
          + f"; {doc['scale']} scale; {doc['machine']['cpu']}, {doc['machine']['cores']} cores, flush "
          f"{doc['machine']['flush']}, SIMD {doc['machine']['simd']}, images on {doc['machine']['image_mount']}.")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--verdict":
        return verdicts(sys.argv[2:])
    if len(sys.argv) > 2:
        return ratios(sys.argv[1:])
    d = sys.argv[1] if len(sys.argv) > 1 else "bench/results/paper/regions"
    rows, first = points(d)
    jump = any("hashfs-regions-jump" in m for m in rows.values())
    if jump:
        # A run with the regions placement's two bucket functions (issue 57, at ac6176c,
        # reverted after it): the walk down (hashfs-regions) and jump hashing's
        # (hashfs-regions-jump).
        print("| experiment | op | cache | x | paper placement | regions | regions, jump hashing | regions / paper | jump / paper |")
        print("|---|---|---|---|---:|---:|---:|---:|---:|")
    else:
        print("| experiment | op | cache | x | paper placement | regions | regions / paper | extent tree |")
        print("|---|---|---|---|---:|---:|---:|---:|")
    for (e, op, cache, x), m in rows.items():
        if "hashfs" not in m or "hashfs-regions" not in m:
            continue
        fig = lambda c: "-" if not c else (  # noqa: E731
            f"{c['mean']:,.0f} ± {c['ci95']:,.0f}" if c.get("ci95") is not None else f"{c['mean']:,.0f}")
        ratio = m["hashfs-regions"]["mean"] / m["hashfs"]["mean"]
        if jump:
            j = m.get("hashfs-regions-jump")
            jr = f"{j['mean'] / m['hashfs']['mean']:.2f}" if j else "-"
            print(f"| {e} | {op} | {cache} | {x} | {fig(m['hashfs'])} | {fig(m['hashfs-regions'])} | {fig(j)} | {ratio:.2f} | {jr} |")
        else:
            print(f"| {e} | {op} | {cache} | {x} | {fig(m['hashfs'])} | {fig(m['hashfs-regions'])} | {ratio:.2f} | {fig(m.get('extent-tree'))} |")
    if first:
        mach = first["machine"]
        print(f"\nMapping cycles per operation; commit {first['git_commit']}, {first['images']} images per point, "
              f"{first['scale']} scale; {mach['cpu']}, {mach['cores']} cores, flush {mach['flush']}, SIMD {mach['simd']}, "
              f"images on {mach['image_mount']}.")


if __name__ == "__main__":
    main()
