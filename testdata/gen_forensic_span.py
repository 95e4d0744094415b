#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gen_forensic_span.py: a deleted file whose extent items fill several
leaves, for the forensic tests; run by gen-forensic.sh on a fresh btrfs
made with nodesize 4096 and mounted at MNT (as root).

    gen_forensic_span.py MNT TRUTH.json

400 separate 4 KiB extents (one every 8 KiB, holes between) need about
21 KiB of EXTENT_DATA items, so the inode's items run over five or more
4 KiB leaves; the file is committed, deleted and the deletion committed.
TRUTH.json records its sha256 and size.
"""
import hashlib
import json
import os
import subprocess
import sys


def main():
    mnt, truth = sys.argv[1:3]
    path = os.path.join(mnt, "sparse")
    with open(path, "wb") as f:
        for i in range(400):
            f.seek(i * 8192)
            f.write(hashlib.sha256(b"%d" % i).hexdigest().encode() * 128)
    with open(path, "rb") as f:
        data = f.read()
    os.sync()
    os.unlink(path)
    os.sync()
    subprocess.run(["btrfs", "filesystem", "sync", mnt], check=True)
    with open(truth, "w") as f:
        json.dump({"span": {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                            "path": "sparse"}}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
