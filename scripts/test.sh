#!/usr/bin/env bash
# The test command, in two tiers:
#
#   ./scripts/test.sh          # every change: formatting, lints, every crate's tests, a
#                              # bounded crash explorer and the deliberate bugs planted in
#                              # the files that changed (within 10 minutes from a warm build)
#   ./scripts/test.sh --full   # what CI runs (.ci/run): the above, the mount's and the shim's
#                              # other configurations, the benchmarks' smoke runs, every
#                              # mapping and placement through the conformance suite and the
#                              # explorer, and every deliberate bug
#
# Needs only a Rust toolchain (cargo); crates come from crates.io.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
    "") full=false ;;
    --full) full=true ;;
    *) echo "usage: $0 [--full]" >&2; exit 2 ;;
esac
if ! command -v cargo >/dev/null 2>&1; then
    [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)" >&2; exit 1; }
rustup component add rustfmt clippy >/dev/null 2>&1 || true
# Under CI (`CI` set, as .ci/run does) a missing tool is a failure; elsewhere the tests
# that need it are skipped, and every skip is listed again at the end.
case "${CI:-}" in ""|0|false) ci=false ;; *) ci=true ;; esac
skip_log=$(mktemp)
export HASHFS_SKIP_LOG="$skip_log"
report_skips() {
    if [ -s "$skip_log" ]; then
        echo "==================================================================" >&2
        echo "WARNING: tests were SKIPPED because tools are missing (run as root to install them):" >&2
        sort -u "$skip_log" | sed 's/^/  /' >&2
        echo "==================================================================" >&2
    fi
    rm -f "$skip_log"
}
# Every stage prints its time when it ends (CI has 90 minutes; these say where they go),
# and the whole list is printed again at the end.
run_start=$SECONDS
stage_name="" stage_start=$SECONDS stage_times=""
stage() {
    end_stage
    stage_name=$1 stage_start=$SECONDS
    echo "== $stage_name"
}
end_stage() {
    if [ -n "$stage_name" ]; then
        local line
        line=$(printf '%5d s  %s' $((SECONDS - stage_start)) "$stage_name")
        echo "== took${line# }   ($((SECONDS - run_start)) s in all)"
        stage_times="$stage_times$line"$'\n'
        stage_name=""
    fi
}
on_exit() {
    end_stage
    echo "== stage times ($((SECONDS - run_start)) s in all):"
    printf '%s' "$stage_times"
    report_skips
}
trap on_exit EXIT
# The FUSE and application tests use Debian's fuse3, rsync, acl and attr (setfacl,
# setfattr), fio, python3-dev, valgrind (tests/libraries.rs), RocksDB's db_bench
# (rocksdb-tools) and LevelDB (libleveldb-dev, with g++ for the YCSB driver); bench/plot.py
# (checked on the paper benchmark's smoke output) needs matplotlib.
find_missing() {
    missing=""
    command -v fusermount3 >/dev/null || missing="$missing fuse3"
    command -v rsync >/dev/null || missing="$missing rsync"
    command -v setfacl >/dev/null || missing="$missing acl"
    command -v setfattr >/dev/null || missing="$missing attr"
    command -v fio >/dev/null || missing="$missing fio"
    command -v mkfs.ext4 >/dev/null || missing="$missing e2fsprogs"
    command -v db_bench >/dev/null || missing="$missing rocksdb-tools"
    [ -f /usr/include/leveldb/db.h ] || missing="$missing libleveldb-dev"
    command -v g++ >/dev/null || missing="$missing g++"
    command -v make >/dev/null || missing="$missing make"
    command -v autoreconf >/dev/null || missing="$missing autoconf"
    command -v automake >/dev/null || missing="$missing automake"
    command -v sqlite3 >/dev/null || missing="$missing sqlite3"
    command -v valgrind >/dev/null || missing="$missing valgrind"
    command -v git >/dev/null || missing="$missing git"
    command -v redis-server >/dev/null || missing="$missing redis-server"
    compgen -G '/usr/lib/postgresql/*/bin/pgbench' >/dev/null || missing="$missing postgresql"
    /usr/bin/python3 -c "import lmdb" 2>/dev/null || missing="$missing python3-lmdb"
    # A Python extension module built in the image (tests/libraries.rs): Debian's headers.
    [ -f "$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)/Python.h" ] ||
        missing="$missing python3-dev"
    python3 -c "import matplotlib" 2>/dev/null || /usr/bin/python3 -c "import matplotlib" 2>/dev/null ||
        missing="$missing python3-matplotlib"
}
find_missing
if [ -n "$missing" ] && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null || true
    find_missing
