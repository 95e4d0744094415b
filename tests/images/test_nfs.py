#!/usr/bin/env python3
"""btrfsimg's NFS numbers against what NFS clients of the patched kernel showed.

    test_nfs.py BTRFSIMG TESTDATA

The truth is testdata/nfs/NAME.nfs.tsv.zst, recorded by testdata/gen-nfs.sh
in a VM running Linux 6.1 with NeilBrown's inumbits and nfsd uniquifier
(v2) patches: each image mounted subvolid=5, plain and inumbits=56,
exported to itself, walked locally (L), over NFSv3 (V3) and NFSv4.2 (V4).
Lines: OPT, TAG, path, st_ino, readdir d_ino ("-" for the start), st_dev.

For every recorded path `btrfsimg walk --json --inumbits 56` must give:
  L  plain        ino, d_ino            L  inumbits=56  scheme_ino, scheme_d_ino
  V3 plain        nfs_fileid, nfs_d_fileid
  V4 plain        nfs_fileid, nfs4_d_fileid
  V3 inumbits=56  nfs_fileid_inumbits, nfs_d_fileid_inumbits
  V4 inumbits=56  nfs_fileid_inumbits, nfs4_d_fileid_inumbits
and `btrfsimg inodes --json --inumbits 56` the same fileids per inode; the
paths must be the same set; NFS shows one st_dev per view. Prints
'N passed, M failed'.
"""
import json, os, subprocess, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

tally = imgtest.Tally()
check = tally.check

# recorded name -> the committed image it was recorded from
IMAGES = {"nfs1": "nfs/nfs1.img.zst", "nested": "images/nested/dev1.img.zst",
          "node4k": "images/node4k/dev1.img.zst"}
FIELDS = {("plain", "L"): ("ino", "d_ino"),
          ("inumbits=56", "L"): ("scheme_ino", "scheme_d_ino"),
          ("plain", "V3"): ("nfs_fileid", "nfs_d_fileid"),
          ("plain", "V4"): ("nfs_fileid", "nfs4_d_fileid"),
          ("inumbits=56", "V3"): ("nfs_fileid_inumbits", "nfs_d_fileid_inumbits"),
          ("inumbits=56", "V4"): ("nfs_fileid_inumbits", "nfs4_d_fileid_inumbits")}


def unescape(p):
    """nfswalk's \\ooo escapes back to the name's bytes, as walk's str."""
    b, i, s = bytearray(), 0, p.encode()
    while i < len(s):
        if s[i:i + 1] == b"\\":
            b.append(int(s[i + 1:i + 4], 8))
            i += 4
        else:
            b.append(s[i])
            i += 1
    return os.fsdecode(bytes(b))


def load_truth(path):
    out = subprocess.run(["zstd", "-dc", path], check=True, stdout=subprocess.PIPE).stdout
    views = {}
    for line in out.decode().splitlines():
        opt, tag, p, st_ino, d_ino, dev = line.split("\t")
        views.setdefault((opt, tag), []).append(
            (unescape(p), int(st_ino), None if d_ino == "-" else int(d_ino), dev))
    return views


def num(v):
    return None if v is None else imgtest.json_int(v)


def run_json(cli, args):
    rc, out, err = imgtest.run_cli(cli, args)
    return rc, [json.loads(l) for l in out.splitlines()], err


def test_image(cli, name, img, views):
    rc, recs, err = run_json(cli, ["walk", "--json", "--inumbits", "56", "--subvol", "5", img])
    check(f"{name}: walk exit", rc == 0, err[-300:])
    by_path = {r["path"]: r for r in recs}
    for key, (f_st, f_d) in FIELDS.items():
        view = views.get(key, [])
        check(f"{name} {key}: recorded ({len(view)} paths)", len(view) > 1)
        paths = {p for p, *_ in view}
        check(f"{name} {key}: the same paths as walk", paths == set(by_path),
              (sorted(paths - set(by_path))[:5], sorted(set(by_path) - paths)[:5]))
        bad = []
        for p, st_ino, d_ino, _ in view:
            r = by_path.get(p)
            if r is None:
                continue
            have = (num(r[f_st]), num(r[f_d]))
            if have != (st_ino, d_ino):
                bad.append((p, have, (st_ino, d_ino)))
        check(f"{name} {key}: {f_st}, {f_d} equal the kernel's st_ino, d_ino", not bad,
              f"{len(bad)} differ, e.g. {bad[:3]}")
        if key[1] != "L":
            check(f"{name} {key}: one st_dev over NFS", len({d for *_, d in view}) == 1)
    check_inodes(cli, name, img, views, by_path)


def check_inodes(cli, name, img, views, by_path):
    """inodes --json: each inode's fileids as the clients showed them."""
    rc, recs, err = run_json(cli, ["inodes", "--json", "--inumbits", "56", img])
    check(f"{name}: inodes exit", rc == 0, err[-300:])
    inodes = {(r["subvol"], num(r["objectid"])): r for r in recs}
    bad, n = [], 0
    for opt, f, f4 in (("plain", "nfs_fileid", "nfs4_d_fileid"),
                       ("inumbits=56", "nfs_fileid_inumbits", "nfs4_d_fileid_inumbits")):
        for (p, st_ino, d_ino, _), (_, st4, d4, _) in zip(views[(opt, "V3")],
                                                          views[(opt, "V4")]):
            w = by_path.get(p)
            if w is None or w["subvol"] is None or w["ino"] == 2:
                continue  # stub directories are no inodes
            r = inodes.get((w["subvol"], num(w["ino"])))
            n += 1
            if r is None or num(r[f]) != st_ino:
                bad.append((p, f, r and r[f], st_ino))
    v4 = dict((p, d) for p, _, d, _ in views[("plain", "V4")])
    for p, d in v4.items():
        w = by_path.get(p)
        if d is None or w is None or w["subvol"] is None or w["ino"] == 2:
            continue
        r = inodes.get((w["subvol"], num(w["ino"])))
        if r is None or num(r["nfs4_d_fileid"]) != d:
            bad.append((p, "nfs4_d_fileid", r and r["nfs4_d_fileid"], d))
    check(f"{name}: inodes --json fileids equal the clients' ({n} paths)", not bad and n > 0,
          bad[:3])


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    found = 0
    with tempfile.TemporaryDirectory(prefix="test_nfs.") as tmp:
        for name, rel in IMAGES.items():
            truth = os.path.join(testdata, "nfs", name + ".nfs.tsv.zst")
            if not os.path.exists(truth):
                continue
            found += 1
            img = imgtest.private_copy(os.path.join(testdata, rel), tmp)
            test_image(cli, name, img, load_truth(truth))
            os.unlink(img)
    check("every recorded image was checked", found == len(IMAGES), found)
    return tally.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
