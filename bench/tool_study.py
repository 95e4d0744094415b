#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tool_study.py: what real tools do under each inode-number scheme.

    tool_study.py [--btrfsimg PATH] [--files N] [--snapshots N] [--keep DIR]
                  [--markdown]

As root with loop devices and /dev/fuse. Builds with mkfs.btrfs and the
running kernel (sparse file, loop mount) an image large enough for the
inumbits schemes to collide, and cached in --keep DIR (default
/var/tmp/bi-bench):

  * the top level: a directory "snaps" and a directory "top" of 200 small
    files, every second one with a second name (top/fNNN.2);
  * a subvolume "data" (id 256) of --files empty files (default 70,000),
    84 to a directory, every eighth with a second name in its directory.
    84 a directory puts directory d0771 at objectid 0x10100: under
    inumbits=32 subvolume 256's overlay is 0x10000, so d0771 is presented
    as 256, the top level's root, and the data objectids from 0x10100 on
    as the top level's own objectids (257 "snaps", 258 "top", its files);
  * --snapshots read-only snapshots of "data" (default 4) in snaps/, each
    after a small change (a new file, one removed, one more hard link).

Then it runs tools that rely on (st_dev, st_ino) on

  * the kernel's own read-only loop mount: today's numbers, one device per
    subvolume (the baseline), and
  * `btrfsimg mount --numbers SCHEME` for nfsd, nfsd-uniquifier and
    inumbits=N,numdevs=1 for N = 64, 56, 48, 40, 32 (one device),

and counts the paths each tool mistook for a hard link of another file (or
for the same file) and the paths it skipped. The truth is the kernel's
mount: two paths are one file iff they have the same (st_dev, st_ino)
there.

  find -samefile F   one find run testing every sampled F at once (every
                     regular file of "top" and every 500th of "data"):
                     paths reported that are not names of F (mistaken),
                     names of F not reported (skipped)
  find -inum N       the same with F's st_ino in that mount
  du -s --inodes     inodes not counted (hard-link de-duplication and
                     loop detection; du names none of them)
  tar c              `tar -cvvf /dev/null`: hard-link entries to another
                     file (mistaken), paths not archived (skipped)
  rsync -aH -n       the same in rsync's itemized dry run into an empty
                     directory
  cp -a              into a tmpfs: copies hard-linked to a copy of
                     another file (mistaken), paths not copied (skipped)

Cross-checks, independent of the tools: `btrfsimg collisions --json
--examples 0` on the same image lists, per scheme, the numbers shared by
different inodes; a walk of each FUSE mount (lstat of every path, grouped
by st_ino) must find exactly those, and every path a tool mistook or
skipped must be (or lie below) an inode that collisions lists.
"""
import argparse
import collections
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

TOOLS = ["find -samefile", "find -inum", "du -s --inodes", "tar c", "rsync -aH -n", "cp -a"]
SCHEMES = ["nfsd", "nfsd-uniquifier"] + ["inumbits=%d,numdevs=1" % n for n in (64, 56, 48, 40, 32)]
T = 1200  # seconds any one tool may take
PER_DIR = 84  # files a directory of "data": d0771 at objectid 0x10100
SAMPLE_EVERY = 500  # every 500th regular file of "data" is a find sample


def sh(*argv, **kw):
    return subprocess.run(argv, check=True, timeout=T, **kw)


def out(*argv):
    """stdout of a tool that may complain (find's loop warnings, du's)."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=T)
    return p.stdout.decode("utf-8", "surrogateescape")


def touch(p, data=b""):
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
    if data:
        os.write(fd, data)
    os.close(fd)


# ------------------------------------------------------------ the image

