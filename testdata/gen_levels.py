#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_levels.py: the truth for the salvage of trees whose nodes are lost at
every level (tests/images/test_salvage_levels.py), as root.

    gen_levels.py [OUTDIR]               (default testdata/levels)
    gen_levels.py --flat [OUTDIR]        (default testdata/levels-flat)
    gen_levels.py --deep [OUTDIR]        (default testdata/levels-deep)

mkfs.btrfs with 4 KiB nodes (the smallest the kernel takes on a 4 KiB
page), metadata DUP, on a 128 MiB sparse file; on a loop mount 1200 small
files (inline, and every tenth one data extent) in two directories, so
that the top-level tree has three levels (a root of level 2 over level-1
nodes over leaves). Then a writable snapshot of it (tree 256, /snap), and,
on a second mount, a tenth of the top-level files rewritten, some removed
and new ones made: the top-level tree copies the nodes it shares with the
snapshot, so the snapshot's nodes carry full back references and its
leaves SHARED_BLOCK_REFs only. Unmounted cleanly.

--flat: the same without the snapshot (the second mount still rewrites,
removes and adds files, so older copies of leaves remain on the device):
the tree a scan rebuilds from its leaves alone, when its root and the
extent tree are lost, with more leaves than one 4 KiB node holds.

--deep: the tree a scan rebuilds under three synthesized levels: 16,000
files, each with a 2,000-byte xattr (one inode to a 4 KiB leaf, the value
alike but for its name, so the image compresses), more leaves than two
levels of 4 KiB nodes hold (121 x 121); a second mount rewrites every
tenth xattr, removes every thirtieth file and makes 100 new ones. Its
truth keeps of the tree's shape only the root block, the leaf count and
the level-1 node count (every block would be megabytes).

The kernel's view of a read-only mount is recorded with gen_kview.py (the
format of `btrfsimg walk --json --hash`), and btrfs-progs' dump-tree of
both trees gives the tree shape: every node (level, generation, its
pointers) and every leaf (generation, the objectids of its items and the
inode numbers its directory entries name), with the physical offsets of
each block's copies. Nothing of it comes from btrfsimg.

Writes to OUTDIR:
  levels.img.zst   the undamaged image (zstd -19 --long=27)
  view.jsonl.zst   the kernel's view of it (zstd)
  truth.json       facts (as gen_salvage.py's) and "trees": {tree id:
                   {"root": logical, "level": L, "blocks": {logical:
                   {"level", "generation", "physical": [..], "ptrs":
                   [[objectid, type, offset, logical, generation]] (nodes),
                   "objectids": [..], "dirents": [..] (leaves)}}}}
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_salvage as gs  # noqa: E402  (facts, chunk map, record)

FILES = 1200
TREES = (5, 256)


def populate(m, snapshot=True):
    for d in ("a", "b"):
        os.mkdir(os.path.join(m, d))
    for i in range(FILES):
        rel = "%s/f%04d" % ("ab"[i % 2], i)
        gs.put(m, rel, 5000 if i % 10 == 0 else 40 + (i * 7) % 300)
    if snapshot:
        gs.sh("btrfs", "subvolume", "snapshot", m, os.path.join(m, "snap"))


def after_snapshot(m):
    for i in range(0, FILES, 10):
        rel = "%s/f%04d" % ("ab"[i % 2], i)
        if i % 30 == 0:
            os.unlink(os.path.join(m, rel))
        else:
            gs.put(m, rel, 80 + i % 200, ":after-snapshot")
    for i in range(100):
        gs.put(m, "a/new%03d" % i, 60 + i)


DEEP_FILES = 16000


def xattr_value(i):
    return (b"%06d" % i) * 334  # 2004 bytes


def populate_deep(m):
    os.mkdir(os.path.join(m, "x"))
    for i in range(DEEP_FILES):
        path = os.path.join(m, "x", "f%05d" % i)
        with open(path, "wb") as f:
            f.write(b"%d\n" % i)
        os.setxattr(path, "user.big", xattr_value(i))


def after_deep(m):
    for i in range(0, DEEP_FILES, 10):
        path = os.path.join(m, "x", "f%05d" % i)
        if i % 30 == 0:
            os.unlink(path)
        else:
            os.setxattr(path, "user.big", xattr_value(i + 1000000))
    for i in range(100):
        path = os.path.join(m, "x", "new%03d" % i)
        with open(path, "wb") as f:
            f.write(b"new %d\n" % i)
        os.setxattr(path, "user.big", xattr_value(i + 2000000))


def shape_summary(shape):
    """Of a tree's shape, only what the deep test needs: its root block,
    how many leaves and level-1 nodes."""
    blocks = shape["blocks"]
    return {"root": shape["root"], "level": shape["level"],
            "blocks": {shape["root"]: blocks[shape["root"]]},
            "leaves": sum(1 for b in blocks.values() if b["level"] == 0),
            "level1": sum(1 for b in blocks.values() if b["level"] == 1)}


