#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_salvage_mkfs.py: several filesystems on one device: a new one made
over the old (testdata/salvage, made by testdata/gen_salvage.py).

    test_salvage_mkfs.py CLI TESTDATA [PYTHONPATH]

The old filesystem is the committed kernel-made image whose kernel view
was recorded before anything else (view.jsonl). Over copies of it, as
root and committed because mkfs is not deterministic: mkfs.btrfs -f -K
with the defaults ("mkfs-btrfs"), the same with single metadata
("mkfs-btrfs-single"), mkfs.ext4 -E nodiscard ("mkfs-ext4"), each new
filesystem mounted and written to. mkfs.json has, from btrfs-progs'
dump-tree of the old image, each old file's tree blocks (every copy) and
data extents; a file is overwritten when a data byte changed or every copy
of one of its tree blocks did. That list is recomputed here from the
committed bytes. Then, on each copy:
  - layers --scan --json lists the old filesystem (fsid, nodesize, csum,
    no valid superblock after a new btrfs) and, on the btrfs copies, the
    new one as the current one;
  - walk --json --hash --fsid OLD: every file not overwritten equals the
    kernel's record, every field; an overwritten one is absent or shown
    without content (never a sha256 other than the kernel's), and named on
    stderr; exit 1 when anything was shown; exit 2 only when nothing was
    readable, the block and the fsid found in its place named;
  - --fsid of the current filesystem changes nothing; an fsid not found is
    refused (exit 2) with the list of those found; the image is not
    written.
layers --scan of a GPT disk and of a filesystem with a metadata_uuid
lists what btrfs-progs' dump-super recorded.
deleted and history --fsid find the file the generator unlinked last (its
bytes) and the old filesystem's last generation.
mount --fsid (with root and /dev/fuse, else skipped) reads every file
not overwritten as the kernel's and fails the overwritten one with EIO.
The Python binding opens a copy with fsid= and walks to the kernel's
paths and sha256 of the files not overwritten.
On the default copy the old top-level tree's root node is lost and so are
the old extent tree's only leaf and the checksum tree's root: no extent
record says which blocks below them were live, so the trees are rebuilt
from the leaves a second scan finds (newest of each key range). Which
files' own items (their subvolume-tree leaves spanning their inode number:
not the nodes, the checksum tree, nor their directories' entries) and data
survive is computed from mkfs.json and the committed bytes; each equals the
kernel's record, every field (the salvage's marks aside); every other
record shown is the kernel's, or marked (as_of_generation older than the
last: the file the generator unlinked last, with its bytes, and
directories as of then; lost_found with its true inode number), and no
bytes are other than the kernel's; exit 1. Hostile: a copy of a surviving
leaf forged newer than the tree (checksummed, at 200 MiB) is set aside,
counted, the walk unchanged. With only that node taken (the old image, its
superblocks zeroed): rebuilt from the leaves its extent tree records,
every file exact; a live leaf forged one generation older is not used.
Hostile, on the copy with single metadata: a forged root-tree leaf of the
old fsid with a newer generation (checksummed, where no chunk map puts it)
is set aside by evidence and said, the walk unchanged; with every
superblock zeroed too, two fsids claim the device and, without --fsid,
the one with more verified blocks (the old) is read, the other named.
"""
import errno
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

TIMEOUT = 300


def parse_jsonl(out):
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


def uuid(hexs):
    return "-".join((hexs[:8], hexs[8:12], hexs[12:16], hexs[16:20], hexs[20:]))


def check_scan(res, cli, img, name, facts, new_btrfs):
    rc, out, err = imgtest.run_cli(cli, ["layers", "--scan", "--json", img], timeout=TIMEOUT)
    found = {f["fsid"]: f for f in parse_jsonl(out)} if rc == 0 else {}
    old = found.get(uuid(facts["fsid"]))
    res.check("%s: layers --scan lists the old filesystem, its nodesize and checksum" % name,
              old is not None and old["nodesize"] == facts["nodesize"] and
              old["csum"] == "crc32c" and old["blocks"] > 0 and
              old["generation_max"] <= facts["generation"],
              "exit %r: %s %s" % (rc, out[-600:], err[-300:]))
    if not new_btrfs:
        return None
    others = [f for f in found.values() if f["fsid"] != uuid(facts["fsid"])]
    res.check("%s: layers --scan: the new filesystem is the current one, the old one has "
              "no valid superblock" % name,
              len(others) == 1 and others[0]["current"] and others[0]["label"] == "newer" and
              old is not None and not old["current"] and old["superblocks"] == 0,
              out[-600:])
    return others[0]["fsid"] if len(others) == 1 else None


def check_scan_layers(res, cli, testdata, work):
    """layers --scan through a GPT partition, and of a filesystem whose
    metadata_uuid differs: what btrfs-progs' dump-super recorded."""
    for name, img in (("gpt1", "disk.img.zst"), ("metauuid", "dev1.img.zst")):
        d = os.path.join(testdata, "images", name)
        want = imgtest.load_json(os.path.join(d, "expected-super%s.json" %
                                              (".p1" if name == "gpt1" else "")))
        path = imgtest.private_copy(os.path.join(d, img), work)
        rc, out, err = imgtest.run_cli(cli, ["layers", "--scan", "--json", path],
                                       timeout=TIMEOUT)
        got = parse_jsonl(out) if rc == 0 else []
        keys = ("fsid", "metadata_uuid", "label", "nodesize", "csum")
        res.check("layers --scan %s: the one filesystem dump-super shows, current" % name,
                  len(got) == 1 and got[0]["current"] and got[0]["superblocks"] >= 1 and
                  got[0]["super_generation"] == want["generation"] and
                  got[0]["generation_max"] == want["generation"] and
                  all(got[0][k] == want[k if k != "csum" else "csum_type"] for k in keys),
                  "exit %r: %s %s" % (rc, out[-400:], err[-300:]))
        os.unlink(path)


