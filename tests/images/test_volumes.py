#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_volumes.py: btrfs under LVM2 and LUKS1/LUKS2, against the kernel's view.

    test_volumes.py BTRFSIMG TESTDATA LUKS_ENCRYPT

The btrfs inside every stack is testdata/files/subvols.img, whose kernel view
(testdata/files/subvols.view.jsonl, recorded on a live mount) is the truth
for `walk --json --hash` through each stack:

  LVM (committed, made by lvm2's own tools: testdata/volume/gen-volumes.sh)
    gpt-lvm       GPT + LV vgd/root of two segments in reverse PE order
    pv-a + pv-b   VG over two images: LV vgm/data (linear, one segment on
                  each), vgm/strip (striped 2 x 64 KiB); both orders; one PV
                  missing refuses the LVs it does not fully hold; two
                  btrfs LVs need --partition VG/LV
    raid-a + raid-b   LV vgr/mirror of type raid1 (a leg on each), vgr/solo
                  linear on raid-a: each leg alone, a failing leg, the LV a
                  VG with a PV missing still holds
  LUKS (built here: the payload is incompressible) with `cryptsetup
  luksFormat` on a file, the volume key from `luksDump --dump-volume-key`,
  the plaintext encrypted by tests/support/luks_encrypt.c (OpenSSL, IV = 512-byte
  sector number), then put into a GPT partition by sfdisk:
    luks1-xts     aes-xts-plain64 256-bit key, PBKDF2-sha1
    luks1-essiv   aes-cbc-essiv:sha256, PBKDF2-sha1
    luks1-sha512  aes-xts-plain64 512-bit key, PBKDF2-sha512
    luks2-argon2id  4096-byte sectors; luks2-argon2i 512-byte sectors;
    luks2-pbkdf2  PBKDF2-sha256, 4096-byte sectors
    luks2-lvm     GPT + LUKS2 + the PV of gpt-lvm (LV vgd/root)
    lvm-luks      LUKS2 (PBKDF2-sha512) inside LV vgd/root of gpt-lvm, holding
                  testdata/images/nested: subvols equal the kernel's list
    raid1 x LUKS2 the two devices of testdata/images/raid1 each in LUKS2:
                  subvols equal the kernel-recorded list, also degraded
  Independent readers of the same images: GRUB (`grub-fstest -C ... cp
  (crypto0)/top.txt`, LUKS1 and LUKS2 with PBKDF2: GRUB 2.06 has no Argon2)
  must copy a file whose sha256 is the kernel's; python3-libluksde (Debian's
  /usr/bin/python3) must decrypt LUKS1 volumes (sha1: its 2020 release
  crashes on sha256/512-bit keys) to the plaintext image's bytes.
  layers --json: the PV uuid lvm2's pvs printed, the LVs, "2 segments", the
  btrfs fsid dump-super printed; the LUKS2 uuid luksDump printed with its
  cipher, sector size and KDF; no key bytes or passphrase in the output.
  A terminal (a pty) is asked for the passphrase, which is not echoed.
  A damaged current LVM metadata text: the newest older copy of the ring.
  Errors: a wrong passphrase (exit 2, "no keyslot opened ... tried keyslot
  0"), no key at all, a damaged first LUKS2 header (read from the second
  copy, exit 1 for the damage), an Argon2 memory cost of 8 GiB (refused).
