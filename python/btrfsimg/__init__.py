# SPDX-License-Identifier: MIT
"""btrfsimg: read btrfs filesystems straight from image files.

No mount, no root, no kernel module; images are never written. This is the
Python binding of libbtrfsimg: every answer comes from the C library, with
its checks (every tree block and, unless verify=False, every data block
verified against its checksum), its degraded RAID reads and its exact
kernel view (st_ino, subvolume, file handles, readdir d_ino).

Hash every file of an image::

    import btrfsimg, hashlib, stat
    with btrfsimg.open(["disk.img"]) as fs:
        for rec in fs.walk():
            if stat.S_ISREG(rec["mode"]):
                print(hashlib.sha256(fs.read_bytes(rec)).hexdigest(), rec["path"])

read_bytes() takes the walked record itself (no second lookup) and holds
the file whole; hashlib.file_digest(fs.open(rec), "sha256") streams one
too large for that; fs.walk(hash=True) gives records that carry the
sha256 the library computes with the GIL released.

The records of Filesystem.walk(), .inodes(), .subvolumes(), .superblock
and .collisions() are dicts with the keys and values of the CLI's JSON
lines (`btrfsimg walk --json`, ...; integers are Python ints, never
strings). Names are bytes on disk: they come as str decoded from UTF-8
with "surrogateescape", so ``name.encode("utf-8", "surrogateescape")``
gives the exact bytes back; every method that takes a path takes str or
bytes.

Errors raise btrfsimg.Error (an OSError: .errno and .strerror, the
library's message saying what and where) or one of its subclasses
NotFoundError (also a FileNotFoundError), DamagedError, UnsupportedError.
Damage the library worked around (a bad superblock copy, a tree block read
from its other copy, a missing device of a redundant set, an unreadable
entry skipped by a walk) is reported as a DamageWarning through the
warnings module, or to the on_damage callable given to open().

The GIL is released while the library reads and parses. One Filesystem
serves one thread at a time (calls from several threads are serialized);
separate Filesystem objects run in parallel.
"""
from __future__ import annotations

import io
import os
import stat as _stat
import warnings
from typing import Any, BinaryIO, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _btrfsimg
from ._btrfsimg import DamagedError, Error, NotFoundError, UnsupportedError

__all__ = ["open", "Filesystem", "File", "Error", "NotFoundError", "DamagedError",
           "UnsupportedError", "DamageWarning", "version", "__version__"]

__version__ = _btrfsimg.version()

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

_NO_DATA_VERIFY = 1 << 0
_NO_LOG_REPLAY = 1 << 1
_TARGET_STUB = 2
_ROOT_DIR = 256


class DamageWarning(UserWarning):
    """Damage the library worked around; the message says what and where."""


def version() -> str:
    """The version of libbtrfsimg this module is built from."""
    return _btrfsimg.version()


def _warn_damage(msg: str) -> None:
    warnings.warn(msg, DamageWarning, stacklevel=3)


def _name_bytes(p: Any) -> bytes:
    """A path argument as the bytes the filesystem stores."""
    p = os.fspath(p)
    if isinstance(p, str):
        return p.encode("utf-8", "surrogateescape")
    return bytes(p)


def _device_size(obj: Any) -> int:
    for attr in ("get_size", "get_media_size"):
        f = getattr(obj, attr, None)
        if callable(f):
            return int(f())
    size = getattr(obj, "size", None)
    if isinstance(size, int):
        return size
    if callable(size):
        return int(size())
    if callable(getattr(obj, "seek", None)):
        here = obj.tell() if callable(getattr(obj, "tell", None)) else 0
        end = obj.seek(0, io.SEEK_END)
        if end is None:
            end = obj.tell()
        obj.seek(here, io.SEEK_SET)
        return int(end)
    raise TypeError("cannot tell the size of device %r: give it seek(), size or get_size()"
                    % (obj,))


