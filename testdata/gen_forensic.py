#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gen_forensic.py: the workload of the forensic truth images, run by
gen-forensic.sh on a fresh btrfs mounted at MNT (as root).

    gen_forensic.py MNT TRUTH.json

Files are written, rewritten, truncated, appended to, reflinked and
deleted in rounds with a commit (sync) after each; a subvolume is created,
filled, deleted and cleaned (`btrfs subvolume sync`); then filler data is
written so that some of the freed space is reused. Kinds: inline,
regular, compressed (zlib, lzo, zstd: `btrfs property set compression`),
reflinked (cp --reflink=always), nodatasum (chattr +C on the empty file);
sizes from 100 bytes to 3 MiB, many of them 1-4 KiB.

TRUTH.json records every version ever written (the content a file held
after a write: its sha256, size, kind, path, subvolume, inode number and
round; every file is created empty first, and that empty state is a
version too, kind "empty") and, at the end, what the kernel shows: every live regular file's
path and sha256. A version is "lost" when no live file holds it at the
end; how it was lost is its fate: "deleted" (its file was unlinked),
"previous-version" (the file lives with other contents) or
"dropped-subvolume".

Contents have low entropy on purpose (a seed-derived 64-byte line per
8 KiB) so that the image compresses to a few hundred KiB, yet every
version differs from every other.
"""
import hashlib
import json
import os
import subprocess
import sys

KINDS = ["regular", "zlib", "lzo", "zstd", "nodatasum"]
SIZES = [100, 1500, 3000, 4096, 12288, 100000, 1 << 20]


def content(seed, size):
    out = bytearray()
    n = 0
    while len(out) < size:
        line = hashlib.sha256(b"%s:%d" % (seed.encode(), n)).hexdigest()
        out += (line[:63] + "\n").encode() * 128  # 8 KiB
        n += 1
    return bytes(out[:size])


class Work:
    def __init__(self, mnt):
        self.mnt = mnt
        self.round = 0
        self.versions = []
        self.fate = {}  # path -> list of version indices

    def commit(self):
        os.sync()
        subprocess.run(["btrfs", "filesystem", "sync", self.mnt], check=True,
                       stdout=subprocess.DEVNULL)
        self.round += 1

    def record(self, rel, data, kind, subvol):
        st = os.stat(os.path.join(self.mnt, rel))
        self.versions.append({
            "path": rel, "subvol": subvol, "ino": st.st_ino, "round": self.round,
            "size": len(data), "kind": kind,
            "sha256": hashlib.sha256(data).hexdigest()})

    def create(self, rel, kind, data, subvol="top"):
        p = os.path.join(self.mnt, rel)
        open(p, "wb").close()
        self.record(rel, b"", "empty", subvol)  # a real state: it may reach the disk
        if kind in ("zlib", "lzo", "zstd"):
            subprocess.run(["btrfs", "property", "set", p, "compression", kind], check=True)
        elif kind == "nodatasum":
            subprocess.run(["chattr", "+C", p], check=True)
        with open(p, "r+b") as f:
            f.write(data)
        self.record(rel, data, kind, subvol)

    def rewrite(self, rel, kind, data, subvol="top"):
        with open(os.path.join(self.mnt, rel), "r+b") as f:
            f.truncate(0)
            f.write(data)
        self.record(rel, data, kind, subvol)

    def truncate(self, rel, kind, n, subvol="top"):
        p = os.path.join(self.mnt, rel)
        os.truncate(p, n)
        with open(p, "rb") as f:
            self.record(rel, f.read(), kind, subvol)

    def append(self, rel, kind, data, subvol="top"):
        p = os.path.join(self.mnt, rel)
        with open(p, "ab") as f:
            f.write(data)
        with open(p, "rb") as f:
            self.record(rel, f.read(), kind, subvol)

    def reflink(self, src, dst, subvol="top"):
        s, d = os.path.join(self.mnt, src), os.path.join(self.mnt, dst)
        subprocess.run(["cp", "--reflink=always", s, d], check=True)
        with open(d, "rb") as f:
            self.record(dst, f.read(), "reflink", subvol)


def live_files(mnt):
    out = []
    for root, dirs, files in os.walk(mnt):
        for name in files:
            p = os.path.join(root, name)
            if os.path.islink(p):
                continue
            with open(p, "rb") as f:
                out.append({"path": os.path.relpath(p, mnt),
                            "sha256": hashlib.sha256(f.read()).hexdigest()})
    return sorted(out, key=lambda x: x["path"])


def main():
    mnt, truth = sys.argv[1], sys.argv[2]
    w = Work(mnt)
    os.makedirs(os.path.join(mnt, "docs/old"))
    os.makedirs(os.path.join(mnt, "tmp"))
    # round 0: one file of every kind and size
    for k in KINDS:
        for s in SIZES:
            w.create("docs/%s-%d" % (k, s), k, content("a-%s-%d" % (k, s), s))
    w.create("docs/old/big", "regular", content("big", 3 << 20))
    w.create("tmp/scratch", "regular", content("scratch", 8192))
    w.commit()
    # round 1: rewrite, truncate, append, reflink, delete
    for k in KINDS:
        w.rewrite("docs/%s-3000" % k, k, content("b-%s-3000" % k, 3000))
        w.rewrite("docs/%s-100000" % k, k, content("b-%s-100000" % k, 90000))
        w.truncate("docs/%s-12288" % k, k, 5000)
        w.append("docs/%s-1500" % k, k, content("b-%s-app" % k, 700))
        os.unlink(os.path.join(mnt, "docs/%s-4096" % k))
    w.reflink("docs/regular-1048576", "docs/copy-of-1m")
    os.unlink(os.path.join(mnt, "tmp/scratch"))
    w.commit()
    # round 2: a subvolume, filled
    subprocess.run(["btrfs", "subvolume", "create", os.path.join(mnt, "sv1")], check=True,
                   stdout=subprocess.DEVNULL)
    os.makedirs(os.path.join(mnt, "sv1/inner"))
    for k in KINDS:
        for s in (100, 3000, 4096, 100000):
            w.create("sv1/inner/%s-%d" % (k, s), k, content("sv-%s-%d" % (k, s), s), "sv1")
    w.create("sv1/photo", "regular", content("photo", 2 << 20), "sv1")
    w.commit()
    # round 3: more deletions and rewrites in the top level
    for k in KINDS:
        os.unlink(os.path.join(mnt, "docs/%s-100" % k))
        w.rewrite("docs/%s-1048576" % k, k, content("c-%s-1m" % k, 1 << 20))
    os.unlink(os.path.join(mnt, "docs/old/big"))
    w.commit()
    # round 4: the subvolume deleted and cleaned
    subprocess.run(["btrfs", "subvolume", "delete", os.path.join(mnt, "sv1")], check=True,
                   stdout=subprocess.DEVNULL)
    w.commit()
    subprocess.run(["btrfs", "subvolume", "sync", mnt], check=True, stdout=subprocess.DEVNULL)
    w.commit()
    # round 5: filler data reuses some freed space; a last small round
    for i in range(6):
        w.create("fill-%d" % i, "regular", content("fill-%d" % i, 4 << 20))
        w.commit()
    for k in KINDS:
        os.unlink(os.path.join(mnt, "docs/%s-1500" % k))
    w.create("docs/late", "regular", content("late", 3000))
    w.commit()

    live = live_files(mnt)
    live_sha = {f["sha256"] for f in live}
    live_paths = {f["path"] for f in live}
    for v in w.versions:
        if v["sha256"] in live_sha:
            v["fate"] = "live"
        elif v["subvol"] == "sv1":
            v["fate"] = "dropped-subvolume"
        elif v["path"] in live_paths:
            v["fate"] = "previous-version"
        else:
            v["fate"] = "deleted"
    with open(truth, "w") as f:
        json.dump({"versions": w.versions, "live": live}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
