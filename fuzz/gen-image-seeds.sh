#!/usr/bin/env bash
# Rebuild fuzz/corpus/image (root + loop): small images with 4 KiB nodes,
# single metadata, a few subvolumes, files of each kind and compression, so
# that the whole-image target starts from real structures.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/seeds.XXXXXX)
mnt=$(mktemp -d /mnt/seeds.XXXXXX)
cleanup() { mountpoint -q "$mnt" && umount "$mnt"; rmdir "$mnt"; rm -rf "$work"; }
trap cleanup EXIT
mk() { truncate -s 128M "$work/$1.img"; mkfs.btrfs -q -f -n 4096 -m single -d single "${@:2}" "$work/$1.img" >/dev/null; }

mk empty
mk files -O ^no-holes
mount -o loop,compress-force=zstd "$work/files.img" "$mnt"
echo hello > "$mnt/small"; head -c 9000 /dev/zero | tr '\0' 'a' > "$mnt/comp"
head -c 5000 /dev/urandom > "$mnt/rand"; ln -s small "$mnt/link"; mkfifo "$mnt/fifo"
setfattr -n user.k -v v "$mnt/small" 2>/dev/null || true
btrfs -q subvolume create "$mnt/sv"; mkdir "$mnt/sv/d"; echo x > "$mnt/sv/d/f"
btrfs -q subvolume create "$mnt/sv/nested"
btrfs -q subvolume snapshot "$mnt/sv" "$mnt/snap"
ln "$mnt/small" "$mnt/hard"; truncate -s 1M "$mnt/sparse"
umount "$mnt"
mk lzo
mount -o loop,compress-force=lzo "$work/lzo.img" "$mnt"
head -c 20000 /dev/zero | tr '\0' 'b' > "$mnt/l"; echo inline > "$mnt/i"
umount "$mnt"
python3 "$here/make_seeds.py" "$here/corpus/image" "$work"/*.img
