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
# The FUSE tests need fuse3 (fusermount3) and rsync from Debian.
missing=""
command -v fusermount3 >/dev/null || missing="$missing fuse3"
command -v rsync >/dev/null || missing="$missing rsync"
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    else
        echo "warning: missing$missing; the FUSE tests will be skipped" >&2
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
