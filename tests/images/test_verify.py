#!/usr/bin/env python3
"""`btrfsimg verify` (offline scrub) against the kernel's own scrub.

    test_verify.py BTRFSIMG TESTDATA

testdata/scrub/<name>/ (made by testdata/gen_scrub.py) holds kernel-made
images damaged at chosen sectors and, in truth.json, what was damaged
(devid, physical offset from btrfs-map-logical, mirror) and what the
kernel's `btrfs scrub start -B -d -R -r` counted per device on a loop
mount of the same damaged images. The CLI must:
  - count per device exactly what the kernel counted (data and tree bytes
    scrubbed, csum, verify, read and super errors, no_csum, uncorrectable);
  - list as damage exactly the damaged sectors and blocks (the nodatasum
    one never), each at the recorded device, physical offset and mirror,
    correctable unless no other copy survives (worked out from the damage
    list and the profile, not from the CLI);
  - exit 1.
The clean kernel-made images of testdata/images/ (every profile, RAID5/6
included, where parity is checked too) must verify clean with exit 0, and
a damaged RAID5 parity unit, found from the chunk item the kernel wrote
and the row arithmetic of the kernel's raid56 mapping, must be reported.
Prints 'N passed, M failed'.
"""
import json, os, shutil, subprocess, sys, tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

CLI, TESTDATA = sys.argv[1], sys.argv[2]
tally = imgtest.Tally()
check = tally.check
COUNTERS = ["data_bytes_scrubbed", "tree_bytes_scrubbed", "read_errors", "csum_errors",
            "verify_errors", "no_csum", "super_errors", "uncorrectable_errors"]
KIND = {"data": "data-csum", "tree-csum": "tree-csum", "tree-header": "tree-header"}


def images_of(d, tmp):
    """The image paths of a scrub or images/ directory, decompressed."""
    names = sorted(f for f in os.listdir(d) if f.endswith(".img.zst"))
    return [imgtest.unzstd(os.path.join(d, f), os.path.join(tmp, f[:-4])) for f in names]


def verify(imgs, extra=()):
    rc, out, err = imgtest.run_cli(CLI, ["verify", "--json", "--examples", "0", *extra, *imgs],
                                   timeout=300)
    lines = [json.loads(l) for l in out.decode().splitlines() if l.strip()]
    return rc, lines, err.decode(errors="replace")


def expected_damage(t):
    """(kind, devid, physical, mirror, logical, correctable) per damaged range."""
    copies = {}
    for c in t["chunks"]:
        copies[c["logical"]] = (c["logical"] + c["length"], len(c["stripes"]))
    res = set()
    for c in t["corruptions"]:
        if c["what"] == "nodatasum":
            continue
        ncopies = [n for start, (end, n) in copies.items() if start <= c["logical"] < end][0]
        bad = {x["mirror"] for x in t["corruptions"] if x["logical"] == c["logical"]}
        correctable = ncopies > len(bad)
        res.add((KIND[c["what"]], c["devid"], c["physical"], c["mirror"], c["logical"],
                 correctable))
    return res


