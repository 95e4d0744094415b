/* SPDX-License-Identifier: MIT */
/*
 * Log tree replay: the operations, each after the kernel's function of the
 * same purpose in fs/btrfs/tree-log.c and inode.c (named in its comment).
 *
 * Names: adding and removing links (inode refs, DIR_ITEM and DIR_INDEX
 * entries) with the kernel's errors when an item is full or a name is
 * there already. Inode items: what replaying one deletes first (xattrs
 * and directory entries the log does not hold) and how it is copied.
 * File extents: dropping the range a logged extent covers, splitting the
 * items around it, the data extents' reference counts and the csum tree.
 * The link count fixup and mount's orphan cleanup that follow the walks.
 *
 * Separate from replay.c, which decides when each runs (the walks), and
 * from state.c, the state they read and change (every change goes
 * through a view, so limits and errors are handled there).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/csum.h"
#include "base/cursor.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "logreplay/replay.h"
#include "logreplay/state.h"

#define OBJ_TREE_LOG_FIXUP ((uint64_t)-7)
#define DIR_LOG_SIZE 8		/* btrfs_dir_log_item: u64 end */

/* ------------------------------------------------------------ inodes */

static uint8_t mode_ftype(uint32_t mode)
{
	static const uint8_t ft[16] = { [1] = FT_FIFO, [2] = FT_CHRDEV, [4] = FT_DIR,
					[6] = FT_BLKDEV, [8] = FT_REG_FILE, [10] = FT_SYMLINK,
					[12] = FT_SOCK };
	return ft[(mode & M_FMT) >> 12];
}

/* link_to_fixup_dir: remember @ino for the link count fixup; the first
 * time, count one more link so the inode survives until then. */
int bi_lr_fixup_add(struct lr_ctx *cx, uint64_t ino)
{
	struct lr_inode *in;
	int rc = bi_lr_iget_must(cx, ino, &in);
	if (rc)
		return rc;
	bi_key k = { OBJ_TREE_LOG_FIXUP, KT_ORPHAN_ITEM, ino };
	struct lr_item it;
	rc = bi_view_get(cx, cx->fs, &k, &it);
	if (rc == 0) {
		rc = bi_view_put(cx, cx->fs, &k, "", 0);
		in->nlink = in->nlink ? in->nlink + 1 : 1;
		if (rc == 0)
			rc = bi_lr_iupdate(cx, in);
	} else if (rc > 0) {
		bi_lr_item_free(&it);
		rc = 0;
	}
	bi_lr_iput(cx, in);
	return rc;
}

/* ------------------------------------------------- names: refs, entries */

static uint32_t leaf_data(const struct lr_ctx *cx)
{
	return cx->p->nodesize - HDR_SIZE;
}

/* Growing an existing item by @add bytes fails with -EOVERFLOW when the
 * kernel's split_leaf(extend) refuses (ins_len includes an item header). */
static bool can_extend(const struct lr_ctx *cx, uint32_t size, uint32_t add)
{
	return (uint64_t)size + add + 2 * ITEM_SIZE <= leaf_data(cx);
}

/* The entry named @name of item @k of the fs view: 1 with *it (free it)
 * and *e, 0 if absent. */
static int find_dent(struct lr_ctx *cx, const bi_key *k, const uint8_t *name, uint16_t len,
		     struct lr_item *it, struct lr_dent *e)
{
	int rc = bi_view_get(cx, cx->fs, k, it);
	if (rc <= 0)
		return rc;
	rc = bi_lr_dent_find(k->type, it->data, it->size, name, len, e);
	if (rc <= 0) {
		bi_lr_item_free(it);
		if (rc < 0)
			return bi_lr_corrupt_item(cx, k, "bad dir entry");
	}
	return rc;
}

int bi_lr_find_dir_item(struct lr_ctx *cx, uint64_t dir, const uint8_t *name, uint16_t len,
			struct lr_item *it, struct lr_dent *e)
{
	bi_key k = { dir, KT_DIR_ITEM, bi_name_hash(name, len) };
	return find_dent(cx, &k, name, len, it, e);
}

int bi_lr_find_dir_index(struct lr_ctx *cx, uint64_t dir, uint64_t index,
			 const uint8_t *name, uint16_t len, struct lr_item *it,
			 struct lr_dent *e)
{
	bi_key k = { dir, KT_DIR_INDEX, index };
	return find_dent(cx, &k, name, len, it, e);
}

/* btrfs_del_inode_ref, falling back to the extref: *index of the name;
 * -ENOENT (no message) if neither holds it. */
static int del_inode_ref(struct lr_ctx *cx, uint64_t ino, uint64_t parent,
			 const uint8_t *name, uint16_t len, uint64_t *index)
{
	for (int ext = 0; ext < 2; ext++) {
		bi_key k = { ino, ext ? KT_INODE_EXTREF : KT_INODE_REF,
			     ext ? bi_extref_hash(parent, name, len) : parent };
		struct lr_item it;
		struct lr_ref r;
		int rc = bi_view_get(cx, cx->fs, &k, &it);
		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		rc = bi_lr_ref_find(ext, k.offset, it.data, it.size, parent, name, len, &r);
		if (rc > 0) {
			*index = r.index;
			rc = bi_view_cut(cx, cx->fs, &it, r.off, r.len);
			bi_lr_item_free(&it);
			return rc;
		}
		bi_lr_item_free(&it);
		if (rc < 0)
			return bi_lr_corrupt_item(cx, &k, "bad inode ref");
	}
	return -ENOENT;
}