Parts whose tools are missing (cryptsetup, sfdisk, grub-fstest,
pyluksde) are skipped by name; with none to run, the test exits 77.
"""
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402
import test_files  # noqa: E402

PASS = b"test pass"
MB = 1024 * 1024


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True, **kw)


class Env:
    def __init__(self, cli, testdata, enc, tmp):
        self.cli, self.testdata, self.enc, self.tmp = cli, testdata, enc, tmp
        self.kv = imgtest.import_kview(testdata)
        with open(os.path.join(testdata, "files", "subvols.view.jsonl"), "rb") as f:
            self.view, _ = test_files.parse_jsonl(f.read())
        self.plain = imgtest.unzstd(os.path.join(testdata, "files", "subvols.img.zst"),
                                    os.path.join(tmp, "plain.img"))
        self.passfile = os.path.join(tmp, "pass")
        with open(self.passfile, "wb") as f:
            f.write(PASS)
        self.top_sha = next(r["sha256"] for r in self.view if r["path"] == "top.txt")

    def walk(self, t, name, args, expect_rc=0):
        rc, out, err = imgtest.run_cli(self.cli, ["walk", "--json", "--hash"] + args, 600)
        if rc != expect_rc:
            t.check(name, False, "exit %s, expect %d: %s" % (rc, expect_rc, err[-400:]))
            return
        got, errs = test_files.parse_jsonl(out)
        t.problems(name, errs + test_files.compare_records(self.kv, self.view, got, 10))

    def fails(self, t, name, args, words):
        rc, out, err = imgtest.run_cli(self.cli, ["walk"] + args, 600)
        msg = err.decode(errors="replace")
        missing = [w for w in words if w not in msg]
        t.check(name, rc == 2 and not missing,
                "exit %s, missing %s in: %s" % (rc, missing, msg[-400:]))


def in_gpt(env, part, name):
    """A GPT disk with @part as its partition 1 (at 1 MiB)."""
    size = os.path.getsize(part)
    disk = os.path.join(env.tmp, name)
    with open(disk, "wb") as f:
        f.truncate(size + 2 * MB)
    sh("sfdisk", "-q", disk, input=b"label: gpt\nstart=2048, size=%d\n" % (size // 512))
    sh("dd", "if=" + part, "of=" + disk, "bs=1M", "seek=1", "conv=notrunc,sparse",
       "status=none")
    os.unlink(part)
    return disk


def luks_container(env, name, plain, fmt_args, mode, sector, hdr):
    """cryptsetup luksFormat on a file, payload encrypted with the dumped key."""
    vol = os.path.join(env.tmp, name + ".luks")
    key = os.path.join(env.tmp, name + ".key")
    with open(vol, "wb") as f:
        f.truncate(hdr + os.path.getsize(plain))
    sh("cryptsetup", "luksFormat", "-q", "--key-file", env.passfile, *fmt_args, vol)
    sh("cryptsetup", "luksDump", "-q", "--dump-volume-key", "--volume-key-file", key,
       "--key-file", env.passfile, vol)
    dump = sh("cryptsetup", "luksDump", vol).stdout.decode()
    off = None
    for line in dump.splitlines():
        w = line.split()
        if line.startswith("UUID:"):
            env.luks_uuid = w[1]
        if line.startswith("Payload offset:"):
            off = int(w[2]) * 512
        elif w[:1] == ["offset:"] and off is None:
            off = int(w[1])
    sh(env.enc, key, mode, str(sector), plain, vol, str(off))
    return vol, key


LUKS = [
    ("luks1-xts", ["--type", "luks1", "--hash", "sha1", "--key-size", "256",
                   "--pbkdf-force-iterations", "1000"], "xts-plain64", 512, 2 * MB),
    ("luks1-essiv", ["--type", "luks1", "--hash", "sha1", "--cipher", "aes-cbc-essiv:sha256",
                     "--key-size", "256", "--pbkdf-force-iterations", "1000"],
     "cbc-essiv:sha256", 512, 2 * MB),
    ("luks1-sha512", ["--type", "luks1", "--hash", "sha512", "--pbkdf-force-iterations", "1000"],
     "xts-plain64", 512, 2 * MB),
    ("luks2-argon2id", ["--type", "luks2", "--pbkdf", "argon2id", "--pbkdf-force-iterations",
                        "4", "--pbkdf-memory", "64", "--pbkdf-parallel", "2",
                        "--sector-size", "4096"], "xts-plain64", 4096, 16 * MB),
    ("luks2-argon2i", ["--type", "luks2", "--pbkdf", "argon2i", "--pbkdf-force-iterations",
                       "4", "--pbkdf-memory", "32", "--pbkdf-parallel", "1",
                       "--sector-size", "512"], "xts-plain64", 512, 16 * MB),
    ("luks2-pbkdf2", ["--type", "luks2", "--pbkdf", "pbkdf2", "--hash", "sha256",
                      "--pbkdf-force-iterations", "1000", "--sector-size", "4096"],
     "xts-plain64", 4096, 16 * MB),
]


def grub_check(env, t, name, img):
    out = os.path.join(env.tmp, "grub-top.txt")
    p = subprocess.run(["grub-fstest", "-C", img, "cp", "(crypto0)/top.txt", out],
                       input=PASS, capture_output=True)
    ok = p.returncode == 0 and os.path.exists(out) and \
        hashlib.sha256(open(out, "rb").read()).hexdigest() == env.top_sha
    t.check(name + " grub-fstest reads top.txt", ok, p.stdout[-300:] + p.stderr[-300:])
    if os.path.exists(out):
        os.unlink(out)


PYLUKSDE = """
import hashlib, sys, pyluksde
v = pyluksde.volume(); v.set_password(sys.argv[2]); v.open_file_object(open(sys.argv[1], "rb"))
h = hashlib.sha256()
while True:
    b = v.read_buffer(1 << 22)
    if not b:
        break
    h.update(b)