def compare(kv, got, view, lost):
    """Problems of the walk records @got: a file not overwritten that
    differs from the kernel's record or is missing; an overwritten one
    shown with other content or other metadata; a record not in the view
    unless placed under #lost+found (marked) as a view's inode with its
    bytes, or a made-up directory there."""
    probs = []
    by = {r["path"]: r for r in got}
    for w in view:
        g = by.get(w["path"])
        if g is None:
            if w["path"] not in lost:
                probs.append("%s: not overwritten, missing" % w["path"])
            continue
        a, b = kv.comparable(g), kv.comparable(w)
        for k in sorted(set(a) | set(b)):
            if a.get(k) == b.get(k):
                continue
            if w["path"] in lost and k == "sha256" and a.get(k) is None:
                continue  # no content: the damage is said
            probs.append("%s%s: %s: %r, the kernel %r" %
                         (w["path"], " (overwritten)" if w["path"] in lost else "", k,
                          a.get(k), b.get(k)))
    by_ino = {(w["subvol"], w["ino"]): w for w in view}

    def placed(g):
        """A record under #lost+found (marked): the made-up directories
        (inode 0, or no inode of the view), or an inode of the view with
        its bytes or none."""
        if not g.get("lost_found"):
            return False
        w = by_ino.get((g["subvol"], g["ino"]))
        if w is None:
            return g["mode"] & 0o170000 == 0o040000 and g.get("sha256") is None
        return g.get("sha256") in (None, w.get("sha256"))
    extra = sorted(p for p in set(by) - {w["path"] for w in view} if not placed(by[p]))
    probs += ["%s: not in the kernel's view" % p for p in extra]
    return probs[:12]