def one_scrub_image(name, tmp):
    d = os.path.join(TESTDATA, "scrub", name)
    t = imgtest.load_json(os.path.join(d, "truth.json"))
    imgs = images_of(d, tmp)
    rc, lines, err = verify(imgs)
    check(name + ": exit 1 (damage found)", rc == 1, "exit %s: %s" % (rc, err))
    devs = {str(l["devid"]): l for l in lines if l.get("type") == "device"}
    probs = [] if t["scrub"] else ["truth.json holds no kernel scrub counters"]
    if set(devs) != set(t["scrub"]):
        probs.append("devices: have %s, kernel %s" % (sorted(devs), sorted(t["scrub"])))
    for devid, k in sorted(t["scrub"].items()):
        have = devs.get(devid)
        if not have:
            probs.append("device %s not reported" % devid)
            continue
        for f in COUNTERS:
            if have[f] != k[f]:
                probs.append("device %s %s: have %s, kernel %s" % (devid, f, have[f], k[f]))
        # what the kernel repaired is what was bad less what stayed bad
        fixed = (have["csum_errors"] + have["verify_errors"] + have["read_errors"] -
                 have["uncorrectable_errors"])
        if fixed != k["corrected_errors"]:
            probs.append("device %s correctable sectors %d, kernel corrected %d"
                         % (devid, fixed, k["corrected_errors"]))
    check(name + ": per-device counters equal the kernel's scrub", not probs and devs,
          "\n    ".join(probs) or "no devices")
    got = {(l["kind"], l["devid"], l["physical"], l["mirror"], l["logical"], l["correctable"])
           for l in lines if l.get("type") == "damage"}
    want = expected_damage(t)
    check(name + ": damaged ranges are exactly the corrupted ones (%d)" % len(want),
          got == want, "missing %s; extra %s" % (sorted(want - got), sorted(got - want)))
    # a second, shorter listing: the first N in device and physical order
    rc2, out2, _ = imgtest.run_cli(CLI, ["verify", "--json", "--examples", "1", *imgs],
                                   timeout=300)
    dmg = [json.loads(l) for l in out2.decode().splitlines() if '"damage"' in l]
    first = min(want, key=lambda w: (w[1], w[2]))
    check(name + ": --examples 1 lists the first damaged range in device order",
          len(dmg) == 1 and (dmg[0]["devid"], dmg[0]["physical"]) == (first[1], first[2]),
          "%s vs %s" % (dmg, first))
    # text output says the same
    rc3, out3, _ = imgtest.run_cli(CLI, ["verify", *imgs], timeout=300)
    txt = out3.decode()
    check(name + ": text output: exit 1, lists the damage", rc3 == 1 and "damage:" in txt
          and ("physical %d" % first[2]) in txt, txt[-800:])


def clean_images(tmp):
    """Every clean kernel-made image of testdata/images verifies clean."""
    root = os.path.join(TESTDATA, "images")
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if not os.path.isdir(d) or not any(f.endswith(".img.zst") and f.startswith("dev")
                                           for f in os.listdir(d)):
            continue
        sub = tempfile.mkdtemp(dir=tmp)
        imgs = [p for p in images_of(d, sub) if os.path.basename(p).startswith("dev")]
        rc, lines, err = verify(imgs)
        dev = [l for l in lines if l.get("type") == "device"]
        dmg = [l for l in lines if l.get("type") == "damage"]
        tree = sum(l["tree_bytes_scrubbed"] for l in dev if not l["missing"])
        ok = rc == 0 and not dmg and tree > 0
        extra = ""
        if name in ("raid5", "raid6"):
            par = sum(l["parity_bytes"] for l in dev)
            ok = ok and par > 0
            extra = ", parity checked (%d bytes)" % par
        check("clean %s: exit 0, no damage%s" % (name, extra), ok,
              "exit %s, %s, damage %s" % (rc, err.strip()[:300], dmg[:3]))
        shutil.rmtree(sub)


def sh(*args):
    return subprocess.run(list(args), capture_output=True, text=True).stdout


