#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
# gen-nfs.sh: what NFSv3 and NFSv4.2 clients of the seed-patched kernel (the
# nfsd ino_uniquifier, patch v2, and inumbits=, ported to 6.1: see
# /work/shared/reference/seed-kernel/README.md) show for each path of an image,
# recorded in a qemu VM into testdata/nfs/<image>.nfs.tsv.zst.
#
#   sudo bash testdata/gen-nfs.sh image                 # testdata/nfs/nfs1.img.zst
#   sudo bash testdata/gen-nfs.sh record BZIMAGE NAME=IMG.zst ...
#
# Needs root and loop devices (image), and for record: qemu-system-x86_64
# (TCG), busybox-static, rpcbind, nfs-kernel-server, nfs-common, gcc, zstd.
#
# record boots the kernel once per image and mount option ("" and
# "inumbits=56") with an initramfs holding busybox, testdata/nfs/nfswalk.c
# (static) and Debian's rpcbind, rpc.mountd, rpc.nfsd, exportfs, mount.nfs
# with their libraries. Inside: the image (a virtio disk, writes discarded)
# is mounted ro with the option, exported to 127.0.0.1
# (ro,fsid=0,crossmnt,no_subtree_check), mounted with vers=3,nolock and
# vers=4.2, and walked three times: locally (tag L), over v3 (V3), over v4
# (V4). Lines: OPT<TAB>TAG<TAB>path<TAB>st_ino<TAB>d_ino<TAB>st_dev, written
# to a second virtio disk and read back here.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$HERE/nfs

[ "$(id -u)" = 0 ] || { echo "gen-nfs.sh: needs root" >&2; exit 1; }

# nfs1: nested subvolumes (3 deep), a subvolume in a plain directory, a
# snapshot of a subvolume holding a nested one (a stub), hard links,
# symlinks, ~200 paths.
make_image() {
	local work mnt loop
	work=$(mktemp -d /tmp/gen-nfs.XXXXXX)
	mnt=$(mktemp -d /tmp/gen-nfs-mnt.XXXXXX)
	truncate -s 128M "$work/nfs1.img"
	mkfs.btrfs -q -L nfs1 "$work/nfs1.img"
	loop=$(losetup -f --show "$work/nfs1.img")
	mount "$loop" "$mnt"
	(
		cd "$mnt"
		fill() { # DIR N: N files in DIR/d1/d2 and DIR, a link and a symlink
			mkdir -p "$1/d1/d2"
			for i in $(seq 1 "$2"); do echo "file $1 $i" > "$1/f$i"; done
			echo text > "$1/d1/d2/text"
			ln "$1/f1" "$1/d1/hard"
			ln -s ../f1 "$1/d1/sym"
		}
		fill . 20
		btrfs -q subvolume create sv000
		fill sv000 30
		btrfs -q subvolume create sv000/sv001
		fill sv000/sv001 10
		btrfs -q subvolume create sv000/sv002
		fill sv000/sv002 10
		btrfs -q subvolume create sv000/sv002/deep
		fill sv000/sv002/deep 5
		mkdir -p plain/dir
		btrfs -q subvolume create plain/dir/svp
		fill plain/dir/svp 15
		btrfs -q subvolume snapshot sv000 snap000 >/dev/null
		echo new > snap000/only-in-snap
		btrfs -q subvolume snapshot -r sv000/sv002 rosnap >/dev/null
		for i in $(seq 1 40); do echo "x$i" > "sv000/sv001/many$i"; done
	)
	umount "$mnt"
	losetup -d "$loop"
	rmdir "$mnt"
	zstd -q -19 -f "$work/nfs1.img" -o "$OUT/nfs1.img.zst"
	rm -rf "$work"
}

