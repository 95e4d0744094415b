#!/usr/bin/env python3
"""`collisions` against bench/brute.c on the committed images, mounted live.

    test_brute.py BTRFSIMG BRUTE TESTDATA

bench/brute.c is the brute force `bench/run.sh --exact` uses on images too
large for Python (a hundred million inodes): it walks the mounted image with
statx (STATX_SUBVOL) and readdir and counts every scheme's shared numbers by
sorting. Here it runs on every committed files-layer image whose kernel view
needs no log replay, through bench/exact.py, so that it keeps agreeing with
`collisions` and with test_inodes.py's brute force on the same images.
Skipped (exit 77) without root, loop devices or btrfs.
"""
import os, subprocess, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402


def main():
    cli, brute, testdata = sys.argv[1:4]
    why = imgtest.skip_reason()
    if not why and imgtest.kernel_release() < (6, 10):
        why = f"Linux {os.uname().release} has no STATX_SUBVOL (6.10)"
    if why:
        print(f"SKIP: live mount: {why}")
        return imgtest.SKIP
    exact = os.path.join(imgtest.REPO, "bench", "exact.py")
    files = os.path.join(testdata, "files")
    tally = imgtest.Tally()
    with tempfile.TemporaryDirectory(prefix="btrfsimg-brute.") as work:
        for name in sorted(os.listdir(files)):
            if not name.endswith(".img.zst") or name.startswith("log."):
                continue  # log.img: the kernel cannot replay its log on a read-only loop device
            img = imgtest.private_copy(os.path.join(files, name), work)
            p = subprocess.run([sys.executable, exact, cli, img, "--c", brute],
                               capture_output=True, text=True, timeout=300)
            tally.check(f"{name[:-8]}: collisions equal bench/brute.c for 69 schemes",
                        p.returncode == 0, (p.stdout + p.stderr)[-600:])
            os.unlink(img)
    return tally.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
