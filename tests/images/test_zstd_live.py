#!/usr/bin/env python3
"""zstd frames the kernel reads, and those it refuses, against btrfsimg.

    test_zstd_live.py BTRFSIMG

Whether Linux decodes a zstd extent depends on whether the frame's stream
buffers fit its decompression workspace, not on a window cap (see
src/files/compress.c). This test asks the running kernel: it writes a 20,000-byte
compressible file to a fresh image (compress=zstd, so one regular extent of
one 4 KiB sector), then for each variant rewrites the frame header in place
(window descriptor, content size or none), mounts the image read-only with
rescue=ignoredatacsums, and reads the file. `btrfsimg cat --no-verify` must
succeed with the same bytes exactly when the kernel does, and fail otherwise.
tests/unit/test_compress.c holds the same vectors with the verdicts of 6.18.
Skipped (exit 77) without root, loop devices or btrfs.
"""
import os, struct, subprocess, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

# The two frames either side of the workspace's edge: where exactly it lies
# depends on the kernel's zstd version, measured on this one.
EDGE = {0x5a, 0x5b}
EDGE_KERNEL = (6, 18)
CONTENT = "".join("line %06d of a compressible file\n" % i for i in range(600))[:20000].encode()
# (frame header descriptor, window descriptor, content size bytes): the
# descriptor's top bits say how many content size bytes follow
VARIANTS = [
    (0x40, 0x64, 20000),    # 6 MiB window, content size given
    (0x00, 0x38, None),     # 128 KiB, no content size
    (0x00, 0x40, None),     # 256 KiB
    (0x00, 0x58, None),     # 2 MiB
    (0x00, 0x5a, None),     # 2.5 MiB: just fits (6.18)
    (0x00, 0x5b, None),     # 2.75 MiB: just does not
    (0x00, 0x5c, None),     # 3 MiB
    (0x00, 0x64, None),     # 6 MiB
    (0x80, 0x50, 1 << 20),  # 1 MiB window, content size 1 MiB (it is 20,000)
]


def run(*cmd, **kw):
    """A system command (mkfs, mount, filefrag)."""
    return subprocess.run(cmd, capture_output=True, **kw)


def make_image(work):
    img, mnt = os.path.join(work, "z.img"), os.path.join(work, "m")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(300 << 20)
    run("mkfs.btrfs", "-q", "-f", img, check=True)
    run("mount", "-o", "loop,compress=zstd", img, mnt, check=True)
    try:
        with open(os.path.join(mnt, "g"), "wb") as f:
            f.write(CONTENT)
        os.sync()  # written out and compressed, not delayed
        out = run("filefrag", "-v", os.path.join(mnt, "g"), text=True, check=True).stdout
    finally:
        run("umount", mnt, check=True)
    # "   0:        0..       4:       3328..      3332:      5:   last,encoded,eof"
    line = [l for l in out.splitlines() if l.strip().startswith("0:")][0]
    assert "encoded" in line, line
    physical = int(line.split(":")[2].split("..")[0]) * 4096
    return img, mnt, physical


def rewrite(img, physical, fhd, wd, fcs, out):
    with open(img, "rb") as f:
        data = bytearray(f.read())
    sector = data[physical:physical + 4096]
    assert sector[:4] == b"\x28\xb5\x2f\xfd" and sector[4] == 0x60, sector[:8].hex()
    body = sector[7:len(sector.rstrip(b"\0"))]  # after the 2-byte content size
    nfcs = {0: 0, 1: 2, 2: 4, 3: 8}[fhd >> 6]
    fcs_field = b"" if not nfcs else struct.pack("<Q", fcs - (256 if nfcs == 2 else 0))[:nfcs]
    frame = sector[:4] + bytes([fhd, wd]) + fcs_field + body
    data[physical:physical + 4096] = frame + b"\0" * (4096 - len(frame))
    with open(out, "wb") as f:
        f.write(data)


def kernel_reads(img, mnt):
    run("mount", "-o", "loop,ro,rescue=ignoredatacsums", img, mnt, check=True)
    try:
        with open(os.path.join(mnt, "g"), "rb") as f:
            return f.read()
    except OSError:
        return None
    finally:
        run("umount", mnt, check=True)


def main():
    cli = sys.argv[1]
    why = imgtest.skip_reason()
    if why:
        print(f"SKIP: live mount: {why}")
        return imgtest.SKIP
    tally = imgtest.Tally()
    release = imgtest.kernel_release()
    with tempfile.TemporaryDirectory(prefix="btrfsimg-zstd.") as work:
        img, mnt, physical = make_image(work)
        for fhd, wd, fcs in VARIANTS:
            if wd in EDGE and fcs is None and release != EDGE_KERNEL:
                print(f"skip window descriptor {wd:#04x}: the edge was measured on "
                      f"{EDGE_KERNEL[0]}.{EDGE_KERNEL[1]}, this is {os.uname().release}")
                continue
            name = f"fhd {fhd:#04x} window descriptor {wd:#04x} content size {fcs}"
            variant = os.path.join(work, "v.img")
            rewrite(img, physical, fhd, wd, fcs, variant)
            kernel = kernel_reads(variant, mnt)
            rc, out, err = imgtest.run_cli(cli, ["cat", "--no-verify", "--path", "g", variant])
            mine = out if rc == 0 else None
            tally.check(f"{name}: kernel {'reads' if kernel is not None else 'refuses'}, "
                        f"btrfsimg the same", kernel == mine,
                        f"kernel {None if kernel is None else len(kernel)} bytes, btrfsimg exit "
                        f"{rc} {err.decode(errors='replace')[-300:]}")
            os.unlink(variant)
    return tally.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
