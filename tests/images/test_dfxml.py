#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_dfxml.py: `btrfsimg dfxml` on the kernel-made images.

    test_dfxml.py BTRFSIMG TESTDATA

Checked, on every testdata/files image against its recorded kernel view
(NAME.view.jsonl) and on the forensic image testdata/forensic/single:
  - the output validates against the DFXML 2.0.0-beta.0 schema
    (testdata/dfxml/schema, xmllint --noout --schema);
  - parsed with xml.etree: one fileobject per path of the kernel view, no
    other live one; each with the view's size, type and permission bits,
    nlink, uid, gid, the four times to the nanosecond (a stub directory's
    volatile times aside, as test_files.py), symlink target, and with
    --hash the view's SHA-256 and the MD5 of `btrfsimg cat`'s bytes (a
    spread of files); names that are not printable UTF-8 are marked
    btrfsimg:escaped and unescape to the exact bytes;
  - byte runs tile [0, size) in order, no gap and no overlap (compressed
    parts of one extent share a range); the bytes at img_offset..+len of
    the image are the file's bytes at file_offset for uncompressed data,
    and bytes outside data runs (holes, prealloc) read as zeros;
  - through an MBR partition, DUP, RAID1 and RAID10 (testdata/images):
    every copy of a data run (the first, then btrfsimg:other_copies) holds
    the file's bytes at its img_offset in its image; img_offset counts the
    partition's start;
  - inside qcow2 (qemu-img convert): no img_offset, btrfsimg:disk_offset
    (the raw image's img_offset for that run) and a note;
  - btrfsimg:csum on data runs: nodatasum for the NODATASUM files of the
    forensic image, full for its regular ones;
  - --deleted: every record of `deleted --json` is a fileobject with its
    id, alloc 0 and unalloc 1, kind, status and generation; intact
    versions with --hash carry the SHA-256 of `cat --deleted`, and the
    truth's (gen_forensic.py) for that path;
  - -f FILE: the document in FILE; an existing file or a link there is
    refused (exit 2) and left as it was.
The last line is "N passed, M failed".
"""
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

NS = "http://www.forensicswiki.org/wiki/Category:Digital_Forensics_XML"
BNS = "urn:btrfsimg:dfxml"
TIMEOUT = 600
CAT_PER_IMAGE = 12
TYPE_LETTER = {stat.S_IFREG: "r", stat.S_IFDIR: "d", stat.S_IFLNK: "l", stat.S_IFCHR: "c",
               stat.S_IFBLK: "b", stat.S_IFIFO: "p", stat.S_IFSOCK: "s"}
TIMES = (("mtime", "mtime"), ("ctime", "ctime"), ("atime", "atime"), ("crtime", "btime"))

t = imgtest.Tally()


def q(tag):
    return "{%s}%s" % (NS, tag)


def b(tag):
    return "{%s}%s" % (BNS, tag)


def validate(schema, path):
    p = subprocess.run(["xmllint", "--noout", "--schema", schema, path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
    return p.returncode == 0, p.stderr.decode(errors="replace")[-600:]


def name_bytes(el):
    """The exact bytes of a filename element (escaped ones undone)."""
    text = (el.text or "").encode()
    if el.get(b("escaped")) == "1":
        return imgtest.text_unescape(text)
    return text


def iso(sec, nsec):
    import datetime
    d = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=sec)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + ".%09dZ" % nsec


def fileobjects(root):
    vols = root.findall(q("volume"))
    return [fo for v in vols for fo in v.findall(q("fileobject"))]


def text_of(fo, tag):
    el = fo.find(q(tag))
    return None if el is None else el.text


def run_dfxml(cli, args, out):
    """`dfxml ARGS` into @out (-f); (exit status, stderr)."""
    rc, _, err = imgtest.run_cli(cli, ["dfxml", "-f", out] + args, timeout=TIMEOUT)
    return rc, err.decode(errors="replace")


def check_fields(fo, rec, kv):
    """Differences between a fileobject and the kernel's record."""
    probs = []
    mode = rec["mode"]
    stub = rec.get("ino") == kv.STUB_INO and stat.S_ISDIR(mode)
    want = {
        "filesize": str(rec["size"]), "mode": str(mode & 0o7777), "nlink": str(rec["nlink"]),
        "uid": str(rec["uid"]), "gid": str(rec["gid"]),
        "name_type": TYPE_LETTER.get(stat.S_IFMT(mode), "-"), "alloc": "1",
    }
    for tag, v in want.items():
        if text_of(fo, tag) != v:
            probs.append("%s: have %r expect %r" % (tag, text_of(fo, tag), v))
    ino = fo.find(q("inode"))
    # a stub directory has no subvolume in the kernel's view (None)
    if ino is None or ino.text != str(rec["ino"]) or (
            rec["subvol"] is not None and ino.get(b("subvol")) != str(rec["subvol"])):
        probs.append("inode: have %r expect %s in subvolume %s" % (
            None if ino is None else (ino.text, ino.get(b("subvol"))), rec["ino"], rec["subvol"]))
    for tag, key in TIMES:
        if stub and tag != "atime":
            continue
        if text_of(fo, tag) != iso(*rec[key]):
            probs.append("%s: have %r expect %r" % (tag, text_of(fo, tag), iso(*rec[key])))
    if rec.get("target") is not None:
        el = fo.find(q("link_target"))
        have = None if el is None else name_bytes(el)
        if have != os.fsencode(rec["target"]):
            probs.append("link_target: have %r expect %r" % (have, rec["target"]))
    return probs


def hashes(fo):
    return {h.get("type"): h.text for h in fo.findall(q("hashdigest"))}


def check_runs(fo, size, img, content):
    """Problems of the byte runs of a regular file of @size whose bytes
    are @content (None: not read), in image file @img."""
    runs = fo.find(q("byte_runs"))
    if runs is None:
        return ["no byte_runs"]
    probs, at = [], 0
    with open(img, "rb") as f:
        for r in runs.findall(q("byte_run")):
            off, ln = int(r.get("file_offset")), int(r.get("len"))
            comp = r.get(b("compression")) and r.get("type") != "resident"
            if comp and r.get("uncompressed_len") is None:
                continue  # a further part of one compressed extent's bytes
            span = int(r.get("uncompressed_len")) if comp else ln
            if off != at:
                probs.append("run at %d, expected %d (gap or overlap)" % (off, at))
            at = off + span
            if content is None:
                continue
            if r.get("fill") == "0":
                if content[off:off + ln].strip(b"\0"):
                    probs.append("fill run %d+%d holds non-zero bytes" % (off, ln))
            elif r.get("type") != "resident" and not comp and r.get("img_offset"):
                f.seek(int(r.get("img_offset")))
                if f.read(ln) != content[off:off + ln]:
                    probs.append("run %d+%d: image bytes at %s differ from the file's" % (
                        off, ln, r.get("img_offset")))
    if at < size:
        probs.append("runs end at %d, file size %d" % (at, size))
    return probs


def one_image(cli, testdata, schema, tmp, name):
    kv = imgtest.import_kview(testdata)
    img = imgtest.private_copy(os.path.join(testdata, "files", name + ".img.zst"), tmp)
    view = imgtest.load_jsonl(os.path.join(testdata, "files", name + ".view.jsonl"))
    out = os.path.join(tmp, name + ".dfxml")
    rc, err = run_dfxml(cli, ["--hash", img], out)
    t.check("%s dfxml --hash: exit 0" % name, rc == 0, "exit %r: %s" % (rc, err[-400:]))
    if rc is None or not os.path.exists(out):
        return
    okv, msg = validate(schema, out)
    t.check("%s: valid against the DFXML schema" % name, okv, msg)
    root = ET.parse(out).getroot()
    t.check("%s: <dfxml version=2.0.0-beta.0>" % name,
            root.tag == q("dfxml") and root.get("version") == "2.0.0-beta.0", root.attrib)
    fos = fileobjects(root)
    by_path = {}
    for fo in fos:
        p = name_bytes(fo.find(q("filename")))
        by_path.setdefault(p, []).append(fo)
    probs, seen = [], set()
    for rec in view:
        p = os.fsencode(rec["path"]) or b"."
        seen.add(p)
        got = by_path.get(p)
        if not got:
            probs.append("%r: no fileobject" % p)
            continue
        for d in check_fields(got[0], rec, kv):
            probs.append("%r: %s" % (p, d))
        if rec.get("sha256") and hashes(got[0]).get("sha256") != rec["sha256"]:
            probs.append("%r: sha256 have %r expect %s" % (p, hashes(got[0]).get("sha256"),
                                                          rec["sha256"]))
    extra = [p for p in by_path if p not in seen]
    if extra:
        probs.append("fileobjects for paths the kernel does not show: %r" % extra[:5])
    probs.extend("%r: %d fileobjects" % (p, len(v)) for p, v in by_path.items() if len(v) > 1)
    t.problems("%s: every path of the kernel's view, its fields equal" % name, probs[:20])
    escaped = [fo for fo in fos if fo.find(q("filename")).get(b("escaped")) == "1"]
    if any(not all(0x20 <= c < 0x7f or c >= 0xa0 for c in os.fsencode(r["path"]))
           or b"\\" in os.fsencode(r["path"]) for r in view):
        t.check("%s: names XML cannot carry are escaped and marked" % name, escaped,
                "no filename marked btrfsimg:escaped")
    regs = [r for r in view if stat.S_ISREG(r["mode"])]
    regs.sort(key=lambda r: (-r["size"], r["path"]))
    pick = regs[:CAT_PER_IMAGE // 2] + regs[len(regs) // 2:len(regs) // 2 + CAT_PER_IMAGE // 2]
    probs = []
    for rec in pick:
        p = os.fsencode(rec["path"])
        rc, data, _ = imgtest.run_cli(cli, ["cat", "--path", p, img], timeout=TIMEOUT)
        if rc != 0:
            probs.append("%r: cat exit %r" % (p, rc))
            continue
        fo = by_path[p][0]
        if hashes(fo).get("md5") != hashlib.md5(data).hexdigest():
            probs.append("%r: md5 have %r expect %s" % (p, hashes(fo).get("md5"),
                                                       hashlib.md5(data).hexdigest()))
        probs.extend("%r: %s" % (p, x) for x in check_runs(fo, rec["size"], img, data))
    t.problems("%s: md5 and byte runs of %d files against cat (image bytes at "
               "img_offset)" % (name, len(pick)), probs[:20])
    probs = []
    for rec in regs:
        p = os.fsencode(rec["path"])
        if p in by_path:
            probs.extend("%r: %s" % (p, x) for x in check_runs(by_path[p][0], rec["size"],
                                                                img, None))
    t.problems("%s: byte runs of every regular file tile [0, size)" % name, probs[:20])
    bad = [text_of(fo, "filename") for fo in fos
           if (text_of(fo, "compressed") == "1") !=
           any(r.get(b("compression")) for r in fo.iter(q("byte_run")))]
    t.check("%s: <compressed> exactly where a byte run is compressed" % name, not bad, bad[:5])


def forensic(cli, testdata, schema, tmp):
    img = imgtest.private_copy(os.path.join(testdata, "forensic", "single.img.zst"), tmp)
    truth = imgtest.load_json(os.path.join(testdata, "forensic", "single.truth.json"))
    rc, data, err = imgtest.run_cli(cli, ["deleted", "--json", img], timeout=TIMEOUT)
    recs = [json.loads(x) for x in data.splitlines() if x.strip()]
    t.check("single: deleted --json lists versions", rc in (0, 1) and recs, err[-300:])
    out = os.path.join(tmp, "single.dfxml")
    rc, err = run_dfxml(cli, ["--deleted", "--hash", img], out)
    t.check("single dfxml --deleted --hash: exit 0 or 1", rc in (0, 1), "exit %r: %s" % (rc, err))
    if not os.path.exists(out):
        return
    okv, msg = validate(schema, out)
    t.check("single --deleted: valid against the DFXML schema", okv, msg)
    fos = fileobjects(ET.parse(out).getroot())
    by_id = {text_of(fo, "id"): fo for fo in fos}
    empty = hashlib.sha256(b"").hexdigest()
    written = {v["sha256"] for v in truth["versions"]}
    truth_sums = {}
    for v in truth["versions"]:
        truth_sums.setdefault(v["path"], set()).add(v["sha256"])
    probs = []
    for r in recs:
        fo = by_id.get(r["id"])
        if fo is None:
            probs.append("%s: no fileobject" % r["id"])
            continue
        want = {"alloc": "0", "unalloc": "1", "filesize": str(r["size"]),
                "uid": str(r["uid"]), "gid": str(r["gid"])}
        for tag, v in want.items():
            if text_of(fo, tag) != v:
                probs.append("%s: %s have %r expect %r" % (r["id"], tag, text_of(fo, tag), v))
        for tag, v in (("kind", r["kind"]), ("status", r["status"]),
                       ("generation", str(r["generation"]))):
            if fo.findtext(b(tag)) != v:
                probs.append("%s: btrfsimg:%s have %r expect %r" % (r["id"], tag,
                                                                   fo.findtext(b(tag)), v))
        if name_bytes(fo.find(q("filename"))) != r["path"].encode():
            probs.append("%s: filename %r, deleted says %r" % (r["id"], fo.findtext(q("filename")),
                                                               r["path"]))
        if r["status"] == "intact" and not stat.S_ISDIR(r["mode"]):
            sha = hashes(fo).get("sha256")
            rc, data, _ = imgtest.run_cli(cli, ["cat", "--deleted", r["id"], img], timeout=TIMEOUT)
            if sha != hashlib.sha256(data).hexdigest():
                probs.append("%s: sha256 %r, cat --deleted gives %s" % (
                    r["id"], sha, hashlib.sha256(data).hexdigest()))
            elif sha not in written or (sha != empty and sha not in truth_sums.get(r["path"], ())):
                probs.append("%s: sha256 %s was never written to %s" % (r["id"], sha, r["path"]))
            # the version's byte runs: where cat --deleted's bytes lie in the image
            probs += ["%s: %s" % (r["id"], p) for p in check_runs(fo, r["size"], img, data)]
            bad = [x for x in fo.iter(q("byte_run")) if x.get(b("bad"))]
            if bad:
                probs.append("%s: intact, yet a run says btrfsimg:bad=%r" % (r["id"],
                                                                           bad[0].get(b("bad"))))
        elif not stat.S_ISDIR(r["mode"]):
            runs = list(fo.iter(q("byte_run")))
            if not runs and r["size"]:
                probs.append("%s: %s version without byte runs" % (r["id"], r["status"]))
            elif r.get("bad_ranges") and not any(x.get(b("bad")) for x in runs):
                probs.append("%s: bad ranges %r, no run says btrfsimg:bad" % (
                    r["id"], r["bad_ranges"]))
    live = [fo for fo in fos if text_of(fo, "alloc") == "1"]
    csum = {}
    for fo in live:
        kind = os.path.basename(fo.findtext(q("filename")) or "").split("-")[0]
        for r in fo.iter(q("byte_run")):
            if r.get("fs_offset") is not None:
                csum.setdefault(kind, set()).add(r.get(b("csum")))
    t.check("single: data runs of nodatasum-* files say csum nodatasum, of regular-* full",
            csum.get("nodatasum") == {"nodatasum"} and csum.get("regular") == {"full"}, csum)
    if len(live) + len(recs) != len(fos):
        probs.append("%d fileobjects: %d live + %d recovered expected" % (
            len(fos), len(live), len(recs)))
    t.problems("single: every recovered version, alloc 0 / unalloc 1, id, kind, status, "
               "generation, sha256, byte runs (image bytes = cat --deleted's; btrfsimg:bad)",
               probs[:20])


def copies_of(fo):
    """[(file_offset, len, [(devid, image_offset or None)...])] of the
    uncompressed data runs: the first copy, then btrfsimg:other_copies."""
    out = []
    runs = fo.find(q("byte_runs"))
    for r in [] if runs is None else runs.findall(q("byte_run")):
        if r.get("fs_offset") is None or r.get(b("compression")):
            continue
        cs = [(r.get(b("devid")), r.get(b("image")), r.get("img_offset"), r.get("fs_offset"))]
        for c in (r.get(b("other_copies")) or "").split():
            devid, phys, img, off = c.split(":")
            cs.append((devid, None if img == "-" else img, None if off == "-" else off, phys))
        out.append((int(r.get("file_offset")), int(r.get("len")), cs))
    return out


def layouts(cli, testdata, schema, tmp):
    """Byte runs through a partition table, DUP and RAID: every copy's
    bytes at its img_offset are the file's."""
    for name, files, args in (("mbr1", ["disk.img"], ["--partition", "1"]),
                              ("dup", ["dev1.img"], []),
                              ("raid1", ["dev1.img", "dev2.img"], []),
                              ("raid10", ["dev1.img", "dev2.img", "dev3.img", "dev4.img"], [])):
        src = os.path.join(testdata, "images", name)
        if not os.path.exists(os.path.join(src, files[0] + ".zst")):
            print("skip %s: not in testdata/images" % name)
            continue
        imgs = [imgtest.private_copy(os.path.join(src, f + ".zst"), tmp) for f in files]
        out = os.path.join(tmp, name + ".dfxml")
        rc, err = run_dfxml(cli, args + imgs, out)
        t.check("%s dfxml: exit 0" % name, rc == 0, "exit %r: %s" % (rc, err[-300:]))
        if rc != 0:
            continue
        okv, msg = validate(schema, out)
        t.check("%s: valid against the DFXML schema" % name, okv, msg)
        fos = [fo for fo in fileobjects(ET.parse(out).getroot()) if text_of(fo, "name_type") == "r"]
        dev_image = {}
        for fo in fos:
            for _, _, cs in copies_of(fo):
                dev_image.update((c[0], imgs[int(c[1]) - 1]) for c in cs if c[1])
        probs, checked, shifted = [], 0, False
        for fo in fos[:40]:
            runs = copies_of(fo)
            if not runs:
                continue
            p = name_bytes(fo.find(q("filename")))
            rc, data, _ = imgtest.run_cli(cli, ["cat", "--path", p] + args + imgs, timeout=TIMEOUT)
            for off, ln, cs in runs:
                for devid, _, img_off, fs_off in cs:
                    if img_off is None or devid not in dev_image:
                        probs.append("%r: run %d+%d: a copy on devid %s without img_offset"
                                     % (p, off, ln, devid))
                        continue
                    shifted |= img_off != fs_off
                    with open(dev_image[devid], "rb") as f:
                        f.seek(int(img_off))
                        if f.read(ln) != data[off:off + ln]:
                            probs.append("%r: run %d+%d, copy on devid %s at %s differs"
                                         % (p, off, ln, devid, img_off))
                    checked += 1
        copies = {len(cs) for fo in fos for _, _, cs in copies_of(fo)}
        t.problems("%s: %d copies of data runs read back at img_offset" % (name, checked),
                   probs[:10] + ([] if checked else ["no data run checked"]))
        profile = imgtest.load_json(os.path.join(src, "manifest.json"))["profile"]["data"]
        want = {"single": 1, "dup": 2, "raid1": 2, "raid10": 2}[profile]
        t.check("%s: data runs list %d copies" % (name, want), copies == {want}, copies)
        if name == "mbr1":
            t.check("mbr1: img_offset counts the partition's start (not fs_offset)", shifted)


def container(cli, testdata, schema, tmp):
    """Inside a qcow2 container the bytes do not lie in the image file as
    they are: no img_offset, btrfsimg:disk_offset (in the disk the
    container holds) and a note instead; disk_offset is where the raw
    image, given as it is, has the run (its img_offset)."""
    if not shutil.which("qemu-img"):
        print("skip qcow2: qemu-img not found (qemu-utils)")
        return
    raw = imgtest.private_copy(os.path.join(testdata, "files", "extents.img.zst"), tmp)
    qcow = os.path.join(tmp, "extents.qcow2")
    subprocess.run(["qemu-img", "convert", "-O", "qcow2", raw, qcow], check=True,
                   timeout=TIMEOUT)
    out = os.path.join(tmp, "qcow2.dfxml")
    rc, err = run_dfxml(cli, [qcow], out)
    t.check("qcow2 dfxml: exit 0", rc == 0, "exit %r: %s" % (rc, err[-300:]))
    if rc != 0:
        return
    okv, msg = validate(schema, out)
    t.check("qcow2: valid against the DFXML schema", okv, msg)
    rawout = os.path.join(tmp, "raw.dfxml")
    run_dfxml(cli, [raw], rawout)

    def runs_by_file(path):
        out = {}
        for fo in fileobjects(ET.parse(path).getroot()):
            for r in fo.iter(q("byte_run")):
                if r.get("fs_offset") is not None and not r.get(b("compression")):
                    out[(fo.findtext(q("filename")), r.get("file_offset"))] = r
        return out
    raw_runs = runs_by_file(rawout)
    probs, checked = [], 0
    for k, r in runs_by_file(out).items():
        if r.get("img_offset") is not None or not r.get(b("note")) or \
                k not in raw_runs or r.get(b("disk_offset")) != raw_runs[k].get("img_offset"):
            probs.append("%s: img_offset %r, disk_offset %r (raw: %r), note %r" % (
                k, r.get("img_offset"), r.get(b("disk_offset")),
                k in raw_runs and raw_runs[k].get("img_offset"), r.get(b("note"))))
            continue
        checked += 1
    t.problems("qcow2: %d data runs: disk_offset and a note, no img_offset" % checked,
               probs[:10] + ([] if checked else ["no data run"]))


def output_file(cli, testdata, tmp):
    img = imgtest.private_copy(os.path.join(testdata, "files", "special.img.zst"), tmp)
    out = os.path.join(tmp, "new.dfxml")
    rc, err = run_dfxml(cli, [img], out)
    rc2, data, _ = imgtest.run_cli(cli, ["dfxml", img], timeout=TIMEOUT)
    same = os.path.exists(out) and open(out, "rb").read().split(b"<source>")[1] == \
        data.split(b"<source>")[1]
    t.check("-f FILE: the document standard output gets", rc == 0 and rc2 == 0 and same,
            "exit %r/%r: %s" % (rc, rc2, err))
    if os.path.exists("/dev/full"):
        with open("/dev/full", "wb") as full:
            rc, _, err = imgtest.run_cli(cli, ["dfxml", img], timeout=TIMEOUT, stdout=full)
        t.check("a write error (standard output /dev/full): exit 2, said", rc == 2 and
                b"write error" in err, "exit %r: %r" % (rc, err[-300:]))
    victim = os.path.join(tmp, "victim")
    with open(victim, "wb") as f:
        f.write(b"keep")
    link = os.path.join(tmp, "link.dfxml")
    os.symlink(victim, link)
    for what, path in (("an existing file", victim), ("a link", link),
                       ("a dangling link", os.path.join(tmp, "dangling"))):
        if what == "a dangling link":
            os.symlink(os.path.join(tmp, "nowhere"), path)
        rc, err = run_dfxml(cli, [img], path)
        t.check("-f onto %s: refused (exit 2), nothing written" % what,
                rc == 2 and "cannot create" in err and open(victim, "rb").read() == b"keep"
                and not os.path.exists(os.path.join(tmp, "nowhere")),
                "exit %r: %s" % (rc, err))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    cli, testdata = sys.argv[1], sys.argv[2]
    schema = os.path.join(testdata, "dfxml", "schema", "dfxml.xsd")
    for tool in ("xmllint", "zstd"):
        if not shutil.which(tool):
            print("skip: %s not found (Debian: libxml2-utils, zstd; scripts/deps.sh)" % tool)
            return imgtest.SKIP
    names = sorted(f[:-len(".img.zst")] for f in os.listdir(os.path.join(testdata, "files"))
                   if f.endswith(".img.zst")
                   and os.path.exists(os.path.join(testdata, "files",
                                                   f[:-len(".img.zst")] + ".view.jsonl")))
    with tempfile.TemporaryDirectory(prefix="test_dfxml.") as tmp:
        for name in names:
            d = os.path.join(tmp, name)
            os.mkdir(d)
            one_image(cli, testdata, schema, d, name)
            shutil.rmtree(d)
        d = os.path.join(tmp, "forensic")
        os.mkdir(d)
        forensic(cli, testdata, schema, d)
        d = os.path.join(tmp, "layouts")
        os.mkdir(d)
        layouts(cli, testdata, schema, d)
        d = os.path.join(tmp, "container")
        os.mkdir(d)
        container(cli, testdata, schema, d)
        d = os.path.join(tmp, "out")
        os.mkdir(d)
        output_file(cli, testdata, d)
    return t.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