/* An INODE_REF or INODE_EXTREF entry in a new buffer (free it). */
static uint8_t *ref_entry(struct lr_ctx *cx, bool ext, uint64_t parent, uint64_t index,
			  const uint8_t *name, uint16_t len, uint32_t *n)
{
	uint32_t hdr = ext ? EXTREF_SIZE : IREF_SIZE;
	uint8_t *b = malloc(hdr + len);
	if (!b) {
		bi_lr_fail(cx, -ENOMEM, "out of memory");
		return NULL;
	}
	if (ext)
		bi_put_le64(b + EXTREF_PARENT, parent);
	bi_put_le64(b + (ext ? EXTREF_INDEX : IREF_INDEX), index);
	b[hdr - 2] = (uint8_t)len;
	b[hdr - 1] = (uint8_t)(len >> 8);
	memcpy(b + hdr, name, len);
	*n = hdr + len;
	return b;
}

/* btrfs_insert_inode_ref, and the extref when the ref item is full:
 * -EEXIST if the name is there, -EMLINK / -EOVERFLOW when it cannot fit. */
static int insert_ref(struct lr_ctx *cx, uint64_t ino, uint64_t parent, const uint8_t *name,
		      uint16_t len, uint64_t index)
{
	int rc = -EMLINK;
	for (int ext = 0; ext < 2 && rc == -EMLINK; ext++) {
		if (ext && !cx->p->extended_iref)
			break;
		bi_key k = { ino, ext ? KT_INODE_EXTREF : KT_INODE_REF,
			     ext ? bi_extref_hash(parent, name, len) : parent };
		uint32_t n;
		uint8_t *buf = ref_entry(cx, ext, parent, index, name, len, &n);
		struct lr_item it;
		struct lr_ref r;
		rc = buf ? bi_view_get(cx, cx->fs, &k, &it) : -ENOMEM;
		if (rc == 0) {
			rc = bi_view_put(cx, cx->fs, &k, buf, n);
		} else if (rc > 0) {
			rc = bi_lr_ref_find(ext, k.offset, it.data, it.size, parent, name, len, &r);
			if (rc < 0)
				rc = bi_lr_corrupt_item(cx, &k, "bad inode ref");
			else if (rc > 0)
				rc = -EEXIST;
			else if (can_extend(cx, it.size, n))
				rc = bi_view_append(cx, cx->fs, &k, &it, buf, n);
			else
				rc = ext ? -EOVERFLOW : -EMLINK;
			bi_lr_item_free(&it);
		}
		free(buf);
	}
	return rc;
}

/* btrfs_insert_dir_item: the DIR_ITEM entry (appended to a hash
 * collision) and the DIR_INDEX item. -EEXIST (name present; the index is
 * still inserted) or -EOVERFLOW (item full) as the kernel returns them. */
static int insert_dir(struct lr_ctx *cx, uint64_t dir, const bi_key *loc, uint8_t type,
		      const uint8_t *name, uint16_t len, uint64_t index)
{
	uint32_t n = DI_SIZE + len;
	uint8_t *buf = calloc(1, n);
	if (!buf)
		return bi_lr_fail(cx, -ENOMEM, "out of memory");
	bi_put_le64(buf + DI_LOCATION, loc->objectid);
	buf[DI_LOCATION + 8] = loc->type;
	bi_put_le64(buf + DI_LOCATION + 9, loc->offset);
	bi_put_le64(buf + DI_TRANSID, cx->p->transid);
	buf[DI_NAME_LEN] = (uint8_t)len;
	buf[DI_NAME_LEN + 1] = (uint8_t)(len >> 8);
	buf[DI_TYPE] = type;
	memcpy(buf + DI_SIZE, name, len);
	bi_key k = { dir, KT_DIR_ITEM, bi_name_hash(name, len) };
	struct lr_item it;
	struct lr_dent e;
	int ret = bi_view_get(cx, cx->fs, &k, &it);
	if (ret == 0) {
		ret = bi_view_put(cx, cx->fs, &k, buf, n);
	} else if (ret > 0) {
		if (!can_extend(cx, it.size, n))
			ret = -EOVERFLOW;
		else if ((ret = bi_lr_dent_find(k.type, it.data, it.size, name, len, &e)) > 0)
			ret = -EEXIST;
		else
			ret = ret < 0 ? bi_lr_corrupt_item(cx, &k, "bad dir entry")
				      : bi_view_append(cx, cx->fs, &k, &it, buf, n);
		bi_lr_item_free(&it);
	}
	bi_key ik = { dir, KT_DIR_INDEX, index };
	int rc = ret && ret != -EEXIST ? ret : bi_view_get(cx, cx->fs, &ik, &it);
	if (rc > 0) {
		bi_lr_item_free(&it);
		rc = bi_lr_fail(cx, -EUCLEAN, "dir %" PRIu64 " already has index %" PRIu64, dir,
				index);
	} else if (rc == 0) {
		rc = bi_view_put(cx, cx->fs, &ik, buf, n);
	}
	free(buf);
	return rc ? rc : ret;
}

