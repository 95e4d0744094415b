#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tool_study.py: what real tools do under each inode-number scheme.

    tool_study.py [--btrfsimg PATH] [--snapshots N] [--markdown]

As root with loop devices and /dev/fuse. Builds a snapshot-heavy image with
mkfs.btrfs and the running kernel (a subvolume "data" of files, hard links
and symlinks with a nested subvolume, snapshotted --snapshots times with a
few changes before each), then runs tools that rely on (st_dev, st_ino) on

  * the kernel's own loop mount: today's numbers, one device per subvolume
    (the baseline), and
  * `btrfsimg mount --numbers SCHEME` for nfsd, nfsd-uniquifier and
    inumbits=N,numdevs=1 for N = 64, 56, 48, 40, 32 (one device),

and counts, per tool, the files it mistook for hard links of another file
(or for the same file) and the files it skipped (never listed, copied or
archived). The truth is the kernel's view: two paths are one file iff they
have the same (st_dev, st_ino) on the kernel's mount.

  find -samefile F   for every regular file F of "data": paths reported that
                     are not F's links (mistaken), F's links missing (skipped)
  find -inum N       the same with F's st_ino in that mount
  du -a              a file or directory not counted although no link of it
                     was (mistaken or skipped: du says nothing either way)
  tar c              hard-link entries pointing at another file (mistaken),
                     paths missing from the archive (skipped)
  rsync -aH -n       the same in rsync's itemized dry run
  cp -a              copies hard-linked to a copy of another file
                     (mistaken), paths not copied (skipped)
"""
import argparse
import collections
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

TOOLS = ["find -samefile", "find -inum", "du -a", "tar c", "rsync -aH -n", "cp -a"]
SCHEMES = ["nfsd", "nfsd-uniquifier"] + ["inumbits=%d,numdevs=1" % n for n in (64, 56, 48, 40, 32)]
T = 600  # seconds any one tool may take


def sh(*argv, **kw):
    return subprocess.run(argv, check=True, timeout=T, **kw)


def out(*argv):
    """stdout of a tool that may complain (find's loop warnings, du's)."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=T)
    return p.stdout.decode("utf-8", "surrogateescape")


# ------------------------------------------------------------ the image

def build(img, mnt, nsnaps):
    sh("truncate", "-s", "512M", img)
    sh("mkfs.btrfs", "-q", "-f", img, stdout=subprocess.DEVNULL)
    sh("mount", "-o", "loop", img, mnt)
    try:
        d = os.path.join(mnt, "data")
        sh("btrfs", "-q", "subvolume", "create", d)
        for i in range(3):
            os.mkdir(os.path.join(d, "d%d" % i))
            for j in range(20):
                with open(os.path.join(d, "d%d" % i, "f%02d" % j), "w") as f:
                    f.write("file %d/%d\n" % (i, j) * (j + 1))
        for j in range(10):  # ten files with a second name in another directory
            os.link(os.path.join(d, "d0", "f%02d" % j), os.path.join(d, "d1", "link%02d" % j))
        os.symlink("d0/f00", os.path.join(d, "sym"))
        sh("btrfs", "-q", "subvolume", "create", os.path.join(d, "nested"))
        for j in range(5):
            with open(os.path.join(d, "nested", "n%d" % j), "w") as f:
                f.write("nested %d\n" % j)
        os.mkdir(os.path.join(mnt, "snaps"))
        for s in range(nsnaps):
            # a little change before each snapshot: a new file, one gone,
            # one more hard link
            with open(os.path.join(d, "d2", "new%02d" % s), "w") as f:
                f.write("new %d\n" % s)
            os.unlink(os.path.join(d, "d2", "f%02d" % s))
            os.link(os.path.join(d, "d0", "f%02d" % (10 + s % 10)),
                    os.path.join(d, "d1", "extra%02d" % s))
            sh("btrfs", "-q", "subvolume", "snapshot", "-r", d,
               os.path.join(mnt, "snaps", "s%02d" % s), stdout=subprocess.DEVNULL)
    finally:
        sh("umount", mnt)


# ------------------------------------------------------------ the truth

def walk(root):
    """{relative path: lstat} of everything below root (root itself not)."""
    res = {}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            res[os.path.relpath(p, root)] = os.lstat(p)
    return res


class Truth:
    def __init__(self, kview):
        self.paths = set(kview)
        self.group = {}       # path -> frozenset of its names (non-directories)
        by = collections.defaultdict(set)
        for p, st in kview.items():
            if not stat.S_ISDIR(st.st_mode):
                by[(st.st_dev, st.st_ino)].add(p)
        for g in by.values():
            fg = frozenset(g)
            for p in g:
                self.group[p] = fg
        self.dirs = {p for p, st in kview.items() if stat.S_ISDIR(st.st_mode)}
        self.sample = sorted(p for p, st in kview.items()
                             if p.startswith("data/") and stat.S_ISREG(st.st_mode))

    def linked(self, a, b):
        return a == b or (a in self.group and b in self.group.get(a, ()))


# ------------------------------------------------------------ the tools

def rel(mnt, p):
    p = os.path.relpath(p, mnt)
    return p[2:] if p.startswith("./") else p


