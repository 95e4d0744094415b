#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_generations.py: the truth for `--generation N`, as root.

    gen_generations.py [OUTDIR]     (default testdata/generations)

mkfs.btrfs on a 160 MiB sparse file (4 KiB nodes, metadata single), then
steps of changes on a loop mount: files of several sizes (inline, one
extent, many), a hard link, a symlink, xattrs, a subvolume and a read-only
snapshot of it, overwrites, truncation, renames and deletions, and at the
end a round of metadata churn that writes over some freed tree blocks of
the earlier generations. After each step the filesystem is unmounted (a
clean commit, no log tree), its generation read (dump-super), the image
copied (cp --sparse=always) and the copy mounted read-only (noatime) on
its own loop device and recorded with gen_kview.py; then the original is
mounted again for the next step. The copies are not kept.

Writes to OUTDIR:
  gens.img.zst          the final image (zstd -19 --long=27)
  spread.img.zst        the copy after step 4b, before the churn: every
                        older root tree still whole (step 2's transaction
                        wrote its root-tree node twice, the first copy
                        freed: the extent tree tells which is the root)
  gen-N.jsonl           the kernel's view of generation N (gen_kview
                        record: the format of `walk --json --hash`)
  generations.json      [{"generation": N, "step": what it did}], oldest
                        first; the last one is the final image's own
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


def put(mnt, rel, size, tag=""):
    with open(os.path.join(mnt, rel), "wb") as f:
        f.write(content(rel + tag, size))


def step1(m):
    os.mkdir(os.path.join(m, "a"))
    put(m, "a/one", 8192)
    put(m, "a/small", 100)  # inline
    put(m, "a/big", 300000)
    os.link(os.path.join(m, "a/one"), os.path.join(m, "a/one.link"))
    os.symlink("one", os.path.join(m, "a/sym"))
    os.setxattr(os.path.join(m, "a/one"), "user.note", b"first")
    return "a/ with one, small (inline), big, a hard link, a symlink, an xattr"


def step2(m):
    sh("btrfs", "subvolume", "create", os.path.join(m, "sv"))
    put(m, "sv/inside", 20000)
    put(m, "a/one", 8192, ":v2")  # rewritten in place (COW: new extent)
    os.mkdir(os.path.join(m, "b"))
    for i in range(20):
        put(m, "b/f%02d" % i, 500 + 300 * i)
    return "subvolume sv; a/one rewritten; b/ with 20 files"


def step3(m):
    sh("btrfs", "subvolume", "snapshot", "-r", os.path.join(m, "sv"), os.path.join(m, "snap"))
    os.unlink(os.path.join(m, "a/small"))
    os.rename(os.path.join(m, "a/big"), os.path.join(m, "b/big"))
    put(m, "sv/inside", 4096, ":v3")
    return "read-only snapshot snap of sv; a/small deleted; a/big renamed b/big; sv/inside rewritten"


def step4(m):
    put(m, "c.bin", 1 << 20)
    os.truncate(os.path.join(m, "b/big"), 70000)
    os.setxattr(os.path.join(m, "a/one"), "user.note", b"second")
    for i in range(0, 20, 2):
        os.unlink(os.path.join(m, "b/f%02d" % i))
    return "c.bin (1 MiB); b/big truncated; xattr changed; half of b/ deleted"


def step4b(m):
    os.mkdir(os.path.join(m, "e"))
    for i in range(5):  # five commits: step 4's root leaves the backup roots
        put(m, "e/n%d" % i, 1000 + i)
        os.sync()
    return "e/ with 5 files, a commit after each"


def step5(m):
    # metadata churn: many small files created and removed, so freed tree
    # blocks of earlier generations are written over
    d = os.path.join(m, "churn")
    os.mkdir(d)
    for r in range(ROUNDS):
        for i in range(FILES):
            put(m, "churn/x%03d" % i, 600, ":%d" % r)
        os.sync()
        for i in range(FILES):
            os.unlink(os.path.join(d, "x%03d" % i))
        os.sync()
    os.rmdir(d)
    put(m, "a/last", 3000)
    put(m, "d.bin", 96 * 1024)  # into the data freed since step 1, first
    return "%d round(s) of %d files created and deleted; a/last; d.bin" % (ROUNDS, FILES)


# Steps 1-4 allocate with ssd_spread (tree blocks go to fresh space: their
# old versions stay); the churn of step 5 with the default allocator,
# which takes freed space first and so writes over some of them.
SPREAD, REUSE = "noatime,ssd_spread", "noatime"
ROUNDS, FILES = 1, 20  # more write over every older root tree; none, none
STEPS = [(step1, SPREAD), (step2, SPREAD), (step3, SPREAD), (step4, SPREAD), (step4b, SPREAD),
         (step5, REUSE)]


def generation(img):
    for line in sh("btrfs", "inspect-internal", "dump-super", img).decode().splitlines():
        if line.startswith("generation"):
            return int(line.split()[1])
    raise RuntimeError("no generation in dump-super")


def record(img, copy, mnt, out, keep=None):
    sh("cp", "--sparse=always", img, copy)
    sh("mount", "-o", "ro,noatime,loop", copy, mnt)
    try:
        record_view(mnt, out)
    finally:
        sh("umount", mnt)
    if keep:
        sh("zstd", "-q", "-19", "--long=27", "-f", copy, "-o", keep)
    os.unlink(copy)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "generations")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="gens.")
    img, copy, mnt = (os.path.join(work, n) for n in ("gens.img", "copy.img", "mnt"))
    os.mkdir(mnt)
    sh("truncate", "-s", "160M", img)
    sh("mkfs.btrfs", "-q", "-f", "-n", "4096", "-m", "single", "-d", "single", img)
    loop = sh("losetup", "-f", "--show", img).decode().strip()
    gens = []
    try:
        for st, opts in STEPS:
            sh("mount", "-o", opts, loop, mnt)
            try:
                what = st(mnt)
            finally:
                sh("umount", mnt)
            n = generation(img)
            keep = os.path.join(out, "spread.img.zst") if st is step4b else None
            record(img, copy, mnt, os.path.join(out, "gen-%d.jsonl" % n), keep)
            gens.append({"generation": n, "step": what})
            print("generation %d: %s" % (n, what), file=sys.stderr)
    finally:
        subprocess.run(["umount", mnt], stderr=subprocess.DEVNULL)
        subprocess.run(["losetup", "-d", loop])
    if generation(img) != gens[-1]["generation"]:
        raise RuntimeError("the image changed after its last record")
    with open(os.path.join(out, "generations.json"), "w") as f:
        json.dump(gens, f, indent=1)
        f.write("\n")
    sh("zstd", "-q", "-19", "--long=27", "-f", img, "-o", os.path.join(out, "gens.img.zst"))
    sh("rm", "-rf", work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
