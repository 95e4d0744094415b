#!/usr/bin/env python3
"""The inode-number schemes against an independent brute force.

    test_inodes.py BTRFSIMG TESTDATA

For each committed files-layer image, the truth is the kernel's recorded view
(testdata/files/*.view.jsonl: every path with st_ino, stx_subvol, readdir
d_ino). From it this test computes, by brute force in Python (a dict of every
presented number per device), what each scheme presents and how many numbers
collide, using its own swab64/overlay formulas; it then checks
`btrfsimg inodes --json` (every reachable inode, its numbers) and
`btrfsimg collisions --json` (groups, inodes, readdir mismatches) against that.
Also fixed vectors worked out by hand. Prints 'N passed, M failed'.
"""
import collections, json, os, shutil, subprocess, sys, tempfile

CLI, TESTDATA = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name}\n    {detail}")


def swab64(v):
    return int.from_bytes(v.to_bytes(8, "little"), "big")


def overlay(subvol, n):
    return 0 if n == 0 or subvol == 5 else swab64(subvol) >> (64 - n)


def uniq(subvol):
    return 0 if subvol == 5 else swab64(subvol)


def presented(x, v):
    return x if x == v else x ^ v


def hand_vectors():
    # swab64(257) = 0x0101000000000000 (bytes 01 01 00.. reversed)
    check("vector overlay(257,56)", overlay(257, 56) == 0x0001010000000000)
    check("vector overlay(257,64)", overlay(257, 64) == 0x0101000000000000)
    check("vector overlay(256,56)", overlay(256, 56) == 0x0000010000000000)
    check("vector presented(257, ov(257,56))",
          presented(257, overlay(257, 56)) == 0x0001010000000101)


def load_view(path):
    recs = []
    with open(path) as f:
        for line in f:
            recs.append(json.loads(line))
    return recs


def kernel_inodes(view):
    """(subvol, ino) of every reachable inode, stubs, and subvolume entries."""
    by_path = {r["path"]: r for r in view}
    inodes, stubs, entries = {}, [], []
    for r in view:
        parent = by_path.get(r["path"].rsplit("/", 1)[0] if "/" in r["path"] else "")
        if r["subvol"] is None:
            stubs.append(parent["subvol"])
        else:
            inodes[(r["subvol"], r["ino"])] = r
        if r["path"] and parent and (r["subvol"] != parent["subvol"]):
            entries.append((parent["subvol"], r["d_ino"], r["subvol"]))  # child None: stub
    return inodes, stubs, entries


def depth_parity(view, mount=5):
    """numdevs=2 device of each subvolume: crossings from the top along a path."""
    by_path = {r["path"]: r for r in view}
    dev = {5: 0}
    for r in sorted(view, key=lambda r: r["path"].count("/")):
        if r["subvol"] is None or r["subvol"] in dev or not r["path"]:
            continue
        parent = by_path[r["path"].rsplit("/", 1)[0] if "/" in r["path"] else ""]
        dev[r["subvol"]] = dev[parent["subvol"]] ^ 1
    return dev


def brute(inodes, stubs, entries, dev2, scheme):
    kind, n = scheme
    def c(s):
        return uniq(s) if kind == "uniq" else overlay(s, n) if kind in ("n1", "n2") else 0
    counts = collections.Counter()
    for (s, o) in inodes:
        d = dev2[s] if kind == "n2" else s if kind == "many" else 0
        counts[(d, presented(o, c(s)))] += 1
    for s in stubs:
        counts[("sb" if kind == "many" else 0, 2)] += 1
    groups = sum(1 for v in counts.values() if v >= 2)
    total = sum(v for v in counts.values() if v >= 2)
    mism = 0
    for (ps, d_ino, child) in entries:
        st = 2 if child is None else presented(256, c(child))
        mism += presented(d_ino, c(ps)) != st
    return groups, total, mism


def scheme_of(name):
    if name == "nfsd":
        return ("nfsd", 0)
    if name == "nfsd-uniquifier":
        return ("uniq", 0)
    if name == "numdevs=many":
        return ("many", 0)
    n, d = name.split(",")
    return ("n1" if d.endswith("1") else "n2", int(n.split("=")[1]))


def run_json(args):
    p = subprocess.run([CLI] + args, capture_output=True)
    return p.returncode, [json.loads(l) for l in p.stdout.splitlines()], p.stderr


def test_image(name, img, view):
    inodes, stubs, entries = kernel_inodes(view)
    dev2 = depth_parity(view)
    rc, recs, err = run_json(["inodes", "--json", "--inumbits", "48", "--mount-subvol", "5", img])
    check(f"{name}: inodes exit", rc in (0, 1), err[-300:])
    mine = {(r["subvol"], r["objectid"]): r for r in recs if r["reachable"]}
    missing = [k for k in inodes if k not in mine]
    check(f"{name}: every inode the kernel reaches is listed", not missing, str(missing[:5]))
    bad = []
    for k, r in mine.items():
        if k not in inodes:
            continue
        kv = inodes[k]
        want = {"st_ino": k[1], "mode": kv["mode"], "nlink": kv["nlink"], "size": kv["size"],
                "ino": presented(k[1], overlay(k[0], 48)), "overlay": overlay(k[0], 48),
                "nfs_fileid": presented(k[1], uniq(k[0])), "numdevs2_dev": dev2.get(k[0]),
                "proc_ino": f"{k[0]}:{k[1]}", "tree_id": k[0]}
        diff = {f: (r[f], v) for f, v in want.items() if r[f] != v}
        if diff:
            bad.append((k, diff))
    check(f"{name}: inodes fields equal kernel + reference formulas", not bad, str(bad[:3]))
    rc, recs, err = run_json(["collisions", "--json", "--mount-subvol", "5", img])
    check(f"{name}: collisions exit", rc in (0, 1), err[-300:])
    wrong = []
    for r in recs:
        if r.get("summary"):
            continue
        g, i, m = brute(inodes, stubs, entries, dev2, scheme_of(r["scheme"]))
        if (r["groups"], r["inodes"], r["readdir_mismatch"]) != (g, i, m):
            wrong.append((r["scheme"], (r["groups"], r["inodes"], r["readdir_mismatch"]), (g, i, m)))
    check(f"{name}: collisions equal the brute force for {len(recs) - 1} schemes",
          not wrong and len(recs) == 70, str(wrong[:4]))


def main():
    hand_vectors()
    files = os.path.join(TESTDATA, "files")
    work = tempfile.mkdtemp(prefix="btrfsimg-inodes.")
    try:
        for name in ("subvols", "special", "names"):
            src = os.path.join(files, name + ".img.zst")
            view = os.path.join(files, name + ".view.jsonl")
            if not os.path.exists(src) or not os.path.exists(view):
                check(f"{name}: corpus present", False, src)
                continue
            img = os.path.join(work, name + ".img")
            subprocess.run(["zstd", "-q", "-d", "-f", src, "-o", img], check=True)
            test_image(name, img, load_view(view))
            os.unlink(img)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
