#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_facts.py: what a user looks for first, against recorded truth.

    test_facts.py BTRFSIMG TESTDATA

  * log replay: on the crash image (testdata/files/log.img) every command
    says on stderr, in one line, that the log tree was replayed, how many
    items and subvolumes changed (the subvolumes must be those whose paths
    differ between the kernel's recorded views after and before replay,
    log.view.jsonl and log.nolog.view.jsonl), and how to see the last
    commit; exit status 0. Nothing with -q or --no-log-replay, and nothing
    on the images whose recorded dump-super says log_root 0.
Prints one line per check, then "N passed, M failed".
"""
import json
import os
import re
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import imgtest  # noqa: E402

CLI, TESTDATA = sys.argv[1], sys.argv[2]
FILES = os.path.join(TESTDATA, "files")
tally = imgtest.Tally()
check = tally.check


def run(args, **kw):
    return imgtest.run_cli(CLI, args, **kw)


def dump_super_field(path, field):
    """A field of a recorded `btrfs inspect-internal dump-super` (first copy)."""
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0] == field:
                return parts[1]
    return None


# ------------------------------------------------------------ log replay

LOG_LINE = re.compile(r"^btrfsimg: replayed the log tree \(changes fsync'ed after the last "
                      r"commit\): (\d+) items in (\d+) subvolumes?; --no-log-replay shows the "
                      r"last commit$")


def log_lines(err):
    return [line for line in err.decode(errors="replace").splitlines() if "log tree" in line]


def test_log_replay(work):
    img = imgtest.private_copy(os.path.join(FILES, "log.img.zst"), work)
    after = {r["path"]: r for r in imgtest.load_jsonl(os.path.join(FILES, "log.view.jsonl"))}
    before = {r["path"]: r for r in imgtest.load_jsonl(os.path.join(FILES, "log.nolog.view.jsonl"))}
    changed = [p for p in set(after) | set(before) if after.get(p) != before.get(p)]
    subvols = {(after.get(p) or before.get(p))["subvol"] for p in changed}
    for cmd in (["walk"], ["walk", "--json"], ["inodes"], ["subvols"], ["super"], ["cat", "--path",
                                                                                 "base/new.txt"]):
        rc, out, err = run(cmd + [img])
        lines = log_lines(err)
        m = LOG_LINE.match(lines[0]) if len(lines) == 1 else None
        check(f"log.img: {' '.join(cmd)}: one line on stderr says the log was replayed, exit 0",
              rc == 0 and m, (rc, err[-400:]))
        if m:
            check(f"log.img: {' '.join(cmd)}: {m[2]} subvolumes changed, as the kernel's views "
                  f"before and after replay show ({sorted(subvols)})", int(m[2]) == len(subvols),
                  (m[2], sorted(subvols)))
            check(f"log.img: {' '.join(cmd)}: {m[1]} items, at least the {len(changed)} paths "
                  f"that changed", int(m[1]) >= len(changed), (m[1], len(changed)))
        check(f"log.img: {' '.join(cmd)}: the line is not in stdout", b"log tree" not in out)
    for opt in ("-q", "--no-log-replay"):
        rc, out, err = run(["walk", opt, img])
        check(f"log.img: walk {opt}: no log line, exit 0", rc == 0 and not log_lines(err),
              (rc, err[-300:]))
    rc, out, _ = run(["walk", "--json", "--no-log-replay", img])
    paths = [json.loads(line)["path"] for line in out.splitlines()]
    check("log.img: walk --no-log-replay: the kernel's paths before replay",
          rc == 0 and sorted(paths) == sorted(before), (rc, sorted(set(paths) ^ set(before))))
    os.unlink(img)
    for name in sorted(os.listdir(FILES)):
        if not name.endswith(".img.zst") or name.startswith("log."):
            continue
        base = name[:-len(".img.zst")]
        log_root = dump_super_field(os.path.join(FILES, base + ".super.txt"), "log_root")
        img = imgtest.private_copy(os.path.join(FILES, name), work)
        rc, out, err = run(["subvols", img])
        check(f"{base}.img (dump-super: log_root {log_root}): no log line",
              log_root == "0" and rc == 0 and not log_lines(err), (log_root, rc, err[-300:]))
        os.unlink(img)


# ------------------------------------------------------------ main

def main():
    work = tempfile.mkdtemp(prefix="test_facts.")
    try:
        test_log_replay(work)
    except imgtest.RestoreError as e:
        check("images restored", False, e)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tally.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
