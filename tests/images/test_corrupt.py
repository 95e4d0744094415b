#!/usr/bin/env python3
"""Corruption tests: damage committed images on purpose and check what the CLI does.

    test_corrupt.py BTRFSIMG TESTDATA

Every case says which bytes change and what must happen: the same answer as
the undamaged image from another copy (exit 1, damage reported), or a clear
error naming the block and the check (exit 2) -- never a signal, a hang or
a silent wrong answer. Block locations come from btrfs-progs (dump-super and
btrfs-map-logical, dump-tree), not from btrfsimg; checksums of changed
blocks and data are recomputed (crc32c images only) where a case wants the
structure checks, not the checksum, to catch the damage.

Covered: superblock (zeroed, fields, incompat bits, flips), chunk tree,
root tree, fs tree nodes and leaves, dir entries and loops, inode items,
file extents, csum tree and data checksums, zlib/lzo/zstd streams,
truncation, zeroed ranges, device sets (order, duplicates, strangers).
CORRUPT_ONLY=group[,group] runs some groups (see main; log: the log tree), CORRUPT_TRIALS sets
the random trial count. Prints 'N passed, M failed'.
"""
import itertools, os, random, re, resource, shutil, struct, subprocess, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402
from imgtest import crc32c  # noqa: E402  (as btrfs stores it; testdata/genlib.py)

CLI, TESTDATA = sys.argv[1], sys.argv[2]
TIMEOUT = 120
tally = imgtest.Tally()
check = tally.check


def run(args, img):
    return imgtest.run_cli(CLI, args + [img], timeout=TIMEOUT)


def dump_super(img):
    out = subprocess.run(["btrfs", "inspect-internal", "dump-super", img],
                         capture_output=True, text=True).stdout
    vals = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            vals.setdefault(parts[0], parts[1])
    return vals


def mirrors(img, logical, nbytes=None):
    """Physical offsets of every copy of a logical address (btrfs-map-logical;
    without @nbytes it maps the extent there, which may list more pieces)."""
    b = ["-b", str(nbytes)] if nbytes else []
    out = subprocess.run(["btrfs-map-logical", "-l", str(logical)] + b + [img],
                         capture_output=True, text=True).stdout
    phys = []
    for line in out.splitlines():
        if "physical" in line:
            phys.append(int(line.split("physical")[1].split()[0]))
    return phys


def patch(img, off, data):
    with open(img, "r+b") as f:
        f.seek(off)
        f.write(data)


def read(img, off, n):
    with open(img, "rb") as f:
        f.seek(off)
        return f.read(n)


def resum_block(img, off, nodesize):
    blk = bytearray(read(img, off, nodesize))
    blk[0:4] = struct.pack("<I", crc32c(bytes(blk[32:])))
    patch(img, off, bytes(blk))


def no_signal(name, rc, err):
    if rc is None:
        check(name, False, "hang: no answer within %d s" % TIMEOUT)
        return False
    if rc not in (0, 1, 2):
        check(name, False, f"exit {rc} (signal?) stderr {err[-300:]!r}")
        return False
    if b"Sanitizer" in err or b"runtime error:" in err:
        # a sanitizer report, whatever exit status its options chose
        check(name, False, f"sanitizer report: {err[-600:]!r}")
        return False
    if rc == 2 and not err.strip():
        check(name, False, "exit 2 without a message")
        return False
    return True


def fresh(base, work, name):
    """A private copy of @base (sparse: the images are mostly holes)."""
    p = os.path.join(work, name)
    if os.path.exists(p):
        os.unlink(p)    # truncating a file with dirty pages waits for them
    subprocess.run(["cp", "--sparse=always", base, p], check=True)
    return p


def root_copies(img):
    s = dump_super(img)
    return int(s["root"]), int(s["nodesize"]), mirrors(img, int(s["root"]))


def case_mirror_fallback(base, work):
    """Root tree block, copy 1 damaged (8 bytes at offset 200 of the block
    flipped): the other DUP copy must give the same subvolumes, exit 1."""
    good = run(["subvols", "--json"], base)
    img = fresh(base, work, "fallback.img")
    root, ns, phys = root_copies(img)
    check("dup image has two copies of the root block", len(phys) == 2, str(phys))
    if len(phys) != 2:
        return
    patch(img, phys[0] + 200, bytes(b ^ 0xff for b in read(img, phys[0] + 200, 8)))
    rc, out, err = run(["subvols", "--json"], img)
    if no_signal("fallback: no crash", rc, err):
        check("fallback: same subvolumes from the other copy", out == good[1],
              f"{out[:200]!r} vs {good[1][:200]!r}")
        check("fallback: exit 1 and damage named", rc == 1 and b"copy" in err, f"rc {rc} {err!r}")


def case_both_copies(base, work, what, mutate, expect):
    """Root tree leaf, both copies: @mutate changes the block and the
    checksum is recomputed, so only the structural checker can catch it.
    The open then falls back (salvage: the backup roots, each tree's
    newest root found by scanning): the same subvolumes, exit 1, the
    block and the check named and the fallback announced."""
    img = fresh(base, work, "both.img")
    root, ns, phys = root_copies(img)
    for p in phys:
        blk = bytearray(read(img, p, ns))
        mutate(blk)
        patch(img, p, bytes(blk))
        resum_block(img, p, ns)
    good = run(["subvols"], base)
    rc, out, err = run(["subvols"], img)
    if no_signal(f"{what}: no crash", rc, err):
        check(f"{what}: exit 1 naming the block and check, the root tree salvaged",
              rc == 1 and str(root).encode() in err and expect.encode() in err
              and b"root tree unreadable (" in err and out == good[1],
              f"rc {rc} stderr {err!r}")


def set_u32(blk, off, v):
    blk[off:off + 4] = struct.pack("<I", v)


def case_superblock(base, work):
    """Primary superblock (64 KiB) zeroed: the 64 MiB mirror is used; then
    every copy zeroed: the superblock rebuilt from the tree blocks."""
    good = run(["subvols", "--json"], base)
    img = fresh(base, work, "sb.img")
    patch(img, 65536, bytes(4096))
    rc, out, err = run(["subvols", "--json"], img)
    if no_signal("primary superblock zeroed: no crash", rc, err):
        check("primary superblock zeroed: mirror gives the same answer, exit 1",
              rc == 1 and out == good[1], f"rc {rc} {err!r}")
    patch(img, 64 << 20, bytes(4096))
    rc, out, err = run(["subvols", "--json"], img)
    if no_signal("all superblocks zeroed: no crash", rc, err):
        check("all superblocks zeroed: rebuilt from the tree blocks (salvage), the same "
              "answer, exit 1", rc == 1 and b"no superblock (" in err and out == good[1],
              f"rc {rc} {err!r}")


def case_feature(base, work, bit, expect):
    """incompat_flags (superblock 0xbc) gains bit @bit in every copy, checksums
    recomputed: the open must be refused with the feature named."""
    img = fresh(base, work, "feat.img")
    for off in (65536, 64 << 20):
        sb = bytearray(read(img, off, 4096))
        flags = struct.unpack_from("<Q", sb, 0xbc)[0] | (1 << bit)
        struct.pack_into("<Q", sb, 0xbc, flags)
        sb[0:4] = struct.pack("<I", crc32c(bytes(sb[32:])))
        patch(img, off, bytes(sb))
    rc, out, err = run(["super"], img)
    if no_signal(f"incompat bit {bit}: no crash", rc, err):
        check(f"incompat bit {bit}: refused naming {expect}", rc == 2 and expect.encode() in err,
              f"rc {rc} {err!r}")


def case_truncated(base, work):
    """The image cut to 40 MiB (chunks beyond it unreadable): every command
    ends with exit 0, 1 or 2 (2 with a message), no signal."""
    img = fresh(base, work, "trunc.img")
    with open(img, "r+b") as f:
        f.truncate(40 << 20)
    for cmd in (["super"], ["subvols"], ["walk", "--hash", "--json"], ["inodes"], ["collisions"]):
        rc, out, err = run(cmd, img)
        no_signal(f"truncated: {cmd[0]}", rc, err) and check(f"truncated: {cmd[0]} handled", True)


def case_random(base, work, seed, trials):
    """Random byte flips in non-zero 4 KiB blocks, every command run."""
    rng = random.Random(seed)
    with open(base, "rb") as f:
        data = f.read()
    blocks = [o for o in range(0, len(data), 4096) if any(data[o:o + 4096])]
    for t in range(trials):
        img = fresh(base, work, "rand.img")
        for _ in range(rng.randint(1, 6)):
            o = rng.choice(blocks) + rng.randrange(4096)
            patch(img, o, bytes([rng.randrange(256)]))
        for cmd in (["subvols"], ["walk", "--hash", "--json"], ["inodes", "--json"],
                    ["collisions", "--json"]):
            rc, out, err = run(cmd, img)
            if not no_signal(f"random {seed}/{t}: {cmd[0]}", rc, err):
                break
        else:
            check(f"random {seed}/{t}: every command ended cleanly", True)


# ------------------------------------------------------------------ helpers
# Tree blocks and items as btrfs-progs (dump-tree) lists them.

BLOCK_RE = re.compile(r"^(leaf|node) (\d+) (?:level (\d+) )?items (\d+) .*generation (\d+) owner")
ITEM_RE = re.compile(r"^\s+item (\d+) key \((\S+) (\S+) (\S+)\) itemoff (\d+) itemsize (\d+)")
PTR_RE = re.compile(r"^\s+key \((\S+) (\S+) (\S+)\) block (\d+) gen (\d+)")
HDR, ITEM, KP = 101, 25, 33          # header, leaf item, node key pointer sizes


