#!/usr/bin/env bash
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
# Rebuild fuzz/corpus/image (root + loop): small images with 4 KiB nodes,
# single metadata, a few subvolumes, files of each kind and compression, so
# that the whole-image target starts from real structures.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/seeds.XXXXXX)
mnt=$(mktemp -d /mnt/seeds.XXXXXX)
cleanup() { mountpoint -q "$mnt" && umount "$mnt"; rmdir "$mnt"; rm -rf "$work"; }
trap cleanup EXIT
mk() { truncate -s 128M "$work/$1.img"; mkfs.btrfs -q -f -n 4096 -m single -d single "${@:2}" "$work/$1.img" >/dev/null; }

mk empty
mk files -O ^no-holes
mount -o loop,compress-force=zstd "$work/files.img" "$mnt"
echo hello > "$mnt/small"; head -c 9000 /dev/zero | tr '\0' 'a' > "$mnt/comp"
head -c 5000 /dev/urandom > "$mnt/rand"; ln -s small "$mnt/link"; mkfifo "$mnt/fifo"
setfattr -n user.k -v v "$mnt/small" 2>/dev/null || true
btrfs -q subvolume create "$mnt/sv"; mkdir "$mnt/sv/d"; echo x > "$mnt/sv/d/f"
btrfs -q subvolume create "$mnt/sv/nested"
btrfs -q subvolume snapshot "$mnt/sv" "$mnt/snap"
ln "$mnt/small" "$mnt/hard"; truncate -s 1M "$mnt/sparse"
umount "$mnt"
mk lzo
mount -o loop,compress-force=lzo "$work/lzo.img" "$mnt"
head -c 20000 /dev/zero | tr '\0' 'b' > "$mnt/l"; echo inline > "$mnt/i"
umount "$mnt"
# log: changes that live only in the log tree (fsync'd, never committed:
# commit=300), the backing file copied while still mounted, as a crash
# leaves it (superblock log_root set), so the seed exercises log replay
mk log
mount -o loop,commit=300 "$work/log.img" "$mnt"
mkdir "$mnt/d"; echo base > "$mnt/d/old"; sync
echo new > "$mnt/d/new"; ln "$mnt/d/old" "$mnt/d/link"; mv "$mnt/d/old" "$mnt/moved"
head -c 6000 /dev/urandom > "$mnt/d/data"; rm -f "$mnt/d/new"; echo again > "$mnt/d/new"
python3 -c "import os,sys; [os.fsync(os.open(p, os.O_RDONLY)) for p in sys.argv[1:]]" \
  "$mnt/d/new" "$mnt/d/link" "$mnt/moved" "$mnt/d/data" "$mnt/d"
cp --sparse=always "$work/log.img" "$work/log-crash.img"
umount "$mnt"
mv "$work/log-crash.img" "$work/log.img"
btrfs inspect-internal dump-super "$work/log.img" | grep -q '^log_root[[:space:]]*[1-9]' ||
  { echo "gen-image-seeds: the log image has no log tree" >&2; exit 1; }
python3 "$here/gen_sparse_seeds.py" "$here/corpus/image" "$work"/*.img
# corpus/scrub: one device of a three-device raid6 (mkfs alone, no mount):
# the other two missing, so the scrub rebuilds their tree blocks from parity
# (verify's degraded path: rebuilt_bytes, parity_unchecked_bytes)
for i in 1 2 3; do truncate -s 128M "$work/raid6-3dev-dev$i.img"; done
mkfs.btrfs -q -f -n 4096 -m raid6 -d raid6 "$work"/raid6-3dev-dev{1,2,3}.img >/dev/null
python3 "$here/gen_sparse_seeds.py" "$here/corpus/scrub" "$work/raid6-3dev-dev1.img"
