# SPDX-License-Identifier: MIT
"""hostile_volumes.py: fuzz/hostile.py's mutators of what lies around a
btrfs: partition tables (GPT, MBR), LVM2 metadata, LUKS1/LUKS2 headers,
and the containers (qcow2, VMDK, VHD, VHDX, EWF, split raw), each
checksum recomputed."""
import hashlib
import json
import os
import re
import zlib

import genlib
from hostile_btrfs import MB, be, data_ranges, enc, iv32, iv64, le, put


# ------------------------------------------------------------ partition tables

def crc32(b):
    return zlib.crc32(bytes(b)) & 0xFFFFFFFF


def find_gpt(inp, name):
    for ss in (512, 4096):
        h = inp.read(name, ss, 92)
        if h[:8] == b"EFI PART":
            return ss
    return None


def mut_gpt(inp, rng):
    name = inp.base.files[0]
    ss = find_gpt(inp, name)
    if ss is None:
        return mut_mbr(inp, rng)
    hdr = bytearray(inp.read(name, ss, ss))
    hsize = le(hdr, 12, 4)
    ent_lba, n, esz = le(hdr, 72, 8), le(hdr, 80, 4), le(hdr, 84, 4)
    ents = bytearray(inp.read(name, ent_lba * ss, n * esz))
    used = [i for i in range(n) if ents[i * esz:i * esz + 16] != bytes(16)]
    r = rng.randrange(10)
    if r < 4 and used:
        i = rng.choice(used)
        f = rng.choice([("first_lba", 32, 8), ("last_lba", 40, 8), ("attrs", 48, 8),
                        ("first_lba", 32, 8), ("last_lba", 40, 8)])
        p = i * esz + f[1]
        old = le(ents, p, 8)
        v = iv64(rng, old)
        if rng.random() < 0.3 and f[0] == "last_lba":
            v = le(ents, i * esz + 32, 8) - rng.choice([1, 100])   # ends before it starts
            inp.invalid = "partition %d ends before it starts" % (i + 1)
        put(ents, p, 8, v)
        inp.notes.append("GPT entry %d %s %d -> %d" % (i + 1, f[0], old, v))
    elif r < 5 and used:
        i = rng.choice(used)
        j = rng.randrange(n)
        ents[j * esz:(j + 1) * esz] = ents[i * esz:(i + 1) * esz]
        inp.notes.append("GPT entry %d copied to entry %d (overlap)" % (i + 1, j + 1))
    elif r < 6 and used:
        i = rng.choice(used)
        o = i * esz + 56 + rng.randrange(72)
        ents[o] = rng.choice([0, 0xff, ord("/"), 0x80])
        inp.notes.append("GPT entry %d name byte changed" % (i + 1))
    else:
        f = rng.choice([("header_size", 12, 4), ("my_lba", 24, 8), ("alternate_lba", 32, 8),
                        ("first_usable", 40, 8), ("last_usable", 48, 8),
                        ("entries_lba", 72, 8), ("num_entries", 80, 4),
                        ("entry_size", 84, 4), ("num_entries", 80, 4)])
        old = le(hdr, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old)
        put(hdr, f[1], f[2], v)
        inp.notes.append("GPT header %s %d -> %d" % (f[0], old, v))
    n2, esz2 = le(hdr, 80, 4), le(hdr, 84, 4)
    if rng.random() < 0.9:
        if n2 * esz2 <= len(ents):
            put(hdr, 88, 4, crc32(ents[:n2 * esz2]))
        elif n2 * esz2 < 64 * MB:
            more = inp.read(name, ent_lba * ss + len(ents), n2 * esz2 - len(ents))
            put(hdr, 88, 4, crc32(bytes(ents) + more))
    hs = min(max(le(hdr, 12, 4), 92), ss)
    put(hdr, 16, 4, 0)
    put(hdr, 16, 4, crc32(hdr[:hs]))
    inp.patch(name, ss, hdr)
    inp.patch(name, ent_lba * ss, ents)
    if rng.random() < 0.5:   # the backup header too, so that it cannot stand in
        alt = le(hdr, 32, 8) if le(hdr, 32, 8) < inp.size(name) // ss else None
        if alt:
            inp.patch(name, alt * ss, bytes(92))
            inp.notes.append("backup GPT header cleared")
    return True