def parity_case(tmp):
    """A RAID5 P unit damaged: only a parity error there. Where P lies comes
    from btrfs-progs (the chunk item's stripes, btrfs-map-logical for the
    row's data units: P is on the remaining device at the same offset into
    its stripe), on read-only loop devices (root only)."""
    if os.geteuid() != 0 or not shutil.which("btrfs-map-logical"):
        print("skip raid5 parity damage: needs root and loop devices for btrfs-progs")
        return
    d = os.path.join(TESTDATA, "images", "raid5")
    imgs = images_of(d, tmp)
    loops = []
    try:
        for p in imgs:
            loops.append(sh("losetup", "-f", "--show", "-r", p).strip())
        sh("btrfs", "device", "scan", *loops)
        devid = {l: int(sh("btrfs", "inspect-internal", "dump-super", l)
                        .split("dev_item.devid")[1].split()[0]) for l in loops}
        chunks = sh("btrfs", "inspect-internal", "dump-tree", "-t", "chunk", loops[0])
        ext = sh("btrfs", "inspect-internal", "dump-tree", "-t", "extent", loops[0])
        blk = chunks.split("CHUNK_ITEM ")
        data = [b for b in blk[1:] if "type DATA|RAID5" in b][0]
        start, length = int(data.split(")")[0]), int(data.split("length ")[1].split()[0])
        stripes = {int(m.split()[3]): int(m.split()[5]) for m in
                   [x.strip() for x in data.splitlines() if x.strip().startswith("stripe ")]}
        logical = [int(x.split("(")[1].split()[0]) for x in ext.splitlines()
                   if "EXTENT_ITEM" in x and "key (" in x]
        used = [l for l in logical if start <= l < start + length][0]
        row = start + (used - start) // (2 * 65536) * (2 * 65536)
        units = []
        for unit in (row, row + 65536):
            out = sh("btrfs-map-logical", "-l", str(unit), "-b", "4096", loops[0])
            m = [x for x in out.splitlines() if x.startswith("mirror 1 ")][0].split()
            units.append((devid[m[7]], int(m[5])))
    finally:
        for l in loops:
            sh("btrfs", "device", "scan", "--forget", l)
            sh("losetup", "-d", l)
    pdev = ({1, 2, 3} - {u[0] for u in units}).pop()
    pphys = stripes[pdev] + (units[0][1] - stripes[units[0][0]])
    with open(imgs[pdev - 1], "r+b") as f:
        f.seek(pphys)
        b = f.read(64)
        f.seek(pphys)
        f.write(bytes(x ^ 0xA5 for x in b))
    rc, lines, err = verify(imgs)
    dmg = [(l["kind"], l["devid"], l["physical"]) for l in lines if l.get("type") == "damage"]
    dev = [l for l in lines if l.get("type") == "device"]
    other = sum(l["csum_errors"] + l["verify_errors"] + l["read_errors"] for l in dev)
    check("raid5: a damaged P unit (device %d physical %d, row %d) is one parity error there"
          % (pdev, pphys, row), rc == 1 and dmg == [("parity", pdev, pphys)] and other == 0,
          "exit %s damage %s other errors %d %s" % (rc, dmg, other, err[-300:]))


def truncated_case(tmp):
    """raid1 with device 2 cut short inside its last data chunk: every
    sector in use past the cut (from progs' chunk and extent items in
    truth.json) is a read error, correctable from device 1."""
    d = os.path.join(TESTDATA, "scrub", "raid1")
    t = imgtest.load_json(os.path.join(d, "truth.json"))
    imgs = images_of(d, tmp)
    last = max(t["chunks"], key=lambda c: c["logical"])
    s2 = [s for s in last["stripes"] if s["devid"] == 2][0]
    cut = s2["offset"] + 65536
    os.truncate(imgs[1], cut)
    want = 0
    for e in t["extents"]:
        if e["type"] != "EXTENT_ITEM" or not last["logical"] <= e["logical"] < \
                last["logical"] + last["length"]:
            continue
        for sec in range(e["logical"], e["logical"] + e["offset"], 4096):
            want += s2["offset"] + sec - last["logical"] >= cut
    rc, lines, err = verify(imgs)
    dev2 = [l for l in lines if l.get("type") == "device" and l["devid"] == 2][0]
    reads = [l for l in lines if l.get("type") == "damage" and l["kind"] == "read"]
    ok = rc == 1 and want > 0 and dev2["read_errors"] == want and len(reads) == want and \
        all(r["devid"] == 2 and r["physical"] >= cut and r["correctable"] for r in reads)
    check("raid1, device 2 truncated at %d: %d read errors past the cut, correctable"
          % (cut, want), ok, "exit %s read_errors %s listed %d %s"
          % (rc, dev2["read_errors"], len(reads), err[-200:]))


def missing_case(tmp):
    """raid1 with device 1 not given: reported missing (exit 1). Device 2
    holds the extent tree's only good copy, so its tree blocks are checked
    and counted as the kernel counted them (now none correctable); the
    csum tree's only good copies were on device 1, so each data chunk's
    stripe is reported unchecked, not passed."""
    d = os.path.join(TESTDATA, "scrub", "raid1")
    t = imgtest.load_json(os.path.join(d, "truth.json"))
    imgs = images_of(d, tmp)
    rc, lines, err = verify(imgs[1:])
    devs = {l["devid"]: l for l in lines if l.get("type") == "device"}
    k = t["scrub"]["2"]
    dev2 = devs.get(2, {})
    same = all(dev2.get(f) == k[f] for f in ("tree_bytes_scrubbed", "verify_errors"))
    unchecked = sorted(l["logical"] for l in lines if l.get("type") == "damage"
                       and l["kind"] == "unchecked")
    data = sorted(c["logical"] for c in t["chunks"] if c["type"].startswith("DATA"))
    trees = [l for l in lines if l.get("type") == "damage" and l["kind"].startswith("tree")]
    check("raid1 without device 1: exit 1, device 1 missing, device 2's tree blocks as the "
          "kernel counted, its data chunks unchecked",
          rc == 1 and devs.get(1, {}).get("missing") is True and same and
          unchecked == data and trees and not any(l["correctable"] for l in trees),
          "exit %s dev2 %s unchecked %s data chunks %s %s"
          % (rc, dev2, unchecked, data, err[-200:]))


