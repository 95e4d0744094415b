#!/bin/bash
# SPDX-License-Identifier: MIT
# walk --hash through LUKS2 beside the same walk of the plaintext: the cost
# of decryption (OpenSSL AES-XTS, 4096-byte sectors). The btrfs is the
# kernel-made testdata/files/extents.img (512 MiB); the LUKS2 image is made
# as tests/images/test_volumes.py makes them (cryptsetup luksFormat on a file, the
# payload encrypted by build/tests/luks_encrypt with the dumped volume key).
# Paired runs (A B A B ...) by bench/pair.py.
#
#   bash bench/luks.sh [BUILD]      (default BUILD: build)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$repo/build}
cli=$build/tools/btrfsimg
enc=$build/tests/luks_encrypt
tmp=$(mktemp -d /tmp/btrfsimg-luks-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
zstd -q -d --long=31 "$repo/testdata/files/extents.img.zst" -o plain.img
size=$(stat -c %s plain.img)
printf 'bench pass' >pass
truncate -s $((size + 16 * 1024 * 1024)) luks2.img
cryptsetup luksFormat -q --type luks2 --key-file pass --pbkdf argon2id \
	--pbkdf-force-iterations 4 --pbkdf-memory 65536 --pbkdf-parallel 1 --sector-size 4096 luks2.img
cryptsetup luksDump -q --dump-volume-key --volume-key-file vk --key-file pass luks2.img >/dev/null
"$enc" vk xts-plain64 4096 plain.img luks2.img $((16 * 1024 * 1024))
cmp <("$cli" walk --hash --volume-key-file vk luks2.img) <("$cli" walk --hash plain.img)
pair=$repo/bench/pair.py
echo "== decryption only (--volume-key-file)"
python3 "$pair" 9 "$cli walk --hash plain.img" "$cli walk --hash --volume-key-file vk luks2.img"
echo "== with the Argon2id unlock (64 MiB, t=4)"
python3 "$pair" 5 "$cli walk --hash plain.img" "$cli walk --hash --passphrase-file pass luks2.img"
