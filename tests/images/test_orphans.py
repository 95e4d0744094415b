#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_orphans.py: paths from the inodes' own back references, where a
directory's entries are lost and its children survive.

    test_orphans.py CLI TESTDATA

On a copy of the kernel-made image of testdata/salvage (its kernel view
recorded before anything else, view.jsonl), every copy of one subvolume-tree
leaf is zeroed: a leaf whose keys all belong to one directory of the
kernel's view and that holds its DIR_INDEX items (readdir's entries), none
of its children's own items. The leaf is chosen from mkfs.json (btrfs-progs'
dump-tree of the image: each file's tree blocks) and the image's bytes.
Then:
  - walk --json --hash gives every path of the kernel's view exactly, every
    field (the children listed by their INODE_REF at the index the lost
    entry had), nothing else; the lost leaf said; exit 1;
  - cat --path of a child whose DIR_ITEM was in the lost leaf gives the
    kernel's bytes;
  - the intact image is walked without reading back references (a normal
    image pays nothing).
Then, on another copy with its superblocks zeroed (a salvage: damaged
mode), the INODE_ITEM key of the directory made another key type in both
copies of its leaf (checksummed again): the parent's own items lost, the
chain breaks, and each child is under #lost+found/<the directory's inode
number>/<its name>, marked lost_found, with every field of the kernel's
record of its true path but the connectable handle (which names the
parent); cat --path of such a path gives the kernel's bytes.
"""
import hashlib
import json
import os
import struct
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

TIMEOUT = 300
DIR_INDEX = 96
BACKREFS = b"back references"


def leaf_keys(img, p):
    """(objectid, type) of each item of the leaf at @p of @img."""
    nr, = struct.unpack_from("<I", img, p + 0x60)
    return [struct.unpack_from("<QB", img, p + 0x65 + 25 * s) for s in range(nr)]


def entries_leaf(img, truth, view):
    """Every copy of a level-0 block of a subvolume tree whose items are all
    of one directory of @view, DIR_INDEX among them, and the directory."""
    dirs = {r["ino"]: r for r in view if r["mode"] & 0o170000 == 0o040000 and r["subvol"] == 5}
    for e in truth["extents"].values():
        for copies in e["meta"]:
            p = copies[0]
            owner, = struct.unpack_from("<Q", img, p + 0x58)
            if img[p + 0x64] or owner != 5:
                continue
            keys = leaf_keys(img, p)
            objs = {k[0] for k in keys}
            if len(objs) == 1 and min(objs) in dirs and any(t == DIR_INDEX for _, t in keys):
                return copies, dirs[min(objs)]
    return None, None


def parse(out):
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


def compare(kv, got, view):
    by = {r["path"]: r for r in got}
    probs = []
    for w in view:
        g = by.get(w["path"])
        if g is None:
            probs.append("%s: missing" % w["path"])
            continue
        a, b = kv.comparable(g), kv.comparable(w)
        probs += ["%s: %s: %r, the kernel %r" % (w["path"], k, a.get(k), b.get(k))
                  for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    probs += ["%s: not in the kernel's view" % p for p in sorted(set(by) - {w["path"]
                                                                         for w in view})]
    return probs[:12]


def drop_inode_item(img, truth, ino, nodesize):
    """The INODE_ITEM key of @ino made type 2 (no item of the kernel's) in
    every copy of its leaf, each checksummed again; the superblocks zeroed."""
    for e in truth["extents"].values():
        for copies in e["meta"]:
            p = copies[0]
            if img[p + 0x64] or (ino, 1) not in leaf_keys(img, p):
                continue
            for q in copies:
                slot = leaf_keys(img, q).index((ino, 1))
                img[q + 0x65 + 25 * slot + 8] = 2
                img[q:q + 4] = struct.pack("<I", imgtest.crc32c(bytes(img[q + 32:q + nodesize])))
            for o in (64 << 10, 64 << 20):
                img[o:o + 4096] = bytes(4096)
            return True
    return False


def chain_broken(kv, res, cli, work, img, truth, view, dirrec):
    ns = truth["nodesize"]
    res.check("the leaf of the INODE_ITEM of '%s' found" % dirrec["path"],
              drop_inode_item(img, truth, dirrec["ino"], ns))
    path = os.path.join(work, "chain.img")
    with open(path, "wb") as f:
        f.write(img)
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", path], timeout=TIMEOUT)
    got = {r["path"]: r for r in parse(out)} if rc in (0, 1) else {}
    top = "#lost+found/%d" % dirrec["ino"]
    probs = []
    for w in view:
        if not w["path"].startswith(dirrec["path"] + "/"):
            continue
        lf = top + w["path"][len(dirrec["path"]):]
        g = got.get(lf)
        if g is None or not g.get("lost_found"):
            probs.append("%s: not at %s, marked" % (w["path"], lf))
            continue
        a, b = kv.comparable(g), kv.comparable(w)
        probs += ["%s: %s: %r, the kernel %r" % (lf, k, a.get(k), b.get(k))
                  for k in sorted(set(a) | set(b))
                  if k not in ("path", "lost_found", "handle_conn") and a.get(k) != b.get(k)]
    made_up = [p for p, g in got.items() if g.get("lost_found") and p in ("#lost+found", top)]
    res.check("parent lost too: exit 1, said, the made-up directories marked",
              rc == 1 and b"no inode %d" % dirrec["ino"] in err and len(made_up) == 2,
              "exit %r: %s" % (rc, err[-300:]))
    res.problems("parent lost too: every child under %s with the kernel's record" % top,
                 probs[:12])
    child = next(w for w in view if w["path"].startswith(dirrec["path"] + "/") and
                 w.get("sha256"))
    lf = top + child["path"][len(dirrec["path"]):]
    rc, out, err = imgtest.run_cli(cli, ["cat", "--path", lf, path], timeout=TIMEOUT)
    res.check("cat --path %s: the kernel's bytes of %s" % (lf, child["path"]),
              rc in (0, 1) and hashlib.sha256(out).hexdigest() == child["sha256"],
              "exit %r: %s" % (rc, err[-300:]))
    os.unlink(path)


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    kv = imgtest.import_kview(testdata)
    d = os.path.join(testdata, "salvage")
    view = imgtest.load_jsonl(os.path.join(d, "view.jsonl"))
    truth = imgtest.load_json(os.path.join(d, "mkfs.json"))
    res = imgtest.Tally()
    with tempfile.TemporaryDirectory(prefix="orphans.") as work:
        path = imgtest.private_copy(os.path.join(d, "salvage.img.zst"), work)
        rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", path], timeout=TIMEOUT)
        res.check("intact: the walk reads no back references, exit 0",
                  rc == 0 and BACKREFS not in err and not compare(kv, parse(out), view),
                  "exit %r: %s" % (rc, err[-300:]))
        with open(path, "rb") as f:
            img = bytearray(f.read())
        pristine = bytes(img)
        copies, dirrec = entries_leaf(img, truth, view)
        res.check("a leaf of one directory's entries alone is found", copies is not None)
        if copies is None:
            return res.summary(need_one=True)
        ns = truth["nodesize"]
        names = [r["path"] for r in view if r["path"].startswith(dirrec["path"] + "/")]
        for p in copies:
            img[p:p + ns] = bytes(ns)
        with open(path, "wb") as f:
            f.write(img)
        rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", path], timeout=TIMEOUT)
        got = parse(out) if rc in (0, 1) else []
        res.check("entries of '%s' lost: said (readdir), back references read, exit 1" %
                  dirrec["path"], rc == 1 and b"readdir" in err and BACKREFS in err,
                  "exit %r: %s" % (rc, err[-400:]))
        res.problems("entries of '%s' lost: every path of the kernel's view exactly, every "
                     "field, nothing else" % dirrec["path"], compare(kv, got, view))
        # the lost leaf held the directory's DIR_ITEMs too: a lookup by name
        child = next((r for r in view if r["path"] in names and r.get("sha256")), None)
        rc, out, err = imgtest.run_cli(cli, ["cat", "--path", child["path"], path],
                                       timeout=TIMEOUT)
        res.check("cat --path %s: the kernel's bytes" % child["path"],
                  rc in (0, 1) and hashlib.sha256(out).hexdigest() == child["sha256"],
                  "exit %r: %s" % (rc, err[-300:]))
        os.unlink(path)
        chain_broken(kv, res, cli, work, bytearray(pristine), truth, view, dirrec)
    return res.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