INIT='#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
opt=""
for a in $(cat /proc/cmdline); do case $a in nfsopt=*) opt=${a#nfsopt=};; esac; done
ifconfig lo 127.0.0.1 up
mkdir -p /run/rpcbind /var/lib/nfs/rpc_pipefs /var/lib/nfs/v4recovery /mnt/b /n3 /n4 /tmp
touch /var/lib/nfs/etab /var/lib/nfs/rmtab
mount -t tmpfs tmpfs /tmp
mount -t nfsd nfsd /proc/fs/nfsd
out=/tmp/out
o=ro,subvolid=5; [ -n "$opt" ] && o=$o,$opt
mount -t btrfs -o $o /dev/vda /mnt/b || echo "MOUNT FAILED" >> $out
echo "gen-nfs: local walk" >&2
nfswalk "L" /mnt/b >> $out
rpcbind -w
exportfs -o ro,fsid=0,crossmnt,no_subtree_check,no_root_squash,insecure 127.0.0.1:/mnt/b
rpc.mountd
rpc.nfsd --grace-time 10 --lease-time 10 4
echo "gen-nfs: nfsd started" >&2
mount.nfs 127.0.0.1:/mnt/b /n3 -o ro,vers=3,nolock,proto=tcp,mountproto=tcp,retry=0 || echo "V3 MOUNT FAILED" >> $out
echo "gen-nfs: v3 mounted" >&2
nfswalk "V3" /n3 >> $out
umount /n3
mount.nfs 127.0.0.1:/ /n4 -o ro,vers=4.2 || echo "V4 MOUNT FAILED" >> $out
echo "gen-nfs: v4 mounted" >&2
nfswalk "V4" /n4 >> $out
umount /n4
echo "@@END" >> $out
dd if=$out of=/dev/vdb bs=1M conv=notrunc,sync 2>/dev/null; sync
reboot -f
'

make_initramfs() { # DIR: the tree, then DIR.cpio
	local d=$1 b l
	mkdir -p "$d"/{bin,sbin,etc,lib64,lib/x86_64-linux-gnu,proc,sys,dev,run,var,tmp,mnt}
	cp /bin/busybox "$d/bin/busybox"
	gcc -O2 -static -o "$d/bin/nfswalk" "$OUT/nfswalk.c"
	for b in rpcbind rpc.mountd rpc.nfsd exportfs mount.nfs; do
		cp "$(command -v $b)" "$d/sbin/"
		for l in $(ldd "$(command -v $b)" | awk '/=>/{print $3} /ld-linux/{print $1}'); do
			cp -n "$l" "$d$l" 2>/dev/null || cp "$l" "$d$l"
		done
	done
	cp /etc/netconfig /etc/services /etc/protocols /etc/rpc "$d/etc/"
	printf 'root:x:0:0::/:/bin/sh\n_rpc:x:100:65534::/run/rpcbind:/bin/false\nstatd:x:101:65534::/var/lib/nfs:/bin/false\nnobody:x:65534:65534::/:/bin/false\n' > "$d/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' > "$d/etc/group"
	printf '127.0.0.1 localhost\n' > "$d/etc/hosts"
	# rpc.mountd reads the mount table when the kernel asks it for a file
	# handle's export (nfsd_fh); without /etc/mtab it crashes
	ln -sf /proc/mounts "$d/etc/mtab"
	: > "$d/etc/fstab"
	printf 'passwd: files\ngroup: files\nhosts: files\n' > "$d/etc/nsswitch.conf"
	printf '%s' "$INIT" > "$d/init"
	chmod 755 "$d/init"
	(cd "$d" && find . | cpio -o -H newc --quiet) > "$d.cpio"
}

# KERNEL CPIO IMG OPT -> stdout: the recorded lines, each prefixed with OPT
boot_once() {
	local work=$4 raw="$work/disk.img" res="$work/res.img"
	: > "$res"
	truncate -s 64M "$res"
	# -no-reboot: the VM's reboot -f ends qemu (the small config has no ACPI
	# to power off with)
	timeout 1200 qemu-system-x86_64 -m 1024 -nographic -no-reboot -accel tcg \
		-kernel "$1" -initrd "$2" \
		-append "console=ttyS0 quiet loglevel=1 panic=-1 nfsopt=$3" \
		-drive file="$raw",format=raw,if=virtio,snapshot=on \
		-drive file="$res",format=raw,if=virtio > "$work/console.txt" 2>&1 || true
	tr -d '\0' < "$res" | grep -q '^@@END' || {
		echo "gen-nfs.sh: no result (see $work/console.txt)" >&2; tail -30 "$work/console.txt" >&2; exit 1; }
	tr -d '\0' < "$res" | grep -v '^@@END' | sed "s/^/${3:-plain}\t/"
}

record() {
	local kernel=$1 work
	shift
	work=$(mktemp -d /tmp/gen-nfs-rec.XXXXXX)
	make_initramfs "$work/root"
	local spec name img opt
	for spec in "$@"; do
		name=${spec%%=*}
		img=${spec#*=}
		zstd -q -d --long=31 -f "$img" -o "$work/disk.img"
		for opt in "" inumbits=56; do
			boot_once "$kernel" "$work/root.cpio" "$opt" "$work"
		done | zstd -q -19 > "$OUT/$name.nfs.tsv.zst"
		echo "$name: $(zstd -dc "$OUT/$name.nfs.tsv.zst" | wc -l) lines" >&2
	done
	rm -rf "$work"
}

case ${1:-} in
image) make_image ;;
initramfs) make_initramfs "$2" ;;
record) shift; record "$@" ;;
*) echo "usage: gen-nfs.sh image | record BZIMAGE NAME=IMG.zst ..." >&2; exit 2 ;;
esac
