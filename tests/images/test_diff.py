#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_diff.py: `btrfsimg diff` against the kernel's views of snapshots
(testdata/diff, made by testdata/gen_diff.py).

    test_diff.py CLI TESTDATA [PYTHONPATH]

The truth is derived from the kernel's recorded views of the two
snapshots alone, by inode (tests/support/difftruth.py says how).
Every pair of snapshots is compared both ways, and each with itself (no
rows). Also: ids and paths for --from/--to, the text output, errors, jq,
the shared-subtree reading (-v) and the Python binding.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402
from difftruth import FIELDS, expected, got_rows  # noqa: E402

TIMEOUT = 120


def compare(res, cli, img, ids, views, a, b):
    rc, out, err = imgtest.run_cli(cli, ["diff", "--json", "--from", str(ids[a]), "--to",
                                         str(ids[b]), img], timeout=TIMEOUT)
    want = expected(views[a], views[b])
    got = got_rows(out) if rc == 0 else set()
    probs = ["exit %r: %s" % (rc, err[-300:])] if rc != 0 else []
    probs += ["missing %r" % (r,) for r in sorted(want - got, key=repr)]
    probs += ["false %r" % (r,) for r in sorted(got - want, key=repr)]
    res.problems("diff %s -> %s: %d rows, as the kernel's views say" % (a, b, len(want)),
                 probs[:20])
    return want, out


def kinds_covered(res, want):
    kinds = {r[0] for r in want}
    fields = {f for r in want for f in r[3]}
    res.check("s1 -> s2 has every kind of row and field",
              kinds == {"added", "deleted", "renamed", "modified"} and
              set(FIELDS) - {"target", "rdev"} <= fields, (kinds, fields))
    moved = [r for r in want if r[0] == "renamed" and r[2] == "mv"]
    below = [r for r in want if r[1].startswith("docs/mv-moved/")]
    res.check("a moved directory is one row; below it only what changed itself",
              len(moved) == 1 and [r[0] for r in below] == ["modified"], (moved, below))
    res.check("a file rewritten with the same bytes is no change",
              not any("same" in r[1] for r in want), sorted(want)[:3])


def paths_and_text(res, cli, img, ids):
    rc, by_path, err = imgtest.run_cli(cli, ["diff", "--json", "--from", "s1", "--to", "s2",
                                             img], timeout=TIMEOUT)
    rc2, by_id, _ = imgtest.run_cli(cli, ["diff", "--json", "--from", str(ids["s1"]), "--to",
                                          str(ids["s2"]), img], timeout=TIMEOUT)
    res.check("--from/--to take a subvolume's path as well as its id",
              rc == 0 and rc2 == 0 and by_path == by_id and by_id, err[-200:])
    rc, text, err = imgtest.run_cli(cli, ["diff", "--from", "s1", "--to", "s2", img],
                                    timeout=TIMEOUT)
    lines = text.decode("utf-8", "surrogateescape").splitlines()
    res.check("text: one line per row, renames as OLD -> NEW, fields in brackets",
              rc == 0 and len(lines) == len(by_id.splitlines()) and
              "renamed  mv -> docs/mv-moved" in lines and
              "modified meta/owner  [uid,gid]" in lines, lines[:5])
    rc, out, err = imgtest.run_cli(cli, ["diff", "--from", "s1", "--to", "999", img],
                                   timeout=TIMEOUT)
    res.check("an unknown subvolume: exit 2, named", rc == 2 and out == b"" and
              b"subvolume 999 not found" in err, err[-200:])
    rc, out, err = imgtest.run_cli(cli, ["diff", "--from", "s1", "--to", "s2/docs", img],
                                   timeout=TIMEOUT)
    res.check("a path that is no subvolume: exit 2, named", rc == 2 and out == b"" and
              b"not a subvolume" in err, err[-200:])
    rc, out, err = imgtest.run_cli(cli, ["diff", "--from", "s1", img], timeout=TIMEOUT)
    res.check("--to missing: a usage error", rc == 2 and b"--to" in err, err[-200:])
    rc, out, err = imgtest.run_cli(cli, ["diff", "-v", "--json", "--from", "s1", "--to", "s3",
                                         img], timeout=TIMEOUT)
    res.check("-v says how much of the trees was read", rc == 0 and
              b"tree blocks read" in err, err[-200:])
    jq = shutil.which("jq")
    if jq:
        p = subprocess.run([jq, "-r", "select(.change == \"renamed\") | .old_path"],
                           input=by_id, capture_output=True, timeout=TIMEOUT)
        res.check("jq reads the JSON rows", p.returncode == 0 and b"mv\n" in p.stdout,
                  p.stderr[-200:])


