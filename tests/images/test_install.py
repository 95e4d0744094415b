#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_install.py: what an install gives a user.

    test_install.py MESON BUILDDIR SOURCEDIR [--pip]

- `meson install --destdir D` of the build: the installed btrfsimg runs
  from there with a clean environment (no LD_LIBRARY_PATH, its library
  not in the linker's cache): it finds libbtrfsimg.so.2 by its rpath,
  relative to itself, for any prefix but /usr.
- with --pip, as README says: `pip install --no-build-isolation` of the
  source into a target directory (no network: no build isolation), then
  the module imported from there opens a committed image. meson-python
  runs patchelf on the wheel (scripts/deps.sh installs it). Minutes: the
  library is compiled again.
Prints one line per check, then "N passed, M failed"; exit 77 (skip) when
what it needs is missing, saying which.
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

CLEAN = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def installed_tool(t, meson, build, work):
    dest = os.path.join(work, "dest")
    p = subprocess.run([meson, "install", "-C", build, "--no-rebuild", "--destdir", dest],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    t.check("meson install --destdir", p.returncode == 0, p.stdout[-500:])
    tools = [os.path.join(r, f) for r, _, fs in os.walk(dest) for f in fs
             if f == "btrfsimg" and os.access(os.path.join(r, f), os.X_OK)
             and os.path.basename(r) == "bin"]
    t.check("the tool installed once", len(tools) == 1, tools)
    if len(tools) != 1:
        return
    p = subprocess.run([tools[0], "--version"], env=CLEAN, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    t.check("the installed tool runs with a clean environment (its library by rpath)",
            p.returncode == 0 and p.stdout.startswith(b"btrfsimg "), (p.returncode, p.stderr))


def pip_path(t, src, testdata, work):
    py = "/usr/bin/python3"
    if subprocess.run([py, "-m", "pip", "--version"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        print("skip pip install: %s has no pip (Debian: python3-pip)" % py)
        return
    if not shutil.which("patchelf"):
        t.check("patchelf installed (meson-python runs it; bash scripts/deps.sh)", False, "")
        return
    target = os.path.join(work, "site")
    # a copy of the source without its build directories: pip copies none
    copy = os.path.join(work, "src")
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("build*", ".git", "testdata"))
    p = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                        "--no-index", "--target", target, copy], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=1500)
    t.check("pip install --no-build-isolation --target", p.returncode == 0, p.stdout[-1500:])
    if p.returncode != 0:
        return
    img = imgtest.private_copy(os.path.join(testdata, "files", "subvols.img.zst"), work)
    code = ("import sys, btrfsimg\n"
            "with btrfsimg.open(sys.argv[1]) as fs:\n"
            "    print(fs.stat('top.txt')['ino'])\n")
    p = subprocess.run([py, "-c", code, img], env=dict(CLEAN, PYTHONPATH=target),
                       cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    t.check("the installed module imports and reads an image", p.returncode == 0
            and p.stdout.strip().isdigit(), (p.returncode, p.stderr[-500:]))


def main():
    meson, build, src = sys.argv[1:4]
    t = imgtest.Tally()
    work = tempfile.mkdtemp(prefix="test_install.")
    try:
        installed_tool(t, meson, build, work)
        if "--pip" in sys.argv[4:]:
            pip_path(t, src, os.path.join(src, "testdata"), work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return t.summary()


if __name__ == "__main__":
    sys.exit(main())
