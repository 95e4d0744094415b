#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_lostroot.py: a subvolume whose root directory inode is lost still
walks, from a synthesized directory; #lost+found is under the mount too.

    test_lostroot.py CLI TESTDATA [PYTHON_BUILD_DIR]

On copies of the kernel-made image of testdata/levels (its kernel view
recorded before anything else, view.jsonl.zst; truth.json the tree blocks
btrfs-progs' dump-tree named, each with its copies), every copy of the leaf
that holds the INODE_ITEM of inode 256 (found by its key in the image's
bytes) is zeroed:
  top   in the top-level tree (5): the leaf holds items of 256 and of
        directory 257 ('a': its INODE_ITEM too) and directory entries of
        the root (among them that of the snapshot 'snap', which only its
        ROOT_REF then places) and of 257;
  snap  in the snapshot's tree (256), reached through the subvolume entry
        'snap' of the intact top-level tree;
and, on testdata/salvage, the INODE_ITEM key of the top-level root made
another key type in both copies of its leaf (checksummed again), nothing
else lost:
  item  only the root's own inode item lost.
No superblock is touched: the open is a plain one. Then for each:
  - walk --json --hash: the root is a directory marked "synthesized", mode
    040755, nlink 1, uid, gid, size, the four times, handles and xattrs
    null; every file whose own items survive is the kernel's record, every
    field, at its path, or under #lost+found/<ino> (marked lost_found) when
    its parent's own items (the INODE_ITEM key in the lost leaf) are
    lost; a child of the synthesized root has no connectable handle (its
    parent's generation is unknown); nothing else but the made-up
    directories; exit 1; stderr says the root synthesized and which leaf;
  - top only: bodyfile shows the root with times, size and owner 0
    (none, for mactime, which reads it), dfxml leaves them out and marks
    it btrfsimg:synthesized, jq reads walk --json's nulls;
  - the Python module's walk() (when the build's python dir is given)
    gives the same marks and nulls;
  - mounted (btrfsimg mount, when /dev/fuse is usable), the tree through
    the mount is the same paths (#lost+found included), and each file's
    lstat (mode, nlink, uid, gid, size, times) and content are the
    kernel's.
"""
import hashlib
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

TIMEOUT = 600
INODE_ITEM = 1
UNKNOWN = ("uid", "gid", "size", "atime", "mtime", "ctime", "btime", "handle", "handle_conn")
LF = "#lost+found"


def leaf_keys(img, p):
    """(objectid, type) of each item of the block at @p of @img."""
    nr, = struct.unpack_from("<I", img, p + 0x60)
    return [struct.unpack_from("<QB", img, p + 0x65 + 25 * s) for s in range(nr)]


def leaves_of(truth, tree):
    """The leaves of @tree in the truth: [physical copies]."""
    return [b["physical"] for b in truth["trees"][str(tree)]["blocks"].values()
            if b["level"] == 0]


def root_leaf(img, copies_list):
    """The copies of the leaf holding (256, INODE_ITEM), by the image's bytes."""
    return next((c for c in copies_list if (256, INODE_ITEM) in leaf_keys(img, c[0])), None)


def lost_sets(img, p):
    """Of the leaf at @p: the inodes whose INODE_ITEM it holds, and every
    objectid it holds items of."""
    keys = leaf_keys(img, p)
    return {o for o, t in keys if t == INODE_ITEM}, {o for o, t in keys}


def expect(view, subvol, top, lost, touched):
    """{path: kernel record} the walk must show (paths below a lost
    directory moved under #lost+found/<its ino>), and the paths of records
    that may be missing or differ (items of theirs in the lost leaf). @top
    is the damaged subvolume root's path in the view."""
    pre = top + "/" if top else ""
    ino_at = {r["path"]: r["ino"] for r in view if r["subvol"] == subvol}
    want, unsure = {}, set()
    for r in view:
        if r["subvol"] != subvol:
            want[r["path"]] = r
            continue
        if r["path"] == top or r["ino"] in lost:
            continue  # the root is checked apart; the lost ones' items are gone
        parts = r["path"][len(pre):].split("/")
        path = r["path"]
        for k in range(len(parts) - 1, 0, -1):  # the deepest lost ancestor
            anc = ino_at.get(pre + "/".join(parts[:k]))
            if anc in lost:
                path = pre + "%s/%d/%s" % (LF, anc, "/".join(parts[k:]))
                break
        want[path] = dict(r, path=path)
        if r["ino"] in touched:
            unsure.add(path)
    return want, unsure


def check_walk(res, kv, name, got, want, unsure, top, direct):
    """The records of a walk against @want; @direct: paths of the root's
    children (no connectable handle)."""
    probs = []
    root = got.get(top)
    ok = root is not None and root.get("synthesized") is True and \
        root["mode"] == 0o40755 and root["nlink"] == 1 and root["ino"] == 256 and \
        all(root.get(k) is None for k in UNKNOWN) and root.get("xattrs") is None
    res.check("%s: the root '%s' synthesized, mode 040755, the unknown fields null" %
              (name, top), ok, root)
    for path, w in sorted(want.items()):
        g = got.get(path)
        if g is None:
            if path not in unsure:
                probs.append("%s: missing" % path)
            continue
        a, b = kv.comparable(g), kv.comparable(w)
        skip = {"path", "lost_found"}
        if LF in path:
            skip.add("handle_conn")  # names the lost parent
            if not g.get("lost_found"):
                probs.append("%s: not marked lost_found" % path)
        if path in direct:
            skip.add("handle_conn")
            if g.get("handle_conn") is not None:
                probs.append("%s: a connectable handle under a synthesized root" % path)
        if path in unsure:
            continue
        probs += ["%s: %s: %r, the kernel %r" % (path, k, a.get(k), b.get(k))
                  for k in sorted(set(a) | set(b)) if k not in skip and a.get(k) != b.get(k)]
    extra = [p for p in got if p not in want and p != top]
    made_up = [p for p in extra if got[p].get("lost_found") and
               (p.endswith(LF) or p.rsplit("/", 1)[0].endswith(LF))]
    probs += ["%s: not in the kernel's view" % p for p in extra if p not in made_up]
    res.problems("%s: every surviving file the kernel's record at its path, nothing false" %
                 name, probs[:12])
    return made_up


def py_walk(pydir, img, subvol_path):
    """The Python module's walk() records of @img, in a child process."""
    code = ("import sys, json, warnings; sys.path.insert(0, sys.argv[1]); "
            "warnings.simplefilter('ignore'); import btrfsimg\n"
            "with btrfsimg.open([sys.argv[2]]) as fs:\n"
            "    for r in fs.walk(hash=True): print(json.dumps(r))\n")
    p = subprocess.run([sys.executable, "-c", code, pydir, img], capture_output=True,
                       timeout=TIMEOUT)
    if p.returncode:
        return None
    return {r["path"]: r for r in map(json.loads, p.stdout.decode().splitlines())}


# ------------------------------------------------------------ the mount

CHILD = r"""
import hashlib, json, os, stat, sys
root = sys.argv[1]
out = {}
def sha(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()
stack = [""]
while stack:
    rel = stack.pop()
    p = os.path.join(root, rel) if rel else root
    try:
        st = os.lstat(p)
    except OSError as e:
        out[rel] = {"error": e.errno}
        continue
    r = {"mode": st.st_mode, "nlink": st.st_nlink, "uid": st.st_uid, "gid": st.st_gid,
         "size": st.st_size, "atime": [int(st.st_atime), st.st_atime_ns % 10**9],
         "mtime": [int(st.st_mtime), st.st_mtime_ns % 10**9],
         "ctime": [int(st.st_ctime), st.st_ctime_ns % 10**9]}
    if stat.S_ISREG(st.st_mode):
        try:
            r["sha256"] = sha(p)
        except OSError as e:
            r["sha256"] = "error %d" % e.errno
    out[rel] = r
    if stat.S_ISDIR(st.st_mode):
        names = []  # what a listing gives before it fails (find, ls: the same)
        try:
            with os.scandir(p) as it:
                for e in it:
                    names.append(e.name)
        except OSError as e:
            r["listdir"] = e.errno
        stack += [os.path.join(rel, n) if rel else n for n in names]
print(json.dumps(out))
"""


def mount_skip(cli):
    if os.geteuid() != 0:
        return "not root"
    if not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        return "no /dev/fuse or fusermount3"
    return None


def mount_tree(cli, img, work):
    """The tree through `btrfsimg mount` of @img: {path: lstat fields}, or
    a reason string."""
    mnt = tempfile.mkdtemp(prefix="mnt.", dir=work)
    rc, out, err = imgtest.run_cli(cli, ["mount", img, mnt], timeout=120)
    if rc != 0:
        os.rmdir(mnt)
        return "mount: exit %r: %s" % (rc, err[-300:])
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, mnt], capture_output=True,
                           timeout=TIMEOUT)
        tree = json.loads(p.stdout) if p.returncode == 0 else "walk: %s" % p.stderr[-300:]
    except subprocess.TimeoutExpired:
        tree = "the walk through the mount timed out"
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True, timeout=60)
        os.rmdir(mnt)
    return tree