print(h.hexdigest())
"""


def pyluksde_check(env, t, name, vol):
    p = subprocess.run(["/usr/bin/python3", "-c", PYLUKSDE, vol, PASS.decode()],
                       capture_output=True)
    want = imgtest.sha256_file(env.plain)
    t.check(name + " pyluksde decrypts to the plaintext", p.returncode == 0 and
            p.stdout.decode().strip() == want, p.stdout[-200:] + p.stderr[-300:])


def have_pyluksde():
    return os.path.exists("/usr/bin/python3") and subprocess.run(
        ["/usr/bin/python3", "-c", "import pyluksde"], capture_output=True).returncode == 0


def luks_tests(env, t):
    grub = shutil.which("grub-fstest")
    pyl = have_pyluksde()
    if not grub:
        print("skip: grub-fstest not installed (Debian grub-common)")
    if not pyl:
        print("skip: python3-libluksde not installed")
    for name, args, mode, sector, hdr in LUKS:
        vol, key = luks_container(env, name, env.plain, args, mode, sector, hdr)
        if name == "luks1-xts":
            second = os.path.join(env.tmp, "second")
            with open(second, "wb") as f:
                f.write(b"second passphrase")
            sh("cryptsetup", "luksAddKey", "-q", "--key-file", env.passfile,
               "--pbkdf-force-iterations", "1000", vol, second)
        if pyl and name.startswith("luks1") and "sha512" not in name:
            pyluksde_check(env, t, name, vol)
        disk = in_gpt(env, vol, name + ".img")
        env.walk(t, name + " walk --passphrase-file", ["--passphrase-file", env.passfile, disk])
        env.walk(t, name + " walk --volume-key-file", ["--volume-key-file", key, disk])
        if grub and "argon2" not in name:
            grub_check(env, t, name, disk)
        if name == "luks1-xts":
            two_keyslots(env, t, disk, second)
            luks1_damaged(env, t, disk)
        if name == "luks2-argon2id":
            prompt_test(env, t, disk)
            error_tests(env, t, disk, key)
        os.unlink(disk)


def luks1_damaged(env, t, disk):
    """Keyslot 0's state word overwritten: the header is refused, named."""
    with open(disk, "r+b") as f:
        f.seek(MB + 208)
        f.write(b"\x12\x34\x56\x78")
    env.fails(t, "LUKS1 keyslot state damaged: refused, named",
              ["--passphrase-file", env.passfile, disk],
              ["LUKS1 keyslot 0: state 0x12345678", "LUKS header"])


def two_keyslots(env, t, disk, second):
    """Keyslot 1 (luksAddKey) opens with its passphrase; a wrong one names
    both keyslots tried."""
    rc, out, err = imgtest.run_cli(env.cli, ["walk", "-v", "--passphrase-file", second, disk], 300)
    t.check("luks1-xts: keyslot 1's passphrase opens keyslot 1",
            rc == 0 and b"opened with keyslot 1" in err, (rc, err[-300:]))
    bad = os.path.join(env.tmp, "bad1")
    with open(bad, "wb") as f:
        f.write(b"not it")
    env.fails(t, "luks1-xts: a wrong passphrase names keyslots 0 and 1",
              ["--passphrase-file", bad, disk], ["tried keyslots 0, 1"])


def error_tests(env, t, disk, key):
    bad = os.path.join(env.tmp, "bad")
    with open(bad, "wb") as f:
        f.write(PASS + b"\n")  # the exact bytes count: a newline is a wrong passphrase
    env.fails(t, "wrong passphrase", ["--passphrase-file", bad, disk],
              ["no keyslot opened with this passphrase", "tried keyslot 0"])
    env.fails(t, "no key given", [disk], ["encrypted", "--passphrase-file"])
    wrongkey = os.path.join(env.tmp, "wrongkey")
    with open(wrongkey, "wb") as f:
        f.write(bytes(64))
    env.fails(t, "wrong volume key", ["--volume-key-file", wrongkey, disk],
              ["does not match"])
    luks_layers(env, t, disk, key)
    # damage the first LUKS2 header copy: the second one is used
    hdr = 1 * MB
    with open(disk, "r+b") as f:
        f.seek(hdr + 4096 + 10)
        f.write(b"X")
    rc, out, err = imgtest.run_cli(env.cli, ["walk", "--json", "--hash", "--passphrase-file",
                                             env.passfile, disk], 600)
    got, errs = test_files.parse_jsonl(out)
    probs = errs + test_files.compare_records(env.kv, env.view, got, 5)
    if rc != 1 or b"used the second" not in err:
        probs.append("exit %s, expect 1 with 'used the second': %s" % (rc, err[-300:]))
    t.problems("first LUKS2 header damaged: the second copy", probs)
    absurd_kdf(env, t, disk)


def key_hex(path):
    return open(path, "rb").read().hex()


def absurd_kdf(env, t, disk):
    """Argon2 memory 8 GiB in both header copies (checksums made valid)."""
    base = 1 * MB
    with open(disk, "r+b") as f:
        f.seek(base + 8)
        size = struct.unpack(">Q", f.read(8))[0]
        f.seek(base + size + 4096)  # the second copy's JSON: the first is damaged
        j = json.loads(f.read(size - 4096).split(b"\0", 1)[0])
        for ks in j["keyslots"].values():
            ks["kdf"]["memory"] = 8 * 1024 * 1024
        nj = json.dumps(j, separators=(",", ":")).encode()
        for at in (base, base + size):
            f.seek(at)
            area = bytearray(f.read(size))
            area[4096:] = nj + bytes(size - 4096 - len(nj))
            area[448:512] = bytes(64)
            area[448:480] = hashlib.sha256(bytes(area)).digest()
            f.seek(at)
            f.write(area)
    env.fails(t, "Argon2 memory 8 GiB refused", ["--passphrase-file", env.passfile, disk],
              ["refused", "KiB"])


def layers(env, args):
    rc, out, err = imgtest.run_cli(env.cli, ["layers", "--json"] + args, 120)
    rows = [json.loads(x) for x in out.splitlines() if x.strip()] if rc in (0, 1) else []
    return rc, rows, out + err


