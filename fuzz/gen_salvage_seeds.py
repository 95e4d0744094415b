#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""Whole-image fuzz seeds for the salvage path (fuzz/sparse_image.h format).

    gen_salvage_seeds.py OUTDIR

From testdata/salvage/salvage.img.zst, damaged as tests/test_salvage.py
damages it (testdata/gen_salvage.py damage()): "both" (no superblock, no
chunk-tree root: the scan, the superblock, chunk map and root tree rebuilt)
and "root" (the root tree's root block lost: backup roots and each tree's
newest root found by scanning). Only tree blocks are kept, one copy of each
(bytenr, generation), so the seeds stay small; data reads fail their
checksums, which the target accepts.

"levels-lost-node": testdata/levels/levels.img.zst (superblocks and root
tree intact) without a level-1 node of the top-level tree on either copy:
an ordinary open rebuilds that node when the walk first reads it
(salvage_rebuild.c, fs->lost_block), from the extent tree's records.

"salvage-mkfs": testdata/salvage/mkfs-btrfs-single.img.zst (a new btrfs
made over the old one): the new one's superblocks, the tree blocks of both
fsids, and a forged root-tree leaf of the old fsid with a newer
generation (checksummed) where no chunk map puts it: two fsids claim the
device, the target lists both and opens the old one by its fsid.
"""
import json
import os
import struct
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testdata"))
import genlib  # noqa: E402
import gen_salvage  # noqa: E402

SEEDS = (("salvage-both", "both"), ("salvage-root", "root"))


def tree_blocks(img, fsid, nodesize):
    seen = set()
    for off in range(0, len(img) - nodesize + 1, 4096):
        if img[off + 32:off + 48] != fsid:
            continue
        key = img[off + 48:off + 56] + img[off + 80:off + 88]  # bytenr, generation
        if key in seen:
            continue
        seen.add(key)
        yield off, img[off:off + nodesize]


def mkfs_seed(out, clean, facts):
    d = os.path.join(HERE, "..", "testdata", "salvage")
    img = bytearray(genlib.unzstd_bytes(os.path.join(d, "mkfs-btrfs-single.img.zst")))
    ns, p = facts["nodesize"], facts["root_physical"][0]
    blk = bytearray(clean[p:p + ns])
    struct.pack_into("<Q", blk, 0x50, facts["generation"] + 1000)
    blk[0:4] = struct.pack("<I", genlib.crc32c(bytes(blk[32:])))
    img[200 << 20:(200 << 20) + ns] = blk
    img = bytes(img)
    new_fsid = img[(64 << 10) + 0x20:(64 << 10) + 0x30]
    blob = bytearray(struct.pack("<BQ", 1, len(img)))
    for o in facts["super_physical"]:
        blob += struct.pack("<QH", o, 4096) + img[o:o + 4096]
    for fsid in (new_fsid, bytes.fromhex(facts["fsid"])):
        for off, b in tree_blocks(img, fsid, ns):
            blob += struct.pack("<QH", off, len(b)) + b
    with open(os.path.join(out, "salvage-mkfs"), "wb") as f:
        f.write(blob)
    print("salvage-mkfs: %d bytes" % len(blob))


def levels_seed(out):
    d = os.path.join(HERE, "..", "testdata", "levels")
    img = genlib.unzstd_bytes(os.path.join(d, "levels.img.zst"))
    with open(os.path.join(d, "truth.json")) as f:
        truth = json.load(f)
    t5 = truth["trees"]["5"]
    level1 = [p[3] for p in t5["blocks"][str(t5["root"])]["ptrs"]]
    lost = set(t5["blocks"][str(level1[len(level1) // 2])]["physical"])
    blob = bytearray(struct.pack("<BQ", 1, len(img)))
    for o in (64 << 10, 64 << 20):
        blob += struct.pack("<QH", o, 4096) + img[o:o + 4096]
    fsid = bytes.fromhex(truth["fsid"])
    for off, blk in tree_blocks(img, fsid, truth["nodesize"]):
        if off not in lost:
            blob += struct.pack("<QH", off, len(blk)) + blk
    with open(os.path.join(out, "levels-lost-node"), "wb") as f:
        f.write(blob)
    print("levels-lost-node: %d bytes" % len(blob))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    clean = genlib.unzstd_bytes(os.path.join(HERE, "..", "testdata", "salvage", "salvage.img.zst"))
    facts = gen_salvage.facts(clean)
    fsid = bytes.fromhex(facts["fsid"])
    for name, what in SEEDS:
        img = gen_salvage.damage(clean, what)
        blob = bytearray(struct.pack("<BQ", 1, len(img)))
        if what == "root":  # the superblocks, which the harness re-checksums
            for o in facts["super_physical"]:
                blob += struct.pack("<QH", o, 4096) + img[o:o + 4096]
        for off, blk in tree_blocks(img, fsid, facts["nodesize"]):
            blob += struct.pack("<QH", off, len(blk)) + blk
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)
        print("%s: %d bytes" % (name, len(blob)))
    mkfs_seed(out, clean, facts)
    levels_seed(out)


if __name__ == "__main__":
    main()
