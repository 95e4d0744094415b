#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Generators are gen-<what>.sh or gen_<what>.py; shared code: testdata/genlib.py
"""Write the libFuzzer dictionaries fuzz/<target>.dict.

    gen_dicts.py [FUZZDIR]

Every value comes from src/base/ondisk.h or the compression / partition
formats. Each target gets the groups that match what its input holds.
"""
import os, struct, sys

KEY_TYPES = {  # src/base/ondisk.h KT_*
    "INODE_ITEM": 1, "INODE_REF": 12, "INODE_EXTREF": 13, "XATTR_ITEM": 24,
    "ORPHAN_ITEM": 48, "DIR_LOG_ITEM": 60, "DIR_LOG_INDEX": 72, "DIR_ITEM": 84,
    "DIR_INDEX": 96, "EXTENT_DATA": 108, "EXTENT_CSUM": 128, "ROOT_ITEM": 132,
    "ROOT_BACKREF": 144, "ROOT_REF": 156, "EXTENT_ITEM": 168, "METADATA_ITEM": 169,
    "BLOCK_GROUP_ITEM": 192, "DEV_EXTENT": 204, "DEV_ITEM": 216, "CHUNK_ITEM": 228,
    "UUID_SUBVOL": 251, "UUID_RECEIVED_SUBVOL": 252,
}
M = 1 << 64
OBJECTIDS = {  # le64
    "ROOT_TREE": 1, "EXTENT_TREE": 2, "CHUNK_TREE": 3, "DEV_TREE": 4, "FS_TREE": 5,
    "ROOT_TREE_DIR": 6, "CSUM_TREE": 7, "QUOTA_TREE": 8, "UUID_TREE": 9,
    "FREE_SPACE_TREE": 10, "BLOCK_GROUP_TREE": 11, "FIRST_FREE": 256, "FIRST_FREE_1": 257,
    "ORPHAN": M - 5, "TREE_LOG": M - 6, "TREE_LOG_FIXUP": M - 7, "TREE_RELOC": M - 8,
    "DATA_RELOC": M - 9, "EXTENT_CSUM": M - 10, "LAST_FREE": M - 256, "MAX": M - 1,
}
SIZES32 = {  # item sizes and block sizes, le32
    "inode_item": 160, "root_item": 439, "root_item_v1": 239, "file_extent": 53,
    "file_extent_inline_hdr": 21, "dir_item_hdr": 30, "inode_ref_hdr": 10,
    "inode_extref_hdr": 18, "root_ref_hdr": 18, "chunk_1stripe": 80, "dev_item": 98,
    "4k": 4096, "8k": 8192, "16k": 16384, "32k": 32768, "64k": 65536,
}
BG_FLAGS = {  # chunk / block group type, le64
    "DATA": 1, "SYSTEM": 2, "METADATA": 4, "RAID0": 8, "RAID1": 0x10, "DUP": 0x20,
    "RAID10": 0x40, "RAID5": 0x80, "RAID6": 0x100, "RAID1C3": 0x200, "RAID1C4": 0x400,
    "DATA_METADATA": 5, "SYSTEM_DUP": 0x22, "METADATA_DUP": 0x24,
}
SUPER = {
    "magic": b"_BHRfS_M",
    "csum_crc32c": b"\0\0", "csum_xxhash": b"\1\0", "csum_sha256": b"\2\0",
    "csum_blake2": b"\3\0",
    "sb_at_64k": struct.pack("<Q", 0x10000), "sb_at_64m": struct.pack("<Q", 64 << 20),
    "sb_at_256g": struct.pack("<Q", 256 << 30),
    "incompat_metadata_uuid": struct.pack("<Q", 1 << 10),
    "incompat_default": struct.pack("<Q", 0x361), "num_devices_1": struct.pack("<Q", 1),
    "stripe_len": struct.pack("<Q", 65536),
}
COMPRESS = {
    "zstd_magic": b"\x28\xb5\x2f\xfd", "zstd_skippable": b"\x50\x2a\x4d\x18",
    "zlib_default": b"\x78\x9c", "zlib_fast": b"\x78\x01", "zlib_best": b"\x78\xda",
    "zlib_mid": b"\x78\x5e",
    # lzo: le32 total length, then le32 segment lengths; lzo1x end-of-stream
    "lzo_total_4k": struct.pack("<I", 4096), "lzo_seg_small": struct.pack("<I", 16),
    "lzo_seg_4k": struct.pack("<I", 4092), "lzo_eos": b"\x11\x00\x00",
    "comp_none": b"\0", "comp_zlib": b"\1", "comp_lzo": b"\2", "comp_zstd": b"\3",
    "fe_inline": b"\0", "fe_reg": b"\1", "fe_prealloc": b"\2",
}
PARTITION = {
    "mbr_sig": b"\x55\xaa", "gpt_sig": b"EFI PART", "gpt_rev": b"\x00\x00\x01\x00",
    "gpt_hdr_size": struct.pack("<I", 92), "gpt_entry_size": struct.pack("<I", 128),
    "gpt_nentries": struct.pack("<I", 128), "mbr_protective": b"\xee",
    "mbr_linux": b"\x83", "mbr_ext": b"\x05", "mbr_ext_lba": b"\x0f",
    "guid_linux_fs": bytes.fromhex("af3dc60f838472478e793d69d8477de4"),
    "lba_2048": struct.pack("<Q", 2048),
}


