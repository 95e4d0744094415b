#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Evidence containers: every command reads EWF, qcow2, VMDK, VHD/VHDX and
split raw exactly as the raw image they hold.

    python3 tests/images/test_containers.py BUILD/tools/btrfsimg testdata

The containers are built here, at run time, from committed raw images with
the formats' own tools: ewfacquire (ewf-tools; 1 MiB segments so that
several exist, compressed), qemu-img convert (qcow2 compressed, VMDK
monolithicSparse / streamOptimized / monolithicFlat / twoGbMaxExtentSparse,
VHD fixed and dynamic, VHDX) and split. The truth is the raw image:
`walk --json --hash` (and super, subvols) through each container must be
byte-identical to the same command on the raw image, whose walk
tests/images/test_files.py checks against the kernel's recorded view. The MD5 and
SHA-1 that `layers` and `verify-image` report are checked against what
ewfacquire printed and against hashlib over the raw image.

Damage: a missing and a truncated EWF segment and a missing split segment
(named, what is readable still shown, exit 1), an EWF chunk corrupted on
purpose (its stored checksum catches it: exit 1, the chunk named). A
segment missing or truncated in the middle of an E01 set, and a VMDK
descriptor's middle extent file deleted (sparse and flat extents): exit 1,
the file named, the segments after the gap still read; each file of the
kernel's recorded view exactly the kernel's, or shown without a hash and
named as unreadable if and only if btrfs-progs (dump-tree) places some of
its data in the gap.
Multi-device: the two devices of a RAID1 set, each its own container.
"""
import hashlib
import json
import os
import random
import re
import shutil
import stat
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

T = imgtest.Tally()
CLI = None
KV = None  # testdata/gen_kview.py: the fields of the kernel's view


def run(args, timeout=300):
    return imgtest.run_cli(CLI, args, timeout)


def sh(args, **kw):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(args), p.stderr.decode(errors="replace")))
    return p.stdout.decode(errors="replace")


def ewfacquire(src, target, extra=(), seg="1MiB"):
    """ewfacquire SRC into TARGET.E01...; what it printed (the hashes)."""
    return sh(["ewfacquire", "-u", "-q", "-t", target, "-S", seg, "-b", "16",
               "-d", "sha1"] + list(extra) + [src])


RAW_RUNS = {}


def same(name, args, raw_args, want_rc=0, names=()):
    """`args` prints exactly what `raw_args` prints, with exit status
    want_rc (the image names @names, pairs of container and raw, swapped)."""
    rc, out, err = run(args)
    key = tuple(raw_args)
    if key not in RAW_RUNS:
        RAW_RUNS[key] = run(raw_args)
    rrc, rout, rerr = RAW_RUNS[key]
    for a, b in names:
        out = out.replace(json.dumps(a)[1:-1].encode(), json.dumps(b)[1:-1].encode())
    ok = rc == want_rc and rrc == want_rc and out == rout and out
    T.check(name, ok, "exit %s (raw %s), %d vs %d bytes, stderr %r"
            % (rc, rrc, len(out), len(rout), err[-400:]))


def layers(path, *extra):
    rc, out, err = run(["layers", "--json"] + list(extra) + [path])
    try:
        recs = [json.loads(x) for x in out.decode().splitlines()]
    except ValueError:
        recs = []
    return rc, recs, err


# ------------------------------------------------------------ single device

def test_ewf(raw, work):
    raw_md5 = hashlib.md5(open(raw, "rb").read()).hexdigest()
    raw_sha1 = hashlib.sha1(open(raw, "rb").read()).hexdigest()
    ev = os.path.join(work, "ev")
    said = ewfacquire(raw, ev, ["-c", "deflate:fast", "-C", "CASE-15", "-e", "A. Examiner",
                                "-E", "EV-7", "-D", "laptop disk", "-N", "seized 2026"])
    segs = sorted(f for f in os.listdir(work) if f.startswith("ev.E"))
    T.check("ewfacquire made several segments", len(segs) >= 3, segs)
    m = re.search(r"MD5 hash calculated over data:\s*([0-9a-f]{32})", said)
    T.check("ewfacquire's MD5 is the raw image's", m and m[1] == raw_md5, (m, raw_md5))
    e01 = ev + ".E01"
    walk = ["walk", "--json", "--hash"]
    same("E01: walk --hash == raw", walk + [e01], walk + [raw])
    same("E01: super --json == raw (but the image name)", ["super", "--json", e01],
         ["super", "--json", raw], names=[(e01, raw)])
    same("E01: subvols --json == raw", ["subvols", "--json", e01], ["subvols", "--json", raw])
    every = [os.path.join(work, s) for s in segs]
    random.Random(15).shuffle(every)
    same("E01: every segment given, in any order: walk == raw", walk + every, walk + [raw])
    same("E01: a later segment given first finds the set", walk + [every[-1]], walk + [raw])
    same("--format ewf", walk + ["--format", "ewf", e01], walk + [raw])
    rc, out, err = run(walk + ["--format", "raw", e01])
    T.check("--format raw on an E01 reads it as raw: no btrfs, exit 2",
            rc == 2 and b"no btrfs superblock" in err, (rc, err[-300:]))
    rc, out, err = run(["subvols", "--partition", "1", e01])
    rrc, _, rerr = run(["subvols", "--partition", "1", raw])
    T.check("--partition 1 on an E01 of a filesystem: the raw image's error, exit 2",
            rc == 2 and rrc == 2 and b"holds btrfs itself" in err
            and err.replace(e01.encode(), raw.encode()) == rerr, (rc, err, rerr))
    rc, recs, err = layers(e01)
    c = recs[0] if recs else {}
    T.check("layers: ewf, the disk's size, every segment",
            rc == 0 and c.get("layer") == "ewf" and c.get("size") == os.path.getsize(raw)
            and [os.path.basename(s) for s in c.get("segments", [])] == segs, (rc, c, err))
    T.check("layers: acquisition metadata",
            c.get("case_number") == "CASE-15" and c.get("examiner_name") == "A. Examiner"
            and c.get("evidence_number") == "EV-7" and c.get("description") == "laptop disk"
            and c.get("notes") == "seized 2026" and "acquiry_date" in c, c)
    T.check("layers: stored MD5 and SHA-1 are the raw image's",
            c.get("md5") == raw_md5 and c.get("sha1") == raw_sha1, (c.get("md5"), raw_md5))
    rc, out, err = run(["layers", e01])
    T.check("layers text: case number and md5", rc == 0 and b"CASE-15" in out
            and raw_md5.encode() in out, (rc, out[:500]))
    rc, out, err = run(["verify-image", "--json", e01])
    v = json.loads(out) if rc == 0 and out else {}
    T.check("verify-image: computed == stored == hashlib, exit 0",
            v.get("md5") == raw_md5 and v.get("md5_stored") == raw_md5
            and v.get("sha1") == raw_sha1 and v.get("sha1_stored") == raw_sha1
            and v.get("verified") is True and v.get("unreadable_ranges") == 0, (rc, v, err))
    return ev, segs


def test_ewf_damage(raw, work, ev, segs):
    raw_md5 = hashlib.md5(open(raw, "rb").read()).hexdigest()
    walk = ["walk", "--json", "--hash"]
    rc_raw, full, _ = run(walk + [raw])
    lines = len(full.splitlines())
    for what, damage in (("missing", lambda p: os.unlink(p)),
                         ("truncated", lambda p: os.truncate(p, os.path.getsize(p) // 2))):
        d = os.path.join(work, what)
        os.mkdir(d)
        for s in segs:
            shutil.copyfile(os.path.join(work, s), os.path.join(d, s))
        victim = os.path.join(d, segs[2])
        damage(victim)
        rc, out, err = run(walk + [os.path.join(d, segs[0])])
        T.check("E01 with a %s segment: named, exit 1" % what,
                rc == 1 and segs[2].encode() in err and what.encode() in err, (rc, err[-600:]))
        got = len(out.splitlines())
        T.check("E01 with a %s segment: what is readable is shown" % what,
                0 < got <= lines, (got, lines))
        rc, out, err = run(["layers", "--json", os.path.join(d, segs[0])])
        T.check("layers of an E01 with a %s segment: exit 1, named" % what,
                rc == 1 and segs[2].encode() in err + out, (rc, err[-300:]))
        if what != "missing":
            continue
        # the hash sections are in the last segment, read past the gap; a
        # set of many segments keeps every key after its segment list
        c = json.loads(out.splitlines()[0]) if out else {}
        T.check("layers of an E01 with a missing segment: its stored MD5, the missing one "
                "listed", c.get("md5") == raw_md5 and c.get("missing") == [victim],
                (c.get("md5"), raw_md5, c.get("missing"), len(c.get("segments", []))))
        rc, out, err = run(["verify-image", "--json", os.path.join(d, segs[0])])
        v = json.loads(out) if out else {}
        said = [x for x in err.decode(errors="replace").splitlines() if ": bytes " in x]
        T.check("verify-image of an E01 with a missing segment: the stored MD5, exit 1",
                rc == 1 and v.get("md5_stored") == raw_md5 and v.get("verified") is False,
                (rc, v.get("md5_stored"), raw_md5))
        T.check("verify-image of an E01 with a missing segment: its unreadable ranges said "
                "as one line", v.get("unreadable_ranges", 0) > 1 and len(said) == 1
                and "unreadable ranges in a row" in said[0], (v.get("unreadable_ranges"), said[:3]))


def test_ewf_many_segments(raw, work):
    """A set of hundreds of segments: layers lists each and still every key
    after them (acquisition metadata, stored MD5), text and JSON."""
    d = os.path.join(work, "many")
    os.mkdir(d)
    ewfacquire(raw, os.path.join(d, "m"), seg="1MiB")
    segs = sorted(f for f in os.listdir(d) if f.startswith("m.E"))
    raw_md5 = hashlib.md5(open(raw, "rb").read()).hexdigest()
    rc, out, err = run(["layers", "--json", os.path.join(d, "m.E01")])
    c = json.loads(out.splitlines()[0]) if rc == 0 and out else {}
    T.check("layers of %d segments: every one listed, then the stored MD5" % len(segs),
            len(segs) > 100 and len(c.get("segments", [])) == len(segs)
            and c.get("md5") == raw_md5, (rc, len(segs), len(c.get("segments", [])), c.get("md5")))
    rc, out, err = run(["layers", os.path.join(d, "m.E01")])
    T.check("layers text of %d segments: the stored MD5" % len(segs),
            rc == 0 and raw_md5.encode() in out, (rc, out[-300:]))
    shutil.rmtree(d)


def test_ewf_corrupt_chunk(raw, work, path="plain/overwrite"):
    """Chunks holding data are stored as they are with -c empty-block: find
    the first 4 KiB of a file's contents in the raw image (its chunk) and in
    the segment files, and flip a byte there."""
    d = os.path.join(work, "corrupt")
    os.mkdir(d)
    ewfacquire(raw, os.path.join(d, "cc"), ["-c", "empty-block"], seg="64MiB")
    e01 = os.path.join(d, "cc.E01")
    rc, data, err = run(["cat", "--path", path, raw])
    block = data[:4096]
    with open(raw, "rb") as f:
        disk = f.read()
    at = disk.find(block) if rc == 0 and len(block) == 4096 else -1
    hit = None
    for s in sorted(os.listdir(d)):
        seg = open(os.path.join(d, s), "rb").read()
        k = seg.find(block)
        if k >= 0 and at >= 0:
            hit = (os.path.join(d, s), k + 100)
            break
    T.check("the file's chunk is stored as it is", hit is not None, (rc, at))
    if not hit:
        return
    with open(hit[0], "r+b") as f:
        f.seek(hit[1])
        b = f.read(1)
        f.seek(hit[1])
        f.write(bytes([b[0] ^ 0xff]))
    chunk = b"chunk %d " % (at // 8192)
    rc, out, err = run(["cat", "--path", path, e01])
    T.check("corrupt EWF chunk: cat fails at it, the chunk named",
            rc != 0 and chunk in err and b"checksum" in err, (rc, chunk, err[-500:]))
    rc, out, err = run(["walk", "--json", "--hash", e01])
    T.check("corrupt EWF chunk: walk --hash goes on, the chunk named, exit 1",
            rc == 1 and chunk in err and len(out.splitlines()) > 10, (rc, err[-500:]))
    rc, out, err = run(["verify-image", "--json", e01])
    v = json.loads(out) if out else {}
    T.check("verify-image: the bad chunk named, hashes differ, exit 1",
            rc == 1 and chunk in err and v.get("unreadable_ranges", 0) >= 1
            and v.get("verified") is False and v.get("md5") != v.get("md5_stored"),
            (rc, v, err[-300:]))


QEMU = [("qcow2", ["-O", "qcow2", "-c"], "qcow2", "version 3"),
        ("vmdk-sparse", ["-O", "vmdk"], "vmdk", "monolithicSparse"),
        ("vmdk-stream", ["-O", "vmdk", "-o", "subformat=streamOptimized"], "vmdk",
         "streamOptimized"),
        ("vmdk-flat", ["-O", "vmdk", "-o", "subformat=monolithicFlat"], "vmdk",
         "monolithicFlat"),
        ("vmdk-2gb", ["-O", "vmdk", "-o", "subformat=twoGbMaxExtentSparse"], "vmdk",
         "twoGbMaxExtentSparse"),
        ("vhd-dynamic", ["-O", "vpc"], "vhd", "dynamic"),
        ("vhd-fixed", ["-O", "vpc", "-o", "subformat=fixed"], "vhd", "fixed"),
        ("vhdx", ["-O", "vhdx"], "vhdx", "dynamic")]


def test_qemu(raw, work):
    walk = ["walk", "--json", "--hash"]
    made = {}
    for name, args, fmt, detail in QEMU:
        img = os.path.join(work, name + ".img")
        sh(["qemu-img", "convert"] + args + [raw, img])
        made[name] = img
        same("%s: walk --hash == raw" % name, walk + [img], walk + [raw])
        rc, recs, err = layers(img)
        c = recs[0] if recs else {}
        # a VHD's disk is rounded up to whole CHS cylinders (qemu-img's rule)
        size_ok = (c.get("size", 0) >= os.path.getsize(raw) if fmt == "vhd"
                   else c.get("size") == os.path.getsize(raw))
        T.check("%s: layers says %s %s, the disk's size" % (name, fmt, detail),
                rc == 0 and c.get("layer") == fmt and c.get("type", "") == detail
                and size_ok, (rc, c, err))
    rc, recs, err = layers(made["vmdk-flat"])
    segs = recs[0].get("segments", []) if recs else []
    T.check("vmdk descriptor: its extent file listed",
            len(segs) == 1 and segs[0].endswith("-flat.img"), segs)
    same("--format qcow2", walk + ["--format", "qcow2", made["qcow2"]], walk + [raw])
    rc, out, err = run(walk + ["--format", "vhdx", made["qcow2"]])
    T.check("--format vhdx on a qcow2: refused naming the file, exit 2",
            rc == 2 and made["qcow2"].encode() in err, (rc, err[-300:]))
    flat = made["vmdk-flat"]
    extent = flat[:-4] + "-flat.img"
    os.rename(extent, extent + ".away")
    rc, out, err = run(walk + [flat])
    T.check("vmdk with its extent file missing: named, exit 2",
            rc == 2 and b"-flat.img" in err and b"missing" in err, (rc, err[-300:]))
    os.rename(extent + ".away", extent)
    # a qcow2 with a backing file beside it, and without it
    base = os.path.join(work, "base.qcow2")
    top = os.path.join(work, "top.qcow2")
    sh(["qemu-img", "convert", "-O", "qcow2", raw, base])
    sh(["qemu-img", "create", "-f", "qcow2", "-F", "qcow2", "-b", "base.qcow2", top])
    same("qcow2 over a backing file: walk == raw", walk + [top], walk + [raw])
    os.rename(base, base + ".away")
    rc, out, err = run(walk + [top])
    T.check("qcow2 whose backing file is not there: named, exit 2",
            rc == 2 and b"base.qcow2" in err, (rc, err[-300:]))


def test_split(raw, work):
    walk = ["walk", "--json", "--hash"]
    d = os.path.join(work, "split")
    os.mkdir(d)
    sh(["split", "-b", "10M", "-d", "-a", "3", "--numeric-suffixes=1", raw,
        os.path.join(d, "disk.img.")])
    parts = sorted(os.listdir(d))
    first = os.path.join(d, parts[0])
    same("split: walk --hash == raw (%d segments)" % len(parts), walk + [first], walk + [raw])
    same("split: every segment given", walk + [os.path.join(d, p) for p in parts[::-1]],
         walk + [raw])
    same("--format split", walk + ["--format", "split", first], walk + [raw])
    rc, recs, err = layers(first)
    c = recs[0] if recs else {}
    T.check("layers: split, every segment, the size",
            c.get("layer") == "split" and len(c.get("segments", [])) == len(parts)
            and c.get("size") == os.path.getsize(raw), (rc, c))
    os.unlink(os.path.join(d, parts[3]))
    rc, out, err = run(walk + [first])
    T.check("split with a missing segment: named, what is readable shown, exit 1",
            rc == 1 and parts[3].encode() in err and out, (rc, err[-400:]))


# ------------------------------------------------------------ a file missing, the rest read

def data_ranges(img):
    """(subvol, inode) -> the byte ranges of the image its data is read
    from, after btrfs-progs (btrfs inspect-internal dump-tree): each
    regular extent item's disk range mapped through the chunk tree's first
    stripe (single-device images, data profile single): for an
    uncompressed extent the part the item refers to, for a compressed one
    all of it. Holes and preallocated extents read no bytes."""
    def dump(tree):
        return sh(["btrfs", "inspect-internal", "dump-tree", "-t", tree, img])
    chunks, cur = [], None
    for line in dump("chunk").splitlines():
        m = re.search(r"key \(FIRST_CHUNK_TREE CHUNK_ITEM (\d+)\)", line)
        if m:
            cur = [int(m[1]), 0, None]
            chunks.append(cur)
        m = re.search(r"^\s+length (\d+) ", line)
        if m and cur:
            cur[1] = int(m[1])
        m = re.search(r"stripe 0 devid \d+ offset (\d+)", line)
        if m and cur:
            cur[2] = int(m[1])
    roots = dump("root")
    trees = {5} if "(FS_TREE ROOT_ITEM" in roots else set()
    trees |= {int(x) for x in re.findall(r"key \((\d+) ROOT_ITEM", roots) if int(x) >= 256}
    out = {}
    for tree in sorted(trees):
        item = None
        for line in dump(str(tree)).splitlines():
            m = re.search(r"key \((\d+) EXTENT_DATA \d+\) itemoff", line)
            if m:
                item = {"ino": int(m[1])}
                continue
            if item is None:
                continue
            m = re.search(r"type (\d+) \(", line)
            if m and "type" not in item:
                item["type"] = int(m[1])
            m = re.search(r"extent data disk byte (\d+) nr (\d+)", line)
            if m:
                item["disk"] = (int(m[1]), int(m[2]))
            m = re.search(r"extent data offset (\d+) nr (\d+)", line)
            if m:
                item["ref"] = (int(m[1]), int(m[2]))
            m = re.search(r"extent compression (\d+)", line)
            if not m:
                continue
            if item.get("type") == 1 and item.get("disk", (0,))[0]:
                logical, size = item["disk"]
                if int(m[1]) == 0:
                    logical, size = logical + item["ref"][0], item["ref"][1]
                for start, length, phys in chunks:
                    if start <= logical < start + length:
                        at = phys + logical - start
                        out.setdefault((tree, item["ino"]), []).append((at, at + size))
            item = None
    return out


def differs(exp, got):
    """The fields (the kernel view's, gen_kview.FIELDS) in which @got, a
    record of walk --json, differs from the kernel's record @exp; hex in
    any letter case, and a stub directory's volatile times not compared,
    as tests/images/test_files.py compares them."""
    def norm(v):
        if isinstance(v, str):
            return v.lower()
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v
    stub = exp.get("ino") == KV.STUB_INO and stat.S_ISDIR(exp.get("mode") or 0)
    return {f for f in KV.FIELDS if not (stub and f in KV.VOLATILE_STUB_FIELDS)
            and (norm(exp.get(f)) if f != "path" else exp.get(f))
            != (norm(got.get(f)) if f != "path" else got.get(f))}


def check_gap(name, res, truth, ranges, gap, missing):
    """A walk --json --hash (@res) of a container whose file @missing held
    the image's bytes [gap[0], gap[1]): exit 1, the file named; every path
    of the kernel's view (@truth) listed; each file exactly the kernel's,
    or, if and only if some of its data lies in the gap, shown without a
    hash and named as unreadable; and files read whole beyond the gap."""
    rc, out, err = res
    T.check("%s: exit 1, '%s' named" % (name, os.path.basename(missing)),
            rc == 1 and os.path.basename(missing).encode() in err, (rc, err[-400:]))
    got = {(d["subvol"], d["path"]): d for d in map(json.loads, out.splitlines())}
    want = {(d["subvol"], d["path"]): d for d in truth}
    T.check("%s: every path of the kernel's view" % name, set(got) == set(want),
            sorted(set(got) ^ set(want))[:5])
    wrong, damaged, beyond = [], set(), 0
    for k, d in got.items():
        t = want.get(k, {})
        rs = ranges.get((t.get("subvol"), t.get("ino")), [])
        diff = differs(t, d)
        if not diff:
            beyond += bool(rs) and min(a for a, _ in rs) >= gap[1]
        elif diff == {"sha256"} and d.get("sha256") is None:
            damaged.add(k)
        else:
            wrong.append((k[1], sorted(diff)))
    T.check("%s: no file differs from the kernel's view but by a hash not shown" % name,
            not wrong, wrong[:5])
    crossing = {k for k, t in want.items() if t.get("sha256") is not None
                and any(a < gap[1] and b > gap[0]
                        for a, b in ranges.get((t["subvol"], t["ino"]), []))}
    T.check("%s: the files shown without a hash are those with data in the gap (%d)"
            % (name, len(crossing)), crossing and damaged == crossing,
            sorted(p for _, p in damaged ^ crossing)[:8])
    lines = err.decode(errors="replace").splitlines()
    unnamed = [p for _, p in damaged
               if not any(x.startswith("btrfsimg: %s: cannot read" % p)
                          and os.path.basename(missing) in x for x in lines)]
    T.check("%s: each of them named as unreadable, in '%s'" % (name, os.path.basename(missing)),
            not unnamed, unnamed[:5])
    T.check("%s: files beyond the gap read whole (%d)" % (name, beyond), beyond > 0, beyond)


def vmdk_descriptor(path, extent_lines, template):
    """Write the descriptor @path: qemu-img's descriptor @template with its
    extent line replaced by @extent_lines (hand-edited, as a VMware user
    would join extents)."""
    with open(template, "rb") as f:
        text = f.read().rstrip(b"\0").decode()
    text = re.sub(r"^RW .*$", "\n".join(extent_lines), text, count=1, flags=re.M)
    with open(path, "w") as f:
        f.write(text)


def test_vmdk_missing(raw, work, truth):
    """A descriptor over three extent files, the middle one deleted: the
    extents of twoGbMaxExtentSparse (qemu-img, one per third of the raw
    image, joined in one descriptor) and of twoGbMaxExtentFlat (qemu-img's
    flat extent cut in three)."""
    walk = ["walk", "--json", "--hash"]
    ranges = data_ranges(raw)
    size = os.path.getsize(raw)
    mib = 1 << 20
    d = os.path.join(work, "vmdk-gap")
    os.mkdir(d)
    # sparse: extents [0, 16M), [16M, 18M), [18M, end)
    cuts = [0, 16 * mib, 18 * mib, size]
    lines = []
    for i in range(3):
        part = os.path.join(d, "p%d.vmdk" % i)
        src = {"driver": "raw", "offset": cuts[i], "size": cuts[i + 1] - cuts[i],
               "file": {"driver": "file", "filename": raw}}
        sh(["qemu-img", "convert", "-O", "vmdk", "-o", "subformat=twoGbMaxExtentSparse",
            "json:" + json.dumps(src), part])
        with open(part, "rb") as f:
            lines += [x for x in f.read().rstrip(b"\0").decode().splitlines()
                      if x.startswith("RW ")]
    sparse = os.path.join(d, "sparse.vmdk")
    vmdk_descriptor(sparse, lines, os.path.join(d, "p0.vmdk"))
    same("vmdk, 3 sparse extents in one descriptor: walk == raw", walk + [sparse], walk + [raw])
    gone = os.path.join(d, "p1-s001.vmdk")
    os.unlink(gone)
    check_gap("vmdk sparse extent missing", run(walk + [sparse]), truth, ranges,
              (cuts[1], cuts[2]), gone)
    rc, recs, err = layers(sparse)
    c = recs[0] if recs else {}
    T.check("layers: the missing extent file listed as missing, exit 1",
            rc == 1 and c.get("missing") == [gone]
            and [os.path.basename(x) for x in c.get("segments", [])]
            == ["p0-s001.vmdk", "p2-s001.vmdk"], (rc, c, err[-300:]))
    # flat: qemu-img's one flat extent cut at [0, 18M), [18M, 19.5M), rest
    flat = os.path.join(d, "flat.vmdk")
    sh(["qemu-img", "convert", "-O", "vmdk", "-o", "subformat=twoGbMaxExtentFlat", raw, flat])
    whole = os.path.join(d, "flat-f001.vmdk")
    cuts = [0, 18 * mib, 19 * mib + mib // 2, size]
    lines = []
    with open(whole, "rb") as f:
        for i in range(3):
            name = "flat-f%03d.vmdk" % (i + 1)
            data = f.read(cuts[i + 1] - cuts[i])
            with open(os.path.join(d, name) + ".new", "wb") as g:
                g.write(data)
            lines.append('RW %d FLAT "%s" 0' % (len(data) // 512, name))
    for i in range(3):
        name = os.path.join(d, "flat-f%03d.vmdk" % (i + 1))
        os.replace(name + ".new", name)
    vmdk_descriptor(flat, lines, flat)
    same("vmdk, 3 flat extents: walk == raw", walk + [flat], walk + [raw])
    gone = os.path.join(d, "flat-f002.vmdk")
    os.unlink(gone)
    check_gap("vmdk flat extent missing", run(walk + [flat]), truth, ranges,
              (cuts[1], cuts[2]), gone)


def test_ewf_gap(raw, work, truth):
    """An E01 set with a segment missing in the middle, and one with a
    segment truncated there: libewf is given the last segments under the
    numbers that follow on, and their chunks are the disk's last ones. The
    gap (where btrfsimg says it is) must be exactly where the unreadable
    files lie, per btrfs-progs' view of the image, and every file outside
    it, beyond it too, must be the kernel's."""
    walk = ["walk", "--json", "--hash"]
    ranges = data_ranges(raw)
    d = os.path.join(work, "ewf-gap")
    os.mkdir(d)
    ewfacquire(raw, os.path.join(d, "gv"), ["-c", "deflate:fast"])
    segs = sorted(f for f in os.listdir(d) if f.startswith("gv.E"))
    T.check("ewfacquire made more than 6 segments of the image", len(segs) > 6, segs)
    e01 = os.path.join(d, segs[0])
    same("E01 (%d segments): walk --hash == raw" % len(segs), walk + [e01], walk + [raw])
    for what, damage in (("missing", os.unlink),
                         ("truncated", lambda p: os.truncate(p, os.path.getsize(p) // 2))):
        victim = os.path.join(d, segs[2])
        keep = victim + ".keep"
        shutil.copyfile(victim, keep)
        damage(victim)
        res = run(walk + [e01])
        m = re.search(r"'%s', which is %s: disk bytes (\d+)-(\d+) .* the segments after it "
                      r"are read" % (re.escape(victim), what), res[2].decode(errors="replace"))
        T.check("E01, segment 3 %s: the gap said, and the segments after it read" % what,
                m is not None, res[2][-600:])
        if m:
            check_gap("E01, segment 3 %s" % what, res, truth, ranges,
                      (int(m[1]), int(m[2]) + 1), victim)
        rc, recs, err = layers(e01)
        c = recs[0] if recs else {}
        listed = (c.get("missing") == [victim] if what == "missing"
                  else victim in c.get("segments", []))
        T.check("layers, segment 3 %s: every segment listed, exit 1" % what,
                rc == 1 and listed and len(c.get("segments", [])) + len(c.get("missing", []))
                == len(segs), (rc, c, err[-300:]))
        os.replace(keep, victim)
    # two gaps: what lies between them cannot be placed, the rest can
    gone = [os.path.join(d, segs[i]) for i in (2, 5)]
    for g in gone:
        os.rename(g, g + ".keep")
    res = run(walk + [e01])
    m = re.search(r"segments '%s' to '%s' .*?\): disk bytes (\d+)-(\d+) .* the segments after "
                  r"it are read" % (re.escape(gone[0]), re.escape(gone[1])),
                  res[2].decode(errors="replace"))
    T.check("E01, segments 3 and 6 missing: one gap said, from 3 to 6, the last run read",
            m is not None, res[2][-600:])
    if m:
        check_gap("E01, segments 3 and 6 missing", res, truth, ranges,
                  (int(m[1]), int(m[2]) + 1), gone[0])
    for g in gone:
        os.rename(g + ".keep", g)


# ------------------------------------------------------------ multi-device

def test_multi(testdata, work):
    walk = ["walk", "--json", "--hash"]
    src = os.path.join(testdata, "images", "raid1")
    d1 = imgtest.private_copy(os.path.join(src, "dev1.img.zst"), work)
    d2 = imgtest.private_copy(os.path.join(src, "dev2.img.zst"), work)
    e1 = os.path.join(work, "r1")
    e2 = os.path.join(work, "r2")
    ewfacquire(d1, e1, ["-c", "deflate:fast"], seg="8MiB")
    ewfacquire(d2, e2, ["-c", "deflate:fast"], seg="8MiB")
    q2 = os.path.join(work, "r2.qcow2")
    sh(["qemu-img", "convert", "-O", "qcow2", "-c", d2, q2])
    for args, what in (([e1 + ".E01", e2 + ".E01"], "two E01 sets"),
                       ([q2, e1 + ".E01"], "an E01 and a qcow2")):
        same("RAID1, %s: walk --hash == raw pair" % what, walk + args, walk + [d1, d2])
        same("RAID1, %s: super --json == raw pair (but the image names)" % what,
             ["super", "--json"] + args, ["super", "--json", d1, d2],
             names=[(e1 + ".E01", d1), (e2 + ".E01", d2), (q2, d2)])
    # raw devices whose names look like split segments stay two devices
    n1, n2 = os.path.join(work, "dev.01"), os.path.join(work, "dev.02")
    os.link(d1, n1)
    os.link(d2, n2)
    same("RAID1 as dev.01 and dev.02: two devices, not a split set",
         ["super", "--json", n1, n2], ["super", "--json", d1, d2], names=[(n1, d1), (n2, d2)])
    rc, out, err = run(["subvols", "--json", e1 + ".E01"])
    rrc, rout, _ = run(["subvols", "--json", d1])
    T.check("RAID1, one E01 of two: as the raw device alone (degraded)",
            rc == rrc and out == rout and out, (rc, rrc, err[-300:]))
    # a whole-disk image with a GPT inside a container
    gpt = imgtest.private_copy(os.path.join(testdata, "images", "gpt1", "disk.img.zst"), work)
    gq = os.path.join(work, "gpt.vhdx")
    sh(["qemu-img", "convert", "-O", "vhdx", gpt, gq])
    same("GPT inside VHDX: subvols == raw", ["subvols", "--json", gq], ["subvols", "--json", gpt])
    rc, recs, err = layers(gq)
    kinds = [(r.get("depth"), r.get("layer")) for r in recs]
    T.check("layers: vhdx, gpt, its partition", kinds[:3] == [(0, "vhdx"), (1, "gpt"),
                                                              (2, "partition")], kinds)
    rc, out, err = run(["partitions", "--json", gq])
    rrc, rout, _ = run(["partitions", "--json", gpt])
    T.check("partitions of the VHDX == of the raw disk (but the image name)",
            rc == 0 and [{k: v for k, v in json.loads(x).items() if k != "image"}
                         for x in out.splitlines()]
            == [{k: v for k, v in json.loads(x).items() if k != "image"}
                for x in rout.splitlines()], (out, rout))


def main():
    global CLI
    global KV
    CLI, testdata = sys.argv[1], sys.argv[2]
    KV = imgtest.import_kview(testdata)
    need = [t for t in ("ewfacquire", "qemu-img", "split", "zstd", "btrfs")
            if not shutil.which(t)]
    if need:
        print("SKIP: not installed: %s (bash scripts/deps.sh)" % ", ".join(need))
        return imgtest.SKIP
    work = tempfile.mkdtemp(prefix="ctr-test-")
    imgtest.suppress_container_leaks(work)
    try:
        raw = imgtest.private_copy(os.path.join(testdata, "files", "extents.img.zst"), work)
        ev, segs = test_ewf(raw, work)
        test_ewf_damage(raw, work, ev, segs)
        test_ewf_many_segments(raw, work)
        test_ewf_corrupt_chunk(raw, work)
        comp = imgtest.private_copy(os.path.join(testdata, "files", "comp.img.zst"), work)
        truth = imgtest.load_jsonl(os.path.join(testdata, "files", "comp.view.jsonl"))
        test_vmdk_missing(comp, work, truth)
        test_ewf_gap(comp, work, truth)
        small = imgtest.private_copy(os.path.join(testdata, "files", "special.img.zst"), work)
        test_qemu(small, work)
        test_split(small, work)
        test_multi(testdata, work)
    except (RuntimeError, imgtest.RestoreError) as e:
        T.check("building the containers", False, e)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return T.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
