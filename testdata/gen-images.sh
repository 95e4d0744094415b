#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
# gen-images.sh: build the kernel-oracle image corpus for the foundation layer
# (superblocks, chunk map, subvolumes) in testdata/images/<name>/.
#
#   sudo bash testdata/gen-images.sh            # every image
#   sudo bash testdata/gen-images.sh raid5 gpt2 # only these
#
# Needs root, loop devices, a kernel with btrfs, and the Debian packages
# btrfs-progs, fdisk (sfdisk), mount (losetup), zstd, tar, python3.
#
# Each image is made by mkfs.btrfs and the running kernel on sparse files
# attached as loop devices. Its expected results come only from independent
# sources, recorded after the last read-write unmount:
#   <dev>.dump-super.txt  btrfs inspect-internal dump-super -fa, per device
#   dump-tree-root.txt    btrfs inspect-internal dump-tree -t root
#   subvol-list*.txt      btrfs subvolume list (all, -d deleted, -r readonly,
#                         -s snapshots with otime in UTC)
#   subvol-get-default.txt  btrfs subvolume get-default
#   subvol-show.txt       btrfs subvolume show for the top level and each one
#   subvol-info.jsonl     the kernel's BTRFS_IOC_GET_SUBVOL_INFO per subvolume
#   sysfs.txt             /sys/fs/btrfs/<fsid>/ (label, sizes, csum, profiles)
#   degraded-*.txt        subvolume list from a ro,degraded kernel mount of a
#                         device subset (proves the subset opens degraded)
# all read from ro mounts (the device hashes are checked to be unchanged).
# testdata/gen_progs2json.py turns them into expected-super.json,
# expected-mirrors.json and expected-subvols.jsonl, cross-checking every
# field between at least two of the sources.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$HERE/images
CONV=$HERE/gen_progs2json.py
ALL=(nested csum-xxhash csum-sha256 csum-blake2 node4k node64k
	raid0 raid1 raid10 raid5 raid6 raid1c3 raid1c4 dup mixed
	metauuid gpt1 mbr1 gpt2 big257g shrunk reused)

[ "$(id -u)" = 0 ] || { echo "gen-images.sh: needs root (mkfs, loop, mount)" >&2; exit 1; }
for t in mkfs.btrfs btrfs btrfstune sfdisk losetup zstd tar python3 sha256sum; do
	command -v "$t" >/dev/null || { echo "gen-images.sh: $t missing" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/hg-gen.XXXXXX)
MNT=/mnt/hg-gen-$$
LOOPS=()

