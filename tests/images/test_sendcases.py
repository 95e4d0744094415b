#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_sendcases.py: the incremental-send edge cases (testdata/sendcases,
made by testdata/gen_sendcases.py: the rename, orphan, rmdir, inode-reuse,
clone and hole sequences that broke the kernel's send), through
`btrfsimg send` and `btrfsimg diff`.

    test_sendcases.py CLI TESTDATA

Without root: `btrfsimg diff` gives exactly the rows the kernel's views of
the snapshots determine (test_diff.py's derivation), for every pair of
c0, c1, c2 both ways; and every case changes something in each step it
names (else it would test nothing).

With root and loop devices: c0 in full, then c0 -> c1 and c1 -> c2, each
sent by btrfsimg (protocol 1, and 2 with compressed data) and received by
the kernel's `btrfs receive` on top of the last, reproduces every path and
field of every snapshot as the kernel showed it (test_send.py's
comparison; nested subvolumes, which send leaves out, are not in it); so
do c0 -> c2 at once, the chain backwards (c2 in full, c2 -> c1 -> c0) and
c1 in full. Each stream parses with `btrfs
receive --dump` and is within 1.5x the size of the kernel's own `btrfs
send` of the same snapshots.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402
import genlib  # noqa: E402  (testdata/, put on sys.path by imgtest)
import gen_sendcases  # noqa: E402
import test_diff  # noqa: E402  (tests/images: the diff truth derivation)
import test_send  # noqa: E402  (tests/images: receivers, view comparison, kernel send)

SNAPS = gen_sendcases.SNAPS
STUB_INO = 2


def raw_view(d, name):
    raw = genlib.unzstd_bytes(os.path.join(d, name + ".jsonl.zst"))
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def load_view(d, name):
    """The kernel's view of snapshot @name without the stub directories of
    nested subvolumes (inode 2): neither send nor diff covers those (the
    kernel's send leaves them out too)."""
    return [r for r in raw_view(d, name) if r["ino"] != STUB_INO]


def receivable(d, name):
    """What a receiver of snapshot @name holds: its view without stubs, and
    a directory that held one smaller by its entry (a btrfs directory's
    size is twice the length of the names in it)."""
    view = raw_view(d, name)
    less = {}
    for r in view:
        if r["ino"] == STUB_INO:
            parent, _, base = r["path"].rpartition("/")
            less[parent] = less.get(parent, 0) + 2 * len(os.fsencode(base))
    return [dict(r, size=r["size"] - less.get(r["path"], 0)) for r in view
            if r["ino"] != STUB_INO]


def case_paths(name):
    """The paths a case's changes may touch: its directory, or for a case
    at the top, the names its functions use there."""
    if name not in gen_sendcases.AT_TOP:
        return lambda p: p == name or p.startswith(name + "/")
    prefix = "top-" if name != "top-orphan" else ("top-", "o")
    return lambda p: p.startswith(prefix)


def every_case_changes(res, views):
    """Each case's step makes a difference the kernel's views show."""
    steps = {"c1": [(c[0], "c0") for c in gen_sendcases.CASES + gen_sendcases.REUSE],
             "c2": [(c[0], "c1") for c in gen_sendcases.CASES if c[5]]}
    idle = []
    for to, pairs in steps.items():
        for name, frm in pairs:
            rows = test_diff.expected(views[frm], views[to])
            inside = case_paths(name)
            if not any(inside(r[1]) or (r[2] and inside(r[2])) for r in rows):
                idle.append("%s: no row in %s -> %s" % (name, frm, to))
    res.problems("every case changes something in the steps it names (%d cases)"
                 % (len(gen_sendcases.CASES) + len(gen_sendcases.REUSE)), idle)


def diffs(res, cli, img, ids, views):
    for a in SNAPS:
        for b in SNAPS:
            want, _ = test_diff.compare(res, cli, img, ids, views, a, b)
            if a == b:
                res.check("diff %s -> %s: no rows" % (a, b), not want)


def send_step(res, cli, img, tmp, r, name, parent, proto):
    """Send @name (on @parent) into receiver @r; its size against the
    kernel's send of the same. False if it could not be received."""
    tag = "%s%s v%d" % (parent + " -> " if parent else "full ", name, proto)
    stream = os.path.join(tmp, "case-%s-%s-%d.stream" % (parent, name, proto))
    rc, _, err = test_send.send_to(cli, img, stream, name, proto, parent)
    dump = subprocess.run(["btrfs", "receive", "--dump", "-f", stream], capture_output=True,
                          timeout=test_send.TIMEOUT)
    res.check("send %s: exit 0, btrfs receive --dump parses it" % tag,
              rc == 0 and dump.returncode == 0, (err[-300:], dump.stderr[-300:]))
    p = r.receive(stream)
    res.check("send %s: btrfs receive applies it" % tag, p.returncode == 0, p.stderr[-400:])
    mine = os.path.getsize(stream)
    os.unlink(stream)
    theirs = test_send.kernel_send(img, tmp, name, proto, parent)[0]
    res.check("send %s: %d bytes, within 1.5x the kernel's %d (%.3f)"
              % (tag, mine, theirs, mine / theirs), mine <= 1.5 * theirs, (mine, theirs))
    return p.returncode == 0


def received_as_truth(res, r, d, names, tag):
    views = {n: receivable(d, n) for n in names}
    for name in names:
        view, _ = r.record(name)
        res.problems("%s: %s received, every path and field as the kernel showed it (%d paths)"
                     % (tag, name, len(views[name])),
                     test_send.view_problems(views[name], view)[:20])


def chain(res, cli, img, tmp, d, steps, proto):
    tag = "chain %s v%d" % (" -> ".join(s for s, _ in steps), proto)
    r = test_send.Receiver(tmp, "cases-%s-%d" % (steps[-1][0], proto))
    try:
        for name, parent in steps:
            if not send_step(res, cli, img, tmp, r, name, parent, proto):
                break
        received_as_truth(res, r, d, [s for s, _ in steps], tag)
    finally:
        r.close()


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    test_send.TESTDATA[0] = testdata
    d = os.path.join(testdata, "sendcases")
    ids = imgtest.load_json(os.path.join(d, "snapshots.json"))
    views = {s: load_view(d, s) for s in SNAPS}
    res = imgtest.Tally()
    with tempfile.TemporaryDirectory(prefix="btrfsimg-sendcases.") as tmp:
        img = imgtest.private_copy(os.path.join(d, "sendcases.img.zst"), tmp)
        every_case_changes(res, views)
        diffs(res, cli, img, ids, views)
        why = imgtest.skip_reason()
        if why:
            print("SKIP receiving streams: %s" % why)
            return res.summary()
        for proto in (1, 2):
            chain(res, cli, img, tmp, d, [("c0", None), ("c1", "c0"), ("c2", "c1")], proto)
        chain(res, cli, img, tmp, d, [("c0", None), ("c2", "c0")], 1)
        # backwards: every case undone, the reuse cases' new inodes replaced by the old
        chain(res, cli, img, tmp, d, [("c2", None), ("c1", "c2"), ("c0", "c1")], 2)
        chain(res, cli, img, tmp, d, [("c1", None)], 1)
    return res.summary()


if __name__ == "__main__":
    sys.exit(main())
