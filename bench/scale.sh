#!/usr/bin/env bash
# The scans at scale (issue 28): `deleted --json`, `deleted`, `history
# --json` on IMAGE and a salvage open (`subvols`) of a copy with every
# superblock zeroed, by two builds (OLD, NEW), beside `cat` of the image
# cold and warm and btrfs-progs' btrfs-find-root (read-only) and
# `btrfs rescue chunk-recover -y` (on a throwaway copy: it writes).
# Wall and CPU time and peak RSS by /usr/bin/time; times paired (A B A B,
# bench/pair.py) where two are compared. Cold: the image's pages dropped
# from the page cache first (posix_fadvise DONTNEED on the file alone).
#
#   bash bench/scale.sh IMAGE OLD_BTRFSIMG NEW_BTRFSIMG [WORKDIR] [REPEAT]
#
# WORKDIR (default /var/tmp/btrfsimg-bench) holds the damaged copy.
set -euo pipefail
IMG=$1 OLD=$2 NEW=$3 WORK=${4:-/var/tmp/btrfsimg-bench} N=${5:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
drop() { python3 -c 'import os,sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$@"; }
# "wall s, user+sys s, peak RSS MiB, exit" of one run, output discarded
one() {
  /usr/bin/time -f "%e %U %S %M %x" -o /tmp/scale.time.$$ "$@" >/dev/null 2>/tmp/scale.err.$$ || true
  awk '{printf "%6.1f s wall, %6.1f s CPU, %6.0f MiB peak RSS, exit %s\n", $1, $2 + $3, $4 / 1024, $5}' /tmp/scale.time.$$
}
echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "image: $IMG ($(du -h --apparent-size "$IMG" | cut -f1) apparent, $(du -h "$IMG" | cut -f1) allocated)"
echo "== cat"
drop "$IMG"; echo "cat cold: $(one cat "$IMG")"
echo "cat warm: $(one cat "$IMG")"
for cmd in "deleted --json" "deleted" "history --json"; do
  echo "== $cmd"
  for b in OLD NEW; do
    bin=${!b}
    drop "$IMG"; echo "$b cold: $(one $bin $cmd "$IMG")"
    echo "$b warm: $(one $bin $cmd "$IMG")"
  done
  python3 "$HERE/pair.py" "$N" "$OLD $cmd $IMG 2>/dev/null; true" "$NEW $cmd $IMG 2>/dev/null; true"
  python3 "$HERE/pair.py" "$N" "cat $IMG" "$NEW $cmd $IMG 2>/dev/null; true"
done
echo "== salvage: every superblock zeroed (a copy), subvols"
COPY=$WORK/scale-nosb.img
if [ ! -f "$COPY" ]; then
  cp --sparse=always "$IMG" "$COPY.tmp"
  for off in 65536 67108864 274877906944; do
    size=$(stat -c %s "$COPY.tmp")
    [ "$off" -lt "$size" ] && dd if=/dev/zero of="$COPY.tmp" bs=4096 count=1 seek=$((off / 4096)) conv=notrunc status=none
  done
  mv "$COPY.tmp" "$COPY"
fi
for b in OLD NEW; do
  bin=${!b}
  drop "$COPY"; echo "$b cold: $(one $bin subvols "$COPY")"
  echo "$b warm: $(one $bin subvols "$COPY")"
done
python3 "$HERE/pair.py" "$N" "$OLD subvols $COPY 2>/dev/null; true" "$NEW subvols $COPY 2>/dev/null; true"
python3 "$HERE/pair.py" "$N" "cat $COPY" "$NEW subvols $COPY 2>/dev/null; true"
echo "== btrfs-progs"
drop "$IMG"; echo "btrfs-find-root (intact image) cold: $(one timeout 900 btrfs-find-root "$IMG")"
echo "btrfs-find-root (superblocks zeroed): $(one timeout 900 btrfs-find-root "$COPY"); $(tail -n 1 /tmp/scale.err.$$)"
echo "chunk-recover -y (superblocks zeroed copy): $(one timeout 900 btrfs rescue chunk-recover -y "$COPY"); $(tail -n 1 /tmp/scale.err.$$)"
rm -f /tmp/scale.time.$$ /tmp/scale.err.$$