def mut_mbr(inp, rng):
    name = inp.base.files[0]
    mbr = bytearray(inp.read(name, 0, 512))
    if mbr[510:512] != b"\x55\xaa":
        return False
    ebrs = []   # the extended chain's boot records, followed
    ext = [i for i in range(4) if mbr[446 + 16 * i + 4] in (5, 0xf, 0x85)]
    if ext:
        base = le(mbr, 446 + 16 * ext[0] + 8, 4)
        cur = base
        for _ in range(16):
            e = bytearray(inp.read(name, cur * 512, 512))
            if e[510:512] != b"\x55\xaa":
                break
            ebrs.append((cur, e))
            nxt = le(e, 446 + 16 + 8, 4)
            if not nxt:
                break
            cur = base + nxt
    if ebrs and rng.random() < 0.5:
        at, e = rng.choice(ebrs)
        r = rng.randrange(4)
        if r == 0:
            put(e, 446 + 16 + 8, 4, at - le(mbr, 446 + 16 * ext[0] + 8, 4))
            e[446 + 16 + 4] = 5
            inp.notes.append("EBR at sector %d links to itself" % at)
        elif r == 1:
            put(e, 446 + 16 + 8, 4, 0)
            e[446 + 16 + 4] = 5
            inp.notes.append("EBR at sector %d links to the first EBR" % at)
        else:
            f = rng.choice([8, 12, 16 + 8, 16 + 12])
            old = le(e, 446 + f, 4)
            v = iv32(rng, old)
            put(e, 446 + f, 4, v)
            inp.notes.append("EBR at sector %d field +%d %d -> %d" % (at, f, old, v))
        inp.patch(name, at * 512, e)
        return True
    i = rng.randrange(4)
    p = 446 + 16 * i
    r = rng.randrange(4)
    if r == 0:
        old = mbr[p + 4]
        mbr[p + 4] = rng.choice([0, 5, 0xf, 0x83, 0xee, 0x8e, 0x85, 0xff])
        inp.notes.append("MBR entry %d type %#x -> %#x" % (i + 1, old, mbr[p + 4]))
    elif r == 1 and i > 0:
        mbr[p:p + 16] = mbr[446:462]
        inp.notes.append("MBR entry 1 copied to entry %d" % (i + 1))
    else:
        f = rng.choice([("start", 8), ("count", 12)])
        old = le(mbr, p + f[1], 4)
        v = iv32(rng, old)
        put(mbr, p + f[1], 4, v)
        inp.notes.append("MBR entry %d %s %d -> %d" % (i + 1, f[0], old, v))
    inp.patch(name, 0, mbr)
    return True


# ------------------------------------------------------------ LVM2

def lvm_crc(b, crc=0xF597A6CF):
    return (~zlib.crc32(bytes(b), ~crc & 0xFFFFFFFF)) & 0xFFFFFFFF


def lvm_mdas(inp, name):
    """[(absolute offset of the mda header, its size)] of the PV in @name."""
    out = []
    head = inp.read(name, 0, 8 * MB)
    for at in range(0, len(head) - 512, 512):
        if head[at:at + 8] != b"LABELONE" or head[at + 24:at + 32] != b"LVM2 001":
            continue
        pv0 = at - le(head, at + 8, 8) * 512
        p = at + le(head, at + 20, 4) + 40
        for lst in range(2):
            while p + 16 <= len(head):
                off, size = le(head, p, 8), le(head, p + 8, 8)
                p += 16
                if not off:
                    break
                if lst == 1:
                    out.append((pv0 + off, size))
    return out


NUM_RE = re.compile(rb"(\w+) = (-?\d+)")


