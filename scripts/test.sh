#!/usr/bin/env bash
# The test command: formatting, lints, and every test of the workspace.
# Needs only a Rust toolchain (cargo); crates come from crates.io.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
    [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)" >&2; exit 1; }
rustup component add rustfmt clippy >/dev/null 2>&1 || true
# The FUSE and application tests use Debian's fuse3, rsync, fio, RocksDB's db_bench
# (rocksdb-tools) and LevelDB (libleveldb-dev, with g++ for the YCSB driver).
missing=""
command -v fusermount3 >/dev/null || missing="$missing fuse3"
command -v rsync >/dev/null || missing="$missing rsync"
command -v fio >/dev/null || missing="$missing fio"
command -v db_bench >/dev/null || missing="$missing rocksdb-tools"
[ -f /usr/include/leveldb/db.h ] || missing="$missing libleveldb-dev"
command -v g++ >/dev/null || missing="$missing g++"
# bench/plot.py (checked on the paper benchmark's smoke output) needs matplotlib.
python3 -c "import matplotlib" 2>/dev/null || /usr/bin/python3 -c "import matplotlib" 2>/dev/null ||
    missing="$missing python3-matplotlib"
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    else
        echo "warning: missing$missing; the tests that need them will be skipped" >&2
    fi
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo build --workspace   # includes libhashfs_preload.so, which the shim tests load
cargo test --workspace
# The portable fallbacks: the weakest flush instruction and scalar hashing, through the
# real mmap device (CLI tests) and the file system (model tests).
HASHFS_FLUSH=clflush HASHFS_SIMD=scalar cargo test -p hashfs-cli --test cli
HASHFS_SIMD=scalar HASHFS_MODEL_SEEDS=10 cargo test -p hashfs --test model_based
# The conformance suite (model, crash, corrupt-image, full-device, concurrency and churn
# tests) against every other mapping, and the allocator mappings once more with the
# fragmentation generator at layout score 0.7.
for m in extent-tree extent-tree-cached radix-tree cuckoo extent-hash; do
    echo "== conformance suite: mapping $m"
    HASHFS_TEST_MAPPING=$m cargo test -q -p hashfs --tests
done
for m in extent-tree radix-tree cuckoo extent-hash; do
    echo "== conformance suite: mapping $m, layout score 0.7"
    HASHFS_TEST_MAPPING=$m HASHFS_TEST_LAYOUT_SCORE=0.7 cargo test -q -p hashfs --tests
done
