#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_diff.py: the truth for `btrfsimg diff`, as root.

    gen_diff.py [OUTDIR]     (default testdata/diff)

mkfs.btrfs on a 256 MiB sparse file, a subvolume `data` filled on a loop
mount (mounted compress-force=zstd: what compresses is stored compressed), then three read-only
snapshots of it with every kind of change between them:
  s1  the first state
  s2  after: overwrite, append, truncate, a punched hole, new files
      (regular, FIFO, character device, symlink, long and non-UTF-8
      names, a reflink copy), deletions, renames (one also rewritten),
      a directory moved with a file below it changed, a hard link added
      and one removed, a name reused by a new inode, two names swapped,
      a directory moved below its former child, chmod, chown, xattrs set,
      changed and removed, a file rewritten with the same bytes and its
      mtime put back (extents differ, nothing a user sees does)
  s3  after a second, smaller round (for a chain s1 -> s2 -> s3)
The filesystem is unmounted and mounted again read-only (noatime); each
snapshot is recorded with gen_kview.py (the kernel's stat, readdir,
xattrs and contents: the truth the diff is derived from, by inode number,
which a snapshot keeps).

A second image, shared.img, has a tree of three levels (4 KiB nodes) in
two snapshots that share nearly all of it: 3,000 small files, then one
appended to, one deleted, one added.

Writes to OUTDIR:
  diff.img.zst     the image (zstd -19 --long=27)
  shared.img.zst   the second image; its snapshots are a (257) and b (258)
  shared-a.jsonl.zst, shared-b.jsonl.zst   their views
  s1.jsonl ...     the kernel's view of each snapshot (gen_kview record)
  snapshots.json   {"s1": subvolume id, ...}
