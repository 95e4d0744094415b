#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_dir_record.py: helpers for testdata/dir/gen-dir.sh.

    gen_dir_record.py collide SEED COUNT PREFIX   print COUNT names (hex, one
                                                  a line) that share one btrfs
                                                  name hash
    gen_dir_record.py record MOUNTPOINT > dir.expect
    gen_dir_record.py craft IMAGE VARIANT PHYS... damage the root tree leaf
                                                  (every copy at PHYS...),
                                                  print Z records

`record` writes the kernel's answers for every path under a mounted btrfs
(a subvolid=5, ro, noatime mount), one record a line, fields separated by
one space. Names and paths are written raw when they are printable ASCII
without spaces or '%', else as "%" + hex; the root path is ".".

  S path ino subvol mode nlink uid gid size rdev_major rdev_minor blocks
    atime_s atime_ns mtime_s mtime_ns ctime_s ctime_ns btime_s btime_ns gen
        statx(AT_SYMLINK_NOFOLLOW). subvol = stx_subvol if the kernel set
        STATX_SUBVOL, else "-". gen = FS_IOC_GETVERSION (i_generation) on an
        O_PATH-less open of regular files and directories, else "-".
  E dir name d_ino d_type index
        raw getdents64 of dir, "." and ".." left out, in the kernel's
        order. index = the d_off of the previous dirent ("..": d_off is
        the first entry's index), i.e. the position btrfs gave the entry.
  F dir last_d_off
        d_off of the last dirent of dir (the final readdir position).
  H path type hexbytes        name_to_handle_at(flags 0)
  C path type hexbytes        with AT_HANDLE_CONNECTABLE ("- -" if EINVAL)
  X path name value           listxattr order, getxattr values (hex, "-"
                              for an empty value), never following links
  L path target               readlink bytes
  P path ino subvol           statx of a tricky path (PATHS: "..", ".",
  P path ERR errno-name       repeated and trailing '/'), or its error
  Z variant offset byte       a byte of a crafted copy of the image (CRAFTS)
  K variant path ino subvol   statx of a path on that crafted copy
  K variant path ERR errno
Non-directories after the third name of one inode in one directory get no
S/H/C/X/L records (their E records are still written).
"""
import ctypes
import errno
import fcntl
import os
import random
import stat
import struct
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import genlib  # noqa: E402  (testdata/genlib.py: crc32c, statx, name_to_handle_at)
from genlib import crc32c, crc32c_raw  # noqa: E402

SYS_GETDENTS64 = 217
AT_HANDLE_CONNECTABLE = 0x002
STATX_ALL = 0xfff | 0x8000
STATX_SUBVOL = 0x8000
FS_IOC_GETVERSION = 0x80087601

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


# ---------------------------------------------------------------- names


def name_hash(name):
    return crc32c_raw(0xFFFFFFFE, name)


def forge(prefix, target):
    """prefix + 4 bytes whose name hash is target (None if a byte is bad)."""
    s = crc32c_raw(0xFFFFFFFE, prefix)
    # undo 32 shift steps of the reflected CRC starting from target
    x = target
    for _ in range(32):
        x = (((x ^ 0x82F63B78) << 1) | 1) & 0xFFFFFFFF if x & 0x80000000 else (x << 1) & 0xFFFFFFFF
    tail = struct.pack("<I", x ^ s)
    if b"\0" in tail or b"/" in tail:
        return None
    name = prefix + tail
    assert name_hash(name) == target
    return name


def collide(seed, count, prefix):
    rnd = random.Random(seed)
    target = None
    out = []
    while len(out) < count:
        p = prefix + b"%08x" % rnd.getrandbits(32)
        if target is None:
            target = name_hash(p)
            out.append(p)
            continue
        n = forge(p, target)
        if n is not None:
            out.append(n)
    return out


# ---------------------------------------------------------------- record


def enc(b):
    if b and all(0x21 <= c < 0x7f and c != 0x25 for c in b):
        return b.decode()
    return "%" + b.hex() if b else "%"


def penc(rel):
    return enc(rel) if rel else "."


def statx(path):
    s = genlib.statx(path, STATX_ALL)

    def ts(t):
        return "%d %d" % t
    return dict(ino=s["ino"], subvol=s["subvol"] if s["mask"] & STATX_SUBVOL else None,
                mode=s["mode"], nlink=s["nlink"], uid=s["uid"], gid=s["gid"], size=s["size"],
                rmaj=s["rdev_major"], rmin=s["rdev_minor"], blocks=s["blocks"],
                atime=ts(s["atime"]), btime=ts(s["btime"]), ctime=ts(s["ctime"]),
                mtime=ts(s["mtime"]))


def generation(path, mode):
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "-"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return "-"
    try:
        buf = bytearray(8)
        fcntl.ioctl(fd, FS_IOC_GETVERSION, buf)
        return str(struct.unpack("<Q", buf)[0] & 0xFFFFFFFF)
    except OSError:
        return "-"
    finally:
        os.close(fd)


def handle(path, flags):
    h = genlib.name_to_handle(path, flags)
    if h is None:  # EINVAL
        return "- -"
    return "%d %s" % (h[0] & 0xFFFFFFFF, h[1].hex())


def getdents(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    ents = []
    try:
        buf = ctypes.create_string_buffer(1 << 22)
        while True:
            n = libc.syscall(SYS_GETDENTS64, fd, buf, len(buf))
            if n < 0:
                raise OSError(ctypes.get_errno(), "getdents64", path)
            if n == 0:
                break
            raw = buf.raw[:n]
            off = 0
            while off < n:
                d_ino, d_off, reclen, d_type = struct.unpack_from("<QqHB", raw, off)
                name = raw[off + 19:off + reclen].split(b"\0", 1)[0]
                ents.append((name, d_ino, d_type, d_off))
                off += reclen
    finally:
        os.close(fd)
    return ents


def record_path(root, rel, out):
    path = os.path.join(root, rel) if rel else root
    st = statx(path)
    sv = "-" if st["subvol"] is None else str(st["subvol"])
    out.write("S %s %d %s %d %d %d %d %d %d %d %d %s %s %s %s %s\n" % (
        penc(rel), st["ino"], sv, st["mode"], st["nlink"], st["uid"], st["gid"], st["size"],
        st["rmaj"], st["rmin"], st["blocks"], st["atime"], st["mtime"], st["ctime"],
        st["btime"], generation(path, st["mode"])))
    out.write("H %s %s\n" % (penc(rel), handle(path, 0)))
    out.write("C %s %s\n" % (penc(rel), handle(path, AT_HANDLE_CONNECTABLE)))
    if stat.S_ISLNK(st["mode"]):
        out.write("L %s %s\n" % (penc(rel), enc(os.readlink(path))))
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        names = []
    for n in names:
        v = os.getxattr(path, n, follow_symlinks=False)
        out.write("X %s %s %s\n" % (penc(rel), enc(os.fsencode(n)), v.hex() if v else "-"))
    return st


def walk(root, rel, out, seen):
    path = os.path.join(root, rel) if rel else root
    st = statx(path)
    if not stat.S_ISDIR(st["mode"]):
        # a directory of hundreds of links to one inode: record 3 of them
        key = (st["subvol"], st["ino"], os.path.dirname(rel))
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 3:
            return
    st = record_path(root, rel, out)
    if not stat.S_ISDIR(st["mode"]):
        return
    ents = getdents(path)
    prev_off = None
    children = []
    for name, d_ino, d_type, d_off in ents:
        if name in (b".", b".."):
            prev_off = d_off
            continue
        out.write("E %s %s %d %d %d\n" % (penc(rel), enc(name), d_ino, d_type, prev_off))
        prev_off = d_off
        children.append(name)
    out.write("F %s %d\n" % (penc(rel), prev_off))
    for name in children:
        walk(root, os.path.join(rel, name) if rel else name, out, seen)


# Paths whose resolution is not a plain walk down (record P).
PATHS = ["sv1/nested/..", "snap1/nested/..", "d/moved/..", "snap5/d/moved/..",
         "sv1/dd/inner/../../a", "empty/..", "coll/../d", "//d///f", "./d/./f", "d/",
         "d/f/", "d/f/x", "d/f/..", "d/f/.", "nonexistent", "snap1/nested/x", "snap1/gone/.",
         "sl/", "sl/x", "links/t0", "sv1/nested/b/"]


def record_paths(root, out, tag="P", paths=PATHS):
    for p in paths:
        path = root + b"/" + os.fsencode(p)  # not join: p may start with "/"
        try:
            st = statx(path)
        except OSError as e:
            out.write("%s %s ERR %s\n" % (tag, enc(os.fsencode(p)), errno.errorcode[e.errno]))
            continue
        sv = "-" if st["subvol"] is None else str(st["subvol"])
        out.write("%s %s %d %s\n" % (tag, enc(os.fsencode(p)), st["ino"], sv))


# ---------------------------------------------------------------- craft
# Damage that only a corrupt image can have, for the kernel to judge:
# the subvolume d/moved (its ROOT_ITEM, its ROOT_REF in the top level).
CRAFTS = {
    "refs0": "ROOT_ITEM of d/moved with refs 0",
    "noitem": "ROOT_ITEM of d/moved re-keyed to type 131 (no ROOT_ITEM)",
    "dirid": "ROOT_REF (5, 156, d/moved) with dirid 256 instead of d",
    "name": "ROOT_REF (5, 156, d/moved) naming 'moveX'",
}


def find_item(blk, oid, typ, off=None):
    nritems, = struct.unpack_from("<I", blk, 96)
    for i in range(nritems):
        h = 101 + 25 * i
        k_oid, k_type, k_off, doff, dsize = struct.unpack_from("<QBQII", blk, h)
        if k_oid == oid and k_type == typ and (off is None or k_off == off):
            return h, 101 + doff, dsize
    raise SystemExit("item (%d %d %s) not found" % (oid, typ, off))


def craft(img, variant, physicals, nodesize=16384):
    """Patch the root tree leaf at every physical copy; print Z records."""
    with open(img, "r+b") as f:
        f.seek(physicals[0])
        blk = bytearray(f.read(nodesize))
        sub = 257  # d/moved
        if variant == "refs0":
            _, d, _ = find_item(blk, sub, 132)
            struct.pack_into("<I", blk, d + 216, 0)
        elif variant == "noitem":
            h, _, _ = find_item(blk, sub, 132)
            blk[h + 8] = 131
        elif variant == "dirid":
            _, d, _ = find_item(blk, 5, 156, sub)
            struct.pack_into("<Q", blk, d, 256)
        elif variant == "name":
            _, d, n = find_item(blk, 5, 156, sub)
            blk[d + n - 1] = ord("X")
        struct.pack_into("<I", blk, 0, crc32c(blk[32:]))
        for p in physicals:
            f.seek(p)
            old = f.read(nodesize)
            f.seek(p)
            f.write(blk)
            for i in range(nodesize):
                if old[i] != blk[i]:
                    print("Z %s %d %02x" % (variant, p + i, blk[i]))


def main():
    if sys.argv[1] == "collide":
        for n in collide(int(sys.argv[2]), int(sys.argv[3]), os.fsencode(sys.argv[4])):
            print(n.hex())
    elif sys.argv[1] == "craft":
        craft(sys.argv[2], sys.argv[3], [int(x) for x in sys.argv[4:]])
    elif sys.argv[1] == "record":
        root = os.fsencode(sys.argv[2])
        if len(sys.argv) > 3:  # record VARIANT: only the crafted paths
            record_paths(root, sys.stdout, "K " + sys.argv[3], ["d/moved", "d/moved/m"])
        else:
            walk(root, b"", sys.stdout, {})
            record_paths(root, sys.stdout)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
