/* SPDX-License-Identifier: MIT */
/*
 * The checker: every rule a tree block or item must pass before a field of
 * it is used, in one place, as the kernel's tree-checker.c has them.
 *
 * Three layers, each pure (no handle, no I/O; fuzzed on its own):
 *   1. the block header: bytenr, fsid, level, nritems bounds;
 *   2. the item or pointer table: every item's data inside the block,
 *      after the table and not overlapping another item; keys strictly
 *      ascending (bi_block_check);
 *   3. one parser per item type: INODE_ITEM, INODE_REF / INODE_EXTREF,
 *      DIR_ITEM / DIR_INDEX / XATTR_ITEM, ROOT_REF / ROOT_BACKREF,
 *      EXTENT_DATA and CHUNK_ITEM. Each decodes the item into a struct and
 *      checks what the kernel checks, plus: every name is 1..255 bytes.
 *
 * Variable-length entries are walked "header fits, then whole entry
 * fits"; nothing outside [item, item + size) is read and every returned
 * pointer lies inside it. A failed check returns -EUCLEAN with the reason
 * in @why as "<check>, have X expect Y"; the readers prefix it with where
 * the item is ("corrupt <item kind>: root=R block=B slot=S, ").
 *
 * INODE_REF item, several entries back to back:
 *   +0 index u64 | +8 name_len u16 | +10 name ...  | next entry ...
 * INODE_EXTREF item, several entries back to back (hash collisions):
 *   +0 parent u64 | +8 index u64 | +16 name_len u16 | +18 name ... | next
 * One DIR_ITEM / DIR_INDEX / XATTR_ITEM entry:
 *   +0 location key (objectid u64, type u8, offset u64) | +17 transid u64
 *   +25 data_len u16 | +27 name_len u16 | +29 type u8 | +30 name | data
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "btrfs/tree_checker.h"

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/key.h"
#include "base/ondisk.h"

/* The kernel caps a chunk so that stripe numbers fit in 32 bits. */
#define LENGTH_LIMIT ((uint64_t)UINT32_MAX * BI_STRIPE_LEN)

/* ---------------------------------------------------------- tree blocks */

static int check_header(const uint8_t *blk, uint32_t nodesize, uint64_t bytenr,
			const uint8_t fsid[16], const struct bi_expect *e, char *why,
			size_t whylen)
{
	uint64_t have_bytenr = bi_le64(blk + HDR_BYTENR);
	if (have_bytenr != bytenr)
		return bi_why(why, whylen, "bad bytenr, have %" PRIu64 " expect %" PRIu64,
			      have_bytenr, bytenr);
	if (memcmp(blk + HDR_FSID, fsid, 16) != 0) {
		char h[37], w[37];
		bi_uuid_str(blk + HDR_FSID, h);
		bi_uuid_str(fsid, w);
		return bi_why(why, whylen, "bad fsid, have %s expect %s", h, w);
	}
	uint8_t level = blk[HDR_LEVEL];
	if (level >= MAX_LEVEL)
		return bi_why(why, whylen, "bad level, have %u expect < %d", level, MAX_LEVEL);
	if (e && e->level >= 0 && level != e->level)
		return bi_why(why, whylen, "bad level, have %u expect %d", level, e->level);
	uint64_t gen = bi_le64(blk + HDR_GENERATION);
	if (e && e->generation && gen != e->generation)
		return bi_why(why, whylen, "bad generation, have %" PRIu64 " expect %" PRIu64, gen,
			      e->generation);
	uint32_t n = bi_le32(blk + HDR_NRITEMS);
	uint32_t per = level ? KP_SIZE : ITEM_SIZE;
	uint32_t max = (nodesize - HDR_SIZE) / per;
	if (n > max)
		return bi_why(why, whylen, "bad nritems, have %u expect <= %u", n, max);
	if (level && n == 0)
		return bi_why(why, whylen, "bad nritems, have 0 expect > 0 in a node");
	return 0;
}

static int check_order(const bi_key *prev, const bi_key *k, uint32_t slot, char *why,
		       size_t whylen)
{
	if (slot == 0 || bi_key_cmp(prev, k) < 0)
		return 0;
	return bi_why(why, whylen,
		      "slot %u: bad key order, have (%" PRIu64 " %u %" PRIu64 ") after (%" PRIu64
		      " %u %" PRIu64 ")",
		      slot, k->objectid, k->type, k->offset, prev->objectid, prev->type,
		      prev->offset);
}