fi
if [ -n "$missing" ]; then
    if $ci; then
        echo "error: CI needs these Debian packages and they could not be installed:$missing" >&2
        exit 1
    fi
    echo "WARNING: missing$missing; the tests that need them will be SKIPPED (listed at the end)" >&2
fi
# Every cargo command below selects the whole workspace (`--workspace`, narrowed by `--test`
# or `--lib`), never one package (`-p`): a package alone resolves its dependencies' features
# apart from the workspace's (libc's extra_traits, for one) and compiles everything again.
stage "fmt, clippy, docs/crash-bugs.md"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The deliberate bugs' table in the docs is the script's list.
if ! diff <(bash scripts/crash-bugs.sh --table) \
    <(sed -n '/^<!-- table: /,/^<!-- end of table -->/p' docs/crash-bugs.md | sed '1d;$d'); then
    echo "docs/crash-bugs.md's table differs from scripts/crash-bugs.sh's list (--table prints it)" >&2
    exit 1
fi
# ...and each bug still applies to the code it changes (scripts/plant-bugs.py; the full tier
# runs them all).
bash scripts/crash-bugs.sh --check-patterns
stage "build, workspace tests"
# The binaries and the shims (libhashfs_preload.so, libhashfs_spfs_shim.so, which the shim
# tests load and build again if stale) in the profile the tests build with (`test`:
# optimized, with line tables), whose libraries `cargo test` then reuses.
cargo build --workspace --profile test
cargo test --workspace -- --skip explore_
if ! $full; then
    # The explorer on HashFS's mapping, recovery crashed on the first 2 images of each crash
    # point (about a minute); the deliberate bugs in the files that differ from HEAD, in a
    # scratch copy of the tree where they are all planted (later runs rebuild it
    # incrementally).
    stage "crash explorer (bounded): mapping hashfs"
    HASHFS_TEST_MAPPING=hashfs HASHFS_CRASH_RECOVERY_IMAGES=2 \
        cargo test -q --workspace --test crash_consistency -- --nocapture --test-threads 1
    stage "crash explorer: deliberate bugs in the changed files"
    bash scripts/crash-bugs.sh --changed
    exit 0
fi
# The mount's tests again with their images in memory (/dev/shm; the default temporary
# directory here is on disk): there the daemon stores each write's times before answering
# and has the kernel send no fsync (hashfs-fuse's `sync_at_write`).
stage "FUSE tests with images in memory"
TMPDIR=/dev/shm cargo test --workspace --test fuse_posix --test fuse_cache
# The POSIX checks once more on SPFS's stacked mount (`--lower`), whose daemon makes each
# object in the lower directory with the caller's identity; the tests of what the plain
# mount keeps in its image (fsck, special files in the image, attribute sizes past the
# lower file system's limit, fsync without a round trip) do not apply there.
stage "POSIX suite on the stacked mount"
HASHFS_TEST_STACKED=1 cargo test --workspace --test fuse_posix -- errno_of_each_failure success_cases \
    permissions_for_other_users writes_by_others_clear_set_id_bits chown_clears_set_id_bits_of_non_directories \
    fallocate_modes_through_the_mount cache_modes_keep_every_write
