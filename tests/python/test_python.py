# SPDX-License-Identifier: MIT
"""test_python.py: the Python module btrfsimg against the kernel's recorded
view of the committed images, and against the CLI's JSON lines.

Run by meson (test 'python') on the interpreter the module was built for,
PYTHONPATH at the build tree's python/ directory, and BTRFSIMG_CLI /
BTRFSIMG_TESTDATA in the environment. By hand (-k WORD: only the checks
whose name holds WORD):

    PYTHONPATH=build/python BTRFSIMG_CLI=build/tools/btrfsimg \\
        /usr/bin/python3 tests/python/test_python.py [-k WORD]

One check per test function and parameter ("test_walk_equals_kernel_view[names]"),
as the other image tests report them (tests/support/imgtest.py Tally); its
assert statements are the checks, so it refuses to run under python -O.

Truth: walk records equal testdata/files/*.view.jsonl (stat/statx,
readdir, name_to_handle_at and sha256 recorded from a kernel mount by
testdata/gen_kview.py); superblock and subvolumes equal the
expected-*.json that testdata/gen_progs2json.py made from btrfs-progs
(dump-super, subvolume list/show) for testdata/images/. File bytes: the
kernel's sha256 of every regular file, then random ranges against the
whole. The CLI comparison holds the module's dicts to the same keys and
values as `walk/inodes/subvols/super --json --json-u64 number`, so the
two front ends cannot drift apart.
"""
import gc
import hashlib
import inspect
import io
import json
import mmap
import os
import pathlib
import random
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

import btrfsimg  # noqa: E402

CLI = os.environ.get("BTRFSIMG_CLI", "")
TESTDATA = os.environ.get("BTRFSIMG_TESTDATA", os.path.join(imgtest.REPO, "testdata"))
FILES = os.path.join(TESTDATA, "files")
IMAGES = os.path.join(TESTDATA, "images")
SANITIZED = bool(os.environ.get("BTRFSIMG_SANITIZED"))
# Under the sanitizer run the interpreter was started with their runtimes
# preloaded; the programs the tests start are not ours (qemu-img hangs
# under them), and the sanitized CLI links its runtime itself.
os.environ.pop("LD_PRELOAD", None)
kv = imgtest.import_kview(TESTDATA)

FILE_IMAGES = sorted(n[:-len(".img.zst")] for n in os.listdir(FILES) if n.endswith(".img.zst"))
# multi-device, partitioned, mixed and other-checksum sets, restored whole
SET_IMAGES = ["raid1", "raid5", "raid6", "gpt1", "mixed", "csum-blake2", "dup", "raid10"]


# ------------------------------------------------------------ the harness

CHECKS = []  # (test function, its parameters or None), in the order defined


def check(params=None):
    """Register the decorated test function: one check, or one per
    parameter (passed as its argument @name)."""
    def register(fn):
        CHECKS.append((fn, params))
        return fn
    return register


class Skip(Exception):
    """The check cannot run here (a tool or an image missing): why."""


def skip(reason):
    raise Skip(reason)


class raises:
    """with raises(E) as e: the block must raise E (or a subclass); e.value
    is the exception."""

    def __init__(self, exc):
        self.exc, self.value = exc, None

    def __enter__(self):
        return self

    def __exit__(self, typ, value, tb):
        if typ is None:
            raise AssertionError("did not raise %s" % self.exc.__name__)
        if not issubclass(typ, self.exc):
            return False
        self.value = value
        return True


class warns:
    """with warns(W): the block must warn W (or a subclass) at least once."""

    def __init__(self, category):
        self.category = category

    def __enter__(self):
        self.caught = warnings.catch_warnings(record=True)
        self.seen = self.caught.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, typ, value, tb):
        self.caught.__exit__(typ, value, tb)
        if typ is None and not any(issubclass(w.category, self.category) for w in self.seen):
            raise AssertionError("did not warn %s" % self.category.__name__)
        return False


# ------------------------------------------------------------ session images

def files_images(tmp):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = imgtest.unzstd(os.path.join(FILES, name + ".img.zst"),
                                         str(tmp / (name + ".img")))
        return cache[name]
    return get


def set_images(tmp):
    cache = {}

    def get(name):
        if name not in cache:
            idir = os.path.join(IMAGES, name)
            man = imgtest.load_json(os.path.join(idir, "manifest.json"))
            d = tmp / ("set-" + name)
            d.mkdir()
            for f in man["files"]:
                imgtest.unzstd(os.path.join(idir, f + ".zst"), str(d / f))
            cache[name] = (idir, man, str(d))
        return cache[name]
    return get


def cli_json(args, img):
    """The CLI's JSON lines (64-bit numbers as numbers, as the module gives
    them), parsed as Python would (surrogateescape for raw bytes)."""
    if not CLI:
        skip("BTRFSIMG_CLI not set")
    imgs = img if isinstance(img, list) else [img]
    p = subprocess.run([CLI] + args + ["--json", "--json-u64", "number"] + imgs,
                       capture_output=True, timeout=600)
    assert p.returncode in (0, 1), p.stderr.decode(errors="replace")
    return [json.loads(line) for line in p.stdout.decode("utf-8", "surrogateescape").splitlines()
            if line.strip()]


