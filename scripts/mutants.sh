#!/usr/bin/env bash
# Mutation testing of the persistence code against the crash explorer: cargo-mutants
# rewrites journal.rs, fs/recovery.rs and fs/dir.rs one small change at a time (an operator
# swapped, a function body replaced) and runs the journal's unit tests and the explorer on
# every single operation (HashFS mapping); a mutant that passes them "survives".
#
#   ./scripts/mutants.sh                       # the three files (hours on 2 cores)
#   ./scripts/mutants.sh crates/hashfs/src/journal.rs
#
# Results: mutants.out/ (outcomes.json, caught.txt, missed.txt); not committed.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
    [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
command -v cargo-mutants >/dev/null || cargo install cargo-mutants --locked
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(crates/hashfs/src/journal.rs crates/hashfs/src/fs/recovery.rs crates/hashfs/src/fs/dir.rs)
args=()
for f in "${files[@]}"; do args+=(--file "$f"); done
exec cargo mutants -p hashfs "${args[@]}" --timeout 600 -- \
    --lib --test crash_consistency -- journal explore_every_single_operation