class File(io.RawIOBase):
    """A regular file of the image, read-only and seekable. Bytes are read
    on demand (never the whole file at once): holes and preallocated ranges
    read as zeros, compressed extents are decompressed, and data checksums
    are verified unless the filesystem was opened with verify=False (a bad
    block raises DamagedError). Filesystem.open() returns one wrapped in an
    io.BufferedReader."""

    def __init__(self, fs: "Filesystem", subvol: int, objectid: int, name: str = ""):
        super().__init__()
        mode, size, _ = fs._h.inode(subvol, objectid)
        if not _stat.S_ISREG(mode):
            kind = "a directory" if _stat.S_ISDIR(mode) else "not a regular file"
            raise IsADirectoryError(21 if _stat.S_ISDIR(mode) else 22,
                                    "%s is %s" % (name or "%d:%d" % (subvol, objectid), kind))
        self._fs = fs
        self._subvol = subvol
        self._objectid = objectid
        self._size = size
        self._pos = 0
        self.name = name

    @property
    def subvol(self) -> int:
        return self._subvol

    @property
    def objectid(self) -> int:
        return self._objectid

    @property
    def size(self) -> int:
        """i_size: the file's length in bytes."""
        return self._size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        self._checkClosed()
        mv = memoryview(b).cast("B")
        if self._pos >= self._size or len(mv) == 0:
            return 0
        want = min(len(mv), self._size - self._pos)
        n = self._fs._h.readinto(self._subvol, self._objectid, self._pos, mv[:want])
        self._pos += n
        return n

    def readall(self) -> bytes:
        """The rest of the file, read in one call straight into the bytes
        returned (read() and BufferedReader.read() come here). A size
        past what the devices could hold (16 bytes per byte) is cut where
        the file's data ends, with a DamageWarning, as `btrfsimg cat`
        does."""
        self._checkClosed()
        if self._pos >= self._size:
            return b""
        data = self._fs._h.read_all(self._subvol, self._objectid, self._pos)
        self._pos += len(data)
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._checkClosed()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._size + offset
        else:
            raise ValueError("invalid whence (%r)" % (whence,))
        if pos < 0:
            raise ValueError("negative seek position %d" % pos)
        self._pos = pos
        return pos

    def tell(self) -> int:
        self._checkClosed()
        return self._pos

    def __repr__(self) -> str:
        return "<btrfsimg.File %s %d:%d size=%d>" % (self.name, self._subvol, self._objectid,
                                                      self._size)


