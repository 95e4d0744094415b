#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_gendiff.py: `btrfsimg diff --subvol S --from-generation G1
[--to-generation G2]` against the kernel's views of one subvolume after
each of its committed steps (testdata/gendiff, made by
testdata/gen_gendiff.py).

    test_gendiff.py CLI TESTDATA [PYTHONPATH]

The truth is derived from the two recorded views alone, as for snapshots
(tests/support/difftruth.py). Every ordered pair of recorded generations
is asked: an answer (exit 0) must be exactly the truth; a refusal (the
older tree's blocks written over since the image's last steps) must be
exit 2 with nothing on stdout and the generation named on stderr. The
newest generations must all be answered, and the answered pairs must
cover every kind of row. Each leaf of an older generation written over in
a copy of the image gives a right answer: whole, or partial (exit 1) with
what was left out named. Also: --to-generation's default (the newest),
a tree both generations share not read (-v),
the option rules, and the Python binding (from_fs=).
"""
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
from difftruth import FIELDS, expected, got_rows  # noqa: E402

TIMEOUT = 120
NEWEST = 4  # generations that must all be answered between themselves


def ask(cli, img, a, b=None, extra=()):
    args = ["diff", "--json", "--subvol", "data", "--from-generation", str(a)]
    if b is not None:
        args += ["--to-generation", str(b)]
    return imgtest.run_cli(cli, args + list(extra) + [img], timeout=TIMEOUT)


def judge(rc, out, err, want, inos):
    """What is wrong with an answer: exit 0 must give exactly @want; exit 1
    rows of it, every row left out belonging to an inode stderr says was
    not compared; exit 2 nothing, the failure said."""
    got = got_rows(out) if rc in (0, 1) else set()
    if rc == 0:
        return ["missing %r" % (r,) for r in sorted(want - got, key=repr)] + \
               ["false %r" % (r,) for r in sorted(got - want, key=repr)]
    if rc == 1:
        spans = not_compared(err)
        left = [r for r in want - got if not any(lo <= inos[r] <= hi for lo, hi in spans)]
        return ["exit 1, nothing said not compared"] * (not spans) + \
               ["false %r" % (r,) for r in sorted(got - want, key=repr)] + \
               ["left out, not said %r" % (r,) for r in left]
    return [] if rc == 2 and not out and err else ["exit %r, %d bytes out" % (rc, len(out))]


def pair(res, cli, img, views, a, b):
    """True when answered whole; any answer checked as judge() says, a
    refusal also for the generation it names."""
    rc, out, err = ask(cli, img, a, b)
    inos = {}
    want = expected(views[a], views[b], inos)
    probs = judge(rc, out, err, want, inos)
    if rc == 2 and b"generation %d" % a not in err and b"generation %d" % b not in err:
        probs.append("exit 2 without the generation named: %r" % err[-200:])
    what = {0: "%d rows, as the kernel's views say" % len(want),
            1: "part of the rows, the rest said not compared"}.get(rc, "refused, said")
    res.problems("diff generations %d -> %d: %s" % (a, b, what), probs[:20])
    return rc == 0, want


def all_pairs(res, cli, img, views, gens):
    answered, rows = set(), set()
    for a in gens:
        for b in gens:
            ok, want = pair(res, cli, img, views, a, b)
            if ok:
                answered.add((a, b))
                rows |= want
            if a == b and ok:
                res.check("generation %d with itself: no rows" % a, not want)
    newest = gens[-NEWEST:]
    missing = [(a, b) for a in newest for b in newest if (a, b) not in answered]
    res.check("every pair of the newest %d generations answered (%d of %d pairs in all)" %
              (NEWEST, len(answered), len(gens) ** 2), not missing, missing)
    kinds = {r[0] for r in rows}
    fields = {f for r in rows for f in r[3]}
    res.check("the answered pairs have every kind of row and field",
              kinds == {"added", "deleted", "renamed", "modified"} and
              set(FIELDS) - {"target", "rdev"} <= fields, (kinds, fields))
    return answered


def default_to(res, cli, img, views, gens, answered):
    a = min(g for g, b in answered if b == gens[-1])
    rc, out, err = ask(cli, img, a)
    rc2, out2, _ = ask(cli, img, a, gens[-1])
    res.check("without --to-generation the --to side is the newest generation",
              rc == 0 and rc2 == 0 and out == out2 and
              got_rows(out) == expected(views[a], views[gens[-1]]), err[-300:])


def shared_reading(res, cli, img, facts):
    """The churn of the last step left `data` alone: its tree at the last
    two generations is one block, compared without reading a block."""
    g = facts["generations"]
    if g[-1]["subvol_generation"] != g[-2]["subvol_generation"]:
        res.check("the last step left data alone (generator)", False, g[-2:])
        return
    rc, out, err = ask(cli, img, g[-2]["generation"], g[-1]["generation"], ["-v"])
    res.check("-v: a tree both generations reach through one block is not read",
              rc == 0 and out == b"" and
              b"0 inodes compared; 0 tree blocks read, 1 subtrees shared" in err, err[-300:])


def leaves_of(img, owner, generation):
    """Offsets in the raw image of the tree leaves of @owner written in
    @generation, found by their headers alone (the btrfs format, not
    btrfsimg): fsid at 0x20, generation 0x50, owner 0x58, level 0x64."""
    with open(img, "rb") as f:
        data = f.read()
    sb = data[0x10000:0x11000]
    fsid, nodesize = sb[0x20:0x30], struct.unpack_from("<I", sb, 0x94)[0]
    out = []
    for off in range(0, len(data) - nodesize + 1, nodesize):
        h = data[off:off + 0x65]
        gen, own = struct.unpack_from("<QQ", h, 0x50)
        if h[0x20:0x30] == fsid and gen == generation and own == owner and h[0x64] == 0:
            out.append(off)
    return out, nodesize


def not_compared(err):
    """The inodes stderr says were not compared."""
    spans = [(int(a), int(b)) for a, b in
             re.findall(rb"inodes (\d+) to (\d+) not compared", err)]
    spans += [(int(a), int(a)) for a in re.findall(rb"inode (\d+) not compared", err)]
    return spans


def written_over(res, cli, img, tmp, views, facts):
    """Each leaf the older generation wrote, written over in a copy of the
    image (zeros, as reused space would hold other bytes): every answer
    must be right. Exit 0: exactly the rows (the leaf was not in the tree
    or both sides share it); exit 1: the rows given are right, and every
    row left out belongs to an inode stderr says was not compared; exit 2:
    nothing listed."""
    a, b = facts["generations"][1]["generation"], facts["generations"][-2]["generation"]
    offs, nodesize = leaves_of(img, facts["subvol"], a)
    inos = {}
    want = expected(views[a], views[b], inos)
    bad, partial = [], []
    for off in offs:
        copy = os.path.join(tmp, "over.img")
        shutil.copyfile(img, copy)
        with open(copy, "r+b") as f:
            f.seek(off)
            f.write(bytes(nodesize))
        rc, out, err = ask(cli, copy, a, b)
        probs = judge(rc, out, err, want, inos)
        if probs:
            bad.append((off, rc, probs[:3]))
        if rc == 1:
            partial.append(off)
        os.unlink(copy)
    res.check("generation %d's %d leaves each written over: every answer right, %d partial "
              "(exit 1)" % (a, len(offs), len(partial)), offs and partial and not bad, bad[:5])
    return (a, b, partial[0], nodesize) if partial else None


def option_rules(res, cli, img, gens):
    cases = [
        (["--subvol", "data"], b"--from-generation"),
        (["--subvol", "data", "--from", "data", "--from-generation", "8"], b"--subvol"),
        (["--subvol", "data", "--from-generation", "8", "--to-generation", "9",
          "--generation", "9"], b"not both"),
        (["--subvol", "data", "--from-generation", "0"], b"--from-generation"),
    ]
    for args, said in cases:
        rc, out, err = imgtest.run_cli(cli, ["diff"] + args + [img], timeout=TIMEOUT)
        res.check("diff %s: a usage error, said" % " ".join(args),
                  rc == 2 and out == b"" and said in err, err[-200:])
    rc, out, err = imgtest.run_cli(cli, ["diff", "--subvol", "data", "--from-generation",
                                         str(gens[-1] + 50), img], timeout=TIMEOUT)
    res.check("a generation the image never had: exit 2, named", rc == 2 and out == b"" and
              b"generation %d" % (gens[-1] + 50) in err, err[-200:])
    rc, out, err = imgtest.run_cli(cli, ["diff", "--subvol", "nosuch", "--from-generation",
                                         str(gens[-2]), img], timeout=TIMEOUT)
    res.check("an unknown --subvol: exit 2, named", rc == 2 and out == b"" and
              b"--subvol" in err, err[-200:])


PY_DIFF = """import btrfsimg, json, sys
notes = []
old = btrfsimg.open([sys.argv[1]], generation=int(sys.argv[2]), on_damage=notes.append)
new = btrfsimg.open([sys.argv[1]], generation=int(sys.argv[3]))
for r in new.diff("data", "data", from_fs=old):
    print(json.dumps(r))
for n in notes:
    print(n, file=sys.stderr)
"""


def python_binding(res, pythonpath, img, tmp, views, a, b, over):
    """from_fs= gives the rows of the CLI; with a leaf written over, the
    rows of what could be read and the rest named through on_damage."""
    if not pythonpath:
        return
    env = dict(os.environ, PYTHONPATH=pythonpath)
    p = subprocess.run([sys.executable, "-c", PY_DIFF, img, str(a), str(b)],
                       capture_output=True, env=env, timeout=TIMEOUT)
    got = got_rows(p.stdout) if p.returncode == 0 else set()
    want = expected(views[a], views[b])
    res.check("Python: fs.diff(S, S, from_fs=older) gives the rows of %d -> %d" % (a, b),
              p.returncode == 0 and got == want and want,
              (p.stderr[-300:], sorted(got ^ want, key=repr)[:5]))
    if not over:
        return
    a, b, off, nodesize = over
    copy = os.path.join(tmp, "over-py.img")
    shutil.copyfile(img, copy)
    with open(copy, "r+b") as f:
        f.seek(off)
        f.write(bytes(nodesize))
    p = subprocess.run([sys.executable, "-c", PY_DIFF, copy, str(a), str(b)],
                       capture_output=True, env=env, timeout=TIMEOUT)
    os.unlink(copy)
    inos = {}
    want = expected(views[a], views[b], inos)
    probs = judge(1 if p.returncode == 0 else p.returncode, p.stdout, p.stderr, want, inos)
    res.problems("Python: a leaf of generation %d written over: the rows of what was read, "
                 "the rest named through on_damage" % a, probs[:10])


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    pythonpath = sys.argv[3] if len(sys.argv) > 3 else ""
    d = os.path.join(testdata, "gendiff")
    facts = imgtest.load_json(os.path.join(d, "generations.json"))
    gens = [g["generation"] for g in facts["generations"]]
    views = {g: imgtest.load_jsonl(os.path.join(d, "gen-%d.jsonl" % g)) for g in gens}
    res = imgtest.Tally()
    with tempfile.TemporaryDirectory(prefix="btrfsimg-gendiff.") as tmp:
        img = imgtest.private_copy(os.path.join(d, "gendiff.img.zst"), tmp)
        answered = all_pairs(res, cli, img, views, gens)
        default_to(res, cli, img, views, gens, answered)
        shared_reading(res, cli, img, facts)
        over = written_over(res, cli, img, tmp, views, facts)
        option_rules(res, cli, img, gens)
        a, b = min(answered, key=lambda p: (p[0], -p[1]))
        python_binding(res, pythonpath, img, tmp, views, a, b, over)
    return res.summary()


if __name__ == "__main__":
    sys.exit(main())