static int check_leaf_items(const uint8_t *blk, uint32_t nodesize, uint32_t n, char *why,
			    size_t whylen)
{
	const uint32_t data_size = nodesize - HDR_SIZE;
	const uint32_t table_end = n * ITEM_SIZE;
	uint32_t lowest = data_size; /* items are packed downwards from the end */
	bi_key prev = { 0 }, k;
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *it = blk + HDR_SIZE + (size_t)i * ITEM_SIZE;
		bi_key_read(it, &k);
		int rc = check_order(&prev, &k, i, why, whylen);
		if (rc)
			return rc;
		uint32_t off = bi_le32(it + ITEM_OFFSET), size = bi_le32(it + ITEM_DSIZE);
		if (!bi_fits(data_size, off, size))
			return bi_why(why, whylen,
				      "slot %u: item data past end, have %" PRIu64 " expect <= %u",
				      i, (uint64_t)(off + size), data_size);
		if (off < table_end)
			return bi_why(why, whylen, "slot %u: item data overlaps the item table, have offset %u expect >= %u",
				    i, off, table_end);
		if (off + size > lowest)
			return bi_why(why, whylen, "slot %u: item data overlaps slot %u, have end %u expect <= %u",
				    i, i - 1, off + size, lowest);
		lowest = off;
		prev = k;
	}
	return 0;
}

static int check_node_ptrs(const uint8_t *blk, uint32_t n, char *why, size_t whylen)
{
	bi_key prev = { 0 }, k;
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *kp = blk + HDR_SIZE + (size_t)i * KP_SIZE;
		bi_key_read(kp, &k);
		int rc = check_order(&prev, &k, i, why, whylen);
		if (rc)
			return rc;
		if (bi_le64(kp + KP_BLOCKPTR) == 0)
			return bi_why(why, whylen, "slot %u: null block pointer", i);
		if (bi_le64(kp + KP_GENERATION) == 0)
			return bi_why(why, whylen, "slot %u: pointer generation 0", i);
		prev = k;
	}
	return 0;
}

int bi_block_check(const uint8_t *blk, uint32_t nodesize, uint64_t bytenr,
		   const uint8_t fsid[16], const struct bi_expect *e, char *why, size_t whylen)
{
	if (nodesize < HDR_SIZE + KP_SIZE)
		return bi_why(why, whylen, "nodesize %u too small", nodesize);
	int rc = check_header(blk, nodesize, bytenr, fsid, e, why, whylen);
	if (rc)
		return rc;
	uint32_t n = bi_le32(blk + HDR_NRITEMS);
	rc = blk[HDR_LEVEL] ? check_node_ptrs(blk, n, why, whylen)
			    : check_leaf_items(blk, nodesize, n, why, whylen);
	if (rc || !e || !e->first_key || n == 0)
		return rc;
	bi_key first;
	bi_key_read(blk + HDR_SIZE, &first);
	if (bi_key_cmp(&first, e->first_key) != 0)
		return bi_why(why, whylen,
			      "bad first key, have (%" PRIu64 " %u %" PRIu64 ") expect (%" PRIu64
			      " %u %" PRIu64 ")",
			      first.objectid, first.type, first.offset, e->first_key->objectid,
			      e->first_key->type, e->first_key->offset);
	return 0;
}

/* ---------------------------------------------------------- inodes */

static void read_time(const uint8_t *p, struct btrfsimg_timespec *t)
{
	t->sec = (int64_t)bi_le64(p);
	t->nsec = bi_le32(p + 8);
}

static bool valid_file_type(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFSOCK: case S_IFLNK: case S_IFREG: case S_IFBLK:
	case S_IFDIR: case S_IFCHR: case S_IFIFO:
		return true;
	default:
		return false;
	}
}

static void inode_fields(const uint8_t *d, struct btrfsimg_inode *o)
{
	o->generation = bi_le64(d + INODE_GENERATION);
	o->transid = bi_le64(d + INODE_TRANSID);
	o->size = bi_le64(d + INODE_SIZE_OFF);
	o->nbytes = bi_le64(d + INODE_NBYTES);
	o->nlink = bi_le32(d + INODE_NLINK);
	o->uid = bi_le32(d + INODE_UID);
	o->gid = bi_le32(d + INODE_GID);
	o->mode = bi_le32(d + INODE_MODE);
	o->rdev = bi_le64(d + INODE_RDEV);
	o->flags = bi_le64(d + INODE_FLAGS);
	o->sequence = bi_le64(d + INODE_SEQUENCE);
	read_time(d + INODE_ATIME, &o->atime);
	read_time(d + INODE_CTIME, &o->ctime);
	read_time(d + INODE_MTIME, &o->mtime);
	read_time(d + INODE_OTIME, &o->otime);
}