def check_mount(res, name, tree, want, unsure, top, made_up):
    if isinstance(tree, str):
        res.check("%s: mounted and walked" % name, False, tree)
        return
    pre = top + "/" if top else ""
    probs = []
    for path, w in sorted(want.items()):
        if not path.startswith(pre) or path == top:
            continue
        g = tree.get(path)
        if g is None or "error" in g:
            if path not in unsure:
                probs.append("%s: %s" % (path, "missing" if g is None else g))
            continue
        if path in unsure:
            continue
        for k in ("mode", "nlink", "uid", "gid", "size", "atime", "mtime", "ctime", "sha256"):
            if k in w and k in g and w[k] != g[k] and not (k == "sha256" and w[k] is None):
                probs.append("%s: %s: %r, the kernel %r" % (path, k, g[k], w[k]))
            elif k == "sha256" and w.get(k) and k not in g:
                probs.append("%s: no content" % path)
    for p in made_up:
        g = tree.get(p)
        if not g or not stat.S_ISDIR(g.get("mode", 0)):
            probs.append("%s: the made-up directory not under the mount" % p)
    extra = [p for p in tree if p.startswith(pre) and p != top and p not in want and
             p not in made_up]
    probs += ["%s: not in the kernel's view" % p for p in extra]
    g = tree.get(top, {})
    if g.get("mode") != 0o40755:
        probs.append("'%s': the synthesized root: %r" % (top, g))
    res.problems("%s: the mount shows the walk's tree (#lost+found too), every file's lstat "
                 "and content the kernel's" % name, probs[:12])


