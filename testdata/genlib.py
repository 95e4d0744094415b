# SPDX-License-Identifier: MIT
"""genlib.py: the code the generators share (a library, not a generator).

Generators -- the scripts that make committed test data, expected results or
fuzz inputs, and the recorders and populators they run -- are named
gen-<what>.sh (shell) or gen_<what>.py (Python: an underscore, so that tests
can import them). What more than one of them needs lives here, and the
Python image tests (tests/support/imgtest.py) take it from here too:

  crc32c_raw(seed, data), crc32c(data)   btrfs checksums and name hashes
  statx(path, mask)          every stx_* field, raw, from statx(2) without
                             following a final symlink
  name_to_handle(path, flags)  name_to_handle_at(2): (type, bytes), or None
                             when the kernel refuses the flags (EINVAL)
  sha256_file(path)          hex sha256 of a file's contents, streamed
  unzstd_bytes(path)         a .zst file's contents (the zstd command)
  record_view(mnt, out, start)  the kernel's view of a mounted filesystem
                             (gen_kview.py record) written to file @out

Import it from a script in testdata/ with that directory on sys.path (it is
there already when the script is run), from elsewhere by inserting it:

    sys.path.insert(0, os.path.join(REPO, "testdata"))
    import genlib
"""
import ctypes
import errno
import hashlib
import os
import subprocess
import sys

SYS_STATX = 332             # x86_64
SYS_NAME_TO_HANDLE_AT = 303  # x86_64
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
STATX_BASIC_STATS = 0x7ff
STATX_BTIME = 0x800
STATX_MNT_ID = 0x1000
STATX_SUBVOL = 0x8000
MAX_HANDLE_SZ = 128

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
        t.append(c)
    return t


_CRC32C_TABLE = _crc32c_table()


def crc32c_raw(seed, data):
    """The reflected CRC-32C (Castagnoli) register after @data, from @seed,
    with no inversion: the kernel's crc32c(seed, data, len). A name hash is
    crc32c_raw(0xFFFFFFFE, name) (btrfs_name_hash: crc32c(~1, ...))."""
    crc = seed
    t = _CRC32C_TABLE
    for b in data:
        crc = (crc >> 8) ^ t[(crc ^ b) & 0xFF]
    return crc


def crc32c(data):
    """CRC-32C as btrfs stores it in checksum fields (initial and final
    inversion; the check value of b"123456789" is 0xe3069283)."""
    return crc32c_raw(0xFFFFFFFF, data) ^ 0xFFFFFFFF


def _u32(b, off):
    return int.from_bytes(b[off:off + 4], "little")


def _u64(b, off):
    return int.from_bytes(b[off:off + 8], "little")


def _ts(b, off):
    return (int.from_bytes(b[off:off + 8], "little", signed=True), _u32(b, off + 8))


def statx(path, mask):
    """statx(2) of @path (str or bytes), AT_SYMLINK_NOFOLLOW, asking for
    @mask. Every field is returned as the kernel left it; "mask" is the
    stx_mask it set, which says which of them are valid (STATX_BTIME,
    STATX_MNT_ID, STATX_SUBVOL, ...). Times are (seconds, nanoseconds)."""
    buf = ctypes.create_string_buffer(256)
    rc = _libc.syscall(SYS_STATX, AT_FDCWD, os.fsencode(path), AT_SYMLINK_NOFOLLOW, mask, buf)
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)
    b = buf.raw
    return {
        "mask": _u32(b, 0x00),
        "nlink": _u32(b, 0x10), "uid": _u32(b, 0x14), "gid": _u32(b, 0x18),
        "mode": int.from_bytes(b[0x1c:0x1e], "little"),
        "ino": _u64(b, 0x20), "size": _u64(b, 0x28), "blocks": _u64(b, 0x30),
        "atime": _ts(b, 0x40), "btime": _ts(b, 0x50), "ctime": _ts(b, 0x60),
        "mtime": _ts(b, 0x70),
        "rdev_major": _u32(b, 0x80), "rdev_minor": _u32(b, 0x84),
        "mnt_id": _u64(b, 0x90), "subvol": _u64(b, 0xa0),
    }


def name_to_handle(path, flags):
    """name_to_handle_at(AT_FDCWD, @path, ..., @flags): (handle type as the
    signed int the kernel returns, handle bytes), or None if the kernel
    says EINVAL (flags it does not know, such as AT_HANDLE_CONNECTABLE
    before 6.13). Any other error is raised."""
    buf = ctypes.create_string_buffer(8 + MAX_HANDLE_SZ)
    buf[0:4] = MAX_HANDLE_SZ.to_bytes(4, "little")
    mnt = ctypes.c_int(0)
    rc = _libc.syscall(SYS_NAME_TO_HANDLE_AT, AT_FDCWD, os.fsencode(path), buf,
                       ctypes.byref(mnt), flags)
    if rc != 0:
        e = ctypes.get_errno()
        if e == errno.EINVAL:
            return None
        raise OSError(e, os.strerror(e), path)
    b = buf.raw
    n = _u32(b, 0)
    return int.from_bytes(b[4:8], "little", signed=True), b[8:8 + n]


def sha256_file(path):
    """Hex sha256 of a file's contents, read 1 MiB at a time."""
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            h.update(chunk)
    return h.hexdigest()


def unzstd_bytes(path):
    """The decompressed contents of @path (zstd -d; --long=31 so that
    frames written with a long window decode too)."""
    return subprocess.run(["zstd", "-q", "-d", "--long=31", "-c", path], check=True,
                          stdout=subprocess.PIPE).stdout


def record_view(mnt, out, start=None):
    """Write to file @out the kernel's view of the filesystem mounted at
    @mnt (gen_kview.py record; from the subdirectory @start if given)."""
    args = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "gen_kview.py"), "record", mnt]
    if start:
        args += ["--start", start]
    with open(out, "wb") as f:
        subprocess.run(args, check=True, stdout=f)


def content(name, size):
    """Deterministic bytes for file @name: sha256 blocks of the name and a
    counter (incompressible, so every extent is a real data extent)."""
    out = bytearray()
    i = 0
    while len(out) < size:
        out += hashlib.sha256(b"%s:%d" % (name.encode(), i)).digest()
        i += 1
    return bytes(out[:size])
