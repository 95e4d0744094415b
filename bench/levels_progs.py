#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""levels_progs.py: btrfsimg beside btrfs-progs on the damaged copies of
tests/images/test_salvage_levels.py (testdata/levels: a three-level
top-level tree and its snapshot, nodes zeroed at every level).

    levels_progs.py BTRFSIMG TESTDATA

Each case is built twice: as the test builds it (every superblock copy
zeroed too, so btrfsimg opens by salvage) and with the superblocks left,
which btrfs-progs needs. btrfsimg: `walk --json --hash` on the first,
its records compared with the kernel's view (exact / missing / without
content / false), its time and peak RSS (GNU time). btrfs-progs on the
second: `btrfs check --readonly` (exit status and first error line),
`btrfs restore -i -s` (ignore errors, snapshots too; the files it
writes and how many have a sha256 of the kernel's view), `btrfs-find-root` (its first line). Prints a
Markdown table.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "images"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))
import imgtest  # noqa: E402
import test_salvage_levels as tsl  # noqa: E402
from test_salvage_mkfs import parse_jsonl  # noqa: E402


def run(args, timeout=600):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def ours(cli, kv, path, view):
    rc, out, err = run(["/usr/bin/time", "-f", "TIME %e %M", cli, "walk", "--json", "--hash",
                        path])
    t = re.search(rb"TIME ([\d.]+) (\d+)", err)
    by = {r["path"]: r for r in parse_jsonl(out)} if rc in (0, 1) else {}
    exact = bare = false = 0
    for w in view:
        g = by.get(w["path"])
        if g is None:
            continue
        a, b = kv.comparable(g), kv.comparable(w)
        differ = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
        if not differ:
            exact += 1
        elif differ == {"sha256"} and a.get("sha256") is None:
            bare += 1
        else:
            false += 1
    return "exit %d: %d exact, %d without content, %d missing, %d false (%.2f s, %d MB)" % (
        rc, exact, bare, len(view) - exact - bare - false, false, float(t.group(1)),
        int(t.group(2)) // 1024)


def kv_sha(path):
    return None if os.path.islink(path) else imgtest.sha256_file(path)


def progs(path, want):
    rc, out, err = run(["btrfs", "check", "--readonly", path])
    first = next((ln for ln in (out + err).decode(errors="replace").splitlines()
                  if re.search(r"error|ERROR|bad|failed|Couldn", ln)), "no error")
    check = "exit %d, \"%s\"" % (rc, first.strip()[:90])
    with tempfile.TemporaryDirectory(prefix="levels-restore.") as d:
        run(["btrfs", "restore", "-i", "-s", path, d])
        got = [kv_sha(os.path.join(b, n)) for b, _, ns in os.walk(d) for n in ns]
    right = sum(1 for h in got if h in want)
    restored = "%d files, %d of them with a sha256 the kernel's view has" % (len(got), right)
    rc, out, err = run(["btrfs-find-root", path])
    found = re.search(rb"Found tree root at (\d+) gen (\d+) level (\d+)", out + err)
    fr = ("the root tree at %s (generation %s, level %s)" % tuple(
        x.decode() for x in found.groups()) if found else "no root tree found")
    return check, restored, fr


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    kv = imgtest.import_kview(testdata)
    d = os.path.join(testdata, "levels")
    truth = imgtest.load_json(os.path.join(d, "truth.json"))
    view = [json.loads(ln) for ln in imgtest.genlib.unzstd_bytes(
        os.path.join(d, "view.jsonl.zst")).decode().splitlines() if ln.strip()]
    base = imgtest.genlib.unzstd_bytes(os.path.join(d, "levels.img.zst"))
    img = tsl.Image(base, truth)
    files = sum(1 for r in view if r["mode"] & 0o170000 == 0o100000)
    want = {r["sha256"] for r in view if r.get("sha256")}
    print("%d paths, %d regular files in the kernel's view\n" % (len(view), files))
    print("| case | btrfsimg (superblocks zeroed) | `check --readonly` | `restore -i -s` | "
          "`btrfs-find-root` |")
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="levels-bench.") as work:
        path = os.path.join(work, "copy.img")
        for name, data, *_ in [("undamaged", bytearray(base))] + tsl.cases(img, view):
            with open(path, "wb") as f:
                f.write(data)
            us = ours(cli, kv, path, view)
            with open(path, "r+b") as f:  # the superblocks back, for btrfs-progs
                for o in (64 << 10, 64 << 20):
                    f.seek(o)
                    f.write(base[o:o + 4096])
            c, r, fr = progs(path, want)
            print("| %s | %s | %s | %s | %s |" % (name, us, c, r, fr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
