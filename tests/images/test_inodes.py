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

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

CLI = TESTDATA = None  # set by __main__; bench/exact.py imports the brute force
tally = imgtest.Tally()
check = tally.check


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


def brute_groups(inodes, stub_paths, dev2, scheme):
    """Every group of a scheme: {(device, value): sorted members}, a member
    being (subvol, objectid) or ("stub", path)."""
    kind, n = scheme

    def c(s):
        return uniq(s) if kind == "uniq" else overlay(s, n) if kind in ("n1", "n2") else 0
    members = collections.defaultdict(list)
    for (s, o) in inodes:
        d = dev2[s] if kind == "n2" else s if kind == "many" else 0
        members[(d, presented(o, c(s)))].append((s, o))
    for p in stub_paths:
        members[("sb" if kind == "many" else 0, 2)].append(("stub", p))
    return {k: sorted(v, key=str) for k, v in members.items() if len(v) >= 2}


def kernel_stub_paths(view):
    return [r["path"] for r in view if r["subvol"] is None]


def scheme_of(name):
    if name == "nfsd":
        return ("nfsd", 0)
    if name == "nfsd-uniquifier":
        return ("uniq", 0)
    if name == "numdevs=many":
        return ("many", 0)
    n, d = name.split(",")
    return ("n1" if d.endswith("1") else "n2", int(n.split("=")[1]))


def as_int(got, want):
    """@got as an integer where @want is one (past 2^53 - 1 btrfsimg writes
    a string); a value of the wrong form stays as it is and differs."""
    if not isinstance(want, int) or isinstance(want, bool):
        return got
    try:
        return imgtest.json_int(got)
    except ValueError:
        return got


def run_json(args):
    rc, out, err = imgtest.run_cli(CLI, args)
    return rc, [json.loads(l) for l in out.splitlines()], err


def test_image(name, img, view):
    inodes, stubs, entries = kernel_inodes(view)
    dev2 = depth_parity(view)
    rc, recs, err = run_json(["inodes", "--json", "--inumbits", "48", "--mount-subvol", "5", img])
    check(f"{name}: inodes exit", rc in (0, 1), err[-300:])
    keys = [(r["subvol"], r["objectid"]) for r in recs]
    check(f"{name}: inodes listed once each, by subvolume then objectid",
          all(a < b for a, b in zip(keys, keys[1:])),
          str(next(((a, b) for a, b in zip(keys, keys[1:]) if a >= b), None)))
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
        diff = {f: (r[f], v) for f, v in want.items() if as_int(r[f], v) != v}
        if diff:
            bad.append((k, diff))
    check(f"{name}: inodes fields equal kernel + reference formulas", not bad, str(bad[:3]))
    check_paths(name, recs, view)
    if name == "names":
        check_write_error(name, img)
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
    check_example_paths(name, recs, view)
    check_nfs(name, recs[-1] if recs and recs[-1].get("summary") else {}, inodes, stubs,
              entries, dev2)
    check_without_stubs(name, recs, inodes, stubs, entries, dev2, view)
    check_all_groups(name, img, inodes, dev2, view)


def nfs_present(kind, n, s, o):
    """What scheme (kind, n) presents for objectid o of subvolume s; "comp":
    inumbits=n under nfsd with the uniquifier, each step "unless equal"."""
    if kind == "uniq":
        return presented(o, uniq(s))
    if kind == "comp":
        return presented(presented(o, overlay(s, n)), uniq(s))
    if kind in ("n1", "n2"):
        return presented(o, overlay(s, n))
    return o


def nfs_scheme_of(name):
    if name.endswith("+nfsd-uniquifier"):
        return ("comp", int(name.split("+")[0].split("=")[1]))
    return scheme_of(name)


