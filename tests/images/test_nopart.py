#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_nopart.py: a whole disk whose partition table is gone, or no longer
points at btrfs (testdata/nopart, made by testdata/gen_nopart.py).

    test_nopart.py CLI TESTDATA [PYTHONPATH]

The committed disk is a GPT disk whose partition 2 (at sector 5003: not
4 KiB aligned) holds a kernel-made btrfs; the kernel's view of it was
recorded before any damage. The damaged copies are made here in user
space by gen_nopart.damage(): the primary GPT zeroed ("gpt1": the backup
is read), both GPTs and the protective MBR zeroed ("gpt": the superblock
scan), that and every superblock copy ("gptsb": the start from the tree
blocks), an MBR disk with its one entry zeroed ("mbr") or moved where
the filesystem is not ("mbrmoved"). On each:
  - walk --json --hash equals the kernel's view record for record, every
    field (test_salvage.walk_equal), exit 1, stderr saying how the
    filesystem was found and where; the image is not written;
  - layers --json lists a btrfs row at the filesystem's start saying how
    it was found;
  - "gptsb" once more through a qcow2 container (qemu-img): the scans run
    over every layer.
Options keep their meaning: --offset START reads the filesystem with no
scan and no damage (exit 0); --offset 0 is refused, not overridden by a
scan; --partition 2 on a disk without a table is refused.
Hostile: two forged superblock copies (checksummed) that agree on a wrong
start, placed in the filesystem's free space as file data could place
them: the real start wins on its chunk root, the forged one is said as
set aside; a file full of superblock magic (checksums wrong) is refused
in bounded time. The Python binding opens "gpt" and walks it to the
kernel's paths and sha256.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
import imgtest  # noqa: E402
from test_salvage import parse_jsonl, python_binding, walk_equal  # noqa: E402

TIMEOUT = 300


def announce(truth):
    sb = truth["super_disk"][0]
    return {
        "gpt1": [b"used the backup"],
        "gpt": [b"no partition table: btrfs found by its superblock at byte %d" % sb],
        "mbr": [b"no partition table: btrfs found by its superblock at byte %d" % sb],
        "mbrmoved": [b"none of its 1 partitions holds btrfs: btrfs found by its superblock at "
                     b"byte %d" % sb],
        "gptsb": [b"no partition table and no superblock: the filesystem starts at byte %d"
                  % truth["start"], b"placed by its tree blocks"],
    }


def check_walk(kv, res, cli, img, name, view, said, args=()):
    before = imgtest.sha256_file(img)
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash"] + list(args) + [img],
                                   timeout=TIMEOUT)
    res.check(name + ": exit 1", rc == 1, "exit %r: %s" % (rc, err[-400:]))
    missing = [a for a in said if a not in err]
    res.check(name + ": how it was found said on stderr", not missing,
              "%r not in %s" % (missing, err[-600:]))
    got = parse_jsonl(out) if rc in (0, 1) else []
    res.problems(name + ": every record equal to the kernel's view", walk_equal(kv, got, view))
    res.check(name + ": the image is not written", imgtest.sha256_file(img) == before)


def check_layers(res, cli, img, name, truth, how):
    start = truth["start"]
    rc, out, err = imgtest.run_cli(cli, ["layers", "--json", img], timeout=TIMEOUT)
    rows = [r for r in parse_jsonl(out) if r.get("layer") == "btrfs"] if rc in (0, 1) else []
    ok = rc == 1 and len(rows) == 1 and rows[0].get("offset") == start and \
        rows[0].get("size") == truth["size"] and how in rows[0].get("detail", "")
    res.check("%s: layers --json: one btrfs row at byte %d of %d bytes, found by %s, exit 1"
              % (name, start, truth["size"], how), ok,
              "exit %r rows %r: %s" % (rc, rows, err[-300:]))


def options(res, cli, img, truth):
    rc, out, err = imgtest.run_cli(cli, ["walk", "--offset", str(truth["start"]), img],
                                   timeout=TIMEOUT)
    res.check("gpt: --offset START: read there, no scan, exit 0",
              rc == 0 and b"found by" not in err, "exit %r: %s" % (rc, err[-300:]))
    rc, out, err = imgtest.run_cli(cli, ["walk", "--offset", "0", img], timeout=TIMEOUT)
    res.check("gpt: --offset 0: refused, not overridden by a scan",
              rc == 2 and b"found by" not in err and b"placed by" not in err,
              "exit %r: %s" % (rc, err[-300:]))
    rc, out, err = imgtest.run_cli(cli, ["walk", "--partition", "2", img], timeout=TIMEOUT)
    res.check("gpt: --partition 2 without a table: refused", rc == 2 and b"partition 2" in err,
              "exit %r: %s" % (rc, err[-300:]))


