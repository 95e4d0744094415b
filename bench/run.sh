#!/usr/bin/env bash
# Benchmarks (root + loop devices): build large images with the real kernel,
# then print btrfsimg's time and peak memory beside btrfs-progs' dump-tree
# and the kernel (find -printf %i, and a stat walk) on the same trees, and
# the disk's floor: how long reading just the leaves a cold walk needs takes.
#
#   bash bench/run.sh [--files N] [--snapshots N] [--subvols N] [--keep DIR] [--exact]
#                     [--repeat N] [--churn-files N] [--churn-snapshots N]
#
# Defaults are the issue's sizes: one subvolume of 1,000,000 files in 1,000
# directories plus 100 snapshots of it (every 10th diverging by a few hundred
# files), an image of 2,000 subvolumes of 500 files, and one of a live
# subvolume of 200,000 files snapshotted 300 times, changing between
# snapshots (files deleted, created, chmod-ed), so every snapshot differs
# from every other (--churn-*). Images are cached in
# --keep DIR (default /var/tmp/btrfsimg-bench) and rebuilt only when missing.
# Each row is the median of --repeat N (default 3) cold runs and of as many
# warm ones. --exact also checks `collisions` against brute forces over the
# kernel's view (bench/exact.py, bench/brute.c) of both images and of a
# smaller snapshot image of the same shape (about half an hour).
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=1000000 SNAPS=100 SUBVOLS=2000 PER_SUBVOL=500 KEEP=/var/tmp/btrfsimg-bench BUILD_ONLY=0 EXACT=0
REPEAT=3 CHURN_FILES=200000 CHURN_SNAPS=300
while [ $# -gt 0 ]; do
  case $1 in
    --files) FILES=$2; shift 2;; --snapshots) SNAPS=$2; shift 2;;
    --subvols) SUBVOLS=$2; shift 2;; --keep) KEEP=$2; shift 2;;
    --build-only) BUILD_ONLY=1; shift;;
    --exact) EXACT=1; shift;;
    --repeat) REPEAT=$2; shift 2;;
    --churn-files) CHURN_FILES=$2; shift 2;; --churn-snapshots) CHURN_SNAPS=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
BIN=${BTRFSIMG:-build/tools/btrfsimg}
[ "$BUILD_ONLY" = 1 ] || [ -x "$BIN" ] || { echo "build first: $BIN missing" >&2; exit 2; }
mkdir -p "$KEEP"
MNT=$(mktemp -d /mnt/bench.XXXXXX)
cleanup() { mountpoint -q "$MNT" && umount "$MNT"; rmdir "$MNT"; }
trap cleanup EXIT

make_files() { # dir count: COUNT files spread over 1000 (or fewer) directories
  python3 - "$1" "$2" <<'PY'
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
}

# A new filesystem in IMG.tmp, mounted at $MNT; image_done IMG unmounts it
# and names it IMG (printed), so an interrupted build is never cached.
fresh_image() {
  truncate -s 8G "$1.tmp"; mkfs.btrfs -q -f "$1.tmp" >/dev/null
  mount -o loop "$1.tmp" "$MNT"
}
image_done() { umount "$MNT"; mv "$1.tmp" "$1"; echo "$1"; }
# the subvolume "data" with N files, and the directory "snaps" beside it
data_subvol() { btrfs -q subvolume create "$MNT/data"; make_files "$MNT/data" "$1"; mkdir "$MNT/snaps"; }

build_snap_image() {
  local img=$KEEP/snap-$FILES-$SNAPS.img
  [ -f "$img" ] && { echo "$img"; return; }
  fresh_image "$img"
  data_subvol "$FILES"
  for i in $(seq 1 "$SNAPS"); do
    btrfs -q subvolume snapshot "$MNT/data" "$MNT/snaps/s$i"
    if [ $((i % 10)) -eq 0 ]; then mkdir "$MNT/snaps/s$i/new"; make_files "$MNT/snaps/s$i/new" 300; fi
  done
  image_done "$img"
}