def num(s):
    return int(s) if s.lstrip("-").isdigit() else s


def dump_tree(img, tree):
    """Every block of tree @tree: {bytenr, level, gen, items: [{slot, key,
    off, size, text}], ptrs: [{key, block, gen}]} (dump-tree -t)."""
    out = subprocess.run(["btrfs", "inspect-internal", "dump-tree", "-t", str(tree), img],
                         capture_output=True).stdout.decode("utf-8", "replace")
    blocks, cur, item = [], None, None
    for line in out.splitlines():
        m = BLOCK_RE.match(line)
        if m:
            cur = {"bytenr": int(m[2]), "level": int(m[3] or 0), "gen": int(m[5]),
                   "items": [], "ptrs": []}
            blocks.append(cur)
            item = None
            continue
        m = ITEM_RE.match(line)
        if m and cur:
            item = {"slot": int(m[1]), "key": (num(m[2]), m[3], num(m[4])),
                    "off": int(m[5]), "size": int(m[6]), "text": ""}
            cur["items"].append(item)
            continue
        m = PTR_RE.match(line)
        if m and cur:
            cur["ptrs"].append({"key": (num(m[1]), m[2], num(m[3])), "block": int(m[4]),
                                "gen": int(m[5])})
            continue
        if item is not None:
            item["text"] += line + "\n"
    return blocks


def find_item(blocks, obj, typ, off=None):
    """(block, item) of the first item with that key (offset any if None)."""
    for b in blocks:
        for it in b["items"]:
            k = it["key"]
            if k[0] == obj and k[1] == typ and (off is None or k[2] == off):
                return b, it
    raise LookupError(f"no item ({obj} {typ} {off})")


def edit_block(img, logical, ns, mutate, resum=True, phys=None):
    """Apply @mutate(bytearray) to every copy (@phys, else btrfs-map-logical)
    of the tree block at @logical and recompute its crc32c, so only
    structure checks see it."""
    phys = phys or mirrors(img, logical)
    assert phys, f"no mapping for {logical}"
    for p in phys:
        blk = bytearray(read(img, p, ns))
        mutate(blk)
        patch(img, p, bytes(blk))
        if resum:
            resum_block(img, p, ns)
    return phys


def set_u16(blk, off, v):
    blk[off:off + 2] = struct.pack("<H", v)


def set_u64(blk, off, v):
    blk[off:off + 8] = struct.pack("<Q", v)


def item_data(it):
    """Offset of an item's data inside its leaf."""
    return HDR + it["off"]