def views(name):
    out = []
    for v in sorted(os.listdir(FILES)):
        if v.startswith(name + ".") and v.endswith(".view.jsonl"):
            variant = v[len(name) + 1:-len(".view.jsonl")]
            out.append((variant, os.path.join(FILES, v)))
    return out


def norm(field, v):
    if isinstance(v, str) and field == "sha256":
        return v.lower()
    if isinstance(v, dict) and field in ("handle", "handle_conn"):
        return {k: (x.lower() if k == "hex" and isinstance(x, str) else x) for k, x in v.items()}
    if isinstance(v, dict) and field == "xattrs":
        return {k: (x.lower() if isinstance(x, str) else x) for k, x in v.items()}
    return v


def kernel_diffs(exp, got):
    gmap = {r["path"]: r for r in got}
    diffs = []
    if [r["path"] for r in exp] != [r["path"] for r in got]:
        diffs.append("paths or their order differ: kernel %d, module %d" % (len(exp), len(got)))
    for e in exp:
        g = gmap.get(e["path"])
        if g is None:
            continue
        stub = e.get("ino") == kv.STUB_INO and stat.S_ISDIR(e.get("mode") or 0)
        for f in kv.FIELDS:
            if f == "path" or (stub and f in kv.VOLATILE_STUB_FIELDS):
                continue
            if norm(f, e.get(f)) != norm(f, g.get(f)):
                diffs.append("%r: %s: kernel %r, module %r" % (e["path"], f, e.get(f), g.get(f)))
    return diffs


# ------------------------------------------------------------ kernel truth

@check(FILE_IMAGES)
def test_walk_equals_kernel_view(name, files_img):
    img = files_img(name)
    assert views(name), "no recorded view for " + name
    for variant, path in views(name):
        exp = imgtest.load_jsonl(path)
        with warnings.catch_warnings():
            warnings.simplefilter("error", btrfsimg.DamageWarning)
            with btrfsimg.open([img], log_replay=variant != "nolog") as fs:
                got = list(fs.walk(hash=True))
        d = kernel_diffs(exp, got)
        assert not d, "%s.%s: %d diffs, first: %s" % (name, variant, len(d), d[:10])


@check(FILE_IMAGES)
def test_file_bytes_equal_kernel(name, files_img):
    """Every regular file read whole equals the kernel's sha256; random
    ranges by seek equal the same bytes of the whole."""
    img = files_img(name)
    exp = imgtest.load_jsonl(dict(views(name))[""])
    rnd = random.Random(name)
    with btrfsimg.open(img) as fs:
        for r in exp:
            if not r.get("sha256"):
                continue
            with fs.open(r["path"]) as f:
                whole = f.read()
                assert hashlib.sha256(whole).hexdigest() == r["sha256"].lower(), r["path"]
                assert len(whole) == r["size"]
                for _ in range(4 if len(whole) else 1):
                    off = rnd.randrange(len(whole) + 2)
                    n = rnd.randrange(1, 300000)
                    assert f.seek(off) == off
                    assert f.read(n) == whole[off:off + n], (r["path"], off, n)
                    assert f.tell() == min(off + n, max(off, len(whole)))
                if whole:
                    f.seek(-1, io.SEEK_END)
                    assert f.read() == whole[-1:]


# ------------------------------------------------------------ the CLI's keys

@check(FILE_IMAGES)
def test_dicts_equal_cli_json(name, files_img):
    img = files_img(name)
    with btrfsimg.open(img) as fs:
        assert list(fs.walk(hash=True)) == cli_json(["walk", "--hash"], img)
        assert list(fs.walk(inumbits=40)) == cli_json(["walk", "--inumbits", "40"], img)
        assert list(fs.inodes()) == cli_json(["inodes"], img)
        assert list(fs.inodes(inumbits=64)) == cli_json(["inodes", "--inumbits", "64"], img)
        assert fs.subvolumes() == cli_json(["subvols"], img)
        assert [fs.superblock] == cli_json(["super"], img)
        subs = [s for s in fs.subvolumes()[1:3] if s["path"] is not None and not s["deleted"]]
        for s in subs:
            assert list(fs.walk(subvol=s["id"])) == \
                cli_json(["walk", "--subvol", str(s["id"])], img)
            assert list(fs.walk(inumbits=48, mount_subvol=s["id"])) == \
                cli_json(["walk", "--inumbits", "48", "--mount-subvol", str(s["id"])], img)
        top = [r for r in fs.walk() if r["path"].count("/") == 0 and r["path"]]
        for r in top[:3]:
            raw = r["path"].encode("utf-8", "surrogateescape")
            assert list(fs.walk(path=raw, hash=True)) == cli_json(["walk", "--hash", "--path", raw],
                                                                   img)
        col = fs.collisions()
        lines = cli_json(["collisions", "--examples", "3"], img)
        summary = [x for x in lines if x.get("summary")][0]
        for k, v in col.items():
            if k != "schemes":
                assert summary[k] == v, k
        schemes = {x["scheme"]: x for x in lines if "scheme" in x}
        assert [s["scheme"] for s in col["schemes"]] == list(schemes)
        for s in col["schemes"]:
            c = schemes[s["scheme"]]
            for k in ("groups", "inodes", "readdir_mismatch", "collision_free",
                      "groups_without_stubs", "inodes_without_stubs"):
                assert s[k] == c[k], (s["scheme"], k)
            assert [[(m["subvol"], m["objectid"]) for m in g] for g in s["examples"]] == \
                [[(m["subvol"], m["objectid"]) for m in g] for g in c["examples"]]


