#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_nopart.py: the truth for a whole disk whose partition table is gone
(finding btrfs by scanning), as root.

    gen_nopart.py [OUTDIR]          (default testdata/nopart)

A 300 MiB sparse disk gets a GPT (sfdisk: partition 1 of 1 MiB at 1 MiB,
partition 2 of 256 MiB at sector 5003, an odd sector: the filesystem start
is 512-byte but not 4 KiB aligned). mkfs.btrfs (metadata DUP, data single)
on a loop device over partition 2, filled and changed as gen_salvage.py
fills its image (populate, last_changes: the same files), then the
kernel's view recorded through a read-only loop device (gen_kview.py).
The MBR sector sfdisk writes for the same partition on a DOS-labelled
disk is kept apart (mbr.bin) so the tests can lay it over the disk for
the MBR cases: the filesystem's bytes are the same.

The damage is made by the tests, in user space (damage() below):
  gpt1     the primary GPT (header and entries, LBA 1-33) zeroed
  gpt      both GPTs and the protective MBR zeroed
  gptsb    gpt, and every superblock copy of the filesystem zeroed
  mbr      the MBR disk (mbr.bin laid over gpt) with its entry zeroed
  mbrmoved the MBR disk with its entry's start moved 2048 sectors on: a
           table that no longer points at the filesystem

Writes to OUTDIR:
  disk.img.zst   the disk (zstd -19 --long=27)
  view.jsonl     the kernel's view of partition 2
  mbr.bin        sector 0 of the DOS-labelled twin
  gpt.sfdisk, mbr.sfdisk  sfdisk -d of both tables
  truth.json     where the filesystem starts, its size, fsid, and where
                 its superblock copies lie on the disk
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_salvage  # noqa: E402  (the files, and the superblock offsets)
from genlib import record_view  # noqa: E402  (testdata/genlib.py)

SECTOR = 512
START = 5003  # sectors: not a multiple of 8
SIZE = 256 << 20
DISK = 300 << 20
DAMAGE = ("gpt1", "gpt", "gptsb", "mbr", "mbrmoved")


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, stdout=subprocess.PIPE, **kw).stdout


def damage(disk, what, mbr=None, truth=None):
    """A damaged copy of @disk (bytes): one of DAMAGE. @mbr: mbr.bin's
    bytes (for "mbr"); @truth: truth.json (for "gptsb")."""
    out = bytearray(disk)
    last = len(out) // SECTOR - 1

    def zero(first, count):
        out[first * SECTOR:(first + count) * SECTOR] = bytes(count * SECTOR)

    if what not in DAMAGE:
        raise ValueError(what)
    zero(1, 33)
    if what == "gpt1":
        return bytes(out)
    zero(0, 1)
    zero(last - 32, 33)
    if what in ("mbr", "mbrmoved"):
        out[0:SECTOR] = mbr
    if what == "mbr":
        out[446:462] = bytes(16)
    if what == "mbrmoved":
        start, = struct.unpack_from("<I", out, 446 + 8)
        struct.pack_into("<I", out, 446 + 8, start + 2048)
    if what == "gptsb":
        for off in truth["super_disk"]:
            out[off:off + 4096] = bytes(4096)
    return bytes(out)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "nopart")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="nopart.")
    disk, twin, mnt = (os.path.join(work, n) for n in ("disk.img", "twin.img", "mnt"))
    os.mkdir(mnt)
    for path, label in ((disk, "gpt"), (twin, "dos")):
        sh("truncate", "-s", str(DISK), path)
        script = "label: %s\nstart=%d, size=%d, type=%s\n" % (
            label, START, SIZE // SECTOR, "L" if label == "gpt" else "83")
        if label == "gpt":
            script = "label: gpt\nlabel-id: 6A8E1C8C-2F0A-4B0C-9C35-A61BB0E4B028\n" \
                "start=2048, size=2048\nstart=%d, size=%d\n" % (START, SIZE // SECTOR)
        sh("sfdisk", "-q", path, input=script.encode())
        dump = sh("sfdisk", "-d", path).decode().replace(work + "/", "")
        with open(os.path.join(out, label.replace("dos", "mbr") + ".sfdisk"), "w") as f:
            f.write(dump)
    with open(twin, "rb") as f:
        mbr = f.read(SECTOR)
    loop = sh("losetup", "-f", "--show", "-o", str(START * SECTOR), "--sizelimit", str(SIZE),
              disk).decode().strip()
    try:
        sh("mkfs.btrfs", "-q", "-f", "-m", "dup", "-d", "single", loop)
        gen_salvage.mounted_steps(loop, mnt, (gen_salvage.populate, gen_salvage.last_changes),
                                  "noatime")
    finally:
        sh("losetup", "-d", loop)
    loop = sh("losetup", "-f", "--show", "-r", "-o", str(START * SECTOR), "--sizelimit",
              str(SIZE), disk).decode().strip()
    try:
        sh("mount", "-o", "ro,noatime", loop, mnt)
        try:
            record_view(mnt, os.path.join(out, "view.jsonl"))
        finally:
            sh("umount", mnt)
    finally:
        sh("losetup", "-d", loop)
    data = open(disk, "rb").read()
    part = data[START * SECTOR:START * SECTOR + SIZE]
    facts = gen_salvage.facts(part)
    truth = {"start": START * SECTOR, "size": SIZE, "fsid": facts["fsid"],
             "generation": facts["generation"],
             "super_disk": [START * SECTOR + o for o in facts["super_physical"]]}
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, "mbr.bin"), "wb") as f:
        f.write(mbr)
    sh("zstd", "-q", "-19", "--long=27", "-f", disk, "-o", os.path.join(out, "disk.img.zst"))
    sh("rm", "-rf", work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
