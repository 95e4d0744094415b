#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_features.py: btrfsimg_feature_name() against btrfs-progs.

    test_features.py LIBBTRFSIMG.so TESTDATA

Truth: every dump-super.txt that testdata/gen-images.sh recorded with
btrfs-progs lists, for compat_ro_flags and incompat_flags, the names of
the bits set, lowest bit first. Each (bit, name) pair seen there must be
btrfsimg's name, upper-cased. Names of bits no committed image sets must
at least be strings of the installed `btrfs` binary (btrfs-progs 6.2
prints them) where that binary knows them. Prints "N passed, M failed".
"""
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys

KINDS = {"compat_ro_flags": 1, "incompat_flags": 2}


def recorded_pairs(testdata):
    """{(kind, bit): name} from every recorded dump-super."""
    pairs = {}
    for path in glob.glob(os.path.join(testdata, "**", "*dump-super*.txt"), recursive=True):
        text = open(path, errors="replace").read()
        for m in re.finditer(r"^(compat_ro_flags|incompat_flags)\s+0x([0-9a-f]+)\s*\n\s*\(([^)]*)\)",
                             text, re.M):
            value = int(m.group(2), 16)
            names = [n.strip() for n in m.group(3).split("|")]
            bits = [b for b in range(64) if value >> b & 1]
            if len(bits) != len(names):
                continue  # progs could not name a bit: nothing to learn here
            for b, n in zip(bits, names):
                pairs[(KINDS[m.group(1)], b)] = n
    return pairs


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.btrfsimg_feature_name.restype = ctypes.c_char_p
    lib.btrfsimg_feature_name.argtypes = [ctypes.c_int, ctypes.c_uint]
    name = lambda kind, bit: lib.btrfsimg_feature_name(kind, bit)
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        passed += ok
        failed += not ok
        print(("ok   " if ok else "FAIL ") + what)

    pairs = recorded_pairs(sys.argv[2])
    check(len(pairs) >= 8, "recorded dump-super files name at least 8 feature bits (%d)" % len(pairs))
    for (kind, bit), want in sorted(pairs.items()):
        have = name(kind, bit)
        have = have.decode().upper() if have else None
        check(have == want, "kind %d bit %d: progs says %s, btrfsimg %s" % (kind, bit, want, have))
    progs = shutil.which("btrfs")
    strings = set()
    if progs:
        out = subprocess.run(["strings", progs], capture_output=True, text=True).stdout
        strings = set(out.split())
    for kind in (1, 2):
        for bit in range(64):
            n = name(kind, bit)
            if n and (kind, bit) not in pairs and n.decode().upper() in strings:
                check(True, "kind %d bit %d: %s is a name btrfs-progs knows" % (kind, bit, n.decode()))
    check(name(0, 0) is None and name(2, 63) is None and name(2, 15) is None,
          "no name for compat bits, incompat bit 63 or the unused bit 15")
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
