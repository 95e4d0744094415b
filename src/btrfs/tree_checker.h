/* SPDX-License-Identifier: MIT */
/*
 * The checker (tree_checker.c): pure decoders that check every tree block and
 * item as the kernel's tree-checker does before any field is used.
 */
#ifndef BI_CHECK_H
#define BI_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"

/* ------------------------------ tree blocks: header and item table */

/* What the parent (or the superblock) says a block must be. */
struct bi_expect {
	uint64_t owner;			/* tree id, for messages */
	uint64_t generation;		/* 0: not checked */
	int level;			/* -1: not checked */
	const bi_key *first_key;	/* NULL: not checked */
};

/* The structural checker (header, item table, key order), pure: used by
 * the reader and by fuzz targets. Returns 0 or -EUCLEAN with @why set. */
int bi_block_check(const uint8_t *blk, uint32_t nodesize, uint64_t bytenr,
		   const uint8_t fsid[16], const struct bi_expect *e, char *why, size_t whylen);

/* ------------------------------ chunk and device items (chunk tree) */

struct bi_stripe {
	uint64_t devid;
	uint64_t offset;
	uint8_t dev_uuid[16];
};

/* A checked chunk. sub_stripes is the kernel's value for the profile (2
 * for RAID10, else 1), not the on-disk field, which old mkfs left at 0. */
struct bi_chunk {
	uint64_t logical, length, type, stripe_len;
	uint16_t num_stripes, sub_stripes;
	struct bi_stripe stripes[];
};

/* Decode and check one chunk item at @logical with the kernel's
 * tree-checker rules (btrfs_check_chunk_valid): item size exactly 48 + 32
 * per stripe, num_stripes >= 1 and valid for the profile (single 1, dup 2,
 * raid1 2, raid1c3 3, raid1c4 4, raid0 >= 1, raid10 >= 2 with sub_stripes
 * 2, raid5 >= 2, raid6 >= 3), at most one profile bit, at least one of
 * data/system/metadata and no unknown bit, system not mixed with the
 * others, stripe_len 64 KiB, the item's sector_size == @sectorsize, start
 * and length @sectorsize-aligned, length nonzero and below 2^32 stripes,
 * no overflow. Also: no stripe's device range overflows. Data+metadata
 * (mixed) is left to the caller, which knows the feature flags. On success
 * *out is a new chunk (free()). Returns 0, -EUCLEAN with @why set ("chunk
 * at logical L: <check>, have X expect Y"), -ENOMEM, or -EINVAL for a
 * @sectorsize that is not a power of two. */
int bi_chunk_parse(const uint8_t *item, size_t len, uint64_t logical, uint32_t sectorsize,
		   struct bi_chunk **out, char *why, size_t whylen);

/* A DEV_ITEM (key (1, 216, devid)): exactly 98 bytes and its devid the
 * key's, as the kernel's check_dev_item requires. */
int bi_dev_item_parse(const uint8_t *item, uint32_t size, uint64_t key_offset,
		      struct bi_devitem *out, char *why, size_t whylen);

/* The profile's name ("single", "dup", "raid10", ...) or "unknown". */
const char *bi_chunk_profile_name(uint64_t type);

/* The profile bit of @c (0 for single). */
static inline uint64_t bi_chunk_profile(const struct bi_chunk *c)
{
	return c->type & BG_PROFILE_MASK;
}

/* Data stripes per row. */
static inline uint32_t bi_chunk_data_stripes(const struct bi_chunk *c)
{
	switch (bi_chunk_profile(c)) {
	case BG_RAID0:
		return c->num_stripes;
	case BG_RAID10:
		return c->num_stripes / 2u;
	case BG_RAID5:
		return c->num_stripes - 1u;
	case BG_RAID6:
		return c->num_stripes - 2u;
	default:
		return 1;
	}
}

/* Parity stripes per row: 1 for RAID5, 2 for RAID6, else 0. */
static inline uint32_t bi_chunk_nparity(const struct bi_chunk *c)
{
	uint64_t p = bi_chunk_profile(c);
	return p == BG_RAID6 ? 2 : p == BG_RAID5 ? 1 : 0;
}

/* Bytes each stripe covers on its device: the length for mirrored
 * profiles, else the whole rows the chunk spans times stripe_len. Every
 * physical address the chunk maps to stripe i lies in
 * [stripes[i].offset, stripes[i].offset + span); the sum never overflows
 * for a chunk bi_chunk_parse accepted. */
static inline uint64_t bi_chunk_stripe_span(const struct bi_chunk *c)
{
	if (!(bi_chunk_profile(c) & (BG_RAID0 | BG_RAID10 | BG_RAID5 | BG_RAID6)))
		return c->length;
	uint64_t row = (uint64_t)bi_chunk_data_stripes(c) * c->stripe_len;
	return (c->length / row + (c->length % row != 0)) * c->stripe_len;
}

/* ------------------------------ inodes, names, directory entries */

/*
 * Pure item parsers (no handle, no I/O; fuzzed by fuzz_inode, fuzz_refs,
 * fuzz_dir, fuzz_xattr). They check what the kernel's tree-checker checks,
 * plus: every name is 1..255 bytes. Variable-length entries are walked
 * "header fits, then whole entry fits"; nothing outside [item, item+size)
 * is read and every returned pointer lies inside it. On failure they
 * return -EUCLEAN and put the failed check in @why as "<check>, have X
 * expect Y"; the callers in inode.c/dir.c prefix it with
 * "corrupt <item kind>: root=R block=B slot=S, ".
 */

#define BI_NAME_MAX 255u	/* BTRFS_NAME_LEN and XATTR_NAME_MAX */
/* btrfs inode flags the kernel knows (low 32 bits; bits 0..11 and 31). */
#define BI_INODE_FLAG_MASK 0x80000FFFull

