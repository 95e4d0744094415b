#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Files a container names (qcow2 backing files, VMDK extent files, EWF
segments): read only where the format's tools look, only as regular files,
and the file actually read is the one reported.

    python3 tests/images/test_companions.py BUILD/tools/btrfsimg testdata

The containers are built here with qemu-img and ewfacquire from a committed
raw image, then their names are rewritten (qcow2 has no header checksum; a
VMDK descriptor is text):

  - a qcow2 backing file named as a FIFO beside the image, as a symlink to
    /dev/zero beside it, as /dev/zero, /proc/self/mem, an absolute path
    and a ../ path outside the image's folder: refused, exit 2, the file
    named, and never a hang (each run is bounded by a timeout: before the
    fix the FIFO blocked open() for ever);
  - a qcow2 backing file named by an absolute path whose last component is
    beside the image: that file is read, and `layers` says so;
  - a VMDK descriptor whose extent is an absolute path to another file of
    the same name: the one beside the descriptor is read, as libvmdk looks
    for it, and `layers` and `verify-image` name that one (the other one
    holds zeros: reading it would not give the raw image's filesystem); the
    same for "sub/NAME" and "C:\\VMs\\NAME" (which libvmdk mangled);
  - a VMDK extent file, an EWF segment, a VHD parent (a qemu-img dynamic
    VHD made differencing: disk type, parent id and name, checksums) and a
    split segment that are FIFOs: refused, named (a split one was taken for
    a missing segment).
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
TIMEOUT = 20  # seconds per run: a FIFO opened for good hangs past it


def run(args):
    return imgtest.run_cli(CLI, args, TIMEOUT)


def sh(args):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(args), p.stderr.decode(errors="replace")))
    return p.stdout.decode(errors="replace")


def layers(path):
    rc, out, err = run(["layers", "--json", path])
    try:
        recs = [json.loads(x) for x in out.decode().splitlines()]
    except ValueError:
        recs = []
    return rc, (recs[0] if recs else {}), err


def set_backing(img, name):
    """Rewrite the backing file name of the qcow2 @img to @name: the
    header's backing_file_offset (bytes 8-15, big-endian) is kept, the name
    written there and backing_file_size (bytes 16-19) set to its length."""
    with open(img, "r+b") as f:
        hdr = f.read(20)
        off = struct.unpack(">Q", hdr[8:16])[0]
        if not off:
            raise RuntimeError("%s has no backing file" % img)
        f.seek(off)
        f.write(name.encode() + b"\0" * 16)
        f.seek(16)
        f.write(struct.pack(">I", len(name.encode())))


def refused(name, args, *must):
    """@args exits 2 within the timeout, its message holding each of @must."""
    rc, out, err = run(args)
    T.check(name, rc == 2 and all(m.encode() in err for m in must), (rc, err[-400:]))


def test_qcow(raw, work):
    d = os.path.join(work, "q")
    out = os.path.join(work, "elsewhere")
    os.makedirs(d)
    os.makedirs(out)
    base = os.path.join(d, "base.qcow2")
    top = os.path.join(d, "top.qcow2")
    sh(["qemu-img", "convert", "-O", "qcow2", raw, base])
    shutil.copy(base, os.path.join(out, "other.qcow2"))
    sh(["qemu-img", "create", "-f", "qcow2", "-F", "qcow2", "-b", "base.qcow2", top])
    rc, c, err = layers(top)
    T.check("qcow2: a backing file beside the image is read",
            rc == 0 and base in c.get("segments", []), (rc, c, err[-300:]))
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    set_backing(top, "fifo")
    refused("qcow2: backing file a FIFO beside the image: refused, no hang",
            ["super", top], fifo, "is a FIFO", top)
    os.symlink("/dev/zero", os.path.join(d, "zero"))
    set_backing(top, "zero")
    refused("qcow2: backing file a symlink to /dev/zero: refused as a character device",
            ["super", top], os.path.join(d, "zero"), "is a character device")
    os.unlink(os.path.join(d, "zero"))
    for stored in ("/dev/zero", "/proc/self/mem", os.path.join(out, "other.qcow2"),
                   "../elsewhere/other.qcow2"):
        set_backing(top, stored)
        refused("qcow2: backing file '%s': not followed out of the image's folder" % stored,
                ["super", top], stored, "only the image's folder is searched", "not there")
    # an absolute name whose file lies beside the image (an image moved
    # from where it was made): that file, and layers says which
    set_backing(top, "/var/lib/libvirt/images/base.qcow2")
    rc, c, err = layers(top)
    T.check("qcow2: absolute backing name, the file of that name beside the image read",
            rc == 0 and c.get("segments") == [top, base]
            and c.get("backing_file") == base
            and c.get("backing_file_stored") == "/var/lib/libvirt/images/base.qcow2",
            (rc, c, err[-300:]))


