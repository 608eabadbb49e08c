#!/usr/bin/env bash
# The main job: build the hashfs command, format an image on /dev/shm and run a short
# demonstration workload that prints what it did and how fast.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
    [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)" >&2; exit 1; }
cargo build --release -p hashfs-cli
./target/release/hashfs demo --image "${HASHFS_IMAGE:-/dev/shm/hashfs-demo.img}" --size "${HASHFS_SIZE:-1G}"
