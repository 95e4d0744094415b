#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A tree rebuilt from more scanned leaves than the salvage once weighed
(issue 28): a kernel-made image whose top-level tree has more than 32,768
leaves of 4 KiB, its root and every extent-tree block zeroed, superblocks
too, walked by btrfsimg and compared with the kernel's view recorded
before the damage. Too big to commit (about 400 MiB of metadata): this
rebuilds it.

    bigleaves.py build DIR [FILES]     as root: DIR/big.img, DIR/view.jsonl.zst,
                                       DIR/facts.json (default 160000 files)
    bigleaves.py facts DIR             build's last step again
    bigleaves.py check BTRFSIMG DIR    damage a copy (DIR/damaged.img), walk it
                                       cold and warm, compare, time; cat beside

build: mkfs.btrfs -n 4096 (metadata DUP) on a 2 GiB sparse file; on a loop
mount (nodiscard: freed blocks keep their bytes) FILES files with 180-byte
names and 40 bytes each (inline) in 64 directories; on a second mount
every 20th rewritten, every 60th removed and 500 new made, so older copies
of leaves stay on the device beside the live ones. The kernel's view
(testdata/gen_kview.py) of a read-only mount, and from btrfs-progs'
dump-tree the tree's root, level and leaf count (`facts DIR` again).
Nothing of it comes from btrfsimg.

check: on a copy, every block whose header names the extent tree (owner
2) and every copy of tree 5's root node zeroed, found by their headers in
the image's data extents, and both superblocks in the image. The walk
(`walk --json --hash`) must exit 1, say the tree was rebuilt from the
leaves found by scanning, and give every file exactly as the kernel's view
except the inodes at leaf edges it names on stderr; nothing the kernel
does not show. Prints wall, CPU and peak RSS (/usr/bin/time) of the walk
with the image's pages dropped (posix_fadvise) and again warm, `cat` of
the image the same two ways, and the load average.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.join(HERE, "..", "testdata")
sys.path.insert(0, TESTDATA)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "images"))

NAME = 180
DIRS = 64
MIN_LEAVES = 32769


def sh(*args):
    return subprocess.run(list(args), check=True, stdout=subprocess.PIPE).stdout


def name(i):
    return "d%02d/%06d-%s" % (i % DIRS, i, "n" * (NAME - 7))


def put(mnt, rel, tag=""):
    with open(os.path.join(mnt, rel), "wb") as f:
        f.write(b"%-40s" % ("%s%s" % (rel[:24], tag)).encode())


def populate(mnt, files):
    for d in range(DIRS):
        os.mkdir(os.path.join(mnt, "d%02d" % d))
    for i in range(files):
        put(mnt, name(i))


def churn(mnt, files):
    for i in range(0, files, 20):
        if i % 60 == 0:
            os.unlink(os.path.join(mnt, name(i)))
        else:
            put(mnt, name(i), ":again")
    for i in range(files, files + 500):
        put(mnt, name(i), ":new")


def dump_lines(img, tree):
    p = subprocess.Popen(["btrfs", "inspect-internal", "dump-tree", "-t", str(tree), img],
                         stdout=subprocess.PIPE, text=True, errors="replace", bufsize=1 << 20)
    yield from p.stdout
    if p.wait() != 0:
        sys.exit("dump-tree -t %s failed" % tree)


def tree_facts(img):
    """Tree 5's root, level and leaves (btrfs-progs), the fsid."""
    f, item = {}, None
    for line in dump_lines(img, "root"):
        if re.match(r"\s+item \d+ key \(", line):
            item = "(FS_TREE ROOT_ITEM 0)" in line
        m = re.search(r" bytenr (\d+) ", line)
        if item and m:
            f["root"] = int(m.group(1))
        m = re.match(r"\s+level (\d+) generation_v2", line)
        if item and m:
            f["level"] = int(m.group(1))
    f["leaves"] = sum(1 for line in dump_lines(img, 5) if re.match(r"leaf \d+ items ", line))
    sup = sh("btrfs", "inspect-internal", "dump-super", img).decode()
    f["fsid"] = re.search(r"^fsid\s+(\S+)", sup, re.M).group(1).replace("-", "")
    f["nodesize"] = int(re.search(r"^nodesize\s+(\d+)", sup, re.M).group(1))
    return f


def build(out, files):
    os.makedirs(out, exist_ok=True)
    img, mnt = os.path.join(out, "big.img"), tempfile.mkdtemp(prefix="bigleaves.")
    sh("truncate", "-s", "2G", img)
    sh("mkfs.btrfs", "-q", "-f", "-n", "4096", "-m", "dup", "-d", "single", img)
    for step in (populate, churn):
        sh("mount", "-o", "noatime,nodiscard,loop", img, mnt)
        try:
            step(mnt, files)
        finally:
            sh("umount", mnt)
    sh("mount", "-o", "ro,noatime,nodiscard,loop", img, mnt)
    try:
        rec = subprocess.Popen([sys.executable, os.path.join(TESTDATA, "gen_kview.py"),
                                "record", mnt], stdout=subprocess.PIPE)
        subprocess.run(["zstd", "-q", "-f", "-o", os.path.join(out, "view.jsonl.zst")],
                       stdin=rec.stdout, check=True)
        if rec.wait() != 0:
            sys.exit("gen_kview.py record failed")
    finally:
        sh("umount", mnt)
    os.rmdir(mnt)
    return record_facts(img, out)


