# SPDX-License-Identifier: MIT
"""imgtest.py: what the Python tests (tests/images/test_*.py,
tests/python/test_python.py) share.

Each test puts this directory (tests/support) on sys.path and imports this
module, so it works however the test is started (meson, by hand, imported
by another test or by bench/exact.py):

    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
    import imgtest  # noqa: E402

  Tally            one line per check ("ok   NAME" or "FAIL NAME" with what
                   went wrong, indented), then "N passed, M failed"; the exit
                   status is what meson reads
  SKIP, skip_reason(), kernel_release()
                   tests that mount images live: meson's skip code, and why
                   this machine cannot run them
  run_cli(cli, args, timeout)   the btrfsimg CLI: (exit status or None on a
                   timeout, stdout, stderr)
  unzstd(src, dst), private_copy(src, dir)
                   a private copy of a committed image (.zst decompressed,
                   sparse), so that no run can alter the original; a
                   failure raises RestoreError
  load_jsonl(path), load_json(path)   recorded views and expected results
  json_int(v)      an integer of btrfsimg's JSON: past 2^53 - 1 it is a
                   decimal string (--json-u64 string, the default)
  text_unescape(b) a name of the text output (tools/common/text.h) as its bytes
  import_kview(testdata)   testdata/gen_kview.py (FIELDS, the stub rule)
  crc32c(data), sha256_file(path)   from testdata/genlib.py
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/support/..
sys.path.insert(0, os.path.join(REPO, "testdata"))
import genlib  # noqa: E402

crc32c = genlib.crc32c            # shared with the generators
sha256_file = genlib.sha256_file

SKIP = 77  # meson's exit status for a skipped test


class Tally:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, name, ok, detail=""):
        """ok: a truth value (detail says why it failed)."""
        self.problems(name, [] if ok else [str(detail)])

    def problems(self, name, problems):
        """An empty list of problems passes; each problem gets a line."""
        if problems:
            self.failed += 1
            print(f"FAIL {name}")
            for p in problems:
                print("    " + p)
        else:
            self.passed += 1
            print(f"ok   {name}")
        sys.stdout.flush()

    def summary(self, need_one=False):
        """Print the last line; the exit status: 1 on any failure (or on no
        check at all, with need_one)."""
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed or (need_one and not self.passed) else 0


# ------------------------------------------------------------ live mounts

def skip_reason():
    """Why images cannot be mounted live here (None if they can): root,
    loop devices, btrfs in the kernel, the tools the live tests run."""
    if os.geteuid() != 0:
        return "not root (needs mount and loop devices)"
    for tool in ("mkfs.btrfs", "btrfs", "losetup", "zstd", "chattr", "bash"):
        if not shutil.which(tool):
            return "%s not found" % tool
    if not os.path.exists("/dev/loop-control"):
        return "no /dev/loop-control (loop devices unavailable)"
    p = subprocess.run(["losetup", "--find"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        return "no free loop device (%s)" % p.stderr.decode(errors="replace").strip()
    with open("/proc/filesystems") as f:
        if "btrfs" not in f.read():
            subprocess.run(["modprobe", "btrfs"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            with open("/proc/filesystems") as g:
                if "btrfs" not in g.read():
                    return "the kernel has no btrfs"
    return None


def kernel_release():
    """(major, minor) of the running kernel."""
    return tuple(int(x) for x in os.uname().release.split(".")[:2])


# ------------------------------------------------------------ the CLI

def run_cli(cli, args, timeout=None, stdout=subprocess.PIPE, preexec_fn=None):
    """Run `cli args...` (args may hold bytes: raw paths): (exit status,
    stdout, stderr). A run past @timeout seconds is killed and gives
    (None, b"", b"timed out after N s"); a CLI that cannot be started gives
    (None, b"", the error)."""
    try:
        p = subprocess.run([cli] + list(args), stdout=stdout, stderr=subprocess.PIPE,
                           timeout=timeout, preexec_fn=preexec_fn)
    except subprocess.TimeoutExpired:
        return None, b"", b"timed out after %d s" % timeout
    except OSError as e:
        return None, b"", str(e).encode()
    return p.returncode, p.stdout, p.stderr


# ------------------------------------------------------------ images

class RestoreError(Exception):
    """A committed image could not be copied or decompressed."""


def unzstd(src, dst):
    """Decompress @src (.zst) to @dst (sparse; --long=31 for frames with a
    long window); returns @dst."""
    p = subprocess.run(["zstd", "-q", "-d", "-f", "--long=31", "--sparse", src, "-o", dst],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise RestoreError("zstd -d %s failed: %s"
                           % (src, p.stderr.decode(errors="replace").strip()))
    return dst


def private_copy(src, tmpdir):
    """A private copy of the image @src in @tmpdir: NAME.img.zst is
    decompressed to NAME.img, anything else copied sparse. Returns its path."""
    if src.endswith(".zst"):
        return unzstd(src, os.path.join(tmpdir, os.path.basename(src)[:-4]))
    dst = os.path.join(tmpdir, os.path.basename(src))
    p = subprocess.run(["cp", "--sparse=always", src, dst], stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise RestoreError("cp %s failed: %s" % (src, p.stderr.decode(errors="replace").strip()))
    return dst


# ------------------------------------------------------------ expectations

def load_jsonl(path):
    """The objects of a JSON Lines file (blank lines skipped)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_json(path):
    with open(path) as f:
        return json.load(f)