cleanup() {
	set +e
	cd /
	if mountpoint -q "$MNT"; then umount "$MNT" || umount -l "$MNT"; fi
	rmdir "$MNT" 2>/dev/null
	local l
	for l in "${LOOPS[@]}"; do
		btrfs device scan --forget "$l" >/dev/null 2>&1
		losetup -d "$l"
	done
	rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$MNT"

die() { echo "gen-images.sh: $*" >&2; exit 1; }

# attach FILE [losetup options]: sets DEV (not via $(...): LOOPS must grow here)
attach() {
	local f=$1
	shift
	DEV=$(losetup -f --show "$@" "$f")
	LOOPS+=("$DEV")
}

detach_all() {
	local l
	for l in "${LOOPS[@]}"; do
		btrfs device scan --forget "$l" >/dev/null 2>&1 || true
		losetup -d "$l"
	done
	LOOPS=()
}

# devopts DEV...: the mount option list naming every device
devopts() {
	local o="" d
	for d in "$@"; do o+=",device=$d"; done
	echo "${o#,}"
}

mount_rw() { mount -o "$(devopts "${DEVS[@]}")" "${DEVS[0]}" "$MNT"; }

# new_image NAME NDEV SIZE: fresh sparse devices dev1.img.. attached as DEVS
new_image() {
	NAME=$1
	W=$WORK/$1
	D=$OUT/$1
	rm -rf "$W" "$D"
	mkdir -p "$W" "$D"
	DEVS=()
	local i
	for i in $(seq 1 "$2"); do
		truncate -s "$3" "$W/dev$i.img"
		attach "$W/dev$i.img"
		DEVS+=("$DEV")
	done
	echo "== $NAME"
}

# fill DIR N: N small text files and one compressible 290 KB file, so data
# chunks hold real extents
fill() {
	mkdir -p "$1"
	local i
	for i in $(seq 1 "$2"); do echo "$1 file $i" >"$1/f$i"; done
	seq 1 50000 >"$1/big.txt"
}

sub() { btrfs -q subvolume create "$MNT/$1"; }
snap() { btrfs -q subvolume snapshot "$@"; }

# kernel_ro TAG OPTS DEV...: ro mount of DEV... and record what the kernel
# and btrfs-progs (through the kernel's ioctls) report
kernel_ro() {
	local tag=$1 opts=$2
	shift 2
	mount -o "ro,subvolid=5${opts:+,$opts},$(devopts "$@")" "$1" "$MNT"
	local p=$D/$tag
	btrfs subvolume list -a -u -q -R -c -g -p "$MNT" >"${p}subvol-list.txt"
	btrfs subvolume list -d "$MNT" >"${p}subvol-list-d.txt"
	btrfs subvolume list -r "$MNT" >"${p}subvol-list-r.txt"
	TZ=UTC btrfs subvolume list -s "$MNT" >"${p}subvol-list-s.txt"
	btrfs subvolume get-default "$MNT" >"${p}subvol-get-default.txt"
	local paths=("")
	mapfile -t -O 1 paths < <(sed -n 's/.* path \(<FS_TREE>\/\)\{0,1\}//p' "${p}subvol-list.txt")
	local rel
	: >"${p}subvol-show.txt"
	for rel in "${paths[@]}"; do
		btrfs subvolume show "$MNT/$rel" >>"${p}subvol-show.txt"
	done
	python3 "$CONV" ioctl "$MNT" "${paths[@]}" >"${p}subvol-info.jsonl"
	sysfs >"${p}sysfs.txt"
	umount "$MNT"
}

# sysfs: the kernel's per-filesystem sysfs view
sysfs() {
	local fsid=$FSID
	local s=/sys/fs/btrfs/$fsid f
	[ -d "$s" ] || die "$NAME: no $s"
	echo "fsid: $fsid"
	for f in label nodesize sectorsize checksum metadata_uuid generation; do
		[ -e "$s/$f" ] && echo "$f: $(tr '\n' ' ' <"$s/$f" | sed 's/ *$//')"
	done
	echo "features: $(ls "$s/features" | tr '\n' ' ' | sed 's/ *$//')"
	echo "devids: $(ls "$s/devinfo" | sort -n | tr '\n' ' ' | sed 's/ *$//')"
	local missing=""
	for f in "$s"/devinfo/*; do
		[ "$(cat "$f/missing" 2>/dev/null)" = 1 ] && missing+=" ${f##*/}"
	done
	echo "missing:$(echo "$missing" | tr ' ' '\n' | sort -n | tr '\n' ' ' | sed 's/ *$//')"
	for f in data metadata system; do
		[ -d "$s/allocation/$f" ] || continue
		echo "profile.$f: $(find "$s/allocation/$f" -mindepth 1 -maxdepth 1 -type d \
			-printf '%f\n' | sort | tr '\n' ' ' | sed 's/ *$//')"
	done
}

# forget DEV...: drop the kernel's registration so a later mount sees only
# the devices it is given
forget() {
	local d
	for d in "$@"; do btrfs device scan --forget "$d" >/dev/null 2>&1 || true; done
}