# ------------------------------------------------------------ the cases

def check_reports(res, cli, path, work):
    """bodyfile and dfxml of the synthesized top-level root: no time, size
    or owner claimed (bodyfile's 0, which mactime takes for none; DFXML's
    elements left out, marked btrfsimg:synthesized); jq and mactime read
    the output."""
    rc, out, err = imgtest.run_cli(cli, ["bodyfile", path], timeout=TIMEOUT)
    root = [l for l in out.decode().splitlines() if l.split("|")[2:3] == ["5-256"]]
    res.check("bodyfile: the synthesized root with times, size and owner 0 (none)",
              rc == 1 and len(root) == 1 and root[0].split("|")[4:] == ["0"] * 7, root)
    if shutil.which("mactime"):
        body = os.path.join(work, "body")
        with open(body, "wb") as f:
            f.write(out)
        p = subprocess.run(["mactime", "-b", body, "-d"], capture_output=True, timeout=TIMEOUT)
        res.check("mactime reads the bodyfile, no event of the synthesized root",
                  p.returncode == 0 and b"5-256" not in p.stdout and p.stdout.count(b"\n") > 1000,
                  p.stderr[-300:])
        os.unlink(body)
    rc, out, err = imgtest.run_cli(cli, ["dfxml", path], timeout=TIMEOUT)
    ns = "{http://www.forensicswiki.org/wiki/Category:Digital_Forensics_XML}"
    try:
        doc = ET.fromstring(out)
    except ET.ParseError as e:
        res.check("dfxml: parses", False, str(e))
        return
    objs = [o for o in doc.iter(ns + "fileobject") if o.findtext(ns + "id") == "5-256"]
    tags = [c.tag.split("}")[-1] for c in objs[0]] if objs else []
    res.check("dfxml: the synthesized root marked, no size, owner or times",
              rc == 1 and "synthesized" in tags and
              not {"filesize", "uid", "gid", "mtime", "ctime", "atime", "crtime"} & set(tags),
              tags)
    if shutil.which("jq"):
        rc, out, err = imgtest.run_cli(cli, ["walk", "--json", path], timeout=TIMEOUT)
        p = subprocess.run(["jq", "-c", "select(.synthesized) | [.path, .mtime, .uid]"],
                           input=out, capture_output=True, timeout=TIMEOUT)
        res.check("jq reads walk --json: the synthesized root's mtime and uid null",
                  p.returncode == 0 and p.stdout == b'["",null,null]\n', p.stdout[:200])