def load_recorded(d, image):
    """A committed kernel-made image of directory @d (a testdata generator's
    output): its truth.json, the kernel's view recorded before any damage
    (view.jsonl.zst, one record a line) and the image file @image's bytes."""
    truth = load_json(os.path.join(d, "truth.json"))
    view = [json.loads(line) for line in genlib.unzstd_bytes(
        os.path.join(d, "view.jsonl.zst")).decode().splitlines() if line.strip()]
    return truth, view, genlib.unzstd_bytes(os.path.join(d, image))


SAFE_MAX = 2**53 - 1  # what a double holds exactly (JavaScript's MAX_SAFE_INTEGER)


def json_int(v):
    """The integer @v of btrfsimg's JSON stands for: a number up to SAFE_MAX,
    a decimal string past it. Anything else (a small number as a string, a
    big one as a number) raises ValueError."""
    if isinstance(v, bool):
        raise ValueError(f"not an integer: {v!r}")
    if isinstance(v, int) and abs(v) <= SAFE_MAX:
        return v
    if isinstance(v, str) and re.fullmatch(r"-?[0-9]+", v) and abs(int(v)) > SAFE_MAX:
        return int(v)
    raise ValueError(f"not an integer as btrfsimg writes one: {v!r}")


TEXT_ESCAPE = re.compile(rb"\\(\\|n|t|r|x[0-9a-f]{2}|.?)", re.S)
TEXT_ESCAPES = {b"\\": b"\\", b"n": b"\n", b"t": b"\t", b"r": b"\r"}


def text_unescape(b):
    """Undo the escapes of a name in btrfsimg's text output (\\\\, \\n, \\t,
    \\r, \\xNN: tools/common/text.h); None if @b holds any other escape."""
    bad = []

    def one(m):
        e = m.group(1)
        if e.startswith(b"x") and len(e) == 3:
            return bytes([int(e[1:], 16)])
        if e in TEXT_ESCAPES:
            return TEXT_ESCAPES[e]
        bad.append(e)
        return b""
    out = TEXT_ESCAPE.sub(one, b)
    return None if bad else out


def import_kview(testdata):
    """testdata/gen_kview.py, the recorder of the kernel's view: FIELDS,
    STUB_INO, VOLATILE_STUB_FIELDS, load()."""
    if testdata not in sys.path:
        sys.path.insert(0, testdata)
    import gen_kview  # noqa: E402
    return gen_kview


def suppress_container_leaks(work):
    """The container libraries' own leaks (libewf loses chunk buffers on
    some read errors, a missing segment) kept out of a sanitizer build's
    report: a LeakSanitizer suppression file in @work, named in
    LSAN_OPTIONS for the commands run from here on."""
    supp = os.path.join(work, "lsan.supp")
    with open(supp, "w") as f:
        f.write("leak:libewf.so\nleak:libqcow.so\nleak:libvmdk.so\nleak:libvhdi.so\n")
    os.environ["LSAN_OPTIONS"] = ":".join(
        x for x in (os.environ.get("LSAN_OPTIONS"), "suppressions=" + supp) if x)