int bi_inode_parse(const uint8_t *item, uint32_t size, uint64_t subvol, uint64_t objectid,
		   uint64_t max_gen, struct btrfsimg_inode *out, char *why, size_t whylen)
{
	if (!item || size != INODE_ITEM_SIZE)
		return bi_why(why, whylen, "invalid inode item size, have %u expect %u", size,
			    INODE_ITEM_SIZE);
	/* Checked from the item, then stored field by field into @out: a
	 * whole record built aside and copied out stalled on every store it
	 * read back (a third of a parse), and @out stays as it was on failure. */
	uint64_t generation = bi_le64(item + INODE_GENERATION);
	uint64_t transid = bi_le64(item + INODE_TRANSID);
	uint64_t isize = bi_le64(item + INODE_SIZE_OFF);
	uint64_t flags = bi_le64(item + INODE_FLAGS);
	uint32_t nlink = bi_le32(item + INODE_NLINK);
	uint32_t mode = bi_le32(item + INODE_MODE);
	if (max_gen && generation > max_gen)
		return bi_why(why, whylen,
			      "invalid inode generation, have %" PRIu64 " expect <= %" PRIu64,
			      generation, max_gen);
	if (max_gen && transid > max_gen)
		return bi_why(why, whylen,
			      "invalid inode transid, have %" PRIu64 " expect <= %" PRIu64, transid,
			      max_gen);
	if (mode & ~(uint32_t)(S_IFMT | 07777))
		return bi_why(why, whylen, "unknown mode bits, have 0%o expect none outside 0%o",
			    mode, (unsigned)(S_IFMT | 07777));
	if (!valid_file_type(mode))
		return bi_why(why, whylen, "invalid file type in mode, have 0%o", mode & S_IFMT);
	/* The kernel's largest file (s_maxbytes, MAX_LFS_FILESIZE): no write
	 * or truncate gets past it, and readers would stream up to i_size. */
	if (isize > (uint64_t)INT64_MAX)
		return bi_why(why, whylen,
			      "invalid inode size, have %" PRIu64 " expect <= %" PRIu64, isize,
			      INT64_MAX);
	if (S_ISDIR(mode) && nlink > 1)
		return bi_why(why, whylen, "invalid nlink for a directory, have %u expect <= 1",
			    nlink);
	if ((flags & 0xffffffffull) & ~BI_INODE_FLAG_MASK)
		return bi_why(why, whylen,
			      "unknown inode flags, have 0x%" PRIx64 " expect mask 0x%" PRIx64,
			      (uint64_t)((flags & 0xffffffffull)), (uint64_t)BI_INODE_FLAG_MASK);
	out->subvol = subvol;
	out->objectid = objectid;
	out->synthesized = false; /* read, not made up (files/orphans.h) */
	inode_fields(item, out);
	return 0;
}

/* Shared walk of INODE_REF / INODE_EXTREF entries of @hdr header bytes with
 * the name length at @nlen_off: header fits, name length valid, name fits. */
static int ref_next(const uint8_t *item, uint32_t size, uint32_t *pos, uint32_t hdr,
		    uint32_t nlen_off, const char *kind, const uint8_t **entry, uint16_t *nlen,
		    char *why, size_t whylen)
{
	if (*pos >= size)
		return 0;
	if (!bi_fits(size, *pos, hdr))
		return bi_why(why, whylen,
			      "%s header crosses item boundary, have %" PRIu64 " expect <= %u",
			      kind, (uint64_t)(*pos + hdr), size);
	const uint8_t *p = item + *pos;
	uint16_t n = bi_le16(p + nlen_off);
	if (n == 0 || n > BI_NAME_MAX)
		return bi_why(why, whylen, "invalid %s name length, have %u expect 1..%u", kind, n,
			    BI_NAME_MAX);
	if (!bi_fits(size, (size_t)*pos + hdr, n))
		return bi_why(why, whylen,
			      "%s name crosses item boundary, have %" PRIu64 " expect <= %u", kind,
			      (uint64_t)(*pos + hdr + n), size);
	*entry = p;
	*nlen = n;
	*pos += hdr + n;
	return 1;
}