# And on a shared mount (issue 56): a shim process has each test's image from before its
# mount to after it, so that the daemon is one of two participants and the kernel caches
# nothing (`hashfs mount -o shared`); the write-back cache is refused there.
stage "POSIX suite on a shared mount beside a shim process"
TMPDIR=/dev/shm HASHFS_TEST_SHIM_BESIDE=1 cargo test --workspace --test fuse_posix
# And once more through FUSE over io_uring (`mount -o io_uring`): the kernel's switch is
# turned on for the stage and put back after. A kernel without it (before 6.14, or built
# without CONFIG_FUSE_IO_URING) skips the stage, which under CI is a failure.
stage "FUSE tests over io_uring"
uring_switch=/sys/module/fuse/parameters/enable_uring
if [ -w "$uring_switch" ]; then
    uring_was=$(cat "$uring_switch")
    echo 1 > "$uring_switch"
    uring_rc=0
    TMPDIR=/dev/shm HASHFS_TEST_MOUNT_OPTS=io_uring cargo test --workspace --test fuse_posix --test fuse_cache \
        || uring_rc=$?
    # The stacked mount's POSIX checks over the rings too (its suite above).
    [ "$uring_rc" -ne 0 ] || HASHFS_TEST_STACKED=1 HASHFS_TEST_MOUNT_OPTS=io_uring cargo test --workspace \
        --test fuse_posix -- errno_of_each_failure success_cases permissions_for_other_users \
        writes_by_others_clear_set_id_bits chown_clears_set_id_bits_of_non_directories \
        fallocate_modes_through_the_mount cache_modes_keep_every_write || uring_rc=$?
    case "$uring_was" in Y|1) echo 1 > "$uring_switch" ;; *) echo 0 > "$uring_switch" ;; esac
    [ "$uring_rc" -eq 0 ] || exit "$uring_rc"
elif [ -n "${CI:-}" ]; then
    echo "CI: $uring_switch is missing or not writable: FUSE over io_uring cannot be tested" >&2
    exit 1
else
    echo "no writable $uring_switch: FUSE over io_uring not tested" >> "$skip_log"
    echo "SKIPPED: FUSE over io_uring ($uring_switch)" >&2
fi
# The paper benchmark's cycle probe (cargo feature `probe`, off in every other build): lint,
# its unit test and the benchmark's smoke run. Its builds share the target directory (the
# dependencies are built once; cargo keeps each feature set's artifacts apart and puts the
# right binary in target/debug at every build).
stage "probe build: clippy, unit test, images"
# (The crates without probe code are left out of its lint and unit tests; hashfs-cli still
# brings in every dependency the workspace has, so their features stay the workspace's.)
probe=(--workspace --features hashfs-bench/probe)
probe_only=("${probe[@]}" --exclude hashfs-fuse --exclude hashfs-preload --exclude hashfs-spfs-shim
    --exclude hashfs-interpose --exclude hashfs-spfs)
cargo clippy "${probe_only[@]}" --all-targets -- -D warnings
cargo test "${probe_only[@]}" --lib probe
cargo test "${probe[@]}" --bin hashfs-bench images::
stage "paper benchmark smoke run, plot.py tests"
# (its ctfs-ycsb runs LevelDB through the shim built above, without the probe)
HASHFS_BENCH_SHIM="$PWD/target/debug/libhashfs_preload.so" \
    cargo test "${probe[@]}" --test paper paper_benchmark
# (and the binary without the probe back in target/debug for the smoke runs below)
cargo build --workspace --profile test
# The paper pages' verdict rules (bench/plot.py needs matplotlib: the system Python has it).
for py in python3 /usr/bin/python3; do
    if "$py" -c "import matplotlib" 2>/dev/null; then "$py" bench/test_plot.py; break; fi
done
# bench/filebench.py end to end: every personality on the HashFS mount, the FUSE ceiling,
# tmpfs, ext4 on a loop device and the shim, tiny and short (the figures mean nothing).
if [ "$(id -u)" = 0 ] && [ -e /dev/fuse ]; then
    stage "bench/filebench.py, stat_cache.py and shim_mmap.py smoke runs"
    HASHFS_BIN=target/debug/hashfs HASHFS_PRELOAD=target/debug/libhashfs_preload.so python3 bench/filebench.py \
        --rounds 1 --seconds 1 --files-scale 0.01 --image-size 1G --targets hashfs,ceiling,tmpfs,ext4,shim \
        --json /tmp/hashfs-filebench-smoke.json
    rm -f /tmp/hashfs-filebench-smoke.json
    HASHFS_BIN=target/debug/hashfs python3 bench/stat_cache.py --rounds 1
    HASHFS_BIN=target/debug/hashfs python3 bench/shim_mmap.py --shim a=target/debug/libhashfs_preload.so \
        --shim b=target/debug/libhashfs_preload.so --rounds 2 --pages 16 --maps 2 >/dev/null
elif $ci; then
    echo "error: CI runs bench/filebench.py's smoke run, which needs root and /dev/fuse" >&2
    exit 1
else
    echo "bench/filebench.py smoke run (needs root and /dev/fuse)" >>"$skip_log"
