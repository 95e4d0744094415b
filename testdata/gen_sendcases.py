#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_sendcases.py: the incremental-send edge cases, as kernel-made
snapshots, as root.

    gen_sendcases.py [OUTDIR]     (default testdata/sendcases)

The cases are the sequences of operations between a parent and a sent
snapshot that broke the kernel's incremental send over the years (most
from fstests tests/btrfs, where each test names the fix; the table in
docs/send-and-diff.md lists them with their sources). Each case is a named
step in CASES below, working in its own directory of the subvolume `data`
(a few at its top, where orphan names live): `setup` makes its state in
c0, `change` turns it into c1, and `again` (when it has one) into c2. The
reuse cases free the highest inode numbers and remount before creating new
inodes, so that the new inodes get the freed numbers with a new generation
(btrfs starts a subvolume's inode counter at its highest number + 1 when it
loads the root); the generator checks they did.

mkfs.btrfs on a 256 MiB sparse file (16 KiB nodes), mounted without
compression (one case sets zstd on its directory), snapshots c0, c1, c2
read-only; then mounted again read-only and each snapshot recorded with
gen_kview.py (the kernel's view: the truth).

Writes to OUTDIR:
  sendcases.img.zst   the image (zstd -19 --long=27)
  c0.jsonl.zst ...    the kernel's view of each snapshot
  snapshots.json      {"data": id, "c0": id, ...}
"""
import fcntl
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_diff import put, record, sh, subvol_ids  # noqa: E402  (testdata/gen_diff.py)
from genlib import content  # noqa: E402

FICLONERANGE = 0x4020940D     # _IOW(0x94, 13, struct file_clone_range)
FS_IOC_GETVERSION = 0x80087601  # _IOR('v', 1, long): the inode's generation
SNAPS = ("c0", "c1", "c2")


def dirs(d, *names):
    for n in names:
        os.mkdir(os.path.join(d, n))


def mv(d, a, b):
    os.rename(os.path.join(d, a), os.path.join(d, b))


def ln(d, a, b):
    os.link(os.path.join(d, a), os.path.join(d, b))


def rm(d, *names):
    for n in names:
        os.unlink(os.path.join(d, n))


def clone(d, src, soff, dst, doff, length):
    """FICLONERANGE: @length bytes of @src at @soff into @dst at @doff."""
    with open(os.path.join(d, src), "rb") as s, open(os.path.join(d, dst), "r+b") as t:
        fcntl.ioctl(t.fileno(), FICLONERANGE, struct.pack("<qQQQ", s.fileno(), soff, length,
                                                          doff))


def write_at(d, rel, off, data):
    with open(os.path.join(d, rel), "r+b") as f:
        f.seek(off)
        f.write(data)


def orphan_name(path):
    """The kernel's orphan name for the inode at @path: o<ino>-<gen>-0."""
    fd = os.open(path, os.O_RDONLY)
    try:
        buf = fcntl.ioctl(fd, FS_IOC_GETVERSION, b"\0" * 8)
    finally:
        os.close(fd)
    return "o%d-%d-0" % (os.stat(path).st_ino, struct.unpack("<q", buf)[0])


# ------------------------------------------------------------ the cases
# Each: (name, where it comes from, what it exercises, setup, change, again)

def inv3_setup(d):
    dirs(d, "a", "a/b", "a/b/c")
    put(d, "a/b/c/file", 100)


def inv3_change(d):  # a/b/c -> c/b/a: every parent becomes its child's child
    mv(d, "a/b/c", "c")
    mv(d, "a/b", "c/b")
    mv(d, "a", "c/b/a")


def childname_setup(d):
    dirs(d, "x", "x/y")
    put(d, "x/y/f", 10)


def childname_change(d):  # x/y -> y/x: x takes its child's name, the child its
    mv(d, "x/y", "tmp")
    mv(d, "x", "y")
    mv(d, "tmp", "y/x")


def lowchild_setup(d):  # a child with a lower inode number than its parent
    dirs(d, "d", "a", "a/b", "e", "f", "f/g")
    mv(d, "d", "a/b/d")
    mv(d, "e", "f/g/e")


def lowchild_change(d):  # both renamed in place, neither moved
    mv(d, "a/b/d", "a/b/y")
    mv(d, "a/b", "a/x")
    mv(d, "f/g/e", "f/g/z")
    mv(d, "f", "w")


def dirfile_setup(d):
    put(d, "a", 50)
    dirs(d, "testdir")
    mv(d, "a", "testdir/a")
    put(d, "b", 60)


def dirfile_change(d):  # a file takes the name of the directory it was in
    mv(d, "testdir", "testdir_2")
    mv(d, "b", "b2")
    mv(d, "testdir_2/a", "testdir")
    ln(d, "testdir", "b")
    put(d, "testdir_2/a", 70, ":new")


def rmdir_file_setup(d):
    dirs(d, "n")
    put(d, "n/x", 10)


def rmdir_file_change(d):  # a directory deleted, a file made with its name
    rm(d, "n/x")
    os.rmdir(os.path.join(d, "n"))
    put(d, "n", 20, ":file")


def file_dir_setup(d):
    put(d, "n", 30)


def file_dir_change(d):  # a file deleted, a directory made with its name
    rm(d, "n")
    dirs(d, "n")
    put(d, "n/inside", 40)


def early_setup(d):
    dirs(d, "a", "b", "c", "d", "e", "f")
    put(d, "a/file", 10)
    put(d, "e/file2", 10)


def early_change(d):  # a moved below c, renamed first; b takes a's old name
    mv(d, "c", "x")
    mv(d, "a", "x/y")
    mv(d, "b", "a")
    mv(d, "f", "z")
    mv(d, "d", "z/y")
    mv(d, "e", "d")


def newparent_setup(d):
    dirs(d, "X", "X/src", "Z", "Z/Z2")


def newparent_change(d):  # X renamed Y and moved below a new directory named X
    mv(d, "X", "Y")
    dirs(d, "X")
    mv(d, "Y", "X/Y")
    mv(d, "Z", "Zt")
    dirs(d, "Z")
    mv(d, "Zt/Z2", "Z/Z2")
    mv(d, "Zt", "Z/Z2/x")


def rmdir_out_setup(d):
    dirs(d, "a", "tmp", "del", "a/c", "x")
    mv(d, "tmp", "del/tmp")
    mv(d, "x", "del/x")


def rmdir_out_change(d):  # del removed once its children moved out
    mv(d, "a/c", "c")
    mv(d, "del/tmp", "c/tmp")
    mv(d, "del/x", "a/x")
    os.rmdir(os.path.join(d, "del"))


def rmdir_order_setup(d):
    dirs(d, "a", "a/b", "a/b/c", "a/b/c/0", "a/b/c/1", "a/b/c/x", "a/b/c/x2", "a/b/y",
         "a/b/z", "a/b/d1", "a/b/d1/d2", "a/b/d1/d2/d3", "a/b/d4")
    put(d, "a/b/c/foo.txt", 10)


def rmdir_order_change(d):  # children spread out, then their directories go
    mv(d, "a/b/y", "a/b/YY")
    mv(d, "a/b/c/x", "a/b/YY/x")
    mv(d, "a/b/c/0", "a/b/YY/00")
    mv(d, "a/b/z", "a/z")
    mv(d, "a/b/c/x2", "a/z/X_2")
    mv(d, "a/b/c/1", "a/z/X_2/1")
    rm(d, "a/b/c/foo.txt")
    os.rmdir(os.path.join(d, "a/b/c"))
    mv(d, "a/b/d4", "a/d44")
    mv(d, "a/b/d1/d2", "a/d44/d2")
    os.rmdir(os.path.join(d, "a/b/d1"))


def delayed_setup(d):
    dirs(d, "a", "a/b", "a/b/c", "a/b/c/d", "a/b/c/d/e", "a/b/c/f")
    put(d, "a/b/c/d/e/file.txt", 100)


def delayed_change(d):  # moved directories whose owner, mode, times change too
    mv(d, "a/b/c", "a/b/c2")
    mv(d, "a/b/c2/d", "a/b/c2/d2")
    mv(d, "a/b/c2/f", "a/b/f2")
    mv(d, "a/b/c2/d2/e", "a/b/f2/e2")
    mv(d, "a/b/f2/e2/file.txt", "a/b/f2/e2/file2.txt")
    os.chmod(os.path.join(d, "a/b/f2/e2"), 0o700)
    os.chown(os.path.join(d, "a/b/f2/e2"), 42, 43)
    os.chmod(os.path.join(d, "a/b/f2/e2/file2.txt"), 0o600)
    os.utime(os.path.join(d, "a/b/c2/d2"), (1000000, 2000000))


def renamed_over_setup(d):
    for n in ("f1", "f2", "f3"):
        put(d, n, 20, n)


def renamed_over_change(d):  # each file takes the next one's name; a link to one
    mv(d, "f3", "f4")
    mv(d, "f2", "f3")
    ln(d, "f3", "f5")
    mv(d, "f1", "f2")


def ancestor_name_setup(d):
    dirs(d, "dir1", "dir1/dir2")
    put(d, "dir1/dir2/file1", 10)
    put(d, "f22", 10)
    put(d, "dir1/dir2/file3", 10)
    dirs(d, "dir1/dir3", "dir1/dir3/dir4")
    mv(d, "f22", "dir1/dir3/file22")


def ancestor_name_change(d):  # a file takes the name of its former ancestor
    mv(d, "dir1/dir3", "dir1/file3")
    mv(d, "dir1/file3/file22", "dir1/dir3")
    mv(d, "dir1/dir2/file3", "dir1/file3/dir4/file33")
    mv(d, "dir1/dir2/file1", "dir1/file3/dir4/file11")


def link_moved_setup(d):
    dirs(d, "dir1", "dir1/dir2", "dir1/dir2/dir3", "dir5")
    put(d, "dir1/dir2/dir3/file1", 10)
    dirs(d, "dir1/dir2/dir3/dir4")


def link_moved_change(d):  # a file into a moved dir's old name, linked into it
    dirs(d, "dir1/dir6")
    mv(d, "dir1/dir2/dir3/dir4", "dir1/dir6/dir44")
    mv(d, "dir5", "dir1/dir6/dir44/dir55")
    mv(d, "dir1/dir2/dir3/file1", "dir1/dir2/dir3/dir4")
    ln(d, "dir1/dir2/dir3/dir4", "dir1/dir6/dir44/file11")


def links_taken_setup(d):
    dirs(d, "a")
    put(d, "d_f1", 10)
    dirs(d, "a/b", "a/b/c")
    put(d, "a/b/f2", 10)
    ln(d, "a/b/f2", "a/f2l1")
    dirs(d, "d")
    mv(d, "d_f1", "d/f1_2")
    ln(d, "d/f1_2", "d/f1l1_2")
    ln(d, "a/b/f2", "d/f2l2")


def links_taken_change(d):  # a hard link's path taken by a new directory
    rm(d, "a/f2l1")
    dirs(d, "a/f2l1")
    mv(d, "a/b", "a/f2l1/b2")
    mv(d, "d", "a/f2l1/b2/c/d3")
    mv(d, "a/f2l1/b2/c/d3/f2l2", "a/f2l1/b2/c/d3/f2l2_2")


def two_links_setup(d):
    put(d, "f1", 10, "f1")
    put(d, "f2", 20, "f2")
    dirs(d, "d1", "d1/d2")


def two_links_change(d):  # a file's two names swapped with two nested dirs' names
    ln(d, "f2", "f2_link")
    mv(d, "f1", "d1/d2/f1")
    mv(d, "d1", "tmp")
    mv(d, "f2", "d1")
    mv(d, "tmp", "f2")
    mv(d, "f2/d2", "f2/f2_link")
    mv(d, "f2_link", "f2/d2")


def link_dir_name_setup(d):
    for n in ("file1", "file2", "file3"):
        put(d, n, 10, n)
    dirs(d, "A")
    ln(d, "file3", "A/hard_link")


def link_dir_name_change(d):  # a file gets a dir's old path and a link in it
    mv(d, "file1", "A/file1")
    mv(d, "A/hard_link", "tmp")
    mv(d, "file2", "A/hard_link")
    mv(d, "A", "B")
    ln(d, "B/hard_link", "A")


def link_over_setup(d):
    put(d, "a", 10, "x")
    ln(d, "a", "b")
    put(d, "c", 10, "y")


def link_over_change(d):  # another file renamed over one of two names
    mv(d, "c", "a")


def swap_roots_setup(d):
    dirs(d, "n1", "n1/n2", "n1/n2/p1", "n1/n2/p1/p2", "n4", "p1", "p1/p2")
    put(d, "p1/p2/f", 10)


def swap_roots_change(d):  # two subtrees p1/p2 swap their roots
    mv(d, "n1/n2/p1", "t")
    mv(d, "p1", "n1/n2/p1")
    mv(d, "t", "p1")
    mv(d, "n1/n2/p1/p2", "t2")
    mv(d, "p1/p2", "n1/n2/p1/p2")
    mv(d, "t2", "p1/p2")


def top_orphan_setup(d):  # at the top: a file and a dir with orphan names
    dirs(d, "top-a", "top-b")
    put(d, "top-a/in-a", 10)
    put(d, "top-b/in-b", 10)
    put(d, orphan_name(os.path.join(d, "top-a")), 5, ":decoy")
    os.mkdir(os.path.join(d, orphan_name(os.path.join(d, "top-b"))))


def top_orphan_change(d):  # top-a and top-b swap: each goes through its orphan name
    mv(d, "top-a", "top-t")
    mv(d, "top-b", "top-a")
    mv(d, "top-t", "top-b")


def top_orphan_new_setup(d):
    dirs(d, "top-c")


def top_orphan_new_change(d):  # orphan names taken by names new in the sent snapshot
    dirs(d, "top-new")
    put(d, orphan_name(os.path.join(d, "top-new")), 5, ":decoy-new")
    dirs(d, orphan_name(os.path.join(d, "top-c")))
    mv(d, "top-c", "top-c2")


def top_swap_setup(d):
    put(d, "top-f", 10)
    dirs(d, "top-d")
    put(d, "top-d/x", 10)


def top_swap_change(d):  # a file and a directory swap names at the top
    mv(d, "top-f", "top-t")
    mv(d, "top-d", "top-f")
    mv(d, "top-t", "top-d")


DEEP = ["%02d" % i + "d" * 148 for i in range(12)]  # 12 levels, some 1,800 bytes


def deep_setup(d):
    p = d
    for n in DEEP:
        p = os.path.join(p, n)
        os.mkdir(p)
    put(p, "bottom", 5000)


def deep_change(d):  # a 1,800-byte path renamed at the top and near the bottom
    mv(d, DEEP[0], "r" * 200)
    bottom = os.path.join(d, "r" * 200, *DEEP[1:])
    write_at(bottom, "bottom", 100, b"changed")
    mv(os.path.dirname(bottom), DEEP[-1], "x" * 250)


def nested4_setup(d):
    dirs(d, "a", "a/b", "a/b/c", "a/b/c/d")
    put(d, "a/b/c/d/f", 300)


def nested4_change(d):  # four levels renamed, one also moved up
    mv(d, "a", "A")
    mv(d, "A/b", "A/B")
    mv(d, "A/B/c", "A/B/C")
    mv(d, "A/B/C/d", "A/D")
    write_at(d, "A/D/f", 0, b"x")


SHUFFLE_DIRS = 30


def shuffle_setup(d):  # 30 directories, each below an earlier one, a file in each
    rng = random.Random(29)
    paths = [""]
    for i in range(SHUFFLE_DIRS):
        p = os.path.join(rng.choice(paths), "n%02d" % i)
        os.mkdir(os.path.join(d, p))
        put(d, os.path.join(p, "f"), 10, p)
        paths.append(p)


def shuffle_dirs(d, seed, moves):
    """@moves directories moved below others (never their own descendants)
    under new names: ancestors become descendants many times over."""
    rng = random.Random(seed)
    for k in range(moves):
        found = []
        for root, subdirs, _ in os.walk(d):
            found += [os.path.relpath(os.path.join(root, s), d) for s in subdirs]
        src = rng.choice(found)
        dsts = [""] + [p for p in found if p != src and not p.startswith(src + "/")]
        dst = os.path.join(rng.choice(dsts), "m%02d-%d" % (k, seed))
        mv(d, src, dst)


def shuffle_change(d):
    shuffle_dirs(d, 1, 40)


def shuffle_again(d):
    shuffle_dirs(d, 2, 40)


def subvol_setup(d):
    dirs(d, "X")
    put(d, "X/f", 10)
    sh("btrfs", "subvolume", "create", os.path.join(d, "S1"))
    put(d, "S1/in", 10)


def subvol_change(d):  # a dir replaced by a subvolume, a subvolume by a dir
    rm(d, "X/f")
    os.rmdir(os.path.join(d, "X"))
    sh("btrfs", "subvolume", "create", os.path.join(d, "X"))
    sh("btrfs", "subvolume", "delete", os.path.join(d, "S1"))
    dirs(d, "S1")
    put(d, "S1/g", 10)


def many_links_setup(d):
    dirs(d, *("d%d" % i for i in range(5)))
    put(d, "f", 3000)
    for i in range(30):
        ln(d, "f", "d%d/link-%02d" % (i % 5, i))


def many_links_change(d):  # one of 31 names removed, one renamed, one added
    rm(d, "d2/link-07")
    mv(d, "d3/link-13", "d4/link-13-renamed")
    dirs(d, "d5")
    ln(d, "f", "d5/link-new")


def extref_setup(d):  # names past what one inode ref item holds: extended refs
    dirs(d, "l")
    put(d, "keep", 100)
    for i in range(300):
        ln(d, "keep", "l/%04d-%s" % (i, "n" * 100))


def extref_change(d):  # every link removed, the last 100 made again
    for i in range(300):
        rm(d, "l/%04d-%s" % (i, "n" * 100))
    for i in range(200, 300):
        ln(d, "keep", "l/%04d-%s" % (i, "n" * 100))


def extref_again(d):  # the directory holding the links removed
    for i in range(200, 300):
        rm(d, "l/%04d-%s" % (i, "n" * 100))
    os.rmdir(os.path.join(d, "l"))


def links_modified_setup(d):  # the first ref (dir z, the lower number) is not the first path
    dirs(d, "z", "a")
    put(d, "z/f", 3000)
    ln(d, "z/f", "a/f")


def links_modified_change(d):  # both names kept, the bytes changed
    write_at(d, "a/f", 0, b"changed")


def rmdir_links_setup(d):
    dirs(d, "dd")
    put(d, "dd/f1", 100)
    ln(d, "dd/f1", "dd/f2")
    ln(d, "dd/f1", "dd/f3")


def rmdir_links_change(d):  # a directory with three links to one file removed
    mv(d, "dd/f1", "moved")
    rm(d, "dd/f2", "dd/f3")
    os.rmdir(os.path.join(d, "dd"))


def over_setup(d):
    put(d, "a", 100, "a")
    put(d, "b", 200, "b")
    dirs(d, "x", "y")


def over_change(d):  # rename over an existing file, and over an empty dir
    mv(d, "a", "b")
    mv(d, "x", "y")


def reuse_file_setup(d):
    put(d, "file", 65536)


def reuse_file_delete(d):
    rm(d, "file")


def reuse_file_create(d):  # same name, same inode number, a new generation
    put(d, "file", 65536, ":new")


def reuse_top_setup(d):
    dirs(d, "top-a1", "top-a2")


def reuse_top_delete(d):
    os.rmdir(os.path.join(d, "top-a1"))
    os.rmdir(os.path.join(d, "top-a2"))


def reuse_top_create(d):  # at the top: top-a2 is now a file with top-a1's number
    put(d, "top-a2", 10)


def reuse_parent_setup(d):
    dirs(d, "dir257", "dir258", "dir259")
    mv(d, "dir257", "dir258/dir257")


def reuse_parent_delete(d):
    mv(d, "dir258/dir257", "dir257")
    os.rmdir(os.path.join(d, "dir258"))
    os.rmdir(os.path.join(d, "dir259"))


def reuse_parent_create(d):  # new inodes with the numbers of the old parent
    put(d, "file258", 10)
    dirs(d, "new_dir259")
    mv(d, "dir257", "new_dir259/dir257")


def clone_self_setup(d):
    put(d, "f", 256 << 10)


def clone_self_change(d):  # extents shared within one file, at lower offsets too
    clone(d, "f", 0, "f", 128 << 10, 64 << 10)
    clone(d, "f", 192 << 10, "f", 4096, 8192)


def clone_partial_setup(d):
    put(d, "src", 256 << 10)
    put(d, "dst", 64 << 10)


def clone_partial_change(d):  # parts of one extent in two files, most of it overwritten
    clone(d, "src", 64 << 10, "dst", 8192, 32 << 10)
    clone(d, "src", 200 << 10, "dst", 48 << 10, 8192)
    write_at(d, "src", 32 << 10, content("src:over", 160 << 10))


def clone_tail_setup(d):
    put(d, "src", 10000)
    put(d, "dst", 8192)


def clone_tail_change(d):  # a clone ending at an unaligned size, as a copy
    sh("cp", "--reflink=always", os.path.join(d, "src"), os.path.join(d, "copy"))
    os.truncate(os.path.join(d, "dst"), 5000)


def clone_eof_setup(d):  # f's last 607 bytes share an extent that g holds in its middle
    put(d, "g", 64 << 10)
    put(d, "f", 0, data=b"")
    clone(d, "g", 16 << 10, "f", 0, 4096)
    os.truncate(os.path.join(d, "f"), 607)


def clone_eof_change(d):  # a new file holds that extent's first block whole
    put(d, "h", 0, data=b"")
    clone(d, "g", 16 << 10, "h", 0, 4096)
    write_at(d, "g", 0, content("g:over", 64 << 10))


def data_mix(d, seed, ops):
    """@ops writes, truncates, punched holes, preallocations, clones and
    xattrs on four files, drawn from @seed: extents split, shared and cut
    at unaligned ends in ways no list of cases foresees."""
    rng = random.Random(seed)
    files = ["f%d" % i for i in range(4)]
    for f in files:
        if not os.path.exists(os.path.join(d, f)):
            put(d, f, 0, data=b"")
    for k in range(ops):
        f = rng.choice(files)
        p = os.path.join(d, f)
        op = rng.randrange(7)
        try:
            if op == 0:
                n = rng.choice([10, 4096, 3 * 4096, 40 * 4096])
                write_at(d, f, rng.randrange(64) * 4096 + rng.choice([0, 0, 100]),
                         content("mix%d:%d" % (seed, k), n) if rng.random() < .5 else b"z" * n)
            elif op == 1:
                os.truncate(p, rng.randrange(64 * 4096))
            elif op in (2, 3):
                keep = ["-p"] if op == 2 else (["-n"] if rng.random() < .5 else [])
                sh("fallocate", *keep, "-o", str(rng.randrange(80) * 4096), "-l",
                   str(rng.randrange(1, 20) * 4096), p)
            elif op in (4, 5):
                g = rng.choice(files)
                gs = os.path.getsize(os.path.join(d, g))
                so = rng.randrange(max(gs // 4096, 1)) * 4096
                n = gs - so if rng.random() < .3 else rng.randrange(1, 17) * 4096
                do = rng.randrange(64) * 4096
                if 0 < n and so + n <= gs and not (g == f and abs(do - so) < n):
                    clone(d, g, so, f, do, n)
            else:
                os.setxattr(p, "user.k%d" % rng.randrange(3), content("x%d" % k, 40))
        except (OSError, subprocess.CalledProcessError):
            pass  # a clone the kernel refuses (unaligned, past EOF): drawn again next time


def data_mix_setup(d):
    data_mix(d, 1003, 25)


def data_mix_change(d):
    data_mix(d, 1004, 25)


def data_mix_again(d):
    data_mix(d, 1005, 25)


def trunc_extend_setup(d):
    put(d, "f", 200000)


def trunc_extend_change(d):  # truncated, then extended: a hole at the end
    os.truncate(os.path.join(d, "f"), 50000)
    os.truncate(os.path.join(d, "f"), 300000)


def trunc_extend_again(d):
    write_at(d, "f", 400000, b"end")


def prealloc_setup(d):
    put(d, "f", 65536)
    sh("fallocate", "-n", "-o", "65536", "-l", str(1 << 20), os.path.join(d, "f"))
    put(d, "g", 16384)
    sh("fallocate", "-o", "16384", "-l", str(256 << 10), os.path.join(d, "g"))


def prealloc_change(d):  # holes punched into preallocated ranges past and before EOF
    sh("fallocate", "-p", "-o", str(256 << 10), "-l", str(128 << 10), os.path.join(d, "f"))
    sh("fallocate", "-p", "-o", "8192", "-l", str(64 << 10), os.path.join(d, "g"))


def prealloc_again(d):  # a hole from inside the data up to EOF and past it
    sh("fallocate", "-p", "-o", "32768", "-l", str(2 << 20), os.path.join(d, "f"))


def sparse_setup(d):
    put(d, "f", 4096)
    os.truncate(os.path.join(d, "f"), 1 << 20)


def sparse_change(d):  # a new extent between the last one and EOF
    write_at(d, "f", 512 << 10, content("sparse", 4096))


def inline_setup(d):
    put(d, "f", 100)
    put(d, "g", 0, data=b"")


def inline_change(d):  # inline -> regular; empty -> inline
    with open(os.path.join(d, "f"), "ab") as f:
        f.write(content("inline:more", 10000))
    put(d, "g", 500, ":g")


def inline_again(d):  # regular -> inline again (rewritten small); inline -> regular
    put(d, "f", 50, ":small")
    with open(os.path.join(d, "g"), "ab") as f:
        f.write(content("inline:g", 9000))


def empty_setup(d):
    put(d, "e1", 0, data=b"")
    put(d, "e2", 3000)
    put(d, "e3", 0, data=b"")


def empty_change(d):  # empty -> data, data -> empty, an empty file renamed
    put(d, "e1", 2000, ":e1")
    os.truncate(os.path.join(d, "e2"), 0)
    mv(d, "e3", "e3-renamed")


def special_setup(d):
    os.mkfifo(os.path.join(d, "fifo"))
    os.symlink("target-one", os.path.join(d, "sym"))
    os.mknod(os.path.join(d, "chr"), 0o20600, os.makedev(1, 5))


def special_change(d):  # each name taken over by another kind of inode
    rm(d, "fifo", "sym", "chr")
    put(d, "fifo", 10, ":regular")
    os.symlink("target-two-longer", os.path.join(d, "sym"))
    os.mkfifo(os.path.join(d, "chr"))


def xattr_setup(d):
    put(d, "f", 10)
    dirs(d, "dir")
    for k in ("user.a", "user.b", "trusted.t"):
        os.setxattr(os.path.join(d, "dir"), k, b"v-" + k.encode())
    os.setxattr(os.path.join(d, "f"), "user.keep", b"kept")


def xattr_change(d):  # every xattr of a dir removed; a 12,000-byte value set
    for k in ("user.a", "user.b", "trusted.t"):
        os.removexattr(os.path.join(d, "dir"), k)
    os.setxattr(os.path.join(d, "f"), "user.big", content("big", 12000))


def compressed_setup(d):
    sh("btrfs", "property", "set", d, "compression", "zstd")
    put(d, "c", 0, data=b"compressible text line\n" * 12000)
    put(d, "other", 0, data=b"other text\n" * 100)


def compressed_change(d):  # compressed extents referenced at a nonzero offset, cloned
    write_at(d, "c", 40960, b"Z" * 8192)
    clone(d, "c", 131072, "other", 0, 65536)


CASES = [
    ("inv3", "btrfs/030", "parents become children across three levels",
     inv3_setup, inv3_change, None),
    ("childname", "issue 29", "a directory renamed to its child's name, the child below it",
     childname_setup, childname_change, None),
    ("lowchild", "btrfs/039", "a child with a lower inode number than its parent, both renamed",
     lowchild_setup, lowchild_change, None),
    ("dirfile", "btrfs/221", "a file takes the name of the directory it was in, plus a link",
     dirfile_setup, dirfile_change, None),
    ("rmdir-file", "issue 29", "a directory deleted, a file created with its name",
     rmdir_file_setup, rmdir_file_change, None),
    ("file-dir", "issue 29", "a file deleted, a directory created with its name",
     file_dir_setup, file_dir_change, None),
    ("early", "btrfs/083", "a rename that must wait for another; a name freed by it taken",
     early_setup, early_change, None),
    ("newparent", "btrfs/077", "X renamed Y and moved below a new directory named X",
     newparent_setup, newparent_change, None),
    ("rmdir-out", "btrfs/129", "rmdir of a directory only after its children moved out",
     rmdir_out_setup, rmdir_out_change, None),
    ("rmdir-order", "btrfs/043", "nested directories spread out, their parents removed",
     rmdir_order_setup, rmdir_order_change, None),
    ("delayed", "btrfs/044", "chmod, chown and utimes of directories whose moves wait",
     delayed_setup, delayed_change, None),
    ("renamed-over", "btrfs/144", "names shifted along three files, a link to one",
     renamed_over_setup, renamed_over_change, None),
    ("ancestor-name", "btrfs/145", "a file takes the name of its former ancestor",
     ancestor_name_setup, ancestor_name_change, None),
    ("link-moved", "btrfs/147", "a file renamed to a moved dir's name, linked into it",
     link_moved_setup, link_moved_change, None),
    ("links-taken", "btrfs/155", "a hard link's path taken by a new directory",
     links_taken_setup, links_taken_change, None),
    ("two-links", "btrfs/222", "a file's two names swapped with a dir's and its child's",
     two_links_setup, two_links_change, None),
    ("link-dir-name", "btrfs/241", "a file takes a dir's old path, another its entry",
     link_dir_name_setup, link_dir_name_change, None),
    ("link-over", "issue 29", "a file renamed over one of another file's two names",
     link_over_setup, link_over_change, None),
    ("swap-roots", "btrfs/084", "two subtrees with the same path swap their roots",
     swap_roots_setup, swap_roots_change, None),
    ("top-orphan", "send.c", "a file and a dir named as orphans at the top; dirs swapped",
     top_orphan_setup, top_orphan_change, None),
    ("top-orphan-new", "send.c", "orphan names taken by a file and a dir new at the top",
     top_orphan_new_setup, top_orphan_new_change, None),
    ("shuffle", "btrfs/087, 092, 178", "30 dirs, 40 random moves (no loops) per step",
     shuffle_setup, shuffle_change, shuffle_again),
    ("top-swap", "issue 29", "a file and a directory swap names at the top",
     top_swap_setup, top_swap_change, None),
    ("deep", "btrfs/051", "paths of 1,800 bytes renamed", deep_setup, deep_change, None),
    ("nested4", "btrfs/045", "four nested levels renamed, one moved up",
     nested4_setup, nested4_change, None),
    ("subvol", "btrfs/054", "a dir replaced by a nested subvolume, and the reverse",
     subvol_setup, subvol_change, None),
    ("many-links", "issue 29", "31 names of one inode in 6 dirs: one removed, one moved",
     many_links_setup, many_links_change, None),
    ("extref", "btrfs/272, 338", "300 links (extended refs) removed, 100 made again, dir gone",
     extref_setup, extref_change, extref_again),
    ("links-modified", "issue 29", "a file with two names kept changed: one row, first path",
     links_modified_setup, links_modified_change, None),
    ("rmdir-links", "btrfs/040", "a directory with three links to one file removed",
     rmdir_links_setup, rmdir_links_change, None),
    ("over", "issue 29", "rename over an existing file and over an empty directory",
     over_setup, over_change, None),
    ("clone-self", "btrfs/200, 097", "extents shared within one file, to lower offsets too",
     clone_self_setup, clone_self_change, None),
    ("clone-partial", "btrfs/229, 283", "parts of one extent in two files, most overwritten",
     clone_partial_setup, clone_partial_change, None),
    ("clone-tail", "btrfs/319", "a reflinked copy ending at an unaligned size; a file shrunk",
     clone_tail_setup, clone_tail_change, None),
    ("clone-eof", "btrfs/189", "a file's unaligned tail shares the middle of another's extent",
     clone_eof_setup, clone_eof_change, None),
    ("data-mix", "issue 29", "75 random writes, truncates, holes, preallocs, clones",
     data_mix_setup, data_mix_change, data_mix_again),
    ("trunc-extend", "btrfs/137", "truncated then extended: a hole at the end, then data",
     trunc_extend_setup, trunc_extend_change, trunc_extend_again),
    ("prealloc", "btrfs/169, 188", "holes punched in preallocated extents, past EOF",
     prealloc_setup, prealloc_change, prealloc_again),
    ("sparse", "btrfs/303, 046", "a new extent between a sparse file's last one and EOF",
     sparse_setup, sparse_change, None),
    ("inline", "issue 29", "inline -> regular -> inline, empty -> inline -> regular",
     inline_setup, inline_change, inline_again),
    ("empty", "issue 29", "empty files filled, emptied, renamed", empty_setup, empty_change,
     None),
    ("special", "issue 29", "fifo -> file, symlink -> symlink, chardev -> fifo by name",
     special_setup, special_change, None),
    ("xattr", "btrfs/053", "all xattrs of a dir removed; a 12,000-byte value",
     xattr_setup, xattr_change, None),
    ("compressed", "btrfs/038, 094", "compressed extents at a nonzero offset, cloned",
     compressed_setup, compressed_change, None),
]

# Inode numbers reused: (name, source, what, setup, delete, create). Their
# setups run last (their inodes are the highest), their deletes before a
# remount, their creates right after it, before any other change.
REUSE = [
    ("reuse-parent", "btrfs/134, 227", "a dir moved out of its parent; new inodes get the "
     "parent's number", reuse_parent_setup, reuse_parent_delete, reuse_parent_create),
    ("reuse-file", "btrfs/105", "a file replaced by a new one: same name, same number",
     reuse_file_setup, reuse_file_delete, reuse_file_create),
    ("reuse-top", "btrfs/133", "at the top: a new file with a deleted dir's number",
     reuse_top_setup, reuse_top_delete, reuse_top_create),
]
# c1 path -> the c0 path whose inode number it takes
REUSED = {"reuse-parent/file258": "reuse-parent/dir258",
          "reuse-parent/new_dir259": "reuse-parent/dir259",
          "reuse-file/file": "reuse-file/file", "top-a2": "top-a1"}

AT_TOP = {"top-orphan", "top-orphan-new", "top-swap", "reuse-top"}


def where(data, name):
    """The case's directory (made if new), or the subvolume's top."""
    if name in AT_TOP:
        return data
    d = os.path.join(data, name)
    os.makedirs(d, exist_ok=True)
    return d


def remount(img, mnt):
    sh("sync")
    sh("umount", mnt)
    sh("mount", "-o", "loop", img, mnt)


def make(img, mnt):
    data = os.path.join(mnt, "data")
    sh("btrfs", "subvolume", "create", data)
    for name, _, _, setup, _, _ in CASES:
        setup(where(data, name))
    for name in (r[0] for r in REUSE):  # the inodes a reuse case frees come last
        where(data, name)
    for name, _, _, setup, _, _ in REUSE:
        setup(where(data, name))
    sh("sync")
    sh("btrfs", "subvolume", "snapshot", "-r", data, os.path.join(mnt, "c0"))
    for name, _, _, _, delete, _ in REUSE:
        delete(where(data, name))
    remount(img, mnt)
    for name, _, _, _, _, create in REUSE:
        create(where(data, name))
    for name, _, _, _, change, _ in CASES:
        change(where(data, name))
    sh("sync")
    sh("btrfs", "subvolume", "snapshot", "-r", data, os.path.join(mnt, "c1"))
    for name, _, _, _, _, again in CASES:
        if again:
            again(where(data, name))
    sh("sync")
    sh("btrfs", "subvolume", "snapshot", "-r", data, os.path.join(mnt, "c2"))
    return subvol_ids(mnt)


def check_reuse(out):
    """Each reuse case's new inode has an old number with a new generation."""
    views = {}
    for s in ("c0", "c1"):
        with open(os.path.join(out, s + ".jsonl")) as f:
            views[s] = {r["path"]: r for r in map(json.loads, f)}
    for path, was in REUSED.items():
        a, b = views["c0"][was], views["c1"][path]
        if a["ino"] != b["ino"] or a["handle"] == b["handle"]:
            sys.exit("%s: inode %d, not %s's number %d with a new generation"
                     % (path, b["ino"], was, a["ino"]))


def main():
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "sendcases"))
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp()
    img, mnt = os.path.join(tmp, "sendcases.img"), os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(256 << 20)
    sh("mkfs.btrfs", "-q", "-f", "-n", "16384", img)
    sh("mount", "-o", "loop", img, mnt)
    try:
        ids = make(img, mnt)
    finally:
        sh("umount", mnt)
    sh("mount", "-o", "ro,noatime,loop", img, mnt)
    try:
        for n in SNAPS:
            record(mnt, n, os.path.join(out, n + ".jsonl"))
    finally:
        sh("umount", mnt)
    check_reuse(out)
    for n in SNAPS:
        sh("zstd", "-q", "-19", "-f", "--rm", os.path.join(out, n + ".jsonl"))
    with open(os.path.join(out, "snapshots.json"), "w") as f:
        json.dump({n: ids[n] for n in ("data",) + SNAPS}, f, indent=1)
        f.write("\n")
    sh("zstd", "-q", "-19", "--long=27", "-f", img, "-o", os.path.join(out, "sendcases.img.zst"))
    os.unlink(img)
    os.rmdir(mnt)
    os.rmdir(tmp)
    print("wrote", out)


if __name__ == "__main__":
    sys.exit(main())