def record_facts(img, out):
    f = tree_facts(img)
    with open(os.path.join(out, "facts.json"), "w") as fp:
        json.dump(f, fp)
    print(json.dumps(f))
    return 0 if f["leaves"] >= MIN_LEAVES else 1


def data_extents(fd, size):
    off = 0
    while off < size:
        try:
            start = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:
            return
        end = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, end
        off = end


def damage(path, f):
    """Zero in @path every extent-tree block, every copy of tree 5's root
    and the superblocks; how many blocks."""
    ns, fsid, n = f["nodesize"], bytes.fromhex(f["fsid"]), 0
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        for start, end in list(data_extents(fd, size)):
            p = start - start % ns
            while p + ns <= end:
                hdr = os.pread(fd, 0x60, p)
                owner = int.from_bytes(hdr[0x58:0x60], "little")
                if hdr[0x20:0x30] == fsid and (owner == 2 or (
                        owner == 5 and int.from_bytes(hdr[0x30:0x38], "little") == f["root"])):
                    os.pwrite(fd, bytes(ns), p)
                    n += 1
                p += ns
        for o in (64 << 10, 64 << 20):
            os.pwrite(fd, bytes(4096), o)
        os.fsync(fd)
    finally:
        os.close(fd)
    return n


def drop(path):
    fd = os.open(path, os.O_RDONLY)
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def timed(args, path, cold, stdout=subprocess.PIPE):
    """(exit, stdout, stderr, 'wall user sys maxrss_kb') of @args."""
    if cold:
        drop(path)
    fd, tfile = tempfile.mkstemp(prefix="bigleaves.time.")
    os.close(fd)
    p = subprocess.run(["/usr/bin/time", "-o", tfile, "-f", "%e %U %S %M"] + args,
                       stdout=stdout, stderr=subprocess.PIPE)
    with open(tfile) as t:
        fig = t.read().split()[-4:]  # after "Command exited with non-zero status"
    os.unlink(tfile)
    return p.returncode, p.stdout, p.stderr, fig


def check(cli, out):
    import imgtest
    from test_salvage_mkfs import MARKS, compare, parse_jsonl
    kv = imgtest.import_kview(TESTDATA)
    with open(os.path.join(out, "facts.json")) as fp:
        f = json.load(fp)
    view = [json.loads(line) for line in imgtest.genlib.unzstd_bytes(
        os.path.join(out, "view.jsonl.zst")).decode().splitlines() if line.strip()]
    path = os.path.join(out, "damaged.img")
    sh("cp", "--sparse=always", os.path.join(out, "big.img"), path)
    zeroed = damage(path, f)
    print("tree 5: %d leaves, root %d level %d (dump-tree); %d blocks zeroed; %d paths"
          % (f["leaves"], f["root"], f["level"], zeroed, len(view)))
    bad = 0
    for cold in (True, False):
        rc, got, err, fig = timed([cli, "walk", "--json", "--hash", path], path, cold)
        said = [ln for ln in err.splitlines() if b"leaves found by scanning" in ln]
        edge = {ln.split(b": inode: ")[0].split(b"btrfsimg: ", 1)[-1].decode()
                for ln in err.splitlines() if b"its items run to the edge of a leaf" in ln}
        recs = [{k: v for k, v in r.items() if k not in MARKS}
                for r in (parse_jsonl(got) if rc in (0, 1) else [])]
        probs = compare(kv, recs, view, edge)
        print("%s walk: exit %s, wall %s s, user %s s, sys %s s, peak RSS %s KiB; %d records, "
              "%d at leaf edges (said), problems %d %s" % (
                  "cold" if cold else "warm", rc, *fig, len(recs), len(edge), len(probs),
                  probs[:5]))
        for ln in said:
            print("  " + ln.decode(errors="replace"))
        bad += rc != 1 or not said or bool(probs)
        _, _, _, fig = timed(["cat", path], path, cold, stdout=subprocess.DEVNULL)
        print("%s cat: wall %s s, user %s s, sys %s s, peak RSS %s KiB" % (
            "cold" if cold else "warm", *fig))
        print("load average: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    os.unlink(path)
    return 1 if bad else 0


def main():
    a = sys.argv[1:]
    if len(a) >= 2 and a[0] == "build":
        return build(a[1], int(a[2]) if len(a) > 2 else 160000)
    if len(a) == 2 and a[0] == "facts":  # build's last step again
        return record_facts(os.path.join(a[1], "big.img"), a[1])
    if len(a) == 3 and a[0] == "check":
        return check(a[1], a[2])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