def fsid(env):
    for line in open(os.path.join(env.testdata, "files", "subvols.super.txt")):
        w = line.split()
        if w and w[0] == "fsid":
            return w[1]
    return None


def lvm_layers(env, t, img):
    """layers: the PV uuid lvm2's pvs printed, both LVs, two segments, the
    btrfs fsid dump-super printed."""
    pvs = open(os.path.join(env.testdata, "volume", "gpt-lvm.pvs.txt")).read().split()
    rc, rows, text = layers(env, [img])
    by = {}
    for r in rows:
        by.setdefault(r["layer"], []).append(r)
    probs = []
    if [r.get("uuid") for r in by.get("lvm-pv", [])] != [pvs[-1]]:
        probs.append("lvm-pv uuid %s, pvs says %s" % (by.get("lvm-pv"), pvs[-1]))
    lvs = {r.get("name"): r.get("detail", "") for r in by.get("lvm-lv", [])}
    if set(lvs) != {"vgd/swap", "vgd/root"} or "2 segments" not in lvs.get("vgd/root", ""):
        probs.append("LVs %s" % lvs)
    if [r.get("uuid") for r in by.get("btrfs", [])] != [fsid(env)]:
        probs.append("btrfs rows %s, fsid %s" % (by.get("btrfs"), fsid(env)))
    t.problems("layers: GPT, PV, LVs, btrfs", probs if rc == 0 else ["exit %s: %s" % (rc, text[-300:])])


def luks_layers(env, t, disk, key):
    rc, rows, text = layers(env, ["--passphrase-file", env.passfile, disk])
    probs = [] if rc == 0 else ["exit %s: %s" % (rc, text[-300:])]
    luks = [r for r in rows if r["layer"] == "luks2"]
    if len(luks) != 1 or luks[0].get("uuid") != env.luks_uuid:
        probs.append("luks2 rows %s, cryptsetup says uuid %s" % (luks, env.luks_uuid))
    else:
        if "opened with keyslot 0" not in luks[0].get("detail", ""):
            probs.append("luks2 detail: %r" % luks[0].get("detail"))
        want = {"cipher": "aes-xts-plain64", "key_bits": 512, "sector_size": 4096,
                "payload_offset": 16 * MB, "keyslots": "0: argon2id t=4 m=64 KiB p=2"}
        for k, v in want.items():
            if luks[0].get(k) != v:
                probs.append("luks2 %s: %r, cryptsetup made %r" % (k, luks[0].get(k), v))
    if [r.get("uuid") for r in rows if r["layer"] == "btrfs"] != [fsid(env)]:
        probs.append("no btrfs row under LUKS2")
    if key_hex(key).encode() in text.lower() or PASS in text or \
            open(key, "rb").read() in text:
        probs.append("key material in the output")
    t.problems("layers: LUKS2 uuid, cipher, sectors, KDF; no key printed", probs)


def lvm_older_copy(env, t, img):
    """The current metadata text damaged (one byte; its CRC no longer
    matches): the newest older copy in the ring buffer is used, said on
    stderr (exit 1). That copy (seqno 3, before lvextend) has vgd/root of
    one segment."""
    dmg = os.path.join(env.tmp, "dmg.img")
    shutil.copyfile(img, dmg)
    with open(dmg, "r+b") as f:
        f.seek(MB + 4096 + 40)
        off = struct.unpack("<Q", f.read(8))[0]
        f.seek(MB + 4096 + off + 20)
        c = f.read(1)
        f.seek(-1, 1)
        f.write(b"#" if c != b"#" else b"%")
    rc, rows, text = layers(env, [dmg])
    pv = [r for r in rows if r["layer"] == "lvm-pv"]
    root = [r for r in rows if r.get("name") == "vgd/root"]
    t.check("damaged current LVM metadata: the older copy (layers, exit 1, said)",
            rc == 1 and b"using the newest older copy" in text and pv and "seqno 3" in pv[0].get("detail", "") and root and
            "1 segment" in root[0].get("detail", ""), text[-400:])
    rc, out, err = imgtest.run_cli(env.cli, ["super", dmg], 120)
    t.check("damaged current LVM metadata: said, exit 1", rc == 1 and
            b"text crc mismatch; using the newest older copy" in err, (rc, err[-300:]))
    os.unlink(dmg)


def gpt_damage(path, where):
    """Damage the primary GPT of @path (512-byte sectors): "header" one byte
    of the disk GUID (its CRC no longer matches), "entries" one byte of an
    unused entry's name (the array's CRC no longer matches), "ecrc" the
    array CRC the header states (the header CRC recomputed: a valid header
    whose entries do not match). The backup at the last LBA is intact."""
    with open(path, "r+b") as f:
        f.seek(512)
        hdr = bytearray(f.read(92))
        num, esize = struct.unpack_from("<II", hdr, 80)
        if where == "header":
            f.seek(512 + 56)
            f.write(bytes([hdr[56] ^ 0xff]))
        elif where == "entries":
            f.seek(1024 + (num - 1) * esize + 56)
            f.write(b"X")
        else:
            struct.pack_into("<I", hdr, 88, struct.unpack_from("<I", hdr, 88)[0] ^ 1)
            struct.pack_into("<I", hdr, 16, 0)
            struct.pack_into("<I", hdr, 16, zlib.crc32(bytes(hdr)))
            f.seek(512)
            f.write(hdr)


