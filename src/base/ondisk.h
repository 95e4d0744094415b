/* SPDX-License-Identifier: MIT */
/*
 * btrfs on-disk layout: byte offsets, sizes and constants.
 *
 * All integers on disk are little-endian. Offsets are relative to the start
 * of the structure they belong to. Sources: btrfs-progs and kernel
 * documentation of the format (facts only), checked against images made by
 * the kernel (see testdata/).
 */
#ifndef BI_ONDISK_H
#define BI_ONDISK_H

#include <stdint.h>

/* ---- superblock (4096 bytes) ---- */
#define SB_SIZE 4096u
#define SB_PRIMARY_OFFSET 0x10000ull	/* 64 KiB */
#define SB_MIRROR_MAX 3
#define SB_MAGIC 0x4D5F53665248425FULL	/* "_BHRfS_M" */
#define SB_CSUM 0x00
#define SB_FSID 0x20
#define SB_BYTENR 0x30
#define SB_FLAGS 0x38
#define SB_MAGIC_OFF 0x40
#define SB_GENERATION 0x48
#define SB_ROOT 0x50
#define SB_CHUNK_ROOT 0x58
#define SB_LOG_ROOT 0x60
#define SB_LOG_ROOT_TRANSID 0x68
#define SB_TOTAL_BYTES 0x70
#define SB_BYTES_USED 0x78
#define SB_ROOT_DIR_OBJECTID 0x80
#define SB_NUM_DEVICES 0x88
#define SB_SECTORSIZE 0x90
#define SB_NODESIZE 0x94
#define SB_LEAFSIZE 0x98
#define SB_STRIPESIZE 0x9c
#define SB_SYS_CHUNK_ARRAY_SIZE 0xa0
#define SB_CHUNK_ROOT_GENERATION 0xa4
#define SB_COMPAT_FLAGS 0xac
#define SB_COMPAT_RO_FLAGS 0xb4
#define SB_INCOMPAT_FLAGS 0xbc
#define SB_CSUM_TYPE 0xc4
#define SB_ROOT_LEVEL 0xc6
#define SB_CHUNK_ROOT_LEVEL 0xc7
#define SB_LOG_ROOT_LEVEL 0xc8
#define SB_DEV_ITEM 0xc9
#define SB_LABEL 0x12b
#define SB_LABEL_SIZE 256
#define SB_CACHE_GENERATION 0x22b
#define SB_UUID_TREE_GENERATION 0x233
#define SB_METADATA_UUID 0x23b
#define SB_SYS_CHUNK_ARRAY 0x32b
#define SB_SYS_CHUNK_ARRAY_MAX 2048u
#define SB_SUPER_ROOTS 0xb2b
/* four backup roots of 168 bytes: +0 tree_root, +8 its generation, ...,
 * +152 tree_root_level */
#define BACKUP_ROOTS 4
#define BACKUP_SIZE 168
#define BACKUP_TREE_LEVEL 152
#define SB_CSUM_START 0x20	/* checksum covers [0x20, 4096) */

/* Byte offset of superblock copy @i (0..2): 64 KiB, 64 MiB, 256 GiB (the
 * kernel's btrfs_sb_offset: 16 KiB << 12 * i for copies 1 and 2). */
static inline uint64_t bi_super_offset(int i)
{
	return i == 0 ? SB_PRIMARY_OFFSET : 16384ull << (12 * i);
}

/* ---- checksums ---- */
#define CSUM_SIZE_MAX 32
#define CSUM_TYPE_CRC32C 0
#define CSUM_TYPE_XXHASH 1
#define CSUM_TYPE_SHA256 2
#define CSUM_TYPE_BLAKE2 3

/* ---- feature flags ---- */
#define INCOMPAT_MIXED_BACKREF (1ull << 0)
#define INCOMPAT_DEFAULT_SUBVOL (1ull << 1)
#define INCOMPAT_MIXED_GROUPS (1ull << 2)
#define INCOMPAT_COMPRESS_LZO (1ull << 3)
#define INCOMPAT_COMPRESS_ZSTD (1ull << 4)
#define INCOMPAT_BIG_METADATA (1ull << 5)
#define INCOMPAT_EXTENDED_IREF (1ull << 6)
#define INCOMPAT_RAID56 (1ull << 7)
#define INCOMPAT_SKINNY_METADATA (1ull << 8)
#define INCOMPAT_NO_HOLES (1ull << 9)
#define INCOMPAT_METADATA_UUID (1ull << 10)
#define INCOMPAT_RAID1C34 (1ull << 11)
#define INCOMPAT_ZONED (1ull << 12)
#define INCOMPAT_EXTENT_TREE_V2 (1ull << 13)
#define INCOMPAT_RAID_STRIPE_TREE (1ull << 14)
#define INCOMPAT_SIMPLE_QUOTA (1ull << 16)
#define INCOMPAT_REMAP_TREE (1ull << 17)
#define INCOMPAT_SUPPORTED                                                              \
	(INCOMPAT_MIXED_BACKREF | INCOMPAT_DEFAULT_SUBVOL | INCOMPAT_MIXED_GROUPS |     \
	 INCOMPAT_COMPRESS_LZO | INCOMPAT_COMPRESS_ZSTD | INCOMPAT_BIG_METADATA |       \
	 INCOMPAT_EXTENDED_IREF | INCOMPAT_RAID56 | INCOMPAT_SKINNY_METADATA |          \
	 INCOMPAT_NO_HOLES | INCOMPAT_METADATA_UUID | INCOMPAT_RAID1C34 |               \
	 INCOMPAT_SIMPLE_QUOTA)

