#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Container sizes a header states: what the files can back, never more,
and never work unbounded by it (issue 26, the campaign's second round).

    python3 tests/images/test_ctrsize.py BUILD/tools/btrfsimg testdata

Built here with qemu-img from a committed raw image, then mutated, each
checksum recomputed (qcow2 has none; a VHD footer's is recomputed; a VMDK
descriptor is text). Every run is bounded by a timeout: a hang fails.

  - qcow2 virtual size 2^64 - 4096 and 2^64 - 1 (header byte 24): refused,
    exit 2 (the block count of the cache wrapped: a heap overflow, exit
    139); 2^62: more than its L1 table maps, refused as QEMU refuses it
    (verify-image ran for ever); the size its L1 table maps exactly: read;
  - a fixed VHD whose footer original_size is 1 TiB or 2^64 - 1: the disk
    is its current_size (libvhdi took original_size: 1 TiB, or the heap
    overflow); original_size 1 MiB: all of current_size read (libvhdi read
    no further than original_size); current_size 1 TiB with a 256 MiB file: damage said, the
    size the file holds read, exit 1;
  - a VMDK descriptor naming one flat file 100 times at offset 0, or twice
    at overlapping offsets: refused, exit 2 (it was a 25 GiB disk); the two
    halves of the file as two extents: read;
  - a qcow2 whose data clusters all point past its file: verify-image says
    the unreadable bytes as a few runs, not one line per 32 KiB.
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

T = imgtest.Tally()
CLI = None
TIMEOUT = 30  # seconds per run


def run(args):
    return imgtest.run_cli(CLI, args, TIMEOUT)


def sh(args):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(args), p.stderr.decode(errors="replace")))


def layers(path):
    """(exit status, the container's record, stderr) of `layers --json`."""
    rc, out, err = run(["layers", "--json", path])
    try:
        recs = [json.loads(x) for x in out.decode().splitlines()]
    except ValueError:
        recs = []
    return rc, (recs[0] if recs else {}), err


def copy(src, dst):
    shutil.copyfile(src, dst)
    return dst


def poke_be64(path, at, value):
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(struct.pack(">Q", value))


def test_qcow(raw, d):
    base = os.path.join(d, "base.qcow2")
    sh(["qemu-img", "convert", "-O", "qcow2", raw, base])
    with open(base, "rb") as f:
        h = f.read(48)
    cbits, l1n = struct.unpack(">I", h[20:24])[0], struct.unpack(">I", h[36:40])[0]
    for name, size in (("2^64-4096", (1 << 64) - 4096), ("2^64-1", (1 << 64) - 1)):
        q = copy(base, os.path.join(d, "wrap.qcow2"))
        poke_be64(q, 24, size)
        for cmd in (["layers", q], ["walk", "--json", "--hash", q]):
            rc, out, err = run(cmd)
            T.check("qcow2 size %s: %s refused, exit 2, the size named" % (name, cmd[0]),
                    rc == 2 and str(size).encode() in err, (rc, err[-300:]))
    q = copy(base, os.path.join(d, "huge.qcow2"))
    poke_be64(q, 24, 1 << 62)
    for cmd in (["layers", q], ["verify-image", q]):
        rc, out, err = run(cmd)
        T.check("qcow2 size 2^62: %s refused (L1 table too small), exit 2" % cmd[0],
                rc == 2 and b"L1 table maps" in err, (rc, err[-300:]))
    maps = l1n << (2 * cbits - 3)
    q = copy(base, os.path.join(d, "maps.qcow2"))
    poke_be64(q, 24, maps)
    rc, c, err = layers(q)
    T.check("qcow2 size = what its L1 table maps (%d): read" % maps,
            rc == 0 and c.get("size") == maps, (rc, c.get("size"), err[-300:]))


def vhd_footer(src, dst, at, value):
    """@src with the 8 bytes at @at of its footer set to @value, the
    footer's checksum (bytes 64-67: one's complement of the byte sum)
    recomputed."""
    copy(src, dst)
    with open(dst, "r+b") as f:
        f.seek(-512, 2)
        ft = bytearray(f.read(512))
        ft[at:at + 8] = struct.pack(">Q", value)
        ft[64:68] = bytes(4)
        ft[64:68] = struct.pack(">I", ~sum(ft) & 0xffffffff)
        f.seek(-512, 2)
        f.write(ft)
    return dst


