#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_kview.py: record the kernel's view of a mounted btrfs, as JSON Lines in
exactly the format of `btrfsimg walk --json --hash`, so that tests compare
the two field by field.

    gen_kview.py record MOUNTPOINT [--start REL] > view.jsonl  # paths relative
                                              # to REL, like walk --path
    gen_kview.py compare A.jsonl B.jsonl      # same view apart from documented
                                              # volatile fields? exit 0 / 1

The walk is depth-first in the order the kernel's readdir gives (btrfs: the
DIR_INDEX order, not sorted), so the line order itself records readdir order.
It never follows symlinks and never descends into another mount (checked by
statx mount id; subvolumes share the mount).

Every field comes from a system call on the live mount:
  ino, mode, nlink, uid, gid, size, rdev, [amcb]time  statx(AT_SYMLINK_NOFOLLOW)
  subvol     stx_subvol (offset 0xa0) iff the kernel set STATX_SUBVOL in
             stx_mask, else null (6.18: stub directories do not set it)
  d_ino      readdir's d_ino from the parent (os.scandir, DirEntry.inode())
  handle     name_to_handle_at(flags 0); handle_conn the same with
             AT_HANDLE_CONNECTABLE (null if the kernel says EINVAL);
             type is the int the kernel returns, flag bits included
  target     readlink bytes of a symlink, else null
  sha256     of a regular file's contents, else null
  xattrs     {name: sha256 of value} from listxattr/getxattr without
             following symlinks, every namespace root can see
Names that are not UTF-8 use surrogate escapes (os.fsdecode), and the JSON
is ASCII with \\u escapes, so a reader restores the exact bytes.

Volatile fields (see VOLATILE): a stub directory (st_ino 2, a snapshot's
entry for a nested subvolume it does not contain) gets mtime/ctime/btime =
the time of lookup, so those three are never compared for stubs.
"""
import errno
import hashlib
import json
import os
import stat
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import genlib  # noqa: E402  (testdata/genlib.py, this script's directory)
from genlib import STATX_BASIC_STATS, STATX_BTIME, STATX_MNT_ID, STATX_SUBVOL  # noqa: E402
from genlib import sha256_file  # noqa: E402

AT_HANDLE_CONNECTABLE = 0x002
STUB_INO = 2
# Fields of a stub that the kernel fills with the time of lookup.
VOLATILE_STUB_FIELDS = ("mtime", "ctime", "btime")
FIELDS = ("path", "ino", "subvol", "mode", "nlink", "uid", "gid", "size", "rdev",
          "atime", "mtime", "ctime", "btime", "target", "d_ino", "handle",
          "handle_conn", "sha256", "xattrs")


def statx(path):
    """statx(2) of path (bytes) without following a final symlink."""
    mask = STATX_BASIC_STATS | STATX_BTIME | STATX_MNT_ID | STATX_SUBVOL
    s = genlib.statx(path, mask)
    got = s["mask"]
    r = {
        "mask": got,
        "nlink": s["nlink"], "uid": s["uid"], "gid": s["gid"],
        "mode": s["mode"],
        "ino": s["ino"], "size": s["size"],
        "atime": list(s["atime"]), "btime": list(s["btime"]) if got & STATX_BTIME else None,
        "ctime": list(s["ctime"]), "mtime": list(s["mtime"]),
        "rdev": "%d:%d" % (s["rdev_major"], s["rdev_minor"]),
        "mnt_id": s["mnt_id"] if got & STATX_MNT_ID else None,
        "subvol": s["subvol"] if got & STATX_SUBVOL else None,
    }
    return r


def handle(path, flags):
    """name_to_handle_at(2): {type, hex}, or None if the kernel rejects the
    flags with EINVAL (kernels before AT_HANDLE_CONNECTABLE)."""
    h = genlib.name_to_handle(path, flags)
    if h is None:
        if flags:
            return None
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), path)
    return {"type": h[0], "hex": h[1].hex()}


def xattrs(path):
    out = {}
    for name in sorted(os.listxattr(path, follow_symlinks=False)):
        val = os.getxattr(path, name, follow_symlinks=False)
        out[name] = hashlib.sha256(val).hexdigest()
    return out


def record_one(abspath, rel, d_ino):
    st = statx(abspath)
    is_reg = stat.S_ISREG(st["mode"])
    is_lnk = stat.S_ISLNK(st["mode"])
    rec = {
        "path": os.fsdecode(rel),
        "ino": st["ino"], "subvol": st["subvol"], "mode": st["mode"],
        "nlink": st["nlink"], "uid": st["uid"], "gid": st["gid"],
        "size": st["size"], "rdev": st["rdev"],
        "atime": st["atime"], "mtime": st["mtime"], "ctime": st["ctime"],
        "btime": st["btime"],
        "target": os.fsdecode(os.readlink(abspath)) if is_lnk else None,
        "d_ino": d_ino,
        "handle": handle(abspath, 0),
        "handle_conn": handle(abspath, AT_HANDLE_CONNECTABLE),
        "sha256": sha256_file(abspath) if is_reg else None,
        "xattrs": xattrs(abspath),
    }
    return rec, st


def _entries(absdir, reldir):
    """A directory's entries in readdir order, read in full before descending."""
    with os.scandir(absdir) as it:
        ents = [(e.name, e.inode()) for e in it]
    for name, d_ino in ents:
        yield (os.path.join(absdir, name),
               os.path.join(reldir, name) if reldir else name, d_ino)


