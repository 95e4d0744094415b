#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_salvage.py: the truth for salvage (opening a filesystem whose way in
is gone), as root.

    gen_salvage.py [OUTDIR]              (default testdata/salvage)
    gen_salvage.py --mkfs-only [OUTDIR]  only the mkfs'd copies, of the
                                         committed salvage.img.zst

mkfs.btrfs on a 256 MiB sparse file with the defaults of a single device
(16 KiB nodes, crc32c, metadata DUP, data single), then on a loop mount:
directories, files of several sizes (inline, one extent, many extents), a
hard link, a symlink, xattrs, a subvolume with its own files and a
read-only snapshot of it. Unmounted (a clean commit, no log tree), then
mounted once more to change a few files, so that the last commit's fs tree
is newer than the one the previous root tree names: a lost root-tree block
then rolls back unless each tree's newest root is found by scanning.

The kernel's view of a read-only copy is recorded with gen_kview.py
(the format of `btrfsimg walk --json --hash`), and so is, on a copy whose
root-tree root block was zeroed (damage "root" below), the view of
`mount -o ro,rescue=usebackuproot`: what the kernel's own fallback shows.

The damage (made by the tests from the committed image, in user space,
deterministically: DAMAGE and damage() below) never touches the image
file given, only the bytes passed in:
  super   every superblock copy zeroed (4096 bytes at 64 KiB and 64 MiB)
  chunk   both DUP copies of the chunk tree's root block zeroed
  both    super and chunk
  root    both DUP copies of the root tree's root block zeroed

Writes to OUTDIR:
  salvage.img.zst   the undamaged image (zstd -19 --long=27)
  view.jsonl        the kernel's view of it
  backuproot.jsonl  the kernel's view of damage "root" mounted with
                    rescue=usebackuproot
  truth.json        fsid, generation, nodesize, csum type, the chunk and
                    root tree roots and where their copies are
  mkfs-btrfs.img.zst, mkfs-btrfs-single.img.zst, mkfs-ext4.img.zst
                    copies with a new filesystem made over the old one
                    (MKFS below) and written to; nothing of the new ones
                    is recorded (they are not the subject)
  mkfs.json         from btrfs-progs' dump-tree of the old image, each
                    old file's tree blocks (the physical offsets of every
                    copy) and data extents, and per copy the files whose
                    bytes the new filesystem overwrote (a data byte, or
                    every copy of one of its tree blocks)
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from genlib import content, record_view  # noqa: E402  (testdata/genlib.py)

SB_OFFSETS = (64 << 10, 64 << 20, 256 << 30)
DAMAGE = ("super", "chunk", "both", "root")


# ------------------------------------------------------------ on-disk reading

def _sb(img):
    sb = img[SB_OFFSETS[0]:SB_OFFSETS[0] + 4096]
    if sb[0x40:0x48] != b"_BHRfS_M":
        raise ValueError("no primary superblock")
    return sb


def _chunk_item(buf, off):
    """(length, type, [(devid, physical)]) of a chunk item at @off."""
    length, = struct.unpack_from("<Q", buf, off)
    ctype, = struct.unpack_from("<Q", buf, off + 24)
    nst, = struct.unpack_from("<H", buf, off + 44)
    stripes = []
    for i in range(nst):
        devid, phys = struct.unpack_from("<QQ", buf, off + 48 + 32 * i)
        stripes.append((devid, phys))
    return length, ctype, stripes


def _sys_chunks(sb):
    size, = struct.unpack_from("<I", sb, 0xa0)
    arr, pos, out = sb[0x32b:0x32b + size], 0, []
    while pos < size:
        _, _, logical = struct.unpack_from("<QBQ", arr, pos)
        length, ctype, stripes = _chunk_item(arr, pos + 17)
        out.append((logical, length, stripes))
        pos += 17 + 48 + 32 * len(stripes)
    return out


def _map(chunks, logical):
    for start, length, stripes in chunks:
        if start <= logical < start + length:
            return [phys + logical - start for _, phys in stripes]
    raise ValueError("logical %d unmapped" % logical)


def _leaf_chunks(img, phys, nodesize):
    blk = img[phys:phys + nodesize]
    if blk[0x64] != 0:
        raise ValueError("chunk root is not a leaf")
    nritems, = struct.unpack_from("<I", blk, 0x60)
    out = []
    for s in range(nritems):
        it = 0x65 + 25 * s
        _, ktype, koff = struct.unpack_from("<QBQ", blk, it)
        doff, = struct.unpack_from("<I", blk, it + 17)
        if ktype == 228:  # CHUNK_ITEM
            length, _, stripes = _chunk_item(blk, 0x65 + doff)
            out.append((koff, length, stripes))
    return out


