#!/bin/bash
# SPDX-License-Identifier: MIT
# Seeds for fuzz_container: a 64 KiB disk (one random 4 KiB block, the rest
# zeros) in each container format, made by the formats' own tools
# (ewfacquire, qemu-img); the dynamic VHD's disk is all zeros (a data block
# would make it 2 MiB). Each seed is one byte (the format, as
# fuzz_container.c reads it: enum btrfsimg_format) followed by the file.
# VHDX is left out: its smallest file is 4 MiB of mostly zeros (mutations
# of the others reach libvhdi's signature check). Usage:
#   bash fuzz/gen-container-seeds.sh   (writes fuzz/corpus/container/)
set -euo pipefail
out="$(cd "$(dirname "$0")" && pwd)/corpus/container"
tmp=$(mktemp -d /tmp/ctr-seeds.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
cd "$tmp"
python3 -c "
import random
r = random.Random(15)
d = bytearray(65536)
d[4096:8192] = bytes(r.getrandbits(8) for _ in range(4096))
open('disk.img', 'wb').write(d)
open('zero.img', 'wb').write(bytes(65536))"
ewfacquire -u -q -t ev -c deflate:fast -b 16 -C CASE -e EXAMINER -d sha1 disk.img >/dev/null
qemu-img convert -O qcow2 -c -o cluster_size=4096 disk.img c.qcow2
qemu-img convert -O qcow2 -o cluster_size=512,compat=0.10 disk.img v2.qcow2
qemu-img convert -O vmdk -o subformat=streamOptimized disk.img st.vmdk
qemu-img convert -O vmdk -o subformat=monolithicFlat disk.img flat.vmdk
qemu-img convert -O vpc zero.img dyn.vhd  # no block allocated: 2 KiB, not 2 MiB
qemu-img convert -O vpc -o subformat=fixed disk.img fixed.vhd
# backing files and extent files named as a hostile image would: the FIFO
# and the /dev/zero symlink fuzz_container.c puts beside its input, device
# files, a way out of the folder, the image itself
for b in fifo zero /dev/zero /proc/self/mem ../in.qcow2 in.qcow2; do
	n=$(printf %s "$b" | sed 's/[.][.]/up/g' | tr -c 'a-z0-9\n' - | sed 's/^-*//')
	qemu-img create -q -f qcow2 -o cluster_size=512 -u -F qcow2 -b "$b" "back$n.qcow2" 64K
done
for x in fifo /dev/zero /proc/self/mem ../in.vmdk; do
	n=$(printf %s "$x" | sed 's/[.][.]/up/g' | tr -c 'a-z0-9\n' - | sed 's/^-*//')
	sed "s|\"flat-flat.vmdk\"|\"$x\"|" flat.vmdk >"ext$n.vmdk"
done
# sizes a header states past what the format maps or the files back
# (issue 26): a qcow2 of 2^64 - 4096 bytes (the cache's block count
# wrapped) and of 2^62 (more than its L1 table maps); a fixed VHD whose
# original_size is 2^64 - 1 and one whose current_size is 1 TiB (footer
# checksum recomputed); a descriptor naming its flat file three times
python3 - <<'PY'
import shutil, struct
def be64(src, dst, at, v, vhd=False):
    b = bytearray(open(src, "rb").read())
    f = len(b) - 512 if vhd else 0
    b[f + at:f + at + 8] = struct.pack(">Q", v)
    if vhd:
        b[f + 64:f + 68] = bytes(4)
        b[f + 64:f + 68] = struct.pack(">I", ~sum(b[f:]) & 0xffffffff)
    open(dst, "wb").write(b)
be64("c.qcow2", "wrap.qcow2", 24, (1 << 64) - 4096)
be64("c.qcow2", "huge.qcow2", 24, 1 << 62)
be64("fixed.vhd", "orig.vhd", 40, (1 << 64) - 1, vhd=True)
be64("fixed.vhd", "cur.vhd", 48, 1 << 40, vhd=True)
t = open("flat.vmdk", "rb").read()
l = [x for x in t.split(b"\n") if x.startswith(b"RW ")][0]
open("rep.vmdk", "wb").write(t.replace(l, b"\n".join([l] * 3)))
PY
seed() { # NAME FORMAT FILE
	{ printf "\\x$(printf %02x "$2")"; cat "$3"; } >"$out/$1"
}
seed ewf-auto 0 ev.E01
seed ewf 3 ev.E01
seed qcow2-compressed 4 c.qcow2
seed qcow2-v2 0 v2.qcow2
seed vmdk-stream 5 st.vmdk
seed vmdk-descriptor 5 flat.vmdk
seed vhd-dynamic 6 dyn.vhd
seed vhd-fixed 0 fixed.vhd
seed split 2 disk.img
seed qcow2-size-wrap 4 wrap.qcow2
seed qcow2-size-huge 4 huge.qcow2
seed vhd-fixed-original-size 6 orig.vhd
seed vhd-fixed-current-size 6 cur.vhd
seed vmdk-extent-repeated 5 rep.vmdk
for f in back*.qcow2; do g=${f#back}; seed "qcow2-backing-${g%.qcow2}" 4 "$f"; done
for f in ext*.vmdk; do g=${f#ext}; seed "vmdk-extent-${g%.vmdk}" 5 "$f"; done
ls -la "$out"
