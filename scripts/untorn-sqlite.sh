#!/usr/bin/env bash
# Issue 16's application cost: SQLite through the shim (python3's sqlite3) in strict mode
# against relaxed, on the same image, the two modes alternating trial by trial
# (HASHFS_WRITE_MODE sets the mode of each run): TXNS transactions of 10 random 100-byte
# row updates with synchronous=FULL, in the rollback-journal (delete) and WAL modes, for
# HashFS and the extent tree (bench/untorn/sqlite_txn.py). Images on a tmpfs mounted
# huge=always; results in bench/results/untorn/sqlite.json (or $UNTORN_OUT).
#
#   ./scripts/untorn-sqlite.sh [TRIALS] [TXNS]     # default 6 trials of 2000
set -euo pipefail
cd "$(dirname "$0")/.."
TRIALS="${1:-6}"
TXNS="${2:-2000}"
HUGE=/mnt/hashfs-bench-huge
mountpoint -q "$HUGE" || { mkdir -p "$HUGE" && mount -t tmpfs -o huge=always,size=20g,mode=1777 hashfs-bench "$HUGE"; }
cargo build --release -q --workspace
HASHFS=./target/release/hashfs
SHIM=./target/release/libhashfs_preload.so
OUT="${UNTORN_OUT:-bench/results/untorn/sqlite.json}"
img="$HUGE/untorn-sqlite.img"
. scripts/machine.sh
printf '{"command": "%s", %s, "trials": %s, "txns": %s, "rows": [\n' \
    "$0 $TRIALS $TXNS" "$(machine_json "$HASHFS" "$HUGE")" "$TRIALS" "$TXNS" > "$OUT.tmp"
first=1
for mapping in hashfs extent-tree; do
    for journal in delete wal; do
        rm -f "$img"
        $HASHFS mkfs "$img" --size 1G --mapping "$mapping" --journal-blocks 64 >/dev/null
        run() { LD_PRELOAD="$SHIM" HASHFS_IMAGE="$img" HASHFS_MOUNT=/pm HASHFS_WRITE_MODE="$1" \
            /usr/bin/python3 bench/untorn/sqlite_txn.py /pm/db "$journal" "$2"; }
        run relaxed 10 >/dev/null # the table, loaded once
        relaxed="" strict=""
        for t in $(seq 1 "$TRIALS"); do
            if [ $((t % 2)) = 1 ]; then order="relaxed strict"; else order="strict relaxed"; fi
            for mode in $order; do
                r=$(run "$mode" "$TXNS")
                if [ "$mode" = relaxed ]; then relaxed="$relaxed${relaxed:+,}$r"; else strict="$strict${strict:+,}$r"; fi
            done
        done
        [ $first = 1 ] || echo "," >> "$OUT.tmp"
        first=0
        printf '{"mapping": "%s", "journal": "%s", "relaxed": [%s], "strict": [%s]}\n' \
            "$mapping" "$journal" "$relaxed" "$strict" >> "$OUT.tmp"
        $HASHFS fsck "$img" >/dev/null
        echo "$mapping $journal: relaxed $(echo "[$relaxed]" | python3 -c 'import json,sys; v=[r["tps"] for r in json.load(sys.stdin)]; print(round(sum(v)/len(v)))') tps, strict $(echo "[$strict]" | python3 -c 'import json,sys; v=[r["tps"] for r in json.load(sys.stdin)]; print(round(sum(v)/len(v)))') tps"
    done
done
rm -f "$img"
echo "]}" >> "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$OUT" && echo "wrote $OUT"