def check_walk(kv, res, cli, img, name, fsid, view, lost):
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", "--fsid", fsid, img],
                                   timeout=TIMEOUT)
    got = parse_jsonl(out) if rc in (0, 1) else []
    what = "%s: walk --json --hash --fsid %s" % (name, fsid)
    res.problems(what + ": every file not overwritten exactly the kernel's, none false",
                 compare(kv, got, view, lost) if rc in (0, 1) or len(lost) < len(view) else [])
    shown = {r["path"]: r for r in got}
    unsaid = [p for p in lost if p in shown and shown[p].get("sha256", 1) is None and
              os.fsencode(p) not in err]
    res.check(what + ": every overwritten file shown is named on stderr", not unsaid,
              "%r not in %s" % (unsaid[:5], err[-400:]))
    if got:
        res.check(what + ": exit 1 (results despite damage)", rc == 1,
                  "exit %r: %s" % (rc, err[-300:]))
    else:
        res.check(what + ": nothing readable: exit 2 naming the block another fsid took",
                  rc == 2 and len(lost) == len(view) and b"bad fsid" in err,
                  "exit %r, %d of %d overwritten: %s" % (rc, len(lost), len(view), err[-300:]))
    return got


def check_refusals(res, cli, img, name, new_fsid):
    rc, out, err = imgtest.run_cli(cli, ["walk", "--fsid", "00000000", img], timeout=TIMEOUT)
    res.check("%s: an fsid not found is refused with the list found" % name,
              rc == 2 and b"no such filesystem" in err and b"the filesystems found:" in err,
              "exit %r: %s" % (rc, err[-300:]))
    if not new_fsid:
        return
    rc, plain, _ = imgtest.run_cli(cli, ["walk", "--json", img], timeout=TIMEOUT)
    rc2, named, err = imgtest.run_cli(cli, ["walk", "--json", "--fsid", new_fsid[:13], img],
                                      timeout=TIMEOUT)
    res.check("%s: --fsid of the current filesystem changes nothing" % name,
              rc == 0 and rc2 == 0 and plain == named and b"salvage" not in err,
              "exit %r %r: %s" % (rc, rc2, err[-300:]))


def forge_newer_root(old, new, facts):
    """@new with the old filesystem's root-tree leaf, its generation made
    1000 newer and checksummed, at 200 MiB where no chunk map puts it."""
    ns, out = facts["nodesize"], bytearray(new)
    p = facts["root_physical"][0]
    blk = bytearray(old[p:p + ns])
    struct.pack_into("<Q", blk, 0x50, facts["generation"] + 1000)
    blk[0:4] = struct.pack("<I", imgtest.crc32c(bytes(blk[32:])))
    out[200 << 20:(200 << 20) + ns] = blk
    return out


def hostile(kv, res, cli, work, old, img, facts, view, lost):
    with open(img, "rb") as f:
        forged = forge_newer_root(old, f.read(), facts)
    path = os.path.join(work, "forged.img")
    with open(path, "wb") as f:
        f.write(forged)
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", "--fsid", facts["fsid"],
                                         path], timeout=TIMEOUT)
    got = parse_jsonl(out) if rc in (0, 1) else []
    res.check("hostile: a forged newer root-tree block of the old fsid: set aside, said",
              rc == 1 and b"did not read whole" in err, "exit %r: %s" % (rc, err[-400:]))
    res.problems("hostile: forged newer root: the walk still exact, none false",
                 compare(kv, got, view, lost))
    for o in (64 << 10, 64 << 20):
        forged[o:o + 4096] = bytes(4096)
    with open(path, "wb") as f:
        f.write(forged)
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", path], timeout=TIMEOUT)
    got = parse_jsonl(out) if rc in (0, 1) else []
    res.check("hostile: two fsids, no superblock: the one of more verified blocks read, the "
              "other named", rc == 1 and b"another filesystem's tree blocks" in err,
              "exit %r: %s" % (rc, err[-400:]))
    res.problems("hostile: two fsids, no superblock: the walk exact, none false",
                 compare(kv, got, view, lost))
    os.unlink(path)


def forge_stale(img, phys, gen):
    """The tree block at @phys of @img (bytearray) with generation @gen,
    checksummed again: what an older copy of it would look like."""
    blk = bytearray(img[phys:phys + 16384])
    struct.pack_into("<Q", blk, 0x50, gen)
    blk[0:4] = struct.pack("<I", imgtest.crc32c(bytes(blk[32:])))
    return blk


