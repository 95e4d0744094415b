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
Degraded: one device of the raid1 set alone, every superblock zeroed,
still reads whole, the other named missing; the striped set without devid
3, every superblock zeroed: devid 4, which the tree blocks place as well
under devid 3 (its raid10 mirror), is told apart by the data checksums,
and the raid5 data is read through the parity.
"""
import os
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
NAMES = {1: "z-first", 2: "a-second", 3: "m-third", 4: "b-fourth"}
# what each set must open from (striped: see the man page, SALVAGE)
CASES = {
    "raid1": ("super", "super1", "chunk", "chunkall", "both", "bothall"),
    "striped": ("super", "super1", "chunk", "chunkall", "both", "bothall"),
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
            sets[name] = (devs, view)
            for what in CASES[name]:
                paths = write_devs(work, gm.damage(devs, what), what)
                order = sorted(paths, reverse=True)
                said = SAID[what] + (STRIPED_SAID.get(what, []) if name == "striped" else [])
                walk(kv, res, cli, "%s: %s, reverse devid order" % (name, what),
                     [paths[i] for i in order], view, said)
                if what == "super":
                    walk(kv, res, cli, "%s: %s, devid order" % (name, what),
                         [paths[i] for i in sorted(paths)], view, said)
                for p in paths.values():
                    os.unlink(p)
        devs, view = sets["raid1"]
        hostile(kv, res, cli, work, gm, devs, sets["striped"][0], view)
        devs, view = sets["striped"]
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
