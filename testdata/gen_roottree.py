#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_roottree.py: the truth for the salvage of a root tree whose own
nodes are lost (tests/images/test_salvage_roottree.py), as root.

    gen_roottree.py [OUTDIR]             (default testdata/roottree)

mkfs.btrfs with 4 KiB nodes, metadata DUP, on a 128 MiB sparse file; on a
loop mount 36 subvolumes (sv00..sv35, nested ones among them) with a few
small files each, then a snapshot of every third one (read-only for every
other snapshot): 48 ROOT_ITEMs of 439 bytes and their ROOT_REF and
ROOT_BACKREF items, so the root tree has two levels (a root node over
several leaves). On a second mount a file of a few subvolumes is
rewritten and one subvolume made, so that older copies of root-tree
leaves remain on the device beside the live ones. Unmounted cleanly.

The kernel's view of a read-only mount is recorded (the format of
`btrfsimg walk --json --hash`), with `btrfs subvolume list -p -c -u -q -R`
and `-r` of the same mount; btrfs-progs' dump-tree of the root tree gives
its shape (every node's pointers, every leaf's generation and the ids of
the trees whose items it holds, the physical offsets of each block's
copies). Nothing of it comes from btrfsimg.

Writes to OUTDIR:
  roottree.img.zst  the undamaged image (zstd -19 --long=27)
  view.jsonl.zst    the kernel's view of it (zstd)
  truth.json        facts (as gen_salvage.py's), "subvols" (btrfs
                    subvolume list, parsed), "readonly" (ids) and
                    "roottree": {"root": logical, "level": L, "blocks":
                    {logical: {"level", "generation", "physical": [..],
                    "ptrs": [[objectid, logical, generation]] (nodes),
                    "objectids": [..] (leaves)}}}
"""
import json
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_levels  # noqa: E402  (dump_tree_blocks)
import gen_salvage as gs  # noqa: E402  (facts, chunk map, sh, put)
from genlib import record_view  # noqa: E402

SUBVOLS = 36
NAMED = {"ROOT_TREE": 1, "EXTENT_TREE": 2, "CHUNK_TREE": 3, "DEV_TREE": 4, "FS_TREE": 5,
         "ROOT_TREE_DIR": 6, "CSUM_TREE": 7, "QUOTA_TREE": 8, "UUID_TREE": 9,
         "FREE_SPACE_TREE": 10, "BLOCK_GROUP_TREE": 11, "DATA_RELOC_TREE": 2**64 - 9,
         "ORPHAN": 2**64 - 5}


def sv_path(i):
    """sv07 lies inside sv01 (every seventh one nested), the rest on top."""
    return "sv%02d/sv%02d" % (i - 6, i) if i % 7 == 0 and i else "sv%02d" % i


def populate(m):
    for i in range(SUBVOLS):
        p = os.path.join(m, sv_path(i))
        gs.sh("btrfs", "subvolume", "create", p)
        os.mkdir(os.path.join(p, "d"))
        for k in range(3):
            gs.put(m, "%s/d/f%d" % (sv_path(i), k), 30 + 700 * k + i)
    for i in range(0, SUBVOLS, 3):
        ro = ["-r"] if i % 2 == 0 else []
        gs.sh("btrfs", "subvolume", "snapshot", *ro, os.path.join(m, sv_path(i)),
              os.path.join(m, "snap%02d" % i))


def later(m):
    for i in (1, 10, 20, 33):
        gs.put(m, "%s/d/f0" % sv_path(i), 900 + i, ":later")
    gs.sh("btrfs", "subvolume", "create", os.path.join(m, "late"))
    gs.put(m, "late/x", 100)


PTR = re.compile(r"key \((\d+|[A-Z_]+) (\S+) (\d+)\) block (\d+) gen (\d+)")
ITEM = re.compile(r"item \d+ key \((\d+|[A-Z_]+) (\S+) (-?\d+)\)")


def objectid(s):
    return int(s) if s.isdigit() else NAMED.get(s, -1)


def root_tree_shape(img_path, img):
    """The root tree's blocks: a node's pointers (objectid, block,
    generation), a leaf's objectids."""
    def on_line(cur, s):
        p = PTR.search(s)
        if p and cur["level"]:
            cur["ptrs"].append([objectid(p.group(1)), int(p.group(4)), int(p.group(5))])
            return
        i = ITEM.match(s)
        if i and not cur["level"]:
            cur["objectids"].append(objectid(i.group(1)))
    return gen_levels.dump_tree_blocks(img_path, img, 1, ("objectids",), on_line)


LIST = re.compile(r"^ID (\d+) gen (\d+) cgen (\d+) parent (\d+) top level (\d+) "
                  r"parent_uuid (\S+) +received_uuid (\S+) +uuid (\S+) path (.*)$")


def subvol_list(mnt):
    out = []
    for line in gs.sh("btrfs", "subvolume", "list", "-p", "-c", "-u", "-q", "-R",
                      mnt).decode().splitlines():
        m = LIST.match(line)
        if not m:
            raise RuntimeError("unparsed: " + line)
        out.append({"id": int(m.group(1)), "generation": int(m.group(2)),
                    "cgen": int(m.group(3)), "parent_id": int(m.group(4)),
                    "parent_uuid": m.group(6), "received_uuid": m.group(7),
                    "uuid": m.group(8), "path": m.group(9)})
    ro = [int(line.split()[1]) for line in
          gs.sh("btrfs", "subvolume", "list", "-r", mnt).decode().splitlines()]
    return out, ro


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "roottree")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="roottree.")
    img, mnt = os.path.join(work, "roottree.img"), os.path.join(work, "mnt")
    os.mkdir(mnt)
    gs.sh("truncate", "-s", "128M", img)
    gs.sh("mkfs.btrfs", "-q", "-f", "-n", "4096", "-m", "dup", "-d", "single", img)
    gs.mounted_steps(img, mnt, (populate, later))
    data = open(img, "rb").read()
    copy = os.path.join(work, "copy.img")
    gs.sh("cp", "--sparse=always", img, copy)
    gs.sh("mount", "-o", "ro,noatime,loop", copy, mnt)
    try:
        record_view(mnt, os.path.join(work, "view.jsonl"))
        subvols, ro = subvol_list(mnt)
    finally:
        gs.sh("umount", mnt)
    gs.sh("zstd", "-q", "-19", "-f", os.path.join(work, "view.jsonl"), "-o",
          os.path.join(out, "view.jsonl.zst"))
    if open(img, "rb").read() != data:
        raise RuntimeError("the image changed after its record")
    truth = gs.facts(data)
    truth["subvols"], truth["readonly"] = subvols, ro
    truth["roottree"] = root_tree_shape(img, data)
    if truth["roottree"]["level"] < 1:
        raise RuntimeError("the root tree is one leaf, want two levels")
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(truth, f, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    gs.sh("zstd", "-q", "-19", "--long=27", "-f", img, "-o", os.path.join(out, "roottree.img.zst"))
    gs.sh("rm", "-rf", work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
