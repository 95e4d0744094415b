#!/bin/sh
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
# Seeds for fuzz/fuzz_partition.c: small whole-disk images with tables
# written by sfdisk (the harness pads them with zeros to larger sizes).
#   mbr-ext      MBR: 2 primaries, extended with 2 logicals
#   ebr-loop     the same with the EBR chain looping back
#   gpt          GPT, 3 partitions, backup header at the end
#   gpt-backup   the same with the primary header damaged
#   gpt-btrfs    GPT whose partition 1 has a btrfs magic at +64 KiB
#   gpt4k        GPT with 4096-byte sectors (needs root: loop device)
#   raw-btrfs    no table, btrfs magic at 64 KiB
set -eu
out=$(cd "$(dirname "$0")/../../fuzz" && pwd)/corpus/partition
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
magic() { printf '_BHRfS_M' | dd of="$1" bs=1 seek=$(($2 + 65600)) conv=notrunc status=none; }

truncate -s 96K "$tmp/m"
printf 'label: dos\nstart=4, size=16, type=83\nstart=20, size=16, type=7\nstart=40, size=150, type=5\nstart=44, size=20, type=83\nstart=70, size=100, type=83\n' |
	sfdisk -q "$tmp/m" >/dev/null 2>&1
cp "$tmp/m" "$out/mbr-ext"
# ebr-loop: the second EBR's link points back to the first (start 0,
# relative to the extended partition at sector 40)
rel=$(od -An -tu4 -j $((40 * 512 + 462 + 8)) -N4 "$tmp/m" | tr -d ' ')
printf '\005\000\000\000\000\000\000\000\001' |
	dd of="$tmp/m" bs=1 seek=$(((40 + rel) * 512 + 462 + 4)) conv=notrunc status=none
cp "$tmp/m" "$out/ebr-loop"

truncate -s 64K "$tmp/g"
printf 'label: gpt\nfirst-lba: 34\nstart=34, size=8\nstart=42, size=16\nstart=58, size=8\n' |
	sfdisk -q "$tmp/g" >/dev/null 2>&1
cp "$tmp/g" "$out/gpt"
printf '\377' | dd of="$tmp/g" bs=1 seek=536 conv=notrunc status=none
cp "$tmp/g" "$out/gpt-backup"

truncate -s 160K "$tmp/b"
printf 'label: gpt\nfirst-lba: 34\nstart=40, size=200\n' | sfdisk -q "$tmp/b" >/dev/null 2>&1
magic "$tmp/b" $((40 * 512))
cp "$tmp/b" "$out/gpt-btrfs"

truncate -s 72K "$tmp/r"
magic "$tmp/r" 0
cp "$tmp/r" "$out/raw-btrfs"

if [ "$(id -u)" = 0 ]; then
	truncate -s 160K "$tmp/4"
	loop=$(losetup -f --show --sector-size 4096 "$tmp/4")
	printf 'label: gpt\nfirst-lba: 6\nstart=6, size=4\nstart=10, size=20\n' |
		sfdisk -q "$loop" >/dev/null 2>&1 || true
	losetup -d "$loop"
	cp "$tmp/4" "$out/gpt4k"
fi
ls -l "$out"
