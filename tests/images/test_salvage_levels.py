#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Salvage of trees whose nodes are lost at every level, against the
kernel's view of testdata/levels/levels.img.zst (testdata/gen_levels.py:
a top-level tree of three levels, 4 KiB nodes, metadata DUP, and a
snapshot of it whose nodes the top-level tree copied since, so the
snapshot's nodes carry full back references and its leaves
SHARED_BLOCK_REFs only). The tree shape (every node's pointers, every
leaf's objectids and directory entries, where each block's copies are)
comes from btrfs-progs' dump-tree at generation time.

    test_salvage_levels.py BTRFSIMG TESTDATA

Every copy has its superblocks zeroed (the salvage open) and, on every
copy of the blocks named, zeros:
  a  the top-level tree's root (level 2)
  b  that root and one of its level-1 nodes
  c  one level-1 node below a readable root
  d  the snapshot's root, whose children are shared nodes
  d2 the snapshot's root and one of its shared level-1 nodes (its leaves
     named by SHARED_BLOCK_REF only)
  e  as b, with a stale copy of that level-1 node (its generation one
     older, checksummed again) at its place on both copies
  f  as b, and one leaf below that level-1 node
  g  as b, and a leaf below that node replaced by a copy of its neighbour
     made to pass for it (address, generation, checksum): their keys
     overlap, so that node is not rebuilt and the files below it are
     missing or without content, never false
  h  on testdata/levels-flat (the same without the snapshot, made by
     gen_levels.py --flat): the top-level tree's root and every block of
     the extent tree, so the tree is rebuilt from the leaves a scan finds
     (more than one 4 KiB node holds: two levels synthesized), older
     copies of leaves and copies written twice in the last transaction
     beside them (the free space tree tells those apart); the inodes at
     the edges between level-1 nodes are not read, each said
Each walk (walk --json --hash) must give every file whose leaves survive
exactly as the kernel's record, every field, and nothing the kernel does
not show; in f (g) the files with items or directory entries in the
lost leaf (node) may be missing, and the files at its edges listed
without content (named on stderr), never shown other than the kernel's. stderr names
each rebuilt node (tree, level, how many children, by which references)
and the count of unreadable recorded blocks; exit 1.
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
from test_salvage_mkfs import MARKS, compare, parse_jsonl  # noqa: E402

TIMEOUT = 300


class Image:
    def __init__(self, base, truth, salvage=True):
        self.base, self.truth, self.ns = base, truth, truth["nodesize"]
        self.salvage = salvage  # superblocks zeroed: the salvage open

    def tree(self, t):
        return self.truth["trees"][str(t)]

    def block(self, t, logical):
        return self.tree(t)["blocks"][str(logical)]

    def level1(self, t):
        """The level-1 nodes below tree @t's root, in key order."""
        root = self.block(t, self.tree(t)["root"])
        return [p[3] for p in root["ptrs"]]

    def copy(self, zero=(), forge=(), twin=None):
        """The base image, superblocks zeroed (a salvage image), every copy of each (tree,
        logical) in @zero zeroed, each in @forge replaced by itself one
        generation older, checksummed again, and with @twin (tree, a, b)
        leaf b replaced by a copy of leaf a made to pass for b (its address
        and generation, checksummed again)."""
        img = bytearray(self.base)
        for o in (64 << 10, 64 << 20) if self.salvage else ():
            img[o:o + 4096] = bytes(4096)
        for t, logical in zero:
            for p in self.block(t, logical)["physical"]:
                img[p:p + self.ns] = bytes(self.ns)
        for t, logical in forge:
            for p in self.block(t, logical)["physical"]:
                gen, = struct.unpack_from("<Q", img, p + 0x50)
                struct.pack_into("<Q", img, p + 0x50, gen - 1)
                self.checksum(img, p)
        if twin:
            t, a, b = twin
            src = self.block(t, a)["physical"][0]
            for p in self.block(t, b)["physical"]:
                img[p:p + self.ns] = self.base[src:src + self.ns]
                struct.pack_into("<Q", img, p + 0x30, b)
                struct.pack_into("<Q", img, p + 0x50, self.block(t, b)["generation"])
                self.checksum(img, p)
        return img

    def zero_owner(self, img, owner):
        """Every block of tree @owner in @img (every copy, every
        generation: found by their headers) zeroed; how many."""
        fsid, n = bytes.fromhex(self.truth["fsid"]), 0
        for p in range(0, len(img) - self.ns + 1, self.ns):
            if img[p + 0x20:p + 0x30] == fsid and \
                    struct.unpack_from("<Q", img, p + 0x58)[0] == owner:
                img[p:p + self.ns] = bytes(self.ns)
                n += 1
        return n

    def checksum(self, img, p):
        img[p:p + 4] = struct.pack("<I", imgtest.crc32c(bytes(img[p + 32:p + self.ns])))