int bi_iref_next(const uint8_t *item, uint32_t size, uint64_t key_offset, uint32_t *pos,
		 struct bi_ref_entry *e, char *why, size_t whylen)
{
	if (*pos == 0 && size <= IREF_SIZE)
		return bi_why(why, whylen, "invalid inode ref item size, have %u expect > %u", size,
			    IREF_SIZE);
	const uint8_t *p;
	uint16_t n;
	int rc = ref_next(item, size, pos, IREF_SIZE, IREF_NAME_LEN, "inode ref", &p, &n, why,
			  whylen);
	if (rc <= 0)
		return rc;
	e->parent = key_offset;
	e->index = bi_le64(p + IREF_INDEX);
	e->name_len = n;
	e->name = p + IREF_SIZE;
	return 1;
}

int bi_extref_next(const uint8_t *item, uint32_t size, uint32_t *pos, struct bi_ref_entry *e,
		   char *why, size_t whylen)
{
	const uint8_t *p;
	uint16_t n;
	int rc = ref_next(item, size, pos, EXTREF_SIZE, EXTREF_NAME_LEN, "inode extref", &p, &n,
			  why, whylen);
	if (rc <= 0)
		return rc;
	e->parent = bi_le64(p + EXTREF_PARENT);
	e->index = bi_le64(p + EXTREF_INDEX);
	e->name_len = n;
	e->name = p + EXTREF_SIZE;
	return 1;
}

int bi_root_ref_parse(const uint8_t *item, uint32_t size, struct bi_root_ref *out, char *why,
		      size_t whylen)
{
	if (!item || size < RR_SIZE)
		return bi_why(why, whylen, "invalid root ref item size, have %u expect >= %u", size,
			    RR_SIZE);
	uint16_t n = bi_le16(item + RR_NAME_LEN);
	if (!bi_fits(size, RR_SIZE, n))
		return bi_why(why, whylen, "root ref name crosses item boundary, have %u expect <= %u",
			    RR_SIZE + n, size);
	out->dirid = bi_le64(item + RR_DIRID);
	out->sequence = bi_le64(item + RR_SEQUENCE);
	out->name_len = n;
	out->name = item + RR_SIZE;
	return 0;
}

/* ---------------------------------------------------------- directory entries */

static bool is_fs_tree(uint64_t id)
{
	/* btrfs_is_fstree(): 5, or 256 and up while positive as s64 */
	return id == OBJ_FS_TREE || (id >= OBJ_FIRST_FREE && id <= (uint64_t)INT64_MAX);
}

/* The tree-checker's location rules (check_root_key / check_inode_key). */
static int check_location(const bi_key *l, uint8_t key_type, char *why, size_t whylen)
{
	if (key_type == KT_XATTR_ITEM) {
		if (l->objectid || l->type || l->offset)
			return bi_why(why, whylen,
				      "xattr location key not zero, have (%" PRIu64 " %u %" PRIu64
				      ") expect (0 0 0)",
				      l->objectid, l->type, l->offset);
		return 0;
	}
	if (l->type == KT_ROOT_ITEM) {
		if (!is_fs_tree(l->objectid))
			return bi_why(why, whylen,
				      "invalid location root id, have %" PRIu64
				      " expect 5 or [256, 2^63)",
				      l->objectid);
		return 0;
	}
	if (l->type != KT_INODE_ITEM && l->type != 0)
		return bi_why(why, whylen, "invalid location key type, have %u expect %u or %u",
			    l->type, KT_INODE_ITEM, KT_ROOT_ITEM);
	bool ok = (l->objectid >= OBJ_FIRST_FREE && l->objectid <= OBJ_LAST_FREE) ||
		  l->objectid == OBJ_ROOT_TREE_DIR || l->objectid == (uint64_t)-12;
	if (!ok)
		return bi_why(why, whylen,
			      "invalid location objectid, have %" PRIu64 " expect [256, %" PRIu64
			      "]",
			      l->objectid, OBJ_LAST_FREE);
	if (l->offset)
		return bi_why(why, whylen, "invalid location key offset, have %" PRIu64 " expect 0",
			      l->offset);
	return 0;
}

static int check_dirent_type(uint8_t t, uint8_t key_type, char *why, size_t whylen)
{
	if (t == FT_UNKNOWN || t > FT_XATTR)
		return bi_why(why, whylen, "invalid dir item type, have %u expect 1..%u", t, FT_XATTR);
	if ((t == FT_XATTR) != (key_type == KT_XATTR_ITEM))
		return bi_why(why, whylen, "dir item type %u does not fit key type %u", t, key_type);
	return 0;
}