def gpt_backup_said(env, t, name, disk, args):
    """The primary GPT header damaged three ways: the backup is used and said
    on stderr with why, exit 1, by walk (which still gives the kernel's
    view), layers and partitions, whatever lies inside (LVM, LUKS)."""
    why = {"header": b"bad CRC32", "entries": b"entry array at byte 1024: bad CRC32",
           "ecrc": b"entry array at byte 1024: bad CRC32"}
    for where, word in why.items():
        dmg = os.path.join(env.tmp, "gpt-dmg.img")
        shutil.copyfile(disk, dmg)
        gpt_damage(dmg, where)
        note = [b"primary GPT header invalid", word, b"used the backup"]
        rc, out, err = imgtest.run_cli(env.cli, ["walk", "--json", "--hash"] + args + [dmg], 600)
        got, errs = test_files.parse_jsonl(out)
        probs = errs + test_files.compare_records(env.kv, env.view, got, 5)
        if rc != 1 or not all(w in err for w in note):
            probs.append("walk: exit %s, expect 1 saying %s: %s" % (rc, note, err[-300:]))
        rc, rows, text = layers(env, args + [dmg])
        if rc != 1 or not all(w in text for w in note) or \
                not [r for r in rows if r["layer"] in ("lvm-pv", "luks2")]:
            probs.append("layers: exit %s, expect 1 saying %s: %s" % (rc, note, text[-300:]))
        rc, out, err = imgtest.run_cli(env.cli, ["partitions", dmg], 120)
        if rc != 1 or not all(w in err for w in note):
            probs.append("partitions: exit %s, expect 1 saying it: %s" % (rc, err[-300:]))
        t.problems("%s, primary GPT %s damaged: the backup used, said, exit 1" % (name, where),
                   probs)
        os.unlink(dmg)


def gpt_many(src, dst, count):
    """@src's GPT with @count entries, every one a copy of partition 1 (the
    array grows into the gap before it, at 1 MiB; CRCs recomputed)."""
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as f:
        f.seek(512)
        hdr = bytearray(f.read(92))
        elba, num, esize = struct.unpack_from("<QII", hdr, 72)
        f.seek(elba * 512)
        first = f.read(esize)
        arr = b"".join(first[:16] + struct.pack("<QQ", 7, i) + first[32:]
                       for i in range(count))
        assert elba * 512 + len(arr) <= MB
        f.seek(elba * 512)
        f.write(arr)
        struct.pack_into("<I", hdr, 80, count)
        struct.pack_into("<I", hdr, 88, zlib.crc32(arr))
        struct.pack_into("<I", hdr, 16, 0)
        struct.pack_into("<I", hdr, 16, zlib.crc32(bytes(hdr)))
        f.seek(512)
        f.write(hdr)


def many_partitions(env, t, name, disk, kind, count=140):
    """A GPT of @count entries, all the partition holding @kind: layers lists
    every partition and every @kind under it (it stopped at 128 partitions
    and about 75 PVs or 39 LUKS volumes, saying nothing), exit 0; under
    LVM, walk --partition vgd/root reads the kernel's view."""
    many = os.path.join(env.tmp, "gpt-many.img")
    gpt_many(disk, many, count)
    rc, rows, text = layers(env, [many])
    parts = [r for r in rows if r["layer"] == "partition"]
    under = [r for r in rows if r["layer"] == kind]
    t.check("%s, %d GPT entries: layers lists every partition and %s" % (name, count, kind),
            rc == 0 and len(parts) == count and len(under) == count and
            [r["number"] for r in parts] == list(range(1, count + 1)),
            "exit %s, %d partitions, %d %s: %s" % (rc, len(parts), len(under), kind,
                                                   text[-300:]))
    if kind == "lvm-pv":
        env.walk(t, "%s, %d GPT entries: walk --partition vgd/root" % (name, count),
                 ["--partition", "vgd/root", many])
    os.unlink(many)


