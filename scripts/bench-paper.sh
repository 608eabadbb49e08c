#!/usr/bin/env bash
# Reproduces the papers' file-mapping evaluation: runs `hashfs-bench paper` (every
# experiment, every mapping), then draws the plots and regenerates docs/results.md.
#
#   ./scripts/bench-paper.sh            # full scale, two runs of 3 to 20 images per point (about 2.5 hours on 2 cores)
#   ./scripts/bench-paper.sh --quick    # one smaller run, a few minutes
#   ./scripts/bench-paper.sh --quick locality iosize   # some experiments only
#   BENCH_RUN=2 ./scripts/bench-paper.sh   # only the second full run (the first kept)
#
# A full run is made twice, the second on other images (--first-image), and docs/results.md
# gives both runs' verdicts side by side (BENCH_RUNS=1 makes one). Scratch images go to
# $HASHFS_BENCH_DIR; by default to a tmpfs mounted with huge=always (2 MiB pages, as a DAX
# mapping of PM has), else /dev/shm. JSON goes to bench/results/paper/run1/ (and run2/).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
# A Python with matplotlib for the plots: the first python3 on PATH, else the system's
# (where apt installs python3-matplotlib), else pip.
pick_python() {
    for py in python3 /usr/bin/python3; do
        if command -v "$py" >/dev/null && "$py" -c "import matplotlib" 2>/dev/null; then
            PY="$py"
            return 0
        fi
    done
    return 1
}
if ! pick_python; then
    echo "== installing matplotlib (python3-matplotlib)"
    { $SUDO apt-get install -y python3-matplotlib >/dev/null 2>&1 ||
        { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y python3-matplotlib >/dev/null; }; } ||
        python3 -m pip install --user matplotlib
    pick_python || { echo "cannot install matplotlib" >&2; exit 1; }
fi
if ! command -v cargo >/dev/null; then
    echo "cargo not found: install Rust (https://rustup.rs)" >&2
    exit 1
fi

# Images on 2 MiB pages: a DAX mapping of real PM uses them, and 4 KiB pages would add TLB
# misses to every cold access that the papers' machines did not have.
BENCH_DIR="${HASHFS_BENCH_DIR:-}"
HUGE=/mnt/hashfs-bench-huge
if [ -z "$BENCH_DIR" ]; then
    if mountpoint -q "$HUGE" 2>/dev/null || { [ "$(id -u)" = 0 ] && mkdir -p "$HUGE" &&
        mount -t tmpfs -o huge=always,size=20g,mode=1777 hashfs-bench "$HUGE" 2>/dev/null; }; then
        BENCH_DIR="$HUGE"
    else
        echo "== no huge-page tmpfs (needs root): images on /dev/shm with 4 KiB pages"
        BENCH_DIR=/dev/shm
    fi
fi

# A virtual machine that reports freed memory to its hypervisor (virtio-balloon free page
# reporting) gets it back only through a fault in the host at first touch: a fresh 4 GiB
# image then takes 5 s to populate instead of 0.3 s, for every image of every point. Off
# for the run (orders above 10 are never reported), restored after; the JSON records it.
REPORTING=/sys/module/page_reporting/parameters/page_reporting_order
if [ -w "$REPORTING" ]; then
    old_order="$(cat "$REPORTING")"
    trap 'echo "$old_order" > "$REPORTING"' EXIT
    echo 11 > "$REPORTING"
fi

# The paper benchmark reads the IO path's cycle probe, compiled in only with the cargo
# feature `probe`; its own target directory keeps the ordinary build probe-free.
cargo build --release -q --workspace --bins --features hashfs-bench/probe --target-dir target/probe
# ctfs-ycsb (ctFS Fig. 7) runs LevelDB through the shim: the shim built without the probe,
# and the YCSB driver (g++ and Debian's libleveldb-dev).
if ! command -v g++ >/dev/null || [ ! -f /usr/include/leveldb/db.h ]; then
    echo "== installing g++ and libleveldb-dev (the YCSB driver of ctfs-ycsb)"
    { $SUDO apt-get install -y g++ libleveldb-dev >/dev/null 2>&1 ||
        { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y g++ libleveldb-dev >/dev/null; }; } ||
        { echo "cannot install g++ and libleveldb-dev" >&2; exit 1; }
