#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
# Rebuild testdata/files/: small btrfs images made by the real kernel, each
# with the kernel's own view of it (testdata/gen_kview.py on a fresh read-only
# mount), for tests/images/test_files.py. Needs root, loop devices, btrfs-progs,
# zstd, chattr, python3.
#
#   gen-files.sh [--small] [--raw] [--only NAME[,NAME...]] [OUTDIR]
#
#   --small  fewer/smaller files (for tests/images/test_oracle.py; same features)
#   --raw    write NAME.img (sparse) instead of NAME.img.zst
#   OUTDIR   default: testdata/files next to this script
#
# Per image NAME it writes:
#   NAME.img.zst          the image, zstd -19 --long
#   NAME.view.jsonl       kernel view (format of `btrfsimg walk --json --hash`)
#   NAME.nolog.view.jsonl (log image only) view with -o rescue=nologreplay
#   NAME.super.txt        `btrfs inspect-internal dump-super` of the image
#   NAME.subvols.txt      `btrfs subvolume list -apcguqR` of the top level
#   NAME.subvols-r.txt, NAME.subvols-s.txt, NAME.subvols-default.txt,
#   NAME.subvols-top.txt  `btrfs subvolume list -r` (read-only), `-s`
#                         (snapshots, otime in UTC), `get-default`, and
#                         `btrfs subvolume show` of the top level (its uuid)
# Each view is recorded twice on two fresh mounts (ro,noatime,subvolid=5)
# and must be identical apart from a stub's lookup-time fields
# (gen_kview.py compare), so nothing in it depends on the recording.
#
# Images: comp (each size around the inline / sector / 128 KiB limits, text
# random and zero data, under compress-force none/zlib/lzo/zstd, one subvol
# each), extents (sparse, fallocate, punch, partial overwrites of compressed
# extents, reflinks, clone ranges, nodatacow, mixed algorithms in one file),
# holes (same as extents with mkfs -O ^no-holes), names (nodesize 4096: a
# 3000-entry dir with gaps, 650 hard links with long names -> INODE_EXTREF,
# long/non-UTF-8/odd names, deep paths, xattrs and ACLs), special (fifo,
# socket, devices, long symlinks, modes, owners, times with ns and before
# 1970, a 16000-byte xattr), subvols (nested subvolumes, snapshots with stub
# dirs, moved and deleted subvolumes, set-default), snaps (nodesize 4096:
# snapshots of a many-leaf tree that add, delete, rewrite and rename
# inodes, and a source that changes after them), log (copy taken right
# after fsync: superblock log_root != 0; view with and without log replay).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
kview="$here/gen_kview.py"
small=0 raw=0 only="" out="$here/files"
while [ $# -gt 0 ]; do
  case "$1" in
    --small) small=1 ;;
    --raw) raw=1 ;;
    --only) only=$2; shift ;;
    -h|--help) sed -n '3,30p' "$0"; exit 0 ;;
    -*) echo "gen-files.sh: unknown option $1" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "gen-files.sh: needs root (mount, losetup)" >&2; exit 2; }
