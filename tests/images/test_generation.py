#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_generation.py: --generation N against the kernel's view of each
commit (testdata/generations, made by testdata/gen_generations.py).

    test_generation.py CLI TESTDATA [PYTHONPATH]

The image is the final state of a filesystem the kernel wrote in steps;
after each step the kernel's view of that commit (generation N) was
recorded. For every recorded N, `walk --json --hash --generation N` on
the final image must show nothing the kernel did not (zero false: every
path it prints is in the view with every field equal; a sha256 may only
be null, the content unread, with the path named as damage on stderr),
and everything the kernel showed unless it is reported as damage (exit
1, the path or a directory above it named on stderr). A generation whose
root tree is gone must exit 2 naming the generations history lists. The
image is such that each outcome happens at least once: the last
generation exact (the superblock's root), an older one exact through a
backup root, one found by scanning, one with damage, one gone.
Then cat, extents, dfxml, owner, unallocated, extract, subvols and inodes
with --generation, a generation no
history lists, and the Python binding's open(..., generation=N).
"""
import hashlib
import stat
import struct
import re
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

TIMEOUT = 120


def named(err, path):
    """Whether stderr names @path or a directory above it as damaged."""
    parts = path.split("/")
    for i in range(len(parts), 0, -1):
        if ("btrfsimg: %s: " % "/".join(parts[:i])).encode() in err:
            return True
    return False


def walk_check(kv, res, cli, img, gen, view, last, tag=""):
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", "--generation", str(gen),
                                         img], timeout=TIMEOUT)
    name = "%swalk --generation %d" % (tag, gen)
    if rc == 2:
        # no root tree of N at all, or its top-level tree unreadable
        ok = gen != last and out == b"" and (
            (b"generation %d: no root tree found" % gen in err and b"history lists: " in err)
            or (b"reading generation %d: root tree at logical " % gen in err
                and b"walk: corrupt " in err))
        res.check(name + ": its trees gone, exit 2 saying which", ok,
                  "rc=%r %s" % (rc, err[-300:]))
        return "gone"
    probs = []
    if rc not in (0, 1):
        probs.append("exit %r: %s" % (rc, err[-300:]))
    if b"reading generation %d: root tree at logical " % gen not in err:
        probs.append("stderr does not say which root was read: %r" % err[:200])
    got = [json.loads(line) for line in out.splitlines() if line.strip()]
    want = {r["path"]: kv.comparable(r) for r in view}
    seen = set()
    for r in got:
        p = r["path"]
        seen.add(p)
        if p not in want:
            probs.append("%r shown, the kernel had no such path" % p)
            continue
        a, b = kv.comparable(r), want[p]
        for k in sorted(set(a) | set(b)):
            if a.get(k) == b.get(k):
                continue
            if k == "sha256" and a.get(k) is None and rc == 1 and named(err, p):
                continue  # content not read, and said so
            probs.append("%r: %s: have %r expect %r" % (p, k, a.get(k), b.get(k)))
    missing = [p for p in want if p not in seen]
    for p in missing:
        if rc != 1 or not named(err, p):
            probs.append("%r left out without damage named (exit %r)" % (p, rc))
    res.problems("%s: %d of %d paths, none false, the rest named as damage"
                 % (name, len(got), len(want)), probs[:20])
    if probs:
        return "bad"
    if re.search(rb"found by scanning; [2-9]\d* root-tree blocks of level", err):
        return "scan twice " + ("exact" if rc == 0 and not missing else "damaged")
    how = "scan" if b"found by scanning" in err else \
        "backup" if b"from backup root" in err else "super"
    return how + (" exact" if rc == 0 and not missing else " damaged")


def sha(b):
    return hashlib.sha256(b).hexdigest()


def view_of(view, path):
    return next(r for r in view if r["path"] == path)


def other_commands(res, cli, img, views, steps, tmp):
    # b/big: 300000 bytes after step 3, truncated to 70000 by step 4
    g3, g4 = steps[2], steps[3]
    for gen in (g3, g4):
        want = view_of(views[gen], "b/big")
        rc, out, err = imgtest.run_cli(cli, ["cat", "--generation", str(gen), "--path", "b/big",
                                             img], timeout=TIMEOUT)
        res.check("cat --generation %d b/big: the kernel's bytes of then" % gen,
                  rc == 0 and len(out) == want["size"] and sha(out) == want["sha256"],
                  "rc=%r size %d expect %d %s" % (rc, len(out), want["size"], err[-200:]))
        # the file's extents and DFXML of then: runs cover its size of then,
        # and the image bytes there are its bytes of then
        rc, out, err = imgtest.run_cli(cli, ["extents", "--json", "--generation", str(gen),
                                             "--path", "b/big", img], timeout=TIMEOUT)
        recs = [json.loads(line) for line in out.splitlines() if line.strip()]
        got = b""
        with open(img, "rb") as f:
            for r in recs:
                if r["type"] == "regular" and r["compression"] == "none" and r["copies"]:
                    f.seek(r["copies"][0]["image_offset"])
                    got += f.read(r["length"])
        res.check("extents --generation %d b/big: the image bytes at its runs are its bytes "
                  "of then" % gen, rc == 0 and recs and sha(got) == want["sha256"],
                  "rc=%r %d bytes, expect %d %s" % (rc, len(got), want["size"], err[-200:]))
        rc, out, err = imgtest.run_cli(cli, ["dfxml", "--generation", str(gen), "--path", "b",
                                             img], timeout=TIMEOUT)
        size = re.search(rb"<filename>big</filename>.*?<filesize>(\d+)</filesize>", out, re.S)
        # (exit 1: other files of b/ were written over since, said on stderr)
        res.check("dfxml --generation %d: b/big of size %d" % (gen, want["size"]),
                  rc in (0, 1) and size and int(size.group(1)) == want["size"],
                  "rc=%r %r %s" % (rc, size and size.group(1), err[-200:]))
    dest = os.path.join(tmp, "x%d" % g4)
    rc, out, err = imgtest.run_cli(cli, ["extract", "--generation", str(g4), img, dest],
                                   timeout=TIMEOUT)
    probs = [] if rc == 0 else ["exit %r: %s" % (rc, err[-300:])]
    for r in views[g4]:
        if r["sha256"] and r["path"]:
            f = os.path.join(dest, r["path"])
            have = sha(open(f, "rb").read()) if os.path.isfile(f) else None
            if have != r["sha256"]:
                probs.append("%s: sha256 %s expect %s" % (r["path"], have, r["sha256"]))
    res.problems("extract --generation %d: every file as the kernel had it" % g4, probs)
    for gen in (g4, max(views)):
        rc, out, err = imgtest.run_cli(cli, ["subvols", "--json", "--generation", str(gen), img],
                                       timeout=TIMEOUT)
        svs = [json.loads(line) for line in out.splitlines() if line.strip()]
        top = [s for s in svs if s["id"] == 5]
        ok = rc == 0 and sorted(s["path"] for s in svs) == ["", "snap", "sv"] and \
            top and top[0]["generation"] == gen and all(s["generation"] <= gen for s in svs)
        res.check("subvols --generation %d: sv, snap; the top level last written in %d"
                  % (gen, gen), ok, "rc=%r %r %s" % (rc, svs, err[-200:]))
    rc, out, err = imgtest.run_cli(cli, ["inodes", "--json", "--generation", str(g4), img],
                                   timeout=TIMEOUT)
    have = {(r["subvol"], r["objectid"]) for r in
            (json.loads(line) for line in out.splitlines() if line.strip())}
    want = {(r["subvol"], r["ino"]) for r in views[g4]}
    res.check("inodes --generation %d: the inodes the kernel had" % g4, rc == 0 and have == want,
              "rc=%r extra %r missing %r %s" % (rc, sorted(have - want), sorted(want - have),
                                                 err[-200:]))
    rc, out, err = imgtest.run_cli(cli, ["walk", "--generation", "3", img], timeout=TIMEOUT)
    res.check("walk --generation 3 (never committed there): exit 2, what history lists",
              rc == 2 and b"generation 3: no root tree found" in err and
              b"history lists: " in err and out == b"", "rc=%r %s" % (rc, err[-300:]))
    rc, out, err = imgtest.run_cli(cli, ["walk", "--generation", "0", img], timeout=TIMEOUT)
    res.check("walk --generation 0: refused as a usage error", rc == 2 and out == b"",
              "rc=%r %s" % (rc, err[-300:]))


def owner_then(res, cli, img, views, steps):
    """owner and unallocated --generation N: a data extent of a file that
    step 3 had and the last state has not is that file's then (owner names
    it, unallocated leaves it out), and today owner does not name it."""
    g3, last = steps[2], max(views)
    gone = [r for r in views[g3] if stat.S_ISREG(r["mode"]) and r["size"] > 4096
            and r["path"] not in {v["path"] for v in views[last]}]
    hit = None
    for r in gone:
        rc, out, _ = imgtest.run_cli(cli, ["extents", "--json", "--generation", str(g3),
                                           "--path", r["path"], img], timeout=TIMEOUT)
        runs = [json.loads(line) for line in out.splitlines() if line.strip()]
        data = [x for x in runs if x["type"] == "regular"]
        if rc == 0 and data:
            hit = (r["path"], data[0]["logical"])
            break
    res.check("generation %d: a file gone since with a data extent" % g3, hit, len(gone))
    if not hit:
        return
    path, logical = hit
    names = {}
    for gen in (g3, None):
        opt = ["--generation", str(gen)] if gen else []
        rc, out, err = imgtest.run_cli(cli, ["owner", "--json", "--logical", str(logical)] + opt
                                       + [img], timeout=TIMEOUT)
        recs = [json.loads(line) for line in out.splitlines() if line.strip()]
        names[gen] = (rc, {x.get("path") for x in recs if x["kind"] == "file"}, err[-200:])
    res.check("owner --generation %d --logical %d: %s, which today's owner does not name"
              % (g3, logical, path), names[g3][0] == 0 and path in names[g3][1]
              and path not in names[None][1], names)
    rc, out, err = imgtest.run_cli(cli, ["unallocated", "--json", "--generation", str(g3), img],
                                   timeout=TIMEOUT)
    free = [json.loads(line) for line in out.splitlines() if line.strip()]
    inside = [x for x in free if x.get("logical") is not None
              and x["logical"] <= logical < x["logical"] + x["length"]]
    res.check("unallocated --generation %d: exit 0, %s's extent at %d not listed free"
              % (g3, path, logical), rc == 0 and free and not inside,
              "rc=%r %r %s" % (rc, inside[:1], err[-200:]))


def plant_newer_root(img, gen):
    """Point tree 5's ROOT_ITEM in generation @gen's root-tree leaf at
    today's tree 5 root (from the superblock's current backup root), the
    leaf's checksum recomputed: an older tree naming a newer block.
    Returns a description, or None when no such leaf is on the image."""
    with open(img, "r+b") as f:
        sb = bytearray(f.read(0x11000)[0x10000:])
        nodesize = struct.unpack_from("<I", sb, 0x94)[0]
        sgen = struct.unpack_from("<Q", sb, 0x48)[0]
        today = None
        for i in range(4):
            b = 0xb2b + 168 * i
            if struct.unpack_from("<Q", sb, b + 8)[0] == sgen:
                today = struct.unpack_from("<QQ", sb, b + 48) + (sb[b + 155],)
        f.seek(0)
        off = 0
        while today:
            blk = f.read(nodesize)
            if len(blk) < nodesize:
                return None
            bytenr, gen_, owner = struct.unpack_from("<Q", blk, 0x30)[0], \
                struct.unpack_from("<Q", blk, 0x50)[0], struct.unpack_from("<Q", blk, 0x58)[0]
            if blk[0x20:0x30] == sb[0x20:0x30] and gen_ == gen and owner == 1 and blk[0x64] == 0:
                nr = struct.unpack_from("<I", blk, 0x60)[0]
                for slot in range(nr):
                    it = 0x65 + 25 * slot
                    oid, typ = struct.unpack_from("<QB", blk, it)
                    if (oid, typ) != (5, 132):
                        continue
                    d = 0x65 + struct.unpack_from("<I", blk, it + 17)[0]
                    b = bytearray(blk)
                    struct.pack_into("<Q", b, d + 176, today[0])  # bytenr
                    struct.pack_into("<Q", b, d + 160, today[1])  # generation
                    b[d + 238] = today[2]                          # level
                    b[0:4] = struct.pack("<I", imgtest.crc32c(bytes(b[32:])))
                    f.seek(off)
                    f.write(b)
                    return "leaf %d: tree 5 at %d, generation %d" % (bytenr, today[0], today[1])
            off += nodesize
    return None


def mount_check(res, cli, img, view, gen):
    """mount --generation: the FUSE view of b/big as the kernel had it."""
    fusermount = next((f for f in ("fusermount3", "fusermount")
                       if any(os.access(os.path.join(d, f), os.X_OK)
                              for d in os.environ.get("PATH", "").split(":"))), None)
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse") or not fusermount:
        print("skip mount --generation: needs root, /dev/fuse and fusermount")
        return
    mnt = tempfile.mkdtemp(prefix="btrfsimg-gen-mnt.")
    rc, _, err = imgtest.run_cli(cli, ["mount", "--generation", str(gen), img, mnt],
                                 timeout=TIMEOUT)
    try:
        want = view_of(view, "b/big")
        have = None
        if rc == 0:
            with open(os.path.join(mnt, "b", "big"), "rb") as f:
                have = f.read()
        names = sorted(os.listdir(mnt)) if rc == 0 else None
        top = sorted(r["path"] for r in view if r["path"] and "/" not in r["path"])
        res.check("mount --generation %d: b/big and the top level as the kernel had them"
                  % gen, rc == 0 and have is not None and sha(have) == want["sha256"]
                  and names == top, "rc=%r names %r expect %r %s" % (rc, names, top, err[-200:]))
    finally:
        if rc == 0:
            subprocess.run([fusermount, "-u", mnt], timeout=60)
        os.rmdir(mnt)


def log_check(res, cli, testdata, tmp):
    """--generation G, G the superblock's: the same as without it, the log
    tree (written one transaction after G) replayed as usual."""
    img = imgtest.private_copy(os.path.join(testdata, "logtree", "extents.crash.img.zst"), tmp)
    rc, out, err = imgtest.run_cli(cli, ["super", "--json", img], timeout=TIMEOUT)
    gen = json.loads(out)["generation"] if rc == 0 else 0
    base = imgtest.run_cli(cli, ["walk", "--json", "--hash", img], timeout=TIMEOUT)
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", "--generation", str(gen),
                                         img], timeout=TIMEOUT)
    res.check("logtree crash image, --generation %d (the superblock's): as without it, the "
              "log replayed" % gen, gen and rc == base[0] == 0 and out == base[1] and
              b"replayed the log tree" in err, "rc=%r/%r %s" % (rc, base[0], err[-300:]))
    os.unlink(img)


def python_binding(res, img, views, steps, pythonpath):
    if not pythonpath:
        print("skip python: no PYTHONPATH given")
        return
    code = r"""