def shared_subtrees(res, cli, d, tmp):
    """A tree of three levels, nearly all shared by the two snapshots: the
    rows are the views' difference, and the comparison reads a few blocks
    and skips the shared subtrees (the counts -v gives)."""
    img = imgtest.private_copy(os.path.join(d, "shared.img.zst"), tmp)
    views = {}
    for s in "ab":
        raw = subprocess.run(["zstd", "-dc", os.path.join(d, "shared-%s.jsonl.zst" % s)],
                             check=True, capture_output=True, timeout=TIMEOUT).stdout
        views[s] = [json.loads(line) for line in raw.splitlines() if line.strip()]
    rc, out, err = imgtest.run_cli(cli, ["diff", "-v", "--json", "--from", "a", "--to", "b",
                                         img], timeout=TIMEOUT)
    want = expected(views["a"], views["b"])
    res.check("3,000 files, one appended, one deleted, one added: the rows the views give",
              rc == 0 and got_rows(out) == want and len(want) >= 3,
              (rc, sorted(want), err[-300:]))
    m = re.search(rb"(\d+) inodes compared; (\d+) tree blocks read, (\d+) subtrees shared", err)
    rc2, walk, _ = imgtest.run_cli(cli, ["walk", "--json", "--path", "a", img], timeout=TIMEOUT)
    # each tree holds some 300 blocks (3,000 inodes of ~400 bytes of items
    # in 4 KiB leaves): what differs is a path or two per change
    res.check("-v: a few blocks read of hundreds, the shared subtrees skipped",
              rc == 0 and m and rc2 == 0 and len(walk.splitlines()) > 3000 and
              int(m.group(2)) < 50 and int(m.group(3)) > 100, err[-300:])


def python_binding(res, pythonpath, img, ids, want):
    if not pythonpath:
        return
    code = ("import btrfsimg, json, sys\n"
            "fs = btrfsimg.open([sys.argv[1]])\n"
            "for r in fs.diff(int(sys.argv[2]), int(sys.argv[3])):\n"
            "    print(json.dumps([r['change'], r['path'], r.get('old_path'), r['fields']]))\n")
    env = dict(os.environ, PYTHONPATH=pythonpath)
    p = subprocess.run([sys.executable, "-c", code, img, str(ids["s1"]), str(ids["s2"])],
                       capture_output=True, env=env, timeout=TIMEOUT)
    got = set()
    for line in p.stdout.splitlines():
        c, path, old, fields = json.loads(line)
        got.add((c, os.fsdecode(path.encode("utf-8", "surrogateescape"))
                 if isinstance(path, str) else os.fsdecode(path),
                 None if old is None else os.fsdecode(old) if isinstance(old, bytes) else old,
                 tuple(fields)))
    res.check("Python: fs.diff(from, to) gives the same rows", p.returncode == 0 and
              got == want, (p.stderr[-300:], sorted(got ^ want, key=repr)[:5]))


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    pythonpath = sys.argv[3] if len(sys.argv) > 3 else ""
    d = os.path.join(testdata, "diff")
    ids = imgtest.load_json(os.path.join(d, "snapshots.json"))
    snaps = ("s1", "s2", "s3")
    views = {s: imgtest.load_jsonl(os.path.join(d, s + ".jsonl")) for s in snaps}
    res = imgtest.Tally()
    with tempfile.TemporaryDirectory(prefix="btrfsimg-diff.") as tmp:
        img = imgtest.private_copy(os.path.join(d, "diff.img.zst"), tmp)
        first = None
        for a in snaps:
            for b in snaps:
                want, _ = compare(res, cli, img, ids, views, a, b)
                if a == b:
                    res.check("diff %s -> %s: no rows" % (a, b), not want)
                if (a, b) == ("s1", "s2"):
                    first = want
        kinds_covered(res, first)
        paths_and_text(res, cli, img, ids)
        python_binding(res, pythonpath, img, ids, first)
        shared_subtrees(res, cli, d, tmp)
    return res.summary()


if __name__ == "__main__":
    sys.exit(main())
