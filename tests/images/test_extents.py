#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Bytes to file and back (issue 27): `btrfsimg extents` and `btrfsimg
owner`, and walk --csum, against the kernel's images and btrfs-progs.

    test_extents.py BTRFSIMG TESTDATA

For the committed kernel-made images (one device, DUP, RAID1 on two
devices, a GPT partition, an LVM volume):
  * every regular file's extents (walk --json, then extents --json) cover
    [0, size) in order, and their EXTENT_DATA items are those
    `btrfs inspect-internal dump-tree -t SUBVOL` prints for the inode;
  * every copy of a logical address is where `btrfs-map-logical -l L`
    puts it;
  * image offsets: the bytes at image_offset in the image file are the
    file's bytes (uncompressed ranges), also through a partition and LVM;
  * checksum coverage equals the csum tree's EXTENT_CSUM items
    (dump-tree -t csum), and walk --csum folds it per file;
  * owner --logical finds, for an extent, the inode of every extent data
    backref dump-tree -t extent lists (and the file itself, in every
    snapshot sharing it); owner --image-offset comes back to the file
    offset; and, as root, owner's paths are what
    `btrfs inspect-internal logical-resolve` prints on a loop mount.
A hostile image (a file extent's disk_bytenr moved outside every chunk,
leaf checksum recomputed) lists the range with no copy, says so, exits 1.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

CLI = os.path.abspath(sys.argv[1])
TESTDATA = os.path.abspath(sys.argv[2])
T = imgtest.Tally()
TIMEOUT = 120
FILES_PER_IMAGE = 40
LOGICALS_PER_IMAGE = 24
OWNERS_PER_IMAGE = 12


def cli(args, timeout=TIMEOUT):
    return imgtest.run_cli(CLI, args, timeout=timeout)


def cli_jsonl(args):
    rc, out, err = cli(args)
    recs = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    return rc, recs, err.decode(errors="replace")


def progs(args, timeout=TIMEOUT):
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, ""
    return p.returncode, p.stdout.decode(errors="replace")


# ------------------------------------------------------------ dump-tree parsing

ITEM = re.compile(r"item \d+ key \((\d+) EXTENT_DATA (\d+)\)")


def dump_extent_items(dev, subvol):
    """{ino: [(file_offset, type, disk_bytenr, disk_num, offset, num, comp)]}
    from dump-tree; None when dump-tree cannot read the image."""
    rc, out = progs(["btrfs", "inspect-internal", "dump-tree", "-t", str(subvol), dev])
    if rc != 0:
        return None
    items, cur = {}, None
    for line in out.splitlines():
        m = ITEM.search(line)
        if m:
            cur = {"ino": int(m[1]), "off": int(m[2])}
            items.setdefault(cur["ino"], []).append(cur)
            continue
        if cur is None:
            continue
        s = line.strip()
        if s.startswith("item "):
            cur = None
        elif m := re.match(r"generation \d+ type (\d+)", s):
            cur["type"] = int(m[1])
        elif m := re.match(r"inline extent data size \d+ ram_bytes (\d+) compression (\d+)", s):
            cur.update(ram=int(m[1]), comp=int(m[2]))
        elif m := re.match(r"extent data disk byte (\d+) nr (\d+)", s):
            cur.update(bytenr=int(m[1]), disk_num=int(m[2]))
        elif m := re.match(r"extent data offset (\d+) nr (\d+) ram (\d+)", s):
            cur.update(eoff=int(m[1]), num=int(m[2]), ram=int(m[3]))
        elif m := re.match(r"extent compression (\d+)", s):
            cur["comp"] = int(m[1])
    return items


def dump_csum_ranges(dev, sectorsize=4096, csize=4):
    rc, out = progs(["btrfs", "inspect-internal", "dump-tree", "-t", "csum", dev])
    if rc != 0:
        return None
    ranges = []
    for m in re.finditer(r"key \(EXTENT_CSUM EXTENT_CSUM (\d+)\) itemoff \d+ itemsize (\d+)", out):
        ranges.append((int(m[1]), int(m[1]) + int(m[2]) // csize * sectorsize))
    return ranges


def dump_backrefs(dev):
    """{extent bytenr: {(root, objectid)}} from dump-tree -t extent."""
    rc, out = progs(["btrfs", "inspect-internal", "dump-tree", "-t", "extent", dev])
    if rc != 0:
        return None
    refs, cur = {}, None
    for line in out.splitlines():
        m = re.search(r"key \((\d+) EXTENT_ITEM \d+\)", line)
        if m:
            cur = refs.setdefault(int(m[1]), set())
            continue
        if re.search(r"key \(\d+ \w+ \d+\)", line):
            cur = None
        m = re.search(r"extent data backref root (\S+) objectid (\d+) offset", line)
        if m and cur is not None:
            root = 5 if m[1] == "FS_TREE" else int(m[1])
            cur.add((root, int(m[2])))
    return refs


def covered(ranges, lo, n):
    return sum(max(0, min(b, lo + n) - max(a, lo)) for a, b in ranges)


# ------------------------------------------------------------ checks

def check_cover(name, size, recs):
    pos, bad = 0, []
    for r in recs:
        if r["file_offset"] > pos:
            bad.append(f"gap at {pos}")
        if r["file_offset"] + r["length"] > pos:
            pos = r["file_offset"] + r["length"]
    if pos != size:
        bad.append(f"records end at {pos}, size {size}")
    T.problems(f"{name}: extents cover [0, size) in order", bad)


def check_items(name, recs, want):
    mine = {}
    for r in recs:
        if r["type"] == "hole" and r["item_offset"] == 0 and r["generation"] == 0:
            continue  # a gap: no item
        if r["type"] == "inline":
            mine[r["item_offset"]] = (0, r["ram_bytes"], {"none": 0, "zlib": 1, "lzo": 2,
                                                          "zstd": 3}[r["compression"]])
        else:
            t = 2 if r["type"] == "prealloc" else 1
            mine[r["item_offset"]] = (t, r["disk_bytenr"], r["disk_num_bytes"],
                                      {"none": 0, "zlib": 1, "lzo": 2,
                                       "zstd": 3}[r["compression"]])
    theirs = {}
    for it in want or []:
        if it.get("type") == 0:
            theirs[it["off"]] = (0, it["ram"], it["comp"])
        else:
            theirs[it["off"]] = (it["type"], it["bytenr"], it["disk_num"], it["comp"])
    # items past i_size are not listed by extents (they read as nothing)
    T.check(f"{name}: EXTENT_DATA items as dump-tree prints them",
            all(theirs.get(k) == v for k, v in mine.items()) and
            all(k in mine for k in theirs if k < max(mine, default=-1) + 1),
            (sorted(mine.items())[:6], sorted(theirs.items())[:6]))


def map_logical(dev, logical, length):
    rc, out = progs(["btrfs-map-logical", "-l", str(logical), "-b", str(length), dev])
    if rc != 0:
        return None
    return {(int(m[1]), int(m[2])) for m in
            re.finditer(r"mirror (\d+) logical \d+ physical (\d+)", out)}


def read_at(path, off, n):
    with open(path, "rb") as f:
        f.seek(off)
        return f.read(n)


def file_bytes(devs, s, o, opts):
    rc, out, _ = cli(["cat", "--inode", f"{s}:{o}"] + opts + devs)
    return out if rc == 0 else None


# ------------------------------------------------------------ one image

def regular_files(devs, opts):
    rc, recs, err = cli_jsonl(["walk", "--json", "--csum"] + opts + devs)
    T.check(f"walk --json --csum {os.path.basename(devs[0])}: exit 0", rc == 0, err[-300:])
    files = [r for r in recs if (r["mode"] & 0o170000) == 0o100000 and r["subvol"] is not None]
    step = max(1, len(files) // FILES_PER_IMAGE)
    return files[::step], files


def per_file(name, devs, opts, f, items, csums, state):
    s, o = f["subvol"], f["ino"]
    rc, recs, err = cli_jsonl(["extents", "--json", "--inode", f"{s}:{o}"] + opts + devs)
    fname = f"{name} {s}:{o} {f['path']}"
    if rc != 0:
        T.check(f"{fname}: extents exit 0", False, err[-300:])
        return
    check_cover(fname, f["size"], recs)
    if items is not None:
        check_items(fname, recs, items.get(s, {}).get(o))
    data = bytes_ = None
    data_total = csum_total = 0
    inline_any = False
    for r in recs:
        inline_any |= r["type"] == "inline"
        if r["type"] != "regular":
            continue
        data_total += r["disk_length"]
        csum_total += r["csum_bytes"]
        if csums is not None and f.get("csum") != "nodatasum":
            want = covered(csums, r["logical"], r["disk_length"])
            T.check(f"{fname} @{r['file_offset']}: csum bytes as the csum tree covers",
                    r["csum_bytes"] == want, (r["csum_bytes"], want))
        state["logicals"].append((r["logical"], r["disk_length"], r["copies"]))
        if r["compression"] != "none" or not r["copies"]:
            continue
        c = r["copies"][0]
        if c["image_offset"] is None:
            continue
        if bytes_ is None:
            bytes_ = file_bytes(devs, s, o, opts) or b""
        n = min(r["length"], 65536)
        data = read_at(c["device"], c["image_offset"], n)
        T.check(f"{fname} @{r['file_offset']}: the image's bytes at {c['image_offset']}"
                " are the file's", data == bytes_[r["file_offset"]:r["file_offset"] + n],
                f"{len(data)} bytes differ")
        state["image_offsets"].append((c["device"], c["image_offset"], s, o, r["file_offset"]))
        state["physical"].append((c["devid"], c["physical"], s, o, r["file_offset"]))
    if "csum" in f and csums is not None:
        if f["csum"] in ("full", "partial", "none"):
            want = "full" if csum_total == data_total and not inline_any else \
                   "none" if csum_total == 0 else "partial"
            T.check(f"{fname}: walk --csum says {want}", f["csum"] == want, f["csum"])
        else:
            T.check(f"{fname}: walk --csum {f['csum']} with no checksummed data",
                    data_total == 0 or f["csum"] == "nodatasum", (f["csum"], data_total))
    for r in recs:
        if r["type"] == "regular" and r["disk_bytenr"] not in state["extents"]:
            state["extents"][r["disk_bytenr"]] = (s, o, r["logical"])


def check_copies(name, devs, state):
    seen = set()
    for logical, length, copies in state["logicals"]:
        if logical in seen or len(seen) >= LOGICALS_PER_IMAGE:
            continue
        seen.add(logical)
        want = map_logical(devs[0], logical, min(length, 4096))
        if want is None:
            print(f"skip {name}: btrfs-map-logical cannot read {devs[0]}")
            return
        mine = {c["physical"] for c in copies}
        T.check(f"{name} logical {logical}: copies where btrfs-map-logical puts them",
                mine == {p for _, p in want} and len(copies) == len(want), (mine, want))


def check_owners(name, devs, opts, refs, state, linear):
    for bytenr, (s, o, logical) in list(state["extents"].items())[:OWNERS_PER_IMAGE]:
        rc, recs, err = cli_jsonl(["owner", "--json", "--logical", str(logical)] + opts + devs)
        got = {(r["subvol"], r["objectid"]) for r in recs if r["kind"] == "file"}
        T.check(f"{name} owner --logical {logical}: compression named as extents names it",
                all(r["compression"] in ("none", "zlib", "lzo", "zstd")
                    for r in recs if r["kind"] == "file"), recs[:2])
        bad = [r["path"] for r in recs if r["kind"] == "file" and
               (r["subvol"], r["objectid"]) in state["paths"] and
               r["path"] not in state["paths"][(r["subvol"], r["objectid"])]]
        T.problems(f"{name} owner --logical {logical}: paths as walk lists them", bad)
        T.check(f"{name} owner --logical {logical}: exit 0, the file {s}:{o} among them",
                rc == 0 and (s, o) in got, (rc, got, err[-200:]))
        if refs is not None and bytenr in refs:
            want = {(root, obj) for root, obj in refs[bytenr] if root in state["subvols"]}
            T.check(f"{name} owner --logical {logical}: every extent data backref's inode",
                    want <= got, (sorted(want - got), sorted(got)))
    for devid, phys, s, o, fo in state["physical"][:OWNERS_PER_IMAGE // 2]:
        rc, recs, err = cli_jsonl(["owner", "--json", "--devid", str(devid), "--physical",
                                   str(phys)] + opts + devs)
        hit = [r for r in recs if r["kind"] == "file" and (r["subvol"], r["objectid"]) == (s, o)]
        T.check(f"{name} owner --devid {devid} --physical {phys}: back to {s}:{o} offset {fo}",
                rc == 0 and hit and hit[0]["file_offset"] == fo and
                hit[0]["physical"] == phys, (rc, recs[:2], err[-200:]))
    for dev, off, s, o, fo in state["image_offsets"][:OWNERS_PER_IMAGE // 2]:
        if len(devs) != 1:
            break
        rc, recs, err = cli_jsonl(["owner", "--json", "--image-offset", str(off)] + opts + devs)
        if not linear:
            T.check(f"{name} owner --image-offset {off}: refused (LVM), exit 2, said",
                    rc == 2 and "ask by device" in err, (rc, err[-200:]))
            continue
        hit = [r for r in recs if r["kind"] == "file" and (r["subvol"], r["objectid"]) == (s, o)]
        T.check(f"{name} owner --image-offset {off}: back to {s}:{o} offset {fo}",
                rc == 0 and hit and hit[0]["file_offset"] == fo, (rc, recs[:2], err[-200:]))


def check_image(name, devs, opts=(), progs_ok=True, linear=True):
    opts = list(opts)
    files, all_files = regular_files(devs, opts)
    T.check(f"{name}: regular files found", files, "none")
    items = csums = refs = None
    if progs_ok:
        subvols = sorted({f["subvol"] for f in files})
        items = {s: dump_extent_items(devs[0], s) for s in subvols}
        if any(v is None for v in items.values()):
            print(f"skip {name} dump-tree comparisons: dump-tree cannot read {devs[0]}")
            items = None
        csums = dump_csum_ranges(devs[0])
        refs = dump_backrefs(devs[0])
    rc, subs, _ = cli_jsonl(["subvols", "--json"] + opts + devs)
    state = {"logicals": [], "image_offsets": [], "extents": {}, "physical": [],
             "subvols": {v["id"] for v in subs},
             "paths": {}}
    for f in all_files:  # every name of a hard-linked inode
        state["paths"].setdefault((f["subvol"], f["ino"]), set()).add(f["path"])
    for f in files:
        per_file(name, devs, opts, f, items, csums, state)
    if progs_ok:
        check_copies(name, devs, state)
    check_owners(name, devs, opts, refs, state, linear)
    T.check(f"{name}: image offsets checked", state["image_offsets"], "no uncompressed data")
    return state


# ------------------------------------------------------------ logical-resolve

def check_logical_resolve(name, imgs, state):
    why = imgtest.skip_reason()
    if why:
        print(f"skip {name} logical-resolve: {why}")
        return
    mnt = tempfile.mkdtemp(prefix="test_extents.mnt.")
    loops = []
    try:
        for img in imgs:
            p = subprocess.run(["losetup", "--find", "--show", "--read-only", img],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            if p.returncode != 0:
                print(f"skip {name} logical-resolve: losetup: {p.stderr.decode().strip()}")
                return
            loops.append(p.stdout.decode().strip())
        if len(loops) > 1:  # the kernel finds the other devices by a scan
            subprocess.run(["btrfs", "device", "scan"] + loops, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
        p = subprocess.run(["mount", "-o", "ro,subvolid=5", loops[0], mnt],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if p.returncode != 0:
            print(f"skip {name} logical-resolve: mount: {p.stderr.decode().strip()}")
            return
        try:
            for bytenr, (s, o, logical) in list(state["extents"].items())[:OWNERS_PER_IMAGE]:
                # -P: inode, offset, root (paths need every subvolume mounted)
                rc, out = progs(["btrfs", "inspect-internal", "logical-resolve", "-P",
                                 str(logical), mnt])
                theirs = {tuple(int(x) for x in m.groups()) for m in
                          re.finditer(r"inode (\d+) offset (\d+) root (\d+)", out)}
                rc2, recs, _ = cli_jsonl(["owner", "--json", "--logical", str(logical)] + imgs)
                mine = {(r["objectid"], r["file_offset"], r["subvol"]) for r in recs
                        if r["kind"] == "file"}
                T.check(f"{name} logical {logical}: owner's inodes, offsets and roots are"
                        " logical-resolve's", rc == 0 and rc2 == 0 and mine == theirs,
                        (sorted(mine), sorted(theirs)))
        finally:
            subprocess.run(["umount", mnt], timeout=60)
    finally:
        for loop in loops:
            subprocess.run(["losetup", "-d", loop], timeout=30)
        os.rmdir(mnt)


# ------------------------------------------------------------ recovered versions

def check_recovered(work):
    """extents --deleted ID: an intact version's records cover its size and
    the image's bytes at their offsets are the version's (cat --deleted);
    owner --deleted --logical finds the version again."""
    img = imgtest.private_copy(os.path.join(TESTDATA, "forensic", "single.img.zst"), work)
    rc, recs, err = cli_jsonl(["deleted", "--json", img])
    intact = [r for r in recs if r.get("status") == "intact" and not r.get("compressed")
              and (r["mode"] & 0o170000) == 0o100000 and r["size"] > 0][:8]
    T.check("recovered: intact versions found", intact, (rc, err[-200:]))
    rc, out, err = cli(["extents", "--deleted", "5-1-1-00000000", img])
    T.check("recovered: extents --deleted with an unknown id: exit 2, nothing on stdout, "
            "said without internal module names",
            rc == 2 and out == b"" and b"no recovered version has id 5-1-1-00000000" in err
            and b"forensic:" not in err, (rc, out[:100], err[-200:]))
    rc, out, err = cli(["owner", "--image-offset", str(1 << 50), img])
    T.check("owner --image-offset past the filesystem: exit 2, nothing on stdout, said once "
            "without internal module names",
            rc == 2 and out == b"" and b"is outside the filesystem" in err
            and b"owners:" not in err, (rc, out[:100], err[-200:]))
    checked = 0
    for v in intact:
        rc, ext, err = cli_jsonl(["extents", "--json", "--deleted", v["id"], img])
        name = f"recovered {v['id']} {v['path']}"
        if rc != 0:
            T.check(f"{name}: extents --deleted exit 0", False, err[-300:])
            continue
        check_cover(name, v["size"], ext)
        rc, data, _ = cli(["cat", "--deleted", v["id"], img])
        for r in ext:
            if r["type"] != "regular" or not r["copies"] or r["copies"][0]["image_offset"] is None:
                continue
            n = min(r["length"], 65536)
            got = read_at(img, r["copies"][0]["image_offset"], n)
            T.check(f"{name} @{r['file_offset']}: the image's bytes are the version's",
                    got == data[r["file_offset"]:r["file_offset"] + n], f"{n} bytes")
            rc, own, err = cli_jsonl(["owner", "--json", "--deleted", "--logical",
                                      str(r["logical"]), img])
            hit = [o for o in own if o["kind"] == "recovered" and o["version_id"] == v["id"]]
            T.check(f"{name} @{r['file_offset']}: owner --deleted names the version",
                    rc == 0 and hit and hit[0]["file_offset"] == r["file_offset"] and
                    hit[0]["compression"] == r["compression"] and
                    hit[0].get("generation") == v["generation"],
                    (rc, own[-3:], err[-200:]))
            checked += 1
            break
    T.check("recovered: versions' bytes checked at their image offsets", checked, "none")


# ------------------------------------------------------------ hostile input

def find_item(img, ino_subvol, ino):
    """(leaf bytenr, item data offset in the leaf) of the first regular
    EXTENT_DATA item of @ino, from dump-tree's leaf headers."""
    rc, out = progs(["btrfs", "inspect-internal", "dump-tree", "-t", str(ino_subvol), img])
    leaf = None
    for line in out.splitlines():
        m = re.match(r"leaf (\d+) items", line)
        if m:
            leaf = int(m[1])
        m = re.search(r"key \((\d+) EXTENT_DATA \d+\) itemoff (\d+) itemsize 53", line)
        if m and int(m[1]) == ino:
            return leaf, int(m[2])
    return None, None


def check_hostile(work):
    """A file extent pointing outside every chunk: listed with no copy, the
    damage said, exit 1 (not a crash, not silence)."""
    img = imgtest.private_copy(os.path.join(TESTDATA, "files", "comp.img.zst"), work)
    rc, recs, _ = cli_jsonl(["walk", "--json", img])
    target = next(r for r in recs if r["path"] == "none/text-8193")
    leaf, itemoff = find_item(img, target["subvol"], target["ino"])
    T.check("hostile: the item found", leaf is not None, "no leaf")
    if leaf is None:
        return
    # the leaf's copies (DUP metadata: two), where btrfs-map-logical puts them
    where = map_logical(img, leaf, 16384) or set()
    T.check("hostile: the leaf's copies mapped", where, "btrfs-map-logical failed")
    with open(img, "r+b") as f:
        for _, phys in sorted(where):
            f.seek(phys)
            blk = bytearray(f.read(16384))
            if int.from_bytes(blk[48:56], "little") != leaf:
                T.check(f"hostile: leaf {leaf} at physical {phys}", False, "header bytenr differs")
                return
            at = 101 + itemoff + 21  # header, then the item's disk_bytenr
            blk[at:at + 8] = (1 << 50).to_bytes(8, "little")
            blk[0:4] = imgtest.crc32c(bytes(blk[32:])).to_bytes(4, "little")
            f.seek(phys)
            f.write(blk)
    rc, out, err = cli(["extents", "--json", "--path", "none/text-8193", img])
    recs = [json.loads(x) for x in out.decode().splitlines() if x.strip()]
    reg = [r for r in recs if r["type"] == "regular"]
    T.check("hostile: the moved extent listed at its logical, with no copy",
            reg and reg[0]["logical"] == 1 << 50 and reg[0]["copies"] == [], recs)
    T.check("hostile: exit 1 and the damage said", rc == 1 and b"in no chunk" in err,
            (rc, err[-300:]))
    rc, out, err = cli(["owner", "--logical", str(1 << 50), img])
    T.check("hostile: owner of an address in no chunk: unmapped", rc == 0 and b"unmapped" in out,
            (rc, out[-200:], err[-200:]))


def check_hostile_backref(work):
    """An extent item whose first inline back reference has an unknown type
    (99; leaf checksum recomputed): owner fails saying which extent, which
    byte and what was expected (exit 2), never reads past the item."""
    img = imgtest.private_copy(os.path.join(TESTDATA, "files", "comp.img.zst"), work)
    rc, recs, _ = cli_jsonl(["extents", "--json", "--path", "none/text-8193", img])
    bytenr = recs[0]["disk_bytenr"]
    rc, out = progs(["btrfs", "inspect-internal", "dump-tree", "-t", "extent", img])
    leaf = itemoff = None
    for line in out.splitlines():
        m = re.match(r"leaf (\d+) items", line)
        if m:
            cur = int(m[1])
        m = re.search(r"key \((\d+) EXTENT_ITEM \d+\) itemoff (\d+) itemsize", line)
        if m and int(m[1]) == bytenr:
            leaf, itemoff = cur, int(m[2])
    T.check("hostile backref: the extent item found", leaf is not None, bytenr)
    if leaf is None:
        return
    where = map_logical(img, leaf, 16384) or set()
    with open(img, "r+b") as f:
        for _, phys in sorted(where):
            f.seek(phys)
            blk = bytearray(f.read(16384))
            blk[101 + itemoff + 24] = 99  # the first inline ref's type
            blk[0:4] = imgtest.crc32c(bytes(blk[32:])).to_bytes(4, "little")
            f.seek(phys)
            f.write(blk)
    rc, out, err = cli(["owner", "--logical", str(bytenr), img])
    T.check("hostile backref: owner exit 2 naming the extent and the ref type",
            rc == 2 and f"extent {bytenr}: inline ref of type 99".encode() in err,
            (rc, err[-300:]))
    rc, out, err = cli(["extents", "--path", "none/text-8193", img])
    T.check("hostile backref: the forward map does not need it (exit 0)", rc == 0, err[-200:])


# ------------------------------------------------------------ main

def main():
    for tool in ("btrfs", "btrfs-map-logical", "zstd"):
        if not shutil.which(tool):
            print(f"skip: {tool} not found")
            return imgtest.SKIP
    work = tempfile.mkdtemp(prefix="test_extents.")
    try:
        files = os.path.join(TESTDATA, "files")
        comp = imgtest.private_copy(os.path.join(files, "comp.img.zst"), work)
        state = check_image("comp", [comp])
        check_logical_resolve("comp", [comp], state)
        images = os.path.join(TESTDATA, "images")
        dup = imgtest.private_copy(os.path.join(images, "dup", "dev1.img.zst"), work)
        check_image("dup", [dup])
        r1 = [imgtest.private_copy(os.path.join(images, "raid1", f"dev{i}.img.zst"), work)
              for i in (1, 2)]
        state = check_image("raid1", r1)
        check_logical_resolve("raid1", r1, state)  # snapshots share extents there
        for profile, n in (("raid5", 3), ("raid10", 4)):
            devs = [imgtest.private_copy(os.path.join(images, profile, f"dev{i}.img.zst"), work)
                    for i in range(1, n + 1)]
            check_image(profile, devs, progs_ok=False)  # progs needs every device found
        gpt = imgtest.private_copy(os.path.join(images, "gpt1", "disk.img.zst"), work)
        check_image("gpt1", [gpt], progs_ok=False)
        lvm = imgtest.private_copy(os.path.join(TESTDATA, "volume", "gpt-lvm.img.zst"), work)
        check_image("gpt-lvm", [lvm], progs_ok=False, linear=False)
        check_recovered(work)
        check_hostile(work)
        check_hostile_backref(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return T.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
