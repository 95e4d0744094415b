#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/wholeread.sh: the whole-device readers (`btrfsimg verify`, the
# forensic scan behind `btrfsimg history`, and btrfs-progs'
# `btrfs-find-root -a`) beside `dd iflag=direct bs=8M` of the same image,
# each from a cold page cache.
#
#   sudo bash bench/wholeread.sh BUILD/tools/btrfsimg [PAIRS] [IMAGE]
#
# Without IMAGE, makes (once) /var/tmp/bi-bench/wholeread-3g.img with the
# kernel: a 3 GiB filesystem (mkfs.btrfs defaults, metadata DUP) holding 16
# files of 128 MiB of random data and 2,000 small ones, 8 more 16 MiB files
# written and deleted before them (freed tree blocks for the scan to find).
# Each run starts with `echo 3 > /proc/sys/vm/drop_caches`. Runs are paired
# (dd, then the reader; PAIRS pairs, default 5) so that load from other
# work on the machine falls on both alike; for each reader it prints
# wall min/median/max, the median of the per-pair ratios reader/dd (with
# their min and max), the median CPU time (user+system), and the load
# average before and after.
set -euo pipefail
CLI=$(realpath "$1")
PAIRS=${2:-5}
IMG=${3:-}
if [ -z "$IMG" ]; then
	IMG=/var/tmp/bi-bench/wholeread-3g.img
	if [ ! -f "$IMG" ]; then
		mkdir -p /var/tmp/bi-bench
		MNT=$(mktemp -d /tmp/wholeread-mnt.XXXXXX)
		LOOP=
		cleanup() {
			set +e
			mountpoint -q "$MNT" && umount "$MNT"
			[ -n "$LOOP" ] && losetup -d "$LOOP"
			rmdir "$MNT"
			rm -f "$IMG.tmp"
		}
		trap cleanup EXIT
		truncate -s 3G "$IMG.tmp"
		LOOP=$(losetup -f --show "$IMG.tmp")
		mkfs.btrfs -q -f "$LOOP" >/dev/null 2>&1
		mount -o nodiscard "$LOOP" "$MNT"
		for i in $(seq 1 8); do head -c 16M /dev/urandom >"$MNT/old$i"; done
		sync
		rm "$MNT"/old*
		sync
		for i in $(seq 1 16); do head -c 128M /dev/urandom >"$MNT/f$i"; done
		mkdir "$MNT/small"
		for i in $(seq 1 2000); do
			head -c $((RANDOM * 3)) /dev/urandom >"$MNT/small/s$i"
		done
		umount "$MNT"
		losetup -d "$LOOP"
		LOOP=
		mv "$IMG.tmp" "$IMG"
		trap - EXIT
		rmdir "$MNT"
	fi
fi
[ -w /proc/sys/vm/drop_caches ] || {
	echo "wholeread.sh: needs root (drop_caches)" >&2
	exit 2
}

cold() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}
# One timed run from a cold cache: prints "wall cpu".
run() {
	cold
	local t
	t=$(mktemp)
	/usr/bin/time -o "$t" -f '%e %U %S' "$@" >/dev/null 2>&1 || true
	awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' "$t"
	rm -f "$t"
}
stats() { # min median max of the numbers on stdin
	sort -g | awk '{ v[NR] = $1 } END {
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.3f %.3f %.3f", v[1], m, v[NR] }'
}

echo "image: $IMG ($(du -h "$IMG" | cut -f1) allocated of $(du -h --apparent-size "$IMG" | cut -f1))"
echo "nproc $(nproc), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-12s %-22s %-22s %-22s %s\n' reader "wall min/med/max s" "dd wall min/med/max s" \
	"ratio to dd min/med/max" "CPU med s (dd)"
bench() {
	local name=$1
	shift
	local W D R C DC
	W=$(mktemp) D=$(mktemp) R=$(mktemp) C=$(mktemp) DC=$(mktemp)
	for _ in $(seq 1 "$PAIRS"); do
		read -r dw dc < <(run dd if="$IMG" of=/dev/null bs=8M iflag=direct)
		read -r rw rc < <(run "$@")
		echo "$dw" >>"$D"
		echo "$dc" >>"$DC"
		echo "$rw" >>"$W"
		echo "$rc" >>"$C"
		awk -v a="$rw" -v b="$dw" 'BEGIN { printf "%.3f\n", a / b }' >>"$R"
	done
	printf '%-12s %-22s %-22s %-22s %s (%s)\n' "$name" "$(stats <"$W")" "$(stats <"$D")" \
		"$(stats <"$R")" "$(stats <"$C" | cut -d' ' -f2)" "$(stats <"$DC" | cut -d' ' -f2)"
	rm -f "$W" "$D" "$R" "$C" "$DC"
}
bench verify "$CLI" verify -q "$IMG"
bench history "$CLI" history --json "$IMG"
bench find-root btrfs-find-root -a "$IMG"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