def csum_slots(img, logical, n, sectorsize=4096):
    """[(csum leaf, byte offset in it)] of the crc32c of each data sector of
    [logical, logical + n): EXTENT_CSUM items of the csum tree hold one per
    sector, from the key offset on."""
    items = [(b["bytenr"], it) for b in dump_tree(img, 7) for it in b["items"]
             if it["key"][1] == "EXTENT_CSUM"]
    res = []
    for x in range(logical, logical + n, sectorsize):
        res.append(next((leaf, item_data(it) + (x - it["key"][2]) // sectorsize * 4)
                        for leaf, it in items
                        if it["key"][2] <= x < it["key"][2] + it["size"] // 4 * sectorsize))
    return res


def csum_slot(img, logical):
    return csum_slots(img, logical, 1)[0]


def write_data(img, logical, data, ns, sectorsize=4096):
    """Write @data at @logical in every copy and recompute the data
    checksums of its sectors. The range must lie in one chunk stripe
    (checked: its last byte maps to the same offsets)."""
    phys = mirrors(img, logical, sectorsize)
    last = len(data) - sectorsize
    end = mirrors(img, logical + last, sectorsize)
    assert [p + last for p in phys] == end, (phys, end)
    for p in phys:
        patch(img, p, data)
    by_leaf = {}
    for i, (leaf, off) in enumerate(csum_slots(img, logical, len(data), sectorsize)):
        sector = data[i * sectorsize:(i + 1) * sectorsize]
        by_leaf.setdefault(leaf, []).append((off, struct.pack("<I", crc32c(sector))))

    def mutate(blk, sums):
        for off, s in sums:
            blk[off:off + 4] = s
    for leaf, sums in by_leaf.items():
        edit_block(img, leaf, ns, lambda b, sums=sums: mutate(b, sums))


def read_data(img, logical, n):
    return read(img, mirrors(img, logical, 4096)[0], n)


def is_asan():
    with open(CLI, "rb") as f:
        return b"__asan_init" in f.read()


MEM_LIMIT = None   # bytes of address space a CLI run may use (set in main)


def run_limited(args, img, stdout=subprocess.PIPE):
    """run() with the address space bounded (not under ASan, whose shadow
    memory needs terabytes of it): an allocation sized by a corrupt field
    fails instead of going unnoticed."""
    def limit():
        if MEM_LIMIT:
            resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))
    imgs = img if isinstance(img, list) else [img]
    return imgtest.run_cli(CLI, args + imgs, timeout=TIMEOUT, stdout=stdout, preexec_fn=limit)


def expect_error(name, rc, err, words, codes=(1, 2)):
    """No signal, exit status in @codes, and every word of @words in stderr."""
    if no_signal(name, rc, err):
        ok = rc in codes and all(w.encode() in err for w in words)
        check(f"{name}: exit {'/'.join(map(str, codes))} naming {', '.join(words)}", ok,
              f"rc {rc} stderr {err[-400:]!r}")


def expect_same(name, good, got, rc_want=1, words=()):
    """Same stdout as the undamaged image, the given exit status, and the
    damage reported (words in stderr)."""
    rc, out, err = got
    if no_signal(name, rc, err):
        ok = rc == rc_want and out == good[1] and all(w.encode() in err for w in words)
        check(f"{name}: same answer as undamaged, exit {rc_want}", ok,
              f"rc {rc} same={out == good[1]} stderr {err[-400:]!r}")


def super_copies(img):
    size = os.path.getsize(img)
    return [o for o in (65536, 64 << 20, 256 << 30) if o + 4096 <= size]


def edit_super(img, mutate):
    """Apply @mutate(bytearray) to every superblock copy and recompute its
    crc32c (over bytes 32..4095)."""
    for off in super_copies(img):
        sb = bytearray(read(img, off, 4096))
        mutate(sb)
        sb[0:4] = struct.pack("<I", crc32c(bytes(sb[32:])))
        patch(img, off, bytes(sb))


def case_super_fields(base, work):
    """Superblock fields, every copy, checksum recomputed (so the copies
    look valid until their fields are checked). A copy with a bad field
    is no copy: with none left the open rebuilds one from the tree blocks
    (salvage), exit 1 naming the field and the fallback; a sys_chunk_array
    whose items are bad fails the open, exit 2 naming it.
    - sectorsize (0x90) = 3;  nodesize (0x94) = 12345;
    - root_level (0xc6) = 200;  sys_chunk_array_size (0xa0) = 0xffff;
    - num_stripes of the first sys_chunk_array chunk (0x32b + 17 + 44)
      = 0xffff (the array's items are parsed, not just its size);
    - the first sys_chunk_array key type (0x32b + 8) = 0x55 (not a
      CHUNK_ITEM)."""
    arr = 0x32b
    for what, mutate, word in (
            ("sectorsize 3", lambda b: set_u32(b, 0x90, 3), "sectorsize"),
            ("nodesize 12345", lambda b: set_u32(b, 0x94, 12345), "nodesize"),
            ("root_level 200", lambda b: b.__setitem__(0xc6, 200), "root level"),
            ("sys_chunk_array_size 0xffff", lambda b: set_u32(b, 0xa0, 0xffff),
             "sys_chunk_array_size"),
            ("sys chunk num_stripes 0xffff", lambda b: set_u16(b, arr + 17 + 44, 0xffff),
             "sys_chunk_array"),
            ("sys chunk key type 0x55", lambda b: b.__setitem__(arr + 8, 0x55),
             "sys_chunk_array")):
        img = fresh(base, work, "sbf.img")
        edit_super(img, mutate)
        bad_copy = word != "sys_chunk_array"
        for cmd in (["super"], ["subvols"]):
            rc, out, err = run(cmd, img)
            expect_error(f"superblock {what}: {cmd[0]}", rc, err,
                         (word, "no superblock (") if bad_copy else (word,),
                         codes=(1,) if bad_copy else (2,))


def case_super_flips(base, work, seed, trials):
    """Random bytes of the superblock's fields and sys_chunk_array
    (0x20..0x32b+size) changed in every copy, checksums recomputed: every
    command must end cleanly (the fields are checked before use)."""
    rng = random.Random(seed)
    for t in range(trials):
        img = fresh(base, work, "sbflip.img")
        offs = [rng.randrange(0x20, 0x32b + 0x81) for _ in range(rng.randint(1, 4))]
        vals = [rng.choice((0, 0xff, 1, rng.randrange(256))) for _ in offs]
        edit_super(img, lambda b: [b.__setitem__(o, v) for o, v in zip(offs, vals)])
        for cmd in (["super"], ["subvols"], ["walk", "--hash", "--json"], ["inodes"]):
            rc, out, err = run_limited(cmd, img)
            if not no_signal(f"superblock flips {seed}/{t} {offs}: {cmd[0]}", rc, err):
                break
        else:
            check(f"superblock flips {seed}/{t}: every command ended cleanly", True)


# ------------------------------------------------------------ chunk tree

def case_chunk_tree(base, work):
    """Chunk tree leaf (dump-super chunk_root), DUP: (a) copy 1 only, 8
    bytes at block offset 300 inverted (checksum now wrong): the other copy
    gives the same subvolumes and walk, exit 1, damage named; (b) both
    copies, nritems (header byte 96) set to 100000 and the checksum
    recomputed: the chunk map rebuilt from the other chunk-tree leaves and
    the device extents (salvage), exit 1 naming the chunk tree block, 'bad
    nritems' and the fallback."""
    s = dump_super(base)
    chunk, ns = int(s["chunk_root"]), int(s["nodesize"])
    good = run(["walk", "--hash", "--json"], base)
    img = fresh(base, work, "chunk.img")
    phys = mirrors(img, chunk)
    check("chunk tree block has two copies", len(phys) == 2, str(phys))
    patch(img, phys[0] + 300, bytes(b ^ 0xff for b in read(img, phys[0] + 300, 8)))
    expect_same("chunk leaf copy 1 damaged", good, run(["walk", "--hash", "--json"], img),
                words=(str(chunk), "copy"))
    img = fresh(base, work, "chunk.img")
    edit_block(img, chunk, ns, lambda b: set_u32(b, 96, 100000))
    for cmd in (["super"], ["subvols"], ["walk"]):
        rc, out, err = run(cmd, img)
        expect_error(f"chunk leaf both copies: {cmd[0]}", rc, err,
                     ("root=3", str(chunk), "bad nritems", "chunk tree unreadable ("),
                     codes=(1,))


# ------------------------------------------------------ fs tree nodes

def fs_nodes(img):
    """The fs tree's root node and one level-1 child (names.img: 4 KiB
    nodes, a level-2 fs tree)."""
    blocks = dump_tree(img, 5)
    root = blocks[0]
    assert root["level"] == 2, root
    child = next(b for b in blocks if b["bytenr"] == root["ptrs"][1]["block"])
    return root, child


def case_fs_nodes(base, work):
    """fs tree internal nodes of names.img (level-2 root R, its second
    child C at level 1), every copy changed, checksums recomputed:
    - C slot 0 block pointer (C+101+17) -> C itself: self-reference;
    - C slot 0 block pointer -> R: a cycle through an ancestor;
    - R slot 0 block pointer -> R;
    - R slot 1 generation (R+101+33+25) + 1: generation mismatch;
    - R slot 1 key objectid (R+101+33) + 1: first key mismatch;
    - C header level (byte 100) 1 -> 2: level mismatch with R's pointer.
    Each must end (no hang, no signal) with exit 1 or 2 and a message
    naming the pointed-to block and the check that failed."""
    ns = int(dump_super(base)["nodesize"])
    root, child = fs_nodes(base)
    R, C = root["bytenr"], child["bytenr"]
    p0 = HDR + 17
    cases = [
        ("node points to itself", C, lambda b: set_u64(b, p0, C), (str(C), "bad level, have 1 expect 0")),
        ("node points to its parent", C, lambda b: set_u64(b, p0, R), (str(R), "bad level, have 2 expect 0")),
        ("root node points to itself", R, lambda b: set_u64(b, p0, R), (str(R), "bad level, have 2 expect 1")),
        ("child generation mismatch", R,
         lambda b: set_u64(b, HDR + KP + 25, root["ptrs"][1]["gen"] + 1), (str(C), "bad generation")),
        ("child first key mismatch", R,
         lambda b: set_u64(b, HDR + KP + 9, root["ptrs"][1]["key"][2] + 1), (str(C), "bad first key")),
        ("child level mismatch", C, lambda b: b.__setitem__(100, 2), (str(C), "bad level, have 2 expect 1")),
    ]
    good = run(["inodes"], base)
    for what, blk, mutate, words in cases:
        img = fresh(base, work, "node.img")
        edit_block(img, blk, ns, mutate)
        for cmd in (["walk", "--hash", "--json"], ["inodes"], ["collisions"]):
            rc, out, err = run(cmd, img)
            if cmd == ["inodes"] and rc == 0:
                # inodes skips leaves whose key range (from the parent)
                # holds no inode items: not reading the block is fine if
                # the answer is the undamaged one.
                check(f"fs node, {what}: inodes did not need it, same answer",
                      out == good[1], err[-300:])
                continue
            expect_error(f"fs node, {what}: {cmd[0]}", rc, err, words)


# ------------------------------------------------------ fs tree leaves

def case_fs_leaf(base, work):
    """Leaf of subvolume 257 in sample.img (home/alice: one leaf), every
    copy changed, checksum recomputed. The other subvolumes stay readable,
    so walk must exit 1, list them, and name the leaf and the check:
    - slot 1's data offset (leaf+101+25+17) moved 4 bytes into slot 0's:
      overlapping items;
    - slot 1's data size (leaf+101+25+21) 0x7fffff00: item past the end."""
    ns = int(dump_super(base)["nodesize"])
    leaf = dump_tree(base, 257)[0]
    L, i0, i1 = leaf["bytenr"], leaf["items"][0], leaf["items"][1]
    for what, mutate, words in (
            ("overlapping items", lambda b: set_u32(b, HDR + ITEM + 17, i1["off"] + 4),
             ("overlaps slot 0",)),
            ("absurd item size", lambda b: set_u32(b, HDR + ITEM + 21, 0x7fffff00),
             ("past end",))):
        img = fresh(base, work, "leaf.img")
        edit_block(img, L, ns, mutate)
        rc, out, err = run(["walk"], img)
        expect_error(f"fs leaf {what}: walk", rc, err, ("root=257", str(L)) + words, codes=(1,))
        check(f"fs leaf {what}: other subvolumes still listed", b"etc/motd" in out, out[:200])
        for cmd in (["inodes"], ["collisions"], ["bodyfile"]):
            rc, out, err = run(cmd, img)
            expect_error(f"fs leaf {what}: {cmd[0]}", rc, err, (str(L),))


def case_scan_order(work):
    """snaps.img (4 KiB nodes), subvolume 256: every item of the last inode
    in one leaf renamed to the first inode of the next leaf, checksums
    recomputed. Each leaf stays in order and the parent's keys still match
    their children's first keys, yet the tree holds that inode twice.
    collisions, which sums leaves without walking their items one by one,
    must refuse it, naming the tree, the leaf and the objectid; no command
    may crash or hang on it."""
    base = unpack(work, os.path.join(TESTDATA, "files", "snaps.img.zst"), "snaps.img")
    ns = int(dump_super(base)["nodesize"])
    leaves = [b for b in dump_tree(base, 256) if b["level"] == 0]

    def inodes(b):
        return [it for it in b["items"] if it["key"][1] == "INODE_ITEM"]

    a, b = next((a, b) for a, b in zip(leaves, leaves[1:]) if inodes(a) and inodes(b))
    last, first = inodes(a)[-1]["key"][0], inodes(b)[0]["key"][0]

    def mutate(blk):
        for it in a["items"]:
            if it["key"][0] == last:
                set_u64(blk, HDR + ITEM * it["slot"], first)

    img = fresh(base, work, "order.img")
    edit_block(img, a["bytenr"], ns, mutate)
    rc, out, err = run(["collisions"], img)
    expect_error("inode twice across leaves: collisions", rc, err,
                 ("tree 256", str(b["bytenr"]), f"inode {first}"), codes=(2,))
    for cmd in (["inodes"], ["walk"]):
        rc, out, err = run(cmd, img)
        no_signal(f"inode twice across leaves: {cmd[0]}", rc, err)
    os.unlink(base)


def case_inode_size(base, work):
    """INODE_ITEM size field (item data + 16) of var/log1 (subvol 258,
    5000 bytes) set to 2^63 (beyond the largest file size, 2^63-1), leaf
    checksum recomputed. walk, walk --hash, cat, inodes, bodyfile, extract
    must end within a bounded address space and time, never reading or
    allocating 2^63 bytes: a message naming the inode and its size."""
    ns = int(dump_super(base)["nodesize"])
    blocks = dump_tree(base, 258)
    log1 = next(int(re.search(r"location key \((\d+) ", it["text"])[1])
                for b in blocks for it in b["items"]
                if it["key"][1] == "DIR_INDEX" and "name: log1\n" in it["text"])
    leaf, ino = find_item(blocks, log1, "INODE_ITEM", 0)
    img = fresh(base, work, "isize.img")
    edit_block(img, leaf["bytenr"], ns, lambda b: set_u64(b, item_data(ino) + 16, 1 << 63))
    for cmd in (["walk"], ["walk", "--hash", "--json"], ["inodes"], ["bodyfile"],
                ["cat", "--path", "/var/log1"]):
        rc, out, err = run_limited(cmd, img, stdout=subprocess.PIPE)
        expect_error(f"inode size 2^63: {' '.join(cmd)}", rc, err, ("size",))
    dest = os.path.join(work, "x-isize")
    rc, out, err = run_limited(["extract"], [img, dest])
    shutil.rmtree(dest, ignore_errors=True)
    expect_error("inode size 2^63: extract", rc, err, ("size",))
    # 2^62 is a size the kernel allows, over no extents: 4 EiB of holes.
    # walk --hash must give up on that file after a bounded amount of zeros
    # (16 bytes per byte of the 128 MiB image), name it, and hash the rest.
    img = fresh(base, work, "isize62.img")
    edit_block(img, leaf["bytenr"], ns, lambda b: set_u64(b, item_data(ino) + 16, 1 << 62))
    good = run(["walk", "--hash", "--json"], base)[1]
    others = [ln for ln in good.splitlines()
              if b'"sha256":"' in ln and not ln.startswith(b'{"path":"var/log1",')]
    for cmd in (["walk", "--hash", "--json"], ["walk", "--hash"]):
        rc, out, err = run_limited(cmd, img, stdout=subprocess.PIPE)
        expect_error(f"inode size 2^62: {' '.join(cmd)}", rc, err,
                     ("inode=" + str(log1), "zeros", "unhashed"), codes=(1,))
        if cmd[-1] == "--json":
            lines = set(out.splitlines())
            check("inode size 2^62: every other file still hashed",
                  len(others) > 10 and all(ln in lines for ln in others),
                  f"{sum(ln not in lines for ln in others)} of {len(others)} missing")


def case_dfxml_times(base, work):
    """dfxml on hostile inode fields: var/log1's INODE_ITEM (leaf checksum
    recomputed) with size 2^62 over its 5000 bytes, mtime 2^62 seconds (no
    calendar year XML can hold) and atime nanoseconds 2*10^9. dfxml --hash
    must stay valid DFXML (xmllint on testdata/dfxml/schema): those two
    times left out, ctime kept, the unhashed size an <error> of that
    fileobject and on stderr (exit 1), within bounded time and memory."""
    import xml.etree.ElementTree as ET
    ns = int(dump_super(base)["nodesize"])
    blocks = dump_tree(base, 258)
    log1 = next(int(re.search(r"location key \((\d+) ", it["text"])[1])
                for b in blocks for it in b["items"]
                if it["key"][1] == "DIR_INDEX" and "name: log1\n" in it["text"])
    leaf, ino = find_item(blocks, log1, "INODE_ITEM", 0)
    img = fresh(base, work, "dfxml-times.img")

    def mutate(b):
        d = item_data(ino)
        set_u64(b, d + 16, 1 << 62)              # size
        b[d + 112 + 8:d + 112 + 12] = struct.pack("<I", 2000000000)  # atime nsec
        set_u64(b, d + 136, 1 << 62)             # mtime sec
    edit_block(img, leaf["bytenr"], ns, mutate)
    out = os.path.join(work, "dfxml-times.xml")
    rc, _, err = run_limited(["dfxml", "--hash", "-f", out], img)
    expect_error("hostile inode times and size: dfxml --hash", rc, err,
                 ("inode=" + str(log1),), codes=(1,))
    if not os.path.exists(out):
        check("hostile inode times and size: dfxml wrote its document", False, err[-300:])
        return
    schema = os.path.join(TESTDATA, "dfxml", "schema", "dfxml.xsd")
    if shutil.which("xmllint"):
        p = subprocess.run(["xmllint", "--noout", "--schema", schema, out],
                           capture_output=True, timeout=TIMEOUT)
        check("hostile inode times and size: dfxml valid against the schema",
              p.returncode == 0, p.stderr[-400:])
    else:
        print("skip the schema check: xmllint not found (libxml2-utils)")
    nsd = "{http://www.forensicswiki.org/wiki/Category:Digital_Forensics_XML}"
    fo = [f for f in ET.parse(out).getroot().iter(nsd + "fileobject")
          if f.findtext(nsd + "id") == "258-%d" % log1]
    have = fo and {c.tag[len(nsd):] for c in fo[0] if c.tag.startswith(nsd)}
    check("hostile inode times and size: mtime and atime left out, ctime and <error> kept",
          have and "mtime" not in have and "atime" not in have and "ctime" in have
          and "error" in have, have)


HANG_TIMEOUT = 20   # seconds: work that follows extents, not a forged size, is done in <1 s


def case_inline_size(base, work):
    """INODE_ITEM size (item data + 16) of a file in subvolume 5 whose one
    extent is inline (a few bytes) set to 2^62, leaf checksum recomputed: a
    size the kernel allows, 4 EiB of holes after the inline bytes. extract
    and cat used to write every hole byte (years); now the holes are
    stepped over extent by extent and, the size being past 16 bytes per
    byte of the devices, the file is cut at the end of its data and the cut
    reported (exit 1, naming the inode, its size and the bound)."""
    ns = int(dump_super(base)["nodesize"])
    blocks = dump_tree(base, 5)
    inl = next(it for b in blocks for it in b["items"]
               if it["key"][1] == "EXTENT_DATA" and "inline extent" in it["text"])
    obj = inl["key"][0]
    want = run(["cat", "--inode", f"5:{obj}"], base)[1]
    leaf, ino = find_item(blocks, obj, "INODE_ITEM", 0)
    img = fresh(base, work, "isize-inline.img")
    edit_block(img, leaf["bytenr"], ns, lambda b: set_u64(b, item_data(ino) + 16, 1 << 62))
    words = (f"inode={obj}", f"size={1 << 62}", "more than", "forged")
    rc, out, err = imgtest.run_cli(CLI, ["cat", "--inode", f"5:{obj}", img],
                                   timeout=HANG_TIMEOUT)
    expect_error("inline extent, size 2^62: cat", rc, err, words, codes=(1,))
    check("inline extent, size 2^62: cat writes the inline bytes", rc is None or out == want,
          f"{len(out)} bytes, expect {len(want)}")
    dest = os.path.join(work, "x-isize-inline")
    rc, out, err = imgtest.run_cli(CLI, ["extract", "--inode", f"5:{obj}", img, dest],
                                   timeout=HANG_TIMEOUT)
    expect_error("inline extent, size 2^62: extract", rc, err, words, codes=(1,))
    got = [os.path.join(dest, n) for n in os.listdir(dest)] if os.path.isdir(dest) else []
    data = open(got[0], "rb").read() if len(got) == 1 else None
    check("inline extent, size 2^62: extract writes the inline bytes, not the holes",
          rc is None or data == want, f"files {got}, {len(data or b'')} bytes")
    shutil.rmtree(dest, ignore_errors=True)


def expect_error_or_same(name, good, got, words):
    """A command that does not read the damaged item gives the undamaged
    answer (exit 0); one that does fails naming it (exit 1 or 2)."""
    rc, out, err = got
    if rc == 0:
        check(f"{name}: item not needed, same answer as undamaged", out == good[1],
              f"stdout differs; stderr {err[-300:]!r}")
    else:
        expect_error(name, rc, err, words)


def case_dir_name_len(base, work):
    """Dir entries of the top directory (subvol 5) with name_len (item
    data + 27, u16) set to 0xffff, past the item's end; leaf checksum
    recomputed. Each command that reads the entry must name the leaf, the
    slot and the check (walk reads DIR_INDEX, path lookup DIR_ITEM, the
    subvolume scan of inodes/collisions the DIR_INDEX of a subvolume);
    one that does not read it gives the undamaged answer:
    - DIR_INDEX of 'etc' (a directory): walk must fail;
    - DIR_ITEM of 'etc': cat --path /etc/motd must fail;
    - DIR_INDEX of 'home' (a subvolume): walk and collisions must fail."""
    ns = int(dump_super(base)["nodesize"])
    blocks = dump_tree(base, 5)
    cmds = (["walk"], ["inodes"], ["collisions"], ["cat", "--path", "/etc/motd"])
    goods = {c[0]: run(c, base) for c in cmds}
    for typ, name, must in (("DIR_INDEX", "etc", ("walk",)), ("DIR_ITEM", "etc", ("cat",)),
                            ("DIR_INDEX", "home", ("walk", "collisions"))):
        b, it = next((b, it) for b in blocks for it in b["items"]
                     if it["key"][1] == typ and f"name: {name}\n" in it["text"])
        img = fresh(base, work, "dirname.img")
        edit_block(img, b["bytenr"], ns, lambda blk: set_u16(blk, item_data(it) + 27, 0xffff))
        words = (str(b["bytenr"]), f"slot={it['slot']}", "name")
        for cmd in cmds:
            got = run(cmd, img)
            tag = f"{typ} {name} name_len past the item: {cmd[0]}"
            if cmd[0] in must:
                expect_error(tag, got[0], got[2], words)
            else:
                expect_error_or_same(tag, goods[cmd[0]], got, words)


def retarget_dir(img, ns, tree, parent, name, loc):
    """Point the DIR_ITEM and DIR_INDEX of @name in @parent at location key
    @loc (objectid, type, offset): item data bytes 0..16, checksums of the
    leaves recomputed."""
    blocks = dump_tree(img, tree)
    for typ in ("DIR_ITEM", "DIR_INDEX"):
        b, it = next((b, it) for b in blocks for it in b["items"] if it["key"][0] == parent
                     and it["key"][1] == typ and f"name: {name}\n" in it["text"])
        d = item_data(it)
        edit_block(img, b["bytenr"], ns,
                   lambda blk: blk.__setitem__(slice(d, d + 17), struct.pack("<QBQ", *loc)))


def retarget_root_ref(img, ns, parent, child, new_child):
    """Root tree key (parent ROOT_REF child) -> (parent ROOT_REF new_child)
    (key offset at leaf+101+25*slot+9); dirid and name kept."""
    b, it = find_item(dump_tree(img, 1), parent, "ROOT_REF", child)
    edit_block(img, b["bytenr"], ns,
               lambda blk: set_u64(blk, HDR + ITEM * it["slot"] + 9, new_child))


def case_dir_loop(base, work):
    """Directory loops through corrupt references (sample.img), both dir
    entries (DIR_ITEM, DIR_INDEX) of a name changed, checksums fixed:
    - subvol 257 (home/alice), docs -> (256 INODE_ITEM 0): alice itself,
      so home/alice/docs is its own parent;
    - subvol 256 (home), alice -> (5 ROOT_ITEM 0), and the root tree's
      ROOT_REF (256 ROOT_REF 257) rekeyed to (256 ROOT_REF 5) so the
      lookup is confirmed as the kernel confirms it: home/alice is the top
      subvolume, an ancestor across a subvolume boundary.
    walk, walk --hash, bodyfile and extract follow directory entries: they
    must end with a message naming the path, the loop and the ancestor,
    exit 1, and still list the rest. inodes reads no directory entries but INODE_REFs: it must end
    with exit 0/1 (a message if 1).
    Also: subvol 257's docs -> (5 ROOT_ITEM 0) with no ROOT_REF to confirm
    it: as the kernel (fixup_tree_root_location -ENOENT, new_simple_dir),
    a stub directory, no descent."""
    ns = int(dump_super(base)["nodesize"])
    for what, fix, words in (
            ("docs to its parent", lambda img: retarget_dir(img, ns, 257, 256, "docs", (256, 1, 0)),
             ("home/alice/docs: directory loop", "257:256", "ancestor 'home/alice'")),
            ("alice to the top subvolume",
             lambda img: (retarget_dir(img, ns, 256, 256, "alice", (5, 132, 0)),
                          retarget_root_ref(img, ns, 256, 257, 5)),
             ("home/alice: directory loop", "5:256", "ancestor '.'"))):
        img = fresh(base, work, "loop.img")
        fix(img)
        for cmd in (["walk"], ["walk", "--hash", "--json"], ["bodyfile"]):
            rc, out, err = run(cmd, img)
            expect_error(f"dir loop {what}: {' '.join(cmd)}", rc, err, words, codes=(1,))
            check(f"dir loop {what}: {' '.join(cmd)} lists the rest", b"var/log1" in out,
                  out[-200:])
        rc, out, err = run(["inodes"], img)
        if no_signal(f"dir loop {what}: inodes", rc, err):
            check(f"dir loop {what}: inodes ends", rc == 0 or (rc == 1 and err), err[-300:])
        dest = os.path.join(work, "x-loop")
        rc, out, err = run_limited(["extract"], [img, dest])
        shutil.rmtree(dest, ignore_errors=True)
        expect_error(f"dir loop {what}: extract", rc, err, words, codes=(1,))
    img = fresh(base, work, "loop.img")
    retarget_dir(img, ns, 257, 256, "docs", (5, 132, 0))
    rc, out, err = run(["walk"], img)
    if no_signal("subvolume entry without ROOT_REF: walk", rc, err):
        check("subvolume entry without ROOT_REF: a stub, not followed",
              rc == 0 and re.search(rb"home/alice/docs +\[stub\]", out) is not None, out[:600])


def dir_entry_at(img, tree, parent, typ, name):
    """(block, item) of @typ (DIR_ITEM, DIR_INDEX) of @name in @parent."""
    return next((b, it) for b in dump_tree(img, tree) for it in b["items"]
                if it["key"][0] == parent and it["key"][1] == typ
                and f"name: {name}\n" in it["text"])


def python_fs():
    """The build's Python binding (beside the CLI's build tree), or None
    with the reason printed."""
    d = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(CLI))), "python")
    if is_asan():
        print("skip: Python checks: a sanitizer build's binding needs its runtime preloaded")
        return None
    if not os.path.isdir(os.path.join(d, "btrfsimg")):
        print(f"skip: Python checks: no binding built at {d}")
        return None
    sys.path.insert(0, d)
    try:
        import btrfsimg
        return btrfsimg
    except ImportError as e:
        print(f"skip: Python checks: {e}")
        return None