# record TAG DEVNAMES... (with DEVMAP name->loop): everything after the last
# rw unmount
record() {
	local tag=$1 i
	shift
	local names=("$@") loops=()
	for i in "${names[@]}"; do loops+=("${DEVMAP[$i]}"); done
	local before after
	before=$(hash_devs "${loops[@]}")
	for i in "${!names[@]}"; do
		btrfs inspect-internal dump-super -fa "${loops[$i]}" \
			>"$D/$tag${names[$i]%.img}.dump-super.txt"
	done
	FSID=$(awk '$1 == "fsid" { print $2; exit }' "$D/$tag${names[0]%.img}.dump-super.txt")
	btrfs device scan "${loops[@]}" >/dev/null
	btrfs inspect-internal dump-tree -t root "${loops[0]}" >"$D/${tag}dump-tree-root.txt"
	forget "${loops[@]}"
	kernel_ro "$tag" "" "${loops[@]}"
	forget "${loops[@]}"
	after=$(hash_devs "${loops[@]}")
	[ "$before" = "$after" ] || die "$NAME: recording changed the devices"
}

# hash_devs DEV...: fingerprint of the devices; a huge sparse one by its
# first GiB and its superblock copies
hash_devs() {
	local d
	for d in "$@"; do
		if [ "$(blockdev --getsize64 "$d")" -gt $((4 << 30)) ]; then
			{ head -c 1G "$d"; dd if="$d" bs=4096 skip=$((256 << 18)) count=1 status=none; } | sha256sum
		else
			sha256sum <"$d"
		fi
	done
}

# degraded SUBSET...: a ro,degraded kernel mount with only SUBSET present;
# the kernel must mount it and list the same subvolumes
degraded() {
	local names=("$@") loops=() n
	for n in "${names[@]}"; do loops+=("${DEVMAP[$n]}"); done
	forget "${DEVS[@]}"
	local tag
	tag="degraded-$(IFS=-; echo "${names[*]%.img}")."
	kernel_ro "$tag" degraded "${loops[@]}"
	forget "${DEVS[@]}"
	# the kernel must really run without the others
	local want="" n2
	for n2 in "${!DEVMAP[@]}"; do
		[[ " ${names[*]} " == *" $n2 "* ]] && continue
		want+=" $(awk '$1 == "dev_item.devid" { print $2; exit }' "$D/${n2%.img}.dump-super.txt")"
	done
	want=$(echo "$want" | tr ' ' '\n' | sort -n | tr '\n' ' ' | sed 's/ *$//')
	grep -qx "missing:$want" "$D/${tag}sysfs.txt" ||
		die "$NAME: degraded mount of ${names[*]}: kernel missing list is not '$want'"
	# the same subvolumes with the same fields as with every device
	cmp -s "$D/subvol-list.txt" "$D/${tag}subvol-list.txt" ||
		die "$NAME: degraded mount of ${names[*]} lists other subvolumes"
	rm -f "$D/${tag}subvol-list-d.txt" "$D/${tag}subvol-list-r.txt" "$D/${tag}subvol-show.txt" \
		"$D/${tag}subvol-info.jsonl" "$D/${tag}subvol-list-s.txt" \
		"$D/${tag}subvol-get-default.txt"
}

# refused SUBSET...: the kernel must refuse a ro,degraded mount of SUBSET
refused() {
	local names=("$@") loops=() n
	for n in "${names[@]}"; do loops+=("${DEVMAP[$n]}"); done
	forget "${DEVS[@]}"
	btrfs device scan "${loops[@]}" >/dev/null 2>&1 || true
	if mount -o ro,degraded "${loops[0]}" "$MNT" 2>/dev/null; then
		umount "$MNT"
		die "$NAME: the kernel mounted ${names[*]} ro,degraded; expected a refusal"
	fi
	forget "${DEVS[@]}"
}

