#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Where on the device the leaves of one tree that hold inode items or
names lie, in key order, from btrfs-progs alone (no btrfsimg code): the
leaves `btrfs inspect-internal dump-tree -t TREE` prints with an
INODE_ITEM, INODE_REF or INODE_EXTREF, mapped to stripe 0 of their chunk
(`dump-tree -t chunk`). Adjacent leaves are joined. Prints "offset length"
lines for bench/floor.c; a single-device image only.

    python3 bench/leaves.py IMAGE TREE_ID
"""
import re
import subprocess
import sys

WANTED = ("INODE_ITEM", "INODE_REF", "INODE_EXTREF")


def dump(img, tree):
    p = subprocess.Popen(["btrfs", "inspect-internal", "dump-tree", "-t", str(tree), img],
                         stdout=subprocess.PIPE, text=True, errors="replace", bufsize=1 << 20)
    yield from p.stdout
    if p.wait() != 0:
        sys.exit(f"dump-tree -t {tree} failed")


def chunks(img):
    """[(logical, length, stripe-0 physical)]"""
    out, cur = [], None
    for line in dump(img, "chunk"):
        m = re.search(r"key \(FIRST_CHUNK_TREE CHUNK_ITEM (\d+)\)", line)
        if m:
            cur = [int(m.group(1)), None, None]
            continue
        m = re.match(r"\s+length (\d+) ", line)
        if m and cur:
            cur[1] = int(m.group(1))
        m = re.match(r"\s+stripe 0 devid \d+ offset (\d+)", line)
        if m and cur:
            cur[2] = int(m.group(1))
            out.append(tuple(cur))
            cur = None
    return out


def physical(chunk_list, logical):
    for lo, length, phys in chunk_list:
        if lo <= logical < lo + length:
            return phys + logical - lo
    sys.exit(f"logical {logical} is in no chunk")


def main():
    img, tree = sys.argv[1], sys.argv[2]
    cl = chunks(img)
    leaves, leaf, keep = [], None, False
    for line in dump(img, tree):
        if line.startswith("leaf ") and " items " in line:
            if leaf is not None and keep:
                leaves.append(leaf)
            leaf, keep = int(line.split()[1]), False
        elif line.startswith("node "):
            if leaf is not None and keep:
                leaves.append(leaf)
            leaf, keep = None, False
        elif leaf is not None and not keep and line.startswith("\titem "):
            keep = line.split(" key (", 1)[1].split()[1] in WANTED
    if leaf is not None and keep:
        leaves.append(leaf)
    out = subprocess.run(["btrfs", "inspect-internal", "dump-super", img],
                         capture_output=True, text=True, check=True).stdout
    nodesize = int(re.search(r"^nodesize\s+(\d+)", out, re.M).group(1))
    runs = []
    for lg in leaves:
        ph = physical(cl, lg)
        if runs and runs[-1][0] + runs[-1][1] == ph:
            runs[-1][1] += nodesize
        else:
            runs.append([ph, nodesize])
    for off, length in runs:
        print(off, length)
    print(f"{len(leaves)} leaves, {len(leaves) * nodesize / 1e6:.1f} MB in {len(runs)} runs",
          file=sys.stderr)


main()