def mut_lvm(inp, rng):
    done = False
    texts = []
    for name in inp.base.files:
        for mda, msize in lvm_mdas(inp, name):
            h = bytearray(inp.read(name, mda, 512))
            if h[4:20] != b" LVM2 x[5A%r0N*>":
                continue
            toff, tsize = le(h, 40, 8), le(h, 48, 8)
            if not tsize or toff + tsize > msize:
                continue   # wrapped in the ring: left alone
            texts.append((name, mda, msize, h, toff, tsize))
    if not texts:
        return False
    text = inp.read(texts[0][0], texts[0][1] + texts[0][4], texts[0][5])
    body = text.rstrip(b"\0")
    r = rng.randrange(10)
    nums = list(NUM_RE.finditer(body))
    if r < 6 and nums:
        m = rng.choice(nums)
        key = m.group(1)
        v = rng.choice([b"-1", b"-2147483648", b"0", b"1", b"4294967296", b"9223372036854775807",
                        b"18446744073709551615", b"18446744073709551616",
                        b"99999999999999999999999", b"65", b"1000000"])
        body = body[:m.start(2)] + v + body[m.end(2):]
        inp.notes.append("LVM metadata %s = %s -> %s" % (key.decode(), m.group(2).decode(),
                                                         v.decode()))
        if v.startswith(b"-") and key in (b"extent_count", b"stripe_count", b"pe_count",
                                          b"extent_size", b"start_extent", b"segment_count"):
            inp.invalid = "LVM %s negative" % key.decode()
    elif r < 7:
        m = re.search(rb"stripes = \[[^\]]*\]", body)
        if not m:
            return False
        v = rng.choice([b"stripes = []", b'stripes = ["pv0", 4294967295]',
                        b'stripes = ["pv9", 0]', b'stripes = ["pv0"]',
                        b'stripes = ["pv0", -5]',
                        b"stripes = [" + b'"pv0", 0, ' * 300 + b'"pv0", 0]'])
        body = body[:m.start()] + v + body[m.end():]
        inp.notes.append("LVM stripes list -> %r" % v[:60])
    elif r < 8:
        cut = rng.randrange(len(body))
        body = body[:cut] + rng.choice([b"{" * 64, b"}", b'"', b"[[[[[[[[", b"\0", b"= = ="]) + \
            body[cut:]
        inp.notes.append("LVM metadata: syntax damaged at byte %d" % cut)
    else:
        m = re.search(rb"\n(\t*)(\w+) \{", body[body.find(b"logical_volumes"):] if
                      b"logical_volumes" in body else body)
        dup = rng.choice([b'\nlogical_volumes {\n}\n', b'\nextent_size = 0\n',
                          b'\nphysical_volumes {\n}\n'])
        at = body.find(b"\n", len(body) // 2)
        body = body[:at] + dup + body[at:]
        inp.notes.append("LVM metadata: %r inserted" % dup.strip())
        del m
    new = body + b"\0"
    one = rng.random() < 0.2
    for name, mda, msize, h, toff, tsize in texts[:1] if one else texts:
        if 512 + toff + len(new) > msize or toff + len(new) > msize:
            continue
        hh = bytearray(h)
        put(hh, 48, 8, len(new))
        put(hh, 56, 4, lvm_crc(new))
        put(hh, 0, 4, lvm_crc(hh[4:512]))
        inp.patch(name, mda + toff, new)
        inp.patch(name, mda, hh)
        done = True
    if one:
        inp.notes.append("only the first metadata area changed")
    return done


# ------------------------------------------------------------ LUKS

def mut_luks1(inp, rng):
    name = inp.base.files[0]
    h = bytearray(inp.read(name, 0, 592))
    if h[:6] != b"LUKS\xba\xbe":
        return False
    r = rng.randrange(10)
    if r < 5:
        ks = rng.randrange(8) if rng.random() < 0.3 else 0
        p = 208 + 48 * ks
        f = rng.choice([("active", 0), ("iterations", 4), ("key_material_offset", 40),
                        ("stripes", 44), ("iterations", 4), ("stripes", 44)])
        old = int.from_bytes(h[p + f[1]:p + f[1] + 4], "big")
        v = rng.choice([0, 1, 2, 3999, 4000, 4001, 0x00AC71F3, 0x0000DEAD, (1 << 32) - 1,
                        1 << 31, 100000000, 2 ** 24, old + 1])
        put(h, p + f[1], 4, v, big=True)
        inp.notes.append("LUKS1 keyslot %d %s %d -> %d" % (ks, f[0], old, v))
        if ks == 0 and f[0] == "stripes" and v == 0:
            inp.invalid = "LUKS1 keyslot 0 with 0 stripes"
    elif r < 8:
        f = rng.choice([("payload_offset", 104), ("key_bytes", 108), ("mk_digest_iter", 164),
                        ("version", 6)])
        n = 2 if f[0] == "version" else 4
        old = int.from_bytes(h[f[1]:f[1] + n], "big")
        v = rng.choice([0, 1, 2, 16, 31, 33, 64, 65, 128, 4096, (1 << 31), (1 << 32) - 1,
                        100000000, old + 1]) % (1 << (8 * n))
        put(h, f[1], n, v, big=True)
        inp.notes.append("LUKS1 %s %d -> %d" % (f[0], old, v))
    else:
        f = rng.choice([("cipher_name", 8), ("cipher_mode", 40), ("hash_spec", 72)])
        v = rng.choice([b"aes", b"twofish", b"serpent", b"xts-plain64", b"cbc-essiv:sha256",
                        b"ecb", b"cbc-plain", b"xts-essiv:whirlpool", b"sha1", b"sha512",
                        b"ripemd160", b"whirlpool", b"A" * 32, b"", b"%s%n%s"])
        old = bytes(h[f[1]:f[1] + 32]).rstrip(b"\0")
        h[f[1]:f[1] + 32] = v.ljust(32, b"\0")[:32]
        inp.notes.append("LUKS1 %s %r -> %r" % (f[0], old, v))
    inp.patch(name, 0, h)
    return True


def luks2_mutate_json(rng, j, inp):
    ks = j.get("keyslots", {})
    k0 = next(iter(ks.values()), None)
    r = rng.randrange(12)
    big = rng.choice([0, -1, 1, 3, 4, 1 << 31, (1 << 32) - 1, 1 << 32, 1 << 53, 10 ** 30,
                      "18446744073709551616", "-1", "0x10", 1.5, None, "x", [], {}])
    if r < 3 and k0:
        key = rng.choice(["iterations", "memory", "cpus", "time", "hash", "type", "salt"])
        kdf = k0.setdefault("kdf", {})
        if isinstance(kdf, dict):
            kdf[key] = big if key not in ("hash", "type") else rng.choice(
                ["pbkdf2", "argon2i", "argon2id", "sha1", "whirlpool", "", "x" * 300, big])
            inp.notes.append("LUKS2 keyslot kdf.%s -> %r" % (key, kdf[key]))
    elif r < 5 and k0:
        where, key = rng.choice([("af", "stripes"), ("af", "hash"), ("area", "offset"),
                                 ("area", "size"), ("area", "key_size"), ("area", "encryption"),
                                 ("", "key_size"), ("", "priority"), ("", "type")])
        tgt = k0.setdefault(where, {}) if where else k0
        tgt[key] = big
        inp.notes.append("LUKS2 keyslot %s.%s -> %r" % (where, key, big))
    elif r < 7:
        seg = next(iter(j.get("segments", {}).values()), {})
        key = rng.choice(["offset", "size", "iv_tweak", "sector_size", "encryption", "type"])
        seg[key] = big if key != "encryption" else rng.choice(
            ["aes-ecb", "aes-cbc-plain", "aes-xts-plain64", "cipher_null-ecb", "", "x" * 200])
        inp.notes.append("LUKS2 segment %s -> %r" % (key, seg[key]))
    elif r < 8:
        dg = next(iter(j.get("digests", {}).values()), {})
        key = rng.choice(["iterations", "keyslots", "segments", "digest", "salt", "hash"])
        dg[key] = big
        inp.notes.append("LUKS2 digest %s -> %r" % (key, big))
    elif r < 9 and k0:
        n = rng.choice([2, 8, 32, 33, 1000])
        for i in range(1, n):
            ks[str(i)] = json.loads(json.dumps(k0))
        inp.notes.append("LUKS2 %d copies of keyslot 0" % n)
    elif r < 10:
        cfg = j.setdefault("config", {})
        key = rng.choice(["json_size", "keyslots_size"])
        cfg[key] = big if rng.random() < 0.5 else str(big)
        inp.notes.append("LUKS2 config %s -> %r" % (key, cfg[key]))
    elif r < 11:
        inp.notes.append("LUKS2 nested arrays")
        j["tokens"] = {"0": {"type": "x", "keyslots": [[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]}}
    else:
        key = rng.choice(["keyslots", "segments", "digests", "config"])
        j.pop(key, None)
        inp.notes.append("LUKS2 %s removed" % key)


def mut_luks2(inp, rng):
    name = inp.base.files[0]
    h = bytearray(inp.read(name, 0, 4096))
    if h[:6] != b"LUKS\xba\xbe" or h[6:8] != b"\0\2":
        return False
    size = int.from_bytes(h[8:16], "big")
    if size < 8192 or size > 4 * MB:
        return False
    if rng.random() < 0.15:   # the binary header
        f = rng.choice([("hdr_size", 8, 8), ("seqid", 16, 8), ("hdr_offset", 256, 8)])
        old = int.from_bytes(h[f[1]:f[1] + 8], "big")
        v = iv64(rng, old)
        put(h, f[1], 8, v, big=True)
        h[448:512] = bytes(64)
        area = bytearray(inp.read(name, 0, size))
        area[:4096] = h
        area[448:480] = hashlib.sha256(bytes(area)).digest()
        inp.patch(name, 0, area[:4096])
        inp.notes.append("LUKS2 binary header %s %d -> %d" % (f[0], old, v))
        return True
    raw = inp.read(name, 4096, size - 4096)
    try:
        j = json.loads(raw.split(b"\0", 1)[0])
    except ValueError:
        return False
    luks2_mutate_json(rng, j, inp)
    nj = json.dumps(j, separators=(",", ":")).encode()
    if len(nj) >= size - 4096:
        return False
    both = rng.random() < 0.8
    for at in (0, size) if both else (0,):
        area = bytearray(inp.read(name, at, size))
        if area[:6] not in (b"LUKS\xba\xbe", b"SKUL\xba\xbe"):
            continue
        area[4096:] = nj + bytes(size - 4096 - len(nj))
        area[448:512] = bytes(64)
        area[448:480] = hashlib.sha256(bytes(area)).digest()
        inp.patch(name, at, area)
    if not both:
        inp.notes.append("only the first header copy")
    return True


# ------------------------------------------------------------ containers

BACKING = [b"fifo", b"/dev/zero", b"victim", b"../victims/secret", b"disk.qcow2",
           b"nonexistent", b"/dev/stdin", b"/proc/self/fd/0", b"x" * 1500, b"/"]


def mut_qcow2(inp, rng):
    name = inp.base.files[0]
    h = bytearray(inp.read(name, 0, 512))
    if h[:4] != b"QFI\xfb":
        return False
    r = rng.randrange(10)
    if r < 3:   # a backing file named in the header, written after it
        nm = rng.choice(BACKING)
        off = 0x200 if len(nm) < 0xE00 else 0x100
        put(h, 8, 8, off, big=True)
        put(h, 16, 4, len(nm), big=True)
        inp.patch(name, off, nm)
        if rng.random() < 0.3:
            put(h, 16, 4, rng.choice([0, 1023, 1024, 1025, 65536, (1 << 32) - 1]), big=True)
        inp.notes.append("qcow2 backing file %r (size field %d)" % (nm[:40], be(h, 16, 4)))
        if be(h, 16, 4) == len(nm) and nm in (b"nonexistent",):
            inp.invalid = "qcow2 backing file that does not exist"
    elif r < 7:
        f = rng.choice([("version", 4, 4), ("cluster_bits", 20, 4), ("size", 24, 8),
                        ("crypt_method", 32, 4), ("l1_size", 36, 4), ("l1_table_offset", 40, 8),
                        ("refcount_table_offset", 48, 8), ("refcount_table_clusters", 56, 4),
                        ("nb_snapshots", 60, 4), ("snapshots_offset", 64, 8),
                        ("incompatible_features", 72, 8), ("header_length", 100, 4),
                        ("refcount_order", 96, 4)])
        old = be(h, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else rng.choice(
            [0, 1, 2, 3, 4, 8, 9, 16, 21, 22, 31, 32, 63, 64, 65535, 1 << 31, (1 << 32) - 1,
             old + 1, old - 1]) % (1 << 32)
        put(h, f[1], f[2], v, big=True)
        inp.notes.append("qcow2 %s %d -> %d" % (f[0], old, v))
    else:   # an L1 or L2 entry
        l1 = be(h, 40, 8)
        l1n = be(h, 36, 4)
        cb = be(h, 20, 4)
        if not l1n or l1 > inp.size(name):
            return False
        i = rng.randrange(min(l1n, 64))
        e = be(inp.read(name, l1 + 8 * i, 8), 0, 8)
        if rng.random() < 0.5 or not e & ((1 << 56) - 1):
            v = rng.choice([0, 1 << 63, (1 << 63) | l1, (1 << 63) | 0x200, (1 << 63) | (1 << 55),
                            (1 << 63) | (inp.size(name) & ~((1 << cb) - 1)), e ^ (1 << cb)])
            inp.patch(name, l1 + 8 * i, enc(v, 8, big=True))
            inp.notes.append("qcow2 L1[%d] %#x -> %#x" % (i, e, v))
        else:
            l2 = e & ((1 << 56) - 1) & ~511
            j = rng.randrange(1 << (cb - 3))
            old = be(inp.read(name, l2 + 8 * j, 8), 0, 8)
            v = rng.choice([(1 << 63) | l1, (1 << 63) | 0, (1 << 62) | rng.getrandbits(62), 1,
                            (1 << 63) | (1 << 55), old ^ (1 << rng.randrange(62)), old | 1])
            inp.patch(name, l2 + 8 * j, enc(v, 8, big=True))
            inp.notes.append("qcow2 L2[%d][%d] %#x -> %#x" % (i, j, old, v))
    inp.patch(name, 0, h)
    return True


VMDK_EXTENTS = [b'RW 524288 FLAT "../victims/secret" 0', b'RW 524288 FLAT "fifo" 0',
                b'RW 524288 FLAT "/dev/zero" 0', b'RW 524288 FLAT "disk.vmdk" 0',
                b'RW 18446744073709551615 FLAT "victim" 0', b'RW -1 FLAT "victim" 0',
                b'RW 524288 SPARSE "disk.vmdk"', b'RW 524288 ZERO',
                b'RW 524288 FLAT "victim" 18446744073709551615',
                b'RW 0 FLAT "victim" 0', b'RW 524288 VMFS "victim"']


def vmdk_text_mutate(rng, text, inp):
    r = rng.randrange(6)
    lines = text.split(b"\n")
    ext = [i for i, l in enumerate(lines) if l.startswith((b"RW ", b"RDONLY ", b"NOACCESS "))]
    if r < 3 and ext:
        i = rng.choice(ext)
        new = rng.choice(VMDK_EXTENTS)
        if rng.random() < 0.5:
            lines[i] = new
        else:
            lines.insert(i + 1, new)
        inp.notes.append("VMDK extent line %r" % new)
    elif r < 4:
        lines.insert(1, rng.choice([b'parentFileNameHint="fifo"', b'parentCID=12345678',
                                    b'createType="twoGbMaxExtentSparse"',
                                    b'createType="vmfsSparse"', b'createType="streamOptimized"',
                                    b'parentFileNameHint="../victims/secret"']))
        inp.notes.append("VMDK descriptor line %r" % lines[1])
    elif r < 5 and ext:
        for _ in range(rng.choice([100, 2000])):
            lines.insert(ext[0], lines[ext[0]])
        inp.notes.append("VMDK extent line repeated")
    else:
        at = rng.randrange(len(lines))
        lines[at] = lines[at][:rng.randrange(len(lines[at]) + 1)] + rng.choice(
            [b'"', b"\0", b"=" * 100, b"\xff"])
        inp.notes.append("VMDK descriptor line %d damaged" % at)
    return b"\n".join(lines)


def mut_vmdk(inp, rng):
    name = inp.base.files[0]
    h = bytearray(inp.read(name, 0, 512))
    if h[:4] != b"KDMV":      # a descriptor file (monolithicFlat)
        text = inp.read(name, 0, 65536)
        inp.replace(name, vmdk_text_mutate(rng, text, inp))
        return True
    dsec, dn = le(h, 28, 8), le(h, 36, 8)
    if rng.random() < 0.5 and dsec and dn:
        text = inp.read(name, dsec * 512, dn * 512).rstrip(b"\0")
        new = vmdk_text_mutate(rng, text, inp)[:dn * 512]
        inp.patch(name, dsec * 512, new.ljust(dn * 512, b"\0"))
        return True
    f = rng.choice([("version", 4, 4), ("flags", 8, 4), ("capacity", 12, 8), ("grainSize", 20, 8),
                    ("descriptorOffset", 28, 8), ("descriptorSize", 36, 8),
                    ("numGTEsPerGT", 44, 4), ("rgdOffset", 48, 8), ("gdOffset", 56, 8),
                    ("overHead", 64, 8), ("compressAlgorithm", 77, 2)])
    old = le(h, f[1], f[2])
    v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) % (1 << (8 * f[2]))
    put(h, f[1], f[2], v)
    inp.notes.append("VMDK header %s %d -> %d" % (f[0], old, v))
    inp.patch(name, 0, h)
    if rng.random() < 0.3:   # a grain directory or table entry
        gd = le(h, 56, 8) * 512
        if gd and gd < inp.size(name):
            i = rng.randrange(8)
            old = le(inp.read(name, gd + 4 * i, 4), 0, 4)
            v = rng.choice([0, 1, (1 << 32) - 1, le(h, 56, 8), old + 1])
            inp.patch(name, gd + 4 * i, enc(v, 4))
            inp.notes.append("VMDK GD[%d] %d -> %d" % (i, old, v))
    return True


def vhd_csum(b):
    return (~sum(b)) & 0xFFFFFFFF


def mut_vhd(inp, rng):
    name = inp.base.files[0]
    size = inp.size(name)
    foot = bytearray(inp.read(name, size - 512, 512))
    if foot[:8] != b"conectix":
        return False
    dyn = be(foot, 60, 4) in (3, 4)
    r = rng.randrange(10)
    if r < 4 or not dyn:
        f = rng.choice([("data_offset", 16, 8), ("original_size", 40, 8), ("current_size", 48, 8),
                        ("disk_type", 60, 4), ("geometry", 56, 4), ("version", 12, 4)])
        old = be(foot, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else rng.choice([0, 1, 2, 3, 4, 5, 6, (1 << 32) - 1,
                                                         0x00010000, old + 1]) % (1 << 32)
        put(foot, f[1], f[2], v, big=True)
        inp.notes.append("VHD footer %s %d -> %d" % (f[0], old, v))
        put(foot, 64, 4, 0)
        put(foot, 64, 4, vhd_csum(foot), big=True)
        inp.patch(name, size - 512, foot)
        if dyn or rng.random() < 0.5:
            inp.patch(name, 0, foot)   # the copy at the start
        return True
    doff = be(foot, 16, 8)
    dh = bytearray(inp.read(name, doff, 1024))
    if dh[:8] != b"cxsparse":
        return False
    if r < 8:
        f = rng.choice([("table_offset", 16, 8), ("max_table_entries", 28, 4),
                        ("block_size", 32, 4), ("data_offset", 8, 8), ("version", 24, 4)])
        old = be(dh, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else rng.choice(
            [0, 1, 512, 4096, 1 << 20, 2 << 20, 1 << 31, (1 << 32) - 1, old + 1,
             old * 2]) % (1 << 32)
        put(dh, f[1], f[2], v, big=True)
        inp.notes.append("VHD dynamic header %s %d -> %d" % (f[0], old, v))
        put(dh, 36, 4, 0)
        put(dh, 36, 4, vhd_csum(dh), big=True)
        inp.patch(name, doff, dh)
    else:
        bat = be(dh, 16, 8)
        n = be(dh, 28, 4)
        i = rng.randrange(max(1, min(n, 256)))
        old = be(inp.read(name, bat + 4 * i, 4), 0, 4)
        v = rng.choice([0, 1, (size // 512) - 1, size // 512, (1 << 32) - 2, old + 1, bat // 512])
        inp.patch(name, bat + 4 * i, enc(v, 4, big=True))
        inp.notes.append("VHD BAT[%d] %#x -> %#x" % (i, old, v))
    return True


def mut_vhdx(inp, rng):
    name = inp.base.files[0]
    if inp.read(name, 0, 8) != b"vhdxfile":
        return False
    r = rng.randrange(10)
    if r < 3:
        at = rng.choice([64 * 1024, 128 * 1024])
        h = bytearray(inp.read(name, at, 4096))
        f = rng.choice([("sequence", 8, 8), ("log_version", 64, 2), ("version", 66, 2),
                        ("log_length", 68, 4), ("log_offset", 72, 8), ("log_guid", 48, 8)])
        old = le(h, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) % (1 << (8 * f[2]))
        put(h, f[1], f[2], v)
        put(h, 4, 4, 0)
        put(h, 4, 4, genlib.crc32c(bytes(h)))
        inp.patch(name, at, h)
        inp.notes.append("VHDX header at %d %s %d -> %d" % (at, f[0], old, v))
        return True
    if r < 6:
        at = rng.choice([192 * 1024, 256 * 1024])
        t = bytearray(inp.read(name, at, 64 * 1024))
        n = le(t, 8, 4)
        f = rng.choice([("entry_count", 8, 4)] + [("entry%d.%s" % (i, k), 16 + 32 * i + o, s)
                                                  for i in range(min(n, 4))
                                                  for k, o, s in (("file_offset", 16, 8),
                                                                  ("length", 24, 4),
                                                                  ("required", 28, 4))])
        old = le(t, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old)
        put(t, f[1], f[2], v)
        put(t, 4, 4, 0)
        put(t, 4, 4, genlib.crc32c(bytes(t)))
        inp.patch(name, at, t)
        inp.notes.append("VHDX region table at %d %s %d -> %d" % (at, f[0], old, v))
        return True
    # the metadata region and the BAT: found through the region table
    t = inp.read(name, 192 * 1024, 64 * 1024)
    regions = {}
    for i in range(min(le(t, 8, 4), 16)):
        p = 16 + 32 * i
        regions[t[p:p + 4]] = (le(t, p + 16, 8), le(t, p + 24, 4))
    bat = regions.get(bytes.fromhex("6677c22d"))
    meta = regions.get(bytes.fromhex("06a27c8b"))
    if r < 8 and meta:
        m = inp.read(name, meta[0], 64 * 1024)
        n = le(m, 10, 2)
        if not n:
            return False
        i = rng.randrange(min(n, 16))
        p = 32 + 32 * i
        if rng.random() < 0.5:
            f = rng.choice([("offset", 16), ("length", 20)])
            old = le(m, p + f[1], 4)
            v = iv32(rng, old)
            inp.patch(name, meta[0] + p + f[1], enc(v, 4))
            inp.notes.append("VHDX metadata entry %d %s %d -> %d" % (i, f[0], old, v))
        else:
            vo, vl = le(m, p + 16, 4), le(m, p + 20, 4)
            if not vl or vo + 8 > 64 * 1024:
                return False
            old = le(m, vo, min(vl, 8))
            v = iv64(rng, old) % (1 << (8 * min(vl, 8)))
            inp.patch(name, meta[0] + vo, enc(v, min(vl, 8)))
            inp.notes.append("VHDX metadata item %d value %d -> %d" % (i, old, v))
        return True
    if bat:
        i = rng.randrange(min(bat[1] // 8, 512))
        old = le(inp.read(name, bat[0] + 8 * i, 8), 0, 8)
        v = rng.choice([6 | (1 << 20), 6 | ((1 << 44) - 1) << 20, 7, 3, 2, old ^ (1 << 20),
                        6 | (0 << 20), 6 | (1 << 40)])
        inp.patch(name, bat[0] + 8 * i, enc(v, 8))
        inp.notes.append("VHDX BAT[%d] %#x -> %#x" % (i, old, v))
        return True
    return False


def ewf_sections(inp, name):
    out = []
    at = 13
    size = inp.size(name)
    for _ in range(4096):
        d = inp.read(name, at, 76)
        if len(d) < 76:
            break
        out.append((at, d[:16].rstrip(b"\0"), le(d, 16, 8), le(d, 24, 8)))
        nxt = le(d, 16, 8)
        if nxt <= at or nxt >= size:
            break
        at = nxt
    return out


def mut_e01(inp, rng):
    name = inp.base.files[0]
    if inp.read(name, 0, 8) != b"EVF\x09\x0d\x0a\xff\x00":
        return False
    secs = ewf_sections(inp, name)
    if not secs:
        return False
    r = rng.randrange(10)
    if r < 3:   # a section descriptor: next, size; adler32 made valid again
        at, typ, nxt, sz = rng.choice(secs)
        d = bytearray(inp.read(name, at, 76))
        f = rng.choice([("next", 16), ("size", 24)])
        old = le(d, f[1], 8)
        v = rng.choice([at, 0, 13, old + 1, old - 76, (1 << 64) - 1, 1 << 40, inp.size(name)])
        put(d, f[1], 8, v)
        put(d, 72, 4, zlib.adler32(bytes(d[:72])))
        inp.patch(name, at, d)
        inp.notes.append("EWF section %s at %d %s %d -> %d" % (typ.decode(errors="replace"),
                                                               at, f[0], old, v))
        return True
    vol = [s for s in secs if s[1] in (b"volume", b"disk")]
    tab = [s for s in secs if s[1] in (b"table", b"table2")]
    if r < 6 and vol:
        at = vol[0][0] + 76
        d = bytearray(inp.read(name, at, 1052))
        f = rng.choice([("chunk_count", 4, 4), ("sectors_per_chunk", 8, 4),
                        ("bytes_per_sector", 12, 4), ("sector_count", 16, 8),
                        ("compression_level", 52, 1)])
        old = le(d, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) % (1 << (8 * f[2]))
        put(d, f[1], f[2], v)
        put(d, 1048, 4, zlib.adler32(bytes(d[:1048])))
        inp.patch(name, at, d)
        inp.notes.append("EWF volume %s %d -> %d" % (f[0], old, v))
        return True
    if tab:
        at = rng.choice(tab)[0] + 76
        th = bytearray(inp.read(name, at, 24))
        n = le(th, 0, 4)
        if rng.random() < 0.4 or not n:
            f = rng.choice([("entries", 0, 4), ("base_offset", 8, 8)])
            old = le(th, f[1], f[2])
            v = iv64(rng, old) if f[2] == 8 else iv32(rng, old)
            put(th, f[1], f[2], v)
            put(th, 20, 4, zlib.adler32(bytes(th[:20])))
            inp.patch(name, at, th)
            inp.notes.append("EWF table %s %d -> %d" % (f[0], old, v))
            return True
        i = rng.randrange(min(n, 100000))
        old = le(inp.read(name, at + 24 + 4 * i, 4), 0, 4)
        v = rng.choice([0, 0x80000000, 0x7fffffff, 0xffffffff, old + 1, old - 1, old ^ 0x80000000,
                        13])
        inp.patch(name, at + 24 + 4 * i, enc(v, 4))
        ents = inp.read(name, at + 24, 4 * n)
        inp.patch(name, at + 24 + 4 * n, zlib.adler32(ents).to_bytes(4, "little"))
        inp.notes.append("EWF table entry %d %#x -> %#x" % (i, old, v))
        return True
    return False


def mut_split(inp, rng):
    segs = sorted(f for f in os.listdir(inp.base.wd) if re.match(r"disk\.\d{3}$", f))
    r = rng.randrange(6)
    s = rng.choice(segs)
    if r == 0:
        inp.replace(s, None, "split segment %s removed" % s)
    elif r == 1:
        data = inp.read(s, 0, inp.size(s))
        cut = rng.choice([0, 1, 511, 4096, len(data) // 2, len(data) - 1])
        inp.replace(s, data[:cut], "split segment %s cut to %d bytes" % (s, cut))
    elif r == 2:
        data = inp.read(s, 0, inp.size(s))
        inp.replace(s, data + bytes(rng.choice([1, 512, 4096])),
                    "split segment %s made longer" % s)
    elif r == 3:
        nxt = "disk.%03d" % (len(segs) + 1)
        inp.replace(nxt, None)
        os.symlink(rng.choice(["fifo", "/dev/zero", "victim", "disk.001"]), inp.path(nxt))
        inp.notes.append("split segment %s a symlink to %s" % (nxt, os.readlink(inp.path(nxt))))
    elif r == 4:
        # not the first: that one the user names (a FIFO there blocks, as
        # it does for cat); the others the tool finds by itself
        s = rng.choice(segs[1:])
        inp.replace(s, None)
        os.mkfifo(inp.path(s))
        inp.notes.append("split segment %s a FIFO" % s)
    else:
        return mut_btrfs_like_flip(inp, rng, s)
    return True


def mut_btrfs_like_flip(inp, rng, name):
    ranges = data_ranges(inp.path(name))
    if not ranges:
        return False
    for _ in range(rng.randint(1, 64)):
        o, n = rng.choice(ranges)
        inp.patch(name, o + rng.randrange(n), bytes([rng.randrange(256)]))
    inp.notes.append("%s: random bytes replaced" % name)
    return True


def mut_flip_any(inp, rng):
    """Random byte replacements in the first MiBs, where the headers live."""
    name = rng.choice(inp.base.image_args())
    name = os.path.basename(name)
    n = rng.randint(1, 16)
    lim = min(inp.size(name), rng.choice([4096, 65536, 1 * MB, 4 * MB]))
    for _ in range(n):
        inp.patch(name, rng.randrange(lim), bytes([rng.randrange(256)]))
    inp.notes.append("%s: %d random bytes in its first %d" % (name, n, lim))
    return True