def run_case(res, kv, cli, pydir, work, name, data, view, subvol, top, lost, touched, said):
    path = os.path.join(work, name + ".img")
    with open(path, "wb") as f:
        f.write(data)
    want, unsure = expect(view, subvol, top, lost, touched)
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", path], timeout=TIMEOUT)
    got = {r["path"]: r for r in map(json.loads, out.decode().splitlines())} \
        if rc in (0, 1) else {}
    res.check("%s: exit 1, the synthesized root and the lost leaf said" % name,
              rc == 1 and b"subvolume %d: its root directory (inode 256) is lost" % subvol
              in err and b"synthesized" in err and all(s in err for s in said),
              "exit %r: %s" % (rc, err[-400:]))
    pre = top + "/" if top else ""
    direct = {p for p in want if p.startswith(pre) and "/" not in p[len(pre):]}
    made_up = check_walk(res, kv, name, got, want, unsure, top, direct)
    if lost - {256}:
        res.check("%s: the lost directories' children under %s/<ino>" % (name, LF),
                  all(any(p.startswith(pre + "%s/%d/" % (LF, i)) for p in got)
                      for i in lost - {256} if any(v["subvol"] == subvol for v in view)),
                  sorted(made_up))
    if pydir:
        pg = py_walk(pydir, path, top)
        res.check("%s: Python's walk() gives the same records, marks and nulls" % name,
                  pg is not None and {p: r for p, r in pg.items()} == got,
                  None if pg is None else
                  [p for p in set(pg) | set(got) if pg.get(p) != got.get(p)][:5])
    if name == "top":
        check_reports(res, cli, path, work)
    why = mount_skip(cli)
    if why:
        print("skip %s: the mount (%s)" % (name, why))
    else:
        check_mount(res, name, mount_tree(cli, path, work), want, unsure, top, made_up)
    os.unlink(path)


def levels_case(img, truth, tree):
    """Zero every copy of the leaf of @tree holding (256, INODE_ITEM): the
    image, the inodes lost, those touched, the leaf's address said."""
    copies = root_leaf(img, leaves_of(truth, tree))
    if copies is None:
        return None
    lost, touched = lost_sets(img, copies[0])
    logical = next(int(a) for a, b in truth["trees"][str(tree)]["blocks"].items()
                   if b["physical"] == copies)
    data = bytearray(img)
    for p in copies:
        data[p:p + truth["nodesize"]] = bytes(truth["nodesize"])
    return data, lost, touched, [b"block=%d" % logical]


def item_case(img, truth, nodesize, tree):
    """The INODE_ITEM key of 256 in tree @tree, a tree of one leaf (no
    parent whose key the first one must match), made type 2 in every copy
    of that leaf, each checksummed again."""
    for e in truth["extents"].values():
        for copies in e["meta"]:
            if img[copies[0] + 0x64] or (256, INODE_ITEM) not in leaf_keys(img, copies[0]):
                continue
            owner, = struct.unpack_from("<Q", img, copies[0] + 0x58)
            if owner != tree:
                continue
            data = bytearray(img)
            for q in copies:
                slot = leaf_keys(data, q).index((256, INODE_ITEM))
                data[q + 0x65 + 25 * slot + 8] = 2
                data[q:q + 4] = struct.pack("<I", imgtest.crc32c(bytes(data[q + 32:q + nodesize])))
            return data
    return None


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    pydir = sys.argv[3] if len(sys.argv) > 3 else None
    kv = imgtest.import_kview(testdata)
    res = imgtest.Tally()
    d = os.path.join(testdata, "levels")
    truth, view, img = imgtest.load_recorded(d, "levels.img.zst")
    with tempfile.TemporaryDirectory(prefix="lostroot.") as work:
        for name, tree, top in (("top", 5, ""), ("snap", 256, "snap")):
            case = levels_case(img, truth, tree)
            res.check("%s: the leaf of (256 INODE_ITEM) of tree %d found" % (name, tree),
                      case is not None)
            if case is None:
                continue
            data, lost, touched, said = case
            res.check("%s: the lost leaf holds other inodes' items too (the truth)" % name,
                      len(touched) > 1, sorted(touched))
            run_case(res, kv, cli, pydir, work, name, bytes(data), view, tree, top, lost,
                     touched, said)
        s = os.path.join(testdata, "salvage")
        sview = imgtest.load_jsonl(os.path.join(s, "view.jsonl"))
        simg = imgtest.genlib.unzstd_bytes(os.path.join(s, "salvage.img.zst"))
        data = item_case(simg, imgtest.load_json(os.path.join(s, "mkfs.json")),
                         imgtest.load_json(os.path.join(s, "truth.json"))["nodesize"], 256)
        res.check("item: the leaf of the INODE_ITEM of subvolume 256's root found",
                  data is not None)
        if data is not None:
            run_case(res, kv, cli, pydir, work, "item", bytes(data), sview, 256, "sv", {256},
                     {256}, [])
    return res.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
