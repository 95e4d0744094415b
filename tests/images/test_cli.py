#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_cli.py: the command line itself, on committed images.

    test_cli.py BTRFSIMG TESTDATA

What the binary accepts is read from the binary (`btrfsimg --help` for the
commands, `btrfsimg --list-options CMD` for each command's options, the
options section of `CMD --help` for which take a value), so that neither
the tests nor the documentation can drift from it:
  * usage: `CMD --help` and `help CMD` print the same usage, with exactly the
    command's options and an example; every line fits 80 columns;
  * every option a command does not take is refused: exit 2, nothing on
    stdout, "CMD does not take OPT" on stderr; option combinations that do
    nothing are refused too; --partition on an image that holds btrfs
    itself is an error, on a whole-disk image it works;
  * did-you-mean for misspelled commands and options, and the hint when
    options or images come before the command;
  * extract --path of a file, symlink or special file writes that one
    entry, whose bytes equal `cat` and the kernel's recorded sha256
    (testdata/files/*.view.jsonl); extract --inode of a directory writes
    exactly the kernel's subtree; every extract ends with a summary line;
  * walk --inode equals the matching subset of a full `walk --json --hash`
    (re-rooted) and the kernel's recorded view of it;
  * partitions --json of an image whose name holds a quote, a backslash, a
    newline, a tab and a non-UTF-8 byte: valid JSON, the exact name, and
    the table testdata/part/*.sfdisk records;
  * tools/btrfsimg.1 renders without warnings and documents every command
    with exactly its options; tools/btrfsimg.bash-completion offers exactly
    each command's options;
  * the container format names are the library's list: the completion,
    the manual, --format's help and error, and layers' text follow it.
Prints one line per check, then "N passed, M failed".
"""
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

CLI, TESTDATA = sys.argv[1], sys.argv[2]
TOOLS = os.path.join(imgtest.REPO, "tools")
MAN = os.path.join(TOOLS, "btrfsimg.1")
COMPLETION = os.path.join(TOOLS, "btrfsimg.bash-completion")
tally = imgtest.Tally()
check = tally.check
# Values the options are given where a value is needed (all valid ones).
VALUES = {"--json-u64": "string", "--subvol": "5", "--path": "x", "--inode": "5:256", "--inumbits": "48",
          "--mount-subvol": "5", "--partition": "1", "--offset": "0", "--super-mirror": "0",
          "--generation": "1", "--from": "5", "--to": "5", "--from-generation": "1", "--to-generation": "1", "--parent": "5", "--clone-src": "5", "--proto": "1",
          "--examples": "3", "--numbers": "nfsd", "--passphrase-file": "/dev/null",
          "--volume-key-file": "/dev/null", "--kdf-limit": "10", "--format": "raw",
          "--deleted": "5-256-1-00000000", "--mount-point": "C:",
          "--devid": "1", "--physical": "0", "--length": "1",
          "--logical": "0", "--image-offset": "0",
          "--output": "out.dfxml", "-f": "out.dfxml", "--fsid": "00000000"}
# The fields of the kernel's view that do not depend on how a path was reached.
STABLE = ("path", "ino", "subvol", "mode", "nlink", "uid", "gid", "size", "rdev", "target",
          "sha256")


def run(args, **kw):
    return imgtest.run_cli(CLI, args, **kw)


def fsencode(p):
    return p.encode("utf-8", "surrogateescape")


def short(p, n=40):
    """A path for a check's name: repr, cut to about @n characters."""
    r = repr(p)
    return r if len(r) <= n else r[:n - 4] + "...'"


def sha256(data):
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------ the truth

def commands():
    """The commands `btrfsimg --help` lists."""
    rc, out, _ = run(["--help"])
    text = out.decode()
    block = text.split("\ncommands:\n", 1)[1].split("\n\n", 1)[0] if "\ncommands:\n" in text else ""
    return [line.split()[0] for line in block.splitlines() if line.strip()]


def list_options(cmd):
    rc, out, err = run(["--list-options", cmd])
    return set(out.decode().split()) if rc == 0 else set()


def help_options(text):
    """{option: takes a value} from the options section of a usage text."""
    opts = {}
    section = text.split("\noptions:\n", 1)[1].split("\n\n", 1)[0] if "\noptions:\n" in text else ""
    for line in section.splitlines():
        m = re.match(r"  (-\w)?(?:, )?(--[\w-]+)( [A-Z:]+)?\s", line)
        if m:
            for o in (m[1], m[2]):
                if o:
                    opts[o] = bool(m[3])
    return opts


# ------------------------------------------------------------ usage

def test_usage(cmds):
    check("--help lists the commands", set(cmds) >= {"super", "subvols", "walk", "cat", "extract",
                                                     "bodyfile", "inodes", "collisions",
                                                     "partitions"}, cmds)
    rc, out, err = run([])
    check("no arguments: usage on stderr, exit 2", rc == 2 and b"usage:" in err and not out,
          (rc, err[:200]))
    takes_value = {}
    for cmd in cmds:
        rc, out, err = run([cmd, "--help"])
        text = out.decode()
        rc2, out2, _ = run(["help", cmd])
        check(f"{cmd} --help: exit 0, its usage", rc == 0 and text.startswith(f"usage: btrfsimg {cmd} "),
              (rc, text[:100], err[:200]))
        check(f"help {cmd} equals {cmd} --help", rc2 == 0 and out2 == out, (rc2, out2[:100]))
        opts = help_options(text)
        for o, v in opts.items():  # --deleted: a flag here, cat's takes an ID
            takes_value[o] = takes_value.get(o) or v
        check(f"{cmd} --help lists exactly the options it takes", set(opts) == list_options(cmd),
              sorted(set(opts) ^ list_options(cmd)))
        examples = text.split("\nexamples:\n", 1)[-1].split("\n\n", 1)[0].splitlines()
        check(f"{cmd} --help has an example", any(e.startswith(f"  btrfsimg {cmd} ") for e in examples),
              examples)
        wide = [line for line in text.splitlines() if len(line) > 80]
        check(f"{cmd} --help fits 80 columns", not wide, wide[:3])
    return takes_value


def test_rejections(cmds, takes_value, img, work):
    every = set().union(*(list_options(c) for c in cmds))
    check("the options are known", len(every) > 10 and "--inode" in every, sorted(every))
    for cmd in cmds:
        mine = list_options(cmd)
        tail = [img] + ([os.path.join(work, "never-made")] if cmd == "extract" else [])
        for opt in sorted(every - mine):
            args = [opt] + ([VALUES[opt]] if takes_value.get(opt) else [])
            for argv in ([cmd] + args + tail, [cmd] + tail + args):
                rc, out, err = run(argv)
                want = f"btrfsimg: {cmd} does not take {opt}".encode()
                check(f"{' '.join(argv[:len(args) + 1])} ... refused",
                      rc == 2 and not out and want in err, (rc, out[:100], err[:300]))
    check("nothing was extracted by a refused extract",
          not os.path.exists(os.path.join(work, "never-made")))


def test_accepted(cmds, takes_value):
    """Every option --list-options gives is one the parser takes: with
    --help after it, the usage and exit 0."""
    for cmd in cmds:
        bad = []
        for opt in sorted(list_options(cmd) - {"-h", "--help"}):
            args = [cmd, opt] + ([VALUES[opt]] if takes_value.get(opt) else []) + ["--help"]
            rc, out, err = run(args)
            if rc != 0 or not out.startswith(f"usage: btrfsimg {cmd} ".encode()):
                bad.append((opt, rc, err[:200]))
        check(f"{cmd} accepts every option it lists", list_options(cmd) and not bad, bad)


def expect_usage_error(name, argv, words):
    rc, out, err = run(argv)
    check(f"{name}: exit 2 naming {', '.join(words)}",
          rc == 2 and not out and all(w.encode() in err for w in words), (rc, out[:100], err[:300]))


def test_combinations(img, mbr, mbr_fsid, work):
    expect_usage_error("--inode with --path", ["walk", "--inode", "5:256", "--path", "x", img],
                       ["--inode", "--path"])
    expect_usage_error("--inode with --subvol", ["extract", "--subvol", "5", "--inode", "5:256", img,
                                                 os.path.join(work, "no")], ["--inode", "--subvol"])
    expect_usage_error("--partition with --offset", ["super", "--partition", "1", "--offset", "0", img],
                       ["--partition", "--offset"])
    expect_usage_error("-v with -q", ["subvols", "-v", "-q", img], ["-v", "-q"])
    expect_usage_error("walk --no-verify without --hash", ["walk", "--no-verify", img],
                       ["--no-verify", "--hash"])
    expect_usage_error("bodyfile --no-verify without --hash", ["bodyfile", "--no-verify", img],
                       ["--no-verify", "--hash"])
    expect_usage_error("walk --inumbits without --json", ["walk", "--inumbits", "48", img],
                       ["--inumbits", "--json"])
    expect_usage_error("walk --mount-subvol without --inumbits", ["walk", "--json", "--mount-subvol",
                                                                  "5", img], ["--mount-subvol"])
    expect_usage_error("cat with neither --path nor --inode", ["cat", img], ["--path", "--inode"])
    expect_usage_error("bad --inode value", ["cat", "--inode", "5:x", img], ["--inode", "5:x"])
    expect_usage_error("--inode objectid 0", ["walk", "--inode", "5:0", img], ["--inode"])
    expect_usage_error("missing value", ["walk", img, "--subvol"], ["--subvol", "needs a value"])
    expect_usage_error("value for a flag", ["walk", "--json=yes", img], ["--json", "no value"])
    expect_usage_error("extract without DESTDIR", ["extract", img], ["DESTDIR"])
    expect_usage_error("extract into a file", ["extract", img, img], ["not a directory"])
    expect_usage_error("no image", ["super"], ["no image"])
    expect_usage_error("--partition on an image that holds btrfs itself",
                       ["super", "--partition", "2", img], ["--partition", "holds btrfs itself"])
    rc, out, err = run(["super", "--json", "--partition", "1", mbr])
    got = json.loads(out) if rc == 0 else {}
    check("--partition 1 of a whole-disk image: the kernel's fsid", got.get("fsid") == mbr_fsid,
          (rc, got.get("fsid"), mbr_fsid, err[-300:]))


def test_suggestions(img):
    for typo, want in (("supr", "super"), ("wlak", "walk"), ("colisions", "collisions"),
                       ("extrct", "extract"), ("partition", "partitions")):
        expect_usage_error(f"command '{typo}'", [typo, img], [f"did you mean '{want}'"])
    rc, out, err = run(["xyzzy", img])
    check("no suggestion for a word far from every command",
          rc == 2 and b"unknown command 'xyzzy'" in err and b"did you mean" not in err, err[:300])
    for cmd, typo, want in (("walk", "--jsn", "--json"), ("walk", "-json", "--json"),
                            ("extract", "--indoe", "--inode"),
                            ("collisions", "--mount-subovl", "--mount-subvol"),
                            ("inodes", "--inumbist", "--inumbits")):
        expect_usage_error(f"{cmd} {typo}", [cmd, typo, img], [f"did you mean {want}?"])
    expect_usage_error("an abbreviation two options share", ["walk", "--p", "x", img],
                       ["ambiguous", "--path", "--partition"])
    for argv, hint in ((["--json", img, "super"], f"btrfsimg super --json {img}"),
                       ([img, "walk", "--hash"], f"btrfsimg walk {img} --hash"),
                       (["-v", "a b.img", "subvols"], "btrfsimg subvols -v 'a b.img'")):
        shown = " ".join("IMAGE" if a == img else a for a in argv)
        expect_usage_error(f"hint for {shown}", argv, ["the command comes first: " + hint])


# ------------------------------------------------------------ extract

SUMMARY = re.compile(rb"btrfsimg: extract: (\d+) entr(?:y|ies) \((\d+) bytes of file contents\) "
                     rb"into '.*', (\d+) errors?(?:, \d+ not written: their place in DESTDIR "
                     rb"taken \(not damage\))?\n$", re.S)


def summary(err):
    m = SUMMARY.search(err)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def entry_problems(path, r, data_of):
    """What differs between the extracted @path and the kernel's record @r."""
    st = os.lstat(path)
    if stat.S_IFMT(st.st_mode) != stat.S_IFMT(r["mode"]):
        return [f"type {oct(st.st_mode)}, kernel {oct(r['mode'])}"]
    bad = []
    if not stat.S_ISLNK(st.st_mode) and (st.st_mode & 0o7777) != (r["mode"] & 0o7777):
        bad.append(f"mode {oct(st.st_mode)}, kernel {oct(r['mode'])}")
    if stat.S_ISREG(st.st_mode):
        with open(path, "rb") as f:
            data = f.read()
        if sha256(data) != r["sha256"]:
            bad.append("sha256 differs from the kernel's")
        if data_of is not None and data != data_of:
            bad.append("bytes differ from cat's")
    elif stat.S_ISLNK(st.st_mode) and os.readlink(path) != fsencode(r["target"]):
        bad.append(f"target {os.readlink(path)!r}, kernel {r['target']!r}")
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        rdev = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        if rdev != r["rdev"]:
            bad.append(f"rdev {rdev}, kernel {r['rdev']}")
    return bad


def one_entry(r):
    """Can this record be extracted here (device nodes need root)?"""
    t = stat.S_IFMT(r["mode"])
    return t not in (stat.S_IFCHR, stat.S_IFBLK) or os.geteuid() == 0


def test_extract_path(name, img, view, picks, work):
    """extract --path of single files, symlinks and special files."""
    recs = {r["path"]: r for r in view}
    for p in picks:
        r = recs[p]
        if not one_entry(r):
            continue
        dest = tempfile.mkdtemp(dir=work)
        rc, out, err = run(["extract", "--path", fsencode(p), img, dest])
        base = fsencode(p).rsplit(b"/", 1)[-1]
        names = os.listdir(os.fsencode(dest))
        data_of = None
        if stat.S_ISREG(r["mode"]):
            _, data_of, _ = run(["cat", "--path", fsencode(p), img])
        ok = rc == 0 and names == [base]
        bad = entry_problems(os.path.join(os.fsencode(dest), base), r, data_of) if ok else []
        size = r["size"] if stat.S_ISREG(r["mode"]) else 0
        check(f"{name}: extract --path {short(p)}: that one entry, as the kernel shows it",
              ok and not bad, (rc, names, bad, err[-300:]))
        check(f"{name}: extract --path {short(p)}: summary 1 entry, {size} bytes, 0 errors",
              summary(err) == (1, size, 0), err[-300:])
        rc, out, err = run(["extract", "--path", fsencode(p), img, dest])
        check(f"{name}: extract --path {short(p)} again: exists, a clash, not damage: exit 2, "
              f"0 errors, 1 not written", rc == 2 and summary(err) == (0, 0, 0) and
              err.rstrip().endswith(b", 1 not written: their place in DESTDIR taken "
                                    b"(not damage)"), (rc, err[-300:]))
        shutil.rmtree(dest)


def subtree(view, top):
    """The kernel's records under path @top ("" the top level), with paths
    relative to it ("" for @top itself)."""
    res = []
    for r in view:
        if not top:
            res.append(dict(r))
        elif r["path"] == top or r["path"].startswith(top + "/"):
            res.append(dict(r, path=r["path"][len(top) + 1:]))
    return res


def test_extract_inode(name, img, view, top, work):
    """extract --inode of a directory: exactly the kernel's subtree."""
    start = next(r for r in view if r["path"] == top)
    spec = f"{start['subvol']}:{start['ino']}"
    dest = os.path.join(work, "inode-" + spec.replace(":", "-"))
    rc, out, err = run(["extract", "--inode", spec, img, dest])
    want = subtree(view, top)
    got = set()
    for root, dirs, files in os.walk(os.fsencode(dest)):
        for n in dirs + files:
            got.add(os.path.relpath(os.path.join(root, n), os.fsencode(dest)))
    expect = {fsencode(r["path"]) for r in want if r["path"]}
    bad = []
    for r in want:
        if r["path"] and fsencode(r["path"]) in got and one_entry(r):
            bad += [(r["path"], b) for b in
                    entry_problems(os.path.join(os.fsencode(dest), fsencode(r["path"])), r, None)]
    check(f"{name}: extract --inode {spec} ({top}): exactly the kernel's {len(expect)} paths",
          rc == 0 and got == expect and not bad,
          (rc, sorted(got ^ expect)[:5], bad[:5], err[-300:]))
    st = os.stat(dest) if os.path.isdir(dest) else None
    check(f"{name}: extract --inode {spec}: DESTDIR has the start's mode and mtime",
          st and (st.st_mode & 0o7777) == (start["mode"] & 0o7777)
          and st.st_mtime_ns == start["mtime"][0] * 10**9 + start["mtime"][1],
          (st and oct(st.st_mode), oct(start["mode"]), st and st.st_mtime_ns, start["mtime"]))
    files = sum(r["size"] for r in want if stat.S_ISREG(r["mode"]))
    check(f"{name}: extract --inode {spec}: summary {len(expect)} entries, 0 errors",
          summary(err) is not None and summary(err)[0] == len(expect) and summary(err)[2] == 0
          and summary(err)[1] <= files, (summary(err), files, err[-300:]))
    shutil.rmtree(dest, ignore_errors=True)


def test_extract_inode_file(name, img, view, path, work):
    """extract --inode of a file: one entry under its name."""
    r = next(r for r in view if r["path"] == path)
    dest = tempfile.mkdtemp(dir=work)
    rc, out, err = run(["extract", "--inode", f"{r['subvol']}:{r['ino']}", img, dest])
    base = fsencode(path).rsplit(b"/", 1)[-1]
    names = os.listdir(os.fsencode(dest))
    bad = entry_problems(os.path.join(os.fsencode(dest), base), r, None) if names == [base] else []
    check(f"{name}: extract --inode {r['subvol']}:{r['ino']} ({short(path)}): one entry, its name",
          rc == 0 and names == [base] and not bad, (rc, names, bad, err[-300:]))
    shutil.rmtree(dest)


def test_nothing_done(img, work):
    dest = os.path.join(work, "nothing")
    rc, out, err = run(["extract", "--path", "no/such/file", img, dest])
    check("extract of a missing path: exit 2 and a summary", rc == 2 and summary(err) is not None
          and summary(err)[0] == 0, (rc, err[-300:]))
    rc, out, err = run(["walk", "--inode", "5:999999", img])
    check("walk --inode of a missing inode: exit 2", rc == 2 and not out and err, (rc, err[-300:]))


# ------------------------------------------------------------ walk --inode

def walk_json(args, img):
    rc, out, err = run(["walk", "--json", "--hash"] + args + [img])
    return rc, [json.loads(line) for line in out.splitlines()] if rc == 0 else [], err


def test_walk_inode(name, img, view, full, top):
    start = next(r for r in full if r["path"] == top)
    spec = f"{start['subvol']}:{start['ino']}"
    rc, got, err = walk_json(["--inode", spec], img)
    want = subtree(full, top)
    # the start is reached without its parent: no d_ino, its own directory
    # as the parent of the connectable handle
    strip = ("d_ino", "handle_conn")
    ok = rc == 0 and len(got) == len(want) and got[1:] == want[1:] and got and \
        {k: v for k, v in got[0].items() if k not in strip} == \
        {k: v for k, v in want[0].items() if k not in strip} and got[0]["d_ino"] is None
    diff = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    check(f"{name}: walk --inode {spec} ({top or '.'}): the full walk's {len(want)} records",
          ok, (rc, len(got), len(want), diff, err[-300:]))
    kernel = [{k: r.get(k) for k in STABLE} for r in subtree(view, top)]
    mine = [{k: r.get(k) for k in STABLE} for r in got]
    check(f"{name}: walk --inode {spec}: the kernel's view of it", kernel == mine,
          next(((a, b) for a, b in zip(kernel, mine) if a != b), (len(kernel), len(mine))))


def test_walk_file(name, img, full, path):
    """walk --path FILE: the one record is named as the file, not ""."""
    rc, got, err = walk_json(["--path", path], img)
    want = [dict(r, path=path.rsplit("/", 1)[-1]) for r in full if r["path"] == path]
    check(f"{name}: walk --path {path}: the file's record under its name",
          rc == 0 and want and [{k: r.get(k) for k in STABLE} for r in got] ==
          [{k: r.get(k) for k in STABLE} for r in want], (rc, got[:1], err[-300:]))


# ------------------------------------------------------------ partitions

def test_partitions(src, sfdisk, work):
    weird = os.path.join(os.fsencode(work), b'we"ird\\ \n\t\xff name.img')
    shutil.copyfile(src, weird)
    rc, out, err = run(["partitions", "--json", weird])
    try:
        recs = [json.loads(line) for line in out.decode().splitlines()]
    except ValueError as e:
        recs = None
        err += str(e).encode()
    check("partitions --json of a weird file name: valid JSON", rc == 0 and recs, (rc, out[:300], err))
    table = []
    with open(sfdisk) as f:
        for line in f:
            m = re.search(r"start=\s*(\d+), size=\s*(\d+)", line)
            if m:
                table.append((int(m[1]) * 512, int(m[2]) * 512))
    got = [(r["offset"], r["size"]) for r in recs or []]
    check("partitions --json: the table sfdisk recorded", got == table, (got, table))
    names = {r["image"].encode("utf-8", "surrogateescape") for r in recs or []}
    check("partitions --json: the exact file name", names == {weird}, (names, weird))
    nums = [r["number"] for r in recs or []]
    check("partitions --json: numbers 1..N", nums == list(range(1, len(table) + 1)), nums)


# ------------------------------------------------------------ documentation

def options_in(text):
    """Option names in roff source (\\- is a minus)."""
    text = text.replace("\\-", "-")
    return set(re.findall(r"(?<![\w\\-])(--[a-z][a-z0-9-]*[a-z0-9]|-[a-z])(?![\w-])", text))


def man_sections(src):
    """{".SH NAME" or ".SS NAME": its lines}."""
    sections, cur = {}, None
    for line in src.splitlines():
        if line.startswith((".SH ", ".SS ")):
            cur = line.split(None, 1)[0] + " " + line.split(None, 1)[1].strip('"')
            sections[cur] = []
        elif cur:
            sections[cur].append(line)
    return sections


def test_man(cmds):
    if shutil.which("man"):
        env = dict(os.environ, MANWIDTH="80")
        p = subprocess.run(["man", "--warnings", "-l", MAN], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        check("btrfsimg.1 renders without warnings", p.returncode == 0 and not p.stderr
              and b"EXIT STATUS" in p.stdout, (p.returncode, p.stderr[-300:]))
    else:
        print("skip btrfsimg.1 rendering: man is not installed")
    with open(MAN) as f:
        src = f.read()
        sections = man_sections(src)
    version = run(["--version"])[1].decode(errors="replace").split()
    th = re.search(r'^\.TH BTRFSIMG 1 "[^"]*" "btrfsimg ([^"]*)"', src, re.M)
    check("btrfsimg.1: the version --version prints",
          th and version and th.group(1) == version[-1], (th and th.group(1), version))
    for cmd in cmds:
        text = "\n".join(sections.get(".SS " + cmd, []))
        doc, mine = options_in(text), list_options(cmd)
        check(f"btrfsimg.1: {cmd} names exactly its options", text and doc == mine,
              (sorted(mine - doc), sorted(doc - mine)))
        named, listing = [], False
        for line in sections.get(".SS " + cmd, []):
            listing = line == "Options:" or (listing and line.startswith(".BR "))
            named += options_in(line) if listing else []
        twice = sorted({o for o in named if named.count(o) > 1})
        check(f"btrfsimg.1: {cmd} lists each option once", not twice, twice)
    every = set().union(*(list_options(c) for c in cmds))
    items, lines = set(), sections.get(".SH OPTIONS", [])
    for i, line in enumerate(lines[:-1]):
        if line == ".TP":
            items |= options_in(lines[i + 1])
    check("btrfsimg.1: every option has an item under OPTIONS", every <= items, sorted(every - items))
    check("btrfsimg.1: OPTIONS has no option the binary lacks", items - every <= {"--version"},
          sorted(items - every))
    status = "\n".join(sections.get(".SH EXIT STATUS", []))
    check("btrfsimg.1: exit status 0, 1 and 2", all(f".B {n}\n" in status for n in "012"), status[:200])
    root = os.path.dirname(TOOLS)
    with open(os.path.join(root, "meson.build")) as f:
        installed = re.findall(r"'include/(\w+\.h)'", f.read().split("install_headers(", 1)[1]
                               .split(")", 1)[0])
    with open(os.path.join(root, "README.md")) as f:
        readme = f.read()
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
    check("README: the count and names of the installed headers",
          installed and f"its {words.get(len(installed))} headers" in readme
          and f"{words.get(len(installed)).capitalize()} public headers" in readme
          and all(f"`include/{h}`" in readme for h in installed), installed)
    examples = "\n".join(sections.get(".SH EXAMPLES", []))
    missing = [c for c in cmds if f".B btrfsimg {c} " not in examples]
    check("btrfsimg.1: an example of every command", not missing, missing)


def complete(words):
    """COMPREPLY of the completion for the command line @words (the last
    one being completed)."""
    script = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _btrfsimg; '
              'printf "%s\\n" "${COMPREPLY[@]}"')
    p = subprocess.run(["bash", "-c", script, "bash", COMPLETION] + words, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    return set(p.stdout.decode().split()) if p.returncode == 0 else {"<failed>"}


def test_completion(cmds):
    with open(COMPLETION) as f:
        src = f.read()
    lists = dict(re.findall(r'^\s*([a-z-]+)\)\s*opts="([^"]*)"', src, re.M))
    m = re.search(r'local commands="([^"]*)"', src)
    listed = set(m[1].split()) if m else set()
    check("completion: every command", set(cmds) <= listed, sorted(set(cmds) - listed))
    for cmd in cmds:
        mine, offered = list_options(cmd), set(lists.get(cmd, "").split())
        check(f"completion: {cmd}'s options, exactly", mine == offered,
              (sorted(mine - offered), sorted(offered - mine)))
        words = lists.get(cmd, "").split()
        check(f"completion: {cmd} offers each option once", len(words) == len(set(words)),
              sorted({w for w in words if words.count(w) > 1}))
    if not shutil.which("bash"):
        print("skip completion runs: bash is not installed")
        return
    check("completion runs: btrfsimg su<TAB>", complete(["btrfsimg", "su"]) == {"super", "subvols"},
          complete(["btrfsimg", "su"]))
    for cmd in cmds:
        got = complete(["btrfsimg", cmd, "-"])
        check(f"completion runs: btrfsimg {cmd} -<TAB>", got == list_options(cmd),
              sorted(got ^ list_options(cmd)))


def test_formats():
    """The container formats are one list, the library's (btrfsimg_format_name,
    printed by the hidden `btrfsimg --list-formats`): the completion asks
    the binary for them after --format, the manual's --format item names
    exactly them, and the layers text and --format's help each of them."""
    rc, out, err = run(["--list-formats"])
    formats = out.decode().split()
    check("--list-formats: the library's formats", rc == 0 and "raw" in formats
          and "auto" not in formats and len(formats) == len(set(formats)), (rc, formats, err))
    with open(COMPLETION) as f:
        src = f.read()
    check("completion: --format asks the binary (--list-formats), no list of its own",
          "--list-formats" in src and not re.search(r"\bqcow2\b", src), "")
    if shutil.which("bash"):
        got = complete([CLI, "walk", "--format", ""])
        check("completion runs: btrfsimg walk --format <TAB>: the library's formats",
              got == set(formats), sorted(got))
        got = complete([CLI, "walk", "--format", "vh"])
        check("completion runs: btrfsimg walk --format vh<TAB>", got == {"vhd", "vhdx"},
              sorted(got))
    with open(MAN) as f:
        lines = f.read().replace("\\-", "-").splitlines()
    at = [i for i, line in enumerate(lines) if line.startswith(".BI -") and "-format" in line]
    item = []
    for line in lines[at[0] + 1:] if at else []:
        if line in (".TP", ".PP") or line.startswith(".SH"):
            break
        item.append(line)
    named = set(re.findall(r"^\.BR? (\w+)", "\n".join(item), re.M))
    check("btrfsimg.1: the --format item names exactly the library's formats",
          at and named == set(formats), (sorted(set(formats) - named), sorted(named - set(formats))))
    for cmd, words in (("walk", "--format"), ("layers", "The layers")):
        rc, out, _ = run([cmd, "--help"])
        text = " ".join(out.decode().split())
        para = text.split(words, 1)[1][:300] if words in text else ""
        missing = [f for f in formats if not re.search(r"\b%s\b" % re.escape(f), para)]
        check(f"{cmd} --help names every format ({words})", rc == 0 and para and not missing,
              missing)
    rc, _, err = run(["walk", "--format", "nosuch", "x.img"])
    check("--format nosuch: refused naming the library's formats, exit 2",
          rc == 2 and ("(%s)" % ", ".join(formats)).encode() in err, (rc, err))


# ------------------------------------------------------------ main

def main():
    work = tempfile.mkdtemp(prefix="test_cli.")
    try:
        files = os.path.join(TESTDATA, "files")
        imgs, views = {}, {}
        for name in ("names", "special", "subvols", "comp"):
            imgs[name] = imgtest.private_copy(os.path.join(files, name + ".img.zst"), work)
            views[name] = imgtest.load_jsonl(os.path.join(files, name + ".view.jsonl"))
        mbr = imgtest.private_copy(os.path.join(TESTDATA, "images", "mbr1", "disk.img.zst"), work)
        mbr_fsid = imgtest.load_json(os.path.join(TESTDATA, "images", "mbr1",
                                                  "expected-super.p1.json"))["fsid"]
        gpt3 = imgtest.private_copy(os.path.join(TESTDATA, "part", "gpt3.img.zst"), work)
        names = imgs["names"]

        cmds = commands()
        takes_value = test_usage(cmds)
        test_rejections(cmds, takes_value, names, work)
        test_accepted(cmds, takes_value)
        test_combinations(names, mbr, mbr_fsid, work)
        test_suggestions(names)

        weird = [r["path"] for r in views["names"]
                 if r["path"].startswith("names/") and stat.S_ISREG(r["mode"])]
        test_extract_path("special", imgs["special"], views["special"],
                          ["meta/t-ns", "meta/m0640", "meta/m4755", "symlinks/newline",
                           "symlinks/max4095", "symlinks/nonutf8", "types/fifo", "types/socket",
                           "types/cbig", "types/sda1"], work)
        test_extract_path("comp", imgs["comp"], views["comp"],
                          ["zlib/text-1048581", "zstd/zero-1048581", "lzo/text-4097"], work)
        test_extract_path("names", names, views["names"], weird[:3] + weird[-3:], work)
        test_extract_inode("special", imgs["special"], views["special"], "meta", work)
        test_extract_inode("subvols", imgs["subvols"], views["subvols"], "sv1", work)
        test_extract_inode("subvols", imgs["subvols"], views["subvols"], "snaps/sv1-rw", work)
        test_extract_inode("names", names, views["names"], "names", work)
        test_extract_inode_file("special", imgs["special"], views["special"], "meta/t-ns", work)
        test_extract_inode_file("names", names, views["names"], weird[0], work)
        test_nothing_done(names, work)

        for name, tops in (("subvols", ["sv1", "snaps/sv1-rw", "d", "sv1/a", "top.txt", ""]),
                           ("names", ["names", "xattr", "deep"]),
                           ("special", ["symlinks", "types/fifo"])):
            rc, full, err = walk_json([], imgs[name])
            check(f"{name}: walk --json --hash", rc == 0 and full, (rc, err[-300:]))
            for top in tops:
                test_walk_inode(name, imgs[name], views[name], full, top)
        for name, path in (("subvols", "top.txt"), ("special", "types/fifo"),
                           ("special", "symlinks/newline")):
            test_walk_file(name, imgs[name], walk_json([], imgs[name])[1], path)

        test_partitions(gpt3, os.path.join(TESTDATA, "part", "gpt3.sfdisk"), work)
        test_man(cmds)
        test_completion(cmds)
        test_formats()
    except imgtest.RestoreError as e:
        check("images restored", False, e)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tally.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
