#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
# gen-logtree.sh: build the log-tree crash images and record what the kernel
# makes of them. Needs root, loop devices, a kernel with btrfs, btrfs-progs,
# zstd, python3.
#
#   sudo bash testdata/logtree/gen-logtree.sh            # every scenario
#   sudo bash testdata/logtree/gen-logtree.sh ops links  # only these
#
# For each scenario NAME (populators in gen_logtree_pop.py):
#   1. mkfs a 128 MiB image (1 GiB for extents), mount it with commit=300
#      (holes: mkfs -O ^no-holes; extents: -o compress=zstd), build the base state
#      and sync (committed); then make the changes, each followed by an
#      fsync, so they live only in the log tree; copy the backing file
#      while still mounted: the copy is a crash image, superblock
#      log_root != 0 (checked).
#   2. NAME.nolog.view.ID.txt: the kernel's view with
#      -o ro,noatime,rescue=nologreplay (the last committed state).
#   3. NAME.view.ID.txt: the kernel's view after a normal mount of a copy,
#      which replays the log (rw, noatime; recorded twice, the second time
#      on a fresh ro mount, and both must agree).
#   4. NAME.replayed.patch.zst: that copy after unmounting: the kernel's
#      replay, committed; its fs trees are the item-level truth. Stored as
#      a zstd patch against the crash image (zstd -d --long=30
#      --patch-from=NAME.crash.img).
#   5. NAME.crash.img.zst, NAME.super.txt (dump-super of the crash image).
# ID is 5 for the top level and each subvolume's id (gen_logtree_view.py formats).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
ALL=(ops links extents holes misc)
declare -A MKFS=([holes]="-O ^no-holes")
declare -A MOUNT=([extents]="compress=zstd")
# extents: on a small filesystem the many writes run out of metadata space
# and the kernel commits, emptying the log
declare -A SIZE=([extents]=1G)

[ "$(id -u)" = 0 ] || { echo "gen-logtree.sh: needs root" >&2; exit 2; }
for t in mkfs.btrfs btrfs losetup zstd python3; do
	command -v "$t" >/dev/null || { echo "gen-logtree.sh: $t missing" >&2; exit 2; }
done

work=$(mktemp -d /tmp/hl-logtree.XXXXXX)
mnt=/mnt/hl-logtree-$$
loop=""
cleanup() {
	set +e
	if mountpoint -q "$mnt"; then umount "$mnt" || umount -l "$mnt"; fi
	[ -n "$loop" ] && losetup -d "$loop"
	rmdir "$mnt" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$mnt"

attach() { loop=$(losetup --find --show "$1"); }
detach() { losetup -d "$loop"; loop=""; }

# views SUFFIX: one view file per subvolume of the mounted filesystem
views() {
	local name=$1 suffix=$2 id path
	python3 "$here/gen_logtree_view.py" "$mnt" >"$work/$name$suffix.view.5.txt"
	btrfs subvolume list -o "$mnt" | while read -r _ id _ _ _ _ _ _ path; do
		python3 "$here/gen_logtree_view.py" "$mnt/$path" >"$work/$name$suffix.view.$id.txt"
	done
}

scenario() {
	local name=$1 img="$work/$1.img" crash="$work/$1.crash.img" rep="$work/$1.replayed.img"
	echo "== $name"
	truncate -s "${SIZE[$name]:-128M}" "$img"
	# shellcheck disable=SC2086
	mkfs.btrfs -q -f ${MKFS[$name]:-} "$img" >/dev/null
	attach "$img"
	mount -o "commit=300${MOUNT[$name]:+,${MOUNT[$name]}}" "$loop" "$mnt"
	python3 "$here/gen_logtree_pop.py" "$name" base "$mnt"
	sync
	python3 "$here/gen_logtree_pop.py" "$name" fsync "$mnt"
	cp --sparse=always "$img" "$crash"
	umount "$mnt"
	detach
	local lr
	lr=$(btrfs inspect-internal dump-super "$crash" | awk '$1 == "log_root" {print $2}')
	[ "$lr" != 0 ] || { echo "gen-logtree.sh: $name: the copy has no log tree" >&2; exit 1; }

	cp --sparse=always "$crash" "$work/t.img"
	attach "$work/t.img"
	mount -o ro,noatime,rescue=nologreplay "$loop" "$mnt"
	views "$name" .nolog
	umount "$mnt"
	detach

	cp --sparse=always "$crash" "$rep"
	attach "$rep"
	mount -o noatime "$loop" "$mnt"		# replays the log
	views "$name" ""
	umount "$mnt"
	mount -o ro,noatime "$loop" "$mnt"
	mkdir -p "$work/again"
	cp "$work/$name".view.*.txt "$work/again/"
	views "$name" ""
	umount "$mnt"
	detach
	for f in "$work/$name".view.*.txt; do
		cmp -s "$f" "$work/again/$(basename "$f")" ||
			{ echo "gen-logtree.sh: $name: the view changed between mounts" >&2; exit 1; }
	done
	rm -rf "$work/again" "$work/t.img" "$img"

	btrfs inspect-internal dump-super "$crash" >"$here/$name.super.txt"
	rm -f "$here/$name".*view.*.txt
	mv "$work/$name".*view.*.txt "$here/"
	zstd -q -19 --long -T0 -f "$crash" -o "$here/$name.crash.img.zst"
	# stored as a patch against the crash image (they share almost every block)
	zstd -q -q -19 --long=30 -T0 -f --patch-from="$crash" "$rep" -o "$here/$name.replayed.patch.zst"
	rm -f "$crash" "$rep"
}

for s in "${@:-${ALL[@]}}"; do
	scenario "$s"
done
echo "kernel $(uname -r), $(btrfs --version | head -1)" >"$here/GENERATED"