MOUNT_CHILD = r"""
import hashlib, json, os, sys
out = {}
for e in os.scandir(sys.argv[1]):
    with open(e.path, "rb") as f:
        out[e.name] = [e.inode(), e.stat().st_ino, hashlib.sha256(f.read()).hexdigest()]
print(json.dumps(out))
"""


def mount_view(img, sub):
    """btrfsimg mount (FUSE): {name: [d_ino, st_ino, sha256]} of the files
    of directory @sub, read by a child with a timeout; None (reason
    printed) without root, /dev/fuse or fusermount3."""
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        print("skip: mount checks: need root, /dev/fuse and fusermount3")
        return None
    mnt = tempfile.mkdtemp(prefix="btrfsimg-dirs-mnt.")
    try:
        rc, _, err = imgtest.run_cli(CLI, ["mount", img, mnt], timeout=TIMEOUT)
        if rc != 0:
            check("mount of a damaged directory", False, f"rc {rc} {err[-300:]!r}")
            return None
        try:
            p = subprocess.run([sys.executable, "-c", MOUNT_CHILD, os.path.join(mnt, sub)],
                               capture_output=True, timeout=TIMEOUT)
            return __import__("json").loads(p.stdout) if p.returncode == 0 else {}
        except subprocess.TimeoutExpired:
            return {}
        finally:
            subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True, timeout=60)
    finally:
        os.rmdir(mnt)