def facts(img):
    """What the damage needs to know of an undamaged image."""
    sb = _sb(img)
    root, chunk_root = struct.unpack_from("<QQ", sb, 0x50)
    gen, = struct.unpack_from("<Q", sb, 0x48)
    nodesize, = struct.unpack_from("<I", sb, 0x94)
    csum_type, = struct.unpack_from("<H", sb, 0xc4)
    chunk_phys = _map(_sys_chunks(sb), chunk_root)
    root_phys = _map(_leaf_chunks(img, chunk_phys[0], nodesize), root)
    return {
        "fsid": sb[0x20:0x30].hex(),
        "generation": gen,
        "nodesize": nodesize,
        "csum_type": csum_type,
        "chunk_root": chunk_root,
        "chunk_root_generation": struct.unpack_from("<Q", sb, 0xa4)[0],
        "chunk_root_physical": chunk_phys,
        "root": root,
        "root_physical": root_phys,
        "super_physical": [o for o in SB_OFFSETS if o + 4096 < len(img)],
    }


def damage(img, what):
    """A damaged copy of @img (bytes): one of DAMAGE."""
    f = facts(img)
    out = bytearray(img)
    zero = []
    if what in ("super", "both"):
        zero += [(o, 4096) for o in f["super_physical"]]
    if what in ("chunk", "both"):
        zero += [(p, f["nodesize"]) for p in f["chunk_root_physical"]]
    if what == "root":
        zero += [(p, f["nodesize"]) for p in f["root_physical"]]
    if what not in DAMAGE:
        raise ValueError(what)
    for off, n in zero:
        out[off:off + n] = bytes(n)
    return bytes(out)


# ------------------------------------------------------------ the image

def sh(*args, **kw):
    return subprocess.run(list(args), check=True, stdout=subprocess.PIPE, **kw).stdout


def mounted_steps(dev, mnt, steps, opts="noatime,loop"):
    """Each of @steps(mnt) run on its own mount of @dev, so that each ends
    with a commit and an unmount, as a user's sessions do."""
    for step in steps:
        sh("mount", "-o", opts, dev, mnt)
        try:
            step(mnt)
        finally:
            sh("umount", mnt)


def put(mnt, rel, size, tag=""):
    with open(os.path.join(mnt, rel), "wb") as f:
        f.write(content(rel + tag, size))


def populate(m):
    os.mkdir(os.path.join(m, "docs"))
    put(m, "docs/inline", 120)
    put(m, "docs/page", 4096)
    put(m, "docs/mid", 300000)
    with open(os.path.join(m, "docs/big"), "wb") as f:  # two extents
        for half in range(2):
            f.write(content("docs/big:%d" % half, 256 << 10))
            f.flush()
            os.fsync(f.fileno())
    os.link(os.path.join(m, "docs/page"), os.path.join(m, "docs/page.link"))
    os.symlink("mid", os.path.join(m, "docs/sym"))
    os.setxattr(os.path.join(m, "docs/mid"), "user.origin", b"camera")
    os.mkdir(os.path.join(m, "many"))
    for i in range(300):  # enough items for an fs tree of several leaves
        put(m, "many/f%03d" % i, 50 + 9 * i)  # inline and not
    sh("btrfs", "subvolume", "create", os.path.join(m, "sv"))
    os.mkdir(os.path.join(m, "sv/d"))
    put(m, "sv/d/a", 20000)
    put(m, "sv/small", 30)
    sh("btrfs", "subvolume", "snapshot", "-r", os.path.join(m, "sv"), os.path.join(m, "snap"))
    put(m, "sv/d/a", 5000, ":after-snapshot")


def last_changes(m):
    put(m, "docs/late", 7000)
    os.unlink(os.path.join(m, "many/f007"))
    put(m, "sv/late", 900)


def record(src, mnt, out, opts="ro,noatime,loop"):
    sh("mount", "-o", opts, src, mnt)
    try:
        record_view(mnt, out)
    finally:
        sh("umount", mnt)


# ------------------------------------------------------------ mkfs over it

