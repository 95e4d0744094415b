#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""hostile.py: a hostile-input campaign at the level of the CLI.

Real images (the kernel-made ones under testdata/, and containers, LUKS and
LVM stacks made from them on the fly with qemu-img, ewfacquire, split and
cryptsetup) are mutated with knowledge of their structures, their checksums
recomputed so that the damage reaches the parsers behind them, and
btrfsimg's commands run over them one process at a time, each under a wall
time and an address-space limit, in a sandbox that shows what they wrote.

    python3 fuzz/hostile.py --cli build/tools/btrfsimg [--seed S] [--runs N]
        [--time-budget SECONDS] [--only CLASS,...] [--findings DIR]
    python3 fuzz/hostile.py --cli ... --seed S --replay RUN   one run again
    python3 fuzz/hostile.py --list                             the classes

Run I of seed S is the same input and command whatever else ran (its random
generator is seeded with "S:I"), so a finding is reproduced by --replay.

What counts as a finding (each saved under --findings DIR/<kind>-<class>-<run>/
with the mutated input, the command, its output, and how to replay it):
  hang       the run passed its wall-time limit (--timeout, default 20 s)
  crash      a signal, or a sanitizer report on stderr (ASan, UBSan, LSan)
  exit       an exit status outside {0, 1, 2}
  outside    a file beside DESTDIR, in the victims directory, in the
             image's directory, the working directory or TMPDIR was created,
             changed or removed (symlinks are planted where the tool writes:
             DESTDIR.manifest.jsonl pointing at a victim, a FIFO and the
             victims beside the image for containers that name other files)
  image      an image file was written (size, mtime or ctime changed)
  silent     a mutation known to make the input invalid where the command
             must use it, and yet exit 0 with nothing on stderr
Exit status: 0 no finding, 1 findings, 2 usage or setup error.
"""
import argparse
import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "testdata"))
import genlib  # noqa: E402

PASS = b"test pass"        # the passphrase tests/test_volumes.py uses
MB = 1 << 20
SANITIZER = (b"ERROR: AddressSanitizer", b"ERROR: LeakSanitizer", b"runtime error:",
             b"ERROR: UndefinedBehaviorSanitizer", b"SUMMARY: AddressSanitizer")

# Values that break assumptions: 0, 1, around powers of two, signed limits.
INTERESTING64 = [0, 1, 2, 3, 511, 512, 4095, 4096, 4097, 65536, 1 << 20, 1 << 30, 1 << 31,
                 (1 << 32) - 1, 1 << 32, 1 << 40, 1 << 50, 1 << 62, (1 << 63) - 1, 1 << 63,
                 (1 << 64) - 4096, (1 << 64) - 1]
INTERESTING32 = [0, 1, 2, 7, 8, 9, 12, 16, 31, 32, 33, 64, 128, 255, 256, 511, 512, 4096,
                 65535, 65536, 1 << 24, (1 << 31) - 1, 1 << 31, (1 << 32) - 2, (1 << 32) - 1]


def iv64(rng, old=None):
    if old is not None and rng.random() < 0.3:
        return (old + rng.choice([-1, 1, -4096, 4096, 1 << 20, -(1 << 20)])) % (1 << 64)
    return rng.choice(INTERESTING64)


def iv32(rng, old=None):
    if old is not None and rng.random() < 0.3:
        return (old + rng.choice([-1, 1, 2, 1000, -1000])) % (1 << 32)
    return rng.choice(INTERESTING32)


# ------------------------------------------------------------ the mutable input

class Input:
    """The files of one base in a working directory, patched in place and
    put back after each run (copying 256 MiB images for every run would
    cost more than the runs). Patches remember the bytes they replaced;
    file replacements keep the original aside."""

    def __init__(self, base, wd):
        self.base, self.wd = base, wd
        self.undo = []
        self.notes = []
        self.invalid = None   # why the input must be refused, when certain

    def path(self, name):
        return os.path.join(self.wd, name)

    def read(self, name, off, n):
        with open(self.path(name), "rb") as f:
            f.seek(off)
            return f.read(n)

    def size(self, name):
        return os.path.getsize(self.path(name))

    def patch(self, name, off, data, note=None):
        data = bytes(data)
        with open(self.path(name), "r+b") as f:
            f.seek(off)
            old = f.read(len(data))
            f.seek(off)
            f.write(data)
        self.undo.append(("patch", name, off, old))
        if note:
            self.notes.append(note)

    def replace(self, name, data, note=None):
        """Put @data (bytes, or None to remove) in place of file @name."""
        keep = self.path(name) + ".orig-hostile"
        if os.path.lexists(self.path(name)):
            os.rename(self.path(name), keep)
        else:
            keep = None
        if data is not None:
            with open(self.path(name), "wb") as f:
                f.write(data)
        self.undo.append(("file", name, keep, None))
        if note:
            self.notes.append(note)

    def restore(self):
        for kind, name, a, b in reversed(self.undo):
            if kind == "patch":
                with open(self.path(name), "r+b") as f:
                    f.seek(a)
                    f.write(b)
            else:
                if os.path.lexists(self.path(name)):
                    os.unlink(self.path(name))
                if a:
                    os.rename(a, self.path(name))
        self.undo = []


# ------------------------------------------------------------ bases

def sh(args, **kw):
    return subprocess.run(args, check=True, capture_output=True, timeout=600, **kw)


def data_ranges(path, limit=None):
    """The (offset, length) ranges of a sparse file that hold data."""
    out = []
    fd = os.open(path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size
        off = 0
        while off < end:
            try:
                d = os.lseek(fd, off, os.SEEK_DATA)
            except OSError:
                break
            h = os.lseek(fd, d, os.SEEK_HOLE)
            out.append((d, h - d))
            off = h
            if limit and d > limit:
                break
    finally:
        os.close(fd)
    return out


class Base:
    """One prepared input: files in a directory, the arguments that open
    it, and facts found once (tree blocks, paths to cat, ids to recover)."""

    def __init__(self, name, kind, wd, files, args, container=False, fs=True):
        self.name, self.kind, self.wd, self.files = name, kind, wd, files
        self.args = args
        self.container = container
        self.fs = fs          # holds a btrfs (else a partition table alone)
        self.blocks = None
        self.super = None
        self.cat_paths = None
        self.deleted_ids = None
        self.live = set()

    def image_args(self):
        return [os.path.join(self.wd, f) for f in self.files if not f.startswith("-")]


class Bases:
    def __init__(self, cli, testdata, work, luks_encrypt):
        self.cli, self.td, self.work, self.enc = cli, testdata, work, luks_encrypt
        self.cache = {}
        self.passfile = os.path.join(work, "pass")
        with open(self.passfile, "wb") as f:
            f.write(PASS)

    def get(self, name):
        if name not in self.cache:
            wd = os.path.join(self.work, "base", name)
            if os.path.isdir(wd):
                shutil.rmtree(wd)
            os.makedirs(wd)
            b = getattr(self, "make_" + name.replace("-", "_"))(name, wd)
            self.check(b)
            self.cache[name] = b
        return self.cache[name]

    def check(self, b):
        """The unmutated base must open cleanly (else the campaign would
        only ever test the error path): walk exits 0, or layers for a bare
        partition table."""
        argv = [self.cli, "walk", "--json", "--hash"] + b.args + b.image_args() if b.fs else \
            [self.cli, "layers"] + b.image_args()
        p = subprocess.run(argv, capture_output=True, timeout=600)
        if p.returncode != 0 or p.stderr.strip():
            raise RuntimeError("base %s does not open cleanly: %s: exit %d: %s" % (
                b.name, " ".join(argv), p.returncode, p.stderr.decode(errors="replace")[-500:]))
        b.cat_paths = []
        for line in p.stdout.splitlines() if b.fs else []:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if isinstance(r.get("mode"), int) and stat.S_ISREG(r["mode"]) and \
                    r.get("size", 0) > 0 and isinstance(r.get("path"), str):
                b.cat_paths.append(r["path"])
        b.cat_paths = b.cat_paths[:50]
        b.deleted_ids = []
        if b.kind == "btrfs":
            p = subprocess.run([self.cli, "deleted", "--json"] + b.args + b.image_args(),
                               capture_output=True, timeout=600)
            for line in p.stdout.splitlines():
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if "id" in r:
                    b.deleted_ids.append(r["id"])
            b.deleted_ids = b.deleted_ids[:50]

    def unz(self, rel, wd, out):
        genlib_path = os.path.join(self.td, rel)
        p = subprocess.run(["zstd", "-q", "-d", "-f", "--long=31", "--sparse", genlib_path,
                            "-o", os.path.join(wd, out)], capture_output=True)
        if p.returncode:
            raise RuntimeError("zstd -d %s: %s" % (rel, p.stderr.decode(errors="replace")))
        return out

    def raw(self, rel):
        """A decompressed copy of testdata/@rel kept once, to build others from."""
        d = os.path.join(self.work, "raw")
        os.makedirs(d, exist_ok=True)
        out = os.path.basename(rel)[:-4]
        if not os.path.exists(os.path.join(d, out)):
            self.unz(rel, d, out)
        return os.path.join(d, out)

    # plain btrfs (kernel-made)
    def _plain(self, name, wd, rel):
        f = self.unz(rel, wd, "fs.img")
        return Base(name, "btrfs", wd, [f], [])

    def make_subvols(self, n, wd):
        return self._plain(n, wd, "files/subvols.img.zst")

    def make_names(self, n, wd):
        return self._plain(n, wd, "files/names.img.zst")

    def make_special(self, n, wd):
        return self._plain(n, wd, "files/special.img.zst")

    def make_comp(self, n, wd):
        return self._plain(n, wd, "files/comp.img.zst")

    def make_holes(self, n, wd):
        return self._plain(n, wd, "files/holes.img.zst")

    # forensic images (stale leaves, deleted files)
    def make_single(self, n, wd):
        return self._plain(n, wd, "forensic/single.img.zst")

    def make_churn(self, n, wd):
        return self._plain(n, wd, "forensic/churn.img.zst")

    def make_orphan(self, n, wd):
        return self._plain(n, wd, "forensic/orphan.img.zst")

    def make_wrap(self, n, wd):
        return self._plain(n, wd, "forensic/wrap.img.zst")

    # partitioned
    def make_gpt1(self, n, wd):
        return Base(n, "gpt", wd, [self.unz("images/gpt1/disk.img.zst", wd, "disk.img")], [])

    def make_gpt2(self, n, wd):
        return Base(n, "gpt", wd, [self.unz("images/gpt2/disk.img.zst", wd, "disk.img")],
                    ["--partition", "2"])

    def make_gpt4k(self, n, wd):   # 4096-byte sectors, no filesystem
        return Base(n, "gpt", wd, [self.unz("part/gpt4k.img.zst", wd, "disk.img")], [], fs=False)

    def make_mbr1(self, n, wd):
        return Base(n, "mbr", wd, [self.unz("images/mbr1/disk.img.zst", wd, "disk.img")], [])

    def make_mbrext(self, n, wd):
        return Base(n, "mbr", wd, [self.unz("part/mbr-ext.img.zst", wd, "disk.img")], [], fs=False)

    # LVM2 (made by lvm2's tools, committed)
    def make_gptlvm(self, n, wd):
        return Base(n, "lvm", wd, [self.unz("volume/gpt-lvm.img.zst", wd, "disk.img")], [])

    def make_pvab(self, n, wd):
        a = self.unz("volume/pv-a.img.zst", wd, "pv-a.img")
        b = self.unz("volume/pv-b.img.zst", wd, "pv-b.img")
        return Base(n, "lvm", wd, [a, b], ["--partition", "vgm/data"])

    # LUKS, made here: cryptsetup's header, the payload encrypted by
    # tests/luks_encrypt (plaintext when it is not built: headers only)
    def _luks(self, n, wd, fmt, mode, sector):
        plain = self.raw("files/subvols.img.zst")
        vol = os.path.join(wd, "vol.luks")
        hdr = 16 * MB
        with open(vol, "wb") as f:
            f.truncate(hdr + os.path.getsize(plain))
        sh(["cryptsetup", "luksFormat", "-q", "--key-file", self.passfile] + fmt + [vol])
        key = os.path.join(self.work, n + ".key")
        if os.path.exists(key):
            os.unlink(key)
        sh(["cryptsetup", "luksDump", "-q", "--dump-volume-key", "--volume-key-file", key,
            "--key-file", self.passfile, vol])
        dump = sh(["cryptsetup", "luksDump", vol]).stdout.decode()
        off = None
        for line in dump.splitlines():
            w = line.split()
            if line.startswith("Payload offset:"):
                off = int(w[2]) * 512
            elif w[:1] == ["offset:"] and off is None:
                off = int(w[1])
        if self.enc and os.access(self.enc, os.X_OK):
            sh([self.enc, key, mode, str(sector), plain, vol, str(off)])
        return Base(n, "luks", wd, ["vol.luks"], ["--passphrase-file", self.passfile])

    def make_luks1(self, n, wd):
        return self._luks(n, wd, ["--type", "luks1", "--pbkdf-force-iterations", "1000"],
                          "xts-plain64", 512)

    def make_luks2(self, n, wd):
        return self._luks(n, wd, ["--type", "luks2", "--pbkdf", "pbkdf2", "--hash", "sha256",
                                  "--pbkdf-force-iterations", "1000", "--sector-size", "4096"],
                          "xts-plain64", 4096)

    def make_luks2a(self, n, wd):
        return self._luks(n, wd, ["--type", "luks2", "--pbkdf", "argon2id",
                                  "--pbkdf-force-iterations", "4", "--pbkdf-memory", "32",
                                  "--pbkdf-parallel", "1", "--sector-size", "4096"],
                          "xts-plain64", 4096)

    # containers, made from subvols.img
    def _qemu(self, n, wd, args, out, files=None):
        sh(["qemu-img", "convert"] + args + [self.raw("files/subvols.img.zst"),
                                             os.path.join(wd, out)])
        plant(wd)
        return Base(n, "container", wd, files or [out], [], container=True)

    def make_qcow2(self, n, wd):
        return self._qemu(n, wd, ["-O", "qcow2"], "disk.qcow2")

    def make_qcow2c(self, n, wd):
        return self._qemu(n, wd, ["-c", "-O", "qcow2"], "disk.qcow2")

    def make_vmdk(self, n, wd):
        return self._qemu(n, wd, ["-O", "vmdk"], "disk.vmdk")

    def make_vmdkflat(self, n, wd):
        return self._qemu(n, wd, ["-O", "vmdk", "-o", "subformat=monolithicFlat"], "disk.vmdk")

    def make_vhd(self, n, wd):
        return self._qemu(n, wd, ["-O", "vpc"], "disk.vhd")

    def make_vhdfixed(self, n, wd):
        return self._qemu(n, wd, ["-O", "vpc", "-o", "subformat=fixed"], "disk.vhd")

    def make_vhdx(self, n, wd):
        return self._qemu(n, wd, ["-O", "vhdx"], "disk.vhdx")

    def make_e01(self, n, wd):
        sh(["ewfacquire", "-u", "-q", "-t", os.path.join(wd, "disk"), "-S", "64MiB", "-b", "64",
            "-c", "deflate:fast", self.raw("files/subvols.img.zst")], stdin=subprocess.DEVNULL)
        plant(wd)
        return Base(n, "container", wd, ["disk.E01"], [], container=True)

    def make_split(self, n, wd):
        sh(["split", "-b", "32M", "-d", "-a", "3", "--numeric-suffixes=1",
            self.raw("files/subvols.img.zst"), os.path.join(wd, "disk.")])
        plant(wd)
        return Base(n, "container", wd, ["disk.001"], [], container=True)


def plant(wd):
    """What a hostile container may name beside itself: a FIFO (a reader
    that opens it blocks), and a victim that must never be written."""
    if not os.path.exists(os.path.join(wd, "fifo")):
        os.mkfifo(os.path.join(wd, "fifo"))
    with open(os.path.join(wd, "victim"), "wb") as f:
        f.write(b"victim beside the image\n")


# ------------------------------------------------------------ btrfs

SB_OFF = 64 * 1024
HDR = 101
ITEM = 25


def le(b, off, n):
    return int.from_bytes(b[off:off + n], "little")


def put(b, off, n, v, big=False):
    b[off:off + n] = (v % (1 << (8 * n))).to_bytes(n, "big" if big else "little")


def read_super(inp, name):
    sb = inp.read(name, SB_OFF, 4096)
    if sb[0x40:0x48] != b"_BHRfS_M":
        return None
    return {"fsid": sb[0x20:0x30], "gen": le(sb, 0x48, 8), "nodesize": le(sb, 0x94, 4),
            "sectorsize": le(sb, 0x90, 4), "csum": le(sb, 0xc4, 2), "metauuid": sb[0x20:0x30]}


def find_blocks(path, sb):
    """Tree blocks by their header: (offset, level, generation, nritems),
    at every sectorsize step of the data ranges (stale ones too)."""
    out = []
    ns, ss = sb["nodesize"], sb["sectorsize"]
    with open(path, "rb") as f:
        for off, n in data_ranges(path):
            f.seek(off)
            buf = f.read(n)
            start = (-off) % ss
            for i in range(start, len(buf) - ns + 1, ss):
                if buf[i + 32:i + 48] != sb["fsid"] and i + 32 < len(buf):
                    continue
                level, nr = buf[i + 100], le(buf, i + 96, 4)
                if level > 7 or nr == 0 or nr > ns // 17:
                    continue
                out.append((off + i, level, le(buf, i + 80, 8), nr))
    return out


def chunk_map(sb_raw, blocks_at):
    """[(logical, length, physical)] of a single-device filesystem: the
    superblock's system chunks, then the chunk tree's items."""
    out = []

    def add(buf, p):
        if p + 48 + 32 > len(buf):
            return
        out.append((le(buf, p - 8, 8), le(buf, p, 8), le(buf, p + 56, 8)))

    arr = sb_raw[0x32b:0x32b + min(le(sb_raw, 0xa0, 4), 2048)]
    p = 0
    while p + 17 + 48 <= len(arr):
        add(arr, p + 17)
        p += 17 + 48 + 32 * max(le(arr, p + 17 + 44, 2), 1)
    for blk in walk_tree(le(sb_raw, 0x58, 8), out, blocks_at, set()):
        for it in items(blk):
            if it["type"] == 228 and it["size"] >= 80:
                out.append((it["koff"], le(blk, it["doff"], 8), le(blk, it["doff"] + 56, 8)))
    return out


def to_phys(cmap, logical):
    for lo, n, ph in cmap:
        if lo <= logical < lo + n:
            return ph + logical - lo
    return None


def walk_tree(logical, cmap, blocks_at, seen, depth=0):
    """The blocks of the tree at @logical (leaves yielded, nodes followed)."""
    ph = to_phys(cmap, logical)
    if ph is None or ph in seen or depth > 8 or ph not in blocks_at:
        return
    seen.add(ph)
    blk = blocks_at[ph]()
    if blk[100] == 0:
        yield blk
        return
    for i in range(min(le(blk, 96, 4), (len(blk) - HDR) // 33)):
        yield from walk_tree(le(blk, HDR + 33 * i + 17, 8), cmap, blocks_at, seen, depth + 1)


def live_blocks(inp):
    """Physical offsets of the blocks reachable from the superblock's roots."""
    b = inp.base
    name, ns = b.files[0], b.super["nodesize"]
    sb_raw = inp.read(name, SB_OFF, 4096)
    offs = {x[0] for x in b.blocks}
    blocks_at = {o: (lambda o=o: inp.read(name, o, ns)) for o in offs}
    try:
        cmap = chunk_map(sb_raw, blocks_at)
        seen = set()
        roots = [le(sb_raw, 0x50, 8), le(sb_raw, 0x58, 8)]
        for blk in walk_tree(roots[0], cmap, blocks_at, seen):
            for it in items(blk):
                if it["type"] == 132 and it["size"] >= 184:
                    roots.append(le(blk, it["doff"] + 176, 8))
        for r in roots[1:]:
            for _ in walk_tree(r, cmap, blocks_at, seen):
                pass
    except (IndexError, ValueError):
        return set()
    return seen


