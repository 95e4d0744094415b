#!/usr/bin/env bash
# Benchmarks (root + loop devices): build large images with the real kernel,
# then print btrfsimg's time and peak memory beside btrfs-progs' dump-tree
# and the kernel (find -printf %i, and a stat walk) on the same trees, and
# the disk's floor: how long reading just the leaves a cold walk needs takes.
#
#   bash bench/run.sh [--files N] [--snapshots N] [--subvols N] [--keep DIR] [--exact]
#                     [--repeat N] [--churn-files N] [--churn-snapshots N]
#                     [--year-snapshots N] [--user-files N] [--user-snapshots N]
#                     [--no-users] [--build-only]
#
# Defaults are the issue's sizes: one subvolume of 1,000,000 files in 1,000
# directories plus 100 snapshots of it (every 10th diverging by a few hundred
# files), an image of 2,000 subvolumes of 500 files, and one of a live
# subvolume of 200,000 files snapshotted 300 times, changing between
# snapshots (files deleted, created, chmod-ed), so every snapshot differs
# from every other (--churn-*); and the two images of snapshot users: a
# year of hourly snapshots (--year-snapshots, default 10,000, of the
# --files subvolume, every 100th diverging) and 1,000 read-only snapshots
# of a live 1,000,000-file subvolume changing between them (--user-*;
# --no-users leaves both out). Images are cached in
# --keep DIR (default /var/tmp/btrfsimg-bench) and rebuilt only when missing.
# Each row gives min/median/max of --repeat N (default 3) cold runs and of
# as many warm ones; compared commands run in turn (A B A B) and their
# ratio is taken per pair. BASELINE=path/to/an/older/btrfsimg pairs every
# collisions row with that build and compares their outputs. --exact also checks `collisions` against brute forces over the
# kernel's view (bench/exact.py, bench/brute.c) of both images and of a
# smaller snapshot image of the same shape (about half an hour).
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=1000000 SNAPS=100 SUBVOLS=2000 PER_SUBVOL=500 KEEP=/var/tmp/btrfsimg-bench BUILD_ONLY=0 EXACT=0
REPEAT=3 CHURN_FILES=200000 CHURN_SNAPS=300
YEAR_SNAPS=10000 USER_FILES=1000000 USER_SNAPS=1000 USERS=1
while [ $# -gt 0 ]; do
  case $1 in
    --files) FILES=$2; shift 2;; --snapshots) SNAPS=$2; shift 2;;
    --subvols) SUBVOLS=$2; shift 2;; --keep) KEEP=$2; shift 2;;
    --build-only) BUILD_ONLY=1; shift;;
    --exact) EXACT=1; shift;;
    --repeat) REPEAT=$2; shift 2;;
    --churn-files) CHURN_FILES=$2; shift 2;; --churn-snapshots) CHURN_SNAPS=$2; shift 2;;
    --year-snapshots) YEAR_SNAPS=$2; shift 2;;
    --user-files) USER_FILES=$2; shift 2;; --user-snapshots) USER_SNAPS=$2; shift 2;;
    --no-users) USERS=0; shift;;
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
# (nobarrier: the image file's flushes only slow the build, not the result)
fresh_image() {
  truncate -s "${IMG_SIZE:-8G}" "$1.tmp"; mkfs.btrfs -q -f "$1.tmp" >/dev/null
  mount -o loop,nobarrier "$1.tmp" "$MNT"
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

# A year of hourly snapshots (snapper's default on a root filesystem):
# YEAR_SNAPS snapshots of the FILES-file subvolume; every 100th diverges a
# little (a directory of 10 new files, one file chmod-ed). 10^4 snapshots of
# 10^6 inodes: 10^10 presented numbers, nearly all in shared tree blocks.
build_year_image() {
  local img=$KEEP/year-$FILES-$YEAR_SNAPS.img
  [ -f "$img" ] && { echo "$img"; return; }
  fresh_image "$img"
  data_subvol "$FILES"
  for i in $(seq 1 "$YEAR_SNAPS"); do
    btrfs -q subvolume snapshot "$MNT/data" "$MNT/snaps/s$i"
    if [ $((i % 100)) -eq 0 ]; then
      mkdir "$MNT/snaps/s$i/new"; make_files "$MNT/snaps/s$i/new" 10
      chmod 600 "$MNT/snaps/s$i/d$(printf %04d $((i / 100 % 1000)))/f000000"
    fi
  done
  image_done "$img"
}

# A live subvolume snapshotted CHURN_SNAPS times; before each snapshot 20
# random files are deleted, 20 created and 20 chmod-ed (seeded), as on a
# system taking hourly snapshots: no two snapshots share all their leaves.
build_churn_image() {
  local img=$KEEP/churn-$CHURN_FILES-$CHURN_SNAPS${CHURN_RO:+-ro}.img
  [ -f "$img" ] && { echo "$img"; return; }
  fresh_image "$img"
  data_subvol "$CHURN_FILES"
  python3 - "$MNT" "$CHURN_SNAPS" "${CHURN_RO:-}" <<'PY'
import os, random, subprocess, sys
mnt, n = sys.argv[1], int(sys.argv[2])
ro = ["-r"] if sys.argv[3] else []
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
    subprocess.run(["btrfs", "-q", "subvolume", "snapshot"] + ro + [data,
                    os.path.join(mnt, "snaps", "s%d" % i)], check=True)
PY
  image_done "$img"
}

# time + peak RSS of a command, output discarded: "seconds KiB"
time_one() {
  /usr/bin/time -f "%e %M" "$@" >/dev/null 2>/tmp/bench.time.$$ || true
  tail -n 1 /tmp/bench.time.$$
  rm -f /tmp/bench.time.$$
}
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# "min/median/max" of the numbers on stdin, with printf format $1
mmm() { sort -g | awk -v f="$1" '{v[NR] = $1} END {
  printf f "/" f "/" f, v[1], v[int((NR + 1) / 2)], v[NR]}'; }

# Paired runs: the commands in arrays A (btrfsimg) and B (what it is
# compared with; empty: nothing), run in turn A B A B, --repeat times, each
# cold (page cache dropped first) then warm (again at once), so that the
# machine's drift hits both alike. RUNS gets one line per round:
# "a_cold a_kib a_warm a_kib b_cold b_kib b_warm b_kib".
A=() B=()
paired() {
  local i a b
  RUNS=""
  for i in $(seq 1 "$REPEAT"); do
    drop_caches; a="$(time_one "${A[@]}") $(time_one "${A[@]}")"
    b="0 0 0 0"
    if [ ${#B[@]} -gt 0 ]; then drop_caches; b="$(time_one "${B[@]}") $(time_one "${B[@]}")"; fi
    RUNS+="$a $b"$'\n'
  done
}
# one side of RUNS (0: A, 4: B) as "cold min/med/max s  warm min/med/max s  peak MiB"
side() {
  printf "%s s  %s s  %6.0f MiB" \
    "$(awk -v o="$1" 'NF {print $(o + 1)}' <<< "$RUNS" | mmm %.2f)" \
    "$(awk -v o="$1" 'NF {print $(o + 3)}' <<< "$RUNS" | mmm %.2f)" \
    "$(awk -v o="$1" 'NF {print ($(o + 2) > $(o + 4) ? $(o + 2) : $(o + 4))}' <<< "$RUNS" |
       sort -g | tail -n 1 | awk '{print $1 / 1024}')"
}
# per pair B / A (how many times faster A is), cold and warm
pair_ratio() {
  printf "%-52s cold %sx  warm %sx\n" "  $1" \
    "$(awk 'NF {print $5 / $1}' <<< "$RUNS" | mmm %.1f)" \
    "$(awk 'NF {print $7 / $3}' <<< "$RUNS" | mmm %.1f)"
}
# row LABEL CMD...: btrfsimg alone (nothing to compare), or beside the
# previous build when BASELINE is set (then its output is compared too)
row() {
  local label=$1; shift
  A=("$@") B=()
  if [ -n "${BASELINE:-}" ]; then B=("$BASELINE" "${@:2}"); fi
  paired
  printf "%-52s %s\n" "$label" "$(side 0)"
  if [ ${#B[@]} -gt 0 ]; then
    printf "%-52s %s\n" "  the baseline build ($BASELINE)" "$(side 4)"
    pair_ratio "this build is faster by (per pair)"
    local x y
    x=$("${A[@]}" 2>/dev/null | md5sum) y=$("${B[@]}" 2>/dev/null | md5sum)
    printf "%-52s %s\n" "  output identical to the baseline's" "$([ "$x" = "$y" ] && echo yes || echo NO)"
  fi
}
# vs LABEL_A LABEL_B: A and B (set by the caller) paired, with the ratio
vs() {
  paired
  printf "%-52s %s\n" "$1" "$(side 0)"
  printf "%-52s %s\n" "  $2" "$(side 4)"
  pair_ratio "btrfsimg is faster by (per pair)"
}
# CPU seconds (user + sys) of a warm run, output discarded
cpu_one() {
  /usr/bin/time -f "%U %S" "$@" >/dev/null 2>/tmp/bench.cpu.$$ || true
  tail -n 1 /tmp/bench.cpu.$$ | awk '{print $1 + $2}'
  rm -f /tmp/bench.cpu.$$
}
# cpu_vs LABEL_B: A and B (set by the caller) warm, in turn, by CPU time:
# the ratio that moves least with what else the machine runs. A runs once
# untimed after B: btrfs-progs (6.2) drops the image's pages from the
# cache when it closes it (POSIX_FADV_DONTNEED), so an A right after a
# dump-tree was a cold run (0.44 s of CPU where a warm one takes 0.26 s).
cpu_vs() {
  local i r=""
  for i in $(seq 1 "$REPEAT"); do
    "${A[@]}" >/dev/null 2>&1 || true
    r+="$(cpu_one "${A[@]}") $(cpu_one "${B[@]}")"$'\n'
  done
  printf "%-52s %s s, %s %s s: %sx (load %s)\n" "  CPU user+sys warm: btrfsimg" \
    "$(awk 'NF {print $1}' <<< "$r" | mmm %.2f)" "$1" "$(awk 'NF {print $2}' <<< "$r" | mmm %.2f)" \
    "$(awk 'NF {print $2 / $1}' <<< "$r" | mmm %.1f)" "$(cut -d' ' -f1-3 /proc/loadavg)"
}
# the largest peak RSS (MiB) of a command, over a warm run
peak() { time_one "$@" >/dev/null; time_one "$@" | awk '{printf "%.0f", $2 / 1024}'; }

echo "building images (cached in $KEEP) ..."
SNAPIMG=$(build_snap_image)
SUBIMG=$(build_subvol_image)
CHURNIMG=$(build_churn_image)
YEARIMG="" USERIMG=""
if [ "$USERS" = 1 ]; then
  YEARIMG=$(build_year_image)
  # 1,000 snapshots keep ~5 GiB of changed metadata (DUP): room for it
  USERIMG=$(IMG_SIZE=32G CHURN_FILES=$USER_FILES CHURN_SNAPS=$USER_SNAPS CHURN_RO=1 build_churn_image)
fi
[ "$BUILD_ONLY" = 1 ] && { echo "built $SNAPIMG $SUBIMG $CHURNIMG $YEARIMG $USERIMG"; exit 0; }
DATA_ID=256
echo "each figure: min/median/max of $REPEAT runs, cold (page cache dropped) and warm;"
echo "compared commands run in turn (A B A B), ratios taken per pair"
echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf "\n%-52s %-22s %-22s %s\n" "" "cold" "warm" "peak RSS"
echo "== 1 subvolume of $FILES files (+ $SNAPS snapshots): $SNAPIMG"
A=("$BIN" inodes --json --subvol $DATA_ID "$SNAPIMG")
B=(btrfs inspect-internal dump-tree -t $DATA_ID "$SNAPIMG")
vs "btrfsimg inodes --json --subvol $DATA_ID" "btrfs inspect-internal dump-tree -t $DATA_ID"
cpu_vs "dump-tree"
# The disk's floor for any cold walk: the leaves holding inode items and
# names (found by dump-tree, not btrfsimg) read with O_DIRECT, 512 in flight.
FLOOR=${FLOOR:-$(dirname "$BIN")/../bench/floor}
if [ -x "$FLOOR" ]; then
  LEAVES=$(mktemp)
  python3 bench/leaves.py "$SNAPIMG" $DATA_ID > "$LEAVES" 2> "$LEAVES.info"
  A=("$BIN" inodes --json --subvol $DATA_ID "$SNAPIMG") B=(sh -c "exec $FLOOR $SNAPIMG < $LEAVES")
  paired
  printf "%-52s %s\n" "  disk floor: O_DIRECT read of the leaves it needs" "$(side 4)"
  printf "%-52s cold %sx of the floor (%s)\n" "  btrfsimg inodes, per pair" \
    "$(awk 'NF {print $1 / $5}' <<< "$RUNS" | mmm %.2f)" "$(cat "$LEAVES.info")"
  rm -f "$LEAVES" "$LEAVES.info"
fi
mount -o loop,ro "$SNAPIMG" "$MNT"
A=("$BIN" inodes --json --subvol $DATA_ID "$SNAPIMG") B=(find "$MNT/data" -printf '%i\n')
vs "btrfsimg inodes --json --subvol $DATA_ID" "kernel: find -printf %i"
STATWALK=(python3 -c "
import os,sys
for d,ds,fs in os.walk(sys.argv[1]):
    for f in fs: os.lstat(os.path.join(d,f))" "$MNT/data")
A=("$BIN" inodes --json --subvol $DATA_ID "$SNAPIMG") B=("${STATWALK[@]}")
vs "btrfsimg inodes --json --subvol $DATA_ID" "kernel: stat walk (python os.lstat)"
# walk shows per path what stat, readdir and name_to_handle_at show: the
# stat walk's work and more
A=("$BIN" walk --json --subvol $DATA_ID "$SNAPIMG") B=("${STATWALK[@]}")
vs "btrfsimg walk --json --subvol $DATA_ID" "kernel: stat walk (python os.lstat)"
umount "$MNT"
# the text lines a person reads (a header, then one line per inode or path)
row "btrfsimg inodes --subvol $DATA_ID (text)" "$BIN" inodes --subvol $DATA_ID "$SNAPIMG"
row "btrfsimg walk --subvol $DATA_ID (text)" "$BIN" walk --subvol $DATA_ID "$SNAPIMG"
row "btrfsimg collisions ($((SNAPS+1)) subvolumes)" "$BIN" collisions --json "$SNAPIMG"
row "btrfsimg collisions (human report)" "$BIN" collisions "$SNAPIMG"
echo
echo "== $SUBVOLS subvolumes of $PER_SUBVOL files: $SUBIMG"
row "btrfsimg collisions" "$BIN" collisions --json "$SUBIMG"
A=("$BIN" inodes --json "$SUBIMG") B=(btrfs inspect-internal dump-tree "$SUBIMG")
vs "btrfsimg inodes --json (all subvolumes)" "btrfs inspect-internal dump-tree (all trees)"
echo
echo "== $CHURN_SNAPS snapshots of a changing subvolume of $CHURN_FILES files: $CHURNIMG"
row "btrfsimg collisions ($((CHURN_SNAPS+1)) subvolumes, no two alike)" \
  "$BIN" collisions --json "$CHURNIMG"
if [ "$USERS" = 1 ]; then
  echo
  echo "== a year of hourly snapshots: $YEAR_SNAPS of $FILES files, every 100th diverging: $YEARIMG"
  row "btrfsimg collisions ($((YEAR_SNAPS+2)) subvolumes)" "$BIN" collisions --json "$YEARIMG"
  row "btrfsimg collisions (human report)" "$BIN" collisions "$YEARIMG"
  echo
  echo "== $USER_SNAPS read-only snapshots of a live $USER_FILES-file subvolume: $USERIMG"
  row "btrfsimg collisions ($((USER_SNAPS+2)) subvolumes, no two alike)" \
    "$BIN" collisions --json "$USERIMG"
fi
echo
# Memory stays flat: the same walks over 10x the inodes
SMALLIMG=$(FILES=100000 SNAPS=20 build_snap_image)
echo "== peak RSS (warm) at 100000 and $FILES inodes: $SMALLIMG, $SNAPIMG"
for cmd in inodes walk; do
  printf "%-52s %6s MiB %6s MiB\n" "btrfsimg $cmd --json --subvol $DATA_ID" \
    "$(peak "$BIN" $cmd --json --subvol $DATA_ID "$SMALLIMG")" \
    "$(peak "$BIN" $cmd --json --subvol $DATA_ID "$SNAPIMG")"
done
# Whole-image reads: verify (every copy of every block, device start to
# end) beside dd with O_DIRECT of a file as large as what verify reads, on
# the same filesystem as the images, as rates (MB/s)
if "$BIN" verify --help >/dev/null 2>&1; then
  echo
  img=$SNAPIMG
  bytes=$("$BIN" verify "$img" | awk '/bytes read/ {print $(NF - 2)}')
  dense=$KEEP/dense-$bytes.bin
  [ -f "$dense" ] || head -c "$bytes" /dev/urandom > "$dense"
  echo "== whole-image reads: $img ($bytes bytes read), $dense"
  A=("$BIN" verify "$img") B=(dd if="$dense" of=/dev/null bs=4M iflag=direct)
  vs "btrfsimg verify" "dd iflag=direct bs=4M (same bytes)"
  printf "%-52s cold %s MB/s, dd %s MB/s\n" "  rates (median)" \
    "$(awk -v b="$bytes" 'NF {print b / $1 / 1e6}' <<< "$RUNS" | median)" \
    "$(awk -v b="$bytes" 'NF {print b / $5 / 1e6}' <<< "$RUNS" | median)"
fi
if [ "$EXACT" = 1 ]; then
  BRUTE=${BRUTE:-$(dirname "$BIN")/../bench/brute}
  echo
  # two independent brute forces: tests/images/test_inodes.py's (Python: lstat and a
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
  # the two snapshot-user images at a hundredth of their inodes (10^7:
  # the brute force takes minutes; at 10^10 it would take days)
  exact "$(FILES=10000 YEAR_SNAPS=1000 build_year_image)" c
  exact "$(CHURN_FILES=10000 CHURN_SNAPS=1000 CHURN_RO=1 build_churn_image)" c
fi
