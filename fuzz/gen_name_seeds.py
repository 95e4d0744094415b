#!/usr/bin/env python3
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""Whole-image seeds whose names cannot be a path component.

    gen_name_seeds.py

The damaged images of tests/images/test_names.py, as seeds of the image and
forensic targets (fuzz/sparse_image.h format, checksums recomputed by the
harness): testdata/sample.img with names rewritten to "..", ".", "l/g1",
"l<NUL>g2" and "/a/b/c/de" (DIR_INDEX and INODE_REF items) into
fuzz/corpus/image/names-sample, and testdata/forensic/single.img with two
deleted names holding '/' and NUL into fuzz/corpus/forensic/names-single.
"""
import os, subprocess, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "images"))
import test_names  # noqa: E402  (rename: the damage, one definition)

TESTDATA = os.path.join(HERE, "..", "testdata")


def main():
    with tempfile.TemporaryDirectory() as work:
        for src, owners, renames, target, name in (
                ("sample.img.zst", {5, 256, 257, 258}, test_names.LIVE, "image", "names-sample"),
                (os.path.join("forensic", "single.img.zst"), {5}, test_names.DELETED,
                 "forensic", "names-single")):
            img = os.path.join(work, name + ".img")
            subprocess.run(["zstd", "-q", "-d", "-f", os.path.join(TESTDATA, src), "-o", img],
                           check=True)
            done = test_names.rename(img, owners, renames)
            assert done == {o for o, _ in renames}, done
            out = os.path.join(HERE, "corpus", target)
            if target == "image":
                subprocess.run([sys.executable, os.path.join(HERE, "gen_sparse_seeds.py"), out,
                                img], check=True)
                continue
            # the forensic seed kept small as gen_forensic_seed.py keeps it,
            # every fs-tree block (the damaged stale leaves among them)
            subprocess.run(["zstd", "-q", "-f", "--rm", img, "-o", img + ".zst"], check=True)
            subprocess.run([sys.executable, os.path.join(HERE, "gen_forensic_seed.py"),
                            os.path.join(out, name), img + ".zst", "1"], check=True)


if __name__ == "__main__":
    main()
