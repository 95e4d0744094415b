#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_files.py: the files layer against the kernel's recorded view.

    test_files.py BTRFSIMG TESTDATA [--only NAME[,NAME]] [--files-dir DIR]
                  [--max-diffs N]

For every testdata/files/NAME.img.zst (or NAME.img) and each recorded view
NAME[.VARIANT].view.jsonl (written by testdata/gen-files.sh with
testdata/gen_kview.py on a fresh ro,noatime mount of the real kernel):

  NAME[.V] walk      `btrfsimg walk --json --hash [V's flags] IMAGE`: the same
                     set of paths, and every field of every path equal to the
                     kernel's (see gen_kview.FIELDS); prints the first N diffs
  NAME[.V] order     the same paths in the same order: depth-first, children
                     in the kernel's readdir order (DIR_INDEX order)
  NAME[.V] cat P     sha256 of `btrfsimg cat --path P IMAGE` == the kernel's,
                     for a spread of regular files (P as walk prints it,
                     relative to the top level, passed as raw bytes)
  NAME --path P      `walk --path P`: the kernel's subtree under P, re-rooted
  NAME --subvol ID   `walk --subvol ID`: the kernel's subtree of subvolume ID

Variants: "" (default, log replayed like a mount) and "nolog"
(--no-log-replay; the kernel view is -o rescue=nologreplay).