fi
cargo build --release -q --workspace --lib
bash apps/ycsb/build.sh "$PWD/target/leveldb_ycsb"
export HASHFS_BENCH_SHIM="$PWD/target/release/libhashfs_preload.so" HASHFS_BENCH_YCSB="$PWD/target/leveldb_ycsb"
# A run of every experiment starts from scratch; a run of some replaces only their files.
names=0
quick=0
images=3
skip=0
prev=""
for a in "$@"; do
    if [ "$skip" = 1 ]; then
        skip=0
        if [ "$prev" = --images ]; then images="$a"; fi
        continue
    fi
    case "$a" in
        --images | --mappings | --out | --image-dir | --first-image) skip=1 ;;
        --quick) quick=1 ;;
        --*) ;;
        *) names=1 ;;
    esac
    prev="$a"
done
runs="${BENCH_RUNS:-$([ "$quick" = 1 ] && echo 1 || echo 2)}"
# BENCH_RUN=1 or 2 makes only that run (each is 1.5 hours on a slow 2-core host), keeping
# the other's JSON; the page then compares whichever runs exist, and names any experiment
# whose two runs differ in machine or commit.
only="${BENCH_RUN:-}"
case "$only" in
    "") run_list="$(seq 1 "$runs")" ;;
    1 | 2) run_list="$only" ;;
    *) echo "BENCH_RUN=$only: 1 or 2" >&2; exit 1 ;;
esac
if [ "$names" = 0 ]; then
    if [ -n "$only" ]; then rm -rf "bench/results/paper/run$only"; else rm -rf bench/results/paper/run1 bench/results/paper/run2; fi
fi
# A full run of every experiment measures these on five images per point, utilization and
# ctfs-ycsb on ten, fragmentation on twenty, the others on three: an experiment moves up
# when a check of it was decisive in one full run and inconclusive in the other (effects
# near a bound; bench/results-intro.md, "More images"). Named experiments or --images: as
# given.
FIVE=(locality spfs-extents ctfs-pswap pagecache concurrency ctfs-atomic)
TEN=(utilization ctfs-ycsb)
TWENTY=(fragmentation)
REST=(filesize iosize winefs-aging winefs-2mib untorn ctfs-micro ctfs-large)
split=0
if [ "$names" = 0 ] && [ "$quick" = 0 ] && [[ " $* " != *" --images "* ]]; then split=1; fi
# measure RUN N EXPERIMENT...: N images per point, run 2 on the N images after run 1's.
measure() {
    local run="$1" n="$2"
    shift 2
    ./target/probe/release/hashfs-bench paper --out "bench/results/paper/run$run" --image-dir "$BENCH_DIR" \
        --images "$n" --first-image $(((run - 1) * n)) "$@"
}
rerun=()
for run in $run_list; do
    echo "== run $run"
    if [ "$split" = 1 ]; then
        measure "$run" 5 "${FIVE[@]}" "$@"
        measure "$run" 10 "${TEN[@]}" "$@"
        measure "$run" 20 "${TWENTY[@]}" "$@"
        measure "$run" 3 "${REST[@]}" "$@"
    else
        ./target/probe/release/hashfs-bench paper --out "bench/results/paper/run$run" --image-dir "$BENCH_DIR" \
            --first-image $(((run - 1) * images)) "$@"
    fi
done
# Run 2 is compared when it was made now or kept beside a run made alone.
if [ -d bench/results/paper/run2 ] && { [ -n "$only" ] || [ "$runs" -ge 2 ]; }; then rerun=(--rerun bench/results/paper/run2); fi
if [ ! -d bench/results/paper/run1 ]; then
    echo "== run 2 is in bench/results/paper/run2; the page needs run 1 too (BENCH_RUN=1 $0)"
    exit 0
fi
"$PY" bench/plot.py --results bench/results/paper/run1 "${rerun[@]}" --docs docs
