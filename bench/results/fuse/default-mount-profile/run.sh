#!/bin/bash
# Where a 1 MiB write through the default FUSE mount goes (not a test): one fio run of
# 1 GiB in 1 MiB psync writes to a new file, after one warm-up run, with `perf record -a`
# over it; prints fio's bandwidth and perf's split by thread and by symbol. Root.
# Usage: bash bench/results/fuse/default-mount-profile/run.sh > bench/results/fuse/default-mount-profile/report.txt
set -euo pipefail
H=$(cd "$(dirname "$0")/../../../.." && pwd)/target/release/hashfs
img=/dev/shm/hashfs-fuse-profile.img mnt=$(mktemp -d) data=$(mktemp)
trap 'umount "$mnt" 2>/dev/null || true; rm -f "$img" "$data"; rmdir "$mnt"' EXIT
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r), commit $(git -C "$(dirname "$0")" rev-parse --short HEAD), page_reporting_order $(cat /sys/module/page_reporting/parameters/page_reporting_order)"
"$H" mkfs "$img" --size 2G >/dev/null
"$H" mount "$img" "$mnt" >/dev/null
sleep 1
job=(fio --name=j --filename="$mnt/f" --size=1G --bs=1M --rw=write --ioengine=psync --end_fsync=0 --output-format=terse)
echo "warm-up: $("${job[@]}" | awk -F';' '{printf "%.2f GB/s", $48 * 1024 / 1e9}')"
rm "$mnt/f"
echo "profiled: $(perf record -q -a -g -o "$data" -- "${job[@]}" 2>/dev/null | awk -F';' '{printf "%.2f GB/s", $48 * 1024 / 1e9}')"
echo; echo "# samples by thread (all CPUs; swapper: idle)"
perf report -i "$data" --no-children --sort comm --stdio -g none 2>/dev/null | grep '%' | head -8
echo; echo "# samples by thread and symbol, top 25"
perf report -i "$data" --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep '%' | head -25
