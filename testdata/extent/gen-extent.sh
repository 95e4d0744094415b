#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
# Rebuild testdata/extent/: images written by the real kernel (needs root
# and loop devices) and the kernel's own view of every file in them.
#
#   kernel.img.zst  128 MiB, mkfs defaults (NO_HOLES, data single, metadata
#                   DUP, 16 KiB nodes): per compression (plain, zlib, lzo,
#                   zstd via compress-force) inline files of 0..2049 bytes,
#                   files around 4 KiB and 128 KiB, random / text / zeros,
#                   sparse files, a partial overwrite inside a compressed
#                   extent, appends, inline files grown by truncate and by a
#                   write at 1 MiB; then fallocate with and without
#                   KEEP_SIZE, reflinks (whole file and a cloned range),
#                   nodatacow, a nodatasum mount, a file of 600 extents
#                   spread over several leaves, truncations, a subvolume.
#   dup.img.zst     256 MiB, -d dup -m dup, no NO_HOLES (explicit hole
#                   items), 4 KiB nodes (deep trees; the checksums of the
#                   8 MiB file span several csum leaves): random, compressed,
#                   sparse, inline and many-extent files.
#   <img>.files     "subvol ino size sha256 path" for every regular file,
#                   read by the kernel after a fresh mount (page cache gone).
#   <img>.corrupt   "ino file_offset logical physical..." of one data sector
#                   per chosen file: FIEMAP gives the logical address,
#                   btrfs-progs' dump of the chunk tree every copy's
#                   physical offset (DUP / single: stripe offset + delta).
#   kernel.img.nocsum  the same for two files without data checksums (a
#                   nodatasum mount, chattr +C).
#   dup.img.extents "ino file_offset logical length physical..." of every
#                   extent of two uncompressed files (FIEMAP, dump-tree),
#                   so a test can damage every sector of one copy.
#   kernel.txt      the kernel and btrfs-progs versions used.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/he-extent.XXXXXX)
mnt=$(mktemp -d /mnt/he-extent.XXXXXX)
loop=""

cleanup() {
	mountpoint -q "$mnt" && umount "$mnt"
	[ -n "$loop" ] && losetup -d "$loop"
	rmdir "$mnt"
	rm -rf "$work"
}
trap cleanup EXIT