def lost_root_node(kv, res, cli, work, gs, old, new, truth, view):
    """The old top-level tree's root node lost on every copy. On the
    default copy the old extent tree's root (a leaf) is overwritten too, so
    no evidence says which surviving blocks were the tree's: refused, and
    rightly, since without its lost nodes every file still has a leaf or
    data overwritten. Then on the old image with its superblocks zeroed and
    both copies of that node taken by the default copy's block (another
    fsid's): rebuilt from the live blocks its extent tree records, every
    file exact. Hostile: one live leaf forged one generation older at its
    place (and at 200 MiB): not used, counted; its files absent (the names
    its directory entries held cannot be known) or said, none false."""
    ns, fsid = truth["nodesize"], gs.facts(old)["fsid"][:8]
    gone = gs.lost_roots(old, new)
    ceiling = gs.overwritten(old, new, truth["extents"], ns, nodes=False)
    res.check("mkfs-btrfs: the top-level tree's root node and the extent tree's root are "
              "overwritten, and every file has a leaf or data overwritten besides",
              gone.get(5) == 1 and 2 in gone and len(ceiling) == len(view), (gone, len(ceiling)))
    rc, _, err = imgtest.run_cli(cli, ["walk", "--fsid", fsid, _write(work, new)],
                                 timeout=TIMEOUT)
    res.check("mkfs-btrfs: no extent record to rebuild tree 5 from: rebuilt from the leaves "
              "found by scanning instead, said, exit 1",
              rc == 1 and b"tree 5: root node at logical" in err and
              b"leaves found by scanning" in err, err[-400:])
    img = bytearray(old)
    for p in gs.tree_roots(old)[5][1]:
        img[p:p + ns] = new[p:p + ns]
    for o in (64 << 10, 64 << 20):
        img[o:o + 4096] = bytes(4096)
    cases = [("root node lost", img)]
    leaf = [m for m in (tuple(c) for e in truth["extents"].values() for c in e["meta"])
            if old[m[0] + 0x64] == 0 and struct.unpack_from("<Q", old, m[0] + 0x58)[0] == 5]
    leaf = max(leaf, key=lambda m: m[0])  # one of the last leaves: not the root directory's
    stale = bytearray(img)
    for p in leaf:
        stale[p:p + ns] = forge_stale(stale, p, struct.unpack_from("<Q", old, p + 0x50)[0] - 1)
    stale[200 << 20:(200 << 20) + ns] = stale[leaf[0]:leaf[0] + ns]
    cases.append(("hostile: a live leaf forged older at its place", stale))
    for what, b in cases:
        lost = set(gs.overwritten(old, bytes(b), truth["extents"], ns, nodes=False))
        rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", "--fsid", fsid,
                                             _write(work, b)], timeout=TIMEOUT)
        got = parse_jsonl(out) if rc in (0, 1) else []
        res.check("%s: tree 5 rebuilt, said, exit 1" % what,
                  rc == 1 and b"rebuilt from" in err and bool(lost) == (b is stale),
                  "exit %r, %d lost: %s" % (rc, len(lost), err[-400:]))
        res.problems("%s: walk --fsid: every file not overwritten exactly the kernel's, none "
                     "false" % what, compare(kv, got, view, lost))
        said = b"; %d recorded blocks unreadable, their keys lost" % (b is stale)
        res.check("%s: the unreadable recorded blocks counted on stderr" % what, said in err,
                  err[-400:])
    os.unlink(os.path.join(work, "rebuild.img"))


def _write(work, data):
    path = os.path.join(work, "rebuild.img")
    with open(path, "wb") as f:
        f.write(data)
    return path


MARKS = ("evidence", "as_of_generation", "lost_found")


def unmarked_diff(kv, got, want):
    """The fields in which record @got, the salvage's marks aside,
    differs from the kernel's @want."""
    a, b = kv.comparable(got), kv.comparable(want)
    return sorted(k for k in set(a) | set(b) if k not in MARKS and a.get(k) != b.get(k))


