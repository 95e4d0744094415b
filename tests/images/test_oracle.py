#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_oracle.py: the live kernel oracle for the files layer.

    test_oracle.py BTRFSIMG TESTDATA [--full] [--only NAME[,NAME]] [--keep DIR]

Builds fresh images with the running kernel (testdata/gen-files.sh --small
--raw: every feature of the committed corpus, fewer and smaller files),
records the kernel's view of each on a fresh read-only mount, and compares
btrfsimg with it exactly as tests/images/test_files.py does for the committed
images. So it checks btrfsimg against whatever kernel and btrfs-progs this
machine has, not only the ones that made testdata/files.

Needs root, loop devices, btrfs support in the kernel, mkfs.btrfs, btrfs,
losetup, zstd, chattr; otherwise it prints SKIP and exits 77 (meson's skip
code). The last line is exactly "N passed, M failed".
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402
import test_files  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cli")
    ap.add_argument("testdata")
    ap.add_argument("--full", action="store_true", help="the full-size corpus (slow)")
    ap.add_argument("--only", help="comma-separated image names")
    ap.add_argument("--keep", help="generate into this directory and keep it")
    a = ap.parse_args()
    why = imgtest.skip_reason()
    if why:
        print("SKIP: live kernel oracle: %s" % why)
        return imgtest.SKIP
    testdata = os.path.abspath(a.testdata)
    tmp = None
    if a.keep:
        out = os.path.abspath(a.keep)
        os.makedirs(out, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="btrfsimg-oracle.")
        out = tmp.name
    try:
        cmd = ["bash", os.path.join(testdata, "gen-files.sh"), "--raw"]
        cmd += [] if a.full else ["--small"]
        cmd += ["--only", a.only] if a.only else []
        print("generating with the running kernel (%s): %s" % (os.uname().release, " ".join(cmd)))
        sys.stdout.flush()
        p = subprocess.run(cmd + [out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=3600)
        if p.returncode != 0:
            print(p.stdout.decode(errors="replace")[-4000:])
            print("FAIL gen-files.sh exit status %d" % p.returncode)
            print("0 passed, 1 failed")
            return 1
        only = set(a.only.split(",")) if a.only else None
        res = test_files.run(os.path.abspath(a.cli), testdata, out, only)
    finally:
        if tmp:
            tmp.cleanup()
    return res.summary()


if __name__ == "__main__":
    sys.exit(main())
