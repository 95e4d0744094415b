#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# btrfsimg mount (FUSE) beside the kernel's read-only loop mount of the same
# image (root + loop devices + /dev/fuse), on many small files and one large
# one: `find -type f | xargs cat` over 18,000 small files and `cat` of one
# 256 MiB file, cold (mount made afresh, page cache dropped) and warm (the
# same task again at once).
#
#   bash bench/fuse.sh [--files N] [--repeat N] [--keep DIR] [--count]
#
# The image (--files N files of 0 to 40,000 bytes, most under 4 KiB, in
# directories of 100 under "small", and "big", 256 MiB of random bytes) is
# built with the kernel once and cached in --keep DIR (default
# /var/tmp/bi-bench). Runs are paired (for each repetition and task the
# kernel, then FUSE), so that a shared machine's load falls on both alike;
# the table gives each side's median wall time, the median of the per-pair
# ratios, and the CPU time (user + system) of the client (find, xargs, cat)
# and, for FUSE, of the daemon. The floor is the same task on a copy of the
# files in tmpfs (/dev/shm): what the client alone costs, warm, with no
# filesystem below it. --count adds one more cold + warm pass of
# each task with strace on the daemon and prints the FUSE requests it read
# by opcode (strace slows that pass; its times are not in the table).
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=18000 REPEAT=5 KEEP=/var/tmp/bi-bench COUNT=0
while [ $# -gt 0 ]; do
  case $1 in
    --files) FILES=$2; shift 2;; --repeat) REPEAT=$2; shift 2;; --keep) KEEP=$2; shift 2;;
    --count) COUNT=1; shift;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
BIN=$(realpath "${BTRFSIMG:-build/tools/btrfsimg}")
[ -x "$BIN" ] || { echo "build first: $BIN missing" >&2; exit 2; }
IMG=$KEEP/fuse-$FILES.img
KM=$(mktemp -d /tmp/bench-kernel.XXXXXX) FM=$(mktemp -d /tmp/bench-fuse.XXXXXX)
SHM=$(mktemp -d /dev/shm/bench-floor.XXXXXX)
R=$(mktemp /tmp/bench-fuse.XXXXXX) T=$(mktemp /tmp/bench-fuse-time.XXXXXX)
FPID=
cleanup() {
  mountpoint -q "$KM" && umount "$KM"
  mountpoint -q "$FM" && fusermount3 -u "$FM"
  rmdir "$KM" "$FM"; rm -rf "$R" "$T" "$SHM"
}
trap cleanup EXIT

