#!/usr/bin/env python3
"""`inodes` over a tree whose leaves are parsed on other threads, damaged
in the middle.

    test_inodes_leaves.py BTRFSIMG TESTDATA

names.img (testdata/files: 4 KiB nodes, an fs tree of 1,526 leaves under a
level-2 root) is the one committed image whose tree is large enough for the
leaf ring, the workers and the read-ahead thread to all be busy. Where its
leaves lie comes from btrfs-progs (`dump-tree -t 5`: the leaves holding
INODE_ITEMs; `btrfs-map-logical`: both DUP copies), not from btrfsimg; what
the inodes are comes from the kernel's recorded view (names.view.jsonl).

One leaf of INODE_ITEMs a third of the way in gets 64 bytes of 0xff (its
checksum then fails):
  - in one copy: the same lines as the undamaged image (every reachable
    inode of the view, once, in objectid order), exit 1, and a warning
    naming the block, copy 1/2 and "trying the next copy";
  - in both copies, `--subvol 5`: exit 2, the error names the block, and
    the lines printed are exactly the view's inodes below the damaged
    leaf's first objectid, in order (every leaf before it was played,
    none after it), within the time limit (a failed read must not hang the
    threads).
Each is run twice: with the image as written (in the page cache), and with
its pages dropped first (POSIX_FADV_DONTNEED after fsync), so that the
leaves come from the disk with many reads in flight. Prints 'N passed, M
failed'.
"""
import json, os, re, shutil, subprocess, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

CLI, TESTDATA = sys.argv[1], sys.argv[2]
tally = imgtest.Tally()
check = tally.check


def progs(args):
    return subprocess.run(args, capture_output=True, text=True, errors="replace").stdout


def inode_leaves(img):
    """[(bytenr, first INODE_ITEM objectid, first key objectid)] in key order."""
    out, leaf, first_key = [], None, None
    for line in progs(["btrfs", "inspect-internal", "dump-tree", "-t", "5", img]).splitlines():
        m = re.match(r"leaf (\d+) items", line)
        if m:
            leaf, first_key = int(m.group(1)), None
            continue
        m = re.match(r"\s+item \d+ key \((\d+) (\w+)", line)
        if m and leaf is not None:
            if first_key is None:
                first_key = int(m.group(1))
            if m.group(2) == "INODE_ITEM":
                out.append((leaf, first_key))
                leaf = None
    return out


def copies(img, logical):
    """Physical offsets of the copies of the block at @logical."""
    out = progs(["btrfs-map-logical", "-l", str(logical), "-b", "4096", img])
    return [int(m.group(1)) for m in re.finditer(r"physical (\d+) device", out)]


def damage(src, dst, offsets):
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as f:
        for off in offsets:
            f.seek(off + 2000)  # inside the item data: the checksum fails
            f.write(b"\xff" * 64)


def uncache(path):
    """Drop @path's pages from the page cache (a hint; tmpfs keeps them)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def inodes(args, img, cold):
    if cold:
        uncache(img)
    return imgtest.run_cli(CLI, ["inodes"] + args + [img], timeout=60)


def objectids(out):
    return [json.loads(line)["objectid"] for line in out.splitlines() if line.strip()]


def main():
    if not shutil.which("btrfs") or not shutil.which("btrfs-map-logical"):
        print("SKIP: btrfs-progs (dump-tree, btrfs-map-logical) not installed")
        return imgtest.SKIP
    view = imgtest.load_jsonl(os.path.join(TESTDATA, "files", "names.view.jsonl"))
    inos = sorted({r["ino"] for r in view if r["subvol"] == 5})
    work = tempfile.mkdtemp(prefix="test_inodes_leaves.")
    try:
        img = imgtest.unzstd(os.path.join(TESTDATA, "files", "names.img.zst"),
                             os.path.join(work, "names.img"))
        leaves = inode_leaves(img)
        check("names.img: dump-tree lists hundreds of leaves of inode items",
              len(leaves) > 200, len(leaves))
        bytenr, first = leaves[len(leaves) // 3]
        phys = copies(img, bytenr)
        check("btrfs-map-logical: two copies (DUP)", len(phys) == 2, phys)
        if len(phys) != 2:
            return tally.summary()
        one = os.path.join(work, "one.img")
        damage(img, one, phys[:1])
        both = os.path.join(work, "both.img")
        damage(img, both, phys)
        for cold in (False, True):
            how = "uncached: " if cold else ""
            rc, good, err = inodes(["--json"], img, cold)
            check(f"{how}undamaged: every inode of the kernel's view, in order, exit 0",
                  rc == 0 and objectids(good) == inos, (rc, err[-300:]))

            rc, out, err = inodes(["--json"], one, cold)
            check(f"{how}one copy damaged: the undamaged lines, exit 1",
                  rc == 1 and out == good, (rc, err[-300:]))
            check(f"{how}one copy damaged: the warning names block and copy",
                  f"block={bytenr} copy=1/2".encode() in err and b"trying the next copy" in err,
                  err[-300:])

            for args in (["--json"], ["--json", "--inumbits", "48"]):
                rc, out, err = inodes(["--subvol", "5"] + args, both, cold)
                what = how + "both copies damaged " + " ".join(args)
                check(f"{what}: exit 2, the error names the block",
                      rc == 2 and f"block={bytenr} copy=1/2".encode() in err, (rc, err[-300:]))
                want = [i for i in inos if i < first]
                got = objectids(out) if rc is not None else None
                check(f"{what}: exactly the {len(want)} inodes before the leaf",
                      got == want, (len(got or []), len(want)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tally.summary()


if __name__ == "__main__":
    sys.exit(main())
