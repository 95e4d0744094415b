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
  hang       the run passed its wall-time limit (--timeout, default 20 s,
             60 s for a CLI built with sanitizers)
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
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "testdata"))
sys.path.insert(0, HERE)
from hostile_btrfs import (MB, SHORT_VICTIM, mut_btrfs_flip, mut_btrfs_item,  # noqa: E402
                           mut_btrfs_node, mut_btrfs_super, mut_names, mut_stale)
from hostile_volumes import (mut_e01, mut_flip_any, mut_gpt, mut_luks1, mut_luks2,  # noqa: E402
                             mut_lvm, mut_mbr, mut_qcow2, mut_split, mut_vhd, mut_vhdx,
                             mut_vmdk)

PASS = b"test pass"        # the passphrase tests/images/test_volumes.py uses
SANITIZER = (b"ERROR: AddressSanitizer", b"ERROR: LeakSanitizer", b"runtime error:",
             b"ERROR: UndefinedBehaviorSanitizer", b"SUMMARY: AddressSanitizer")


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
    """The bases, each made on first use in WORK/base/NAME (by its make_
    method) and checked to open cleanly."""

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
        # and tests/images/test_containers.py do; ours are still reported
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
    except Exception as e:   # a mutator's own bug costs one run, not the campaign
        print("run %d: mutator %s failed (skipped): %r" % (i, mutate.__name__, e),
              file=sys.stderr, flush=True)
        ok = False
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
    rec = {"run": i, "seed": opts.seed, "commit": opts.commit, "class": cls, "base": base.name, "command": cmd,
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
        f.write("#!/bin/sh\n# the mutated input is made again from the seed and run number,\n"
                "# by the mutators of commit %s\n" % opts.commit)
        f.write("python3 %s --cli %s --testdata %s --seed %d --replay %d --timeout %d%s\n"
                % (os.path.abspath(__file__), opts.cli, opts.testdata, opts.seed, rec["run"],
                   opts.timeout, (" --only " + opts.only if opts.only else "") +
                   (" --commands " + ",".join(opts.commands) if opts.commands else "")))
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


def summary(stats):
    """The table: runs, skipped runs (no mutation applied) and findings per class."""
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
    ap.add_argument("--timeout", type=int, default=None,
                    help="seconds per run (default 20, or 60 under sanitizers)")
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
    # a replay makes the same input only with the same mutators
    opts.commit = subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                                 capture_output=True, text=True).stdout.strip() or "unknown"
    bases = Bases(opts.cli, opts.testdata, opts.work, enc)
    runner = Runner(opts, bases)
    if opts.timeout is None:
        opts.timeout = 60 if runner.asan else 20
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
    print(summary(stats))
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
