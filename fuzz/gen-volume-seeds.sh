#!/bin/bash
# SPDX-License-Identifier: MIT
# Seeds for fuzz_luks and fuzz_lvm: LUKS headers made by cryptsetup
# luksFormat on a file with a cheap KDF and the passphrase "fuzz" (what the
# target tries), cut after the first keyslot's key material; the label and
# metadata area of a PV made by lvm2 (testdata/volume/gpt-lvm.img), its
# metadata text alone, and a hand-written raid1 + mirror VG
# (tests/unit/test_volume.c parses the same text).
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d /tmp/vol-seeds.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
printf fuzz >"$tmp/pass"
fmt() { # name bytes-to-keep cryptsetup-options...
	local name=$1 keep=$2
	shift 2
	truncate -s 32M "$tmp/$name"
	cryptsetup luksFormat -q --key-file "$tmp/pass" --key-size 256 "$@" "$tmp/$name"
	head -c "$keep" "$tmp/$name" >corpus/luks/"$name"
}
fmt luks1-pbkdf2 $((4096 + 128000)) --type luks1 --hash sha256 --pbkdf-force-iterations 1000
fmt luks2-pbkdf2 $((32768 + 128000)) --type luks2 --pbkdf pbkdf2 --hash sha256 \
	--pbkdf-force-iterations 1000 --luks2-metadata-size 16k --luks2-keyslots-size 1m
fmt luks2-argon2id $((32768 + 128000)) --type luks2 --pbkdf argon2id --pbkdf-memory 32 \
	--pbkdf-force-iterations 4 --pbkdf-parallel 1 --luks2-metadata-size 16k \
	--luks2-keyslots-size 1m --sector-size 4096
zstd -q -d ../testdata/volume/gpt-lvm.img.zst -o "$tmp/lvm.img"
dd if="$tmp/lvm.img" of=corpus/lvm/pv-head bs=1 skip=$((1024 * 1024)) count=16384 status=none
# the newest metadata text: after the last "contents = " block... the mda
# header's raw_locn says where; python reads it
python3 - "$tmp/lvm.img" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()[1 << 20:(1 << 20) + (1 << 20)]
off, size = struct.unpack_from("<QQ", d, 4096 + 40)
t = d[4096 + off:4096 + off + size]
open("corpus/lvm/text", "wb").write(t)
# the counts the text states about itself, negative and past 32 bits
# (refused): the fuzzer starts from both sides of those checks
open("corpus/lvm/text-counts", "wb").write(
    t.replace(b"segment_count = 2", b"segment_count = -1", 1)
     .replace(b"extent_count = ", b"extent_count = 99999999999", 1))
PY
cp ../tests/support/lvm-raid1.txt corpus/lvm/raid1-text