def build(img, mnt, nfiles, nsnaps):
    """The image, made by the kernel (see the module's text)."""
    tmp = img + ".tmp"
    sh("truncate", "-s", "4G", tmp)
    sh("mkfs.btrfs", "-q", "-f", tmp, stdout=subprocess.DEVNULL)
    sh("mount", "-o", "loop,nobarrier", tmp, mnt)
    try:
        os.mkdir(os.path.join(mnt, "snaps"))
        top = os.path.join(mnt, "top")
        os.mkdir(top)
        for i in range(200):
            p = os.path.join(top, "f%03d" % i)
            touch(p, b"top %d\n" % i)
            if i % 2 == 0:
                os.link(p, p + ".2")
        d = os.path.join(mnt, "data")
        sh("btrfs", "-q", "subvolume", "create", d)
        made = 0
        ndirs = -(-nfiles // PER_DIR)
        for i in range(ndirs):
            dd = os.path.join(d, "d%04d" % i)
            os.mkdir(dd)
            for j in range(min(PER_DIR, nfiles - made)):
                p = os.path.join(dd, "f%02d" % j)
                touch(p)
                if j % 8 == 0:
                    os.link(p, p + ".2")
                made += 1
        if ndirs > 771:
            ino = os.lstat(os.path.join(d, "d0771")).st_ino
            if ino != 0x10100:
                raise SystemExit("data/d0771 got objectid %#x, not 0x10100" % ino)
        for s in range(nsnaps):
            touch(os.path.join(d, "d0000", "new%02d" % s), b"new %d\n" % s)
            os.unlink(os.path.join(d, "d0001", "f%02d" % (s + 1)))
            os.link(os.path.join(d, "d0002", "f%02d" % (s + 1)),
                    os.path.join(d, "d0002", "extra%02d" % s))
            sh("btrfs", "-q", "subvolume", "snapshot", "-r", d,
               os.path.join(mnt, "snaps", "s%d" % s), stdout=subprocess.DEVNULL)
    finally:
        sh("umount", mnt)
    os.rename(tmp, img)


# ------------------------------------------------------------ the truth

def walk(root):
    """{relative path: lstat} of everything below root ("" for root)."""
    res = {"": os.lstat(root)}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            res[os.path.relpath(p, root)] = os.lstat(p)
    return res


class Truth:
    def __init__(self, kview):
        self.paths = set(kview) - {""}
        self.ident = {p: (st.st_dev, st.st_ino) for p, st in kview.items()}
        self.inodes = len(set(self.ident.values()))
        self.group = {}       # path -> frozenset of its names (non-directories)
        by = collections.defaultdict(set)
        for p, st in kview.items():
            if not stat.S_ISDIR(st.st_mode):
                by[(st.st_dev, st.st_ino)].add(p)
        for g in by.values():
            fg = frozenset(g)
            for p in g:
                self.group[p] = fg
        self.dirs = {p for p, st in kview.items() if stat.S_ISDIR(st.st_mode)} - {""}
        regs = sorted(p for p, st in kview.items() if stat.S_ISREG(st.st_mode))
        data = [p for p in regs if p.startswith("data/")]
        self.sample = [p for p in regs if p.startswith("top/")] + data[::SAMPLE_EVERY]

    def linked(self, a, b):
        return a == b or (a in self.group and b in self.group.get(a, ()))


# ------------------------------------------------------------ the tools
# Each returns (mistaken paths, skipped paths), or for du (count, None).

def rel(mnt, p):
    p = os.path.relpath(p, mnt)
    return "" if p == "." else p[2:] if p.startswith("./") else p


def t_find(mnt, truth, inum):
    argv = ["find", mnt]
    for i, f in enumerate(truth.sample):
        a = os.path.join(mnt, f)
        test = ["-inum", str(os.lstat(a).st_ino)] if inum else ["-samefile", a]
        argv += ([","] if i else []) + ["("] + test + ["-printf", "%d\\t%%p\\n" % i, ")"]
    got = collections.defaultdict(set)
    for line in out(*argv).splitlines():
        i, _, p = line.partition("\t")
        got[int(i)].add(rel(mnt, p))
    wrong, skipped = [], []
    for i, f in enumerate(truth.sample):
        want = truth.group[f]
        wrong += sorted(got[i] - want)
        skipped += sorted(want - got[i])
    return wrong, skipped


def t_du(mnt, truth):
    text = out("du", "-s", "--inodes", mnt)
    return truth.inodes - int(text.split()[0]), None


def t_tar(mnt, truth):
    tv = subprocess.run(["tar", "-C", mnt, "-cvvf", "/dev/null", "."], timeout=T,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
    wrong, seen = [], set()
    for line in tv.decode("utf-8", "surrogateescape").splitlines():
        m = re.match(r"^(\S)\S+ +\S+ +\d+ +\S+ +\S+ +(.*?)(?: link to (.*)| -> .*)?$", line)
        if not m:
            continue
        p = rel(".", m[2].rstrip("/"))
        seen.add(p)
        if m[1] == "h" and not truth.linked(p, rel(".", m[3])):
            wrong.append(p)
    return wrong, sorted(truth.paths - seen)


def t_rsync(mnt, truth, work):
    dest = tempfile.mkdtemp(dir=work)
    text = out("rsync", "-aH", "-n", "--out-format=%n%L", mnt + "/", dest + "/")
    wrong, seen = [], set()
    for line in text.splitlines():
        name, _, target = line.partition(" => ")
        name = name.split(" -> ")[0].rstrip("/")
        if not name or name == ".":
            continue
        seen.add(name)
        if target and not truth.linked(name, target):
            wrong.append(name)
    os.rmdir(dest)
    return wrong, sorted(truth.paths - seen)


def t_cp(mnt, truth, scratch):
    dest = os.path.join(scratch, "copy")
    subprocess.run(["cp", "-a", mnt, dest], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=T)
    got = walk(dest)
    del got[""]
    by = collections.defaultdict(set)
    for p, st in got.items():
        if not stat.S_ISDIR(st.st_mode):
            by[(st.st_dev, st.st_ino)].add(p)
    wrong = sorted(p for g in by.values() for p in g if not g <= truth.group.get(p, {p}))
    shutil.rmtree(dest)
    return wrong, sorted(truth.paths - set(got))


def run_tools(mnt, truth, work, scratch):
    res, secs = {}, {}
    for name, fn in (("find -samefile", lambda: t_find(mnt, truth, False)),
                     ("find -inum", lambda: t_find(mnt, truth, True)),
                     ("du -s --inodes", lambda: t_du(mnt, truth)),
                     ("tar c", lambda: t_tar(mnt, truth)),
                     ("rsync -aH -n", lambda: t_rsync(mnt, truth, work)),
                     ("cp -a", lambda: t_cp(mnt, truth, scratch))):
        t0 = time.time()
        res[name] = fn()
        secs[name] = time.time() - t0
        print("  %s: %.1f s" % (name, secs[name]), file=sys.stderr, flush=True)
    return res, secs


# ------------------------------------------------------------ the cross-checks

def collisions(cli, img):
    """{scheme: (shared numbers, inodes, set of their paths)} from
    `btrfsimg collisions` (every group, every member)."""
    p = subprocess.run([cli, "collisions", "--json", "--examples", "0", img],
                       stdout=subprocess.PIPE, timeout=T, check=True)
    res = {}
    for line in p.stdout.decode("utf-8", "surrogateescape").splitlines():
        o = json.loads(line)
        if "scheme" in o:
            paths = {m["path"] for g in o["examples"] for m in g if m.get("path") is not None}
            res[o["scheme"]] = (o["groups"], o["inodes"], paths)
    return res


def seen_collisions(mnt, truth):
    """Numbers of the mount (one st_dev) shared by different kernel inodes:
    (shared numbers, inodes)."""
    by = collections.defaultdict(set)
    for p, st in walk(mnt).items():
        by[st.st_ino].add(truth.ident[p])
    shared = [g for g in by.values() if len(g) > 1]
    return len(shared), sum(len(g) for g in shared)


def explained(paths, truth, collided):
    """How many of @paths are an inode collisions lists, or lie below one
    (a directory a tool skipped as a loop)."""
    ids = {truth.ident[p] for p in collided if p in truth.ident}
    n = 0
    for p in paths:
        q = p
        while True:
            if truth.ident.get(q) in ids:
                n += 1
                break
            if not q:
                break
            q = os.path.dirname(q)
    return n


# ------------------------------------------------------------ main

def cell(v):
    wrong, skipped = v
    if skipped is None:
        return "%d" % wrong
    return "%d / %d" % (len(wrong), len(skipped))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--btrfsimg", default="build/tools/btrfsimg")
    ap.add_argument("--files", type=int, default=70000)
    ap.add_argument("--snapshots", type=int, default=4)
    ap.add_argument("--keep", default="/var/tmp/bi-bench")
    ap.add_argument("--markdown", action="store_true", help="the README's table")
    a = ap.parse_args()
    cli = os.path.abspath(a.btrfsimg)
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("needs root, loop devices and /dev/fuse", file=sys.stderr)
        return 2
    start = time.time()
    work = tempfile.mkdtemp(prefix="tool-study.")
    mnt, scratch = os.path.join(work, "mnt"), os.path.join(work, "scratch")
    os.mkdir(mnt)
    os.mkdir(scratch)
    os.makedirs(a.keep, exist_ok=True)
    img = os.path.join(a.keep, "tool-study-%d-%d.img" % (a.files, a.snapshots))
    rows, mounted, problems = [], [], []
    try:
        if not os.path.exists(img):
            build(img, mnt, a.files, a.snapshots)
        sh("mount", "-t", "tmpfs", "-o", "size=2G,nr_inodes=4M", "tool-study", scratch)
        mounted.append(("umount", scratch))
        coll = collisions(cli, img)
        sh("mount", "-o", "loop,ro", img, mnt)
        mounted.append(("umount", mnt))
        kview = walk(mnt)
        truth = Truth(kview)
        print("kernel mount: %d paths" % len(truth.paths), file=sys.stderr, flush=True)
        r, secs = run_tools(mnt, truth, work, scratch)
        rows.append(("kernel mount (today: a device per subvolume)", r, coll["numdevs=many"],
                     None, secs))
        sh("umount", mnt)
        mounted.pop()
        for s in SCHEMES:
            sh(cli, "mount", "-q", "--numbers", s, img, mnt)
            mounted.append(("fusermount3", mnt))
            t0 = time.time()
            seen = seen_collisions(mnt, truth)
            print("%s: walked in %.1f s" % (s, time.time() - t0), file=sys.stderr, flush=True)
            r, secs = run_tools(mnt, truth, work, scratch)
            rows.append(("btrfsimg mount --numbers " + s, r, coll[s], seen, secs))
            sh("fusermount3", "-u", mnt)
            mounted.pop()
            time.sleep(0.2)
            if seen != coll[s][:2]:
                problems.append("%s: the mount shows %d numbers shared by %d inodes, "
                                "collisions says %d by %d" % ((s,) + seen + coll[s][:2]))
            for t in TOOLS:
                wrong, skipped = r[t]
                if skipped is None:
                    if wrong and not coll[s][0]:
                        problems.append("%s: %s: %d not counted, and no collision"
                                        % (s, t, wrong))
                    continue
                both = wrong + skipped
                n = explained(both, truth, coll[s][2])
                if n != len(both):
                    problems.append("%s: %s: %d of %d paths mistaken or skipped are no "
                                    "collision (%r)" % (s, t, len(both) - n, len(both),
                                                        both[:3]))
    finally:
        for how, m in reversed(mounted):
            subprocess.run(["fusermount3", "-u", m] if how == "fusermount3" else ["umount", m])
        shutil.rmtree(work, ignore_errors=True)
    nfiles = len(truth.paths - truth.dirs)
    print("image %s: %d MiB on disk (sparse file of 4 GiB), %d paths (%d files, %d "
          "directories), %d inodes, %d subvolumes and snapshots; %d files sampled for find; "
          "%.0f s in all" % (os.path.basename(img), os.stat(img).st_blocks // 2048,
                             len(truth.paths), nfiles, len(truth.dirs), truth.inodes,
                             a.snapshots + 2, len(truth.sample), time.time() - start))
    print("cells: paths mistaken for hard links / paths skipped (du: inodes not counted); "
          "collisions: numbers shared by different inodes / those inodes, by `btrfsimg "
          "collisions` (the kernel's: on one device) and as seen in each FUSE mount")
    if a.markdown:
        print("| mount | " + " | ".join(TOOLS) + " | collisions (btrfsimg collisions) |")
        print("|" + " --- |" * (len(TOOLS) + 2))
    for name, r, c, seen, secs in rows:
        cc = "%d / %d" % c[:2]
        if a.markdown:
            print("| %s | %s | %s |" % (name, " | ".join(cell(r[t]) for t in TOOLS), cc))
        else:
            print("%-48s %s  collisions: %s" % (name, "  ".join("%s: %s" % (t, cell(r[t]))
                                                                for t in TOOLS), cc))
    for name, r, c, seen, secs in rows:
        print("seconds, %s: %s" % (name, ", ".join("%s %.1f" % (t, secs[t]) for t in TOOLS)))
    print("cross-checks: %s" % ("; ".join(problems) if problems else
                                "every scheme's numbers shared in the mount are those "
                                "collisions lists, and every path a tool mistook or skipped "
                                "is (or lies below) one of its inodes"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
