# SPDX-License-Identifier: MIT
"""difftruth.py: the rows `btrfsimg diff` must give, derived from the
kernel's recorded views (gen_kview.py) of the two sides alone, by inode
(a snapshot, and a later generation of one subvolume, keep an inode's
objectid; the creation generation in the file handle tells a reused
number apart):
  - a link is (parent directory's inode, name); an inode only in --to is
    `added` at each of its paths, only in --from `deleted`;
  - an inode in both that lost exactly one link and gained exactly one is
    `renamed` (the fields that differ go with it); otherwise each link
    lost is `deleted`, each gained `added`, and the fields that differ are
    a `modified` row at a link it kept;
  - fields: content (sha256 of the bytes), size, mode, uid, gid, mtime,
    xattrs (names and values), target, rdev.
Used by tests/images/test_diff.py (snapshots) and test_gendiff.py
(generations).
"""
import json

FIELDS = ("content", "size", "mode", "uid", "gid", "mtime", "xattrs", "target", "rdev")


def identity(rec):
    """(objectid, creation generation) from the file handle's bytes."""
    h = bytes.fromhex(rec["handle"]["hex"])
    return rec["ino"], int.from_bytes(h[16:20], "little")


def inodes_of(view):
    """identity -> {"rec": a record, "links": {(parent ino, name): path}}"""
    ino_at = {r["path"]: r["ino"] for r in view}
    out = {}
    for r in view:
        ent = out.setdefault(identity(r), {"rec": r, "links": {}})
        if r["path"] == "":
            continue  # the subvolume's root: no link of its own
        parent, _, name = r["path"].rpartition("/")
        ent["links"][(ino_at[parent], name)] = r["path"]
    return out


def fields_between(a, b):
    f = []
    if a["sha256"] is not None and b["sha256"] is not None and a["sha256"] != b["sha256"]:
        f.append("content")
    for k in ("size", "mode", "uid", "gid", "mtime", "xattrs", "target", "rdev"):
        if a[k] != b[k]:
            f.append(k)
    return [x for x in FIELDS if x in f]


def expected(view_a, view_b, inos=None):
    """The rows; with @inos (a dict), also each row's inode number."""
    A, B = inodes_of(view_a), inodes_of(view_b)
    rows = set()
    ident = None

    def row(change, path, fields=(), old=None):
        r = (change, path, old, tuple(fields))
        rows.add(r)
        if inos is not None:
            inos[r] = ident[0]

    for ident in set(A) | set(B):
        a, b = A.get(ident), B.get(ident)
        if a is None:
            for p in b["links"].values():
                row("added", p)
            continue
        if b is None:
            for p in a["links"].values():
                row("deleted", p)
            continue
        fields = fields_between(a["rec"], b["rec"])
        gone = [k for k in a["links"] if k not in b["links"]]
        came = [k for k in b["links"] if k not in a["links"]]
        kept = [k for k in b["links"] if k in a["links"]]
        if len(gone) == 1 and len(came) == 1:
            row("renamed", b["links"][came[0]], fields, a["links"][gone[0]])
            continue
        for k in gone:
            row("deleted", a["links"][k])
        for k in came:
            row("added", b["links"][k])
        if fields:
            if b["rec"]["path"] == "":
                row("modified", "", fields)
            elif kept or came:
                at = min(b["links"][k] for k in (kept or came))
                row("modified", at, fields)
    return rows


def got_rows(out):
    rows = set()
    for line in out.splitlines():
        r = json.loads(line)
        rows.add((r["change"], r["path"], r.get("old_path"), tuple(r["fields"])))
    return rows