def esc(b):
    return "".join(chr(c) if 32 <= c < 127 and chr(c) not in '"\\' else "\\x%02x" % c
                   for c in b)


def group(prefix, d, fmt=None):
    out = {}
    for k, v in d.items():
        out[f"{prefix}_{k}"] = v if isinstance(v, bytes) else struct.pack(fmt, v)
    return out


def keytypes():
    return group("kt", KEY_TYPES, "<B")


def objids():
    return group("obj", OBJECTIDS, "<Q")


def sizes():
    d = group("sz32", SIZES32, "<I")
    d.update(group("sz16", {k: v for k, v in SIZES32.items() if v < 65536}, "<H"))
    return d


TREE = lambda: {**keytypes(), **objids(), **sizes()}
TARGETS = {
    "super": lambda: {**group("sb", SUPER), **sizes(), **group("bg", BG_FLAGS, "<Q"),
                      **group("kt", {"CHUNK_ITEM": 228}, "<B")},
    "sysarray": lambda: {**group("bg", BG_FLAGS, "<Q"), **group("sb", SUPER), **objids(),
                         **group("kt", {"CHUNK_ITEM": 228}, "<B")},
    "chunk": lambda: {**group("bg", BG_FLAGS, "<Q"), **group("sb", SUPER), **sizes()},
    "block": lambda: {**TREE(), **group("sb", {"magic": SUPER["magic"]})},
    "inode": lambda: {**sizes(), "mode_dir": struct.pack("<I", 0o40755),
                      "mode_reg": struct.pack("<I", 0o100644),
                      "mode_lnk": struct.pack("<I", 0o120777)},
    "refs": lambda: {**objids(), **sizes()},
    "dir": lambda: {**keytypes(), **objids(), **sizes(), "ft_reg": b"\1", "ft_dir": b"\2",
                    "ft_xattr": b"\x08", "ft_encrypted_dir": b"\x82"},
    "xattr": lambda: {**sizes(), "ft_xattr": b"\x08", "user": b"user.",
                      "security": b"security.", "trusted": b"trusted.",
                      "system_acl": b"system.posix_acl_access"},
    "extent": lambda: {**group("c", COMPRESS), **sizes()},
    "rootitem": lambda: {**TREE(), "default": b"default",
                         "default_hash": struct.pack("<Q", 2378154706),
                         "rdonly": struct.pack("<Q", 1)},
    "zlib": lambda: group("c", {k: v for k, v in COMPRESS.items() if k.startswith("zlib")}),
    "lzo": lambda: group("c", {k: v for k, v in COMPRESS.items() if k.startswith("lzo")}),
    "zstd": lambda: group("c", {k: v for k, v in COMPRESS.items() if k.startswith("zstd")}),
    "partition": lambda: {**group("p", PARTITION), **group("sb", SUPER)},
    "image": lambda: {**TREE(), **group("sb", SUPER), **group("bg", BG_FLAGS, "<Q"),
                      **group("c", COMPRESS), **group("p", PARTITION)},
    "walk": lambda: {**TREE(), **group("c", COMPRESS)},
    "items": lambda: TREE(),
    "logtree": lambda: {**keytypes(), **objids(), **sizes(), **group("c", COMPRESS)},
    "schemes": lambda: {**objids(), "bit32": struct.pack("<Q", 1 << 32),
                        "bit48": struct.pack("<Q", 1 << 48)},
}


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for t, make in sorted(TARGETS.items()):
        if not os.path.exists(os.path.join(d, f"fuzz_{t}.c")):
            continue
        entries = make()
        with open(os.path.join(d, f"{t}.dict"), "w") as f:
            f.write(f"# libFuzzer dictionary for fuzz_{t} (made by gen_dicts.py)\n")
            seen = set()
            for k in sorted(entries):
                if entries[k] in seen:
                    continue
                seen.add(entries[k])
                f.write(f'{k}="{esc(entries[k])}"\n')
        print(f"{t}.dict: {len(seen)} entries")


if __name__ == "__main__":
    main()