build_subvol_image() {
  local img=$KEEP/subvols-$SUBVOLS-$PER_SUBVOL.img
  [ -f "$img" ] && { echo "$img"; return; }
  fresh_image "$img"
  for i in $(seq 1 "$SUBVOLS"); do
    btrfs -q subvolume create "$MNT/v$i"
    make_files "$MNT/v$i" "$PER_SUBVOL"
  done
  image_done "$img"
}

# A live subvolume snapshotted CHURN_SNAPS times; before each snapshot 20
# random files are deleted, 20 created and 20 chmod-ed (seeded), as on a
# system taking hourly snapshots: no two snapshots share all their leaves.
build_churn_image() {
  local img=$KEEP/churn-$CHURN_FILES-$CHURN_SNAPS.img
  [ -f "$img" ] && { echo "$img"; return; }
  fresh_image "$img"
  data_subvol "$CHURN_FILES"
  python3 - "$MNT" "$CHURN_SNAPS" <<'PY'
import os, random, subprocess, sys
mnt, n = sys.argv[1], int(sys.argv[2])
rng, data = random.Random(1), os.path.join(mnt, "data")
dirs = [os.path.join(data, d) for d in sorted(os.listdir(data))]
def some_file():
    d = rng.choice(dirs)
    names = sorted(os.listdir(d))
    return os.path.join(d, rng.choice(names)) if names else None
for i in range(1, n + 1):
    for k in range(20):
        f = some_file()
        if f: os.unlink(f)
        os.close(os.open(os.path.join(rng.choice(dirs), "n%04d-%02d" % (i, k)),
                         os.O_CREAT | os.O_WRONLY, 0o644))
        f = some_file()
        if f: os.chmod(f, 0o600)
    subprocess.run(["btrfs", "-q", "subvolume", "snapshot", data,
                    os.path.join(mnt, "snaps", "s%d" % i)], check=True)
PY
  image_done "$img"
}

# time + peak RSS of a command, output discarded: cold page cache (dropped
# first), then warm (run again at once), --repeat times; the medians and the
# largest peak. "cold_s warm_s MiB"
time_one() {
  /usr/bin/time -f "%e %M" "$@" >/dev/null 2>/tmp/bench.time.$$ || true
  tail -n 1 /tmp/bench.time.$$
  rm -f /tmp/bench.time.$$
}
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
measure() {
  local runs="" i
  for i in $(seq 1 "$REPEAT"); do
    drop_caches
    runs+="$(time_one "$@") $(time_one "$@")"$'\n'
  done
  printf '%s %s %s\n' "$(awk 'NF {print $1}' <<< "$runs" | median)" \
    "$(awk 'NF {print $3}' <<< "$runs" | median)" \
    "$(awk 'NF {print ($2 > $4 ? $2 : $4)}' <<< "$runs" | sort -g | tail -n 1)" |
    awk '{printf "%8.2f s %8.2f s %8.0f MiB", $1, $2, $3 / 1024}'
}

# LAST keeps the row's "cold warm" seconds for the ratios
row() {
  local m
  m=$(shift; measure "$@")
  printf "%-58s %s\n" "$1" "$m"
  LAST=$(awk '{print $1, $3}' <<< "$m")
}
ratio() { # "btrfsimg's cold warm" "the other's cold warm"
  awk -v a="$1" -v b="$2" 'BEGIN {split(a, x); split(b, y)
    printf "%-58s %7.1fx %9.1fx\n", "  btrfsimg is faster by", y[1] / x[1], y[2] / x[2]}'
}

