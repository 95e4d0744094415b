#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""gen_progs2json.py: the oracle side of testdata/images/. It turns what
btrfs-progs and the kernel said about an image (recorded by gen-images.sh)
into the JSON that `btrfsimg super --json` / `btrfsimg subvols --json` must
print. It never looks at btrfsimg.

    gen_progs2json.py ioctl MOUNTPOINT REL...   # kernel BTRFS_IOC_GET_SUBVOL_INFO
                                                # of each subvolume, JSON Lines
    gen_progs2json.py convert IMAGEDIR          # raw outputs -> expected-*.json

Per filesystem TAG of the manifest ("" or p1, p2 for partitions; files of a
tagged one start with "TAG."), convert reads
    <dev>.dump-super.txt   dump-super -fa of each device (all copies)
    dump-tree-root.txt     dump-tree -t root (root items, backrefs, orphans)
    subvol-list.txt        subvolume list -a -u -q -R -c -g -p
    subvol-list-d.txt      subvolume list -d (deleted, not yet cleaned)
    subvol-list-r.txt      subvolume list -r (readonly)
    subvol-show.txt        subvolume show of the top level and each subvolume
    subvol-info.jsonl      the ioctl output above
    sysfs.txt              /sys/fs/btrfs/<fsid>/ values
and writes
    expected-super.json    the super object for the manifest's device order
    expected-super.copyN.json  the same for a valid but stale copy N (what
                           --super-mirror N shows), where there is one
    expected-mirrors.json  {device file: mirrors list} (the CLI lists the
                           copies of the first device it is given)
    expected-subvols.jsonl one object per subvolume, sorted by id
Every field is taken from one source and checked against at least one other;
any disagreement stops the conversion (the image is then not a usable oracle).
"""
import fcntl
import json
import os
import re
import struct
import sys

CSUM_NAMES = {0: "crc32c", 1: "xxhash64", 2: "sha256", 3: "blake2b"}
SB_OFFSETS = (65536, 64 << 20, 256 << 30)
SB_SIZE = 4096
ROOT_SUBVOL_RDONLY = 1 << 0
FIRST_FREE_OBJECTID = 256
LAST_FREE_OBJECTID = (1 << 64) - 256
FS_TREE = 5

# struct btrfs_ioctl_get_subvol_info_args (linux/btrfs.h), 504 bytes
IOC_GET_SUBVOL_INFO = 0x81F8943C
SUBVOL_INFO = struct.Struct("<Q256sQQQQ16s16s16sQQQQ" + "QI4x" * 4 + "64x")


class OracleError(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise OracleError(msg)


def uuid_str(b):
    h = b.hex()
    s = "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])
    return None if s == "00000000-0000-0000-0000-000000000000" else s


def ioctl_cmd(mnt, rels):
    for rel in rels:
        fd = os.open(os.path.join(mnt, rel), os.O_RDONLY | os.O_DIRECTORY)
        try:
            buf = bytearray(SUBVOL_INFO.size)
            fcntl.ioctl(fd, IOC_GET_SUBVOL_INFO, buf)
        finally:
            os.close(fd)
        v = SUBVOL_INFO.unpack(bytes(buf))
        rec = {"path": rel, "treeid": v[0],
               "name": v[1].split(b"\0", 1)[0].decode("utf-8", "surrogateescape"),
               "parent_id": v[2], "dirid": v[3], "generation": v[4], "flags": v[5],
               "uuid": uuid_str(v[6]), "parent_uuid": uuid_str(v[7]),
               "received_uuid": uuid_str(v[8]), "ctransid": v[9], "otransid": v[10],
               "stransid": v[11], "rtransid": v[12],
               "ctime": [v[13], v[14]], "otime": [v[15], v[16]],
               "stime": [v[17], v[18]], "rtime": [v[19], v[20]]}
        print(json.dumps(rec, ensure_ascii=True))


# ------------------------------------------------------------ dump-super

def parse_dump_super(text):
    """-> list of copies: dict key -> raw value string (first line only)."""
    copies, cur = [], None
    for line in text.splitlines():
        m = re.match(r"^superblock: bytenr=(\d+), device=(.*)$", line)
        if m:
            cur = {"@bytenr": int(m.group(1))}
            copies.append(cur)
            continue
        if cur is None or not line or line.startswith("\t") or line.startswith("-"):
            continue
        m = re.match(r"^([^\t]+)\t+(.*)$", line)
        if m and m.group(1) not in cur:
            cur[m.group(1)] = m.group(2)
        elif re.match(r"^[a-z_]+$", line) and line not in cur:
            cur[line] = ""  # a key with an empty value (label)
    return copies


def sb_fields(c):
    """The contract fields of one superblock copy."""
    ct = int(c["csum_type"].split()[0])
    check(ct in CSUM_NAMES, "unknown csum_type %r" % c["csum_type"])
    return {
        "fsid": c["fsid"].split()[0],
        "metadata_uuid": c["metadata_uuid"].split()[0],
        "label": c.get("label", ""),
        "generation": int(c["generation"]),
        "root": int(c["root"]),
        "chunk_root": int(c["chunk_root"]),
        "log_root": int(c["log_root"]),
        "csum_type": CSUM_NAMES[ct],
        "nodesize": int(c["nodesize"]),
        "sectorsize": int(c["sectorsize"]),
        "num_devices": int(c["num_devices"]),
        "total_bytes": int(c["total_bytes"]),
        "bytes_used": int(c["bytes_used"]),
        "incompat_flags": int(c["incompat_flags"].split()[0], 16),
        "compat_ro_flags": int(c["compat_ro_flags"].split()[0], 16),
    }


def copy_valid(c, fsid):
    """A copy is valid when it is a sound superblock of this filesystem:
    magic, checksum, bytenr where it lies, and the primary's fsid."""
    return (c.get("magic", "").endswith("[match]") and c.get("csum", "").endswith("[match]")
            and int(c.get("bytenr", "-1")) == c["@bytenr"]
            and c.get("fsid", "").split()[:1] == [fsid])