def t_find(mnt, truth, inum):
    wrong = skipped = 0
    for f in truth.sample:
        a = os.path.join(mnt, f)
        test = ["-inum", str(os.lstat(a).st_ino)] if inum else ["-samefile", a]
        got = {rel(mnt, x) for x in out("find", mnt, *test).splitlines() if x}
        want = truth.group[f]
        wrong += len(got - want)
        skipped += len(want - got)
    return wrong, skipped


def t_du(mnt, truth):
    listed = {rel(mnt, line.split("\t", 1)[1]) for line in out("du", "-a", mnt).splitlines()
              if "\t" in line}
    missing = 0
    for p in truth.paths:
        if p in listed:
            continue
        if p in truth.dirs or not any(q in listed for q in truth.group[p]):
            missing += 1
    return missing, None


def t_tar(mnt, truth):
    tv = subprocess.run("tar -C '%s' -cf - . | tar -tvf -" % mnt, shell=True, timeout=T,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
    wrong, seen = 0, set()
    for line in tv.decode("utf-8", "surrogateescape").splitlines():
        m = re.match(r"^(\S)\S+ +\S+ +\d+ +\S+ +\S+ +(.*?)(?: link to (.*)| -> .*)?$", line)
        if not m:
            continue
        p = rel(".", m[2])
        seen.add(p)
        if m[1] == "h" and not truth.linked(p, rel(".", m[3])):
            wrong += 1
    return wrong, len(truth.paths - seen)


def t_rsync(mnt, truth, work):
    dest = tempfile.mkdtemp(dir=work)
    text = out("rsync", "-aH", "-n", "--out-format=%n%L", mnt + "/", dest + "/")
    wrong, seen = 0, set()
    for line in text.splitlines():
        name, _, target = line.partition(" => ")
        name = name.split(" -> ")[0].rstrip("/")
        if not name or name == ".":
            continue
        seen.add(name)
        if target and not truth.linked(name, target):
            wrong += 1
    os.rmdir(dest)
    return wrong, len(truth.paths - seen)


def t_cp(mnt, truth, work):
    dest = os.path.join(tempfile.mkdtemp(dir=work), "copy")
    subprocess.run(["cp", "-a", mnt, dest], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=T)
    got = walk(dest)
    by = collections.defaultdict(set)
    for p, st in got.items():
        if not stat.S_ISDIR(st.st_mode):
            by[(st.st_dev, st.st_ino)].add(p)
    wrong = sum(1 for g in by.values() for p in g if not g <= truth.group.get(p, {p}))
    shutil.rmtree(os.path.dirname(dest))
    return wrong, len(truth.paths - set(got))


def run_tools(mnt, truth, work):
    return {"find -samefile": t_find(mnt, truth, False), "find -inum": t_find(mnt, truth, True),
            "du -a": t_du(mnt, truth), "tar c": t_tar(mnt, truth),
            "rsync -aH -n": t_rsync(mnt, truth, work), "cp -a": t_cp(mnt, truth, work)}


# ------------------------------------------------------------ main

def fuse_mount(cli, img, mnt, scheme):
    sh(cli, "mount", "-q", "--numbers", scheme, img, mnt)


def fuse_umount(mnt):
    sh("fusermount3", "-u", mnt)
    time.sleep(0.2)


def cell(v):
    wrong, skipped = v
    if skipped is None:
        return "%d" % wrong
    return "%d / %d" % (wrong, skipped)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--btrfsimg", default="build/tools/btrfsimg")
    ap.add_argument("--snapshots", type=int, default=10)
    ap.add_argument("--markdown", action="store_true", help="the README's table")
    a = ap.parse_args()
    cli = os.path.abspath(a.btrfsimg)
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("needs root, loop devices and /dev/fuse", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="tool-study.")
    img, mnt = os.path.join(work, "study.img"), os.path.join(work, "mnt")
    os.mkdir(mnt)
    rows, mounted = [], None
    try:
        build(img, mnt, a.snapshots)
        sh("mount", "-o", "loop,ro", img, mnt)
        mounted = "kernel"
        kview = walk(mnt)
        truth = Truth(kview)
        rows.append(("kernel mount (today: a device per subvolume)", run_tools(mnt, truth, work)))
        sh("umount", mnt)
        mounted = None
        for s in SCHEMES:
            fuse_mount(cli, img, mnt, s)
            mounted = "fuse"
            rows.append(("btrfsimg mount --numbers " + s, run_tools(mnt, truth, work)))
            fuse_umount(mnt)
            mounted = None
    finally:
        if mounted == "kernel":
            subprocess.run(["umount", mnt])
        elif mounted == "fuse":
            subprocess.run(["fusermount3", "-u", mnt])
        shutil.rmtree(work, ignore_errors=True)
    nfiles = len(truth.paths - truth.dirs)
    print("%d paths (%d files, %d directories), %d subvolumes and snapshots; %d files sampled "
          "for find" % (len(truth.paths), nfiles, len(truth.dirs), a.snapshots + 3,
                        len(truth.sample)))
    print("cells: files mistaken for hard links / files skipped (du: files not counted)")
    if a.markdown:
        print("| mount | " + " | ".join(TOOLS) + " |")
        print("|" + " --- |" * (len(TOOLS) + 1))
        for name, r in rows:
            print("| %s | %s |" % (name, " | ".join(cell(r[t]) for t in TOOLS)))
    else:
        for name, r in rows:
            print("%-48s %s" % (name, "  ".join("%s: %s" % (t, cell(r[t])) for t in TOOLS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
