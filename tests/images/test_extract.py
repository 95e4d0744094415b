#!/usr/bin/env python3
"""extract, bodyfile and degraded reads against the kernel's recorded view.

    test_extract.py BTRFSIMG TESTDATA

- `extract` of committed files-layer images: every path the kernel shows must
  exist in DESTDIR with the kernel's type, permission bits, owner (as root),
  size, mtime, contents (sha256), symlink target, and hard links as links.
- `extract` into a DESTDIR holding links where the image's entries go: none
  followed, nothing written outside, each such entry an error (exit 1).
- `bodyfile`: one line per path, with SUBVOL-OBJECTID, size and times as the
  kernel reports them.
- degraded: `walk --hash` of a RAID1 image with one device left out equals the
  full read.
Prints 'N passed, M failed'.
"""
import os, shutil, stat, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

CLI, TESTDATA = sys.argv[1], sys.argv[2]
tally = imgtest.Tally()
check = tally.check


def fsencode(p):
    return p.encode("utf-8", "surrogateescape")


def run(args):
    return imgtest.run_cli(CLI, args)


def test_extract(name, img, view, work):
    dest = os.path.join(work, "x-" + name)
    rc, out, err = run(["extract", img, dest])
    check(f"{name}: extract exit", rc in (0, 1), err[-300:])
    bad, links = [], {}
    for r in view:
        if not r["path"]:
            continue
        path = os.path.join(fsencode(dest), fsencode(r["path"]))
        try:
            st = os.lstat(path)
        except OSError as e:
            bad.append((r["path"], str(e)))
            continue
        if stat.S_IFMT(st.st_mode) != stat.S_IFMT(r["mode"]):
            bad.append((r["path"], "type", oct(st.st_mode), oct(r["mode"])))
            continue
        if not stat.S_ISLNK(st.st_mode) and (st.st_mode & 0o7777) != (r["mode"] & 0o7777):
            bad.append((r["path"], "mode", oct(st.st_mode), oct(r["mode"])))
        if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (r["uid"], r["gid"]):
            bad.append((r["path"], "owner", (st.st_uid, st.st_gid), (r["uid"], r["gid"])))
        if stat.S_ISREG(st.st_mode):
            if st.st_size != r["size"]:
                bad.append((r["path"], "size", st.st_size, r["size"]))
            elif r.get("sha256") and imgtest.sha256_file(path) != r["sha256"]:
                bad.append((r["path"], "sha256"))
            # the destination filesystem (ext4) stores seconds up to 2^34
            fits = 0 <= r["mtime"][0] < 2**34
            if fits and [st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9] != r["mtime"]:
                bad.append((r["path"], "mtime", st.st_mtime_ns, r["mtime"]))
            if r["nlink"] > 1:
                links.setdefault((r["subvol"], r["ino"]), set()).add((st.st_dev, st.st_ino))
        if stat.S_ISLNK(st.st_mode) and r.get("target") is not None:
            if os.readlink(path) != fsencode(r["target"]):
                bad.append((r["path"], "target"))
    check(f"{name}: extracted tree equals the kernel's view ({len(view)} paths)", not bad,
          str(bad[:5]))
    split = [k for k, v in links.items() if len(v) != 1]
    check(f"{name}: hard links extracted as links ({len(links)} inodes)", not split,
          str(split[:5]))


def test_planted(img, view, work):
    """extract into a DESTDIR holding links where the image's entries go
    (a directory's, a file's, a dangling one): none is followed, nothing
    is written outside, each such entry refused as a clash, not damage
    (exit 2), the rest of the tree is extracted."""
    base = os.path.join(work, "planted")
    victim, outside = os.path.join(base, "victim"), os.path.join(base, "outside")
    os.makedirs(outside)
    with open(victim, "wb") as f:
        f.write(b"precious\n")
    tops = [r for r in view if r["path"] and "/" not in r["path"]]
    dirs = [r["path"] for r in tops if stat.S_ISDIR(r["mode"])]
    dest = os.path.join(base, "top")
    os.mkdir(dest)
    os.symlink(outside, os.path.join(dest, dirs[0]))
    # --path of a directory: its children go straight into DESTDIR
    under = [r for r in view if r["path"].startswith("meta/") and stat.S_ISREG(r["mode"])]
    sub = os.path.join(base, "meta")
    os.mkdir(sub)
    planted = {under[0]["path"]: victim, under[1]["path"]: os.path.join(outside, "made")}
    for p, target in planted.items():
        os.symlink(target, os.path.join(sub, os.path.basename(p)))
    runs = [("a link at a directory's place", ["extract", img, dest], [dirs[0]],
             os.path.join(dest, dirs[1])),
            ("links at files' places (--path)", ["extract", "--path", "meta", img, sub],
             [os.path.basename(p) for p in planted], os.path.join(sub, under[2]["path"][5:]))]
    for what, args, refused, made in runs:
        rc, _, err = run(args)
        with open(victim, "rb") as f:
            kept = f.read() == b"precious\n"
        said = all(("extract: %s: " % r).encode() in err for r in refused) and \
            b"not damage in the image" in err
        check(f"extract into a DESTDIR with {what}: nothing outside, each refused as a clash "
              f"(exit 2, not damage), the rest extracted", rc == 2 and kept and not os.listdir(outside) and said and
              os.path.lexists(made), (rc, err[-300:]))
    # a link where a symlink goes: refused, and left as it was (its times too)
    links = [r for r in view if r["path"].startswith("symlinks/") and stat.S_ISLNK(r["mode"])]
    dest = os.path.join(base, "symlinks")
    os.mkdir(dest)
    mine = os.path.join(dest, os.path.basename(links[0]["path"]))
    os.symlink(victim, mine)
    os.utime(mine, ns=(10**18, 10**18), follow_symlinks=False)
    rc, _, err = run(["extract", "--path", "symlinks", img, dest])
    st = os.lstat(mine)
    check("extract into a DESTDIR with a link at a symlink's place: refused (exit 2), the "
          "link left as it was, times too", rc == 2 and os.readlink(mine) == victim and
          st.st_mtime_ns == 10**18 and st.st_atime_ns == 10**18, (rc, st, err[-300:]))


