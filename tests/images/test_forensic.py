#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_forensic.py: history, deleted, cat/extract/bodyfile --deleted on the
kernel-made forensic images (testdata/forensic, testdata/gen-forensic.sh).

    test_forensic.py BTRFSIMG TESTDATA [FORENSIC_PROGS]

Truth: gen_forensic.py recorded the sha256 of every version the kernel was
given to write (and the empty state every file starts in) and what the
kernel showed at the end. Checked:
  - every record claimed intact or verified hashes to a version ever
    written (a false claim fails), and its path and kind are the truth's;
  - recovery by fate (deleted, previous-version, dropped-subvolume) and size
    band, beside btrfs-progs (bench/forensic_progs.py: btrfs-find-root, then
    btrfs restore -t over every root it lists): every lost version progs
    gets back, btrfsimg gets back too; the figures are printed;
  - cat --deleted gives the record's bytes (exit 1 for a partial one, 2 for
    an unknown id); with --no-verify, the bytes on disk where checksums
    fail, only there, each such range said; extract --deleted writes the
    intact ones under DESTDIR only, with a manifest inside it (MANIFEST)
    holding each file's sha256; versions not whole make exit 1, counted; a
    path's plain name holds its best version (verified, intact, partial,
    overwritten, metadata-only; newest; largest), every version its
    record's mode, times (and owner, as root); --intact-only writes the
    intact ones alone, exit 0; bodyfile --deleted lines reach mactime with
    " (deleted)"; history lists the superblock's generation;
  - extract --deleted follows no link and overwrites nothing: a link at
    the manifest's old place beside DESTDIR (DESTDIR.manifest.jsonl) to a
    victim leaves it whole; a file, a link or a dangling link at MANIFEST
    inside DESTDIR is refused (exit 2, nothing extracted, nothing created
    at the link's target); links planted in DESTDIR where recovered
    versions go (a directory on their path, a version's own name) are not
    followed: nothing is written outside, each such version an error; a
    deleted file named as the manifest (made by the kernel at test time,
    as root) is written as MANIFEST.~ID~, whole;
  - the same image inside an MBR partition gives the same records; the
    two-device image makes no false claim either; a file unlinked while
    open (the image copied before the close) is an intact orphan; a
    deleted file whose extent items fill several leaves is whole;
  - hostile stale blocks: a valid block copied where no chunk map puts it
    changes nothing; a stale block with a flipped byte is never used;
  - single and two devices: the directory records are those of the
    dropped subvolume (the directories on its versions' paths);
  - churn and wrap (gen_forensic_churn.py: deletions, a dropped subvolume,
    then every metadata chunk relocated by balance -m and the freed
    metadata written over, 40 or 240 rounds): no false claim, and
    btrfsimg recovers strictly more lost versions than btrfs-progs in
    every kind and size band; every
    directory the kernel removed (the generator noted its inode number,
    mode and btime before the rmdir) is one record, kind and path the
    truth's (mode and btime too, unless its inode item is gone and only
    its names were found), no contents; extract --deleted creates it, bodyfile
    --deleted lists it as a directory, cat --deleted refuses it (exit 2);
    a partial record's sectors outside its bad ranges are the truth's
    (the generator's per-sector hashes of every version);
  - chimeras and flush artefacts (single, two devices, churn, wrap): every
    range a record calls bad reads as zeros (earlier versions whose items
    disagree with the inode showed the live file's bytes there); no record
    called intact or verified is a later state's inode item with its size
    lagging (same mtime and ctime to the ns, fewer bytes): those are status
    artefact, left out of bodyfile and extract --deleted; an inode item
    forged to lag its extent items (transid older than theirs) gives a
    metadata-only version read as zeros, never intact.
"""
import collections
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

EMPTY = hashlib.sha256(b"").hexdigest()
MANIFEST = "btrfsimg-manifest.jsonl"  # extract --deleted's, inside DESTDIR
S_IFMT, S_IFDIR = 0o170000, 0o040000


def is_dir(r):
    return r["mode"] & S_IFMT == S_IFDIR


def band(size):
    if size <= 4096:
        return "<=4KiB"
    if size <= 128 << 10:
        return "4-128KiB"
    return ">128KiB"


def deleted(cli, images, t, name, extra=()):
    rc, out, err = imgtest.run_cli(cli, ["deleted", "--json", "--hash", *extra, *images],
                                   timeout=300)
    t.check(f"{name}: deleted exits 0", rc == 0, (rc, err[-300:]))
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def claims(t, name, recs, truth):
    written = {v["sha256"] for v in truth["versions"]}
    false = [(r["id"], r["path"], r["status"], r["verified"]) for r in recs
             if (r["verified"] or r["status"] == "intact") and not is_dir(r)
             and r.get("sha256") not in written]
    t.check(f"{name}: {len(recs)} records, no false intact or verified claim", recs and not false,
            false[:10])
    no_sha = [r["id"] for r in recs if r["status"] == "intact" and "sha256" not in r
              and not is_dir(r)]
    t.check(f"{name}: --hash gives the sha256 of every intact record", not no_sha, no_sha[:5])
    dirs = [r["id"] for r in recs if is_dir(r) and ("sha256" in r or r["verified"] or
                                                    r["status"] not in ("intact",
                                                                        "metadata-only"))]
    t.check(f"{name}: directories: no contents, never verified", not dirs, dirs[:5])
    paths = collections.defaultdict(set)
    for v in truth["versions"]:
        paths[v["sha256"]].add(v["path"])
    wrong = [(r["id"], r["path"], sorted(paths[r["sha256"]])) for r in recs
             if r.get("sha256") and r["sha256"] != EMPTY and r["path"] not in paths[r["sha256"]]]
    t.check(f"{name}: recovered versions carry the path they were written at", not wrong,
            wrong[:5])
    fate = {}
    for v in truth["versions"]:
        if v["fate"] != "live" and v["kind"] != "empty":
            fate.setdefault(v["sha256"], v["fate"])
    wrong = [(r["id"], r["path"], r["kind"], fate[r["sha256"]]) for r in recs
             if r.get("sha256") in fate and r["kind"] != fate[r["sha256"]]]
    t.check(f"{name}: kinds are the truth's (deleted, previous-version, dropped-subvolume)",
            not wrong, wrong[:5])


def rates(t, name, recs, truth, progs, strict=False):
    mine = {r["sha256"] for r in recs if r.get("sha256")}
    verified = {r["sha256"] for r in recs if r.get("sha256") and r["verified"]}
    table = collections.defaultdict(lambda: [0, 0, 0, 0])
    missed = []
    for v in truth["versions"]:
        if v["fate"] == "live" or v["kind"] == "empty":
            continue
        row = table[(v["fate"], band(v["size"]))]
        row[0] += 1
        row[1] += v["sha256"] in mine
        row[2] += v["sha256"] in verified
        if progs is not None:
            row[3] += v["sha256"] in progs
            if v["sha256"] in progs and v["sha256"] not in mine:
                missed.append((v["path"], v["size"], v["round"]))
    print(f"# {name}: lost versions recovered (fate, size band: total, btrfsimg intact, "
          f"verified, btrfs-progs)")
    for key in sorted(table):
        n, m, ver, p = table[key]
        print(f"#   {key[0]:18} {key[1]:9} {n:3}  btrfsimg {m:3} (verified {ver:3})  "
              f"progs {p if progs is not None else '-':>3}")
    if progs is not None:
        t.check(f"{name}: btrfsimg recovers every lost version btrfs-progs recovers",
                not missed, missed[:10])
        tot = [sum(r[i] for r in table.values()) for i in range(4)]
        t.check(f"{name}: btrfsimg {tot[1]} >= progs {tot[3]} of {tot[0]} lost versions",
                tot[1] >= tot[3], tot)
        if strict:
            worse = [(k, v) for k, v in sorted(table.items()) if v[1] <= v[3]]
            t.check(f"{name}: btrfsimg recovers strictly more than progs in every kind and "
                    f"size band", not worse, worse)
    else:
        print("skip the btrfs-progs comparison: btrfs-find-root or btrfs restore missing")


def check_cat(t, cli, img, recs):
    intact = [r for r in recs if r["status"] == "intact" and r["size"] > 0 and not is_dir(r)][:4]
    for r in intact:
        rc, out, err = imgtest.run_cli(cli, ["cat", "--deleted", r["id"], img], timeout=120)
        t.check(f"cat --deleted {r['id']}: its bytes", rc == 0 and
                hashlib.sha256(out).hexdigest() == r["sha256"] and len(out) == r["size"],
                (rc, len(out), err[-200:]))
    part = [r for r in recs if r["status"] in ("partial", "overwritten")][:2]
    for r in part:
        rc, out, err = imgtest.run_cli(cli, ["cat", "--deleted", r["id"], img], timeout=120)
        t.check(f"cat --deleted {r['id']} ({r['status']}): exit 1, size bytes, says why",
                rc == 1 and len(out) == r["size"] and b"written as zeros" in err,
                (rc, len(out), err[-200:]))
    rc, out, err = imgtest.run_cli(cli, ["cat", "--deleted", "5-1-2-deadbeef", img], timeout=120)
    t.check("cat --deleted with an unknown id: exit 2", rc == 2 and not out, (rc, err))
    t.check("cat --deleted with an unknown id: says so, names no internal module",
            b"no recovered version has id 5-1-2-deadbeef" in err and b"forensic:" not in err, err)


def check_json_documented(t, recs):
    """Every field of deleted --json, and the id's parts, in btrfsimg.1."""
    man = os.path.join(imgtest.REPO, "tools", "btrfsimg.1")
    with open(man) as f:
        text = f.read().split("\n.SS deleted\n", 1)[1].split("\n.SS ", 1)[0]
    fields = sorted({k for r in recs for k in r} | {k for r in recs for b in r["bad_ranges"]
                                                    for k in b})
    bare = text.replace("\\-", "-")
    missing = [k for k in fields if not re.search(r"(^|[ (])" + re.escape(k) + r"\b", bare, re.M)]
    t.check("deleted --json: every field documented in btrfsimg.1", recs and not missing, missing)
    t.check("deleted: the id's parts documented",
            re.search(r"^\.IR SUBVOL - OBJECTID - TRANSID - SIGNATURE ", bare, re.M)
            and re.search(r"^\.B generation$", text, re.M) and re.search(r"^\.B transid$", text, re.M),
            text[:200])


def check_extract(t, cli, img, recs, tmp, art=()):
    dest = os.path.join(tmp, "out")
    rc, _, err = imgtest.run_cli(cli, ["extract", "--deleted", img, dest], timeout=300)
    not_whole = sum(not is_dir(r) and r["status"] != "intact" and r["id"] not in art
                    for r in recs)
    t.check(f"extract --deleted: {not_whole} versions not whole written (as zeros where not "
            f"read): exit 1, counted", not_whole and rc == 1 and
            f"{not_whole} of them not whole".encode() in err, (rc, err[-300:]))
    with open(os.path.join(dest, MANIFEST)) as f:
        man = [json.loads(line) for line in f]
    t.check("extract --deleted: one manifest line per record, flush artefacts left out",
            sorted(m["id"] for m in man) ==
            sorted(r["id"] for r in recs if r["id"] not in art), len(man))
    t.check("extract --deleted: no version written at the manifest's name",
            MANIFEST not in [m["file"] for m in man], MANIFEST)
    bad = []
    real = os.path.realpath(dest)
    for m in man:
        p = os.path.join(dest, m["file"])
        if not os.path.realpath(p).startswith(real + os.sep):
            bad.append(("outside", m["file"]))
            continue
        if is_dir(m):
            if not os.path.isdir(p) or os.path.islink(p):
                bad.append(("not a directory", m["file"]))
            continue
        if m["status"] == "intact" and not os.path.islink(p):
            rec = next(r for r in recs if r["id"] == m["id"])
            if imgtest.sha256_file(p) != rec["sha256"]:
                bad.append(("content", m["file"]))
    t.check("extract --deleted: every file inside DESTDIR, intact ones exact", not bad, bad[:5])
    outside = [e for e in os.listdir(tmp) if e not in ("out", "img") and not e.endswith(".img")]
    t.check("extract --deleted: nothing written beside DESTDIR", not outside, outside)


RANK = {"partial": 3, "overwritten": 4, "metadata-only": 5}


def best_key(r):
    """The man page's order for a path's plain name (smallest first):
    intact and verified, intact, partial, overwritten, metadata-only; then
    the newest generation, then the larger size."""
    rank = (1 if r["verified"] else 2) if r["status"] == "intact" else RANK[r["status"]]
    return (rank, -r["generation"], -r["size"])


def check_extract_versions(t, cli, img, recs, truth, tmp):
    """extract --deleted: the plain name of a path holds its best version,
    every file its record's mode, owner (as root) and times, the manifest
    the sha256 of each file's bytes; --intact-only writes the intact ones
    alone, exit 0."""
    dest = os.path.join(tmp, "versions")
    rc, _, err = imgtest.run_cli(cli, ["extract", "--deleted", img, dest], timeout=300)
    with open(os.path.join(dest, MANIFEST)) as f:
        man = [json.loads(line) for line in f]
    meta, sums = [], []
    for m in man:
        p = os.path.join(dest, m["file"])
        st = os.lstat(p)  # before any read changes the atime
        want = (m["mode"] & 0o7777, m["mtime"][0] * 10**9 + m["mtime"][1],
                m["atime"][0] * 10**9 + m["atime"][1])
        have = (st.st_mode & 0o7777, st.st_mtime_ns, st.st_atime_ns)
        if os.path.islink(p):
            want, have = want[1:], have[1:]  # a link has no mode of its own
        if os.geteuid() == 0:
            want, have = want + (m["uid"], m["gid"]), have + (st.st_uid, st.st_gid)
        if (not is_dir(m) or m["status"] == "intact") and want != have:
            meta.append((m["file"], want, have))
        if is_dir(m):
            continue
        data = os.readlink(p).encode() if os.path.islink(p) else open(p, "rb").read()
        if m.get("sha256") != hashlib.sha256(data).hexdigest():
            sums.append((m["file"], m.get("sha256")))
    t.check(f"extract --deleted: {len(man)} versions with their record's mode, times" +
            (", owner" if os.geteuid() == 0 else " (owners: not root, not checked)"),
            rc == 1 and man and not meta, (rc, meta[:4]))
    t.check("extract --deleted: the manifest's sha256 of every file is its bytes'",
            not sums and any("sha256" in m for m in man), sums[:4])
    written = {v["sha256"] for v in truth["versions"]}
    by_path = collections.defaultdict(list)
    for m in man:
        if not is_dir(m):
            by_path[m["path"]].append(m)
    wrong, shared, false = [], 0, []
    for path, ms in by_path.items():
        plain = [m for m in ms if m["file"] == path]
        if len(ms) < 2 or len(plain) != 1:
            wrong += [(path, "no plain name")] if len(plain) != 1 else []
            continue
        shared += 1
        if best_key(plain[0]) != min(map(best_key, ms)):
            wrong.append((path, plain[0]["id"], plain[0]["status"],
                          [(m["id"], m["status"], m["verified"]) for m in ms]))
        if plain[0]["status"] == "intact" and plain[0].get("sha256") not in written:
            false.append((path, plain[0]["id"]))
    t.check(f"extract --deleted: of {shared} paths with several versions, the plain name "
            f"holds the best (verified, intact, partial...; newest; largest)",
            shared and not wrong, wrong[:3])
    t.check("extract --deleted: a plain name's intact version is one the kernel was given",
            not false, false[:3])

    dest = os.path.join(tmp, "intact")
    rc, _, err = imgtest.run_cli(cli, ["extract", "--deleted", "--intact-only", img, dest],
                                 timeout=300)
    got = []
    if os.path.exists(os.path.join(dest, MANIFEST)):
        with open(os.path.join(dest, MANIFEST)) as f:
            got = sorted(json.loads(line)["id"] for line in f)
    want = sorted(r["id"] for r in recs if r["status"] == "intact")
    left = len(recs) - len(want)
    t.check(f"extract --deleted --intact-only: the {len(want)} intact versions alone, "
            f"{left} left out (said), exit 0", rc == 0 and got == want and left and
            f"{left} left out".encode() in err, (rc, len(got), len(want), err[-300:]))
    rc, _, err = imgtest.run_cli(cli, ["extract", "--intact-only", img,
                                       os.path.join(tmp, "nodel")], timeout=60)
    t.check("extract --intact-only without --deleted: refused (exit 2), nothing made",
            rc == 2 and not os.path.exists(os.path.join(tmp, "nodel")), (rc, err[-200:]))


def check_cat_raw(t, cli, img, recs, tmp):
    """cat --no-verify --deleted: ranges whose checksums fail come as the
    bytes on disk, said on stderr; every other byte as without it. extract
    --deleted --no-verify writes those same bytes."""
    mism = [r for r in recs if any(b["why"] == "csum mismatch" for b in r["bad_ranges"])]
    dest = os.path.join(tmp, "raw")
    rc, _, xerr = imgtest.run_cli(cli, ["extract", "--deleted", "--no-verify", img, dest],
                                  timeout=300)
    files = {}
    if os.path.exists(os.path.join(dest, MANIFEST)):
        with open(os.path.join(dest, MANIFEST)) as f:
            files = {m["id"]: os.path.join(dest, m["file"]) for m in map(json.loads, f)}
    xbad = []
    bad, differ = [], 0
    for r in mism:
        rc0, z, _ = imgtest.run_cli(cli, ["cat", "--deleted", r["id"], img], timeout=120)
        rc1, raw, err = imgtest.run_cli(cli, ["cat", "--no-verify", "--deleted", r["id"], img],
                                        timeout=120)
        ranges = [(b["offset"], b["offset"] + b["length"]) for b in r["bad_ranges"]
                  if b["why"] == "csum mismatch"]
        inside = bytearray(len(raw))
        for lo, hi in ranges:
            inside[lo:hi] = b"\1" * (hi - lo)
        stray = [i for i in range(0, len(raw), 512)
                 if raw[i:i + 512] != z[i:i + 512] and not all(inside[i:i + 512])]
        labels = all(f"bytes {lo}..{hi} csum mismatch (written as the bytes on disk, "
                     f"unverified".encode() in err for lo, hi in ranges)
        if rc0 != 1 or rc1 != 1 or len(raw) != r["size"] or stray or not labels:
            bad.append((r["id"], rc0, rc1, len(raw), stray[:3], err[-200:]))
        differ += raw != z
        if r["id"] not in files or open(files[r["id"]], "rb").read() != raw:
            xbad.append(r["id"])
    t.check(f"cat --no-verify --deleted: of {len(mism)} versions with csum mismatches, the "
            f"bytes differ from cat --deleted only there, labelled, exit 1", mism and not bad,
            bad[:3])
    t.check(f"cat --no-verify --deleted: {differ} versions give the bytes on disk, not zeros",
            differ > 0, differ)
    t.check("extract --deleted --no-verify: those versions' files hold the same bytes, said "
            "(exit 1)", rc == 1 and not xbad and b"as the bytes on disk (--no-verify)" in xerr,
            (rc, xbad[:3], xerr[-300:]))


def check_destination(t, cli, img, recs, tmp):
    """extract --deleted against links and files planted where it writes."""
    base = os.path.join(tmp, "planted")
    os.mkdir(base)
    victim, outside = os.path.join(base, "victim"), os.path.join(base, "outside")
    os.mkdir(outside)
    with open(victim, "wb") as f:
        f.write(b"precious\n")

    def untouched():
        with open(victim, "rb") as f:
            return f.read() == b"precious\n" and not os.listdir(outside)

    def run(dest):
        return imgtest.run_cli(cli, ["extract", "--deleted", img, dest], timeout=300)

    dest = os.path.join(base, "old")
    os.symlink(victim, dest + ".manifest.jsonl")
    rc, _, err = run(dest)
    t.check("extract --deleted: a link at DESTDIR.manifest.jsonl is not followed, the manifest "
            "is inside DESTDIR (exit 1: versions not whole)", rc == 1 and untouched() and
            os.path.isfile(os.path.join(dest, MANIFEST)) and
            not os.path.islink(os.path.join(dest, MANIFEST)), (rc, err[-300:]))
    for what, plant in (("a file", lambda p: open(p, "wb").write(b"earlier run\n")),
                        ("a link to a file", lambda p: os.symlink(victim, p)),
                        ("a dangling link", lambda p: os.symlink(os.path.join(outside, "m"), p))):
        dest = os.path.join(base, what.replace(" ", "-"))
        os.mkdir(dest)
        plant(os.path.join(dest, MANIFEST))
        before = os.readlink(os.path.join(dest, MANIFEST)) if "link" in what else None
        rc, _, err = run(dest)
        kept = (os.readlink(os.path.join(dest, MANIFEST)) == before if before else
                open(os.path.join(dest, MANIFEST), "rb").read() == b"earlier run\n")
        t.check(f"extract --deleted: {what} at DESTDIR/{MANIFEST} refused (exit 2, says "
                f"where), kept, nothing extracted", rc == 2 and kept and untouched() and
                os.listdir(dest) == [MANIFEST] and MANIFEST.encode() in err, (rc, err[-300:]))
    # a link where a directory on the versions' paths goes, one where a
    # version itself goes (its directory made beforehand)
    files = [r for r in recs if not is_dir(r) and "/" in r["path"]]
    top = files[0]["path"].split("/")[0]
    leaf = next(r["path"] for r in files if not r["path"].startswith(top + "/"))
    dest = os.path.join(base, "links")
    os.makedirs(os.path.join(dest, os.path.dirname(leaf)))
    os.symlink(outside, os.path.join(dest, top))
    os.symlink(victim, os.path.join(dest, leaf))
    rc, _, err = run(dest)
    under = sum(r["path"].startswith(top + "/") for r in recs)
    t.check(f"extract --deleted: links planted at DESTDIR/{top} and DESTDIR/{leaf} are not "
            f"followed: nothing outside, a clash each ({under}+ versions), not damage, exit 2",
            rc == 2 and b"not damage in the image" in err and untouched() and os.path.islink(os.path.join(dest, top)) and
            err.count(b"extract: " + top.encode() + b"/") >= under and
            (b"extract: " + leaf.encode()) in err, (rc, err[-400:]))


def check_manifest_name(t, cli, tmp):
    """A deleted file named as the manifest, at the top: the kernel makes
    it (mkfs, mount, write, sync, rm, unmount); extract --deleted writes
    it as MANIFEST.~ID~, its bytes whole, and the manifest stays its own."""
    reason = imgtest.skip_reason()
    if reason:
        print(f"skip a deleted file named {MANIFEST}: {reason}")
        return
    img, mnt = os.path.join(tmp, "named.img"), os.path.join(tmp, "named.mnt")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(128 << 20)
    body = b"a version named as the manifest\n"
    subprocess.run(["mkfs.btrfs", "-q", "-f", img], check=True, capture_output=True,
                   timeout=120)
    subprocess.run(["mount", "-o", "loop", img, mnt], check=True, timeout=120)
    try:
        with open(os.path.join(mnt, MANIFEST), "wb") as f:
            f.write(body)
        os.sync()
        os.unlink(os.path.join(mnt, MANIFEST))
        os.sync()
    finally:
        subprocess.run(["umount", mnt], check=True, timeout=120)
    dest = os.path.join(tmp, "named")
    rc, _, err = imgtest.run_cli(cli, ["extract", "--deleted", img, dest], timeout=300)
    try:
        with open(os.path.join(dest, MANIFEST)) as f:
            man = [json.loads(line) for line in f]
    except (OSError, ValueError) as e:
        man = [str(e)]
    got = [(m["path"], m["file"]) for m in man if isinstance(m, dict)]
    ok = [m for m in man if isinstance(m, dict) and m["path"] == MANIFEST and
          m["file"] == f"{MANIFEST}.~{m['id']}~" and m["status"] == "intact"]
    whole = ok and open(os.path.join(dest, ok[0]["file"]), "rb").read() == body
    t.check(f"extract --deleted: a deleted file named {MANIFEST} goes to {MANIFEST}.~ID~, "
            f"whole, and the manifest lists it", rc == 0 and bool(whole), (rc, got, err[-300:]))
    os.unlink(img)


def check_deleted_meta(t, cli, tmp):
    """The examiner's case, made by the kernel at test time (as root): a
    script of mode 0755, owner 1000:1000, an xattr, mtime 2020-10-27,
    deleted; extract --deleted writes it with that mode, owner, xattr and
    times, and the manifest's sha256 is its bytes'."""
    reason = imgtest.skip_reason()
    if reason:
        print(f"skip a deleted file's owner and xattrs: {reason}")
        return
    img, mnt = os.path.join(tmp, "meta.img"), os.path.join(tmp, "meta.mnt")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(128 << 20)
    body = b"#!/bin/sh\necho recovered\n"
    when = (1603800000, 1603800000)  # 2020-10-27
    subprocess.run(["mkfs.btrfs", "-q", "-f", img], check=True, capture_output=True,
                   timeout=120)
    subprocess.run(["mount", "-o", "loop", img, mnt], check=True, timeout=120)
    try:
        os.mkdir(os.path.join(mnt, "text2"))
        p = os.path.join(mnt, "text2", "test.sh")
        with open(p, "wb") as f:
            f.write(body)
        os.chmod(p, 0o755)
        os.chown(p, 1000, 1000)
        os.setxattr(p, b"user.examiner", b"signed")
        os.utime(p, when)
        os.sync()
        os.unlink(p)
        os.sync()
    finally:
        subprocess.run(["umount", mnt], check=True, timeout=120)
    dest = os.path.join(tmp, "meta")
    rc, _, err = imgtest.run_cli(cli, ["extract", "--deleted", img, dest], timeout=300)
    got = os.path.join(dest, "text2", "test.sh")
    try:
        with open(os.path.join(dest, MANIFEST)) as f:
            man = [m for m in map(json.loads, f) if m["path"] == "text2/test.sh"]
        st = os.lstat(got)
        have = (st.st_mode & 0o7777, st.st_uid, st.st_gid, int(st.st_mtime), int(st.st_atime),
                os.getxattr(got, b"user.examiner") if b"user.examiner" in
                [x.encode() for x in os.listxattr(got)] else None,
                open(got, "rb").read() == body,
                [m.get("sha256") for m in man] == [hashlib.sha256(body).hexdigest()])
    except (OSError, ValueError) as e:
        have = str(e)
    want = (0o755, 1000, 1000, when[1], when[0], b"signed", True, True)
    t.check("extract --deleted: a deleted script gets its mode 0755, owner 1000:1000, xattr, "
            "times; the manifest its sha256", rc == 0 and have == want, (rc, have, err[-300:]))
    os.unlink(img)


def check_bodyfile(t, cli, img, tmp):
    rc, out, err = imgtest.run_cli(cli, ["bodyfile", "--deleted", img], timeout=300)
    t.check("bodyfile --deleted exits 0", rc == 0, (rc, err[-300:]))
    t.check("bodyfile --deleted: deleted and earlier-version markers",
            b" (deleted " in out and b" (earlier version " in out, out[:200])
    if not shutil.which("mactime"):
        print("skip mactime: not installed (sleuthkit)")
        return
    body = os.path.join(tmp, "body.txt")
    with open(body, "wb") as f:
        f.write(out)
    p = subprocess.run(["mactime", "-y", "-b", body], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    t.check("mactime shows the deletions", p.returncode == 0 and b"(deleted " in p.stdout
            and b"(earlier version" in p.stdout, p.stderr[-200:])


def body_names(out):
    return [line.split("|")[1] for line in out.decode(errors="replace").splitlines()]


def check_bodyfile_base(t, cli, img, recs, tmp):
    """bodyfile --deleted --path P: the live and the recovered names both
    relative to P, nothing recovered outside P; every version's name
    carries its kind and id; --mount-point DIR begins every name (mactime
    reads it)."""
    rc, out, err = imgtest.run_cli(cli, ["bodyfile", "--deleted", img], timeout=300)
    names = body_names(out)
    want = {r["id"]: "/" + r["path"] + (
        f" (earlier version {r['id']})" if r["kind"] == "previous-version" else
        f" (deleted with subvolume {r['subvol']}, {r['id']})" if r["kind"] == "dropped-subvolume"
        else f" (deleted, orphan {r['id']})" if r["kind"] == "orphan" else
        f" (deleted {r['id']})") for r in recs if r["status"] != "artefact"}
    missing = sorted(set(want.values()) - set(names))
    t.check("bodyfile --deleted: each version named with its kind and id",
            rc == 0 and not missing and {"dropped-subvolume", "deleted", "previous-version"}
            <= {r["kind"] for r in recs}, (rc, missing[:3]))
    t.check("bodyfile --deleted: no two lines of one name",
            len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)[:3])
    top = "docs"
    inside = sorted(n[len(top) + 1:] for n in want.values() if n.startswith("/" + top + "/"))
    outside = [n for n in want.values() if not n.startswith("/" + top + "/")]
    rc, out, err = imgtest.run_cli(cli, ["bodyfile", "--path", top, img], timeout=300)
    live = body_names(out)
    rc2, out2, err2 = imgtest.run_cli(cli, ["bodyfile", "--deleted", "--path", top, img],
                                      timeout=300)
    got = body_names(out2)
    t.check(f"bodyfile --deleted --path {top}: the live lines as without --deleted, then the "
            f"{len(inside)} recovered versions under it, relative to it, and no other",
            rc == 0 and rc2 == 0 and inside and outside and got[:len(live)] == live
            and sorted(got[len(live):]) == inside, (rc, rc2, len(got), len(live), len(inside),
                                                   sorted(set(got[len(live):]) ^ set(inside))[:3]))
    rc, out, err = imgtest.run_cli(cli, ["bodyfile", "--deleted", "--path", top, "--mount-point", "C:",
                                         img], timeout=300)
    t.check("bodyfile --mount-point C: begins every name, as fls -m",
            rc == 0 and body_names(out) == ["C:" + n for n in got], (rc, err[-200:]))
    rc, out, err = imgtest.run_cli(cli, ["bodyfile", "--deleted", "--inode", "5:256", img],
                                   timeout=60)
    t.check("bodyfile --deleted --inode: refused (exit 2), not ignored",
            rc == 2 and b"--inode" in err and not out, (rc, err[-200:]))
    if not shutil.which("mactime"):
        print("skip mactime --mount-point: not installed (sleuthkit)")
        return
    body = os.path.join(tmp, "body-m.txt")
    with open(body, "wb") as f:
        f.write(out)
    rc, out, err = imgtest.run_cli(cli, ["bodyfile", "--deleted", "--path", top, "--mount-point", "C:",
                                         img], timeout=300)
    with open(body, "wb") as f:
        f.write(out)
    p = subprocess.run(["mactime", "-y", "-b", body], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    shown = p.stdout.decode(errors="replace")
    t.check("mactime reads the --mount-point C: body file: every recovered name there",
            p.returncode == 0 and all(" C:" + n in shown for n in inside), p.stderr[-200:])


def check_bodyfile_subvols(t, cli, img, tmp):
    """bodyfile --deleted: each subvolume's and snapshot's creation as an
    event at its otime, under --path and --mount-point as the rest; mactime shows them."""
    rc, out, err = imgtest.run_cli(cli, ["subvols", "--json", img], timeout=120)
    subs = [json.loads(x) for x in out.splitlines()] if rc == 0 else []
    rc, out, err = imgtest.run_cli(cli, ["bodyfile", "--deleted", "--mount-point", "/mnt/x", img],
                                   timeout=300)
    lines = out.decode(errors="replace").splitlines()
    events = {line.split("|")[1]: line.split("|") for line in lines if " created)" in line}
    want = [s for s in subs if s["id"] != 5 and s.get("path")]
    bad = []
    for s in want:
        shown = "".join(f"\\x{ord(ch) - 0xdc00:02x}" if 0xdc80 <= ord(ch) <= 0xdcff else ch
                        for ch in s["path"])  # the body file's escape of a non-UTF-8 byte
        ev = [f for n, f in events.items() if n.startswith("/mnt/x/" + shown + " (")
              and f" {s['id']} " in n and ("snapshot" in n) == bool(s.get("snapshot"))]
        if len(ev) != 1 or ev[0][2] != f"{s['id']}-256" or int(ev[0][10]) != s["otime"][0]:
            bad.append((s["path"], ev))
    t.check(f"bodyfile --deleted: the creation of each of {len(want)} subvolumes and snapshots, "
            "at its otime", rc == 0 and len(want) >= 5 and not bad and len(events) == len(want),
            (rc, bad[:3], len(events)))
    if not shutil.which("mactime"):
        print("skip mactime of subvolume events: not installed (sleuthkit)")
        return
    body = os.path.join(tmp, "body-sv.txt")
    with open(body, "wb") as f:
        f.write(out)
    p = subprocess.run(["mactime", "-y", "-b", body], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    shown = p.stdout.decode(errors="replace")
    t.check("mactime shows the subvolume creation events",
            p.returncode == 0 and events and all(n in shown for n in events
                                                 if "\\x" not in n), p.stderr[-200:])


def check_bad_zeros(t, cli, imgs, recs, name):
    """Chimeras: every range a record calls untrusted reads as zeros from
    cat --deleted (an earlier version whose items disagree with its inode
    showed the live file's bytes at those offsets), and its size is whole.
    Returns the records with a bad range checked."""
    checked, wrong = 0, []
    for r in recs:
        if not r["bad_ranges"] or is_dir(r):
            continue
        rc, out, err = imgtest.run_cli(cli, ["cat", "--deleted", r["id"], *imgs], timeout=120)
        if rc != 1 or len(out) != r["size"]:
            wrong.append((r["id"], "cat", rc, len(out), r["size"]))
            continue
        checked += 1
        for b in r["bad_ranges"]:
            seg = out[b["offset"]:b["offset"] + b["length"]]
            if seg.count(0) != len(seg):
                wrong.append((r["id"], r["status"], b["why"], b["offset"], b["length"],
                               len(seg) - seg.count(0)))
    t.check(f"{name}: {checked} records with bad ranges: each range reads as zeros",
            not wrong, wrong[:5])
    return checked


def live_inodes(cli, imgs):
    rc, out, _ = imgtest.run_cli(cli, ["walk", "--json", *imgs], timeout=300)
    live = {}
    for line in out.splitlines():
        w = json.loads(line)
        live[(w["subvol"], w["ino"])] = w
    return rc, live


def size_lags(r, w):
    return (w["size"] > r["size"] and w["mtime"] == r["mtime"] and w["ctime"] == r["ctime"])


def check_artefacts(t, cli, imgs, recs, name, want=None):
    """Flush artefacts: no record called intact or verified is the inode
    item of a later state (another version of the file, or today's inode)
    with its size lagging: same mtime and ctime to the nanosecond, fewer
    bytes. Those that are say status artefact; bodyfile --deleted leaves
    them out (extract --deleted too: check_extract). Returns their ids."""
    rc, live = live_inodes(cli, imgs)
    t.check(f"{name}: walk --json lists the live files", rc == 0 and live, rc)
    byfile = collections.defaultdict(list)
    for r in recs:
        byfile[(r["subvol"], r["objectid"])].append(r)
    false, art = [], []
    for r in recs:
        if is_dir(r):
            continue
        later = [o for o in byfile[(r["subvol"], r["objectid"])] if o is not r]
        w = live.get((r["subvol"], r["objectid"]))
        if w and r["kind"] == "previous-version":
            later.append(w)
        lag = any(size_lags(r, o) for o in later)
        if lag and (r["status"] == "intact" or r["verified"]):
            false.append((r["id"], r["path"], r["size"], r["status"], r["verified"]))
        if lag:
            art.append(r["id"])
        elif r["status"] == "artefact":
            false.append((r["id"], "artefact without a later state", r["size"]))
    t.check(f"{name}: no flush artefact called intact or verified ({len(art)} found)",
            not false and all(r["status"] == "artefact" for r in recs if r["id"] in art),
            false[:5])
    if want is not None:
        t.check(f"{name}: the flush artefacts of the image are found ({len(art)} >= {want})",
                len(art) >= want, art)
    if art:
        rc, out, err = imgtest.run_cli(cli, ["bodyfile", "--deleted", *imgs], timeout=300)
        shown = [a for a in art if a.encode() in out]
        t.check(f"{name}: bodyfile --deleted leaves the flush artefacts out", rc == 0 and
                not shown, (rc, shown[:5]))
    return art


def forge_lagging_inode(img, out, fsid, ino):
    """A copy of @img where every fs-tree leaf holding the INODE_ITEM of
    @ino and its EXTENT_DATA items says the inode's transid is one less
    than the newest of those items' generations (item data + 8), crc32c
    recomputed: an inode item that lags its extent items, as in a leaf
    written mid-transaction. Returns how many leaves changed."""
    offs, data = fs_leaf_offsets(img, fsid)
    data = bytearray(data)
    n = 0
    for o in offs:
        inode, gens = None, []
        for slot in range(struct.unpack_from("<I", data, o + 96)[0]):
            it = o + 101 + 25 * slot
            obj, typ, _, ioff = struct.unpack_from("<QBQI", data, it)
            if obj == ino and typ == 1:      # INODE_ITEM
                inode = o + 101 + ioff
            elif obj == ino and typ == 108:  # EXTENT_DATA: generation first
                gens.append(struct.unpack_from("<Q", data, o + 101 + ioff)[0])
        if inode is None or not gens or max(gens) < 2:
            continue
        struct.pack_into("<Q", data, inode + 8, max(gens) - 1)
        struct.pack_into("<I", data, o, imgtest.crc32c(bytes(data[o + 32:o + 16384])))
        n += 1
    with open(out, "wb") as f:
        f.write(data)
    return n


def check_lagging_inode(t, cli, img, recs, tmp):
    """A chimera made: the inode item of an intact, verified deleted file
    lags its extent items (transid older than their generation). Such
    items were never one state of the file: the version is metadata-only,
    its whole size one bad range, read as zeros; never intact, verified."""
    want = [r for r in recs if r["kind"] == "deleted" and r["verified"] and not r["inline"]
            and r["size"] > 4096 and not is_dir(r)]
    t.check("lagging inode: an intact verified deleted file to forge", want, len(recs))
    if not want:
        return
    r0 = want[0]
    with open(img, "rb") as f:
        f.seek(0x10000 + 0x20)
        fsid = f.read(16)
    forged = os.path.join(tmp, "lagging-inode.img")
    n = forge_lagging_inode(img, forged, fsid, r0["objectid"])
    t.check("lagging inode: leaves holding the inode and its extents changed", n > 0, n)
    got = [r for r in deleted(cli, [forged], t, "lagging inode", ())
           if r["objectid"] == r0["objectid"] and r["subvol"] == r0["subvol"] and
           r["size"] == r0["size"]]
    t.check("lagging inode: never intact or verified; metadata-only, all of it bad",
            got and all(not r["verified"] and r["status"] == "metadata-only" and
                        r["bad_ranges"] == [{"offset": 0, "length": r["size"],
                                             "why": "items disagree with the inode"}]
                        for r in got),
            [(r["id"], r["status"], r["verified"], r["bad_ranges"]) for r in got])
    check_bad_zeros(t, cli, [forged], got, "lagging inode")
    os.unlink(forged)


def check_history(t, cli, img, truth_gen):
    rc, out, err = imgtest.run_cli(cli, ["history", "--json", img], timeout=300)
    gens = [json.loads(line) for line in out.splitlines()]
    ids = [g["transid"] for g in gens]
    t.check("history: exit 0, transids increasing", rc == 0 and ids == sorted(set(ids)),
            (rc, ids, err[-200:]))
    sup = [g for g in gens if g["superblock"]]
    t.check("history: the superblock's generation, its trees found",
            any(g["transid"] == truth_gen and g["trees"] and all(x["found"] for x in g["trees"])
                for g in sup), [(g["transid"], len(g["trees"])) for g in sup])


def super_generation(img):
    with open(img, "rb") as f:
        f.seek(0x10000 + 0x48)
        return struct.unpack("<Q", f.read(8))[0]


def mbr_wrap(img, out):
    """@img as partition 1 (at 1 MiB) of a whole-disk image with an MBR."""
    size = os.path.getsize(img)
    start = 2048
    with open(out, "wb") as f:
        mbr = bytearray(512)
        sectors = (size + 511) // 512
        mbr[446:462] = struct.pack("<B3sB3sII", 0, b"\0\x02\0", 0x83, b"\xff\xff\xff",
                                   start, sectors)
        mbr[510:512] = b"\x55\xaa"
        f.write(mbr)
        f.seek(start * 512)
        with open(img, "rb") as src:
            shutil.copyfileobj(src, f, 1 << 20)
        f.truncate(start * 512 + sectors * 512)


def key(r):
    return (r["id"], r["status"], r["verified"], r["path"], r.get("sha256"), r["kind"])


def fs_leaf_offsets(img, fsid, nodesize=16384, want=5):
    """Device offsets of tree blocks of tree @want (by header owner)."""
    out = []
    with open(img, "rb") as f:
        data = f.read()
    for off in range(0, len(data) - nodesize, 4096):
        if data[off + 32:off + 48] == fsid and \
                struct.unpack_from("<Q", data, off + 88)[0] == want and data[off + 100] == 0:
            out.append(off)
    return out, data


def check_hostile(t, cli, img, recs, truth, tmp):
    with open(img, "rb") as f:
        f.seek(0x10000 + 0x20)
        fsid = f.read(16)
    offs, data = fs_leaf_offsets(img, fsid)
    # a valid leaf copied to where no chunk map puts its bytenr (the last
    # 16 KiB of the image, outside every chunk)
    planted = os.path.join(tmp, "planted.img")
    shutil.copyfile(img, planted)
    with open(planted, "r+b") as f:
        f.seek(len(data) - 16384 * 4)
        f.write(data[offs[0]:offs[0] + 16384])
    got = deleted(cli, [planted], t, "misplaced valid block")
    t.check("misplaced valid block: the records do not change",
            sorted(map(key, got)) == sorted(map(key, recs)), len(got))
    rc, _, err = imgtest.run_cli(cli, ["history", "-v", planted], timeout=300)
    t.check("misplaced valid block: found, and placed by no chunk map (-v)",
            rc == 0 and b" 1 placed by no chunk map" in err, err[-300:])
    # every fs-tree block gets a flipped byte in its items: none may be used
    flipped = os.path.join(tmp, "flipped.img")
    shutil.copyfile(img, flipped)
    with open(flipped, "r+b") as f:
        for o in offs[::2]:
            f.seek(o + 2000)
            b = f.read(1)
            f.seek(o + 2000)
            f.write(bytes([b[0] ^ 0x40]))
    rc, out, err = imgtest.run_cli(cli, ["deleted", "-v", "--json", "--hash", flipped],
                                   timeout=300)
    got = [json.loads(line) for line in out.splitlines() if line.strip()]
    t.check("flipped stale blocks: still a result (exit 0 or 1)", rc in (0, 1), (rc, err[-200:]))
    m = re.search(rb" (\d+) bad checksum,", err)
    t.check("flipped stale blocks: each one refused for its checksum (-v)",
            m and int(m.group(1)) == len(offs[::2]), (m and m.group(1), len(offs[::2])))
    claims(t, "flipped stale blocks", got, truth)


HANG_TIMEOUT = 30   # seconds: the image is scanned in well under one


def forge_size(img, out, fsid, ino, size):
    """A copy of @img where every fs-tree leaf (live and stale) holding the
    INODE_ITEM of @ino claims i_size @size (item data + 16), crc32c
    recomputed: the size survives every check but the bound. Returns how
    many leaves changed."""
    offs, data = fs_leaf_offsets(img, fsid)
    data = bytearray(data)
    n = 0
    for o in offs:
        for slot in range(struct.unpack_from("<I", data, o + 96)[0]):
            it = o + 101 + 25 * slot
            obj, typ, _, ioff = struct.unpack_from("<QBQI", data, it)
            if obj == ino and typ == 1:     # INODE_ITEM
                struct.pack_into("<Q", data, o + 101 + ioff + 16, size)
                struct.pack_into("<I", data, o, imgtest.crc32c(bytes(data[o + 32:o + 16384])))
                n += 1
    with open(out, "wb") as f:
        f.write(data)
    return n


def check_forged_size(t, cli, img, recs, tmp):
    """Stale leaves whose inode of a deleted file (intact, inline) claims
    ~6e18 bytes: deleted used to hash every hole byte to merge identical
    versions (years), extract --deleted and cat --deleted to write them.
    Now the size, past 16 bytes per byte of the devices, is damage: the
    version is partial, its bytes past the end of its data a bad range
    never produced, the inode and the size named, exit 1, all in seconds."""
    want = [r for r in recs if r["kind"] == "deleted" and r["inline"] and
            r["status"] == "intact" and not is_dir(r)]
    t.check("forged size: an intact inline deleted file to forge", want, len(recs))
    if not want:
        return
    r0, size = want[0], 6 << 60
    with open(img, "rb") as f:
        f.seek(0x10000 + 0x20)
        fsid = f.read(16)
    forged = os.path.join(tmp, "forged-size.img")
    n = forge_size(img, forged, fsid, r0["objectid"], size)
    t.check("forged size: leaves holding the inode changed", n > 0, n)
    words = (b"inode=%d" % r0["objectid"], b"size=%d" % size, b"more than")
    rc, out, err = imgtest.run_cli(cli, ["deleted", "--json", forged], timeout=HANG_TIMEOUT)
    got = [json.loads(line) for line in out.splitlines() if line.strip()] if rc else []
    t.check("forged size: deleted ends, exit 1, naming the inode, its size and the bound",
            rc == 1 and all(w in err for w in words), (rc, err[-400:]))
    num = imgtest.json_int   # past 2^53 a string
    mine = [r for r in got if r["objectid"] == r0["objectid"] and num(r["size"]) == size]
    t.check("forged size: the version is partial, the bytes past its data a bad range",
            mine and all(r["status"] == "partial" and r["bad_ranges"][-1]["offset"] <=
                         4096 and sum(num(b["length"]) for b in r["bad_ranges"]) >= size - 4096
                         for r in mine), mine)
    if not mine:
        return
    rc, out, err = imgtest.run_cli(cli, ["cat", "--deleted", mine[0]["id"], forged],
                                   timeout=HANG_TIMEOUT)
    t.check("forged size: cat --deleted ends, exit 1, its data only",
            rc == 1 and 0 < len(out) <= 4096, (rc, len(out), err[-300:]))
    dest = os.path.join(tmp, "x-forged")
    rc, out, err = imgtest.run_cli(cli, ["extract", "--deleted", forged, dest],
                                   timeout=HANG_TIMEOUT)
    leaf = os.path.basename(r0["path"])
    sizes = [os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(dest) for f in fs
             if f == leaf or f.startswith(leaf + ".~")]
    t.check("forged size: extract --deleted ends, exit 1, the file its data only",
            rc == 1 and sizes and max(sizes) <= 4096, (rc, sizes, err[-300:]))
    shutil.rmtree(dest, ignore_errors=True)
    for p in (dest + ".manifest.jsonl", forged):
        if os.path.exists(p):
            os.unlink(p)
    # 1 GiB, under the bound (16 bytes per byte of the 160 MiB image): a
    # size believed, whose holes extract --deleted leaves as holes.
    n = forge_size(img, forged, fsid, r0["objectid"], 1 << 30)
    rc, out, err = imgtest.run_cli(cli, ["extract", "--deleted", forged, dest],
                                   timeout=HANG_TIMEOUT)
    files = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs
             if f == leaf or f.startswith(leaf + ".~")]
    big = [p for p in files if os.path.getsize(p) == 1 << 30]
    t.check("size 1 GiB: extract --deleted writes it sparse (its data, not its holes)",
            rc in (0, 1) and big and all(os.stat(p).st_blocks * 512 <= 1 << 20 for p in big),
            (rc, [(os.path.getsize(p), os.stat(p).st_blocks) for p in files], err[-300:]))
    shutil.rmtree(dest, ignore_errors=True)
    for p in (dest + ".manifest.jsonl", forged):
        if os.path.exists(p):
            os.unlink(p)


def check_dirs(t, cli, img, recs, truth, tmp, name):
    """Deleted directories against the generator's notes."""
    # a directory whose INODE_ITEM is gone, known from names only, has
    # mode S_IFDIR alone and no times: its path and kind are checked
    names_only = {(r["path"], r["kind"]) for r in recs
                  if is_dir(r) and r["mode"] == S_IFDIR and r["status"] == "metadata-only"
                  and r["btime"] == [0, 0]}
    want = {(d["path"], d["fate"], d["mode"], tuple(d["btime"])) for d in truth["dirs"]
            if (d["path"], d["fate"]) not in names_only}
    want |= {(d["path"], d["fate"]) for d in truth["dirs"] if (d["path"], d["fate"]) in names_only}
    got = {(r["path"], r["kind"]) if (r["path"], r["kind"]) in names_only else
           (r["path"], r["kind"], r["mode"], tuple(r["btime"])) for r in recs if is_dir(r)}
    t.check(f"{name}: every removed directory is one record (path, kind, mode, btime), "
            f"no other ({len(want)})", got == want, (sorted(got ^ want)[:6]))
    print(f"# {name}: {len(truth['dirs'])} removed directories, {len(names_only)} known from "
          f"names only")
    drecs = [r for r in recs if is_dir(r)]
    t.check(f"{name}: one record per directory", len(drecs) == len(want), len(drecs))
    dest = os.path.join(tmp, name + "-dirs")
    rc, _, err = imgtest.run_cli(cli, ["extract", "--deleted", img, dest], timeout=300)
    with open(os.path.join(dest, MANIFEST)) as f:
        listed = {m["file"] for m in map(json.loads, f) if is_dir(m)}
    missing = [d["path"] for d in truth["dirs"] if d["path"] not in listed or
               not os.path.isdir(os.path.join(dest, d["path"]))]
    whole = all(is_dir(r) or r["status"] == "intact" for r in recs)
    t.check(f"{name}: extract --deleted creates every removed directory, in its manifest "
            f"(exit {0 if whole else 1}: versions not whole)",
            rc == (0 if whole else 1) and not missing, (rc, missing, err[-200:]))
    rc, out, err = imgtest.run_cli(cli, ["bodyfile", "--deleted", img], timeout=300)
    lines = out.decode(errors="replace").splitlines()
    missing = [d["path"] for d in truth["dirs"]
               if not any(line.split("|")[1].startswith("/" + d["path"] + " (deleted") and
                          line.split("|")[3].startswith("d/d") for line in lines)]
    t.check(f"{name}: bodyfile --deleted lists every removed directory (d/d..., (deleted))",
            rc == 0 and not missing, (rc, missing))
    rc, out, err = imgtest.run_cli(cli, ["cat", "--deleted", drecs[0]["id"], img], timeout=120)
    t.check(f"{name}: cat --deleted of a directory: exit 2, no bytes, says why",
            rc == 2 and not out and b"directory" in err, (rc, err[-200:]))


def check_dropped_dirs(t, name, recs, truth):
    """Images whose generator removed no directory by hand (single, two
    devices): the directory records are exactly the directories of the
    dropped subvolume, those on the paths of its versions."""
    want = set()
    for v in truth["versions"]:
        if v["fate"] == "dropped-subvolume":
            parts = v["path"].split("/")[:-1]
            want |= {("/".join(parts[:i]), "dropped-subvolume") for i in range(1, len(parts) + 1)}
    got = sorted((r["path"], r["kind"]) for r in recs if is_dir(r))
    t.check(f"{name}: one directory record per directory of the dropped subvolume "
            f"({len(want)})", got == sorted(want), got)


def check_partial(t, cli, img, recs, truth, name):
    """Partial records: every 4 KiB of cat --deleted's output that no bad
    range touches is that 4 KiB of a version written at that path (the
    truth's per-sector hashes)."""
    sectors = collections.defaultdict(set)
    for v in truth["versions"]:
        for i, h in enumerate(v["sectors"]):
            sectors[(v["path"], i)].add(h)
    checked, wrong = 0, []
    for r in recs:
        if r["status"] != "partial" or is_dir(r):
            continue
        rc, out, err = imgtest.run_cli(cli, ["cat", "--deleted", r["id"], img], timeout=120)
        if rc != 1 or len(out) != r["size"]:
            wrong.append((r["id"], "cat", rc, len(out)))
            continue
        for i in range(0, len(out), 4096):
            end = min(i + 4096, len(out))
            if any(b["offset"] < end and i < b["offset"] + b["length"] for b in r["bad_ranges"]):
                continue
            checked += 1
            if hashlib.sha256(out[i:end]).hexdigest()[:16] not in sectors[(r["path"], i // 4096)]:
                wrong.append((r["id"], r["path"], i))
    t.check(f"{name}: partial records: {checked} readable sectors, each one the truth's",
            not wrong, wrong[:5])
    return checked


def progs_shas(imgs, script):
    """What btrfs-progs recovers (bench/forensic_progs.py); None when it
    cannot run (not installed; several devices need root and loop
    devices)."""
    if not (shutil.which("btrfs-find-root") and shutil.which("btrfs")):
        return None
    if len(imgs) > 1 and (os.geteuid() != 0 or not shutil.which("losetup")):
        return None
    p = subprocess.run([sys.executable, script, *imgs], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, timeout=600)
    return set(json.loads(p.stdout)["sha256"]) if p.returncode == 0 else None


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    progs_script = os.path.join(imgtest.REPO, "bench", "forensic_progs.py")
    t = imgtest.Tally()
    src = os.path.join(testdata, "forensic")
    with tempfile.TemporaryDirectory(prefix="test_forensic.") as tmp:
        img = imgtest.private_copy(os.path.join(src, "single.img.zst"), tmp)
        truth = imgtest.load_json(os.path.join(src, "single.truth.json"))
        recs = deleted(cli, [img], t, "single")
        claims(t, "single", recs, truth)
        progs = progs_shas([img], progs_script)
        rates(t, "single", recs, truth, progs)
        check_dropped_dirs(t, "single", recs, truth)
        # two 1 MiB files written, the inode item committed at size 0
        art = check_artefacts(t, cli, [img], recs, "single", want=2)
        check_bad_zeros(t, cli, [img], recs, "single")
        check_cat(t, cli, img, recs)
        check_json_documented(t, recs)
        check_extract(t, cli, img, recs, tmp, art)
        check_extract_versions(t, cli, img, [r for r in recs if r["id"] not in art], truth, tmp)
        check_cat_raw(t, cli, img, recs, tmp)
        check_destination(t, cli, img, [r for r in recs if r["id"] not in art], tmp)
        check_manifest_name(t, cli, tmp)
        check_deleted_meta(t, cli, tmp)
        check_bodyfile(t, cli, img, tmp)
        check_bodyfile_base(t, cli, img, recs, tmp)
        svimg = imgtest.private_copy(os.path.join(testdata, "files", "subvols.img.zst"), tmp)
        check_bodyfile_subvols(t, cli, svimg, tmp)
        os.unlink(svimg)
        check_history(t, cli, img, super_generation(img))

        disk = os.path.join(tmp, "mbr-disk.img")
        mbr_wrap(img, disk)
        got = deleted(cli, [disk], t, "MBR whole disk")
        t.check("MBR whole disk: the same records as the bare filesystem",
                sorted(map(key, got)) == sorted(map(key, recs)), (len(got), len(recs)))
        os.unlink(disk)

        check_hostile(t, cli, img, recs, truth, tmp)
        check_forged_size(t, cli, img, recs, tmp)
        check_lagging_inode(t, cli, img, recs, tmp)

        orphan = imgtest.private_copy(os.path.join(src, "orphan.img.zst"), tmp)
        want = imgtest.load_json(os.path.join(src, "orphan.truth.json"))["orphan"]
        got = [r for r in deleted(cli, [orphan], t, "orphan") if r["kind"] == "orphan"]
        t.check("orphan: the file unlinked while open, intact, its bytes and name",
                [(r["objectid"], r["status"], r.get("sha256"), r["size"], r["nlink"], r["path"])
                 for r in got] == [(want["ino"], "intact", want["sha256"], want["size"], 0,
                                    want["path"])], got)

        span = imgtest.private_copy(os.path.join(src, "span.img.zst"), tmp)
        want = imgtest.load_json(os.path.join(src, "span.truth.json"))["span"]
        got = [(r["status"], r["verified"], r.get("sha256"), r["size"], r["path"])
               for r in deleted(cli, [span], t, "span") if r["size"] == want["size"]]
        t.check("span: a deleted file whose extent items fill several leaves, whole and "
                "verified", got == [("intact", True, want["sha256"], want["size"], want["path"])],
                got)

        devs = [imgtest.private_copy(os.path.join(src, f"multi.{i}.img.zst"), tmp)
                for i in (1, 2)]
        mtruth = imgtest.load_json(os.path.join(src, "multi.truth.json"))
        mrecs = deleted(cli, devs, t, "two devices")
        claims(t, "two devices", mrecs, mtruth)
        rates(t, "two devices", mrecs, mtruth, progs_shas(devs, progs_script))
        check_dropped_dirs(t, "two devices", mrecs, mtruth)
        check_artefacts(t, cli, devs, mrecs, "two devices")
        check_bad_zeros(t, cli, devs, mrecs, "two devices")
        for d in devs:
            os.unlink(d)

        checked = 0
        for name in ("churn", "wrap"):
            churn = imgtest.private_copy(os.path.join(src, name + ".img.zst"), tmp)
            ctruth = imgtest.load_json(os.path.join(src, name + ".truth.json"))
            crecs = deleted(cli, [churn], t, name)
            claims(t, name, crecs, ctruth)
            rates(t, name, crecs, ctruth, progs_shas([churn], progs_script), strict=True)
            check_dirs(t, cli, churn, crecs, ctruth, tmp, name)
            check_artefacts(t, cli, [churn], crecs, name)
            check_bad_zeros(t, cli, [churn], crecs, name)
            checked += check_partial(t, cli, churn, crecs, ctruth, name)
            os.unlink(churn)
        t.check(f"partial records of churn and wrap: {checked} readable sectors checked",
                checked > 0, checked)
    return t.summary()


if __name__ == "__main__":
    sys.exit(main())