fi
# The portable fallbacks: the weakest flush instruction and scalar hashing, through the
# real mmap device (CLI tests) and the file system (model tests).
stage "clflush and scalar fallbacks"
HASHFS_FLUSH=clflush HASHFS_SIMD=scalar cargo test --workspace --test cli
HASHFS_SIMD=scalar HASHFS_MODEL_SEEDS=10 cargo test --workspace --test model_based
# The conformance suite (model, corrupt-image, full-device, POSIX, one-fence append, untorn
# write and churn tests: the test files that run on HASHFS_TEST_MAPPING, the others run once
# above) against every other mapping, and the allocator mappings once more with the
# fragmentation generator at layout score 0.7; the crash explorer's bounded runs (tests/crash_consistency.rs)
# for every mapping, with their figures printed. HashFS's run crashes recovery on the first
# 8 images of each crash point, the other mappings' runs on the first
# (HASHFS_CRASH_RECOVERY_IMAGES: the crashed recoveries are most of the states and time;
# since each fence of a crashed recovery is sampled as a crash point's, 4 states, and one
# recovery after it crashed too, HashFS's run with every image took 636 s beside other
# work, 247 s before), which keeps CI inside its 90 minutes (a CI run under load took more
# than 90 on 2026-12-06, the other mappings' runs then on the first 2 images and every
# 26th pair: about 95 s each on a quiet machine). `hashfs crashtest` crashes every recovery.
conformance=(--workspace)
for t in corrupted_image crash_consistency full_device model_based one_fence_appends posix_semantics \
    table_churn untorn_writes; do
    conformance+=(--test "$t")
done
for m in extent-tree extent-tree-cached radix-tree cuckoo extent-hash ctfs; do
    stage "conformance suite: mapping $m"
    HASHFS_TEST_MAPPING=$m cargo test -q "${conformance[@]}" -- --skip explore_
done
stage "conformance suite: mapping hashfs, grouped placement"
HASHFS_TEST_MAPPING=hashfs HASHFS_TEST_PLACEMENT=grouped cargo test -q "${conformance[@]}" -- --skip explore_
stage "conformance suite: mapping hashfs, regions placement"
HASHFS_TEST_MAPPING=hashfs HASHFS_TEST_PLACEMENT=regions cargo test -q "${conformance[@]}" -- --skip explore_
for m in extent-tree radix-tree cuckoo extent-hash; do
    stage "conformance suite: mapping $m, layout score 0.7"
    HASHFS_TEST_MAPPING=$m HASHFS_TEST_LAYOUT_SCORE=0.7 cargo test -q "${conformance[@]}" -- --skip explore_
done
# The pairs of operations are most of each run's states: HashFS's run explores every
# thirteenth pair, each other mapping every 52nd from an offset of its own (so together
# they cover more distinct pairs than one stride shared by all; each alone a quarter as
# many).
# extent-tree-cached is the extent tree read through a DRAM cache of its nodes: its images
# are extent-tree's, and a crashed image recovers in a fresh mount whose cache starts
# empty, so CI explores only where a cache lives on past the failure, process deaths (the
# survivor's cache against what the dead one's recovery undid, in the tests that have
# them: 6 s, where every test took 75 s); everything by command
# (`hashfs crashtest --mapping extent-tree-cached`).
pair_offset=0
for m in hashfs extent-tree extent-tree-cached radix-tree cuckoo extent-hash ctfs; do
    stage "crash explorer: mapping $m"
    recovery_images=1 pairs=52:$pair_offset only=()
    [ "$m" = hashfs ] && recovery_images=8 pairs=13:0
    [ "$m" = hashfs ] || pair_offset=$((pair_offset + 1))
    [ "$m" = extent-tree-cached ] &&
        only=(explore_process_deaths explore_several_descriptors explore_a_rollback_journals_calls)
    HASHFS_TEST_MAPPING=$m HASHFS_CRASH_RECOVERY_IMAGES=$recovery_images HASHFS_CRASH_PAIRS=$pairs \
        cargo test -q --workspace --test crash_consistency -- --nocapture --test-threads 1 "${only[@]}"
