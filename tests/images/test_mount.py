#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_mount.py: `btrfsimg mount` (FUSE) against the kernel's recorded view.

    test_mount.py BTRFSIMG TESTDATA [--only NAME]...

Needs root and /dev/fuse (fusermount3); skipped (exit 77) with the reason
otherwise. Every committed image of testdata/files/ is mounted, and a walk
through the mount (depth-first in readdir order, like testdata/gen_kview.py
that recorded the kernel's view on a loop mount) is compared with NAME.view.jsonl:
  * the paths, in readdir order;
  * lstat: mode, nlink, uid, gid, size, rdev, atime/mtime/ctime with
    nanoseconds (a stub directory's mtime/ctime are the time of lookup on
    the kernel too: not compared), one st_dev for the whole mount;
  * st_ino and readdir's d_ino under the scheme mounted, computed here from
    the recorded subvolume and objectid by the patches' formulas (written
    out below and checked on hand-worked vectors, not taken from btrfsimg);
  * readlink, the sha256 of every regular file's contents, and every
    xattr's sha256 (listxattr/getxattr).
The default scheme (inumbits=56,numdevs=1) gets the whole comparison; nfsd,
nfsd-uniquifier, inumbits=32 and inumbits=64 the paths and numbers; on comp,
four readers and a walk at once (the daemon's threads and handles);
statfs against the kernel's own read-only mount of the image (loop
devices; skipped, saying so, without them), also for every RAID profile.
Where the default subvolume is not the top level (subvols: sv1/nested;
testdata/images/nested: a/b/c), the view's walks mount --subvol 5, and a
plain mount shows the default subvolume as the kernel's plain mount does:
its root is the subvolume `btrfs subvolume get-default` recorded and
`btrfs inspect-internal rootid` names on a live kernel mount, every path
below alike (the view's part below it, and the live mount: stat but the
numbers, contents, links, xattrs). Then
--subvol, --no-log-replay, refused schemes (numdevs=2 and many: exit 2,
nothing mounted), devices given as every command takes them (a GPT disk,
--partition, --offset, two RAID1 devices: each subvolume btrfs-progs listed
is there with its number), EIO on exactly the sector of a data extent whose every
copy is damaged (the DUP image of testdata/images, damaged as
tests/images/test_corrupt.py does; with --no-verify the damaged bytes) and its
reason with the logical address on stderr with -f, and in the background
to syslog as btrfsimg[PID] (a socket on /dev/log in a mount namespace of
the test's own), -f
(serves until unmounted, then exits 0), no process left after fusermount3 -u, and a
killed daemon: the mount point answers ENOTCONN and fusermount3 -u
clears it.

Every access to a mount runs in a child process under a timeout (a FUSE
request waits for the daemon, killably only), and whatever is mounted is
unmounted at the end, also on failure.
"""
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import imgtest  # noqa: E402

T_MOUNT = 60     # mount: until the command returns (the mount is ready)
T_WALK = 900     # one walk of one image
T_UMOUNT = 30

# ------------------------------------------------------------ the formulas
# The patches' numbers, written out here (docs/inode-numbers.md gives the
# sources): swab64 reverses the 8 bytes; subvolume 5 has overlay and
# uniquifier 0; an objectid equal to its overlay presents itself.


def swab64(x):
    return int.from_bytes(x.to_bytes(8, "little"), "big")


def overlay(subvol, n):
    return 0 if subvol == 5 else swab64(subvol) >> (64 - n)


def uniquifier(subvol):
    return 0 if subvol == 5 else swab64(subvol)


def present(obj, v):
    return obj if obj == v else obj ^ v


def scheme_ino(scheme, subvol, obj):
    """st_ino of (subvol, obj), or readdir's d_ino of an entry locating obj
    in a directory of subvol. subvol None: a stub (keeps its number)."""
    if subvol is None:
        return obj
    if scheme == "nfsd":
        return obj
    if scheme == "nfsd-uniquifier":
        return present(obj, uniquifier(subvol))
    n = int(scheme.split(",")[0].split("=")[1])
    return present(obj, overlay(subvol, n))


# (scheme, subvol, objectid, number): docs/inode-numbers.md's table and a
# few worked by hand (0x0101 = 257 reversed is 0x0101 << 48)
VECTORS = [
    ("inumbits=56,numdevs=1", 257, 257, 0x0001010000000101),
    ("inumbits=56,numdevs=1", 257, 256, 0x0001010000000100),
    ("inumbits=64,numdevs=1", 257, 257, 0x0101000000000101),
    ("inumbits=64,numdevs=1", 257, 256, 0x0101000000000100),
    ("inumbits=56,numdevs=1", 256, 257, 0x0000010000000101),
    ("inumbits=56,numdevs=1", 5, 257, 257),
    ("inumbits=32,numdevs=1", 258, 300, 0x0201012C),
    ("nfsd", 258, 300, 300),
    ("nfsd-uniquifier", 258, 300, 0x0201000000000000 ^ 300),
    ("nfsd-uniquifier", 5, 300, 300),
    # the objectid equal to the overlay presents itself
    ("inumbits=32,numdevs=1", 256, 0x10000, 0x10000),
    ("inumbits=32,numdevs=1", 256, 0x10001, 1),
]

SCHEMES = ["inumbits=56,numdevs=1", "nfsd", "nfsd-uniquifier", "inumbits=32,numdevs=1",
           "inumbits=64,numdevs=1"]

# ------------------------------------------------------------ the walk (child)


def sha256_path(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def xattrs_of(p):
    return {n: hashlib.sha256(os.getxattr(p, n, follow_symlinks=False)).hexdigest()
            for n in sorted(os.listxattr(p, follow_symlinks=False))}


def mount_walk(root):
    """[(rel path as str, d_ino or None)] depth-first in readdir order."""
    out = [("", None)]
    stack = [iter([(e.name, e.inode(), e.is_dir(follow_symlinks=False))
                   for e in os.scandir(root)])]
    prefix = [b""]
    rootb = os.fsencode(root)
    while stack:
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            prefix.pop()
            continue
        name, d_ino, is_dir = nxt
        rel = os.path.join(prefix[-1], os.fsencode(name)) if prefix[-1] else os.fsencode(name)
        out.append((os.fsdecode(rel), d_ino))
        if is_dir:
            p = os.path.join(rootb, rel)
            stack.append(iter([(e.name, e.inode(), e.is_dir(follow_symlinks=False))
                               for e in os.scandir(p)]))
            prefix.append(rel)
    return out


def child_walk(mnt, view, scheme, full, prefix):
    """Compare the mount with the recorded view; print {check: [problems]}."""
    recs = imgtest.load_jsonl(view)
    mnt = os.fsencode(mnt)
    if prefix:
        recs = [dict(r, path=r["path"][len(prefix) + 1:] if r["path"] != prefix else "")
                for r in recs if r["path"] == prefix or r["path"].startswith(prefix + "/")]
        recs[0]["d_ino"] = None
    probs = {k: [] for k in ("paths in readdir order", "stat fields", "st_ino", "d_ino",
                             "one st_dev")}
    if full:
        probs.update({"symlink targets": [], "contents (sha256)": [], "xattrs": []})

    def bad(k, msg):
        if len(probs[k]) < 20:
            probs[k].append(msg)
    walked = mount_walk(mnt)
    want_paths = [r["path"] for r in recs]
    got_paths = [p for p, _ in walked]
    if want_paths != got_paths:
        first = next((i for i, (a, b) in enumerate(zip(want_paths, got_paths)) if a != b),
                     min(len(want_paths), len(got_paths)))
        bad("paths in readdir order", "%d recorded, %d in the mount; first difference at #%d: "
            "%r vs %r" % (len(want_paths), len(got_paths), first,
                          want_paths[first:first + 1], got_paths[first:first + 1]))
    d_of = dict(walked)
    by_path = {r["path"]: r for r in recs}
    devs = set()
    for r in recs:
        path = r["path"]
        if path not in d_of:
            continue
        p = os.path.join(mnt, os.fsencode(path)) if path else mnt
        st = os.lstat(p)
        devs.add(st.st_dev)
        stub = r["subvol"] is None
        got = {"mode": st.st_mode, "nlink": st.st_nlink, "uid": st.st_uid, "gid": st.st_gid,
               "size": st.st_size,
               "rdev": "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))}
        for t in ("atime", "mtime", "ctime"):
            if stub and t != "atime":
                continue
            got[t] = list(divmod(getattr(st, "st_%s_ns" % t), 10**9))
        for k, v in got.items():
            if r[k] != v:
                bad("stat fields", "%r %s: kernel %r, mount %r" % (path, k, r[k], v))
        want_ino = scheme_ino(scheme, r["subvol"], r["ino"])
        if st.st_ino != want_ino:
            bad("st_ino", "%r: want %d (subvol %s objectid %d), got %d"
                % (path, want_ino, r["subvol"], r["ino"], st.st_ino))
        if path:
            parent = by_path[os.path.dirname(path)]
            want_d = scheme_ino(scheme, parent["subvol"], r["d_ino"])
            if d_of[path] != want_d:
                bad("d_ino", "%r: want %d (directory's subvol %s, location %d), got %d"
                    % (path, want_d, parent["subvol"], r["d_ino"], d_of[path]))
        if not full:
            continue
        if stat.S_ISLNK(st.st_mode):
            t = os.fsdecode(os.readlink(p))
            if t != r["target"]:
                bad("symlink targets", "%r: kernel %r, mount %r" % (path, r["target"], t))
        if stat.S_ISREG(st.st_mode):
            try:
                h = sha256_path(p)
            except OSError as e:
                h = "error: %s" % e
            if h != r["sha256"]:
                bad("contents (sha256)", "%r: kernel %s, mount %s" % (path, r["sha256"], h))
        x = xattrs_of(p)
        if x != r["xattrs"]:
            bad("xattrs", "%r: kernel %r, mount %r" % (path, r["xattrs"], x))
    if len(devs) != 1:
        bad("one st_dev", "devices seen: %r" % sorted(devs))
    print(json.dumps(probs))
    return 0


def child_read(mnt, path, chunk):
    """Read @path in @chunk-byte preads: [[offset, sha256 or -errno]]."""
    out = []
    fd = os.open(os.path.join(mnt, path), os.O_RDONLY)
    off = 0
    size = os.fstat(fd).st_size
    while off < size:
        try:
            out.append([off, hashlib.sha256(os.pread(fd, chunk, off)).hexdigest()])
        except OSError as e:
            out.append([off, -e.errno])
        off += chunk
    os.close(fd)
    print(json.dumps(out))
    return 0


def child_tree(root):
    """Every path below @root as the kernel or the mount shows it, numbers
    aside: print [[path, mode, nlink, uid, gid, size, rdev, times in ns,
    contents' sha256 or link target]] (a stub's mtime/ctime, the time of
    lookup, left out) and the root's st_ino."""
    rootb = os.fsencode(root)
    out = []
    for rel, _ in mount_walk(root):
        p = os.path.join(rootb, os.fsencode(rel)) if rel else rootb
        st = os.lstat(p)
        stub = st.st_ino == 2 and stat.S_ISDIR(st.st_mode)  # 2 in every scheme too
        times = [st.st_atime_ns] + ([] if stub else [st.st_mtime_ns, st.st_ctime_ns])
        what = (os.fsdecode(os.readlink(p)) if stat.S_ISLNK(st.st_mode)
                else sha256_path(p) if stat.S_ISREG(st.st_mode) else None)
        out.append([rel, st.st_mode, st.st_nlink, st.st_uid, st.st_gid, st.st_size,
                    st.st_rdev, times, what, xattrs_of(p)])
    print(json.dumps({"root_ino": os.lstat(root).st_ino, "paths": out}))
    return 0


def child_syslog(cli, img, mnt, path, off):
    """In a mount namespace of its own (unshare -m): /dev a tmpfs holding
    /dev/fuse, /dev/null and the like from the real one, and a datagram
    socket on /dev/log (what syslog(3) writes to); mount @img in the
    background, read @path at @off (4096 bytes), unmount. Print the exit
    status of the mount, the read's errno, the daemon's pid and what came
    to /dev/log."""
    import socket
    old = tempfile.mkdtemp(prefix="fuse-test-mount.dev.")
    subprocess.run(["mount", "--bind", "/dev", old], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "test-mount-dev", "/dev"], check=True)
    for n in ("fuse", "null", "zero", "full", "random", "urandom"):
        open("/dev/" + n, "w").close()
        subprocess.run(["mount", "--bind", os.path.join(old, n), "/dev/" + n], check=True)
    subprocess.run(["umount", "-l", old], check=True)
    os.rmdir(old)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("/dev/log")
    res = {"rc": None, "errno": None, "pid": None, "log": []}
    p = subprocess.run([cli, "mount", img, mnt], capture_output=True, timeout=T_MOUNT)
    res["rc"] = p.returncode
    if p.returncode == 0:
        res["pid"] = daemon_pid(mnt)
        try:
            fd = os.open(os.path.join(mnt, path), os.O_RDONLY)
            try:
                os.pread(fd, 4096, off)
                res["errno"] = 0
            except OSError as e:
                res["errno"] = e.errno
            os.close(fd)
        finally:
            subprocess.run(["fusermount3", "-u", mnt], timeout=T_UMOUNT)
            wait_gone(res["pid"], T_UMOUNT)
    sock.settimeout(1)
    try:
        while True:
            res["log"].append(sock.recv(4096).decode(errors="replace"))
    except OSError:
        pass
    print(json.dumps(res))
    return 0


def child_stat(mnt):
    """stat the mount point: print the errno (0: it answered)."""
    try:
        os.stat(mnt)
        print(0)
    except OSError as e:
        print(e.errno)
    return 0


# ------------------------------------------------------------ mounting (parent)

class Mounts(imgtest.Tally):
    def __init__(self, cli, work):
        super().__init__()
        self.cli = cli
        self.work = work
        self.live = {}   # mount point -> daemon pid (or None)

    def mount(self, img, mnt, args=()):
        """btrfsimg mount: (rc, stderr); the daemon's pid is remembered."""
        os.makedirs(mnt, exist_ok=True)
        rc, out, err = imgtest.run_cli(self.cli, ["mount"] + list(args) + [img, mnt],
                                       timeout=T_MOUNT)
        if rc == 0:
            self.live[mnt] = daemon_pid(mnt)
        return rc, err

    def umount(self, mnt):
        """fusermount3 -u; True when the daemon is gone within T_UMOUNT s."""
        pid = self.live.pop(mnt, None)
        try:
            p = subprocess.run(["fusermount3", "-u", mnt], capture_output=True,
                               timeout=T_UMOUNT)
            ok = p.returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
        return wait_gone(pid, T_UMOUNT) and ok

    def child(self, args, timeout=T_WALK):
        """This script in a child process: (parsed JSON, problem or None)."""
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"] + args,
                               capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, "timed out after %d s" % timeout
        if p.returncode != 0:
            return None, "child failed: %s" % p.stderr.decode(errors="replace")[-1500:]
        try:
            return json.loads(p.stdout), None
        except ValueError:
            return None, "unparsable: %r" % p.stdout[:300]

    def cleanup(self):
        for mnt, pid in list(self.live.items()):
            abort(mnt)
            subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True, timeout=T_UMOUNT)
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.live.clear()


