#!/usr/bin/env python3
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""Turn btrfs images into whole-image fuzz seeds (fuzz/sparse_image.h format).

    gen_sparse_seeds.py OUTDIR IMAGE[.zst]...

Keeps every non-zero 4 KiB block of the image as a record (adjacent blocks
merged up to 64 KiB - 1 bytes per record), with the checksum-fixing flag set.
"""
import os, struct, sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata"))
import genlib  # noqa: E402  (testdata/genlib.py: zstd decompression)

BLOCK = 4096

def read_image(path):
    if path.endswith(".zst"):
        return genlib.unzstd_bytes(path)
    with open(path, "rb") as f:
        return f.read()

def records(img):
    zero = bytes(BLOCK)
    run_start, run = None, bytearray()
    for off in range(0, len(img), BLOCK):
        blk = img[off:off + BLOCK]
        if blk != zero[:len(blk)] and len(run) + len(blk) < 65536:
            if run_start is None:
                run_start = off
            run += blk
            continue
        if run_start is not None:
            yield run_start, bytes(run)
        run_start, run = (off, bytearray(blk)) if blk != zero[:len(blk)] else (None, bytearray())
    if run_start is not None:
        yield run_start, bytes(run)

def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for path in sys.argv[2:]:
        img = read_image(path)
        blob = bytearray(struct.pack("<BQ", 1, len(img)))
        for off, data in records(img):
            blob += struct.pack("<QH", off, len(data)) + data
        name = os.path.basename(path).replace(".img.zst", "").replace(".img", "")
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)
        print(f"{name}: {len(blob)} bytes")

if __name__ == "__main__":
    main()