@check(["comp", "holes"])
def test_extents_and_csum_equal_cli(name, files_img):
    """extents() is `extents --json` (less the ids); walk(csum=True) and
    stat()'s "csum" are `walk --json --csum`'s."""
    img = files_img(name)
    with btrfsimg.open(img) as fs:
        lines = cli_json(["walk", "--csum"], img)
        assert list(fs.walk(csum=True)) == lines
        regular = [r for r in lines if r["mode"] & 0o170000 == 0o100000][:40]
        assert regular
        for r in regular:
            assert fs.stat(r["path"])["csum"] == r["csum"]
            assert fs.csum(r["path"]) == r["csum"]
            want = cli_json(["extents", "--inode", "%d:%d" % (r["subvol"], r["ino"])], img)
            for w in want:
                del w["subvol"], w["objectid"]
            assert fs.extents(r["path"]) == want
        with raises(OSError):
            fs.extents("")  # a directory


@check()
def test_walk_paths_and_stat(files_img):
    img = files_img("names")
    exp = imgtest.load_jsonl(dict(views("names"))[""])
    with btrfsimg.open(img) as fs:
        for r in exp[:200]:
            if r["path"] == "":
                continue
            got = fs.stat(r["path"])
            assert {k: got.get(k) for k in ("ino", "mode", "size", "mtime", "d_ino")} == \
                {k: r.get(k) for k in ("ino", "mode", "size", "mtime", "d_ino")}
            raw = r["path"].encode("utf-8", "surrogateescape")
            assert fs.stat(raw)["ino"] == r["ino"]
            if r["mode"] & 0o170000 != 0o040000:  # a file's record carries its name
                assert got["path"] == r["path"].rsplit("/", 1)[-1], (got["path"], r["path"])
            parent, _, base = raw.rpartition(b"/")
            assert base in fs.listdir(parent)
            assert base.decode("utf-8", "surrogateescape") in \
                fs.listdir(parent.decode("utf-8", "surrogateescape"))
            if r.get("target") is not None:
                assert fs.readlink(r["path"]) == r["target"]
            assert sorted(fs.listxattr(r["path"])) == sorted(r["xattrs"])
            for k, h in r["xattrs"].items():
                assert hashlib.sha256(fs.getxattr(r["path"], k)).hexdigest() == h.lower()
        sub = [r for r in exp if r["path"].startswith("many/")]
        got = list(fs.walk(path="many"))
        assert [g["path"] for g in got[1:]] == [r["path"][5:] for r in sub]


@check()
def test_open_inode(files_img):
    img = files_img("holes")
    exp = imgtest.load_jsonl(dict(views("holes"))[""])
    with btrfsimg.open(img) as fs:
        for r in exp:
            if r.get("sha256"):
                with fs.open_inode(r["subvol"], r["ino"]) as f:
                    assert hashlib.sha256(f.read()).hexdigest() == r["sha256"].lower()
                with fs.open(r["path"], buffering=0) as raw:
                    assert isinstance(raw, btrfsimg.File) and raw.size == r["size"]
                    buf = bytearray(r["size"])
                    got = 0
                    while got < len(buf):
                        n = raw.readinto(memoryview(buf)[got:])
                        assert n > 0
                        got += n
                    assert hashlib.sha256(buf).hexdigest() == r["sha256"].lower()


class CountingHandle:
    """The Filesystem's handle with its calls counted by name."""

    def __init__(self, h):
        self._h = h
        self.calls = {}

    def __getattr__(self, name):
        f = getattr(self._h, name)
        if not callable(f):
            return f

        def counted(*a):
            self.calls[name] = self.calls.get(name, 0) + 1
            return f(*a)
        return counted


