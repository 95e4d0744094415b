#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# btrfsimg mount (FUSE) beside the kernel's own mount of the same image (root
# + loop devices + /dev/fuse): a stat walk (find -printf '%i %s') over a
# subvolume of 1,000,000 files and a sequential read of a 1 GiB file, cold
# (both mounts made afresh and the page cache dropped) and warm (the same
# task again at once).
#
#   bash bench/mount.sh [--files N] [--repeat N] [--keep DIR]
#
# The image (--files N in 1,000 directories in the subvolume "data", and
# "big", 1 GiB of random bytes, at the top) is built with the kernel once
# and cached in --keep DIR (default /var/tmp/bi-bench). Runs are paired:
# for each repetition and task the kernel then FUSE, so that a shared
# machine's load falls on both alike; the table gives each side's median
# and the median of the per-pair ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=1000000 REPEAT=3 KEEP=/var/tmp/bi-bench
while [ $# -gt 0 ]; do
  case $1 in
    --files) FILES=$2; shift 2;; --repeat) REPEAT=$2; shift 2;; --keep) KEEP=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
BIN=$(realpath "${BTRFSIMG:-build/tools/btrfsimg}")
[ -x "$BIN" ] || { echo "build first: $BIN missing" >&2; exit 2; }
IMG=$KEEP/mount-$FILES.img
KM=$(mktemp -d /tmp/bench-kernel.XXXXXX) FM=$(mktemp -d /tmp/bench-fuse.XXXXXX)
cleanup() {
  mountpoint -q "$KM" && umount "$KM"
  mountpoint -q "$FM" && fusermount3 -u "$FM"
  rmdir "$KM" "$FM"
}
trap cleanup EXIT

build() {
  [ -f "$IMG" ] && return
  mkdir -p "$KEEP"
  truncate -s 8G "$IMG.tmp"; mkfs.btrfs -q -f "$IMG.tmp" >/dev/null
  mount -o loop,nobarrier "$IMG.tmp" "$KM"
  btrfs -q subvolume create "$KM/data"
  python3 - "$KM/data" "$FILES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
ndirs = min(1000, max(1, n // 100))
per = -(-n // ndirs)
made = 0
for d in range(ndirs):
    p = os.path.join(root, "d%04d" % d)
    os.mkdir(p)
    for f in range(per):
        if made == n: break
        os.close(os.open(os.path.join(p, "f%06d" % f), os.O_CREAT | os.O_WRONLY, 0o644))
        made += 1
PY
  head -c 1073741824 /dev/urandom > "$KM/big"
  umount "$KM"; mv "$IMG.tmp" "$IMG"
}

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
mount_k() { mount -o loop,ro "$IMG" "$KM"; }
umount_k() { umount "$KM"; }
mount_f() { "$BIN" mount -q "$IMG" "$FM"; }
umount_f() {
  local pid; pid=$(pgrep -f -x "$BIN mount -q $IMG $FM" || true)
  fusermount3 -u "$FM"
  while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}
walk() { find "$1/data" -printf '%i %s\n' > /dev/null; }
readbig() { cat "$1/big" > /dev/null; }
secs() { # command...: wall seconds
  local t0 t1; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f\n", b - a}'
}
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

build
R=$(mktemp /tmp/bench-mount.XXXXXX)
for r in $(seq 1 "$REPEAT"); do
  for task in walk readbig; do
    for side in k f; do
      dir=$KM; [ $side = f ] && dir=$FM
      mount_$side; drop_caches
      cold=$(secs $task "$dir"); warm=$(secs $task "$dir")
      umount_$side
      echo "$r $task $side $cold $warm" >> "$R"
    done
  done
done
echo "machine: $(nproc) cores, shared with other work; $REPEAT paired runs, medians"
printf '%-28s %-22s %-22s %s\n' task "kernel cold / warm" "FUSE cold / warm" \
  "FUSE/kernel time, cold / warm"
for task in walk readbig; do
  row() { awk -v t="$task" -v s="$1" -v f="$2" '$2 == t && $3 == s {print $f}' "$R" | median; }
  ratio() { # column: median over pairs of f/k
    awk -v t="$task" -v f="$1" '$2 == t {v[$1 "," $3] = $f} END {
      for (k in v) { split(k, p, ","); if (p[2] == "f") printf "%.2f\n", v[k] / v[p[1] ",k"] }
    }' "$R" | median
  }
  name="stat walk, $FILES files"; [ $task = readbig ] && name="sequential read, 1 GiB"
  printf '%-28s %-22s %-22s %s\n' "$name" "$(row k 4) s / $(row k 5) s" \
    "$(row f 4) s / $(row f 5) s" "$(ratio 4)x / $(ratio 5)x"
done
echo "raw runs (repetition task side cold warm):"; cat "$R"; rm -f "$R"
