#!/bin/bash
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
# LVM2 test images, made by lvm2's own tools in user space (no
# device-mapper here: activation = 0 on loop devices), with the kernel-made
# btrfs image testdata/files/subvols.img (its kernel view:
# testdata/files/subvols.view.jsonl) copied into the LVs' extents where
# `lvs --segments` and `pvs -o pe_start` say. Needs root (loop devices).
#
#   gpt-lvm.img     GPT, partition 1 a PV of VG "vgd": LV "swap" (not btrfs)
#                   and LV "root" of two segments in reverse order on the PV
#                   (PEs 40..79 then 8..31); root holds the btrfs image
#   pv-a.img, pv-b.img   two whole-disk PVs of VG "vgm": LV "data", linear,
#                   first segment on pv-b, second on pv-a, holds the btrfs;
#                   LV "strip", striped over both (2 x 64 KiB), holds it too
#                   (so opening needs --partition vgm/data or vgm/strip)
#   raid-a.img, raid-b.img   VG "vgr": LV "mirror" of type raid1, one leg on
#                   each image; LV "solo" linear on raid-a alone; both hold
#                   the btrfs (metadata by vgcfgrestore, see below)
# Recorded beside them: NAME.lvs.txt (lvs --segments: the layout truth),
# NAME.pvs.txt, and plain.sha256 (the btrfs image copied in).
# LUKS stacks are built at test time from these (tests/images/test_volumes.py):
# their payloads are incompressible.
set -euo pipefail
cd "$(dirname "$0")"
[ "$(id -u)" = 0 ] || { echo "gen-volumes.sh: needs root (loop devices)"; exit 1; }
tmp=$(mktemp -d /tmp/vol-gen.XXXXXX)
loops=()
cleanup() {
	for l in "${loops[@]}"; do
		vgchange --config 'global { activation = 0 }' -an >/dev/null 2>&1 || true
		losetup -d "$l" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
C='global { activation = 0 } devices { obtain_device_list_from_udev = 0 use_devicesfile = 0 }'
lvm_() { "$@" --config "$C" 2>/dev/null; }
zstd -q -d ../files/subvols.img.zst -o "$tmp/plain.img"
sha256sum "$tmp/plain.img" | cut -d' ' -f1 >plain.sha256
MB=$((1024 * 1024))


# copy the btrfs image into LV $1 of VG $2 (linear segments only)
place_linear() {
	local lv=$1 vg=$2 pe_start ext dev first
	ext=$(lvm_ vgs --noheadings --units b -o vg_extent_size --nosuffix "$vg" | tr -d ' ')
	# -a and a filter: a hidden LV (a raid1 leg) is not listed by its name
	lvm_ lvs -a --noheadings --segments -o lv_name,seg_start_pe,seg_size_pe,seg_pe_ranges "$vg" |
	tr -d '[]' | awk -v lv="$lv" '$1 == lv { print $2, $3, $4 }' |
	while read -r start size range; do
		dev=${range%%:*}
		first=${range#*:}
		first=${first%-*}
		pe_start=$(lvm_ pvs --noheadings --units b --nosuffix -o pe_start "$dev" | tr -d ' ')
		dd if="$tmp/plain.img" of="$dev" bs=1M iflag=skip_bytes,count_bytes \
		   oflag=seek_bytes skip=$((start * ext)) count=$((size * ext)) \
		   seek=$((pe_start + first * ext)) conv=notrunc,sparse status=none
	done
}

# --- gpt-lvm.img
truncate -s 400M "$tmp/gpt-lvm.img"
printf 'label: gpt\nlabel-id: 6A8E1C8C-2F0A-4B0C-9C35-A61BB0E4B101\nstart=2048, size=786432\n' |
	sfdisk -q "$tmp/gpt-lvm.img"
l=$(losetup -f --show -o $((2048 * 512)) --sizelimit $((786432 * 512)) "$tmp/gpt-lvm.img")
loops+=("$l")
lvm_ pvcreate -q "$l" >/dev/null
lvm_ vgcreate -q -s 4M vgd "$l" >/dev/null
lvm_ lvcreate -q -an -Zn -l 8 -n swap vgd "$l:0-7" >/dev/null
lvm_ lvcreate -q -an -Zn -l 40 -n root vgd "$l:40-79" >/dev/null
lvm_ lvextend -q -l +24 vgd/root "$l:8-31" >/dev/null
place_linear root vgd
lvm_ lvs --segments -o lv_name,seg_start_pe,seg_size_pe,seg_pe_ranges,segtype vgd |
	sed "s|$l|PV|g" >gpt-lvm.lvs.txt
lvm_ pvs -o pv_name,vg_name,pe_start,pv_uuid "$l" | sed "s|$l|PV|g" >gpt-lvm.pvs.txt

# --- pv-a.img + pv-b.img
truncate -s 300M "$tmp/pv-a.img" "$tmp/pv-b.img"
a=$(losetup -f --show "$tmp/pv-a.img")
loops+=("$a")
b=$(losetup -f --show "$tmp/pv-b.img")
loops+=("$b")
lvm_ pvcreate -q "$a" "$b" >/dev/null
lvm_ vgcreate -q -s 4M vgm "$a" "$b" >/dev/null
lvm_ lvcreate -q -an -Zn -l 30 -n data vgm "$b:0-29" >/dev/null
lvm_ lvextend -q -l +34 vgm/data "$a:0-33" >/dev/null
place_linear data vgm
lvm_ lvcreate -q -an -Zn -i 2 -I 64k -l 64 -n strip vgm >/dev/null
# striped: chunk k of 64 KiB goes to stripe k % 2, at row k / 2
python3 - "$tmp/plain.img" "$a" "$b" <<EOF
import subprocess, sys
plain, a, b = sys.argv[1:]
C = """$C"""
out = subprocess.run(["lvs", "--config", C, "--noheadings", "--segments", "--units", "b",
                      "-o", "seg_pe_ranges,stripe_size", "--nosuffix", "vgm/strip"],
                     capture_output=True, text=True, check=True).stdout.split()
ranges, stripe = out[:-1], int(out[-1])
ext = int(subprocess.run(["vgs", "--config", C, "--noheadings", "--units", "b", "--nosuffix",
                          "-o", "vg_extent_size", "vgm"], capture_output=True, text=True,
                         check=True).stdout)
legs = []
for r in ranges:
    dev, pe = r.split(":")
    pe_start = int(subprocess.run(["pvs", "--config", C, "--noheadings", "--units", "b",
                                   "--nosuffix", "-o", "pe_start", dev], capture_output=True,
                                  text=True, check=True).stdout)
    legs.append((dev, pe_start + int(pe.split("-")[0]) * ext))
fds = [open(d, "r+b") for d, _ in legs]
with open(plain, "rb") as f:
    k = 0
    while True:
        chunk = f.read(stripe)
        if not chunk:
            break
        if chunk.count(0) != len(chunk):
            s = k % len(legs)
            fds[s].seek(legs[s][1] + (k // len(legs)) * stripe)
            fds[s].write(chunk)
        k += 1
for x in fds:
    x.close()
EOF
lvm_ lvs --segments -o lv_name,seg_start_pe,seg_size_pe,seg_pe_ranges,segtype,stripes,stripe_size vgm |
	sed "s|$a|PVA|g; s|$b|PVB|g" >pv-ab.lvs.txt
lvm_ pvs -o pv_name,vg_name,pe_start,pv_uuid "$a" "$b" | sed "s|$a|PVA|g; s|$b|PVB|g" >pv-ab.pvs.txt

# --- raid-a.img + raid-b.img: VG "vgr", LV "mirror" of type raid1 (legs
# mirror_rimage_0 on raid-a, _1 on raid-b), LV "solo" linear on raid-a
# alone; both hold the btrfs. lvm2 cannot create raid1 without
# device-mapper, so its metadata is written by lvm2's vgcfgrestore from a
# vgcfgbackup with the LVs added (lvm2 parses and checks it: lvs lists it)
truncate -s 600M "$tmp/raid-a.img"
truncate -s 300M "$tmp/raid-b.img"
ra=$(losetup -f --show "$tmp/raid-a.img")
loops+=("$ra")
rb=$(losetup -f --show "$tmp/raid-b.img")
loops+=("$rb")
lvm_ pvcreate -q "$ra" "$rb" >/dev/null
lvm_ vgcreate -q -s 4M vgr "$ra" "$rb" >/dev/null
lvm_ vgcfgbackup -f "$tmp/vgr.txt" vgr >/dev/null
python3 - "$tmp/vgr.txt" <<'EOF2'
import sys
p = sys.argv[1]
s = open(p).read()
def lv(name, segs, visible=False, n=[0]):
    n[0] += 1
    st = '"READ", "WRITE", "VISIBLE"' if visible else '"READ", "WRITE"'
    return ('\t\t%s {\n\t\t\tid = "RaId00-0000-0000-0000-0000-0000-%06d"\n'
            '\t\t\tstatus = [%s]\n\t\t\tflags = []\n\t\t\tsegment_count = 1\n\n'
            '\t\t\tsegment1 {\n%s\t\t\t}\n\t\t}\n\n' % (name, n[0], st, segs))
def linear(pv, start, count):
    return ('\t\t\t\tstart_extent = 0\n\t\t\t\textent_count = %d\n\t\t\t\ttype = "striped"\n'
            '\t\t\t\tstripe_count = 1\n\t\t\t\tstripes = ["%s", %d]\n' % (count, pv, start))
raid = ('\t\t\t\tstart_extent = 0\n\t\t\t\textent_count = 64\n\t\t\t\ttype = "raid1"\n'
        '\t\t\t\tdevice_count = 2\n\t\t\t\tregion_size = 1024\n'
        '\t\t\t\traids = ["mirror_rmeta_0", "mirror_rimage_0", "mirror_rmeta_1", "mirror_rimage_1"]\n')
body = (lv("mirror", raid, True) + lv("mirror_rmeta_0", linear("pv0", 0, 1)) +
        lv("mirror_rimage_0", linear("pv0", 1, 64)) + lv("mirror_rmeta_1", linear("pv1", 0, 1)) +
        lv("mirror_rimage_1", linear("pv1", 1, 64)) + lv("solo", linear("pv0", 65, 64), True))
end = s.index("\n}\n")
s = s[:end] + "\n\tlogical_volumes {\n\n" + body + "\t}\n" + s[end:]
open(p, "w").write(s)
EOF2
lvm_ vgcfgrestore -f "$tmp/vgr.txt" vgr >/dev/null
for lv in mirror_rimage_0 mirror_rimage_1 solo; do
	place_linear "$lv" vgr
done
lvm_ lvs -a --segments -o lv_name,seg_start_pe,seg_size_pe,seg_pe_ranges,segtype vgr |
	sed "s|$ra|PVA|g; s|$rb|PVB|g" >raid.lvs.txt
lvm_ pvs -o pv_name,vg_name,pe_start,pv_uuid "$ra" "$rb" | sed "s|$ra|PVA|g; s|$rb|PVB|g" >raid.pvs.txt
sync
for l in "${loops[@]}"; do losetup -d "$l"; done
loops=()
for n in gpt-lvm pv-a pv-b raid-a raid-b; do
	zstd -q -19 --long=27 -f "$tmp/$n.img" -o "$n.img.zst"
done
