#!/usr/bin/env bash
# WineFS's claim through the shim, as issue 15's "done when" puts it: a 1 GiB memory-mapped
# write (memcpy into a shared mapping of a fallocated file) on a fresh image and on the same
# image aged to 75% full (`hashfs-bench age`), for the aligned allocator, the bitmap allocator
# and HashFS's table with the paper's placement, the grouped one and the regions one. Images on a tmpfs mounted huge=always (2 MiB pages, as DAX PM);
# results in bench/results/winefs/shim.json (or $WINEFS_OUT).
#
#   ./scripts/winefs-shim.sh [IMAGE_GIB]      # default 8
#   WINEFS_CONFIGS="hashfs:grouped" ./scripts/winefs-shim.sh   # some configurations only
set -euo pipefail
cd "$(dirname "$0")/.."
GIB="${1:-8}"
HUGE=/mnt/hashfs-bench-huge
mountpoint -q "$HUGE" || { mkdir -p "$HUGE" && mount -t tmpfs -o huge=always,size=20g,mode=1777 hashfs-bench "$HUGE"; }
cargo build --release -q --workspace
HASHFS=./target/release/hashfs
HASHFS_BENCH=./target/release/hashfs-bench
SHIM=./target/release/libhashfs_preload.so
OUT="${WINEFS_OUT:-bench/results/winefs/shim.json}"
img="$HUGE/winefs-shim.img"
TRIALS=4
one() { LD_PRELOAD="$SHIM" HASHFS_IMAGE="$img" HASHFS_MOUNT=/pm /usr/bin/python3 bench/winefs/mmap_write.py /pm/mapped 1024; }
# TRIALS mapped writes in a row, each a new file, as a JSON array.
run() {
    local out="[" i
    for i in $(seq 1 $TRIALS); do out="$out$([ $i = 1 ] || echo ,)$(one)"; done
    echo "$out]"
}
. scripts/machine.sh
printf '{%s, "rows": [\n' "$(machine_json "$HASHFS" "$HUGE")" > "$OUT.tmp"
first=1
for cfg in ${WINEFS_CONFIGS:-extent-tree:aligned extent-tree:bitmap hashfs:table hashfs:grouped hashfs:regions}; do
    set -- ${cfg/:/ }
    rm -f "$img"
    if [ "$2" = grouped ] || [ "$2" = regions ]; then
        $HASHFS mkfs "$img" --size "${GIB}G" --placement "$2" >/dev/null
    elif [ "$1" = hashfs ]; then
        $HASHFS mkfs "$img" --size "${GIB}G" >/dev/null
    else
        $HASHFS mkfs "$img" --size "${GIB}G" --mapping "$1" --allocator "$2" >/dev/null
    fi
    fresh=$(run)
    aged_report=$($HASHFS_BENCH age "$img" --to 75% --churn 1 --seed 7 | tr '\n' ' ')
    aged=$(run)
    [ $first = 1 ] || echo "," >> "$OUT.tmp"
    first=0
    printf '{"mapping": "%s", "allocator": "%s", "image_gib": %s, "fresh": %s, "aged_75": %s, "age_report": "%s"}\n' \
        "$1" "$2" "$GIB" "$fresh" "$aged" "$aged_report" >> "$OUT.tmp"
done
echo "]}" >> "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
rm -f "$img"
/usr/bin/python3 - "$OUT" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
print("machine:", doc["machine"], "commit", doc["git_commit"])
for r in doc["rows"]:
    f, a = r["fresh"], r["aged_75"]
    errs = [t["error"] for t in f + a if "error" in t]
    if errs:
        print(f"{r['mapping']} ({r['allocator']}): {errs[0]}")
        continue
    gb = lambda ts: [round(t["gbps"], 1) for t in ts]  # noqa: E731
    mean = lambda v: sum(v) / len(v)  # noqa: E731
    print(f"{r['mapping']} ({r['allocator']}): GB/s fresh {gb(f)}, aged 75% {gb(a)}, mean aged/fresh "
          f"{mean(gb(a)) / mean(gb(f)):.2f}; faults per write {sorted({t['faults'] for t in f + a})}; "
          f"MiB on 2 MiB pages {sorted({t['pmd_kib'] >> 10 for t in f + a})} of 1024; "
          f"data checked: {all(t['data_ok'] for t in f + a)}")
PY
