#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""view.py MOUNTPOINT > NAME.view.txt: the kernel's view of a mounted btrfs,
one line per path, depth-first in readdir order (for btrfs: DIR_INDEX
order), in the format tests/test_logtree.c rebuilds through the public API:

  path ino mode nlink uid gid size rdev atime mtime ctime btime sha256 target xattrs

separated by tabs. path, target and xattr names are lowercase hex of the
bytes ("." for the top directory); times are sec.nsec from statx; sha256 is
of a regular file's contents ("-" otherwise); target is a symlink's bytes
("-" otherwise); xattrs is "name=sha256(value)" joined by "," in byte order
of the hex names ("-" for none). Subvolume roots are not descended into
(their entry is still listed); the tests compare one subvolume at a time.
"""
import ctypes
import hashlib
import os
import stat
import sys

SYS_STATX = 332  # x86_64
AT_SYMLINK_NOFOLLOW = 0x100
STATX_ALL = 0xfff

libc = ctypes.CDLL(None, use_errno=True)


def statx(path):
    buf = ctypes.create_string_buffer(256)
    rc = libc.syscall(SYS_STATX, -100, os.fsencode(path), AT_SYMLINK_NOFOLLOW, STATX_ALL, buf)
    if rc != 0:
        raise OSError(ctypes.get_errno(), path)
    b = buf.raw

    def u32(o):
        return int.from_bytes(b[o:o + 4], "little")

    def u64(o):
        return int.from_bytes(b[o:o + 8], "little")

    def ts(o):
        return "%d.%09d" % (int.from_bytes(b[o:o + 8], "little", signed=True), u32(o + 8))

    return {
        "nlink": u32(0x10), "uid": u32(0x14), "gid": u32(0x18), "mode": int.from_bytes(b[0x1c:0x1e], "little"),
        "ino": u64(0x20), "size": u64(0x28), "atime": ts(0x40), "btime": ts(0x50),
        "ctime": ts(0x60), "mtime": ts(0x70), "rdev": (u32(0x80) << 20) | u32(0x84),
    }


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
    digest = sha(p) if stat.S_ISREG(m) else "-"
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