int bi_dir_item_next(const uint8_t *item, uint32_t size, uint8_t key_type, uint32_t *pos,
		     struct bi_dir_entry *e, char *why, size_t whylen)
{
	if (*pos >= size)
		return 0;
	if (!bi_fits(size, *pos, DI_SIZE))
		return bi_why(why, whylen,
			      "dir item header crosses item boundary, have %" PRIu64
			      " expect <= %u",
			      (uint64_t)(*pos + DI_SIZE), size);
	const uint8_t *p = item + *pos;
	struct bi_dir_entry d = { .offset = *pos };
	bi_key_read(p + DI_LOCATION, &d.location);
	d.transid = bi_le64(p + DI_TRANSID);
	d.data_len = bi_le16(p + DI_DATA_LEN);
	d.name_len = bi_le16(p + DI_NAME_LEN);
	d.type = p[DI_TYPE] & (uint8_t)~FT_ENCRYPTED;
	int rc = check_location(&d.location, key_type, why, whylen);
	if (rc == 0)
		rc = check_dirent_type(d.type, key_type, why, whylen);
	if (rc < 0)
		return rc;
	if (d.name_len == 0 || d.name_len > BI_NAME_MAX)
		return bi_why(why, whylen, "invalid dir item name length, have %u expect 1..%u",
			    d.name_len, BI_NAME_MAX);
	if (d.data_len && d.type != FT_XATTR)
		return bi_why(why, whylen, "dir item with data, have %u bytes expect 0", d.data_len);
	uint64_t total = (uint64_t)DI_SIZE + d.name_len + d.data_len;
	if (!bi_fits64(size, *pos, total))
		return bi_why(why, whylen,
			      "dir item data crosses item boundary, have %" PRIu64 " expect <= %u",
			      *pos + total, size);
	d.name = p + DI_SIZE;
	d.data = d.name + d.name_len;
	*e = d;
	*pos += (uint32_t)total;
	return 1;
}

int bi_dir_item_check(const uint8_t *item, uint32_t size, const bi_key *key, char *why,
		      size_t whylen)
{
	struct bi_dir_entry e;
	uint32_t pos = 0;
	int n = 0, rc;
	bool hashed = key->type == KT_DIR_ITEM || key->type == KT_XATTR_ITEM;
	while ((rc = bi_dir_item_next(item, size, key->type, &pos, &e, why, whylen)) > 0) {
		n++;
		uint64_t h = bi_name_hash(e.name, e.name_len);
		if (hashed && h != key->offset)
			return bi_why(why, whylen,
				      "name hash mismatch with key (entry at %u), have 0x%" PRIx64
				      " expect 0x%" PRIx64,
				      e.offset, h, key->offset);
	}
	if (rc < 0)
		return rc;
	if (n == 0)
		return bi_why(why, whylen, "empty dir item, have %u bytes expect >= %u", size, DI_SIZE);
	return n;
}

/* ---------------------------------------------------------- file extents */

static int parse_inline(struct bi_extent *e, const uint8_t *item, uint32_t size,
			uint64_t key_offset, uint32_t ss, char *why, size_t whylen)
{
	if (key_offset != 0)
		return bi_why(why, whylen, "inline extent at file offset %" PRIu64 ", expect 0",
			      key_offset);
	e->inline_data = item + FE_INLINE_DATA;
	e->inline_size = size - FE_INLINE_DATA;
	if (e->compression == COMPRESS_NONE && e->inline_size != e->ram_bytes)
		return bi_why(why, whylen,
			      "uncompressed inline extent item size %u, expect %" PRIu64
			      " (21 + ram_bytes)",
			      size, e->ram_bytes + FE_INLINE_DATA);
	if (e->compression != COMPRESS_NONE && e->inline_size == 0)
		return bi_why(why, whylen, "compressed inline extent with an empty payload");
	/* The kernel maps an inline extent onto the first sector only. */
	if (e->ram_bytes > ss)
		return bi_why(why, whylen,
			      "inline extent ram_bytes %" PRIu64 ", expect <= sectorsize %u",
			      e->ram_bytes, ss);
	e->kind = BI_EXT_INLINE;
	e->end = e->ram_bytes ? ss : 0;
	return 0;
}

static int check_aligned(const struct bi_extent *e, uint32_t ss, char *why, size_t whylen)
{
	static const char *const name[] = { "ram_bytes", "disk_bytenr", "disk_num_bytes",
					    "offset", "num_bytes" };
	const uint64_t v[] = { e->ram_bytes, e->disk_bytenr, e->disk_num_bytes, e->offset,
			       e->num_bytes };
	for (int i = 0; i < 5; i++)
		if (v[i] % ss)
			return bi_why(why, whylen,
				      "unaligned %s %" PRIu64 ", expect a multiple of %u", name[i],
				      v[i], ss);
	return 0;
}

