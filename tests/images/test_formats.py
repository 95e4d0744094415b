#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
r"""test_formats.py: what btrfsimg writes, read by the tools users read it with.

    test_formats.py BTRFSIMG TESTDATA

Every expected value comes from the kernel's recorded view of a committed
image (testdata/files/*.view.jsonl) or from btrfs-progs' recorded output,
never from btrfsimg:
  * bodyfile: The Sleuth Kit's real `mactime -b BODY -d -y` (Debian package
    sleuthkit) keeps every path of names, special and subvols with the
    kernel's atime, mtime, ctime and btime (mactime leaves out times before
    1970), the inode as SUBVOL-OBJECTID, the kernel's size, uid, gid and
    permission bits, and the name's exact bytes once its escapes are undone;
  * JSON through jq (Debian 12's jq 1.6 rounds numbers past 2^53 - 1): the
    JSON of super, subvols, walk, inodes, collisions and partitions holds
    no such number and survives `jq -c .` exactly; jq counts as many
    shared nfsd fileids in `inodes --json` as exact arithmetic (and, with
    `--json-u64 number`, jq 1.6 counts false ones);
  * subvols (text) of every committed image directory (testdata/images,
    RAID sets and partitions included) and of files/subvols and files/snaps:
    the ids, generations, parents and paths of `btrfs subvolume list`;
    [snapshot] exactly on `list -s`'s, "of SOURCE" the subvolume whose uuid
    is the snapshot's parent uuid in `list -q` (the top level's uuid from
    the kernel's GET_SUBVOL_INFO or `subvolume show`); [readonly] on
    `list -r`'s, [deleted] on `list -d`'s, [default] on `get-default`'s;
    otime to the nanosecond as GET_SUBVOL_INFO gave it (files: to the
    second, as `TZ=UTC list -s` prints it); -s, -r, -d and -s -r list
    exactly the subvolumes so marked;
  * walk and inodes (text): a header line, one line per path (per inode)
    however odd the name (newline, control and non-UTF-8 bytes), with the
    kernel's ids, mode, nlink, uid, gid, size and mtime (ISO 8601, UTC,
    nanoseconds, computed here from the kernel's [sec, nsec]), the exact
    path and symlink target once the escapes (\\, \n, \t, \r, \xNN) are
    undone;
Prints one line per check, then "N passed, M failed".
"""
import collections
import csv
import glob
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

CLI, TESTDATA = sys.argv[1], sys.argv[2]
FILES = os.path.join(TESTDATA, "files")
tally = imgtest.Tally()
check = tally.check


def run(args, **kw):
    return imgtest.run_cli(CLI, args, **kw)


def fsencode(p):
    """A path of a recorded view (str, surrogateescape) as its bytes."""
    return p.encode("utf-8", "surrogateescape")


unescape = imgtest.text_unescape


