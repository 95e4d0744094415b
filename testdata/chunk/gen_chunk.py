#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_chunk.py: record where the kernel puts data for every chunk profile.

    sudo python3 testdata/chunk/gen_chunk.py            # every layout
    sudo python3 testdata/chunk/gen_chunk.py raid5-3    # only these

Needs root, loop devices, a kernel with btrfs, btrfs-progs (mkfs.btrfs,
btrfs, btrfs-map-logical) and losetup. For each layout it makes a
filesystem with mkfs.btrfs on sparse 256 MiB files, mounts it, writes one
file of 2 MiB whose every 4 KiB block starts with a unique header
"btrfsimg-chunk off=<16 hex digits>\\n" (its file offset) followed by
pseudo-random bytes, syncs and unmounts. Then it records, in
testdata/chunk/<layout>/, only what independent tools and the raw device
files show (nothing here runs btrfsimg code):

  chunks.txt       `btrfs inspect-internal dump-tree -t chunk` (progs' view)
  extents.txt      the file's EXTENT_DATA items from `dump-tree -t 5`
  sysarray.bin     the superblock's sys_chunk_array bytes (devid 1's copy)
  chunk-<L>.bin    the raw CHUNK_ITEM at logical L, cut out of the chunk
                   tree leaf that btrfs-map-logical read
  map.txt          "logical devid physical" for every copy of every file
                   block, found by searching the device files for its
                   header; logical comes from extents.txt
  rows.txt/.bin    RAID5/6 only: for every full stripe whose data blocks
                   are all file blocks, 1 KiB from every device at the same
                   offset inside the stripe ("rel so devid physical binoff"):
                   data, P and Q as the kernel wrote them. Which device holds
                   P or Q is not recorded; the test must work it out.