class Filesystem:
    """An open btrfs filesystem (see btrfsimg.open()). A context manager:
    leaving the with block closes it (files opened from it stop working)."""

    def __init__(self, handle: Any):
        self._h = handle

    # ------------------------------------------------------------ life

    def close(self) -> None:
        """Release the image files and every cache. Idempotent."""
        self._h.close()

    @property
    def closed(self) -> bool:
        return self._h.closed

    def __enter__(self) -> "Filesystem":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ facts

    @property
    def superblock(self) -> Dict[str, Any]:
        """The superblock in use, the devices, profiles and log tree: a dict
        with the keys of `btrfsimg super --json`."""
        return self._h.super()

    @property
    def generation(self) -> Optional[Tuple[int, str]]:
        """With open(..., generation=N): (N, where its root tree was found,
        as the CLI's "reading generation N: ..." line); else None."""
        return self._h.generation_root()

    def subvolumes(self) -> List[Dict[str, Any]]:
        """Every subvolume and snapshot, top level (5) first, then by id:
        dicts as the lines of `btrfsimg subvols --json`."""
        return self._h.subvols()

    def default_subvolume(self) -> int:
        """The id of the default subvolume (what a plain mount shows)."""
        return self._h.default_subvol()

    @property
    def damage_count(self) -> int:
        """Damage events seen so far (worked around or not)."""
        return self._h.counts()[0]

    @property
    def missing_devices(self) -> int:
        """Devices the superblock names that were not given."""
        return self._h.counts()[1]

    # ------------------------------------------------------------ walking

    def walk(self, subvol: Optional[int] = None, path: Optional[PathLike] = None,
             hash: bool = False, inumbits: Optional[int] = None,
             mount_subvol: Optional[int] = None,
             csum: bool = False) -> Iterator[Dict[str, Any]]:
        """Every path under the start (the top level; subvolume `subvol`'s
        root; `path` resolved from there), depth-first in readdir order,
        crossing into subvolumes, with what stat/statx, readdir and
        name_to_handle_at show for it: one dict per path, equal to the
        lines of `btrfsimg walk --json` (with `hash`: --hash, the sha256 of
        regular files and of each xattr value; with `inumbits` N (0 or
        32..64): --inumbits N, each path's number under the 2021
        proposals, numdevs=2 relative to `mount_subvol`, default the
        default subvolume; with `csum`: --csum, each regular file's
        checksum coverage under "csum"). An entry that cannot be read is
        skipped with a DamageWarning, as the CLI reports it and goes on; a
        name that cannot be a path component (NUL, '/', ".", "..") is in
        `path` by its safe form (%00, %2F, %2E...: btrfsimg(1), DAMAGED
        NAMES), with a DamageWarning."""
        it = self._h.walk(5 if subvol is None else subvol,
                          b"" if path is None else _name_bytes(path), bool(hash),
                          -1 if inumbits is None else inumbits,
                          mount_subvol or 0, False)
        return self._with_csum(it) if csum else it

    def _with_csum(self, it: Iterator[Dict[str, Any]]) -> Iterator[Dict[str, Any]]:
        for rec in it:
            if rec["mode"] & 0o170000 == 0o100000 and rec["subvol"] is not None:
                rec["csum"] = self._h.csum_cover(rec["subvol"], rec["ino"])
            yield rec

    def inodes(self, inumbits: int = 56, subvol: Optional[int] = None,
               mount_subvol: Optional[int] = None) -> Iterator[Dict[str, Any]]:
        """Every inode, in subvolume then objectid order, with one path and
        the number today's kernel and each proposal present: dicts as the
        lines of `btrfsimg inodes --json --inumbits N`. Streamed: memory
        stays small. While the iterator runs, other calls on this
        Filesystem raise RuntimeError; finish it or call its close()."""
        return self._h.inodes(subvol or 0, inumbits, mount_subvol or 0)

    def collisions(self, mount_subvol: Optional[int] = None,
                   examples: int = 3) -> Dict[str, Any]:
        """The inode-number analysis: the summary of `btrfsimg collisions
        --json` (minimal safe inumbits, counts, headroom) as a dict, and
        under "schemes" one dict per scheme (shared numbers `groups`, the
        `inodes` behind them, up to `examples` groups of members, readdir
        disagreements, the same without stub directories); under "nfs" the
        NFS v3/v4 and composed schemes, 32-bit figures and the transition
        count (docs/inode-numbers.md)."""
        return self._h.collisions(mount_subvol or 0, examples)

    # ------------------------------------------------------------ forensics

    def deleted(self, hash: bool = False) -> List[Dict[str, Any]]:
        """What no live path shows any more, found in every tree block on
        the devices: deleted files, earlier versions of live ones, files of
        dropped subvolumes, orphans. One dict per version, as the lines of
        `btrfsimg deleted --json` (with `hash`: --hash, the sha256 of each
        version read whole). The first call reads every device end to end;
        later calls reuse that scan."""
        return self._h.deleted(bool(hash))

    def read_deleted(self, id: str, no_verify: bool = False) -> bytes:
        """The bytes of the recovered version `id` (a deleted() record's
        "id"). Ranges that cannot be trusted (its "bad_ranges") read as
        zeros, with a DamageWarning (or on_damage) saying so; with
        `no_verify` (the CLI's --no-verify), those whose checksums fail
        ("csum mismatch") read as the bytes on disk instead, unverified."""
        data, complete = self._h.read_deleted(id, bool(no_verify))
        if not complete:
            cb = self._h.on_damage
            if cb is not None:
                cb("recovered version %s: some ranges could not be read; they read as %s"
                   % (id, "zeros, or as on disk where checksums fail (no_verify)"
                      if no_verify else "zeros"))
        return data

    # ------------------------------------------------------------ diff

    def _subvol_id(self, which: Union[int, PathLike]) -> int:
        if isinstance(which, int):
            return which
        kind, subvol, objectid = self._resolve(which, 5)[:3]
        if objectid != 256:
            raise ValueError("%r is not a subvolume (inode %d of subvolume %d)"
                             % (which, objectid, subvol))
        return subvol

    def diff(self, from_: Union[int, PathLike], to: Union[int, PathLike], *,
             from_fs: Optional["Filesystem"] = None) -> List[Dict[str, Any]]:
        """What changed from one snapshot to another (`btrfsimg diff --json`):
        a list of {"change": "added" | "deleted" | "renamed" | "modified",
        "path", "old_path" (renamed; else None), "objectid", "fields": the
        ones that differ among content, size, mode, uid, gid, mtime, xattrs,
        target, rdev}, sorted by path. Each snapshot is a subvolume id or
        the path of its root from the top level.

        from_fs: read `from_` through another Filesystem of the same images,
        opened with generation=N (`btrfsimg diff --from-generation`): then
        from_ and to may be the same subvolume, compared as two transactions
        left it. Inodes that cannot be read (an older generation's blocks
        written over since) are left out and named through on_damage of
        the Filesystem that read them; a root that cannot be read raises
        Error."""
        src = self if from_fs is None else from_fs
        return self._h.diff(src._subvol_id(from_), self._subvol_id(to),
                            None if from_fs is None else from_fs._h)

    # ------------------------------------------------------------ paths

    def _resolve(self, path: PathLike, subvol: Optional[int]) -> tuple:
        """(kind, subvol, objectid, d_ino, file_type) of what stat(path) reaches."""
        return self._h.lookup(5 if subvol is None else subvol, _name_bytes(path))

    def stat(self, path: PathLike, subvol: Optional[int] = None) -> Dict[str, Any]:
        """What `walk --json` shows for `path` (not following a final
        symlink): ino, subvol, mode, nlink, uid, gid, size, rdev, the four
        times as [seconds, nanoseconds], target, file handles: the first
        line of `walk --json --path PATH`, with d_ino, what readdir of the
        parent directory shows for it (None for a subvolume's root), and for
        regular files "csum", their checksum coverage (see csum())."""
        sv = 5 if subvol is None else subvol
        raw = _name_bytes(path)
        rec = next(self._h.walk(sv, raw, False, -1, 0, True))
        if raw.strip(b"/"):
            rec["d_ino"] = self._h.lookup(sv, raw)[3]
        if rec["mode"] & 0o170000 == 0o100000 and rec["subvol"] is not None:
            rec["csum"] = self._h.csum_cover(rec["subvol"], rec["ino"])
        return rec

    def extents(self, path: PathLike, subvol: Optional[int] = None) -> List[Dict[str, Any]]:
        """Where the bytes of the file at `path` lie: its extents in file
        order, covering its size, as the lines of `btrfsimg extents
        --json` (file_offset, length, type, compression, logical,
        disk_length, csum, csum_bytes, and copies: devid, device,
        physical, disk_offset, image_offset, note)."""
        _, sv, obj, _, _ = self._resolve(path, subvol)
        return self._h.extents(sv, obj)

    def csum(self, path: PathLike, subvol: Optional[int] = None) -> str:
        """The file's checksum coverage, as `walk --json --csum` says it:
        "full", "partial", "none", "nodatasum", "inline" or "zeros"."""
        _, sv, obj, _, _ = self._resolve(path, subvol)
        return self._h.csum_cover(sv, obj)

    def listdir(self, path: PathLike = "", subvol: Optional[int] = None) -> list:
        """The names of a directory in readdir order ("." and ".." left
        out): str (surrogateescape), or bytes when `path` is bytes."""
        kind, sv, obj, _, _ = self._resolve(path, subvol)
        names = [e[0] for e in self._h.readdir(sv, obj)] if kind != _TARGET_STUB else []
        if isinstance(os.fspath(path), bytes):
            return names
        return [n.decode("utf-8", "surrogateescape") for n in names]

    def scandir(self, path: PathLike = "", subvol: Optional[int] = None) -> List[Dict[str, Any]]:
        """The entries of a directory: dicts with name (bytes), d_ino,
        file_type (BTRFS_FT_*), and the subvol and objectid stat reaches."""
        kind, sv, obj, _, _ = self._resolve(path, subvol)
        if kind == _TARGET_STUB:
            return []
        return [{"name": n, "d_ino": d_ino, "file_type": ft, "subvol": tsv, "objectid": tobj,
                 "stub": k == _TARGET_STUB}
                for n, k, tsv, tobj, d_ino, ft in self._h.readdir(sv, obj)]

    def readlink(self, path: PathLike, subvol: Optional[int] = None) -> Union[str, bytes]:
        """A symlink's target (bytes if `path` is bytes, else str with
        surrogateescape)."""
        _, sv, obj, _, _ = self._resolve(path, subvol)
        t = self._h.readlink(sv, obj)
        return t if isinstance(os.fspath(path), bytes) else t.decode("utf-8", "surrogateescape")

    def listxattr(self, path: PathLike, subvol: Optional[int] = None) -> List[str]:
        """Extended attribute names, in listxattr(2) order (str)."""
        _, sv, obj, _, _ = self._resolve(path, subvol)
        if obj == 2:
            return []
        return [n.decode("utf-8", "surrogateescape") for n, _ in self._h.xattrs(sv, obj)]

    def getxattr(self, path: PathLike, name: PathLike, subvol: Optional[int] = None) -> bytes:
        """One extended attribute's value; NotFoundError if absent."""
        _, sv, obj, _, _ = self._resolve(path, subvol)
        want = _name_bytes(name)
        for n, v in (self._h.xattrs(sv, obj) if obj != 2 else []):
            if n == want:
                return v
        raise NotFoundError(61, "no xattr %r on %r" % (want, os.fspath(path)))

    def _target(self, target: Union[PathLike, Dict[str, Any]],
                subvol: Optional[int]) -> tuple:
        """(subvol, objectid, name) of a path, or of a record of walk()
        (its "subvol" and "ino": no lookup)."""
        if isinstance(target, dict):
            if subvol is not None:
                raise TypeError("subvol is given with a path, not with a record")
            name = target.get("path", "")
            if _stat.S_ISDIR(target.get("mode", 0)):
                raise IsADirectoryError(21, "%s is a directory" % (name or "/"))
            # A regular file's st_ino is its objectid (only subvolume roots
            # and stubs, directories, are presented otherwise).
            return target["subvol"], target["ino"], name
        _, sv, obj, _, _ = self._resolve(target, subvol)
        name = os.fspath(target)
        if isinstance(name, bytes):
            name = name.decode("utf-8", "surrogateescape")
        return sv, obj, name

    def open(self, path: Union[PathLike, Dict[str, Any]], subvol: Optional[int] = None,
             buffering: int = io.DEFAULT_BUFFER_SIZE) -> Union[io.BufferedReader, File]:
        """A regular file as a seekable binary file object (read, readinto,
        seek, tell), streaming through the library: an io.BufferedReader,
        or with buffering=0 the unbuffered File itself. `path` may also be
        a record of walk(): the file is then opened by its subvolume and
        inode ("subvol", "ino"), with no second lookup of its path."""
        sv, obj, name = self._target(path, subvol)
        raw = File(self, sv, obj, name)
        return io.BufferedReader(raw, buffering) if buffering else raw

    def read_bytes(self, path: Union[PathLike, Dict[str, Any]],
                   subvol: Optional[int] = None) -> bytes:
        """A regular file's whole contents as bytes, read in one call with
        the GIL released straight into the bytes object returned: the
        cheapest way to hash or scan every file of a walk
        (``hashlib.sha256(fs.read_bytes(rec))``). `path` is a path or a
        record of walk() (no second lookup). The file is held in memory
        whole: use open() to stream large ones. A size past what the
        devices could hold (16 bytes per byte) is cut where the file's
        data ends, with a DamageWarning, as `btrfsimg cat` does."""
        sv, obj, _ = self._target(path, subvol)
        return self._h.read_all(sv, obj, 0)

    def open_inode(self, subvol: int, objectid: int,
                   buffering: int = io.DEFAULT_BUFFER_SIZE) -> Union[io.BufferedReader, File]:
        """The regular file subvol:objectid, as open() returns it."""
        raw = File(self, subvol, objectid, "%d:%d" % (subvol, objectid))
        return io.BufferedReader(raw, buffering) if buffering else raw

    def __repr__(self) -> str:
        return "<btrfsimg.Filesystem%s>" % (" closed" if self.closed else "")