rnd() { # bytes seed: deterministic incompressible data
	python3 -c "import random,sys; random.seed($2); sys.stdout.buffer.write(random.randbytes($1))"
}
text() { # bytes: deterministic compressible text
	python3 -c "import sys
n = $1
out = b''.join(b'line %07d: the quick brown fox jumps over the lazy dog %d\\n' % (i, i * 7919 % 1000)
               for i in range(n // 40 + 1))
sys.stdout.buffer.write(out[:n])"
}
clone_range() { # src src_off len dst dst_off  (FICLONERANGE)
	python3 - "$@" <<'EOF'
import fcntl, os, struct, sys
src, soff, n, dst, doff = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
s = os.open(src, os.O_RDONLY)
d = os.open(dst, os.O_RDWR)
FICLONERANGE = 0x4020940d
fcntl.ioctl(d, FICLONERANGE, struct.pack("=qQQQ", s, soff, n, doff))
EOF
}

strided() { # file count stride: 4 KiB of text every stride*4 KiB (one extent each)
	python3 - "$@" <<'EOF2'
import os, sys
path, count, stride = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(count):
    os.pwrite(fd, (b'block %06d ' % i).ljust(4095, b'.') + b'\n', i * stride * 4096)
os.close(fd)
EOF2
}

rootid() { # file: id of the subvolume holding it (BTRFS_IOC_INO_LOOKUP, read-only)
	python3 - "$1" <<'EOF2'
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
buf = bytearray(struct.pack("=QQ", 0, 256) + bytes(4080))
fcntl.ioctl(fd, 0xd0009412, buf)
print(struct.unpack_from("=Q", buf)[0])
EOF2
}

attach() { loop=$(losetup -f --show "$1"); }
detach() { losetup -d "$loop"; loop=""; }

fill_mode() { # dir: the files every compression mode gets
	local d=$1 n
	mkdir "$d"
	for n in 0 1 2047 2048 2049 4095 4096 4097 8191 131071 131072 131073 262145; do
		text "$n" >"$d/text-$n"
	done
	rnd 2047 1 >"$d/rnd-2047"
	rnd 300000 2 >"$d/rnd-300k"
	head -c 300000 /dev/zero >"$d/zero-300k"
	text 1048576 >"$d/text-1m"
	text 10000 >"$d/sparse"
	text 10000 | dd of="$d/sparse" bs=1 seek=1048576 conv=notrunc status=none
	truncate -s 3M "$d/sparse"
	text 262144 >"$d/overwrite"
	sync
	# unaligned 4 KiB in the middle of the first 128 KiB (compressed) extent
	rnd 4096 3 | dd of="$d/overwrite" bs=1 seek=$((65536 + 100)) conv=notrunc status=none
	text 5000 >"$d/append"
	text 100 >"$d/inline-grown"
	text 500 >"$d/inline-write-far"
	sync
	text 5000 >>"$d/append"
	truncate -s 100000 "$d/inline-grown"
	text 4096 | dd of="$d/inline-write-far" bs=4096 seek=256 conv=notrunc status=none
	sync
}

build_kernel_img() {
	local img=$work/kernel.img m
	truncate -s 128M "$img"
	mkfs.btrfs -q -f -L he-extent "$img"
	attach "$img"
	mount "$loop" "$mnt"
	fill_mode "$mnt/plain"
	for m in zlib lzo zstd; do
		mount -o remount,compress-force=$m "$mnt"
		fill_mode "$mnt/$m"
	done
	mount -o remount,compress-force=zstd:15 "$mnt"
	text 300000 >"$mnt/zstd/text-level15"
	sync
	mount -o remount,compress=no "$mnt"
	umount "$mnt"
	mount "$loop" "$mnt"
	local t=$mnt/misc
	mkdir "$t"
	fallocate -l 1M "$t/falloc"
	text 10000 | dd of="$t/falloc" bs=1 seek=102400 conv=notrunc status=none
	text 5000 >"$t/falloc-keep"
	fallocate --keep-size -o 4096 -l 1M "$t/falloc-keep"
	touch "$t/falloc-keep-empty"
	fallocate --keep-size -l 64K "$t/falloc-keep-empty"
	cp --reflink=always "$mnt/zstd/text-1m" "$t/reflink-zstd"
	cp --reflink=always "$mnt/plain/rnd-300k" "$t/reflink-plain"
	rnd 8192 4 | dd of="$t/reflink-plain" bs=1 seek=40000 conv=notrunc status=none
	text 524288 >"$t/clone"
	sync
	clone_range "$mnt/zlib/text-1m" 131072 262144 "$t/clone" 65536
	clone_range "$mnt/plain/rnd-300k" 4096 8192 "$t/clone" 458752
	touch "$t/nocow"
	chattr +C "$t/nocow"
	rnd 102400 5 >"$t/nocow"
	sync
	rnd 5000 6 | dd of="$t/nocow" bs=1 seek=30000 conv=notrunc status=none
	strided "$t/many" 600 2
	text 6291456 >"$t/big"
	text 102400 >"$t/trunc-down"
	sync
	truncate -s 50000 "$t/trunc-down"
	text 3000 >"$t/trunc-up"
	sync
	truncate -s 200000 "$t/trunc-up"
	btrfs -q subvolume create "$mnt/sub"
	text 77777 >"$mnt/sub/file"
	sync
	mount -o remount,nodatasum "$mnt"
	mkdir "$mnt/nodatasum"
	text 200000 >"$mnt/nodatasum/text"
	sync
	umount "$mnt"
	detach
}

build_dup_img() {
	local img=$work/dup.img
	truncate -s 256M "$img"
	mkfs.btrfs -q -f -L he-dup -d dup -m dup -n 4096 -O ^no-holes "$img"
	attach "$img"
	mount "$loop" "$mnt"
	rnd 65536 7 >"$mnt/rnd-64k"
	text 1500 >"$mnt/inline"
	text 10000 >"$mnt/sparse"
	text 10000 | dd of="$mnt/sparse" bs=1 seek=1048576 conv=notrunc status=none
	truncate -s 2M "$mnt/sparse"
	strided "$mnt/many" 200 3
	text 8388608 >"$mnt/text-8m"
	sync
	mount -o remount,compress-force=zstd "$mnt"
	text 200000 >"$mnt/zstd"
	sync
	umount "$mnt"
	detach
}

record_files() { # img: mount read-only afresh, list every regular file
	local img=$1 f
	attach "$work/$img"
	mount -o ro "$loop" "$mnt"
	(cd "$mnt" && find . -type f | sort | while read -r f; do
		printf '%s %s %s %s %s\n' "$(rootid "$f")" \
			"$(stat -c %i "$f")" "$(stat -c %s "$f")" \
			"$(sha256sum <"$f" | cut -d' ' -f1)" "${f#./}"
	done) >"$here/$img.files"
	umount "$mnt"
	detach
}

fiemap_first() { # file: logical address of its first extent (FIEMAP)
	filefrag -v -b1 "$1" | awk '$1 == "0:" { sub(/\.\..*/, "", $4); print $4; exit }'
}

phys_of() { # img logical: physical offset of every copy, from btrfs-progs' chunk tree dump
	btrfs inspect-internal dump-tree -t chunk "$1" | awk -v x="$2" '
		/CHUNK_ITEM/ { start = $6 + 0; sub(/\)/, "", start) }
		/^[ \t]*length/ { len = $2 }
		/^[ \t]*stripe [0-9]+ devid/ { if (x >= start && x < start + len) printf "%d ", $6 + (x - start) }' |
		sed 's/ *$//'
}

record_corrupt() { # img out file...: one sector per file, every copy
	local img=$1 out=$2 f ino log
	shift 2
	: >"$work/targets"
	attach "$work/$img"
	mount -o ro "$loop" "$mnt"
	for f in "$@"; do
		ino=$(stat -c %i "$mnt/$f")
		log=$(fiemap_first "$mnt/$f")
		echo "$ino $log" >>"$work/targets"
	done
	umount "$mnt"
	detach
	: >"$here/$out"
	while read -r ino log; do
		# the first data sector of the file (file offset 0)
		echo "$ino 0 $log $(phys_of "$work/$img" "$log")" >>"$here/$out"
	done <"$work/targets"
}

record_extents() { # img file...: every extent, every copy
	local img=$1 f ino
	shift
	: >"$work/targets"
	attach "$work/$img"
	mount -o ro "$loop" "$mnt"
	for f in "$@"; do
		ino=$(stat -c %i "$mnt/$f")
		filefrag -v -b1 "$mnt/$f" | awk -v ino="$ino" '$1 ~ /^[0-9]+:$/ {
			sub(/\.\..*/, "", $2); sub(/\.\..*/, "", $4); sub(/:$/, "", $6)
			print ino, $2, $4, $6 }' >>"$work/targets"
	done
	umount "$mnt"
	detach
	: >"$here/$img.extents"
	while read -r ino fpos log len; do
		echo "$ino $fpos $log $len $(phys_of "$work/$img" "$log")" >>"$here/$img.extents"
	done <"$work/targets"
}

build_kernel_img
build_dup_img
record_files kernel.img
record_files dup.img
record_corrupt kernel.img kernel.img.corrupt plain/rnd-300k zstd/text-1m
record_corrupt kernel.img kernel.img.nocsum nodatasum/text misc/nocow
record_corrupt dup.img dup.img.corrupt rnd-64k zstd
record_extents dup.img text-8m many
for i in kernel dup; do
	zstd -q -19 --long=27 -f "$work/$i.img" -o "$here/$i.img.zst"
done
printf 'kernel %s\n%s\n' "$(uname -r)" "$(mkfs.btrfs --version | head -1)" >"$here/kernel.txt"
ls -l "$here"