Rows are located with the only assumption of striping: the stripes of one
chunk line up, so device j's bytes of a row sit at stripe j's offset plus
the same relative offset.
"""
import os
import random
import re
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FILE_SIZE = 2 << 20
BLOCK = 4096
SLICE = 1024
MAGIC = b"btrfsimg-chunk off="

# name: (data profile, metadata profile, devices)
LAYOUTS = {
    "single": ("single", "single", 1),
    "dup": ("dup", "dup", 1),
    "raid0-3": ("raid0", "raid0", 3),
    "raid1": ("raid1", "raid1", 2),
    "raid1c3": ("raid1c3", "raid1c3", 3),
    "raid1c4": ("raid1c4", "raid1c4", 4),
    "raid10-4": ("raid10", "raid10", 4),
    "raid10-6": ("raid10", "raid10", 6),
    "raid5-3": ("raid5", "raid5", 3),
    "raid5-4": ("raid5", "raid5", 4),
    "raid6-4": ("raid6", "raid6", 4),
    "raid6-5": ("raid6", "raid6", 5),
}


def run(*args):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit("%s failed: %s" % (" ".join(args), p.stderr.strip()))
    return p.stdout


def block_bytes(off):
    head = MAGIC + b"%016x\n" % off
    rnd = random.Random(off * 7919 + 1)
    return head + bytes(rnd.getrandbits(8) for _ in range(BLOCK - len(head)))


def devid_of(path):
    with open(path, "rb") as f:
        f.seek(0x10000 + 0xC9)
        return struct.unpack("<Q", f.read(8))[0]


def sys_array(path):
    with open(path, "rb") as f:
        f.seek(0x10000)
        sb = f.read(4096)
    size = struct.unpack_from("<I", sb, 0xA0)[0]
    return sb[0x32B:0x32B + size], sb


def parse_chunks(text):
    """chunk items from dump-tree: logical -> {stripes: [(devid, offset)], ...}"""
    chunks = {}
    cur = None
    for line in text.splitlines():
        m = re.search(r"key \(FIRST_CHUNK_TREE CHUNK_ITEM (\d+)\)", line)
        if m:
            cur = {"logical": int(m.group(1)), "stripes": []}
            chunks[cur["logical"]] = cur
            continue
        if cur is None:
            continue
        m = re.search(r"length (\d+) owner \d+ stripe_len (\d+) type (\S+)", line)
        if m:
            cur["length"] = int(m.group(1))
            cur["type"] = m.group(3)
        m = re.search(r"stripe \d+ devid (\d+) offset (\d+)", line)
        if m:
            cur["stripes"].append((int(m.group(1)), int(m.group(2))))
    return chunks


def parse_extents(text, ino):
    ext = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"key \(%d EXTENT_DATA (\d+)\)" % ino, line)
        if not m:
            continue
        body = "\n".join(lines[i + 1:i + 4])
        d = re.search(r"disk byte (\d+) nr (\d+)", body)
        o = re.search(r"extent data offset (\d+) nr (\d+)", body)
        if d and o:
            ext.append((int(m.group(1)), int(d.group(1)), int(o.group(1)), int(o.group(2))))
    return ext


def logical_of(extents, off):
    for key, disk, eoff, nr in extents:
        if key <= off < key + nr:
            return disk + eoff + off - key
    raise SystemExit("file offset %d not in any extent" % off)


def leaf_chunk_items(leaf, logical):
    """Cut CHUNK_ITEMs (type 228) out of a raw leaf."""
    bytenr, = struct.unpack_from("<Q", leaf, 48)
    if bytenr != logical or leaf[100] != 0:
        raise SystemExit("chunk root %d: not the leaf expected" % logical)
    nritems, = struct.unpack_from("<I", leaf, 96)
    out = {}
    for i in range(nritems):
        p = 101 + 25 * i
        objectid, typ, offset, doff, dsize = struct.unpack_from("<QBQII", leaf, p)
        if typ == 228:
            out[offset] = leaf[101 + doff:101 + doff + dsize]
    return out


def scan(path):
    """(file offset, physical) of every file block on a device file."""
    found = []
    with open(path, "rb") as f:
        pos = 0
        while True:
            buf = f.read(1 << 20)
            if not buf:
                break
            for i in range(0, len(buf), BLOCK):
                if buf[i:i + len(MAGIC)] != MAGIC:
                    continue
                # RAID5 parity of an odd number of file blocks starts with
                # the same header bytes: only an exact match counts
                try:
                    off = int(buf[i + len(MAGIC):i + len(MAGIC) + 16], 16)
                except ValueError:
                    continue
                if off % BLOCK == 0 and off < FILE_SIZE and buf[i:i + BLOCK] == block_bytes(off):
                    found.append((off, pos + i))
            pos += len(buf)
    return found


def record_rows(out, files, chunk, dev_of, blocks):
    """RAID5/6: slices of every full stripe made only of file blocks."""
    stripes = chunk["stripes"]
    ndata = len(stripes) - (2 if "RAID6" in chunk["type"] else 1)
    by_rel = {}
    for devid, phys in blocks:
        idx = [j for j, s in enumerate(stripes) if s[0] == devid]
        rel = phys - stripes[idx[0]][1]
        by_rel.setdefault(rel, set()).add(devid)
    full = {}
    for rel in sorted(r for r, devs in by_rel.items() if len(devs) == ndata):
        full.setdefault(rel // 65536, []).append(rel)
    # one offset inside each full stripe, varied so that it is not always 0
    rows = [rels[f % len(rels)] for f, rels in sorted(full.items())]
    with open(os.path.join(out, "rows.bin"), "wb") as b, \
            open(os.path.join(out, "rows.txt"), "w") as t:
        t.write("# rel so devid physical binoff (%d-byte slices)\n" % SLICE)
        for rel in rows:
            for devid, soff in stripes:
                with open(files[dev_of[devid]], "rb") as f:
                    f.seek(soff + rel)
                    data = f.read(SLICE)
                t.write("%d %d %d %d %d\n" % (rel - rel % 65536, rel % 65536, devid,
                                              soff + rel, b.tell()))
                b.write(data)
    return len(rows)


def make(name, work):
    dprof, mprof, ndev = LAYOUTS[name]
    out = os.path.join(HERE, name)
    os.makedirs(out, exist_ok=True)
    files = [os.path.join(work, "%s.%d.img" % (name, i)) for i in range(ndev)]
    loops = []
    mnt = "/mnt/hk-gen-" + name
    os.makedirs(mnt, exist_ok=True)
    try:
        for p in files:
            with open(p, "wb") as f:
                f.truncate(256 << 20)
            loops.append(run("losetup", "-f", "--show", p).strip())
        run("mkfs.btrfs", "-f", "-q", "-d", dprof, "-m", mprof, *loops)
        run("mount", loops[0], mnt)
        with open(os.path.join(mnt, "f"), "wb") as f:
            for off in range(0, FILE_SIZE, BLOCK):
                f.write(block_bytes(off))
        ino = os.stat(os.path.join(mnt, "f")).st_ino
        run("sync")
        run("umount", mnt)
        chunks_txt = run("btrfs", "inspect-internal", "dump-tree", "-t", "chunk", loops[0])
        fs_txt = run("btrfs", "inspect-internal", "dump-tree", "-t", "5", loops[0])
        sa, sb = sys_array(files[0])
        chunk_root, = struct.unpack_from("<Q", sb, 0x58)
        nodesize, = struct.unpack_from("<I", sb, 0x94)
        leaf_path = os.path.join(work, "leaf")
        run("btrfs-map-logical", "-l", str(chunk_root), "-b", str(nodesize), "-o", leaf_path,
            loops[0])
        with open(leaf_path, "rb") as f:
            items = leaf_chunk_items(f.read(), chunk_root)
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
        os.rmdir(mnt)
        for l in loops:
            subprocess.run(["btrfs", "device", "scan", "--forget", l], capture_output=True)
            subprocess.run(["losetup", "-d", l], check=True)
    with open(os.path.join(out, "chunks.txt"), "w") as f:
        f.write(chunks_txt)
    extents = parse_extents(fs_txt, ino)
    with open(os.path.join(out, "extents.txt"), "w") as f:
        for e in extents:
            f.write("key_offset %d disk_bytenr %d offset %d num_bytes %d\n" % e)
    with open(os.path.join(out, "sysarray.bin"), "wb") as f:
        f.write(sa)
    for logical, data in items.items():
        with open(os.path.join(out, "chunk-%d.bin" % logical), "wb") as f:
            f.write(data)
    dev_of = {devid_of(p): i for i, p in enumerate(files)}
    lines = []
    seen = {}
    for devid, i in sorted(dev_of.items()):
        for off, phys in scan(files[i]):
            lines.append((logical_of(extents, off), devid, phys))
            seen[off] = seen.get(off, 0) + 1
    if len(seen) != FILE_SIZE // BLOCK:
        raise SystemExit("%s: found %d of %d blocks" % (name, len(seen), FILE_SIZE // BLOCK))
    lines.sort()
    with open(os.path.join(out, "map.txt"), "w") as f:
        f.write("# logical devid physical: every copy of every 4 KiB file block\n")
        for l in lines:
            f.write("%d %d %d\n" % l)
    nrows = 0
    if "raid5" in name or "raid6" in name:
        chunks = parse_chunks(chunks_txt)
        first = lines[0][0]
        chunk = [c for c in chunks.values() if c["logical"] <= first < c["logical"] + c["length"]][0]
        nrows = record_rows(out, files, chunk, dev_of, [(d, p) for _, d, p in lines])
    for p in files:
        os.unlink(p)
    print("%s: %d block copies, %d chunk items, %d rows" % (name, len(lines), len(items), nrows))


def main():
    if os.geteuid() != 0:
        raise SystemExit("gen_chunk.py: needs root (mkfs, loop devices, mount)")
    names = sys.argv[1:] or list(LAYOUTS)
    with tempfile.TemporaryDirectory(prefix="hk-chunkgen.") as work:
        for n in names:
            make(n, work)


if __name__ == "__main__":
    main()
