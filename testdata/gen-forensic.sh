#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
# Rebuild testdata/forensic/: btrfs images on which the kernel wrote,
# rewrote, truncated and deleted files and dropped a subvolume in rounds
# (testdata/gen_forensic.py), with the sha256 of every version ever written
# and what the kernel shows at the end. For tests/images/test_forensic.py. Needs
# root, loop devices, btrfs-progs, zstd, chattr, python3.
#
#   gen-forensic.sh [OUTDIR [NAME...]]
#
# Writes, per image NAME (all of them unless named: single: one device,
# metadata dup; multi: two devices, metadata raid1, data single; orphan: a
# file unlinked while open, testdata/gen_forensic_orphan.py; span: a
# deleted file whose extent items fill several leaves,
# testdata/gen_forensic_span.py; churn: 4 KiB nodes, files, directories and
# a subvolume deleted, then every metadata chunk relocated (balance -m)
# and the freed metadata written over, testdata/gen_forensic_churn.py,
# mounted nodiscard; wrap: the same with 240 rounds of churn instead of
# 40, which go round the metadata chunk and write over the later roots):
#   NAME.img.zst (multi: NAME.1.img.zst NAME.2.img.zst)   zstd -19 --long
#   NAME.truth.json   versions and the live view (gen_forensic.py)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/forensic}
shift || true
want=" ${*:-single multi orphan span churn wrap} "
mkdir -p "$out"
work=$(mktemp -d /tmp/past-forensic.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"
loops=()
cleanup() {
	umount "$mnt" 2>/dev/null || true
	for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

make_image() { # NAME NDEV MKFS-ARGS...
	local name=$1 ndev=$2
	shift 2
	local devs=()
	loops=()
	for i in $(seq 1 "$ndev"); do
		truncate -s 160M "$work/$name.$i.img"
		local l
		l=$(losetup -f --show "$work/$name.$i.img")
		loops+=("$l")
		devs+=("$l")
	done
	mkfs.btrfs -q -f "$@" "${devs[@]}" >/dev/null
	btrfs device scan "${devs[@]}" >/dev/null 2>&1 || true
	mount -o noatime "${devs[0]}" "$mnt"
	python3 "$here/gen_forensic.py" "$mnt" "$out/$name.truth.json"
	umount "$mnt"
	for l in "${loops[@]}"; do losetup -d "$l"; done
	loops=()
	if [ "$ndev" = 1 ]; then
		zstd -q -19 --long=27 -f "$work/$name.1.img" -o "$out/$name.img.zst"
	else
		for i in $(seq 1 "$ndev"); do
			zstd -q -19 --long=27 -f "$work/$name.$i.img" -o "$out/$name.$i.img.zst"
		done
	fi
}

case $want in *" single "*) make_image single 1 -m dup -d single ;; esac
case $want in *" multi "*) make_image multi 2 -m raid1 -d single ;; esac

# orphan: a file unlinked while open, the image copied before the close
if [[ $want == *" orphan "* ]]; then
truncate -s 128M "$work/orphan.img"
l=$(losetup -f --show "$work/orphan.img")
loops=("$l")
mkfs.btrfs -q -f "$l" >/dev/null
mount -o noatime "$l" "$mnt"
python3 "$here/gen_forensic_orphan.py" "$mnt" "$work/orphan.img" "$work/orphan.copy.img" \
	"$out/orphan.truth.json"
umount "$mnt"
losetup -d "$l"
loops=()
zstd -q -19 --long=27 -f "$work/orphan.copy.img" -o "$out/orphan.img.zst"
fi

# span: a deleted file whose extent items run over several 4 KiB leaves
if [[ $want == *" span "* ]]; then
truncate -s 128M "$work/span.img"
l=$(losetup -f --show "$work/span.img")
loops=("$l")
mkfs.btrfs -q -f -n 4096 "$l" >/dev/null
mount -o noatime "$l" "$mnt"
python3 "$here/gen_forensic_span.py" "$mnt" "$out/span.truth.json"
umount "$mnt"
losetup -d "$l"
loops=()
zstd -q -19 --long=27 -f "$work/span.img" -o "$out/span.img.zst"
fi

# churn, wrap: the old trees out of reach of every root (balance -m,
# churn); nodiscard, as on a disk without discard: freed chunks keep
# their bytes
churn_image() { # NAME ROUNDS
	truncate -s 128M "$work/$1.img"
	l=$(losetup -f --show "$work/$1.img")
	loops=("$l")
	mkfs.btrfs -q -f -n 4096 -m dup -d single "$l" >/dev/null
	mount -o noatime,nodiscard "$l" "$mnt"
	python3 "$here/gen_forensic_churn.py" "$mnt" "$out/$1.truth.json" "$2"
	umount "$mnt"
	losetup -d "$l"
	loops=()
	zstd -q -19 --long=27 -f "$work/$1.img" -o "$out/$1.img.zst"
}
case $want in *" churn "*) churn_image churn 40 ;; esac
case $want in *" wrap "*) churn_image wrap 240 ;; esac
ls -l "$out"
