#!/usr/bin/env bash
# The main job: build everything, run the demonstration workload, then format (once) and
# mount the default image, /dev/shm/hashfs.img, at /mnt/hashfs through FUSE.
#   HASHFS_IMAGE (default /dev/shm/hashfs.img), HASHFS_SIZE (4G), HASHFS_MOUNTPOINT (/mnt/hashfs)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
    [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)" >&2; exit 1; }
if ! command -v fusermount3 >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 >/dev/null
fi
cargo build --release --workspace
hashfs=./target/release/hashfs
if [ "$(id -u)" = 0 ]; then
    # mount(8) and /etc/fstab: `mount -t fuse.hashfs IMAGE DIR -o ro,noatime`.
    $hashfs install-mount-helper /sbin
fi

echo "== demonstration workload"
$hashfs demo --image /dev/shm/hashfs-demo.img --size 1G

image="${HASHFS_IMAGE:-/dev/shm/hashfs.img}"
mnt="${HASHFS_MOUNTPOINT:-/mnt/hashfs}"
echo "== mounting $image on $mnt"
if [ ! -e "$image" ]; then
    $hashfs mkfs "$image" --size "${HASHFS_SIZE:-4G}"
fi
mkdir -p "$mnt"
if grep -q " $mnt fuse" /proc/mounts; then
    echo "$mnt is already mounted"
else
    $hashfs mount "$image" "$mnt"
fi
df -h "$mnt"
cat <<EOT

HashFS is mounted on $mnt: every program can use it.
  unmount:    $hashfs umount $mnt          (or umount $mnt)
  mount(8):   mount -t fuse.hashfs $image $mnt -o noatime
  /etc/fstab: $image $mnt fuse.hashfs defaults,noatime 0 0
  check:      $hashfs fsck $image        (after unmounting)
The other way in, with no system call on the data path (a separate image: one user at a time):
  $hashfs mkfs /dev/shm/shim.img --size 1G
  LD_PRELOAD=$PWD/target/release/libhashfs_preload.so HASHFS_IMAGE=/dev/shm/shim.img HASHFS_MOUNT=/hashfs \\
      python3 -c "import sqlite3; db = sqlite3.connect('/hashfs/test.db'); db.execute('create table t(x)')"
EOT