def walk_json(img):
    """{path: record} of walk --hash --json, and the run's (rc, stderr)."""
    rc, out, err = run(["walk", "--hash", "--json"], img)
    recs = {}
    for ln in out.splitlines():
        r = __import__("json").loads(ln)
        recs[r["path"]] = r
    return recs, rc, err, out


def case_dir_disagree(base, work):
    """DIR_ITEM, DIR_INDEX and INODE_REF of one name made to disagree
    (sample.img; leaf checksums recomputed, so only the cross-check can see
    it). The rule (man page, DIRECTORY ENTRIES THAT DISAGREE): readdir
    lists the names DIR_INDEX holds, a name leads where DIR_ITEM (lookup)
    says, as stat/open on the kernel's mount; every command reports each
    disagreement with both keys and exits 1, and cat, walk, extract and
    Python give the same answer:
    - var/log5's DIR_INDEX (256 DIR_INDEX 6) -> log6's inode 262: listed,
      holding log5's bytes (its DIR_ITEM's inode 261), as cat says;
    - var/log3's DIR_INDEX (index 4) renamed 'log4': log4 listed once,
      log3 not listed (no index) but readable by cat, both reported;
    - the top directory's DIR_ITEM of 'etc' -> snapshots (259, a
      directory): etc lists what snapshots holds, etc/motd is gone for
      cat too (exit 2, the disagreement reported);
    - var/log8's INODE_REF name changed to 'logX', var/log9's INODE_REF
      index 10 -> 99: listed and read as before, reported."""
    ns = int(dump_super(base)["nodesize"])
    bi = python_fs()
    good, _, _, _ = walk_json(base)
    gcat = {p: run(["cat", "--path", p], base)[1] for p in ("var/log3", "var/log5", "var/log8")}

    def same_file(tag, recs, path, want):
        r = recs.get(path)
        check(f"{tag}: walk lists {path} as the dir item has it",
              r is not None and r.get("sha256") == good[want]["sha256"]
              and r["ino"] == good[want]["ino"], str(r)[:300])

    def python_agrees(tag, img, path, recs, listed):
        if not bi:
            return
        seen = []
        with bi.open(img, on_damage=seen.append) as fs:
            st = fs.stat(path)
            with fs.open(path) as f:
                body = f.read()
            names = fs.listdir(os.path.dirname(path))
        check(f"{tag}: Python stat/open agree with walk and cat",
              st["ino"] == recs[path]["ino"] and body == gcat[path], str(st)[:200])
        check(f"{tag}: Python listdir {'lists' if listed else 'leaves out'} {path}",
              (os.path.basename(path) in names) == listed, str(names))
        check(f"{tag}: Python reports the damage", bool(seen), "no on_damage call")

    def extracted(tag, img, path, want):
        dest = os.path.join(work, "x-dirs")
        shutil.rmtree(dest, ignore_errors=True)
        rc, out, err = run_limited(["extract", "--path", "var"], [img, dest])
        got = None
        p = os.path.join(dest, os.path.basename(path))
        if os.path.exists(p):
            with open(p, "rb") as f:
                got = f.read()
        shutil.rmtree(dest, ignore_errors=True)
        expect_error(f"{tag}: extract", rc, err, ("disagree",), codes=(1,))
        check(f"{tag}: extract writes {path} as cat reads it", got == want, repr(got)[:100])

    # log5's index -> log6's inode
    img = fresh(base, work, "dirs.img")
    b, it = dir_entry_at(img, 258, 256, "DIR_INDEX", "log5")
    d = item_data(it)
    edit_block(img, b["bytenr"], ns, lambda blk: set_u64(blk, d, 262))
    tag = "dir index to another inode"
    recs, rc, err, _ = walk_json(img)
    expect_error(f"{tag}: walk", rc, err,
                 ("subvolume 258 directory 256 name 'log5'", "(256 DIR_INDEX 6)",
                  "-> (262 INODE_ITEM)", "DIR_ITEM", "-> (261 INODE_ITEM)"), codes=(1,))
    same_file(tag, recs, "var/log5", "var/log5")
    check(f"{tag}: log6 listed as before", recs.get("var/log6") == good["var/log6"],
          str(recs.get("var/log6"))[:200])
    rc, out, err = run(["cat", "--path", "var/log5"], img)
    check(f"{tag}: cat reads log5's bytes", out == gcat["var/log5"], out[:80])
    check(f"{tag}: walk's d_ino is the index's (the kernel's readdir), ino the item's",
          recs["var/log5"]["d_ino"] == good["var/log6"]["ino"], str(recs["var/log5"])[:200])
    extracted(tag, img, "var/log5", gcat["var/log5"])
    python_agrees(tag, img, "var/log5", recs, True)
    mv = mount_view(img, "var")
    if mv is not None:
        sha = __import__("hashlib").sha256(gcat["var/log5"]).hexdigest()
        check(f"{tag}: mount reads log5's bytes (lookup), d_ino log6's (readdir)",
              mv.get("log5", [0, 0, ""])[2] == sha and mv["log5"][0] == mv["log6"][1]
              and mv["log5"][1] != mv["log6"][1], str(mv)[:300])

    # log3's index renamed log4
    img = fresh(base, work, "dirs.img")
    b, it = dir_entry_at(img, 258, 256, "DIR_INDEX", "log3")
    d = item_data(it) + 30
    edit_block(img, b["bytenr"], ns, lambda blk: blk.__setitem__(slice(d, d + 4), b"log4"))
    tag = "dir index renamed"
    recs, rc, err, out = walk_json(img)
    expect_error(f"{tag}: walk", rc, err,
                 ("name 'log4'", "(256 DIR_INDEX 4)", "listed already",
                  "name 'log3'", "no dir index lists it"), codes=(1,))
    check(f"{tag}: log4 listed once, log3 not",
          out.count(b'"path":"var/log4"') == 1 and "var/log3" not in recs, out[-300:])
    same_file(tag, recs, "var/log4", "var/log4")
    rc, out, err = run(["cat", "--path", "var/log3"], img)
    expect_error(f"{tag}: cat", rc, err, ("name 'log3'", "(256 DIR_INDEX 4)"), codes=(1,))
    check(f"{tag}: cat still reads log3", out == gcat["var/log3"], out[:80])
    python_agrees(tag, img, "var/log3", {"var/log3": good["var/log3"]}, False)

    # the top directory's DIR_ITEM of etc -> the snapshots directory
    img = fresh(base, work, "dirs.img")
    b, it = dir_entry_at(img, 5, 256, "DIR_ITEM", "etc")
    d = item_data(it)
    edit_block(img, b["bytenr"], ns, lambda blk: set_u64(blk, d, 259))
    tag = "dir item to a directory"
    recs, rc, err, _ = walk_json(img)
    expect_error(f"{tag}: walk", rc, err,
                 ("subvolume 5 directory 256 name 'etc'", "(256 DIR_INDEX 2)",
                  "-> (257 INODE_ITEM)", "-> (259 INODE_ITEM)"), codes=(1,))
    check(f"{tag}: etc lists what the dir item's directory holds",
          "etc/motd" not in recs and "etc/home-1" in recs and "snapshots/home-1" in recs
          and recs["etc"]["ino"] == good["snapshots"]["ino"], sorted(recs)[:12])
    rc, out, err = run(["cat", "--path", "etc/motd"], img)
    expect_error(f"{tag}: cat etc/motd", rc, err, ("no entry", "name 'etc'"), codes=(2,))
    if bi:
        with bi.open(img, on_damage=lambda m: None) as fs:
            check(f"{tag}: Python stat etc is the snapshots directory",
                  fs.stat("etc")["ino"] == good["snapshots"]["ino"], "")

    # the top directory's DIR_INDEX of the subvolume entry home renamed hoMe
    img = fresh(base, work, "dirs.img")
    b, it = dir_entry_at(img, 5, 256, "DIR_INDEX", "home")
    d = item_data(it) + 30
    edit_block(img, b["bytenr"], ns, lambda blk: blk.__setitem__(slice(d, d + 4), b"hoMe"))
    tag = "subvolume entry's index renamed"
    recs, rc, err, _ = walk_json(img)
    expect_error(f"{tag}: walk", rc, err,
                 ("name 'hoMe'", "(256 DIR_INDEX 3)", "no dir item has the name",
                  "name 'home'", "(256 ROOT_ITEM)", "no dir index lists it"), codes=(1,))
    check(f"{tag}: neither home nor hoMe listed",
          not any(p.split("/")[0] in ("home", "hoMe") for p in recs), sorted(recs)[:8])
    note = "home/alice/docs/note1.txt"
    rc, out, err = run(["cat", "--path", note], img)
    expect_error(f"{tag}: cat", rc, err, ("name 'home'", "(256 DIR_INDEX 3)", "ROOT_ITEM"),
                 codes=(1,))
    check(f"{tag}: cat still reads {note}", out == run(["cat", "--path", note], base)[1],
          out[:80])

    # INODE_REF of log8 renamed, of log9 re-indexed
    img = fresh(base, work, "dirs.img")
    for name, off, val in (("log8", 10, b"logX"), ("log9", 0, struct.pack("<Q", 99))):
        ino = good[f"var/{name}"]["ino"]
        b, it = find_item(dump_tree(img, 258), ino, "INODE_REF", 256)
        d = item_data(it) + off
        edit_block(img, b["bytenr"], ns,
                   lambda blk: blk.__setitem__(slice(d, d + len(val)), val))
    tag = "inode ref disagrees"
    recs, rc, err, _ = walk_json(img)
    expect_error(f"{tag}: walk", rc, err,
                 ("name 'log8'", "no inode ref or extref", "name 'log9'",
                  "(256 DIR_INDEX 10)", "has index 99"), codes=(1,))
    check(f"{tag}: log8 and log9 listed as before",
          all(recs.get(p) == good[p] for p in ("var/log8", "var/log9")), "")
    rc, out, err = run(["cat", "--path", "var/log8"], img)
    expect_error(f"{tag}: cat", rc, err, ("name 'log8'", "no inode ref"), codes=(1,))
    check(f"{tag}: cat reads log8", out == gcat["var/log8"], out[:80])

    # the undamaged image: no report, exit 0
    rc, out, err = run(["walk"], base)
    check("dir cross-check: undamaged image walks clean", rc == 0 and not err, err[-300:])


