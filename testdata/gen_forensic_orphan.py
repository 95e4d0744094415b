#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gen_forensic_orphan.py: an orphan for the forensic tests, run by
gen-forensic.sh on a fresh btrfs mounted at MNT from the image IMG (as root).

    gen_forensic_orphan.py MNT IMG OUT.img TRUTH.json

A file is written and committed, then opened, unlinked and the unlink
committed while it is still open: the kernel keeps the inode with link
count 0 and an ORPHAN_ITEM until the last close. The image is copied at
that moment (as a crash would leave it), then the file is closed.
TRUTH.json records the file's sha256, size and inode number.
"""
import hashlib
import json
import os
import subprocess
import sys


def main():
    mnt, img, out, truth = sys.argv[1:5]
    data = b"".join(hashlib.sha256(b"orphan:%d" % i).hexdigest().encode() * 128
                    for i in range(6))  # 48 KiB
    path = os.path.join(mnt, "held-open")
    with open(path, "wb") as f:
        f.write(data)
    os.sync()
    fd = os.open(path, os.O_RDONLY)
    ino = os.fstat(fd).st_ino
    os.unlink(path)
    os.sync()
    subprocess.run(["btrfs", "filesystem", "sync", mnt], check=True)
    subprocess.run(["cp", "--sparse=always", img, out], check=True)
    os.close(fd)
    with open(truth, "w") as f:
        json.dump({"orphan": {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                              "ino": ino, "path": "held-open"}}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