def own_items_survive(old, new, extents, view, nodesize):
    """The paths whose own items and data the new filesystem left: every
    copy-set of their subvolume-tree leaves whose keys span their inode
    number has a copy unchanged (nodes, the checksum tree and the leaves of
    their directories' entries left out: a salvage does without them), and
    every data byte."""
    ino = {r["path"]: r["ino"] for r in view}
    out = set()
    for path, e in extents.items():
        ok = all(old[p:p + n] == new[p:p + n] for p, n in e["data"])
        for copies in e["meta"] if ok else []:
            p = copies[0]
            nr, = struct.unpack_from("<I", old, p + 0x60)
            owner, = struct.unpack_from("<Q", old, p + 0x58)
            first, = struct.unpack_from("<Q", old, p + 0x65)
            last, = struct.unpack_from("<Q", old, p + 0x65 + 25 * (nr - 1))
            if old[p + 0x64] or owner == 7 or not first <= ino[path] <= last:
                continue
            ok = ok and any(old[q:q + nodesize] == new[q:q + nodesize] for q in copies)
        if ok:
            out.add(path)
    return out


def check_default_copy(kv, res, cli, img, fsid, view, survive, facts, content):
    """The default copy: tree 5's root, its extent tree and the checksum
    tree's root are lost, so the trees are rebuilt from the leaves the scan
    finds. Every file whose own items and data survive equals the kernel's
    record (the salvage's marks aside); any other record is the kernel's
    too, or marked: known only as of an older generation
    (as_of_generation, e.g. the file the generator unlinked in its last
    commit, with the generator's bytes), or placed under #lost+found with
    its true inode number; no bytes other than the kernel's."""
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", "--fsid", fsid, img],
                                   timeout=TIMEOUT)
    got = parse_jsonl(out) if rc in (0, 1) else []
    what = "mkfs-btrfs: walk --json --hash --fsid %s" % fsid
    res.check(what + ": exit 1, the trees rebuilt from the leaves found by scanning, said",
              rc == 1 and b"leaves found by scanning" in err and b"as_of_generation" in err,
              "exit %r: %s" % (rc, err[-400:]))
    res.check("mkfs-btrfs: some files' own items and data survive, not all (the test can "
              "fail)", 0 < len(survive) < len(view), len(survive))
    by_path = {r["path"]: r for r in view}
    by_ino = {(r["subvol"], r["ino"]): r for r in view}
    probs, shown = [], {r["path"]: r for r in got}
    for path in sorted(survive):
        g = shown.get(path)
        if g is None:
            probs.append("%s: own items and data survive, missing" % path)
            continue
        diff = unmarked_diff(kv, g, by_path[path])
        if diff:
            probs.append("%s: own items and data survive, differs: %r" % (path, diff))
    unlinked = hashlib.sha256(content("many/f007", 50 + 9 * 7)).hexdigest()
    for g in got:
        w = by_path.get(g["path"])
        older = 0 < g.get("as_of_generation", 0) < facts["generation"]
        if g.get("lost_found"):
            w = by_ino.get((g["subvol"], g["ino"]))
            if w is not None and g.get("sha256") not in (None, w.get("sha256")):
                probs.append("%s: lost+found with other bytes than inode %d's" %
                             (g["path"], g["ino"]))
        elif w is None:
            if not (older and g["path"] == "many/f007" and g.get("sha256") == unlinked):
                probs.append("%s: not in the kernel's view, not marked" % g["path"])
        elif unmarked_diff(kv, g, w) not in ([], ["sha256"]) and not older:
            probs.append("%s: differs from the kernel's, not marked older" % g["path"])
        elif g.get("sha256") not in (None, w.get("sha256")):  # None: overwritten, said
            probs.append("%s: other bytes than the kernel's" % g["path"])
    res.problems(what + ": every file whose own items and data survive exactly the kernel's, "
                 "the rest the kernel's or marked, no other bytes", probs[:12])
    return got


