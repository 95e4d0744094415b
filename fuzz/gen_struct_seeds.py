#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""Seeds for fuzz_super, fuzz_block and fuzz_rootitem from the committed
kernel-made images (testdata/images/*/dev1.img.zst).

    gen_struct_seeds.py [REPO]     (default: the repository of this script)

super:    the primary superblock copy of each image, trailing zeros cut
          (the harness pads to 4096), flags 0 (checksum as written).
block:    leaves and nodes found by scanning each image for blocks carrying
          its metadata fsid (one per owner and level, deduplicated by
          bytenr), in fuzz_block's head/tail form, checksum as written.
rootitem: the items of root tree leaves and the INODE_REF/INODE_ITEM/DIR_*
          items of a subvolume leaf, in fuzz_rootitem's record form; every
          subvolume ROOT_ITEM is pointed at the harness's fs tree block
          (bytenr 32768, level 0, generation = the seed's generation).
Each corpus stays well under 300 KB. Output is deterministic. The corpora
also hold inputs merged from fuzzing runs (40-hex-digit names, libFuzzer's
-merge=1); this script neither makes nor removes those.
"""
import os, struct, sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata"))
import genlib  # noqa: E402  (testdata/genlib.py: zstd decompression)

SB_OFF = 0x10000
HDR = 101
ITEM = 25
KP = 33
RI_GEN, RI_BYTENR, RI_LEVEL, RI_GEN_V2 = 160, 176, 238, 239
FS_BLOCK = 32768
LAST_FREE = (1 << 64) - 256


def image(path):
    return genlib.unzstd_bytes(path)


def super_info(img):
    sb = img[SB_OFF:SB_OFF + 4096]
    incompat, = struct.unpack_from("<Q", sb, 0xbc)
    fsid = sb[0x20:0x30]
    meta = sb[0x23b:0x24b] if incompat & (1 << 10) else fsid
    nodesize, = struct.unpack_from("<I", sb, 0x94)
    csum, = struct.unpack_from("<H", sb, 0xc4)
    gen, = struct.unpack_from("<Q", sb, 0x48)
    return sb, meta, nodesize, csum, gen


def blocks(img, meta, nodesize):
    """(bytenr, owner, level, block) of every tree block, one per bytenr."""
    seen = {}
    for off in range(0, len(img) - nodesize + 1, nodesize):
        b = img[off:off + nodesize]
        if b[32:48] != meta:
            continue
        bytenr, = struct.unpack_from("<Q", b, 48)
        owner, = struct.unpack_from("<Q", b, 88)
        nritems, = struct.unpack_from("<I", b, 96)
        level = b[100]
        if level >= 8 or nritems > (nodesize - HDR) // ITEM or bytenr in seen:
            continue
        seen[bytenr] = (bytenr, owner, level, b)
    return [seen[k] for k in sorted(seen)]


def items(b):
    n, = struct.unpack_from("<I", b, 96)
    out = []
    for i in range(n):
        obj, typ, off, doff, size = struct.unpack_from("<QBQII", b, HDR + i * ITEM)
        out.append((obj, typ, off, b[HDR + doff:HDR + doff + size]))
    return out


def block_seed(b, nodesize, csum, expect):
    n, = struct.unpack_from("<I", b, 96)
    code = {4096: 0, 8192: 1, 16384: 2, 32768: 3, 65536: 4}[nodesize]
    if b[100]:
        head, tail = b[:HDR + n * KP], b""
    else:
        low = min([struct.unpack_from("<I", b, HDR + i * ITEM + 17)[0] for i in range(n)],
                  default=nodesize - HDR)
        head, tail = b[:HDR + n * ITEM], b[HDR + low:]
    return struct.pack("<BBH", code | (csum << 4), expect, len(head)) + head + tail


def objsel(obj):
    if 256 <= obj < 496:
        return bytes([obj - 256])
    if obj == (1 << 64) - 5:
        return b"\xf0"
    if 1 <= obj <= 11:
        return bytes([240 + obj])
    special = {(1 << 64) - 6: 252, (1 << 64) - 8: 253, LAST_FREE: 254}
    if obj in special:
        return bytes([special[obj]])
    return b"\xff" + struct.pack("<Q", obj)


def record(lst, obj, typ, off, data):
    ob = off.to_bytes(8, "little").rstrip(b"\0")
    return (bytes([lst]) + objsel(obj) + bytes([typ, len(ob)]) + ob +
            struct.pack("<H", len(data)) + data)


def fix_root_item(obj, data, gen):
    if not (obj == 5 or 256 <= obj <= LAST_FREE) or len(data) < 239:
        return data
    d = bytearray(data)
    old, = struct.unpack_from("<Q", d, RI_GEN)
    struct.pack_into("<Q", d, RI_GEN, gen)
    struct.pack_into("<Q", d, RI_BYTENR, FS_BLOCK)
    d[RI_LEVEL] = 0
    if len(d) >= 247 and struct.unpack_from("<Q", d, RI_GEN_V2)[0] == old:
        struct.pack_into("<Q", d, RI_GEN_V2, gen)
    return bytes(d)


def rootitem_seed(root_leaf, fs_leaf, gen, limit=12000):
    out = bytearray(struct.pack("<Q", gen))
    for obj, typ, off, data in items(root_leaf):
        out += record(0, obj, typ, off, fix_root_item(obj, data, gen))
    for obj, typ, off, data in items(fs_leaf) if fs_leaf else []:
        if typ in (1, 12, 84, 96) and len(out) < limit:
            out += record(1, obj, typ, off, data)
    return bytes(out)


def write(d, name, blob):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(blob)


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))
    imgdir = os.path.join(repo, "testdata", "images")
    corpus = os.path.join(repo, "fuzz", "corpus")
    big = {"dup", "nested", "node4k"}   # images whose other blocks are worth keeping
    for name in sorted(os.listdir(imgdir)):
        path = os.path.join(imgdir, name, "dev1.img.zst")
        if not os.path.exists(path):
            continue
        img = image(path)
        sb, meta, nodesize, csum, gen = super_info(img)
        write(os.path.join(corpus, "super"), name, b"\0" + sb.rstrip(b"\0"))
        bl = blocks(img, meta, nodesize)
        kinds = {}
        for bytenr, owner, level, b in bl:
            # subvolume trees (ids 256..) are alike: one of each level is enough
            cls = "subvol" if 256 <= owner <= LAST_FREE else str(owner)
            kinds.setdefault((cls, level), b)
        picked = sorted(kinds.items()) if name in big else \
            [kv for kv in sorted(kinds.items()) if kv[0] == ("1", 0)][:1]
        for i, ((cls, level), b) in enumerate(picked):
            write(os.path.join(corpus, "block"), f"{name}-o{cls}-l{level}",
                  block_seed(b, nodesize, csum, 0x15 if i % 2 else 0))
        if name in ("nested", "node4k", "csum-sha256", "dup"):
            # the fullest leaves: the latest root tree, the fs tree with the most names
            def fullest(own):
                return sorted((b for _, owner, level, b in bl if owner == own and level == 0),
                              key=lambda b: -struct.unpack_from("<I", b, 96)[0])
            roots = fullest(1)
            fs = (fullest(5) or [None])[0]
            for i, r in enumerate(roots[:3]):
                if i and r == roots[0]:
                    continue
                write(os.path.join(corpus, "rootitem"), f"{name}-{i}",
                      rootitem_seed(r, fs, gen))


if __name__ == "__main__":
    main()
