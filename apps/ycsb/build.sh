#!/usr/bin/env bash
# Builds the LevelDB YCSB driver (needs g++ and Debian's libleveldb-dev).
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-../../target/leveldb_ycsb}"
mkdir -p "$(dirname "$out")"
g++ -O2 -std=c++17 -Wall -Wextra -o "$out" leveldb_ycsb.cc -lleveldb