HEAD = re.compile(r"^(node|leaf) (\d+) (?:level (\d+) )?items (\d+) free.* generation (\d+) owner")
PTR = re.compile(r"key \((\d+) (\S+) (\d+)\) block (\d+) gen (\d+)")
ITEM = re.compile(r"item \d+ key \((\d+|[A-Z_]+) (\S+) (\d+)\)")
LOCATION = re.compile(r"location key \((\d+) INODE_ITEM 0\)")
KEY_TYPES = {"INODE_ITEM": 1, "INODE_REF": 12, "XATTR_ITEM": 24, "DIR_ITEM": 84,
             "DIR_INDEX": 96, "EXTENT_DATA": 108, "ROOT_ITEM": 132}


def dump_tree_blocks(img_path, img, tree, leaf_lists, on_line):
    """Every block of tree @tree as btrfs-progs' dump-tree prints it: level,
    generation, physical address, and "ptrs" (a node) or the lists named
    @leaf_lists (a leaf, each sorted without repeats at the end), which
    @on_line(block, line) fills from the block's other lines."""
    f = gs.facts(img)
    chunks = gs._leaf_chunks(img, f["chunk_root_physical"][0], f["nodesize"])
    text = gs.sh("btrfs", "inspect-internal", "dump-tree", "-t", str(tree), img_path).decode()
    blocks, cur, root = {}, None, None
    for line in text.splitlines():
        s = line.strip()
        h = HEAD.match(s)
        if h:
            cur = {"level": int(h.group(3) or 0), "generation": int(h.group(5)),
                   "physical": gs._map(chunks, int(h.group(2)))}
            for name in ("ptrs",) if cur["level"] else leaf_lists:
                cur[name] = []
            blocks[int(h.group(2))] = cur
            root = int(h.group(2)) if root is None else root
        elif cur is not None:
            on_line(cur, s)
    for b in blocks.values():
        for name in () if b["level"] else leaf_lists:
            b[name] = sorted(set(b[name]))
    return {"root": root, "level": blocks[root]["level"], "blocks": blocks}


def tree_shape(img_path, img, tree):
    """Tree @tree's blocks: a node's pointers (key, block, generation), a
    leaf's inode numbers and the inodes its directory entries name."""
    def on_line(cur, s):
        p = PTR.search(s)
        if p and cur["level"]:
            cur["ptrs"].append([int(p.group(1)), KEY_TYPES.get(p.group(2), -1), int(p.group(3)),
                                int(p.group(4)), int(p.group(5))])
            return
        i = ITEM.match(s)
        if i and i.group(1).isdigit():
            cur["objectids"].append(int(i.group(1)))
        loc = LOCATION.search(s)
        if loc and not cur["level"]:
            cur["dirents"].append(int(loc.group(1)))
    return dump_tree_blocks(img_path, img, tree, ("objectids", "dirents"), on_line)


def main():
    args = sys.argv[1:]
    flat, deep = "--flat" in args, "--deep" in args
    args = [a for a in args if a not in ("--flat", "--deep")]
    trees = (5,) if flat or deep else TREES
    name = "levels-deep" if deep else "levels-flat" if flat else "levels"
    out = args[0] if args else os.path.join(HERE, name)
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="levels.")
    img, copy, mnt = (os.path.join(work, n) for n in ("levels.img", "copy.img", "mnt"))
    os.mkdir(mnt)
    gs.sh("truncate", "-s", "512M" if deep else "128M", img)
    gs.sh("mkfs.btrfs", "-q", "-f", "-n", "4096", "-m", "dup", "-d", "single", img)
    steps = (populate_deep, after_deep) if deep else \
        ((lambda m: populate(m, False)) if flat else populate, after_snapshot)
    gs.mounted_steps(img, mnt, steps)
    data = open(img, "rb").read()
    gs.sh("cp", "--sparse=always", img, copy)
    gs.record(copy, mnt, os.path.join(work, "view.jsonl"))
    gs.sh("zstd", "-q", "-19", "-f", os.path.join(work, "view.jsonl"), "-o",
          os.path.join(out, "view.jsonl.zst"))
    if open(img, "rb").read() != data:
        raise RuntimeError("the image changed after its record")
    truth = gs.facts(data)
    truth["trees"] = {t: tree_shape(img, data, t) for t in trees}
    for t, shape in truth["trees"].items():
        if shape["level"] < 2:
            raise RuntimeError("tree %d has %d levels, want 3" % (t, shape["level"] + 1))
    if deep:
        truth["trees"] = {t: shape_summary(shape) for t, shape in truth["trees"].items()}
        if truth["trees"][5]["leaves"] <= 121 * 121:
            raise RuntimeError("tree 5 has %d leaves, want more than two levels of "
                               "4 KiB nodes hold" % truth["trees"][5]["leaves"])
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(truth, f, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    gs.sh("zstd", "-q", "-19", "--long=27", "-f", img, "-o", os.path.join(out, "levels.img.zst"))
    gs.sh("rm", "-rf", work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
