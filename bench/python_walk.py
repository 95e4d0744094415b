#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""python_walk.py: Filesystem.walk() of the Python module beside the CLI's
`walk --json` on the same subvolume, in paired runs (A B A B ..., warm page
cache), and the ratio of the medians.

    /usr/bin/python3 bench/python_walk.py BUILDDIR IMAGE [--subvol ID] [--runs N]

BUILDDIR holds tools/btrfsimg and python/btrfsimg. The images bench/run.sh
builds serve: snap-1000000-100.img's subvolume 256 is the 1M-inode one.
Each Python run is a fresh interpreter that opens the image and takes every
record (a dict per path) from fs.walk(); each CLI run writes its JSON lines
to /dev/null. Both count the paths, and the counts must agree.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

PY_RUN = """
import sys, time
import btrfsimg
t = time.perf_counter()
n = 0
with btrfsimg.open(sys.argv[1]) as fs:
    for rec in fs.walk(subvol=int(sys.argv[2])):
        n += 1
print(n, time.perf_counter() - t)
"""


def run_cli(cli, img, subvol):
    t = time.perf_counter()
    p = subprocess.run([cli, "walk", "--json", "--subvol", str(subvol), img],
                       stdout=subprocess.PIPE, check=True)
    dt = time.perf_counter() - t
    return p.stdout.count(b"\n"), dt


def run_py(build, img, subvol):
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", PY_RUN, img, str(subvol)], env=env,
                       stdout=subprocess.PIPE, check=True, text=True)
    dt = time.perf_counter() - t
    return int(p.stdout.split()[0]), dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("image")
    ap.add_argument("--subvol", type=int, default=256)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    cli = os.path.join(a.build, "tools", "btrfsimg")
    run_cli(cli, a.image, a.subvol)  # warm the page cache
    c, p = [], []
    for _ in range(a.runs):
        n1, t1 = run_cli(cli, a.image, a.subvol)
        n2, t2 = run_py(a.build, a.image, a.subvol)
        if n1 != n2:
            sys.exit("path counts differ: CLI %d, Python %d" % (n1, n2))
        c.append(t1)
        p.append(t2)
        print("cli %.2f s  python %.2f s  (%d paths)" % (t1, t2, n1), flush=True)
    mc, mp = statistics.median(c), statistics.median(p)
    ratios = [x / y for x, y in zip(p, c)]
    print("median: walk --json %.2f s, fs.walk() %.2f s; Python/CLI per pair: median %.2fx, "
          "range %.2f-%.2fx" % (mc, mp, statistics.median(ratios), min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