def forged_newer_leaf(res, cli, work, img, fsid, truth, got, full_fsid):
    """A surviving leaf of tree 5 copied to 200 MiB with its generation
    made 1000 newer and checksummed: newer than the tree, set aside,
    counted; the walk unchanged."""
    with open(img, "rb") as f:
        b = bytearray(f.read())
    ns, pick = truth["nodesize"], None
    for e in truth["extents"].values():
        for copies in e["meta"]:
            p = copies[0]
            if (not b[p + 0x64] and struct.unpack_from("<Q", b, p + 0x58)[0] == 5 and
                    b[p + 0x20:p + 0x30] == bytes.fromhex(full_fsid)):
                pick = p  # a leaf of tree 5 of the old filesystem that survives
    if pick is None:
        res.check("hostile: a surviving leaf of tree 5 to forge", False)
        return
    blk = bytearray(b[pick:pick + ns])
    struct.pack_into("<Q", blk, 0x50, struct.unpack_from("<Q", blk, 0x50)[0] + 1000)
    blk[0:4] = struct.pack("<I", imgtest.crc32c(bytes(blk[32:])))
    b[200 << 20:(200 << 20) + ns] = blk
    path = _write(work, b)
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", "--fsid", fsid, path],
                                   timeout=TIMEOUT)
    res.check("hostile: a leaf forged newer than the tree: set aside, counted, the walk "
              "unchanged", rc == 1 and b"1 newer than the tree not used" in err and
              parse_jsonl(out) == got, "exit %r: %s" % (rc, err[-400:]))
    os.unlink(path)


MOUNT_READ = r"""
import hashlib, json, os, sys
out = {}
for p in json.loads(sys.argv[2]):
    try:
        with open(os.path.join(sys.argv[1], p), "rb") as f:
            out[p] = hashlib.sha256(f.read()).hexdigest()
    except OSError as e:
        out[p] = e.errno
print(json.dumps(out))
"""


def check_mount(res, cli, work, img, fsid, view, lost):
    """mount --fsid: the files not overwritten read as the kernel's, an
    overwritten one fails its read (EIO), never other bytes."""
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        print("skip mount: needs root, /dev/fuse and fusermount3")
        return
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    rc, _, err = imgtest.run_cli(cli, ["mount", "--fsid", fsid, img, mnt], timeout=TIMEOUT)
    if not os.path.ismount(mnt):
        res.check("mount --fsid: mounted", False, "exit %r: %s" % (rc, err[-300:]))
        return
    try:
        want = {r["path"]: r["sha256"] for r in view if r["sha256"]}
        p = subprocess.run([sys.executable, "-c", MOUNT_READ, mnt, json.dumps(sorted(want))],
                           stdout=subprocess.PIPE, timeout=TIMEOUT)
        got = json.loads(p.stdout) if p.returncode == 0 else {}
        bad = [k for k, v in want.items()
               if got.get(k) != v and not (k in lost and got.get(k) == errno.EIO)]
        res.check("mount --fsid: every file not overwritten reads as the kernel's, an "
                  "overwritten one EIO", got and not bad, bad[:5])
    finally:
        subprocess.run(["fusermount3", "-u", mnt], timeout=60)


def check_forensic(res, cli, img, name, fsid, facts, content):
    """deleted and history read the old filesystem by --fsid too: the file
    the generator unlinked in its last commit (many/f007, of the
    generator's bytes), and the last generation the old one committed."""
    rc, out, err = imgtest.run_cli(cli, ["deleted", "--json", "--hash", "--fsid", fsid, img],
                                   timeout=TIMEOUT)
    want = hashlib.sha256(content("many/f007", 50 + 9 * 7)).hexdigest()
    got = [r for r in parse_jsonl(out) if r.get("path") == "many/f007"] if rc in (0, 1) else []
    res.check("%s: deleted --fsid: the unlinked many/f007 with the generator's bytes" % name,
              any(r["kind"] == "deleted" and r["sha256"] == want for r in got),
              "exit %r: %r %s" % (rc, got[:1], err[-300:]))
    rc, out, err = imgtest.run_cli(cli, ["history", "--json", "--fsid", fsid, img],
                                   timeout=TIMEOUT)
    gens = [r["transid"] for r in parse_jsonl(out)] if rc in (0, 1) else []
    res.check("%s: history --fsid: up to the old filesystem's last generation" % name,
              gens and max(gens) == facts["generation"], "exit %r: %r %s" % (rc, gens, err[-300:]))