/* ---- tree block header (101 bytes) ---- */
#define HDR_CSUM 0
#define HDR_FSID 32
#define HDR_BYTENR 48
#define HDR_FLAGS 56
#define HDR_CHUNK_TREE_UUID 64
#define HDR_GENERATION 80
#define HDR_OWNER 88
#define HDR_NRITEMS 96
#define HDR_LEVEL 100
#define HDR_SIZE 101
#define MAX_LEVEL 8

/* ---- disk key (17 bytes), leaf item (25), key pointer (33) ---- */
#define KEY_SIZE 17
#define ITEM_SIZE 25	/* key, u32 offset (from end of header), u32 size */
#define ITEM_OFFSET 17
#define ITEM_DSIZE 21
#define KP_SIZE 33	/* key, u64 blockptr, u64 generation */
#define KP_BLOCKPTR 17
#define KP_GENERATION 25

/* ---- key types ---- */
#define KT_INODE_ITEM 1
#define KT_INODE_REF 12
#define KT_INODE_EXTREF 13
#define KT_XATTR_ITEM 24
#define KT_VERITY_DESC 36
#define KT_VERITY_MERKLE 37
#define KT_ORPHAN_ITEM 48
#define KT_DIR_LOG_ITEM 60
#define KT_DIR_LOG_INDEX 72
#define KT_DIR_ITEM 84
#define KT_DIR_INDEX 96
#define KT_EXTENT_DATA 108
#define KT_EXTENT_CSUM 128
#define KT_ROOT_ITEM 132
#define KT_ROOT_BACKREF 144
#define KT_ROOT_REF 156
#define KT_EXTENT_ITEM 168
#define KT_METADATA_ITEM 169
#define KT_BLOCK_GROUP_ITEM 192
#define KT_DEV_EXTENT 204
#define KT_DEV_ITEM 216
#define KT_CHUNK_ITEM 228
#define KT_UUID_SUBVOL 251
#define KT_UUID_RECEIVED_SUBVOL 252

/* ---- well-known objectids ---- */
#define OBJ_ROOT_TREE 1ull
#define OBJ_EXTENT_TREE 2ull
#define OBJ_CHUNK_TREE 3ull
#define OBJ_DEV_TREE 4ull
#define OBJ_FS_TREE 5ull
#define OBJ_ROOT_TREE_DIR 6ull
#define OBJ_CSUM_TREE 7ull
#define OBJ_QUOTA_TREE 8ull
#define OBJ_UUID_TREE 9ull
#define OBJ_FREE_SPACE_TREE 10ull
#define OBJ_BLOCK_GROUP_TREE 11ull
#define OBJ_DEV_ITEMS 1ull
#define OBJ_FIRST_CHUNK_TREE 256ull
#define OBJ_FIRST_FREE 256ull
#define OBJ_LAST_FREE ((uint64_t)-256)
#define OBJ_EMPTY_SUBVOL_DIR 2ull
#define OBJ_ORPHAN ((uint64_t)-5)
#define OBJ_TREE_LOG ((uint64_t)-6)
#define OBJ_TREE_RELOC ((uint64_t)-8)
#define OBJ_DATA_RELOC ((uint64_t)-9)
#define OBJ_EXTENT_CSUM ((uint64_t)-10)

/* ---- inode item (160 bytes) ---- */
#define INODE_GENERATION 0
#define INODE_TRANSID 8
#define INODE_SIZE_OFF 16
#define INODE_NBYTES 24
#define INODE_BLOCK_GROUP 32
#define INODE_NLINK 40
#define INODE_UID 44
#define INODE_GID 48
#define INODE_MODE 52
#define INODE_RDEV 56
#define INODE_FLAGS 64
#define INODE_SEQUENCE 72
#define INODE_ATIME 112
#define INODE_CTIME 124
#define INODE_MTIME 136
#define INODE_OTIME 148
#define INODE_ITEM_SIZE 160
#define TIMESPEC_SIZE 12	/* u64 sec, u32 nsec */

/* ---- root item (439 bytes; 239 in the oldest format) ---- */
#define RI_INODE 0
#define RI_GENERATION 160
#define RI_ROOT_DIRID 168
#define RI_BYTENR 176
#define RI_BYTE_LIMIT 184
#define RI_BYTES_USED 192
#define RI_LAST_SNAPSHOT 200
#define RI_FLAGS 208
#define RI_REFS 216
#define RI_DROP_PROGRESS 220
#define RI_DROP_LEVEL 237
#define RI_LEVEL 238
#define RI_SIZE_V1 239
#define RI_GENERATION_V2 239
#define RI_UUID 247
#define RI_PARENT_UUID 263
#define RI_RECEIVED_UUID 279
#define RI_CTRANSID 295
#define RI_OTRANSID 303
#define RI_STRANSID 311
#define RI_RTRANSID 319
#define RI_CTIME 327
#define RI_OTIME 339
#define RI_STIME 351
#define RI_RTIME 363
#define RI_SIZE 439
#define ROOT_SUBVOL_RDONLY (1ull << 0)

