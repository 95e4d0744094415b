#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_salvage_multi.py: the truth for salvage of multi-device filesystems,
as root.

    gen_salvage_multi.py [OUTDIR [SET...]]   (default testdata/salvage-multi, every set)

Two kernel-made filesystems on sparse files, populated as gen_salvage.py's
(populate, then a second mount for last_changes) plus a file of 1.5 MiB that
spans many 64 KiB stripes:
  raid1     2 devices x 160 MiB, metadata raid1, data raid1
  striped   4 devices x 160 MiB, metadata raid10, data raid5
  wide      8 devices of 256..480 MiB, metadata raid10, data raid0: chunks
            of 8 stripes, more than an order can be searched for; the sizes
            differ and do not grow with the devid, so that the kernel (which
            takes the devices with the most free space first) lays the
            stripes out in an order that is not devid order
The kernel's view of each (ro mount of copies) is recorded with gen_kview.py.

The damage (made by the tests from the committed images, in user space:
DAMAGE and damage() below) works on the devices' bytes, by devid:
  super      every superblock copy of every device zeroed
  super1     every superblock copy of devid 1 only zeroed
  chunk      the chunk tree's root block zeroed on every device
  chunkall   every chunk-tree block found on the devices zeroed (no chunk
             leaf survives: the map comes from device extents alone)
  both       super and chunk
  bothall    super and chunkall

Writes to OUTDIR/<name>/:
  devN.img.zst    device N (devid N), zstd -19 --long=27
  view.jsonl      the kernel's view
  truth.json      fsid, profile, per device devid and uuid; for the wide
                  set also each chunk's stripe order (devids) as the
                  kernel's chunk tree records it (dump-tree)
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_salvage as gs  # noqa: E402  (testdata/gen_salvage.py)
from genlib import content  # noqa: E402

SETS = {
    "raid1": {"devices": 2, "size": "160M", "mkfs": ["-m", "raid1", "-d", "raid1"]},
    "striped": {"devices": 4, "size": "160M", "mkfs": ["-m", "raid10", "-d", "raid5"]},
    "wide": {"devices": 8, "sizes": ["288M", "416M", "320M", "480M", "352M", "448M", "384M",
                                     "256M"],
             "mkfs": ["-m", "raid10", "-d", "raid0"], "orders": True, "balance": True},
}
DAMAGE = ("super", "super1", "chunk", "chunkall", "both", "bothall")
OWNER_CHUNK_TREE = 3


# ------------------------------------------------------------ on-disk reading

def dev_facts(img):
    """devid and device uuid from a device's primary superblock."""
    sb = gs._sb(img)
    devid, = struct.unpack_from("<Q", sb, 0xc9)
    return {"devid": devid, "uuid": sb[0xc9 + 66:0xc9 + 82].hex(), "fsid": sb[0x20:0x30].hex()}


def chunk_root_places(devs):
    """(devid, physical) of every copy of the chunk tree's root block."""
    sb = gs._sb(devs[1])
    chunk_root, = struct.unpack_from("<Q", sb, 0x58)
    for start, length, stripes in gs._sys_chunks(sb):
        if start <= chunk_root < start + length:
            return sorted({(d, p + chunk_root - start) for d, p in stripes})
    raise ValueError("chunk root unmapped")


def chunk_blocks(img, fsid, nodesize):
    """Physical offsets of every block on @img that claims to be of the
    chunk tree of @fsid (header fsid and owner; 4 KiB steps)."""
    out = []
    for off in range(0, len(img) - nodesize + 1, 4096):
        if img[off + 0x20:off + 0x30] == fsid and \
                struct.unpack_from("<Q", img, off + 0x58)[0] == OWNER_CHUNK_TREE:
            out.append(off)
    return out


def damage(devs, what):
    """Damaged copies of @devs ({devid: bytes}): one of DAMAGE."""
    if what not in DAMAGE:
        raise ValueError(what)
    sb = gs._sb(devs[1])
    fsid, nodesize = sb[0x20:0x30], struct.unpack_from("<I", sb, 0x94)[0]
    zero = {d: [] for d in devs}
    if what in ("super", "both", "bothall"):
        for d, img in devs.items():
            zero[d] += [(o, 4096) for o in gs.SB_OFFSETS if o + 4096 <= len(img)]
    if what == "super1":
        zero[1] += [(o, 4096) for o in gs.SB_OFFSETS if o + 4096 <= len(devs[1])]
    if what in ("chunk", "both"):
        for d, p in chunk_root_places(devs):
            zero[d].append((p, nodesize))
    if what in ("chunkall", "bothall"):
        for d, img in devs.items():
            zero[d] += [(p, nodesize) for p in chunk_blocks(img, fsid, nodesize)]
    out = {}
    for d, img in devs.items():
        b = bytearray(img)
        for off, n in zero[d]:
            b[off:off + n] = bytes(n)
        out[d] = bytes(b)
    return out


