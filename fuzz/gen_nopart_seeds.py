#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""Whole-image fuzz seeds for a disk without a usable partition table
(fuzz/sparse_image.h format).

    gen_nopart_seeds.py OUTDIR

From testdata/nopart/disk.img.zst, damaged as tests/images/test_nopart.py
damages it (testdata/gen_nopart.py damage()): "gpt" (both GPTs and the
protective MBR zeroed: the superblock scan finds the filesystem at an
odd sector) and "gptsb" (its superblocks zeroed too: the salvage places it
by its tree blocks). Kept: the superblock copies (at their disk offsets,
where the harness leaves their checksums alone) and one copy of each tree
block (bytenr, generation), found at every 512-byte boundary; data reads
fail their checksums, which the target accepts.
"""
import json
import os
import struct
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testdata"))
import genlib  # noqa: E402
import gen_nopart  # noqa: E402

SEEDS = (("nopart-gpt", "gpt"), ("nopart-gptsb", "gptsb"))
NODESIZE = 16384


def records(img, truth):
    fsid = bytes.fromhex(truth["fsid"])
    for o in truth["super_disk"]:
        if img[o + 0x40:o + 0x48] == b"_BHRfS_M":
            yield o, img[o:o + 4096]
    seen = set()
    for off in range(truth["start"], len(img) - NODESIZE + 1, 4096):
        if img[off + 32:off + 48] != fsid:
            continue
        key = img[off + 48:off + 56] + img[off + 80:off + 88]  # bytenr, generation
        if key not in seen:
            seen.add(key)
            yield off, img[off:off + NODESIZE]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    d = os.path.join(HERE, "..", "testdata", "nopart")
    disk = genlib.unzstd_bytes(os.path.join(d, "disk.img.zst"))
    with open(os.path.join(d, "truth.json")) as f:
        truth = json.load(f)
    for name, what in SEEDS:
        img = gen_nopart.damage(disk, what, truth=truth)
        blob = bytearray(struct.pack("<BQ", 1, len(img)))
        for off, rec in records(img, truth):
            blob += struct.pack("<QH", off, len(rec)) + rec
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)
        print("%s: %d bytes" % (name, len(blob)))


if __name__ == "__main__":
    sys.exit(main())
