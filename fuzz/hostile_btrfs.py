# SPDX-License-Identifier: MIT
"""hostile_btrfs.py: fuzz/hostile.py's mutators of btrfs structures, and
the helpers every mutator shares. A mutator takes the Input (the base's
files, patched in place and put back after the run) and a random.Random,
changes one thing, writes notes on what, and returns whether it did."""
import os
import random

import genlib

MB = 1 << 20

# Values that break assumptions: 0, 1, around powers of two, signed limits.
INTERESTING64 = [0, 1, 2, 3, 511, 512, 4095, 4096, 4097, 65536, 1 << 20, 1 << 30, 1 << 31,
                 (1 << 32) - 1, 1 << 32, 1 << 40, 1 << 50, 1 << 62, (1 << 63) - 1, 1 << 63,
                 (1 << 64) - 4096, (1 << 64) - 1]
INTERESTING32 = [0, 1, 2, 7, 8, 9, 12, 16, 31, 32, 33, 64, 128, 255, 256, 511, 512, 4096,
                 65535, 65536, 1 << 24, (1 << 31) - 1, 1 << 31, (1 << 32) - 2, (1 << 32) - 1]


def iv64(rng, old=None):
    if old is not None and rng.random() < 0.3:
        return (old + rng.choice([-1, 1, -4096, 4096, 1 << 20, -(1 << 20)])) % (1 << 64)
    return rng.choice(INTERESTING64)


def iv32(rng, old=None):
    if old is not None and rng.random() < 0.3:
        return (old + rng.choice([-1, 1, 2, 1000, -1000])) % (1 << 32)
    return rng.choice(INTERESTING32)