# The copies a new filesystem was made over (mkfs without discard, so what
# the new one did not write keeps the old bytes), then some files written
# into the new one. mkfs is not deterministic: the copies are committed.
# With the defaults the new btrfs lays its chunks where the old ones were
# and its first commits overwrite the old newest tree roots; with single
# metadata its metadata chunk lies elsewhere and mostly data is lost.
MKFS = {
    "mkfs-btrfs": ["mkfs.btrfs", "-q", "-f", "-K", "-L", "newer"],
    "mkfs-btrfs-single": ["mkfs.btrfs", "-q", "-f", "-K", "-m", "single", "-L", "newer"],
    "mkfs-ext4": ["mkfs.ext4", "-q", "-F", "-E", "nodiscard", "-L", "newer"],
}


def _dump_tree(img, tree):
    return sh("btrfs", "inspect-internal", "dump-tree", "-t", str(tree), img).decode()


def _tree_blocks(img, tree):
    """Of tree @tree (btrfs-progs' dump-tree): its nodes' logical
    addresses, {objectid: leaves holding its items}, and the extent data
    items [(objectid, disk_bytenr, disk_num_bytes)] (holes left out)."""
    nodes, leaves_of, data, cur, obj = set(), {}, [], None, None
    for line in _dump_tree(img, tree).splitlines():
        w = line.split()
        if len(w) > 3 and w[0] in ("node", "leaf") and w[2] in ("level", "items"):
            cur = int(w[1])
            if w[0] == "node":
                nodes.add(cur)
        elif w[:1] == ["item"] and "key" in w:
            k = line[line.index("(") + 1:line.index(")")].split()
            obj = int(k[0]) if k[0].isdigit() else k[0]
            leaves_of.setdefault(obj, set()).add(cur)
        elif line.strip().startswith("extent data disk byte"):
            byte, nr = int(w[4]), int(w[6])
            if byte:
                data.append((obj, byte, nr))
    return nodes, leaves_of, data


def _csum_leaves(img):
    """The checksum tree: its nodes, and [(start, end, leaf)] of its items."""
    nodes, items, cur = set(), [], None
    for line in _dump_tree(img, 7).splitlines():
        w = line.split()
        if len(w) > 3 and w[0] in ("node", "leaf") and w[2] in ("level", "items"):
            cur = int(w[1])
            if w[0] == "node":
                nodes.add(cur)
        elif line.strip().startswith("range start"):
            items.append((int(w[2]), int(w[4]), cur))
    return nodes, items


def file_extents(img_path, view):
    """For each record of the kernel's @view of the old filesystem: the
    tree blocks its metadata lies in (the nodes of every tree on its
    path, the leaves with the items of each directory on its path and its
    own, the checksum tree's blocks covering its data), each as the
    physical offsets of its copies; and its data extents' physical ranges."""
    img = open(img_path, "rb").read()
    f = facts(img)
    chunks = _leaf_chunks(img, f["chunk_root_physical"][0], f["nodesize"])
    trees = {sv: _tree_blocks(img_path, sv) for sv in sorted({r["subvol"] for r in view})}
    cnodes, citems = _csum_leaves(img_path)
    by_path = {r["path"]: r for r in view}
    out = {}
    for r in view:
        parts = r["path"].split("/") if r["path"] else []
        on_path = [by_path["/".join(parts[:i])] for i in range(len(parts) + 1)]
        meta = set()
        for p in on_path:
            nodes, leaves_of, _ = trees[p["subvol"]]
            meta |= nodes | leaves_of.get(p["ino"], set())
        data = [(b, n) for o, b, n in trees[r["subvol"]][2] if o == r["ino"]]
        if data:
            meta |= cnodes
            meta |= {leaf for s, e, leaf in citems for b, n in data if s < b + n and b < e}
        out[r["path"]] = {
            "meta": [_map(chunks, b) for b in sorted(meta)],
            "data": sorted([_map(chunks, b)[0], n] for b, n in set(data)),
        }
    return out, f["nodesize"]


def overwritten(old, new, extents, nodesize, nodes=True):
    """The paths whose bytes the new filesystem changed: a data byte, or
    every copy of one of its metadata blocks. With @nodes False, the
    blocks that are nodes (level > 0) in @old are left out: the files that
    a tree rebuilt around its lost nodes, from the surviving blocks below
    them, could give back at most."""
    lost = []
    for path, e in sorted(extents.items()):
        meta = [c for c in e["meta"] if nodes or old[c[0] + 0x64] == 0]
        gone = any(old[p:p + n] != new[p:p + n] for p, n in e["data"])
        gone = gone or any(all(old[p:p + nodesize] != new[p:p + nodesize] for p in copies)
                           for copies in meta)
        if gone:
            lost.append(path)
    return lost