def iso_seconds(sec):
    """mactime -y's date of @sec; 0, TSK's "no time", it prints as zeros."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(sec)) if sec else "0000-00-00T00:00:00Z"


def is_stub(r):
    return r["subvol"] is None and r["ino"] == 2 and stat.S_ISDIR(r["mode"])


def parent_subvol(view, r):
    """The subvolume of @r's directory (a stub's inode field names it)."""
    parent = r["path"].rsplit("/", 1)[0] if "/" in r["path"] else ""
    return next(p["subvol"] for p in view if p["path"] == parent)


# ------------------------------------------------------------ bodyfile

def mactime_rows(body, work):
    """mactime's comma-delimited timeline (ISO 8601 dates, UTC) of @body."""
    path = os.path.join(work, "body.txt")
    with open(path, "wb") as f:
        f.write(body)
    p = subprocess.run(["mactime", "-b", path, "-d", "-y"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    rows = list(csv.reader(io.StringIO(p.stdout.decode("utf-8", "surrogateescape"), newline="")))
    return p.returncode, rows[1:] if rows and rows[0][0] == "Date" else rows, p.stderr


def kernel_timeline(view):
    """{(inode field, name bytes): {letter: {date}}} and {key: record} of
    the kernel's view, as a body file of it would give mactime."""
    want, recs = collections.defaultdict(dict), {}
    for r in view:
        stub = is_stub(r)
        key = (f"{parent_subvol(view, r) if stub else r['subvol']}-{r['ino']}",
               b"/" + fsencode(r["path"]))
        recs[key] = r
        for letter, field in (("a", "atime"), ("m", "mtime"), ("c", "ctime"), ("b", "btime")):
            if r[field] is None or r[field][0] < 0 or (stub and field != "atime"):
                continue  # before 1970: mactime leaves it out; a stub's: lookup time
            want[key].setdefault(letter, set()).add(iso_seconds(r[field][0]))
    return want, recs


def test_bodyfile(name, img, view, work):
    rc, body, err = run(["bodyfile", img])
    check(f"{name}: bodyfile exit 0", rc == 0, (rc, err[-300:]))
    lines = body.splitlines()
    check(f"{name}: bodyfile, one line per path", len(lines) == len(view), (len(lines), len(view)))
    rc, rows, err = mactime_rows(body, work)
    check(f"{name}: mactime reads the body file", rc == 0 and rows, (rc, err[-300:]))
    want, recs = kernel_timeline(view)
    got, meta, bad = collections.defaultdict(dict), {}, []
    for row in rows:
        if len(row) != 8:
            bad.append(row)
            continue
        date, size, macb, mode, uid, gid, inode, fname = row
        raw = unescape(fsencode(fname))
        if raw is None:
            bad.append(row)
            continue
        key = (inode, raw)
        meta[key] = (int(size), int(uid), int(gid), mode[-9:])
        for letter in macb.replace(".", ""):
            got[key].setdefault(letter, set()).add(date)
    check(f"{name}: every mactime line well-formed, escapes undone", not bad, bad[:3])
    missing = sorted(set(recs) - set(got))
    extra = sorted(set(got) - set(recs))
    check(f"{name}: mactime keeps every one of the kernel's {len(recs)} paths, no other",
          not missing and not extra, (missing[:3], extra[:3]))
    wrong = []
    for key, times in want.items():
        mine = got.get(key, {})
        if is_stub(recs[key]):
            mine = {k: v for k, v in mine.items() if k in times}
        if mine != times:
            wrong.append((key, mine, times))
    check(f"{name}: mactime's a/m/c/b times are the kernel's", not wrong, wrong[:3])
    wrong = []
    for key, r in recs.items():
        size = 0 if is_stub(r) else r["size"]
        expect = (size, r["uid"], r["gid"], stat.filemode(r["mode"])[1:])
        if key in meta and meta[key] != expect:
            wrong.append((key, meta[key], expect))
    check(f"{name}: mactime's size, uid, gid and permissions are the kernel's", not wrong,
          wrong[:3])


# ------------------------------------------------------------ JSON through jq

def jq(args, data):
    p = subprocess.run(["jq"] + args, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stdout, p.stderr


def big_numbers(v):
    """Numbers past 2^53 - 1 anywhere in the JSON value @v."""
    if isinstance(v, dict):
        return [b for x in v.values() for b in big_numbers(x)]
    if isinstance(v, list):
        return [b for x in v for b in big_numbers(x)]
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > imgtest.SAFE_MAX:
        return [v]
    return []


def loads(out):
    return [json.loads(line) for line in out.splitlines()]


def as_jq_sees(v):
    r"""@v with jq's own change to strings: a lone surrogate (a byte that is
    not UTF-8, written \udcXX) becomes U+FFFD. Numbers stay as they are."""
    if isinstance(v, dict):
        return {k: as_jq_sees(x) for k, x in v.items()}
    if isinstance(v, list):
        return [as_jq_sees(x) for x in v]
    if isinstance(v, str):
        return re.sub("[\udc80-\udcff]", "\ufffd", v)
    return v


def test_jq_round_trip(name, args):
    """@args' JSON Lines survive `jq -c .` exactly, and hold no number a
    double would round."""
    rc, out, err = run(args)
    check(f"{name}: exit 0", rc == 0 and out, (rc, err[-300:]))
    mine = loads(out)
    big = [b for r in mine for b in big_numbers(r)]
    check(f"{name}: no number past 2^53 - 1 (such integers are strings)", not big, big[:3])
    rc, through, err = jq(["-c", "."], out)
    seen = [as_jq_sees(r) for r in mine]
    check(f"{name}: every value survives a jq round trip exactly",
          rc == 0 and loads(through) == seen,
          (rc, err[-300:], next(((str(a)[:300], str(b)[:300])
                                 for a, b in zip(seen, loads(through)) if a != b), None)))
    return mine


SHARED = ["-s", "[group_by(.nfs_fileid)[] | select(length > 1)] | length"]


def test_jq_count(img):
    """The user's case: counting shared nfsd fileids with jq."""
    rc, out, err = run(["inodes", "--json", img])
    exact = collections.Counter(int(r["nfs_fileid"]) for r in loads(out))  # Python: exact
    want = sum(1 for n in exact.values() if n > 1)
    big = sum(1 for v in exact if v > imgtest.SAFE_MAX)
    rc, got, err = jq(SHARED, out)
    check(f"subvols: jq counts {want} shared nfsd fileids among {len(exact)} "
          f"({big} past 2^53 - 1), as exact arithmetic does",
          rc == 0 and big and got.strip() == str(want).encode(), (rc, got[:100], err[-300:]))
    rc, out, err = run(["inodes", "--json", "--json-u64", "number", img])
    rc, got, err = jq(SHARED, out)
    version = subprocess.run(["jq", "--version"], stdout=subprocess.PIPE).stdout.strip()
    if version == b"jq-1.6":
        check("subvols: with --json-u64 number, jq 1.6 rounds and counts false collisions",
              rc == 0 and int(got) > want, (rc, got[:100], want))
    loads(out)  # valid JSON either way


def test_json(imgs, gpt):
    img = imgs["subvols"]
    for args in (["super", "--json", img], ["subvols", "--json", img],
                 ["walk", "--json", "--hash", "--inumbits", "64", img],
                 ["inodes", "--json", "--inumbits", "64", img], ["collisions", "--json", img],
                 ["partitions", "--json", gpt]):
        test_jq_round_trip(" ".join(a for a in args[:-1]), args)
    mine = loads(run(["inodes", "--json", "--inumbits", "64", img])[1])
    exact = loads(run(["inodes", "--json", "--inumbits", "64", "--json-u64", "number", img])[1])
    same = all({k: imgtest.json_int(v) if k in ("overlay", "ino", "uniquifier", "nfs_fileid",
                                                        "nfs4_d_fileid", "nfs_fileid_inumbits",
                                                        "nfs4_d_fileid_inumbits")
                else v for k, v in a.items()} == b for a, b in zip(mine, exact))
    check("inodes --json-u64 string and number: the same values, strings past 2^53 - 1",
          same and len(mine) == len(exact) and big_numbers(exact), len(mine))
    test_jq_count(img)


# ------------------------------------------------------------ walk and inodes text

def iso_ns(t):
    """A [sec, nsec] of the kernel's view as ISO 8601, UTC, with nanoseconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t[0])) + ".%09dZ" % t[1]


def path_and_target(rest, r):
    """(path, target) of a text line's last column against record @r: the
    path and, for a symlink, the target, escapes undone; "." is the start."""
    if stat.S_ISLNK(r["mode"]):
        parts = rest.split(b" -> ")
        for k in range(1, len(parts)):
            path, target = unescape(b" -> ".join(parts[:k])), unescape(b" -> ".join(parts[k:]))
            if path == fsencode(r["path"]):
                return path, target
        return unescape(rest), None
    return (b"" if rest == b"." else unescape(rest)), None


WALK_LINE = re.compile(rb"^ *(\d+):(\d+) +([0-7]{6}) +(\d+) +(\d+) +(\d+) +(\d+)  (\S+)  (.*)$")


def walk_line_problems(line, r):
    m = WALK_LINE.match(line)
    if not m:
        return ["not a walk line"]
    stub = is_stub(r)
    rest = m[9][:-len(b"  [stub]")] if stub and m[9].endswith(b"  [stub]") else m[9]
    path, target = path_and_target(rest, r)
    got = {"subvol": int(m[1]), "ino": int(m[2]), "mode": int(m[3], 8), "nlink": int(m[4]),
           "uid": int(m[5]), "gid": int(m[6]), "size": int(m[7]), "path": path,
           "stub": m[9].endswith(b"  [stub]")}
    want = {"subvol": 0 if stub else r["subvol"], "ino": r["ino"], "mode": r["mode"],
            "nlink": r["nlink"], "uid": r["uid"], "gid": r["gid"], "size": r["size"],
            "path": fsencode(r["path"]), "stub": stub}
    bad = [f"{k}: {got[k]!r}, kernel {want[k]!r}" for k in want if got[k] != want[k]]
    if not stub and m[8].decode() != iso_ns(r["mtime"]):
        bad.append(f"mtime {m[8].decode()}, kernel {iso_ns(r['mtime'])}")
    if stat.S_ISLNK(r["mode"]) and target != fsencode(r["target"]):
        bad.append(f"target {target!r}, kernel {r['target']!r}")
    return bad


def test_walk_text(name, img, view):
    rc, out, err = run(["walk", img])
    lines = out.split(b"\n")
    check(f"{name}: walk (text) exit 0, ends with a newline", rc == 0 and lines[-1] == b"",
          (rc, err[-300:]))
    head, lines = lines[0], lines[1:-1]
    check(f"{name}: walk's header names its columns",
          head.split() == [b"subvol:objectid", b"mode", b"nlink", b"uid", b"gid", b"size",
                           b"mtime", b"(UTC)", b"path"], head)
    check(f"{name}: walk, one line per path of the kernel's ({len(view)}), none broken",
          len(lines) == len(view) and not any(re.search(rb"[\x00-\x1f\x7f]", x) for x in lines),
          (len(lines), len(view)))
    bad = []
    for line, r in zip(lines, view):
        bad += [(r["path"], p) for p in walk_line_problems(line, r)]
    check(f"{name}: walk's lines: the kernel's ids, mode, nlink, owners, size, mtime, "
          "path and symlink target", not bad, bad[:4])


INODES_LINE = re.compile(rb"^ *(\d+) +(\d+)  (\S+)  ino +0x[0-9a-f]+  nfs +0x[0-9a-f]+  (.*)$")


def test_inodes_text(name, img, view):
    rc, out, err = run(["inodes", img])
    lines = out.split(b"\n")
    check(f"{name}: inodes (text) exit 0", rc == 0 and lines[-1] == b"", (rc, err[-300:]))
    head, lines = lines[0], lines[1:-1]
    check(f"{name}: inodes' header names its columns",
          head.split() == [b"subvol", b"objectid", b"mtime", b"(UTC)", b"inumbits=56", b"ino",
                           b"nfs", b"v3/v4", b"fileid", b"path"], head)
    kernel = collections.defaultdict(list)
    for r in view:
        if not is_stub(r):
            kernel[(r["subvol"], r["ino"])].append(r)
    seen, bad = set(), []
    for line in lines:
        m = INODES_LINE.match(line)
        if not m:
            bad.append(("not an inodes line", line[:100]))
            continue
        key = (int(m[1]), int(m[2]))
        seen.add(key)
        recs = kernel.get(key)
        if not recs:
            continue  # not reachable for the kernel (an orphan, nlink 0)
        if m[3].decode() != iso_ns(recs[0]["mtime"]):
            bad.append((key, m[3], iso_ns(recs[0]["mtime"])))
        found = [(r, path_and_target(m[4], r)) for r in recs]
        if not any(pt[0] == fsencode(r["path"]) for r, pt in found):
            bad.append((key, m[4][:100], [r["path"] for r in recs][:3]))
        elif stat.S_ISLNK(recs[0]["mode"]) and not any(
                pt[1] == fsencode(r["target"]) for r, pt in found):
            bad.append((key, "target", m[4][-60:], recs[0]["target"][-60:]))
    missing = sorted(set(kernel) - seen)
    check(f"{name}: inodes lists every inode the kernel reaches ({len(kernel)})", not missing,
          missing[:5])
    check(f"{name}: inodes' lines: the kernel's mtime, one of its paths, symlink target",
          not bad, bad[:4])


# ------------------------------------------------------------ subvols

LIST = re.compile(rb"^ID (\d+) gen (\d+) cgen (\d+) parent (\d+) top level \d+ "
                  rb"parent_uuid (\S+) +received_uuid \S+ +uuid (\S+) path (.*)$")


def progs_list(path):
    """`btrfs subvolume list -apcguqR`: {id: fields}; paths as bytes."""
    subs = {}
    with open(path, "rb") as f:
        for line in f.read().splitlines():
            m = LIST.match(line)
            if m:
                p = m[7][len(b"<FS_TREE>/"):] if m[7].startswith(b"<FS_TREE>/") else m[7]
                subs[int(m[1])] = {"gen": int(m[2]), "cgen": int(m[3]), "parent": int(m[4]),
                                   "puuid": m[5].decode(), "uuid": m[6].decode(), "path": p}
    return subs


def progs_ids(path):
    """The ids of a `btrfs subvolume list` (-s, -r, -d) or get-default."""
    with open(path, "rb") as f:
        return {int(m) for m in re.findall(rb"^ID (\d+)", f.read(), re.M)}


def progs_otimes(path):
    """{id: "YYYY-MM-DDTHH:MM:SS"} of `TZ=UTC btrfs subvolume list -s`."""
    with open(path, "rb") as f:
        return {int(m[1]): m[2].decode() + "T" + m[3].decode()
                for m in re.finditer(rb"^ID (\d+) .* otime (\S+) (\S+) path", f.read(), re.M)}


class Truth:
    """What btrfs-progs and the kernel recorded of one filesystem."""

    def __init__(self, listing, snaps, ro, default, deleted=None, info=None, top=None):
        self.subs = progs_list(listing)
        self.snaps, self.ro = progs_ids(snaps), progs_ids(ro)
        self.default = progs_ids(default).pop()
        self.deleted = progs_ids(deleted) if deleted else None
        self.snap_otime = progs_otimes(snaps)
        self.otime, self.top_uuid = {}, None
        if info:  # the kernel's BTRFS_IOC_GET_SUBVOL_INFO: otime to the ns
            for r in imgtest.load_jsonl(info):
                self.otime[r["treeid"]] = iso_ns(r["otime"])
                if r["treeid"] == 5:
                    self.top_uuid = r["uuid"]
        if top:  # `btrfs subvolume show` of the top level
            with open(top) as f:
                self.top_uuid = re.search(r"UUID:\s+(\S+)", f.read())[1]

    def source(self, i):
        """The "[snapshot...]" btrfs-progs' records call for."""
        puuid = self.subs[i]["puuid"]
        if puuid == "-":
            return b"snapshot"
        if puuid == self.top_uuid:
            return b"snapshot of <top level>"
        src = [s["path"] for s in self.subs.values() if s["uuid"] == puuid]
        return b"snapshot of " + (src[0] if src else puuid.encode() + b" (gone)")


SUBVOL = re.compile(rb"^ID (\d+) +gen (\d+) +cgen (\d+) +parent (\d+) +otime (\S+)  (.*)$")
MARK = re.compile(rb"  \[([^\]]*)\]$")


def parse_subvols(out):
    """btrfsimg subvols' text: {id: fields}, or None on a line it cannot read."""
    subs = {}
    for line in out.splitlines():
        m = SUBVOL.match(line)
        if not m:
            return None
        rest, marks = m[6], []
        while MARK.search(rest):
            marks.insert(0, MARK.search(rest)[1])
            rest = rest[:MARK.search(rest).start()]
        subs[int(m[1])] = {"gen": int(m[2]), "cgen": int(m[3]), "parent": int(m[4]),
                           "otime": m[5].decode(), "path": unescape(rest), "marks": marks}
    return subs


def marked(subs, word):
    return {i for i, s in subs.items() if any(m.split(b" ")[0] == word for m in s["marks"])}


def subvols_ids(args):
    rc, out, err = run(["subvols"] + args)
    subs = parse_subvols(out) if rc == 0 else None
    return set(subs) if subs is not None else {"rc %s %s" % (rc, err[-200:])}


def test_subvols(name, args, t):
    rc, out, err = run(["subvols"] + args)
    subs = parse_subvols(out) if rc == 0 else None
    check(f"{name}: subvols (text) exit 0, every line read", subs, (rc, err[-300:], out[:300]))
    if not subs:
        return
    deleted = marked(subs, b"deleted")
    live = {i: s for i, s in subs.items() if i not in deleted and i != 5}
    bad = [(i, k, s[k], t.subs[i][k]) for i, s in live.items() if i in t.subs
           for k in ("gen", "cgen", "parent", "path") if s[k] != t.subs[i][k]]
    check(f"{name}: subvols: btrfs subvolume list's {len(t.subs)} ids, gens, parents, paths",
          set(live) == set(t.subs) and not bad, (sorted(set(live) ^ set(t.subs)), bad[:3]))
    snaps = marked(subs, b"snapshot")
    check(f"{name}: [snapshot] on list -s's {len(t.snaps)}", snaps - deleted == t.snaps,
          sorted(snaps ^ t.snaps))
    wrong = [(i, [m for m in subs[i]["marks"] if m.startswith(b"snapshot")], t.source(i))
             for i in t.snaps if i in subs and t.source(i) not in subs[i]["marks"]]
    check(f"{name}: [snapshot of SOURCE]: the subvolume list -q's parent uuid names",
          not wrong, wrong[:3])
    ro = marked(subs, b"readonly")
    check(f"{name}: [readonly] on list -r's {len(t.ro)}", ro - deleted == t.ro, sorted(ro ^ t.ro))
    if t.deleted is not None:
        check(f"{name}: [deleted] on list -d's {len(t.deleted)}", deleted == t.deleted,
              sorted(deleted ^ t.deleted))
    default = marked(subs, b"default")
    check(f"{name}: [default] on get-default's {t.default} only", default == {t.default}, default)
    want = t.otime or t.snap_otime  # to the ns, or to the second
    got = {i: subs[i]["otime"][:len(w)] if i in subs else None for i, w in want.items()}
    check(f"{name}: otime as the kernel recorded it ({'ns' if t.otime else 's, snapshots'})",
          want and got == want, [(i, got[i], w) for i, w in want.items() if got[i] != w][:3])
    for flags, want in ((["-s"], snaps), (["--readonly"], ro), (["-d"], deleted),
                        (["--snapshots", "-r"], snaps & ro)):
        got = subvols_ids(flags + args)
        check(f"{name}: subvols {' '.join(flags)}: exactly those marked", got == want,
              sorted(got ^ want, key=str)[:5])


def image_truths(work):
    """(name, btrfsimg arguments, Truth) of each committed image directory
    (testdata/images) with recorded subvolume lists; the 257 GiB tar images
    (no snapshots) are left out."""
    for d in sorted(glob.glob(os.path.join(TESTDATA, "images", "*", ""))):
        name = os.path.basename(d.rstrip("/"))
        devs = sorted(glob.glob(os.path.join(d, "dev*.img.zst")))
        disk = os.path.join(d, "disk.img.zst")
        if os.path.exists(disk):
            img = imgtest.private_copy(disk, work)
            parts = [(f"{name} p{k}", ["--partition", str(k), img], f"p{k}.")
                     for k in range(1, 9) if os.path.exists(os.path.join(d, f"p{k}.subvol-list.txt"))]
        elif devs:
            parts = [(name, [imgtest.private_copy(f, work) for f in devs], "")]
        else:
            continue
        for label, args, p in parts:
            f = lambda n: os.path.join(d, p + n)  # noqa: E731
            yield label, args, Truth(f("subvol-list.txt"), f("subvol-list-s.txt"),
                                     f("subvol-list-r.txt"), f("subvol-get-default.txt"),
                                     f("subvol-list-d.txt"), f("subvol-info.jsonl"))
        for a in args:
            if a.startswith(work):
                os.unlink(a)


# ------------------------------------------------------------ main

def main():
    work = tempfile.mkdtemp(prefix="test_formats.")
    try:
        imgs, views = {}, {}
        for name in ("names", "special", "subvols"):
            imgs[name] = imgtest.private_copy(os.path.join(FILES, name + ".img.zst"), work)
            views[name] = imgtest.load_jsonl(os.path.join(FILES, name + ".view.jsonl"))

        if shutil.which("jq"):
            test_json(imgs, imgtest.private_copy(os.path.join(TESTDATA, "part", "gpt3.img.zst"),
                                                 work))
        else:
            check("jq is installed (bash scripts/deps.sh)", False)
        for name, args, truth in image_truths(work):
            test_subvols(name, args, truth)
        imgs["snaps"] = imgtest.private_copy(os.path.join(FILES, "snaps.img.zst"), work)
        for name in ("subvols", "snaps"):
            f = lambda n: os.path.join(FILES, f"{name}.{n}.txt")  # noqa: E731
            test_subvols(f"files/{name}", [imgs[name]],
                         Truth(f("subvols"), f("subvols-s"), f("subvols-r"), f("subvols-default"),
                               top=f("subvols-top")))
        for name in ("names", "special", "subvols"):
            test_walk_text(name, imgs[name], views[name])
            test_inodes_text(name, imgs[name], views[name])
        if shutil.which("mactime"):
            for name in ("names", "special", "subvols"):
                test_bodyfile(name, imgs[name], views[name], work)
        else:
            check("mactime is installed (bash scripts/deps.sh: sleuthkit)", False)
    except imgtest.RestoreError as e:
        check("images restored", False, e)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tally.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