def mda_budget(env, t, img, count=140):
    """@count GPT entries all holding the PV of gpt-lvm, whose label states a
    64 MiB metadata area (label CRC recomputed) and whose current text is
    damaged (one byte: its CRC fails), so that each PV's whole ring is
    searched for an older copy: 8.75 GiB of reads (4.5 minutes before the
    bound). The scan reads about 1 GiB: the PVs past it are listed with
    their metadata unread, a "stopped" layer and stderr say why, exit 1,
    within the 120 s timeout."""
    def lvm_crc(b):
        return zlib.crc32(b, 0xf597a6cf ^ 0xffffffff) ^ 0xffffffff
    big = os.path.join(env.tmp, "mda-big.img")
    gpt_many(img, big, count)
    with open(big, "r+b") as f:
        f.seek(MB + 512)
        lab = bytearray(f.read(512))
        ok = lab[:8] == b"LABELONE" and lvm_crc(bytes(lab[20:])) == struct.unpack_from("<I", lab, 16)[0]
        at = struct.unpack_from("<I", lab, 20)[0] + 40  # after uuid and device size
        while struct.unpack_from("<Q", lab, at)[0]:  # data areas, then a zero pair
            at += 16
        at += 16
        ok = ok and struct.unpack_from("<Q", lab, at)[0] == 4096
        struct.pack_into("<Q", lab, at + 8, 64 * MB)
        struct.pack_into("<I", lab, 16, lvm_crc(bytes(lab[20:])))
        f.seek(MB + 512)
        f.write(lab)
        f.seek(MB + 4096 + 40)
        off = struct.unpack("<Q", f.read(8))[0]
        f.seek(MB + 4096 + off + 20)
        c = f.read(1)
        f.seek(-1, 1)
        f.write(b"#" if c != b"#" else b"%")
    rc, rows, text = layers(env, [big])
    pvs = [r for r in rows if r["layer"] == "lvm-pv"]
    unread = [r for r in pvs if "not read" in r.get("detail", "")]
    stop = [r for r in rows if r["layer"] == "stopped"]
    t.check("%d PVs of 64 MiB metadata areas: 1 GiB read, the rest said unread, exit 1" % count,
            ok and rc == 1 and len(pvs) == count and 0 < len(unread) < count and
            len(stop) == 1 and b"probing stopped" in text,
            "label as expected %s, exit %s, %d PVs, %d unread, %d stopped rows: %s" % (
                ok, rc, len(pvs), len(unread), len(stop), text[-300:]))
    os.unlink(big)


def lvm_counts(env, t, img):
    """LV vgd/root's segment_count (2, two segments listed) rewritten in the
    current metadata text of gpt-lvm, its CRC and the mda header's CRC
    recomputed: 2 reads as before; 0, -1, 3 and 99999999999 are refused
    naming the LV, the field, have and expect (the metadata area is said
    unusable and no LV is read: exit 2). lvm2 itself refuses all four."""
    def lvm_crc(b):
        return zlib.crc32(b, 0xf597a6cf ^ 0xffffffff) ^ 0xffffffff
    for val, want in ((b"2", None), (b"0", b"have 0 expect 2"), (b"-1", b"have -1 expect"),
                      (b"3", b"have 3 expect 2"), (b"99999999999", b"have 99999999999 expect")):
        dmg = os.path.join(env.tmp, "lvm-count.img")
        shutil.copyfile(img, dmg)
        with open(dmg, "r+b") as f:
            at = MB + 4096  # the metadata area of the PV in partition 1
            f.seek(at)
            hdr = bytearray(f.read(512))
            msize = struct.unpack_from("<Q", hdr, 32)[0]
            off, size, crc = struct.unpack_from("<QQI", hdr, 40)
            f.seek(at + off)
            text = f.read(size)
            new = text.replace(b"segment_count = 2\n", b"segment_count = " + val + b"\n")
            ok = lvm_crc(bytes(hdr[4:])) == struct.unpack_from("<I", hdr, 0)[0] and \
                lvm_crc(text) == crc and text.count(b"segment_count = 2\n") == 1 and \
                off + len(new) <= msize
            f.seek(at + off)
            f.write(new)
            struct.pack_into("<QQI", hdr, 40, off, len(new), lvm_crc(new))
            struct.pack_into("<I", hdr, 0, lvm_crc(bytes(hdr[4:])))
            f.seek(at)
            f.write(hdr)
        if not ok:
            t.check("LVM segment_count %s: the metadata text as expected" % val.decode(), False,
                    "CRCs or text of gpt-lvm not as expected")
        elif want is None:
            env.walk(t, "LVM segment_count rewritten as it was: read", [dmg])
        else:
            env.fails(t, "LVM segment_count %s: refused, named" % val.decode(), [dmg],
                      ["LV 'root'", "segment_count " + want.decode()])
        os.unlink(dmg)


def prompt_test(env, t, disk):
    """No passphrase file, a terminal on stdin: asked without echo."""
    import pty
    import select
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(env.cli, [env.cli, "walk", "--json", "--hash", disk])
    out, asked = b"", False
    while True:
        r, _, _ = select.select([fd], [], [], 120)
        if not r:
            break
        try:
            b = os.read(fd, 65536)
        except OSError:
            break
        if not b:
            break
        out += b
        if not asked and b"Passphrase for" in out:
            asked = True
            os.write(fd, PASS + b"\n")
    _, status = os.waitpid(pid, 0)
    body = out.split(b"Passphrase for", 1)[1].split(b"\n", 1)[1] if asked else b""
    got, errs = test_files.parse_jsonl(body.replace(b"\r\n", b"\n"))
    probs = [] if asked else ["no prompt: %r" % out[-200:]]
    if PASS in out:
        probs.append("the passphrase was echoed")
    if os.waitstatus_to_exitcode(status) != 0:
        probs.append("exit %d" % os.waitstatus_to_exitcode(status))
    t.problems("a terminal is asked for the passphrase, no echo",
               probs + test_files.compare_records(env.kv, env.view, got, 5))


