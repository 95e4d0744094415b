#!/usr/bin/env python3
"""`collisions` on a generated image against the kernel, by brute force.

    exact.py BTRFSIMG IMAGE [--c BRUTE]

Mounts IMAGE read-only at the top level (root, loop device), walks it as
the kernel shows it (lstat: st_dev, st_ino; readdir: d_ino), names each
st_dev's subvolume with `btrfs inspect-internal rootid`, and counts every
scheme's shared numbers with the brute force of tests/images/test_inodes.py (a dict
of every presented number per device). With --c, the walk and the count are
bench/brute.c's instead (statx with STATX_SUBVOL; sorting), which copes with
a hundred million inodes. `btrfsimg collisions --json --mount-subvol 5` must
give the same groups, inodes and readdir mismatches for all 69 schemes, and
the same groups and inodes with the stub directories left out.
Prints the comparison; exit 1 on any difference.
"""
import os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "images"))
import test_inodes as ti  # noqa: E402  (the brute force, shared with the tests)


def rootid(path):
    out = subprocess.run(["btrfs", "inspect-internal", "rootid", path], capture_output=True,
                         text=True, check=True)
    return int(out.stdout)


def kernel_view(mnt):
    """Records in the shape of testdata/files/*.view.jsonl (path, subvol,
    ino, d_ino); a stub directory (st_ino 2) has subvol None."""
    dev_subvol = {}
    view = []
    stack = [("", None)]
    while stack:
        rel, d_ino = stack.pop()
        full = os.path.join(mnt, rel) if rel else mnt
        st = os.lstat(full)
        stub = st.st_ino == 2
        if not stub and st.st_dev not in dev_subvol:
            dev_subvol[st.st_dev] = rootid(full)
        view.append({"path": rel, "ino": st.st_ino, "d_ino": d_ino,
                     "subvol": None if stub else dev_subvol[st.st_dev]})
        if os.path.isdir(full) and not os.path.islink(full) and not stub:
            with os.scandir(full) as it:
                for e in it:
                    stack.append((os.path.join(rel, e.name) if rel else e.name, e.inode()))
    return view


def python_brute(mnt):
    """Scheme name -> (groups, inodes, readdir mismatches), by tests/images/test_inodes.py."""
    view = kernel_view(mnt)
    inodes, stubs, entries = ti.kernel_inodes(view)
    dev2 = ti.depth_parity(view)
    names = ["nfsd", "nfsd-uniquifier", "numdevs=many"] + [
        f"inumbits={n},numdevs={d}" for n in range(32, 65) for d in (1, 2)]
    print(f"kernel view: {len(view)} paths, {len(inodes)} inodes, {len(stubs)} stubs")
    want = {}
    for name in names:
        g, i, m = ti.brute(inodes, stubs, entries, dev2, ti.scheme_of(name))
        g0, i0, _ = ti.brute(inodes, [], entries, dev2, ti.scheme_of(name))
        want[name] = (g, i, m, g0, i0)
    return want


def c_brute(brute, mnt):
    p = subprocess.run([brute, mnt], stdout=subprocess.PIPE, text=True, check=True)
    want = {}
    for line in p.stdout.splitlines():
        name, *counts = line.split()
        want[name] = tuple(int(x) for x in counts)
    return want


def main():
    args = sys.argv[1:]
    brute = None
    if "--c" in args:
        k = args.index("--c")
        brute = args[k + 1]
        del args[k:k + 2]
    cli, img = args
    ti.CLI = cli
    mnt = tempfile.mkdtemp(prefix="btrfsimg-exact.")
    t0 = time.time()
    subprocess.run(["mount", "-o", "loop,ro,subvolid=5", img, mnt], check=True)
    try:
        want = c_brute(brute, mnt) if brute else python_brute(mnt)
    finally:
        subprocess.run(["umount", mnt], check=True)
        os.rmdir(mnt)
    t1 = time.time()
    rc, recs, err = ti.run_json(["collisions", "--json", "--mount-subvol", "5", img])
    t2 = time.time()
    wrong = []
    for r in recs:
        if r.get("summary"):
            continue
        have = (r["groups"], r["inodes"], r["readdir_mismatch"], r["groups_without_stubs"],
                r["inodes_without_stubs"])
        if have != want.get(r["scheme"]):
            wrong.append((r["scheme"], have, want.get(r["scheme"])))
    for name in ("nfsd", "inumbits=56,numdevs=1", "inumbits=64,numdevs=2"):
        if name in want:
            g, i, m = want[name][:3]
            print(f"  brute force, {name}: {g} shared numbers, {i} inodes in them, "
                  f"{m} readdir mismatches")
    print(f"kernel walk and brute force ({'bench/brute.c' if brute else 'Python'}) "
          f"{t1 - t0:.1f} s; btrfsimg collisions {t2 - t1:.1f} s")
    ok = rc in (0, 1) and not wrong and len(recs) == 70 and len(want) == 69
    print(f"collisions equal the kernel-view brute force for {len(recs) - 1} schemes: "
          f"{'yes' if ok else 'NO'} {wrong[:4] if wrong else ''}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
