#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_salvage.py: opening a filesystem whose way in is gone
(testdata/salvage, made by testdata/gen_salvage.py).

    test_salvage.py CLI TESTDATA [PYTHONPATH]

The committed image is kernel-made (metadata DUP); the kernel's view of it
was recorded before any damage. The damaged copies are made here, in user
space, by gen_salvage.damage(): every superblock copy zeroed ("super"), both
copies of the chunk tree's root block ("chunk"), both at once ("both"), both
copies of the root tree's root block ("root"). On each:
  - walk --json --hash equals the kernel's view record for record, every
    field (gen_kview.comparable), in the kernel's order; exit 1 (results
    despite damage) with the fallback announced on stderr; the image file
    is not written;
  - cat of every regular file gives the kernel's sha256; subvols --json and
    inodes --json print what they print on the undamaged image;
  - "root": the view is the unharmed one, not what the kernel's own
    fallback (mount -o ro,rescue=usebackuproot, recorded) shows: the scan
    finds each tree's newest root.
Hostile: a forged root-tree block of a newer generation (valid checksum,
placed where no map puts it) and a forged chunk-tree leaf of a newer
generation mapping the metadata chunk elsewhere must both be set aside by
evidence, the walk still exact; a file of random bytes is refused (exit 2)
saying the scan found no tree block. The Python binding opens the "both"
copy and walks it to the kernel's paths and sha256.
"""
import hashlib
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

TIMEOUT = 300
ANNOUNCE = {
    "super": [b"no superblock (", b"rebuilt from ", b"root tree of generation "],
    "chunk": [b"chunk tree unreadable (", b"chunk map rebuilt from "],
    "both": [b"no superblock (", b"no superblock: chunk map rebuilt from "],
    "root": [b"root tree unreadable (", b"found by scanning is read instead"],
}


def sha(path):
    return imgtest.sha256_file(path)


def walk_equal(kv, got, want):
    """Problems of walk records @got against the kernel's @want."""
    probs = []
    if [r["path"] for r in got] != [r["path"] for r in want]:
        probs.append("paths differ: %d records, the kernel's %d" % (len(got), len(want)))
    by = {r["path"]: r for r in got}
    for w in want:
        g = by.get(w["path"])
        if g is None:
            continue
        a, b = kv.comparable(g), kv.comparable(w)
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k) and len(probs) < 12:
                probs.append("%s: %s: %r, the kernel %r" % (w["path"], k, a.get(k), b.get(k)))
    return probs


def parse_jsonl(out):
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


def check_damaged(kv, res, cli, img, what, view, clean):
    before = sha(img)
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", img], timeout=TIMEOUT)
    name = "%s: walk --json --hash" % what
    res.check(name + ": exit 1", rc == 1, "exit %r: %s" % (rc, err[-400:]))
    missing = [a for a in ANNOUNCE[what] if a not in err]
    res.check(name + ": the fallback announced on stderr", not missing,
              "%r not in %s" % (missing, err[-600:]))
    got = parse_jsonl(out) if rc in (0, 1) else []
    res.problems(name + ": every record equal to the kernel's view", walk_equal(kv, got, view))
    for r in view:
        if r["sha256"] is None:
            continue
        rc, out, err = imgtest.run_cli(cli, ["cat", "--path", r["path"], img], timeout=TIMEOUT)
        if rc != 1 or hashlib.sha256(out).hexdigest() != r["sha256"]:
            res.check("%s: cat %s" % (what, r["path"]), False, "exit %r %s" % (rc, err[-300:]))
            break
    else:
        res.check("%s: cat of every regular file: the kernel's bytes, exit 1" % what, True)
    for cmd in (["subvols", "--json"], ["inodes", "--json"]):
        rc, out, err = imgtest.run_cli(cli, cmd + [img], timeout=TIMEOUT)
        res.check("%s: %s: exit 1, what the undamaged image gives" % (what, " ".join(cmd)),
                  rc == 1 and out == clean[cmd[0]], "exit %r: %s" % (rc, err[-300:]))
    res.check("%s: the image is not written" % what, sha(img) == before)


def forge_root(data, facts):
    """A root-tree leaf of a newer generation, checksummed, in unallocated
    space: found by the scan, but no map puts it there."""
    ns, out = facts["nodesize"], bytearray(data)
    blk = bytearray(data[facts["root_physical"][0]:facts["root_physical"][0] + ns])
    struct.pack_into("<Q", blk, 0x50, facts["generation"] + 1000)
    blk[0:4] = struct.pack("<I", imgtest.crc32c(bytes(blk[32:])))
    out[200 << 20:(200 << 20) + ns] = blk
    return bytes(out)


