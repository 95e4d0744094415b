#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_gendiff.py: the truth for `btrfsimg diff` between two generations
of one subvolume, as root.

    gen_gendiff.py [OUTDIR]     (default testdata/gendiff)

mkfs.btrfs on a 192 MiB sparse file (4 KiB nodes, metadata single), a
subvolume `data` changed in committed steps, with no snapshot: a seed
(two names), the rounds of changes of gen_diff.py (state1, state2, state3: every kind of change
the snapshot diff truth has), then a small fourth round, then metadata
churn outside `data` (files created and removed at the top level) with
the default allocator, which writes over some freed tree blocks of the
earlier generations. Steps 1-4 are mounted ssd_spread (tree blocks go to
fresh space, so their old versions stay). After each step the filesystem
is unmounted (a clean commit, no log tree), its generation read
(dump-super), the image copied and the copy mounted read-only (noatime)
and `data` recorded with gen_kview.py, as gen_diff.py records snapshots.

Writes to OUTDIR:
  gendiff.img.zst     the final image (zstd -19 --long=27)
  gen-N.jsonl         the kernel's view of `data` at generation N
  generations.json    {"subvol": id of data, "generations": [{"generation": N,
                      "subvol_generation": the root's, "step": what}]},
                      oldest first; the last is the final image's own
"""
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_diff import put, sh, state1, state2, state3  # noqa: E402
from gen_generations import generation  # noqa: E402
from genlib import record_view  # noqa: E402  (testdata/genlib.py)

SPREAD, REUSE = "noatime,ssd_spread,compress-force=zstd", "noatime"
CHURN_FILES = 20


def seed(d):
    put(d, "seed", 3000)
    os.mkdir(os.path.join(d, "seed-dir"))


def state4(d):
    j = lambda *p: os.path.join(d, *p)  # noqa: E731
    os.chmod(j("meta/mode"), 0o640)
    os.unlink(j("links/two.added"))
    put(d, "g4-new", 5000)
    os.rename(j("s3-only"), j("docs/s3-moved"))
    os.setxattr(j("meta/xset"), "user.new", b"again")


def churn(m):
    c = os.path.join(m, "churn")
    os.mkdir(c)
    for i in range(CHURN_FILES):
        put(c, "x%03d" % i, 700)
    os.sync()
    for i in range(CHURN_FILES):
        os.unlink(os.path.join(c, "x%03d" % i))
    os.rmdir(c)


STEPS = [("seed", seed, SPREAD), ("state1", state1, SPREAD), ("state2", state2, SPREAD), ("state3", state3, SPREAD),
         ("state4", state4, SPREAD), ("churn outside data", churn, REUSE)]


def subvol_facts(mnt):
    sid = gen = None
    for line in sh("btrfs", "subvolume", "show", os.path.join(mnt, "data")).decode().splitlines():
        k, _, v = line.strip().partition(":")
        if k == "Subvolume ID":
            sid = int(v)
        elif k == "Generation":
            gen = int(v)
    return sid, gen


def record(img, copy, mnt, out):
    sh("cp", "--sparse=always", img, copy)
    sh("mount", "-o", "ro,noatime,loop", copy, mnt)
    try:
        facts = subvol_facts(mnt)
        record_view(mnt, out, "data")
    finally:
        sh("umount", mnt)
    os.unlink(copy)
    return facts


def run_step(loop, mnt, name, fn, opts):
    sh("mount", "-o", opts, loop, mnt)
    try:
        if fn is churn:
            fn(mnt)
        else:
            data = os.path.join(mnt, "data")
            if not os.path.exists(data):
                sh("btrfs", "subvolume", "create", data)
            fn(data)
    finally:
        sh("umount", mnt)


def main():
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "gendiff"))
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="gendiff.")
    img, copy, mnt = (os.path.join(work, n) for n in ("gendiff.img", "copy.img", "mnt"))
    os.mkdir(mnt)
    sh("truncate", "-s", "192M", img)
    sh("mkfs.btrfs", "-q", "-f", "-n", "4096", "-m", "single", "-d", "single", img)
    loop = sh("losetup", "-f", "--show", img).decode().strip()
    gens, subvol = [], None
    try:
        for name, fn, opts in STEPS:
            run_step(loop, mnt, name, fn, opts)
            n = generation(img)
            subvol, sgen = record(img, copy, mnt, os.path.join(out, "gen-%d.jsonl" % n))
            gens.append({"generation": n, "subvol_generation": sgen, "step": name})
            print("generation %d (data at %d): %s" % (n, sgen, name), file=sys.stderr)
    finally:
        subprocess.run(["umount", mnt], stderr=subprocess.DEVNULL)
        subprocess.run(["losetup", "-d", loop])
    if generation(img) != gens[-1]["generation"]:
        raise RuntimeError("the image changed after its last record")
    with open(os.path.join(out, "generations.json"), "w") as f:
        json.dump({"subvol": subvol, "generations": gens}, f, indent=1)
        f.write("\n")
    sh("zstd", "-q", "-19", "--long=27", "-f", img, "-o", os.path.join(out, "gendiff.img.zst"))
    sh("rm", "-rf", work)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
