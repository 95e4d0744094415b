#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_send.py: `btrfsimg send` streams, applied by the kernel's `btrfs
receive`, against the kernel's views of the snapshots sent
(testdata/diff, made by testdata/gen_diff.py).

    test_send.py CLI TESTDATA

For each snapshot in full, and for the chain s1, s1 -> s2, s2 -> s3
(incremental streams received on top of each other): the stream parses (`btrfs receive --dump`), and
received into a new filesystem on a loop device it gives, by path, what
the kernel showed of the source: mode, nlink, uid, gid, size, rdev, atime,
mtime, symlink target, contents and xattrs (inode numbers and ctime are
the receiver's own). Holes stay holes, a reflinked extent goes out as a
clone, the received subvolume carries the source's uuid and ctransid, and
the stream is within 1.5x the size of the kernel's own `btrfs send` of the
same snapshot (mounted read-only), protocol 1 and protocol 2 with
compressed data (encoded writes). Needs root and loop
devices; without them the checks that need them are skipped, said so.
"""
import json
import os
import pty
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

TIMEOUT = 300
FIELDS = ("mode", "nlink", "uid", "gid", "size", "rdev", "atime", "mtime", "target", "sha256",
          "xattrs")
SEEK_HOLE = 4
TESTDATA = [""]  # set by main(): where gen_kview.py records the received views


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True, timeout=TIMEOUT, **kw)


class Receiver:
    """A new btrfs on a loop device, streams received into it in turn."""

    def __init__(self, tmp, tag):
        self.img = os.path.join(tmp, "recv-%s.img" % tag)
        self.mnt = os.path.join(tmp, "recv-%s" % tag)
        os.mkdir(self.mnt)
        with open(self.img, "wb") as f:
            f.truncate(512 << 20)
        sh("mkfs.btrfs", "-q", "-f", self.img)
        sh("mount", "-o", "loop", self.img, self.mnt)

    def receive(self, stream):
        return subprocess.run(["btrfs", "receive", "-f", stream, self.mnt], capture_output=True,
                              timeout=TIMEOUT)

    def record(self, name):
        """The kernel's view of received subvolume @name (mounted again
        read-only, as the truth was recorded)."""
        sh("umount", self.mnt)
        sh("mount", "-o", "ro,noatime,loop", self.img, self.mnt)
        kv = os.path.join(TESTDATA[0], "gen_kview.py")
        p = sh(sys.executable, kv, "record", self.mnt, "--start", name)
        view = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
        show = sh("btrfs", "subvolume", "show", os.path.join(self.mnt, name)).stdout.decode()
        return view, show

    def path(self, *p):
        return os.path.join(self.mnt, *p)

    def close(self):
        subprocess.run(["umount", self.mnt], capture_output=True)
        os.unlink(self.img)
        os.rmdir(self.mnt)


def view_problems(want, got):
    a = {r["path"]: r for r in want}
    b = {r["path"]: r for r in got}
    probs = ["%r: not received" % p for p in sorted(set(a) - set(b))]
    probs += ["%r: received, not in the source" % p for p in sorted(set(b) - set(a))]
    for p in sorted(set(a) & set(b)):
        for k in FIELDS:
            if a[p][k] != b[p][k]:
                probs.append("%r: %s: have %r expect %r" % (p, k, b[p][k], a[p][k]))
    return probs


def kernel_send(img, tmp, name, proto, parent=None):
    """The size of the kernel's own send of snapshot @name."""
    mnt = os.path.join(tmp, "ksend")
    os.makedirs(mnt, exist_ok=True)
    out = os.path.join(tmp, "k-%s-%d.stream" % (name, proto))
    sh("mount", "-o", "ro,loop", img, mnt)
    try:
        args = ["btrfs", "send", "-q", "-f", out] + (["--proto", "2", "--compressed-data"]
                                                     if proto == 2 else [])
        if parent:
            args += ["-p", os.path.join(mnt, parent)]
        sh(*args, os.path.join(mnt, name))
    finally:
        sh("umount", mnt)
    size = os.path.getsize(out)
    head = sh("btrfs", "receive", "--dump", "-f", out).stdout.split(b"\n", 1)[0].decode()
    os.unlink(out)
    fields = dict(w.split("=", 1) for w in head.split() if "=" in w)
    return size, fields.get("uuid"), fields.get("transid")


def one_full(res, cli, img, tmp, name, truth, proto):
    tag = "%s v%d" % (name, proto)
    stream = os.path.join(tmp, "%s-%d.stream" % (name, proto))
    args = ["send", "-v", "--subvol", name, "-f", stream] + (
        ["--proto", "2", "--compressed-data"] if proto == 2 else [])
    rc, out, err = imgtest.run_cli(cli, args + [img], timeout=TIMEOUT)
    res.check("send %s: exit 0, a stream written" % tag, rc == 0 and os.path.getsize(stream) > 0,
              err[-300:])
    dump = subprocess.run(["btrfs", "receive", "--dump", "-f", stream], capture_output=True,
                          timeout=TIMEOUT)
    res.check("send %s: btrfs receive --dump parses it" % tag, dump.returncode == 0,
              dump.stderr[-300:])
    if proto == 2 and name != "s1":
        res.check("send %s: compressed extents go out as encoded writes" % tag,
                  b"\nencoded_write " in dump.stdout, dump.stdout[-300:])
    r = Receiver(tmp, "%s-%d" % (name, proto))
    try:
        p = r.receive(stream)
        res.check("send %s: btrfs receive applies it" % tag, p.returncode == 0,
                  p.stderr[-300:])
        if name == "s2":
            with open(r.path(name, "docs", "hole"), "rb") as f:
                hole = os.lseek(f.fileno(), 0, SEEK_HOLE)
            res.check("send %s: a punched hole is a hole on the receiving side" % tag,
                      hole == 262144, hole)
        view, show = r.record(name)
        res.problems("send %s: received, every path and field as the kernel showed the "
                     "source (%d paths)" % (tag, len(truth)), view_problems(truth, view)[:20])
    finally:
        r.close()
    mine = os.path.getsize(stream)
    theirs, uuid, transid = kernel_send(img, tmp, name, proto)
    res.check("send %s: the received subvolume has the uuid and ctransid the kernel's "
              "stream gives (%s, %s)" % (tag, uuid, transid),
              uuid and ("Received UUID: \t\t%s" % uuid) in show and
              ("Send transid: \t\t%s" % transid) in show, show[-400:])
    res.check("send %s: %d bytes, within 1.5x the kernel's %d" % (tag, mine, theirs),
              mine <= 1.5 * theirs, (mine, theirs))
    os.unlink(stream)
    return err


def send_to(cli, img, stream, name, proto, parent=None):
    args = ["send", "-v", "--subvol", name, "-f", stream]
    args += ["--proto", "2", "--compressed-data"] if proto == 2 else []
    args += ["--parent", parent] if parent else []
    return imgtest.run_cli(cli, args + [img], timeout=TIMEOUT)


def chain(res, cli, img, tmp, d, proto):
    """s1 in full, then s1 -> s2 and s2 -> s3 incremental, each received
    on top of the last and compared with the kernel's view."""
    r = Receiver(tmp, "chain-%d" % proto)
    try:
        steps = [("s1", None), ("s2", "s1"), ("s3", "s2")]
        for name, parent in steps:
            tag = "%s%s v%d" % (parent + " -> " if parent else "full ", name, proto)
            stream = os.path.join(tmp, "chain-%s-%d.stream" % (name, proto))
            rc, out, err = send_to(cli, img, stream, name, proto, parent)
            p = r.receive(stream) if rc == 0 else None
            res.check("send %s: received on top of the last" % tag, rc == 0 and
                      p.returncode == 0, (err[-300:], p and p.stderr[-300:]))
            if not parent:
                os.unlink(stream)
                continue
            mine = os.path.getsize(stream)
            os.unlink(stream)
            theirs = kernel_send(img, tmp, name, proto, parent)[0]
            res.check("send %s: %d bytes, within 1.5x the kernel's incremental %d"
                      % (tag, mine, theirs), mine <= 1.5 * theirs, (mine, theirs))
            if proto == 2 and name == "s2":
                with open(r.path(name, "docs", "hole"), "rb") as f:
                    hole = os.lseek(f.fileno(), 0, SEEK_HOLE)
                res.check("send %s: the hole punched since s1 is a hole" % tag,
                          hole == 262144, hole)
        for name, _ in steps[1:]:
            truth = imgtest.load_jsonl(os.path.join(d, name + ".jsonl"))
            view, show = r.record(name)
            res.problems("send chain v%d: %s received incrementally, every path and field as "
                         "the kernel showed it (%d paths)" % (proto, name, len(truth)),
                         view_problems(truth, view)[:20])
    finally:
        r.close()


def clone_sources(res, cli, img, tmp, d):
    """s2 in full with --clone-src s1, received where s1 was: what s2
    shares with s1 goes out as clones, and s2 is exact."""
    r = Receiver(tmp, "clonesrc")
    try:
        base = os.path.join(tmp, "cs-s1.stream")
        rc, _, err = send_to(cli, img, base, "s1", 1)
        p = r.receive(base) if rc == 0 else None
        stream = os.path.join(tmp, "cs-s2.stream")
        rc2, _, err2 = imgtest.run_cli(cli, ["send", "-v", "--subvol", "s2", "--clone-src", "s1",
                                             "-f", stream, img], timeout=TIMEOUT)
        q = r.receive(stream) if rc2 == 0 else None
        res.check("send s2 --clone-src s1: received where s1 was", p and p.returncode == 0 and
                  q and q.returncode == 0, (err[-200:], err2[-200:], q and q.stderr[-300:]))
        full = os.path.getsize(base)
        mine = os.path.getsize(stream) if rc2 == 0 else full
        res.check("send s2 --clone-src s1: %d bytes, under half of a full stream (%d): what s1 "
                  "holds is cloned" % (mine, full), mine * 2 < full, err2[-200:])
        truth = imgtest.load_jsonl(os.path.join(d, "s2.jsonl"))
        view, _ = r.record("s2")
        res.problems("send s2 --clone-src s1: every path and field as the kernel showed s2",
                     view_problems(truth, view)[:20])
    finally:
        r.close()


def damaged(res, cli, d, tmp):
    """A data block of s1's docs/over overwritten on a copy (its checksum
    then fails): the stream goes on, names the file, exits 1, and the file
    arrives without the bytes from there on (never zeros in their place);
    everything else arrives exact."""
    own = os.path.join(tmp, "damaged")
    os.mkdir(own)
    img = imgtest.private_copy(os.path.join(d, "diff.img.zst"), own)
    rc, out, err = imgtest.run_cli(cli, ["extents", "--json", "--path", "s1/docs/over", img],
                                   timeout=TIMEOUT)
    ext = json.loads(out.splitlines()[0])
    at = ext["copies"][0]["image_offset"] + 65536
    with open(img, "r+b") as f:
        f.seek(at)
        old = f.read(16)
        f.seek(at)
        f.write(bytes(b ^ 0xFF for b in old))
    stream = os.path.join(tmp, "damaged.stream")
    rc, out, err = send_to(cli, img, stream, "s1", 1)
    res.check("send of a snapshot with a damaged data block: exit 1, the file named",
              rc == 1 and b"docs/over" in err and b"data not all in the stream" in err,
              (rc, err[-300:]))
    truth = imgtest.load_jsonl(os.path.join(d, "s1.jsonl"))
    r = Receiver(tmp, "damaged")
    try:
        p = r.receive(stream)
        view, _ = r.record("s1")
    finally:
        r.close()
    got = {v["path"]: v for v in view}
    over = got.get("docs/over", {})
    probs = [p for p in view_problems([v for v in truth if v["path"] != "docs/over"],
                                      [v for v in view if v["path"] != "docs/over"])]
    res.problems("damaged send: everything but the damaged file received exact",
                 ([] if p.returncode == 0 else ["receive: %r" % p.stderr[-200:]]) + probs[:10])
    want = next(v for v in truth if v["path"] == "docs/over")
    res.check("damaged send: the damaged file holds only what was read, no zeros for the rest",
              over and over["size"] <= 65536 and over["size"] < want["size"], over.get("size"))
    os.unlink(img)


def any_image(res, cli, img, tmp, d):
    """Through a container the stream is the same bytes as from the raw
    image; a subvolume that is not read-only sends too (data: s3 was
    taken from it after its last change, so the kernel's view of s3 is its
    truth)."""
    raw = os.path.join(tmp, "raw.stream")
    rc, _, err = send_to(cli, img, raw, "s2", 1)
    qcow = os.path.join(tmp, "diff.qcow2")
    q = subprocess.run(["qemu-img", "convert", "-O", "qcow2", img, qcow], capture_output=True,
                       timeout=TIMEOUT)
    if q.returncode == 0:
        via = os.path.join(tmp, "qcow.stream")
        rc2, _, err2 = send_to(cli, qcow, via, "s2", 1)
        with open(raw, "rb") as a, open(via, "rb") as b:
            same = a.read() == b.read()
        res.check("send through a qcow2: the same stream as from the raw image",
                  rc == 0 and rc2 == 0 and same, err2[-200:])
        os.unlink(via)
        os.unlink(qcow)
    else:
        print("SKIP send through qcow2: qemu-img: %s" % q.stderr[-200:])
    os.unlink(raw)
    stream = os.path.join(tmp, "data.stream")
    rc, _, err = send_to(cli, img, stream, "data", 1)
    r = Receiver(tmp, "rw")
    try:
        p = r.receive(stream) if rc == 0 else None
        view, _ = r.record("data")
    finally:
        r.close()
    truth = imgtest.load_jsonl(os.path.join(d, "s3.jsonl"))
    res.problems("send of a read-write subvolume (data): received as the kernel showed it",
                 ([] if p and p.returncode == 0 else ["send or receive failed: %r"
                                                      % (err[-200:],)]) +
                 view_problems(truth, view)[:10])


def generations(res, cli, testdata, tmp, receive):
    """--generation N: the subvolume `data` of testdata/gendiff as each
    committed step left it, received exactly as the kernel showed it then;
    a generation whose blocks were written over since is refused (exit 2,
    named), never sent in part as if whole. The newest three must send."""
    d = os.path.join(testdata, "gendiff")
    gens = [g["generation"] for g in
            imgtest.load_json(os.path.join(d, "generations.json"))["generations"]]
    img = imgtest.private_copy(os.path.join(d, "gendiff.img.zst"), tmp)
    sent = []
    for g in gens:
        stream = os.path.join(tmp, "gen-%d.stream" % g)
        rc, _, err = imgtest.run_cli(cli, ["send", "--subvol", "data", "--generation", str(g),
                                           "-f", stream, img], timeout=TIMEOUT)
        if rc != 0:
            res.check("send --generation %d: refused, exit 2, the generation named" % g,
                      rc == 2 and b"generation %d" % g in err, err[-300:])
        elif receive:
            r = Receiver(tmp, "gen-%d" % g)
            try:
                p = r.receive(stream)
                view, _ = r.record("data") if p.returncode == 0 else ([], "")
            finally:
                r.close()
            truth = imgtest.load_jsonl(os.path.join(d, "gen-%d.jsonl" % g))
            res.problems("send --generation %d: received, every path and field as the kernel "
                         "showed data then (%d paths)" % (g, len(truth)),
                         ([] if p.returncode == 0 else ["receive: %r" % p.stderr[-200:]]) +
                         view_problems(truth, view)[:10])
        if rc == 0:
            sent.append(g)
        if os.path.exists(stream):
            os.unlink(stream)
    res.check("send --generation: the newest three generations sent (%d of %d)" %
              (len(sent), len(gens)), set(gens[-3:]) <= set(sent), sent)
    os.unlink(img)


def refusals(res, cli, img, tmp):
    master, slave = pty.openpty()
    p = subprocess.run([cli, "send", "--subvol", "s1", img], stdout=slave,
                       stderr=subprocess.PIPE, timeout=TIMEOUT)
    os.close(slave)
    os.close(master)
    res.check("send to a terminal: refused, exit 2", p.returncode == 2 and
              b"terminal" in p.stderr, p.stderr[-200:])
    rc, out, err = imgtest.run_cli(cli, ["send", "--subvol", "999", img], timeout=TIMEOUT)
    res.check("send of a subvolume that is not there: exit 2, named", rc == 2 and
              b"subvolume 999 not found" in err, err[-200:])
    existing = os.path.join(tmp, "exists")
    open(existing, "w").close()
    rc, out, err = imgtest.run_cli(cli, ["send", "--subvol", "s1", "-f", existing, img],
                                   timeout=TIMEOUT)
    res.check("send -f over an existing file: refused", rc == 2 and
              os.path.getsize(existing) == 0, err[-200:])
    rc, out, err = imgtest.run_cli(cli, ["send", "--subvol", "s1", "--compressed-data", img],
                                   timeout=TIMEOUT)
    res.check("--compressed-data without --proto 2: a usage error", rc == 2 and
              b"--proto 2" in err, err[-200:])


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    TESTDATA[0] = testdata
    d = os.path.join(testdata, "diff")
    res = imgtest.Tally()
    with tempfile.TemporaryDirectory(prefix="btrfsimg-send.") as tmp:
        img = imgtest.private_copy(os.path.join(d, "diff.img.zst"), tmp)
        refusals(res, cli, img, tmp)
        why = imgtest.skip_reason()
        generations(res, cli, testdata, tmp, not why)
        if why:
            print("SKIP receiving streams: %s" % why)
            return res.summary()
        for name in ("s1", "s2", "s3"):
            truth = imgtest.load_jsonl(os.path.join(d, name + ".jsonl"))
            for proto in (1, 2):
                err = one_full(res, cli, img, tmp, name, truth, proto)
                if name == "s2" and proto == 1:
                    res.check("send s2: the reflinked copy's extents go out as clones",
                              b" 0 ranges cloned" not in err and b"ranges cloned" in err,
                              err[-200:])
        for proto in (1, 2):
            chain(res, cli, img, tmp, d, proto)
        clone_sources(res, cli, img, tmp, d)
        damaged(res, cli, d, tmp)
        any_image(res, cli, img, tmp, d)
    return res.summary()


if __name__ == "__main__":
    sys.exit(main())