def lost_paths(view, leaf, subvol):
    """The paths of subvolume @subvol whose inode has items in @leaf, or
    whose directory entry is there, and everything below them."""
    inos = set(leaf["objectids"]) | set(leaf["dirents"])
    top = {r["path"] for r in view if r["subvol"] == subvol and r["ino"] in inos}
    return {r["path"] for r in view
            if any(r["path"] == p or r["path"].startswith(p + "/") for p in top)}


def file_leaf(img, view, node):
    """A leaf below level-1 node @node of tree 5 holding no directory's
    items: its logical address."""
    dirs = {r["ino"] for r in view if r["subvol"] == 5 and r["mode"] & 0o170000 == 0o040000}
    leaves = [p[3] for p in img.block(5, node)["ptrs"]]
    for lg in leaves[len(leaves) // 2:] + leaves[:len(leaves) // 2]:
        if not set(img.block(5, lg)["objectids"]) & dirs:
            return lg
    raise RuntimeError("no leaf of files only below node %d" % node)


def rebuilt_said(err, tree, logical, level, children, unread=0):
    """The damage line that says @logical of @tree was rebuilt."""
    want = (b"tree %d: " % tree, b"at logical %d (level %d, " % (logical, level),
            b"rebuilt from %d live blocks of level %d" % (children, level - 1),
            b"; %d recorded blocks unreadable, their keys lost" % unread)
    return any(all(w in line for w in want) for line in err.splitlines())


def boundary_paths(img, view, node):
    """The files of tree 5 whose items may straddle a gap between two
    leaves below level-1 node @node, or between its leaves and its
    neighbours' (the truth's leaf order): where a lost leaf may have been,
    so a file there cannot be proven whole."""
    order = [lf for n in img.level1(5) for lf in (p[3] for p in img.block(5, n)["ptrs"])]
    mine = [p[3] for p in img.block(5, node)["ptrs"]]
    i, j = order.index(mine[0]), order.index(mine[-1])
    seq = [img.block(5, lf)["objectids"] for lf in order[max(i - 1, 0):j + 2]]
    spans = [(a[0] if k == 0 and i > 0 else a[-1], b[0]) for k, (a, b) in
             enumerate(zip(seq, seq[1:]))]
    return {r["path"] for r in view if r["subvol"] == 5 and
            any(lo <= r["ino"] <= hi for lo, hi in spans)}


def run_case(res, kv, cli, work, name, data, view, lost, said, unsure=frozenset()):
    path = os.path.join(work, "case.img")
    with open(path, "wb") as f:
        f.write(data)
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", path], timeout=TIMEOUT)
    got = parse_jsonl(out) if rc in (0, 1) else []
    res.check("%s: exit 1 (results despite damage)" % name, rc == 1,
              "exit %r: %s" % (rc, err[-600:]))
    res.problems("%s: every file whose leaves survive exactly the kernel's, none false" % name,
                 compare(kv, got, view, lost | unsure))
    for what, ok in said:
        res.check("%s: stderr says %s" % (name, what), ok(err), err[-1500:])
    if unsure:
        by = {r["path"]: r for r in got}
        bare = [p for p in sorted(unsure - lost) if p not in by]
        res.check("%s: files at the lost leaf's edges still listed" % name, not bare, bare[:5])
        unsaid = [p for p, r in by.items() if r.get("sha256") is None and
                  r["mode"] & 0o170000 == 0o100000 and os.fsencode(p) + b": " not in err]
        res.check("%s: every file shown without content named on stderr" % name,
                  not unsaid, unsaid[:5])
    os.unlink(path)


def scanned_leaves(res, kv, cli, work, img, view):
    """h, on the image without a snapshot (testdata/levels-flat): tree 5's
    root lost and every block of the extent tree too, so no record says
    which blocks were live: the tree comes from the leaves a scan finds,
    more of them than one node holds (two levels synthesized), older
    copies of its leaves on the device beside them. Every file exactly the
    kernel's, the salvage's marks aside."""
    data = img.copy([(5, img.tree(5)["root"])])
    nleaves = sum(1 for b in img.tree(5)["blocks"].values() if b["level"] == 0)
    max_ptrs = (img.ns - 101) // 33
    name = "h: root and the extent tree lost, %d leaves from scanning" % nleaves
    name = name if img.salvage else "superblocks intact, " + name
    res.check(name + ": more leaves than one node holds, extent blocks zeroed (the truth)",
              nleaves > max_ptrs and img.zero_owner(data, 2) > 0, (nleaves, max_ptrs))
    path = os.path.join(work, "case.img")
    with open(path, "wb") as f:
        f.write(bytes(data))
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", path], timeout=TIMEOUT)
    got = [{k: v for k, v in r.items() if k not in MARKS}
           for r in (parse_jsonl(out) if rc in (0, 1) else [])]
    res.check(name + ": exit 1, rebuilt from the leaves found by scanning, said",
              rc == 1 and b"leaves found by scanning" in err, "exit %r: %s" % (rc, err[-800:]))
    # an inode at the edge between two leaves no surviving node names one
    # after the other may miss items lost between them: not read, said
    edge = {ln.split(b": inode: ")[0].split(b"btrfsimg: ", 1)[-1].decode()
            for ln in err.splitlines() if b"its items run to the edge of a leaf" in ln}
    nodes = len(img.level1(5))
    res.check(name + ": only inodes at the edges between level-1 nodes not read, each said",
              len(edge) <= 2 * nodes, (len(edge), nodes, sorted(edge)[:5]))
    res.problems(name + ": every other file exactly the kernel's, none false",
                 compare(kv, got, view, edge))
    os.unlink(path)


def cases(img, view):
    t5, t256 = img.tree(5), img.tree(256)
    r5, r256 = t5["root"], t256["root"]
    n5 = img.level1(5)
    n256 = img.level1(256)
    mid = n5[len(n5) // 2]
    nptr = {lg: len(img.block(t, lg)["ptrs"]) for t in (5, 256) for lg in img.level1(t)}
    leaf = file_leaf(img, view, mid)
    root5 = ("tree 5's root rebuilt from its %d level-1 nodes" % len(n5),
             lambda e: rebuilt_said(e, 5, r5, 2, len(n5)))
    mid_said = ("the level-1 node rebuilt from its %d leaves" % nptr[mid],
                lambda e: rebuilt_said(e, 5, mid, 1, nptr[mid]))
    snap_said = ("the snapshot's root rebuilt from its %d level-1 nodes" % len(n256),
                 lambda e: rebuilt_said(e, 256, r256, 2, len(n256)))
    shared = n256[-1]
    leaves = [p[3] for p in img.block(5, mid)["ptrs"]]
    under_mid = set().union(*(lost_paths(view, img.block(5, lf), 5) for lf in leaves))
    if str(leaves[2]) in t256["blocks"]:  # the forged leaf is the snapshot's too
        under_mid |= lost_paths(view, img.block(5, leaves[2]), 256)
    return [
        ("a: root of level 2 lost", img.copy([(5, r5)]), set(), [root5]),
        ("b: root and a level-1 node lost", img.copy([(5, r5), (5, mid)]), set(),
         [root5, mid_said]),
        ("c: a level-1 node below a readable root lost", img.copy([(5, mid)]), set(),
         [mid_said]),
        ("d: the snapshot's root lost", img.copy([(256, r256)]), set(), [snap_said]),
        ("d2: the snapshot's root and a shared level-1 node lost",
         img.copy([(256, r256), (256, shared)]), set(),
         [snap_said, ("the shared node rebuilt from the %d leaves naming it" % nptr[shared],
                      lambda e: rebuilt_said(e, 256, shared, 1, nptr[shared]) and
                      b"records by SHARED_BLOCK_REF naming it" in e)]),
        ("e: root lost, a stale copy at a level-1 node's place",
         img.copy([(5, r5)], forge=[(5, mid)]), set(), [root5, mid_said]),
        ("f: root, a level-1 node and a leaf below it lost",
         img.copy([(5, r5), (5, mid), (5, leaf)]), lost_paths(view, img.block(5, leaf), 5),
         [root5, ("the level-1 node rebuilt from %d leaves, 1 unreadable" % (nptr[mid] - 1),
                  lambda e: rebuilt_said(e, 5, mid, 1, nptr[mid] - 1, 1))],
         boundary_paths(img, view, mid)),
        ("g: root and a level-1 node lost, one of its leaves forged as a twin of another",
         img.copy([(5, r5), (5, mid)], twin=(5, leaves[1], leaves[2])), under_mid,
         [("tree 5's root rebuilt from %d level-1 nodes, 1 unreadable" % (len(n5) - 1),
           lambda e: rebuilt_said(e, 5, r5, 2, len(n5) - 1, 1)), ("the level-1 node refused: two recorded leaves overlap",
                  lambda e: b"(level 1) unreadable; not rebuilt from the blocks below it: "
                  b"recorded blocks" in e and b"overlap in keys" in e)],
         boundary_paths(img, view, mid)),
    ]


def under_node(img, view, t, node):
    """The paths of tree @t whose items or entries the leaves below
    level-1 node @node hold."""
    return set().union(*(lost_paths(view, img.block(t, p[3]), t)
                         for p in img.block(t, node)["ptrs"]))


def intact_only_cases(img, view):
    """With the superblocks intact only (a salvage open needs the extent
    tree to rebuild the root tree's view): a level-1 node lost and the
    extent tree with it, so nothing records what it held: not rebuilt,
    said, the files below it missing or without content, never false."""
    n5 = img.level1(5)
    mid = n5[len(n5) // 2]
    data = img.copy([(5, mid)])
    img.zero_owner(data, 2)
    first = n5[0]
    names = [p[3] for p in img.block(5, first)["ptrs"]
             if img.block(5, p[3])["dirents"] and len(img.block(5, p[3])["objectids"]) == 1][-1]
    nptr = len(img.block(5, first)["ptrs"])
    return [("x: a level-1 node and the extent tree lost", data,
             under_node(img, view, 5, mid),
             [("the node not rebuilt, the reason said",
               lambda e: b"tree 5: node at logical %d (level 1) unreadable; not rebuilt" % mid
               in e)],
             boundary_paths(img, view, mid)),
            # a leaf of one directory's entries only, below a lost node: the
            # rebuilt node leaves it out without a read error, and its
            # children are still found by their back references
            ("y: a level-1 node and a leaf of directory entries below it lost",
             img.copy([(5, first), (5, names)]), set(),
             [("the node rebuilt from %d leaves, 1 unreadable" % (nptr - 1),
               lambda e: rebuilt_said(e, 5, first, 1, nptr - 1, 1))])]


def forensic_commands(res, cli, work, img):
    """deleted and verify on a copy with a level-1 node lost, history on
    one with tree 5's root lost (superblocks intact): no crash, the damage
    said (verify's report, history's root not found)."""
    n5 = img.level1(5)
    mid, r5 = n5[len(n5) // 2], img.tree(5)["root"]
    path = os.path.join(work, "case.img")
    for cmd, lost, want in (("deleted", mid, 1), ("verify", mid, 1), ("history", r5, 0)):
        with open(path, "wb") as f:
            f.write(bytes(img.copy([(5, lost)])))
        rc, out, err = imgtest.run_cli(cli, [cmd] + (["--json"] if cmd == "history" else []) +
                                       [path], timeout=TIMEOUT)
        if cmd == "history":
            last = parse_jsonl(out)[-1] if rc == 0 and out.strip() else {}
            said = [t for t in last.get("trees", []) if t["id"] == 5] == \
                [{"id": 5, "bytenr": r5, "generation": img.block(5, r5)["generation"],
                  "found": False}]
        else:
            said = str(lost).encode() in out + err
        res.check("superblocks intact, block %d of tree 5 lost: %s exits %d, says it"
                  % (lost, cmd, want), rc == want and said, "exit %r: %s" % (rc, err[-800:]))
    os.unlink(path)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    cli, testdata = sys.argv[1], sys.argv[2]
    res = imgtest.Tally()
    kv = imgtest.import_kview(testdata)
    d = os.path.join(testdata, "levels")
    truth, view, base = imgtest.load_recorded(d, "levels.img.zst")
    res.check("the top-level tree and the snapshot have three levels (the truth)",
              truth["trees"]["5"]["level"] == 2 and truth["trees"]["256"]["level"] == 2)
    flat = os.path.join(testdata, "levels-flat")
    flat_truth, flat_view, flat_base = imgtest.load_recorded(flat, "levels.img.zst")
    with tempfile.TemporaryDirectory(prefix="levels.") as work:
        # the same damage in a salvage open and in an ordinary one (the
        # superblocks and the root tree intact: nodes rebuilt as reads meet
        # them), the same result
        for salvage in (True, False):
            img = Image(base, truth, salvage)
            tag = "" if salvage else "superblocks intact, "
            for name, data, lost, said, *unsure in cases(img, view) + \
                    ([] if salvage else intact_only_cases(img, view)):
                name = tag + name
                if lost:
                    res.check("%s: the lost leaf holds files (the truth)" % name,
                              0 < len(lost) < len(view) // 4, len(lost))
                run_case(res, kv, cli, work, name, bytes(data), view, lost, said, *unsure)
            scanned_leaves(res, kv, cli, work, Image(flat_base, flat_truth, salvage), flat_view)
        forensic_commands(res, cli, work, Image(base, truth, False))
    return res.summary()


if __name__ == "__main__":
    sys.exit(main())