def mirrors_of(copies, devsize, where):
    have = {c["@bytenr"]: c for c in copies}
    fsid = copies[0]["fsid"].split()[0]
    out = []
    for i, off in enumerate(SB_OFFSETS):
        fits = off + SB_SIZE <= devsize
        check(fits == (off in have),
              "%s: copy %d at %d: dump-super %s it, device size %d says %s" %
              (where, i, off, "shows" if off in have else "omits", devsize,
               "it fits" if fits else "it does not fit"))
        if fits:
            c = have[off]
            # an invalid copy still reports the generation stored in it
            out.append({"index": i, "bytenr": off, "valid": copy_valid(c, fsid),
                        "generation": int(c["generation"])})
    return out


def parse_sysfs(text):
    return dict(l.split(": ", 1) if ": " in l else (l.rstrip(":"), "")
                for l in text.splitlines() if l)


def super_expect(d, pre, fsd, man):
    devs = fsd["devices"]
    per_dev, mirrors, other = {}, {}, {}
    for dev in devs:
        where = "%s%s" % (pre, dev)
        copies = parse_dump_super(read(d, pre + dev[:-4] + ".dump-super.txt"))
        check(copies, "%s: no superblock in dump-super" % where)
        size = fsd.get("size", man["files"][dev])
        mirrors[dev] = mirrors_of(copies, size, where)
        prim = sb_fields(copies[0])
        check(copies[0]["@bytenr"] == SB_OFFSETS[0], "%s: first copy not primary" % where)
        check(copy_valid(copies[0], prim["fsid"]), "%s: primary copy invalid" % where)
        for c in copies[1:]:
            if not copy_valid(c, prim["fsid"]):
                continue
            f = sb_fields(c)
            if f["generation"] == prim["generation"]:
                check(f == prim, "%s: copy at %d differs from the primary" % (where, c["@bytenr"]))
            elif dev == devs[0]:
                # a stale copy (the device was shrunk below it): what
                # --super-mirror N must show is that copy's own fields
                other[SB_OFFSETS.index(c["@bytenr"])] = f
        per_dev[dev] = prim
    first = per_dev[devs[0]]
    for dev, f in per_dev.items():
        check(f == first, "%s%s: superblock differs from %s" % (pre, dev, devs[0]))
    check(first["num_devices"] == len(devs),
          "num_devices %d but %d devices" % (first["num_devices"], len(devs)))
    sysfs_cross(first, parse_sysfs(read(d, pre + "sysfs.txt")), man, pre)
    exp = dict(first)
    exp["mirrors"] = mirrors[devs[0]]
    copies = {}
    for i, f in other.items():
        copies[i] = dict(f)
        copies[i]["mirrors"] = mirrors[devs[0]]
    return exp, mirrors, copies


def sysfs_cross(f, s, man, pre):
    def same(key, have, want):
        check(have == want, "%ssysfs %s: kernel %r, dump-super %r" % (pre, key, have, want))
    same("fsid", s["fsid"], f["fsid"])
    same("label", s["label"], f["label"])
    same("nodesize", int(s["nodesize"]), f["nodesize"])
    same("sectorsize", int(s["sectorsize"]), f["sectorsize"])
    same("checksum", s["checksum"].split()[0], f["csum_type"])
    same("generation", int(s["generation"]), f["generation"])
    if "metadata_uuid" in s:
        same("metadata_uuid", s["metadata_uuid"], f["metadata_uuid"])
    same("devids", len(s["devids"].split()), f["num_devices"])
    same("metadata_uuid flag", "metadata_uuid" in s["features"].split(),
         bool(f["incompat_flags"] & (1 << 10)))
    prof = man.get("profile", {})
    for kind in ("data", "metadata", "system"):
        want = prof.get(kind) or prof.get("data+metadata")
        if want and ("profile." + kind) in s:
            same("profile." + kind, s["profile." + kind], want)