/* INODE_ITEM: exactly 160 bytes; only S_IFMT|07777 mode bits and a valid
 * file type; a directory's nlink <= 1; no unknown flags in the low 32
 * bits; size <= 2^63 - 1 (the kernel's largest file); generation and
 * transid <= @max_gen unless @max_gen is 0 (the kernel allows superblock
 * generation + 1). */
int bi_inode_parse(const uint8_t *item, uint32_t size, uint64_t subvol, uint64_t objectid,
		   uint64_t max_gen, struct btrfsimg_inode *out, char *why, size_t whylen);

/* One entry of a DIR_ITEM (84), DIR_INDEX (96) or XATTR_ITEM (24) item:
 *   +0 location key (17) +17 transid u64 +25 data_len u16 +27 name_len u16
 *   +29 type u8 +30 name[name_len] data[data_len]
 * name/data borrow the item. */
struct bi_dir_entry {
	bi_key location;
	uint64_t transid;
	uint8_t type;		/* FT_* with FT_ENCRYPTED masked off, as the kernel does */
	uint16_t name_len, data_len;
	const uint8_t *name, *data;
	uint32_t offset;	/* where the entry starts inside the item */
};

/* Next entry at *pos (start at 0) of an item of key type @key_type.
 * Returns 1 (entry in *e, *pos advanced), 0 at the end of the item, or
 * -EUCLEAN (*pos unchanged). Checks: location type INODE_ITEM, ROOT_ITEM
 * or 0 with the kernel's key rules (xattrs: an all-zero location); type
 * 1..8 and FT_XATTR exactly for XATTR_ITEM; name 1..255 bytes; data only
 * in xattrs. The name hash is not checked here (see bi_dir_item_check). */
int bi_dir_item_next(const uint8_t *item, uint32_t size, uint8_t key_type, uint32_t *pos,
		     struct bi_dir_entry *e, char *why, size_t whylen);

/* Every entry of the item with key @key parses, there is at least one, and
 * for DIR_ITEM / XATTR_ITEM each name hashes to key->offset. Returns the
 * number of entries or -EUCLEAN. */
int bi_dir_item_check(const uint8_t *item, uint32_t size, const bi_key *key, char *why,
		      size_t whylen);

/* One name of an inode: INODE_REF (12) entries {index u64, name_len u16,
 * name} keyed (ino, 12, parent dir); INODE_EXTREF (13) entries {parent
 * u64, index u64, name_len u16, name} keyed (ino, 13, extref hash). */
struct bi_ref_entry {
	uint64_t parent;
	uint64_t index;
	uint16_t name_len;
	const uint8_t *name;	/* borrows the item */
};

/* Next entry at *pos (start at 0). 1: entry in *e; 0: end; -EUCLEAN. An
 * INODE_REF item must hold at least one entry (the kernel rejects items of
 * <= 10 bytes); an empty INODE_EXTREF item is accepted, as the kernel does. */
int bi_iref_next(const uint8_t *item, uint32_t size, uint64_t key_offset, uint32_t *pos,
		 struct bi_ref_entry *e, char *why, size_t whylen);
int bi_extref_next(const uint8_t *item, uint32_t size, uint32_t *pos, struct bi_ref_entry *e,
		   char *why, size_t whylen);

/* ROOT_REF / ROOT_BACKREF item {dirid u64, sequence u64, name_len u16,
 * name}: the name must fit in the item. name_len 0 is accepted (it can
 * never match a name, as in the kernel's comparison). */
struct bi_root_ref {
	uint64_t dirid, sequence;
	uint16_t name_len;
	const uint8_t *name;
};
int bi_root_ref_parse(const uint8_t *item, uint32_t size, struct bi_root_ref *out, char *why,
		      size_t whylen);

/* ------------------------------ file extent items */

/* Where the bytes of one EXTENT_DATA item come from. */
enum bi_extent_kind {
	BI_EXT_ZERO = 0,	/* hole (disk_bytenr 0), prealloc, or a gap */
	BI_EXT_INLINE = 1,	/* the item's own payload (maybe compressed) */
	BI_EXT_DISK = 2,	/* uncompressed on-disk extent */
	BI_EXT_COMPRESSED = 3,	/* compressed on-disk extent */
};

/* One EXTENT_DATA item (key (ino, 108, file_offset)), decoded and checked. */
struct bi_extent {
	uint64_t file_offset;	/* key.offset */
	uint64_t end;		/* file offset past the bytes it describes: inline
				   round_up(ram_bytes, sectorsize), else
				   file_offset + num_bytes */
	uint64_t generation, ram_bytes;
	uint8_t type;		/* FE_TYPE_INLINE / REG / PREALLOC */
	uint8_t compression;	/* COMPRESS_* (0..3) */
	enum bi_extent_kind kind;
	/* regular / prealloc only */
	uint64_t disk_bytenr, disk_num_bytes, offset, num_bytes;
	/* inline only: the payload inside the parsed item (borrowed) */
	const uint8_t *inline_data;
	uint32_t inline_size;
};

/* Decode and check one EXTENT_DATA item of @size bytes (the kernel's
 * tree-checker rules, plus: other_encoding 0, inline ram_bytes <=
 * sectorsize, compressed extents within 128 KiB, references inside their
 * extent). Pure. Returns 0, -EUCLEAN with @why set, or -EINVAL for a
 * @sectorsize that is not a power of two in [512, 64 KiB]. */
int bi_extent_parse(const uint8_t *item, uint32_t size, uint64_t key_offset,
		    uint32_t sectorsize, struct bi_extent *out, char *why, size_t whylen);

#endif