/* ---- root ref / backref (18 bytes + name) ---- */
#define RR_DIRID 0
#define RR_SEQUENCE 8
#define RR_NAME_LEN 16
#define RR_SIZE 18

/* ---- dir item (30 bytes + name + data) ---- */
#define DI_LOCATION 0
#define DI_TRANSID 17
#define DI_DATA_LEN 25
#define DI_NAME_LEN 27
#define DI_TYPE 29
#define DI_SIZE 30
#define FT_UNKNOWN 0
#define FT_REG_FILE 1
#define FT_DIR 2
#define FT_CHRDEV 3
#define FT_BLKDEV 4
#define FT_FIFO 5
#define FT_SOCK 6
#define FT_SYMLINK 7
#define FT_XATTR 8
#define FT_ENCRYPTED 0x80

/* ---- inode ref (10 + name), extref (18 + name) ---- */
#define IREF_INDEX 0
#define IREF_NAME_LEN 8
#define IREF_SIZE 10
#define EXTREF_PARENT 0
#define EXTREF_INDEX 8
#define EXTREF_NAME_LEN 16
#define EXTREF_SIZE 18

/* ---- file extent item ---- */
#define FE_GENERATION 0
#define FE_RAM_BYTES 8
#define FE_COMPRESSION 16
#define FE_ENCRYPTION 17
#define FE_OTHER_ENCODING 18
#define FE_TYPE 20
#define FE_INLINE_DATA 21
#define FE_DISK_BYTENR 21
#define FE_DISK_NUM_BYTES 29
#define FE_OFFSET 37
#define FE_NUM_BYTES 45
#define FE_SIZE 53
#define FE_TYPE_INLINE 0
#define FE_TYPE_REG 1
#define FE_TYPE_PREALLOC 2
#define COMPRESS_NONE 0
#define COMPRESS_ZLIB 1
#define COMPRESS_LZO 2
#define COMPRESS_ZSTD 3
#define MAX_UNCOMPRESSED (128u * 1024u)
#define MAX_COMPRESSED (128u * 1024u)	/* BTRFS_MAX_COMPRESSED */

/* ---- dev item (98 bytes) ---- */
#define DEV_DEVID 0
#define DEV_TOTAL_BYTES 8
#define DEV_BYTES_USED 16
#define DEV_IO_ALIGN 24
#define DEV_IO_WIDTH 28
#define DEV_SECTOR_SIZE 32
#define DEV_TYPE 36
#define DEV_GENERATION 44
#define DEV_START_OFFSET 52
#define DEV_GROUP 60
#define DEV_SEEK_SPEED 64
#define DEV_BANDWIDTH 65
#define DEV_UUID 66
#define DEV_FSID 82
#define DEV_ITEM_SIZE 98

/* ---- chunk item (48 bytes + 32 per stripe) ---- */
#define CHUNK_LENGTH 0
#define CHUNK_OWNER 8
#define CHUNK_STRIPE_LEN 16
#define CHUNK_TYPE 24
#define CHUNK_IO_ALIGN 32
#define CHUNK_IO_WIDTH 36
#define CHUNK_SECTOR_SIZE 40
#define CHUNK_NUM_STRIPES 44
#define CHUNK_SUB_STRIPES 46
#define CHUNK_SIZE 48
#define STRIPE_DEVID 0
#define STRIPE_OFFSET 8
#define STRIPE_DEV_UUID 16
#define STRIPE_SIZE 32
/* BTRFS_STRIPE_LEN: the only stripe length the kernel accepts. It also
 * bounds the buffers of a RAID5/6 rebuild. */
#define BI_STRIPE_LEN 65536u

/* ---- block group flags (chunk type) ---- */
#define BG_DATA (1ull << 0)
#define BG_SYSTEM (1ull << 1)
#define BG_METADATA (1ull << 2)
#define BG_RAID0 (1ull << 3)
#define BG_RAID1 (1ull << 4)
#define BG_DUP (1ull << 5)
#define BG_RAID10 (1ull << 6)
#define BG_RAID5 (1ull << 7)
#define BG_RAID6 (1ull << 8)
#define BG_RAID1C3 (1ull << 9)
#define BG_RAID1C4 (1ull << 10)
#define BG_TYPE_MASK (BG_DATA | BG_SYSTEM | BG_METADATA)
#define BG_PROFILE_MASK                                                                 \
	(BG_RAID0 | BG_RAID1 | BG_DUP | BG_RAID10 | BG_RAID5 | BG_RAID6 | BG_RAID1C3 |  \
	 BG_RAID1C4)

#endif