"""
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from genlib import content, record_view  # noqa: E402  (testdata/genlib.py)


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, stdout=subprocess.PIPE, **kw).stdout


def put(d, rel, size, tag="", data=None):
    with open(os.path.join(d, rel), "wb") as f:
        f.write(data if data is not None else content(rel + tag, size))


def state1(d):
    for sub in ("docs", "docs/deep", "mv", "mv/below", "swap", "parent", "parent/child",
                "links", "meta", "comp"):
        os.mkdir(os.path.join(d, sub))
    put(d, "docs/over", 200000)
    put(d, "docs/append", 5000)
    put(d, "docs/trunc", 300000)
    put(d, "docs/hole", 1 << 20)
    put(d, "docs/small", 300)  # inline
    put(d, "docs/gone", 7000)
    put(d, "docs/gonedir-file", 10)
    put(d, "docs/renamed", 4096)
    put(d, "docs/renamed-changed", 9000)
    put(d, "docs/deep/same", 40000)
    put(d, "mv/below/file", 3000)
    put(d, "mv/below/untouched", 3000)
    put(d, "swap/a", 100, data=b"A" * 100)
    put(d, "swap/b", 200, data=b"B" * 200)
    put(d, "parent/child/f", 50)
    put(d, "links/one", 8192)
    os.link(os.path.join(d, "links/one"), os.path.join(d, "links/one.second"))
    put(d, "links/two", 1000)
    put(d, "reuse", 600)
    for name in ("mode", "owner", "xset", "xchange", "xdel"):
        put(d, "meta/" + name, 100)
    os.setxattr(os.path.join(d, "meta/xchange"), "user.k", b"old")
    os.setxattr(os.path.join(d, "meta/xdel"), "user.k", b"bye")
    os.symlink("docs/small", os.path.join(d, "sym"))
    put(d, "comp/text", 0, data=b"compressible line\n" * 20000)
    os.mkdir(os.path.join(d, "gonedir"))
    put(d, "gonedir/x", 10)


def state2(d):
    j = lambda *p: os.path.join(d, *p)  # noqa: E731
    with open(j("docs/over"), "r+b") as f:
        f.seek(70000)
        f.write(content("over2", 5000))
    with open(j("docs/append"), "ab") as f:
        f.write(content("append2", 3000))
    os.truncate(j("docs/trunc"), 100000)
    sh("fallocate", "-p", "-o", "262144", "-l", "262144", j("docs/hole"))
    put(d, "docs/new", 12345)
    os.mkfifo(j("docs/fifo"))
    os.mknod(j("docs/chr"), 0o20644, os.makedev(1, 3))
    os.symlink("over", j("docs/newsym"))
    put(d, "docs/" + "L" * 255, 10)
    with open(os.fsencode(j("docs")) + b"/bad-\xff\xfe", "wb") as f:
        f.write(b"not utf-8 name\n")
    sh("cp", "--reflink=always", j("docs/trunc"), j("docs/reflink"))
    os.unlink(j("docs/gone"))
    os.unlink(j("gonedir/x"))
    os.rmdir(j("gonedir"))
    os.rename(j("docs/renamed"), j("docs/deep/renamed-now"))
    os.rename(j("docs/renamed-changed"), j("docs/renamed-changed-now"))
    with open(j("docs/renamed-changed-now"), "ab") as f:
        f.write(b"more")
    os.rename(j("mv"), j("docs/mv-moved"))
    with open(j("docs/mv-moved/below/file"), "r+b") as f:
        f.write(b"changed")
    os.link(j("links/two"), j("links/two.added"))
    os.unlink(j("links/one.second"))
    os.unlink(j("reuse"))
    put(d, "reuse", 600, ":new")
    os.rename(j("swap/a"), j("swap/tmp"))
    os.rename(j("swap/b"), j("swap/a"))
    os.rename(j("swap/tmp"), j("swap/b"))
    os.rename(j("parent/child"), j("child"))
    os.rename(j("parent"), j("child/parent"))
    os.chmod(j("meta/mode"), 0o600)
    os.chown(j("meta/owner"), 1234, 5678)
    os.setxattr(j("meta/xset"), "user.new", b"value")
    os.setxattr(j("meta/xchange"), "user.k", b"new")
    os.removexattr(j("meta/xdel"), "user.k")
    st = os.stat(j("docs/deep/same"))
    data = open(j("docs/deep/same"), "rb").read()
    with open(j("docs/deep/same"), "wb") as f:
        f.write(data)
    os.utime(j("docs/deep/same"), ns=(st.st_atime_ns, st.st_mtime_ns))
    put(d, "comp/text2", 0, data=b"another compressible\n" * 9000)


def state3(d):
    j = lambda *p: os.path.join(d, *p)  # noqa: E731
    with open(j("docs/new"), "ab") as f:
        f.write(b"tail")
    os.rename(j("docs/mv-moved"), j("mv"))
    os.unlink(j("docs/reflink"))
    put(d, "s3-only", 77)


def record(mnt, rel, out):
    record_view(mnt, out, rel)


def subvol_ids(mnt):
    ids = {}
    for line in sh("btrfs", "subvolume", "list", mnt).decode().splitlines():
        parts = line.split()
        ids[parts[-1]] = int(parts[1])
    return ids


def shared_image(out, tmp):
    img, mnt = os.path.join(tmp, "shared.img"), os.path.join(tmp, "mnt2")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(128 << 20)
    sh("mkfs.btrfs", "-q", "-f", "-n", "4096", "-m", "single", img)
    sh("mount", "-o", "loop", img, mnt)
    try:
        sv = os.path.join(mnt, "sv")
        sh("btrfs", "subvolume", "create", sv)
        for i in range(3000):
            put(sv, "f%05d" % i, 100, data=b"%05d" % i * 20)
        sh("btrfs", "subvolume", "snapshot", "-r", sv, os.path.join(mnt, "a"))
        with open(os.path.join(sv, "f01500"), "ab") as f:
            f.write(b"more")
        os.unlink(os.path.join(sv, "f02999"))
        put(sv, "new", 50)
        sh("btrfs", "subvolume", "snapshot", "-r", sv, os.path.join(mnt, "b"))
    finally:
        sh("umount", mnt)
    sh("mount", "-o", "ro,noatime,loop", img, mnt)
    try:
        for n in ("a", "b"):
            view = os.path.join(tmp, "shared-%s.jsonl" % n)
            record(mnt, n, view)
            sh("zstd", "-q", "-19", "-f", "--rm", view, "-o",
               os.path.join(out, "shared-%s.jsonl.zst" % n))
    finally:
        sh("umount", mnt)
    sh("zstd", "-q", "-19", "--long=27", "-f", img, "-o", os.path.join(out, "shared.img.zst"))
    os.unlink(img)
    os.rmdir(mnt)


def main():
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "diff"))
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp()
    img, mnt = os.path.join(tmp, "diff.img"), os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(256 << 20)
    sh("mkfs.btrfs", "-q", "-f", "-n", "16384", img)
    sh("mount", "-o", "loop,compress-force=zstd", img, mnt)
    try:
        data = os.path.join(mnt, "data")
        sh("btrfs", "subvolume", "create", data)
        for n, step in (("s1", state1), ("s2", state2), ("s3", state3)):
            step(data)
            sh("sync")
            sh("btrfs", "subvolume", "snapshot", "-r", data, os.path.join(mnt, n))
        ids = subvol_ids(mnt)
    finally:
        sh("umount", mnt)
    sh("mount", "-o", "ro,noatime,loop", img, mnt)
    try:
        for n in ("s1", "s2", "s3"):
            record(mnt, n, os.path.join(out, n + ".jsonl"))
    finally:
        sh("umount", mnt)
    with open(os.path.join(out, "snapshots.json"), "w") as f:
        json.dump({n: ids[n] for n in ("data", "s1", "s2", "s3")}, f, indent=1)
        f.write("\n")
    sh("zstd", "-q", "-19", "--long=27", "-f", img, "-o", os.path.join(out, "diff.img.zst"))
    os.unlink(img)
    shared_image(out, tmp)
    os.rmdir(mnt)
    os.rmdir(tmp)
    print("wrote", out)


if __name__ == "__main__":
    sys.exit(main())
