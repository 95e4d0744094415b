#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_luks_cost.py: LUKS key derivation is bounded before it starts.

    test_luks_cost.py BTRFSIMG

Real volumes are made by `cryptsetup luksFormat` on a file (PBKDF2-sha256,
1000 iterations, passphrase "test pass"; the payload is left as zeros: what
is checked is the unlocking, not the btrfs inside). Then their headers are
rewritten the way a hostile image would be, the LUKS2 JSON in both header
copies with each copy's sha256 checksum recomputed, LUKS1's big-endian
fields in place:

  luks2 argon2id 1 GiB x 4096 passes (over an hour)     refused, < 5 s
  luks2 pbkdf2-sha512 10^8 iterations (about a minute)   refused, < 5 s
  luks2 digest of 10^8 iterations                        refused, < 5 s
  luks2 32 keyslots x pbkdf2-sha512 10^8 (25 minutes)    refused, < 5 s
  luks1 digest of 2^32-1 iterations ("tried keyslot (none)" before)
  luks2 argon2id 4 GiB x 1 under a 1 GiB address-space limit: the layers
        row and the error say the memory could not be had (an empty
        "locked: " and exit 0 before)
  GPT with 128 entries at one LUKS2 partition: one derivation, the other
        127 rows say "not derived again"
  --kdf-limit: a keyslot of 300000 PBKDF2 iterations (made so by cryptsetup)
        is refused under --kdf-limit 0.005 with its estimate, opens with
        the default and with --kdf-limit 30.
  the total: 8 keyslots of 500000 iterations each (copies of keyslot 0) and
        a wrong passphrase, --kdf-limit twice one keyslot's estimate: some
        are tried, the rest refused as over the limit of the whole open.
