#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gen_forensic_churn.py: the workload of the forensic truth image in which
the old trees are no longer reachable from any root a tool can walk, run
by gen-forensic.sh on a fresh btrfs (nodesize 4096, metadata dup) mounted
at MNT with nodiscard (as on a disk without discard), as root.

    gen_forensic_churn.py MNT TRUTH.json [ROUNDS]

Phase A (before the balance): directories of small files (inline, 1-4
KiB, some larger, one zstd-compressed), rewritten and deleted in rounds
with a commit after each; a whole directory tree removed; a subvolume
with a tree several levels deep (4 KiB nodes) filled, deleted and cleaned
(`btrfs subvolume sync`). Then `btrfs balance start -m`: every metadata
(and system) chunk is relocated and the old ones freed, so the stale
blocks of phase A lie in device space today's chunk map no longer covers.
Phase B (after it): more rewrites, deletions and a directory removed;
then ROUNDS (default 40) rounds of metadata churn (60 files created, 30
renamed, all deleted, a commit after each round) so that freed blocks,
old root-tree blocks among them, are written over: 40 rounds stay inside
the metadata chunk the balance made (every root after it is still on
disk), 240 go round it again (the allocator comes back to its start) and
write over the roots, nodes and many leaves of phase B.

TRUTH.json is what gen_forensic.py records (every version ever written,
its fate, the live files at the end), each version's "sectors" (the
first 16 hex digits of the sha256 of each 4 KiB of it, the last one
short: what a partly recovered version's readable sectors must be), and
"dirs": every directory
removed (or gone with the subvolume), with its path, subvolume, inode
number, fate ("deleted" or "dropped-subvolume"), mode and creation time
(statx btime) taken before its removal. The churn files are created
empty and stay empty (their versions are "empty": no content to lose).
"""
import hashlib
import json
import os
import subprocess
import sys

import genlib
from gen_forensic import Work, content, live_files

KINDS = ["regular", "regular", "regular", "zstd", "nodatasum"]
SIZES = [200, 1200, 2500, 3000, 4096, 4000, 9000, 40000]


class ChurnWork(Work):
    def __init__(self, mnt):
        super().__init__(mnt)
        self.dirs = []

    def record(self, rel, data, kind, subvol):
        super().record(rel, data, kind, subvol)
        self.versions[-1]["sectors"] = [hashlib.sha256(data[i:i + 4096]).hexdigest()[:16]
                                        for i in range(0, len(data), 4096)]

    def mkdirs(self, rel):
        os.makedirs(os.path.join(self.mnt, rel), exist_ok=True)

    def note_dir(self, rel, subvol, fate):
        st = genlib.statx(os.path.join(self.mnt, rel),
                          genlib.STATX_BASIC_STATS | genlib.STATX_BTIME)
        self.dirs.append({"path": rel, "subvol": subvol, "ino": st["ino"], "fate": fate,
                          "round": self.round, "mode": st["mode"], "btime": list(st["btime"])})

    def rmtree(self, rel, subvol="top"):
        """Remove directory @rel and everything under it, noting each
        directory (deepest first)."""
        top = os.path.join(self.mnt, rel)
        for root, dirs, files in os.walk(top, topdown=False):
            for name in files:
                os.unlink(os.path.join(root, name))
            self.note_dir(os.path.relpath(root, self.mnt), subvol, "deleted")
            os.rmdir(root)

    def sh(self, *cmd):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def fill_dir(w, rel, tag, n, subvol="top"):
    w.mkdirs(rel)
    names = []
    for i in range(n):
        k = KINDS[i % len(KINDS)]
        s = SIZES[(i * 3 + len(tag)) % len(SIZES)]
        name = "%s/%s-%02d" % (rel, k, i)
        w.create(name, k, content("%s-%s-%d" % (tag, rel, i), s), subvol)
        names.append((name, k, s))
    return names


def main():
    mnt, truth = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    w = ChurnWork(mnt)
    # ---- phase A
    keep = fill_dir(w, "proj/src", "a", 40)
    gone = fill_dir(w, "proj/old", "a", 20) + fill_dir(w, "proj/old/deep", "a", 10)
    notes = fill_dir(w, "notes", "a", 30)
    w.create("notes/big.zst", "zstd", content("big-zst", 1 << 20))
    w.commit()
    for name, k, s in keep[::3]:
        w.rewrite(name, k, content("b-" + name, s))
    for name, _k, _s in notes[::3]:
        os.unlink(os.path.join(mnt, name))
    w.commit()
    w.rmtree("proj/old")
    w.commit()
    w.sh("btrfs", "subvolume", "create", os.path.join(mnt, "box"))
    box = fill_dir(w, "box/inner", "sv", 60, "box") + fill_dir(w, "box/inner/x", "sv", 20, "box")
    for i in range(150):  # many names: a subvolume tree of several levels
        open(os.path.join(mnt, "box/inner/x/e%03d" % i), "wb").close()
    w.commit()
    for d in ("box/inner/x", "box/inner", "box"):
        w.note_dir(d, "box", "dropped-subvolume")
    w.sh("btrfs", "subvolume", "delete", os.path.join(mnt, "box"))
    w.commit()
    w.sh("btrfs", "subvolume", "sync", mnt)
    w.commit()
    # ---- the balance: metadata and system chunks relocated, old ones freed
    w.sh("btrfs", "balance", "start", "-m", mnt)
    w.commit()
    # ---- phase B
    later = fill_dir(w, "mail/2023", "b", 24) + fill_dir(w, "mail/2024", "b", 24)
    w.commit()
    for name, k, s in later[24::5]:
        w.rewrite(name, k, content("c-" + name, s))
    w.commit()
    w.rmtree("mail/2023")
    for name, _k, _s in keep[1::5]:
        os.unlink(os.path.join(mnt, name))
    w.commit()
    # ---- churn: metadata written over the freed blocks
    w.mkdirs("spool")
    for r in range(rounds):
        for i in range(60):
            open(os.path.join(mnt, "spool/t%d-%d" % (r, i)), "wb").close()
        for i in range(0, 60, 2):
            os.rename(os.path.join(mnt, "spool/t%d-%d" % (r, i)),
                      os.path.join(mnt, "spool/u%d-%d" % (r, i)))
        for i in range(60):
            p = os.path.join(mnt, "spool/%s%d-%d" % ("u" if i % 2 == 0 else "t", r, i))
            os.unlink(p)
        w.commit()

    live = live_files(mnt)
    live_sha = {f["sha256"] for f in live}
    live_paths = {f["path"] for f in live}
    for v in w.versions:
        if v["sha256"] in live_sha:
            v["fate"] = "live"
        elif v["subvol"] == "box":
            v["fate"] = "dropped-subvolume"
        elif v["path"] in live_paths:
            v["fate"] = "previous-version"
        else:
            v["fate"] = "deleted"
    with open(truth, "w") as f:
        json.dump({"versions": w.versions, "live": live, "dirs": w.dirs}, f, indent=1,
                  sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