/* The reference must lie inside the extent it names. */
static int check_reference(const struct bi_extent *e, char *why, size_t whylen)
{
	uint64_t stop, dend;
	if (!bi_add_ok(e->offset, e->num_bytes, &stop))
		return bi_why(why, whylen, "offset %" PRIu64 " + num_bytes %" PRIu64 " overflows",
			      e->offset, e->num_bytes);
	if (!bi_add_ok(e->disk_bytenr, e->disk_num_bytes, &dend))
		return bi_why(why, whylen,
			      "disk_bytenr %" PRIu64 " + disk_num_bytes %" PRIu64 " overflows",
			      e->disk_bytenr, e->disk_num_bytes);
	if (e->disk_num_bytes == 0)
		return bi_why(why, whylen, "disk_num_bytes 0 for extent at %" PRIu64,
			      e->disk_bytenr);
	if (e->compression == COMPRESS_NONE) {
		if (stop > e->disk_num_bytes)
			return bi_why(why, whylen,
				      "reference [%" PRIu64 ", %" PRIu64
				      ") past the extent's disk_num_bytes %" PRIu64,
				      e->offset, stop, e->disk_num_bytes);
		return 0;
	}
	if (e->disk_num_bytes > MAX_COMPRESSED)
		return bi_why(why, whylen,
			      "compressed extent disk_num_bytes %" PRIu64 ", expect <= %u",
			      e->disk_num_bytes, MAX_COMPRESSED);
	if (e->ram_bytes == 0 || e->ram_bytes > MAX_UNCOMPRESSED)
		return bi_why(why, whylen, "compressed extent ram_bytes %" PRIu64 ", expect 1..%u",
			      e->ram_bytes, MAX_UNCOMPRESSED);
	if (stop > e->ram_bytes)
		return bi_why(why, whylen,
			      "reference [%" PRIu64 ", %" PRIu64
			      ") past the extent's ram_bytes %" PRIu64,
			      e->offset, stop, e->ram_bytes);
	return 0;
}

static int parse_regular(struct bi_extent *e, const uint8_t *item, uint32_t size,
			 uint64_t key_offset, uint32_t ss, char *why, size_t whylen)
{
	if (size != FE_SIZE)
		return bi_why(why, whylen, "regular/prealloc extent item size %u, expect %u", size, FE_SIZE);
	e->disk_bytenr = bi_le64(item + FE_DISK_BYTENR);
	e->disk_num_bytes = bi_le64(item + FE_DISK_NUM_BYTES);
	e->offset = bi_le64(item + FE_OFFSET);
	e->num_bytes = bi_le64(item + FE_NUM_BYTES);
	int rc = check_aligned(e, ss, why, whylen);
	if (rc)
		return rc;
	if (!bi_add_ok(key_offset, e->num_bytes, &e->end))
		return bi_why(why, whylen,
			      "extent end overflows: file offset %" PRIu64 " + num_bytes %" PRIu64,
			      key_offset, e->num_bytes);
	if (e->type == FE_TYPE_PREALLOC || e->disk_bytenr == 0) {
		e->kind = BI_EXT_ZERO;
		return 0;
	}
	e->kind = e->compression ? BI_EXT_COMPRESSED : BI_EXT_DISK;
	return check_reference(e, why, whylen);
}

int bi_extent_parse(const uint8_t *item, uint32_t size, uint64_t key_offset,
		    uint32_t sectorsize, struct bi_extent *out, char *why, size_t whylen)
{
	memset(out, 0, sizeof(*out));
	if (why && whylen)
		why[0] = '\0';
	if (sectorsize < 512 || sectorsize > 65536 || (sectorsize & (sectorsize - 1)))
		return -EINVAL;
	if (!item || size < FE_INLINE_DATA)
		return bi_why(why, whylen, "file extent item size %u, expect >= %u", size, FE_INLINE_DATA);
	out->file_offset = key_offset;
	out->generation = bi_le64(item + FE_GENERATION);
	out->ram_bytes = bi_le64(item + FE_RAM_BYTES);
	out->compression = item[FE_COMPRESSION];
	out->type = item[FE_TYPE];
	if (key_offset % sectorsize)
		return bi_why(why, whylen,
			      "unaligned file offset %" PRIu64 ", expect a multiple of %u",
			      key_offset, sectorsize);
	if (out->type > FE_TYPE_PREALLOC)
		return bi_why(why, whylen, "invalid file extent type %u, expect 0..2", out->type);
	if (out->compression > COMPRESS_ZSTD)
		return bi_why(why, whylen, "invalid compression %u, expect 0..3", out->compression);
	if (item[FE_ENCRYPTION])
		return bi_why(why, whylen, "invalid encryption %u, expect 0", item[FE_ENCRYPTION]);
	if (bi_le16(item + FE_OTHER_ENCODING))
		return bi_why(why, whylen, "invalid other_encoding %u, expect 0",
			    bi_le16(item + FE_OTHER_ENCODING));
	if (out->type == FE_TYPE_INLINE)
		return parse_inline(out, item, size, key_offset, sectorsize, why, whylen);
	return parse_regular(out, item, size, key_offset, sectorsize, why, whylen);
}