def forge_pair(data, truth, shift):
    """Two superblock copies (primary and copy 1, checksummed) that agree
    on a start @shift bytes before the real one, laid in the
    filesystem's free space: the scan sees two starts of two copies
    each."""
    out = bytearray(data)
    real = data[truth["super_disk"][0]:truth["super_disk"][0] + 4096]
    fake = truth["start"] + (150 << 20) - shift
    for off in ((64 << 10), (64 << 20)):
        sb = bytearray(real)
        struct.pack_into("<Q", sb, 0x30, off)
        sb[0:4] = struct.pack("<I", imgtest.crc32c(bytes(sb[32:])))
        out[fake + off:fake + off + 4096] = sb
    return bytes(out), fake


def hostile(kv, res, cli, work, gn, data, truth, view):
    forged, fake = forge_pair(gn.damage(data, "gpt"), truth, 512 * 7)
    img = os.path.join(work, "forged.img")
    with open(img, "wb") as f:
        f.write(forged)
    check_walk(kv, res, cli, img, "hostile: forged superblock pair", view,
               announce(truth)["gpt"] + [b"set aside: start %d (2 copies, chunk root not there)"
                                         % fake])
    junk = os.path.join(work, "magic.img")
    sec = bytearray(512)
    sec[0x40:0x48] = b"_BHRfS_M"
    with open(junk, "wb") as f:
        f.write(bytes(sec) * (64 << 11))  # 64 MiB, a magic in every sector
    t0 = time.monotonic()
    rc, out, err = imgtest.run_cli(cli, ["walk", junk], timeout=TIMEOUT)
    took = time.monotonic() - t0
    res.check("hostile: a magic in every sector of 64 MiB: refused (exit 2) in %.1f s" % took,
              rc == 2 and b"found by" not in err and took < 60,
              "exit %r: %s" % (rc, err[-300:]))


def container(kv, res, cli, work, img, view, said):
    if not shutil.which("qemu-img"):
        print("skip qcow2: no qemu-img")
        return
    q = os.path.join(work, "gptsb.qcow2")
    subprocess.run(["qemu-img", "convert", "-O", "qcow2", img, q], check=True)
    check_walk(kv, res, cli, q, "gptsb through qcow2", view, said)


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    pythonpath = sys.argv[3] if len(sys.argv) > 3 else None
    sys.path.insert(0, testdata)
    import gen_nopart as gn
    kv = imgtest.import_kview(testdata)
    d = os.path.join(testdata, "nopart")
    view = imgtest.load_jsonl(os.path.join(d, "view.jsonl"))
    truth = imgtest.load_json(os.path.join(d, "truth.json"))
    with open(os.path.join(d, "mbr.bin"), "rb") as f:
        mbr = f.read()
    said = announce(truth)
    res = imgtest.Tally()
    with tempfile.TemporaryDirectory(prefix="nopart.") as work:
        disk = imgtest.private_copy(os.path.join(d, "disk.img.zst"), work)
        with open(disk, "rb") as f:
            data = f.read()
        imgs = {}
        for what in gn.DAMAGE:
            imgs[what] = os.path.join(work, what + ".img")
            with open(imgs[what], "wb") as f:
                f.write(gn.damage(data, what, mbr, truth))
            check_walk(kv, res, cli, imgs[what], what, view, said[what])
        check_layers(res, cli, imgs["gpt"], "gpt", truth, "superblock at byte %d"
                     % truth["super_disk"][0])
        check_layers(res, cli, imgs["gptsb"], "gptsb", truth, "tree blocks (")
        options(res, cli, imgs["gpt"], truth)
        container(kv, res, cli, work, imgs["gptsb"], view, said["gptsb"])
        hostile(kv, res, cli, work, gn, data, truth, view)
        python_binding(res, imgs["gpt"], view, pythonpath)
    return res.summary()


if __name__ == "__main__":
    sys.exit(main())