def nfs_brute(inodes, stubs, entries, dev2, scheme):
    """groups, inodes, over32, low32 groups and inodes, readdir v3 and v4
    disagreements, by listing every presented number."""
    kind, n = scheme
    out = []
    for mask in ((1 << 64) - 1, (1 << 32) - 1):
        counts = collections.Counter()
        for (s, o) in inodes:
            d = dev2[s] if kind == "n2" else s if kind == "many" else 0
            counts[(d, nfs_present(kind, n, s, o) & mask)] += 1
        for s in stubs:
            counts[("sb" if kind == "many" else 0, 2)] += 1
        out += [sum(1 for v in counts.values() if v >= 2), sum(v for v in counts.values() if v >= 2)]
    over = sum(1 for (s, o) in inodes if nfs_present(kind, n, s, o) > (1 << 32) - 1)
    plain = {"comp": ("n1", n), "uniq": ("nfsd", 0)}.get(kind, (kind, n))
    v3 = v4 = 0
    for (ps, d_ino, child) in entries:
        st = 2 if child is None else nfs_present(kind, n, child, 256)
        v3 += nfs_present(kind, n, ps, d_ino) != st
        v4 += (2 if child is None else nfs_present(*plain, child, 256)) != st
    v4 += sum(1 for (s, o) in inodes
              if o != 256 and nfs_present(*plain, s, o) != nfs_present(kind, n, s, o))
    return out[0], out[1], over, out[2], out[3], v3, v4


def check_nfs(name, summ, inodes, stubs, entries, dev2):
    """collisions --json "nfs": every figure equals the brute force; v4 under
    the uniquifier disagrees for every inode outside subvolume 5; the
    transition count; composed N=64 is today's nfsd."""
    nfs = summ.get("nfs") or {}
    wrong, seen = [], 0
    for r in nfs.get("schemes", []):
        sc = nfs_scheme_of(r["scheme"])
        b = nfs_brute(inodes, stubs, entries, dev2, sc)
        is_nfs = sc[0] in ("nfsd", "uniq", "comp")
        have = (r["groups"], r["inodes"], r["over32"], r["low32_groups"], r["low32_inodes"],
                r["readdir_v3"], r["readdir_v4"])
        want = b if is_nfs else b[:5] + (None, None)
        seen += 1
        if have != want:
            wrong.append((r["scheme"], have, want))
    check(f"{name}: collisions nfs figures equal the brute force ({seen} schemes)",
          not wrong and seen == 35 + 67, str(wrong[:3]))
    outside = sum(1 for (s, o) in inodes if s != 5 and o != 256 and o != uniq(s))
    subent = sum(1 for (_, _, child) in entries if child is not None)
    u = next((r for r in nfs.get("schemes", []) if r["scheme"] == "nfsd-uniquifier"), {})
    check(f"{name}: NFSv4 under the uniquifier: every inode outside subvolume 5 and every "
          f"subvolume entry ({outside} + {subent}) disagrees",
          u.get("readdir_v4") == outside + subent, (u.get("readdir_v4"), outside, subent))
    changed = sum(1 for (s, o) in inodes if presented(o, uniq(s)) != o)
    check(f"{name}: transition: {changed} fileids change, {len(inodes) - changed} stay",
          (nfs.get("transition_changed"), nfs.get("transition_kept")) ==
          (changed, len(inodes) - changed), str(nfs)[:200])


def min_free(results, devs):
    """Smallest N whose inumbits=N,numdevs=D scheme has no group; None."""
    free = [int(k.split(",")[0].split("=")[1]) for k, g in results.items()
            if k.startswith("inumbits=") and k.endswith("numdevs=%d" % devs) and g == 0]
    return min(free) if free else None


def check_without_stubs(name, recs, inodes, stubs, entries, dev2, view):
    """The counts and verdicts without the stub directories: the brute force
    with the stubs left out; the stubs named as the kernel shows them."""
    wrong, with_stubs, without = [], {}, {}
    for r in recs:
        if r.get("summary"):
            continue
        g, i, _ = brute(inodes, [], entries, dev2, scheme_of(r["scheme"]))
        have = (r.get("groups_without_stubs"), r.get("inodes_without_stubs"),
                r.get("collision_free_without_stubs"))
        if have != (g, i, g == 0):
            wrong.append((r["scheme"], have, (g, i, g == 0)))
        with_stubs[r["scheme"]], without[r["scheme"]] = r["groups"], g
    check(f"{name}: collisions without stub directories equal the brute force without them",
          not wrong and len(without) == 69, str(wrong[:4]))
    summ = recs[-1] if recs and recs[-1].get("summary") else {}
    got = [summ.get(f"min_inumbits_numdevs{d}{w}") for w in ("", "_without_stubs") for d in (1, 2)]
    want = [min_free(x, d) for x in (with_stubs, without) for d in (1, 2)]
    check(f"{name}: smallest collision-free inumbits with and without stubs {want}", got == want,
          (got, want))
    check(f"{name}: stub_paths: the kernel's {len(stubs)} stub directories",
          sorted(summ.get("stub_paths", [None])) == sorted(kernel_stub_paths(view)),
          (summ.get("stub_paths"), kernel_stub_paths(view)))


