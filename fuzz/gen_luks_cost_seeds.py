#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Seeds of fuzz_luks whose key derivation would cost hours (issue 26):
the cryptsetup-made seeds of fuzz/corpus/luks (fuzz/gen-volume-seeds.sh)
with their KDF parameters rewritten, LUKS2's JSON in both header copies
with each copy's checksum recomputed, LUKS1's fields in place. The target
must refuse them from the estimate, before any derivation:

  luks2-cost-argon2     argon2id t=4096 m=1 GiB p=4
  luks2-cost-pbkdf2     pbkdf2-sha512 10^8 iterations
  luks2-cost-digest     a digest of 10^8 iterations
  luks2-cost-32slots    32 keyslots of pbkdf2-sha512 10^8 iterations
  luks1-cost-digest     a digest of 2^32-1 iterations

    python3 fuzz/gen_luks_cost_seeds.py
"""
import hashlib
import json
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "luks")


def luks2(src, dst, edit):
    d = bytearray(open(os.path.join(HERE, src), "rb").read())
    size = struct.unpack_from(">Q", d, 8)[0]
    j = json.loads(bytes(d[4096:size]).split(b"\0", 1)[0])
    edit(j)
    nj = json.dumps(j, separators=(",", ":")).encode()
    assert len(nj) < size - 4096
    for at in (0, size):
        area = d[at:at + size]
        area[4096:] = nj + bytes(size - 4096 - len(nj))
        area[448:512] = bytes(64)
        area[448:480] = hashlib.sha256(bytes(area)).digest()
        d[at:at + size] = area
    open(os.path.join(HERE, dst), "wb").write(d)


def slots(**kw):
    def edit(j):
        for ks in j["keyslots"].values():
            ks["kdf"].update(kw)
    return edit


def argon(j):
    for ks in j["keyslots"].values():
        ks["kdf"] = dict(type="argon2id", time=4096, memory=1 << 20, cpus=4,
                         salt=ks["kdf"]["salt"])


def digest(j):
    for d in j["digests"].values():
        d["iterations"] = 100000000


def many(j):
    ks0 = j["keyslots"]["0"]
    ks0["kdf"].update(hash="sha512", iterations=100000000)
    j["keyslots"] = {str(i): ks0 for i in range(32)}
    for d in j["digests"].values():
        d["keyslots"] = [str(i) for i in range(32)]


luks2("luks2-pbkdf2", "luks2-cost-argon2", argon)
luks2("luks2-pbkdf2", "luks2-cost-pbkdf2", slots(hash="sha512", iterations=100000000))
luks2("luks2-pbkdf2", "luks2-cost-digest", digest)
luks2("luks2-pbkdf2", "luks2-cost-32slots", many)
d = bytearray(open(os.path.join(HERE, "luks1-pbkdf2"), "rb").read())
struct.pack_into(">I", d, 164, 0xFFFFFFFF)
open(os.path.join(HERE, "luks1-cost-digest"), "wb").write(d)
