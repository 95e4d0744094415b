#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""python_hash.py: every regular file's sha256 through the Python module
(hashlib over the bytes the binding reads) beside the CLI's
`walk --json --hash`, in paired runs (A B A B ..., warm page cache): wall
and CPU (user + sys) time of each, the ratio taken per pair.

    /usr/bin/python3 bench/python_hash.py BUILDDIR IMAGE [--runs N] [--way WAY ...]
    /usr/bin/python3 bench/python_hash.py --make IMAGE      (as root)

--make builds the image this was measured on: mkfs.btrfs on a 2 GiB
sparse file, /usr/share/doc, /usr/include and /usr/lib/python3 of a
Debian 12 system copied in (about 19,600 paths, 17,000 regular files,
310 MB).

The ways the Python side reads each file of fs.walk() (default: all):
  path     hashlib.file_digest(fs.open(rec["path"]), "sha256"), the
           module docstring's recipe: a path lookup from the top, then
           the file read through an io.BufferedReader
  open     hashlib.sha256(fs.open(rec).read()): the walked record opened
           by its subvolume and inode, no lookup
  bytes    hashlib.sha256(fs.read_bytes(rec)): the whole file into one
           bytes object
Each run is a fresh interpreter; its hashes must equal the CLI's (it
prints their count and the sha256 of their hex digests in walk order).
"""
import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

PY_RUN = r"""
import hashlib, stat, sys
import btrfsimg
way = sys.argv[2]
n, acc = 0, hashlib.sha256()
with btrfsimg.open(sys.argv[1]) as fs:
    for rec in fs.walk():
        if not stat.S_ISREG(rec["mode"]):
            continue
        if way == "path":
            with fs.open(rec["path"]) as f:
                h = hashlib.file_digest(f, "sha256")
        elif way == "open":
            with fs.open(rec) as f:
                h = hashlib.sha256(f.read())
        else:
            h = hashlib.sha256(fs.read_bytes(rec))
        acc.update(h.hexdigest().encode())
        n += 1
print(n, acc.hexdigest())
"""


def timed(argv, env=None):
    """(stdout, wall, user+sys) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, check=True, timeout=600)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return p.stdout, wall, cpu


def run_cli(cli, img):
    """The regular files' count and the sha256 of their hex digests in walk
    order (what the Python side prints: its output stays small)."""
    out, wall, cpu = timed([cli, "walk", "--json", "--hash", img])
    n, acc = 0, hashlib.sha256()
    for line in out.splitlines():
        r = json.loads(line)
        if "sha256" in r and (r["mode"] & 0o170000) == 0o100000:
            acc.update(r["sha256"].encode())
            n += 1
    return "%d %s" % (n, acc.hexdigest()), wall, cpu


def run_py(build, img, way):
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    out, wall, cpu = timed([sys.executable, "-c", PY_RUN, img, way], env=env)
    return out.decode().strip(), wall, cpu


def make(img):
    subprocess.run(["truncate", "-s", "2G", img], check=True)
    subprocess.run(["mkfs.btrfs", "-q", img], check=True)
    mnt = tempfile.mkdtemp()
    subprocess.run(["mount", "-o", "loop", img, mnt], check=True)
    try:
        subprocess.run(["cp", "-a", "/usr/share/doc", "/usr/include", "/usr/lib/python3", mnt],
                       check=True)
    finally:
        subprocess.run(["umount", mnt], check=True)
        os.rmdir(mnt)


def med(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?")
    ap.add_argument("image")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--way", action="append", choices=["path", "open", "bytes"])
    ap.add_argument("--make", action="store_true")
    a = ap.parse_args()
    if a.make:
        make(a.image)
        return
    if not a.build:
        ap.error("BUILDDIR is needed")
    ways = a.way or ["path", "open", "bytes"]
    cli = os.path.join(a.build, "tools", "btrfsimg")
    ref, _, _ = run_cli(cli, a.image)  # warm the page cache
    print("%s regular files; load average %.1f" % (ref.split()[0], os.getloadavg()[0]),
          flush=True)
    cw, cc = [], []
    pw = {w: [] for w in ways}
    pc = {w: [] for w in ways}
    rw = {w: [] for w in ways}
    rc = {w: [] for w in ways}
    for _ in range(a.runs):
        for w in ways:
            h1, w1, c1 = run_cli(cli, a.image)
            h2, w2, c2 = run_py(a.build, a.image, w)
            if h1 != ref or h2 != ref:
                sys.exit("hashes differ from the CLI's (%s)" % w)
            cw.append(w1)
            cc.append(c1)
            pw[w].append(w2)
            pc[w].append(c2)
            rw[w].append(w2 / w1)
            rc[w].append(c2 / c1)
            print("cli %.2f s (cpu %.2f)  python/%s %.2f s (cpu %.2f)"
                  % (w1, c1, w, w2, c2), flush=True)
    print("load average %.1f" % os.getloadavg()[0])
    print("walk --json --hash: wall %.2f s, cpu %.2f s (medians)" % (med(cw), med(cc)))
    for w in ways:
        print("python/%s: wall %.2f s, cpu %.2f s; per pair wall %.2fx (%.2f-%.2f), "
              "cpu %.2fx (%.2f-%.2f)"
              % (w, med(pw[w]), med(pc[w]), med(rw[w]), min(rw[w]), max(rw[w]),
                 med(rc[w]), min(rc[w]), max(rc[w])))


if __name__ == "__main__":
    main()
