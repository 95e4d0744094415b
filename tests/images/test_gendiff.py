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
cover every kind of row. Also: --to-generation's default (the newest),
a tree both generations share not read (-v),
the option rules, and the Python binding (from_fs=).
"""
import json
import os
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


def pair(res, cli, img, views, a, b):
    """True when answered; the answer checked against the truth, a refusal
    against what a refusal must be."""
    rc, out, err = ask(cli, img, a, b)
    want = expected(views[a], views[b])
    if rc != 0:
        named = b"generation %d" % a in err or b"generation %d" % b in err
        res.check("diff generations %d -> %d: refused as unreadable, said, no rows" % (a, b),
                  rc == 2 and out == b"" and named, (rc, out[:200], err[-300:]))
        return False, want
    got = got_rows(out)
    probs = ["missing %r" % (r,) for r in sorted(want - got, key=repr)]
    probs += ["false %r" % (r,) for r in sorted(got - want, key=repr)]
    res.problems("diff generations %d -> %d: %d rows, as the kernel's views say" %
                 (a, b, len(want)), probs[:20])
    return True, want


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


def python_binding(res, pythonpath, img, views, a, b):
    if not pythonpath:
        return
    code = ("import btrfsimg, json, sys\n"
            "old = btrfsimg.open([sys.argv[1]], generation=int(sys.argv[2]))\n"
            "new = btrfsimg.open([sys.argv[1]], generation=int(sys.argv[3]))\n"
            "for r in new.diff('data', 'data', from_fs=old):\n"
            "    print(json.dumps(r))\n")
    env = dict(os.environ, PYTHONPATH=pythonpath)
    p = subprocess.run([sys.executable, "-c", code, img, str(a), str(b)],
                       capture_output=True, env=env, timeout=TIMEOUT)
    got = got_rows(p.stdout) if p.returncode == 0 else set()
    want = expected(views[a], views[b])
    res.check("Python: fs.diff(S, S, from_fs=older) gives the rows of %d -> %d" % (a, b),
              p.returncode == 0 and got == want and want,
              (p.stderr[-300:], sorted(got ^ want, key=repr)[:5]))


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
        option_rules(res, cli, img, gens)
        a, b = min(answered, key=lambda p: (p[0], -p[1]))
        python_binding(res, pythonpath, img, views, a, b)
    return res.summary()


if __name__ == "__main__":
    sys.exit(main())