# finish: record, verify degraded subsets named in the manifest, compress
finish() {
	declare -gA DEVMAP=()
	local i
	for i in "${!DEVS[@]}"; do DEVMAP["dev$((i + 1)).img"]=${DEVS[$i]}; done
	if mountpoint -q "$MNT"; then umount "$MNT"; fi
	forget "${DEVS[@]}"
	# shellcheck disable=SC2046
	record "" $(printf '%s\n' "${!DEVMAP[@]}" | sort -V)
	local subset
	while read -r subset; do
		[ -n "$subset" ] || continue
		# shellcheck disable=SC2086
		degraded $subset
	done < <(python3 -c 'import json,sys
for c in json.load(open(sys.argv[1]))["checks"]:
    if c.get("degraded"): print(" ".join(c["devices"]))' "$D/manifest.json")
	while read -r subset; do
		[ -n "$subset" ] || continue
		# shellcheck disable=SC2086
		refused $subset
	done < <(python3 -c 'import json,sys
for c in json.load(open(sys.argv[1]))["checks"]:
    if c.get("refused"): print(" ".join(c["devices"]))' "$D/manifest.json")
	detach_all
	compress
	python3 "$CONV" convert "$D"
}

# compress: devN.img.zst, or for a huge sparse device a sparse tar
# (devN.img.tar.zst), since zstd would decompress every zero of it
compress() {
	local f b
	for f in "$W"/*.img; do
		b=$(basename "$f")
		if [ "$(stat -c %s "$f")" -gt $((4 << 30)) ]; then
			tar -C "$W" --sparse --format=gnu -cf - "$b" | zstd -q -19 -f -o "$D/$b.tar.zst"
		else
			zstd -q -19 --long -f "$f" -o "$D/$b.zst"
		fi
	done
	rm -f "$W"/*.img
}

# manifest DEVS-JSON PROFILE-JSON EXERCISES [CHECK-JSON...]: the per-image
# manifest.json; the plain full check (every device, shuffled) comes first
manifest() {
	local devs=$1 profile=$2 what=$3
	shift 3
	python3 - "$D/manifest.json" "$NAME" "$devs" "$profile" "$what" "$MKFS" "$SIZE" "$@" <<'EOF'
import json, sys
out, name, devs, profile, what, mkfs, size = sys.argv[1:8]
devs = json.loads(devs)
checks = [{"fs": "", "devices": devs, "args": [], "exit": [0], "shuffle": len(devs) > 1,
           "what": "every device"}]
checks += [json.loads(c) for c in sys.argv[8:]]
for c in checks:
    c.setdefault("commands", ["super", "subvols"])
    c.setdefault("devices", devs)
    c.setdefault("fs", "")
    c.setdefault("args", [])
    c.setdefault("exit", [0, 1] if c.get("degraded") else [0])
m = {"name": name, "exercises": what, "mkfs": mkfs, "profile": json.loads(profile),
     "files": {d: int(size) for d in devs},
     "filesystems": {"": {"devices": devs}}, "checks": checks}
json.dump(m, open(out, "w"), indent=1)
open(out, "a").write("\n")
EOF
}

devlist() { # N -> ["dev1.img",...]
	python3 -c 'import json,sys; print(json.dumps(["dev%d.img" % i for i in range(1, int(sys.argv[1]) + 1)]))' "$1"
}

deg() { # dev names... -> degraded check JSON
	python3 -c 'import json,sys; print(json.dumps({"devices": sys.argv[1:], "degraded": True,
"what": "degraded: only " + " ".join(sys.argv[1:])}))' "$@"
}

toofew() { # message, dev names... -> "too few devices" check JSON: exit 2 and
	# the message on stderr; finish() checks that the kernel refuses them too
	python3 -c 'import json,sys; print(json.dumps({"devices": sys.argv[2:], "exit": [2],
"stderr": sys.argv[1], "refused": True, "what": "too few devices: only " + " ".join(sys.argv[2:])}))' "$@"
}

mkfs_() { MKFS="mkfs.btrfs $*"; mkfs.btrfs -q -f -K "$@" "${DEVS[@]}" >/dev/null; }

# ---------------------------------------------------------------- images

img_nested() {
	SIZE=$((128 << 20))
	new_image nested 1 $SIZE
	mkfs_ -L foundation-nested
	mount_rw
	cd "$MNT"
	sub a; sub a/b; sub a/b/c; sub a/b/c/d
	fill a 5; fill a/b/c/d 3
	mkdir -p dir1/dir2 snaps recv
	sub dir1/dir2/sv; fill dir1/dir2/sv 2
	snap a snaps/a-snap1                     # holds a stub for a/b
	snap -r a/b snaps/b-ro                   # readonly, holds a stub for c
	snap snaps/a-snap1 snaps/a-snap1-snap    # snapshot of a snapshot
	sub old-name; mv old-name new-name     # renamed
	btrfs property set -ts new-name ro true  # readonly without being a snapshot
	sub mover1; mv mover1 dir1/dir2/       # moved into a directory
	sub mover2; mv mover2 a/b/             # moved into another subvolume
	sub gone; fill gone 10                 # deleted and cleaned: id gap
	btrfs -q subvolume delete -c gone
	btrfs subvolume sync "$MNT"
	snap -r a/b/c/d snaps/d-ro1              # send | receive
	echo more >a/b/c/d/new
	snap -r a/b/c/d snaps/d-ro2
	btrfs -q send snaps/d-ro1 | btrfs -q receive recv
	btrfs -q send -p snaps/d-ro1 snaps/d-ro2 | btrfs -q receive recv
	btrfs subvolume set-default a/b/c
	manifest "$(devlist 1)" '{"data":"single","metadata":"dup","system":"dup"}' \
		"defaults (16K nodes, crc32c, DUP metadata), label; nesting depth 4, subvolume in a plain directory, snapshot of a subvolume holding a nested one (stub), readonly snapshot, snapshot of a snapshot, renamed subvolume, subvolume made readonly by property, subvolume moved into a directory and one into another subvolume, a deleted and cleaned subvolume (id gap), full and incremental send|receive (received_uuid, parent_uuid), set-default to a/b/c, a deleted subvolume not yet cleaned (refs 0 + ORPHAN item)" \
		'{"args": ["--super-mirror", "1"], "what": "second superblock copy"}' \
		'{"args": ["--super-mirror", "2"], "exit": [2], "what": "third copy does not fit a 128M device"}'
	sub todel; fill todel 3000             # deleted, not yet cleaned
	sync
	btrfs -q subvolume delete todel
	cd /
	# unmount at once: the cleaner has no time to drop the dead root, so it
	# stays as a ROOT_ITEM with refs 0 plus an ORPHAN item (checked below)
	finish
	grep -q 'ORPHAN ORPHAN_ITEM' "$D/dump-tree-root.txt" ||
		die "nested: the deleted subvolume was cleaned before unmount; run again"
}

# simple NAME SIZE NDEV PROFILE-JSON WHAT MKFS-ARGS...: a few subvolumes and
# files; extra checks in EXTRA (array of JSON)
simple() {
	local name=$1 what=$4 profile=$3 n
	SIZE=$2
	n=${NDEV:-1}
	shift 4
	new_image "$name" "$n" "$SIZE"
	mkfs_ -L "$name" "$@"
	mount_rw
	cd "$MNT"
	fill top 4
	sub home; sub home/user; fill home/user 20
	sub var; fill var/log 5
	mkdir snaps
	snap -r home snaps/home-ro
	snap var snaps/var-1
	sub home/user/deep
	cd /
	manifest "$(devlist "$n")" "$profile" "$what" "${EXTRA[@]}"
	finish
	EXTRA=()
	NDEV=1
}

img_csum() {
	local c=$1 extra=()
	[ "$c" = blake2 ] && extra=(-O '^no-holes,^skinny-metadata')
	EXTRA=()
	simple "csum-$c" $((128 << 20)) '{"data":"single","metadata":"dup","system":"dup"}' \
		"checksum $c on superblock and tree blocks ${extra[*]:+(mkfs ${extra[*]})}" \
		--csum "$c" "${extra[@]}"
}

img_node4k() {
	SIZE=$((128 << 20))
	new_image node4k 1 $SIZE
	mkfs_ -L node4k -n 4096
	mount_rw
	cd "$MNT"
	local i p=chain
	for i in $(seq -w 1 150); do sub "s$i"; done
	sub chain
	for i in $(seq 1 10); do p=$p/n$i; sub "$p"; done
	for i in $(seq -w 1 30); do snap -r s001 "s001/snap$i" >/dev/null; done
	fill s002 50
	cd /
	manifest "$(devlist 1)" '{"data":"single","metadata":"dup","system":"dup"}' \
		"4K nodes: 150 subvolumes, a chain nested 11 deep, 30 snapshots inside a subvolume, so the root tree has several levels" \
		'{"args": ["--super-mirror", "1"], "what": "second superblock copy"}'
	finish
}

img_node64k() {
	EXTRA=()
	simple node64k $((128 << 20)) '{"data":"single","metadata":"dup","system":"dup"}' \
		"64K nodes, quota tree (mkfs -R quota)" -n 65536 -R quota
}

img_raid() {
	local p=$1 n=$2 mp=${3:-$1}
	shift 3 || true
	EXTRA=()
	local s
	for s in "$@"; do
		case $s in
		'!'*) # "!MESSAGE|DEVS": too few devices, even ro,degraded
			local msg=${s%%|*}
			# shellcheck disable=SC2086
			EXTRA+=("$(toofew "${msg#!}" ${s#*|})")
			;;
		*)
			# shellcheck disable=SC2086
			EXTRA+=("$(deg $s)")
			;;
		esac
	done
	NDEV=$n
	simple "$p" $((128 << 20)) "{\"data\":\"$p\",\"metadata\":\"$mp\",\"system\":\"$mp\"}" \
		"$n devices, data $p, metadata $mp: chunk map of the profile${*:+; degraded subsets verified by a ro,degraded kernel mount}" \
		-d "$p" -m "$mp"
}

img_dup() {
	EXTRA=()
	# mkfs needs 240 MiB per device for DUP data
	simple dup $((256 << 20)) '{"data":"dup","metadata":"dup","system":"dup"}' \
		"one device, data and metadata DUP (two stripes on one device)" -d dup -m dup
}

img_mixed() {
	EXTRA=()
	simple mixed $((128 << 20)) '{"data+metadata":"single","system":"single"}' \
		"mixed block groups (data and metadata in one chunk type)" --mixed
}

img_metauuid() {
	SIZE=$((128 << 20))
	new_image metauuid 1 $SIZE
	mkfs_ -L metauuid
	mount_rw
	cd "$MNT"
	sub x; sub x/y; fill x/y 3; snap x x-snap
	cd /
	umount "$MNT"
	forget "${DEVS[@]}"
	btrfstune -m "${DEVS[0]}"
	MKFS="$MKFS; btrfstune -m"
	# the kernel writes new tree blocks after the change, too
	mount_rw
	sub x/after
	fill "$MNT/x/after/d" 2
	manifest "$(devlist 1)" '{"data":"single","metadata":"dup","system":"dup"}' \
		"METADATA_UUID: btrfstune -m after mkfs, so tree blocks carry the old fsid (metadata_uuid)"
	finish
}

# partitioned NAME DISKSIZE SFDISK-SCRIPT: whole-disk image with btrfs in
# every partition; each partition is one filesystem, tag p<N>.
part_image() {
	NAME=$1
	W=$WORK/$1
	D=$OUT/$1
	rm -rf "$W" "$D"
	mkdir -p "$W" "$D"
	echo "== $NAME"
	truncate -s "$2" "$W/disk.img"
	printf '%b' "$3" | sfdisk -q "$W/disk.img" >/dev/null
	sfdisk -d "$W/disk.img" | sed "s|$W/||" >"$D/partition-table.txt"
	SIZE=$(stat -c %s "$W/disk.img")
}

part_fs() { # N START SIZE (sectors): mkfs + content + record as tag pN.
	local n=$1 off=$(($2 * 512)) len=$(($3 * 512))
	attach "$W/disk.img" -o "$off" --sizelimit "$len"
	DEVS=("$DEV")
	mkfs_ -L "$NAME-p$n"
	mount_rw
	cd "$MNT"
	sub "part$n"; fill "part$n/d" 3; sub "part$n/inner"; snap -r "part$n" "snap$n"
	cd /
	umount "$MNT"
	forget "$DEV"
	declare -gA DEVMAP=([disk.img]=$DEV)
	record "p$n." disk.img
	detach_all
}

img_gpt1() {
	part_image gpt1 130M 'label: gpt\nlabel-id: 8F0C5B1E-3A4D-4E2F-9B6A-0C1D2E3F4A51\nstart=2048, size=262144, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="btrfs"\n'
	part_fs 1 2048 262144
	part_manifest "GPT whole-disk image, one btrfs partition at 1 MiB" 1
}

img_mbr1() {
	part_image mbr1 130M 'label: dos\nlabel-id: 0x4b1d2c3e\nstart=2048, size=262144, type=83\n'
	part_fs 1 2048 262144
	part_manifest "MBR whole-disk image, one btrfs partition at 1 MiB" 1
}

img_gpt2() {
	part_image gpt2 260M 'label: gpt\nlabel-id: 8F0C5B1E-3A4D-4E2F-9B6A-0C1D2E3F4A52\nstart=2048, size=262144, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="first"\nstart=264192, size=262144, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="second"\n'
	part_fs 1 2048 262144
	part_fs 2 264192 262144
	part_manifest "GPT whole-disk image with two btrfs filesystems (partitions 1 and 2), chosen by --partition or --offset" 2
}

part_manifest() { # WHAT NPARTS
	MKFS="sfdisk; mkfs.btrfs -L <name>-p<N> on each partition"
	python3 - "$D" "$NAME" "$1" "$2" "$SIZE" <<'EOF'
import json, re, sys
d, name, what, nparts, size = sys.argv[1:6]
parts = [(int(a), int(b)) for a, b in
         re.findall(r"start=\s*(\d+), size=\s*(\d+)", open(d + "/partition-table.txt").read())]
starts = [a for a, b in parts]
fss, checks = {}, []
for n in range(1, int(nparts) + 1):
    tag = "p%d" % n
    fss[tag] = {"devices": ["disk.img"], "partition": n, "offset": starts[n - 1] * 512,
                "size": parts[n - 1][1] * 512}
    checks.append({"fs": tag, "devices": ["disk.img"], "args": ["--partition", str(n)],
                   "exit": [0], "what": "partition %d" % n})
    checks.append({"fs": tag, "devices": ["disk.img"], "args": ["--offset", str(starts[n - 1] * 512)],
                   "exit": [0], "what": "partition %d by byte offset" % n})
if nparts == "1":
    checks.insert(0, {"fs": "p1", "devices": ["disk.img"], "args": [], "exit": [0],
                      "what": "the only btrfs partition, found without options"})
m = {"name": name, "exercises": what, "mkfs": "sfdisk, then mkfs.btrfs per partition",
     "profile": {"data": "single", "metadata": "dup", "system": "dup"},
     "files": {"disk.img": int(size)}, "filesystems": fss, "checks": checks}
with open(d + "/manifest.json", "w") as f:
    json.dump(m, f, indent=1)
    f.write("\n")
EOF
	compress
	python3 "$CONV" convert "$D"
}

img_big257g() {
	SIZE=$((257 << 30))
	new_image big257g 1 $SIZE
	mkfs_ -L big257g
	mount_rw
	cd "$MNT"
	sub a; sub a/b; fill a/b 3
	cd /
	manifest "$(devlist 1)" '{"data":"single","metadata":"dup","system":"dup"}' \
		"257 GiB sparse device: all three superblock copies (64K, 64M, 256G) exist; stored as a sparse tar" \
		'{"args": ["--super-mirror", "1"], "what": "second copy"}' \
		'{"args": ["--super-mirror", "2"], "what": "third copy at 256 GiB"}'
	finish
}

img_shrunk() {
	SIZE=$((257 << 30))
	new_image shrunk 1 $SIZE
	mkfs_ -L shrunk
	mount_rw
	cd "$MNT"
	sub a
	fill a 3
	sync
	# the kernel writes a copy only below the filesystem's device size, so
	# after the shrink the copy at 256 GiB keeps an old generation
	btrfs filesystem resize 8G "$MNT" >/dev/null
	sub b
	fill b/c 3
	sync
	sub a/d
	cd /
	MKFS="$MKFS; btrfs filesystem resize 8G (mounted)"
	manifest "$(devlist 1)" '{"data":"single","metadata":"dup","system":"dup"}' \
		"257 GiB device shrunk to 8 GiB by the kernel: the copy at 256 GiB is valid but stale (older generation); the primary is used" \
		'{"args": ["--super-mirror", "1"], "what": "second copy (current)"}' \
		'{"args": ["--super-mirror", "2"], "super_copy": 2, "commands": ["super"], "exit": [0, 1], "what": "stale third copy: its own fields"}'
	finish
}

img_reused() {
	SIZE=$((128 << 20))
	new_image reused 1 $SIZE
	mkfs_ -L old-fs
	mount_rw
	fill "$MNT/old" 2
	umount "$MNT"
	forget "${DEVS[@]}"
	# a smaller filesystem on the same device: mkfs clears only the copies
	# inside its 60 MiB, so the copy at 64 MiB is the old filesystem's
	mkfs_ -L reused --mixed -b 60M
	MKFS="mkfs.btrfs -L old-fs; mkfs.btrfs -L reused --mixed -b 60M"
	mount_rw
	cd "$MNT"
	sub a
	fill a 3
	local i
	for i in 1 2 3 4 5; do sub "a/s$i"; sync; done  # a generation apart from the old one
	cd /
	manifest "$(devlist 1)" '{"data+metadata":"single","system":"single"}' \
		"60 MiB mixed filesystem on a 128 MiB device that held another filesystem: the copy at 64 MiB belongs to the old one (valid false)"
	finish
}

build() {
	case $1 in
	nested) img_nested ;;
	csum-*) img_csum "${1#csum-}" ;;
	node4k) img_node4k ;;
	node64k) img_node64k ;;
	raid0) img_raid raid0 2 raid0 ;;
	raid1) img_raid raid1 2 raid1 dev1.img dev2.img ;;
	raid10) img_raid raid10 4 raid10 "dev2.img dev3.img dev4.img" "dev1.img dev3.img dev4.img" \
		"dev1.img dev2.img dev4.img" "dev1.img dev2.img dev3.img" ;;
	raid5) img_raid raid5 3 raid5 "dev2.img dev3.img" "dev1.img dev3.img" "dev1.img dev2.img" \
		"!2 of 3 devices missing; raid5 tolerates 1|dev1.img" ;;
	raid6) img_raid raid6 4 raid6 "dev3.img dev4.img" "dev1.img dev2.img" "dev1.img dev4.img" \
		"dev2.img dev3.img" "!3 of 4 devices missing; raid6 tolerates 2|dev1.img" ;;
	raid1c3) img_raid raid1c3 3 raid1c3 dev1.img dev2.img dev3.img ;;
	raid1c4) img_raid raid1c4 4 raid1c4 dev1.img dev4.img "dev2.img dev3.img" ;;
	dup) img_dup ;;
	mixed) img_mixed ;;
	metauuid) img_metauuid ;;
	gpt1) img_gpt1 ;;
	mbr1) img_mbr1 ;;
	gpt2) img_gpt2 ;;
	big257g) img_big257g ;;
	shrunk) img_shrunk ;;
	reused) img_reused ;;
	*) die "unknown image $1 (known: ${ALL[*]})" ;;
	esac
}

EXTRA=()
NDEV=1
[ $# -gt 0 ] || set -- "${ALL[@]}"
mkdir -p "$OUT"
for n in "$@"; do build "$n"; done
{
	echo "kernel $(uname -r)"
	btrfs --version
	echo "made $(date -u +%Y-%m-%d) by testdata/gen-images.sh"
} >"$OUT/GENERATED"
echo "done: $*"