build() {
  [ -f "$IMG" ] && return
  mkdir -p "$KEEP"
  truncate -s 2G "$IMG.tmp"; mkfs.btrfs -q -f "$IMG.tmp" >/dev/null
  mount -o loop,nobarrier "$IMG.tmp" "$KM"
  python3 - "$KM/small" "$FILES" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(31)
sizes = [0, 60, 300, 700, 1500, 2000, 2500, 3000, 4096, 6000, 9000, 16384, 40000]
weights = [1, 3, 4, 4, 4, 3, 2, 2, 2, 2, 1, 1, 1]
os.mkdir(root)
for i in range(n):
    d = os.path.join(root, "d%03d" % (i // 100))
    if i % 100 == 0:
        os.mkdir(d)
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(rnd.randbytes(rnd.choices(sizes, weights)[0]))
PY
  head -c 268435456 /dev/urandom > "$KM/big"
  umount "$KM"; mv "$IMG.tmp" "$IMG"
}

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
mount_k() { mount -o loop,ro "$IMG" "$KM"; }
umount_k() { umount "$KM"; }
mount_f() { # in the foreground, so that its pid is ours to read
  "$BIN" mount -f -q "$IMG" "$FM" & FPID=$!
  local i; for i in $(seq 1 200); do mountpoint -q "$FM" && return; sleep 0.05; done
  echo "btrfsimg mount did not come up" >&2; exit 2
}
umount_f() {
  fusermount3 -u "$FM"; wait "$FPID" || true; FPID=
}
small() { find "$1/small" -type f -print0 | xargs -0 cat > /dev/null; }
big() { cat "$1/big" > /dev/null; }
cpu_of() { # pid: user + system ticks
  awk '{print $14 + $15}' "/proc/$1/stat"
}
run() { # task dir: "wall client-cpu daemon-cpu" in seconds
  local d0=0 d1=0 hz; hz=$(getconf CLK_TCK)
  [ -n "$FPID" ] && d0=$(cpu_of "$FPID")
  /usr/bin/time -o "$T" -f '%e %U %S' bash -c "$(declare -f small big); $1 $2"
  [ -n "$FPID" ] && d1=$(cpu_of "$FPID")
  awk -v d=$((d1 - d0)) -v hz="$hz" '{printf "%.3f %.2f %.2f\n", $1, $2 + $3, d / hz}' "$T"
}
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# --count: the daemon's requests by opcode (read(2)s of /dev/fuse under
# strace: bytes 4-7 of each are the opcode), one cold and one warm pass
count() {
  local task=$1 S; S=$(mktemp /tmp/bench-fuse-strace.XXXXXX)
  for temp in cold warm; do
    mount_f; [ $temp = cold ] && drop_caches
    [ $temp = warm ] && run "$task" "$FM" > /dev/null
    strace -qq -f -p "$FPID" -e trace=read -e signal=none -xx -s 8 -o "$S" & local sp=$!
    sleep 1
    run "$task" "$FM" > /dev/null
    sleep 0.5; kill "$sp"; wait "$sp" || true
    umount_f
    python3 - "$S" "$task $temp" <<'PY'
import collections, re, sys
ops = {1: "LOOKUP", 2: "FORGET", 3: "GETATTR", 5: "READLINK", 14: "OPEN", 15: "READ",
       17: "STATFS", 18: "RELEASE", 22: "GETXATTR", 23: "LISTXATTR", 25: "FLUSH",
       26: "INIT", 27: "OPENDIR", 28: "READDIR", 29: "RELEASEDIR", 36: "INTERRUPT",
       38: "DESTROY", 42: "BATCH_FORGET", 44: "READDIRPLUS", 46: "LSEEK"}
c = collections.Counter()
for line in open(sys.argv[1]):
    m = re.search(r'(?:read\(\d+, |read resumed>)"((?:\\x[0-9a-f]{2}){8})', line)
    if m:
        b = bytes(int(h, 16) for h in m.group(1).split("\\x")[1:])
        c[ops.get(int.from_bytes(b[4:8], "little"), str(int.from_bytes(b[4:8], "little")))] += 1
print("%-18s %6d requests: %s" % (sys.argv[2], sum(c.values()),
      ", ".join("%s %d" % kv for kv in sorted(c.items(), key=lambda kv: -kv[1]))))
PY
  done
  rm -f "$S"
}

build
mount_k; cp -a "$KM/small" "$SHM/"; umount_k
for r in $(seq 1 "$REPEAT"); do
  run small "$SHM" > /dev/null; echo "$r floor t 0 0 0 $(run small "$SHM")" >> "$R"
  for task in small big; do
    for side in k f; do
      dir=$KM; [ $side = f ] && dir=$FM
      mount_$side; drop_caches
      cold=$(run $task "$dir"); warm=$(run $task "$dir")
      umount_$side
      echo "$r $task $side $cold $warm" >> "$R"
    done
  done
done
echo "$(date -u +%FT%RZ); $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$REPEAT paired runs, medians; cpu = user + system seconds"
printf '%-24s %-30s %-38s %s\n' task "kernel cold / warm (client cpu)" \
  "FUSE cold / warm (client + daemon cpu)" "FUSE/kernel, cold / warm"
for task in small big; do
  col() { awk -v t="$task" -v s="$1" -v f="$2" '$2 == t && $3 == s {print $f}' "$R" | median; }
  ratio() { # column: median over pairs of f/k
    awk -v t="$task" -v f="$1" '$2 == t {v[$1 "," $3] = $f} END {
      for (k in v) { split(k, p, ","); if (p[2] == "f") printf "%.2f\n", v[k] / v[p[1] ",k"] }
    }' "$R" | median
  }
  name="find+cat, $FILES files"; [ $task = big ] && name="cat, 256 MiB"
  printf '%-24s %-30s %-38s %s\n' "$name" \
    "$(col k 4) s / $(col k 7) s ($(col k 5) / $(col k 8))" \
    "$(col f 4) s / $(col f 7) s ($(col f 5)+$(col f 6) / $(col f 8)+$(col f 9))" \
    "$(ratio 4)x / $(ratio 7)x"
done
task=floor; printf '%-24s %-30s\n' "floor: find+cat in tmpfs" "warm $(col t 7) s ($(col t 8))"
echo "raw runs (repetition task side, cold: wall client daemon, warm: wall client daemon):"
cat "$R"
if [ $COUNT = 1 ]; then
  echo "FUSE requests by opcode:"
  for task in small big; do count $task; done
fi
