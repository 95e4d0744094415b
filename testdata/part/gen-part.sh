#!/bin/sh
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
# Regenerate the partition-table fixtures used by tests/unit/test_io.c when
# sfdisk (or root) is unavailable. Tables are written by sfdisk (util-linux,
# Debian package fdisk); its own `sfdisk -d` dump of each image is stored
# beside it as the expected truth (<name>.sfdisk). Images are sparse and
# stored with `zstd -19`; only their first bytes are kept where the rest is
# zeros anyway (<name>.size records the full virtual size).
#
#   mbr-ext     16 MiB, MBR: 2 primaries + extended (slot 3) with 2 logicals
#   gpt3        16 MiB, GPT (512-byte sectors), 3 partitions
#   gpt4k       16 MiB, GPT with 4096-byte sectors (header at byte 4096)
#   gpt-btrfs   300 MiB, GPT, partition 2 made by mkfs.btrfs through a loop
#               device (needs root); first 3 MiB kept: the tables and the
#               partition's primary superblock at 2 MiB + 64 KiB
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mk() { # name size [sfdisk options]
	name=$1 size=$2
	shift 2
	truncate -s "$size" "$tmp/$name.img"
	sfdisk -q "$@" "$tmp/$name.img" <"$tmp/script"
	sfdisk -d "$@" "$tmp/$name.img" | sed "s|$tmp/||" >"$name.sfdisk"
	stat -c %s "$tmp/$name.img" >"$name.size"
}

printf 'label: dos\nlabel-id: 0x12345678\nstart=2048, size=4096, type=83\nstart=6144, size=4096, type=83\nstart=10240, type=5\nstart=12288, size=4096, type=83\nstart=18432, size=4096, type=83\n' >"$tmp/script"
mk mbr-ext 16M
printf 'label: gpt\nlabel-id: 6A8E1C8C-2F0A-4B0C-9C35-A61BB0E4B001\nsize=4096\nsize=8192\nsize=4096\n' >"$tmp/script"
mk gpt3 16M
for n in mbr-ext gpt3; do
	zstd -q -19 -f "$tmp/$n.img" -o "$n.img.zst"
done
[ "$(id -u)" = 0 ] || exit 0

# 4096-byte sectors: sfdisk takes the sector size from the device, so it
# writes through a loop device with 4096-byte logical sectors
printf 'label: gpt\nlabel-id: 6A8E1C8C-2F0A-4B0C-9C35-A61BB0E4B002\nsize=1M\nsize=2M\nsize=1M\n' >"$tmp/script"
truncate -s 16M "$tmp/gpt4k.img"
loop=$(losetup -f --show --sector-size 4096 "$tmp/gpt4k.img")
sfdisk -q "$loop" <"$tmp/script"
sfdisk -d "$loop" | sed "s|$loop|gpt4k.img|" >gpt4k.sfdisk
losetup -d "$loop"
stat -c %s "$tmp/gpt4k.img" >gpt4k.size
zstd -q -19 -f "$tmp/gpt4k.img" -o gpt4k.img.zst

printf 'label: gpt\nlabel-id: 6A8E1C8C-2F0A-4B0C-9C35-A61BB0E4B003\nsize=2048\nsize=260M\nsize=4096\n' >"$tmp/script"
mk gpt-btrfs 300M
start=$(sed -n 's/.*img2 : start= *\([0-9]*\), size= *\([0-9]*\).*/\1/p' gpt-btrfs.sfdisk)
size=$(sed -n 's/.*img2 : start= *\([0-9]*\), size= *\([0-9]*\).*/\2/p' gpt-btrfs.sfdisk)
loop=$(losetup -f --show -o $((start * 512)) --sizelimit $((size * 512)) "$tmp/gpt-btrfs.img")
mkfs.btrfs -q -f -U 6a8e1c8c-2f0a-4b0c-9c35-a61bb0e4b004 "$loop" >/dev/null
blkid -p -s TYPE -o value "$loop" >"$tmp/type"
losetup -d "$loop"
# what blkid sees in partition 2: the truth for "is btrfs"
echo "2 $(cat "$tmp/type")" >gpt-btrfs.blkid
# a file, not a pipe, so the frame records its size
head -c 3M "$tmp/gpt-btrfs.img" >"$tmp/head.img"
zstd -q -19 -f "$tmp/head.img" -o gpt-btrfs.img.zst