/* ---------------------------------------------------------- device items */

int bi_dev_item_parse(const uint8_t *item, uint32_t size, uint64_t key_offset,
		      struct bi_devitem *out, char *why, size_t whylen)
{
	if (size != DEV_ITEM_SIZE)
		return bi_why(why, whylen, "dev item size %u, expect %u", size, DEV_ITEM_SIZE);
	out->devid = bi_le64(item + DEV_DEVID);
	if (out->devid != key_offset)
		return bi_why(why, whylen, "dev item devid %" PRIu64 ", expect the key's %" PRIu64,
			      out->devid, key_offset);
	out->total_bytes = bi_le64(item + DEV_TOTAL_BYTES);
	memcpy(out->uuid, item + DEV_UUID, 16);
	return 0;
}

/* ---------------------------------------------------------- chunk items */

/* Stripe counts the kernel accepts per profile (btrfs_raid_array). */
struct profile {
	uint64_t bit;
	const char *name;
	uint16_t min, max;	/* max 0: no limit */
};

static const struct profile profiles[] = {
	{ 0, "single", 1, 1 },		{ BG_DUP, "dup", 2, 2 },
	{ BG_RAID0, "raid0", 1, 0 },	{ BG_RAID1, "raid1", 2, 2 },
	{ BG_RAID1C3, "raid1c3", 3, 3 }, { BG_RAID1C4, "raid1c4", 4, 4 },
	{ BG_RAID10, "raid10", 2, 0 },	{ BG_RAID5, "raid5", 2, 0 },
	{ BG_RAID6, "raid6", 3, 0 },
};

static const struct profile *profile_of(uint64_t type)
{
	for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
		if ((type & BG_PROFILE_MASK) == profiles[i].bit)
			return &profiles[i];
	return NULL;
}

/* The profile's name ("single", "raid10", ...), or "unknown". */
const char *bi_chunk_profile_name(uint64_t type)
{
	const struct profile *p = profile_of(type);
	return p ? p->name : "unknown";
}

BI_PRINTF(4, 5)
static int why_chunk(char *why, size_t whylen, uint64_t logical, const char *fmt, ...)
{
	char msg[224];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return bi_why(why, whylen, "chunk at logical %" PRIu64 ": %s", logical, msg);
}

/* Geometry and type, in the kernel's order (btrfs_check_chunk_valid). */
static int check_geometry(const struct bi_chunk *c, uint32_t chunk_ss, uint32_t ss, char *why,
			  size_t whylen)
{
	uint64_t end;
	if (c->logical % ss)
		return why_chunk(why, whylen, c->logical,
				 "start not aligned, have %" PRIu64
				 " expect a multiple of sectorsize %u",
				 c->logical, ss);
	if (chunk_ss != ss)
		return why_chunk(why, whylen, c->logical, "bad sector_size, have %u expect %u",
				 chunk_ss, ss);
	if (c->length == 0 || c->length % ss)
		return why_chunk(why, whylen, c->logical,
				 "bad length, have %" PRIu64 " expect a nonzero multiple of %u",
				 c->length, ss);
	if (!bi_add_ok(c->logical, c->length, &end))
		return why_chunk(why, whylen, c->logical,
				 "start + length overflows, length %" PRIu64, c->length);
	if (c->stripe_len != BI_STRIPE_LEN)
		return why_chunk(why, whylen, c->logical,
				 "bad stripe_len, have %" PRIu64 " expect %u", c->stripe_len,
				 BI_STRIPE_LEN);
	if (c->length >= LENGTH_LIMIT)
		return why_chunk(why, whylen, c->logical,
				 "length too large, have %" PRIu64 " expect < %" PRIu64, c->length,
				 LENGTH_LIMIT);
	return 0;
}

