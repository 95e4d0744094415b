#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# btrfsimg send beside the kernel's btrfs send of the same snapshots (root +
# loop devices): a metadata-heavy subvolume (--files N small files in
# directories of 200, most of them inline) and one large file, snapshotted
# read-only as "a"; then 1% of the files rewritten, 1% renamed, 1% deleted,
# 1% added, and snapshotted as "b". Four tasks, each stream written to a
# file in /tmp (its size is in the table):
#   full-a        btrfsimg send --subvol a            / btrfs send a
#   incr-a-b      btrfsimg send --subvol b --parent a / btrfs send -p a b
#   full-a-v2c    the same as full-a with --proto 2 --compressed-data
#   big           the large file's subvolume alone (data at the disk's rate)
#
#   bash bench/send.sh [--files N] [--repeat N] [--keep DIR]
#
# The image is built with the kernel once and cached in --keep DIR (default
# /var/tmp/bi-bench). The kernel's send needs the filesystem mounted: the
# image is mounted read-only once and stays mounted (that mount is not
# timed). Runs are paired (kernel, then btrfsimg, for each repetition and
# task), warm (the image's pages cached: one untimed run of each first); the
# table gives each side's median wall time, the median of the per-pair
# ratios (btrfsimg / kernel: below 1 is faster), the CPU time (user +
# system) and both streams' sizes.
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=100000 REPEAT=5 KEEP=/var/tmp/bi-bench
while [ $# -gt 0 ]; do
  case $1 in
    --files) FILES=$2; shift 2;; --repeat) REPEAT=$2; shift 2;; --keep) KEEP=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
BIN=$(realpath "${BTRFSIMG:-build/tools/btrfsimg}")
[ -x "$BIN" ] || { echo "build first: $BIN missing" >&2; exit 2; }
IMG=$KEEP/send-$FILES.img
KM=$(mktemp -d /tmp/bench-send.XXXXXX)
R=$(mktemp /tmp/bench-send.XXXXXX) T=$(mktemp /tmp/bench-send-time.XXXXXX)
cleanup() {
  mountpoint -q "$KM" && umount "$KM"
  rmdir "$KM"; rm -f "$R" "$T"
}
trap cleanup EXIT

build() {
  [ -f "$IMG" ] && return
  mkdir -p "$KEEP"
  truncate -s 4G "$IMG.tmp"; mkfs.btrfs -q -f "$IMG.tmp" >/dev/null
  mount -o loop,compress=zstd "$IMG.tmp" "$KM"
  btrfs -q subvolume create "$KM/sv"
  python3 - "$KM/sv" "$FILES" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(7)
for i in range(n):
    d = os.path.join(root, "d%04d" % (i // 200))
    if i % 200 == 0:
        os.mkdir(d)
    with open(os.path.join(d, "f%06d" % i), "wb") as f:
        f.write(rnd.randbytes(rnd.choice([0, 100, 600, 1500, 3000, 9000])))
PY
  btrfs -q subvolume create "$KM/bigsv"
  head -c 512M /dev/urandom > "$KM/bigsv/big"
  sync
  btrfs -q subvolume snapshot -r "$KM/sv" "$KM/a"
  btrfs -q subvolume snapshot -r "$KM/bigsv" "$KM/big"
  python3 - "$KM/sv" "$FILES" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(8)
for i in rnd.sample(range(n), n // 25):
    p = os.path.join(root, "d%04d" % (i // 200), "f%06d" % i)
    k = rnd.randrange(4)
    if k == 0:
        with open(p, "r+b") as f:
            f.write(b"changed")
    elif k == 1:
        os.rename(p, p + ".moved")
    elif k == 2:
        os.unlink(p)
    else:
        with open(p + ".new", "wb") as f:
            f.write(rnd.randbytes(2000))
PY
  sync
  btrfs -q subvolume snapshot -r "$KM/sv" "$KM/b"
  umount "$KM"
  mv "$IMG.tmp" "$IMG"
}

# time_one SIDE TASK CMD...: wall and CPU seconds of CMD, its stream's size
time_one() {
  local side=$1 task=$2; shift 2
  /usr/bin/time -f "%e %U %S" -o "$T" "$@" > "$R"
  read -r wall user sys < "$T"
  echo "$task $side $wall $(echo "$user + $sys" | bc) $(stat -c %s "$R")"
}

kernel() {
  local task=$1
  case $task in
    full-a) btrfs send -q "$KM/a" -f /dev/stdout ;;
    incr-a-b) btrfs send -q -p "$KM/a" "$KM/b" -f /dev/stdout ;;
    full-a-v2c) btrfs send -q --proto 2 --compressed-data "$KM/a" -f /dev/stdout ;;
    big) btrfs send -q "$KM/big" -f /dev/stdout ;;
  esac
}

mine() {
  local task=$1
  case $task in
    full-a) "$BIN" send --subvol a "$IMG" ;;
    incr-a-b) "$BIN" send --subvol b --parent a "$IMG" ;;
    full-a-v2c) "$BIN" send --subvol a --proto 2 --compressed-data "$IMG" ;;
    big) "$BIN" send --subvol big "$IMG" ;;
  esac
}
export -f kernel mine
export KM BIN IMG

build
mount -o ro,loop "$IMG" "$KM"
TASKS="full-a incr-a-b full-a-v2c big"
OUT=$(mktemp /tmp/bench-send-rows.XXXXXX)
for task in $TASKS; do
  kernel "$task" > /dev/null; mine "$task" > /dev/null # warm
  for _ in $(seq "$REPEAT"); do
    time_one kernel "$task" bash -c "kernel $task" >> "$OUT"
    time_one btrfsimg "$task" bash -c "mine $task" >> "$OUT"
  done
done
python3 - "$OUT" "$FILES" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
print("send, %s files, %d pairs each, warm; medians" % (sys.argv[2], len(rows) // 8))
print("%-11s %9s %9s %7s %9s %9s %12s %12s" % ("task", "kernel s", "ours s", "ratio",
      "kern CPU", "ours CPU", "kernel bytes", "ours bytes"))
for task in dict.fromkeys(r[0] for r in rows):
    k = [r for r in rows if r[0] == task and r[1] == "kernel"]
    m = [r for r in rows if r[0] == task and r[1] == "btrfsimg"]
    ratios = [float(b[2]) / max(float(a[2]), 1e-3) for a, b in zip(k, m)]
    med = lambda xs, i: st.median(float(x[i]) for x in xs)
    print("%-11s %9.3f %9.3f %7.2f %9.3f %9.3f %12d %12d" % (
        task, med(k, 2), med(m, 2), st.median(ratios), med(k, 3), med(m, 3),
        int(k[0][4]), int(m[0][4])))
PY
rm -f "$OUT"