def in_mounts(mnt):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mnt for line in f)


def daemon_pid(mnt):
    """The btrfsimg process serving @mnt (its command line ends with it)."""
    me = str(os.getpid())
    for d in os.listdir("/proc"):
        if not d.isdigit() or d == me:
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")[:-1]
        except OSError:
            continue
        if len(argv) >= 3 and argv[1] == b"mount" and argv[-1] == os.fsencode(mnt) and \
                os.path.basename(argv[0]) == b"btrfsimg":
            return int(d)
    return None


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def wait_gone(pid, secs):
    end = time.time() + secs
    while pid and alive(pid):
        if time.time() > end:
            return False
        time.sleep(0.05)
    return True


def abort(mnt):
    """Abort the FUSE connection of @mnt (no request can wait on it then)."""
    try:
        dev = os.stat(mnt).st_dev  # may fail with ENOTCONN: then nothing waits
    except OSError:
        return
    ctl = "/sys/fs/fuse/connections/%d/abort" % os.minor(dev)
    if os.path.exists(ctl):
        with open(ctl, "w") as f:
            f.write("1")


def skip_reason(cli):
    if os.geteuid() != 0:
        return "not root (mounting FUSE here needs root)"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    for tool in ("fusermount3", "zstd"):
        if not shutil.which(tool):
            return "%s not found" % tool
    rc, out, err = imgtest.run_cli(cli, ["mount", "--help"], timeout=30)
    if rc != 0:
        return "btrfsimg mount --help failed"
    return None