# ------------------------------------------------------------ subvolumes

LIST_RE = re.compile(r"^ID (\d+) gen (\d+) cgen (\d+) parent (\d+) top level (\d+) "
                     r"parent_uuid (\S+)\s+received_uuid (\S+)\s+uuid (\S+) path (.*)$")


def dash(v):
    return None if v == "-" else v


def parse_list(text):
    out = {}
    for line in text.splitlines():
        m = LIST_RE.match(line)
        check(m, "subvolume list: unparsed line %r" % line)
        path = m.group(9)
        if path.startswith("<FS_TREE>/"):
            path = path[len("<FS_TREE>/"):]
        i = int(m.group(1))
        out[i] = {"id": i, "gen": int(m.group(2)), "cgen": int(m.group(3)),
                  "parent": int(m.group(4)), "top": int(m.group(5)),
                  "parent_uuid": dash(m.group(6)), "received_uuid": dash(m.group(7)),
                  "uuid": dash(m.group(8)), "path": path}
    return out


def parse_list_ids(text):
    ids = {}
    for line in text.splitlines():
        m = re.match(r"^ID (\d+) gen (\d+) .*$", line)
        check(m, "subvolume list: unparsed line %r" % line)
        ids[int(m.group(1))] = int(m.group(2))
    return ids


def parse_show(text):
    out, cur = {}, None
    for line in text.splitlines():
        if line and not line.startswith("\t"):
            cur = {"@path": line}
            continue
        m = re.match(r"^\t([^:\t]+):\s*(.*)$", line)
        if m and cur is not None and m.group(1) != "Snapshot(s)":
            cur[m.group(1)] = m.group(2).strip()
            if m.group(1) == "Subvolume ID":
                out[int(m.group(2))] = cur
    return out


def parse_dump_tree_root(text):
    """-> (root items by id, backrefs {child: parent}, orphan ids)."""
    items, backref, orphans = {}, {}, set()
    cur = None
    for line in text.splitlines():
        m = re.match(r"^\titem \d+ key \((\S+) (\S+) (\S+)\)", line)
        if m:
            cur = None
            obj, typ, off = m.groups()
            if obj == "FS_TREE":
                obj = str(FS_TREE)
            if typ == "ROOT_ITEM" and obj.isdigit():
                cur = items[int(obj)] = {}
            elif typ == "ROOT_BACKREF" and obj.isdigit():
                backref[int(obj)] = int(off)
            elif obj == "ORPHAN" and typ == "ORPHAN_ITEM":
                orphans.add(int(off))
            continue
        if cur is None:
            continue
        for k, v in re.findall(r"\b(generation|flags|refs|uuid|parent_uuid|received_uuid|"
                               r"ctransid|otransid) (\S+)", line):
            cur.setdefault(k, v)
        m = re.match(r"^\t\totime (\d+)\.(\d+) ", line)
        if m:
            # printed "%llu.%u": the digits after the dot are the nanoseconds
            cur["otime"] = [int(m.group(1)), int(m.group(2))]
    for r in items.values():
        r["generation"] = int(r["generation"])
        r["flags"] = int(r["flags"].split("(")[0], 16)
        r["refs"] = int(r["refs"])
        r["otransid"] = int(r.get("otransid", 0))
        for k in ("uuid", "parent_uuid", "received_uuid"):
            r[k] = uuid_str(bytes.fromhex(r.get(k, "0" * 32).replace("-", "")))
    return items, backref, orphans


def is_fs_tree(i):
    return i == FS_TREE or FIRST_FREE_OBJECTID <= i <= LAST_FREE_OBJECTID


