#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
# Rebuild testdata/dir/: one small image written by the real kernel (needs
# root and a loop device) and the kernel's answers about every path in it
# (gen_dir_record.py record), for tests/unit/test_dir.c and tests/unit/test_inode.c.
#
#   dir.img.zst   256 MiB image, mkfs defaults (16K nodes, extref, no-holes):
#     d/f            0640 1000:100, xattrs user.a, user.empty (""), user.big
#                    (3000 bytes), trusted.t, and three user.* names sharing
#                    one name hash (one XATTR_ITEM holding three entries)
#     d/link1 e/link2  hard links to d/f (two names in one INODE_REF, and a
#                    second INODE_REF for another directory)
#     d/moved        a subvolume created at the top and renamed into d/
#                    (ROOT_REF dirid = d, not 256)
#     sl, longlink   symlinks: "d/f" and a 4095-byte target
#     fifo sock chr blk chr2   special files (1:3, 7:0, 300:70000)
#     coll/          three names sharing one name hash (one DIR_ITEM holding
#                    three entries) among plain ones; one name removed
#                    (a gap in DIR_INDEX)
#     empty/
#     links          subvolume: t0 and 650 hard links with 200-byte names in
#                    one directory (INODE_REF overflows into INODE_EXTREF)
#     sv1            subvolume, root dir 1234:5678 0750: a, nested (subvol,
#                    holding b), dd/inner (subvol, holding c), gone (subvol,
#                    deleted after snap1 was taken, and cleaned)
#     snap1          snapshot of sv1: nested, dd/inner and gone are stubs
#     snap5          snapshot of the top level: every subvolume in it is a stub
#   dir.expect    gen_dir_record.py record on a fresh ro,noatime,subvolid=5 mount;
#                 then per damaged copy (gen_dir_record.py CRAFTS: d/moved's ROOT_ITEM
#                 with refs 0 or absent, its ROOT_REF with another dirid or
#                 name) the bytes changed and what the kernel says d/moved is
#   kernel.txt    kernel and btrfs-progs versions
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/hd-dir.XXXXXX)
mnt=$(mktemp -d /mnt/hd-dir.XXXXXX)
loop=""

cleanup() {
	mountpoint -q "$mnt" && umount "$mnt"
	[ -n "$loop" ] && losetup -d "$loop"
	rmdir "$mnt"
	rm -rf "$work"
}
trap cleanup EXIT

img=$work/dir.img
truncate -s 256M "$img"
mkfs.btrfs -q -f -L hd-dir "$img"
loop=$(losetup -f --show "$img")
mount "$loop" "$mnt"
cd "$mnt"

mkdir d e coll empty
printf 'hello\n' >d/f
chmod 0640 d/f
chown 1000:100 d d/f
setx() { python3 -c "import os,sys; os.setxattr(sys.argv[1], os.fsdecode(bytes.fromhex(sys.argv[2])), bytes.fromhex(sys.argv[3]), follow_symlinks=False)" "$@"; }
hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
setx d/f "$(hex user.a)" 31
setx d/f "$(hex user.empty)" ""
setx d/f "$(hex user.big)" "$(python3 -c "print(bytes(range(256)).hex() * 11 + '00' * 184)")"
setx d/f "$(hex trusted.t)" 78
for n in $(python3 "$here/gen_dir_record.py" collide 7 3 user.c); do
	setx d/f "$n" "$n"
done
ln d/f d/link1
ln d/f e/link2
ln -s d/f sl
ln -s "$(python3 -c "print((('x' * 254 + '/') * 17)[:4095], end='')")" longlink
mkfifo fifo
mknod chr c 1 3
mknod blk b 7 0
mknod chr2 c 300 70000
python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('sock')"
for i in 1 2 3; do touch "coll/plain$i"; done
for n in $(python3 "$here/gen_dir_record.py" collide 11 3 c); do
	python3 -c "import os,sys; open(b'coll/' + bytes.fromhex(sys.argv[1]), 'w').close()" "$n"
done
touch coll/zz
rm coll/plain2

btrfs -q subvolume create links
touch links/t0
python3 -c "
import os
for i in range(650):
    os.link('links/t0', 'links/L%03d_' % i + 'n' * 195)
"

btrfs -q subvolume create mvsrc
touch mvsrc/m
mv mvsrc d/moved

btrfs -q subvolume create sv1
chown 1234:5678 sv1
chmod 0750 sv1
echo a >sv1/a
btrfs -q subvolume create sv1/nested
echo b >sv1/nested/b
mkdir sv1/dd
btrfs -q subvolume create sv1/dd/inner
echo c >sv1/dd/inner/c
btrfs -q subvolume create sv1/gone
btrfs -q subvolume snapshot sv1 snap1
btrfs -q subvolume delete sv1/gone
btrfs -q subvolume snapshot . snap5
cd /
sync
btrfs -q subvolume sync "$mnt"
umount "$mnt"

mount -o ro,noatime,subvolid=5 "$loop" "$mnt"
python3 "$here/gen_dir_record.py" record "$mnt" >"$work/dir.expect"
umount "$mnt"
# a second fresh mount must give the same answers (stub times aside)
mount -o ro,noatime,subvolid=5 "$loop" "$mnt"
python3 "$here/gen_dir_record.py" record "$mnt" >"$work/dir.expect2"
umount "$mnt"
losetup -d "$loop"
loop=""
python3 - "$work/dir.expect" "$work/dir.expect2" <<'EOF'
import sys
a, b = (open(p).read().splitlines() for p in sys.argv[1:3])
assert len(a) == len(b), "record differs in length between mounts"
for x, y in zip(a, b):
    if x != y:
        fx, fy = x.split(), y.split()
        # stub (ino 2): mtime, ctime, btime are the time of lookup
        assert fx[0] == "S" and fx[2] == "2", (x, y)
        assert fx[:14] == fy[:14] and fx[20:] == fy[20:], (x, y)
EOF
# Damaged copies (gen_dir_record.py CRAFTS): the root tree is one leaf; patch both
# DUP copies of it, then ask the kernel what d/moved is.
leaf=$(btrfs inspect-internal dump-tree -t root "$img" | awk '/^leaf .* owner ROOT_TREE$/ {print $2; exit}')
[ "$(btrfs inspect-internal dump-tree -t root "$img" | grep -c '^node')" = 0 ]
phys=$(btrfs-map-logical -l "$leaf" "$img" | awk '{print $6}')
for v in refs0 noitem dirid name; do
	cp "$img" "$work/craft.img"
	python3 "$here/gen_dir_record.py" craft "$work/craft.img" "$v" $phys >>"$work/dir.expect"
	loop=$(losetup -f --show "$work/craft.img")
	mount -o ro,noatime,subvolid=5 "$loop" "$mnt"
	python3 "$here/gen_dir_record.py" record "$mnt" "$v" >>"$work/dir.expect"
	umount "$mnt"
	losetup -d "$loop"
	loop=""
done
cp "$work/dir.expect" "$here/dir.expect"
zstd -q -19 -f "$img" -o "$here/dir.img.zst"
{ uname -r; btrfs --version; } >"$here/kernel.txt"
ls -l "$here"