# ------------------------------------------------------------ the checks

def check_vectors(t):
    bad = [(s, sv, o, hex(want), hex(scheme_ino(s, sv, o))) for s, sv, o, want in VECTORS
           if scheme_ino(s, sv, o) != want]
    t.check("the formulas give the hand-worked vectors", not bad, bad)


def walk_check(t, img, mnt, view, name, scheme, full, args=(), prefix=""):
    label = "%s %s%s" % (name, scheme, (" " + " ".join(args)) if args else "")
    rc, err = t.mount(img, mnt, ["--numbers", scheme] + list(args))
    if rc != 0:
        t.check("%s: mounted" % label, False, (rc, err[-600:]))
        return
    pid = t.live.get(mnt)
    res, why = t.child(["walk", mnt, view, scheme, "1" if full else "0", prefix])
    if why:
        t.check("%s: walk" % label, False, why)
    else:
        for k, probs in res.items():
            t.problems("%s: %s" % (label, k), probs)
    t.check("%s: fusermount3 -u leaves no process" % label,
            pid is not None and t.umount(mnt) and not in_mounts(mnt), "pid %s" % pid)


def check_refusals(t, img, mnt):
    for s, words in (("inumbits=56,numdevs=2", ["st_dev", "numdevs=2"]),
                     ("numdevs=many", ["st_dev"]), ("inumbits=31,numdevs=1", ["32..64"]),
                     ("today", ["unknown scheme"])):
        rc, err = t.mount(img, mnt, ["--numbers", s])
        t.check("--numbers %s refused: exit 2, nothing mounted" % s,
                rc == 2 and all(w.encode() in err for w in words) and not in_mounts(mnt),
                (rc, err[-400:]))
        if rc == 0:
            t.umount(mnt)
    rc, err = t.mount(img, mnt, ["--numbers", "inumbits=56"])
    t.check("--numbers inumbits=56 (numdevs=1 implied): mounted", rc == 0 and in_mounts(mnt),
            (rc, err[-400:]))
    if rc == 0:
        t.umount(mnt)
    rc, err = t.mount(img, mnt, ["--subvol", "9999"])
    t.check("--subvol of no subvolume: exit 2 naming it, nothing mounted",
            rc == 2 and b"9999" in err and not in_mounts(mnt), (rc, err[-400:]))
    if rc == 0:
        t.umount(mnt)


