#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_logtree_seeds.py [OUTDIR]: write the fuzz_logtree seeds (default
fuzz/corpus/logtree/): small fs trees and logs built item by item, one per
replay path (new names, deleted names in logged ranges, renames, extrefs,
xattrs, truncation, extent splits, freed extents and their checksums,
conflicting names, unlinked inodes) plus a few malformed ones. The input
format is described at the top of fuzz/fuzz_logtree.c.
"""
import os
import struct
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from genlib import crc32c_raw  # noqa: E402  (testdata/genlib.py)

FS, LOG, CSUM, EXT = 0, 1, 2, 3
INODE, IREF, EXTREF, XATTR, DIRLOG, DIRITEM, DIRINDEX, EXTENT, CSUMK, EXTITEM = \
    1, 12, 13, 24, 72, 84, 96, 108, 128, 168
T = 8


def name_hash(name):
    return crc32c_raw(0xFFFFFFFE, name)


def extref_hash(parent, name):
    return crc32c_raw(parent & 0xFFFFFFFF, name)


def rec(which, objectid, ktype, offset, data):
    if 256 <= objectid < 256 + 240:
        ob = bytes([objectid - 256])
    elif objectid == 5:
        ob = bytes([243])
    else:
        ob = bytes([255]) + struct.pack("<Q", objectid & (2**64 - 1))
    return bytes([which]) + ob + bytes([ktype, 8]) + struct.pack("<Q", offset) + \
        struct.pack("<H", len(data)) + data


def inode(gen, transid, size, nbytes, nlink, mode, seq, t):
    b = bytearray(160)
    struct.pack_into("<QQQQ", b, 0, gen, transid, size, nbytes)
    struct.pack_into("<I", b, 40, nlink)
    struct.pack_into("<I", b, 52, mode)
    struct.pack_into("<Q", b, 72, seq)
    for i in range(4):
        struct.pack_into("<QI", b, 112 + 12 * i, 1700000000 + t + i, 1000 * t + i)
    return bytes(b)


def dent(ino, ftype, name, transid=7, loc_type=INODE, data=b""):
    return struct.pack("<QBQQHHB", ino, loc_type, 0, transid, len(data), len(name), ftype) + name + data


def iref(index, name):
    return struct.pack("<QH", index, len(name)) + name


def extref(parent, index, name):
    return struct.pack("<QQH", parent, index, len(name)) + name


def reg(gen, bytenr, disk, off, num, ram, typ=1, comp=0):
    return struct.pack("<QQBBHBQQQQ", gen, ram, comp, 0, 0, typ, bytenr, disk, off, num)


def inline(gen, data):
    return struct.pack("<QQBBHB", gen, len(data), 0, 0, 0, 0) + data


def root_dir(size=0, seq=1):
    return [rec(FS, 256, INODE, 0, inode(3, 7, size, 16384, 1, 0o40755, seq, 1)),
            rec(FS, 256, IREF, 256, iref(0, b".."))]


def file_in_root(ino, name, index, size=0, nbytes=0):
    return [rec(FS, 256, DIRITEM, name_hash(name), dent(ino, 1, name)),
            rec(FS, 256, DIRINDEX, index, dent(ino, 1, name)),
            rec(FS, ino, INODE, 0, inode(7, 7, size, nbytes, 1, 0o100644, 1, ino)),
            rec(FS, ino, IREF, 256, iref(index, name))]


def csum_items(which, logical, n, seed):
    return [rec(which, -10, CSUMK, logical, b"".join(struct.pack("<I", seed + i) for i in range(n)))]


def extent_item(bytenr, size, refs=1):
    return [rec(EXT, bytenr, EXTITEM, size, struct.pack("<QQQ", refs, 7, 1))]


SEEDS = {}


def seed(name, flags, recs):
    SEEDS[name] = bytes([flags]) + b"".join(recs)


# a new file with inline data, linked by its logged ref
seed("new-file", 3, root_dir() + [
    rec(LOG, 257, INODE, 0, inode(8, 8, 5, 999, 1, 0o100644, 4, 2)),
    rec(LOG, 257, IREF, 256, iref(2, b"f")),
    rec(LOG, 257, EXTENT, 0, inline(8, b"hello"))])

# a logged range [2, 3] holding only "b": "a" is unlinked, then orphaned
seed("dir-range", 3, root_dir(4) + file_in_root(257, b"a", 2) + file_in_root(258, b"b", 3) + [
    rec(LOG, 256, INODE, 0, inode(3, 8, 2, 0, 1, 0o40755, 5, 5)),
    rec(LOG, 256, DIRLOG, 2, struct.pack("<Q", 3)),
    rec(LOG, 256, DIRINDEX, 3, dent(258, 1, b"b", 8))])

# a rename from dir 257 to dir 258, both logged
seed("rename", 3, root_dir(4) + [
    rec(FS, 256, DIRINDEX, 2, dent(257, 2, b"a")), rec(FS, 256, DIRITEM, name_hash(b"a"), dent(257, 2, b"a")),
    rec(FS, 256, DIRINDEX, 3, dent(258, 2, b"b")), rec(FS, 256, DIRITEM, name_hash(b"b"), dent(258, 2, b"b")),
    rec(FS, 257, INODE, 0, inode(7, 7, 2, 0, 1, 0o40755, 1, 3)), rec(FS, 257, IREF, 256, iref(2, b"a")),
    rec(FS, 258, INODE, 0, inode(7, 7, 0, 0, 1, 0o40755, 1, 4)), rec(FS, 258, IREF, 256, iref(3, b"b")),
    rec(FS, 257, DIRITEM, name_hash(b"x"), dent(259, 1, b"x")), rec(FS, 257, DIRINDEX, 2, dent(259, 1, b"x")),
    rec(FS, 259, INODE, 0, inode(7, 7, 0, 0, 1, 0o100644, 1, 5)), rec(FS, 259, IREF, 257, iref(2, b"x")),
    rec(LOG, 257, INODE, 0, inode(7, 8, 0, 0, 1, 0o40755, 3, 6)),
    rec(LOG, 257, DIRLOG, 2, struct.pack("<Q", 2**64 - 1)),
    rec(LOG, 258, INODE, 0, inode(7, 8, 4, 0, 1, 0o40755, 3, 7)),
    rec(LOG, 258, DIRLOG, 2, struct.pack("<Q", 2**64 - 1)),
    rec(LOG, 258, DIRINDEX, 2, dent(259, 1, b"y", 8)),
    rec(LOG, 259, INODE, 0, inode(7, 8, 0, 0, 1, 0o100644, 4, 8)),
    rec(LOG, 259, IREF, 258, iref(2, b"y"))])

# hard links through extrefs, one of the tree's names gone from the log
seed("extrefs", 3, root_dir(6) + file_in_root(257, b"f", 2) + [
    rec(FS, 256, DIRITEM, name_hash(b"g"), dent(257, 1, b"g")), rec(FS, 256, DIRINDEX, 3, dent(257, 1, b"g")),
    rec(FS, 257, EXTREF, extref_hash(256, b"g"), extref(256, 3, b"g")),
    rec(LOG, 257, INODE, 0, inode(7, 8, 0, 0, 2, 0o100644, 3, 9)),
    rec(LOG, 257, IREF, 256, iref(2, b"f")),
    rec(LOG, 257, EXTREF, extref_hash(256, b"h"), extref(256, 4, b"h"))])

# xattrs: one dropped, one replaced; an inode logged without links
seed("xattrs", 3, root_dir(2) + file_in_root(257, b"f", 2) + [
    rec(FS, 257, XATTR, name_hash(b"user.a"), dent(0, 8, b"user.a", 7, 0, b"1")),
    rec(FS, 257, XATTR, name_hash(b"user.b"), dent(0, 8, b"user.b", 7, 0, b"2")),
    rec(LOG, 257, INODE, 0, inode(7, 8, 0, 0, 1, 0o100644, 3, 9)),
    rec(LOG, 257, XATTR, name_hash(b"user.b"), dent(0, 8, b"user.b", 8, 0, b"33")),
    rec(LOG, 300, INODE, 0, inode(8, 8, 4096, 0, 0, 0o100644, 1, 10)),
    rec(LOG, 300, EXTENT, 0, reg(8, 0x70000000, 4096, 0, 4096, 4096))])

MIB = 1 << 20
ext_base = root_dir(2) + file_in_root(257, b"f", 2, MIB, MIB) + [
    rec(FS, 257, EXTENT, 0, reg(7, 0x40000000, MIB, 0, MIB, MIB))] + \
    csum_items(CSUM, 0x40000000, 256, 0x1000) + extent_item(0x40000000, MIB)

# a 4 KiB write into a 1 MiB extent: split, new checksum
seed("extent-split", 3, ext_base + [
    rec(LOG, 257, INODE, 0, inode(7, 8, MIB, 0, 1, 0o100644, 2, 7)),
    rec(LOG, 257, EXTENT, 262144, reg(8, 0x50000000, 4096, 0, 4096, 4096))] +
    csum_items(LOG, 0x50000000, 1, 0xaabbccdd))

# the whole extent rewritten: the old one is freed, its checksums go
seed("extent-freed", 3, ext_base + [
    rec(LOG, 257, INODE, 0, inode(7, 8, MIB, 0, 1, 0o100644, 2, 7)),
    rec(LOG, 257, EXTENT, 0, reg(8, 0x60000000, MIB, 0, MIB, MIB))] +
    csum_items(LOG, 0x60000000, 256, 0x2000))

# truncated to 100000 bytes, and a prealloc extent past EOF, without NO_HOLES
seed("truncate", 2, ext_base + [
    rec(LOG, 257, INODE, 0, inode(7, 8, 100000, 0, 1, 0o100644, 2, 7)),
    rec(LOG, 257, EXTENT, 0, reg(7, 0x40000000, MIB, 0, 102400, MIB)),
    rec(LOG, 257, EXTENT, 102400, reg(0, 0, 0, 0, 4096, 4096)),
    rec(LOG, 257, EXTENT, 1 << 21, reg(8, 0x80000000, 65536, 0, 65536, 65536, typ=2))])

# a logged name that is taken in the tree by another existing inode
seed("conflict", 3, root_dir(2) + file_in_root(257, b"n", 2) + [
    rec(FS, 258, INODE, 0, inode(7, 7, 0, 0, 1, 0o100644, 1, 11)),
    rec(FS, 258, IREF, 256, iref(3, b"m")),
    rec(FS, 256, DIRITEM, name_hash(b"m"), dent(258, 1, b"m")), rec(FS, 256, DIRINDEX, 3, dent(258, 1, b"m")),
    rec(LOG, 256, INODE, 0, inode(3, 8, 2, 0, 1, 0o40755, 4, 12)),
    rec(LOG, 256, DIRLOG, 2, struct.pack("<Q", 9)),
    rec(LOG, 256, DIRINDEX, 4, dent(258, 1, b"n", 8))])

# malformed: a range ending before it starts; a ref past its item; a
# directory entry for a directory that does not exist
seed("bad-range", 3, root_dir() + [
    rec(LOG, 256, INODE, 0, inode(3, 8, 0, 0, 1, 0o40755, 2, 1)),
    rec(LOG, 256, DIRLOG, 5, struct.pack("<Q", 1))])
seed("bad-ref", 3, root_dir() + [
    rec(LOG, 257, INODE, 0, inode(8, 8, 0, 0, 1, 0o100644, 1, 2)),
    rec(LOG, 257, IREF, 256, struct.pack("<QH", 2, 200) + b"name")])
seed("no-dir", 3, root_dir() + [rec(LOG, 400, DIRINDEX, 2, dent(401, 1, b"x", 8))])

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "fuzz", "corpus", "logtree")
    # the key offset of the root tree's DIR_ITEM "default" (dir 6) on every mkfs.btrfs image
    assert name_hash(b"default") == 2378154706
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
