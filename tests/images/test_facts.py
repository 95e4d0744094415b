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
    on the images whose recorded dump-super says log_root 0; super --json's
    log_tree says the same.
  * super, on every image of testdata/images/ and every check of its
    manifest that opens it: the incompat and compat_ro flags by name
    (btrfs-progs' names in the recorded dump-super, and every feature the
    kernel listed in sysfs), the device table (devid, uuid and size from
    each device's recorded dump-super dev_item; the image that supplied it;
    the devices the kernel's degraded mount called missing), the partition
    and offset opened (the recorded sfdisk table), and the profiles in use
    (the manifest's, which sysfs confirms) with how many devices each
    tolerates losing (the kernel's table); in JSON (new keys) and text.
  * progress: walk and inodes run with stderr on a pseudo-terminal (and
    stdout on another, read slowly so that the run lasts seconds) show
    "WHAT: COUNT, P% of about TOTAL inodes, M:SS left" lines, erased at the
    end. TOTAL must be the sum over the subvolumes walked of the highest
    inode number the kernel showed in each (testdata/files/*.view.jsonl)
    less 255; counts and percentages only grow; the time left appears once
    a second has passed. Without a total (a walk from a path inside a
    subvolume) only the count; with stderr not a terminal, nothing.
Prints one line per check, then "N passed, M failed".
"""
import collections
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
import tty

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
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
    rc, out, err = run(["super", "--json", img])
    m = LOG_LINE.match((log_lines(err) or [""])[0])
    got = json.loads(out).get("log_tree") if rc == 0 else None
    want = {"present": True, "replayed": True, "items": int(m[1]) if m else None,
            "subvols": len(subvols)}
    check("log.img: super --json: log_tree says what the line says", got == want, (got, want))
    rc, out, err = run(["super", "--json", "--no-log-replay", img])
    got = json.loads(out).get("log_tree") if rc == 0 else None
    check("log.img: super --json --no-log-replay: log_tree present, not replayed",
          got == {"present": True, "replayed": False, "items": 0, "subvols": 0}, got)
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
        rc, out, err = run(["super", "--json", img])
        got = json.loads(out).get("log_tree") if rc == 0 else None
        check(f"{base}.img: super --json: no log tree", got == {
            "present": False, "replayed": False, "items": 0, "subvols": 0}, got)
        os.unlink(img)


# ------------------------------------------------------------ super

# Devices a profile may lose (the kernel's btrfs_raid_array, tolerated_failures).
TOLERATES = {"single": 0, "dup": 0, "raid0": 0, "raid1": 1, "raid1c3": 2, "raid1c4": 3,
             "raid10": 1, "raid5": 1, "raid6": 2}


def dump_super(path):
    """{"incompat": [names], "compat_ro": [names], "devid", "uuid", "total_bytes"} of a
    recorded dump-super (the first copy: the one in use)."""
    text = open(path).read().split("\nsuperblock:", 1)[0]
    out = {}
    for kind in ("incompat", "compat_ro"):
        m = re.search(r"^%s_flags\s+0x([0-9a-f]+)(?:\s*\n\s*\(([^)]*)\))?" % kind, text, re.M)
        out[kind] = [n.strip().lower() for n in m[2].split("|")] if m and m[2] else []
        out[kind + "_value"] = int(m[1], 16) if m else None
    for field, key in (("dev_item.devid", "devid"), ("dev_item.uuid", "uuid"),
                       ("dev_item.total_bytes", "total_bytes")):
        v = dump_super_field(path, field)
        out[key] = int(v) if v and v.isdigit() else v
    return out


def sysfs(path):
    """The fields of a recorded sysfs.txt: "features", "devids", "missing" as lists."""
    out = {}
    if os.path.exists(path):
        for line in open(path):
            k, _, v = line.partition(":")
            out[k.strip()] = v.split()
    return out


def sfdisk_table(path):
    """{partition number: byte offset} of a recorded `sfdisk -d`."""
    table = {}
    if os.path.exists(path):
        for line in open(path):
            m = re.match(r"\S+?(\d+) : start=\s*(\d+),", line)
            if m:
                table[int(m[1])] = int(m[2]) * 512
    return table


def super_truth(idir, man, c):
    """What super must show for manifest check @c, from the recorded files."""
    fs = c.get("fs", "")
    pre = fs + "." if fs else ""
    devs = man["filesystems"][fs]["devices"]
    given = set(c["devices"])
    per_dev = {d: dump_super(os.path.join(idir, "%s%s.dump-super.txt" % (pre, d[:-4])))
               for d in devs}
    if given == set(devs):
        kernel = sysfs(os.path.join(idir, pre + "sysfs.txt"))
    else:
        tag = "-".join(sorted(d[:-4] for d in given))
        kernel = sysfs(os.path.join(idir, "degraded-%s.sysfs.txt" % tag))
    first = per_dev[devs[0]]
    table = sfdisk_table(os.path.join(idir, "partition-table.txt"))
    if "--offset" in c["args"]:
        partition, offset = None, int(c["args"][c["args"].index("--offset") + 1])
    elif table:
        partition = man["filesystems"][fs]["partition"]
        offset = table[partition]
    else:
        partition, offset = None, 0
    devices = sorted(({"devid": v["devid"], "uuid": v["uuid"], "total_bytes": v["total_bytes"],
                       "missing": d not in given, "image": d if d in given else None,
                       "partition": partition if d in given else None,
                       "offset": offset if d in given else None}
                      for d, v in per_dev.items()), key=lambda x: x["devid"])
    return {"incompat": first["incompat"], "compat_ro": first["compat_ro"],
            "incompat_value": first["incompat_value"], "devices": devices,
            "profiles": man["profile"], "kernel": kernel}


def super_problems(t, got):
    bad = []
    if [n for n in got.get("incompat_features", [])] != t["incompat"]:
        bad.append("incompat_features %s, dump-super %s" % (got.get("incompat_features"),
                                                             t["incompat"]))
    if got.get("compat_ro_features") != t["compat_ro"]:
        bad.append("compat_ro_features %s, dump-super %s" % (got.get("compat_ro_features"),
                                                              t["compat_ro"]))
    names = set(got.get("incompat_features", []) + got.get("compat_ro_features", []))
    kfeat = set(t["kernel"].get("features", []))
    if not kfeat or not kfeat <= names:
        bad.append("sysfs features %s not all named: %s" % (sorted(kfeat), sorted(names)))
    mine = [{k: d.get(k) for k in ("devid", "uuid", "total_bytes", "missing", "image",
                                   "partition", "offset")} for d in got.get("devices", [])]
    for d in mine:
        if d["image"]:
            d["image"] = os.path.basename(d["image"])
    if mine != t["devices"]:
        bad.append("devices %s, recorded %s" % (mine, t["devices"]))
    kmissing = sorted(int(x) for x in t["kernel"].get("missing", []))
    if sorted(d["devid"] for d in mine if d["missing"]) != kmissing:
        bad.append("missing devids %s, the kernel's %s" % (
            [d["devid"] for d in mine if d["missing"]], kmissing))
    if sorted(str(d["devid"]) for d in mine) != sorted(t["kernel"].get("devids", [])):
        bad.append("devids %s, sysfs %s" % ([d["devid"] for d in mine], t["kernel"].get("devids")))
    profs = {p["type"]: p["profile"] for p in got.get("profiles", [])}
    if len(profs) != len(got.get("profiles", [])) or profs != t["profiles"]:
        bad.append("profiles %s, manifest %s" % (got.get("profiles"), t["profiles"]))
    for k, v in t["kernel"].items():
        if k.startswith("profile.") and profs.get(k[8:]) != v[0]:
            bad.append("%s %s, sysfs %s" % (k, profs.get(k[8:]), v[0]))
    for p in got.get("profiles", []):
        if p.get("tolerates") != TOLERATES.get(p["profile"]) or not p.get("chunks") or \
                not p.get("bytes"):
            bad.append("profile %s" % p)
    return bad


def text_problems(t, text):
    """The same facts in the text output (lines, not JSON)."""
    bad = []
    lines = text.splitlines()
    flags = "\n".join(lines)
    for n in t["incompat"] + t["compat_ro"]:
        if not re.search(r"(^| )%s( |$)" % re.escape(n), flags, re.M):
            bad.append("feature %s not named" % n)
    nmiss = sum(d["missing"] for d in t["devices"])
    want = "devices               %d%s" % (len(t["devices"]), ", %d missing" % nmiss if nmiss else "")
    if want not in lines:
        bad.append("no line %r" % want)
    for d in t["devices"]:
        where = "missing" if d["missing"] else d["image"]
        row = [x for x in lines if x.split()[:2] == [str(d["devid"]), d["uuid"]]]
        if len(row) != 1 or str(d["total_bytes"]) not in row[0].split() or where not in row[0]:
            bad.append("device row %s: %s" % (d, row))
        elif d["partition"] and "partition %d at offset %d" % (d["partition"], d["offset"]) \
                not in row[0]:
            bad.append("partition not said: %s" % row[0])
        elif not d["partition"] and d["offset"] and "at offset %d" % d["offset"] not in row[0]:
            bad.append("offset not said: %s" % row[0])
    for typ, prof in t["profiles"].items():
        if not any(x.split()[:2] == [typ, prof] for x in lines):
            bad.append("no profile line for %s %s" % (typ, prof))
    return bad


def test_super(work):
    import test_images  # the same restore as the image tests
    root = os.path.join(TESTDATA, "images")
    for name in sorted(os.listdir(root)):
        idir = os.path.join(root, name)
        if not os.path.exists(os.path.join(idir, "manifest.json")):
            continue
        man = imgtest.load_json(os.path.join(idir, "manifest.json"))
        tmp = os.path.join(work, name)
        os.mkdir(tmp)
        probs = test_images.decompress(idir, tmp, man["files"])
        if probs:
            check(f"{name}: restore", False, probs)
            continue
        for c in man["checks"]:
            if 2 in c["exit"] or c.get("super_copy"):
                continue
            t = super_truth(idir, man, c)
            paths = [os.path.join(tmp, d) for d in c["devices"]]
            what = "%s: super %s" % (name, " ".join(c["args"] + c["devices"]))
            rc, out, err = run(["super", "--json"] + c["args"] + paths)
            try:
                got = json.loads(out) if rc in (0, 1) else {}
            except ValueError as e:
                got = {}
                err += str(e).encode()
            check(f"{what} --json: features, devices, partition, profiles as recorded",
                  got and not super_problems(t, got), (rc, super_problems(t, got), err[-300:]))
            rc, out, err = run(["super"] + c["args"] + paths)
            text = out.decode(errors="replace")
            check(f"{what}: the same in text", rc in (0, 1) and not text_problems(t, text),
                  (rc, text_problems(t, text), err[-300:]))
        shutil.rmtree(tmp)


# ------------------------------------------------------------ progress

PROGRESS = re.compile(r"^(\w+): (\d+)(?:, (\d+)% of about (\d+) inodes(?:, (\d+):(\d\d) left)?)?$")


def pty_run(args, rate):
    """Run the CLI with stdout and stderr on two pseudo-terminals (raw: no
    newline translation); stdout is read at about @rate bytes a second, so
    the command blocks on its output and lasts. (exit status, stdout,
    stderr, seconds)."""
    out_m, out_s = pty.openpty()
    err_m, err_s = pty.openpty()
    tty.setraw(out_s)
    tty.setraw(err_s)
    t0 = time.monotonic()
    p = subprocess.Popen([CLI] + args, stdin=subprocess.DEVNULL, stdout=out_s, stderr=err_s)
    os.close(out_s)
    os.close(err_s)
    bufs = {out_m: b"", err_m: b""}
    open_fds = [out_m, err_m]
    chunk = max(64, rate // 200)
    while open_fds:
        ready, _, _ = select.select(open_fds, [], [], 1)
        for fd in ready:
            try:
                data = os.read(fd, chunk if fd == out_m else 65536)
            except OSError:  # EIO: the other side is closed
                data = b""
            if not data:
                open_fds.remove(fd)
                os.close(fd)
            bufs[fd] += data
        if out_m in ready:
            time.sleep(0.005)
    rc = p.wait()
    return rc, bufs[out_m], bufs[err_m], time.monotonic() - t0


def view_total(view):
    """Sum over the kernel's subvolumes of (highest st_ino - 255)."""
    high = collections.defaultdict(int)
    for r in view:
        if r["subvol"] is not None:
            high[r["subvol"]] = max(high[r["subvol"]], r["ino"])
    return sum(h - 255 for h in high.values())


def progress_lines(err):
    """The states the progress line went through; None when the stream
    holds anything else, or the line is not erased at the end."""
    if not err.endswith(b"\r\033[K"):
        return None
    states = []
    for seg in err.split(b"\r"):
        seg = seg.decode(errors="replace").replace("\033[K", "")
        if not seg:
            continue
        m = PROGRESS.match(seg)
        if not m:
            return None
        states.append(m)
    return states


def progress_problems(states, what, total):
    if not states:
        return ["no progress line"]
    bad = []
    counts = [int(m[2]) for m in states]
    pcts = [int(m[3]) for m in states if m[3]]
    if any(m[1] != what for m in states):
        bad.append("counts of %s" % {m[1] for m in states})
    if counts != sorted(counts) or len(set(counts)) != len(counts):
        bad.append("counts do not grow: %s" % counts)
    if total is None:
        if any(m[3] for m in states):
            bad.append("a percentage without a total")
        return bad
    if {int(m[4]) for m in states if m[4]} != {total} or len(pcts) != len(states):
        bad.append("totals %s, the kernel's view gives %d" % ({m[4] for m in states}, total))
        return bad
    if pcts != sorted(pcts) or pcts[-1] > 99:
        bad.append("percentages %s" % pcts)
    if not any(m[5] for m in states):
        bad.append("no time left shown in %d lines" % len(states))
    if len(states) < 3:
        bad.append("only %d updates" % len(states))
    return bad


def test_progress(work):
    for name, cmd, what in (("names", ["walk"], "paths"), ("snaps", ["walk"], "paths"),
                            ("names", ["inodes"], "inodes"), ("snaps", ["inodes"], "inodes")):
        img = imgtest.private_copy(os.path.join(FILES, name + ".img.zst"), work)
        view = imgtest.load_jsonl(os.path.join(FILES, name + ".view.jsonl"))
        total = view_total(view)
        _, plain, _ = run(cmd + [img])
        rc, out, err, secs = pty_run(cmd + [img], rate=len(plain) // 2)  # about 2 s
        states = progress_lines(err)
        check(f"{name}: {' '.join(cmd)} on a terminal: {what} lines, then erased",
              rc == 0 and states, (rc, err[:300], err[-100:]))
        bad = progress_problems(states, what, total)
        check(f"{name}: {' '.join(cmd)}: {len(states or [])} updates over {secs:.1f} s, of about "
              f"{total} inodes (the kernel's highest inode numbers), time left", not bad, bad)
        rc, out, err = run(cmd + [img])
        check(f"{name}: {' '.join(cmd)}: no progress when stderr is no terminal",
              rc == 0 and not err, (rc, err[:200]))
        os.unlink(img)
    img = imgtest.private_copy(os.path.join(FILES, "names.img.zst"), work)
    _, plain, _ = run(["walk", "--path", "many", img])
    rc, out, err, secs = pty_run(["walk", "--path", "many", img], rate=len(plain) // 2)
    states = progress_lines(err)
    bad = progress_problems(states, "paths", None) if states else ["no progress line"]
    check("names: walk --path many (not a subvolume's root): the count, no total",
          rc == 0 and not bad, (rc, bad, err[:200]))
    os.unlink(img)


# ------------------------------------------------------------ main

def main():
    work = tempfile.mkdtemp(prefix="test_facts.")
    try:
        test_log_replay(work)
        test_super(work)
        test_progress(work)
    except imgtest.RestoreError as e:
        check("images restored", False, e)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tally.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
