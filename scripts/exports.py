#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The shared library exports exactly the functions the public headers
declare.

    scripts/exports.py INCLUDEDIR LIBBTRFSIMG.so

A declared function that is not exported breaks every user who calls it;
an exported symbol no header declares (a test helper, an internal) becomes
ABI by accident. Exit 0 when both lists agree, 1 with the differences.
"""
import os
import re
import subprocess
import sys


def declared(incdir):
    names = set()
    for f in sorted(os.listdir(incdir)):
        if f.endswith('.h'):
            text = open(os.path.join(incdir, f)).read()
            names |= set(re.findall(r'BTRFSIMG_API\s[^;(]*?\b(btrfsimg_\w+)\s*\(', text))
    return names


def exported(lib):
    out = subprocess.run(['nm', '-D', '--defined-only', lib], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1].split('@')[0] for line in out.splitlines()
            if len(line.split()) >= 3 and line.split()[1] in 'TW'}


def foreign(lib):
    """Every defined dynamic symbol of any kind (data, absolute version
    nodes included) outside the btrfsimg_ prefix."""
    out = subprocess.run(['nm', '-D', '--defined-only', lib], capture_output=True, text=True,
                         check=True).stdout
    names = {line.split()[-1].split('@')[0] for line in out.splitlines() if line.split()}
    return sorted(n for n in names if not n.startswith('btrfsimg_'))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    want, have = declared(sys.argv[1]), exported(sys.argv[2])
    bad = ['declared but not exported: ' + n for n in sorted(want - have)]
    bad += ['exported but not declared in include/: ' + n for n in sorted(have - want)]
    bad += ['exported without the btrfsimg_ prefix: ' + n for n in foreign(sys.argv[2])]
    for b in bad:
        print('exports: ' + b)
    print('exports: %d functions declared, %d exported, %d problems'
          % (len(want), len(have), len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