/* btrfs_add_link during log recovery: times are left alone. */
int bi_lr_add_link(struct lr_ctx *cx, struct lr_inode *dir, struct lr_inode *in,
		   const uint8_t *name, uint16_t len, bool backref, uint64_t index)
{
	if (in->ino == OBJ_FIRST_FREE)
		return bi_lr_fail(cx, -EUCLEAN,
				  "a name for a subvolume root directory (not replayed)");
	int rc = backref ? insert_ref(cx, in->ino, dir->ino, name, len, index) : 0;
	if (rc)
		return rc;
	bi_key loc = { in->ino, KT_INODE_ITEM, 0 };
	rc = insert_dir(cx, dir->ino, &loc, mode_ftype(in->mode), name, len, index);
	if (rc == -EEXIST || rc == -EOVERFLOW) {
		uint64_t ix;
		int r2 = backref ? del_inode_ref(cx, in->ino, dir->ino, name, len, &ix) : 0;
		return r2 && r2 != -ENOENT ? r2 : rc;
	}
	if (rc)
		return rc;
	dir->size += 2ull * len;
	dir->seq++;
	return bi_lr_iupdate(cx, dir);
}

/* btrfs_unlink_inode. The kernel also sets the ctimes (and the directory's
 * mtime) to the current time; that cannot be known offline. */
int bi_lr_unlink_name(struct lr_ctx *cx, struct lr_inode *dir, struct lr_inode *in,
		      const uint8_t *name, uint16_t len)
{
	struct lr_item it;
	struct lr_dent e;
	int rc = bi_lr_find_dir_item(cx, dir->ino, name, len, &it, &e);
	if (rc <= 0)
		return rc ? rc
			  : bi_lr_fail(cx, -EUCLEAN,
				       "unlink: dir %" PRIu64 " has no entry \"%.*s\"", dir->ino,
				       (int)len, name);
	rc = bi_view_cut(cx, cx->fs, &it, e.off, e.len);
	bi_lr_item_free(&it);
	uint64_t index = 0;
	if (rc == 0)
		rc = del_inode_ref(cx, in->ino, dir->ino, name, len, &index);
	if (rc == -ENOENT)
		return bi_lr_fail(cx, -EUCLEAN,
				  "unlink: inode %" PRIu64 " has no ref \"%.*s\" in dir %" PRIu64,
				  in->ino, (int)len, name, dir->ino);
	bi_key ik = { dir->ino, KT_DIR_INDEX, index };
	if (rc == 0)
		rc = bi_view_del(cx, cx->fs, &ik);	/* absent: dropped silently */
	if (rc)
		return rc;
	dir->size -= 2ull * len;
	in->seq++;
	dir->seq++;
	rc = bi_lr_iupdate(cx, dir);
	in->nlink--;
	return rc ? rc : bi_lr_iupdate(cx, in);
}

static uint8_t *dup_name(struct lr_ctx *cx, const uint8_t *name, uint16_t len)
{
	uint8_t *n = malloc(len ? len : 1);
	if (!n)
		bi_lr_fail(cx, -ENOMEM, "out of memory");
	else
		memcpy(n, name, len);
	return n;
}

/* drop_one_dir_item: unlink the entry's inode, keeping it for the fixup. */
int bi_lr_drop_entry(struct lr_ctx *cx, struct lr_inode *dir, const struct lr_dent *e,
		     bool extra_link)
{
	uint64_t ino = e->loc.objectid;
	uint16_t len = e->name_len;
	uint8_t *name = dup_name(cx, e->name, len);
	struct lr_inode *in = NULL;
	int rc = name ? bi_lr_iget_must(cx, ino, &in) : -ENOMEM;
	if (rc == 0)
		rc = bi_lr_fixup_add(cx, ino);
	if (rc == 0 && extra_link)
		in->nlink++;
	if (rc == 0)
		rc = bi_lr_unlink_name(cx, dir, in, name, len);
	bi_lr_iput(cx, in);
	free(name);
	return rc;
}

/* overwrite_item for every item but the inode item: the log's copy
 * replaces the tree's, unless they are identical. */
int bi_lr_overwrite(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	struct lr_item dst;
	int rc = bi_view_get(cx, cx->fs, &li->key, &dst);
	if (rc < 0)
		return rc;
	if (rc > 0) {
		bool same = dst.size == li->size && (!li->size || !memcmp(dst.data, li->data, li->size));
		bi_lr_item_free(&dst);
		if (same)
			return 0;
	}
	return bi_view_put(cx, cx->fs, &li->key, li->data, li->size);
}

/* -------------------------------------- inode items: the log's deletes */