def degraded_raid6_case(tmp):
    """raid6 of four devices, devices 3 and 4 not given: the output says
    what could not be checked, not just "no damage found": per missing
    device every stripe byte unchecked (the dev_item's bytes_used the
    kernel recorded, dump-super), and its tree blocks and data in use
    rebuilt from parity and checked: exactly the bytes the scrub of all
    four devices checks on it; parity whose row has a device missing is
    unchecked, as much as the full scrub checks."""
    d = os.path.join(TESTDATA, "images", "raid6")
    imgs = images_of(d, tmp)
    rc_full, full, _ = verify(imgs)
    rc, lines, err = verify(imgs[:2])
    fdev = {l["devid"]: l for l in full if l.get("type") == "device"}
    dev = {l["devid"]: l for l in lines if l.get("type") == "device"}
    summ = [l for l in lines if l.get("type") == "summary"]
    fsumm = [l for l in full if l.get("type") == "summary"]
    used = {}
    for n in (3, 4):
        with open(os.path.join(d, "dev%d.dump-super.txt" % n)) as f:
            used[n] = int(f.read().split("dev_item.bytes_used")[1].split()[0])
    bad = []
    for n in (3, 4):
        l, fl = dev.get(n, {}), fdev.get(n, {})
        checked = fl.get("data_bytes_scrubbed", 0) + fl.get("tree_bytes_scrubbed", 0)
        if not (l.get("missing") and l.get("unchecked_bytes") == used[n] and checked and
                l.get("rebuilt_bytes") == checked):
            bad.append((n, l, used[n], checked))
    par = sum(l.get("parity_bytes", 0) for l in fdev.values())
    gap = sum(l.get("parity_unchecked_bytes", 0) for l in dev.values())
    check("raid6 without devices 3 and 4: exit 1; each missing device's stripe bytes "
          "unchecked (bytes_used %s), its tree blocks and data rebuilt from parity and "
          "checked as the full scrub checks them; %d bytes of parity unchecked" % (used, par),
          rc == 1 and rc_full == 0 and not bad and par and gap == par and
          summ and summ[0]["complete"] is False and fsumm and fsumm[0]["complete"] is True and
          summ[0]["unchecked_bytes"] == used[3] + used[4],
          "exit %s/%s %s parity %d vs %d %s %s" % (rc, rc_full, bad, gap, par, summ, err[-200:]))
    rc, out, _ = imgtest.run_cli(CLI, ["verify", *imgs[:2]], timeout=300)
    txt = out.decode()
    check("raid6 without devices 3 and 4, text: says what was not checked, never a bare "
          "'no damage found'", rc == 1 and "not checked: %d bytes" % (used[3] + used[4]) in txt
          and "no damage found\n" not in txt and
          "no damage found in what could be checked" in txt, txt[-600:])


def main():
    tmp = tempfile.mkdtemp(prefix="scrub-test-")
    try:
        for name in sorted(os.listdir(os.path.join(TESTDATA, "scrub"))):
            if os.path.isdir(os.path.join(TESTDATA, "scrub", name)):
                sub = tempfile.mkdtemp(dir=tmp)
                one_scrub_image(name, sub)
                shutil.rmtree(sub)
        clean_images(tmp)
        sub = tempfile.mkdtemp(dir=tmp)
        parity_case(sub)
        truncated_case(tempfile.mkdtemp(dir=tmp))
        missing_case(tempfile.mkdtemp(dir=tmp))
        degraded_raid6_case(tempfile.mkdtemp(dir=tmp))
        rc, _, err = imgtest.run_cli(CLI, ["verify"])
        check("verify without an image: usage error (exit 2)", rc == 2, err)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tally.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