def check_killed(t, img, mnt):
    rc, err = t.mount(img, mnt)
    pid = t.live.get(mnt)
    if rc != 0 or not pid:
        t.check("killed daemon: mounted", False, (rc, err[-300:], pid))
        return
    os.kill(pid, signal.SIGKILL)
    wait_gone(pid, 10)
    res, why = t.child(["stat", mnt], timeout=30)
    t.check("killed daemon: the mount point answers ENOTCONN at once, no hang",
            not why and res == errno.ENOTCONN, why or res)
    t.live[mnt] = None
    p = subprocess.run(["fusermount3", "-u", mnt], capture_output=True, timeout=T_UMOUNT)
    t.check("killed daemon: fusermount3 -u unmounts it",
            p.returncode == 0 and not in_mounts(mnt), p.stderr[-300:])
    if not in_mounts(mnt):
        t.live.pop(mnt, None)
    rc, err = t.mount(img, mnt)
    t.check("killed daemon: the mount point can be mounted again", rc == 0, err[-300:])
    if rc == 0:
        t.umount(mnt)


def big_txt(img):
    """(disk_bytenr, disk bytes) of top/big.txt's one extent in the DUP
    image (btrfs-progs' dump-tree: its DIR_INDEX, then its EXTENT_DATA at
    file offset 0, which maps the extent from its start)."""
    out = subprocess.run(["btrfs", "inspect-internal", "dump-tree", "-t", "5", img],
                         capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"location key \((\d+) INODE_ITEM 0\) type FILE\n.*\n\s*name: big\.txt\n", out)
    ino = m[1]
    m = re.search(r"key \(%s EXTENT_DATA 0\).*\n.*\n\s*extent data disk byte (\d+) nr (\d+)\n"
                  r"\s*extent data offset 0 " % ino, out)
    return int(m[1]), int(m[2])


def mirrors(img, logical, nbytes):
    """Physical offsets of each copy of [logical, +nbytes) (btrfs-map-logical)."""
    out = subprocess.run(["btrfs-map-logical", "-l", str(logical), "-b", str(nbytes), img],
                         capture_output=True, text=True, timeout=60).stdout
    return [int(line.split("physical")[1].split()[0]) for line in out.splitlines()
            if "physical" in line]


def check_other_user(t, img, mnt):
    """Mounted by root, another user (nobody) reaches it as its modes allow,
    as on a kernel mount."""
    rc, err = t.mount(img, mnt, ["--subvol", "5"])
    if rc != 0:
        t.check("another user: mounted", False, err[-300:])
        return

    def nobody():
        os.setgid(65534)
        os.setuid(65534)
    try:
        # coreutils' stat, not this script: neither the interpreter (a pyenv
        # under /root) nor the checkout need be readable by nobody
        p = subprocess.run(["stat", "-c", "%s", os.path.join(mnt, "sv1", "a")],
                           capture_output=True, timeout=30, preexec_fn=nobody)
        res = b"0" if p.returncode == 0 else p.stderr.strip()
    except subprocess.TimeoutExpired:
        res = b"timed out"
    t.umount(mnt)
    t.check("another user (uid 65534) stats a file of root's mount", res == b"0", res)


