#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_names.py: names that cannot be one path component.

    test_names.py BTRFSIMG TESTDATA [PYTHONPATH]

A btrfs name holds any byte but NUL and '/' and is neither empty, "." nor
".." (the kernel's tree-checker refuses the rest). Committed kernel-made
images are damaged on purpose (checksums recomputed, so only the name is
wrong) and every front end must show such a name by the one safe form of
tools/btrfsimg.1 (NAMES): each NUL, '/' and '%' as %00, %2F, %25, "." as
%2E, ".." as %2E%2E; a valid name unchanged. Each such entry is damage:
stderr names it (subvolume, directory, DIR_INDEX key, what is wrong) and
the exit status is 1.

sample.img (testdata/sample.img.zst), the DIR_INDEX and INODE_REF items
of four names rewritten in every copy of their leaves (found by scanning
the image for tree blocks of this filesystem with a valid crc32c), and
their DIR_ITEMs too, keyed by the new name's hash, so that the three items
agree as after a real rename (the cross-check of DIR_ITEM and DIR_INDEX
would otherwise leave them out; a lookup of the safe form goes by the
listing):
  etc (top level, a directory holding motd) -> ".."   (item shrunk 1 byte)
  var/log1                                  -> "l/g1"
  var/log2                                  -> "l\\0g2"
  var/log3                                  -> "."    (item shrunk 3 bytes)
  home/alice/docs/note1.txt                 -> "/a/b/c/de" (an absolute name)
Checked: walk (text, --json), bodyfile, inodes (INODE_REF), cat and walk
--path naming a safe form (found through the listing), extract (each entry one
level, inside its directory, under its safe form; nothing outside DESTDIR)
and, as root with /dev/fuse, mount (the directory lists, "." and ".."
entries are there, each safe form stats and reads through a lookup).
The Python module's walk when PYTHONPATH is given and it imports.

testdata/forensic/single.img, the names of two deleted files rewritten in
every stale leaf that holds them (INODE_REF, DIR_INDEX): regular-100 ->
regular/100, regular-1500 -> regular<NUL>1500. deleted (text, --json),
bodyfile --deleted and extract --deleted must show and write the safe
form (one file, no extra level, no path cut at the NUL).
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402
from imgtest import crc32c  # noqa: E402
from genlib import crc32c_raw  # noqa: E402

CLI = TESTDATA = PYPATH = None   # set by main (fuzz/gen_name_seeds.py imports rename)
TIMEOUT = 120
HDR, ITEM = 101, 25
INODE_REF, DIR_ITEM, DIR_INDEX = 12, 84, 96
tally = imgtest.Tally()
check = tally.check


def run(args):
    """The CLI: (rc, out, err); a timeout (rc None) or a sanitizer report
    fails a check of its own (an ASan exit status could pass for 1)."""
    rc, out, err = imgtest.run_cli(CLI, args, timeout=TIMEOUT)
    if rc is None or b"Sanitizer" in err or b"runtime error:" in err:
        check("%s: no hang, no sanitizer report" % " ".join(map(str, args[:2])), False,
              err[-600:])
    return rc, out, err


# ------------------------------------------------------------ leaves

def super_of(img):
    with open(img, "rb") as f:
        f.seek(65536)
        sb = f.read(4096)
    return sb[32:48], struct.unpack_from("<I", sb, 148)[0]   # fsid, nodesize


def leaves(img, owners):
    """(physical offset, block) of every leaf of this filesystem owned by a
    tree in @owners whose crc32c is valid: live and stale copies alike."""
    fsid, ns = super_of(img)
    out = []
    with open(img, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        for off in range(0, size - ns + 1, 4096):
            f.seek(off + 32)
            head = f.read(HDR - 32)
            if head[:16] != fsid or head[HDR - 32 - 1] != 0:
                continue
            if struct.unpack_from("<Q", head, 88 - 32)[0] not in owners:
                continue
            f.seek(off)
            blk = f.read(ns)
            if struct.unpack_from("<I", blk, 0)[0] == crc32c(blk[32:]):
                out.append((off, bytearray(blk)))
    return out


def items(blk):
    n = struct.unpack_from("<I", blk, 96)[0]
    for s in range(n):
        p = HDR + ITEM * s
        obj, typ, koff = struct.unpack_from("<QBQ", blk, p)
        doff, size = struct.unpack_from("<II", blk, p + 17)
        yield s, (obj, typ, koff), HDR + doff, size


def resize_item(blk, slot, data):
    """Item @slot of leaf @blk gets @data (no longer than before): the data
    of the items after it (lower in the block) moves up by the difference,
    so the leaf stays packed as the kernel's checker wants it."""
    its = list(items(blk))
    _, _, start, size = its[slot]
    k = size - len(data)
    assert k >= 0
    low = min(d for _, _, d, _ in its[slot:])
    blk[low + k:start + k] = blk[low:start]
    blk[start + k:start + size] = data
    blk[low:low + k] = bytes(k)
    for s, _, d, sz in its[slot:]:
        p = HDR + ITEM * s + 17
        struct.pack_into("<II", blk, p, d + k - HDR, len(data) if s == slot else sz)


def repack(blk):
    """Items of leaf @blk sorted by key again, their data packed down from
    the block's end in that order (a DIR_ITEM whose key changed moves)."""
    its = sorted((key, bytes(blk[d:d + size])) for _, key, d, size in items(blk))
    end = len(blk)
    for s, (key, data) in enumerate(its):
        end -= len(data)
        blk[end:end + len(data)] = data
        p = HDR + ITEM * s
        struct.pack_into("<QBQII", blk, p, key[0], key[1], key[2], end - HDR, len(data))


def rename_in(blk, old, new):
    """Rename @old to @new in the DIR_ITEM, DIR_INDEX and INODE_REF items of
    @blk, as one consistent rename: a DIR_ITEM's key takes the new name's
    hash (the tree-checker's rule), the leaf sorted again. True if one was."""
    hit = False
    for s in range(struct.unpack_from("<I", blk, 96)[0]):
        _, key, d, size = list(items(blk))[s]   # offsets as the last resize left them
        if key[1] in (DIR_ITEM, DIR_INDEX) and size == 30 + len(old) and blk[d + 30:d + size] == old:
            hdr = bytearray(blk[d:d + 30])
            struct.pack_into("<H", hdr, 27, len(new))
            resize_item(blk, s, bytes(hdr) + new)
            if key[1] == DIR_ITEM:
                struct.pack_into("<Q", blk, HDR + ITEM * s + 9, crc32c_raw(0xFFFFFFFE, new))
            hit = True
        elif key[1] == INODE_REF and size == 10 + len(old) and blk[d + 10:d + size] == old:
            resize_item(blk, s, blk[d:d + 8] + struct.pack("<H", len(new)) + new)
            hit = True
    if hit:
        repack(blk)
    return hit


def rename(img, owners, renames):
    """Apply @renames [(old, new)] to every valid leaf of @owners; the
    checksums recomputed. The renames each leaf got."""
    done = set()
    with open(img, "r+b") as f:
        for off, blk in leaves(img, owners):
            changed = False
            for old, new in renames:
                if rename_in(blk, old, new):
                    done.add(old)
                    changed = True
            if changed:
                blk[0:4] = struct.pack("<I", crc32c(bytes(blk[32:])))
                f.seek(off)
                f.write(blk)
    return done


# ------------------------------------------------------------ live names

LIVE = [(b"etc", b".."), (b"log1", b"l/g1"), (b"log2", b"l\0g2"), (b"log3", b"."),
        (b"note1.txt", b"/a/b/c/de")]
SAFE = {b"etc": "%2E%2E", b"log1": "l%2Fg1", b"log2": "l%00g2", b"log3": "%2E",
        b"note1.txt": "%2Fa%2Fb%2Fc%2Fde"}
PATHS = ["%2E%2E", "%2E%2E/motd", "var/l%2Fg1", "var/l%00g2", "var/%2E",
         "home/alice/docs/%2Fa%2Fb%2Fc%2Fde"]
WHY = ["name is \"..\"", "name holds a '/'", "name holds a NUL byte", "name is \".\""]


def damaged(err, n):
    lines = [ln for ln in err.decode(errors="replace").splitlines() if "damaged name" in ln]
    return len(lines) == n and all(w in err.decode(errors="replace") for w in WHY) and \
        all("DIR_INDEX (" in ln and "subvolume" in ln for ln in lines), lines


def check_walk(img):
    rc, out, err = run(["walk", img])
    lines = out.decode(errors="replace").splitlines()
    shown = [ln.split("  ")[-1] for ln in lines[2:]]   # the header, the start "."
    check("walk: exit 1 (damage)", rc == 1, (rc, err[-400:]))
    ok, said = damaged(err, 5)
    check("walk: each damaged name said once on stderr, where and why", ok, said)
    missing = [p for p in PATHS if p not in shown]
    check("walk: damaged names in their safe form", not missing, (missing, shown[:12]))
    check("walk: no path with a '..' component or a cut",
          not any(c in ("..", ".") for p in shown for c in p.split("/")), shown)
    check("walk: the rest is there", "etc" not in shown and "var/log4" in shown and
          "home/alice/docs/note2.txt" in shown, shown)
    rc, out, err = run(["walk", "--json", img])
    recs = [json.loads(ln) for ln in out.splitlines()]
    paths = [r["path"] for r in recs]
    check("walk --json: exit 1", rc == 1, (rc, err[-300:]))
    marked = sorted(r["path"] for r in recs if "name_damage" in r)
    check("walk --json: name_damage on exactly the damaged entries",
          marked == sorted(p for p in PATHS if p != "%2E%2E/motd") and
          all(r["name_damage"] in WHY for r in recs if "name_damage" in r), marked)
    check("walk --json: the same safe forms (no '/' of a name in a path)",
          all(p in paths for p in PATHS), paths[:12])
    rc, out, err = run(["bodyfile", img])
    body = out.decode(errors="replace")
    check("bodyfile: exit 1", rc == 1, (rc, err[-300:]))
    # bodyfile writes '%' (and '|') as \x25: the text escape of the safe form
    check("bodyfile: the safe forms", all("|/" + p.replace("%", "\\x25") + "|" in body
                                          for p in PATHS), body[:600])


def check_lookup(img):
    """A path naming a damaged name by its safe form resolves (cat, walk
    --path): what readdir lists, a lookup finds."""
    rc, good, _ = run(["cat", "--inode", "258:257", img])
    rc2, got, err = run(["cat", "--subvol", "258", "--path", "l%2Fg1", img])
    check("cat --path of a safe form: that file", rc == 0 and rc2 == 0 and got == good,
          (rc, rc2, err[-300:]))
    rc, out, err = run(["walk", "--path", "%2E%2E", img])
    check("walk --path of a safe form: that directory", rc == 0 and out.endswith(b"  motd\n"),
          (rc, out[-200:], err[-200:]))
    rc, out, err = run(["cat", "--subvol", "258", "--path", "l%2fg1", img])
    check("cat --path: only the one spelling (lowercase hex is no safe form)", rc == 2,
          (rc, err[-200:]))


def check_extract(img, work):
    dest = os.path.join(work, "x", "dest")
    os.makedirs(os.path.dirname(dest))
    rc, out, err = run(["extract", img, dest])
    check("extract: exit 1 (damage)", rc == 1, (rc, err[-400:]))
    want = [os.path.join(dest, p) for p in PATHS]
    missing = [p for p in want if not os.path.lexists(p)]
    check("extract: each entry under its safe form", not missing, missing)
    check("extract: nothing beside DESTDIR", os.listdir(os.path.dirname(dest)) == ["dest"],
          os.listdir(os.path.dirname(dest)))
    check("extract: no extra level for an absolute name",
          not os.path.exists(os.path.join(dest, "home/alice/docs/a")) and
          os.path.isfile(os.path.join(dest, "home/alice/docs/%2Fa%2Fb%2Fc%2Fde")), "")
    try:
        with open(os.path.join(dest, "%2E%2E/motd"), "rb") as f:
            motd = f.read()
    except OSError as e:
        motd = str(e)
    rc, good, _ = run(["cat", "--inode", "5:258", img])
    check("extract: contents under a damaged directory", rc == 0 and motd == good,
          (rc, motd, good))
    shutil.rmtree(os.path.dirname(dest))


def check_inodes(img):
    rc, out, err = run(["inodes", "--json", img])
    paths = [json.loads(ln).get("path") for ln in out.splitlines()]
    check("inodes: INODE_REF names in their safe form",
          all(p in paths for p in PATHS), paths[:12])
    said = [ln for ln in err.decode(errors="replace").splitlines() if "damaged name" in ln]
    check("inodes: exit 1, each damaged INODE_REF said (its key, why)",
          rc == 1 and len(said) == 5 and all("INODE_REF (" in ln for ln in said), (rc, said))


def check_collisions(img):
    rc, out, err = run(["collisions", img])
    text = out.decode(errors="replace")
    check("collisions: example paths in the safe form",
          "var/l%2Fg1\n" in text and "home/alice/docs/%2Fa%2Fb%2Fc%2Fde\n" in text, text[-800:])


def check_python(img):
    if not PYPATH:
        print("SKIP python: no module path given")
        return
    code = ("import json, sys, warnings\n"
            "import btrfsimg\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    fs = btrfsimg.open(sys.argv[1])\n"
            "    recs = list(fs.walk())\n"
            "    paths = [d['path'] for d in recs]\n"
            "    marked = sorted(d['path'] for d in recs if 'name_damage' in d)\n"
            "    n = len(w)\n"
            "    ipaths = [d['path'] for d in fs.inodes()]\n"
            "print(json.dumps({'paths': paths, 'marked': marked,\n"
            "                  'warn': [str(x.message) for x in w[:n]],\n"
            "                  'ipaths': ipaths, 'iwarn': [str(x.message) for x in w[n:]]}))\n")
    env = dict(os.environ, PYTHONPATH=PYPATH)
    try:
        p = subprocess.run([sys.executable, "-c", code, img], capture_output=True, env=env,
                           timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        check("python walk: answers", False, "timed out")
        return
    if p.returncode != 0 and b"No module named" in p.stderr:
        print("SKIP python: the module does not import here: %s" % p.stderr[-200:])
        return
    check("python walk: runs", p.returncode == 0, p.stderr[-400:])
    if p.returncode:
        return
    r = json.loads(p.stdout)
    check("python walk: the safe forms", all(x in r["paths"] for x in PATHS), r["paths"][:12])
    check("python walk: name_damage as in walk --json",
          r["marked"] == sorted(p for p in PATHS if p != "%2E%2E/motd"), r["marked"])
    check("python walk: a DamageWarning per damaged name",
          sum("damaged name" in m for m in r["warn"]) == 5, r["warn"])
    check("python inodes: the safe forms, a DamageWarning per damaged INODE_REF",
          all(x in r["ipaths"] for x in PATHS) and
          sum("INODE_REF" in m for m in r["iwarn"]) == 5, (r["ipaths"][:8], r["iwarn"]))


# ------------------------------------------------------------ mount

def mount_skip():
    if os.geteuid() != 0:
        return "not root (mounting FUSE here needs root)"
    if not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        return "no /dev/fuse or fusermount3"
    return None


CHILD = r"""
import json, os, sys
root = sys.argv[1]
out = {}
for d in ("", "var", "home/alice/docs", "%2E%2E"):
    try:
        out["ls " + d] = sorted(os.listdir(os.path.join(root, d)))
    except OSError as e:
        out["ls " + d] = "errno %d" % e.errno
for p in sys.argv[2:]:
    try:
        st = os.lstat(os.path.join(root, p))
        out[p] = st.st_size
    except OSError as e:
        out[p] = "errno %d" % e.errno
print(json.dumps(out))
"""


def check_mount(img, work):
    why = mount_skip()
    if why:
        print("SKIP mount: %s" % why)
        return
    mnt = tempfile.mkdtemp(prefix="names-mnt.", dir=work)
    rc, out, err = run(["mount", img, mnt])
    check("mount: mounted", rc == 0, (rc, err[-300:]))
    if rc != 0:
        return
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, mnt] + PATHS, capture_output=True,
                           timeout=60)
        r = json.loads(p.stdout) if p.returncode == 0 else {}
        check("mount: the top level lists, '..' there by its safe form",
              "%2E%2E" in r.get("ls ", []) and "etc" not in r.get("ls ", []), r)
        check("mount: a directory holding a '/' name lists whole (no EIO)",
              isinstance(r.get("ls var"), list) and
              {"l%2Fg1", "l%00g2", "%2E", "log4"} <= set(r.get("ls var", [])), r)
        check("mount: each safe form is found by lookup",
              all(isinstance(r.get(x), int) for x in PATHS), r)
        check("mount: a damaged directory lists", r.get("ls %2E%2E") == ["motd"], r)
    except (subprocess.TimeoutExpired, ValueError) as e:
        check("mount: answers", False, str(e))
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True, timeout=30)
        for _ in range(100):
            with open("/proc/self/mountinfo") as f:
                if not any(ln.split()[4] == mnt for ln in f):
                    break
            time.sleep(0.05)