/* replay_xattr_deletes: drop the inode's xattrs the log does not hold. */
int bi_lr_xattr_deletes(struct lr_ctx *cx, uint64_t ino)
{
	bi_key lo = { ino, KT_XATTR_ITEM, 0 }, hi = { ino, KT_XATTR_ITEM, UINT64_MAX };
	for (;;) {
		struct lr_item it;
		int rc = bi_view_first(cx, cx->fs, &lo, &hi, &it);
		if (rc <= 0)
			return rc;
		struct lr_dent e;
		bool cut = false;
		for (uint32_t pos = 0; pos < it.size && rc >= 0 && !cut; pos += e.len) {
			if (bi_lr_dent_at(it.key.type, it.data, it.size, pos, &e) < 0) {
				rc = bi_lr_corrupt_item(cx, &it.key, "bad xattr entry");
				break;
			}
			bi_key lk = { ino, KT_XATTR_ITEM, bi_name_hash(e.name, e.name_len) };
			rc = bi_lr_log_has_dent(cx, &lk, e.name, e.name_len);
			if (rc == 0) {
				rc = bi_view_cut(cx, cx->fs, &it, e.off, e.len);
				cut = true;	/* search again from this key */
			}
		}
		bool more = cut ? (lo = it.key, true) : bi_lr_key_next(&it.key, &lo);
		bi_lr_item_free(&it);
		if (rc < 0 || !more)
			return rc < 0 ? rc : 0;
	}
}

static int dirlog_end(struct lr_ctx *cx, const struct bi_lr_item *li, uint64_t *end)
{
	if (li->size != DIR_LOG_SIZE)
		return bi_lr_fail(cx, -EUCLEAN,
				  "dir log item (%" PRIu64 " 72 %" PRIu64 ") size %u expect 8",
				  li->key.objectid, li->key.offset, li->size);
	*end = bi_le64(li->data);
	if (*end < li->key.offset)	/* the kernel would loop forever */
		return bi_lr_fail(cx, -EUCLEAN,
				  "dir log range [%" PRIu64 ", %" PRIu64 "] ends before it starts",
				  li->key.offset, *end);
	return 0;
}

/* find_dir_range: the logged index range holding *start, else the next
 * one of the directory. 0 found, 1 none. */
static int find_dir_range(struct lr_ctx *cx, uint64_t dir, uint64_t *start, uint64_t *end)
{
	const struct bi_lr_log *l = cx->log;
	if (*start == UINT64_MAX)
		return 1;
	bi_key k = { dir, KT_DIR_LOG_INDEX, *start };
	size_t i = bi_lr_log_lower(l, &k);
	if (i >= l->n || bi_key_cmp(&l->items[i].key, &k) != 0) {
		if (i == 0)
			return 1;
		i--;
	}
	for (int pass = 0; pass < 2 && i < l->n; pass++, i++) {
		const struct bi_lr_item *li = &l->items[i];
		if (li->key.objectid != dir || li->key.type != KT_DIR_LOG_INDEX) {
			if (pass)
				return 1;
			continue;
		}
		uint64_t e = 0;
		int rc = dirlog_end(cx, li, &e);
		if (rc)
			return rc;
		if (pass == 0 && (*start < li->key.offset || *start > e))
			continue;
		*start = li->key.offset;
		*end = e;
		return 0;
	}
	return 1;
}

/* check_item_in_log: unlink a directory entry the log does not hold (or
 * every one, for a directory that lost its last link). */
static int check_in_log(struct lr_ctx *cx, struct lr_inode *dir, const struct lr_item *it,
			bool force)
{
	struct lr_dent e;
	if (bi_lr_dent_at(it->key.type, it->data, it->size, 0, &e) < 0)
		return bi_lr_corrupt_item(cx, &it->key, "bad dir index entry");
	if (!force) {
		int rc = bi_lr_log_has_dent(cx, &it->key, e.name, e.name_len);
		if (rc)
			return rc < 0 ? rc : 0;
	}
	return bi_lr_drop_entry(cx, dir, &e, true);
}

/* replay_dir_deletes */
int bi_lr_dir_deletes(struct lr_ctx *cx, uint64_t dirid, bool del_all)
{
	struct lr_inode *dir;
	int rc = bi_lr_iget(cx, dirid, &dir);
	if (rc)
		return rc == -ENOENT ? 0 : rc;	/* not there yet: nothing to delete */
	uint64_t rs = 0, re = UINT64_MAX;
	for (;;) {
		if (!del_all && (rc = find_dir_range(cx, dirid, &rs, &re)) != 0)
			break;
		for (uint64_t off = rs;; off++) {
			struct lr_item it;
			bi_key lo = { dirid, KT_DIR_INDEX, off }, hi = { dirid, KT_DIR_INDEX, UINT64_MAX };
			rc = bi_view_first(cx, cx->fs, &lo, &hi, &it);
			if (rc <= 0)
				goto out;	/* no more entries */
			off = it.key.offset;
			rc = off > re ? 1 : check_in_log(cx, dir, &it, del_all);
			bi_lr_item_free(&it);
			if (rc < 0)
				goto out;
			if (rc || off == UINT64_MAX)
				break;
		}
		if (re == UINT64_MAX)
			break;
		rs = re + 1;
	}
out:
	bi_lr_iput(cx, dir);
	return rc < 0 ? rc : 0;
}

