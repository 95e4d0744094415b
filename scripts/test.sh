#!/usr/bin/env bash
# The whole test suite: install dependencies, build, run every test (unit,
# kernel-view image tests, fuzz regression corpora), then the same suite
# under AddressSanitizer + UndefinedBehaviorSanitizer, then each libFuzzer
# target for a bounded time when clang is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh

setup() { # dir, options...
  local dir=$1; shift
  if [ -d "$dir" ]; then meson setup --reconfigure "$dir" "$@" >/dev/null
  else meson setup "$dir" "$@" >/dev/null; fi
}

echo "== build and test (release-like)"
setup build
ninja -C build
meson test -C build --print-errorlogs --num-processes 2

echo "== ASan + UBSan"
setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
ninja -C build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C build-asan --print-errorlogs --num-processes 2 --timeout-multiplier 3

echo "== ThreadSanitizer: inodes and walk (their lines are formatted on a second thread)"
setup build-tsan -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debug -Dtests=false
ninja -C build-tsan tools/btrfsimg
img=$(mktemp /tmp/btrfsimg-tsan.XXXXXX)
zstd -q -d -f testdata/files/names.img.zst -o "$img"
TSAN_OPTIONS=halt_on_error=1:exitcode=66 build-tsan/tools/btrfsimg inodes --json "$img" >"$img.tsan"
build/tools/btrfsimg inodes --json "$img" | cmp - "$img.tsan"
# again with the image's pages dropped: the leaves then arrive from the
# disk while the walk goes on (io_uring)
python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$img"
TSAN_OPTIONS=halt_on_error=1:exitcode=66 build-tsan/tools/btrfsimg inodes --json "$img" >"$img.tsan"
build/tools/btrfsimg inodes --json "$img" | cmp - "$img.tsan"
for c in inodes walk; do # text lines are formatted on the second thread too
  TSAN_OPTIONS=halt_on_error=1:exitcode=66 build-tsan/tools/btrfsimg $c "$img" >"$img.tsan"
  build/tools/btrfsimg $c "$img" | cmp - "$img.tsan"
done
TSAN_OPTIONS=halt_on_error=1:exitcode=66 build-tsan/tools/btrfsimg walk --json --hash --inumbits 48 \
  "$img" >"$img.tsan"
build/tools/btrfsimg walk --json --hash --inumbits 48 "$img" | cmp - "$img.tsan"
# containers decode ahead on a background thread: an E01 and a qcow2 of it
ewfacquire -u -q -t "$img.ctr" -S 64MiB -b 64 -c deflate:fast "$img" >/dev/null
qemu-img convert -c -O qcow2 "$img" "$img.ctr.qcow2"
for ctr in "$img.ctr.E01" "$img.ctr.qcow2"; do
  TSAN_OPTIONS=halt_on_error=1:exitcode=66 build-tsan/tools/btrfsimg walk --json --hash "$ctr" >"$img.tsan"
  build/tools/btrfsimg walk --json --hash "$img" | cmp - "$img.tsan"
done
rm -f "$img.ctr.E01" "$img.ctr.qcow2"
# collisions counts its 69 schemes on two threads
zstd -q -d -f testdata/files/snaps.img.zst -o "$img"
TSAN_OPTIONS=halt_on_error=1:exitcode=66 build-tsan/tools/btrfsimg collisions --json "$img" >"$img.tsan"
build/tools/btrfsimg collisions --json "$img" | cmp - "$img.tsan"
# the forensic scan (history) and verify read devices on two background threads
zstd -q -d -f testdata/forensic/single.img.zst -o "$img"
for c in history verify; do
  TSAN_OPTIONS=halt_on_error=1:exitcode=66 build-tsan/tools/btrfsimg $c --json "$img" >"$img.tsan"
  build/tools/btrfsimg $c --json "$img" | cmp - "$img.tsan"
done
rm -f "$img" "$img.tsan"

if command -v clang >/dev/null; then
  echo "== libFuzzer, ${FUZZ_SECONDS:-10} s per target"
  CC=clang setup build-fuzz -Dfuzzing=true -Dtests=false -Db_sanitize=address,undefined -Db_lundef=false
  ninja -C build-fuzz
  for f in build-fuzz/fuzz/fuzz_*; do
    [ -f "$f" ] && [ -x "$f" ] || continue
    t=${f##*/fuzz_}
    work=$(mktemp -d)
    [ -d "fuzz/corpus/$t" ] && cp -r "fuzz/corpus/$t/." "$work/"
    dict=(); [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
    rc=0
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$f" "${dict[@]}" -max_total_time="${FUZZ_SECONDS:-10}" -rss_limit_mb=2048 \
      -print_final_stats=1 "$work" >"$work.log" 2>&1 || rc=$?
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==ERROR|SUMMARY)' "$work.log" \
      | sed "s/^/fuzz_$t: /" || true
    [ "$rc" -eq 0 ] || tail -n 60 "$work.log"
    rm -f "$work.log"
    rm -rf "$work"
    if [ "$rc" -ne 0 ]; then echo "fuzz_$t found a failure (exit $rc)"; exit 1; fi
  done
fi
echo "all tests passed"
