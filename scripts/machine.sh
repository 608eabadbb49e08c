# Sourced by the shim benchmark scripts: `machine_json HASHFS DIR` prints the
# `"machine": {...}, "git_commit": "..."` members every benchmark records: CPU, cores,
# kernel, flush instruction and SIMD level (from `hashfs info` on a scratch image in DIR),
# and DIR's file system (huge=always: 2 MiB pages).
machine_json() {
    local hashfs=$1 dir=$2 img info cpu flush simd mnt commit
    img="$dir/machine-probe-$$.img"
    "$hashfs" mkfs "$img" --size 64M >/dev/null
    info=$("$hashfs" info "$img")
    rm -f "$img"
    cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
    flush=$(echo "$info" | awk '$1 == "flush" {print $2}')
    simd=$(echo "$info" | awk '$1 == "simd" {print $2}')
    mnt=$(awk -v d="$dir" '$2 == d {print $3" "$4}' /proc/mounts)
    commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo -dirty)
    printf '"machine": {"cpu": "%s", "cores": %s, "kernel": "%s", "flush": "%s", "simd": "%s", "image_mount": "%s"}, "git_commit": "%s"' \
        "$cpu" "$(nproc)" "$(uname -r)" "$flush" "$simd" "$mnt" "$commit"
}