/* overwrite_item for an inode item: nbytes stays the tree's (the extents
 * replayed later adjust it), a directory keeps its size (names replayed
 * later adjust it), and generation 0 (logged only "to exist") changes
 * nothing but a regular file's size. */
int bi_lr_overwrite_inode(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	uint8_t src[INODE_ITEM_SIZE];
	memcpy(src, li->data, sizeof(src));
	uint32_t mode = bi_le32(src + INODE_MODE);
	struct lr_item dst;
	int rc = bi_view_get(cx, cx->fs, &li->key, &dst);
	if (rc < 0)
		return rc;
	if (rc > 0 && dst.size != INODE_ITEM_SIZE) {
		bi_lr_item_free(&dst);
		return bi_lr_corrupt_item(cx, &li->key, "inode item size is not 160");
	}
	if (rc > 0 && memcmp(dst.data, src, sizeof(src)) == 0) {
		bi_lr_item_free(&dst);
		return 0;
	}
	bi_put_le64(src + INODE_NBYTES, rc > 0 ? bi_le64(dst.data + INODE_NBYTES) : 0);
	if (bi_lr_is_dir(mode))
		bi_put_le64(src + INODE_SIZE_OFF, 0);
	if (rc > 0) {
		uint32_t dmode = bi_le32(dst.data + INODE_MODE);
		if (bi_le64(src + INODE_GENERATION) == 0) {
			uint64_t size = bi_le64(src + INODE_SIZE_OFF);
			rc = 0;
			if (bi_lr_is_reg(mode) && bi_lr_is_reg(dmode) && size) {
				bi_put_le64(dst.data + INODE_SIZE_OFF, size);
				rc = bi_view_put(cx, cx->fs, &li->key, dst.data, dst.size);
			}
			bi_lr_item_free(&dst);
			return rc;
		}
		if (bi_lr_is_dir(mode) && bi_lr_is_dir(dmode))
			memcpy(src + INODE_SIZE_OFF, dst.data + INODE_SIZE_OFF, 8);
		bi_lr_item_free(&dst);
	}
	if (bi_le64(src + INODE_GENERATION) == 0)
		bi_put_le64(src + INODE_GENERATION, cx->p->transid);
	return bi_view_put(cx, cx->fs, &li->key, src, sizeof(src));
}

/* ------------------------------------------------------- file extents */

/* The most bytes one checksum item can cover. */
static uint64_t csum_span(const struct lr_ctx *cx)
{
	return (uint64_t)(leaf_data(cx) / cx->p->csum_size) * cx->p->sectorsize;
}

/* Put the checksums of [a, b) taken from item @it (covering them). */
static int csum_put(struct lr_ctx *cx, const bi_key *k, const uint8_t *d, uint64_t a,
		    uint64_t b)
{
	uint64_t ss = cx->p->sectorsize, cs = cx->p->csum_size;
	bi_key nk = { OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, a };
	return bi_view_put(cx, &cx->csum, &nk, d + (a - k->offset) / ss * cs,
			   (uint32_t)((b - a) / ss * cs));
}

/* btrfs_del_csums: no checksum left for [a, b); items are cut or split. */
static int csum_delete(struct lr_ctx *cx, uint64_t a, uint64_t b)
{
	uint64_t span = csum_span(cx);
	bi_key lo = { OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, a > span ? a - span : 0 };
	bi_key hi = { OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, b - 1 };
	for (;;) {
		struct lr_item it;
		uint64_t e;
		int rc = bi_view_first(cx, &cx->csum, &lo, &hi, &it);
		if (rc <= 0)
			return rc;
		rc = bi_lr_csum_range(cx, &it.key, it.size, &e);
		uint64_t s = it.key.offset;
		bool more = bi_lr_key_next(&it.key, &lo);
		if (rc == 0 && e > a) {
			rc = bi_view_del(cx, &cx->csum, &it.key);
			if (rc == 0 && s < a)
				rc = csum_put(cx, &it.key, it.data, s, a);
			if (rc == 0 && e > b)
				rc = csum_put(cx, &it.key, it.data, b, e);
		}
		bi_lr_item_free(&it);
		if (rc || !more)
			return rc;
	}
}

/* A data extent's reference count after replay: the extent tree's, plus
 * what replay adds and drops. The kernel queues these as delayed refs, so
 * only the net count matters; an extent left with none is freed, and its
 * checksums with it (free_freed_extents). Node data: u64 refs, u8 exists. */