# ------------------------------------------------------------ deleted

DELETED = [(b"regular-100", b"regular/100"), (b"regular-1500", b"regular\x001500")]


def check_deleted(img, work):
    rc, out, err = run(["deleted", img])
    text = out.decode(errors="replace")
    check("deleted: exit 1 (damage)", rc == 1, (rc, err[-400:]))
    check("deleted: '/' and NUL in their safe form, no cut",
          "docs/regular%2F100\n" in text and "docs/regular%001500\n" in text, text)
    check("deleted: the damage said, where", b"damaged name" in err and
          b"leaf generation" in err, err[-400:])
    rc, out, err = run(["deleted", "--json", img])
    recs = [json.loads(ln) for ln in out.splitlines()]
    bad = [r for r in recs if "name_damage" in r]
    check("deleted --json: name_damage on the records with a safe form",
          bad and all("%2F" in r["path"] or "%00" in r["path"] for r in bad), recs[:3])
    rc, out, err = run(["bodyfile", "--deleted", img])
    check("bodyfile --deleted: the safe forms",
          rc == 1 and b"/docs/regular\\x252F100 " in out, (rc, out[:400]))
    dest = os.path.join(work, "xd", "dest")
    os.makedirs(os.path.dirname(dest))
    rc, out, err = run(["extract", "--deleted", img, dest])
    check("extract --deleted: exit 1", rc == 1, (rc, err[-400:]))
    docs = os.path.join(dest, "docs")
    got = sorted(os.listdir(docs)) if os.path.isdir(docs) else []
    check("extract --deleted: one file per safe form, no extra level",
          "regular%2F100" in got and any(g.startswith("regular%001500") for g in got) and
          "regular" not in got and os.path.isfile(os.path.join(docs, "regular%2F100")), got)
    check("extract --deleted: nothing beside DESTDIR",
          os.listdir(os.path.dirname(dest)) == ["dest"] and
          os.path.isfile(os.path.join(dest, "btrfsimg-manifest.jsonl")),
          os.listdir(os.path.dirname(dest)))
    shutil.rmtree(os.path.dirname(dest))


def main():
    global CLI, TESTDATA, PYPATH
    CLI, TESTDATA = sys.argv[1], sys.argv[2]
    PYPATH = sys.argv[3] if len(sys.argv) > 3 else None
    if not shutil.which("zstd"):
        print("SKIP: zstd not found")
        return imgtest.SKIP
    work = tempfile.mkdtemp(prefix="btrfsimg-names.")
    try:
        img = imgtest.unzstd(os.path.join(TESTDATA, "sample.img.zst"),
                             os.path.join(work, "sample.img"))
        done = rename(img, {5, 256, 257, 258}, LIVE)
        check("sample: every name rewritten", done == {o for o, _ in LIVE}, done)
        check_walk(img)
        check_lookup(img)
        check_extract(img, work)
        check_inodes(img)
        check_collisions(img)
        check_python(img)
        check_mount(img, work)
        os.unlink(img)
        img = imgtest.unzstd(os.path.join(TESTDATA, "forensic", "single.img.zst"),
                             os.path.join(work, "single.img"))
        done = rename(img, {5}, DELETED)
        check("single: every name rewritten", done == {o for o, _ in DELETED}, done)
        check_deleted(img, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tally.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