def test_vmdk(raw, work):
    d = os.path.join(work, "v")
    out = os.path.join(work, "v-elsewhere")
    os.makedirs(d)
    os.makedirs(out)
    desc = os.path.join(d, "disk.vmdk")
    sh(["qemu-img", "convert", "-O", "vmdk", "-o", "subformat=monolithicFlat", raw, desc])
    extent = os.path.join(d, "disk-flat.vmdk")
    if not os.path.exists(extent):
        raise RuntimeError("qemu-img made no %s" % extent)
    decoy = os.path.join(out, "disk-flat.vmdk")
    with open(decoy, "wb") as f:
        f.truncate(os.path.getsize(extent))  # zeros, the same size
    with open(desc, "rb") as f:
        text = f.read().rstrip(b"\0").decode()
    if '"disk-flat.vmdk"' not in text:
        raise RuntimeError("no extent line in %s" % desc)
    with open(desc, "w") as f:
        f.write(text.replace('"disk-flat.vmdk"', '"%s"' % decoy))
    rc, c, err = layers(desc)
    T.check("vmdk: absolute extent name: layers names the file read (beside the descriptor)",
            rc == 0 and c.get("segments") == [extent], (rc, c, err[-300:]))
    rc, o, err = run(["super", desc])
    T.check("vmdk: absolute extent name: the filesystem is read (from the file beside)",
            rc == 0 and o, (rc, err[-300:]))
    md5 = hashlib.md5(open(raw, "rb").read()).hexdigest()
    rc, o, err = run(["verify-image", desc])
    T.check("vmdk: verify-image names the file it hashed (text)",
            rc == 0 and ("  file  %s\n" % extent).encode() in o
            and decoy.encode() not in o + err and md5.encode() in o, (rc, o[-400:], err[-300:]))
    rc, o, err = run(["verify-image", "--json", desc])
    v = json.loads(o) if rc == 0 and o else {}
    T.check("vmdk: verify-image names the file it hashed (JSON), the raw image's MD5",
            v.get("files") == [extent] and v.get("md5") == md5, (rc, v, err[-300:]))
    # a name with a folder that is not there, a Windows one: libvmdk
    # mangled such names (a wrong length: a name cut short, or read past)
    for stored in ("sub/disk-flat.vmdk", "C:\\VMs\\disk-flat.vmdk"):
        with open(desc, "w") as f:
            f.write(text.replace('"disk-flat.vmdk"', '"%s"' % stored))
        rc, c, err = layers(desc)
        T.check("vmdk: extent named '%s': the file beside read, named" % stored,
                rc == 0 and c.get("segments") == [extent]
                and c.get("extent_file_stored") == stored, (rc, c, err[-300:]))
    fifo = os.path.join(d, "fifo.vmdk")
    os.mkfifo(fifo)
    with open(desc, "w") as f:
        f.write(text.replace('"disk-flat.vmdk"', '"fifo.vmdk"'))
    refused("vmdk: extent file a FIFO: refused, no hang", ["super", desc], fifo, "is a FIFO")


def test_ewf(raw, work):
    d = os.path.join(work, "e")
    os.makedirs(d)
    ev = os.path.join(d, "ev")
    sh(["ewfacquire", "-u", "-q", "-t", ev, "-S", "1MiB", "-b", "16", "-c", "deflate:fast",
        raw])
    segs = sorted(x for x in os.listdir(d) if x.startswith("ev.E"))
    T.check("ewfacquire made several segments", len(segs) >= 3, segs)
    second = os.path.join(d, segs[1])
    os.unlink(second)
    os.mkfifo(second)
    refused("ewf: a segment that is a FIFO: refused, no hang", ["super", ev + ".E01"],
            second, "is a FIFO")