static int ext_ref(struct lr_ctx *cx, const struct lr_fe *fe, int delta, bool alloc)
{
	if (!cx->ext.base.first || !fe->disk_bytenr)
		return 0;	/* no extent tree: nothing is freed */
	bi_key k = { fe->disk_bytenr, KT_EXTENT_ITEM, fe->disk_num_bytes };
	struct lr_node *n = bi_lr_map_find(cx->ext.map, &k);
	uint8_t st[9] = { 0 };
	if (n) {
		memcpy(st, n->data, sizeof(st));
	} else {
		struct lr_item it;
		int rc = bi_lr_src_get(cx, &cx->ext, false, &k, &k, &it);
		if (rc < 0)
			return rc;
		if (rc > 0 && it.size >= 8)
			memcpy(st, it.data, 8);
		st[8] = rc > 0;
		if (rc > 0)
			bi_lr_item_free(&it);
	}
	if (alloc && !st[8])	/* btrfs_alloc_logged_file_extent */
		st[8] = 1;
	uint64_t refs = bi_le64(st);
	if (!st[8] || (delta < 0 && refs == 0))
		return bi_lr_fail(cx, -EUCLEAN,
				  "data extent %" PRIu64 "+%" PRIu64
				  ": no reference to drop (extent tree)",
				  fe->disk_bytenr, fe->disk_num_bytes);
	bi_put_le64(st, refs + (uint64_t)(int64_t)delta);
	return bi_view_put(cx, &cx->ext, &k, st, sizeof(st));
}

int bi_lr_free_extents(struct lr_ctx *cx, struct lr_node *n)
{
	if (!n)
		return 0;
	int rc = bi_lr_free_extents(cx, n->l);
	if (rc == 0 && !n->del && n->size == 9 && n->data[8] && bi_le64(n->data) == 0) {
		uint64_t end;
		if (!bi_add_ok(n->key.objectid, n->key.offset, &end))
			return bi_lr_fail(cx, -EUCLEAN, "data extent end overflows");
		rc = csum_delete(cx, n->key.objectid, end);
	}
	return rc ? rc : bi_lr_free_extents(cx, n->r);
}

/* A copy of a regular extent item moved to file offset @to (its data
 * offset follows) and ending at @end. */
static int put_extent(struct lr_ctx *cx, const struct lr_item *it, uint64_t to, uint64_t end)
{
	bi_key k = { it->key.objectid, KT_EXTENT_DATA, to };
	uint8_t d[FE_SIZE];
	memcpy(d, it->data, FE_SIZE);
	bi_put_le64(d + FE_OFFSET, bi_le64(d + FE_OFFSET) + (to - it->key.offset));
	bi_put_le64(d + FE_NUM_BYTES, end - to);
	if (to != it->key.offset) {
		struct lr_item x;
		int rc = bi_view_get(cx, cx->fs, &k, &x);
		if (rc > 0) {
			bi_lr_item_free(&x);
			return bi_lr_corrupt_item(cx, &k, "overlapping file extent items");
		}
		if (rc < 0)
			return rc;
	}
	return bi_view_put(cx, cx->fs, &k, d, FE_SIZE);
}

/* One item of btrfs_drop_extents(start, end). *stop ends the walk. */
static int drop_one(struct lr_ctx *cx, const struct lr_item *it, const struct lr_fe *fe,
		    uint64_t start, uint64_t end, uint64_t *from, uint64_t *found, bool *stop)
{
	uint64_t off = it->key.offset, xend = fe->end;
	bool inl = fe->type == FE_TYPE_INLINE, counted = !inl && fe->disk_bytenr;
	int rc = 0;
	if (xend == off && xend >= *from)	/* a zero-length item: deleted */
		goto del;
	if (xend <= *from)
		return 0;
	*from = off > start ? off : start;
	if (inl && (start > off || end < xend))
		return bi_lr_corrupt_item(cx, &it->key, "replay would split an inline extent");
	if (start > off && end < xend) {	/* split: front stays, tail moves to end */
		rc = put_extent(cx, it, off, start);
		*found += counted ? end - start : 0;
		*stop = true;
		if (rc == 0)
			rc = ext_ref(cx, fe, 1, false);
		return rc ? rc : put_extent(cx, it, end, xend);
	}
	if (start <= off && end < xend) {	/* head dropped: the rest moves to end */
		*found += counted ? end - off : 0;
		*stop = true;
		rc = put_extent(cx, it, end, xend);
		return rc ? rc : bi_view_del(cx, cx->fs, &it->key);
	}
	*from = xend;
	if (start > off) {			/* tail dropped */
		*found += counted ? xend - start : 0;
		*stop = end == xend;
		return put_extent(cx, it, off, start);
	}
del:
	if (inl) {
		*found += xend - off;
		xend = (xend + cx->p->sectorsize - 1) & ~(uint64_t)(cx->p->sectorsize - 1);
	} else if (counted) {
		*found += xend - off;
		rc = ext_ref(cx, fe, -1, false);
	}
	*stop = end == xend;
	return rc ? rc : bi_view_del(cx, cx->fs, &it->key);
}

