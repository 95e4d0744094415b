#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/scrub.sh: `btrfsimg verify` beside `dd iflag=direct` of the same
# image and the kernel's `btrfs scrub start -B -r` on a loop mount of it.
#
#   sudo bash bench/scrub.sh BUILD/tools/btrfsimg [WORKDIR]
#
# Makes a 3 GiB image with the kernel (16 files of 128 MiB of random data,
# 2,000 small files; metadata DUP), then times the three readers, each from
# a cold page cache for that file (posix_fadvise DONTNEED: other files'
# cache is left alone). The runs are paired by bench/pair.py (A B A B,
# medians of the pair ratios). bench/wholeread.sh pairs `verify` and the
# forensic scan with dd alone, from a dropped page cache.
set -euo pipefail
CLI=$(realpath "$1")
W=${2:-/tmp/scrub-bench}
mkdir -p "$W/mnt"
IMG=$W/bench.img
LOOP=
cleanup() {
	set +e
	mountpoint -q "$W/mnt" && umount "$W/mnt"
	[ -n "$LOOP" ] && losetup -d "$LOOP"
}
trap cleanup EXIT
if [ ! -f "$IMG" ]; then
	truncate -s 3G "$IMG"
	LOOP=$(losetup -f --show "$IMG")
	mkfs.btrfs -q -f "$LOOP"
	mount -o nodiscard "$LOOP" "$W/mnt"
	for i in $(seq 1 16); do head -c 128M /dev/urandom > "$W/mnt/f$i"; done
	mkdir "$W/mnt/small"
	for i in $(seq 1 2000); do head -c $((RANDOM * 3)) /dev/urandom > "$W/mnt/small/s$i"; done
	umount "$W/mnt"
	losetup -d "$LOOP"
	LOOP=
fi
cat > "$W/evict.py" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)
PY
cat > "$W/ours.sh" <<SH
#!/bin/sh
python3 "$W/evict.py" "$IMG"
exec "$CLI" verify -q "$IMG" >/dev/null
SH
cat > "$W/dd.sh" <<SH
#!/bin/sh
exec dd if="$IMG" of=/dev/null bs=4M iflag=direct status=none
SH
cat > "$W/kernel.sh" <<SH
#!/bin/sh
set -e
python3 "$W/evict.py" "$IMG"
L=\$(losetup -f --show -r "$IMG")
trap 'umount "$W/mnt" 2>/dev/null; losetup -d \$L' EXIT
mount -o ro \$L "$W/mnt"
btrfs scrub start -B -r "$W/mnt" >/dev/null
SH
chmod +x "$W"/*.sh
PAIR=$(dirname "$0")/pair.py
python3 "$PAIR" 5 "$W/dd.sh" "$W/ours.sh"
python3 "$PAIR" 5 "$W/kernel.sh" "$W/ours.sh"