done
# The grouped placement's images are 8 MiB (whole 2 MiB groups), each state about 18 times
# the work of a paper-placement state (446 s here on 2026-12-06 for every single operation
# and every test of the paper placement's that does not skip it, 701 s in a CI run under
# load: too much of CI's 90 minutes). So CI explores, with recovery crashed on the first
# image of each crash point, the single operations that claim, fill, move or free table
# slots (the chunk writes, claims and drops, and the other writes, frees and blob writes
# whose blocks the placement puts beside or out of groups) and the hole fills; process
# deaths in those other than the chunk operations (a death after each of a chunk write's
# thousands of stores: 274 s for the five). The namespace operations (renames, links, owners, times),
# which place no block, run on the paper placement's stage, as do pairs, random sequences,
# two threads, strict mode, several descriptors, the largest sizes, a full device, one
# journal, links with renames, remounts, unmounts, fsync and the rollback journal's calls;
# everything on this placement, every recovery, by command
# (`hashfs crashtest --mapping hashfs --placement grouped --seq 2 --random 8 --two-threads 10`,
# and with `--model death`).
stage "crash explorer: mapping hashfs, grouped placement"
grouped_ops=mkdir,append,append-cross,write-past-eof,fill-hole,truncate-down,fallocate,punch,unlink,unlink-small
grouped_ops+=,rename-replace,setxattr-big,zero-range,zero-range-grow,untorn-overwrite,untorn-append,untorn-hole
grouped_ops+=,fallocate-chunk,write-chunk,grow-chunk,truncate-chunk,punch-chunk
HASHFS_TEST_MAPPING=hashfs HASHFS_TEST_PLACEMENT=grouped HASHFS_CRASH_RECOVERY_IMAGES=1 HASHFS_CRASH_OPS=$grouped_ops \
    cargo test -q --workspace --test crash_consistency -- --nocapture --test-threads 1 \
    explore_every_single_operation explore_hole_fills_roll_back_whole
HASHFS_TEST_MAPPING=hashfs HASHFS_TEST_PLACEMENT=grouped HASHFS_CRASH_OPS=${grouped_ops%%,fallocate-chunk*} \
    cargo test -q --workspace --test crash_consistency -- --nocapture --exact explore_process_deaths
# The regions placement's explorer images start with their one open group past its
# target load, so that every write opens a second group and moves dozens of keys (each
# move a transaction): five single operations (a create, an append, a whole-chunk write
# and a growth into a chunk that open, an unlink), the directory-block and hole-fill workloads, recovery crashed on
# the first image of each crash point (about 2 minutes); every operation by command
# (`hashfs crashtest --mapping hashfs --placement regions`).
stage "crash explorer: mapping hashfs, regions placement"
HASHFS_TEST_MAPPING=hashfs HASHFS_TEST_PLACEMENT=regions HASHFS_CRASH_RECOVERY_IMAGES=1 \
    HASHFS_CRASH_OPS=create,append,unlink,write-chunk,grow-chunk \
    cargo test -q --workspace --test crash_consistency -- --nocapture --test-threads 1 \
    explore_every_single_operation explore_create_needing_a_new_directory_block explore_hole_fills_roll_back_whole
# Process deaths on it (its table state lives in the shared region; a takeover counts it
# again, which the survivor checks against the table): a create, an append that opens a
# group, an unlink (15 s); whole-chunk writes by command (`hashfs crashtest --mapping hashfs
# --placement regions --model death`, about 4 minutes).
HASHFS_TEST_MAPPING=hashfs HASHFS_TEST_PLACEMENT=regions HASHFS_CRASH_OPS=create,append,unlink \
    cargo test -q --workspace --test crash_consistency -- --nocapture --exact explore_process_deaths
stage "crash explorer: mapping extent-tree, layout score 0.7"
HASHFS_TEST_MAPPING=extent-tree HASHFS_TEST_LAYOUT_SCORE=0.7 HASHFS_CRASH_RECOVERY_IMAGES=1 HASHFS_CRASH_PAIRS=52:6 \
    cargo test -q --workspace --test crash_consistency -- --nocapture --test-threads 1 \
    --skip explore_several_descriptors --skip explore_largest_sizes
# SPFS's stacked mode: its explorer over the PM side (the lower file as it stood at each
# fence); the full run is `cargo test -p hashfs-spfs --release -- --ignored explore_full`.
stage "crash explorer: SPFS stacked mode, PM side"
cargo test -q --workspace --lib crashtest -- --nocapture
# The explorer catches deliberate bugs (planted in a scratch copy of the tree, built once, each
# switched on at run time; six that cannot be switched are rebuilt alone).
stage "crash explorer: deliberate bugs"
bash scripts/crash-bugs.sh