def lvm_tests(env, t):
    vd = os.path.join(env.testdata, "volume")
    img = {n: imgtest.unzstd(os.path.join(vd, n + ".img.zst"), os.path.join(env.tmp, n + ".img"))
           for n in ("gpt-lvm", "pv-a", "pv-b")}
    want = open(os.path.join(vd, "plain.sha256")).read().split()[0]
    t.check("the btrfs put into the LVs is the one of the kernel's view",
            imgtest.sha256_file(env.plain) == want, "plain.sha256 differs")
    env.walk(t, "gpt-lvm: GPT + LV of two segments", [img["gpt-lvm"]])
    lvm_layers(env, t, img["gpt-lvm"])
    env.walk(t, "gpt-lvm --partition vgd/root", ["--partition", "vgd/root", img["gpt-lvm"]])
    env.fails(t, "gpt-lvm --partition vgd/swap (no btrfs)",
              ["--partition", "vgd/swap", img["gpt-lvm"]], ["vgd/swap"])
    a, b = img["pv-a"], img["pv-b"]
    lvm_older_copy(env, t, img["gpt-lvm"])
    gpt_backup_said(env, t, "GPT + LVM", img["gpt-lvm"], [])
    many_partitions(env, t, "GPT + LVM", img["gpt-lvm"], "lvm-pv")
    lvm_counts(env, t, img["gpt-lvm"])
    mda_budget(env, t, img["gpt-lvm"])
    env.walk(t, "two PVs: vgm/data", ["--partition", "vgm/data", a, b])
    env.walk(t, "two PVs, other order: vgm/data", ["--partition", "vgm/data", b, a])
    env.walk(t, "two PVs: vgm/strip (striped)", ["--partition", "vgm/strip", b, a])
    env.fails(t, "two btrfs LVs: choose one", [a, b], ["vgm/data", "vgm/strip", "--partition"])
    env.fails(t, "PV missing: the LV is not read", ["--partition", "vgm/data", a],
              ["vgm/data"])
    raid_tests(env, t)
    return img


def raid_tests(env, t):
    """raid1 legs on two images (metadata by lvm2's vgcfgrestore): both, each
    alone (the other PV missing), and a failing leg (its image cut short:
    reads past the end fail and go to the other leg, said once, exit 1);
    the linear LV held wholly by raid-a opens without raid-b."""
    vd = os.path.join(env.testdata, "volume")
    ra, rb = (imgtest.unzstd(os.path.join(vd, n + ".img.zst"), os.path.join(env.tmp, n + ".img"))
              for n in ("raid-a", "raid-b"))
    m = ["--partition", "vgr/mirror"]
    env.walk(t, "raid1: both legs", m + [ra, rb])
    env.walk(t, "raid1: leg 1 alone (raid-a missing)", m + [rb], expect_rc=1)
    env.walk(t, "raid1: leg 0 alone (raid-b missing)", m + [ra], expect_rc=1)
    env.walk(t, "a VG with a PV missing: the LV raid-a holds", ["--partition", "vgr/solo", ra],
             expect_rc=1)
    with open(ra, "r+b") as f:
        f.truncate(12 * MB)  # leg 0 ends 7 MiB into the LV
    env.walk(t, "raid1: leg 0 failing, leg 1 read", m + [ra, rb], expect_rc=1)
    rc, out, err = imgtest.run_cli(env.cli, ["super"] + m + [ra, rb], 120)
    t.check("raid1: the failing leg is named", b"leg mirror_rimage_0 failed" in err and
            b"read from leg mirror_rimage_1" in err, err[-300:])
    os.unlink(ra)
    os.unlink(rb)


def multidev_test(env, t):
    """A btrfs RAID1 over two LUKS2 volumes (two disks, as an encrypted
    Fedora RAID1 install has them): testdata/images/raid1's devices, each
    encrypted; subvols equal the kernel-recorded expected-subvols.jsonl,
    and one volume alone opens degraded (exit 1)."""
    import test_images
    d = os.path.join(env.testdata, "images", "raid1")
    args = ["--type", "luks2", "--pbkdf", "pbkdf2", "--hash", "sha256",
            "--pbkdf-force-iterations", "1000", "--sector-size", "4096"]
    disks = []
    for n in ("dev1", "dev2"):
        plain = imgtest.unzstd(os.path.join(d, n + ".img.zst"), os.path.join(env.tmp, n + ".img"))
        vol, _ = luks_container(env, "raid1-" + n, plain, args, "xts-plain64", 4096, 16 * MB)
        os.unlink(plain)
        disks.append(vol)
    exp = [json.loads(x) for x in open(os.path.join(d, "expected-subvols.jsonl")) if x.strip()]
    for name, imgs, want_rc in (("both", disks[::-1], 0), ("one missing", disks[:1], 1)):
        rc, out, err = imgtest.run_cli(env.cli, ["subvols", "--json", "--passphrase-file",
                                                 env.passfile] + imgs, 120)
        got = [json.loads(x) for x in out.splitlines() if x.strip()]
        probs = test_images.diff_subvols(exp, got)
        if rc != want_rc:
            probs.append("exit %s, expect %d: %s" % (rc, want_rc, err[-300:]))
        t.problems("btrfs RAID1 over two LUKS2 volumes: " + name, probs)
    for v in disks:
        os.unlink(v)


