#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_logtree_view.py MOUNTPOINT > NAME.view.txt: the kernel's view of a
mounted btrfs, one line per path, depth-first in readdir order (for btrfs:
DIR_INDEX order), in the format tests/unit/test_logtree.c rebuilds through the
public API:

  path ino mode nlink uid gid size rdev atime mtime ctime btime sha256 target xattrs

separated by tabs. path, target and xattr names are lowercase hex of the
bytes ("." for the top directory); times are sec.nsec from statx; sha256 is
of a regular file's contents ("-" otherwise); target is a symlink's bytes
("-" otherwise); xattrs is "name=sha256(value)" joined by "," in byte order
of the hex names ("-" for none). Subvolume roots are not descended into
(their entry is still listed); the tests compare one subvolume at a time.
"""
import hashlib
import os
import stat
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import genlib  # noqa: E402  (testdata/genlib.py: statx, sha256)

STATX_ALL = 0xfff


def statx(path):
    s = genlib.statx(path, STATX_ALL)

    def ts(t):
        return "%d.%09d" % t

    return {
        "nlink": s["nlink"], "uid": s["uid"], "gid": s["gid"], "mode": s["mode"],
        "ino": s["ino"], "size": s["size"], "atime": ts(s["atime"]), "btime": ts(s["btime"]),
        "ctime": ts(s["ctime"]), "mtime": ts(s["mtime"]),
        "rdev": (s["rdev_major"] << 20) | s["rdev_minor"],
    }


def xattrs(path):
    names = os.listxattr(path, follow_symlinks=False)
    out = []
    for n in names:
        v = os.getxattr(path, n, follow_symlinks=False)
        out.append((os.fsencode(n).hex(), hashlib.sha256(v).hexdigest()))
    out.sort()
    return ",".join("%s=%s" % x for x in out) or "-"


def line(root, rel):
    p = os.path.join(root, rel) if rel else root
    s = statx(p)
    m = s["mode"]
    digest = genlib.sha256_file(p) if stat.S_ISREG(m) else "-"
    target = os.fsencode(os.readlink(p)).hex() if stat.S_ISLNK(m) else "-"
    name = os.fsencode(rel).hex() if rel else "."
    return "\t".join(str(x) for x in (name, s["ino"], "%o" % m, s["nlink"], s["uid"], s["gid"],
                                      s["size"], s["rdev"], s["atime"], s["mtime"], s["ctime"],
                                      s["btime"], digest, target, xattrs(p)))


def walk(root, rel, out):
    out.append(line(root, rel))
    p = os.path.join(root, rel) if rel else root
    if not stat.S_ISDIR(os.lstat(p).st_mode):
        return
    if rel and os.lstat(p).st_ino == 256:
        return  # a subvolume root: compared on its own
    with os.scandir(p) as it:
        for e in it:
            walk(root, os.path.join(rel, e.name) if rel else e.name, out)


if __name__ == "__main__":
    out = []
    walk(sys.argv[1], "", out)
    sys.stdout.write("\n".join(out) + "\n")