def resum(blk):
    put(blk, 0, 32, 0)
    blk[0:4] = genlib.crc32c(bytes(blk[32:])).to_bytes(4, "little")


def block_ok(blk):
    return le(blk, 0, 4) == genlib.crc32c(bytes(blk[32:]))


def prepare_btrfs(inp):
    b = inp.base
    if b.blocks is None:
        name = b.files[0]
        b.super = read_super(inp, name)
        b.blocks = find_blocks(inp.path(name), b.super) if b.super else []
        b.live = live_blocks(inp) if b.blocks else set()
    return b.super and b.super["csum"] == 0 and b.blocks


def pick_block(inp, rng, leaf=None, stale=False):
    b = inp.base
    cands = [x for x in b.blocks if leaf is None or (x[1] == 0) == leaf]
    live = [x for x in cands if x[0] in b.live]
    if stale:   # blocks no root reaches: what history and deleted read
        cands = [x for x in cands if x[0] not in b.live] or cands
    elif live and rng.random() < 0.85:
        cands = live
    for _ in range(30):
        if not cands:
            return None, None
        off = rng.choice(cands)[0]
        blk = bytearray(inp.read(b.files[0], off, b.super["nodesize"]))
        if block_ok(blk):
            return off, blk
    return None, None


def items(blk):
    n = min(le(blk, 96, 4), (len(blk) - HDR) // ITEM)
    out = []
    for i in range(n):
        p = HDR + i * ITEM
        out.append({"slot": i, "at": p, "obj": le(blk, p, 8), "type": blk[p + 8],
                    "koff": le(blk, p + 9, 8), "doff": HDR + le(blk, p + 17, 4),
                    "size": le(blk, p + 21, 4)})
    return out


CRAFTED = [b"/", b".", b"..", b"a/b", b"x\0y", b"../", b"\0", b"/etc", b"..\0"]


def craft_name(rng, old):
    n = len(old)
    pick = rng.randrange(5)
    if pick == 0 and n >= 1:
        new = bytearray(old)
        new[rng.randrange(n)] = ord("/")
    elif pick == 1 and n >= 1:
        new = bytearray(old)
        new[rng.randrange(n)] = 0
    elif pick == 2:
        w = rng.choice([b".", b".."])
        new = w + b"/" * (n - len(w)) if n > len(w) else w[:n] if n else old
        new = bytearray(new)
        if n > len(w):
            new = bytearray(w) + bytearray(old[len(w):])
            new = bytearray(b"../" * (n // 3) + b"." * (n % 3)) if rng.random() < 0.5 else \
                bytearray(b"..") + bytearray(b"/" * (n - 2)) if n >= 2 else new
    else:
        w = rng.choice(CRAFTED)
        new = bytearray((w * (n // max(len(w), 1) + 1))[:n])
    return bytes(new[:n]).ljust(n, b".")


def name_hash(name):
    return genlib.crc32c_raw(0xFFFFFFFE, name)


def mutate_dir_item(rng, blk, it, inp):
    d, size = it["doff"], it["size"]
    if size < 30 or d + 30 > len(blk):
        return False
    name_len = le(blk, d + 27, 2)
    data_len = le(blk, d + 25, 2)
    what = rng.randrange(7)
    if what <= 2 and 0 < name_len and d + 30 + name_len <= len(blk):
        old = bytes(blk[d + 30:d + 30 + name_len])
        new = craft_name(rng, old)
        blk[d + 30:d + 30 + name_len] = new
        if it["type"] == 84 and rng.random() < 0.8:   # DIR_ITEM: the key is the name's hash
            put(blk, it["at"] + 9, 8, name_hash(new))
        inp.notes.append("dir item name %r -> %r" % (old, new))
    elif what == 3:
        v = rng.choice([0, 1, 255, 256, 4095, 65535, name_len + 1, name_len - 1, size])
        put(blk, d + 27, 2, v)
        inp.notes.append("dir item name_len %d -> %d (item size %d)" % (name_len, v, size))
    elif what == 4:
        v = rng.choice([0, 1, 65535, size, data_len + 8])
        put(blk, d + 25, 2, v)
        inp.notes.append("dir item data_len %d -> %d" % (data_len, v))
    elif what == 5:
        obj = le(blk, d, 8)
        v = rng.choice([0, 1, 5, 6, 256, 257, obj + 1, (1 << 64) - 1, (1 << 64) - 256])
        put(blk, d, 8, v)
        inp.notes.append("dir item location %d -> %d" % (obj, v))
    else:
        t = blk[d + 29]
        v = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 255])
        blk[d + 29] = v
        inp.notes.append("dir item type %d -> %d" % (t, v))
    return True


def mutate_item(rng, blk, it, inp):
    """One field of the item @it, by its type. True when something changed."""
    d, size, t = it["doff"], it["size"], it["type"]
    if d + size > len(blk):
        return False
    if t == 1 and size >= 160:                       # INODE_ITEM
        f = rng.choice([("size", 16, 8), ("nbytes", 24, 8), ("nlink", 40, 4),
                        ("mode", 52, 4), ("flags", 64, 8), ("size", 16, 8)])
        old = le(blk, d + f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old)
        if f[0] == "mode":
            v = (old & 0o7777) | rng.choice([0, 0o010000, 0o020000, 0o040000, 0o060000,
                                             0o100000, 0o120000, 0o140000, 0o170000])
        put(blk, d + f[1], f[2], v)
        inp.notes.append("inode %d %s %d -> %d" % (it["obj"], f[0], old, v))
    elif t in (84, 96):                              # DIR_ITEM, DIR_INDEX
        return mutate_dir_item(rng, blk, it, inp)
    elif t == 12 and size >= 10:                     # INODE_REF
        nl = le(blk, d + 8, 2)
        if rng.random() < 0.6 and nl and d + 10 + nl <= d + size:
            old = bytes(blk[d + 10:d + 10 + nl])
            new = craft_name(rng, old)
            blk[d + 10:d + 10 + nl] = new
            inp.notes.append("inode ref name %r -> %r" % (old, new))
        else:
            v = rng.choice([0, 1, 255, 65535, nl + 1, size])
            put(blk, d + 8, 2, v)
            inp.notes.append("inode ref name_len %d -> %d" % (nl, v))
    elif t == 108 and size >= 21:                    # EXTENT_DATA
        fields = [("ram_bytes", 8, 8), ("compression", 16, 1), ("type", 20, 1)]
        if blk[d + 20] != 0 and size >= 53:
            fields += [("disk_bytenr", 21, 8), ("disk_num_bytes", 29, 8), ("offset", 37, 8),
                       ("num_bytes", 45, 8)] * 2
        f = rng.choice(fields)
        old = le(blk, d + f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else rng.choice([0, 1, 2, 3, 4, 5, 7, 255])
        put(blk, d + f[1], f[2], v)
        inp.notes.append("extent %d@%d %s %d -> %d" % (it["obj"], it["koff"], f[0], old, v))
    elif t == 132 and size >= 239:                   # ROOT_ITEM
        f = rng.choice([("bytenr", 176, 8), ("generation", 160, 8), ("level", 238, 1),
                        ("root_dirid", 168, 8), ("refs", 216, 4), ("drop_level", 237, 1)])
        old = le(blk, d + f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) if f[2] == 4 else \
            rng.choice([0, 1, 7, 8, 255])
        put(blk, d + f[1], f[2], v)
        inp.notes.append("root item %d %s %d -> %d" % (it["obj"], f[0], old, v))
    elif t == 228 and size >= 80:                    # CHUNK_ITEM
        f = rng.choice([("length", 0, 8), ("stripe_len", 16, 8), ("type", 24, 8),
                        ("sector_size", 40, 4), ("num_stripes", 44, 2), ("sub_stripes", 46, 2),
                        ("stripe0.devid", 48, 8), ("stripe0.offset", 56, 8)])
        old = le(blk, d + f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old)
        put(blk, d + f[1], f[2], v)
        inp.notes.append("chunk %d %s %d -> %d" % (it["koff"], f[0], old, v))
    elif size > 0:                                   # anything else: flip bytes of its data
        for _ in range(rng.randint(1, 4)):
            o = d + rng.randrange(size)
            blk[o] ^= 1 << rng.randrange(8)
        inp.notes.append("item %d type %d: bytes flipped" % (it["obj"], t))
    else:
        return False
    return True


def mutate_key(rng, blk, it, inp):
    f = rng.choice([("objectid", 0, 8), ("type", 8, 1), ("offset", 9, 8),
                    ("data offset", 17, 4), ("data size", 21, 4)])
    old = le(blk, it["at"] + f[1], f[2])
    v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) if f[2] == 4 else rng.randrange(256)
    put(blk, it["at"] + f[1], f[2], v)
    inp.notes.append("slot %d key %s %d -> %d" % (it["slot"], f[0], old, v))


def mutate_header(rng, blk, inp):
    f = rng.choice([("bytenr", 48, 8), ("generation", 80, 8), ("owner", 88, 8),
                    ("nritems", 96, 4), ("level", 100, 1), ("flags", 56, 8)])
    old = le(blk, f[1], f[2])
    v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) if f[2] == 4 else rng.choice(
        [0, 1, 2, 7, 8, 255])
    put(blk, f[1], f[2], v)
    inp.notes.append("header %s %d -> %d" % (f[0], old, v))


def mutate_node_ptr(rng, blk, inp):
    n = min(le(blk, 96, 4), (len(blk) - HDR) // 33)
    if not n:
        return mutate_header(rng, blk, inp)
    p = HDR + rng.randrange(n) * 33
    f = rng.choice([("blockptr", 17, 8), ("gen", 25, 8), ("key.objectid", 0, 8),
                    ("key.offset", 9, 8)])
    old = le(blk, p + f[1], f[2])
    if f[0] == "blockptr" and rng.random() < 0.5:
        v = le(blk, 48, 8)   # itself: a cycle
    else:
        v = iv64(rng, old)
    put(blk, p + f[1], f[2], v)
    inp.notes.append("node ptr %s %d -> %d" % (f[0], old, v))


def write_block(inp, off, blk, do_resum=True):
    if do_resum:
        resum(blk)
    inp.patch(inp.base.files[0], off, blk)


def mut_btrfs_item(inp, rng, stale=False, types=None):
    if not prepare_btrfs(inp):
        return False
    for _ in range(20):
        off, blk = pick_block(inp, rng, leaf=True, stale=stale)
        if off is None:
            return False
        its = [it for it in items(blk) if types is None or it["type"] in types]
        if not its:
            continue
        it = rng.choice(its)
        if rng.random() < 0.1:
            mutate_key(rng, blk, it, inp)
        elif not mutate_item(rng, blk, it, inp):
            continue
        inp.notes.insert(0, "leaf at byte %d (gen %d)" % (off, le(blk, 80, 8)))
        write_block(inp, off, blk)
        return True
    return False


def mut_btrfs_node(inp, rng):
    if not prepare_btrfs(inp):
        return False
    leaf = rng.random() < 0.3
    off, blk = pick_block(inp, rng, leaf=leaf)
    if off is None:
        off, blk = pick_block(inp, rng)
        if off is None:
            return False
    if blk[100] and rng.random() < 0.6:
        mutate_node_ptr(rng, blk, inp)
    else:
        mutate_header(rng, blk, inp)
    inp.notes.insert(0, "block at byte %d level %d" % (off, blk[100]))
    write_block(inp, off, blk)
    return True


def mut_btrfs_flip(inp, rng):
    if not prepare_btrfs(inp):
        return False
    name = inp.base.files[0]
    if rng.random() < 0.75:
        off, blk = pick_block(inp, rng, stale=rng.random() < 0.5)
        if off is None:
            return False
        n = rng.randint(1, 16)
        for _ in range(n):
            o = rng.randrange(32, len(blk))
            blk[o] = rng.randrange(256) if rng.random() < 0.3 else blk[o] ^ (1 << rng.randrange(8))
        inp.notes.append("block at byte %d: %d bytes flipped, checksum recomputed" % (off, n))
        write_block(inp, off, blk)
        return True
    ranges = data_ranges(inp.path(name))
    for _ in range(rng.randint(1, 32)):
        o, n = rng.choice(ranges)
        at = o + rng.randrange(n)
        inp.patch(name, at, bytes([rng.randrange(256)]))
    inp.notes.append("random bytes replaced, no checksum recomputed")
    return True


SUPER_FIELDS = [("bytenr", 0x30, 8), ("generation", 0x48, 8), ("root", 0x50, 8),
                ("chunk_root", 0x58, 8), ("log_root", 0x60, 8), ("total_bytes", 0x70, 8),
                ("bytes_used", 0x78, 8), ("root_dir", 0x80, 8), ("num_devices", 0x88, 8),
                ("sectorsize", 0x90, 4), ("nodesize", 0x94, 4), ("stripesize", 0x9c, 4),
                ("sys_chunk_array_size", 0xa0, 4), ("chunk_root_generation", 0xa4, 8),
                ("incompat_flags", 0xbc, 8), ("root_level", 0xc6, 1), ("chunk_root_level", 0xc7, 1),
                ("log_root_level", 0xc8, 1), ("dev_item.devid", 0xc9, 8),
                ("dev_item.total_bytes", 0xd1, 8)]


def mut_btrfs_super(inp, rng):
    name = inp.base.files[0]
    sb = bytearray(inp.read(name, SB_OFF, 4096))
    if sb[0x40:0x48] != b"_BHRfS_M" or le(sb, 0xc4, 2) != 0:
        return False
    if rng.random() < 0.25:        # in the system chunk array
        n = le(sb, 0xa0, 4)
        if 0 < n <= 2048:
            o = 0x32b + rng.randrange(n)
            sb[o] = rng.randrange(256)
            inp.notes.append("sys_chunk_array byte %d replaced" % (o - 0x32b))
    else:
        f = rng.choice(SUPER_FIELDS)
        old = le(sb, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) if f[2] == 4 else rng.choice(
            [0, 1, 7, 8, 255])
        put(sb, f[1], f[2], v)
        inp.notes.append("superblock %s %d -> %d" % (f[0], old, v))
    sb[0:32] = bytes(32)
    sb[0:4] = genlib.crc32c(bytes(sb[32:])).to_bytes(4, "little")
    inp.patch(name, SB_OFF, sb)
    return True


def mut_names(inp, rng):
    if not prepare_btrfs(inp):
        return False
    if inp.base.name == "special" and rng.random() < 0.15:
        return mut_symlink_escape(inp, rng)
    if rng.random() < 0.3:
        return mut_dir_disagree(inp, rng)
    return mut_btrfs_item(inp, rng, types=(84, 96, 12))


def mut_dir_disagree(inp, rng):
    """DIR_ITEM and DIR_INDEX of one entry made to disagree: another
    location, type or name (same length) in one of them only."""
    for _ in range(20):
        off, blk = pick_block(inp, rng, leaf=True)
        if off is None:
            return False
        its = [it for it in items(blk) if it["type"] == 96 and it["size"] >= 31]
        if not its:
            continue
        it = rng.choice(its)
        d = it["doff"]
        what = rng.randrange(3)
        if what == 0:
            v = le(blk, d, 8) + rng.choice([1, 2, -1, 1000])
            put(blk, d, 8, v)
            inp.notes.append("DIR_INDEX %d of dir %d: location -> %d, DIR_ITEM unchanged"
                             % (it["koff"], it["obj"], v))
        elif what == 1:
            blk[d + 29] = rng.choice([1, 2, 7])
            inp.notes.append("DIR_INDEX %d of dir %d: type -> %d, DIR_ITEM unchanged"
                             % (it["koff"], it["obj"], blk[d + 29]))
        else:
            nl = le(blk, d + 27, 2)
            if not nl or d + 30 + nl > len(blk):
                continue
            o = d + 30 + rng.randrange(nl)
            blk[o] = ord("A") if blk[o] != ord("A") else ord("B")
            inp.notes.append("DIR_INDEX %d of dir %d: name -> %r, DIR_ITEM unchanged"
                             % (it["koff"], it["obj"], bytes(blk[d + 30:d + 30 + nl])))
        inp.notes.insert(0, "leaf at byte %d" % off)
        write_block(inp, off, blk)
        return True
    return False


SHORT_VICTIM = "/tmp/hv" + "".join(random.Random(os.getpid()).choice("abcdefghjkmnpqrstuvwxyz")
                                   for _ in range(6))   # 13 bytes: fits an inline symlink


def mut_symlink_escape(inp, rng):
    """special.img's symlinks/: "rel" (13 bytes, inline) retargeted at an
    absolute victim outside the sandbox, and the entry "abs" renamed "rel"
    and pointed at the regular file meta/m0000 (in its DIR_INDEX): an extract that follows the symlink it just made
    writes the file's bytes into the victim."""
    if inp.base.name != "special" or not prepare_btrfs(inp):
        return False
    ns = inp.base.super["nodesize"]
    done = set()
    for off in sorted(inp.base.live):
        blk = bytearray(inp.read(inp.base.files[0], off, ns))
        if blk[100] != 0:
            continue
        touched = False
        for it in items(blk):
            d = it["doff"]
            if it["obj"] == 268 and it["type"] == 108 and blk[d + 20] == 0 and it["size"] == 34:
                blk[d + 21:d + 34] = SHORT_VICTIM.encode()
                touched = True
                done.add("target")
            elif it["obj"] == 266 and it["type"] == 96 and it["size"] == 33 and \
                    blk[d + 30:d + 33] == b"abs":
                # DIR_INDEX only: a DIR_ITEM keyed by the new name's hash
                # would break the leaf's key order (and be refused whole)
                blk[d + 30:d + 33] = b"rel"
                put(blk, d, 8, 277)
                blk[d + 29] = 1
                touched = True
                done.add(it["type"])
        if touched:
            write_block(inp, off, blk)
    inp.notes.append("symlinks/rel -> %s, and symlinks/abs renamed rel, a regular file (%s)"
                     % (SHORT_VICTIM, ",".join(map(str, sorted(done, key=str)))))
    return "target" in done


def mut_stale(inp, rng):
    if not prepare_btrfs(inp):
        return False
    r = rng.random()
    if r < 0.6:
        return mut_btrfs_item(inp, rng, stale=True,
                              types=(1, 108, 84, 96, 12) if rng.random() < 0.7 else None)
    if r < 0.8:
        return mut_btrfs_flip(inp, rng)
    return mut_btrfs_node(inp, rng)


# ------------------------------------------------------------ partition tables

def crc32(b):
    return zlib.crc32(bytes(b)) & 0xFFFFFFFF


def find_gpt(inp, name):
    for ss in (512, 4096):
        h = inp.read(name, ss, 92)
        if h[:8] == b"EFI PART":
            return ss
    return None


def mut_gpt(inp, rng):
    name = inp.base.files[0]
    ss = find_gpt(inp, name)
    if ss is None:
        return mut_mbr(inp, rng)
    hdr = bytearray(inp.read(name, ss, ss))
    hsize = le(hdr, 12, 4)
    ent_lba, n, esz = le(hdr, 72, 8), le(hdr, 80, 4), le(hdr, 84, 4)
    ents = bytearray(inp.read(name, ent_lba * ss, n * esz))
    used = [i for i in range(n) if ents[i * esz:i * esz + 16] != bytes(16)]
    r = rng.randrange(10)
    if r < 4 and used:
        i = rng.choice(used)
        f = rng.choice([("first_lba", 32, 8), ("last_lba", 40, 8), ("attrs", 48, 8),
                        ("first_lba", 32, 8), ("last_lba", 40, 8)])
        p = i * esz + f[1]
        old = le(ents, p, 8)
        v = iv64(rng, old)
        if rng.random() < 0.3 and f[0] == "last_lba":
            v = le(ents, i * esz + 32, 8) - rng.choice([1, 100])   # ends before it starts
            inp.invalid = "partition %d ends before it starts" % (i + 1)
        put(ents, p, 8, v)
        inp.notes.append("GPT entry %d %s %d -> %d" % (i + 1, f[0], old, v))
    elif r < 5 and used:
        i = rng.choice(used)
        j = rng.randrange(n)
        ents[j * esz:(j + 1) * esz] = ents[i * esz:(i + 1) * esz]
        inp.notes.append("GPT entry %d copied to entry %d (overlap)" % (i + 1, j + 1))
    elif r < 6 and used:
        i = rng.choice(used)
        o = i * esz + 56 + rng.randrange(72)
        ents[o] = rng.choice([0, 0xff, ord("/"), 0x80])
        inp.notes.append("GPT entry %d name byte changed" % (i + 1))
    else:
        f = rng.choice([("header_size", 12, 4), ("my_lba", 24, 8), ("alternate_lba", 32, 8),
                        ("first_usable", 40, 8), ("last_usable", 48, 8),
                        ("entries_lba", 72, 8), ("num_entries", 80, 4),
                        ("entry_size", 84, 4), ("num_entries", 80, 4)])
        old = le(hdr, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old)
        put(hdr, f[1], f[2], v)
        inp.notes.append("GPT header %s %d -> %d" % (f[0], old, v))
    n2, esz2 = le(hdr, 80, 4), le(hdr, 84, 4)
    if rng.random() < 0.9:
        if n2 * esz2 <= len(ents):
            put(hdr, 88, 4, crc32(ents[:n2 * esz2]))
        elif n2 * esz2 < 64 * MB:
            more = inp.read(name, ent_lba * ss + len(ents), n2 * esz2 - len(ents))
            put(hdr, 88, 4, crc32(bytes(ents) + more))
    hs = min(max(le(hdr, 12, 4), 92), ss)
    put(hdr, 16, 4, 0)
    put(hdr, 16, 4, crc32(hdr[:hs]))
    inp.patch(name, ss, hdr)
    inp.patch(name, ent_lba * ss, ents)
    if rng.random() < 0.5:   # the backup header too, so that it cannot stand in
        alt = le(hdr, 32, 8) if le(hdr, 32, 8) < inp.size(name) // ss else None
        if alt:
            inp.patch(name, alt * ss, bytes(92))
            inp.notes.append("backup GPT header cleared")
    return True


def mut_mbr(inp, rng):
    name = inp.base.files[0]
    mbr = bytearray(inp.read(name, 0, 512))
    if mbr[510:512] != b"\x55\xaa":
        return False
    ebrs = []   # the extended chain's boot records, followed
    ext = [i for i in range(4) if mbr[446 + 16 * i + 4] in (5, 0xf, 0x85)]
    if ext:
        base = le(mbr, 446 + 16 * ext[0] + 8, 4)
        cur = base
        for _ in range(16):
            e = bytearray(inp.read(name, cur * 512, 512))
            if e[510:512] != b"\x55\xaa":
                break
            ebrs.append((cur, e))
            nxt = le(e, 446 + 16 + 8, 4)
            if not nxt:
                break
            cur = base + nxt
    if ebrs and rng.random() < 0.5:
        at, e = rng.choice(ebrs)
        r = rng.randrange(4)
        if r == 0:
            put(e, 446 + 16 + 8, 4, at - le(mbr, 446 + 16 * ext[0] + 8, 4))
            e[446 + 16 + 4] = 5
            inp.notes.append("EBR at sector %d links to itself" % at)
        elif r == 1:
            put(e, 446 + 16 + 8, 4, 0)
            e[446 + 16 + 4] = 5
            inp.notes.append("EBR at sector %d links to the first EBR" % at)
        else:
            f = rng.choice([8, 12, 16 + 8, 16 + 12])
            old = le(e, 446 + f, 4)
            v = iv32(rng, old)
            put(e, 446 + f, 4, v)
            inp.notes.append("EBR at sector %d field +%d %d -> %d" % (at, f, old, v))
        inp.patch(name, at * 512, e)
        return True
    i = rng.randrange(4)
    p = 446 + 16 * i
    r = rng.randrange(4)
    if r == 0:
        old = mbr[p + 4]
        mbr[p + 4] = rng.choice([0, 5, 0xf, 0x83, 0xee, 0x8e, 0x85, 0xff])
        inp.notes.append("MBR entry %d type %#x -> %#x" % (i + 1, old, mbr[p + 4]))
    elif r == 1 and i > 0:
        mbr[p:p + 16] = mbr[446:462]
        inp.notes.append("MBR entry 1 copied to entry %d" % (i + 1))
    else:
        f = rng.choice([("start", 8), ("count", 12)])
        old = le(mbr, p + f[1], 4)
        v = iv32(rng, old)
        put(mbr, p + f[1], 4, v)
        inp.notes.append("MBR entry %d %s %d -> %d" % (i + 1, f[0], old, v))
    inp.patch(name, 0, mbr)
    return True


# ------------------------------------------------------------ LVM2

def lvm_crc(b, crc=0xF597A6CF):
    return (~zlib.crc32(bytes(b), ~crc & 0xFFFFFFFF)) & 0xFFFFFFFF


def lvm_mdas(inp, name):
    """[(absolute offset of the mda header, its size)] of the PV in @name."""
    out = []
    head = inp.read(name, 0, 8 * MB)
    for at in range(0, len(head) - 512, 512):
        if head[at:at + 8] != b"LABELONE" or head[at + 24:at + 32] != b"LVM2 001":
            continue
        pv0 = at - le(head, at + 8, 8) * 512
        p = at + le(head, at + 20, 4) + 40
        for lst in range(2):
            while p + 16 <= len(head):
                off, size = le(head, p, 8), le(head, p + 8, 8)
                p += 16
                if not off:
                    break
                if lst == 1:
                    out.append((pv0 + off, size))
    return out


NUM_RE = re.compile(rb"(\w+) = (-?\d+)")


def mut_lvm(inp, rng):
    done = False
    texts = []
    for name in inp.base.files:
        for mda, msize in lvm_mdas(inp, name):
            h = bytearray(inp.read(name, mda, 512))
            if h[4:20] != b" LVM2 x[5A%r0N*>":
                continue
            toff, tsize = le(h, 40, 8), le(h, 48, 8)
            if not tsize or toff + tsize > msize:
                continue   # wrapped in the ring: left alone
            texts.append((name, mda, msize, h, toff, tsize))
    if not texts:
        return False
    text = inp.read(texts[0][0], texts[0][1] + texts[0][4], texts[0][5])
    body = text.rstrip(b"\0")
    r = rng.randrange(10)
    nums = list(NUM_RE.finditer(body))
    if r < 6 and nums:
        m = rng.choice(nums)
        key = m.group(1)
        v = rng.choice([b"-1", b"-2147483648", b"0", b"1", b"4294967296", b"9223372036854775807",
                        b"18446744073709551615", b"18446744073709551616",
                        b"99999999999999999999999", b"65", b"1000000"])
        body = body[:m.start(2)] + v + body[m.end(2):]
        inp.notes.append("LVM metadata %s = %s -> %s" % (key.decode(), m.group(2).decode(),
                                                         v.decode()))
        if v.startswith(b"-") and key in (b"extent_count", b"stripe_count", b"pe_count",
                                          b"extent_size", b"start_extent", b"segment_count"):
            inp.invalid = "LVM %s negative" % key.decode()
    elif r < 7:
        m = re.search(rb"stripes = \[[^\]]*\]", body)
        if not m:
            return False
        v = rng.choice([b"stripes = []", b'stripes = ["pv0", 4294967295]',
                        b'stripes = ["pv9", 0]', b'stripes = ["pv0"]',
                        b'stripes = ["pv0", -5]',
                        b"stripes = [" + b'"pv0", 0, ' * 300 + b'"pv0", 0]'])
        body = body[:m.start()] + v + body[m.end():]
        inp.notes.append("LVM stripes list -> %r" % v[:60])
    elif r < 8:
        cut = rng.randrange(len(body))
        body = body[:cut] + rng.choice([b"{" * 64, b"}", b'"', b"[[[[[[[[", b"\0", b"= = ="]) + \
            body[cut:]
        inp.notes.append("LVM metadata: syntax damaged at byte %d" % cut)
    else:
        m = re.search(rb"\n(\t*)(\w+) \{", body[body.find(b"logical_volumes"):] if
                      b"logical_volumes" in body else body)
        dup = rng.choice([b'\nlogical_volumes {\n}\n', b'\nextent_size = 0\n',
                          b'\nphysical_volumes {\n}\n'])
        at = body.find(b"\n", len(body) // 2)
        body = body[:at] + dup + body[at:]
        inp.notes.append("LVM metadata: %r inserted" % dup.strip())
        del m
    new = body + b"\0"
    one = rng.random() < 0.2
    for name, mda, msize, h, toff, tsize in texts[:1] if one else texts:
        if 512 + toff + len(new) > msize or toff + len(new) > msize:
            continue
        hh = bytearray(h)
        put(hh, 48, 8, len(new))
        put(hh, 56, 4, lvm_crc(new))
        put(hh, 0, 4, lvm_crc(hh[4:512]))
        inp.patch(name, mda + toff, new)
        inp.patch(name, mda, hh)
        done = True
    if one:
        inp.notes.append("only the first metadata area changed")
    return done


# ------------------------------------------------------------ LUKS

def mut_luks1(inp, rng):
    name = inp.base.files[0]
    h = bytearray(inp.read(name, 0, 592))
    if h[:6] != b"LUKS\xba\xbe":
        return False
    r = rng.randrange(10)
    if r < 5:
        ks = rng.randrange(8) if rng.random() < 0.3 else 0
        p = 208 + 48 * ks
        f = rng.choice([("active", 0), ("iterations", 4), ("key_material_offset", 40),
                        ("stripes", 44), ("iterations", 4), ("stripes", 44)])
        old = int.from_bytes(h[p + f[1]:p + f[1] + 4], "big")
        v = rng.choice([0, 1, 2, 3999, 4000, 4001, 0x00AC71F3, 0x0000DEAD, (1 << 32) - 1,
                        1 << 31, 100000000, 2 ** 24, old + 1])
        put(h, p + f[1], 4, v, big=True)
        inp.notes.append("LUKS1 keyslot %d %s %d -> %d" % (ks, f[0], old, v))
        if ks == 0 and f[0] == "stripes" and v == 0:
            inp.invalid = "LUKS1 keyslot 0 with 0 stripes"
    elif r < 8:
        f = rng.choice([("payload_offset", 104), ("key_bytes", 108), ("mk_digest_iter", 164),
                        ("version", 6)])
        n = 2 if f[0] == "version" else 4
        old = int.from_bytes(h[f[1]:f[1] + n], "big")
        v = rng.choice([0, 1, 2, 16, 31, 33, 64, 65, 128, 4096, (1 << 31), (1 << 32) - 1,
                        100000000, old + 1]) % (1 << (8 * n))
        put(h, f[1], n, v, big=True)
        inp.notes.append("LUKS1 %s %d -> %d" % (f[0], old, v))
    else:
        f = rng.choice([("cipher_name", 8), ("cipher_mode", 40), ("hash_spec", 72)])
        v = rng.choice([b"aes", b"twofish", b"serpent", b"xts-plain64", b"cbc-essiv:sha256",
                        b"ecb", b"cbc-plain", b"xts-essiv:whirlpool", b"sha1", b"sha512",
                        b"ripemd160", b"whirlpool", b"A" * 32, b"", b"%s%n%s"])
        old = bytes(h[f[1]:f[1] + 32]).rstrip(b"\0")
        h[f[1]:f[1] + 32] = v.ljust(32, b"\0")[:32]
        inp.notes.append("LUKS1 %s %r -> %r" % (f[0], old, v))
    inp.patch(name, 0, h)
    return True


def luks2_mutate_json(rng, j, inp):
    ks = j.get("keyslots", {})
    k0 = next(iter(ks.values()), None)
    r = rng.randrange(12)
    big = rng.choice([0, -1, 1, 3, 4, 1 << 31, (1 << 32) - 1, 1 << 32, 1 << 53, 10 ** 30,
                      "18446744073709551616", "-1", "0x10", 1.5, None, "x", [], {}])
    if r < 3 and k0:
        key = rng.choice(["iterations", "memory", "cpus", "time", "hash", "type", "salt"])
        kdf = k0.setdefault("kdf", {})
        if isinstance(kdf, dict):
            kdf[key] = big if key not in ("hash", "type") else rng.choice(
                ["pbkdf2", "argon2i", "argon2id", "sha1", "whirlpool", "", "x" * 300, big])
            inp.notes.append("LUKS2 keyslot kdf.%s -> %r" % (key, kdf[key]))
    elif r < 5 and k0:
        where, key = rng.choice([("af", "stripes"), ("af", "hash"), ("area", "offset"),
                                 ("area", "size"), ("area", "key_size"), ("area", "encryption"),
                                 ("", "key_size"), ("", "priority"), ("", "type")])
        tgt = k0.setdefault(where, {}) if where else k0
        tgt[key] = big
        inp.notes.append("LUKS2 keyslot %s.%s -> %r" % (where, key, big))
    elif r < 7:
        seg = next(iter(j.get("segments", {}).values()), {})
        key = rng.choice(["offset", "size", "iv_tweak", "sector_size", "encryption", "type"])
        seg[key] = big if key != "encryption" else rng.choice(
            ["aes-ecb", "aes-cbc-plain", "aes-xts-plain64", "cipher_null-ecb", "", "x" * 200])
        inp.notes.append("LUKS2 segment %s -> %r" % (key, seg[key]))
    elif r < 8:
        dg = next(iter(j.get("digests", {}).values()), {})
        key = rng.choice(["iterations", "keyslots", "segments", "digest", "salt", "hash"])
        dg[key] = big
        inp.notes.append("LUKS2 digest %s -> %r" % (key, big))
    elif r < 9 and k0:
        n = rng.choice([2, 8, 32, 33, 1000])
        for i in range(1, n):
            ks[str(i)] = json.loads(json.dumps(k0))
        inp.notes.append("LUKS2 %d copies of keyslot 0" % n)
    elif r < 10:
        cfg = j.setdefault("config", {})
        key = rng.choice(["json_size", "keyslots_size"])
        cfg[key] = big if rng.random() < 0.5 else str(big)
        inp.notes.append("LUKS2 config %s -> %r" % (key, cfg[key]))
    elif r < 11:
        inp.notes.append("LUKS2 nested arrays")
        j["tokens"] = {"0": {"type": "x", "keyslots": [[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]}}
    else:
        key = rng.choice(["keyslots", "segments", "digests", "config"])
        j.pop(key, None)
        inp.notes.append("LUKS2 %s removed" % key)


def mut_luks2(inp, rng):
    name = inp.base.files[0]
    h = bytearray(inp.read(name, 0, 4096))
    if h[:6] != b"LUKS\xba\xbe" or h[6:8] != b"\0\2":
        return False
    size = int.from_bytes(h[8:16], "big")
    if size < 8192 or size > 4 * MB:
        return False
    if rng.random() < 0.15:   # the binary header
        f = rng.choice([("hdr_size", 8, 8), ("seqid", 16, 8), ("hdr_offset", 256, 8)])
        old = int.from_bytes(h[f[1]:f[1] + 8], "big")
        v = iv64(rng, old)
        put(h, f[1], 8, v, big=True)
        h[448:512] = bytes(64)
        area = bytearray(inp.read(name, 0, size))
        area[:4096] = h
        area[448:480] = hashlib.sha256(bytes(area)).digest()
        inp.patch(name, 0, area[:4096])
        inp.notes.append("LUKS2 binary header %s %d -> %d" % (f[0], old, v))
        return True
    raw = inp.read(name, 4096, size - 4096)
    try:
        j = json.loads(raw.split(b"\0", 1)[0])
    except ValueError:
        return False
    luks2_mutate_json(rng, j, inp)
    nj = json.dumps(j, separators=(",", ":")).encode()
    if len(nj) >= size - 4096:
        return False
    both = rng.random() < 0.8
    for at in (0, size) if both else (0,):
        area = bytearray(inp.read(name, at, size))
        if area[:6] not in (b"LUKS\xba\xbe", b"SKUL\xba\xbe"):
            continue
        area[4096:] = nj + bytes(size - 4096 - len(nj))
        area[448:512] = bytes(64)
        area[448:480] = hashlib.sha256(bytes(area)).digest()
        inp.patch(name, at, area)
    if not both:
        inp.notes.append("only the first header copy")
    return True


# ------------------------------------------------------------ containers

def be(b, off, n):
    return int.from_bytes(b[off:off + n], "big")


BACKING = [b"fifo", b"/dev/zero", b"victim", b"../victims/secret", b"disk.qcow2",
           b"nonexistent", b"/dev/stdin", b"/proc/self/fd/0", b"x" * 1500, b"/"]


def mut_qcow2(inp, rng):
    name = inp.base.files[0]
    h = bytearray(inp.read(name, 0, 512))
    if h[:4] != b"QFI\xfb":
        return False
    r = rng.randrange(10)
    if r < 3:   # a backing file named in the header, written after it
        nm = rng.choice(BACKING)
        off = 0x200 if len(nm) < 0xE00 else 0x100
        put(h, 8, 8, off, big=True)
        put(h, 16, 4, len(nm), big=True)
        inp.patch(name, off, nm)
        if rng.random() < 0.3:
            put(h, 16, 4, rng.choice([0, 1023, 1024, 1025, 65536, (1 << 32) - 1]), big=True)
        inp.notes.append("qcow2 backing file %r (size field %d)" % (nm[:40], be(h, 16, 4)))
        if be(h, 16, 4) == len(nm) and nm in (b"nonexistent",):
            inp.invalid = "qcow2 backing file that does not exist"
    elif r < 7:
        f = rng.choice([("version", 4, 4), ("cluster_bits", 20, 4), ("size", 24, 8),
                        ("crypt_method", 32, 4), ("l1_size", 36, 4), ("l1_table_offset", 40, 8),
                        ("refcount_table_offset", 48, 8), ("refcount_table_clusters", 56, 4),
                        ("nb_snapshots", 60, 4), ("snapshots_offset", 64, 8),
                        ("incompatible_features", 72, 8), ("header_length", 100, 4),
                        ("refcount_order", 96, 4)])
        old = be(h, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else rng.choice(
            [0, 1, 2, 3, 4, 8, 9, 16, 21, 22, 31, 32, 63, 64, 65535, 1 << 31, (1 << 32) - 1,
             old + 1, old - 1]) % (1 << 32)
        put(h, f[1], f[2], v, big=True)
        inp.notes.append("qcow2 %s %d -> %d" % (f[0], old, v))
    else:   # an L1 or L2 entry
        l1 = be(h, 40, 8)
        l1n = be(h, 36, 4)
        cb = be(h, 20, 4)
        if not l1n or l1 > inp.size(name):
            return False
        i = rng.randrange(min(l1n, 64))
        e = be(inp.read(name, l1 + 8 * i, 8), 0, 8)
        if rng.random() < 0.5 or not e & ((1 << 56) - 1):
            v = rng.choice([0, 1 << 63, (1 << 63) | l1, (1 << 63) | 0x200, (1 << 63) | (1 << 55),
                            (1 << 63) | (inp.size(name) & ~((1 << cb) - 1)), e ^ (1 << cb)])
            inp.patch(name, l1 + 8 * i, v.to_bytes(8, "big"))
            inp.notes.append("qcow2 L1[%d] %#x -> %#x" % (i, e, v))
        else:
            l2 = e & ((1 << 56) - 1) & ~511
            j = rng.randrange(1 << (cb - 3))
            old = be(inp.read(name, l2 + 8 * j, 8), 0, 8)
            v = rng.choice([(1 << 63) | l1, (1 << 63) | 0, (1 << 62) | rng.getrandbits(62), 1,
                            (1 << 63) | (1 << 55), old ^ (1 << rng.randrange(62)), old | 1])
            inp.patch(name, l2 + 8 * j, v.to_bytes(8, "big"))
            inp.notes.append("qcow2 L2[%d][%d] %#x -> %#x" % (i, j, old, v))
    inp.patch(name, 0, h)
    return True


VMDK_EXTENTS = [b'RW 524288 FLAT "../victims/secret" 0', b'RW 524288 FLAT "fifo" 0',
                b'RW 524288 FLAT "/dev/zero" 0', b'RW 524288 FLAT "disk.vmdk" 0',
                b'RW 18446744073709551615 FLAT "victim" 0', b'RW -1 FLAT "victim" 0',
                b'RW 524288 SPARSE "disk.vmdk"', b'RW 524288 ZERO',
                b'RW 524288 FLAT "victim" 18446744073709551615',
                b'RW 0 FLAT "victim" 0', b'RW 524288 VMFS "victim"']


def vmdk_text_mutate(rng, text, inp):
    r = rng.randrange(6)
    lines = text.split(b"\n")
    ext = [i for i, l in enumerate(lines) if l.startswith((b"RW ", b"RDONLY ", b"NOACCESS "))]
    if r < 3 and ext:
        i = rng.choice(ext)
        new = rng.choice(VMDK_EXTENTS)
        if rng.random() < 0.5:
            lines[i] = new
        else:
            lines.insert(i + 1, new)
        inp.notes.append("VMDK extent line %r" % new)
    elif r < 4:
        lines.insert(1, rng.choice([b'parentFileNameHint="fifo"', b'parentCID=12345678',
                                    b'createType="twoGbMaxExtentSparse"',
                                    b'createType="vmfsSparse"', b'createType="streamOptimized"',
                                    b'parentFileNameHint="../victims/secret"']))
        inp.notes.append("VMDK descriptor line %r" % lines[1])
    elif r < 5 and ext:
        for _ in range(rng.choice([100, 2000])):
            lines.insert(ext[0], lines[ext[0]])
        inp.notes.append("VMDK extent line repeated")
    else:
        at = rng.randrange(len(lines))
        lines[at] = lines[at][:rng.randrange(len(lines[at]) + 1)] + rng.choice(
            [b'"', b"\0", b"=" * 100, b"\xff"])
        inp.notes.append("VMDK descriptor line %d damaged" % at)
    return b"\n".join(lines)


def mut_vmdk(inp, rng):
    name = inp.base.files[0]
    h = bytearray(inp.read(name, 0, 512))
    if h[:4] != b"KDMV":      # a descriptor file (monolithicFlat)
        text = inp.read(name, 0, 65536)
        inp.replace(name, vmdk_text_mutate(rng, text, inp))
        return True
    dsec, dn = le(h, 28, 8), le(h, 36, 8)
    if rng.random() < 0.5 and dsec and dn:
        text = inp.read(name, dsec * 512, dn * 512).rstrip(b"\0")
        new = vmdk_text_mutate(rng, text, inp)[:dn * 512]
        inp.patch(name, dsec * 512, new.ljust(dn * 512, b"\0"))
        return True
    f = rng.choice([("version", 4, 4), ("flags", 8, 4), ("capacity", 12, 8), ("grainSize", 20, 8),
                    ("descriptorOffset", 28, 8), ("descriptorSize", 36, 8),
                    ("numGTEsPerGT", 44, 4), ("rgdOffset", 48, 8), ("gdOffset", 56, 8),
                    ("overHead", 64, 8), ("compressAlgorithm", 77, 2)])
    old = le(h, f[1], f[2])
    v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) % (1 << (8 * f[2]))
    put(h, f[1], f[2], v)
    inp.notes.append("VMDK header %s %d -> %d" % (f[0], old, v))
    inp.patch(name, 0, h)
    if rng.random() < 0.3:   # a grain directory or table entry
        gd = le(h, 56, 8) * 512
        if gd and gd < inp.size(name):
            i = rng.randrange(8)
            old = le(inp.read(name, gd + 4 * i, 4), 0, 4)
            v = rng.choice([0, 1, (1 << 32) - 1, le(h, 56, 8), old + 1])
            inp.patch(name, gd + 4 * i, v.to_bytes(4, "little"))
            inp.notes.append("VMDK GD[%d] %d -> %d" % (i, old, v))
    return True


def vhd_csum(b):
    return (~sum(b)) & 0xFFFFFFFF


def mut_vhd(inp, rng):
    name = inp.base.files[0]
    size = inp.size(name)
    foot = bytearray(inp.read(name, size - 512, 512))
    if foot[:8] != b"conectix":
        return False
    dyn = be(foot, 60, 4) in (3, 4)
    r = rng.randrange(10)
    if r < 4 or not dyn:
        f = rng.choice([("data_offset", 16, 8), ("original_size", 40, 8), ("current_size", 48, 8),
                        ("disk_type", 60, 4), ("geometry", 56, 4), ("version", 12, 4)])
        old = be(foot, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else rng.choice([0, 1, 2, 3, 4, 5, 6, (1 << 32) - 1,
                                                         0x00010000, old + 1]) % (1 << 32)
        put(foot, f[1], f[2], v, big=True)
        inp.notes.append("VHD footer %s %d -> %d" % (f[0], old, v))
        put(foot, 64, 4, 0)
        put(foot, 64, 4, vhd_csum(foot), big=True)
        inp.patch(name, size - 512, foot)
        if dyn or rng.random() < 0.5:
            inp.patch(name, 0, foot)   # the copy at the start
        return True
    doff = be(foot, 16, 8)
    dh = bytearray(inp.read(name, doff, 1024))
    if dh[:8] != b"cxsparse":
        return False
    if r < 8:
        f = rng.choice([("table_offset", 16, 8), ("max_table_entries", 28, 4),
                        ("block_size", 32, 4), ("data_offset", 8, 8), ("version", 24, 4)])
        old = be(dh, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else rng.choice(
            [0, 1, 512, 4096, 1 << 20, 2 << 20, 1 << 31, (1 << 32) - 1, old + 1,
             old * 2]) % (1 << 32)
        put(dh, f[1], f[2], v, big=True)
        inp.notes.append("VHD dynamic header %s %d -> %d" % (f[0], old, v))
        put(dh, 36, 4, 0)
        put(dh, 36, 4, vhd_csum(dh), big=True)
        inp.patch(name, doff, dh)
    else:
        bat = be(dh, 16, 8)
        n = be(dh, 28, 4)
        i = rng.randrange(max(1, min(n, 256)))
        old = be(inp.read(name, bat + 4 * i, 4), 0, 4)
        v = rng.choice([0, 1, (size // 512) - 1, size // 512, (1 << 32) - 2, old + 1, bat // 512])
        inp.patch(name, bat + 4 * i, v.to_bytes(4, "big"))
        inp.notes.append("VHD BAT[%d] %#x -> %#x" % (i, old, v))
    return True


def mut_vhdx(inp, rng):
    name = inp.base.files[0]
    if inp.read(name, 0, 8) != b"vhdxfile":
        return False
    r = rng.randrange(10)
    if r < 3:
        at = rng.choice([64 * 1024, 128 * 1024])
        h = bytearray(inp.read(name, at, 4096))
        f = rng.choice([("sequence", 8, 8), ("log_version", 64, 2), ("version", 66, 2),
                        ("log_length", 68, 4), ("log_offset", 72, 8), ("log_guid", 48, 8)])
        old = le(h, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) % (1 << (8 * f[2]))
        put(h, f[1], f[2], v)
        put(h, 4, 4, 0)
        put(h, 4, 4, genlib.crc32c(bytes(h)))
        inp.patch(name, at, h)
        inp.notes.append("VHDX header at %d %s %d -> %d" % (at, f[0], old, v))
        return True
    if r < 6:
        at = rng.choice([192 * 1024, 256 * 1024])
        t = bytearray(inp.read(name, at, 64 * 1024))
        n = le(t, 8, 4)
        f = rng.choice([("entry_count", 8, 4)] + [("entry%d.%s" % (i, k), 16 + 32 * i + o, s)
                                                  for i in range(min(n, 4))
                                                  for k, o, s in (("file_offset", 16, 8),
                                                                  ("length", 24, 4),
                                                                  ("required", 28, 4))])
        old = le(t, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old)
        put(t, f[1], f[2], v)
        put(t, 4, 4, 0)
        put(t, 4, 4, genlib.crc32c(bytes(t)))
        inp.patch(name, at, t)
        inp.notes.append("VHDX region table at %d %s %d -> %d" % (at, f[0], old, v))
        return True
    # the metadata region and the BAT: found through the region table
    t = inp.read(name, 192 * 1024, 64 * 1024)
    regions = {}
    for i in range(min(le(t, 8, 4), 16)):
        p = 16 + 32 * i
        regions[t[p:p + 4]] = (le(t, p + 16, 8), le(t, p + 24, 4))
    bat = regions.get(bytes.fromhex("6677c22d"))
    meta = regions.get(bytes.fromhex("06a27c8b"))
    if r < 8 and meta:
        m = inp.read(name, meta[0], 64 * 1024)
        n = le(m, 10, 2)
        if not n:
            return False
        i = rng.randrange(min(n, 16))
        p = 32 + 32 * i
        if rng.random() < 0.5:
            f = rng.choice([("offset", 16), ("length", 20)])
            old = le(m, p + f[1], 4)
            v = iv32(rng, old)
            inp.patch(name, meta[0] + p + f[1], v.to_bytes(4, "little"))
            inp.notes.append("VHDX metadata entry %d %s %d -> %d" % (i, f[0], old, v))
        else:
            vo, vl = le(m, p + 16, 4), le(m, p + 20, 4)
            if not vl or vo + 8 > 64 * 1024:
                return False
            old = le(m, vo, min(vl, 8))
            v = iv64(rng, old) % (1 << (8 * min(vl, 8)))
            inp.patch(name, meta[0] + vo, v.to_bytes(min(vl, 8), "little"))
            inp.notes.append("VHDX metadata item %d value %d -> %d" % (i, old, v))
        return True
    if bat:
        i = rng.randrange(min(bat[1] // 8, 512))
        old = le(inp.read(name, bat[0] + 8 * i, 8), 0, 8)
        v = rng.choice([6 | (1 << 20), 6 | ((1 << 44) - 1) << 20, 7, 3, 2, old ^ (1 << 20),
                        6 | (0 << 20), 6 | (1 << 40)])
        inp.patch(name, bat[0] + 8 * i, v.to_bytes(8, "little"))
        inp.notes.append("VHDX BAT[%d] %#x -> %#x" % (i, old, v))
        return True
    return False


def ewf_sections(inp, name):
    out = []
    at = 13
    size = inp.size(name)
    for _ in range(4096):
        d = inp.read(name, at, 76)
        if len(d) < 76:
            break
        out.append((at, d[:16].rstrip(b"\0"), le(d, 16, 8), le(d, 24, 8)))
        nxt = le(d, 16, 8)
        if nxt <= at or nxt >= size:
            break
        at = nxt
    return out


def mut_e01(inp, rng):
    name = inp.base.files[0]
    if inp.read(name, 0, 8) != b"EVF\x09\x0d\x0a\xff\x00":
        return False
    secs = ewf_sections(inp, name)
    if not secs:
        return False
    r = rng.randrange(10)
    if r < 3:   # a section descriptor: next, size; adler32 made valid again
        at, typ, nxt, sz = rng.choice(secs)
        d = bytearray(inp.read(name, at, 76))
        f = rng.choice([("next", 16), ("size", 24)])
        old = le(d, f[1], 8)
        v = rng.choice([at, 0, 13, old + 1, old - 76, (1 << 64) - 1, 1 << 40, inp.size(name)])
        put(d, f[1], 8, v)
        put(d, 72, 4, zlib.adler32(bytes(d[:72])))
        inp.patch(name, at, d)
        inp.notes.append("EWF section %s at %d %s %d -> %d" % (typ.decode(errors="replace"),
                                                               at, f[0], old, v))
        return True
    vol = [s for s in secs if s[1] in (b"volume", b"disk")]
    tab = [s for s in secs if s[1] in (b"table", b"table2")]
    if r < 6 and vol:
        at = vol[0][0] + 76
        d = bytearray(inp.read(name, at, 1052))
        f = rng.choice([("chunk_count", 4, 4), ("sectors_per_chunk", 8, 4),
                        ("bytes_per_sector", 12, 4), ("sector_count", 16, 8),
                        ("compression_level", 52, 1)])
        old = le(d, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) % (1 << (8 * f[2]))
        put(d, f[1], f[2], v)
        put(d, 1048, 4, zlib.adler32(bytes(d[:1048])))
        inp.patch(name, at, d)
        inp.notes.append("EWF volume %s %d -> %d" % (f[0], old, v))
        return True
    if tab:
        at = rng.choice(tab)[0] + 76
        th = bytearray(inp.read(name, at, 24))
        n = le(th, 0, 4)
        if rng.random() < 0.4 or not n:
            f = rng.choice([("entries", 0, 4), ("base_offset", 8, 8)])
            old = le(th, f[1], f[2])
            v = iv64(rng, old) if f[2] == 8 else iv32(rng, old)
            put(th, f[1], f[2], v)
            put(th, 20, 4, zlib.adler32(bytes(th[:20])))
            inp.patch(name, at, th)
            inp.notes.append("EWF table %s %d -> %d" % (f[0], old, v))
            return True
        i = rng.randrange(min(n, 100000))
        old = le(inp.read(name, at + 24 + 4 * i, 4), 0, 4)
        v = rng.choice([0, 0x80000000, 0x7fffffff, 0xffffffff, old + 1, old - 1, old ^ 0x80000000,
                        13])
        inp.patch(name, at + 24 + 4 * i, v.to_bytes(4, "little"))
        ents = inp.read(name, at + 24, 4 * n)
        inp.patch(name, at + 24 + 4 * n, zlib.adler32(ents).to_bytes(4, "little"))
        inp.notes.append("EWF table entry %d %#x -> %#x" % (i, old, v))
        return True
    return False


def mut_split(inp, rng):
    segs = sorted(f for f in os.listdir(inp.base.wd) if re.match(r"disk\.\d{3}$", f))
    r = rng.randrange(6)
    s = rng.choice(segs)
    if r == 0:
        inp.replace(s, None, "split segment %s removed" % s)
    elif r == 1:
        data = inp.read(s, 0, inp.size(s))
        cut = rng.choice([0, 1, 511, 4096, len(data) // 2, len(data) - 1])
        inp.replace(s, data[:cut], "split segment %s cut to %d bytes" % (s, cut))
    elif r == 2:
        data = inp.read(s, 0, inp.size(s))
        inp.replace(s, data + bytes(rng.choice([1, 512, 4096])),
                    "split segment %s made longer" % s)
    elif r == 3:
        nxt = "disk.%03d" % (len(segs) + 1)
        inp.replace(nxt, None)
        os.symlink(rng.choice(["fifo", "/dev/zero", "victim", "disk.001"]), inp.path(nxt))
        inp.notes.append("split segment %s a symlink to %s" % (nxt, os.readlink(inp.path(nxt))))
    elif r == 4:
        inp.replace(s, None)
        os.mkfifo(inp.path(s))
        inp.notes.append("split segment %s a FIFO" % s)
    else:
        return mut_btrfs_like_flip(inp, rng, s)
    return True


def mut_btrfs_like_flip(inp, rng, name):
    ranges = data_ranges(inp.path(name))
    if not ranges:
        return False
    for _ in range(rng.randint(1, 64)):
        o, n = rng.choice(ranges)
        inp.patch(name, o + rng.randrange(n), bytes([rng.randrange(256)]))
    inp.notes.append("%s: random bytes replaced" % name)
    return True


def mut_flip_any(inp, rng):
    """Random byte replacements in the first MiBs, where the headers live."""
    name = rng.choice(inp.base.image_args())
    name = os.path.basename(name)
    n = rng.randint(1, 16)
    lim = min(inp.size(name), rng.choice([4096, 65536, 1 * MB, 4 * MB]))
    for _ in range(n):
        inp.patch(name, rng.randrange(lim), bytes([rng.randrange(256)]))
    inp.notes.append("%s: %d random bytes in its first %d" % (name, n, lim))
    return True


# ------------------------------------------------------------ classes

FS = ["layers", "super", "walk-json", "walk-hash", "cat", "extract", "bodyfile", "verify",
      "unallocated", "deleted", "extract-deleted", "history", "subvols"]
FORENSIC = ["deleted", "deleted-hash", "extract-deleted", "history", "unallocated", "verify",
            "cat-deleted", "walk-hash", "extract"]
CONTAINER = ["layers", "verify-image", "walk-hash", "super", "extract", "cat", "verify"]
VOLUME = ["layers", "walk-hash", "super", "extract", "cat", "partitions", "subvols"]
NAMES = ["extract", "walk-json", "bodyfile", "extract-deleted", "mount", "walk-hash", "extract"]

# class: (bases, mutator, commands, weight)
CLASSES = {
    "btrfs-item": (["subvols", "comp", "holes", "special"], mut_btrfs_item, FS + ["mount"], 3),
    "btrfs-node": (["subvols", "comp"], mut_btrfs_node, FS, 1),
    "btrfs-super": (["subvols"], mut_btrfs_super, FS, 1),
    "btrfs-flip": (["subvols", "holes", "single"], mut_btrfs_flip, FS, 2),
    "names": (["names", "special"], mut_names, NAMES, 2),
    "stale": (["single", "churn", "orphan", "wrap"], mut_stale, FORENSIC, 3),
    "gpt": (["gpt1", "gpt2", "gpt4k"], mut_gpt, VOLUME, 1),
    "mbr": (["mbr1", "mbrext"], mut_mbr, VOLUME, 1),
    "lvm": (["gptlvm", "pvab"], mut_lvm, VOLUME, 2),
    "luks1": (["luks1"], mut_luks1, VOLUME, 1),
    "luks2": (["luks2", "luks2a"], mut_luks2, VOLUME, 2),
    "qcow2": (["qcow2", "qcow2c"], mut_qcow2, CONTAINER, 2),
    "vmdk": (["vmdk", "vmdkflat"], mut_vmdk, CONTAINER, 1),
    "vhd": (["vhd", "vhdfixed"], mut_vhd, CONTAINER, 1),
    "vhdx": (["vhdx"], mut_vhdx, CONTAINER, 1),
    "e01": (["e01"], mut_e01, CONTAINER, 2),
    "split": (["split"], mut_split, CONTAINER, 1),
    "flip": (["gpt1", "luks1", "luks2", "gptlvm", "qcow2", "vhdx", "e01", "vmdk"],
             mut_flip_any, VOLUME + ["verify-image"], 1),
}


# ------------------------------------------------------------ the sandbox

def snapshot(roots, skip):
    """Every entry under @roots (but @skip): type, size, mtime, ctime,
    and a digest of small regular files and symlink targets."""
    out = {}
    for root in roots:
        for dp, dns, fns in os.walk(root):
            if any(dp == s or dp.startswith(s + "/") for s in skip):
                dns[:] = []
                continue
            for n in dns + fns:
                p = os.path.join(dp, n)
                if p in skip:
                    continue
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                dig = None
                if stat.S_ISLNK(st.st_mode):
                    dig = os.readlink(p)
                elif stat.S_ISREG(st.st_mode) and st.st_size <= 65536:
                    with open(p, "rb") as f:
                        dig = hashlib.sha256(f.read()).hexdigest()
                out[p] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ctime_ns, dig)
    try:   # the victim outside every sandbox, which absolute symlinks name
        st = os.lstat(SHORT_VICTIM)
        with open(SHORT_VICTIM, "rb") as f:
            out[SHORT_VICTIM] = (st.st_mode, st.st_size, st.st_mtime_ns,
                                 hashlib.sha256(f.read(65536)).hexdigest())
    except OSError:
        pass
    return out


def diff(before, after):
    out = []
    for p in sorted(set(before) | set(after)):
        if p not in before:
            out.append("created %s" % p)
        elif p not in after:
            out.append("removed %s" % p)
        elif before[p] != after[p]:
            out.append("changed %s" % p)
    return out


class Sandbox:
    """One run's directory: dest (DESTDIR, not yet there), victims with
    files and the symlinks planted beside DESTDIR, cwd and tmp (the
    process's working directory and TMPDIR), out (stdout)."""

    def __init__(self, root, rng):
        self.root = root
        if os.path.exists(root):
            shutil.rmtree(root)
        self.victims = os.path.join(root, "victims")
        self.dest = os.path.join(root, "dest")
        self.cwd = os.path.join(root, "cwd")
        self.tmp = os.path.join(root, "tmp")
        self.out = os.path.join(root, "out")
        for d in (self.victims, self.cwd, self.tmp, self.out):
            os.makedirs(d)
        with open(os.path.join(self.victims, "secret"), "wb") as f:
            f.write(b"a victim: never written\n")
        # DESTDIR.manifest.jsonl (extract --deleted) pointing at a victim
        # that exists, or at one that does not (O_CREAT through a symlink)
        tgt = "victims/secret" if rng.random() < 0.5 else "victims/created"
        os.symlink(tgt, self.dest + ".manifest.jsonl")
        os.symlink("victims/secret", self.dest + ".tmp")


# ------------------------------------------------------------ running

class Runner:
    def __init__(self, opts, bases):
        self.o, self.bases = opts, bases
        self.asan = is_asan(opts.cli)
        self.can_mount = os.geteuid() == 0 and os.path.exists("/dev/fuse") and \
            shutil.which("fusermount3") is not None

    def limits(self):
        mem = self.o.mem_mb * MB
        if not self.asan:
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.nice(5)

    def env(self, sb):
        e = dict(os.environ, TMPDIR=sb.tmp, LC_ALL="C")
        e["ASAN_OPTIONS"] = "detect_leaks=1:allocator_may_return_null=1:abort_on_error=0:" \
            "max_allocation_size_mb=%d:hard_rss_limit_mb=%d" % (self.o.mem_mb, self.o.mem_mb * 2)
        e["UBSAN_OPTIONS"] = "print_stacktrace=1"
        # leaks inside the container libraries (libewf 20140813 loses chunk
        # buffers on read errors) are theirs: left out, as fuzz_container.c
        # and tests/test_containers.py do; ours are still reported
        supp = os.path.join(self.o.work, "lsan.supp")
        if not os.path.exists(supp):
            with open(supp, "w") as f:
                f.write("leak:libewf.so\nleak:libqcow.so\nleak:libvmdk.so\nleak:libvhdi.so\n")
        e["LSAN_OPTIONS"] = "suppressions=" + supp
        return e

    def run(self, argv, sb, timeout=None):
        """(rc or None on timeout, stdout head, stderr, seconds)."""
        timeout = timeout or self.o.timeout
        t0 = time.monotonic()
        with open(os.path.join(sb.out, "stdout"), "wb") as so, \
                open(os.path.join(sb.out, "stderr"), "wb") as se:
            p = subprocess.Popen(argv, stdout=so, stderr=se, stdin=subprocess.DEVNULL,
                                 cwd=sb.cwd, env=self.env(sb), preexec_fn=self.limits,
                                 start_new_session=True)
            try:
                rc = p.wait(timeout)
            except subprocess.TimeoutExpired:
                kill_group(p)
                rc = None
            except BaseException:   # interrupted: no run outlives the campaign
                kill_group(p)
                raise
        with open(os.path.join(sb.out, "stdout"), "rb") as f:
            out = f.read(65536)
        with open(os.path.join(sb.out, "stderr"), "rb") as f:
            err = f.read(1 << 20)
        return rc, out, err, time.monotonic() - t0

    def command(self, cmd, base, sb, rng):
        """The argv of @cmd on @base, or None when it does not apply."""
        cli, imgs = self.o.cli, base.image_args()
        a = list(base.args)
        if cmd == "walk-json":
            return [cli, "walk", "--json"] + a + imgs
        if cmd == "walk-hash":
            return [cli, "walk", "--json", "--hash"] + a + imgs
        if cmd == "deleted-hash":
            return [cli, "deleted", "--json", "--hash"] + a + imgs
        if cmd == "extract":
            return [cli, "extract"] + a + imgs + [sb.dest]
        if cmd == "extract-deleted":
            return [cli, "extract", "--deleted"] + a + imgs + [sb.dest]
        if cmd == "unallocated":
            if rng.random() < 0.5:
                os.makedirs(sb.dest)
                return [cli, "unallocated"] + a + imgs + [os.path.join(sb.dest, "unalloc.bin")]
            return [cli, "unallocated"] + a + imgs
        if cmd == "cat":
            paths = self.facts(base, "cat")
            if not paths:
                return [cli, "cat", "--inode", "5:257"] + a + imgs
            return [cli, "cat", "--path", rng.choice(paths)] + a + imgs
        if cmd == "cat-deleted":
            ids = self.facts(base, "deleted")
            if not ids:
                return None
            return [cli, "cat", "--deleted", str(rng.choice(ids))] + a + imgs
        if cmd == "verify-image":
            if not base.container:
                return None
            return [cli, "verify-image"] + imgs
        if cmd == "partitions":
            return [cli, "partitions"] + imgs
        if cmd == "mount":
            return [cli, "mount", "-f"] + a + imgs + [sb.dest] if self.can_mount else None
        return [cli, cmd] + a + imgs

    def facts(self, base, what):
        """Paths of regular files, or ids of recovered versions, of the
        unmutated base (found when it was made)."""
        return base.cat_paths if what == "cat" else base.deleted_ids

    def mount(self, argv, sb):
        """mount -f in the background, a bounded find + read, unmount."""
        os.makedirs(sb.dest)
        t0 = time.monotonic()
        se = open(os.path.join(sb.out, "stderr"), "wb")
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=se, stdin=subprocess.DEVNULL,
                             cwd=sb.cwd, env=self.env(sb), preexec_fn=self.limits,
                             start_new_session=True)
        rc, hang, note = None, False, ""
        deadline = t0 + self.o.timeout
        while time.monotonic() < deadline and p.poll() is None and not os.path.ismount(sb.dest):
            time.sleep(0.05)
        if os.path.ismount(sb.dest):
            r = subprocess.Popen(["sh", "-c", 'find . -xdev -type f 2>/dev/null | head -n 2000 | '
                                  'while IFS= read -r f; do head -c 1048576 "$f" >/dev/null '
                                  '2>&1; done; ls -laR . >/dev/null 2>&1'],
                                 cwd=sb.dest, start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                r.wait(max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                hang, note = True, "reading the mount passed the limit"
                kill_group(p)
                kill_group(r)
            subprocess.run(["fusermount3", "-u", "-z", sb.dest], capture_output=True, timeout=30)
            try:
                rc = p.wait(10)
            except subprocess.TimeoutExpired:
                hang, note = True, "the server did not exit after unmount"
                kill_group(p)
        elif p.poll() is None:
            hang, note = True, "not mounted within the limit"
            kill_group(p)
            subprocess.run(["fusermount3", "-u", "-z", sb.dest], capture_output=True, timeout=30)
        else:
            rc = p.returncode
        se.close()
        with open(os.path.join(sb.out, "stderr"), "rb") as f:
            err = f.read(1 << 20)
        if hang:
            rc = None
            err += ("\n[hostile] %s\n" % note).encode()
        return rc, b"", err, time.monotonic() - t0


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        pass


def is_asan(cli):
    if not os.path.isfile(cli):
        return False
    with open(cli, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__ubsan_handle" in data


def file_state(paths):
    out = {}
    for p in paths:
        try:
            st = os.lstat(p)
            out[p] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
        except OSError:
            out[p] = None
    return out


def judge(opts, rc, err, outside, changed, invalid, cmd):
    """[(kind, what)]: the findings of one run."""
    findings = []
    if rc is None:
        findings.append(("hang", "no exit within %d s" % opts.timeout))
    elif rc < 0:
        findings.append(("crash", "signal %d" % -rc))
    elif rc not in (0, 1, 2):
        findings.append(("exit", "exit status %d" % rc))
    if any(s in err for s in SANITIZER):
        findings.append(("crash", "sanitizer report"))
    if outside:
        findings.append(("outside", "; ".join(outside[:10])))
    if changed:
        findings.append(("image", "written: " + ", ".join(changed)))
    if invalid and rc == 0 and not err.strip() and cmd not in ("layers", "partitions"):
        findings.append(("silent", "exit 0, nothing on stderr, though " + invalid))
    return findings


FAKE = r"""
import os, signal, sys, time
mode, dest, image = sys.argv[1:4]
if mode == "hang":
    time.sleep(3600)
elif mode == "segv":
    os.kill(os.getpid(), signal.SIGSEGV)
elif mode == "asan":
    sys.stderr.write("==1==ERROR: AddressSanitizer: heap-buffer-overflow\n")
    sys.exit(1)
elif mode == "exit3":
    sys.exit(3)
elif mode == "manifest":   # follows the symlink planted beside DESTDIR
    open(dest + ".manifest.jsonl", "w").write("{}\n")
elif mode == "tmp":
    open(os.path.join(os.environ["TMPDIR"], "scratch"), "w").write("x")
elif mode == "cwd":
    open("left-behind", "w").write("x")
elif mode == "image":
    with open(image, "r+b") as f:
        f.write(b"x")
elif mode == "memory":     # the address-space limit must stop this
    x = bytearray(3 << 30)
    sys.exit(0)
elif mode == "dest":       # inside DESTDIR: allowed
    os.makedirs(dest)
    open(os.path.join(dest, "f"), "w").write("x")
sys.exit(0)
"""


def self_test(opts):
    """The detectors, each against a fake CLI that does the wrong thing:
    every one must be reported, and the harmless runs not."""
    cases = [("ok", None, []), ("dest", None, []), ("hang", None, ["hang"]),
             ("segv", None, ["crash"]), ("asan", None, ["crash"]), ("exit3", None, ["exit"]),
             ("manifest", None, ["outside"]), ("tmp", None, ["outside"]),
             ("cwd", None, ["outside"]), ("image", None, ["image"]),
             ("ok", "forged for the test", ["silent"]), ("memory", None, [])]
    opts.timeout = 3
    runner = Runner(opts, None)
    runner.asan = False
    bad = 0
    for mode, invalid, want in cases:
        for plant_existing in (0.1, 0.9):   # both kinds of planted manifest symlink
            wd = os.path.join(opts.work, "selftest-base")
            os.makedirs(wd, exist_ok=True)
            image = os.path.join(wd, "disk.img")
            with open(image, "wb") as f:
                f.write(bytes(4096))
            sb = Sandbox(os.path.join(opts.work, "run"), random.Random(plant_existing))
            argv = [sys.executable, "-c", FAKE, mode, sb.dest, image]
            files = [image]
            ib = file_state(files)
            skip = [sb.dest, sb.out] + files
            before = snapshot([sb.root, wd], skip)
            time.sleep(0.01)
            rc, out, err, _ = runner.run(argv, sb)
            got = judge(opts, rc, err, diff(before, snapshot([sb.root, wd], skip)),
                        [p for p in files if ib.get(p) != file_state(files).get(p)],
                        invalid, "walk")
            kinds = sorted({k for k, _ in got})
            ok = kinds == sorted(want)
            if mode == "memory":
                ok = ok and rc == 1 and b"MemoryError" in err
            print("%s self-test %-8s%s: %s" % ("ok  " if ok else "FAIL", mode,
                                               " (invalid)" if invalid else "",
                                               "; ".join("%s: %s" % g for g in got) or
                                               "no finding, exit %s" % rc))
            bad += not ok
            shutil.rmtree(wd)
    print("self-test: %d of %d checks failed" % (bad, 2 * len(cases)))
    return 1 if bad else 0


def one_run(opts, runner, bases, i, classes):
    """Run @i: a class, a base, a mutation and a command, all from
    Random("seed:i"). Returns (class, command, findings, record)."""
    rng = random.Random("%d:%d" % (opts.seed, i))
    names = sorted(classes)
    cls = rng.choices(names, weights=[CLASSES[c][3] for c in names])[0]
    base_names, mutate, cmds, _ = CLASSES[cls]
    base = bases.get(rng.choice(base_names))
    if opts.commands:
        cmds = [c for c in cmds if c in opts.commands] or opts.commands
    cmd = rng.choice(cmds)
    inp = Input(base, base.wd)
    sb = Sandbox(os.path.join(opts.work, "run"), rng)
    ok = False
    try:
        ok = mutate(inp, rng)
    except (OSError, ValueError, IndexError, KeyError, struct.error) as e:
        inp.notes.append("mutation failed: %s" % e)
    if not ok:
        inp.restore()
        return cls, cmd, None, None
    if not base.fs:
        cmd = rng.choice(["layers", "partitions"])
    argv = runner.command(cmd, base, sb, rng)
    if argv is None:
        cmd = "walk-hash"
        argv = runner.command(cmd, base, sb, rng)
    # the image's files are judged as such; what was planted beside them
    # (victim, fifo) as outside
    img_files = [os.path.join(base.wd, f) for f in os.listdir(base.wd)
                 if f not in ("victim", "fifo")]
    img_before = file_state(img_files)
    roots = [sb.root, base.wd]
    skip = [sb.dest, sb.out] + img_files
    before = snapshot(roots, skip)
    if cmd == "mount":
        rc, out, err, secs = runner.mount(argv, sb)
    else:
        rc, out, err, secs = runner.run(argv, sb)
    after = snapshot(roots, skip)
    img_after = file_state(img_files)
    findings = judge(opts, rc, err, diff(before, after),
                     [p for p in img_files if img_before.get(p) != img_after.get(p)],
                     inp.invalid, cmd)
    outside = [w for k, w in findings if k == "outside"]
    changed = [w for k, w in findings if k == "image"]
    rec = {"run": i, "seed": opts.seed, "class": cls, "base": base.name, "command": cmd,
           "argv": argv, "mutation": inp.notes, "rc": rc, "seconds": round(secs, 2),
           "findings": findings}
    if findings or opts.replay is not None:
        save_finding(opts, rec, inp, sb, out, err)
    inp.restore()
    # a run that wrote the base leaves it unusable: made again for the next
    if changed or any(p for p in outside if base.wd in p):
        bases.cache.pop(base.name, None)
    if os.path.ismount(sb.dest):
        subprocess.run(["fusermount3", "-u", "-z", sb.dest], capture_output=True, timeout=30)
    return cls, cmd, findings, rec


SAVED = {}   # (kind, class, command): findings saved with their input


def save_finding(opts, rec, inp, sb, out, err):
    kind = rec["findings"][0][0] if rec["findings"] else "replay"
    sig = (kind, rec["class"], rec["command"])
    SAVED[sig] = SAVED.get(sig, 0) + 1
    keep_input = SAVED[sig] <= opts.inputs_per_kind or opts.replay is not None
    d = os.path.join(opts.findings, "%s-%s-s%d-r%d" % (kind, rec["class"], opts.seed, rec["run"]))
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(d, "run.json"), "w") as f:
        json.dump(rec, f, indent=1, default=str)
    with open(os.path.join(d, "stdout"), "wb") as f:
        f.write(out)
    with open(os.path.join(d, "stderr"), "wb") as f:
        f.write(err)
    with open(os.path.join(d, "replay.sh"), "w") as f:
        f.write("#!/bin/sh\n# the mutated input is made again from the seed and run number\n"
                "python3 %s --cli %s --testdata %s --seed %d --replay %d --timeout %d%s\n"
                % (os.path.abspath(__file__), opts.cli, opts.testdata, opts.seed, rec["run"],
                   opts.timeout, " --only " + opts.only if opts.only else ""))
        f.write("# or by hand, on the saved input (zstd -d *.zst first; the saved\n"
                "# command's paths were those of the campaign's working directory):\n# %s\n"
                % " ".join(rec["argv"]))
    # the mutated input itself, compressed (large images are sparse)
    for fn in inp.base.files:
        if fn.startswith("-"):
            continue
        src = os.path.join(inp.base.wd, fn)
        if not os.path.exists(src) or not stat.S_ISREG(os.stat(src).st_mode):
            continue
        if keep_input:
            subprocess.run(["zstd", "-q", "-1", "-T2", src, "-o",
                            os.path.join(d, os.path.basename(fn) + ".zst")],
                           capture_output=True, timeout=600)
    if os.path.isdir(sb.dest) and not os.path.ismount(sb.dest):
        listing = subprocess.run(["find", sb.dest, "-maxdepth", "3"], capture_output=True,
                                 timeout=60).stdout[:65536]
        with open(os.path.join(d, "dest-listing"), "wb") as f:
            f.write(listing)


def summary(stats, kinds):
    cls = sorted(stats)
    cols = ["hang", "crash", "exit", "outside", "image", "silent"]
    lines = ["%-12s %6s %6s  %s" % ("class", "runs", "skip", "  ".join("%7s" % c for c in cols))]
    tot = [0, 0] + [0] * len(cols)
    for c in cls:
        s = stats[c]
        row = [s["runs"], s["skipped"]] + [s.get(k, 0) for k in cols]
        tot = [a + b for a, b in zip(tot, row)]
        lines.append("%-12s %6d %6d  %s" % (c, row[0], row[1],
                                            "  ".join("%7d" % v for v in row[2:])))
    lines.append("%-12s %6d %6d  %s" % ("total", tot[0], tot[1],
                                        "  ".join("%7d" % v for v in tot[2:])))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(REPO, "build", "tools", "btrfsimg"))
    ap.add_argument("--testdata", default=os.path.join(REPO, "testdata"))
    ap.add_argument("--luks-encrypt", default=None,
                    help="tests/luks_encrypt built (default: beside the CLI's build)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--first", type=int, default=0, help="the first run number")
    ap.add_argument("--time-budget", type=float, default=None,
                    help="stop starting runs after this many seconds")
    ap.add_argument("--only", default=None, help="classes, comma-separated")
    ap.add_argument("--commands", default=None, type=lambda v: v.split(","),
                    help="only these commands (names as in --list), comma-separated")
    ap.add_argument("--timeout", type=int, default=20, help="seconds per run")
    ap.add_argument("--mem-mb", type=int, default=2048, help="address space per run (MiB)")
    ap.add_argument("--findings", default=os.path.join(REPO, "findings"))
    ap.add_argument("--work", default=None, help="working directory (default: a new temp dir)")
    ap.add_argument("--replay", type=int, default=None, help="run only this run number")
    ap.add_argument("--inputs-per-kind", type=int, default=3,
                    help="keep the mutated input of this many findings per kind, class and "
                    "command (the others: run.json, output and replay.sh)")
    ap.add_argument("--list", action="store_true", help="the classes, their bases and commands")
    ap.add_argument("--self-test", action="store_true",
                    help="check the detectors against a fake CLI (no images needed)")
    ap.add_argument("-v", "--verbose", action="store_true")
    opts = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    if opts.list:
        for c, (b, m, cmds, w) in sorted(CLASSES.items()):
            print("%-12s bases %s; commands %s" % (c, ",".join(b), ",".join(sorted(set(cmds)))))
        return 0
    if opts.self_test:
        opts.work = tempfile.mkdtemp(prefix="hostile-selftest.")
        try:
            return self_test(opts)
        finally:
            shutil.rmtree(opts.work, ignore_errors=True)
    opts.cli = os.path.abspath(opts.cli)
    if not os.access(opts.cli, os.X_OK):
        print("hostile.py: no CLI at %s (--cli)" % opts.cli, file=sys.stderr)
        return 2
    classes = set(CLASSES)
    if opts.only:
        classes = set(opts.only.split(","))
        bad = classes - set(CLASSES)
        if bad:
            print("hostile.py: unknown class %s (--list)" % ",".join(sorted(bad)), file=sys.stderr)
            return 2
    enc = opts.luks_encrypt or os.path.join(os.path.dirname(os.path.dirname(opts.cli)),
                                            "tests", "luks_encrypt")
    own_work = opts.work is None
    opts.work = opts.work or tempfile.mkdtemp(prefix="hostile.")
    os.makedirs(opts.work, exist_ok=True)
    opts.findings = os.path.abspath(opts.findings)
    bases = Bases(opts.cli, opts.testdata, opts.work, enc)
    runner = Runner(opts, bases)
    stats = {}
    found = []
    t0 = time.monotonic()
    runs = [opts.replay] if opts.replay is not None else range(opts.first, opts.first + opts.runs)
    with open(SHORT_VICTIM, "wb") as f:
        f.write(b"a victim: never written\n")
    print("hostile.py: seed %d, cli %s%s, work %s" % (opts.seed, opts.cli,
                                                     " (sanitizers)" if runner.asan else "",
                                                     opts.work), flush=True)
    try:
        for i in runs:
            if opts.time_budget and time.monotonic() - t0 > opts.time_budget:
                break
            try:
                cls, cmd, fnd, rec = one_run(opts, runner, bases, i, classes)
            except (subprocess.SubprocessError, OSError, RuntimeError) as e:
                print("run %d: setup failed: %s" % (i, e), file=sys.stderr, flush=True)
                return 2
            s = stats.setdefault(cls, {"runs": 0, "skipped": 0})
            if rec is None:
                s["skipped"] += 1
                continue
            s["runs"] += 1
            n_runs = sum(x["runs"] for x in stats.values())
            if n_runs % 100 == 0:
                print("[%d runs, %.0f s, %d with findings]" % (n_runs, time.monotonic() - t0,
                                                               len(found)), flush=True)
            for k, _ in fnd:
                s[k] = s.get(k, 0) + 1
            if opts.replay is not None:
                print(" ".join(rec["argv"]))
                print(open(os.path.join(opts.work, "run", "out", "stderr"), "rb").read()
                      .decode(errors="replace")[-3000:])
            if fnd or opts.verbose or opts.replay is not None:
                print("run %d %s/%s %s: exit %s %.1fs %s\n    %s" % (
                    i, cls, rec["base"], cmd, rec["rc"], rec["seconds"],
                    "; ".join("%s: %s" % f for f in fnd) or "ok",
                    " | ".join(rec["mutation"])[:300]), flush=True)
            if fnd:
                found.append(rec)
    finally:
        if os.path.exists(SHORT_VICTIM):
            os.unlink(SHORT_VICTIM)
        if own_work:
            for d in (os.path.join(opts.work, "run", "dest"),):
                if os.path.ismount(d):
                    subprocess.run(["fusermount3", "-u", "-z", d], capture_output=True)
            shutil.rmtree(opts.work, ignore_errors=True)
    print(summary(stats, None))
    if found:
        sigs = {}
        for rec in found:
            for k, what in rec["findings"]:
                key = (k, rec["class"], rec["command"])
                sigs.setdefault(key, []).append(rec["run"])
        print("findings by kind, class and command (runs):")
        for key in sorted(sigs):
            r = sigs[key]
            print("  %-8s %-11s %-16s %4d  (%s%s)" % (key + (len(r), ", ".join(map(str, r[:5])),
                                                            ", ..." if len(r) > 5 else "")))
    print("%d runs in %.0f s, %d with findings%s" % (
        sum(s["runs"] for s in stats.values()), time.monotonic() - t0, len(found),
        (" (saved under %s)" % opts.findings) if found else ""))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