def tree_roots(img):
    """{tree id: (level, [physical of each copy])} of the root blocks the
    root tree of @img (the one its superblock names, a leaf) names."""
    f = facts(img)
    ns, rp = f["nodesize"], f["root_physical"][0]
    chunks = _leaf_chunks(img, f["chunk_root_physical"][0], ns)
    blk = img[rp:rp + ns]
    if blk[0x64] != 0:
        raise ValueError("root tree root is not a leaf")
    nritems, = struct.unpack_from("<I", blk, 0x60)
    out = {}
    for s in range(nritems):
        tree, ktype, _, doff = struct.unpack_from("<QBQI", blk, 0x65 + 25 * s)
        if ktype == 132:  # ROOT_ITEM: bytenr at 176, level at 238
            bytenr, = struct.unpack_from("<Q", blk, 0x65 + doff + 176)
            out[tree] = (blk[0x65 + doff + 238], _map(chunks, bytenr))
    return out


def lost_roots(old, new):
    """{tree id: level} of the trees of @old whose root block @new changed
    on every copy."""
    ns = facts(old)["nodesize"]
    return {t: lv for t, (lv, phys) in tree_roots(old).items()
            if all(old[p:p + ns] != new[p:p + ns] for p in phys)}


def fill_new(m):
    """Files in the new filesystem: enough to overwrite some old data
    (of one repeated byte each, so that the copies compress well)."""
    for i in range(12):
        with open(os.path.join(m, "new%02d" % i), "wb") as f:
            f.write(bytes([0x41 + i]) * ((i + 1) * (96 << 10)))


def mkfs_copies(img, out, work):
    """The two mkfs'd copies of @img, zstd into @out, and mkfs.json: each
    old file's extents and, per copy, the paths whose bytes were
    overwritten (a test recomputes these from the committed images)."""
    view = [json.loads(line) for line in open(os.path.join(out, "view.jsonl"))]
    extents, nodesize = file_extents(img, view)
    old = open(img, "rb").read()
    truth = {"nodesize": nodesize, "extents": extents, "copies": {}}
    mnt = os.path.join(work, "mnt.mkfs")
    os.makedirs(mnt, exist_ok=True)
    for name, cmd in MKFS.items():
        copy = os.path.join(work, name + ".img")
        sh("cp", "--sparse=always", img, copy)
        sh(*cmd, copy)
        sh("mount", "-o", "loop", copy, mnt)
        try:
            fill_new(mnt)
        finally:
            sh("umount", mnt)
        new = open(copy, "rb").read()
        if len(new) != len(old):
            raise RuntimeError("%s: the copy changed size" % name)
        truth["copies"][name] = {"overwritten": overwritten(old, new, extents, nodesize)}
        sh("zstd", "-q", "-19", "--long=27", "-f", copy, "-o",
           os.path.join(out, name + ".img.zst"))
    with open(os.path.join(out, "mkfs.json"), "w") as f:
        json.dump(truth, f, indent=None, sort_keys=True)
        f.write("\n")


def main():
    args = sys.argv[1:]
    mkfs_only = "--mkfs-only" in args
    args = [a for a in args if a != "--mkfs-only"]
    out = args[0] if args else os.path.join(HERE, "salvage")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="salvage.")
    if mkfs_only:  # the mkfs'd copies of the committed image only
        img = os.path.join(work, "salvage.img")
        sh("zstd", "-q", "-d", "-f", os.path.join(out, "salvage.img.zst"), "-o", img)
        mkfs_copies(img, out, work)
        sh("rm", "-rf", work)
        return 0
    img, copy, mnt = (os.path.join(work, n) for n in ("salvage.img", "copy.img", "mnt"))
    os.mkdir(mnt)
    sh("truncate", "-s", "256M", img)
    sh("mkfs.btrfs", "-q", "-f", "-m", "dup", "-d", "single", img)
    mounted_steps(img, mnt, (populate, last_changes))
    data = open(img, "rb").read()
    sh("cp", "--sparse=always", img, copy)
    record(copy, mnt, os.path.join(out, "view.jsonl"))
    with open(copy, "wb") as f:
        f.write(damage(data, "root"))
    record(copy, mnt, os.path.join(out, "backuproot.jsonl"),
           "ro,noatime,loop,rescue=usebackuproot")
    if open(img, "rb").read() != data:
        raise RuntimeError("the image changed after its record")
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(facts(data), f, indent=1)
        f.write("\n")
    sh("zstd", "-q", "-19", "--long=27", "-f", img, "-o", os.path.join(out, "salvage.img.zst"))
    mkfs_copies(img, out, work)
    sh("rm", "-rf", work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
