#!/usr/bin/env bash
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
# Rebuild testdata/sample.img.zst: the demo image (root + loop devices).
# A top level with files, two subvolumes, nested ones, and snapshots, so
# that inode numbers repeat across subvolumes as they do on real systems.
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)/sample.img.zst
img=$(mktemp /tmp/sample.XXXXXX.img)
mnt=$(mktemp -d /mnt/sample.XXXXXX)
cleanup() { mountpoint -q "$mnt" && umount "$mnt"; rmdir "$mnt"; rm -f "$img"; }
trap cleanup EXIT
truncate -s 128M "$img"
mkfs.btrfs -q -f -L sample "$img"
mount -o loop "$img" "$mnt"
mkdir -p "$mnt/etc" && echo "hello" > "$mnt/etc/motd"
btrfs -q subvolume create "$mnt/home"
btrfs -q subvolume create "$mnt/home/alice"
mkdir -p "$mnt/home/alice/docs"
for i in $(seq 1 20); do echo "note $i" > "$mnt/home/alice/docs/note$i.txt"; done
btrfs -q subvolume create "$mnt/var"
for i in $(seq 1 10); do head -c 5000 /dev/urandom > "$mnt/var/log$i"; done
mkdir "$mnt/snapshots"
btrfs -q subvolume snapshot -r "$mnt/home" "$mnt/snapshots/home-1"
btrfs -q subvolume snapshot "$mnt/home/alice" "$mnt/snapshots/alice-1"
echo "changed" >> "$mnt/home/alice/docs/note1.txt"
btrfs -q subvolume snapshot -r "$mnt/home/alice" "$mnt/snapshots/alice-2"
umount "$mnt"
zstd -q -19 -f "$img" -o "$out"
echo "wrote $out"