def test_vhd(raw, d):
    base = os.path.join(d, "fixed.vhd")
    sh(["qemu-img", "convert", "-O", "vpc", "-o", "subformat=fixed", raw, base])
    disk = os.path.getsize(base) - 512
    for name, value in (("1 TiB", 1 << 40), ("2^64-1", (1 << 64) - 1)):
        v = vhd_footer(base, os.path.join(d, "orig.vhd"), 40, value)
        rc, c, err = layers(v)
        T.check("vhd fixed, original_size %s: the disk is current_size, exit 0" % name,
                rc == 0 and c.get("size") == disk, (rc, c.get("size"), err[-300:]))
        rc, out, err = run(["walk", "--json", "--hash", v])
        T.check("vhd fixed, original_size %s: walk --hash reads it, exit 0" % name,
                rc == 0 and len(out.splitlines()) > 10, (rc, err[-300:]))
    v = vhd_footer(base, os.path.join(d, "small.vhd"), 40, 1 << 20)
    with open(base, "rb") as f:
        want = hashlib.md5(f.read(disk)).hexdigest()
    rc, out, err = run(["verify-image", "--json", v])
    r = json.loads(out) if out else {}
    T.check("vhd fixed, original_size 1 MiB: every byte of current_size read, the file's MD5",
            rc == 0 and r.get("bytes") == disk and r.get("unreadable_ranges") == 0
            and r.get("md5") == want, (rc, r, err[-300:]))
    v = vhd_footer(base, os.path.join(d, "cur.vhd"), 48, 1 << 40)
    rc, c, err = layers(v)
    T.check("vhd fixed, current_size 1 TiB in a 256 MiB file: damage said, the file's "
            "size read, exit 1",
            rc == 1 and c.get("size") == disk and b"current_size 1099511627776" in err,
            (rc, c.get("size"), err[-300:]))
    rc, out, err = run(["verify-image", v])
    T.check("vhd fixed, current_size 1 TiB: verify-image reads the file's size, exit 1",
            rc == 1 and ("%d bytes read" % disk).encode() in out, (rc, out[:200], err[-300:]))


def test_vhd_dynamic(raw, d):
    base = os.path.join(d, "dyn.vhd")
    sh(["qemu-img", "convert", "-O", "vpc", raw, base])
    with open(base, "rb") as f:
        ft = f.read(512)
        cur = struct.unpack(">Q", ft[48:56])[0]
        f.seek(struct.unpack(">Q", ft[16:24])[0] + 28)
        ents, bsize = struct.unpack(">II", f.read(8))

    def both(dst, fields):
        """@base with its footer's 8-byte @fields {offset: value} set, in the
        footer and its copy at 0, the checksum recomputed."""
        shutil.copyfile(base, dst)
        with open(dst, "r+b") as f:
            ft = bytearray(f.read(512))
            for at, value in fields.items():
                ft[at:at + 8] = struct.pack(">Q", value)
            ft[64:68] = bytes(4)
            ft[64:68] = struct.pack(">I", ~sum(ft) & 0xffffffff)
            f.seek(0)
            f.write(ft)
            f.seek(-512, 2)
            f.write(ft)
        return dst
    v = both(os.path.join(d, "o.vhd"), {40: 1 << 40})
    rc, c, err = layers(v)
    T.check("vhd dynamic, original_size 1 TiB: the disk is current_size, exit 0",
            rc == 0 and c.get("size") == cur, (rc, c.get("size"), err[-300:]))
    v2 = both(os.path.join(d, "oc.vhd"), {40: 1 << 40, 48: 1 << 40})
    rc, c, err = layers(v2)
    T.check("vhd dynamic, both sizes 1 TiB: read as far as its block table maps, exit 1",
            rc == 1 and c.get("size") == ents * bsize and b"block table maps" in err,
            (rc, c.get("size"), ents * bsize, err[-300:]))
    rc, out, err = run(["verify-image", v2])
    T.check("vhd dynamic, both sizes 1 TiB: verify-image bounded, exit 1", rc == 1,
            (rc, err[-300:]))