Every refusal names the keyslot (or the digest), the estimate and the
limit, and exits 2. Runs bounded by a timeout (a derivation that starts
shows as one). Without cryptsetup the test exits 77.
"""
import hashlib
import json
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import uuid
import zlib

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

PASS = b"test pass"
MB = 1024 * 1024
QUICK = 5.0  # seconds a refusal may take, calibration included
TIMEOUT = 60


class Env:
    def __init__(self, cli, tmp):
        self.cli, self.tmp = cli, tmp
        self.passfile = os.path.join(tmp, "pass")
        with open(self.passfile, "wb") as f:
            f.write(PASS)
        self.made = {}

    def luks(self, name, *fmt):
        """A fresh copy of a cryptsetup-made volume of 16 MiB."""
        if fmt not in self.made:
            src = os.path.join(self.tmp, "made-%d" % len(self.made))
            with open(src, "wb") as f:
                f.truncate(16 * MB)
            subprocess.run(["cryptsetup", "luksFormat", "-q", "--key-file", self.passfile,
                            *fmt, src], check=True, capture_output=True, timeout=120)
            self.made[fmt] = src
        dst = os.path.join(self.tmp, name)
        shutil.copyfile(self.made[fmt], dst)
        return dst

    def run(self, args, limit=None, timeout=TIMEOUT):
        """(exit status, stdout, stderr as str, seconds)."""
        pre = None
        if limit:
            def pre():
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        t0 = time.monotonic()
        rc, out, err = imgtest.run_cli(self.cli, args, timeout, preexec_fn=pre)
        return rc, out, err.decode(errors="replace"), time.monotonic() - t0


LUKS2 = ("--type", "luks2", "--pbkdf", "pbkdf2", "--hash", "sha256",
         "--pbkdf-force-iterations", "1000")
LUKS1 = ("--type", "luks1", "--hash", "sha256", "--pbkdf-force-iterations", "1000")


def luks2_rewrite(path, edit):
    """edit(json) in both LUKS2 header copies; their checksums recomputed."""
    with open(path, "r+b") as f:
        f.seek(8)
        size = struct.unpack(">Q", f.read(8))[0]
        f.seek(4096)
        j = json.loads(f.read(size - 4096).split(b"\0", 1)[0])
        edit(j)
        nj = json.dumps(j, separators=(",", ":")).encode()
        assert len(nj) < size - 4096, "JSON grew past its area"
        for at in (0, size):
            f.seek(at)
            area = bytearray(f.read(size))
            area[4096:] = nj + bytes(size - 4096 - len(nj))
            area[448:512] = bytes(64)
            area[448:480] = hashlib.sha256(bytes(area)).digest()
            f.seek(at)
            f.write(area)


def set_kdf(**kw):
    def edit(j):
        for ks in j["keyslots"].values():
            ks["kdf"].update(kw)
    return edit


def refused(env, t, name, path, words, args=()):
    """walk refuses @path quickly (exit 2) with @words in its message."""
    rc, _, err, secs = env.run(["walk", "--passphrase-file", env.passfile, *args, path])
    missing = [w for w in words if w not in err]
    t.check(name, rc == 2 and not missing and secs < QUICK,
            "exit %s after %.1f s, missing %s in: %s" % (rc, secs, missing, err[-500:]))
    return err


def layers(env, path, *args, limit=None):
    rc, out, err, secs = env.run(["layers", "--json", *args, path], limit=limit)
    rows = [json.loads(x) for x in out.splitlines() if x.strip()] if rc is not None else []
    return rc, [r for r in rows if r.get("layer", "").startswith("luks")], err, secs


def hostile_luks2(env, t):
    p = env.luks("argon", *LUKS2)
    luks2_rewrite(p, lambda j: [ks.update(kdf=dict(type="argon2id", time=4096, memory=1 << 20,
                                                    cpus=4, salt=ks["kdf"]["salt"]))
                                for ks in j["keyslots"].values()])
    refused(env, t, "argon2id 1 GiB x 4096 passes: refused before deriving", p,
            ["keyslot 0 (argon2id t=4096 m=1048576 KiB p=4", "would need about",
             "over the limit of 10 s per keyslot", "--kdf-limit"])
    p = env.luks("pbkdf2", *LUKS2)
    luks2_rewrite(p, set_kdf(hash="sha512", iterations=100000000))
    refused(env, t, "pbkdf2-sha512 10^8 iterations: refused before deriving", p,
            ["keyslot 0 (pbkdf2-sha512 100000000 iterations", "would need about",
             "over the limit of 10 s"])
    p = env.luks("digest", *LUKS2)
    luks2_rewrite(p, lambda j: [d.update(iterations=100000000) for d in j["digests"].values()])
    refused(env, t, "digest of 10^8 iterations: refused before any keyslot", p,
            ["digest check (pbkdf2-sha256 100000000 iterations) would need about",
             "over the limit of 10 s"])

    def many(j):
        ks0 = j["keyslots"]["0"]
        ks0["kdf"].update(hash="sha512", iterations=100000000)
        j["keyslots"] = {str(i): ks0 for i in range(32)}
        for d in j["digests"].values():
            d["keyslots"] = [str(i) for i in range(32)]
    p = env.luks("many", *LUKS2)
    luks2_rewrite(p, many)
    refused(env, t, "32 keyslots x pbkdf2-sha512 10^8: all refused before deriving", p,
            ["keyslot 0 (pbkdf2-sha512 100000000", "over the limit",
             "also not tried: keyslots 1, 2, 3"])


def luks1_digest(env, t):
    p = env.luks("l1digest", *LUKS1)
    with open(p, "r+b") as f:
        f.seek(164)
        f.write(struct.pack(">I", 0xFFFFFFFF))
    err = refused(env, t, "LUKS1 digest of 2^32-1 iterations: refused for its cost", p,
                  ["digest check (pbkdf2-sha256 4294967295 iterations) would need about",
                   "over the limit"])
    t.check("LUKS1 digest of 2^32-1: not 'tried keyslot (none)'", "(none)" not in err, err)


def memory_reason(env, t):
    with open(env.cli, "rb") as f:
        if b"__asan_init" in f.read():
            print("skip: Argon2 without its memory: AddressSanitizer's shadow memory does "
                  "not fit under the address-space limit the test sets")
            return
    p = env.luks("mem", *LUKS2)
    luks2_rewrite(p, lambda j: [ks.update(kdf=dict(type="argon2id", time=1, memory=4 << 20,
                                                    cpus=1, salt=ks["kdf"]["salt"]))
                                for ks in j["keyslots"].values()])
    limit = 1 << 30  # 1 GiB of address space: Argon2's 4 GiB cannot be had
    rc, rows, err, secs = layers(env, p, "--passphrase-file", env.passfile, "--kdf-limit",
                                 "1000", limit=limit)
    d = rows[0].get("detail", "") if rows else ""
    t.check("Argon2 4 GiB without the memory: the layers row says why, exit 2",
            rc == 2 and "locked: keyslot 0: argon2id could not get its 4194304 KiB" in d
            and "stays locked" in err,
            "exit %s, detail %r, stderr %s" % (rc, d, err[-300:]))
    rc, _, err, secs = env.run(["walk", "--passphrase-file", env.passfile, "--kdf-limit",
                                "1000", p], limit=limit)
    t.check("Argon2 4 GiB without the memory: walk says why, exit 2",
            rc == 2 and "could not get its 4194304 KiB of memory" in err,
            "exit %s: %s" % (rc, err[-300:]))


def gpt_128(env, t):
    """128 GPT entries, every one the same LUKS2 partition at 1 MiB."""
    vol = env.luks("gptvol", *LUKS2)
    size = os.path.getsize(vol)
    disk = os.path.join(env.tmp, "gpt128.img")
    sectors = (size + 2 * MB) // 512
    first, last = 2048, 2048 + size // 512 - 1
    ent = b"".join(uuid.UUID("0fc63daf-8483-4772-8e79-3d69d8477de4").bytes_le +
                   uuid.uuid4().bytes_le + struct.pack("<QQQ", first, last, 0) +
                   ("p%d" % i).encode("utf-16-le").ljust(72, b"\0") for i in range(128))
    arr_crc = zlib.crc32(ent)

    def header(my, alt, arr):
        h = bytearray(b"EFI PART" + struct.pack("<IIII", 0x10000, 92, 0, 0) +
                      struct.pack("<QQQQ", my, alt, 34, sectors - 34) + uuid.uuid4().bytes_le +
                      struct.pack("<QIII", arr, 128, 128, arr_crc))
        h[16:20] = struct.pack("<I", zlib.crc32(bytes(h)))
        return bytes(h).ljust(512, b"\0")
    mbr = bytearray(512)
    mbr[446:462] = bytes([0, 0, 2, 0, 0xEE, 0xFF, 0xFF, 0xFF]) + struct.pack(
        "<II", 1, min(sectors - 1, 0xFFFFFFFF))
    mbr[510:512] = b"\x55\xaa"
    with open(disk, "wb") as f:
        f.truncate(sectors * 512)
        f.write(mbr + header(1, sectors - 1, 2) + ent)
        f.seek((sectors - 33) * 512)
        f.write(ent + header(sectors - 1, 1, sectors - 33))
        with open(vol, "rb") as v:
            f.seek(MB)
            f.write(v.read())
    rc, rows, err, secs = layers(env, disk, "--passphrase-file", env.passfile)
    opened = [r for r in rows if "opened with keyslot 0" in r.get("detail", "")]
    again = [r for r in rows if "not derived again" in r.get("detail", "")]
    t.check("128 GPT entries at one LUKS2 partition: unlocked once",
            rc == 0 and len(rows) >= 2 and len(opened) == len(rows) and
            len(again) == len(rows) - 1,
            "exit %s, %d luks rows, %d opened, %d not derived again: %s" %
            (rc, len(rows), len(opened), len(again), err[-300:]))


def limit_option(env, t):
    fmt = ("--type", "luks2", "--pbkdf", "pbkdf2", "--hash", "sha256",
           "--pbkdf-force-iterations", "300000")
    p = env.luks("slow", *fmt)
    refused(env, t, "--kdf-limit 0.005: a keyslot of 300000 iterations refused", p,
            ["keyslot 0 (pbkdf2-sha256 300000 iterations", "would need about",
             "over the limit of 0.005 s per keyslot"], ["--kdf-limit", "0.005"])
    for args in ([], ["--kdf-limit", "30"]):
        rc, rows, err, secs = layers(env, p, "--passphrase-file", env.passfile, *args)
        d = rows[0].get("detail", "") if rows else ""
        t.check("%s: the keyslot opens" % (" ".join(args) or "the default limit"),
                rc == 0 and "opened with keyslot 0" in d, "exit %s, %r: %s" % (rc, d, err))
    rc, _, err, _ = env.run(["walk", "--kdf-limit", "0", p])
    t.check("--kdf-limit 0: a usage error", rc == 2 and "--kdf-limit" in err, (rc, err))


def total_limit(env, t):
    fmt = ("--type", "luks2", "--pbkdf", "pbkdf2", "--hash", "sha256",
           "--pbkdf-force-iterations", "500000")
    p = env.luks("total", *fmt)

    def eight(j):
        j["keyslots"] = {str(i): j["keyslots"]["0"] for i in range(8)}
        for d in j["digests"].values():
            d["keyslots"] = [str(i) for i in range(8)]
    luks2_rewrite(p, eight)
    bad = os.path.join(env.tmp, "bad")
    with open(bad, "wb") as f:
        f.write(b"not it")
    # The estimate comes from a calibration each run makes; on a loaded
    # machine two runs can differ by more than the margin, so up to three
    # rounds (without the total bound all 8 would be tried in every one).
    for attempt in range(3):
        rc, _, err, _ = env.run(["walk", "--passphrase-file", env.passfile, "--kdf-limit",
                                 "0.02", p])  # the digest's 1000 iterations fit, not the keyslot
        m = re.search(r"keyslot 0 .* would need about ([0-9.]+) s", err)
        if rc != 2 or not m or float(m.group(1)) < 0.02:
            t.check("8 keyslots: the estimate of one", False, "exit %s: %s" % (rc, err[-300:]))
            return
        one = float(m.group(1))
        rc, _, err, secs = env.run(["walk", "--passphrase-file", bad, "--kdf-limit",
                                    "%.3f" % (1.5 * one), p])
        m = re.search(r"tried keyslots ([0-9, ]+)", err)
        n = len(m.group(1).strip(", ").split(",")) if m else 0
        ok = rc == 2 and 1 <= n < 8 and "for all keyslots of an open" in err
        if ok:
            break
    t.check("8 keyslots, a wrong passphrase: the open's total bounds the keyslots tried", ok,
            "exit %s after %.1f s, %d tried: %s" % (rc, secs, n, err[-500:]))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    if not shutil.which("cryptsetup"):
        print("skip: cryptsetup (cryptsetup-bin) is not installed")
        return imgtest.SKIP
    t = imgtest.Tally()
    with tempfile.TemporaryDirectory(prefix="luks-cost-") as tmp:
        env = Env(os.path.abspath(sys.argv[1]), tmp)
        hostile_luks2(env, t)
        luks1_digest(env, t)
        memory_reason(env, t)
        gpt_128(env, t)
        limit_option(env, t)
        total_limit(env, t)
    return t.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
