#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_images.py: `btrfsimg super --json` and `btrfsimg subvols --json`
against the kernel's and btrfs-progs' recorded view of every image in
testdata/images/ (made by testdata/gen-images.sh, expected JSON made by
testdata/gen_progs2json.py from dump-super, dump-tree, subvolume list/show
and the kernel's GET_SUBVOL_INFO ioctl).

    test_images.py BTRFSIMG TESTDATA [--only NAME]... [--keep]

Per image: the devices are decompressed into a temporary directory (the
`zstd` CLI; a huge sparse device is a sparse tar), then every check of its
manifest.json runs both commands:
  * the full device set, and when the manifest says so, the devices in
    reversed and rotated order (the mirrors listed are those of the first
    device given, so they are compared with that device's copies);
  * degraded subsets the kernel mounted ro,degraded: same output as the full
    set, exit status 0 or 1;
  * options (--partition, --offset, --super-mirror) and expected failures
    (exit status 2 with a message on stderr, containing the manifest's
    "stderr" text where it gives one: too few devices of a RAID5/6 set,
    which the kernel refused to mount too, say how many are missing and
    what the profile tolerates).
Then foreign devices: a device of another filesystem given with an image's
devices must give exit status 2 and a message.
The last line is "N passed, M failed"; the exit status is 1 on any failure.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

TIMEOUT = 300


def strict_eq(a, b):
    """Equality that tells true from 1 and 1 from 1.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_eq(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_eq(x, y) for x, y in zip(a, b))
    return a == b


class Runner(imgtest.Tally):
    def __init__(self, cli):
        super().__init__()
        self.cli = cli

    def run(self, cmd, args, devs):
        args = [cmd, "--json"] + list(args) + list(devs)
        rc, out, err = imgtest.run_cli(self.cli, args, timeout=TIMEOUT)
        return rc, out, err, [self.cli] + args


def short(b, n=600):
    s = b.decode("utf-8", "replace").strip()
    return s if len(s) <= n else s[:n] + " ..."


def cmdline(argv):
    return " ".join(os.path.basename(a) if os.sep in a else a for a in argv)


def diff_super(exp, got):
    out = []
    if not isinstance(got, dict):
        return ["super: not a JSON object: %r" % (got,)]
    for k in exp:
        if k not in got:
            out.append("super.%s: missing (expected %s)" % (k, json.dumps(exp[k])))
        elif not strict_eq(exp[k], got[k]):
            out.append("super.%s: expected %s, got %s" % (k, json.dumps(exp[k]),
                                                         json.dumps(got[k])))
    return out


def diff_subvols(exp, got):
    out = []
    byid = {}
    for s in got:
        if not isinstance(s, dict) or "id" not in s:
            out.append("subvols: line without an id: %r" % (s,))
            continue
        if s["id"] in byid:
            out.append("subvols: id %s printed twice" % s["id"])
        byid[s["id"]] = s
    want = {s["id"]: s for s in exp}
    for i in sorted(set(want) - set(byid)):
        out.append("subvols: id %d missing (expected %s)" % (i, json.dumps(want[i])))
    for i in sorted(set(byid) - set(want), key=str):
        out.append("subvols: id %s not expected (got %s)" % (i, json.dumps(byid[i])))
    for i in sorted(set(want) & set(byid)):
        for k, v in want[i].items():
            if k not in byid[i]:
                out.append("subvol %d.%s: missing (expected %s)" % (i, k, json.dumps(v)))
            elif not strict_eq(v, byid[i][k]):
                out.append("subvol %d.%s: expected %s, got %s" % (i, k, json.dumps(v),
                                                                  json.dumps(byid[i][k])))
    return out


def parse_lines(stdout):
    objs, bad = [], []
    for line in stdout.decode("utf-8", "surrogateescape").splitlines():
        if not line.strip():
            continue
        try:
            objs.append(json.loads(line))
        except ValueError as e:
            bad.append("unparsable JSON line %r: %s" % (line[:200], e))
    return objs, bad


def load(d, name):
    path = os.path.join(d, name)
    return imgtest.load_jsonl(path) if name.endswith(".jsonl") else imgtest.load_json(path)


def decompress(src, dst, files):
    """Restore each device file; returns problems."""
    out = []
    for name, size in files.items():
        target = os.path.join(dst, name)
        z = os.path.join(src, name + ".zst")
        t = os.path.join(src, name + ".tar.zst")
        if os.path.exists(z):
            try:
                imgtest.unzstd(z, target)
                err = None
            except imgtest.RestoreError as e:
                err = str(e)
        elif os.path.exists(t):
            z = subprocess.Popen(["zstd", "-q", "-d", "-c", "--long=31", t],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            p = subprocess.run(["tar", "-x", "-S", "-C", dst, "-f", "-"], stdin=z.stdout,
                               capture_output=True)
            z.stdout.close()
            zerr = z.stderr.read()
            z.wait()
            err = (z.returncode or p.returncode) and short(zerr + p.stderr)
        else:
            err = "no %s.zst or %s.tar.zst" % (name, name)
        if not err and os.path.getsize(target) != size:
            err = "size %d, manifest says %d" % (os.path.getsize(target), size)
        if err:
            out.append("%s: %s" % (name, err))
    return out


def orders(devs, shuffle):
    res = [list(devs)]
    if shuffle and len(devs) > 1:
        res.append(list(reversed(devs)))
        if len(devs) > 2:
            res.append(devs[1:] + devs[:1])
    return res


def run_check(r, name, idir, tmp, c):
    tag = c.get("fs", "")
    sfx = "." + tag if tag else ""
    copy = c.get("super_copy")
    exp_super = load(idir, "expected-super%s%s.json" % (sfx, ".copy%d" % copy if copy else ""))
    exp_mirrors = load(idir, "expected-mirrors%s.json" % sfx)
    exp_subs = load(idir, "expected-subvols%s.jsonl" % sfx)
    for devs in orders(c["devices"], c.get("shuffle")):
        paths = [os.path.join(tmp, d) for d in devs]
        what = "%s: %s [%s]" % (name, c.get("what", ""), " ".join(c["args"] + devs))
        for cmd in c.get("commands", ("super", "subvols")):
            rc, out, err, argv = r.run(cmd, c["args"], paths)
            probs = []
            if rc not in c["exit"]:
                probs.append("exit status %s, expected %s; stderr: %s" %
                             (rc, " or ".join(map(str, c["exit"])), short(err)))
            elif rc == 2:
                if not err.strip():
                    probs.append("exit status 2 without a message on stderr")
                elif c.get("stderr") and c["stderr"] not in err.decode(errors="replace"):
                    probs.append("stderr lacks %r: %s" % (c["stderr"], short(err)))
            else:
                objs, probs = parse_lines(out)
                if not probs and cmd == "super":
                    if len(objs) != 1:
                        probs.append("super printed %d JSON objects, expected 1" % len(objs))
                    else:
                        exp = dict(exp_super)
                        exp["mirrors"] = exp_mirrors[devs[0]]
                        probs = diff_super(exp, objs[0])
                elif not probs:
                    probs = diff_subvols(exp_subs, objs)
            if probs:
                probs.insert(0, "command: " + cmdline(argv))
            r.problems("%s %s" % (what, cmd), probs)


def foreign_checks(r, restored):
    """restored: [(image name, tmp dir, devices of its main filesystem)]."""
    plain = [x for x in restored if x[2] and not x[3]]
    if len(plain) < 2:
        return
    for i, (name, tmp, devs, _) in enumerate(plain):
        oname, otmp, odevs, _ = plain[(i + 1) % len(plain)]
        sets = [devs + [odevs[0]]]
        if len(devs) > 1 and len(odevs) > 1:
            sets.append(devs[:-1] + [odevs[-1]])  # a member replaced by a stranger
        for s in sets:
            paths = [os.path.join(tmp, d) for d in s[:-1]] + [os.path.join(otmp, s[-1])]
            what = "foreign: %s [%s] + %s/%s" % (name, " ".join(s[:-1]), oname, s[-1])
            for cmd in ("super", "subvols"):
                rc, out, err, argv = r.run(cmd, [], paths)
                probs = []
                if rc != 2:
                    probs.append("exit status %s, expected 2 (a device of another filesystem); "
                                 "stdout: %s stderr: %s" % (rc, short(out, 200), short(err)))
                elif not err.strip():
                    probs.append("exit status 2 without a message on stderr")
                if probs:
                    probs.insert(0, "command: " + cmdline(argv))
                r.problems("%s %s" % (what, cmd), probs)


def main(argv):
    args, only, keep = [], [], False
    it = iter(argv[1:])
    for a in it:
        if a == "--only":
            only.append(next(it, ""))
        elif a == "--keep":
            keep = True
        else:
            args.append(a)
    if len(args) != 2:
        print("usage: test_images.py BTRFSIMG TESTDATA [--only NAME]... [--keep]", file=sys.stderr)
        return 2
    cli, testdata = args
    if not shutil.which("zstd"):
        print("test_images.py: the zstd command is missing; install the Debian package zstd "
              "(it is on the README install line)", file=sys.stderr)
        print("0 passed, 1 failed")
        return 1
    if not os.access(cli, os.X_OK):
        print("test_images.py: %s is not an executable" % cli, file=sys.stderr)
        print("0 passed, 1 failed")
        return 1
    root = os.path.join(testdata, "images")
    names = sorted(n for n in os.listdir(root)
                   if os.path.exists(os.path.join(root, n, "manifest.json")))
    if only:
        unknown = set(only) - set(names)
        if unknown:
            print("test_images.py: no image %s (have: %s)" % (" ".join(sorted(unknown)),
                                                             " ".join(names)), file=sys.stderr)
            return 2
        names = [n for n in names if n in only]
    r = Runner(os.path.abspath(cli))
    base = tempfile.mkdtemp(prefix="test_images.")
    restored = []
    try:
        for name in names:
            idir = os.path.join(root, name)
            man = load(idir, "manifest.json")
            tmp = os.path.join(base, name)
            os.mkdir(tmp)
            probs = decompress(idir, tmp, man["files"])
            r.problems("%s: restore %s" % (name, " ".join(man["files"])), probs)
            if probs:
                continue
            for c in man["checks"]:
                run_check(r, name, idir, tmp, c)
            main_fs = man["filesystems"].get("")
            restored.append((name, tmp, main_fs["devices"] if main_fs else [],
                             "partition" in (main_fs or {})))
        foreign_checks(r, restored)
    finally:
        if keep:
            print("kept %s" % base)
        else:
            shutil.rmtree(base, ignore_errors=True)
    return r.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
