#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""A whole-image seed for fuzz/fuzz_forensic.c (fuzz/sparse_image.h format)
from a forensic truth image, kept small: the superblock copies, every
chunk-tree, root-tree and extent-tree block (the extent tree tells
which root-tree block a commit wrote: --generation), and every STEP-th block of the fs trees,
the csum tree and the subvolume's tree (live and stale alike); data and
other trees read as zeros.

    gen_forensic_seed.py OUT IMAGE.img.zst [STEP [INO=SIZE]]

With INO=SIZE, every fs-tree leaf holding the INODE_ITEM of INO is kept
and claims i_size SIZE there, its checksum recomputed: a
forged size in stale leaves, as `deleted` once hashed for years.
"""
import os
import struct
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata"))
import genlib  # noqa: E402

NODE = 16384


def forge_inode(img, off, ino, size):
    """Set i_size of @ino's INODE_ITEM in the leaf at @off (in place, a
    bytearray); True if the leaf holds it."""
    if img[off + 100] != 0:
        return False
    found = False
    for slot in range(struct.unpack_from("<I", img, off + 96)[0]):
        it = off + 101 + 25 * slot
        obj, typ, _, ioff = struct.unpack_from("<QBQI", img, it)
        if obj == ino and typ == 1 and ioff + 24 <= NODE:
            struct.pack_into("<Q", img, off + 101 + ioff + 16, size)
            found = True
    if found:   # the harness fixes only whole blocks; these are cut in two
        struct.pack_into("<I", img, off, genlib.crc32c(bytes(img[off + 32:off + NODE])))
    return found


def main():
    out, path = sys.argv[1], sys.argv[2]
    step = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    forge = tuple(map(int, sys.argv[4].split("="))) if len(sys.argv) > 4 else None
    img = bytearray(genlib.unzstd_bytes(path))
    fsid = img[0x10020:0x10030]
    NODE = struct.unpack_from("<I", img, 0x10094)[0]  # the superblock's nodesize
    keep = [(0x10000, img[0x10000:0x11000]), (64 << 20, img[(64 << 20):(64 << 20) + 4096])]
    seen = {}
    for off in range(0, len(img) - NODE, 4096):
        if img[off + 32:off + 48] != fsid or 0x10000 <= off < 0x11000:
            continue
        owner = struct.unpack_from("<Q", img, off + 88)[0]
        n = seen[owner] = seen.get(owner, -1) + 1
        forged = forge and owner == 5 and forge_inode(img, off, *forge)
        if owner in (1, 2, 3) or forged or (owner in (5, 7, 256) and n % step == 0):
            blk = img[off:off + NODE]
            # trim zeros in the middle: header and item table, then item data
            head = blk.rstrip(b"\0")
            nitems = struct.unpack_from("<I", blk, 96)[0]
            table = 101 + nitems * (25 if blk[100] == 0 else 33)
            tail = NODE - len(blk[table:].lstrip(b"\0"))
            keep.append((off, blk[:table]))
            if tail < NODE and head:
                keep.append((off + tail, blk[tail:]))
    blob = bytearray(struct.pack("<BQ", 1, len(img)))
    for off, data in keep:
        for i in range(0, len(data), 65535):
            part = data[i:i + 65535]
            blob += struct.pack("<QH", off + i, len(part)) + part
    with open(out, "wb") as f:
        f.write(blob)
    print(f"{out}: {len(blob)} bytes, {len(keep)} records")


if __name__ == "__main__":
    main()
