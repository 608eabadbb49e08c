#!/usr/bin/env bash
# Measures the mapping structure's size (HashFS paper §2.1) for every mapping at layout
# scores 1.0, 0.85 and 0.7: formats a 1 GiB image on /dev/shm, copies in 32 files of
# 16 MiB (512 MiB), checks it with fsck, and prints what `hashfs info` measures. Usage: scripts/mapping-size.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release --workspace
bin=./target/release/hashfs
dir=$(mktemp -d /dev/shm/hashfs-size.XXXXXX)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/src"
for i in $(seq 1 32); do head -c 16M /dev/urandom > "$dir/src/f$i"; done
printf "| mapping | layout score (target) | measured layout score | entries | tree nodes | structure bytes | bytes per GiB of data |\n"
printf "|---|---|---|---|---|---|---|\n"
for m in hashfs extent-tree radix-tree cuckoo extent-hash; do
    for s in 1.0 0.85 0.7; do
        if [ "$m" = hashfs ] && [ "$s" != 1.0 ]; then continue; fi
        args=(--mapping "$m")
        [ "$m" = hashfs ] || args+=(--layout-score "$s")
        $bin mkfs "$dir/img" --size 1G "${args[@]}" >/dev/null
        $bin put "$dir/img" "$dir/src" /src >/dev/null
        $bin fsck "$dir/img" >/dev/null || { echo "fsck found problems on the $m image" >&2; exit 1; }
        info=$($bin info "$dir/img")
        measured=$(sed -n 's/.*measured layout score \([0-9.]*\).*/\1/p' <<<"$info")
        entries=$(sed -n 's/^structure *\([0-9]*\) entries.*/\1/p' <<<"$info")
        nodes=$(sed -n 's/.*), \([0-9]*\) tree nodes.*/\1/p' <<<"$info")
        per=$(sed -n 's/^metadata\/GiB *\([0-9]*\) bytes.*(\(.*\)).*/\1 (\2)/p' <<<"$info")
        table=$(sed -n 's/.* \([0-9]*\) bytes of table.*/\1/p' <<<"$info")
        bytes=$((nodes * 4096 + table))
        [ "$m" = hashfs ] && bytes=$table
        label=$s; [ "$m" = hashfs ] && label="n/a (hash placement)"
        printf "| %s | %s | %s | %s | %s | %s | %s |\n" "$m" "$label" "$measured" "$entries" "$nodes" "$bytes" "$per"
    done
done
