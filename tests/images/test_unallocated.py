#!/usr/bin/env python3
"""`btrfsimg unallocated` against btrfs-progs' trees and the kernel's usage.

    test_unallocated.py BTRFSIMG TESTDATA

For every image of testdata/scrub/ (testdata/gen_scrub.py: a whole-disk
MBR image with DUP metadata, a two-device RAID1 set), truth.json holds
what btrfs-progs dumped (dump-tree -t chunk: chunks and their stripes;
dump-tree -t extent: every EXTENT_ITEM and METADATA_ITEM) and what the
kernel said (`btrfs filesystem usage -b`). From those alone this test
works out every free range (per chunk copy: the chunk minus its extents;
per device: the space no chunk stripe covers; superblock copies left out)
and requires the CLI's map to be exactly that. The kernel's figures must
agree too: free bytes per block group type times copies, and the device
unallocated bytes (superblock copies added back). Then OUT: its size is
the map's total, and the pattern of a file written, synced and deleted
before the last unmount (its extent's logical address from FIEMAP) must be
found in OUT at offsets the map sends to exactly the physical places its
extent's copies were (chunk stripes) and the image holds it there. OUT
through '-' (standard output) is the same bytes. OUT is never overwritten
nor written through a link (an existing file or a link to one is read as
an image; a dangling link is refused). Prints 'N passed, M failed'.
"""
import hashlib, json, os, shutil, subprocess, sys, tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

CLI, TESTDATA = sys.argv[1], sys.argv[2]
tally = imgtest.Tally()
check = tally.check
SB = [65536, 64 << 20, 256 << 30]


def minus(ranges, holes):
    """[(a, b)] minus [(a, b)] (both sorted lists of half-open ranges)."""
    out = []
    for a, b in ranges:
        for h0, h1 in holes:
            if h1 <= a or h0 >= b:
                continue
            if h0 > a:
                out.append((a, h0))
            a = max(a, h1)
        if a < b:
            out.append((a, b))
    return out


def expected(t, devsize):
    """The free ranges as (kind, devid, physical, length, logical, mirror)."""
    ns = t["nodesize"]
    ext = sorted((e["logical"], e["logical"] + (ns if e["type"] == "METADATA_ITEM"
                                                  else e["offset"])) for e in t["extents"])
    sbh = [(s, s + 4096) for s in SB]
    res, cover = [], {}
    for c in t["chunks"]:
        kind = "data" if c["type"].split("|")[0] == "DATA" else "metadata"
        free = minus([(c["logical"], c["logical"] + c["length"])], ext)
        for i, s in enumerate(c["stripes"]):
            base = s["offset"] - c["logical"]
            cover.setdefault(s["devid"], []).append((s["offset"], s["offset"] + c["length"]))
            for a, b in free:
                for p0, p1 in minus([(a + base, b + base)], sbh):
                    res.append((kind, s["devid"], p0, p1 - p0, p0 - base, i + 1))
    for devid, size in devsize.items():
        for a, b in minus(minus([(0, size)], sorted(cover.get(devid, []))), sbh):
            res.append(("device", devid, a, b - a, None, 0))
    res.sort(key=lambda r: (r[1], r[2]))
    merged = []
    for r in res:
        if merged:
            m = merged[-1]
            if (m[0], m[1], m[5]) == (r[0], r[1], r[5]) and m[2] + m[3] == r[2] and \
                    (m[4] is None) == (r[4] is None) and (m[4] is None or m[4] + m[3] == r[4]):
                merged[-1] = (m[0], m[1], m[2], m[3] + r[3], m[4], m[5])
                continue
        merged.append(r)
    return merged


def sb_bytes(t, devsize, inside_kind):
    """Superblock bytes inside stripes of @inside_kind chunks (None: outside all)."""
    n = 0
    for devid, size in devsize.items():
        for s in SB:
            if s + 4096 > size:
                continue
            owner = None
            for c in t["chunks"]:
                for st in c["stripes"]:
                    if st["devid"] == devid and st["offset"] <= s < st["offset"] + c["length"]:
                        owner = "data" if c["type"].split("|")[0] == "DATA" else "metadata"
            if owner == inside_kind:
                n += 4096
    return n