def vhd_checksum(b, at):
    """A VHD footer's or dynamic header's checksum: the one's complement of
    the sum of its bytes, the checksum field counted as zeros."""
    b = bytearray(b)
    b[at:at + 4] = bytes(4)
    return struct.pack(">I", ~sum(b) & 0xffffffff)


def vhd_differencing(dynamic, parent_of, out, parent):
    """The dynamic VHD @dynamic (qemu-img's) made a differencing disk of
    @parent_of (another qemu-img VHD) whose parent is named @parent: the
    footer's disk type (bytes 60-63) set to 4, the dynamic header's parent
    unique id (40-55, the parent footer's 68-83) and parent name (64-575,
    UTF-16BE) set, both checksums recomputed."""
    d = bytearray(open(dynamic, "rb").read())
    base = open(parent_of, "rb").read()
    foot = d[-512:]
    foot[60:64] = struct.pack(">I", 4)
    foot[64:68] = vhd_checksum(foot, 64)
    d[-512:] = foot
    d[0:512] = foot
    at = struct.unpack(">Q", foot[16:24])[0]
    h = d[at:at + 1024]
    h[40:56] = base[-512 + 68:-512 + 84]
    name = parent.encode("utf-16-be")
    h[64:576] = name + bytes(512 - len(name))
    h[36:40] = vhd_checksum(h, 36)
    d[at:at + 1024] = h
    with open(out, "wb") as f:
        f.write(d)


def test_vhd(raw, work):
    d = os.path.join(work, "h")
    os.makedirs(d)
    base = os.path.join(d, "base.vhd")
    child = os.path.join(d, "child.vhd")
    sh(["qemu-img", "convert", "-O", "vpc", raw, base])
    sh(["qemu-img", "convert", "-O", "vpc", raw, child])
    diff = os.path.join(d, "diff.vhd")
    vhd_differencing(child, base, diff, "C:\\VMs\\base.vhd")
    rc, c, err = layers(diff)
    T.check("vhd differencing: its parent beside it read",
            rc == 0 and c.get("type") == "differencing"
            and c.get("segments") == [diff, base], (rc, c, err[-300:]))
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    vhd_differencing(child, base, diff, "C:\\VMs\\fifo")
    refused("vhd differencing: parent a FIFO: refused, no hang", ["super", diff], fifo,
            "is a FIFO")


def test_split(raw, work):
    d = os.path.join(work, "s")
    os.makedirs(d)
    sh(["split", "-b", "10M", "-d", "-a", "3", "--numeric-suffixes=1", raw,
        os.path.join(d, "disk.img.")])
    parts = sorted(os.listdir(d))
    T.check("split made several segments", len(parts) >= 4, parts)
    third = os.path.join(d, parts[2])
    os.unlink(third)
    os.mkfifo(third)
    refused("split: a segment that is a FIFO: refused as one, not taken for missing",
            ["super", os.path.join(d, parts[0])], third, "is a FIFO")


def main():
    global CLI
    CLI, testdata = sys.argv[1], sys.argv[2]
    need = [t for t in ("ewfacquire", "qemu-img", "zstd", "split") if not shutil.which(t)]
    if need:
        print("SKIP: not installed: %s (bash scripts/deps.sh)" % ", ".join(need))
        return imgtest.SKIP
    work = tempfile.mkdtemp(prefix="companion-test-")
    imgtest.suppress_container_leaks(work)
    try:
        raw = imgtest.private_copy(os.path.join(testdata, "files", "special.img.zst"), work)
        test_qcow(raw, work)
        test_vmdk(raw, work)
        test_ewf(raw, work)
        test_vhd(raw, work)
        test_split(raw, work)
    except (RuntimeError, OSError, subprocess.TimeoutExpired, imgtest.RestoreError) as e:
        T.check("building the containers", False, e)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return T.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