def luks_in_lv_test(env, t, img):
    """LVM -> LUKS2 -> btrfs: a LUKS2 container of testdata/images/nested
    (128 MiB) written into LV vgd/root of gpt-lvm, where gpt-lvm.lvs.txt and
    gpt-lvm.pvs.txt put its first segment (PEs 40.. of the PV at 1 MiB,
    4 MiB extents, data at 1 MiB into the PV); subvols equal the
    kernel-recorded list."""
    import test_images
    d = os.path.join(env.testdata, "images", "nested")
    plain = imgtest.unzstd(os.path.join(d, "dev1.img.zst"), os.path.join(env.tmp, "nested.img"))
    args = ["--type", "luks2", "--pbkdf", "pbkdf2", "--hash", "sha512",
            "--pbkdf-force-iterations", "1000", "--sector-size", "512"]
    vol, _ = luks_container(env, "in-lv", plain, args, "xts-plain64", 512, 16 * MB)
    os.unlink(plain)
    lvs = open(os.path.join(env.testdata, "volume", "gpt-lvm.lvs.txt")).read().split("\n")
    first = [x.split() for x in lvs if x.split()[:2] == ["root", "0"]][0]
    pe = int(first[3].split(":")[1].split("-")[0])
    disk = os.path.join(env.tmp, "lvm-luks.img")
    shutil.copyfile(img, disk)
    sh("dd", "if=" + vol, "of=" + disk, "bs=1M", "seek=%d" % (1 + 1 + pe * 4),
       "conv=notrunc,sparse", "status=none")
    os.unlink(vol)
    exp = [json.loads(x) for x in open(os.path.join(d, "expected-subvols.jsonl")) if x.strip()]
    rc, out, err = imgtest.run_cli(env.cli, ["subvols", "--json", "--passphrase-file",
                                             env.passfile, disk], 120)
    got = [json.loads(x) for x in out.splitlines() if x.strip()]
    probs = test_images.diff_subvols(exp, got)
    if rc != 0:
        probs.append("exit %s: %s" % (rc, err[-300:]))
    t.problems("GPT + LVM + LUKS2 (in an LV) + btrfs: subvols", probs)
    os.unlink(disk)


def stack_test(env, t, img):
    """GPT + LUKS2 + LVM: the PV of gpt-lvm (its partition 1) encrypted."""
    pv = os.path.join(env.tmp, "pv.img")
    sh("dd", "if=" + img["gpt-lvm"], "of=" + pv, "bs=1M", "skip=1", "count=384",
       "conv=sparse", "status=none")
    args = ["--type", "luks2", "--pbkdf", "argon2id", "--pbkdf-force-iterations", "4",
            "--pbkdf-memory", "32", "--pbkdf-parallel", "1", "--sector-size", "4096"]
    vol, key = luks_container(env, "luks2-lvm", pv, args, "xts-plain64", 4096, 16 * MB)
    os.unlink(pv)
    disk = in_gpt(env, vol, "luks2-lvm.img")
    env.walk(t, "GPT + LUKS2 + LVM", ["--passphrase-file", env.passfile, disk])
    env.walk(t, "GPT + LUKS2 + LVM --partition vgd/root",
             ["--partition", "vgd/root", "--volume-key-file", key, disk])
    gpt_backup_said(env, t, "GPT + LUKS2", disk, ["--passphrase-file", env.passfile])
    many_partitions(env, t, "GPT + LUKS2 (locked)", disk, "luks2")
    # super names every layer the device was read through, not the partition alone
    rc, out, err = imgtest.run_cli(env.cli, ["super", "--json", "--passphrase-file",
                                             env.passfile, disk], 120)
    devs = json.loads(out)["devices"] if rc == 0 and out else []
    chain = devs[0].get("layers", "") if len(devs) == 1 else ""
    t.check("GPT + LUKS2 + LVM: super --json names the partition, LUKS2 and LV layers",
            re.fullmatch(r"partition 1 at offset \d+ > luks2 [0-9a-f-]{36} > lvm-pv vgd > "
                         r"lvm-lv vgd/root", chain or ""), (rc, devs, err[-300:]))
    rc, out, err = imgtest.run_cli(env.cli, ["super", "--passphrase-file", env.passfile, disk],
                                   120)
    t.check("GPT + LUKS2 + LVM: super's text says the same layers",
            rc == 0 and chain and (", " + chain).encode() in out, (rc, out[-400:]))
    os.unlink(disk)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    cli, testdata, enc = sys.argv[1:]
    t = imgtest.Tally()
    with tempfile.TemporaryDirectory(prefix="vol-test-") as tmp:
        env = Env(os.path.abspath(cli), testdata, os.path.abspath(enc), tmp)
        img = lvm_tests(env, t)
        if not shutil.which("cryptsetup") or not shutil.which("sfdisk"):
            print("skip: LUKS stacks need cryptsetup (cryptsetup-bin) and sfdisk (fdisk)")
        else:
            luks_tests(env, t)
            stack_test(env, t, img)
            luks_in_lv_test(env, t, img["gpt-lvm"])
            multidev_test(env, t)
    return t.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
