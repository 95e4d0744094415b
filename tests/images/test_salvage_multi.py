#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_salvage_multi.py: salvage of multi-device filesystems
(testdata/salvage-multi, made by testdata/gen_salvage_multi.py).

    test_salvage_multi.py CLI TESTDATA

The committed devices are kernel-made; the kernel's view of each set was
recorded before any damage. The damage is made here, in user space, by
gen_salvage_multi.damage() (superblocks of every device, of devid 1 only,
the chunk root on every device, every chunk-tree block, and both). The
device images are written under names that sort against devid order
("z-..." is devid 1) and given in reverse devid order, and once in devid
order. On each: walk --json --hash equals the kernel's view, every field
(test_salvage.walk_equal); exit 1; stderr says what was rebuilt and which
devid each image got; no image is written. The striped set (raid10
metadata, raid5 data) also needs what tree blocks cannot tell: the raid5
chunks' stripe order when they come from device extents, and which device
of a raid10 mirror pair is which without superblocks; the data checksums
decide, and stderr says so.
Hostile: an image of another filesystem among the devices is set aside
(no superblock anywhere) or refused (its superblock names another fsid, or
it has none and the superblocks' devices are all given); a
copy of devid 1 whose superblock claims devid 2 is refused; a second copy
of a superblock-less device is set aside, never given the same devid.
The wide set (8 devices, raid10 metadata and raid0 data, every chunk of
8 stripes in an order the kernel chose by free space, not devid order, as
its chunk tree recorded it in truth.json): without the chunk tree its
chunks come from device extents, too wide for every order to be tried;
each is placed one stripe at a time (tree blocks, then data checksums) and
the order said must be the kernel's (chunkall: the superblocks give the
devids); with no superblock either, which device is which devid cannot
be told where the devids' extents lie alike, and every file must still
read exact. Hostile: a forged copy of a tree block (valid checksum) on a
device of another raid10 pair votes for a wrong order and is outvoted.
Degraded: one device of the raid1 set alone, every superblock zeroed,
still reads whole, the other named missing; the striped set without devid
3, every superblock zeroed: devid 4, which the tree blocks place as well
under devid 3 (its raid10 mirror), is told apart by the data checksums,
and the raid5 data is read through the parity.
"""
import os
import re
import struct
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
import imgtest  # noqa: E402
import test_salvage as ts  # noqa: E402  (walk_equal, parse_jsonl: shared)

TIMEOUT = 300
NAMES = {1: "z-first", 2: "a-second", 3: "m-third", 4: "b-fourth", 5: "y-fifth", 6: "c-sixth",
         7: "k-seventh", 8: "d-eighth"}
# what each set must open from (striped: see the man page, SALVAGE)
CASES = {
    "raid1": ("super", "super1", "chunk", "chunkall", "both", "bothall"),
    "striped": ("super", "super1", "chunk", "chunkall", "both", "bothall"),
    "wide": ("super", "chunkall", "bothall"),
}
# striped: what tree blocks cannot tell, the data checksums decide
ORDER = b"raid5 from device extents: stripe order devids "
STRIPED_SAID = {
    "super": [b"the data checksums decide"],
    "chunk": [ORDER],
    "chunkall": [ORDER, b"sampled sectors verify"],
    "both": [b"the data checksums decide", ORDER],
    "bothall": [b"the data checksums decide", ORDER],
}
SAID = {
    "super": [b"no superblock (", b"is devid 1: ", b"is devid 2: "],
    "super1": [b"without a valid superblock copy", b"is devid 1: "],
    "chunk": [b"chunk tree unreadable (", b"chunk map rebuilt from "],
    "chunkall": [b"chunk tree unreadable (", b"from device extents and block groups"],
    "both": [b"no superblock (", b"is devid 1: ", b"chunk map rebuilt from "],
    "bothall": [b"no superblock (", b"is devid 1: ", b"from device extents and block groups"],
}


def write_devs(work, devs, tag):
    """{devid: path}, each named so that names do not sort in devid order."""
    out = {}
    for devid, data in devs.items():
        out[devid] = os.path.join(work, "%s-%s.img" % (NAMES[devid], tag))
        with open(out[devid], "wb") as f:
            f.write(data)
    return out


def walk(kv, res, cli, name, paths, view, said, want_rc=1):
    before = [imgtest.sha256_file(p) for p in paths]
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash"] + paths, timeout=TIMEOUT)
    res.check("%s: exit %d" % (name, want_rc), rc == want_rc, "exit %r: %s" % (rc, err[-500:]))
    missing = [s for s in said if s not in err]
    res.check("%s: said on stderr" % name, not missing, "%r not in %s" % (missing, err[-800:]))
    if want_rc == 1:
        got = ts.parse_jsonl(out) if rc in (0, 1) else []
        res.problems("%s: every record equal to the kernel's view" % name,
                     ts.walk_equal(kv, got, view))
    res.check("%s: no image written" % name,
              [imgtest.sha256_file(p) for p in paths] == before)
    return err


def forged_devid(data, devid):
    """@data (a device) with its primary superblock's dev_item devid set to
    @devid and the checksum made again: a forged but valid superblock."""
    b = bytearray(data)
    sb = 64 << 10
    struct.pack_into("<Q", b, sb + 0xc9, devid)
    b[sb:sb + 4] = struct.pack("<I", imgtest.crc32c(bytes(b[sb + 32:sb + 4096])))
    for mirror in (64 << 20, 256 << 30):  # the mirrors would name devid 1 still
        if mirror + 4096 <= len(b):
            b[mirror:mirror + 4096] = bytes(4096)
    return bytes(b)


def hostile(kv, res, cli, work, gm, devs, other, view):
    damaged = write_devs(work, gm.damage(devs, "super"), "hostile")
    foreign = os.path.join(work, "foreign-nosuper.img")
    with open(foreign, "wb") as f:
        f.write(gm.damage(other, "super")[1])
    walk(kv, res, cli, "hostile: another filesystem's device among superblock-less ones",
         [foreign, damaged[2], damaged[1]], view,
         [b"another filesystem's tree blocks are on the devices too", b"set aside"])
    with open(foreign, "wb") as f:
        f.write(other[1])
    clean = write_devs(work, devs, "clean")
    walk(kv, res, cli, "hostile: another filesystem's device with its superblock",
         [clean[2], foreign, clean[1]], view, [b"belongs to another filesystem"], want_rc=2)
    with open(foreign, "wb") as f:
        f.write(gm.damage(other, "super")[1])
    walk(kv, res, cli, "hostile: a superblock-less image beside a complete set",
         [clean[2], foreign, clean[1]], view, [b"devices the superblock names are all given"],
         want_rc=2)
    forged = os.path.join(work, "forged.img")
    with open(forged, "wb") as f:
        f.write(forged_devid(devs[1], 2))
    walk(kv, res, cli, "hostile: a copy of devid 1 claiming devid 2", [forged, clean[2]], view,
         [b"devid 2 given twice"], want_rc=2)
    one = write_devs(work, gm.damage(devs, "super1"), "twice")
    twin = os.path.join(work, "twin.img")
    with open(twin, "wb") as f:
        f.write(gm.damage(devs, "super1")[1])
    walk(kv, res, cli, "hostile: a superblock-less device given twice", [twin, one[2], one[1]],
         view, [b"is devid 1: ", b"set aside"])
    os.unlink(one[2])
    walk(kv, res, cli, "degraded: devid 1 alone, every superblock zeroed", [damaged[1]], view,
         [b"no superblock (", b"is devid 1: ", b"1 of 2 devices missing"])


WIDE_SAID = {
    "super": [b"is devid 1: "],
    "chunkall": [b"8 stripes, too many to try every order: placed one at a time by the tree "
                 b"blocks", b"placed one at a time by the sampled sectors"],
    "bothall": [b"8 stripes, too many to try every order: placed one at a time by the tree "
                b"blocks", b"placed one at a time by the sampled sectors", b"is devid 1: "],
}


def wide_orders(res, truth, err, what):
    """The kernel's stripe order of every chunk (truth.json) is not devid
    order (so that this test can fail), and with the superblocks' devids
    each data chunk's order said is the kernel's."""
    wide = [c for c in truth["chunks"] if len(c["devids"]) > 6]
    res.check("wide: the kernel made chunks of more than 6 stripes in another order than devid",
              any(c["devids"] != sorted(c["devids"]) for c in wide), repr(truth["chunks"]))
    if what != "chunkall":
        return
    for c in wide:
        if not c["type"].startswith("DATA"):
            continue
        said = b"chunk [%d, " % c["logical"]
        line = [x for x in err.split(b"\n") if said in x and b"stripe order devids" in x]
        want = b"stripe order devids " + b",".join(b"%d" % d for d in c["devids"]) + b","
        res.check("wide: chunkall: chunk %d's order as the kernel's" % c["logical"],
                  len(line) == 1 and want in line[0], "%r, want %r" % (line, want))


def forged_vote(devs, truth):
    """@devs with two forged tree blocks (valid checksums) on one device of
    the newest raid10 metadata chunk: copies of a live block of that device
    put in free slots of its extent, their bytenr rewritten to what the
    next mirror pair holds there, so that each votes for that device at a
    wrong stripe index."""
    logicals = sorted(c["logical"] for c in truth["chunks"])
    meta = [c for c in truth["chunks"] if c["type"].startswith("METADATA")][-1]
    lo, hi = meta["logical"], ([x for x in logicals if x > meta["logical"]] + [1 << 62])[0]
    pairs, sl, ns = len(meta["devids"]) // 2, 64 << 10, 16384
    devid = meta["devids"][0]
    img = bytearray(devs[devid])
    fsid = img[(64 << 10) + 0x20:(64 << 10) + 0x30]
    for off in range(1 << 20, len(img) - ns, 4096):
        bytenr, = struct.unpack_from("<Q", img, off + 0x30)
        if img[off + 32:off + 48] != fsid or not lo <= bytenr < hi:
            continue
        nr, within = divmod(bytenr - lo, sl)
        row, pair = divmod(nr, pairs)
        start = off - within
        forged = 0
        for slot in range(start, start + 64 * sl, ns):  # this row or a later, unused one
            if forged == 2 or any(img[slot:slot + ns]):
                continue
            blk = bytearray(img[off:off + ns])
            r, inside = divmod(slot - start, sl)
            fake = lo + ((row + r) * pairs + (pair + 1) % pairs) * sl + inside
            struct.pack_into("<Q", blk, 0x30, fake)
            blk[0:4] = struct.pack("<I", imgtest.crc32c(bytes(blk[32:])))
            img[slot:slot + ns] = blk
            forged += 1
        if forged:
            out = dict(devs)
            out[devid] = bytes(img)
            return out
    raise RuntimeError("no place to forge a vote")


def wide_hostile(kv, res, cli, work, gm, devs, truth, view):
    paths = write_devs(work, gm.damage(forged_vote(devs, truth), "chunkall"), "forged")
    order = sorted(paths, reverse=True)
    rc, out, err = imgtest.run_cli(cli, ["walk", "--json", "--hash"] + [paths[i] for i in order],
                                   timeout=TIMEOUT)
    res.check("wide: hostile: a forged block voting for a wrong order: exit 1", rc == 1,
              "exit %r: %s" % (rc, err[-500:]))
    res.check("wide: hostile: the forged vote outvoted, said",
              re.search(rb"by \d+ votes, [1-9]\d* votes for another place outvoted",
                        err) is not None, err[-1500:])
    res.problems("wide: hostile: every record equal to the kernel's view",
                 ts.walk_equal(kv, ts.parse_jsonl(out) if rc in (0, 1) else [], view))
    wide_orders(res, truth, err, "chunkall")
    for p in paths.values():
        os.unlink(p)


def main():
    cli, testdata = sys.argv[1], sys.argv[2]
    sys.path.insert(0, testdata)
    import gen_salvage_multi as gm
    kv = imgtest.import_kview(testdata)
    res = imgtest.Tally()
    sets = {}
    with tempfile.TemporaryDirectory(prefix="salvage-multi.") as work:
        for name in CASES:
            d = os.path.join(testdata, "salvage-multi", name)
            truth = imgtest.load_json(os.path.join(d, "truth.json"))
            devs = {}
            for dev in truth["devices"]:
                p = imgtest.private_copy(os.path.join(d, "dev%d.img.zst" % dev["devid"]), work)
                with open(p, "rb") as f:
                    devs[dev["devid"]] = f.read()
                os.unlink(p)
                res.check("%s: truth.json: devid %d as its superblock says" % (name, dev["devid"]),
                          gm.dev_facts(devs[dev["devid"]]) == dev)
            view = imgtest.load_jsonl(os.path.join(d, "view.jsonl"))
            sets[name] = (devs, view, truth)
            for what in CASES[name]:
                paths = write_devs(work, gm.damage(devs, what), what)
                order = sorted(paths, reverse=True)
                said = SAID[what] + (STRIPED_SAID.get(what, []) if name == "striped" else []) + \
                    (WIDE_SAID[what] if name == "wide" else [])
                err = walk(kv, res, cli, "%s: %s, reverse devid order" % (name, what),
                           [paths[i] for i in order], view, said)
                if name == "wide":
                    wide_orders(res, truth, err, what)
                if what == "super":
                    walk(kv, res, cli, "%s: %s, devid order" % (name, what),
                         [paths[i] for i in sorted(paths)], view, said)
                for p in paths.values():
                    os.unlink(p)
        devs, view, _ = sets["raid1"]
        hostile(kv, res, cli, work, gm, devs, sets["striped"][0], view)
        devs, view, truth = sets["wide"]
        wide_hostile(kv, res, cli, work, gm, devs, truth, view)
        devs, view, _ = sets["striped"]
        damaged = gm.damage(devs, "super")
        del damaged[3]  # its raid10 mirror, devid 4, fits devid 3 as well
        paths = write_devs(work, damaged, "degraded")
        walk(kv, res, cli, "degraded: striped, every superblock zeroed, devid 3 absent",
             [paths[i] for i in (4, 1, 2)], view,
             [b"1 of 4 devices missing", b"the data checksums decide, devid 4",
              b"so the missing device is devid 3"])
    return res.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