def one(name, tmp):
    d = os.path.join(TESTDATA, "scrub", name)
    t = imgtest.load_json(os.path.join(d, "truth.json"))
    imgs = [imgtest.unzstd(os.path.join(d, f), os.path.join(tmp, f[:-4]))
            for f in sorted(os.listdir(d)) if f.endswith(".img.zst")]
    off = t["partition_offset"]
    devsize = {int(k): v for k, v in t["devices"].items()}
    for i, p in enumerate(imgs):
        check("%s: image %d holds the filesystem's device size" % (name, i + 1),
              os.path.getsize(p) - off == devsize[i + 1], os.path.getsize(p))
    out = os.path.join(tmp, "unalloc.bin")
    rc, so, err = imgtest.run_cli(CLI, ["unallocated", "--json", "-q", *imgs, out], timeout=300)
    lines = [json.loads(l) for l in so.decode().splitlines() if l.strip()]
    rng = [l for l in lines if l["type"] == "range"]
    check(name + ": ran (exit 0 or 1: the images are damaged)", rc in (0, 1) and rng,
          "exit %s %s" % (rc, err.decode(errors="replace")[-300:]))
    got = [(r["kind"], r["devid"], r["physical"], r["length"], r["logical"], r["mirror"])
           for r in rng]
    want = expected(t, devsize)
    check(name + ": the map equals progs' chunks minus extents (%d ranges)" % len(want),
          got == want, "missing %s\n    extra %s" % ([w for w in want if w not in got][:5],
                                                   [g for g in got if g not in want][:5]))
    # the kernel's figures
    u = t["usage"]
    for kind, groups in (("data", ["data"]), ("metadata", ["metadata", "system"])):
        free = sum((u["groups"][g]["size"] - u["groups"][g]["used"]) *
                   (2 if u["groups"][g]["profile"] in ("DUP", "RAID1") else 1)
                   for g in groups if g in u["groups"])
        have = sum(r["length"] for r in rng if r["kind"] == kind) + sb_bytes(t, devsize, kind)
        check("%s: %s free bytes (all copies) equal the kernel's size - used" % (name, kind),
              have == free, "have %d kernel %d" % (have, free))
    have = sum(r["length"] for r in rng if r["kind"] == "device") + sb_bytes(t, devsize, None)
    check(name + ": device bytes outside chunks equal the kernel's device unallocated",
          have == u["device_unallocated"], "have %d kernel %d" % (have, u["device_unallocated"]))
    # OUT and the planted pattern
    total = sum(r["length"] for r in rng)
    check(name + ": OUT holds every listed byte", os.path.getsize(out) == total,
          "%d vs %d" % (os.path.getsize(out), total))
    data = open(out, "rb").read()
    head = t["planted"]["head"].encode()
    hits, at = [], data.find(head)
    while at >= 0:
        hits.append(at)
        at = data.find(head, at + 1)
    mapped = set()
    for h in hits:
        r = [r for r in rng if r["out_offset"] <= h < r["out_offset"] + r["length"]][0]
        mapped.add((r["devid"], r["physical"] + h - r["out_offset"]))
    pl = t["planted"]["logical"]
    c = [c for c in t["chunks"] if c["logical"] <= pl < c["logical"] + c["length"]][0]
    where = {(s["devid"], s["offset"] + pl - c["logical"]) for s in c["stripes"]}
    check(name + ": the deleted file's pattern is in OUT at every copy of its extent",
          mapped == where, "mapped %s expected %s" % (sorted(mapped), sorted(where)))
    for devid, phys in sorted(where):
        with open(imgs[devid - 1], "rb") as f:
            f.seek(off + phys)
            check("%s: the image holds the pattern at device %d physical %d" %
                  (name, devid, phys), f.read(len(head)) == head)
    # image_offset: where a range lies in its image file (the partition's
    # start added), so a hit in OUT is found in the evidence file itself
    bad = [r for r in rng if r.get("image") != imgs[r["devid"] - 1]
           or r.get("image_offset") != off + r["physical"]]
    check(name + ": each range's image and image_offset (partition start + physical)",
          rng and not bad, bad[:3])
    for h in hits[:4]:
        r = [r for r in rng if r["out_offset"] <= h < r["out_offset"] + r["length"]][0]
        with open(r.get("image") or imgs[0], "rb") as f:
            f.seek((r.get("image_offset") or 0) + h - r["out_offset"])
            check("%s: the pattern at OUT byte %d is at image_offset + %d of its image" %
                  (name, h, h - r["out_offset"]), f.read(len(head)) == head)
    return out, imgs


def planted_out(name, imgs, tmp):
    """OUT a link: to a file it is read as an image (exit 2, the file
    untouched); dangling, it is refused (exit 2) and its target not made."""
    victim, made = os.path.join(tmp, "victim"), os.path.join(tmp, "made")
    with open(victim, "wb") as f:
        f.write(b"precious\n")
    for what, target in (("to a file", victim), ("dangling", made)):
        link = os.path.join(tmp, "out-link-" + what)
        os.symlink(target, link)
        rc, _, err = imgtest.run_cli(CLI, ["unallocated", "-q", *imgs, link], timeout=300)
        with open(victim, "rb") as f:
            kept = f.read() == b"precious\n"
        check("%s: OUT a link %s: exit 2, nothing written through it" % (name, what),
              rc == 2 and kept and not os.path.exists(made) and os.path.islink(link),
              "exit %s %s" % (rc, err[-300:]))


def main():
    tmp = tempfile.mkdtemp(prefix="scrub-unalloc-")
    try:
        names = sorted(n for n in os.listdir(os.path.join(TESTDATA, "scrub"))
                       if os.path.isdir(os.path.join(TESTDATA, "scrub", n)))
        for name in names:
            sub = tempfile.mkdtemp(dir=tmp)
            out, imgs = one(name, sub)
            if name == names[0]:
                h = hashlib.sha256()
                p = subprocess.Popen([CLI, "unallocated", "-q", *imgs, "-"],
                                     stdout=subprocess.PIPE)
                for blk in iter(lambda: p.stdout.read(1 << 20), b""):
                    h.update(blk)
                p.wait()
                check(name + ": OUT '-' writes the same bytes to standard output",
                      h.hexdigest() == imgtest.sha256_file(out))
                rc, _, err = imgtest.run_cli(CLI, ["unallocated", *imgs, out], timeout=300)
                check(name + ": an existing OUT is read as an image, never overwritten",
                      rc == 2 and os.path.getsize(out) > 0, "exit %s %s" % (rc, err))
                planted_out(name, imgs, sub)
            shutil.rmtree(sub)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tally.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