def python_binding(res, img, fsid, view, lost, pythonpath):
    if not pythonpath:
        print("skip python: no PYTHONPATH given")
        return
    code = r"""
import json, sys, warnings
import btrfsimg
warnings.simplefilter("ignore")
with btrfsimg.open(sys.argv[1], fsid=sys.argv[2]) as fs:
    out = {r["path"]: r.get("sha256") for r in fs.walk(hash=True)}
    assert fs.damage_count > 0
print(json.dumps(out))
"""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    p = subprocess.run([sys.executable, "-c", code, img, fsid], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=TIMEOUT)
    if p.returncode != 0 and b"No module named" in p.stderr:
        print("skip python: the binding is not built")
        return
    got = json.loads(p.stdout) if p.returncode == 0 else {}
    want = {r["path"]: r["sha256"] for r in view if r["path"] not in lost}
    ok = all(got.get(k) == v for k, v in want.items()) and all(
        got.get(r["path"]) in (None, r["sha256"]) for r in view if r["path"] in lost)
    res.check("python: open(fsid=) walks to the kernel's paths and sha256, none false",
              ok and want, p.stderr.decode(errors="replace")[-300:])


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    pythonpath = sys.argv[3] if len(sys.argv) > 3 else None
    sys.path.insert(0, testdata)
    import gen_salvage as gs
    kv = imgtest.import_kview(testdata)
    d = os.path.join(testdata, "salvage")
    view = imgtest.load_jsonl(os.path.join(d, "view.jsonl"))
    truth = imgtest.load_json(os.path.join(d, "mkfs.json"))
    facts = imgtest.load_json(os.path.join(d, "truth.json"))
    res = imgtest.Tally()
    with tempfile.TemporaryDirectory(prefix="salvage-mkfs.") as work:
        with open(imgtest.private_copy(os.path.join(d, "salvage.img.zst"), work), "rb") as f:
            old = f.read()
        res.check("mkfs.json: every file of the kernel's view has its extents",
                  sorted(truth["extents"]) == sorted(r["path"] for r in view))
        counts = []
        for name in gs.MKFS:
            img = imgtest.private_copy(os.path.join(d, name + ".img.zst"), work)
            with open(img, "rb") as f:
                new = f.read()
            lost = set(gs.overwritten(old, new, truth["extents"], truth["nodesize"]))
            if name == "mkfs-btrfs":
                lost_root_node(kv, res, cli, work, gs, old, new, truth, view)
                survive = own_items_survive(old, new, truth["extents"], view,
                                            truth["nodesize"])
            del new
            res.check("%s: the overwritten files recomputed from the images as recorded" % name,
                      sorted(lost) == truth["copies"][name]["overwritten"])
            counts.append(len(lost))
            before = imgtest.sha256_file(img)
            new_fsid = check_scan(res, cli, img, name, facts, name.startswith("mkfs-btrfs"))
            if name == "mkfs-btrfs":
                got = check_default_copy(kv, res, cli, img, facts["fsid"][:8], view, survive,
                                         facts, gs.content)
                forged_newer_leaf(res, cli, work, img, facts["fsid"][:8], truth, got,
                                  facts["fsid"])
            else:
                check_walk(kv, res, cli, img, name, facts["fsid"][:8], view, lost)
            check_refusals(res, cli, img, name, new_fsid)
            if name == "mkfs-btrfs-single":
                python_binding(res, img, uuid(facts["fsid"]), view, lost, pythonpath)
                check_mount(res, cli, work, img, facts["fsid"][:8], view, lost)
                check_forensic(res, cli, img, name, facts["fsid"][:8], facts, gs.content)
                hostile(kv, res, cli, work, old, img, facts, view, lost)
            res.check("%s: the image is not written" % name, imgtest.sha256_file(img) == before)
            os.unlink(img)
        res.check("the copies overwrite some files and leave others (the test can fail)",
                  any(0 < n < len(view) for n in counts), counts)
        check_scan_layers(res, cli, testdata, work)
    return res.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
