#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""same_outputs.py: run two builds of the CLI over every testdata image and
compare stdout, stderr and exit status: `deleted --json`, `deleted`,
`history --json` and `verify` on every image (the devices of a multi-device
filesystem together), and `walk --json --hash`, `deleted --json` on
salvage.img damaged each way testdata/gen_salvage.py damages it (super,
chunk, both, root), as test_salvage.py makes them.

    same_outputs.py OLD_BTRFSIMG NEW_BTRFSIMG [TESTDATA]

Prints each difference and the counts; exits 1 when any differs.
"""
import glob
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True


def images(testdata, work):
    """(name, [paths]) of every image, decompressed into @work; devices of
    one filesystem (devN, multi.N, pv-, raid-) together."""
    groups = {}
    for z in sorted(glob.glob(os.path.join(testdata, "**", "*.img.zst"), recursive=True)):
        rel = os.path.relpath(z, testdata)[:-4]
        out = os.path.join(work, rel.replace("/", "_"))
        subprocess.run(["zstd", "-q", "-d", "--long=31", "-f", z, "-o", out], check=True)
        d, base = os.path.split(rel)
        key = rel
        for pre in ("dev", "multi.", "pv-", "raid-"):
            if base.startswith(pre):
                key = os.path.join(d, pre)
        groups.setdefault(key, []).append(out)
    return sorted(groups.items())


def run(cli, args):
    p = subprocess.run([cli] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=600)
    return p.returncode, p.stdout, p.stderr


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    old, new = sys.argv[1], sys.argv[2]
    testdata = sys.argv[3] if len(sys.argv) == 4 else os.path.join(HERE, "..", "testdata")
    sys.path.insert(0, testdata)
    import gen_salvage
    runs, diffs = 0, 0
    with tempfile.TemporaryDirectory() as work:
        cases = []
        for name, paths in images(testdata, work):
            for cmd in (["deleted", "--json"], ["deleted"], ["history", "--json"], ["verify"]):
                cases.append((name, cmd + paths))
        clean = os.path.join(work, "salvage_salvage.img")
        data = open(clean, "rb").read()
        for what in gen_salvage.DAMAGE:
            img = os.path.join(work, "salvage-" + what + ".img")
            with open(img, "wb") as f:
                f.write(gen_salvage.damage(data, what))
            for cmd in (["walk", "--json", "--hash"], ["deleted", "--json"], ["history", "--json"]):
                cases.append(("salvage-" + what, cmd + [img]))
        for name, args in cases:
            a, b = run(old, args), run(new, args)
            runs += 1
            if a != b:
                diffs += 1
                what = [k for k, x, y in zip(("status", "stdout", "stderr"), a, b) if x != y]
                print("DIFFERS (%s): %s %s" % (", ".join(what), name, " ".join(args[:2])))
                if "stderr" in what:
                    print("  old stderr: %r\n  new stderr: %r" % (a[2][-300:], b[2][-300:]))
    print("%d comparisons (stdout, stderr, exit status each), %d differ" % (runs, diffs))
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