def test_vmdk(raw, d):
    desc = os.path.join(d, "disk.vmdk")
    sh(["qemu-img", "convert", "-O", "vmdk", "-o", "subformat=monolithicFlat", raw, desc])
    with open(desc, "rb") as f:
        text = f.read()
    sectors = os.path.getsize(os.path.join(d, "disk-flat.vmdk")) // 512
    line = b'RW %d FLAT "disk-flat.vmdk" 0' % sectors
    if line not in text:
        raise RuntimeError("unexpected qemu-img descriptor: %r" % text[:400])
    half = sectors // 2
    cases = (
        ("the flat file listed 100 times", b"\n".join([line] * 100), 2),
        ("two extents overlapping by one sector",
         b'RW %d FLAT "disk-flat.vmdk" 0\nRW %d FLAT "disk-flat.vmdk" %d'
         % (half, half, half - 1), 2),
        ("the two halves of the file as two extents",
         b'RW %d FLAT "disk-flat.vmdk" 0\nRW %d FLAT "disk-flat.vmdk" %d'
         % (half, half, half), 0),
    )
    for name, lines, want in cases:
        m = os.path.join(d, "m.vmdk")
        with open(m, "wb") as f:
            f.write(text.replace(line, lines))
        rc, c, err = layers(m)
        if want == 2:
            T.check("vmdk, %s: refused, exit 2, the overlap named" % name,
                    rc == 2 and b"overlapping" in err, (rc, err[-300:]))
            rc, out, err = run(["verify-image", m])
            T.check("vmdk, %s: verify-image refused, exit 2" % name, rc == 2, (rc, err[-300:]))
        else:
            T.check("vmdk, %s: read, its size the file's" % name,
                    rc == 0 and c.get("size") == sectors * 512, (rc, c, err[-300:]))


def test_verify_runs(raw, d):
    q = os.path.join(d, "lost.qcow2")
    sh(["qemu-img", "convert", "-O", "qcow2", raw, q])
    with open(q, "r+b") as f:
        h = f.read(48)
        l1n, l1off = struct.unpack(">I", h[36:40])[0], struct.unpack(">Q", h[40:48])[0]
        cbits = struct.unpack(">I", h[20:24])[0]
        f.seek(l1off)
        l1 = struct.unpack(">%dQ" % l1n, f.read(8 * l1n))
        moved = 0
        for e in l1:
            l2 = e & 0x00fffffffffffe00
            if not l2:
                continue
            f.seek(l2)
            ents = list(struct.unpack(">%dQ" % (1 << (cbits - 3)), f.read(1 << cbits)))
            for i, x in enumerate(ents):
                if x & 0x00fffffffffffe00 and not x & (1 << 62):
                    ents[i] = (x & ~0x00fffffffffffe00) | (1 << 45)  # past the file
                    moved += 1
            f.seek(l2)
            f.write(struct.pack(">%dQ" % len(ents), *ents))
    rc, out, err = run(["verify-image", "--json", q])
    v = json.loads(out) if out else {}
    lines = err.count(b"\n")  # one per piece of 32 KiB: more than 60
    T.check("verify-image: %d clusters past the file said in a few lines" % moved,
            rc == 1 and moved > 20 and v.get("unreadable_ranges", 0) > 60
            and 1 <= lines < 60 and b"unreadable" in err, (rc, lines, v, err[-400:]))


def main():
    global CLI
    CLI, testdata = sys.argv[1], sys.argv[2]
    need = [t for t in ("qemu-img", "zstd") if not shutil.which(t)]
    if need:
        print("SKIP: not installed: %s (bash scripts/deps.sh)" % ", ".join(need))
        return imgtest.SKIP
    work = tempfile.mkdtemp(prefix="ctrsize-test-")
    imgtest.suppress_container_leaks(work)
    try:
        raw = imgtest.private_copy(os.path.join(testdata, "files", "subvols.img.zst"), work)
        for name, fn in (("q", test_qcow), ("h", test_vhd),
                         ("hd", test_vhd_dynamic), ("m", test_vmdk),
                         ("r", test_verify_runs)):
            d = os.path.join(work, name)
            os.makedirs(d)
            fn(raw, d)
            shutil.rmtree(d, ignore_errors=True)
    except (RuntimeError, OSError, subprocess.TimeoutExpired, imgtest.RestoreError) as e:
        T.check("building the containers", False, e)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return T.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
