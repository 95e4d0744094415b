#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A tree rebuilt from scanned leaves under three synthesized levels,
against the kernel's view of testdata/levels-deep/levels.img.zst
(testdata/gen_levels.py --deep: 4 KiB nodes, metadata DUP, 16,000 files
with a 2,000-byte xattr each, so the top-level tree has more leaves than
two levels of 4 KiB nodes hold, 121 x 121; then a tenth of the xattrs
rewritten, some files removed and new ones made, so older copies of
leaves remain). The leaf and level-1 node counts come from btrfs-progs'
dump-tree at generation time.

    test_salvage_deep.py BTRFSIMG TESTDATA

A copy with its superblocks zeroed, every copy of the top-level tree's
root zeroed and every block of the extent tree (found by their headers):
the tree comes from the leaves a scan finds. The walk (walk --json
--hash) must exit 1, say it rebuilt the tree from as many leaves as the
kernel's tree has, name on stderr each inode at an edge between leaves no
surviving node names one after the other (at most two per level-1 node of
the kernel's tree) and give every other file exactly as the kernel's
record, every field, and nothing the kernel does not show.
"""
import os
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
import imgtest  # noqa: E402
from test_salvage_levels import Image  # noqa: E402
from test_salvage_mkfs import MARKS, compare, parse_jsonl  # noqa: E402

TIMEOUT = 300


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    cli, testdata = sys.argv[1], sys.argv[2]
    res = imgtest.Tally()
    kv = imgtest.import_kview(testdata)
    d = os.path.join(testdata, "levels-deep")
    truth, view, raw = imgtest.load_recorded(d, "levels.img.zst")
    img = Image(raw, truth)
    t5 = img.tree(5)
    max_ptrs = (img.ns - 101) // 33
    data = img.copy([(5, t5["root"])])
    res.check("more leaves than two levels of nodes hold, extent blocks zeroed (the truth)",
              t5["leaves"] > max_ptrs * max_ptrs and img.zero_owner(data, 2) > 0,
              (t5["leaves"], max_ptrs))
    with tempfile.TemporaryDirectory(prefix="deep.") as work:
        path = os.path.join(work, "case.img")
        with open(path, "wb") as f:
            f.write(bytes(data))
        rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash", path],
                                       timeout=TIMEOUT)
    got = [{k: v for k, v in r.items() if k not in MARKS}
           for r in (parse_jsonl(out) if rc in (0, 1) else [])]
    res.check("exit 1, rebuilt from the kernel's %d leaves found by scanning, said"
              % t5["leaves"], rc == 1 and b"rebuilt from %d leaves found by scanning"
              % t5["leaves"] in err, "exit %r: %s" % (rc, err[-800:]))
    edge = {ln.split(b": inode: ")[0].split(b"btrfsimg: ", 1)[-1].decode()
            for ln in err.splitlines() if b"its items run to the edge of a leaf" in ln}
    res.check("only inodes at the edges between the kernel's level-1 nodes not read, each said",
              len(edge) <= 2 * t5["level1"], (len(edge), t5["level1"], sorted(edge)[:5]))
    res.check("most files read", len(got) >= len(view) - 2 * t5["level1"],
              (len(got), len(view)))
    res.problems("every other file exactly the kernel's, none false",
                 compare(kv, got, view, edge))
    return res.summary()


if __name__ == "__main__":
    sys.exit(main())