import hashlib, json, sys, warnings
import btrfsimg
out = {}
warnings.simplefilter("ignore")
for gen in map(int, sys.argv[2:]):
    with btrfsimg.open(sys.argv[1], generation=gen) as fs:
        assert fs.generation[0] == gen and fs.generation[1].startswith("root tree at logical ")
        out[gen] = {r["path"]: r.get("sha256") for r in fs.walk(hash=True)}
with btrfsimg.open(sys.argv[1]) as fs:
    assert fs.generation is None
print(json.dumps(out))
"""
    gens = [steps[3], max(views)]
    env = dict(os.environ, PYTHONPATH=pythonpath)
    try:
        p = subprocess.run([sys.executable, "-c", code, img] + [str(g) for g in gens],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                           timeout=TIMEOUT)
        if b"ASan runtime does not come first" in p.stderr:
            # a sanitized build: its runtimes go before the interpreter's
            # (as python/btrfsimg/meson.build does for test_python.py)
            pre = [subprocess.run(["cc", "-print-file-name=lib%s.so" % rt],
                                  stdout=subprocess.PIPE).stdout.decode().strip()
                   for rt in ("asan", "ubsan")]
            env.update(LD_PRELOAD=" ".join(pre), ASAN_OPTIONS="detect_leaks=0:abort_on_error=1")
            p = subprocess.run([sys.executable, "-c", code, img] + [str(g) for g in gens],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                               timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        res.check("python open(generation=N)", False, "timed out")
        return
    if p.returncode != 0 and b"No module named" in p.stderr:
        print("skip python: the binding is not built (%s)" % p.stderr.decode()[-120:])
        return
    probs = [] if p.returncode == 0 else [p.stderr.decode(errors="replace")[-300:]]
    if p.returncode == 0:
        got = json.loads(p.stdout)
        for g in gens:
            want = {r["path"]: r["sha256"] for r in views[g]}
            if got[str(g)] != want:
                probs.append("generation %d: paths/sha256 differ from the kernel's" % g)
    res.problems("python open(..., generation=N) walks as the kernel had it", probs)


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    pythonpath = sys.argv[3] if len(sys.argv) > 3 else ""
    kv = imgtest.import_kview(testdata)
    d = os.path.join(testdata, "generations")
    gens = imgtest.load_json(os.path.join(d, "generations.json"))
    views = {g["generation"]: imgtest.load_jsonl(os.path.join(d, "gen-%d.jsonl" % g["generation"]))
             for g in gens}
    steps = [g["generation"] for g in gens]
    last = steps[-1]
    res = imgtest.Tally()
    with tempfile.TemporaryDirectory(prefix="btrfsimg-gen.") as tmp:
        # the copy before the churn: every recorded generation whole
        img = imgtest.private_copy(os.path.join(d, "spread.img.zst"), tmp)
        outs = {g: walk_check(kv, res, cli, img, g, views[g], steps[-2], "spread: ")
                for g in steps[:-1]}
        print("spread outcomes: %s" % outs)
        res.check("spread: every generation exact", all(o.endswith(" exact") for o in outs.values()),
                  outs)
        res.check("spread: a generation whose top root-tree block was written twice, read "
                  "exact", "scan twice exact" in outs.values(), outs)
        # hostile: generation 1st's root tree naming today's tree 5
        what = plant_newer_root(img, steps[0])
        rc, out, err = imgtest.run_cli(cli, ["walk", "--generation", str(steps[0]), img],
                                       timeout=TIMEOUT)
        res.check("an older root tree naming a newer block: refused, not followed",
                  what and rc == 2 and out == b"" and
                  b"generation newer than the one read, have " in err,
                  "%s: rc=%r out=%r %s" % (what, rc, out[:80], err[-300:]))
        os.unlink(img)
        img = imgtest.private_copy(os.path.join(d, "gens.img.zst"), tmp)
        outcomes = {g: walk_check(kv, res, cli, img, g, views[g], last) for g in views}
        print("outcomes: %s" % outcomes)
        o = set(outcomes.values())
        res.check("the last generation exact from the superblock", outcomes[last] == "super exact",
                  outcomes[last])
        for want in ("backup exact", "scan exact", "damaged", "gone"):
            res.check("some generation is %r (the image covers it)" % want,
                      any(x.endswith(want) for x in o), outcomes)
        other_commands(res, cli, img, views, steps, tmp)
        owner_then(res, cli, img, views, steps)
        python_binding(res, img, views, steps, pythonpath)
        mount_check(res, cli, img, views[steps[2]], steps[2])
        log_check(res, cli, testdata, tmp)
    return res.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