def forge_chunk_leaf(data, facts):
    """A chunk-tree leaf of a newer generation whose chunk items map every
    chunk 16 MiB further on: a second chunk map the blocks refute."""
    ns, out = facts["nodesize"], bytearray(data)
    p = facts["chunk_root_physical"][0]
    blk = bytearray(data[p:p + ns])
    struct.pack_into("<Q", blk, 0x50, facts["generation"] + 1000)
    nritems, = struct.unpack_from("<I", blk, 0x60)
    for s in range(nritems):
        it = 0x65 + 25 * s
        if blk[it + 8] != 228:
            continue
        doff, = struct.unpack_from("<I", blk, it + 17)
        c = 0x65 + doff
        nst, = struct.unpack_from("<H", blk, c + 44)
        for i in range(nst):
            o = c + 48 + 32 * i + 8
            struct.pack_into("<Q", blk, o, struct.unpack_from("<Q", blk, o)[0] + (16 << 20))
    blk[0:4] = struct.pack("<I", imgtest.crc32c(bytes(blk[32:])))
    out[(200 << 20) + ns:(200 << 20) + 2 * ns] = blk
    return bytes(out)


def hostile(kv, res, cli, work, gs, data, facts, view):
    cases = [("forged newer root-tree block", gs.damage(forge_root(data, facts), "super"),
              b"root tree"),
             ("forged newer chunk-tree leaf", gs.damage(forge_chunk_leaf(data, facts), "both"),
              b"refuted by the tree blocks")]
    for name, img_bytes, said in cases:
        img = os.path.join(work, "hostile.img")
        with open(img, "wb") as f:
            f.write(img_bytes)
        rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", img], timeout=TIMEOUT)
        res.check("hostile: %s: exit 1, said" % name, rc == 1 and said in err,
                  "exit %r: %s" % (rc, err[-500:]))
        got = parse_jsonl(out) if rc in (0, 1) else []
        res.problems("hostile: %s: the walk still the kernel's view" % name,
                     walk_equal(kv, got, view))
    junk = os.path.join(work, "junk.img")
    rnd = random.Random(28)
    with open(junk, "wb") as f:
        f.write(bytes(rnd.getrandbits(8) for _ in range(1 << 20)))
    rc, out, err = imgtest.run_cli(cli, ["walk", junk], timeout=TIMEOUT)
    res.check("random bytes: refused, the scan found no tree block",
              rc == 2 and b"found no btrfs tree block" in err, "exit %r: %s" % (rc, err[-300:]))


def python_binding(res, img, view, pythonpath):
    if not pythonpath:
        print("skip python: no PYTHONPATH given")
        return
    code = r"""
import json, sys, warnings
import btrfsimg
warnings.simplefilter("ignore")
with btrfsimg.open(sys.argv[1]) as fs:
    out = {r["path"]: r.get("sha256") for r in fs.walk(hash=True)}
    assert fs.damage_count > 0
print(json.dumps(out))
"""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    p = subprocess.run([sys.executable, "-c", code, img], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=TIMEOUT)
    if p.returncode != 0 and b"No module named" in p.stderr:
        print("skip python: the binding is not built")
        return
    ok = p.returncode == 0 and json.loads(p.stdout) == {r["path"]: r["sha256"] for r in view}
    res.check("python: open() of the 'both' copy walks to the kernel's paths and sha256", ok,
              p.stderr.decode(errors="replace")[-300:])


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    pythonpath = sys.argv[3] if len(sys.argv) > 3 else None
    sys.path.insert(0, testdata)
    import gen_salvage as gs
    kv = imgtest.import_kview(testdata)
    d = os.path.join(testdata, "salvage")
    view = imgtest.load_jsonl(os.path.join(d, "view.jsonl"))
    backup_view = imgtest.load_jsonl(os.path.join(d, "backuproot.jsonl"))
    res = imgtest.Tally()
    with tempfile.TemporaryDirectory(prefix="salvage.") as work:
        clean_img = imgtest.private_copy(os.path.join(d, "salvage.img.zst"), work)
        with open(clean_img, "rb") as f:
            data = f.read()
        facts = gs.facts(data)
        res.check("truth.json: the facts of the committed image",
                  facts == imgtest.load_json(os.path.join(d, "truth.json")))
        clean = {}
        for cmd in ("subvols", "inodes"):
            rc, clean[cmd], err = imgtest.run_cli(cli, [cmd, "--json", clean_img])
            res.check("undamaged: %s --json: exit 0" % cmd, rc == 0, err[-300:])
        res.check("the kernel's usebackuproot view is an older one (the test can fail)",
                  walk_equal(kv, backup_view, view) != [])
        for what in gs.DAMAGE:
            img = os.path.join(work, what + ".img")
            with open(img, "wb") as f:
                f.write(gs.damage(data, what))
            check_damaged(kv, res, cli, img, what, view, clean)
            if what == "both":
                python_binding(res, img, view, pythonpath)
            os.unlink(img)
        hostile(kv, res, cli, work, gs, data, facts, view)
    return res.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
