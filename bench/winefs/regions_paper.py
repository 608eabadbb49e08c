"""HashFS's regions placement in the HashFS paper's experiments (issue 15, item 2): reads the
JSON of one `hashfs-bench paper` run that measured `hashfs` (the paper's placement),
`hashfs-regions` and `extent-tree` side by side, and prints a markdown table of the mapping
cycles per operation (mean and 95% interval over every trial of every image), with the
regions placement's ratio to the paper's placement.

    target/probe/release/hashfs-bench paper --mappings hashfs,hashfs-regions,extent-tree \\
        --image-dir /mnt/hashfs-bench-huge --out bench/results/paper/regions \\
        locality utilization filesize iosize concurrency
    python3 bench/winefs/regions_paper.py [bench/results/paper/regions]
"""
import json, os, sys

EXPERIMENTS = ["locality", "filesize", "iosize", "utilization", "concurrency"]


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "bench/results/paper/regions"
    first = None
    print("| experiment | op | cache | x | paper placement | regions | regions / paper | extent tree |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for e in EXPERIMENTS:
        path = os.path.join(d, e + ".json")
        if not os.path.exists(path):
            continue
        doc = json.load(open(path))
        first = first or doc
        rows = {}
        for p in doc["points"]:
            if "map_cycles" not in p:
                continue
            k = (p["op"], p["cache"], p["x"])
            rows.setdefault(k, {})[p["mapping"]] = p["map_cycles"]
        for (op, cache, x), m in rows.items():
            if "hashfs" not in m or "hashfs-regions" not in m:
                continue
            fig = lambda c: "-" if not c else (  # noqa: E731
                f"{c['mean']:,.0f} ± {c['ci95']:,.0f}" if c.get("ci95") is not None else f"{c['mean']:,.0f}")
            ratio = m["hashfs-regions"]["mean"] / m["hashfs"]["mean"]
            print(f"| {e} | {op} | {cache} | {x} | {fig(m['hashfs'])} | {fig(m['hashfs-regions'])} | {ratio:.2f} | {fig(m.get('extent-tree'))} |")
    if first:
        mach = first["machine"]
        print(f"\nMapping cycles per operation; commit {first['git_commit']}, {first['images']} images per point, "
              f"{first['scale']} scale; {mach['cpu']}, {mach['cores']} cores, flush {mach['flush']}, SIMD {mach['simd']}, "
              f"images on {mach['image_mount']}.")


if __name__ == "__main__":
    main()
