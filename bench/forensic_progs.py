#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""forensic_progs.py: what btrfs-progs recovers of a forensic truth image,
the way its documentation says to look for lost files: `btrfs-find-root`
lists candidate root-tree blocks, then `btrfs restore -t BYTENR` runs over
every one of them (-i ignore errors, -s snapshots and subvolumes too).

    forensic_progs.py IMAGE [--timeout S]

Prints one JSON object: {"roots": [bytenr, ...], "sha256": [hex, ...]}:
the roots tried and the sha256 of every regular file any restore wrote.
tests/test_forensic.py compares it with `btrfsimg deleted` per kind and
size band; run by hand it shows what progs gets back.
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = re.compile(rb"(?:Well block|Found tree root at) (\d+)")


def roots(image, timeout):
    p = subprocess.run(["btrfs-find-root", "-a", image], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    seen = []
    for m in ROOT.finditer(p.stdout):
        b = int(m.group(1))
        if b not in seen:
            seen.append(b)
    return seen


def restore_hashes(image, root, timeout):
    out = set()
    with tempfile.TemporaryDirectory(prefix="progs-restore.") as d:
        try:
            subprocess.run(["btrfs", "restore", "-t", str(root), "-i", "-s", image, d],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        for base, _dirs, files in os.walk(d):
            for name in files:
                p = os.path.join(base, name)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                with open(p, "rb") as f:
                    out.add(hashlib.sha256(f.read()).hexdigest())
    return out


def main():
    args = sys.argv[1:]
    timeout = 60
    if "--timeout" in args:
        i = args.index("--timeout")
        timeout = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    image = args[0]
    rs = roots(image, timeout)
    shas = set()
    for r in rs:
        shas |= restore_hashes(image, r, timeout)
    print(json.dumps({"roots": rs, "sha256": sorted(shas)}))


if __name__ == "__main__":
    main()