echo "building images (cached in $KEEP) ..."
SNAPIMG=$(build_snap_image)
SUBIMG=$(build_subvol_image)
CHURNIMG=$(build_churn_image)
[ "$BUILD_ONLY" = 1 ] && { echo "built $SNAPIMG $SUBIMG $CHURNIMG"; exit 0; }
DATA_ID=256
printf "\n%-58s %10s %10s %12s\n" "" "cold" "warm" "peak RSS"
echo "== 1 subvolume of $FILES files (+ $SNAPS snapshots): $SNAPIMG"
row "btrfsimg inodes --json --subvol $DATA_ID"  "$BIN" inodes --json --subvol $DATA_ID "$SNAPIMG"
OURS=$LAST
row "btrfs inspect-internal dump-tree -t $DATA_ID" btrfs inspect-internal dump-tree -t $DATA_ID "$SNAPIMG"
ratio "$OURS" "$LAST"
# The disk's floor for any cold walk: the leaves holding inode items and
# names (found by dump-tree, not btrfsimg) read with O_DIRECT, 512 in flight.
FLOOR=${FLOOR:-$(dirname "$BIN")/../bench/floor}
if [ -x "$FLOOR" ]; then
  LEAVES=$(mktemp)
  python3 bench/leaves.py "$SNAPIMG" $DATA_ID > "$LEAVES" 2> "$LEAVES.info"
  floor=$(for i in $(seq 1 "$REPEAT"); do
            drop_caches; "$FLOOR" "$SNAPIMG" < "$LEAVES" | awk '{print $1}'
          done | median)
  printf "%-58s %8.2f s  (%s)\n" "disk floor: O_DIRECT read of the leaves it needs" "$floor" \
    "$(cat "$LEAVES.info")"
  rm -f "$LEAVES" "$LEAVES.info"
fi
mount -o loop,ro "$SNAPIMG" "$MNT"
row "kernel: find -printf %i" find "$MNT/data" -printf '%i\n'
row "kernel: stat walk (python os.lstat)" python3 -c "
import os,sys
for d,ds,fs in os.walk(sys.argv[1]):
    for f in fs: os.lstat(os.path.join(d,f))" "$MNT/data"
ratio "$OURS" "$LAST"
STATWALK=$LAST
umount "$MNT"
# walk shows per path what stat, readdir and name_to_handle_at show: the
# stat walk's work and more
row "btrfsimg walk --json --subvol $DATA_ID" "$BIN" walk --json --subvol $DATA_ID "$SNAPIMG"
ratio "$LAST" "$STATWALK"
row "btrfsimg collisions ($((SNAPS+1)) subvolumes)" "$BIN" collisions --json "$SNAPIMG"
row "btrfsimg collisions (human report)" "$BIN" collisions "$SNAPIMG"
echo
echo "== $SUBVOLS subvolumes of $PER_SUBVOL files: $SUBIMG"
row "btrfsimg collisions" "$BIN" collisions --json "$SUBIMG"
row "btrfsimg inodes --json (all subvolumes)" "$BIN" inodes --json "$SUBIMG"
OURS=$LAST
row "btrfs inspect-internal dump-tree (all trees)" btrfs inspect-internal dump-tree "$SUBIMG"
ratio "$OURS" "$LAST"
echo
echo "== $CHURN_SNAPS snapshots of a changing subvolume of $CHURN_FILES files: $CHURNIMG"
row "btrfsimg collisions ($((CHURN_SNAPS+1)) subvolumes, no two alike)" \
  "$BIN" collisions --json "$CHURNIMG"
if [ "$EXACT" = 1 ]; then
  BRUTE=${BRUTE:-$(dirname "$BIN")/../bench/brute}
  echo
  # two independent brute forces: tests/test_inodes.py's (Python: lstat and a
  # dict) where a Python walk is quick enough, bench/brute.c's (statx and
  # sorting) on all, including the 101 M inodes of the snapshot image
  exact() { # IMAGE [c]: both brute forces, or only the C one
    echo "== exactness: collisions on $1 against the kernel's view"
    [ "${2:-}" = c ] || python3 bench/exact.py "$BIN" "$1"
    python3 bench/exact.py "$BIN" "$1" --c "$BRUTE"
  }
  exact "$SUBIMG"
  exact "$(FILES=20000 SNAPS=20 build_snap_image)"
  exact "$SNAPIMG" c
  exact "$(CHURN_FILES=20000 CHURN_SNAPS=50 build_churn_image)"
  exact "$CHURNIMG" c
fi