# ------------------------------------------------------------ the images

sh = gs.sh


def spread(m):
    with open(os.path.join(m, "docs/spread"), "wb") as f:
        f.write(content("docs/spread", 1536 << 10))


def balance(m):
    """Every chunk made again by the kernel (mkfs lays its first chunks out
    in devid order, the kernel by free space)."""
    sh("btrfs", "balance", "start", "--full-balance", m)


def losetup(paths):
    return [sh("losetup", "-f", "--show", p).decode().strip() for p in paths]


def mount_all(loops, mnt, opts):
    dev_opts = ",".join("device=" + lo for lo in loops)
    sh("mount", "-o", opts + "," + dev_opts, loops[0], mnt)


def release(loops):
    for lo in loops:
        subprocess.run(["losetup", "-d", lo], check=False)
    subprocess.run(["btrfs", "device", "scan", "--forget"], check=False)


CHUNK_RE = re.compile(rb"key \(FIRST_CHUNK_TREE CHUNK_ITEM (\d+)\)")
TYPE_RE = re.compile(rb"stripe_len \d+ type (\S+)")
STRIPE_RE = re.compile(rb"stripe (\d+) devid (\d+) offset (\d+)")


def chunk_orders(loop):
    """[{logical, type, devids}] of every chunk item, as btrfs-progs reads
    the chunk tree of the (unmounted) set through @loop."""
    out = []
    for line in sh("btrfs", "inspect-internal", "dump-tree", "-t", "chunk", loop).splitlines():
        m = CHUNK_RE.search(line)
        if m:
            out.append({"logical": int(m.group(1)), "type": "", "devids": []})
        m = TYPE_RE.search(line)
        if m and out:
            out[-1]["type"] = m.group(1).decode()
        m = STRIPE_RE.search(line)
        if m and out:
            out[-1]["devids"].append(int(m.group(2)))
    return out


def make_set(name, spec, out, work):
    n = spec["devices"]
    sizes = spec.get("sizes", [spec.get("size")] * n)
    paths = [os.path.join(work, "%s-dev%d.img" % (name, i + 1)) for i in range(n)]
    mnt = tempfile.mkdtemp(prefix="mnt.", dir=work)
    for p, size in zip(paths, sizes):
        sh("truncate", "-s", size, p)
    sh("mkfs.btrfs", "-q", "-f", *spec["mkfs"], *paths)
    loops = losetup(paths)
    try:
        steps = (gs.populate, spread) + ((balance,) if spec.get("balance") else ()) + \
            (gs.last_changes,)
        for step in steps:
            mount_all(loops, mnt, "noatime")
            try:
                step(mnt)
            finally:
                sh("umount", mnt)
        orders = chunk_orders(loops[0]) if spec.get("orders") else None
    finally:
        release(loops)
    data = [open(p, "rb").read() for p in paths]
    copies = [p + ".copy" for p in paths]
    for p, c in zip(paths, copies):
        sh("cp", "--sparse=always", p, c)
    loops = losetup(copies)
    try:
        mount_all(loops, mnt, "ro,noatime")
        try:
            with open(os.path.join(out, "view.jsonl"), "wb") as f:
                subprocess.run([sys.executable, os.path.join(HERE, "gen_kview.py"), "record",
                                mnt], check=True, stdout=f)
        finally:
            sh("umount", mnt)
    finally:
        release(loops)
    devs = [dev_facts(d) for d in data]
    if [d["devid"] for d in devs] != list(range(1, n + 1)):
        raise RuntimeError("devids are not 1..n in mkfs order: %r" % devs)
    for p, d in zip(paths, data):
        if open(p, "rb").read() != d:
            raise RuntimeError("a device changed after its record")
    with open(os.path.join(out, "truth.json"), "w") as f:
        truth = {"fsid": devs[0]["fsid"], "mkfs": spec["mkfs"], "devices": devs}
        if orders is not None:
            truth["chunks"] = orders
        json.dump(truth, f, indent=1)
        f.write("\n")
    for i, p in enumerate(paths):
        sh("zstd", "-q", "-19", "--long=27", "-f", p, "-o",
           os.path.join(out, "dev%d.img.zst" % (i + 1)))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "salvage-multi")
    names = sys.argv[2:] or list(SETS)
    work = tempfile.mkdtemp(prefix="salvage-multi.")
    for name in names:
        spec = SETS[name]
        os.makedirs(os.path.join(out, name), exist_ok=True)
        make_set(name, spec, os.path.join(out, name), work)
    sh("rm", "-rf", work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