def subvols_expect(d, pre):
    lst = parse_list(read(d, pre + "subvol-list.txt"))
    deleted_list = parse_list_ids(read(d, pre + "subvol-list-d.txt"))
    ro_list = parse_list_ids(read(d, pre + "subvol-list-r.txt"))
    show = parse_show(read(d, pre + "subvol-show.txt"))
    info = {}
    for line in read(d, pre + "subvol-info.jsonl").splitlines():
        r = json.loads(line)
        info[r["treeid"]] = r
    roots, backref, orphans = parse_dump_tree_root(read(d, pre + "dump-tree-root.txt"))
    fs_roots = {i: r for i, r in roots.items() if is_fs_tree(i)}
    live = {i for i, r in fs_roots.items() if r["refs"] > 0}
    dead = {i for i, r in fs_roots.items() if r["refs"] == 0}

    check(set(lst) | {FS_TREE} == live,
          "live subvolumes: list %s, dump-tree %s" % (sorted(lst), sorted(live)))
    check(set(info) == live, "ioctl covered %s, live %s" % (sorted(info), sorted(live)))
    check(set(show) == live, "show covered %s, live %s" % (sorted(show), sorted(live)))
    check(set(deleted_list) == dead,
          "deleted: list -d %s, dump-tree refs 0 %s" % (sorted(deleted_list), sorted(dead)))
    check(dead <= orphans, "dead roots %s without ORPHAN items %s" % (sorted(dead), sorted(orphans)))

    out = []
    for i in sorted(live):
        out.append(live_subvol(i, lst.get(i), show[i], info[i], fs_roots[i], backref,
                               i in ro_list))
    for i in sorted(dead):
        r = fs_roots[i]
        check(deleted_list[i] == r["generation"], "deleted %d: generation" % i)
        out.append({"id": i, "parent_id": None, "path": None, "uuid": r["uuid"],
                    "parent_uuid": r["parent_uuid"], "received_uuid": r["received_uuid"],
                    "generation": r["generation"], "cgen": r["otransid"],
                    "otime": r["otime"], "readonly": bool(r["flags"] & ROOT_SUBVOL_RDONLY),
                    "deleted": True})
    return sorted(out, key=lambda s: s["id"])


def live_subvol(i, l, sh, io, rt, backref, in_ro_list):
    def agree(field, *vals):
        check(all(v == vals[0] for v in vals),
              "subvolume %d %s: sources disagree %r" % (i, field, vals))
        return vals[0]

    ro = bool(io["flags"] & ROOT_SUBVOL_RDONLY)
    agree("readonly", ro, bool(rt["flags"] & ROOT_SUBVOL_RDONLY),
          sh["Flags"] == "readonly", in_ro_list)
    for k, sk in (("uuid", "UUID"), ("parent_uuid", "Parent UUID"),
                  ("received_uuid", "Received UUID")):
        agree(k, io[k], rt[k], dash(sh[sk]), *([l[k]] if l else []))
    agree("generation", io["generation"], rt["generation"], int(sh["Generation"]),
          *([l["gen"]] if l else []))
    agree("cgen", io["otransid"], rt["otransid"], int(sh["Gen at creation"]),
          *([l["cgen"]] if l else []))
    agree("otime", io["otime"], rt["otime"])
    if i == FS_TREE:
        agree("parent", io["parent_id"], int(sh["Parent ID"]), 0)
        parent, path = None, ""
    else:
        parent = agree("parent", l["parent"], l["top"], io["parent_id"], int(sh["Parent ID"]),
                       backref.get(i))
        path = l["path"]
        agree("name", io["name"], path.rsplit("/", 1)[-1])
    return {"id": i, "parent_id": parent, "path": path, "uuid": io["uuid"],
            "parent_uuid": io["parent_uuid"], "received_uuid": io["received_uuid"],
            "generation": io["generation"], "cgen": io["otransid"], "otime": io["otime"],
            "readonly": ro, "deleted": False}


# ------------------------------------------------------------ driver

def read(d, name):
    with open(os.path.join(d, name), encoding="utf-8", errors="surrogateescape") as f:
        return f.read()


def write_json(d, name, obj, lines=False):
    with open(os.path.join(d, name), "w") as f:
        if lines:
            for o in obj:
                f.write(json.dumps(o, ensure_ascii=True) + "\n")
        else:
            json.dump(obj, f, indent=1, ensure_ascii=True)
            f.write("\n")


def convert(d):
    man = json.loads(read(d, "manifest.json"))
    for tag, fsd in man["filesystems"].items():
        pre = tag + "." if tag else ""
        exp, mirrors, copies = super_expect(d, pre, fsd, man)
        subs = subvols_expect(d, pre)
        write_json(d, "expected-super%s.json" % ("." + tag if tag else ""), exp)
        for i, c in copies.items():
            write_json(d, "expected-super%s.copy%d.json" % ("." + tag if tag else "", i), c)
        write_json(d, "expected-mirrors%s.json" % ("." + tag if tag else ""), mirrors)
        write_json(d, "expected-subvols%s.jsonl" % ("." + tag if tag else ""), subs, lines=True)
        print("%s%s: %d subvolumes (%d deleted), %d devices, generation %d" %
              (os.path.basename(d.rstrip("/")), " " + tag if tag else "", len(subs),
               sum(s["deleted"] for s in subs), len(fsd["devices"]), exp["generation"]))


def main(argv):
    if len(argv) >= 3 and argv[1] == "ioctl":
        ioctl_cmd(argv[2], argv[3:])
        return 0
    if len(argv) >= 3 and argv[1] == "convert":
        try:
            for d in argv[2:]:
                convert(d)
        except OracleError as e:
            print("gen_progs2json: %s: %s" % (d, e), file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