Device = Union[PathLike, BinaryIO, Any]


def open(devices: Union[Device, Sequence[Device]], *, partition: Optional[int] = None,
         offset: Optional[int] = None, verify: bool = True, log_replay: bool = True,
         super_mirror: Optional[int] = None, cache_bytes: int = 0,
         format: Optional[str] = None, passphrase: Optional[Union[str, bytes]] = None,
         volume_key: Optional[bytes] = None, volume: Optional[str] = None,
         kdf_limit: Optional[float] = None, generation: Optional[int] = None,
         fsid: Optional[str] = None,
         on_damage: Optional[Callable[[str], Any]] = None) -> Filesystem:
    """Open the btrfs filesystem on `devices`: every device image of a
    multi-device filesystem, in any order (matched by fsid and devid;
    missing ones are fine where the profiles keep a copy). A device is a
    path, or a file object with read() and seek() (readinto() is used when
    present), or any object with read_at(offset, size); its size comes from
    get_size(), get_media_size() (pyewf, pyqcow), a size attribute, or
    seeking to the end.

    partition: 1-based partition of whole-disk images (default: the image
    itself if it holds btrfs, else its only btrfs partition). offset: the
    byte offset of the filesystem in every image. verify=False: do not
    check data checksums. log_replay=False: show the last commit, ignoring
    the log tree of a crashed filesystem. super_mirror: use superblock copy
    0, 1 or 2 only. cache_bytes: tree-block cache (0: 64 MiB).

    format: the container of image paths, "raw", "split" (NAME.001, ...),
    "ewf" (E01), "qcow2", "vmdk", "vhd", "vhdx" (default: detected; a
    container's other segments are found beside the first). passphrase
    (its exact bytes; str is UTF-8) or volume_key: for LUKS1/LUKS2 volumes
    between the disk and btrfs (a wrong one raises Error with errno
    EKEYREJECTED). volume: the LVM logical volume "VG/LV" to use when
    several hold btrfs. kdf_limit: seconds of LUKS key derivation one
    keyslot may take, estimated before it runs (default 10; the open 3
    times it), as the CLI's --kdf-limit. generation: show the filesystem
    as that transid (one history() lists) committed it, as the CLI's
    --generation: what its trees no longer reach is damage (on_damage).
    fsid: the filesystem to read when several are on the devices (mkfs
    over an old one), its uuid or its first 8 or more hex digits, as the
    CLI's --fsid: rebuilt from its own tree blocks when the superblock
    names another (damage, on_damage); one not found raises Error.

    on_damage: called with each message of damage worked around (default:
    a DamageWarning).
    """
    if isinstance(devices, (str, bytes, os.PathLike)) or hasattr(devices, "read") \
            or hasattr(devices, "read_at"):
        devices = [devices]
    flags = (0 if verify else _NO_DATA_VERIFY) | (0 if log_replay else _NO_LOG_REPLAY)
    h = _btrfsimg.Handle(flags, partition or 0, offset, super_mirror, cache_bytes)
    h.on_damage = on_damage if on_damage is not None else _warn_damage
    fmt = 0 if format is None else _btrfsimg.format(format)
    if isinstance(passphrase, str):
        passphrase = passphrase.encode()
    devices = list(devices)
    try:
        if kdf_limit is not None and not 0.001 <= kdf_limit <= 86400:
            raise ValueError("kdf_limit: seconds, 0.001..86400")
        if generation is not None and not 1 <= generation < 1 << 64:
            raise ValueError("generation: a transid, 1 or more")
        if all(isinstance(d, (str, bytes, os.PathLike)) for d in devices):
            # image files: the library's one open (btrfsimg_open_images)
            h.open_images(list(devices), fmt, passphrase, volume_key, volume,
                          0 if kdf_limit is None else round(kdf_limit * 1000), generation or 0,
                          fsid)
            return Filesystem(h)
        if passphrase is not None:
            h.set_key(0, passphrase)
        if volume_key is not None:
            h.set_key(1, volume_key)
        if volume is not None:
            h.set_key(2, volume.encode())
        if kdf_limit is not None:
            h.set_kdf_limit(round(kdf_limit * 1000))
        if generation is not None:
            h.set_generation(generation)
        if fsid is not None:
            h.set_fsid(fsid)
        for i, d in enumerate(devices):
            if isinstance(d, (str, bytes, os.PathLike)):
                h.add_file(d, fmt)
            elif callable(getattr(d, "read_at", None)):
                h.add_io(d, _device_size(d), _dev_name(d, i), True)
            elif callable(getattr(d, "read", None)) and callable(getattr(d, "seek", None)):
                h.add_io(d, _device_size(d), _dev_name(d, i), False)
            else:
                raise TypeError("device %d: a path, or an object with read and seek or "
                                "read_at, not %s" % (i, type(d).__name__))
        h.open()
    except BaseException:
        h.close()
        raise
    return Filesystem(h)


def _dev_name(obj: Any, i: int) -> str:
    name = getattr(obj, "name", None)
    if isinstance(name, bytes):
        name = name.decode("utf-8", "surrogateescape")
    if isinstance(name, str) and name:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return "<%s #%d>" % (type(obj).__name__, i)