The one documented exception: a stub directory (st_ino 2: a snapshot's entry
for a nested subvolume it does not contain) gets mtime/ctime/btime = the time
of lookup from the kernel (Linux 6.18 also sets no STATX_BTIME for it), so
those three fields are not compared for stubs; every other stub field is.
Hex strings (handles, hashes) compare case-insensitively; a field the CLI
leaves out counts as null. The last line is exactly "N passed, M failed".
"""
import argparse
import glob
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

VARIANT_ARGS = {"": [], "nolog": ["--no-log-replay"]}
TIMEOUT = 900
CAT_PER_VIEW = 10


def norm(field, v):
    """Values that may legally differ only in letter case."""
    if isinstance(v, str) and field == "sha256":
        return v.lower()
    if isinstance(v, dict) and field in ("handle", "handle_conn"):
        return {k: (x.lower() if k == "hex" and isinstance(x, str) else x)
                for k, x in v.items()}
    if isinstance(v, dict) and field == "xattrs":
        return {k: (x.lower() if isinstance(x, str) else x) for k, x in v.items()}
    return v


def is_stub(kv, rec):
    return rec.get("ino") == kv.STUB_INO and stat.S_ISDIR(rec.get("mode") or 0)


def short(v, n=160):
    s = json.dumps(v, ensure_ascii=True)
    return s if len(s) <= n else s[:n] + "..."


def parse_jsonl(data):
    recs, errs = [], []
    for i, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            if not isinstance(r, dict) or not isinstance(r.get("path"), str):
                raise ValueError("not an object with a string 'path'")
            recs.append(r)
        except ValueError as e:
            errs.append("output line %d is not valid: %s: %s" % (i, e, line[:120]))
    return recs, errs


def compare_records(kv, exp, got, max_diffs):
    """Diffs between the kernel's records and the CLI's, path by path."""
    diffs = []
    gmap = {}
    for r in got:
        if r["path"] in gmap:
            diffs.append("path %s printed twice" % short(r["path"]))
        gmap[r["path"]] = r
    emap = {r["path"]: r for r in exp}
    missing = [p for p in emap if p not in gmap]
    extra = [p for p in gmap if p not in emap]
    if missing:
        diffs.append("%d paths missing, first: %s" % (len(missing), short(missing[:5])))
    if extra:
        diffs.append("%d paths not in the kernel view, first: %s"
                     % (len(extra), short(extra[:5])))
    nfield = 0
    for e in exp:
        g = gmap.get(e["path"])
        if g is None:
            continue
        skip = kv.VOLATILE_STUB_FIELDS if is_stub(kv, e) else ()
        for f in kv.FIELDS:
            if f == "path" or f in skip:
                continue
            ev, gv = norm(f, e.get(f)), norm(f, g.get(f))
            if ev != gv:
                nfield += 1
                if nfield <= max_diffs:
                    diffs.append("%s: %s: kernel %s, btrfsimg %s"
                                 % (short(e["path"], 80), f, short(ev), short(gv)))
    if nfield > max_diffs:
        diffs.append("... %d field mismatches in all" % nfield)
    return diffs


def compare_order(exp, got):
    ep = [r["path"] for r in exp]
    gp = [r["path"] for r in got]
    if ep == gp:
        return []
    for i, (a, b) in enumerate(zip(ep, gp)):
        if a != b:
            return ["first difference at record %d: kernel %s, btrfsimg %s"
                    % (i, short(a, 80), short(b, 80))]
    return ["kernel has %d records, btrfsimg %d" % (len(ep), len(gp))]


def run_cli(cli, args):
    return imgtest.run_cli(cli, args, timeout=TIMEOUT)


def cli_problems(rc, err):
    if rc == 0:
        return []
    tail = err.decode("utf-8", "replace").strip().splitlines()[-5:]
    return ["exit status %s" % rc] + ["stderr: " + t for t in tail]


def walk_checks(kv, res, cli, label, img, exp, vargs, max_diffs):
    rc, out, err = run_cli(cli, ["walk", "--json", "--hash"] + vargs + [img])
    probs = cli_problems(rc, err)
    got, perrs = parse_jsonl(out)
    probs += perrs[:5]
    res.problems("%s walk" % label, probs + compare_records(kv, exp, got, max_diffs))
    res.problems("%s order" % label, compare_order(exp, got) if got else ["no output"])


def cat_candidates(exp, n):
    """A spread of regular files: per top-level name the smallest non-empty
    and the largest, files with non-UTF-8 names, then the rest by size."""
    regs = [r for r in exp if r.get("sha256")]
    regs.sort(key=lambda r: (r["size"], r["path"]))
    pick, seen = [], set()

    def add(r):
        if r["path"] not in seen and len(pick) < n:
            seen.add(r["path"])
            pick.append(r)
    groups = {}
    for r in regs:
        groups.setdefault(r["path"].split("/")[0], []).append(r)
    for g in groups.values():
        nonempty = [r for r in g if r["size"] > 0]
        if nonempty:
            add(nonempty[0])
        add(g[-1])
    for r in regs:
        if any("\udc80" <= c <= "\udcff" for c in r["path"]):
            add(r)
    step = max(1, len(regs) // max(1, n))
    for r in regs[::step]:
        add(r)
    return pick


def cat_sha(cli, args, timeout=TIMEOUT):
    """sha256 of the CLI's stdout, streamed (files may be large)."""
    h = hashlib.sha256()
    try:
        p = subprocess.Popen([cli] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as e:
        return None, None, str(e).encode()
    while True:
        chunk = p.stdout.read(1 << 20)
        if not chunk:
            break
        h.update(chunk)
    try:
        err = p.stderr.read()
        rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return None, None, b"timed out"
    return rc, h.hexdigest(), err


def cat_checks(res, cli, label, img, exp, vargs):
    for r in cat_candidates(exp, CAT_PER_VIEW):
        p = os.fsencode(r["path"])
        rc, sha, err = cat_sha(cli, ["cat"] + vargs + ["--path", p, img])
        probs = cli_problems(rc, err)
        if rc == 0 and sha != r["sha256"]:
            probs.append("sha256 kernel %s, btrfsimg %s (size %d)" % (r["sha256"], sha, r["size"]))
        res.problems("%s cat %s" % (label, short(r["path"], 70)), probs)


def subtree(exp, top):
    """The kernel records under path top, re-rooted the way walk --path
    prints them: relative paths, "" and d_ino null for the start."""
    out = []
    for r in exp:
        p = r["path"]
        if p == top or p.startswith(top + "/"):
            c = dict(r)
            c["path"] = p[len(top) + 1:] if p != top else ""
            if p == top:
                c["d_ino"] = None
            out.append(c)
    return out


def pick_subtrees(kv, exp):
    """One plain directory with descendants and one subvolume root."""
    paths = [r["path"] for r in exp]
    dirp = subv = None
    for r in exp:
        if not r["path"] or not stat.S_ISDIR(r["mode"]) or is_stub(kv, r):
            continue
        ndesc = sum(1 for p in paths if p.startswith(r["path"] + "/"))
        if ndesc < 2:
            continue
        if r["ino"] == 256 and r.get("subvol") not in (None, 5):
            subv = subv or r
        elif "/" in r["path"]:
            dirp = dirp or r
    return dirp, subv


def subtree_checks(kv, res, cli, name, img, exp, max_diffs):
    dirp, subv = pick_subtrees(kv, exp)
    for r, args in ((dirp, lambda r: ["--path", os.fsencode(r["path"])]),
                    (subv, lambda r: ["--subvol", str(r["subvol"])])):
        if r is None:
            continue
        a = args(r)
        want = subtree(exp, r["path"])
        rc, out, err = run_cli(cli, ["walk", "--json", "--hash"] + a + [img])
        got, perrs = parse_jsonl(out)
        probs = cli_problems(rc, err) + perrs[:5] + compare_records(kv, want, got, max_diffs)
        probs += compare_order(want, got) if got else []
        res.problems("%s walk %s %s" % (name, a[0], short(os.fsdecode(a[1]), 70)), probs)


def images(files_dir):
    found = {}
    for pat, cut in (("*.img.zst", 8), ("*.img", 4)):
        for f in sorted(glob.glob(os.path.join(files_dir, pat))):
            found.setdefault(os.path.basename(f)[:-cut], f)
    return sorted(found.items())


def views(files_dir, name):
    out = []
    for v in sorted(glob.glob(os.path.join(files_dir, glob.escape(name) + "*.view.jsonl"))):
        mid = os.path.basename(v)[len(name):-len(".view.jsonl")]
        if mid == "" or mid.startswith("."):
            out.append((mid[1:], v))
    return out


def run_image(kv, res, cli, name, src, files_dir, tmpdir, max_diffs):
    try:
        img = imgtest.private_copy(src, tmpdir)
    except imgtest.RestoreError as e:
        res.problems("%s decompress" % name, [str(e)])
        return
    vs = views(files_dir, name)
    if not vs:
        res.problems("%s views" % name, ["no %s.view.jsonl next to the image" % name])
    try:
        for variant, vpath in vs:
            label = name + ("." + variant if variant else "")
            if variant not in VARIANT_ARGS:
                res.problems(label, ["unknown view variant %r" % variant])
                continue
            exp = kv.load(vpath)
            vargs = VARIANT_ARGS[variant]
            walk_checks(kv, res, cli, label, img, exp, vargs, max_diffs)
            cat_checks(res, cli, label, img, exp, vargs)
            if variant == "":
                subtree_checks(kv, res, cli, name, img, exp, max_diffs)
    finally:
        os.unlink(img)


def run(cli, testdata, files_dir=None, only=None, max_diffs=20):
    """Run every check; returns the Results. Used by test_oracle.py too."""
    kv = imgtest.import_kview(testdata)
    files_dir = files_dir or os.path.join(testdata, "files")
    res = imgtest.Tally()
    imgs = images(files_dir)
    if only:
        imgs = [(n, f) for n, f in imgs if n in only]
    if not imgs:
        res.problems("images", ["no images in %s%s" % (files_dir, " matching --only" if only else "")])
    if not shutil.which("zstd") and any(f.endswith(".zst") for _, f in imgs):
        res.problems("zstd", ["the zstd command is needed to decompress the images"])
        return res
    with tempfile.TemporaryDirectory(prefix="btrfsimg-files.") as tmpdir:
        for name, src in imgs:
            run_image(kv, res, cli, name, src, files_dir, tmpdir, max_diffs)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cli")
    ap.add_argument("testdata")
    ap.add_argument("--only", help="comma-separated image names")
    ap.add_argument("--files-dir", help="default TESTDATA/files")
    ap.add_argument("--max-diffs", type=int, default=20)
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else None
    res = run(os.path.abspath(a.cli), os.path.abspath(a.testdata), a.files_dir, only,
              a.max_diffs)
    return res.summary()


if __name__ == "__main__":
    sys.exit(main())