/* btrfs_drop_extents: *found gets the allocated bytes dropped. */
int bi_lr_drop_extents(struct lr_ctx *cx, uint64_t ino, uint64_t start, uint64_t end,
		       uint64_t *found)
{
	bi_key lo = { ino, KT_EXTENT_DATA, 0 }, hi = { ino, KT_EXTENT_DATA, UINT64_MAX };
	bi_key sk = { ino, KT_EXTENT_DATA, start }, pk;
	struct lr_item it;
	/* the kernel's search lands on the item at start, else the one before */
	int rc = bi_view_get(cx, cx->fs, &sk, &it);
	if (rc == 0 && bi_lr_key_prev(&sk, &pk))
		rc = bi_view_last(cx, cx->fs, &lo, &pk, &it);
	if (rc == 0)
		rc = bi_view_first(cx, cx->fs, &sk, &hi, &it);
	uint64_t from = start;
	*found = 0;
	while (rc > 0) {
		struct lr_fe fe;
		bool stop = it.key.offset >= end, more = false;
		if (!stop)
			rc = bi_lr_fe_parse(cx, &it.key, it.data, it.size, &fe);
		if (!stop && rc == 0)
			rc = drop_one(cx, &it, &fe, start, end, &from, found, &stop);
		if (rc == 0 && !stop)
			more = bi_lr_key_next(&it.key, &lo);
		bi_lr_item_free(&it);
		if (rc || !more)
			break;
		rc = bi_view_first(cx, cx->fs, &lo, &hi, &it);
	}
	return rc < 0 ? rc : 0;
}

/* The log's checksums for [cs, ce) replace the csum tree's. */
static int replay_csums(struct lr_ctx *cx, const struct lr_fe *fe)
{
	uint64_t cs, ce, ss = cx->p->sectorsize, span = csum_span(cx);
	bool ok = fe->compression
			  ? bi_add_ok(cs = fe->disk_bytenr, fe->disk_num_bytes, &ce)
			  : bi_add_ok(fe->disk_bytenr, fe->offset, &cs) && bi_add_ok(cs, fe->num_bytes, &ce);
	if (!ok || cs % ss || ce % ss)
		return bi_lr_fail(cx, -EUCLEAN,
				  "file extent's checksum range is not sector aligned");
	bi_key lo = { OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, cs > span ? cs - span : 0 };
	const struct bi_lr_log *l = cx->log;
	for (size_t i = bi_lr_log_lower(l, &lo); i < l->n && cs < ce; i++) {
		const struct bi_lr_item *li = &l->items[i];
		uint64_t e;
		if (li->key.objectid != OBJ_EXTENT_CSUM || li->key.type != KT_EXTENT_CSUM ||
		    li->key.offset >= ce)
			break;
		int rc = bi_lr_csum_range(cx, &li->key, li->size, &e);
		if (rc)
			return rc;
		if (e <= cs)
			continue;
		uint64_t a = li->key.offset > cs ? li->key.offset : cs, b = e < ce ? e : ce;
		rc = csum_delete(cx, a, b);
		if (rc == 0)
			rc = csum_put(cx, &li->key, li->data, a, b);
		if (rc)
			return rc;
	}
	return 0;
}

/* replay_one_extent: drop what the logged extent covers, insert it. */
int bi_lr_replay_extent(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	struct lr_fe fe;
	int rc = bi_lr_fe_parse(cx, &li->key, li->data, li->size, &fe);
	if (rc)
		return rc;
	bool inl = fe.type == FE_TYPE_INLINE;
	uint64_t start = li->key.offset, ss = cx->p->sectorsize, found = 0, end = fe.end;
	uint64_t nbytes = inl ? fe.ram_bytes : fe.disk_bytenr ? fe.num_bytes : 0;
	if (inl && !bi_add_ok(fe.end, ss - 1, &end))
		return bi_lr_corrupt_item(cx, &li->key, "inline extent end overflows");
	if (inl)
		end &= ~(ss - 1);
	struct lr_inode *in;
	if ((rc = bi_lr_iget_must(cx, li->key.objectid, &in)))
		return rc;
	struct lr_item ex;
	rc = inl ? 0 : bi_view_get(cx, cx->fs, &li->key, &ex);
	if (rc > 0) {	/* the very same extent is there already */
		bool same = ex.size >= FE_SIZE && !memcmp(ex.data, li->data, FE_SIZE);
		bi_lr_item_free(&ex);
		rc = 0;
		if (same)
			goto out;
	}
	rc = bi_lr_drop_extents(cx, in->ino, start, end, &found);
	if (rc == 0 && inl) {
		rc = bi_lr_overwrite(cx, li);
	} else if (rc == 0 && (fe.disk_bytenr || !cx->p->no_holes)) {
		rc = bi_view_get(cx, cx->fs, &li->key, &ex);
		if (rc > 0) {
			bi_lr_item_free(&ex);
			rc = bi_lr_corrupt_item(cx, &li->key, "an extent item is in the way");
		}
		if (rc == 0)
			rc = bi_view_put(cx, cx->fs, &li->key, li->data, FE_SIZE);
		if (rc == 0)
			rc = ext_ref(cx, &fe, 1, true);
		if (rc == 0 && fe.disk_bytenr)
			rc = replay_csums(cx, &fe);
	}
	if (rc == 0) {
		in->nbytes = in->nbytes - found + nbytes;
		rc = bi_lr_iupdate(cx, in);
	}
out:
	bi_lr_iput(cx, in);
	return rc;
}

