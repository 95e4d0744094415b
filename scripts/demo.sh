#!/usr/bin/env bash
# Install dependencies, build, and run btrfsimg on the sample image.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
if [ -d build ]; then meson setup --reconfigure build >/dev/null; else meson setup build >/dev/null; fi
ninja -C build
sample=testdata/sample.img.zst
img=$(mktemp --suffix=.img)
trap 'rm -f "$img"' EXIT
zstd -q -d -f "$sample" -o "$img"
for cmd in super subvols collisions; do
  echo "\$ btrfsimg $cmd $sample"
  ./build/tools/btrfsimg "$cmd" "$img"
  echo
done