# ------------------------------------------------------- data and csums

def big_txt(img):
    """(inode, disk_bytenr, length) of top/big.txt in the dup image."""
    blocks = dump_tree(img, 5)
    ino = next(it["text"] for b in blocks for it in b["items"]
               if it["key"][1] == "DIR_INDEX" and "name: big.txt" in it["text"])
    ino = int(re.search(r"location key \((\d+) ", ino)[1])
    _, ext = find_item(blocks, ino, "EXTENT_DATA", 0)
    m = re.search(r"disk byte (\d+) nr (\d+)", ext["text"])
    return ino, int(m[1]), int(m[2])


def case_data_csum(base, work):
    """top/big.txt of the DUP image (data DUP, crc32c per 4 KiB sector in
    the csum tree), sector 2 of its extent (logical X = disk_bytenr+8192):
    - copy 1 of the sector overwritten with 0x5a (csum unchanged): cat
      gives the undamaged bytes from copy 2, exit 1, X named;
    - the csum item's 4 bytes for X changed (leaf checksum recomputed):
      no copy matches: cat and walk --hash exit 1 or 2 naming X and
      'checksum'; cat writes the two good sectors before X first (exit 1);
      --no-verify gives the undamaged bytes;
    - the size of the EXTENT_CSUM item holding X made 1 byte smaller (not
      whole 4-byte checksums): cat fails naming the csum leaf and slot."""
    ns = int(dump_super(base)["nodesize"])
    ino, disk, n = big_txt(base)
    X = disk + 8192
    cat = ["cat", "--inode", f"5:{ino}"]
    good = run(cat, base)
    img = fresh(base, work, "data.img")
    phys = mirrors(img, X, 4096)
    check("dup data has two copies", len(phys) == 2, str(phys))
    patch(img, phys[0], b"\x5a" * 4096)
    expect_same("data copy 1 damaged", good, run(cat, img), words=(str(X),))
    img = fresh(base, work, "data.img")
    leaf, off = csum_slot(img, X)
    edit_block(img, leaf, ns, lambda b: set_u32(b, off, struct.unpack_from("<I", b, off)[0] ^ 1))
    for cmd in (cat, ["walk", "--hash", "--json"]):
        rc, out, err = run(cmd, img)
        expect_error(f"data csum wrong: {cmd[0]}", rc, err, (str(X), "checksum"))
    rc, out, err = run(cat, img)
    check("data csum wrong: cat writes the 8 KiB before the bad sector, as read() would, exit 1",
          rc == 1 and out == good[1][:8192], f"rc {rc}, {len(out)} bytes")
    expect_same("data csum wrong, --no-verify", good, run(cat + ["--no-verify"], img), rc_want=0)
    # the EXTENT_CSUM item holding X one byte shorter (item size field,
    # leaf+101+25*slot+21): not whole checksums
    img = fresh(base, work, "data.img")
    b, it = next((b, it) for b in dump_tree(img, 7) for it in b["items"]
                 if it["key"][2] <= X < it["key"][2] + it["size"] // 4 * 4096)
    edit_block(img, b["bytenr"], ns, lambda blk: set_u32(blk, HDR + ITEM * it["slot"] + 21,
                                                         it["size"] - 1))
    rc, out, err = run(cat, img)
    expect_error("csum item size not whole checksums: cat", rc, err,
                 ("root=7", str(b["bytenr"]), f"slot={it['slot']}", "csum item"))


def compressed_extents(img, tree, comp):
    """[(ino, disk_bytenr, disk_num_bytes, item leaf, item)] of regular
    extents with compression @comp (1 zlib, 2 lzo, 3 zstd)."""
    res = []
    for b in dump_tree(img, tree):
        for it in b["items"]:
            if it["key"][1] == "EXTENT_DATA" and f"compression {comp} " in it["text"] \
                    and "disk byte" in it["text"]:
                m = re.search(r"disk byte (\d+) nr (\d+)", it["text"])
                if int(m[1]):
                    res.append((it["key"][0], int(m[1]), int(m[2]), b, it))
    return res


def case_compressed(base, work):
    """comp.img: subvolumes 257 (zlib), 258 (lzo), 259 (zstd). For the
    largest compressed extent of each, the on-disk stream is changed and
    its data checksums recomputed (write_data), so only the decompressor
    can tell:
    - zlib: the 2-byte zlib header (CMF, FLG) zeroed;
    - lzo: the 4-byte total length set to 0x7fffffff (past the extent);
    - zstd: the 4-byte frame magic zeroed;
    cat of the file: exit 1 or 2 naming the inode and the decompressor's
    complaint, no signal, bounded memory. Then the middle half of each
    stream overwritten with a pattern: no signal, no hang (any verdict:
    lzo and zstd streams carry no checksum of their own)."""
    ns = int(dump_super(base)["nodesize"])
    for tree, comp, name, head in ((257, 1, "zlib", b"\0\0"),
                                   (258, 2, "lzo", struct.pack("<I", 0x7fffffff)),
                                   (259, 3, "zstd", b"\0\0\0\0")):
        exts = compressed_extents(base, tree, comp)
        check(f"{name}: compressed extents found", bool(exts), tree)
        if not exts:
            continue
        ino, disk, dlen, _, _ = max(exts, key=lambda e: e[2])
        orig = read_data(base, disk, dlen)
        cat = ["cat", "--inode", f"{tree}:{ino}"]
        img = fresh(base, work, "comp-x.img")
        write_data(img, disk, head + orig[len(head):], ns)
        rc, out, err = run_limited(cat, img)
        expect_error(f"{name} stream header damaged: cat", rc, err, (f"inode={ino}", str(disk)))
        rc, out, err = run_limited(["walk", "--hash", "--json", "--subvol", str(tree)], img)
        expect_error(f"{name} stream header damaged: walk --hash", rc, err, (f"inode={ino}",),
                     codes=(1,))
        img = fresh(base, work, "comp-x.img")
        q = dlen // 4
        write_data(img, disk, orig[:q] + bytes((i * 37) & 0xff for i in range(2 * q))
                   + orig[3 * q:], ns)
        rc, out, err = run_limited(cat, img)
        no_signal(f"{name} stream body damaged: cat", rc, err) and \
            check(f"{name} stream body damaged: cat ended cleanly", True)


def case_compressed_sizes(base, work):
    """The EXTENT_DATA item of the largest zstd extent (subvol 259),
    checksum of its leaf recomputed:
    - ram_bytes (item data + 8) = 2^40: far past the 128 KiB limit;
    - num_bytes (item data + 45) = 2^62: referencing more than it holds;
    - disk_num_bytes (item data + 29) = 2^40.
    cat and walk --hash must fail on that file (exit 1 or 2, inode named)
    within a bounded address space. Likewise the largest compressed inline
    extent of subvol 257 with ram_bytes (+8) = 2^40, and an uncompressed
    regular extent of subvol 256 with num_bytes (+45) = 2^62."""
    ns = int(dump_super(base)["nodesize"])
    ino, disk, dlen, leaf, it = max(compressed_extents(base, 259, 3), key=lambda e: e[2])
    for what, off, val in (("ram_bytes", 8, 1 << 40), ("num_bytes", 45, 1 << 62),
                           ("disk_num_bytes", 29, 1 << 40)):
        img = fresh(base, work, "csize.img")
        edit_block(img, leaf["bytenr"], ns, lambda b: set_u64(b, item_data(it) + off, val))
        for cmd in (["cat", "--inode", f"259:{ino}"], ["walk", "--hash", "--json", "--subvol", "259"]):
            rc, out, err = run_limited(cmd, img)
            expect_error(f"zstd extent {what} huge: {cmd[0]}", rc, err, (f"{ino}",))
    # the largest compressed inline extent of subvol 257 (zlib): ram_bytes
    # (item data + 8) = 2^40 -- inline data decompresses to a sector at most
    inl = [(b, it) for b in dump_tree(base, 257) for it in b["items"]
           if it["key"][1] == "EXTENT_DATA" and "(inline)" in it["text"]
           and "compression 1 " in it["text"]]
    b, it = max(inl, key=lambda x: x[1]["size"])
    img = fresh(base, work, "csize.img")
    edit_block(img, b["bytenr"], ns, lambda blk: set_u64(blk, item_data(it) + 8, 1 << 40))
    rc, out, err = run_limited(["cat", "--inode", f"257:{it['key'][0]}"], img)
    expect_error("inline zlib extent ram_bytes 2^40: cat", rc, err,
                 (f"{it['key'][0]}", str(b["bytenr"])))
    # an uncompressed regular extent of subvol 256: num_bytes = 2^62
    b, it = next((b, it) for b in dump_tree(base, 256) for it in b["items"]
                 if it["key"][1] == "EXTENT_DATA" and "compression 0 " in it["text"]
                 and "disk byte" in it["text"] and "disk byte 0 " not in it["text"])
    img = fresh(base, work, "csize.img")
    edit_block(img, b["bytenr"], ns, lambda blk: set_u64(blk, item_data(it) + 45, 1 << 62))
    for cmd in (["cat", "--inode", f"256:{it['key'][0]}"], ["walk", "--hash", "--json", "--subvol", "256"]):
        rc, out, err = run_limited(cmd, img)
        expect_error(f"regular extent num_bytes 2^62: {cmd[0]}", rc, err, (f"{it['key'][0]}",))


# --------------------------------------------------------- zeroed ranges

def case_zeroed(base, work):
    """1 MiB of zeros over metadata: the MiB holding copy 1 of subvolume
    257's leaf (sample.img, DUP metadata; copy 2 lies in the other
    stripe, 32 MiB away): walk --hash and subvols give the undamaged
    answer, exit 1. Then the MiB around copy 2 zeroed too (the root tree
    lies there as well): exit 1 or 2 naming a block and its checksum
    mismatch, no signal."""
    leaf = dump_tree(base, 257)[0]["bytenr"]
    good = run(["walk", "--hash", "--json"], base)
    img = fresh(base, work, "zero.img")
    phys = mirrors(img, leaf)
    patch(img, phys[0] & ~0xfffff, bytes(1 << 20))
    expect_same("1 MiB zeroed over metadata copy 1", good,
                run(["walk", "--hash", "--json"], img), words=("copy",))
    patch(img, phys[1] & ~0xfffff, bytes(1 << 20))
    rc, out, err = run(["walk", "--hash", "--json"], img)
    expect_error("1 MiB zeroed over both metadata copies", rc, err, ("block=", "checksum"))


# --------------------------------------------------------- device sets

def case_devices(work):
    """Multi-device images (testdata/images raid1: 2 devices, raid5: 3):
    - devices in every other order: the same subvols and walk --hash as
      in manifest order, exit 0 (a device set has no order);
    - one device twice (the same file, or a copy): exit 2 'given twice'
      naming both (two copies of one devid are ambiguous: either could be
      stale, and silently choosing would hide it);
    - a device of another filesystem mixed in: exit 2 naming it and
      'another filesystem'."""
    devs = {}
    for name, n in (("raid1", 2), ("raid5", 3)):
        devs[name] = []
        for i in range(1, n + 1):
            p = os.path.join(work, f"{name}-dev{i}.img")
            imgtest.unzstd(os.path.join(TESTDATA, "images", name, f"dev{i}.img.zst"), p)
            devs[name].append(p)
    for name, ds in devs.items():
        for cmd in (["subvols", "--json"], ["walk", "--hash", "--json"]):
            good = run_limited(cmd, ds)
            check(f"{name}: manifest order reads", good[0] == 0, good[2][-300:])
            for order in itertools.permutations(ds):
                if list(order) == ds:
                    continue
                tag = ",".join(os.path.basename(d)[len(name) + 1:-4] for d in order)
                expect_same(f"{name} devices {tag}: {cmd[0]}", good,
                            run_limited(cmd, list(order)), rc_want=0)
    r1, r5 = devs["raid1"], devs["raid5"]
    copy = fresh(r1[0], work, "r1-copy.img")
    for what, ds, words in (("same file twice", [r1[0], r1[0], r1[1]], ("given twice",)),
                            ("a copy of dev1", [r1[0], r1[1], copy], ("given twice", "r1-copy")),
                            ("raid5 device mixed in", [r1[0], r1[1], r5[0]],
                             ("another filesystem", os.path.basename(r5[0]))),
                            ("raid1 device mixed into raid5", [r5[0], r1[0], r5[1], r5[2]],
                             ("another filesystem", os.path.basename(r1[0])))):
        rc, out, err = run_limited(["subvols"], ds)
        expect_error(f"devices: {what}", rc, err, words, codes=(2,))
    for p in r1 + r5 + [copy]:
        os.unlink(p)


# ------------------------------------------- flips with valid checksums

def case_leaf_flips(base, work, tree, seed, trials):
    """Random bytes changed inside the item area of random leaves of tree
    @tree (every copy, checksum recomputed, so the item parsers see them
    rather than the checksum): every command must end cleanly."""
    rng = random.Random(seed)
    ns = int(dump_super(base)["nodesize"])
    leaves = [b for b in dump_tree(base, tree) if b["level"] == 0 and b["items"]]
    where = {}
    for t in range(trials):
        img = fresh(base, work, "lflip.img")
        for _ in range(rng.randint(1, 3)):
            b = rng.choice(leaves)
            it = rng.choice(b["items"])
            lo = item_data(it) if rng.random() < 0.7 else HDR + it["slot"] * ITEM
            hi = lo + (it["size"] if lo > HDR + it["slot"] * ITEM else ITEM)
            offs = [rng.randrange(lo, max(hi, lo + 1)) for _ in range(rng.randint(1, 4))]
            vals = [rng.choice((0, 0xff, 0x7f, 0x80, rng.randrange(256))) for _ in offs]

            def mutate(blk, offs=offs, vals=vals):
                for o, v in zip(offs, vals):
                    if o < ns:
                        blk[o] = v
            if b["bytenr"] not in where:   # map on the undamaged image
                where[b["bytenr"]] = mirrors(base, b["bytenr"])
            edit_block(img, b["bytenr"], ns, mutate, phys=where[b["bytenr"]])
        for cmd in (["walk", "--hash", "--json"], ["inodes", "--json"], ["bodyfile"],
                    ["collisions", "--json"]):
            rc, out, err = run_limited(cmd, img)
            if not no_signal(f"leaf flips {tree}/{seed}/{t}: {cmd[0]}", rc, err):
                break
        else:
            check(f"leaf flips {tree}/{seed}/{t}: every command ended cleanly", True)


def chunk_copies(img, logical):
    """Physical offsets of every copy of @logical in a single/DUP/RAID1
    chunk, from `dump-tree -t chunk` (btrfs-map-logical only maps extents
    the extent tree knows, and a crash image's log blocks are not there)."""
    out = subprocess.run(["btrfs", "inspect-internal", "dump-tree", "-t", "chunk", img],
                         capture_output=True, text=True).stdout
    start = length = None
    copies = []
    for line in out.splitlines() + ["item end"]:
        words = line.split()
        if words and words[0] == "item":
            if start is not None and start <= logical < start + length:
                return [o + logical - start for o in copies]
            m = re.search(r"CHUNK_ITEM (\d+)\)", line)
            start, length, copies = (int(m[1]) if m else None), None, []
        elif words[:1] == ["length"]:
            length = int(words[1])
        elif words[:1] == ["stripe"] and "offset" in words:
            copies.append(int(words[words.index("offset") + 1]))
    return []


def case_log_tree(work):
    """ops.crash.img (testdata/logtree): the log tree's root leaf (superblock
    log_root), every copy, checksum recomputed:
    - nritems 100000: replay cannot use the log; walk must say so naming
      the log tree's block and the check, exit 1, and show the last
      committed state: the same paths as --no-log-replay;
    - random byte flips (checksum recomputed): every command ends cleanly."""
    src = os.path.join(TESTDATA, "logtree", "ops.crash.img.zst")
    base = unpack(work, src, "ops.img")
    s = dump_super(base)
    log, ns = int(s["log_root"]), int(s["nodesize"])
    phys = chunk_copies(base, log)
    check("log tree root found in the chunk tree", log and phys, f"{log} {phys}")
    if not phys:
        return
    nolog = run(["walk", "--json", "--no-log-replay"], base)
    replayed = run(["walk", "--json"], base)
    check("log replay changes the walk (the case is meaningful)", nolog[1] != replayed[1])
    img = fresh(base, work, "log.img")
    edit_block(img, log, ns, lambda b: set_u32(b, 96, 100000), phys=phys)
    rc, out, err = run(["walk", "--json"], img)
    if no_signal("log leaf nritems: no crash", rc, err):
        check("log leaf nritems: exit 1, the log tree block and check named, committed state shown",
              rc == 1 and b"(log tree)" in err and str(log).encode() in err
              and b"bad nritems" in err and out == nolog[1], f"rc {rc} {err[-300:]!r}")
    rng = random.Random(7)
    for t in range(6):
        img = fresh(base, work, "log.img")
        def flip(b):
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(101, ns)] = rng.randrange(256)
        edit_block(img, log, ns, flip, phys=phys)
        for cmd in (["walk", "--hash", "--json"], ["inodes", "--json"], ["collisions", "--json"]):
            rc, out, err = run(cmd, img)
            if not no_signal(f"log leaf flips {t}: {cmd[0]}", rc, err):
                break
        else:
            check(f"log leaf flips {t}: every command ended cleanly", True)
    os.unlink(base)