for t in mkfs.btrfs btrfs losetup zstd chattr python3; do
  command -v "$t" >/dev/null || { echo "gen-files.sh: $t not found" >&2; exit 2; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

work=$(mktemp -d /tmp/hf-gen.XXXXXX)
mnt=$(mktemp -d /mnt/hf-gen.XXXXXX)
loop=""
cleanup() {
  set +e
  if mountpoint -q "$mnt"; then umount "$mnt" || umount -l "$mnt"; fi
  [ -n "$loop" ] && losetup -d "$loop"
  loop=""
  rmdir "$mnt"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

attach() { loop=$(losetup --find --show "$1"); }
detach() { losetup -d "$loop"; loop=""; }
fs_mount() { mount -o "subvolid=5${1:+,$1}" "$loop" "$mnt"; }
fs_umount() { umount "$mnt"; }
newfs() { # img size mkfs-options...
  local img=$1 size=$2; shift 2
  rm -f "$img"; truncate -s "$size" "$img"
  mkfs.btrfs -q -f "$@" "$img" >/dev/null 2>&1
}
pop() { python3 "$work/pop.py" "$@"; }
wanted() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

# record NAME IMG SUFFIX OPTS: the kernel view of IMG on a fresh ro mount,
# then once more on a second fresh mount to prove it does not change.
record() {
  local name=$1 img=$2 suffix=$3 opts=$4
  local view="$out/$name$suffix.view.jsonl"
  attach "$img"
  fs_mount "ro,noatime${opts:+,$opts}"
  python3 "$kview" record "$mnt" >"$view"
  if [ -z "$suffix" ]; then
    btrfs subvolume list -apcguqR "$mnt" >"$out/$name.subvols.txt"
    btrfs subvolume list -r "$mnt" >"$out/$name.subvols-r.txt"
    TZ=UTC btrfs subvolume list -s "$mnt" >"$out/$name.subvols-s.txt"
    btrfs subvolume get-default "$mnt" >"$out/$name.subvols-default.txt"
    TZ=UTC btrfs subvolume show "$mnt" >"$out/$name.subvols-top.txt"
  fi
  fs_umount
  fs_mount "ro,noatime${opts:+,$opts}"
  python3 "$kview" record "$mnt" >"$work/again.jsonl"
  fs_umount
  detach
  python3 "$kview" compare "$view" "$work/again.jsonl"
}

store() { # NAME IMG: dump-super, then the compressed (or sparse) image
  btrfs inspect-internal dump-super "$2" >"$out/$1.super.txt"
  rm -f "$out/$1.img" "$out/$1.img.zst"
  if [ "$raw" = 1 ]; then cp --sparse=always "$2" "$out/$1.img"
  else zstd -q -19 --long -T0 -f "$2" -o "$out/$1.img.zst"; fi
}

simple_image() { # NAME SIZE "MKFS OPTIONS" POPULATOR
  local name=$1 img="$work/$1.img"
  echo "== $name"
  # shellcheck disable=SC2086
  newfs "$img" "$2" $3
  attach "$img"; fs_mount ""
  pop "$4" "$mnt" "$small"
  fs_umount; detach
  record "$name" "$img" "" ""
  store "$name" "$img"
  rm -f "$img"
}

# The log image: commit a base state, then fsync changes and copy the
# backing file while still mounted (commit=300 keeps the transaction open),
# so the copy's superblock has log_root != 0, as after a crash.
log_image() {
  local name=log img="$work/log.img" crash="$work/log-crash.img"
  echo "== $name"
  newfs "$img" 256M
  attach "$img"; fs_mount "commit=300"
  pop log_base "$mnt" "$small"
  sync
  pop log_fsync "$mnt" "$small"
  cp --sparse=always "$img" "$crash"
  fs_umount; detach
  local lr
  lr=$(btrfs inspect-internal dump-super "$crash" | awk '$1 == "log_root" {print $2}')
  if [ -z "$lr" ] || [ "$lr" = 0 ]; then
    echo "gen-files.sh: the copy has no log tree (log_root=$lr)" >&2; exit 1
  fi
  cp --sparse=always "$crash" "$work/t.img"
  record "$name" "$work/t.img" ".nolog" "rescue=nologreplay"
  cp --sparse=always "$crash" "$work/t.img"
  record "$name" "$work/t.img" "" ""
  rm -f "$work/t.img"
  store "$name" "$crash"
  rm -f "$img" "$crash"
}

cat >"$work/pop.py" <<'PY'
# Populators: python3 pop.py WHAT MOUNTPOINT SMALL. Data is deterministic
# (seeded), so a rebuilt image holds the same contents.
import ctypes, os, random, socket, struct, subprocess, sys, zlib, fcntl

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
FALLOC_KEEP_SIZE, FALLOC_PUNCH_HOLE, FALLOC_ZERO_RANGE = 1, 2, 0x10
FICLONERANGE = 0x4020940d
K = 1024
M = K * K

def seed_of(name):
    return zlib.crc32(name.encode() if isinstance(name, str) else name)

_words = None
def text(n, seed):
    global _words
    if _words is None:
        r = random.Random(7)
        _words = ["".join(r.choice("etaoinshrdlucmfwyp") for _ in range(r.randint(2, 9)))
                  for _ in range(300)]
    r = random.Random(seed)
    out, size = [], 0
    while size < n:
        line = (" ".join(r.choice(_words) for _ in range(r.randint(4, 14))) + "\n").encode()
        out.append(line)
        size += len(line)
    return b"".join(out)[:n]

def rnd(n, seed):
    return random.Random(seed).randbytes(n)

def data(kind, n, seed):
    if kind == "text":
        return text(n, seed)
    if kind == "random":
        return rnd(n, seed)
    if kind == "zero":
        return bytes(n)
    # mixed: 64 KiB runs of random, text and zeros
    parts, off = [], 0
    while off < n:
        k = ("random", "text", "zero")[(off // (64 * K)) % 3]
        parts.append(data(k, min(64 * K, n - off), seed + off))
        off += 64 * K
    return b"".join(parts)

def write(path, b, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(b)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)

def pwrite(path, off, b):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.pwrite(fd, b, off)
    os.close(fd)

def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)

def falloc(path, mode, off, length):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)
    os.close(fd)

def clone_range(src, soff, length, dst, doff):
    s = os.open(src, os.O_RDONLY)
    d = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
    fcntl.ioctl(d, FICLONERANGE, struct.pack("<qQQQ", s, soff, length, doff))
    os.close(s); os.close(d)

def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

def sync():
    os.sync()

def remount(mnt, opt):
    sync()
    run("mount", "-o", "remount," + opt, mnt)

def subvol(path):
    run("btrfs", "-q", "subvolume", "create", path)

def snapshot(src, dst, ro=False):
    run("btrfs", "-q", "subvolume", "snapshot", *(["-r"] if ro else []), src, dst)

# ---- comp: sizes around every limit, under each compress-force algorithm
SIZES = [0, 1, 2, 100, 2047, 2048, 2049, 3000, 4095, 4096, 4097, 8191, 8192, 8193,
         65536, 131071, 131072, 131073, 262144, 266241, 1048581]

def comp_files(d, small):
    sizes = [s for s in SIZES if not small or s <= 131073]
    for kind in ("text", "zero", "random"):
        for n in sizes:
            if kind == "random" and n > 266241:
                continue
            write(f"{d}/{kind}-{n}", data(kind, n, n))
    write(f"{d}/mixed-600000", data("mixed", 600000 if not small else 200000, 1))
    # Inline first, then grown past the inline limit after a commit.
    write(f"{d}/grown", text(1000, 2)); sync()
    with open(f"{d}/grown", "ab") as f:
        f.write(text(9000, 3))
    # Many extents: written in pieces with a commit between them.
    for i in range(6 if not small else 3):
        pwrite(f"{d}/pieces", i * 70001, text(70001, 10 + i))
        sync()

def comp(mnt, small):
    for alg, opt in (("none", "compress=no"), ("zlib", "compress-force=zlib"),
                     ("lzo", "compress-force=lzo"), ("zstd", "compress-force=zstd"),
                     ("zstd15", "compress-force=zstd:15"), ("zlib1", "compress-force=zlib:1")):
        if small and alg in ("zstd15", "zlib1"):
            continue
        remount(mnt, opt)
        subvol(f"{mnt}/{alg}")
        comp_files(f"{mnt}/{alg}", small)
        sync()
    remount(mnt, "compress=no")

# ---- extents / holes: every way a file's extent list gets interesting
def extents(mnt, small):
    p = f"{mnt}/plain"
    os.mkdir(p)
    write(f"{p}/sparse-trunc", b""); os.truncate(f"{p}/sparse-trunc", 10 * M)
    write(f"{p}/sparse-mid", text(4096, 1))
    pwrite(f"{p}/sparse-mid", 5 * M + 123, text(1000, 2))
    os.truncate(f"{p}/sparse-mid", 8 * M)
    pwrite(f"{p}/sparse-lead", M + 7, text(3000, 3))
    write(f"{p}/inline-then-trunc", text(100, 4)); sync()
    os.truncate(f"{p}/inline-then-trunc", M)
    falloc(f"{p}/falloc", 0, 0, M)
    falloc(f"{p}/falloc-keep", FALLOC_KEEP_SIZE, 0, M)
    write(f"{p}/falloc-keep-data", text(10000, 5))
    falloc(f"{p}/falloc-keep-data", FALLOC_KEEP_SIZE, 0, 2 * M)
    falloc(f"{p}/falloc-split", 0, 0, M)
    sync()
    pwrite(f"{p}/falloc-split", 300 * K + 123, text(10000, 6))
    sync()
    os.truncate(f"{p}/falloc-split", 900 * K)
    write(f"{p}/punch", text(256 * K, 7)); sync()
    falloc(f"{p}/punch", FALLOC_PUNCH_HOLE | FALLOC_KEEP_SIZE, 64 * K, 64 * K)
    falloc(f"{p}/punch", FALLOC_PUNCH_HOLE | FALLOC_KEEP_SIZE, 200000, 10000)
    write(f"{p}/zero-range", text(256 * K, 8)); sync()
    falloc(f"{p}/zero-range", FALLOC_ZERO_RANGE, 10000, 140000)
    write(f"{p}/overwrite", text(512 * K, 9)); sync()
    pwrite(f"{p}/overwrite", 100 * K, rnd(8 * K, 10)); sync()
    pwrite(f"{p}/overwrite", 300000, b"X"); sync()
    write(f"{p}/trunc-down", text(300 * K, 11)); sync()
    os.truncate(f"{p}/trunc-down", 123457)
    run("cp", "--reflink=always", f"{p}/overwrite", f"{p}/overwrite.reflink")
    pwrite(f"{p}/overwrite.reflink", 50 * K, text(5000, 12))
    write(f"{p}/clone-dst", text(20000, 13))
    clone_range(f"{p}/overwrite", 128 * K, 128 * K, f"{p}/clone-dst", 512 * K)
    write(f"{p}/selfclone", text(256 * K, 14)); sync()
    clone_range(f"{p}/selfclone", 0, 64 * K, f"{p}/selfclone", 192 * K)
    # nodatacow: no checksums; overwrites happen in place.
    os.mkdir(f"{p}/nocow"); run("chattr", "+C", f"{p}/nocow")
    write(f"{p}/nocow/f", text(256 * K, 15)); sync()
    pwrite(f"{p}/nocow/f", 64 * K, rnd(4 * K, 16)); sync()
    write(f"{p}/nocow-file", b""); run("chattr", "+C", f"{p}/nocow-file")
    write(f"{p}/nocow-file", text(40000, 17))
    if not small and not os.environ.get("NOBIG"):
        # Larger than BTRFS_MAX_EXTENT_SIZE (128 MiB): several extents.
        with open(f"{p}/big-zero", "wb") as f:
            for _ in range(130):
                f.write(bytes(M))
    sync()

    z = f"{mnt}/zstd"
    remount(mnt, "compress-force=zstd")
    os.mkdir(z)
    write(f"{z}/cpart", text(384 * K, 20)); sync()
    pwrite(f"{z}/cpart", 64 * K, text(4 * K, 21))
    pwrite(f"{z}/cpart", 200000, b"0123456789"); sync()
    write(f"{z}/ctrunc", text(300 * K, 22)); sync()
    os.truncate(f"{z}/ctrunc", 200001)
    write(f"{z}/cpunch", text(384 * K, 23)); sync()
    falloc(f"{z}/cpunch", FALLOC_PUNCH_HOLE | FALLOC_KEEP_SIZE, 100 * K, 40 * K)
    run("cp", "--reflink=always", f"{z}/cpart", f"{z}/cpart.reflink")
    write(f"{z}/cclone", b"")
    clone_range(f"{z}/cpart", 4 * K, 64 * K, f"{z}/cclone", 0)
    clone_range(f"{z}/cpart", 256 * K, 32 * K, f"{z}/cclone", 200 * K)
    write(f"{z}/cinline", text(3000, 24))
    falloc(f"{z}/cfalloc", 0, 0, 512 * K); sync()
    pwrite(f"{z}/cfalloc", 200 * K, text(100 * K, 25))
    sync()
    # One file with extents of every algorithm.
    write(f"{z}/mixalg", text(640 * K, 26)); sync()
    remount(mnt, "compress-force=zlib")
    pwrite(f"{z}/mixalg", 128 * K, text(128 * K, 27)); sync()
    remount(mnt, "compress-force=lzo")
    pwrite(f"{z}/mixalg", 384 * K, text(128 * K, 28)); sync()
    remount(mnt, "compress=no")
    pwrite(f"{z}/mixalg", 520 * K, text(10 * K, 29)); sync()

# ---- names: big directories, extrefs, odd names, deep paths, xattrs
ODD_NAMES = [b"\xff\xfe", b"bad\xc3(", b"\xed\xa0\x80surrogate", b"\xc0\x80overlong",
             b"\xf4\x90\x80\x80toobig", b"trunc\xe2\x82", b"h\xc3\xa9llo", "日本語".encode(),
             "\U0001F600".encode(), b"new\nline", b"tab\there", b"quote\"back\\slash",
             b"ctl\x01\x1f\x7f", b"   ", b"-dash", b".hidden", b"..dots", b"a" * 255,
             "日".encode() * 85, b"\xff" * 255]

def acl(entries):
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in entries)

U = 0xffffffff
ACL_FILE = acl([(1, 6, U), (2, 4, 1000), (4, 4, U), (8, 6, 2000), (0x10, 6, U), (0x20, 4, U)])
ACL_DIR = acl([(1, 7, U), (2, 5, 1001), (4, 5, U), (0x10, 7, U), (0x20, 5, U)])

def names(mnt, small):
    d = f"{mnt}/many"
    os.mkdir(d)
    n = 3000 if not small else 300
    order = list(range(n))
    random.Random(3).shuffle(order)  # readdir (index) order != name order
    for i in order:
        name = f"e{i:05d}" + "x" * (i % 97)
        if i % 10 == 0:
            os.mkdir(f"{d}/{name}")
        else:
            write(f"{d}/{name}", text(i % 50, i) if i % 7 == 0 else b"")
    for i in range(0, n, 13):
        name = f"e{i:05d}" + "x" * (i % 97)
        (os.rmdir if i % 10 == 0 else os.unlink)(f"{d}/{name}")
    for i in range(5, n, 17):
        name = f"e{i:05d}" + "x" * (i % 97)
        if os.path.exists(f"{d}/{name}"):
            os.rename(f"{d}/{name}", f"{d}/r{i:05d}")
    # Hard links with long names, all in one directory: the INODE_REF item
    # fills up and the kernel adds INODE_EXTREF items.
    l = f"{mnt}/links"
    os.mkdir(l)
    write(f"{l}/t", text(5000, 1))
    for i in range(650 if not small else 40):
        os.link(f"{l}/t", f"{l}/{i:04d}-" + "L" * (230 + i % 20))
    os.mkdir(f"{mnt}/links2")
    for i in range(3):
        os.link(f"{l}/t", f"{mnt}/links2/again{i}")
    nd = f"{mnt}/names".encode()
    os.mkdir(nd)
    for nm in ODD_NAMES:
        write(nd + b"/" + nm, nm)
    os.mkdir(nd + b"/dir\xff")
    write(nd + b"/dir\xff/in\xfe", b"inside")
    # Deep paths: long components, and many short ones.
    p = f"{mnt}/deep"
    os.mkdir(p)
    for i in range(10 if not small else 3):
        p += "/" + chr(ord("a") + i) * 255
        os.mkdir(p)
    write(p + "/leaf", b"deep leaf\n")
    p = f"{mnt}/nest"
    os.mkdir(p)
    for i in range(200 if not small else 30):
        p += "/d"
        os.mkdir(p)
    write(p + "/bottom", b"bottom\n")
    xattrs(mnt, small)

def xattrs(mnt, small):
    x = f"{mnt}/xattr"
    os.mkdir(x)
    write(f"{x}/many", b"many xattrs\n")
    for i in range(300 if not small else 50):
        os.setxattr(f"{x}/many", f"user.x{i:03d}" + "n" * (i % 40), text(i * 7, i))
    write(f"{x}/big", b"")
    os.setxattr(f"{x}/big", "user.big", rnd(3900, 1))
    write(f"{x}/empty", b"")
    os.setxattr(f"{x}/empty", "user.empty", b"")
    write(f"{x}/ns", b"namespaces\n")
    os.setxattr(f"{x}/ns", "trusted.t", b"trusted value")
    os.setxattr(f"{x}/ns", "security.s", b"security value")
    os.setxattr(f"{x}/ns", b"user.\xff\xfe", b"non-utf8 name")
    os.setxattr(f"{x}/ns", "user." + "N" * 250, b"longest name")
    # security.capability v2: CAP_NET_BIND_SERVICE, effective
    os.setxattr(f"{x}/ns", "security.capability", struct.pack("<IIIII", 0x02000001, 1 << 10, 0, 0, 0))
    write(f"{x}/acl", b"acl\n")
    os.setxattr(f"{x}/acl", "system.posix_acl_access", ACL_FILE)
    os.mkdir(f"{x}/acldir")
    os.setxattr(f"{x}/acldir", "system.posix_acl_default", ACL_DIR)
    os.setxattr(f"{x}/acldir", "system.posix_acl_access", ACL_DIR)
    write(f"{x}/acldir/inherits", b"inherited acl\n")
    os.mkdir(f"{x}/acldir/subdir")
    os.symlink("many", f"{x}/link")
    os.setxattr(f"{x}/link", "trusted.onlink", b"symlink xattr", follow_symlinks=False)
    os.mkfifo(f"{x}/fifo")
    os.setxattr(f"{x}/fifo", "trusted.onfifo", b"fifo xattr")
    os.setxattr(mnt, "user.top", b"on the top-level directory")

# ---- special: file types, modes, owners, times, long symlinks
def special(mnt, small):
    s = f"{mnt}/types"
    os.mkdir(s)
    os.mkfifo(f"{s}/fifo")
    sk = socket.socket(socket.AF_UNIX)
    sk.bind(f"{s}/socket"); sk.close()
    for name, kind, ma, mi in (("null", "c", 1, 3), ("cbig", "c", 4095, 1048575),
                               ("c00", "c", 0, 0), ("sda1", "b", 8, 1),
                               ("nvme", "b", 259, 7), ("bmid", "b", 300, 70000)):
        os.mknod(f"{s}/{name}", (0o20644 if kind == "c" else 0o60600), os.makedev(ma, mi))
    os.link(f"{s}/fifo", f"{s}/fifo-link")
    os.link(f"{s}/null", f"{s}/null-link")
    l = f"{mnt}/symlinks"
    os.mkdir(l)
    for name, tgt in (("short", b"a"), ("rel", b"../types/fifo"), ("abs", b"/etc/passwd"),
                      ("dangling", b"no/such/file"), ("self", b"self"),
                      ("nonutf8", b"\xff\xfe/t"), ("newline", b"line1\nline2"),
                      ("long4000", (b"0123456789abcde/" * 250)[:4000]),
                      ("max4095", (b"d/" * 2048)[:4095])):
        os.symlink(tgt, f"{l}/{name}".encode())
    m = f"{mnt}/meta"
    os.mkdir(m)
    for name, mode in (("m0000", 0o000), ("m7777", 0o7777), ("m4755", 0o4755),
                       ("m2755", 0o2755), ("m0640", 0o640)):
        write(f"{m}/{name}", name.encode()); os.chmod(f"{m}/{name}", mode)
    os.mkdir(f"{m}/sticky"); os.chmod(f"{m}/sticky", 0o1777)
    for name, uid, gid in (("u1000", 1000, 1000), ("nobody", 65534, 65534),
                           ("ubig", 4000000000, 3000000000), ("gneg2", 0, 4294967294)):
        write(f"{m}/{name}", b""); os.chown(f"{m}/{name}", uid, gid)
    os.chown(f"{s}/fifo", 123, 456)
    os.lchown(f"{l}/short", 77, 88)
    for name, at, mt in (("t-epoch", 0, 0), ("t-ns", 1, 999999999),
                         ("t-neg", -1500000000123456789, -1),
                         ("t-2038", 2**31 * 10**9 + 1, 2**31 * 10**9 - 1),
                         ("t-far", 2**34 * 10**9 + 123456789, 253402300799 * 10**9 + 999999999),
                         ("t-now-ish", 1700000000123456789, 1700000001987654321)):
        write(f"{m}/{name}", name.encode()); os.utime(f"{m}/{name}", ns=(at, mt))
    os.utime(f"{m}/sticky", ns=(1234567890123456789, 1234567891000000001))
    os.utime(f"{l}/short", ns=(5, 6), follow_symlinks=False)
    write(f"{m}/immutable", b"immutable\n"); run("chattr", "+i", f"{m}/immutable")
    write(f"{m}/appendonly", b"append only\n"); run("chattr", "+a", f"{m}/appendonly")
    write(f"{m}/hugexattr", b"")
    os.setxattr(f"{m}/hugexattr", "user.huge", rnd(16000, 2))
    os.mkdir(f"{m}/emptydir")
    os.utime(m, ns=(10**18, 10**18 + 1))

# ---- subvols: nesting, snapshots (stubs), moves, deletions, set-default
def subvols(mnt, small):
    write(f"{mnt}/top.txt", b"top level\n")
    os.mkdir(f"{mnt}/d")
    subvol(f"{mnt}/sv1")
    write(f"{mnt}/sv1/a", text(5000, 1)); write(f"{mnt}/sv1/b", b"bee\n")
    os.link(f"{mnt}/sv1/a", f"{mnt}/sv1/a-link")
    os.setxattr(f"{mnt}/sv1", "user.svroot", b"xattr on a subvolume root")
    os.mkdir(f"{mnt}/sv1/dir")
    subvol(f"{mnt}/sv1/nested")
    write(f"{mnt}/sv1/nested/n", b"nested\n")
    subvol(f"{mnt}/sv1/nested/deep")
    write(f"{mnt}/sv1/nested/deep/x", text(300, 2))
    subvol(f"{mnt}/sv1/dir/inner")
    write(f"{mnt}/sv1/dir/inner/i", b"inner\n")
    subvol(f"{mnt}/sv1/tmpnest")
    subvol(f"{mnt}/sv2")
    write(f"{mnt}/sv2/f", b"sv2\n")
    subvol(f"{mnt}/sv3-empty")
    subvol(f"{mnt}/sv-\udcff")
    write(f"{mnt}/sv-\udcff/f", b"subvolume with a non-UTF-8 name\n")
    subvol(f"{mnt}/svdel")
    write(f"{mnt}/svdel/f", b"to be deleted\n")
    os.mkdir(f"{mnt}/snaps")
    snapshot(f"{mnt}/sv1", f"{mnt}/snaps/sv1-rw")
    snapshot(f"{mnt}/sv1", f"{mnt}/snaps/sv1-ro", ro=True)
    snapshot(f"{mnt}/snaps/sv1-rw", f"{mnt}/snaps/sv1-rw-snap")
    snapshot(f"{mnt}/svdel", f"{mnt}/snaps/svdel-snap")
    snapshot(mnt, f"{mnt}/snaps/top")
    # The source changes after its snapshots.
    write(f"{mnt}/sv1/c", b"after snapshot\n")
    os.unlink(f"{mnt}/sv1/b")
    with open(f"{mnt}/sv1/a", "ab") as f:
        f.write(b"appended after snapshot\n")
    os.rename(f"{mnt}/sv2", f"{mnt}/d/sv2-moved")
    run("btrfs", "-q", "subvolume", "delete", f"{mnt}/svdel")
    run("btrfs", "-q", "subvolume", "delete", f"{mnt}/sv1/tmpnest")
    write(f"{mnt}/snaps/sv1-rw/only-in-snapshot", b"snapshot change\n")
    out = subprocess.run(["btrfs", "inspect-internal", "rootid", f"{mnt}/sv1/nested"],
                         check=True, capture_output=True, text=True).stdout.strip()
    run("btrfs", "subvolume", "set-default", out, mnt)
    sync()
    run("btrfs", "subvolume", "sync", mnt)

# ---- snaps: snapshots of a tree of many leaves (nodesize 4096) diverging in
# every way: inodes added, deleted, rewritten in place (chmod), renamed;
# a snapshot of a diverged snapshot; one that lost most of its files; the
# source changing afterwards. Empty files keep the view small.
def snaps(mnt, small):
    per = 30 if small else 60
    base = f"{mnt}/base"
    subvol(base)
    for d in range(4):
        os.mkdir(f"{base}/d{d}")
        for i in range(per):
            write(f"{base}/d{d}/f{i:03d}", b"")
    s = f"{mnt}/snaps"
    os.mkdir(s)
    snapshot(base, f"{s}/same")
    snapshot(base, f"{s}/same-ro", ro=True)
    snapshot(base, f"{s}/add")
    os.mkdir(f"{s}/add/new")
    for i in range(25):
        write(f"{s}/add/new/n{i:02d}", b"")
    snapshot(base, f"{s}/del")
    for i in range(0, per, 7):
        os.unlink(f"{s}/del/d1/f{i:03d}")
    snapshot(base, f"{s}/chmod")
    for i in range(0, per, 5):
        os.chmod(f"{s}/chmod/d2/f{i:03d}", 0o600)
    snapshot(base, f"{s}/mixed")
    for i in range(0, per, 2):
        os.unlink(f"{s}/mixed/d3/f{i:03d}")
    for i in range(10):
        write(f"{s}/mixed/d0/m{i}", b"")
    os.rename(f"{s}/mixed/d0/f001", f"{s}/mixed/d1/moved")
    snapshot(f"{s}/del", f"{s}/del-snap")
    for i in range(1, per, 4):
        os.unlink(f"{s}/del-snap/d0/f{i:03d}")
    write(f"{s}/del-snap/d0/extra", b"")
    snapshot(base, f"{s}/most-gone")
    for d in range(4):
        for i in range(per):
            if i % 5:
                os.unlink(f"{s}/most-gone/d{d}/f{i:03d}")
    # the source diverges from all of them
    for i in range(20):
        os.unlink(f"{base}/d2/f{i:03d}")
    os.mkdir(f"{base}/late")
    for i in range(15):
        write(f"{base}/late/l{i:02d}", b"")
    sync()

# ---- log: a committed base, then fsynced changes left in the log tree
def log_base(mnt, small):
    b = f"{mnt}/base"
    os.mkdir(b)
    write(f"{b}/old.txt", text(10000, 1))
    write(f"{b}/keep.txt", b"keep\n")
    write(f"{b}/gone.txt", b"gone\n")
    write(f"{b}/rename-me", text(3000, 2))
    subvol(f"{mnt}/sv")
    write(f"{mnt}/sv/s.txt", b"in a subvolume\n")

def log_fsync(mnt, small):
    b = f"{mnt}/base"
    write(f"{b}/new.txt", text(20000, 3)); fsync_path(f"{b}/new.txt")
    with open(f"{b}/old.txt", "ab") as f:
        f.write(text(5000, 4)); f.flush(); os.fsync(f.fileno())
    os.mkdir(f"{b}/newdir")
    write(f"{b}/newdir/f", text(3000, 5)); fsync_path(f"{b}/newdir/f")
    os.setxattr(f"{b}/keep.txt", "user.logged", b"set before fsync")
    fsync_path(f"{b}/keep.txt")
    os.unlink(f"{b}/gone.txt"); fsync_path(b)
    os.rename(f"{b}/rename-me", f"{b}/renamed"); fsync_path(f"{b}/renamed")
    write(f"{mnt}/sv/s2.txt", text(7000, 6)); fsync_path(f"{mnt}/sv/s2.txt")

if __name__ == "__main__":
    what, mnt, small = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    globals()[what](mnt, small)
PY

echo "kernel $(uname -r), $(mkfs.btrfs --version | head -1)"
wanted comp && simple_image comp 256M "" comp
wanted extents && simple_image extents 512M "" extents
wanted holes && NOBIG=1 simple_image holes 256M "-O ^no-holes" extents
wanted names && simple_image names 256M "-n 4096" names
wanted special && simple_image special 256M "" special
wanted subvols && simple_image subvols 256M "" subvols
wanted snaps && simple_image snaps 256M "-n 4096" snaps
wanted log && log_image
{
  echo "kernel: $(uname -r)"
  echo "mkfs: $(mkfs.btrfs --version | head -1)"
  echo "small: $small"
} >"$out/GENERATED"
echo "done: $out"