@check(FILE_IMAGES)
def test_read_walked_records(name, files_img):
    """Every regular file of fs.walk(), read from its record by
    read_bytes(rec) and open(rec).read(), equals the kernel's sha256 of
    that path, with no path lookup at all (the record names its subvolume
    and inode); read_bytes(path) reads the same. A directory's record
    raises IsADirectoryError; a record with a subvol argument TypeError."""
    img = files_img(name)
    exp = {r["path"]: r for r in imgtest.load_jsonl(dict(views(name))[""])}
    with btrfsimg.open(img) as fs:
        h = fs._h = CountingHandle(fs._h)
        n = 0
        for rec in fs.walk():
            if stat.S_ISDIR(rec["mode"]) and rec["path"]:
                with raises(IsADirectoryError):
                    fs.read_bytes(rec)
            if not stat.S_ISREG(rec["mode"]):
                continue
            want = exp[rec["path"]]["sha256"].lower()
            data = fs.read_bytes(rec)
            assert type(data) is bytes and len(data) == rec["size"], rec["path"]
            assert hashlib.sha256(data).hexdigest() == want, rec["path"]
            with fs.open(rec) as f:
                assert f.read() == data, rec["path"]
                assert f.read() == b""
            with fs.open(rec, buffering=0) as f:
                f.seek(len(data) // 3)
                assert f.read() == data[len(data) // 3:], rec["path"]
            n += 1
        assert n == sum(1 for r in exp.values() if r.get("sha256")), n
        assert h.calls.get("lookup", 0) == 0, h.calls
        assert h.calls.get("read_all", 0) >= n, h.calls
        some = next(p for p, r in exp.items() if r.get("sha256"))
        assert hashlib.sha256(fs.read_bytes(some)).hexdigest() == exp[some]["sha256"].lower()
        with raises(TypeError):
            fs.read_bytes({"subvol": 5, "ino": 257}, subvol=5)


@check()
def test_read_forged_size(tmp, files_img):
    """A file's INODE_ITEM size set to 2^62 (leaf checksums recomputed), a
    size the kernel allows over no extents: read() and read_bytes() used
    to allocate the whole claimed size (MemoryError); now they return the
    file's data up to where it ends, with a DamageWarning naming the
    inode, its size and the bound, as `btrfsimg cat` does."""
    img = files_img("holes")
    exp = {r["path"]: r for r in imgtest.load_jsonl(dict(views("holes"))[""])}
    r = exp["plain/trunc-down"]
    with open(img, "rb") as f:
        data = bytearray(f.read())
    fsid = bytes(data[0x10020:0x10030])
    ns = struct.unpack_from("<I", data, 0x10000 + 0x94)[0]
    n = 0
    for o in range(0, len(data) - ns, 4096):
        if data[o + 32:o + 48] != fsid or data[o + 100] != 0 or \
                struct.unpack_from("<Q", data, o + 88)[0] != r["subvol"]:
            continue
        for slot in range(struct.unpack_from("<I", data, o + 96)[0]):
            it = o + 101 + 25 * slot
            obj, typ, _, ioff = struct.unpack_from("<QBQI", data, it)
            if obj == r["ino"] and typ == 1:     # INODE_ITEM: size at data + 16
                struct.pack_into("<Q", data, o + 101 + ioff + 16, 1 << 62)
                struct.pack_into("<I", data, o, imgtest.crc32c(bytes(data[o + 32:o + ns])))
                n += 1
    assert n > 0, "no leaf holds inode %d" % r["ino"]
    bad = tmp / "holes-forged.img"
    with open(bad, "wb") as f:
        f.write(data)
    with btrfsimg.open(str(bad)) as fs:
        assert fs.stat(r["path"])["size"] == 1 << 62
        rec = next(x for x in fs.walk() if x["path"] == r["path"])
        for read in (lambda: fs.read_bytes(rec), lambda: fs.open(r["path"]).read()):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always", btrfsimg.DamageWarning)
                got = read()
            msgs = [str(x.message) for x in w if issubclass(x.category, btrfsimg.DamageWarning)]
            assert r["size"] <= len(got) < 1 << 30, len(got)
            assert hashlib.sha256(got[:r["size"]]).hexdigest() == r["sha256"].lower()
            assert len(msgs) == 1, msgs
            for word in ("inode=%d" % r["ino"], "size=%d" % (1 << 62), "more than", "forged"):
                assert word in msgs[0], msgs[0]
    os.unlink(bad)


# ------------------------------------------------------------ devices

class ReadAt:
    """A pyewf/pyqcow-like object: read_at(offset, size) and get_size()."""

    def __init__(self, path):
        self.f = open(path, "rb")
        self.size = os.fstat(self.f.fileno()).st_size

    def read_at(self, off, n):
        return os.pread(self.f.fileno(), n, off)

    def get_size(self):
        return self.size

    def close(self):
        self.f.close()


def device_sets(name, set_img):
    """(recorded-view directory, file suffix, device paths, open() options)
    for each filesystem of a committed set."""
    idir, man, d = set_img(name)
    for tag, info in sorted(man["filesystems"].items()):
        devs = [os.path.join(d, x) for x in info["devices"]]
        opts = [{}]
        if "partition" in info:
            opts += [{"partition": info["partition"]}, {"offset": info["offset"]}]
        yield idir, "." + tag if tag else "", devs, opts


@check(SET_IMAGES)
def test_sets_super_subvols_equal_progs(name, set_img):
    for idir, sfx, devs, opts in device_sets(name, set_img):
        exp_super = imgtest.load_json(os.path.join(idir, "expected-super%s.json" % sfx))
        mirrors = imgtest.load_json(os.path.join(idir, "expected-mirrors%s.json" % sfx))
        exp_subs = imgtest.load_jsonl(os.path.join(idir, "expected-subvols%s.jsonl" % sfx))
        kinds = [list(devs), [io.open(p, "rb") for p in devs], [ReadAt(p) for p in devs],
                 [io.BufferedReader(io.FileIO(p)) for p in reversed(devs)]]
        walks = []
        for k in kinds:
            for o in opts:
                with btrfsimg.open(k, **o) as fs:
                    sb = fs.superblock
                    exp = dict(exp_super, mirrors=mirrors[os.path.basename(
                        k[0] if isinstance(k[0], str) else k[0].name if hasattr(k[0], "name")
                        else k[0].f.name)])
                    for key, v in exp.items():
                        assert sb[key] == v, (name, sfx, key, o)
                    got = {s["id"]: s for s in fs.subvolumes()}
                    for s in exp_subs:
                        for key, v in s.items():
                            assert got[s["id"]][key] == v, (name, s["id"], key)
                    walks.append(list(fs.walk(hash=True)))
                    assert len(sb["devices"]) == len(devs)
            for d in k:
                if not isinstance(d, str):
                    d.close()
        assert all(w == walks[0] for w in walks)
        assert walks[0] == cli_json(["walk", "--hash"], devs)


@check()
def test_degraded_warns(set_img):
    _, _, devs, _ = next(device_sets("raid1", set_img))
    full = None
    with btrfsimg.open(devs) as fs:
        full = list(fs.walk(hash=True))
    with warns(btrfsimg.DamageWarning):
        with btrfsimg.open(devs[:1]) as fs:
            assert fs.missing_devices == 1
            assert list(fs.walk(hash=True)) == full
    seen = []
    with btrfsimg.open(devs[1:], on_damage=seen.append) as fs:
        assert list(fs.walk(hash=True)) == full
    assert seen and all(isinstance(m, str) and m for m in seen)


# ------------------------------------------------------------ failures

@check()
def test_errors(tmp, files_img):
    with raises(btrfsimg.NotFoundError) as e:
        btrfsimg.open(str(tmp / "no-such.img"))
    assert e.value.errno == 2 and "no-such.img" in str(e.value)
    assert isinstance(e.value, btrfsimg.Error) and isinstance(e.value, FileNotFoundError)

    junk = tmp / "junk.img"
    junk.write_bytes(b"\0" * (1 << 20))
    with raises(btrfsimg.Error) as e:
        btrfsimg.open(str(junk))
    assert e.value.strerror and e.value.errno

    # the names image with its primary superblock's bytes damaged: opens
    # from a copy or fails with a message; with its first tree blocks
    # zeroed it must fail with the library's message
    img = files_img("names")
    with open(img, "rb") as f:
        data = bytearray(f.read(1 << 22))
    bad = tmp / "bad.img"
    data[0x10000 + 0x40:0x10000 + 0x48] = b"_BHRfS_N"  # magic
    bad.write_bytes(bytes(data))
    with raises(btrfsimg.Error) as e:
        btrfsimg.open(str(bad))
    assert "magic" in str(e.value) or "superblock" in str(e.value), str(e.value)

    with btrfsimg.open(img) as fs:
        with raises(btrfsimg.NotFoundError) as e:
            fs.stat("no/such/path")
        assert e.value.errno == 2
        with raises(btrfsimg.NotFoundError):
            fs.open("nope")
        with raises(btrfsimg.NotFoundError):
            list(fs.walk(path="nope"))
        with raises(IsADirectoryError):
            fs.open("many")
    with raises(ValueError):
        fs.stat("many")


@check()
def test_open_refuses_as_the_cli(files_img):
    """The library decides what an open means, so the module refuses what
    the CLI refuses, with the CLI's words: a partition of an image that
    holds btrfs itself (before, the module read the image whole and
    ignored the number), and a volume that is not VG/LV. A file object
    (the step-by-step route) is refused the same way."""
    img = files_img("subvols")
    with raises(btrfsimg.Error) as e:
        btrfsimg.open(img, partition=1)
    msg = ("--partition 1: image '%s' holds btrfs itself, not a partition table; "
           "leave --partition out" % img)
    assert e.value.errno == 22 and str(e.value).endswith(msg), str(e.value)
    if CLI:
        p = subprocess.run([CLI, "super", "--partition", "1", img], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        assert p.returncode == 2
        assert p.stderr.decode() == "btrfsimg: super: %s\n" % msg
    with open(img, "rb") as f, raises(btrfsimg.Error) as e:
        btrfsimg.open(f, partition=1)
    assert "holds btrfs itself, not a partition table" in str(e.value), str(e.value)
    with raises(btrfsimg.Error) as e:
        btrfsimg.open(img, volume="novolume")
    assert "volume 'novolume': expected VG/LV" in str(e.value), str(e.value)
    with raises(btrfsimg.Error) as e:
        btrfsimg.open([img, img + ".nothere"])
    assert e.value.errno == 2 and img + ".nothere" in str(e.value), str(e.value)
    with btrfsimg.open(iter([img]), format="raw", kdf_limit=1, generation=None) as fs:
        assert fs.superblock["num_devices"] == 1


@check()
def test_device_exception_is_the_cause(files_img):
    img = files_img("names")

    class Flaky(ReadAt):
        def read_at(self, off, n):
            raise RuntimeError("the device went away at %d" % off)

    d = Flaky(img)
    with raises(btrfsimg.Error) as e:
        btrfsimg.open([d], on_damage=lambda m: None)
    d.close()
    assert isinstance(e.value.__cause__, RuntimeError)
    assert e.value.strerror


@check()
def test_corrupt_block_in_walk(tmp, files_img):
    """A data block overwritten: reading it raises DamagedError with the
    library's message (checksum), and verify=False reads the bytes."""
    img = files_img("extents")
    exp = imgtest.load_jsonl(dict(views("extents"))[""])
    big = None
    with open(img, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as raw, \
            btrfsimg.open(img) as fs:
        for r in sorted((r for r in exp if r.get("sha256")), key=lambda r: -r["size"])[:4]:
            with fs.open(r["path"]) as g:
                whole = g.read()
            for off in range(0, len(whole) - 4096, max(4096, len(whole) // 8 // 4096 * 4096)):
                chunk = whole[off:off + 4096]
                at = raw.find(chunk) if len(set(chunk)) > 16 else -1
                if at >= 0 and raw.find(chunk, at + 1) < 0:
                    big = r
                    break
            if big:
                break
    if not big:
        skip("no plain, distinctive 4 KiB block in the extents image")
    bad = tmp / "extents-bad.img"
    subprocess.run(["cp", "--sparse=always", img, str(bad)], check=True)
    with open(bad, "r+b") as f:
        f.seek(at)
        f.write(bytes(x ^ 0xff for x in chunk[:16]))
    with btrfsimg.open(str(bad)) as fs, fs.open(big["path"]) as f:
        with raises(btrfsimg.DamagedError) as e:
            f.read()
        assert "csum" in str(e.value) or "checksum" in str(e.value), str(e.value)
    with btrfsimg.open(str(bad), verify=False) as fs, fs.open(big["path"]) as f:
        assert len(f.read()) == len(whole)
    os.unlink(bad)


# ------------------------------------------------------------ threads, leaks

@check()
def test_threads(files_img):
    img = files_img("snaps")
    with btrfsimg.open(img) as fs:
        want = list(fs.walk(hash=True))
    out = [None] * 4

    def run(i):
        with btrfsimg.open(img) as fs:
            out[i] = list(fs.walk(hash=True))
    ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(o == want for o in out)
    # one Filesystem from several threads: serialized, still right
    with btrfsimg.open(img) as fs:
        res = [None] * 3

        def one(i):
            res[i] = list(fs.walk())
        ts = [threading.Thread(target=one, args=(i,)) for i in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert res[0] == res[1] == res[2] and len(res[0]) == len(want)
        it = fs.inodes()
        next(it)
        with raises(RuntimeError):
            fs.superblock
        it.close()
        assert fs.superblock


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


@check()
def test_no_leaks(files_img):
    img = files_img("names")

    def once():
        with btrfsimg.open(img) as fs:
            fs.superblock
            fs.subvolumes()
            for i, r in enumerate(fs.walk(hash=True)):
                if r["mode"] & 0o170000 == 0o100000 and i % 50 == 0:
                    with fs.open(r["path"]) as f:
                        f.read()
            it = fs.inodes()
            for _ in zip(range(100), it):
                pass
            it.close()
        dev = ReadAt(img)
        fs2 = btrfsimg.open([dev])
        list(fs2.walk(path="many"))
        fs2.close()
        dev.close()
        try:
            btrfsimg.open("/nonexistent.img")
        except btrfsimg.Error:
            pass
    rounds = 3 if SANITIZED else 12
    for _ in range(3):
        once()
    gc.collect()
    objs, rss = len(gc.get_objects()), rss_kib()
    for _ in range(rounds):
        once()
    gc.collect()
    assert len(gc.get_objects()) - objs < 50
    if not SANITIZED:  # ASan's quarantine holds freed memory back
        assert rss_kib() - rss < 4096, "RSS grew %d KiB over %d opens" % (rss_kib() - rss, rounds)
    if hasattr(sys, "gettotalrefcount"):
        before = sys.gettotalrefcount()
        once()
        assert sys.gettotalrefcount() - before < 100


@check()
def test_references_released(files_img):
    """The module keeps no reference to a device object, an on_damage
    callable or a path once the Filesystem is closed or dropped."""
    img = files_img("names")
    dev, cb, path = ReadAt(img), (lambda m: None), str(img)
    before = [sys.getrefcount(x) for x in (dev, cb, path)]
    for _ in range(20):
        with btrfsimg.open([dev], on_damage=cb) as fs:
            list(fs.walk(path="many"))
            it = fs.inodes()
            next(it)
            it.close()
        fs2 = btrfsimg.open(path, on_damage=cb)
        w = fs2.walk()
        next(w)
        del fs2, w
        try:
            btrfsimg.open([dev, path + ".missing"], on_damage=cb)
        except btrfsimg.NotFoundError:
            pass
    gc.collect()
    assert [sys.getrefcount(x) for x in (dev, cb, path)] == before
    dev.close()


@check()
def test_module_docs():
    assert btrfsimg.version() == btrfsimg.__version__
    for obj in (btrfsimg, btrfsimg.open, btrfsimg.Filesystem.walk, btrfsimg.Filesystem.open,
                btrfsimg.Filesystem.read_bytes,
                btrfsimg.Error, btrfsimg.File):
        assert obj.__doc__ and len(obj.__doc__) > 40, obj
    stub = os.path.join(os.path.dirname(btrfsimg.__file__), "_btrfsimg.pyi")
    assert os.path.exists(stub)
    # pip's version (pyproject.toml) is the library's (meson.build)
    with open(os.path.join(imgtest.REPO, "pyproject.toml")) as f:
        assert 'version = "%s"' % btrfsimg.__version__ in f.read()


# ------------------------------------------------------------ containers, volumes

@check()
def test_lvm_volumes(tmp):
    """testdata/volume: testdata/files/subvols.img under GPT + LVM (made by
    lvm2's own tools); the walk through the stack is the kernel's view of
    subvols.img."""
    vdir = os.path.join(TESTDATA, "volume")
    if not os.path.exists(os.path.join(vdir, "gpt-lvm.img.zst")):
        skip("no testdata/volume")
    exp = imgtest.load_jsonl(os.path.join(FILES, "subvols.view.jsonl"))
    imgs = {n: imgtest.unzstd(os.path.join(vdir, n + ".img.zst"), str(tmp / (n + ".img")))
            for n in ("gpt-lvm", "pv-a", "pv-b")}
    for devs, kw in (([imgs["gpt-lvm"]], {}),
                     ([imgs["pv-a"], imgs["pv-b"]], {"volume": "vgm/data"}),
                     ([imgs["pv-b"], imgs["pv-a"]], {"volume": "vgm/strip"})):
        with btrfsimg.open(devs, **kw) as fs:
            d = kernel_diffs(exp, list(fs.walk(hash=True)))
            assert not d, (devs, kw, d[:5])
    with raises(btrfsimg.Error) as e:
        btrfsimg.open([imgs["pv-a"], imgs["pv-b"]])
    assert "vgm/data" in str(e.value) and "vgm/strip" in str(e.value)


@check()
def test_qcow2_container(tmp, files_img):
    """The names image converted to qcow2 by qemu-img reads as the raw one."""
    if not shutil.which("qemu-img"):
        skip("qemu-img not found (Debian: qemu-utils)")
    img = files_img("names")
    q = str(tmp / "names.qcow2")
    subprocess.run(["qemu-img", "convert", "-O", "qcow2", img, q], check=True,
                   capture_output=True, timeout=120)
    with btrfsimg.open(img) as fs:
        want = list(fs.walk(hash=True))
    for fmt in (None, "qcow2"):
        with btrfsimg.open(q, format=fmt) as fs:
            assert list(fs.walk(hash=True)) == want
    with raises(ValueError):
        btrfsimg.open(q, format="no-such-format")
    os.unlink(q)


@check()
def test_luks_passphrase(tmp):
    """A LUKS2 header made by cryptsetup (no device-mapper needed): the
    wrong passphrase is refused with the library's message; the right one
    opens the keyslot and goes on to find no btrfs inside (the payload is
    zeros)."""
    if not shutil.which("cryptsetup"):
        skip("cryptsetup not found (Debian: cryptsetup-bin)")
    img = str(tmp / "luks.img")
    with open(img, "wb") as f:
        f.truncate(32 << 20)
    p = subprocess.run(["cryptsetup", "luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2",
                        "--pbkdf-force-iterations", "1000", "--key-file", "-", img],
                       input=b"right", capture_output=True, timeout=120)
    if p.returncode != 0:
        skip("cryptsetup luksFormat failed: %s" % p.stderr.decode(errors="replace"))
    with raises(btrfsimg.Error) as e:
        btrfsimg.open(img, passphrase="wrong")
    assert "keyslot" in str(e.value), str(e.value)
    with raises(btrfsimg.Error) as e2:
        btrfsimg.open(img, passphrase=b"right")
    assert "keyslot" not in str(e2.value), str(e2.value)
    os.unlink(img)


@check()
def test_luks_kdf_limit(tmp):
    """kdf_limit is the CLI's --kdf-limit: a keyslot of 300000 PBKDF2
    iterations is refused under 5 ms with its estimate, and opens (then
    finds no btrfs in the zeros) with the default."""
    if not shutil.which("cryptsetup"):
        skip("cryptsetup not found (Debian: cryptsetup-bin)")
    img = str(tmp / "luks-kdf.img")
    with open(img, "wb") as f:
        f.truncate(32 << 20)
    p = subprocess.run(["cryptsetup", "luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2",
                        "--pbkdf-force-iterations", "300000", "--key-file", "-", img],
                       input=b"right", capture_output=True, timeout=120)
    if p.returncode != 0:
        skip("cryptsetup luksFormat failed: %s" % p.stderr.decode(errors="replace"))
    with raises(btrfsimg.Error) as e:
        btrfsimg.open(img, passphrase="right", kdf_limit=0.005)
    assert "keyslot 0 (pbkdf2-sha256 300000 iterations" in str(e.value), str(e.value)
    assert "over the limit of 0.005 s" in str(e.value), str(e.value)
    with raises(btrfsimg.Error) as e2:
        btrfsimg.open(img, passphrase="right")
    assert "keyslot" not in str(e2.value), str(e2.value)
    with raises(ValueError):
        btrfsimg.open(img, passphrase="right", kdf_limit=0)
    os.unlink(img)


@check(["snaps", "extents"])
def test_deleted_equals_cli(name, files_img):
    """fs.deleted() is `deleted --json --hash` record for record (the
    forensics tests hold that to the kernel); read_deleted() gives the
    bytes those sha256 were taken of."""
    img = files_img(name)
    with btrfsimg.open(img) as fs:
        got = fs.deleted(hash=True)
        assert got == cli_json(["deleted", "--hash"], img)
        assert got, "no recovered versions in " + name
        for r in got[:40]:
            if "sha256" in r:
                data = fs.read_deleted(r["id"])
                assert len(data) == r["size"] and hashlib.sha256(data).hexdigest() == r["sha256"]
        with raises(btrfsimg.NotFoundError):
            fs.read_deleted("5-999999-1-nosuch")


@check()
def test_read_deleted_no_verify(tmp):
    """read_deleted(no_verify=True) is `cat --no-verify --deleted`: ranges
    whose checksums fail as the bytes on disk (kernel-made forensic image:
    overwritten extents), every other byte as read_deleted()'s."""
    img = imgtest.unzstd(os.path.join(TESTDATA, "forensic", "single.img.zst"),
                         str(tmp / "forensic-single.img"))
    with btrfsimg.open(img, on_damage=lambda msg: None) as fs:
        recs = [r for r in fs.deleted() if any(b["why"] == "csum mismatch"
                                                for b in r["bad_ranges"])]
        assert recs, "no version with a csum mismatch in " + img
        differ = 0
        for r in recs:
            zeros, raw = fs.read_deleted(r["id"]), fs.read_deleted(r["id"], no_verify=True)
            assert len(raw) == len(zeros) == r["size"]
            inside = bytearray(len(raw))
            for b in r["bad_ranges"]:
                if b["why"] == "csum mismatch":
                    inside[b["offset"]:b["offset"] + b["length"]] = b"\1" * b["length"]
            assert all(inside[i] for i in range(len(raw)) if raw[i] != zeros[i])
            differ += raw != zeros
            if CLI:
                p = subprocess.run([CLI, "cat", "--no-verify", "--deleted", r["id"], img],
                                   capture_output=True, timeout=120)
                assert p.returncode == 1 and p.stdout == raw
        assert differ


# ------------------------------------------------------------ running

def run(t, fn, param, fixtures):
    """One check: the function with its fixtures (and @param as name). A
    failed assert or any other exception fails it, with the traceback's
    end; the next check runs regardless."""
    name = fn.__name__ + ("" if param is None else "[%s]" % param)
    args = {a: param if a == "name" else fixtures[a] for a in inspect.signature(fn).parameters}
    try:
        fn(**args)
    except Skip as e:
        print("skip %s: %s" % (name, e))
        return
    except Exception:
        t.problems(name, traceback.format_exc().rstrip().splitlines()[-12:])
        return
    t.check(name, True)


def main():
    if not __debug__:
        print("test_python.py: its checks are assert statements; run it without -O",
              file=sys.stderr)
        return 2
    only = sys.argv[sys.argv.index("-k") + 1] if "-k" in sys.argv[:-1] else None
    registered = {fn for fn, _ in CHECKS}
    loose = [n for n, f in sorted(globals().items())
             if n.startswith("test_") and inspect.isfunction(f) and f not in registered]
    if loose:  # a test written without @check() would never run
        print("test_python.py: test functions not registered by @check: %s" % ", ".join(loose),
              file=sys.stderr)
        return 2
    t = imgtest.Tally()
    with tempfile.TemporaryDirectory(prefix="test_python.") as d:
        tmp = pathlib.Path(d)
        fixtures = {"tmp": tmp, "files_img": files_images(tmp), "set_img": set_images(tmp)}
        for fn, params in CHECKS:
            for param in [None] if params is None else params:
                if only is None or only in fn.__name__ + "[%s]" % param:
                    run(t, fn, param, fixtures)
    return t.summary()


if __name__ == "__main__":
    sys.exit(main())