def data_ranges(path):
    """The (offset, length) ranges of a sparse file that hold data."""
    out = []
    fd = os.open(path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size
        off = 0
        while off < end:
            try:
                d = os.lseek(fd, off, os.SEEK_DATA)
            except OSError:
                break
            h = os.lseek(fd, d, os.SEEK_HOLE)
            out.append((d, h - d))
            off = h
    finally:
        os.close(fd)
    return out


def be(b, off, n):
    return int.from_bytes(b[off:off + n], "big")


# ------------------------------------------------------------ btrfs

SB_OFF = 64 * 1024
HDR = 101
ITEM = 25


def le(b, off, n):
    return int.from_bytes(b[off:off + n], "little")


def enc(v, n, big=False):
    """@v as @n bytes, wrapped modulo 2^(8n) as a field of that width would."""
    return (v % (1 << (8 * n))).to_bytes(n, "big" if big else "little")


def put(b, off, n, v, big=False):
    b[off:off + n] = (v % (1 << (8 * n))).to_bytes(n, "big" if big else "little")


def read_super(inp, name):
    sb = inp.read(name, SB_OFF, 4096)
    if sb[0x40:0x48] != b"_BHRfS_M":
        return None
    return {"fsid": sb[0x20:0x30], "gen": le(sb, 0x48, 8), "nodesize": le(sb, 0x94, 4),
            "sectorsize": le(sb, 0x90, 4), "csum": le(sb, 0xc4, 2), "metauuid": sb[0x20:0x30]}


def find_blocks(path, sb):
    """Tree blocks by their header: (offset, level, generation, nritems),
    at every sectorsize step of the data ranges (stale ones too)."""
    out = []
    ns, ss = sb["nodesize"], sb["sectorsize"]
    with open(path, "rb") as f:
        for off, n in data_ranges(path):
            f.seek(off)
            buf = f.read(n)
            start = (-off) % ss
            for i in range(start, len(buf) - ns + 1, ss):
                if buf[i + 32:i + 48] != sb["fsid"] and i + 32 < len(buf):
                    continue
                level, nr = buf[i + 100], le(buf, i + 96, 4)
                if level > 7 or nr == 0 or nr > ns // 17:
                    continue
                out.append((off + i, level, le(buf, i + 80, 8), nr))
    return out


def chunk_map(sb_raw, blocks_at):
    """[(logical, length, physical)] of a single-device filesystem: the
    superblock's system chunks, then the chunk tree's items."""
    out = []

    def add(buf, p):
        if p + 48 + 32 > len(buf):
            return
        out.append((le(buf, p - 8, 8), le(buf, p, 8), le(buf, p + 56, 8)))

    arr = sb_raw[0x32b:0x32b + min(le(sb_raw, 0xa0, 4), 2048)]
    p = 0
    while p + 17 + 48 <= len(arr):
        add(arr, p + 17)
        p += 17 + 48 + 32 * max(le(arr, p + 17 + 44, 2), 1)
    for blk in walk_tree(le(sb_raw, 0x58, 8), out, blocks_at, set()):
        for it in items(blk):
            if it["type"] == 228 and it["size"] >= 80:
                out.append((it["koff"], le(blk, it["doff"], 8), le(blk, it["doff"] + 56, 8)))
    return out


def to_phys(cmap, logical):
    for lo, n, ph in cmap:
        if lo <= logical < lo + n:
            return ph + logical - lo
    return None


def walk_tree(logical, cmap, blocks_at, seen, depth=0):
    """The blocks of the tree at @logical (leaves yielded, nodes followed)."""
    ph = to_phys(cmap, logical)
    if ph is None or ph in seen or depth > 8 or ph not in blocks_at:
        return
    seen.add(ph)
    blk = blocks_at[ph]()
    if blk[100] == 0:
        yield blk
        return
    for i in range(min(le(blk, 96, 4), (len(blk) - HDR) // 33)):
        yield from walk_tree(le(blk, HDR + 33 * i + 17, 8), cmap, blocks_at, seen, depth + 1)


def live_blocks(inp):
    """Physical offsets of the blocks reachable from the superblock's roots."""
    b = inp.base
    name, ns = b.files[0], b.super["nodesize"]
    sb_raw = inp.read(name, SB_OFF, 4096)
    offs = {x[0] for x in b.blocks}
    blocks_at = {o: (lambda o=o: inp.read(name, o, ns)) for o in offs}
    try:
        cmap = chunk_map(sb_raw, blocks_at)
        seen = set()
        roots = [le(sb_raw, 0x50, 8), le(sb_raw, 0x58, 8)]
        for blk in walk_tree(roots[0], cmap, blocks_at, seen):
            for it in items(blk):
                if it["type"] == 132 and it["size"] >= 184:
                    roots.append(le(blk, it["doff"] + 176, 8))
        for r in roots[1:]:
            for _ in walk_tree(r, cmap, blocks_at, seen):
                pass
    except (IndexError, ValueError):
        return set()
    return seen


def resum(blk):
    put(blk, 0, 32, 0)
    blk[0:4] = genlib.crc32c(bytes(blk[32:])).to_bytes(4, "little")


def block_ok(blk):
    return le(blk, 0, 4) == genlib.crc32c(bytes(blk[32:]))


def prepare_btrfs(inp):
    b = inp.base
    if b.blocks is None:
        name = b.files[0]
        b.super = read_super(inp, name)
        b.blocks = find_blocks(inp.path(name), b.super) if b.super else []
        b.live = live_blocks(inp) if b.blocks else set()
    return b.super and b.super["csum"] == 0 and b.blocks


def pick_block(inp, rng, leaf=None, stale=False):
    b = inp.base
    cands = [x for x in b.blocks if leaf is None or (x[1] == 0) == leaf]
    live = [x for x in cands if x[0] in b.live]
    if stale:   # blocks no root reaches: what history and deleted read
        cands = [x for x in cands if x[0] not in b.live] or cands
    elif live and rng.random() < 0.85:
        cands = live
    for _ in range(30):
        if not cands:
            return None, None
        off = rng.choice(cands)[0]
        blk = bytearray(inp.read(b.files[0], off, b.super["nodesize"]))
        if block_ok(blk):
            return off, blk
    return None, None


def items(blk):
    n = min(le(blk, 96, 4), (len(blk) - HDR) // ITEM)
    out = []
    for i in range(n):
        p = HDR + i * ITEM
        out.append({"slot": i, "at": p, "obj": le(blk, p, 8), "type": blk[p + 8],
                    "koff": le(blk, p + 9, 8), "doff": HDR + le(blk, p + 17, 4),
                    "size": le(blk, p + 21, 4)})
    return out


CRAFTED = [b"/", b".", b"..", b"a/b", b"x\0y", b"../", b"\0", b"/etc", b"..\0"]


def craft_name(rng, old):
    n = len(old)
    pick = rng.randrange(5)
    if pick == 0 and n >= 1:
        new = bytearray(old)
        new[rng.randrange(n)] = ord("/")
    elif pick == 1 and n >= 1:
        new = bytearray(old)
        new[rng.randrange(n)] = 0
    elif pick == 2:
        w = rng.choice([b".", b".."])
        new = w + b"/" * (n - len(w)) if n > len(w) else w[:n] if n else old
        new = bytearray(new)
        if n > len(w):
            new = bytearray(w) + bytearray(old[len(w):])
            new = bytearray(b"../" * (n // 3) + b"." * (n % 3)) if rng.random() < 0.5 else \
                bytearray(b"..") + bytearray(b"/" * (n - 2)) if n >= 2 else new
    else:
        w = rng.choice(CRAFTED)
        new = bytearray((w * (n // max(len(w), 1) + 1))[:n])
    return bytes(new[:n]).ljust(n, b".")


def name_hash(name):
    return genlib.crc32c_raw(0xFFFFFFFE, name)


def mutate_dir_item(rng, blk, it, inp):
    d, size = it["doff"], it["size"]
    if size < 30 or d + 30 > len(blk):
        return False
    name_len = le(blk, d + 27, 2)
    data_len = le(blk, d + 25, 2)
    what = rng.randrange(7)
    if what <= 2 and 0 < name_len and d + 30 + name_len <= len(blk):
        old = bytes(blk[d + 30:d + 30 + name_len])
        new = craft_name(rng, old)
        blk[d + 30:d + 30 + name_len] = new
        if it["type"] == 84 and rng.random() < 0.8:   # DIR_ITEM: the key is the name's hash
            put(blk, it["at"] + 9, 8, name_hash(new))
        inp.notes.append("dir item name %r -> %r" % (old, new))
    elif what == 3:
        v = rng.choice([0, 1, 255, 256, 4095, 65535, name_len + 1, name_len - 1, size])
        put(blk, d + 27, 2, v)
        inp.notes.append("dir item name_len %d -> %d (item size %d)" % (name_len, v, size))
    elif what == 4:
        v = rng.choice([0, 1, 65535, size, data_len + 8])
        put(blk, d + 25, 2, v)
        inp.notes.append("dir item data_len %d -> %d" % (data_len, v))
    elif what == 5:
        obj = le(blk, d, 8)
        v = rng.choice([0, 1, 5, 6, 256, 257, obj + 1, (1 << 64) - 1, (1 << 64) - 256])
        put(blk, d, 8, v)
        inp.notes.append("dir item location %d -> %d" % (obj, v))
    else:
        t = blk[d + 29]
        v = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 255])
        blk[d + 29] = v
        inp.notes.append("dir item type %d -> %d" % (t, v))
    return True


def mutate_item(rng, blk, it, inp):
    """One field of the item @it, by its type. True when something changed."""
    d, size, t = it["doff"], it["size"], it["type"]
    if d + size > len(blk):
        return False
    if t == 1 and size >= 160:                       # INODE_ITEM
        f = rng.choice([("size", 16, 8), ("nbytes", 24, 8), ("nlink", 40, 4),
                        ("mode", 52, 4), ("flags", 64, 8), ("size", 16, 8)])
        old = le(blk, d + f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old)
        if f[0] in ("size", "nbytes") and rng.random() < 0.5:
            # sizes that drive work: what reading, hashing or writing the
            # file would loop over (a forged size over an inline extent)
            v = rng.choice([1 << 40, 1 << 50, 1 << 62, (1 << 63) - 1, 1 << 63, (1 << 64) - 1])
        if f[0] == "mode":
            v = (old & 0o7777) | rng.choice([0, 0o010000, 0o020000, 0o040000, 0o060000,
                                             0o100000, 0o120000, 0o140000, 0o170000])
        put(blk, d + f[1], f[2], v)
        inp.notes.append("inode %d %s %d -> %d" % (it["obj"], f[0], old, v))
    elif t in (84, 96):                              # DIR_ITEM, DIR_INDEX
        return mutate_dir_item(rng, blk, it, inp)
    elif t == 12 and size >= 10:                     # INODE_REF
        nl = le(blk, d + 8, 2)
        if rng.random() < 0.6 and nl and d + 10 + nl <= d + size:
            old = bytes(blk[d + 10:d + 10 + nl])
            new = craft_name(rng, old)
            blk[d + 10:d + 10 + nl] = new
            inp.notes.append("inode ref name %r -> %r" % (old, new))
        else:
            v = rng.choice([0, 1, 255, 65535, nl + 1, size])
            put(blk, d + 8, 2, v)
            inp.notes.append("inode ref name_len %d -> %d" % (nl, v))
    elif t == 108 and size >= 21:                    # EXTENT_DATA
        fields = [("ram_bytes", 8, 8), ("compression", 16, 1), ("type", 20, 1)]
        if blk[d + 20] != 0 and size >= 53:
            fields += [("disk_bytenr", 21, 8), ("disk_num_bytes", 29, 8), ("offset", 37, 8),
                       ("num_bytes", 45, 8)] * 2
        f = rng.choice(fields)
        old = le(blk, d + f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else rng.choice([0, 1, 2, 3, 4, 5, 7, 255])
        put(blk, d + f[1], f[2], v)
        inp.notes.append("extent %d@%d %s %d -> %d" % (it["obj"], it["koff"], f[0], old, v))
    elif t == 132 and size >= 239:                   # ROOT_ITEM
        f = rng.choice([("bytenr", 176, 8), ("generation", 160, 8), ("level", 238, 1),
                        ("root_dirid", 168, 8), ("refs", 216, 4), ("drop_level", 237, 1)])
        old = le(blk, d + f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) if f[2] == 4 else \
            rng.choice([0, 1, 7, 8, 255])
        put(blk, d + f[1], f[2], v)
        inp.notes.append("root item %d %s %d -> %d" % (it["obj"], f[0], old, v))
    elif t == 228 and size >= 80:                    # CHUNK_ITEM
        f = rng.choice([("length", 0, 8), ("stripe_len", 16, 8), ("type", 24, 8),
                        ("sector_size", 40, 4), ("num_stripes", 44, 2), ("sub_stripes", 46, 2),
                        ("stripe0.devid", 48, 8), ("stripe0.offset", 56, 8)])
        old = le(blk, d + f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old)
        put(blk, d + f[1], f[2], v)
        inp.notes.append("chunk %d %s %d -> %d" % (it["koff"], f[0], old, v))
    elif size > 0:                                   # anything else: flip bytes of its data
        for _ in range(rng.randint(1, 4)):
            o = d + rng.randrange(size)
            blk[o] ^= 1 << rng.randrange(8)
        inp.notes.append("item %d type %d: bytes flipped" % (it["obj"], t))
    else:
        return False
    return True


def mutate_key(rng, blk, it, inp):
    f = rng.choice([("objectid", 0, 8), ("type", 8, 1), ("offset", 9, 8),
                    ("data offset", 17, 4), ("data size", 21, 4)])
    old = le(blk, it["at"] + f[1], f[2])
    v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) if f[2] == 4 else rng.randrange(256)
    put(blk, it["at"] + f[1], f[2], v)
    inp.notes.append("slot %d key %s %d -> %d" % (it["slot"], f[0], old, v))


def mutate_header(rng, blk, inp):
    f = rng.choice([("bytenr", 48, 8), ("generation", 80, 8), ("owner", 88, 8),
                    ("nritems", 96, 4), ("level", 100, 1), ("flags", 56, 8)])
    old = le(blk, f[1], f[2])
    v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) if f[2] == 4 else rng.choice(
        [0, 1, 2, 7, 8, 255])
    put(blk, f[1], f[2], v)
    inp.notes.append("header %s %d -> %d" % (f[0], old, v))


def mutate_node_ptr(rng, blk, inp):
    n = min(le(blk, 96, 4), (len(blk) - HDR) // 33)
    if not n:
        return mutate_header(rng, blk, inp)
    p = HDR + rng.randrange(n) * 33
    f = rng.choice([("blockptr", 17, 8), ("gen", 25, 8), ("key.objectid", 0, 8),
                    ("key.offset", 9, 8)])
    old = le(blk, p + f[1], f[2])
    if f[0] == "blockptr" and rng.random() < 0.5:
        v = le(blk, 48, 8)   # itself: a cycle
    else:
        v = iv64(rng, old)
    put(blk, p + f[1], f[2], v)
    inp.notes.append("node ptr %s %d -> %d" % (f[0], old, v))


def write_block(inp, off, blk, do_resum=True):
    if do_resum:
        resum(blk)
    inp.patch(inp.base.files[0], off, blk)


def mut_btrfs_item(inp, rng, stale=False, types=None):
    if not prepare_btrfs(inp):
        return False
    for _ in range(20):
        off, blk = pick_block(inp, rng, leaf=True, stale=stale)
        if off is None:
            return False
        its = [it for it in items(blk) if types is None or it["type"] in types]
        if not its:
            continue
        it = rng.choice(its)
        if rng.random() < 0.1:
            mutate_key(rng, blk, it, inp)
        elif not mutate_item(rng, blk, it, inp):
            continue
        inp.notes.insert(0, "leaf at byte %d (gen %d)" % (off, le(blk, 80, 8)))
        write_block(inp, off, blk)
        return True
    return False


def mut_btrfs_node(inp, rng):
    if not prepare_btrfs(inp):
        return False
    leaf = rng.random() < 0.3
    off, blk = pick_block(inp, rng, leaf=leaf)
    if off is None:
        off, blk = pick_block(inp, rng)
        if off is None:
            return False
    if blk[100] and rng.random() < 0.6:
        mutate_node_ptr(rng, blk, inp)
    else:
        mutate_header(rng, blk, inp)
    inp.notes.insert(0, "block at byte %d level %d" % (off, blk[100]))
    write_block(inp, off, blk)
    return True


def mut_btrfs_flip(inp, rng):
    if not prepare_btrfs(inp):
        return False
    name = inp.base.files[0]
    if rng.random() < 0.75:
        off, blk = pick_block(inp, rng, stale=rng.random() < 0.5)
        if off is None:
            return False
        n = rng.randint(1, 16)
        for _ in range(n):
            o = rng.randrange(32, len(blk))
            blk[o] = rng.randrange(256) if rng.random() < 0.3 else blk[o] ^ (1 << rng.randrange(8))
        inp.notes.append("block at byte %d: %d bytes flipped, checksum recomputed" % (off, n))
        write_block(inp, off, blk)
        return True
    ranges = data_ranges(inp.path(name))
    for _ in range(rng.randint(1, 32)):
        o, n = rng.choice(ranges)
        at = o + rng.randrange(n)
        inp.patch(name, at, bytes([rng.randrange(256)]))
    inp.notes.append("random bytes replaced, no checksum recomputed")
    return True


SUPER_FIELDS = [("bytenr", 0x30, 8), ("generation", 0x48, 8), ("root", 0x50, 8),
                ("chunk_root", 0x58, 8), ("log_root", 0x60, 8), ("total_bytes", 0x70, 8),
                ("bytes_used", 0x78, 8), ("root_dir", 0x80, 8), ("num_devices", 0x88, 8),
                ("sectorsize", 0x90, 4), ("nodesize", 0x94, 4), ("stripesize", 0x9c, 4),
                ("sys_chunk_array_size", 0xa0, 4), ("chunk_root_generation", 0xa4, 8),
                ("incompat_flags", 0xbc, 8), ("root_level", 0xc6, 1), ("chunk_root_level", 0xc7, 1),
                ("log_root_level", 0xc8, 1), ("dev_item.devid", 0xc9, 8),
                ("dev_item.total_bytes", 0xd1, 8)]


def mut_btrfs_super(inp, rng):
    name = inp.base.files[0]
    sb = bytearray(inp.read(name, SB_OFF, 4096))
    if sb[0x40:0x48] != b"_BHRfS_M" or le(sb, 0xc4, 2) != 0:
        return False
    if rng.random() < 0.25:        # in the system chunk array
        n = le(sb, 0xa0, 4)
        if 0 < n <= 2048:
            o = 0x32b + rng.randrange(n)
            sb[o] = rng.randrange(256)
            inp.notes.append("sys_chunk_array byte %d replaced" % (o - 0x32b))
    else:
        f = rng.choice(SUPER_FIELDS)
        old = le(sb, f[1], f[2])
        v = iv64(rng, old) if f[2] == 8 else iv32(rng, old) if f[2] == 4 else rng.choice(
            [0, 1, 7, 8, 255])
        put(sb, f[1], f[2], v)
        inp.notes.append("superblock %s %d -> %d" % (f[0], old, v))
    sb[0:32] = bytes(32)
    sb[0:4] = genlib.crc32c(bytes(sb[32:])).to_bytes(4, "little")
    inp.patch(name, SB_OFF, sb)
    return True


def mut_names(inp, rng):
    if not prepare_btrfs(inp):
        return False
    if inp.base.name == "special" and rng.random() < 0.15:
        return mut_symlink_escape(inp, rng)
    if rng.random() < 0.3:
        return mut_dir_disagree(inp, rng)
    return mut_btrfs_item(inp, rng, types=(84, 96, 12))


def mut_dir_disagree(inp, rng):
    """DIR_ITEM and DIR_INDEX of one entry made to disagree: another
    location, type or name (same length) in one of them only."""
    for _ in range(20):
        off, blk = pick_block(inp, rng, leaf=True)
        if off is None:
            return False
        its = [it for it in items(blk) if it["type"] == 96 and it["size"] >= 31]
        if not its:
            continue
        it = rng.choice(its)
        d = it["doff"]
        what = rng.randrange(3)
        if what == 0:
            v = le(blk, d, 8) + rng.choice([1, 2, -1, 1000])
            put(blk, d, 8, v)
            inp.notes.append("DIR_INDEX %d of dir %d: location -> %d, DIR_ITEM unchanged"
                             % (it["koff"], it["obj"], v))
        elif what == 1:
            blk[d + 29] = rng.choice([1, 2, 7])
            inp.notes.append("DIR_INDEX %d of dir %d: type -> %d, DIR_ITEM unchanged"
                             % (it["koff"], it["obj"], blk[d + 29]))
        else:
            nl = le(blk, d + 27, 2)
            if not nl or d + 30 + nl > len(blk):
                continue
            o = d + 30 + rng.randrange(nl)
            blk[o] = ord("A") if blk[o] != ord("A") else ord("B")
            inp.notes.append("DIR_INDEX %d of dir %d: name -> %r, DIR_ITEM unchanged"
                             % (it["koff"], it["obj"], bytes(blk[d + 30:d + 30 + nl])))
        inp.notes.insert(0, "leaf at byte %d" % off)
        write_block(inp, off, blk)
        return True
    return False


# 13 bytes, to fit an inline symlink; one name a process, drawn once from
# the system's randomness: two campaigns at once (CI runs the short one
# while a long one may run by hand) must not watch each other's victim.
_VICTIM_RNG = random.Random(os.urandom(16))
SHORT_VICTIM = "/tmp/hv" + "".join(_VICTIM_RNG.choice("abcdefghjkmnpqrstuvwxyz")
                                   for _ in range(6))


def mut_symlink_escape(inp, rng):
    """special.img's symlinks/: "rel" (13 bytes, inline) retargeted at an
    absolute victim outside the sandbox, and the entry "abs" renamed "rel"
    and pointed at the regular file meta/m0000 (in its DIR_INDEX): an
    extract that follows the symlink it just made writes the file's bytes
    into the victim."""
    if inp.base.name != "special" or not prepare_btrfs(inp):
        return False
    ns = inp.base.super["nodesize"]
    done = set()
    for off in sorted(inp.base.live):
        blk = bytearray(inp.read(inp.base.files[0], off, ns))
        if blk[100] != 0:
            continue
        touched = False
        for it in items(blk):
            d = it["doff"]
            if it["obj"] == 268 and it["type"] == 108 and blk[d + 20] == 0 and it["size"] == 34:
                blk[d + 21:d + 34] = SHORT_VICTIM.encode()
                touched = True
                done.add("target")
            elif it["obj"] == 266 and it["type"] == 96 and it["size"] == 33 and \
                    blk[d + 30:d + 33] == b"abs":
                # DIR_INDEX only: a DIR_ITEM keyed by the new name's hash
                # would break the leaf's key order (and be refused whole)
                blk[d + 30:d + 33] = b"rel"
                put(blk, d, 8, 277)
                blk[d + 29] = 1
                touched = True
                done.add(it["type"])
        if touched:
            write_block(inp, off, blk)
    inp.notes.append("symlinks/rel -> %s, and symlinks/abs renamed rel, a regular file (%s)"
                     % (SHORT_VICTIM, ",".join(map(str, sorted(done, key=str)))))
    return "target" in done


def mut_stale(inp, rng):
    if not prepare_btrfs(inp):
        return False
    r = rng.random()
    if r < 0.6:
        return mut_btrfs_item(inp, rng, stale=True,
                              types=(1, 108, 84, 96, 12) if rng.random() < 0.7 else None)
    if r < 0.8:
        return mut_btrfs_flip(inp, rng)
    return mut_btrfs_node(inp, rng)
