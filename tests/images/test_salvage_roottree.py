#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Salvage of a root tree whose own blocks are lost, against the kernel's
view of testdata/roottree/roottree.img.zst (testdata/gen_roottree.py: 4
KiB nodes, metadata DUP, 49 subvolumes and snapshots, so the root tree
has two levels). The root tree's shape (its root's pointers, each leaf's
generation and the tree ids it holds, where each block's copies are)
comes from btrfs-progs' dump-tree at generation time, the subvolume list
from `btrfs subvolume list` of the kernel's mount.

    test_salvage_roottree.py BTRFSIMG TESTDATA

On every copy of the blocks named, zeros (or a forgery):
  a  one root-tree leaf (superblocks intact): rebuilt from the older
     copies of root-tree leaves a scan finds; the ROOT_ITEMs known only
     from an older leaf said, their trees' newest roots found by scanning
  b  the root-tree root node (level 1): rebuilt from the leaves the extent
     tree records for tree 1 (the extent tree's own ROOT_ITEM is then out
     of reach: its root found by scanning)
  c  a and b together, and every superblock (the salvage open): the root
     taken from the extent tree's records
  d  as a, and three forged leaves holding the lost leaf's keys with other
     roots (checksummed, at free addresses): one of a newer generation
     (never used, counted), one of the lost leaf's own generation (taken,
     but the roots it names do not verify: each tree's newest root found
     by scanning is read instead, said) and one of another tree (owner 5:
     never weighed)