/* ------------------------------------------------- link count fixup */

static int count_names(struct lr_ctx *cx, uint64_t ino, uint32_t *n)
{
	*n = 0;
	for (int ext = 0; ext < 2; ext++) {
		uint8_t t = ext ? KT_INODE_EXTREF : KT_INODE_REF;
		bi_key lo = { ino, t, 0 }, hi = { ino, t, UINT64_MAX };
		for (;;) {
			struct lr_item it;
			struct lr_ref r;
			int rc = bi_view_first(cx, cx->fs, &lo, &hi, &it);
			if (rc <= 0) {
				if (rc < 0)
					return rc;
				break;
			}
			rc = 0;
			for (uint32_t pos = 0; pos < it.size && rc == 0; pos += r.len, (*n)++)
				if (bi_lr_ref_at(ext, it.key.offset, it.data, it.size, pos, &r) < 0)
					rc = bi_lr_corrupt_item(cx, &it.key, "bad inode ref");
			bool more = bi_lr_key_next(&it.key, &lo);
			bi_lr_item_free(&it);
			if (rc)
				return rc;
			if (!more)
				break;
		}
	}
	return 0;
}

/* fixup_inode_link_count */
static int fixup_one(struct lr_ctx *cx, uint64_t ino)
{
	struct lr_inode *in;
	uint32_t n;
	int rc = bi_lr_iget_must(cx, ino, &in);
	if (rc)
		return rc;
	rc = count_names(cx, ino, &n);
	if (rc == 0 && n != in->nlink) {
		in->nlink = n;
		rc = bi_lr_iupdate(cx, in);
	}
	if (rc == 0 && in->nlink == 0) {
		/* the orphan is removed at mount (orphan_cleanup) */
		bi_key ok = { OBJ_ORPHAN, KT_ORPHAN_ITEM, ino };
		struct lr_item it;
		if (bi_lr_is_dir(in->mode))
			rc = bi_lr_dir_deletes(cx, ino, true);
		if (rc == 0 && (rc = bi_view_get(cx, cx->fs, &ok, &it)) == 0)
			rc = bi_view_put(cx, cx->fs, &ok, "", 0);
		else if (rc > 0)
			rc = 0, bi_lr_item_free(&it);
	}
	bi_lr_iput(cx, in);
	return rc;
}

/* fixup_inode_link_counts: highest inode first; a directory's fixup can
 * add more inodes, so always restart from the top. */
int bi_lr_fixups(struct lr_ctx *cx)
{
	bi_key lo = { OBJ_TREE_LOG_FIXUP, KT_ORPHAN_ITEM, 0 };
	bi_key hi = { OBJ_TREE_LOG_FIXUP, KT_ORPHAN_ITEM, UINT64_MAX };
	for (;;) {
		struct lr_item it;
		int rc = bi_view_last(cx, cx->fs, &lo, &hi, &it);
		if (rc <= 0)
			return rc;
		uint64_t ino = it.key.offset;
		rc = bi_view_del(cx, cx->fs, &it.key);
		bi_lr_item_free(&it);
		if (rc == 0)
			rc = fixup_one(cx, ino);
		if (rc)
			return rc;
	}
}

/* What mount's orphan cleanup does to the inodes replay orphaned: an inode
 * without links loses every item; the orphan item goes either way. */
int bi_lr_orphan_cleanup(struct lr_ctx *cx)
{
	bi_key k = { OBJ_ORPHAN, KT_ORPHAN_ITEM, 0 };
	for (;;) {
		struct lr_node *n = bi_lr_map_bound(cx->fs->map, &k, true);
		if (!n || n->key.objectid != OBJ_ORPHAN || n->key.type != KT_ORPHAN_ITEM)
			return 0;
		bi_key ok = n->key;
		bool ours = !n->del;	/* replay only puts new orphan items */
		uint64_t ino = ok.offset;
		struct lr_inode *in = NULL;
		int rc = ours ? bi_lr_iget(cx, ino, &in) : 0;
		if (rc == -ENOENT)
			rc = 0;
		if (rc == 0 && in && in->nlink == 0) {
			bi_key lo = { ino, 0, 0 }, hi = { ino, UINT8_MAX, UINT64_MAX };
			struct lr_item it;
			while (rc == 0 && (rc = bi_view_first(cx, cx->fs, &lo, &hi, &it)) > 0) {
				struct lr_fe fe;
				rc = 0;
				if (it.key.type == KT_EXTENT_DATA &&
				    (rc = bi_lr_fe_parse(cx, &it.key, it.data, it.size, &fe)) == 0 &&
				    fe.type != FE_TYPE_INLINE)
					rc = ext_ref(cx, &fe, -1, false);
				if (rc == 0)
					rc = bi_view_del(cx, cx->fs, &it.key);
				bi_lr_item_free(&it);
			}
		}
		bi_lr_iput(cx, in);
		if (rc == 0 && ours)
			rc = bi_view_del(cx, cx->fs, &ok);
		if (rc < 0 || !bi_lr_key_next(&ok, &k))
			return rc < 0 ? rc : 0;
	}
}