def test_bodyfile(name, img, view):
    rc, out, err = run(["bodyfile", img])
    check(f"{name}: bodyfile exit", rc in (0, 1), err[-300:])
    lines = out.split(b"\n")[:-1]
    check(f"{name}: bodyfile has one line per path", len(lines) == len(view),
          f"{len(lines)} lines, {len(view)} paths")
    bad = []
    for line, r in zip(lines, view):
        f = line.split(b"|")
        if len(f) != 11:
            bad.append((r["path"], "fields", len(f)))
            continue
        inode = f"{r['subvol']}-{r['ino']}".encode()
        if r["subvol"] is not None and f[2] != inode:
            bad.append((r["path"], "inode", f[2], inode))
        stub = r["subvol"] is None  # its mtime is the kernel's lookup time
        if int(f[6]) != r["size"] or (not stub and int(f[8]) != r["mtime"][0]):
            bad.append((r["path"], "size/mtime", f[6], f[8]))
    check(f"{name}: bodyfile inode, size and mtime equal the kernel's", not bad, str(bad[:5]))


def test_degraded(work):
    d = os.path.join(TESTDATA, "images", "raid1")
    devs = [imgtest.private_copy(os.path.join(d, n + ".img.zst"), work) for n in ("dev1", "dev2")]
    full_rc, full_out, _ = run(["walk", "--json", "--hash"] + devs)
    for keep in devs:
        rc, out, err = run(["walk", "--json", "--hash", keep])
        check(f"raid1 with only {os.path.basename(keep)}: same walk and contents, exit 1",
              out == full_out and rc == 1 and full_rc == 0,
              f"rc {rc}/{full_rc} {err[-200:]!r}")
        check(f"raid1 with only {os.path.basename(keep)}: the missing device is reported once, "
              "not again for each block on it",
              b"devices missing" in err and b"trying the next copy" not in err,
              err[-400:].decode(errors="replace"))


def test_walk_text_hash(name, img, view):
    """`walk --hash` in text: the sha256 column holds the kernel's sha256 of
    each regular file's contents ("-" for other types). A symlink's line
    ends with " -> TARGET" (no name here holds " -> ")."""
    rc, out, err = run(["walk", "--hash", img])
    got = {}
    for line in out.splitlines()[1:]:  # after the header
        parts = line.split(None, 8)
        if len(parts) == 9:
            name = parts[8].split(b"  [stub]")[0].split(b" -> ")[0]
            got[imgtest.text_unescape(name)] = parts[7].decode()
    want = {fsencode(v["path"] or "."): (v["sha256"] or "-") for v in view}
    bad = [(k, got.get(k), w) for k, w in want.items() if got.get(k) != w]
    check(f"{name}: walk --hash (text) sha256 column equals the kernel's", not bad and
          rc == 0, f"rc {rc} {bad[:3]}")


def test_again(name, img, view, work):
    """extract into the DESTDIR an earlier extract filled: every entry's
    place is taken; that is the destination's doing, not damage: each said
    so, counted apart from errors, exit 2 (0 errors), nothing changed."""
    dest = os.path.join(work, "x-" + name)
    before = {p: os.lstat(os.path.join(dest, p)).st_mtime_ns for p in os.listdir(dest)}
    rc, _, err = run(["extract", img, dest])
    tops = {r["path"] for r in view if r["path"] and "/" not in r["path"]}
    after = {p: os.lstat(os.path.join(dest, p)).st_mtime_ns for p in os.listdir(dest)}
    summary = err.decode(errors="replace").strip().splitlines()[-1:]
    clashes = "%d not written: their place in DESTDIR taken (not damage)" % len(tops)
    check(f"{name}: extract again into the same DESTDIR: {len(tops)} clashes said, not "
          f"damage, 0 errors, exit 2, nothing changed", rc == 2 and summary and
          ", 0 errors, " + clashes in summary[0] and before == after and
          err.count(b"its place in DESTDIR is taken") == len(tops), (rc, summary))


def main():
    work = tempfile.mkdtemp(prefix="btrfsimg-extract.")
    try:
        for name in ("special", "subvols", "extents"):
            img = imgtest.private_copy(os.path.join(TESTDATA, "files", name + ".img.zst"), work)
            view = imgtest.load_jsonl(os.path.join(TESTDATA, "files", name + ".view.jsonl"))
            test_extract(name, img, view, work)
            test_again(name, img, view, work)
            test_bodyfile(name, img, view)
            test_walk_text_hash(name, img, view)
            if name == "special":
                test_planted(img, view, work)
            os.unlink(img)
            shutil.rmtree(os.path.join(work, "x-" + name), ignore_errors=True)
        test_degraded(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(tally.summary())


main()