static int check_chunk_type(const struct bi_chunk *c, char *why, size_t whylen)
{
	uint64_t t = c->type, unknown = t & ~(BG_TYPE_MASK | BG_PROFILE_MASK);
	if (unknown)
		return why_chunk(why, whylen, c->logical,
				 "unknown type bits 0x%" PRIx64 " in type 0x%" PRIx64, unknown, t);
	if (__builtin_popcountll(t & BG_PROFILE_MASK) > 1)
		return why_chunk(why, whylen, c->logical,
				 "several profile bits, have 0x%" PRIx64 " expect 0 or 1 bit set",
				 (uint64_t)((t & BG_PROFILE_MASK)));
	if (!(t & BG_TYPE_MASK))
		return why_chunk(
			why, whylen, c->logical,
			"no type bit, have 0x%" PRIx64 " expect one of data/system/metadata", t);
	if ((t & BG_SYSTEM) && (t & (BG_DATA | BG_METADATA)))
		return why_chunk(why, whylen, c->logical,
				 "system chunk also data or metadata, type 0x%" PRIx64, t);
	return 0;
}

static int check_stripes(const struct bi_chunk *c, uint16_t sub, char *why, size_t whylen)
{
	const struct profile *p = profile_of(c->type);
	uint16_t n = c->num_stripes;
	if (n < p->min || (p->max && n > p->max))
		return why_chunk(why, whylen, c->logical,
				 "bad num_stripes for %s, have %u expect %s%u", p->name, n,
				 p->max ? "" : ">= ", p->min);
	if (p->bit == BG_RAID10 && sub != 2)
		return why_chunk(why, whylen, c->logical,
				 "bad sub_stripes for raid10, have %u expect 2", sub);
	uint64_t span = bi_chunk_stripe_span(c), end;
	for (uint16_t i = 0; i < n; i++)
		if (!bi_add_ok(c->stripes[i].offset, span, &end))
			return why_chunk(why, whylen, c->logical,
					 "stripe %u: device range overflows, offset %" PRIu64
					 " + %" PRIu64,
					 i, c->stripes[i].offset, span);
	return 0;
}

static void decode_chunk(struct bi_cur *cur, struct bi_chunk *c, uint64_t logical, uint16_t n)
{
	c->logical = logical;
	c->length = bi_u64(cur, CHUNK_LENGTH);
	c->stripe_len = bi_u64(cur, CHUNK_STRIPE_LEN);
	c->type = bi_u64(cur, CHUNK_TYPE);
	c->num_stripes = n;
	c->sub_stripes = (c->type & BG_RAID10) ? 2 : 1;
	for (uint16_t i = 0; i < n; i++) {
		size_t at = CHUNK_SIZE + (size_t)i * STRIPE_SIZE;
		c->stripes[i].devid = bi_u64(cur, at + STRIPE_DEVID);
		c->stripes[i].offset = bi_u64(cur, at + STRIPE_OFFSET);
		bi_copy(cur, at + STRIPE_DEV_UUID, c->stripes[i].dev_uuid, 16);
	}
}

int bi_chunk_parse(const uint8_t *item, size_t len, uint64_t logical, uint32_t sectorsize,
		   struct bi_chunk **out, char *why, size_t whylen)
{
	if (!out || (!item && len) || !sectorsize || (sectorsize & (sectorsize - 1)))
		return -EINVAL;
	*out = NULL;
	struct bi_cur cur = bi_cur_make(item, len);
	uint16_t n = bi_u16(&cur, CHUNK_NUM_STRIPES);
	if (cur.bad)
		return why_chunk(why, whylen, logical, "item too small, have %zu expect >= %u",
				 len, CHUNK_SIZE);
	if (n == 0)
		return why_chunk(why, whylen, logical, "bad num_stripes, have 0 expect >= 1");
	size_t want = CHUNK_SIZE + (size_t)n * STRIPE_SIZE;
	if (len != want)
		return why_chunk(why, whylen, logical,
				 "bad item size for %u stripes, have %zu expect %zu", n, len, want);
	struct bi_chunk *c = calloc(1, sizeof(*c) + n * sizeof(c->stripes[0]));
	if (!c)
		return -ENOMEM;
	decode_chunk(&cur, c, logical, n);
	int rc = check_geometry(c, bi_u32(&cur, CHUNK_SECTOR_SIZE), sectorsize, why, whylen);
	if (rc == 0)
		rc = check_chunk_type(c, why, whylen);
	if (rc == 0)
		rc = check_stripes(c, bi_u16(&cur, CHUNK_SUB_STRIPES), why, whylen);
	if (rc < 0) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}