def walk(root, start=b""):
    """Yield records depth-first, children in the kernel's readdir order.
    With start, walk root/start with paths relative to it, as
    `btrfsimg walk --path` does: "" and d_ino null for the start."""
    top = os.path.join(root, start) if start else root
    rec, st = record_one(top, b"", None)
    yield rec
    if not stat.S_ISDIR(st["mode"]):
        return
    mnt_id = st["mnt_id"]
    # Explicit stack: deep trees must not hit Python's recursion limit.
    stack = [_entries(top, b"")]
    while stack:
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            continue
        a, r, d_ino = nxt
        rec, st = record_one(a, r, d_ino)
        yield rec
        if stat.S_ISDIR(st["mode"]) and st["mnt_id"] == mnt_id:
            stack.append(_entries(a, r))


def comparable(rec):
    """The record without the fields the kernel makes volatile."""
    r = dict(rec)
    if r.get("ino") == STUB_INO and stat.S_ISDIR(r.get("mode", 0)):
        for f in VOLATILE_STUB_FIELDS:
            r.pop(f, None)
    return r


def load(path):
    with open(path, "r", encoding="ascii") as f:
        return [json.loads(line) for line in f if line.strip()]


def cmd_record(argv):
    root = os.fsencode(argv[0])
    start = b""
    if len(argv) >= 3 and argv[1] == "--start":
        start = os.fsencode(argv[2])
    out = sys.stdout
    for rec in walk(root, start):
        out.write(json.dumps({k: rec[k] for k in FIELDS}, ensure_ascii=True,
                             separators=(",", ":")) + "\n")
    return 0


def cmd_compare(argv):
    a, b = load(argv[0]), load(argv[1])
    bad = 0
    if [r["path"] for r in a] != [r["path"] for r in b]:
        print("path lists / order differ", file=sys.stderr)
        bad += 1
    bm = {r["path"]: r for r in b}
    for r in a:
        o = bm.get(r["path"])
        if o is None:
            continue
        ca, cb = comparable(r), comparable(o)
        for k in sorted(set(ca) | set(cb)):
            if ca.get(k) != cb.get(k):
                bad += 1
                if bad <= 20:
                    print("%r: %s: %r != %r" % (r["path"], k, ca.get(k), cb.get(k)),
                          file=sys.stderr)
    print("%d records, %d differences" % (len(a), bad), file=sys.stderr)
    return 1 if bad else 0


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "record":
        return cmd_record(sys.argv[2:])
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        return cmd_compare(sys.argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
