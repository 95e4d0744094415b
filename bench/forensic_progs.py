#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""forensic_progs.py: what btrfs-progs recovers of a forensic truth image,
the way its documentation says to look for lost files: `btrfs-find-root`
lists candidate root-tree blocks, then `btrfs restore -t BYTENR` runs over
every one of them (-i ignore errors, -s snapshots and subvolumes too).

    forensic_progs.py IMAGE... [--timeout S]

Several IMAGEs are the devices of one filesystem: btrfs-progs finds the
other devices only among block devices, so each image is attached to a
loop device (read-only; needs root), `btrfs device scan` registers them,
the tools run on the first, and the loop devices are detached at the end.

Prints one JSON object: {"roots": [bytenr, ...], "sha256": [hex, ...]}:
the roots tried and the sha256 of every regular file any restore wrote.
tests/images/test_forensic.py compares it with `btrfsimg deleted` per kind and
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
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="progs-restore.", dir=shm) as d:
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


def run(image, timeout):
    rs = roots(image, timeout)
    shas = set()
    for r in rs:
        shas |= restore_hashes(image, r, timeout)
    return {"roots": rs, "sha256": sorted(shas)}


def main():
    args = sys.argv[1:]
    timeout = 60
    if "--timeout" in args:
        i = args.index("--timeout")
        timeout = int(args[i + 1])
        del args[i:i + 2]
    if not args:
        sys.exit(__doc__)
    if len(args) == 1:
        print(json.dumps(run(args[0], timeout)))
        return
    loops = []
    try:
        for img in args:
            loops.append(subprocess.run(["losetup", "-r", "-f", "--show", img], check=True,
                                        stdout=subprocess.PIPE).stdout.decode().strip())
        subprocess.run(["btrfs", "device", "scan", *loops], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        print(json.dumps(run(loops[0], timeout)))
    finally:
        if loops:  # with no device named, --forget would forget every one
            subprocess.run(["btrfs", "device", "scan", "--forget", *loops],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for dev in loops:
            subprocess.run(["losetup", "-d", dev], stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
