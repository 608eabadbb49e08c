#!/usr/bin/env bash
# SPFS's lower file system for the stacked benchmarks: ext4 on a loop device over a file on
# the machine's real disk, with direct I/O so that the loop device does not cache it in the
# page cache a second time (on tmpfs, ext4's fsync would be nearly free and the effect
# SPFS exists for would disappear).
#   scripts/stacked-lower.sh up [DIR] [SIZE]   (default /mnt/hashfs-lower, 8G; backing file
#                                               DIR.img next to /var/tmp)
#   scripts/stacked-lower.sh down [DIR]
set -euo pipefail
cmd=${1:-up}
dir=${2:-/mnt/hashfs-lower}
size=${3:-8G}
backing=/var/tmp/$(basename "$dir").img
case "$cmd" in
up)
    if mountpoint -q "$dir"; then
        echo "$dir is already mounted"
        exit 0
    fi
    [ "$(id -u)" = 0 ] || { echo "needs root (losetup, mount)" >&2; exit 1; }
    command -v mkfs.ext4 >/dev/null || { echo "needs mkfs.ext4 (e2fsprogs)" >&2; exit 1; }
    fstype=$(stat -f -c %T /var/tmp)
    case "$fstype" in tmpfs|ramfs) echo "/var/tmp is $fstype: the backing file must be on a disk" >&2; exit 1 ;; esac
    rm -f "$backing"
    truncate -s "$size" "$backing"
    loop=$(losetup --find --show --direct-io=on "$backing")
    mkfs.ext4 -q -F "$loop"
    mkdir -p "$dir"
    mount -t ext4 "$loop" "$dir"
    echo "ext4 on $loop (backing $backing on $fstype, direct I/O) mounted at $dir"
    ;;
down)
    if mountpoint -q "$dir"; then
        loop=$(findmnt -n -o SOURCE "$dir")
        umount "$dir"
        losetup -d "$loop"
    fi
    rm -f "$backing"
    ;;
*)
    echo "usage: $0 up|down [DIR] [SIZE]" >&2
    exit 1
    ;;
esac