Each must exit 1, say what was rebuilt and from what, never roll back to
an older root tree, give every file of every subvolume exactly as the
kernel's record (walk --json --hash, every field), and `subvols --json`
as `btrfs subvolume list` (id, parent, path, uuids, generation, cgen, and
the read-only ones).
"""
import os
import struct
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
import imgtest  # noqa: E402
from test_salvage_mkfs import compare, parse_jsonl  # noqa: E402

TIMEOUT = 300
GEN_OFF, BYTENR_OFF, OWNER_OFF = 0x50, 0x30, 0x58


class Image:
    def __init__(self, base, truth):
        self.base, self.truth, self.ns = base, truth, truth["nodesize"]
        self.rt = truth["roottree"]

    def block(self, logical):
        return self.rt["blocks"][str(logical)]

    def leaves(self):
        """The root node's leaves, in key order."""
        return [p[1] for p in self.block(self.rt["root"])["ptrs"]]

    def lost_leaf(self):
        """A leaf of subvolumes' ROOT_ITEMs only, in the middle."""
        leaves = self.leaves()
        for lg in leaves[len(leaves) // 2:]:
            ids = self.block(lg)["objectids"]
            if ids and min(ids) >= 256 and max(ids) < 2**63:
                return lg
        raise RuntimeError("no leaf of subvolumes only")

    def copy(self, zero=(), supers=False):
        img = bytearray(self.base)
        if supers:
            for o in self.truth["super_physical"]:
                img[o:o + 4096] = bytes(4096)
        for logical in zero:
            for p in self.block(logical)["physical"]:
                img[p:p + self.ns] = bytes(self.ns)
        return img

    def forge(self, img, like, gen, owner=1, skip=0):
        """A leaf like @like (its first copy, from the base image) of
        generation @gen and @owner, every ROOT_ITEM's root pointing one
        node further (where no root of that tree is), written checksummed
        into the (@skip+1)th zeroed block of the metadata area after the
        root tree's blocks: where it lies."""
        src = self.block(like)["physical"][0]
        leaf = bytearray(self.base[src:src + self.ns])
        struct.pack_into("<QQ", leaf, GEN_OFF, gen, owner)
        nitems, = struct.unpack_from("<I", leaf, 0x60)
        for i in range(nitems):
            it = 0x65 + 25 * i
            if leaf[it + 8] == 132:  # ROOT_ITEM: its bytenr (at 176) elsewhere
                off, = struct.unpack_from("<I", leaf, it + 17)
                p = 0x65 + off + 176
                b, = struct.unpack_from("<Q", leaf, p)
                struct.pack_into("<Q", leaf, p, b + self.ns)
        phys = max(b["physical"][0] for b in self.rt["blocks"].values())
        for at in range(phys + self.ns, len(img) - self.ns, self.ns):
            if not any(img[at:at + self.ns]):
                if skip:
                    skip -= 1
                    continue
                logical = at - src + like
                struct.pack_into("<Q", leaf, BYTENR_OFF, logical)
                img[at:at + self.ns] = leaf
                img[at:at + 4] = struct.pack("<I", imgtest.crc32c(bytes(img[at + 32:at + self.ns])))
                return at
        raise RuntimeError("no zeroed block to forge a leaf in")


def subvols_equal(truth, got):
    """Problems of `subvols --json` records @got against btrfs subvolume
    list (the kernel's): every subvolume, every field it gives."""
    probs, by = [], {r["id"]: r for r in got}
    ro = set(truth["readonly"])
    for w in truth["subvols"]:
        g = by.get(w["id"])
        if g is None:
            probs.append("%d: missing" % w["id"])
            continue
        for k in ("generation", "cgen", "parent_id", "path"):
            if g.get(k) != w[k]:
                probs.append("%d: %s %r, the kernel %r" % (w["id"], k, g.get(k), w[k]))
        for k in ("uuid", "parent_uuid", "received_uuid"):
            if (g.get(k) or "-") != w[k]:
                probs.append("%d: %s %r, the kernel %r" % (w["id"], k, g.get(k), w[k]))
        if g.get("readonly") != (w["id"] in ro):
            probs.append("%d: readonly %r" % (w["id"], g.get("readonly")))
    extra = sorted(set(by) - {w["id"] for w in truth["subvols"]} - {5})
    probs += ["%d: not in btrfs subvolume list" % i for i in extra]
    return probs[:12]


def run_case(res, kv, cli, work, name, data, view, truth, said, unsaid=()):
    path = os.path.join(work, "case.img")
    with open(path, "wb") as f:
        f.write(data)
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", path], timeout=TIMEOUT)
    got = parse_jsonl(out) if rc in (0, 1) else []
    res.check("%s: walk exits 1 (results despite damage)" % name, rc == 1,
              "exit %r: %s" % (rc, err[-800:]))
    res.problems("%s: every file of every subvolume exactly the kernel's" % name,
                 compare(kv, got, view, set()))
    res.check("%s: not rolled back to an older root tree" % name,
              b"used instead" not in err and b"not rolled back" in err, err[-1500:])
    for what, ok in said:
        res.check("%s: stderr says %s" % (name, what), ok(err), err[-1500:])
    for what, bad in unsaid:
        res.check("%s: stderr does not say %s" % (name, what), not bad(err), err[-1500:])
    rc, out, err = imgtest.run_cli(cli, ["subvols", "--json", path], timeout=TIMEOUT)
    res.check("%s: subvols exits 1" % name, rc == 1, "exit %r: %s" % (rc, err[-600:]))
    res.problems("%s: subvols as btrfs subvolume list" % name,
                 subvols_equal(truth, parse_jsonl(out) if rc in (0, 1) else []))
    os.unlink(path)


def said_leaf(logical):
    return ("the lost leaf %d rebuilt from leaves a scan found" % logical,
            lambda e: b"leaf at logical %d (generation " % logical in e and
            b"rebuilt from" in e and b"root-tree leaves a scan found" in e)


def said_root(logical, n):
    return ("the root node %d rebuilt from its %d recorded leaves" % (logical, n),
            lambda e: b"root tree: node at logical %d (level 1, " % logical in e and
            b"rebuilt from %d blocks of level 0" % n in e and
            b"records by TREE_BLOCK_REF of tree 1" in e)


def cases(img):
    root, leaf = img.rt["root"], img.lost_leaf()
    n = len(img.leaves())
    older = ("the ROOT_ITEMs of the lost leaf known from older leaves, as of their generation",
             lambda e: b"known only as of generation" in e)
    ext = ("the extent tree's root found by scanning",
           lambda e: b"the extent tree's ROOT_ITEM unreadable" in e)
    d, lgen = img.copy([leaf]), img.block(leaf)["generation"]
    gen = img.truth["generation"] + 5
    img.forge(d, leaf, gen)
    img.forge(d, leaf, lgen, skip=1)  # as new as the lost leaf itself
    img.forge(d, leaf, lgen + 1, owner=5, skip=2)  # another tree's
    return [
        ("a: a root-tree leaf lost", img.copy([leaf]), [said_leaf(leaf), older], []),
        ("b: the root-tree root node lost", img.copy([root]), [said_root(root, n), ext], []),
        ("c: root node and a leaf lost, no superblock", img.copy([root, leaf], supers=True),
         [said_root(root, n), said_leaf(leaf), ext], []),
        ("d: a leaf lost; forged leaves with its keys, newer, as new and of another tree", d,
         [said_leaf(leaf), ("the newer forged leaf counted, not used",
                            lambda e: b"1 leaves newer than it holding its keys not used" in e),
          ("the roots the forged leaf as new as the lost one names do not verify",
           lambda e: b"taken from a scanned leaf names a root" in e and
           b"its newest root found by scanning that verifies is read instead" in e)],
         [("the forged generation %d" % gen, lambda e: b"generation %d" % gen in e)]),
    ]


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    cli, testdata = sys.argv[1], sys.argv[2]
    res = imgtest.Tally()
    kv = imgtest.import_kview(testdata)
    d = os.path.join(testdata, "roottree")
    truth, view, raw = imgtest.load_recorded(d, "roottree.img.zst")
    img = Image(raw, truth)
    res.check("the root tree has two levels, its root several leaves (the truth)",
              img.rt["level"] == 1 and len(img.leaves()) > 2, img.rt["level"])
    res.check("more than 40 subvolumes (the truth)", len(truth["subvols"]) > 40)
    with tempfile.TemporaryDirectory(prefix="roottree.") as work:
        for name, data, said, unsaid in cases(img):
            run_case(res, kv, cli, work, name, bytes(data), view, truth, said, unsaid)
    return res.summary()


if __name__ == "__main__":
    sys.exit(main())