def workdir():
    """Scratch space: a tmpfs when there is room (copies and deletes of
    sparse images cost nothing there; on a disk mounted with discard each
    delete waits), else the default temporary directory."""
    for d in ("/dev/shm",):
        try:
            if os.access(d, os.W_OK) and shutil.disk_usage(d).free > (2 << 30):
                return tempfile.mkdtemp(prefix="btrfsimg-corrupt.", dir=d)
        except OSError:
            pass
    return tempfile.mkdtemp(prefix="btrfsimg-corrupt.")


def unpack(work, path, name):
    return imgtest.unzstd(path, os.path.join(work, name))


def main():
    global MEM_LIMIT
    if not shutil.which("zstd") or not shutil.which("btrfs-map-logical"):
        print("zstd and btrfs-progs are needed (scripts/deps.sh installs them)")
        sys.exit(1)
    if not is_asan():
        MEM_LIMIT = 2 << 30
    only = os.environ.get("CORRUPT_ONLY", "")
    want = lambda g: not only or g in only.split(",")
    trials = int(os.environ.get("CORRUPT_TRIALS", "25"))
    work = workdir()
    try:
        base = unpack(work, os.path.join(TESTDATA, "sample.img.zst"), "sample.img")
        if want("root"):
            case_mirror_fallback(base, work)
            case_both_copies(base, work, "nritems too large",
                             lambda b: set_u32(b, 96, 100000), "bad nritems")
            case_both_copies(base, work, "item offset past the end",
                             lambda b: set_u32(b, 101 + 17, 0xfffff000), "past end")
            case_both_copies(base, work, "keys out of order",
                             lambda b: b.__setitem__(slice(101, 101 + 8), struct.pack("<Q", 2**63)),
                             "key order")
            case_both_copies(base, work, "level out of range",
                             lambda b: b.__setitem__(100, 9), "level")
            case_both_copies(base, work, "bytenr of another block",
                             lambda b: b.__setitem__(slice(48, 56), struct.pack("<Q", 4096)),
                             "bad bytenr")
        if want("super"):
            case_superblock(base, work)
            case_feature(base, work, 12, "ZONED")
            case_feature(base, work, 14, "RAID_STRIPE_TREE")
            case_feature(base, work, 20, "unknown bit 20")
            case_truncated(base, work)
            case_super_fields(base, work)
            case_super_flips(base, work, 6, trials)
        if want("chunk"):
            case_chunk_tree(base, work)
        if want("leaf"):
            case_fs_leaf(base, work)
            case_inode_size(base, work)
            case_dfxml_times(base, work)
            case_inline_size(base, work)
            case_dir_name_len(base, work)
            case_dir_loop(base, work)
        if want("dirs"):
            case_dir_disagree(base, work)
        if want("zero"):
            case_zeroed(base, work)
        if want("random"):
            case_random(base, work, 1, trials)
        if want("flips"):
            for tree in (257, 1, 3, 7):   # fs, root, chunk, csum trees
                case_leaf_flips(base, work, tree, 3, trials // 5)
        if want("node") or want("flips"):
            names = unpack(work, os.path.join(TESTDATA, "files", "names.img.zst"), "names.img")
            if want("node"):
                case_fs_nodes(names, work)
            if want("flips"):
                case_leaf_flips(names, work, 5, 4, trials // 5)
            os.unlink(names)
        if want("order"):
            case_scan_order(work)
        if want("data"):
            dup = unpack(work, os.path.join(TESTDATA, "images", "dup", "dev1.img.zst"), "dup.img")
            case_data_csum(dup, work)
            os.unlink(dup)
        if want("comp") or want("flips"):
            comp = unpack(work, os.path.join(TESTDATA, "files", "comp.img.zst"), "comp.img")
            if want("comp"):
                case_compressed(comp, work)
                case_compressed_sizes(comp, work)
            if want("flips"):
                case_leaf_flips(comp, work, 259, 5, trials // 5)
            os.unlink(comp)
        if want("devices"):
            case_devices(work)
        if want("log"):
            case_log_tree(work)
        if want("random"):
            for name in ("raid5", "raid1"):
                d = os.path.join(TESTDATA, "images", name)
                dev = unpack(work, os.path.join(d, "dev1.img.zst"), name + ".img")
                case_random(dev, work, 2, 5)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(tally.summary())


main()
