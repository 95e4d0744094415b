# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""Populators for the log-tree crash images:
python3 gen_logtree_pop.py SCENARIO STAGE MNT

STAGE "base" builds the committed state (gen-logtree.sh syncs after it); STAGE
"fsync" makes changes that are each followed by an fsync, so they live only
in the log tree when gen-logtree.sh copies the image. Data is deterministic
(seeded), so a rebuilt image holds the same contents.
"""
import os
import random
import subprocess
import sys

K = 1024


def rnd(n, seed):
    return random.Random(seed).randbytes(n)


def text(n, seed):
    r = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "log", "tree", "fsync", "btrfs"]
    out = []
    size = 0
    while size < n:
        line = (" ".join(r.choice(words) for _ in range(r.randint(3, 12))) + "\n").encode()
        out.append(line)
        size += len(line)
    return b"".join(out)[:n]


def write(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def pwrite(path, off, data):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, off)
    finally:
        os.close(fd)


def trace(what):
    img = os.environ.get("HL_TRACE")
    if not img:
        return
    with open(img, "rb") as f:
        f.seek(0x10000 + 0x48)
        gen = int.from_bytes(f.read(8), "little")
        f.seek(0x10000 + 0x60)
        log = int.from_bytes(f.read(8), "little")
    print(f"trace: {what}: generation {gen} log_root {log}", file=sys.stderr)


def fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    trace(f"fsync {path}")


def wfsync(path, data):
    write(path, data)
    fsync(path)


def subvol(path):
    subprocess.run(["btrfs", "-q", "subvolume", "create", path], check=True)


# ---- ops: one of each common operation, each followed by an fsync
def ops_base(m):
    os.mkdir(f"{m}/a")
    os.mkdir(f"{m}/b")
    write(f"{m}/a/small.txt", b"small inline file\n")
    write(f"{m}/a/big.bin", rnd(192 * K, 1))
    write(f"{m}/a/app.txt", text(10000, 2))
    write(f"{m}/a/ren-src.txt", text(3000, 3))
    write(f"{m}/a/del.txt", b"to be deleted\n")
    write(f"{m}/a/link-src.txt", text(5000, 4))
    write(f"{m}/a/x.txt", b"xattrs\n")
    os.setxattr(f"{m}/a/x.txt", "user.keep", b"kept")
    os.setxattr(f"{m}/a/x.txt", "user.drop", b"dropped")
    os.setxattr(f"{m}/a/x.txt", "user.change", b"old value")
    write(f"{m}/a/trunc.bin", rnd(160 * K, 5))
    write(f"{m}/a/over.bin", rnd(256 * K, 6))
    write(f"{m}/a/inl-grow.txt", b"inline that grows\n")
    write(f"{m}/b/keep", b"keep\n")
    subvol(f"{m}/sv")
    write(f"{m}/sv/f", text(6000, 7))


def ops_fsync(m):
    wfsync(f"{m}/a/new.txt", text(20000, 10))
    with open(f"{m}/a/app.txt", "ab") as f:
        f.write(text(5000, 11))
        f.flush()
        os.fsync(f.fileno())
    trace("append")
    os.unlink(f"{m}/a/del.txt")
    fsync(f"{m}/a")
    # a was logged in this transaction, so renames out of it stay in the log
    os.rename(f"{m}/a/ren-src.txt", f"{m}/b/ren-dst.txt")
    fsync(f"{m}/b/ren-dst.txt")
    fsync(f"{m}/b")
    os.rename(f"{m}/a/small.txt", f"{m}/a/small-renamed.txt")
    fsync(f"{m}/a/small-renamed.txt")
    os.link(f"{m}/a/link-src.txt", f"{m}/b/hard")
    fsync(f"{m}/a/link-src.txt")
    os.setxattr(f"{m}/a/x.txt", "user.new", b"new value")
    os.setxattr(f"{m}/a/x.txt", "user.change", b"changed value, longer")
    os.removexattr(f"{m}/a/x.txt", "user.drop")
    fsync(f"{m}/a/x.txt")
    os.mkdir(f"{m}/c")
    write(f"{m}/c/one", text(100, 12))
    write(f"{m}/c/two", rnd(40 * K, 13))
    os.mkdir(f"{m}/c/d")
    write(f"{m}/c/d/three", b"three\n")
    fsync(f"{m}/c")
    os.truncate(f"{m}/a/trunc.bin", 70000)
    fsync(f"{m}/a/trunc.bin")
    pwrite(f"{m}/a/over.bin", 100 * K, rnd(8 * K, 14))
    fsync(f"{m}/a/over.bin")
    with open(f"{m}/a/inl-grow.txt", "ab") as f:
        f.write(text(9000, 15))
        f.flush()
        os.fsync(f.fileno())
    trace("append")
    wfsync(f"{m}/sv/g", text(7000, 16))


# ---- links: names: renames over files, hard links, rmdir, unlinked-but-open
def links_base(m):
    os.mkdir(f"{m}/d1")
    os.mkdir(f"{m}/d2")
    os.mkdir(f"{m}/d2/sub")
    os.mkdir(f"{m}/d1/dirA")
    write(f"{m}/d1/dirA/in-dir", b"inside a renamed dir\n")
    write(f"{m}/d1/f1", text(3000, 20))
    write(f"{m}/d1/multi", text(2000, 21))
    os.link(f"{m}/d1/multi", f"{m}/d1/multi2")
    os.link(f"{m}/d1/multi", f"{m}/d2/multi3")
    write(f"{m}/d1/victim", b"replaced by a rename\n")
    write(f"{m}/d1/ghost", b"unlinked while open\n")
    write(f"{m}/x", text(500, 22))          # lower inode number than D
    os.mkdir(f"{m}/D")
    os.rename(f"{m}/x", f"{m}/D/x")
    for i in range(40):
        write(f"{m}/d2/e{i:03d}", b"entry %d\n" % i)


def links_fsync(m):
    # a directory counts as logged in this transaction only if it changed:
    # then renames out of it stay in the log instead of forcing a commit
    for d in ("d1", "d2", "D"):
        wfsync(f"{m}/{d}/marker", b"")
        fsync(f"{m}/{d}")
    os.unlink(f"{m}/d1/multi2")
    fsync(f"{m}/d1/multi")
    write(f"{m}/d1/tmp", b"the new victim\n")
    os.rename(f"{m}/d1/tmp", f"{m}/d1/victim")
    fsync(f"{m}/d1/victim")
    os.rmdir(f"{m}/d2/sub")
    for i in range(0, 40, 3):
        os.unlink(f"{m}/d2/e{i:03d}")
    write(f"{m}/d2/late", b"added after the unlinks\n")
    fsync(f"{m}/d2")
    fd = os.open(f"{m}/d1/ghost", os.O_RDWR)
    os.unlink(f"{m}/d1/ghost")
    os.write(fd, b"written after the unlink\n")
    os.fsync(fd)
    os.close(fd)
    trace("ghost")
    os.link(f"{m}/d1/f1", f"{m}/d2/f1b")
    os.unlink(f"{m}/d1/f1")
    fsync(f"{m}/d2/f1b")
    os.rename(f"{m}/D/x", f"{m}/x2")
    fsync(f"{m}/x2")
    os.rename(f"{m}/d1/dirA", f"{m}/d1/dirB")
    fsync(f"{m}/d1/dirB")
    fsync(f"{m}/d1")


# ---- extents: prealloc past EOF, holes, many small writes, compression
def pattern_writes(path, count, seed):
    """Random data into every other 4 KiB block, in random order: @count
    extents that cannot merge, so the log holds several leaves."""
    r = random.Random(seed)
    blocks = list(range(0, 2 * count, 2))
    r.shuffle(blocks)
    fd = os.open(path, os.O_WRONLY)
    try:
        for blk in blocks:
            os.pwrite(fd, r.randbytes(4096), blk * 4096)
    finally:
        os.close(fd)


def extents_base(m):
    os.mkdir(f"{m}/e")
    write(f"{m}/e/big", rnd(512 * K, 30))
    write(f"{m}/e/pre", rnd(20 * K, 31))
    write(f"{m}/e/text", text(512 * K, 32))
    write(f"{m}/e/sparse", rnd(8 * K, 33))
    write(f"{m}/e/many", text(2048 * K, 34))
    write(f"{m}/e/inl", b"short\n")
    write(f"{m}/e/tozero", rnd(64 * K, 35))
    write(f"{m}/e/clone", rnd(192 * K, 36))


def extents_fsync(m):
    import fcntl
    # first: the many small writes make the kernel commit while flushing
    pattern_writes(f"{m}/e/many", 250, 38)
    fsync(f"{m}/e/many")
    libc = __import__("ctypes").CDLL(None, use_errno=True)
    fd = os.open(f"{m}/e/pre", os.O_RDWR)
    libc.fallocate(fd, 1, 0, 1024 * K)      # KEEP_SIZE: prealloc past EOF
    os.pwrite(fd, rnd(4 * K, 37), 24 * K)
    os.fsync(fd)
    os.close(fd)
    trace("prealloc")
    fd = os.open(f"{m}/e/big", os.O_RDWR)
    libc.fallocate(fd, 3, 128 * K, 128 * K)  # PUNCH_HOLE | KEEP_SIZE
    os.fsync(fd)
    os.close(fd)
    trace("punch")
    os.truncate(f"{m}/e/sparse", 1024 * K)
    pwrite(f"{m}/e/sparse", 600 * K, b"after a hole")
    fsync(f"{m}/e/sparse")
    pwrite(f"{m}/e/text", 100 * K, text(40 * K, 39))
    fsync(f"{m}/e/text")
    with open(f"{m}/e/inl", "ab") as f:
        f.write(b"still inline\n")
        f.flush()
        os.fdatasync(f.fileno())
    trace("fdatasync")
    os.truncate(f"{m}/e/tozero", 0)
    fsync(f"{m}/e/tozero")
    wfsync(f"{m}/e/empty", b"")
    fd = os.open(f"{m}/e/clone", os.O_RDWR)
    arg = __import__("struct").pack("qQQQ", fd, 0, 64 * K, 128 * K)
    fcntl.ioctl(fd, 0x4020940d, arg)        # FICLONERANGE within the file
    os.fsync(fd)
    os.close(fd)
    trace("clone")


# ---- holes: the same kinds of changes without NO_HOLES (explicit holes)
def holes_base(m):
    os.mkdir(f"{m}/h")
    write(f"{m}/h/a", rnd(256 * K, 40))
    write(f"{m}/h/b", rnd(64 * K, 41))


def holes_fsync(m):
    libc = __import__("ctypes").CDLL(None, use_errno=True)
    fd = os.open(f"{m}/h/a", os.O_RDWR)
    libc.fallocate(fd, 3, 64 * K, 64 * K)
    os.fsync(fd)
    os.close(fd)
    trace("punch")
    os.truncate(f"{m}/h/b", 512 * K)
    pwrite(f"{m}/h/b", 300 * K, b"data after an explicit hole")
    fsync(f"{m}/h/b")
    write(f"{m}/h/c", b"")
    os.truncate(f"{m}/h/c", 100 * K)
    fsync(f"{m}/h/c")


# ---- misc: long names into extrefs, special files, new trees, rm -rf
def misc_base(m):
    os.mkdir(f"{m}/l")
    write(f"{m}/l/target", b"many names\n")
    # 200-byte names: the INODE_REF item overflows into extrefs
    for i in range(120):
        os.link(f"{m}/l/target", f"{m}/l/" + ("n%03d" % i) * 50)
    os.mkdir(f"{m}/gone")
    os.mkdir(f"{m}/gone/sub")
    for i in range(5):
        write(f"{m}/gone/sub/f{i}", b"x" * i)
    write(f"{m}/gone/top", text(9000, 50))
    os.mkdir(f"{m}/big")
    for i in range(400):
        write(f"{m}/big/entry-with-a-longer-name-{i:04d}", b"")
    write(f"{m}/x.txt", b"xattrs\n")
    for i in range(30):
        os.setxattr(f"{m}/x.txt", f"user.attr{i:02d}", b"v" * (i * 7))
    write(f"{m}/over", b"old target of a replacing rename\n")


def misc_fsync(m):
    # hard links with 200-byte names: the INODE_REF item overflows into extrefs
    wfsync(f"{m}/l/marker", b"")
    fsync(f"{m}/l")
    for i in list(range(0, 120, 11)) + [119]:
        os.unlink(f"{m}/l/" + ("n%03d" % i) * 50)
    for i in range(120, 126):
        os.link(f"{m}/l/target", f"{m}/l/" + ("n%03d" % i) * 50)
    fsync(f"{m}/l/target")
    os.mkfifo(f"{m}/l/fifo")
    os.mknod(f"{m}/l/chr", 0o20640, os.makedev(4095, 1048575))
    os.symlink("target/../" * 30, f"{m}/l/sym")
    fsync(f"{m}/l")
    os.makedirs(f"{m}/new/a/b/c")
    wfsync(f"{m}/new/a/b/c/deep", text(5000, 51))
    subprocess.run(["rm", "-rf", f"{m}/gone"], check=True)
    fsync(m)
    for i in range(0, 400, 7):
        os.unlink(f"{m}/big/entry-with-a-longer-name-{i:04d}")
    for i in range(400, 460):
        write(f"{m}/big/entry-with-a-longer-name-{i:04d}", b"new")
    fsync(f"{m}/big")
    for i in range(0, 30, 4):
        os.removexattr(f"{m}/x.txt", f"user.attr{i:02d}")
    os.setxattr(f"{m}/x.txt", "user.attr01", b"w" * 3000)
    fsync(f"{m}/x.txt")
    write(f"{m}/new/replacer", b"replaces over\n")
    os.rename(f"{m}/new/replacer", f"{m}/over")
    fsync(f"{m}/over")
    fd = os.open(f"{m}/new", os.O_TMPFILE | os.O_RDWR, 0o600)
    os.write(fd, b"was a tmpfile\n")
    libc = __import__("ctypes").CDLL(None, use_errno=True)
    if libc.linkat(fd, b"", -100, os.fsencode(f"{m}/new/from-tmpfile"), 0x1000) != 0:
        raise OSError(__import__("ctypes").get_errno(), "linkat")   # AT_EMPTY_PATH
    os.fsync(fd)
    os.close(fd)
    trace("tmpfile")


if __name__ == "__main__":
    scen, stage, mnt = sys.argv[1], sys.argv[2], sys.argv[3]
    globals()[f"{scen}_{stage}"](mnt)
