#!/usr/bin/env python3
"""Corruption tests: damage committed images on purpose and check what the CLI does.

    test_corrupt.py BTRFSIMG TESTDATA

Every case says which bytes change and what must happen: the same answer as
the undamaged image from another copy (exit 1, damage reported), or a clear
error naming the block and the check (exit 2) -- never a signal, a hang or
a silent wrong answer. Block locations come from btrfs-progs (dump-super and
btrfs-map-logical), not from btrfsimg. Prints 'N passed, M failed'.
"""
import json, os, random, shutil, struct, subprocess, sys, tempfile

CLI, TESTDATA = sys.argv[1], sys.argv[2]
passed = failed = 0
TIMEOUT = 120


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name}\n    {detail}")


def run(args, img):
    try:
        p = subprocess.run([CLI] + args + [img], capture_output=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, b"", b"timeout"
    return p.returncode, p.stdout, p.stderr


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def dump_super(img):
    out = subprocess.run(["btrfs", "inspect-internal", "dump-super", img],
                         capture_output=True, text=True).stdout
    vals = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            vals.setdefault(parts[0], parts[1])
    return vals


def mirrors(img, logical):
    """Physical offsets of every copy of a logical address (btrfs-map-logical)."""
    out = subprocess.run(["btrfs-map-logical", "-l", str(logical), img],
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
    if rc == 2 and not err.strip():
        check(name, False, "exit 2 without a message")
        return False
    return True


def decompress(src, dst):
    subprocess.run(["zstd", "-q", "-d", "-f", src, "-o", dst], check=True)


def fresh(base, work, name):
    p = os.path.join(work, name)
    shutil.copyfile(base, p)
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
    checksum is recomputed, so only the structural checker can catch it."""
    img = fresh(base, work, "both.img")
    root, ns, phys = root_copies(img)
    for p in phys:
        blk = bytearray(read(img, p, ns))
        mutate(blk)
        patch(img, p, bytes(blk))
        resum_block(img, p, ns)
    rc, out, err = run(["subvols"], img)
    if no_signal(f"{what}: no crash", rc, err):
        check(f"{what}: exit 2 naming the block and check",
              rc == 2 and str(root).encode() in err and expect.encode() in err,
              f"rc {rc} stderr {err!r}")


def set_u32(blk, off, v):
    blk[off:off + 4] = struct.pack("<I", v)


def case_superblock(base, work):
    """Primary superblock (64 KiB) zeroed: the 64 MiB mirror is used."""
    good = run(["subvols", "--json"], base)
    img = fresh(base, work, "sb.img")
    patch(img, 65536, bytes(4096))
    rc, out, err = run(["subvols", "--json"], img)
    if no_signal("primary superblock zeroed: no crash", rc, err):
        check("primary superblock zeroed: mirror gives the same answer, exit 1",
              rc == 1 and out == good[1], f"rc {rc} {err!r}")
    patch(img, 64 << 20, bytes(4096))
    rc, out, err = run(["super"], img)
    if no_signal("all superblocks zeroed: no crash", rc, err):
        check("all superblocks zeroed: exit 2 with a message", rc == 2 and b"superblock" in err,
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
    """The image cut to 40 MiB (chunks beyond it unreadable)."""
    img = fresh(base, work, "trunc.img")
    with open(img, "r+b") as f:
        f.truncate(40 << 20)
    for cmd in (["super"], ["subvols"], ["walk", "--hash"], ["inodes"], ["collisions"]):
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


def main():
    if not shutil.which("zstd") or not shutil.which("btrfs-map-logical"):
        print("zstd and btrfs-progs are needed (scripts/deps.sh installs them)")
        sys.exit(1)
    work = tempfile.mkdtemp(prefix="btrfsimg-corrupt.")
    try:
        base = os.path.join(work, "sample.img")
        decompress(os.path.join(TESTDATA, "sample.img.zst"), base)
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
        case_superblock(base, work)
        case_feature(base, work, 12, "ZONED")
        case_feature(base, work, 14, "RAID_STRIPE_TREE")
        case_feature(base, work, 20, "unknown bit 20")
        case_truncated(base, work)
        case_random(base, work, 1, int(os.environ.get("CORRUPT_TRIALS", "25")))
        for name in ("raid5", "raid1"):
            d = os.path.join(TESTDATA, "images", name)
            dev = os.path.join(work, name + ".img")
            decompress(os.path.join(d, "dev1.img.zst"), dev)
            case_random(dev, work, 2, 5)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
