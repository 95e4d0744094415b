#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_scrub.py: kernel-made images with chosen damage, for `verify` and
`unallocated` (tests/images/test_verify.py, tests/images/test_unallocated.py).

    sudo /usr/bin/python3 testdata/gen_scrub.py          # every image
    sudo /usr/bin/python3 testdata/gen_scrub.py raid1    # only this one

Needs root, loop devices, a kernel with btrfs, btrfs-progs, sfdisk, filefrag,
chattr and zstd. Writes testdata/scrub/<name>/:

  disk.img.zst | devN.img.zst  the damaged images (mbr-dup: a whole disk, MBR,
                               the filesystem in partition 1 at 1 MiB)
  truth.json                   what was done and what the kernel said:
    corruptions   every damaged sector: devid, physical (from the start of
                  the filesystem), logical, mirror (btrfs-map-logical's
                  order), length, what (data, nodatasum, tree-csum,
                  tree-header)
    scrub         per devid, the kernel's `btrfs scrub start -B -d -R -r`
                  counters on a loop mount of the damaged images
    usage         `btrfs filesystem usage -b` of the undamaged filesystem
                  (ro mount): per block group type size and used bytes,
                  device unallocated
    extents       the extent tree's EXTENT_ITEM/METADATA_ITEM ranges
                  (btrfs inspect-internal dump-tree -t extent)
    chunks        every chunk: logical, length, type, stripes (devid,
                  offset) (dump-tree -t chunk)
    devices       devid -> total_bytes (dump-tree -t chunk, DEV_ITEM)
    planted       a deleted file's freed extent: its logical address and
                  the first bytes of its pattern (filefrag before rm)
    partition_offset  where the filesystem starts in the image (0: none)
  raw/*.txt                    the raw outputs the JSON came from

The filesystem is mounted with nodiscard so the freed extent keeps its
bytes (the kernel's default discard=async would punch it out of the loop
file). Damage is done after the last unmount, by overwriting bytes at the
physical offsets btrfs-map-logical gives; the tree-header case rewrites
a block's bytenr field and recomputes its crc32c, so only the header
check (the kernel's verify_errors) can see it.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import genlib  # noqa: E402

OUT = os.path.join(HERE, "scrub")
MIB = 1 << 20
PART_OFF = MIB
loops, mounts = [], []


def sh(*args, check=True, **kw):
    r = subprocess.run(list(args), capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise SystemExit("%s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr))
    return r.stdout


def losetup(path):
    dev = sh("losetup", "-f", "--show", path).strip()
    loops.append(dev)
    return dev


def cleanup():
    for m in reversed(mounts):
        subprocess.run(["umount", m], capture_output=True)
        subprocess.run(["rmdir", m], capture_output=True)
    for l in reversed(loops):
        subprocess.run(["btrfs", "device", "scan", "--forget", l], capture_output=True)
        subprocess.run(["losetup", "-d", l], capture_output=True)
    mounts.clear()
    loops.clear()


def text_pattern(tag, n):
    """@n bytes of numbered lines: every 4 KiB sector differs, zstd likes it."""
    out, i = bytearray(), 0
    while len(out) < n:
        out += b"%s line %08d of a test file for btrfsimg verify\n" % (tag.encode(), i)
        i += 1
    return bytes(out[:n])


def write_file(path, data, sync=True):
    with open(path, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())


def extents_of(path):
    """[(file offset, logical, length)] from FIEMAP (btrfs reports logical)."""
    out = sh("filefrag", "-v", "-b4096", path)
    ext = []
    for line in out.splitlines():
        m = re.match(r"\s*\d+:\s+(\d+)\.\.\s*(\d+):\s+(\d+)\.\.\s*(\d+):\s+(\d+):", line)
        if m:
            ext.append((int(m.group(1)) * 4096, int(m.group(3)) * 4096, int(m.group(5)) * 4096))
    return ext


def populate(mnt):
    """The files; returns the planted pattern's logical address."""
    write_file(os.path.join(mnt, "a.bin"), text_pattern("a", 256 * 1024))
    write_file(os.path.join(mnt, "b.bin"), text_pattern("b", 96 * 1024))
    write_file(os.path.join(mnt, "small.txt"), b"an inline file\n")
    os.mkdir(os.path.join(mnt, "nocow"))
    sh("chattr", "+C", os.path.join(mnt, "nocow"))
    write_file(os.path.join(mnt, "nocow", "n.bin"), text_pattern("n", 64 * 1024))
    planted = b"".join(b"BTRFSIMG-CARVE-%08d\n" % i for i in range(64 * 1024 // 24 + 1))
    planted = planted[:64 * 1024]
    write_file(os.path.join(mnt, "carve.bin"), planted)
    sh("btrfs", "filesystem", "sync", mnt)
    ext = extents_of(os.path.join(mnt, "carve.bin"))
    os.unlink(os.path.join(mnt, "carve.bin"))
    sh("btrfs", "filesystem", "sync", mnt)
    for i in range(12):
        os.mkdir(os.path.join(mnt, "d%02d" % i))
        write_file(os.path.join(mnt, "d%02d" % i, "f"), text_pattern("d%d" % i, 2000), sync=False)
    sh("btrfs", "filesystem", "sync", mnt)
    return {"logical": ext[0][1], "length": 64 * 1024, "head": planted[:48].decode()}


def file_extents(mnt, names):
    return {n: extents_of(os.path.join(mnt, n)) for n in names}


def parse_usage(text):
    u = {"groups": {}}
    kind = None
    for line in text.splitlines():
        m = re.match(r"(Data|Metadata|System|Data\+Metadata),(\S+): Size:(\d+), Used:(\d+)", line)
        if m:
            u["groups"][m.group(1).lower()] = {"profile": m.group(2), "size": int(m.group(3)),
                                               "used": int(m.group(4))}
            continue
        m = re.match(r"\s+Device unallocated:\s+(\d+)", line)
        if m:
            u["device_unallocated"] = int(m.group(1))
        m = re.match(r"\s+Device size:\s+(\d+)", line)
        if m:
            u["device_size"] = int(m.group(1))
        m = re.match(r"Unallocated:", line)
        if m:
            kind = "unallocated"
            u["unallocated_per_dev"] = {}
            continue
        m = re.match(r"\s+(/dev/\S+)\s+(\d+)", line)
        if kind == "unallocated" and m:
            u["unallocated_per_dev"][m.group(1)] = int(m.group(2))
    return u


def parse_extents(text):
    ext = []
    for m in re.finditer(r"key \((\d+) (EXTENT_ITEM|METADATA_ITEM) (\d+)\)", text):
        ext.append({"logical": int(m.group(1)), "type": m.group(2), "offset": int(m.group(3))})
    return ext


def parse_chunks(text):
    chunks, devices, cur = [], {}, None
    for line in text.splitlines():
        m = re.search(r"key \(FIRST_CHUNK_TREE CHUNK_ITEM (\d+)\)", line)
        if m:
            cur = {"logical": int(m.group(1)), "stripes": []}
            chunks.append(cur)
            continue
        m = re.search(r"key \(DEV_ITEMS DEV_ITEM (\d+)\)", line)
        if m:
            cur = {"devid": int(m.group(1))}
            continue
        if cur is None:
            continue
        m = re.search(r"length (\d+) owner \d+ stripe_len \d+ type (\S+)", line)
        if m and "stripes" in cur:
            cur["length"] = int(m.group(1))
            cur["type"] = m.group(2)
        m = re.search(r"stripe \d+ devid (\d+) offset (\d+)", line)
        if m and "stripes" in cur:
            cur["stripes"].append({"devid": int(m.group(1)), "offset": int(m.group(2))})
        m = re.search(r"devid (\d+) total_bytes (\d+)", line)
        if m and "devid" in cur:
            devices[m.group(1)] = int(m.group(2))
    return chunks, devices


def parse_scrub(text):
    """Per device: the -R counters of `btrfs scrub start -B -d -R`."""
    devs, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"scrub device \S+ \(id (\d+)\)", line, re.I)
        if m:
            cur = devs.setdefault(m.group(1), {})
            continue
        m = re.match(r"\s+(\w+): (\d+)", line)
        if m and cur is not None:
            cur[m.group(1)] = int(m.group(2))
    return devs


def map_logical(dev, logical, length):
    """[(mirror, devid, physical)] for @logical (btrfs-map-logical)."""
    out = sh("btrfs-map-logical", "-l", str(logical), "-b", str(length), dev)
    res = []
    for m in re.finditer(r"mirror (\d+) logical (\d+) physical (\d+) device (\S+)", out):
        res.append((int(m.group(1)), m.group(4), int(m.group(3))))
    return res


def root_bytenr(dev, tree):
    out = sh("btrfs", "inspect-internal", "dump-tree", "-t", "root", dev)
    m = re.search(r"key \(%s ROOT_ITEM 0\).*?\n\s+generation \d+ root_dirid \d+ bytenr (\d+)"
                  % tree, out, re.S)
    return int(m.group(1))


def damage(paths_by_dev, devid, physical, fn):
    with open(paths_by_dev[devid], "r+b") as f:
        f.seek(physical)
        old = f.read(4096)
        new = fn(old)
        f.seek(physical)
        f.write(new)


def flip(buf):
    return bytes(b ^ 0x5A for b in buf[:64]) + buf[64:]


def build(name, ndev, mkfs_args, part):
    work = tempfile.mkdtemp(prefix="scrub-gen-")
    dest = os.path.join(OUT, name)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(os.path.join(dest, "raw"))
    try:
        imgs = [os.path.join(work, "dev%d.img" % (i + 1)) for i in range(ndev)]
        for p in imgs:
            with open(p, "wb") as f:
                f.truncate(192 * MIB)
        devs = [losetup(p) for p in imgs]
        sh("mkfs.btrfs", "-f", "-L", "scrub-" + name, *mkfs_args, *devs)
        sh("btrfs", "device", "scan", *devs)
        mnt = tempfile.mkdtemp(prefix="scrub-mnt-")
        sh("mount", "-o", "nodiscard", devs[0], mnt)
        mounts.append(mnt)
        planted = populate(mnt)
        files = file_extents(mnt, ["a.bin", "b.bin", "nocow/n.bin"])
        sh("umount", mnt)
        mounts.pop()
        # the undamaged view: usage from a ro mount, trees from progs
        sh("mount", "-o", "ro,nodiscard", devs[0], mnt)
        mounts.append(mnt)
        usage_txt = sh("btrfs", "filesystem", "usage", "-b", mnt)
        sh("umount", mnt)
        mounts.pop()
        ext_txt = sh("btrfs", "inspect-internal", "dump-tree", "-t", "extent", devs[0])
        chunk_txt = sh("btrfs", "inspect-internal", "dump-tree", "-t", "chunk", devs[0])
        chunks, devices = parse_chunks(chunk_txt)
        devid_of = {}
        for i, d in enumerate(devs):
            sup = sh("btrfs", "inspect-internal", "dump-super", d)
            devid_of[d] = int(re.search(r"dev_item.devid\s+(\d+)", sup).group(1))
        path_of = {devid_of[d]: imgs[i] for i, d in enumerate(devs)}
        # choose the damage
        corr = []
        a = files["a.bin"][0][1]
        b = files["b.bin"][0][1]
        n = files["nocow/n.bin"][0][1]
        fs_root = root_bytenr(devs[0], "FS_TREE")
        ext_root = root_bytenr(devs[0], "EXTENT_TREE")
        csum_root = root_bytenr(devs[0], "CSUM_TREE")
        nodesize = int(re.search(r"nodesize\s+(\d+)",
                                 sh("btrfs", "inspect-internal", "dump-super", devs[0])).group(1))
        dev0 = devs[0]

        def plan(logical, mirror, what, length=4096):
            m = [x for x in map_logical(dev0, logical, length) if x[0] == mirror][0]
            corr.append({"logical": logical, "mirror": mirror, "devid": devid_of[m[1]],
                         "physical": m[2], "length": length, "what": what})

        plan(a + 2 * 4096, 1, "data")
        plan(n + 4096, 1, "nodatasum")
        plan(fs_root, 2, "tree-csum", nodesize)
        plan(ext_root, 1, "tree-csum", nodesize)
        plan(csum_root, 2, "tree-header", nodesize)
        if ndev > 1:
            plan(a + 5 * 4096, 2, "data")
            plan(b + 3 * 4096, 1, "data")
            plan(b + 3 * 4096, 2, "data")
        for c in corr:
            if c["what"] == "tree-header":
                def rewrite(old):
                    blk = bytearray(old)
                    bn = int.from_bytes(blk[48:56], "little") + nodesize
                    blk[48:56] = bn.to_bytes(8, "little")
                    return bytes(blk)
                with open(path_of[c["devid"]], "r+b") as f:
                    f.seek(c["physical"])
                    blk = bytearray(f.read(nodesize))
                    blk = bytearray(rewrite(blk))
                    blk[0:4] = genlib.crc32c(bytes(blk[32:])).to_bytes(4, "little")
                    f.seek(c["physical"])
                    f.write(blk)
            else:
                off = c["physical"] + (4096 if c["what"] == "tree-csum" else 0)
                damage(path_of, c["devid"], off, flip)
        for d in devs:
            subprocess.run(["btrfs", "device", "scan", "--forget", d], capture_output=True)
        for d in devs:
            sh("losetup", "-d", d)
            loops.remove(d)
        # the kernel's scrub of the damaged copies
        kimgs = []
        for p in imgs:
            k = p + ".scrub"
            shutil.copyfile(p, k)
            kimgs.append(k)
        kdevs = [losetup(p) for p in kimgs]
        sh("btrfs", "device", "scan", *kdevs)
        sh("mount", "-o", "ro,nodiscard", kdevs[0], mnt)
        mounts.append(mnt)
        r = subprocess.run(["btrfs", "scrub", "start", "-B", "-d", "-R", "-r", mnt],
                           capture_output=True, text=True)
        scrub_txt = r.stdout + r.stderr
        sh("umount", mnt)
        mounts.pop()
        os.rmdir(mnt)
        kdev_devid = {}
        for i, d in enumerate(kdevs):
            kdev_devid[d] = i
        scrub = parse_scrub(scrub_txt)
        cleanup()
        truth = {
            "name": name, "kernel": os.uname().release,
            "progs": sh("btrfs", "--version").strip(),
            "partition_offset": PART_OFF if part else 0,
            "nodesize": nodesize, "sectorsize": 4096,
            "corruptions": corr, "scrub": scrub, "usage": parse_usage(usage_txt),
            "extents": parse_extents(ext_txt), "chunks": chunks, "devices": devices,
            "planted": planted, "files": files,
        }
        with open(os.path.join(dest, "truth.json"), "w") as f:
            json.dump(truth, f, indent=1, sort_keys=True)
            f.write("\n")
        for nm, txt in [("scrub", scrub_txt), ("usage", usage_txt), ("dump-tree-extent", ext_txt),
                        ("dump-tree-chunk", chunk_txt)]:
            with open(os.path.join(dest, "raw", nm + ".txt"), "w") as f:
                f.write(txt)
        if part:
            disk = os.path.join(work, "disk.img")
            with open(disk, "wb") as f:
                f.truncate(PART_OFF + 192 * MIB)
            sh("sfdisk", "-q", disk, input="label: dos\nstart=%d, size=%d, type=83\n"
               % (PART_OFF // 512, 192 * MIB // 512))
            sh("dd", "if=" + imgs[0], "of=" + disk, "bs=1M", "seek=1", "conv=notrunc,sparse",
               "status=none")
            sh("zstd", "-q", "-19", "--long", "-f", disk, "-o", os.path.join(dest, "disk.img.zst"))
        else:
            for i, p in enumerate(imgs):
                sh("zstd", "-q", "-19", "--long", "-f", p,
                   "-o", os.path.join(dest, "dev%d.img.zst" % (i + 1)))
    finally:
        cleanup()
        shutil.rmtree(work, ignore_errors=True)


IMAGES = {
    "mbr-dup": (1, ["-m", "dup", "-d", "single"], True),
    "raid1": (2, ["-m", "raid1", "-d", "raid1"], False),
}


def main():
    if os.getuid() != 0:
        sys.exit("gen_scrub.py: needs root (mkfs, loop, mount)")
    names = sys.argv[1:] or list(IMAGES)
    for n in names:
        build(n, *IMAGES[n])
        print("made", n)
    with open(os.path.join(OUT, "GENERATED"), "w") as f:
        f.write("kernel %s, %s\n" % (os.uname().release, sh("btrfs", "--version").strip()))


if __name__ == "__main__":
    try:
        main()
    finally:
        cleanup()
