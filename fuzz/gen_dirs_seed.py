#!/usr/bin/env python3
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""A whole-image seed whose directory entries disagree (fuzz/corpus/image).

    gen_dirs_seed.py TESTDATA/sample.img.zst OUT

testdata/sample.img with the mutations of tests/images/test_corrupt.py's
case_dir_disagree, so that fuzz_image starts from the DIR_ITEM / DIR_INDEX /
INODE_REF cross-check's every branch: in subvolume 258 (var) the DIR_INDEX
of log5 points at log6's inode, the DIR_INDEX of log3 is renamed log4, the
INODE_REF of log8 names logX and that of log9 has index 99; in the top
subvolume the DIR_ITEM of etc points at the snapshots directory (259).
Leaves are found by scanning every nodesize block for a leaf of the tree
(both DUP copies), patched, and their crc32c recomputed; then written in
the sparse format of fuzz/gen_sparse_seeds.py.
"""
import os, struct, sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testdata"))
sys.path.insert(0, HERE)
import genlib  # noqa: E402
import gen_sparse_seeds  # noqa: E402

NODESIZE, HDR, ITEM = 16384, 101, 25
DIR_ITEM, DIR_INDEX, INODE_REF = 84, 96, 12


def leaves(img, owner):
    """Offsets of the leaves of tree @owner with a valid crc32c."""
    for off in range(0, len(img) - NODESIZE + 1, NODESIZE):
        blk = img[off:off + NODESIZE]
        if blk[100] != 0 or struct.unpack_from("<Q", blk, 88)[0] != owner:
            continue
        if struct.unpack_from("<I", blk, 0)[0] == genlib.crc32c(bytes(blk[32:])):
            yield off


def items(img, off):
    n = struct.unpack_from("<I", img, off + 96)[0]
    for s in range(min(n, (NODESIZE - HDR) // ITEM)):
        p = off + HDR + ITEM * s
        obj, typ, koff, ioff, size = struct.unpack_from("<QBQII", img, p)
        yield (obj, typ, koff), off + HDR + ioff, size


def patch(img, owner, want, fn):
    """Apply @fn(img, data offset) to the item @want(key, data offset) of
    every copy of the leaves of @owner; recompute their checksums."""
    hit = 0
    for off in list(leaves(img, owner)):
        for key, d, size in items(img, off):
            if want(key, d):
                fn(img, d)
                hit += 1
                img[off:off + 4] = struct.pack("<I", genlib.crc32c(bytes(img[off + 32:off + NODESIZE])))
    assert hit, f"no item to patch in tree {owner}"


def named(img, d, name):
    nlen = struct.unpack_from("<H", img, d + 27)[0]
    return bytes(img[d + 30:d + 30 + nlen]) == name


def main():
    src, out = sys.argv[1], sys.argv[2]
    img = bytearray(gen_sparse_seeds.read_image(src))

    def dir_entry(typ, dirid, name):
        return lambda k, d: k[0] == dirid and k[1] == typ and named(img, d, name)

    def set_u64(v):
        return lambda b, d: b.__setitem__(slice(d, d + 8), struct.pack("<Q", v))

    patch(img, 258, dir_entry(DIR_INDEX, 256, b"log5"), set_u64(262))
    patch(img, 258, dir_entry(DIR_INDEX, 256, b"log3"),
          lambda b, d: b.__setitem__(slice(d + 30, d + 34), b"log4"))
    patch(img, 5, dir_entry(DIR_ITEM, 256, b"etc"), set_u64(259))
    patch(img, 258, lambda k, d: k == (264, INODE_REF, 256),
          lambda b, d: b.__setitem__(slice(d + 10, d + 14), b"logX"))
    patch(img, 258, lambda k, d: k == (265, INODE_REF, 256), set_u64(99))
    blob = bytearray(struct.pack("<BQ", 1, len(img)))
    for off, data in gen_sparse_seeds.records(bytes(img)):
        blob += struct.pack("<QH", off, len(data)) + data
    with open(out, "wb") as f:
        f.write(blob)
    print(f"{out}: {len(blob)} bytes")


if __name__ == "__main__":
    main()