def check_all_groups(name, img, inodes, dev2, view):
    """--examples 0: every group of every scheme, each with every member,
    equals the brute force's; the text report lists every nfsd group."""
    rc, recs, err = run_json(["collisions", "--json", "--examples", "0", "--mount-subvol", "5",
                              img])
    wrong, total = [], 0
    for r in recs:
        if r.get("summary"):
            continue
        want = brute_groups(inodes, kernel_stub_paths(view), dev2, scheme_of(r["scheme"]))
        got = sorted((sorted((("stub", m["path"]) if m.get("stub") else
                              (m["subvol"], m["objectid"]) for m in grp), key=str)
                      for grp in r["examples"]), key=str)
        total += len(got)
        if got != sorted(want.values(), key=str) or len(got) != r["groups"]:
            wrong.append((r["scheme"], len(got), len(want)))
    check(f"{name}: collisions --examples 0: all {total} groups with every member, as the "
          f"brute force", rc in (0, 1) and not wrong and len(recs) == 70, (rc, wrong[:3], err[-200:]))
    rc, out, err = imgtest.run_cli(CLI, ["collisions", "--examples", "0", "--mount-subvol", "5",
                                         img])
    nfsd = len(brute_groups(inodes, kernel_stub_paths(view), dev2, ("nfsd", 0)))
    listed = out.decode(errors="replace").split("\nNFS export today", 1)[-1].split("\n\n")[0]
    check(f"{name}: collisions --examples 0 text lists all {nfsd} nfsd groups",
          rc in (0, 1) and listed.count(" is shared by ") == nfsd, (rc, listed[-300:]))


def check_write_error(name, img):
    """Lines bypass stdio (inodes, walk): a full disk must still fail the
    run, and say so."""
    for cmd in ("inodes", "walk"):
        with open("/dev/full", "wb") as full:
            rc, _, err = imgtest.run_cli(CLI, [cmd, "--json", img], stdout=full)
        check(f"{name}: {cmd} --json to a full disk fails", rc == 2, str(rc))
        check(f"{name}: ... naming the write error",
              b"write error on standard output" in err, err[-300:])


def check_paths(name, recs, view):
    """Order, and each reachable inode's path is one the kernel shows for it."""
    keys = [(r["subvol"], r["objectid"]) for r in recs]
    check(f"{name}: inodes ordered by subvolume then objectid", keys == sorted(keys)
          and len(set(keys)) == len(keys))
    paths = collections.defaultdict(set)
    for v in view:
        if v["subvol"] is not None:
            paths[(v["subvol"], v["ino"])].add(v["path"])
    wrong = [(k, r["path"], sorted(paths[k])[:3]) for k, r in zip(keys, recs)
             if r["reachable"] and r["path"] not in paths[k]]
    check(f"{name}: every path is one of the kernel's paths for that inode", not wrong,
          str(wrong[:4]))
    kernel_reached = set(paths)
    hidden = [k for k, r in zip(keys, recs) if not r["reachable"] and k in kernel_reached
              and r["nlink"] > 0]
    check(f"{name}: nothing the kernel reaches is called unreachable", not hidden, str(hidden[:4]))


def check_example_paths(name, recs, view):
    """Every example member's path is one the kernel shows for it: a stub
    directory's path for stubs, else a path of that (subvol, objectid)."""
    paths = collections.defaultdict(set)
    stub_paths = {v["path"] for v in view if v["subvol"] is None}
    for v in view:
        if v["subvol"] is not None:
            paths[(v["subvol"], v["ino"])].add(v["path"])
    bad, seen = [], 0
    for r in recs:
        for group in r.get("examples", []):
            for m in group:
                seen += 1
                ok = (m["path"] in stub_paths) if m.get("stub") else \
                    (m["path"] in paths[(m["subvol"], m["objectid"])] or
                     (m["path"] is None and (m["subvol"], m["objectid"]) not in paths))
                if not ok:
                    bad.append((r["scheme"], m))
    check(f"{name}: example paths ({seen} members) are the kernel's", not bad, str(bad[:3]))


