#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""Seeds of the multi-device target (fuzz/fuzz_multi.c).

    gen_multi_seeds.py OUTDIR

From the kernel-made sets of testdata/salvage-multi, damaged as
tests/images/test_salvage_multi.py damages them
(testdata/gen_salvage_multi.py damage()):

  multi-raid1-super       raid1, both devices, every superblock zeroed
  multi-raid1-super1      raid1, devid 1 without superblocks
  multi-striped-bothall   raid10/raid5, 4 devices, no superblock, no
                          chunk-tree block: devids and stripe orders from
                          the tree blocks and device extents alone
  multi-striped-missing3  the same without devid 3 (degraded, a raid10
                          mirror pair told apart by data checksums)
  multi-foreign           raid1's devices without superblocks beside a
                          device of the striped set (another fsid)
  multi-wide-half         4 of the 8 devices of the wide set (8-stripe
                          raid0 and raid10 chunks), no superblock, no
                          chunk-tree block

libFuzzer cuts inputs past 1 MiB, so each device is shrunk to what the
salvage reads: its tree blocks (the newest copy of each bytenr on the
device, newest first, in three quarters of the budget), each block's runs
of zeros left out (unlisted bytes read as
zero), and of data only the first nonzero sector of each 64 KiB (the
sector the stripe-order sampler reads first), while the total stays under
the budget. The device size stays the real one.
"""
import json
import os
import struct
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.join(HERE, "..", "testdata")
sys.path.insert(0, TESTDATA)
import genlib  # noqa: E402
import gen_salvage_multi as gm  # noqa: E402

BUDGET = 1000 << 10  # bytes per seed, under libFuzzer's 1 MiB
SECTOR = 4096
ZERO_RUN = 32


def load(name):
    d = os.path.join(TESTDATA, "salvage-multi", name)
    with open(os.path.join(d, "truth.json")) as f:
        truth = json.load(f)
    return {dev["devid"]: genlib.unzstd_bytes(os.path.join(d, "dev%d.img.zst" % dev["devid"]))
            for dev in truth["devices"]}


def nonzero_runs(buf, base):
    """(offset, bytes) of @buf's parts between runs of ZERO_RUN zeros."""
    out, i, n = [], 0, len(buf)
    while i < n:
        while i < n and buf[i] == 0:
            i += 1
        start, zeros = i, 0
        while i < n and zeros < ZERO_RUN:
            zeros = zeros + 1 if buf[i] == 0 else 0
            i += 1
        end = i - zeros
        if end > start:
            out.append((base + start, buf[start:end]))
    return out


def records(img, fsid, nodesize, budget):
    """Sparse records of @img: tree blocks of @fsid (the newest copy of
    each bytenr, newest generation first, while the budget lasts), then
    data samples."""
    newest = {}
    for off in range(0, len(img) - nodesize + 1, SECTOR):
        if img[off + 32:off + 48] != fsid:
            continue
        bytenr, gen = struct.unpack_from("<Q", img, off + 48)[0], \
            struct.unpack_from("<Q", img, off + 80)[0]
        if bytenr not in newest or newest[bytenr][0] < gen:
            newest[bytenr] = (gen, off)
    recs, blocks, used = [], set(), 0
    for gen, off in sorted(newest.values(), reverse=True):
        runs = nonzero_runs(img[off:off + nodesize], off)
        size = sum(10 + len(b) for _, b in runs)
        if used + size > budget * 3 // 4:
            break
        recs += runs
        used += size
        blocks.update(range(off, off + nodesize, SECTOR))
    for win in range(0, len(img), 64 << 10):
        for off in range(win, min(win + (64 << 10), len(img)), SECTOR):
            if off in blocks or not any(img[off:off + SECTOR]):
                continue
            if used + SECTOR + 10 > budget:
                return recs
            recs.append((off, img[off:off + SECTOR]))
            used += SECTOR + 10
            break
    return recs


def sparse(img, fsid, nodesize, budget):
    blob = bytearray(struct.pack("<BQ", 0, len(img)))
    for o in gm.gs.SB_OFFSETS:  # surviving superblocks
        if o + SECTOR <= len(img) and img[o + 0x40:o + 0x48] == b"_BHRfS_M":
            blob += struct.pack("<QH", o, SECTOR) + img[o:o + SECTOR]
    for off, b in records(img, fsid, nodesize, budget - len(blob)):
        blob += struct.pack("<QH", off, len(b)) + b
    return bytes(blob)


def seed(imgs, fsid, nodesize):
    """The fuzz_multi input of device images @imgs (at most 4)."""
    per = BUDGET // len(imgs) - 16
    parts = [sparse(i, fsid, nodesize, per) for i in imgs]
    head = bytes([len(parts) - 1]) + b"".join(struct.pack("<I", len(p)) for p in parts[:-1])
    return head + b"".join(parts)


def facts(devs):
    sb = gm.gs._sb(devs[1])
    return sb[0x20:0x30], struct.unpack_from("<I", sb, 0x94)[0]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    raid1, striped, wide = load("raid1"), load("striped"), load("wide")
    f1, fs_, fw = facts(raid1), facts(striped), facts(wide)
    r1s = gm.damage(raid1, "super")
    sb_all = gm.damage(striped, "bothall")
    wb = gm.damage(wide, "bothall")
    seeds = {
        "multi-raid1-super": ([r1s[2], r1s[1]], f1),
        "multi-raid1-super1": ([gm.damage(raid1, "super1")[d] for d in (2, 1)], f1),
        "multi-striped-bothall": ([sb_all[d] for d in (3, 1, 4, 2)], fs_),
        "multi-striped-missing3": ([sb_all[d] for d in (4, 1, 2)], fs_),
        "multi-foreign": ([r1s[1], gm.damage(striped, "super")[1], r1s[2]], f1),
        "multi-wide-half": ([wb[d] for d in (4, 6, 2, 7)], fw),
    }
    for name, (imgs, (fsid, nodesize)) in seeds.items():
        blob = seed(imgs, fsid, nodesize)
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)
        print("%s: %d bytes" % (name, len(blob)))


if __name__ == "__main__":
    main()