def check_foreground(t, img, mnt):
    """-f: serves until unmounted, then exits 0 itself."""
    p = subprocess.Popen([t.cli, "mount", "-f", img, mnt], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    end = time.time() + T_MOUNT
    while not in_mounts(mnt) and p.poll() is None and time.time() < end:
        time.sleep(0.05)
    mounted = in_mounts(mnt)
    t.live[mnt] = p.pid
    res, why = t.child(["stat", mnt], timeout=30)
    t.check("-f: mounted, the command still running", mounted and p.poll() is None and res == 0,
            (mounted, p.poll(), res, why))
    t.umount(mnt)
    try:
        rc = p.wait(timeout=T_UMOUNT)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = None
    t.check("-f: fusermount3 -u ends it, exit 0", rc == 0, (rc, p.stderr.read()[-300:]))


def child_shas(mnt, view, reverse):
    """sha256 of every regular file of the view, read in view order (or
    reversed): print the paths whose contents differ."""
    recs = [r for r in imgtest.load_jsonl(view) if r["sha256"]]
    if reverse == "1":
        recs.reverse()
    bad = []
    for r in recs:
        try:
            h = sha256_path(os.path.join(os.fsencode(mnt), os.fsencode(r["path"])))
        except OSError as e:
            h = str(e)
        if h != r["sha256"]:
            bad.append("%r: %s" % (r["path"], h))
    print(json.dumps(bad[:20] if recs else ["no regular file"]))
    return 0


def check_parallel(t, img, mnt, view, name):
    """Four readers at once (two in each order) and a walk: the daemon's
    threads and handles serve them together; every reader sees the
    kernel's contents."""
    rc, err = t.mount(img, mnt)
    if rc != 0:
        t.check("%s parallel: mounted" % name, False, err[-300:])
        return
    me = [sys.executable, os.path.abspath(__file__), "--child"]
    procs = [subprocess.Popen(me + ["shas", mnt, view, str(i % 2)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for i in range(4)]
    walk = subprocess.Popen(me + ["walk", mnt, view, SCHEMES[0], "0", ""],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    probs = []
    for p in procs + [walk]:
        try:
            o, e = p.communicate(timeout=T_WALK)
            res = json.loads(o)
            probs += res if isinstance(res, list) else [x for v in res.values() for x in v]
        except (subprocess.TimeoutExpired, ValueError) as x:
            p.kill()
            probs.append("reader failed: %s" % x)
    t.umount(mnt)
    t.problems("%s: four readers and a walk at once see the kernel's contents and numbers"
               % name, probs)


def served(t, img, mnt, view, passes):
    """Mount -f -v, read every regular file of the view @passes times in
    one child, unmount: (the requests the daemon said it served by kind,
    problems)."""
    p = subprocess.Popen([t.cli, "mount", "-f", "-v", img, mnt], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    end = time.time() + T_MOUNT
    while not in_mounts(mnt) and p.poll() is None and time.time() < end:
        time.sleep(0.05)
    t.live[mnt] = p.pid
    probs = []
    for _ in range(passes):
        res, why = t.child(["shas", mnt, view, "0"])
        probs += [why] if why else res
    t.umount(mnt)
    try:
        err = p.communicate(timeout=T_UMOUNT)[1].decode(errors="replace")
    except subprocess.TimeoutExpired:
        p.kill()
        return {}, probs + ["the daemon did not end"]
    m = re.search(r"requests served: (.*)", err)
    if not m:
        return {}, probs + ["no 'requests served' line: %r" % err[-300:]]
    return {k: int(v) for k, v in re.findall(r"(\w+) (\d+)", m[1])}, probs


def check_requests(t, img, mnt, view, name):
    """Small files (issue 31): a file's open and release do not reach the
    daemon (FUSE_NO_OPEN_SUPPORT: one ENOSYS, then the kernel opens files
    itself), and a second read of every file is served from the kernel's
    caches (names, attributes, pages kept across opens): no lookup,
    getattr or read more than one pass needs."""
    if tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2]) < (4, 20):
        print("skip the request counts: kernel %s has no FUSE_NO_OPEN_SUPPORT"
              % os.uname().release)
        return
    nfiles = sum(1 for r in imgtest.load_jsonl(view) if r["sha256"])
    for attempt in range(3):  # a drop_caches elsewhere on the machine empties the caches
        one, p1 = served(t, img, mnt, view, 1)
        two, p2 = served(t, img, mnt, view, 2)
        cached = all(two.get(k) == one.get(k) for k in ("lookup", "getattr", "read"))
        if cached or p1 or p2:
            break
    t.problems("%s: every file read through the mount (-v counts)" % name, p1 + p2)
    t.check("%s: %d files read twice: at most one open reaches the daemon, no release"
            % (name, nfiles), two.get("open", 99) <= 1 and two.get("release", 99) == 0
            and nfiles > 10, (nfiles, two))
    t.check("%s: the second pass is served by the kernel's caches" % name, cached, (one, two))


def child_subvols(mnt, expected, scheme):
    """Every subvolume btrfs-progs listed (path, id) is a directory of the
    mount whose st_ino is its root's number under @scheme."""
    probs = []
    subvols = [s for s in imgtest.load_jsonl(expected) if not s["deleted"] and s["path"] is not None]
    for sv in subvols:
        p = os.path.join(mnt, sv["path"]) if sv["path"] else mnt
        try:
            st = os.lstat(p)
        except OSError as e:
            probs.append("%r: %s" % (sv["path"], e))
            continue
        want = scheme_ino(scheme, sv["id"], 256)
        if not stat.S_ISDIR(st.st_mode) or st.st_ino != want:
            probs.append("%r (subvolume %d): mode %o ino %d, want a directory, ino %d"
                         % (sv["path"], sv["id"], st.st_mode, st.st_ino, want))
    print(json.dumps(probs if subvols else ["no subvolume listed"]))
    return 0


def check_layouts(t, testdata, work):
    """Devices given as every command takes them: a GPT disk (its partition
    found, or named by --partition or --offset) and a two-device RAID1;
    every subvolume btrfs-progs listed is where it said, with its number."""
    imgs = os.path.join(testdata, "images")
    mnt = os.path.join(work, "m-layout")
    gpt = imgtest.unzstd(os.path.join(imgs, "gpt1", "disk.img.zst"), os.path.join(work, "disk.img"))
    r1 = [imgtest.unzstd(os.path.join(imgs, "raid1", d + ".img.zst"), os.path.join(work, d + ".img"))
          for d in ("dev2", "dev1")]
    for label, devs, args, exp in (
            ("GPT disk", [gpt], [], "gpt1/expected-subvols.p1.jsonl"),
            ("GPT disk --partition 1", [gpt], ["--partition", "1"], "gpt1/expected-subvols.p1.jsonl"),
            ("GPT disk --offset 1048576", [gpt], ["--offset", "1048576"],
             "gpt1/expected-subvols.p1.jsonl"),
            ("RAID1, two devices", r1, [], "raid1/expected-subvols.jsonl")):
        os.makedirs(mnt, exist_ok=True)
        rc, out, err = imgtest.run_cli(t.cli, ["mount"] + args + devs + [mnt], timeout=T_MOUNT)
        if rc != 0:
            t.check("%s: mounted" % label, False, (rc, err[-300:]))
            continue
        t.live[mnt] = daemon_pid(mnt)
        res, why = t.child(["subvols", mnt, os.path.join(imgs, exp), SCHEMES[0]], timeout=60)
        t.umount(mnt)
        t.problems("%s: every subvolume where btrfs-progs lists it, its number" % label,
                   [why] if why else res)
    for f in [gpt] + r1:
        os.unlink(f)


def kernel_statvfs(devs, mnt):
    """statvfs of the kernel's read-only mount of @devs (loop devices, read
    only), or the reason it could not be had."""
    loops = []
    try:
        for d in devs:
            p = subprocess.run(["losetup", "-f", "--show", "-r", d], capture_output=True,
                               text=True, timeout=60)
            if p.returncode != 0:
                return None, "losetup: %s" % p.stderr.strip()
            loops.append(p.stdout.strip())
        opts = "ro,noatime" + "".join(",device=" + lo for lo in loops)
        p = subprocess.run(["mount", "-t", "btrfs", "-o", opts, loops[0], mnt],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            return None, "mount: %s" % p.stderr.strip()
        try:
            s = os.statvfs(mnt)
        finally:
            subprocess.run(["umount", mnt], timeout=120)
        return s, None
    finally:
        for lo in loops:
            subprocess.run(["losetup", "-d", lo], timeout=60)


def statvfs_fields(s):
    return {k: getattr(s, k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                                       "f_files", "f_ffree", "f_namemax")}


def check_statfs(t, label, devs, mnt):
    """statvfs through the mount equals the kernel's on a read-only mount."""
    os.makedirs(mnt, exist_ok=True)
    want, why = kernel_statvfs(devs, mnt)
    if why:
        print("skip statfs of %s: %s" % (label, why))
        return
    rc, out, err = imgtest.run_cli(t.cli, ["mount"] + devs + [mnt], timeout=T_MOUNT)
    if rc != 0:
        t.check("%s: statfs: mounted" % label, False, (rc, err[-300:]))
        return
    t.live[mnt] = daemon_pid(mnt)
    res, why = t.child(["statvfs", mnt], timeout=30)
    t.umount(mnt)
    t.check("%s: statfs as the kernel's read-only mount shows it" % label,
            not why and res == statvfs_fields(want), why or (res, statvfs_fields(want)))


def check_statfs_sets(t, testdata, work):
    """Every profile: the multi-device images of testdata/images."""
    mnt = os.path.join(work, "m-statfs")
    for name in ("dup", "mixed", "raid0", "raid1", "raid10", "raid1c3", "raid1c4", "raid5",
                 "raid6"):
        d = os.path.join(testdata, "images", name)
        devs = [imgtest.unzstd(os.path.join(d, f), os.path.join(work, "%s-%s" % (name, f[:-4])))
                for f in sorted(os.listdir(d)) if f.startswith("dev") and f.endswith(".img.zst")]
        check_statfs(t, name, devs, mnt)
        for f in devs:
            os.unlink(f)


def recorded_default(path):
    """(id, path) of the default subvolume as `btrfs subvolume get-default`
    printed it on the kernel's mount of the top level."""
    with open(path) as f:
        line = f.read().strip()
    m = re.match(r"ID (\d+)(?: \(FS_TREE\)$| gen \d+ top level \d+ path (.*)$)", line)
    return int(m[1]), m[2] or ""


def kernel_tree(t, img, mnt):
    """child_tree of the kernel's plain read-only mount of @img and the
    subvolume it shows (btrfs inspect-internal rootid), or None (skipped:
    no loop device or mount)."""
    p = subprocess.run(["losetup", "-f", "--show", "-r", img], capture_output=True, text=True,
                       timeout=60)
    if p.returncode != 0:
        print("skip the kernel's plain mount of %s: losetup: %s" % (img, p.stderr.strip()))
        return None, None
    loop = p.stdout.strip()
    try:
        os.makedirs(mnt, exist_ok=True)
        p = subprocess.run(["mount", "-t", "btrfs", "-o", "ro,noatime", loop, mnt],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            print("skip the kernel's plain mount of %s: mount: %s" % (img, p.stderr.strip()))
            return None, None
        try:
            root = subprocess.run(["btrfs", "inspect-internal", "rootid", mnt],
                                  capture_output=True, text=True, timeout=60).stdout.strip()
            res, why = t.child(["tree", mnt], timeout=T_WALK)
        finally:
            subprocess.run(["umount", mnt], timeout=120)
        if why:
            t.check("the kernel's plain mount of %s: walked" % img, False, why)
            return None, None
        return res, int(root)
    finally:
        subprocess.run(["losetup", "-d", loop], timeout=60)


def check_default_root(t, label, img, mnt, want_id):
    """A plain mount (no --subvol) shows what the kernel's plain mount shows:
    the default subvolume (@want_id as recorded), every path below it
    alike (stat but the numbers, contents, link targets, xattrs), and the
    root's st_ino that of the kernel's root subvolume under the scheme."""
    kv, kroot = kernel_tree(t, img, mnt + "-k")
    rc, err = t.mount(img, mnt)
    if rc != 0:
        t.check("%s: plain mount: mounted" % label, False, (rc, err[-300:]))
        return
    fv, why = t.child(["tree", mnt])
    t.umount(mnt)
    if why:
        t.check("%s: plain mount: walked" % label, False, why)
        return
    t.check("%s: plain mount: its root is the recorded default subvolume %d" % (label, want_id),
            fv["root_ino"] == scheme_ino(SCHEMES[0], want_id, 256),
            (fv["root_ino"], scheme_ino(SCHEMES[0], want_id, 256)))
    if kv is None:
        return
    t.check("%s: the kernel's plain mount shows subvolume %d" % (label, want_id),
            kroot == want_id, kroot)
    probs = []
    kp, fp = {r[0]: r for r in kv["paths"]}, {r[0]: r for r in fv["paths"]}
    if [r[0] for r in kv["paths"]] != [r[0] for r in fv["paths"]]:
        probs.append("paths: kernel only %r, mount only %r"
                     % (sorted(set(kp) - set(fp))[:5], sorted(set(fp) - set(kp))[:5]))
    probs += ["%r: kernel %r, mount %r" % (p, kp[p][1:], fp[p][1:])
              for p in kp if p in fp and kp[p] != fp[p]][:20]
    t.problems("%s: plain mount: every path as the kernel's plain mount shows it (%d paths)"
               % (label, len(kp)), probs if len(kp) > 1 else ["no path below the root"])


def check_messages(t, cli, img, mnt, path, off, logical):
    """Why a read failed is said with the address: on stderr with -f, to
    syslog as "btrfsimg[PID]: ..." (facility daemon, priority err) in the
    background, where stderr is /dev/null. syslog(3) writes to /dev/log:
    the check runs in a mount namespace of its own (unshare -m) whose /dev
    holds a socket there."""
    want = "logical=%d" % logical
    p = subprocess.Popen([cli, "mount", "-f", img, mnt], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    end = time.time() + T_MOUNT
    while not in_mounts(mnt) and p.poll() is None and time.time() < end:
        time.sleep(0.05)
    t.live[mnt] = p.pid
    res, why = t.child(["read", mnt, path, "4096"], timeout=120)
    t.umount(mnt)
    try:
        _, err = p.communicate(timeout=T_UMOUNT)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    lines = [x for x in err.decode(errors="replace").splitlines() if want in x]
    t.check("-f: the EIO's reason on stderr, with the address (%s)" % want,
            not why and [off, -errno.EIO] in res and lines and
            lines[0].startswith("btrfsimg: error: read of ") and "Input/output error" in lines[0],
            (why, err[-600:]))
    if not shutil.which("unshare"):
        print("skip the syslog check: no unshare(1)")
        return
    try:
        q = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable,
                            os.path.abspath(__file__), "--child", "syslog", cli, img, mnt, path,
                            str(off)], capture_output=True, timeout=T_MOUNT + T_UMOUNT + 60)
        res = json.loads(q.stdout) if q.returncode == 0 else q.stderr[-600:]
    except (subprocess.TimeoutExpired, ValueError) as e:
        res = str(e)
    finally:
        pid = daemon_pid(mnt)  # left in its namespace by a failed child: end it
        if pid:
            os.kill(pid, signal.SIGKILL)
    if not isinstance(res, dict):
        t.check("background: mounted in a namespace with /dev/log", False, res)
        return
    pri = "<%d>" % (3 << 3 | 3)  # LOG_DAEMON | LOG_ERR
    tag = "btrfsimg[%s]: error: read of " % res["pid"]
    hits = [x for x in res["log"] if x.startswith(pri) and tag in x and want in x]
    t.check("background: the EIO's reason to syslog, %s...%s, with the address" % (pri, tag),
            res["rc"] == 0 and res["errno"] == errno.EIO and hits, res)


def check_nested(t, testdata, work):
    """testdata/images/nested, default subvolume a/b/c (holding a/b/c/d):
    a plain mount shows it as the kernel's does; --subvol 5 the top level."""
    d = os.path.join(testdata, "images", "nested")
    img = imgtest.unzstd(os.path.join(d, "dev1.img.zst"), os.path.join(work, "nested.img"))
    want, _ = recorded_default(os.path.join(d, "subvol-get-default.txt"))
    mnt = os.path.join(work, "m-nested")
    check_default_root(t, "nested", img, mnt, want)
    rc, err = t.mount(img, mnt, ["--subvol", "5"])
    if rc == 0:
        res, why = t.child(["subvols", mnt, os.path.join(d, "expected-subvols.jsonl"), SCHEMES[0]],
                           timeout=60)
        t.umount(mnt)
        t.problems("nested --subvol 5: the top level, every subvolume where btrfs-progs lists it",
                   [why] if why else res)
    else:
        t.check("nested --subvol 5: mounted", False, err[-300:])
    os.unlink(img)


def check_eio(t, testdata, work):
    """top/big.txt of the DUP image (data DUP, uncompressed, as
    tests/images/test_corrupt.py damages it): sector 2 of its extent overwritten
    in both copies reads EIO, and every other 4 KiB the bytes on disk; in
    one copy only, the other copy is read and nothing fails."""
    base = imgtest.unzstd(os.path.join(testdata, "images", "dup", "dev1.img.zst"),
                          os.path.join(work, "dup.img"))
    try:
        disk, n = big_txt(base)
        phys = mirrors(base, disk, 4096)  # a DUP stripe is contiguous: linear from here
    except (TypeError, ValueError, subprocess.SubprocessError) as e:
        t.check("DUP image: big.txt's extent found", False, e)
        return
    if len(phys) != 2:
        t.check("DUP image: big.txt's extent has two copies", False, phys)
        return
    with open(base, "rb") as f:
        f.seek(phys[0])
        raw = f.read(n)  # the extent's bytes as the kernel wrote them
    mnt = os.path.join(work, "m-eio")
    img = os.path.join(work, "eio.img")
    damaged = hashlib.sha256(b"\x5a" * 4096).hexdigest()
    for label, copies, bad_off, args in (("both copies", phys, 8192, []),
                                         ("one copy", phys[:1], None, []),
                                         ("both copies, --no-verify", phys, None, ["--no-verify"])):
        shutil.copyfile(base, img)
        for ph in copies:
            with open(img, "r+b") as f:
                f.seek(ph + 8192)
                f.write(b"\x5a" * 4096)
        rc, err = t.mount(img, mnt, args)
        if rc != 0:
            t.check("EIO (%s): mounted" % label, False, err[-300:])
            continue
        res, why = t.child(["read", mnt, "top/big.txt", "4096"], timeout=120)
        t.umount(mnt)
        if why:
            t.check("EIO (%s): read" % label, False, why)
            continue
        probs = []
        for off, got in res:
            if off == bad_off:
                if got != -errno.EIO:
                    probs.append("offset %d: want EIO, got %r" % (off, got))
                continue
            want = hashlib.sha256(raw[off:min(off + 4096, 288894)]).hexdigest()
            if args and off == 8192:
                want = damaged  # unverified: the bytes on disk, damage and all
            if got != want:
                probs.append("offset %d: %r, want the bytes on disk" % (off, got))
        what = ("EIO on exactly the damaged sector, the rest as written" if bad_off is not None
                else "the damaged bytes, no EIO" if args else "the other copy read, no EIO")
        t.problems("data extent damaged in %s: %s" % (label, what),
                   probs if len(res) == 71 else ["%d reads, want 71" % len(res)] + probs)
        if bad_off is not None:
            check_messages(t, t.cli, img, mnt, "top/big.txt", bad_off, disk + bad_off)
    os.unlink(img)
    os.unlink(base)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        a = sys.argv[2:]
        if a[0] == "walk":
            return child_walk(a[1], a[2], a[3], a[4] == "1", a[5])
        if a[0] == "read":
            return child_read(a[1], a[2], int(a[3]))
        if a[0] == "statvfs":
            print(json.dumps(statvfs_fields(os.statvfs(a[1]))))
            return 0
        if a[0] == "shas":
            return child_shas(a[1], a[2], a[3])
        if a[0] == "subvols":
            return child_subvols(a[1], a[2], a[3])
        if a[0] == "tree":
            return child_tree(a[1])
        if a[0] == "syslog":
            return child_syslog(a[1], a[2], a[3], a[4], int(a[5]))
        return child_stat(a[1])
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    cli, testdata = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    only = [sys.argv[i + 1] for i, a in enumerate(sys.argv) if a == "--only"]
    why = skip_reason(cli)
    if why:
        print("SKIP: %s" % why)
        return imgtest.SKIP
    files = os.path.join(testdata, "files")
    names = sorted(f[:-8] for f in os.listdir(files) if f.endswith(".img.zst"))
    names = [n for n in names if not only or n in only]
    work = tempfile.mkdtemp(prefix="fuse-test-mount.")
    os.chmod(work, 0o755)  # another user must reach the mount points
    t = Mounts(cli, work)
    check_vectors(t)
    try:
        for name in names:
            img = imgtest.unzstd(os.path.join(files, name + ".img.zst"),
                                 os.path.join(work, name + ".img"))
            mnt = os.path.join(work, "m-" + name)
            view = os.path.join(files, name + ".view.jsonl")
            # the view is of the top level: mounted as such where the
            # default subvolume is another
            dflt, dpath = recorded_default(os.path.join(files, name + ".subvols-default.txt"))
            top = [] if dflt == 5 else ["--subvol", "5"]
            for i, scheme in enumerate(SCHEMES):
                walk_check(t, img, mnt, view, name, scheme, full=(i == 0), args=top)
            if dflt != 5:
                for i, scheme in enumerate(SCHEMES[:2]):
                    walk_check(t, img, mnt, view, "%s (plain mount: %s)" % (name, dpath), scheme,
                               full=(i == 0), prefix=dpath)
                check_default_root(t, name, img, mnt, dflt)
            check_statfs(t, name, [img], mnt)
            if name == "comp":
                check_parallel(t, img, mnt, view, name)
                check_requests(t, img, mnt, view, name)
            if name == "log":
                walk_check(t, img, mnt, os.path.join(files, "log.nolog.view.jsonl"), name,
                           SCHEMES[0], True, ["--no-log-replay"])
            if name == "subvols":
                walk_check(t, img, mnt, view, name, SCHEMES[0], True, ["--subvol", "256"],
                           prefix="sv1")
                check_refusals(t, img, mnt)
                check_killed(t, img, mnt)
                check_foreground(t, img, mnt)
                check_other_user(t, img, mnt)
            os.unlink(img)
        if not only or "nested" in only:
            check_nested(t, testdata, work)
        if not only or "eio" in only:
            check_eio(t, testdata, work)
        if not only or "layouts" in only:
            check_layouts(t, testdata, work)
        if not only or "statfs" in only:
            check_statfs_sets(t, testdata, work)
    finally:
        t.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    return t.summary(need_one=True)


if __name__ == "__main__":
    sys.exit(main())