def live_view(mnt):
    """The kernel's view of a mounted image: path, subvol (STATX_SUBVOL), st_ino."""
    view = []
    for d, dirs, files in os.walk(mnt):
        names = sorted(dirs + files)
        for p in ([mnt] if d == mnt else []) + [os.path.join(d, n) for n in names]:
            st = os.lstat(p)
            rel = os.path.relpath(p, mnt)
            view.append({"path": "" if rel == "." else rel, "subvol": subvol_of(p),
                         "ino": st.st_ino, "mode": st.st_mode, "nlink": st.st_nlink})
    return view


def subvol_of(p):
    """stx_subvol via `btrfs inspect-internal rootid` (the kernel's answer)."""
    out = subprocess.run(["btrfs", "inspect-internal", "rootid", p], capture_output=True,
                         text=True)
    return int(out.stdout) if out.returncode == 0 else None


def live_moves():
    """Inodes named in directories made after them (parent objectid above the
    child's), moved trees and hard links, made by
    the kernel; `inodes` must report each with a path the kernel shows."""
    if os.geteuid() != 0 or not shutil.which("mkfs.btrfs"):
        print("skip live moves: needs root, loop devices and btrfs-progs")
        return
    work = tempfile.mkdtemp(prefix="btrfsimg-moves.")
    img, mnt = os.path.join(work, "m.img"), os.path.join(work, "mnt")
    os.mkdir(mnt)
    try:
        with open(img, "wb") as f:
            f.truncate(128 << 20)
        subprocess.run(["mkfs.btrfs", "-q", "-f", img], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "loop", img, mnt], check=True)
        try:
            for i in range(40):
                with open(f"{mnt}/f{i}", "w") as f:
                    f.write("x")
            os.makedirs(f"{mnt}/old/sub")
            for i in range(5):
                open(f"{mnt}/old/sub/g{i}", "w").close()
            os.makedirs(f"{mnt}/new1/new2")
            for i in range(0, 40, 3):
                os.rename(f"{mnt}/f{i}", f"{mnt}/new1/new2/f{i}")
            os.rename(f"{mnt}/old", f"{mnt}/new1/new2/old")
            os.link(f"{mnt}/f1", f"{mnt}/new1/link-f1")
            os.makedirs(f"{mnt}/later")
            os.rename(f"{mnt}/new1", f"{mnt}/later/new1")
            subprocess.run(["btrfs", "-q", "subvolume", "create", f"{mnt}/sv"], check=True)
            open(f"{mnt}/sv/a", "w").close()
            os.makedirs(f"{mnt}/sv/z")
            os.rename(f"{mnt}/sv/a", f"{mnt}/sv/z/a")
            subprocess.run(["sync"], check=True)
            view = live_view(mnt)
        finally:
            subprocess.run(["umount", mnt], check=True)
        rc, recs, err = run_json(["inodes", "--json", img])
        check("live moves: inodes exit 0", rc == 0, err[-300:])
        check_paths("live moves", recs, view)
        reached = {(v["subvol"], v["ino"]) for v in view}
        mine = {(r["subvol"], r["objectid"]) for r in recs if r["reachable"]}
        check("live moves: reachable set equals the kernel's", mine == reached,
              f"{sorted(mine ^ reached)[:6]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    hand_vectors()
    live_moves()
    files = os.path.join(TESTDATA, "files")
    work = tempfile.mkdtemp(prefix="btrfsimg-inodes.")
    try:
        for name in ("subvols", "special", "names", "comp", "extents", "holes", "log", "snaps"):
            src = os.path.join(files, name + ".img.zst")
            view = os.path.join(files, name + ".view.jsonl")
            if not os.path.exists(src) or not os.path.exists(view):
                check(f"{name}: corpus present", False, src)
                continue
            img = imgtest.private_copy(src, work)
            test_image(name, img, imgtest.load_jsonl(view))
            os.unlink(img)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(tally.summary())


if __name__ == "__main__":
    CLI, TESTDATA = sys.argv[1], sys.argv[2]
    main()
