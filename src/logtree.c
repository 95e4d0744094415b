/* SPDX-License-Identifier: MIT */
/*
 * Log tree replay, in memory.
 *
 * After an fsync the kernel writes the fsynced inodes' items into one log
 * tree per subvolume (found through the log root tree, superblock
 * log_root) instead of committing. A crash leaves log_root != 0, and the
 * next mount replays the log into the fs trees before anything is shown.
 * This file computes what that replay produces, as overlays (tree.c) over
 * the fs trees and the csum tree; the image is never written.
 *
 * The replay follows the kernel's (fs/btrfs/tree-log.c) step by step,
 * because its result is defined by that procedure rather than by a simpler
 * rule: three walks over every log tree (subvolumes in descending id
 * order), then a link count fixup per subvolume:
 *
 *   1 INODES     for each INODE_ITEM: drop xattrs not in the log, for a
 *                directory unlink the entries of the logged index ranges
 *                (DIR_LOG_INDEX items) that are not in the log, copy the
 *                inode item, truncate a regular file's extents past i_size,
 *                and remember the inode for the fixup
 *   2 DIR_INDEX  for each DIR_INDEX: add the name unless its inode ref is
 *                logged (added in walk 3) or its inode does not exist
 *   3 ALL        xattrs are copied; inode refs add their names (first
 *                unlinking conflicting ones) and replace the ref items;
 *                file extents drop the range they cover and are inserted,
 *                with their checksums
 *   fixup        nlink := the number of names (refs + extrefs); an inode
 *                left with none becomes an orphan, which mount removes
 *
 * State: a view per tree = the tree's own items plus an ordered map (AVL)
 * of replaced items and tombstones. An in-memory inode lives while it is
 * referenced, as the kernel's do during replay (nothing is cached: the
 * superblock is not active yet, so the last iput evicts).
 *
 * Approximations, each for a reason:
 *  - when replay itself unlinks a name, the kernel sets the inode's ctime
 *    and the directory's mtime and ctime to the current time (the mount
 *    time, which no image records); they keep their previous values here.
 *    It shows only where the inode's or directory's own item was replayed
 *    before the unlink (testdata/logtree/links.volatile);
 *  - the csum tree's item boundaries differ from the kernel's (which
 *    extends neighbouring items); every sector's checksum is the same;
 *  - orphans replay creates are removed as a read-write mount's orphan
 *    cleanup removes them (a read-only mount leaves them, unreachable);
 *    orphans already in the committed state are left alone;
 *  - a name linking a subvolume's root directory, which the kernel never
 *    logs (it commits instead), is refused rather than emulated.
 * Log items must pass the kernel's tree-checker rules (inode.c, dir.c,
 * extent.c), as the kernel checks every log leaf it reads.
 *
 * Bounds: every item is parsed "header fits, then whole entry fits"; the
 * map's memory is limited (max_bytes) and so is the work (max_steps), so a
 * hostile log fails with a message instead of exhausting memory or time.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define M_FMT 0170000u
#define M_DIR 0040000u
#define M_REG 0100000u
#define M_CHR 0020000u
#define M_BLK 0060000u
#define OBJ_TREE_LOG_FIXUP ((uint64_t)-7)
#define DIR_LOG_SIZE 8		/* btrfs_dir_log_item: u64 end */
#define DEFAULT_MAX_BYTES (256ull << 20)
#define DEFAULT_MAX_STEPS (1ull << 27)

enum { ST_INODES = 1, ST_DIR_INDEX = 2, ST_ALL = 3 };

/* ------------------------------------------------------------ the map */

struct lr_node {
	bi_key key;
	uint8_t *data;
	uint32_t size;
	bool del;		/* tombstone: hides the tree's item */
	int8_t in_base;		/* the tree has this key: 1, 0, -1 unknown */
	int8_t h;
	struct lr_node *l, *r;
};

static int nh(const struct lr_node *n)
{
	return n ? n->h : 0;
}

static void nfix(struct lr_node *n)
{
	int a = nh(n->l), b = nh(n->r);
	n->h = (int8_t)((a > b ? a : b) + 1);
}

static struct lr_node *rot_r(struct lr_node *n)
{
	struct lr_node *l = n->l;
	n->l = l->r;
	l->r = n;
	nfix(n);
	nfix(l);
	return l;
}

static struct lr_node *rot_l(struct lr_node *n)
{
	struct lr_node *r = n->r;
	n->r = r->l;
	r->l = n;
	nfix(n);
	nfix(r);
	return r;
}

static struct lr_node *avl_insert(struct lr_node *t, struct lr_node *nn)
{
	if (!t)
		return nn;
	if (bi_key_cmp(&nn->key, &t->key) < 0)
		t->l = avl_insert(t->l, nn);
	else
		t->r = avl_insert(t->r, nn);
	nfix(t);
	int b = nh(t->l) - nh(t->r);
	if (b > 1) {
		if (nh(t->l->l) < nh(t->l->r))
			t->l = rot_l(t->l);
		return rot_r(t);
	}
	if (b < -1) {
		if (nh(t->r->r) < nh(t->r->l))
			t->r = rot_r(t->r);
		return rot_l(t);
	}
	return t;
}

static struct lr_node *avl_find(struct lr_node *t, const bi_key *k)
{
	while (t) {
		int c = bi_key_cmp(k, &t->key);
		if (c == 0)
			return t;
		t = c < 0 ? t->l : t->r;
	}
	return NULL;
}

/* First node >= k (ceil) or last node <= k (floor). */
static struct lr_node *avl_bound(struct lr_node *t, const bi_key *k, bool ceil)
{
	struct lr_node *best = NULL;
	while (t) {
		int c = bi_key_cmp(&t->key, k);
		if (c == 0)
			return t;
		if ((c > 0) == ceil) {
			best = t;
			t = ceil ? t->l : t->r;
		} else {
			t = ceil ? t->r : t->l;
		}
	}
	return best;
}

static void avl_free(struct lr_node *t)
{
	if (!t)
		return;
	avl_free(t->l);
	avl_free(t->r);
	free(t->data);
	free(t);
}

static bool key_next(const bi_key *k, bi_key *out)
{
	*out = *k;
	if (++out->offset)
		return true;
	if (++out->type)
		return true;
	return ++out->objectid != 0;
}

static bool key_prev(const bi_key *k, bi_key *out)
{
	*out = *k;
	if (out->offset--)
		return true;
	if (out->type--)
		return true;
	return out->objectid-- != 0;
}

/* ------------------------------------------------------ context, errors */

struct lr_item {
	bi_key key;
	uint8_t *data;
	uint32_t size;
};

struct lr_view {
	uint64_t id;
	struct bi_lr_src base;
	struct lr_node *map;
};

struct lr_inode {
	uint64_t ino;
	int refs;
	uint8_t item[INODE_ITEM_SIZE];	/* as read; fields below are the live ones */
	uint32_t nlink, mode;
	uint64_t size, nbytes, seq;
	struct lr_inode *next;
};

struct lr_ctx {
	const struct bi_lr_params *p;
	struct lr_view *fs;
	struct lr_view csum;
	struct lr_view ext;	/* reference counts of data extents (not emitted) */
	const struct bi_lr_log *log;
	struct lr_inode *held;
	uint64_t bytes, max_bytes, steps, max_steps;
	int stage;
	bool ignore;		/* the kernel's wc->ignore_cur_inode */
	bi_key cur;		/* log item being replayed */
	char *why;
	size_t whylen;
};

static void it_free(struct lr_item *it)
{
	free(it->data);
	it->data = NULL;
}

/* Record the first failure, with where it happened; returns @rc. */
BI_PRINTF(3, 4) static int fail(struct lr_ctx *cx, int rc, const char *fmt, ...)
{
	if (cx->why[0])
		return rc;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(cx->why, cx->whylen, "root=%llu stage=%d log item (%llu %u %llu): %s",
		 (unsigned long long)(cx->fs ? cx->fs->id : 0), cx->stage,
		 (unsigned long long)cx->cur.objectid, cx->cur.type,
		 (unsigned long long)cx->cur.offset, msg);
	return rc;
}

#define CORRUPT(cx, ...) fail((cx), -EUCLEAN, __VA_ARGS__)

static int step(struct lr_ctx *cx)
{
	if (++cx->steps <= cx->max_steps)
		return 0;
	return fail(cx, -E2BIG, "more than %llu item operations, limit reached",
		    (unsigned long long)cx->max_steps);
}

static int charge(struct lr_ctx *cx, uint64_t n)
{
	cx->bytes += n;
	if (cx->bytes <= cx->max_bytes)
		return 0;
	return fail(cx, -ENOMEM, "replayed items need more than %llu bytes, limit reached",
		    (unsigned long long)cx->max_bytes);
}

/* ------------------------------------------------------------- the view */

static int src_get(struct lr_ctx *cx, struct lr_view *v, bool last, const bi_key *min,
		   const bi_key *max, struct lr_item *out)
{
	out->data = NULL;
	int rc = (last ? v->base.last : v->base.first)(v->base.ctx, min, max, &out->key,
							&out->data, &out->size);
	if (rc < 0)
		return fail(cx, rc, "reading tree %llu failed (error %d)",
			    (unsigned long long)v->id, rc);
	return rc;
}

static int node_copy(const struct lr_node *n, struct lr_item *out)
{
	out->key = n->key;
	out->size = n->size;
	out->data = malloc(n->size ? n->size : 1);
	if (!out->data)
		return -ENOMEM;
	if (n->size)
		memcpy(out->data, n->data, n->size);
	return 1;
}

/* The map's first (last) live node in [min, max]. */
static struct lr_node *map_edge(struct lr_view *v, const bi_key *min, const bi_key *max,
				bool last)
{
	struct lr_node *n = avl_bound(v->map, last ? max : min, !last);
	while (n && n->del) {
		bi_key k;
		if (!(last ? key_prev(&n->key, &k) : key_next(&n->key, &k)))
			return NULL;
		n = avl_bound(v->map, &k, !last);
	}
	if (n && (bi_key_cmp(&n->key, min) < 0 || bi_key_cmp(&n->key, max) > 0))
		return NULL;
	return n;
}

/* First (last) item of the merged view with min <= key <= max. */
static int vw_edge(struct lr_ctx *cx, struct lr_view *v, const bi_key *min, const bi_key *max,
		   bool last, struct lr_item *out)
{
	int rc = step(cx);
	if (rc || bi_key_cmp(min, max) > 0)
		return rc;
	struct lr_node *n = map_edge(v, min, max, last);
	bi_key lo = last && n ? n->key : *min, hi = !last && n ? n->key : *max;
	struct lr_item b = { 0 };
	bool have = false;
	for (;;) {
		rc = src_get(cx, v, last, &lo, &hi, &b);
		if (rc <= 0)
			break;
		if (!avl_find(v->map, &b.key)) {
			have = true;
			break;
		}
		bool more = last ? key_prev(&b.key, &hi) : key_next(&b.key, &lo);
		it_free(&b);
		if (!more || (rc = step(cx)))
			break;
	}
	if (rc < 0)
		return rc;
	if (have && (!n || (bi_key_cmp(&b.key, &n->key) < 0) != last)) {
		*out = b;
		return 1;
	}
	it_free(&b);
	return n ? node_copy(n, out) : 0;
}

static int vw_first(struct lr_ctx *cx, struct lr_view *v, const bi_key *min, const bi_key *max,
		    struct lr_item *out)
{
	return vw_edge(cx, v, min, max, false, out);
}

static int vw_last(struct lr_ctx *cx, struct lr_view *v, const bi_key *min, const bi_key *max,
		   struct lr_item *out)
{
	return vw_edge(cx, v, min, max, true, out);
}

static int vw_get(struct lr_ctx *cx, struct lr_view *v, const bi_key *k, struct lr_item *out)
{
	return vw_edge(cx, v, k, k, false, out);
}

static struct lr_node *node_get(struct lr_ctx *cx, struct lr_view *v, const bi_key *k)
{
	struct lr_node *n = avl_find(v->map, k);
	if (n || charge(cx, sizeof(*n)))
		return n;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->key = *k;
	n->in_base = -1;
	n->del = true;
	v->map = avl_insert(v->map, n);
	return n;
}

static int vw_put(struct lr_ctx *cx, struct lr_view *v, const bi_key *k, const void *data,
		  uint32_t size)
{
	int rc = step(cx);
	if (rc)
		return rc;
	struct lr_node *n = node_get(cx, v, k);
	if (!n)
		return cx->why[0] ? -ENOMEM : fail(cx, -ENOMEM, "out of memory");
	uint8_t *d = malloc(size ? size : 1);
	if (!d || charge(cx, size)) {
		free(d);
		return cx->why[0] ? -ENOMEM : fail(cx, -ENOMEM, "out of memory");
	}
	if (size)
		memcpy(d, data, size);
	cx->bytes -= n->del ? 0 : n->size;
	free(n->data);
	n->data = d;
	n->size = size;
	n->del = false;
	return 0;
}

static int vw_del(struct lr_ctx *cx, struct lr_view *v, const bi_key *k)
{
	int rc = step(cx);
	if (rc)
		return rc;
	struct lr_node *n = node_get(cx, v, k);
	if (!n)
		return cx->why[0] ? -ENOMEM : fail(cx, -ENOMEM, "out of memory");
	if (!n->del)
		cx->bytes -= n->size;
	free(n->data);
	n->data = NULL;
	n->size = 0;
	n->del = true;
	return 0;
}

/* Replace @it by itself without bytes [off, off + len); nothing left:
 * delete it (btrfs_truncate_item / btrfs_del_item). */
static int vw_cut(struct lr_ctx *cx, struct lr_view *v, const struct lr_item *it, uint32_t off,
		  uint32_t len)
{
	if (len >= it->size)
		return vw_del(cx, v, &it->key);
	uint8_t *d = malloc(it->size - len);
	if (!d)
		return fail(cx, -ENOMEM, "out of memory");
	memcpy(d, it->data, off);
	memcpy(d + off, it->data + off + len, it->size - off - len);
	int rc = vw_put(cx, v, &it->key, d, it->size - len);
	free(d);
	return rc;
}

/* @it (may be absent: size 0, data NULL) with @add appended. */
static int vw_append(struct lr_ctx *cx, struct lr_view *v, const bi_key *k,
		     const struct lr_item *it, const uint8_t *add, uint32_t n)
{
	uint32_t old = it ? it->size : 0;
	uint8_t *d = malloc((size_t)old + n + 1);
	if (!d)
		return fail(cx, -ENOMEM, "out of memory");
	if (old)
		memcpy(d, it->data, old);
	memcpy(d + old, add, n);
	int rc = vw_put(cx, v, k, d, old + n);
	free(d);
	return rc;
}

/* ---------------------------------------------------------- the log */

static size_t log_lower(const struct bi_lr_log *l, const bi_key *k)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bi_key_cmp(&l->items[mid].key, k) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const struct bi_lr_item *log_get(const struct bi_lr_log *l, const bi_key *k)
{
	size_t i = log_lower(l, k);
	return i < l->n && bi_key_cmp(&l->items[i].key, k) == 0 ? &l->items[i] : NULL;
}

/* ------------------------------------------------------------ parsers */

/* One entry of a DIR_ITEM / DIR_INDEX / XATTR_ITEM item. */
struct lr_dent {
	bi_key loc;
	uint8_t type;
	uint16_t name_len;
	const uint8_t *name;
	uint32_t off, len;
};

static int dent_at(const uint8_t *d, uint32_t size, uint32_t pos, struct lr_dent *e)
{
	if (!bi_fits(size, pos, DI_SIZE))
		return -EUCLEAN;
	const uint8_t *p = d + pos;
	bi_key_read(p + DI_LOCATION, &e->loc);
	e->name_len = bi_le16(p + DI_NAME_LEN);
	e->type = p[DI_TYPE];
	uint32_t len = DI_SIZE + (uint32_t)e->name_len + bi_le16(p + DI_DATA_LEN);
	if (!bi_fits(size, pos, len))
		return -EUCLEAN;
	e->name = p + DI_SIZE;
	e->off = pos;
	e->len = len;
	return 0;
}

/* btrfs_match_dir_item_name: 1 and *e when found, 0 if not, -EUCLEAN. */
static int dent_find(const uint8_t *d, uint32_t size, const uint8_t *name, uint16_t len,
		     struct lr_dent *e)
{
	for (uint32_t pos = 0; pos < size; pos += e->len) {
		if (dent_at(d, size, pos, e) < 0)
			return -EUCLEAN;
		if (e->name_len == len && memcmp(e->name, name, len) == 0)
			return 1;
	}
	return 0;
}

/* One name of an INODE_REF (parent = key offset) or INODE_EXTREF item. */
struct lr_ref {
	uint64_t parent, index;
	uint16_t name_len;
	const uint8_t *name;
	uint32_t off, len;
};

static int ref_at(bool ext, uint64_t key_off, const uint8_t *d, uint32_t size, uint32_t pos,
		  struct lr_ref *r)
{
	uint32_t hdr = ext ? EXTREF_SIZE : IREF_SIZE;
	if (!bi_fits(size, pos, hdr))
		return -EUCLEAN;
	const uint8_t *p = d + pos;
	r->parent = ext ? bi_le64(p + EXTREF_PARENT) : key_off;
	r->index = bi_le64(p + (ext ? EXTREF_INDEX : IREF_INDEX));
	r->name_len = bi_le16(p + (ext ? EXTREF_NAME_LEN : IREF_NAME_LEN));
	if (!bi_fits(size, (size_t)pos + hdr, r->name_len))
		return -EUCLEAN;
	r->name = p + hdr;
	r->off = pos;
	r->len = hdr + r->name_len;
	return 0;
}

/* btrfs_find_name_in_backref / _ext_backref (@parent checked for extrefs). */
static int ref_find(bool ext, uint64_t key_off, const uint8_t *d, uint32_t size,
		    uint64_t parent, const uint8_t *name, uint16_t len, struct lr_ref *r)
{
	for (uint32_t pos = 0; pos < size; pos += r->len) {
		if (ref_at(ext, key_off, d, size, pos, r) < 0)
			return -EUCLEAN;
		if ((!ext || r->parent == parent) && r->name_len == len &&
		    memcmp(r->name, name, len) == 0)
			return 1;
	}
	return 0;
}

static int corrupt_item(struct lr_ctx *cx, const bi_key *k, const char *what)
{
	return CORRUPT(cx, "corrupt item (%llu %u %llu) in tree %llu: %s",
		       (unsigned long long)k->objectid, k->type, (unsigned long long)k->offset,
		       (unsigned long long)cx->fs->id, what);
}

/* Does the log hold the name (with @parent for extrefs) under key @k? */
static int log_has_ref(struct lr_ctx *cx, const bi_key *k, uint64_t parent,
		       const uint8_t *name, uint16_t len)
{
	const struct bi_lr_item *li = log_get(cx->log, k);
	if (!li)
		return 0;
	struct lr_ref r;
	int rc = ref_find(k->type == KT_INODE_EXTREF, k->offset, li->data, li->size, parent,
			  name, len, &r);
	return rc < 0 ? corrupt_item(cx, k, "bad inode ref in the log") : rc;
}

static int log_has_dent(struct lr_ctx *cx, const bi_key *k, const uint8_t *name, uint16_t len)
{
	const struct bi_lr_item *li = log_get(cx->log, k);
	if (!li)
		return 0;
	struct lr_dent e;
	int rc = dent_find(li->data, li->size, name, len, &e);
	return rc < 0 ? corrupt_item(cx, k, "bad dir entry in the log") : rc;
}

/* ------------------------------------------------------------ inodes */

static bool is_dir(uint32_t mode)
{
	return (mode & M_FMT) == M_DIR;
}

static bool is_reg(uint32_t mode)
{
	return (mode & M_FMT) == M_REG;
}

static uint8_t mode_ftype(uint32_t mode)
{
	static const uint8_t ft[16] = { [1] = FT_FIFO, [2] = FT_CHRDEV, [4] = FT_DIR,
					[6] = FT_BLKDEV, [8] = FT_REG_FILE, [10] = FT_SYMLINK,
					[12] = FT_SOCK };
	return ft[(mode & M_FMT) >> 12];
}

/* btrfs_iget: the held inode, or a fresh one read from the view.
 * -ENOENT (no message) if the inode item does not exist. */
static int iget(struct lr_ctx *cx, uint64_t ino, struct lr_inode **out)
{
	for (struct lr_inode *h = cx->held; h; h = h->next)
		if (h->ino == ino) {
			h->refs++;
			*out = h;
			return 0;
		}
	bi_key k = { ino, KT_INODE_ITEM, 0 };
	struct lr_item it;
	int rc = vw_get(cx, cx->fs, &k, &it);
	if (rc <= 0)
		return rc ? rc : -ENOENT;
	struct lr_inode *in = calloc(1, sizeof(*in));
	if (it.size != INODE_ITEM_SIZE || !in) {
		it_free(&it);
		free(in);
		return in ? corrupt_item(cx, &k, "inode item size is not 160")
			  : fail(cx, -ENOMEM, "out of memory");
	}
	memcpy(in->item, it.data, INODE_ITEM_SIZE);
	it_free(&it);
	in->ino = ino;
	in->refs = 1;
	in->nlink = bi_le32(in->item + INODE_NLINK);
	in->mode = bi_le32(in->item + INODE_MODE) & 0xffff;	/* umode_t */
	in->size = bi_le64(in->item + INODE_SIZE_OFF);
	in->nbytes = bi_le64(in->item + INODE_NBYTES);
	/* i_version keeps one bit for "queried" */
	in->seq = bi_le64(in->item + INODE_SEQUENCE) & (UINT64_MAX >> 1);
	in->next = cx->held;
	cx->held = in;
	*out = in;
	return 0;
}

/* iget, where a missing inode is corrupt (the kernel aborts the replay). */
static int iget_must(struct lr_ctx *cx, uint64_t ino, struct lr_inode **out)
{
	int rc = iget(cx, ino, out);
	if (rc == -ENOENT)
		return CORRUPT(cx, "inode %llu does not exist", (unsigned long long)ino);
	return rc;
}

static void iput(struct lr_ctx *cx, struct lr_inode *in)
{
	if (!in || --in->refs > 0)
		return;
	struct lr_inode **pp = &cx->held;
	while (*pp != in)
		pp = &(*pp)->next;
	*pp = in->next;
	free(in);
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* btrfs_update_inode (direct, as during log recovery): fill_inode_item
 * writes every field of the in-memory inode into the current item, whose
 * reserved bytes stay; transid becomes the replay transaction's. */
static int iupdate(struct lr_ctx *cx, struct lr_inode *in)
{
	bi_key k = { in->ino, KT_INODE_ITEM, 0 };
	struct lr_item it;
	int rc = vw_get(cx, cx->fs, &k, &it);
	if (rc <= 0)
		return rc ? rc : CORRUPT(cx, "inode %llu vanished", (unsigned long long)in->ino);
	if (it.size != INODE_ITEM_SIZE) {
		it_free(&it);
		return corrupt_item(cx, &k, "inode item size is not 160");
	}
	uint8_t out[INODE_ITEM_SIZE];
	memcpy(out, it.data, sizeof(out));
	it_free(&it);
	const uint8_t *m = in->item;
	memcpy(out + INODE_UID, m + INODE_UID, 8);		/* uid, gid */
	memcpy(out + INODE_ATIME, m + INODE_ATIME, 4 * TIMESPEC_SIZE);
	memcpy(out + INODE_GENERATION, m + INODE_GENERATION, 8);
	memcpy(out + INODE_FLAGS, m + INODE_FLAGS, 8);
	put64(out + INODE_SIZE_OFF, in->size);
	put64(out + INODE_NBYTES, in->nbytes);
	put32(out + INODE_NLINK, in->nlink);
	put32(out + INODE_MODE, in->mode);
	put64(out + INODE_SEQUENCE, in->seq);
	put64(out + INODE_TRANSID, cx->p->transid);
	put64(out + INODE_BLOCK_GROUP, 0);
	/* i_rdev is a 32-bit dev_t, kept only for device nodes */
	uint32_t fmt = in->mode & M_FMT;
	put64(out + INODE_RDEV, fmt == M_CHR || fmt == M_BLK ? bi_le32(m + INODE_RDEV) : 0);
	return vw_put(cx, cx->fs, &k, out, sizeof(out));
}

/* link_to_fixup_dir: remember @ino for the link count fixup; the first
 * time, count one more link so the inode survives until then. */
static int fixup_add(struct lr_ctx *cx, uint64_t ino)
{
	struct lr_inode *in;
	int rc = iget_must(cx, ino, &in);
	if (rc)
		return rc;
	bi_key k = { OBJ_TREE_LOG_FIXUP, KT_ORPHAN_ITEM, ino };
	struct lr_item it;
	rc = vw_get(cx, cx->fs, &k, &it);
	if (rc == 0) {
		rc = vw_put(cx, cx->fs, &k, "", 0);
		in->nlink = in->nlink ? in->nlink + 1 : 1;
		if (rc == 0)
			rc = iupdate(cx, in);
	} else if (rc > 0) {
		it_free(&it);
		rc = 0;
	}
	iput(cx, in);
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
	int rc = vw_get(cx, cx->fs, k, it);
	if (rc <= 0)
		return rc;
	rc = dent_find(it->data, it->size, name, len, e);
	if (rc <= 0) {
		it_free(it);
		if (rc < 0)
			return corrupt_item(cx, k, "bad dir entry");
	}
	return rc;
}

static int find_dir_item(struct lr_ctx *cx, uint64_t dir, const uint8_t *name, uint16_t len,
			 struct lr_item *it, struct lr_dent *e)
{
	bi_key k = { dir, KT_DIR_ITEM, bi_name_hash(name, len) };
	return find_dent(cx, &k, name, len, it, e);
}

static int find_dir_index(struct lr_ctx *cx, uint64_t dir, uint64_t index,
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
		int rc = vw_get(cx, cx->fs, &k, &it);
		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		rc = ref_find(ext, k.offset, it.data, it.size, parent, name, len, &r);
		if (rc > 0) {
			*index = r.index;
			rc = vw_cut(cx, cx->fs, &it, r.off, r.len);
			it_free(&it);
			return rc;
		}
		it_free(&it);
		if (rc < 0)
			return corrupt_item(cx, &k, "bad inode ref");
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
		fail(cx, -ENOMEM, "out of memory");
		return NULL;
	}
	if (ext)
		put64(b + EXTREF_PARENT, parent);
	put64(b + (ext ? EXTREF_INDEX : IREF_INDEX), index);
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
		rc = buf ? vw_get(cx, cx->fs, &k, &it) : -ENOMEM;
		if (rc == 0) {
			rc = vw_put(cx, cx->fs, &k, buf, n);
		} else if (rc > 0) {
			rc = ref_find(ext, k.offset, it.data, it.size, parent, name, len, &r);
			if (rc < 0)
				rc = corrupt_item(cx, &k, "bad inode ref");
			else if (rc > 0)
				rc = -EEXIST;
			else if (can_extend(cx, it.size, n))
				rc = vw_append(cx, cx->fs, &k, &it, buf, n);
			else
				rc = ext ? -EOVERFLOW : -EMLINK;
			it_free(&it);
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
		return fail(cx, -ENOMEM, "out of memory");
	put64(buf + DI_LOCATION, loc->objectid);
	buf[DI_LOCATION + 8] = loc->type;
	put64(buf + DI_LOCATION + 9, loc->offset);
	put64(buf + DI_TRANSID, cx->p->transid);
	buf[DI_NAME_LEN] = (uint8_t)len;
	buf[DI_NAME_LEN + 1] = (uint8_t)(len >> 8);
	buf[DI_TYPE] = type;
	memcpy(buf + DI_SIZE, name, len);
	bi_key k = { dir, KT_DIR_ITEM, bi_name_hash(name, len) };
	struct lr_item it;
	struct lr_dent e;
	int ret = vw_get(cx, cx->fs, &k, &it);
	if (ret == 0) {
		ret = vw_put(cx, cx->fs, &k, buf, n);
	} else if (ret > 0) {
		if (!can_extend(cx, it.size, n))
			ret = -EOVERFLOW;
		else if ((ret = dent_find(it.data, it.size, name, len, &e)) > 0)
			ret = -EEXIST;
		else
			ret = ret < 0 ? corrupt_item(cx, &k, "bad dir entry")
				      : vw_append(cx, cx->fs, &k, &it, buf, n);
		it_free(&it);
	}
	bi_key ik = { dir, KT_DIR_INDEX, index };
	int rc = ret && ret != -EEXIST ? ret : vw_get(cx, cx->fs, &ik, &it);
	if (rc > 0) {
		it_free(&it);
		rc = CORRUPT(cx, "dir %llu already has index %llu", (unsigned long long)dir,
			     (unsigned long long)index);
	} else if (rc == 0) {
		rc = vw_put(cx, cx->fs, &ik, buf, n);
	}
	free(buf);
	return rc ? rc : ret;
}

/* btrfs_add_link during log recovery: times are left alone. */
static int add_link(struct lr_ctx *cx, struct lr_inode *dir, struct lr_inode *in,
		    const uint8_t *name, uint16_t len, bool backref, uint64_t index)
{
	if (in->ino == OBJ_FIRST_FREE)
		return CORRUPT(cx, "a name for a subvolume root directory (not replayed)");
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
	return iupdate(cx, dir);
}

/* btrfs_unlink_inode. The kernel also sets the ctimes (and the directory's
 * mtime) to the current time; that cannot be known offline. */
static int unlink_name(struct lr_ctx *cx, struct lr_inode *dir, struct lr_inode *in,
		       const uint8_t *name, uint16_t len)
{
	struct lr_item it;
	struct lr_dent e;
	int rc = find_dir_item(cx, dir->ino, name, len, &it, &e);
	if (rc <= 0)
		return rc ? rc : CORRUPT(cx, "unlink: dir %llu has no entry \"%.*s\"",
					 (unsigned long long)dir->ino, (int)len, name);
	rc = vw_cut(cx, cx->fs, &it, e.off, e.len);
	it_free(&it);
	uint64_t index = 0;
	if (rc == 0)
		rc = del_inode_ref(cx, in->ino, dir->ino, name, len, &index);
	if (rc == -ENOENT)
		return CORRUPT(cx, "unlink: inode %llu has no ref \"%.*s\" in dir %llu",
			       (unsigned long long)in->ino, (int)len, name,
			       (unsigned long long)dir->ino);
	bi_key ik = { dir->ino, KT_DIR_INDEX, index };
	if (rc == 0)
		rc = vw_del(cx, cx->fs, &ik);	/* absent: dropped silently */
	if (rc)
		return rc;
	dir->size -= 2ull * len;
	in->seq++;
	dir->seq++;
	rc = iupdate(cx, dir);
	in->nlink--;
	return rc ? rc : iupdate(cx, in);
}

static uint8_t *dup_name(struct lr_ctx *cx, const uint8_t *name, uint16_t len)
{
	uint8_t *n = malloc(len ? len : 1);
	if (!n)
		fail(cx, -ENOMEM, "out of memory");
	else
		memcpy(n, name, len);
	return n;
}

/* drop_one_dir_item: unlink the entry's inode, keeping it for the fixup. */
static int drop_entry(struct lr_ctx *cx, struct lr_inode *dir, const struct lr_dent *e,
		      bool extra_link)
{
	uint64_t ino = e->loc.objectid;
	uint16_t len = e->name_len;
	uint8_t *name = dup_name(cx, e->name, len);
	struct lr_inode *in = NULL;
	int rc = name ? iget_must(cx, ino, &in) : -ENOMEM;
	if (rc == 0)
		rc = fixup_add(cx, ino);
	if (rc == 0 && extra_link)
		in->nlink++;
	if (rc == 0)
		rc = unlink_name(cx, dir, in, name, len);
	iput(cx, in);
	free(name);
	return rc;
}

/* overwrite_item for every item but the inode item: the log's copy
 * replaces the tree's, unless they are identical. */
static int overwrite(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	struct lr_item dst;
	int rc = vw_get(cx, cx->fs, &li->key, &dst);
	if (rc < 0)
		return rc;
	if (rc > 0) {
		bool same = dst.size == li->size && (!li->size || !memcmp(dst.data, li->data, li->size));
		it_free(&dst);
		if (same)
			return 0;
	}
	return vw_put(cx, cx->fs, &li->key, li->data, li->size);
}

/* ------------------------------------------------- walk 1: inode items */

/* replay_xattr_deletes: drop the inode's xattrs the log does not hold. */
static int xattr_deletes(struct lr_ctx *cx, uint64_t ino)
{
	bi_key lo = { ino, KT_XATTR_ITEM, 0 }, hi = { ino, KT_XATTR_ITEM, UINT64_MAX };
	for (;;) {
		struct lr_item it;
		int rc = vw_first(cx, cx->fs, &lo, &hi, &it);
		if (rc <= 0)
			return rc;
		struct lr_dent e;
		bool cut = false;
		for (uint32_t pos = 0; pos < it.size && rc >= 0 && !cut; pos += e.len) {
			if (dent_at(it.data, it.size, pos, &e) < 0) {
				rc = corrupt_item(cx, &it.key, "bad xattr entry");
				break;
			}
			bi_key lk = { ino, KT_XATTR_ITEM, bi_name_hash(e.name, e.name_len) };
			rc = log_has_dent(cx, &lk, e.name, e.name_len);
			if (rc == 0) {
				rc = vw_cut(cx, cx->fs, &it, e.off, e.len);
				cut = true;	/* search again from this key */
			}
		}
		bool more = cut ? (lo = it.key, true) : key_next(&it.key, &lo);
		it_free(&it);
		if (rc < 0 || !more)
			return rc < 0 ? rc : 0;
	}
}

static int dirlog_end(struct lr_ctx *cx, const struct bi_lr_item *li, uint64_t *end)
{
	if (li->size != DIR_LOG_SIZE)
		return CORRUPT(cx, "dir log item (%llu 72 %llu) size %u expect 8",
			       (unsigned long long)li->key.objectid,
			       (unsigned long long)li->key.offset, li->size);
	*end = bi_le64(li->data);
	if (*end < li->key.offset)	/* the kernel would loop forever */
		return CORRUPT(cx, "dir log range [%llu, %llu] ends before it starts",
			       (unsigned long long)li->key.offset, (unsigned long long)*end);
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
	size_t i = log_lower(l, &k);
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
	if (dent_at(it->data, it->size, 0, &e) < 0)
		return corrupt_item(cx, &it->key, "bad dir index entry");
	if (!force) {
		int rc = log_has_dent(cx, &it->key, e.name, e.name_len);
		if (rc)
			return rc < 0 ? rc : 0;
	}
	return drop_entry(cx, dir, &e, true);
}

/* replay_dir_deletes */
static int dir_deletes(struct lr_ctx *cx, uint64_t dirid, bool del_all)
{
	struct lr_inode *dir;
	int rc = iget(cx, dirid, &dir);
	if (rc)
		return rc == -ENOENT ? 0 : rc;	/* not there yet: nothing to delete */
	uint64_t rs = 0, re = UINT64_MAX;
	for (;;) {
		if (!del_all && (rc = find_dir_range(cx, dirid, &rs, &re)) != 0)
			break;
		for (uint64_t off = rs;; off++) {
			struct lr_item it;
			bi_key lo = { dirid, KT_DIR_INDEX, off }, hi = { dirid, KT_DIR_INDEX, UINT64_MAX };
			rc = vw_first(cx, cx->fs, &lo, &hi, &it);
			if (rc <= 0)
				goto out;	/* no more entries */
			off = it.key.offset;
			rc = off > re ? 1 : check_in_log(cx, dir, &it, del_all);
			it_free(&it);
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
	iput(cx, dir);
	return rc < 0 ? rc : 0;
}

/* overwrite_item for an inode item: nbytes stays the tree's (the extents
 * replayed later adjust it), a directory keeps its size (names replayed
 * later adjust it), and generation 0 (logged only "to exist") changes
 * nothing but a regular file's size. */
static int overwrite_inode(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	uint8_t src[INODE_ITEM_SIZE];
	memcpy(src, li->data, sizeof(src));
	uint32_t mode = bi_le32(src + INODE_MODE);
	struct lr_item dst;
	int rc = vw_get(cx, cx->fs, &li->key, &dst);
	if (rc < 0)
		return rc;
	if (rc > 0 && dst.size != INODE_ITEM_SIZE) {
		it_free(&dst);
		return corrupt_item(cx, &li->key, "inode item size is not 160");
	}
	if (rc > 0 && memcmp(dst.data, src, sizeof(src)) == 0) {
		it_free(&dst);
		return 0;
	}
	put64(src + INODE_NBYTES, rc > 0 ? bi_le64(dst.data + INODE_NBYTES) : 0);
	if (is_dir(mode))
		put64(src + INODE_SIZE_OFF, 0);
	if (rc > 0) {
		uint32_t dmode = bi_le32(dst.data + INODE_MODE);
		if (bi_le64(src + INODE_GENERATION) == 0) {
			uint64_t size = bi_le64(src + INODE_SIZE_OFF);
			rc = 0;
			if (is_reg(mode) && is_reg(dmode) && size) {
				put64(dst.data + INODE_SIZE_OFF, size);
				rc = vw_put(cx, cx->fs, &li->key, dst.data, dst.size);
			}
			it_free(&dst);
			return rc;
		}
		if (is_dir(mode) && is_dir(dmode))
			memcpy(src + INODE_SIZE_OFF, dst.data + INODE_SIZE_OFF, 8);
		it_free(&dst);
	}
	if (bi_le64(src + INODE_GENERATION) == 0)
		put64(src + INODE_GENERATION, cx->p->transid);
	return vw_put(cx, cx->fs, &li->key, src, sizeof(src));
}

/* ------------------------------------------------------- file extents */

struct lr_fe {
	uint8_t type, compression;
	uint64_t ram_bytes, disk_bytenr, disk_num_bytes, offset, num_bytes;
	uint64_t end;		/* btrfs_drop_extents' extent_end */
};

static int fe_parse(struct lr_ctx *cx, const bi_key *k, const uint8_t *d, uint32_t size,
		    struct lr_fe *fe)
{
	if (size < FE_INLINE_DATA)
		return corrupt_item(cx, k, "file extent item too small");
	fe->type = d[FE_TYPE];
	fe->compression = d[FE_COMPRESSION];
	fe->ram_bytes = bi_le64(d + FE_RAM_BYTES);
	if (fe->type == FE_TYPE_INLINE) {
		if (!bi_add_ok(k->offset, fe->ram_bytes, &fe->end))
			return corrupt_item(cx, k, "inline extent end overflows");
		return 0;
	}
	if (fe->type != FE_TYPE_REG && fe->type != FE_TYPE_PREALLOC)
		return corrupt_item(cx, k, "unknown file extent type");
	if (size != FE_SIZE)
		return corrupt_item(cx, k, "file extent item size is not 53");
	fe->disk_bytenr = bi_le64(d + FE_DISK_BYTENR);
	fe->disk_num_bytes = bi_le64(d + FE_DISK_NUM_BYTES);
	fe->offset = bi_le64(d + FE_OFFSET);
	fe->num_bytes = bi_le64(d + FE_NUM_BYTES);
	if (!bi_add_ok(k->offset, fe->num_bytes, &fe->end))
		return corrupt_item(cx, k, "file extent end overflows");
	return 0;
}

/* The most bytes one checksum item can cover. */
static uint64_t csum_span(const struct lr_ctx *cx)
{
	return (uint64_t)(leaf_data(cx) / cx->p->csum_size) * cx->p->sectorsize;
}

static int csum_range(struct lr_ctx *cx, const bi_key *k, uint32_t size, uint64_t *end)
{
	uint64_t n = size / cx->p->csum_size;
	if (size == 0 || size % cx->p->csum_size || k->offset % cx->p->sectorsize ||
	    !bi_add_ok(k->offset, n * cx->p->sectorsize, end))
		return CORRUPT(cx, "bad checksum item (%llu %u %llu) size %u",
			       (unsigned long long)k->objectid, k->type,
			       (unsigned long long)k->offset, size);
	return 0;
}

/* Put the checksums of [a, b) taken from item @it (covering them). */
static int csum_put(struct lr_ctx *cx, const bi_key *k, const uint8_t *d, uint64_t a,
		    uint64_t b)
{
	uint64_t ss = cx->p->sectorsize, cs = cx->p->csum_size;
	bi_key nk = { OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, a };
	return vw_put(cx, &cx->csum, &nk, d + (a - k->offset) / ss * cs,
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
		int rc = vw_first(cx, &cx->csum, &lo, &hi, &it);
		if (rc <= 0)
			return rc;
		rc = csum_range(cx, &it.key, it.size, &e);
		uint64_t s = it.key.offset;
		bool more = key_next(&it.key, &lo);
		if (rc == 0 && e > a) {
			rc = vw_del(cx, &cx->csum, &it.key);
			if (rc == 0 && s < a)
				rc = csum_put(cx, &it.key, it.data, s, a);
			if (rc == 0 && e > b)
				rc = csum_put(cx, &it.key, it.data, b, e);
		}
		it_free(&it);
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
	struct lr_node *n = avl_find(cx->ext.map, &k);
	uint8_t st[9] = { 0 };
	if (n) {
		memcpy(st, n->data, sizeof(st));
	} else {
		struct lr_item it;
		int rc = src_get(cx, &cx->ext, false, &k, &k, &it);
		if (rc < 0)
			return rc;
		if (rc > 0 && it.size >= 8)
			memcpy(st, it.data, 8);
		st[8] = rc > 0;
		if (rc > 0)
			it_free(&it);
	}
	if (alloc && !st[8])	/* btrfs_alloc_logged_file_extent */
		st[8] = 1;
	uint64_t refs = bi_le64(st);
	if (!st[8] || (delta < 0 && refs == 0))
		return CORRUPT(cx, "data extent %llu+%llu: no reference to drop (extent tree)",
			       (unsigned long long)fe->disk_bytenr,
			       (unsigned long long)fe->disk_num_bytes);
	put64(st, refs + (uint64_t)(int64_t)delta);
	return vw_put(cx, &cx->ext, &k, st, sizeof(st));
}

static int free_walk(struct lr_ctx *cx, struct lr_node *n)
{
	if (!n)
		return 0;
	int rc = free_walk(cx, n->l);
	if (rc == 0 && !n->del && n->size == 9 && n->data[8] && bi_le64(n->data) == 0) {
		uint64_t end;
		if (!bi_add_ok(n->key.objectid, n->key.offset, &end))
			return CORRUPT(cx, "data extent end overflows");
		rc = csum_delete(cx, n->key.objectid, end);
	}
	return rc ? rc : free_walk(cx, n->r);
}

/* A copy of a regular extent item moved to file offset @to (its data
 * offset follows) and ending at @end. */
static int put_extent(struct lr_ctx *cx, const struct lr_item *it, uint64_t to, uint64_t end)
{
	bi_key k = { it->key.objectid, KT_EXTENT_DATA, to };
	uint8_t d[FE_SIZE];
	memcpy(d, it->data, FE_SIZE);
	put64(d + FE_OFFSET, bi_le64(d + FE_OFFSET) + (to - it->key.offset));
	put64(d + FE_NUM_BYTES, end - to);
	if (to != it->key.offset) {
		struct lr_item x;
		int rc = vw_get(cx, cx->fs, &k, &x);
		if (rc > 0) {
			it_free(&x);
			return corrupt_item(cx, &k, "overlapping file extent items");
		}
		if (rc < 0)
			return rc;
	}
	return vw_put(cx, cx->fs, &k, d, FE_SIZE);
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
		return corrupt_item(cx, &it->key, "replay would split an inline extent");
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
		return rc ? rc : vw_del(cx, cx->fs, &it->key);
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
	return rc ? rc : vw_del(cx, cx->fs, &it->key);
}

/* btrfs_drop_extents: *found gets the allocated bytes dropped. */
static int drop_extents(struct lr_ctx *cx, uint64_t ino, uint64_t start, uint64_t end,
			uint64_t *found)
{
	bi_key lo = { ino, KT_EXTENT_DATA, 0 }, hi = { ino, KT_EXTENT_DATA, UINT64_MAX };
	bi_key sk = { ino, KT_EXTENT_DATA, start }, pk;
	struct lr_item it;
	/* the kernel's search lands on the item at start, else the one before */
	int rc = vw_get(cx, cx->fs, &sk, &it);
	if (rc == 0 && key_prev(&sk, &pk))
		rc = vw_last(cx, cx->fs, &lo, &pk, &it);
	if (rc == 0)
		rc = vw_first(cx, cx->fs, &sk, &hi, &it);
	uint64_t from = start;
	*found = 0;
	while (rc > 0) {
		struct lr_fe fe;
		bool stop = it.key.offset >= end, more = false;
		if (!stop)
			rc = fe_parse(cx, &it.key, it.data, it.size, &fe);
		if (!stop && rc == 0)
			rc = drop_one(cx, &it, &fe, start, end, &from, found, &stop);
		if (rc == 0 && !stop)
			more = key_next(&it.key, &lo);
		it_free(&it);
		if (rc || !more)
			break;
		rc = vw_first(cx, cx->fs, &lo, &hi, &it);
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
		return CORRUPT(cx, "file extent's checksum range is not sector aligned");
	bi_key lo = { OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, cs > span ? cs - span : 0 };
	const struct bi_lr_log *l = cx->log;
	for (size_t i = log_lower(l, &lo); i < l->n && cs < ce; i++) {
		const struct bi_lr_item *li = &l->items[i];
		uint64_t e;
		if (li->key.objectid != OBJ_EXTENT_CSUM || li->key.type != KT_EXTENT_CSUM ||
		    li->key.offset >= ce)
			break;
		int rc = csum_range(cx, &li->key, li->size, &e);
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
static int replay_extent(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	struct lr_fe fe;
	int rc = fe_parse(cx, &li->key, li->data, li->size, &fe);
	if (rc)
		return rc;
	bool inl = fe.type == FE_TYPE_INLINE;
	uint64_t start = li->key.offset, ss = cx->p->sectorsize, found = 0, end = fe.end;
	uint64_t nbytes = inl ? fe.ram_bytes : fe.disk_bytenr ? fe.num_bytes : 0;
	if (inl && !bi_add_ok(fe.end, ss - 1, &end))
		return corrupt_item(cx, &li->key, "inline extent end overflows");
	if (inl)
		end &= ~(ss - 1);
	struct lr_inode *in;
	if ((rc = iget_must(cx, li->key.objectid, &in)))
		return rc;
	struct lr_item ex;
	rc = inl ? 0 : vw_get(cx, cx->fs, &li->key, &ex);
	if (rc > 0) {	/* the very same extent is there already */
		bool same = ex.size >= FE_SIZE && !memcmp(ex.data, li->data, FE_SIZE);
		it_free(&ex);
		rc = 0;
		if (same)
			goto out;
	}
	rc = drop_extents(cx, in->ino, start, end, &found);
	if (rc == 0 && inl) {
		rc = overwrite(cx, li);
	} else if (rc == 0 && (fe.disk_bytenr || !cx->p->no_holes)) {
		rc = vw_get(cx, cx->fs, &li->key, &ex);
		if (rc > 0) {
			it_free(&ex);
			rc = corrupt_item(cx, &li->key, "an extent item is in the way");
		}
		if (rc == 0)
			rc = vw_put(cx, cx->fs, &li->key, li->data, FE_SIZE);
		if (rc == 0)
			rc = ext_ref(cx, &fe, 1, true);
		if (rc == 0 && fe.disk_bytenr)
			rc = replay_csums(cx, &fe);
	}
	if (rc == 0) {
		in->nbytes = in->nbytes - found + nbytes;
		rc = iupdate(cx, in);
	}
out:
	iput(cx, in);
	return rc;
}

/* Walk 1, one inode item. */
static int replay_inode(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	uint64_t ino = li->key.objectid;
	uint32_t mode = bi_le32(li->data + INODE_MODE);
	int rc = xattr_deletes(cx, ino);
	if (rc == 0 && is_dir(mode))
		rc = dir_deletes(cx, ino, false);
	if (rc == 0)
		rc = overwrite_inode(cx, li);
	if (rc == 0 && is_reg(mode)) {
		/* extents past i_size go now: prealloc past EOF is logged
		 * and replayed after this */
		struct lr_inode *in = NULL;
		uint64_t found, ss = cx->p->sectorsize;
		rc = iget_must(cx, ino, &in);
		if (rc == 0)
			rc = drop_extents(cx, ino, (in->size + ss - 1) & ~(ss - 1), UINT64_MAX,
					  &found);
		if (rc == 0) {
			in->nbytes -= found;
			rc = iupdate(cx, in);
		}
		if (in)
			iput(cx, in);
	}
	return rc ? rc : fixup_add(cx, ino);
}

/* ---------------------------------------------- walk 2: directory entries */

/* delete_conflicting_dir_entry */
static int dent_conflict(struct lr_ctx *cx, struct lr_inode *dir, const struct lr_dent *have,
			 const struct lr_dent *want, bool exists, bool *match)
{
	if (bi_key_cmp(&have->loc, &want->loc) == 0 && have->type == want->type) {
		*match = true;
		return 0;
	}
	return exists ? drop_entry(cx, dir, have, false) : 0;
}

/* insert_one_name: -ENOENT when the inode does not exist (skipped). */
static int insert_one_name(struct lr_ctx *cx, struct lr_inode *dir, const bi_key *loc,
			   const uint8_t *name, uint16_t len, uint64_t index)
{
	struct lr_inode *in;
	int rc = iget(cx, loc->objectid, &in);
	if (rc)
		return rc;
	rc = add_link(cx, dir, in, name, len, true, index);
	iput(cx, in);
	return rc;
}

/* replay_one_dir_item / replay_one_name, for a logged DIR_INDEX item. */
static int replay_dir_index(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	struct lr_dent e, de;
	if (dent_at(li->data, li->size, 0, &e) < 0)
		return corrupt_item(cx, &li->key, "bad dir index entry in the log");
	struct lr_inode *dir;
	int rc = iget_must(cx, li->key.objectid, &dir);
	if (rc)
		return rc;
	struct lr_item it;
	bool exists = false, dmatch = false, imatch = false, added = false;
	rc = vw_get(cx, cx->fs, &e.loc, &it);
	if (rc > 0) {
		exists = true;
		it_free(&it);
	}
	if (rc >= 0 && (rc = find_dir_item(cx, dir->ino, e.name, e.name_len, &it, &de)) > 0) {
		rc = dent_conflict(cx, dir, &de, &e, exists, &dmatch);
		it_free(&it);
	}
	if (rc >= 0 && (rc = find_dir_index(cx, dir->ino, li->key.offset, e.name, e.name_len,
					     &it, &de)) > 0) {
		rc = dent_conflict(cx, dir, &de, &e, exists, &imatch);
		it_free(&it);
	}
	if (rc < 0 || (dmatch && imatch))
		goto out;
	/* a name whose inode ref is logged is added in walk 3 */
	bi_key rk = { e.loc.objectid, KT_INODE_REF, dir->ino };
	bi_key xk = { e.loc.objectid, KT_INODE_EXTREF, bi_extref_hash(dir->ino, e.name, e.name_len) };
	rc = log_has_ref(cx, &rk, 0, e.name, e.name_len);
	if (rc == 0)
		rc = log_has_ref(cx, &xk, dir->ino, e.name, e.name_len);
	if (rc)
		goto out;
	rc = insert_one_name(cx, dir, &e.loc, e.name, e.name_len, li->key.offset);
	added = rc == 0;
	if (rc == -ENOENT || rc == -EEXIST)
		rc = 0;
	/* a new name of a non-directory: its link count is fixed up later */
	if (rc == 0 && added && (e.type & ~FT_ENCRYPTED) != FT_DIR)
		rc = fixup_add(cx, e.loc.objectid);
out:
	iput(cx, dir);
	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------- walk 3: inode refs */

/* inode_in_dir: both the index and the name entry point at @ino. */
static int inode_in_dir(struct lr_ctx *cx, uint64_t dir, uint64_t ino, uint64_t index,
			const uint8_t *name, uint16_t len)
{
	struct lr_item it;
	struct lr_dent e;
	int rc = find_dir_index(cx, dir, index, name, len, &it, &e);
	if (rc <= 0)
		return rc;
	bool ok = e.loc.objectid == ino;
	it_free(&it);
	if (!ok)
		return 0;
	rc = find_dir_item(cx, dir, name, len, &it, &e);
	if (rc <= 0)
		return rc;
	ok = e.loc.objectid == ino;
	it_free(&it);
	return ok;
}

/* unlink_refs_not_in_log / unlink_extrefs_not_in_log: unlink the first
 * name of @it (an item of the tree) in @dir that the log does not hold;
 * -EAGAIN after an unlink. */
static int unlink_unlogged(struct lr_ctx *cx, const struct lr_item *it, struct lr_inode *dir,
			   struct lr_inode *in)
{
	bool ext = it->key.type == KT_INODE_EXTREF;
	struct lr_ref r;
	for (uint32_t pos = 0; pos < it->size; pos += r.len) {
		if (ref_at(ext, it->key.offset, it->data, it->size, pos, &r) < 0)
			return corrupt_item(cx, &it->key, "bad inode ref");
		if (ext && r.parent != dir->ino)
			continue;
		bi_key lk = it->key;
		if (ext)
			lk.offset = bi_extref_hash(dir->ino, r.name, r.name_len);
		int rc = log_has_ref(cx, &lk, dir->ino, r.name, r.name_len);
		if (rc < 0)
			return rc;
		if (rc > 0)
			continue;
		in->nlink++;
		rc = unlink_name(cx, dir, in, r.name, r.name_len);
		return rc ? rc : -EAGAIN;
	}
	return 0;
}

/* __add_inode_ref, the part before the "again" label repeats: unlink the
 * names of @in in @dir that the log does not hold. 1: @in is the root
 * directory's own back reference (nothing to do). */
static int unlink_conflicting_refs(struct lr_ctx *cx, struct lr_inode *dir,
				   struct lr_inode *in, const struct lr_ref *want)
{
	bi_key k = { in->ino, KT_INODE_REF, dir->ino };
	struct lr_item it;
	struct lr_ref r;
	int rc = vw_get(cx, cx->fs, &k, &it);
	if (rc > 0) {
		rc = k.objectid == k.offset ? 1 : unlink_unlogged(cx, &it, dir, in);
		it_free(&it);
	}
	if (rc)
		return rc;
	k = (bi_key){ in->ino, KT_INODE_EXTREF, bi_extref_hash(dir->ino, want->name, want->name_len) };
	if ((rc = vw_get(cx, cx->fs, &k, &it)) <= 0)
		return rc;
	rc = ref_find(true, k.offset, it.data, it.size, dir->ino, want->name, want->name_len, &r);
	if (rc > 0)
		rc = unlink_unlogged(cx, &it, dir, in);
	else if (rc < 0)
		rc = corrupt_item(cx, &k, "bad inode extref");
	it_free(&it);
	return rc;
}

/* __add_inode_ref, then the link itself (add_inode_ref's loop body). */
static int add_ref_name(struct lr_ctx *cx, struct lr_inode *dir, struct lr_inode *in,
			const struct lr_ref *r)
{
	int rc;
	while ((rc = unlink_conflicting_refs(cx, dir, in, r)) == -EAGAIN)
		;
	if (rc)
		return rc;
	struct lr_item it;
	struct lr_dent e;
	/* a conflicting index, then a conflicting name */
	rc = find_dir_index(cx, dir->ino, r->index, r->name, r->name_len, &it, &e);
	if (rc > 0) {
		rc = drop_entry(cx, dir, &e, false);
		it_free(&it);
	}
	if (rc == 0 && (rc = find_dir_item(cx, dir->ino, r->name, r->name_len, &it, &e)) > 0) {
		rc = drop_entry(cx, dir, &e, false);
		it_free(&it);
	}
	if (rc == 0)
		rc = add_link(cx, dir, in, r->name, r->name_len, false, r->index);
	return rc ? rc : iupdate(cx, in);
}

/* unlink_old_inode_refs: names in the tree's item under the log item's key
 * that the log's item does not hold are unlinked. */
static int unlink_old_refs(struct lr_ctx *cx, const struct bi_lr_item *li, struct lr_inode *in)
{
	bool ext = li->key.type == KT_INODE_EXTREF;
	for (;;) {
		struct lr_item it;
		struct lr_ref r, lr;
		int rc = vw_get(cx, cx->fs, &li->key, &it);
		if (rc <= 0)
			return rc;
		bool again = false;
		rc = 0;
		for (uint32_t pos = 0; pos < it.size && rc == 0 && !again; pos += r.len) {
			if (ref_at(ext, li->key.offset, it.data, it.size, pos, &r) < 0) {
				rc = corrupt_item(cx, &it.key, "bad inode ref");
				break;
			}
			rc = ref_find(ext, li->key.offset, li->data, li->size, r.parent, r.name,
				      r.name_len, &lr);
			if (rc != 0) {
				rc = rc < 0 ? corrupt_item(cx, &li->key, "bad inode ref in the log") : 0;
				continue;
			}
			struct lr_inode *dir;
			rc = iget_must(cx, r.parent, &dir);
			if (rc == 0) {
				rc = unlink_name(cx, dir, in, r.name, r.name_len);
				iput(cx, dir);
			}
			again = true;
		}
		it_free(&it);
		if (rc || !again)
			return rc;
	}
}

/* add_inode_ref: a logged INODE_REF / INODE_EXTREF item. */
static int replay_ref(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	bool ext = li->key.type == KT_INODE_EXTREF;
	struct lr_ref r;
	uint64_t parent = li->key.offset;
	if (ext && li->size == 0)
		return 0;	/* no parent to look up: the kernel finds none */
	if (ref_at(ext, li->key.offset, li->data, li->size, 0, &r) < 0)
		return corrupt_item(cx, &li->key, "bad inode ref in the log");
	parent = r.parent;
	struct lr_inode *dir = NULL, *in = NULL;
	/* a parent directory that was not logged and does not exist: skip */
	int rc = iget(cx, parent, &dir);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	rc = iget_must(cx, li->key.objectid, &in);
	for (uint32_t pos = 0; rc == 0 && pos < li->size; pos += r.len) {
		if (ref_at(ext, li->key.offset, li->data, li->size, pos, &r) < 0) {
			rc = corrupt_item(cx, &li->key, "bad inode ref in the log");
			break;
		}
		if (!dir && (rc = iget(cx, r.parent, &dir)) == -ENOENT) {
			rc = 0;
			continue;
		}
		if (rc == 0)
			rc = inode_in_dir(cx, dir->ino, in->ino, r.index, r.name, r.name_len);
		if (rc == 0) {
			rc = add_ref_name(cx, dir, in, &r);
			if (rc == 1)	/* the root directory's own ref: leave it */
				goto out;
		}
		rc = rc > 0 ? 0 : rc;	/* already linked */
		if (ext) {
			iput(cx, dir);
			dir = NULL;
		}
	}
	if (rc == 0)
		rc = unlink_old_refs(cx, li, in);
	if (rc == 0)
		rc = overwrite(cx, li);
out:
	iput(cx, dir);
	iput(cx, in);
	return rc == 1 ? 0 : rc;
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
			int rc = vw_first(cx, cx->fs, &lo, &hi, &it);
			if (rc <= 0) {
				if (rc < 0)
					return rc;
				break;
			}
			rc = 0;
			for (uint32_t pos = 0; pos < it.size && rc == 0; pos += r.len, (*n)++)
				if (ref_at(ext, it.key.offset, it.data, it.size, pos, &r) < 0)
					rc = corrupt_item(cx, &it.key, "bad inode ref");
			bool more = key_next(&it.key, &lo);
			it_free(&it);
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
	int rc = iget_must(cx, ino, &in);
	if (rc)
		return rc;
	rc = count_names(cx, ino, &n);
	if (rc == 0 && n != in->nlink) {
		in->nlink = n;
		rc = iupdate(cx, in);
	}
	if (rc == 0 && in->nlink == 0) {
		/* the orphan is removed at mount (orphan_cleanup) */
		bi_key ok = { OBJ_ORPHAN, KT_ORPHAN_ITEM, ino };
		struct lr_item it;
		if (is_dir(in->mode))
			rc = dir_deletes(cx, ino, true);
		if (rc == 0 && (rc = vw_get(cx, cx->fs, &ok, &it)) == 0)
			rc = vw_put(cx, cx->fs, &ok, "", 0);
		else if (rc > 0)
			rc = 0, it_free(&it);
	}
	iput(cx, in);
	return rc;
}

/* fixup_inode_link_counts: highest inode first; a directory's fixup can
 * add more inodes, so always restart from the top. */
static int fixups(struct lr_ctx *cx)
{
	bi_key lo = { OBJ_TREE_LOG_FIXUP, KT_ORPHAN_ITEM, 0 };
	bi_key hi = { OBJ_TREE_LOG_FIXUP, KT_ORPHAN_ITEM, UINT64_MAX };
	for (;;) {
		struct lr_item it;
		int rc = vw_last(cx, cx->fs, &lo, &hi, &it);
		if (rc <= 0)
			return rc;
		uint64_t ino = it.key.offset;
		rc = vw_del(cx, cx->fs, &it.key);
		it_free(&it);
		if (rc == 0)
			rc = fixup_one(cx, ino);
		if (rc)
			return rc;
	}
}

/* What mount's orphan cleanup does to the inodes replay orphaned: an inode
 * without links loses every item; the orphan item goes either way. */
static int orphan_cleanup(struct lr_ctx *cx)
{
	bi_key k = { OBJ_ORPHAN, KT_ORPHAN_ITEM, 0 };
	for (;;) {
		struct lr_node *n = avl_bound(cx->fs->map, &k, true);
		if (!n || n->key.objectid != OBJ_ORPHAN || n->key.type != KT_ORPHAN_ITEM)
			return 0;
		bi_key ok = n->key;
		bool ours = !n->del;	/* replay only puts new orphan items */
		uint64_t ino = ok.offset;
		struct lr_inode *in = NULL;
		int rc = ours ? iget(cx, ino, &in) : 0;
		if (rc == -ENOENT)
			rc = 0;
		if (rc == 0 && in && in->nlink == 0) {
			bi_key lo = { ino, 0, 0 }, hi = { ino, UINT8_MAX, UINT64_MAX };
			struct lr_item it;
			while (rc == 0 && (rc = vw_first(cx, cx->fs, &lo, &hi, &it)) > 0) {
				struct lr_fe fe;
				rc = 0;
				if (it.key.type == KT_EXTENT_DATA &&
				    (rc = fe_parse(cx, &it.key, it.data, it.size, &fe)) == 0 &&
				    fe.type != FE_TYPE_INLINE)
					rc = ext_ref(cx, &fe, -1, false);
				if (rc == 0)
					rc = vw_del(cx, cx->fs, &it.key);
				it_free(&it);
			}
		}
		iput(cx, in);
		if (rc == 0 && ours)
			rc = vw_del(cx, cx->fs, &ok);
		if (rc < 0 || !key_next(&ok, &k))
			return rc < 0 ? rc : 0;
	}
}

/* ------------------------------------------------------------ driver */

static int replay_item(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	uint8_t t = li->key.type;
	int rc = 0;
	cx->cur = li->key;
	if (t == KT_INODE_ITEM) {
		if (li->size != INODE_ITEM_SIZE)
			return corrupt_item(cx, &li->key, "inode item size is not 160 (log)");
		/* no links: an O_TMPFILE, or unlinked while open; the parent's
		 * replay removes it, so all its items are skipped */
		cx->ignore = bi_le32(li->data + INODE_NLINK) == 0;
		if (!cx->ignore && cx->stage == ST_INODES)
			rc = replay_inode(cx, li);
	}
	if (rc || cx->ignore)
		return rc;
	if (t == KT_DIR_INDEX && cx->stage == ST_DIR_INDEX)
		return replay_dir_index(cx, li);
	if (cx->stage != ST_ALL)
		return 0;
	if (t == KT_XATTR_ITEM)
		return overwrite(cx, li);
	if (t == KT_INODE_REF || t == KT_INODE_EXTREF)
		return replay_ref(cx, li);
	if (t == KT_EXTENT_DATA)
		return replay_extent(cx, li);
	return 0;
}

static int replay_log(struct lr_ctx *cx)
{
	for (size_t i = 0; i < cx->log->n; i++) {
		int rc = replay_item(cx, &cx->log->items[i]);
		if (rc < 0 && !cx->why[0])	/* an errno the kernel aborts on */
			rc = fail(cx, rc == -ENOMEM ? rc : -EUCLEAN,
				  "the kernel's replay fails here (error %d)", rc);
		if (rc < 0)
			return rc;
	}
	if (cx->stage != ST_ALL)
		return 0;
	cx->cur = (bi_key){ 0, 0, 0 };
	return fixups(cx);
}

/* In-order walk filling the overlay (data moves from the map). */
static int emit_walk(struct lr_ctx *cx, struct lr_view *v, struct lr_node *n,
		     struct bi_overlay *o, bool count)
{
	if (!n)
		return 0;
	int rc = emit_walk(cx, v, n->l, o, count);
	if (rc)
		return rc;
	if (n->del && n->in_base < 0) {
		struct lr_item it;
		rc = src_get(cx, v, false, &n->key, &n->key, &it);
		if (rc < 0)
			return rc;
		it_free(&it);
		n->in_base = (int8_t)rc;
	}
	if (!n->del && !count)
		o->puts[o->nputs] = (struct bi_ovl_put){ n->key, n->data, n->size };
	if (!n->del && !count)
		n->data = NULL;
	if (n->del && n->in_base && !count)
		o->dels[o->ndels] = (struct bi_ovl_del){ n->key, n->key };
	o->nputs += !n->del;
	o->ndels += n->del && n->in_base;
	return emit_walk(cx, v, n->r, o, count);
}

static int emit(struct lr_ctx *cx, struct lr_view *v, struct bi_overlay **list)
{
	struct bi_overlay c = { 0 };
	int rc = emit_walk(cx, v, v->map, &c, true);
	if (rc || (!c.nputs && !c.ndels))
		return rc;
	struct bi_overlay *o = calloc(1, sizeof(*o));
	if (o) {
		o->puts = calloc(c.nputs + 1, sizeof(*o->puts));
		o->dels = calloc(c.ndels + 1, sizeof(*o->dels));
	}
	if (!o || !o->puts || !o->dels) {
		if (o) {
			free(o->puts);
			free(o->dels);
		}
		free(o);
		return fail(cx, -ENOMEM, "out of memory");
	}
	o->root = v->id;
	rc = emit_walk(cx, v, v->map, o, false);
	o->next = *list;
	*list = o;
	return rc;
}

void bi_lr_overlays_free(struct bi_overlay *o)
{
	while (o) {
		struct bi_overlay *next = o->next;
		for (size_t i = 0; i < o->nputs; i++)
			free(o->puts[i].data);
		free(o->puts);
		free(o->dels);
		free(o);
		o = next;
	}
}

static int check_log(const struct bi_lr_params *p, const struct bi_lr_log *l, char *why,
		     size_t whylen);

static bool is_fs_tree(uint64_t id)
{
	return id == OBJ_FS_TREE || (id >= OBJ_FIRST_FREE && id <= OBJ_LAST_FREE);
}

static int check_args(const struct bi_lr_params *p, const struct bi_lr_log *logs, size_t n,
		      char *why, size_t whylen)
{
	uint32_t ss = p->sectorsize;
	if (ss < 512 || ss > 65536 || (ss & (ss - 1)) || p->nodesize < 4096 ||
	    p->nodesize > 65536 || p->csum_size == 0 || p->csum_size > CSUM_SIZE_MAX) {
		snprintf(why, whylen, "bad replay parameters");
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (!is_fs_tree(logs[i].root)) {
			snprintf(why, whylen, "log tree for %llu, which is not a subvolume",
				 (unsigned long long)logs[i].root);
			return -EUCLEAN;
		}
		for (size_t j = 0; j < i; j++)
			if (logs[j].root == logs[i].root) {
				snprintf(why, whylen, "two log trees for subvolume %llu",
					 (unsigned long long)logs[i].root);
				return -EUCLEAN;
			}
		int rc = check_log(p, &logs[i], why, whylen);
		if (rc)
			return rc;
	}
	return 0;
}

/* The kernel's tree-checker runs on every log leaf it reads; a leaf that
 * fails stops the replay. The same checks, on every item, up front. */
static int check_log_item(const struct bi_lr_params *p, uint64_t root,
			  const struct bi_lr_item *li, char *why, size_t whylen)
{
	struct btrfsimg_inode ino;
	struct bi_ref_entry re;
	struct bi_extent ext;
	uint32_t pos = 0;
	int rc = 0;
	switch (li->key.type) {
	case KT_INODE_ITEM:
		return bi_inode_parse(li->data, li->size, root, li->key.objectid, p->transid, &ino,
				      why, whylen);
	case KT_DIR_ITEM:
	case KT_DIR_INDEX:
	case KT_XATTR_ITEM:
		rc = bi_dir_item_check(li->data, li->size, &li->key, why, whylen);
		return rc < 0 ? rc : 0;
	case KT_INODE_REF:
		while ((rc = bi_iref_next(li->data, li->size, li->key.offset, &pos, &re, why,
					  whylen)) > 0)
			;
		return rc;
	case KT_INODE_EXTREF:
		while ((rc = bi_extref_next(li->data, li->size, &pos, &re, why, whylen)) > 0)
			;
		return rc;
	case KT_EXTENT_DATA:
		return bi_extent_parse(li->data, li->size, li->key.offset, p->sectorsize, &ext, why,
				       whylen);
	case KT_EXTENT_CSUM:
		if (li->size && li->size % p->csum_size == 0)
			return 0;
		snprintf(why, whylen, "checksum item size %u not a multiple of %u", li->size,
			 p->csum_size);
		return -EUCLEAN;
	}
	return 0;
}

static int check_log(const struct bi_lr_params *p, const struct bi_lr_log *l, char *why,
		     size_t whylen)
{
	char msg[384];
	for (size_t k = 0; k < l->n; k++) {
		const bi_key *key = &l->items[k].key;
		int rc = k && bi_key_cmp(&l->items[k - 1].key, key) >= 0
				 ? (snprintf(msg, sizeof(msg), "keys out of order"), -EUCLEAN)
				 : check_log_item(p, l->root, &l->items[k], msg, sizeof(msg));
		if (rc < 0) {
			snprintf(why, whylen, "corrupt log tree of %llu: item %zu (%llu %u %llu): %s",
				 (unsigned long long)l->root, k, (unsigned long long)key->objectid,
				 key->type, (unsigned long long)key->offset, msg);
			return -EUCLEAN;
		}
	}
	return 0;
}

/* The kernel replays log trees in descending subvolume id order. */
static size_t *replay_order(const struct bi_lr_log *logs, size_t n)
{
	size_t *o = malloc((n + 1) * sizeof(*o));
	if (!o)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		size_t j = i;
		while (j > 0 && logs[o[j - 1]].root < logs[i].root) {
			o[j] = o[j - 1];
			j--;
		}
		o[j] = i;
	}
	return o;
}

/* The three walks over every log, in the kernel's order. */
static int replay_all(struct lr_ctx *cx, const struct bi_lr_log *logs, size_t nlogs,
		      struct lr_view *views, const size_t *order)
{
	int rc = 0;
	for (cx->stage = ST_INODES; cx->stage <= ST_ALL && rc == 0; cx->stage++)
		for (size_t k = 0; k < nlogs && rc == 0; k++) {
			size_t i = order[k];
			if (!logs[i].base.first)
				continue;	/* the subvolume is gone */
			cx->fs = &views[i];
			cx->log = &logs[i];
			rc = replay_log(cx);
		}
	return rc;
}

/* After the replay: orphan cleanup, freed extents, the overlays. */
static int finish(struct lr_ctx *cx, struct lr_view *views, size_t nlogs,
		  struct bi_overlay **out)
{
	int rc = 0;
	cx->stage = 0;
	for (size_t i = 0; i < nlogs && rc == 0; i++) {
		cx->fs = &views[i];
		rc = views[i].map ? orphan_cleanup(cx) : 0;
		if (rc == 0)
			rc = emit(cx, &views[i], out);
	}
	cx->fs = NULL;
	if (rc == 0)
		rc = free_walk(cx, cx->ext.map);
	return rc ? rc : emit(cx, &cx->csum, out);
}

int bi_lr_replay(const struct bi_lr_params *p, const struct bi_lr_log *logs, size_t nlogs,
		 const struct bi_lr_trees *trees, struct bi_overlay **out, char *why,
		 size_t whylen)
{
	*out = NULL;
	why[0] = '\0';
	int rc = check_args(p, logs, nlogs, why, whylen);
	if (rc)
		return rc;
	struct lr_ctx cx = { .p = p, .csum = { OBJ_CSUM_TREE, trees->csum, NULL },
			     .ext = { OBJ_EXTENT_TREE, trees->extent, NULL }, .why = why,
			     .whylen = whylen };
	cx.max_bytes = p->max_bytes ? p->max_bytes : DEFAULT_MAX_BYTES;
	cx.max_steps = p->max_steps ? p->max_steps : DEFAULT_MAX_STEPS;
	struct lr_view *views = calloc(nlogs + 1, sizeof(*views));
	size_t *order = replay_order(logs, nlogs);
	if (views && order) {
		for (size_t i = 0; i < nlogs; i++)
			views[i] = (struct lr_view){ logs[i].root, logs[i].base, NULL };
		rc = replay_all(&cx, logs, nlogs, views, order);
		if (rc == 0)
			rc = finish(&cx, views, nlogs, out);
	} else {
		rc = fail(&cx, -ENOMEM, "out of memory");
	}
	if (rc) {
		bi_lr_overlays_free(*out);
		*out = NULL;
	}
	while (cx.held)		/* only after a failure */
		iput(&cx, cx.held);
	for (size_t i = 0; views && i < nlogs; i++)
		avl_free(views[i].map);
	avl_free(cx.csum.map);
	avl_free(cx.ext.map);
	free(views);
	free(order);
	return rc;
}

/* ------------------------------------------------------ array source */

static size_t arr_lower(const struct bi_lr_array *a, const bi_key *k, bool after)
{
	size_t lo = 0, hi = a->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = bi_key_cmp(&a->items[mid].key, k);
		if (c < 0 || (after && c == 0))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int arr_copy(const struct bi_lr_item *it, bi_key *key, uint8_t **data, uint32_t *size)
{
	*data = malloc(it->size ? it->size : 1);
	if (!*data)
		return -ENOMEM;
	if (it->size)
		memcpy(*data, it->data, it->size);
	*key = it->key;
	*size = it->size;
	return 1;
}

static int arr_first(void *ctx, const bi_key *min, const bi_key *max, bi_key *key,
		     uint8_t **data, uint32_t *size)
{
	const struct bi_lr_array *a = ctx;
	size_t i = arr_lower(a, min, false);
	if (i >= a->n || bi_key_cmp(&a->items[i].key, max) > 0)
		return 0;
	return arr_copy(&a->items[i], key, data, size);
}

static int arr_last(void *ctx, const bi_key *min, const bi_key *max, bi_key *key,
		    uint8_t **data, uint32_t *size)
{
	const struct bi_lr_array *a = ctx;
	size_t i = arr_lower(a, max, true);
	if (i == 0 || bi_key_cmp(&a->items[i - 1].key, min) < 0)
		return 0;
	return arr_copy(&a->items[i - 1], key, data, size);
}

void bi_lr_src_array(struct bi_lr_src *src, struct bi_lr_array *arr)
{
	src->first = arr_first;
	src->last = arr_last;
	src->ctx = arr;
}

/* ------------------------------------------------- the filesystem glue */

#define LOG_MAX_BYTES (512ull << 20)	/* a log tree larger than this is refused */

/* A tree of the image as a replay source (no overlay exists yet). */
struct fs_src {
	struct btrfsimg_fs *fs;
	struct bi_root root;
};

static int copy_out(const uint8_t *d, uint32_t n, uint8_t **data, uint32_t *size)
{
	*data = malloc(n ? n : 1);
	if (!*data)
		return -ENOMEM;
	memcpy(*data, d, n);
	*size = n;
	return 1;
}

static int fs_first(void *ctx, const bi_key *min, const bi_key *max, bi_key *key,
		    uint8_t **data, uint32_t *size)
{
	struct fs_src *s = ctx;
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(s->fs, &it, &s->root, min, max);
	if (rc == 0)
		rc = bi_iter_next(&it, &item);
	if (rc > 0) {
		*key = item.key;
		rc = copy_out(item.data, item.size, data, size);
	}
	bi_iter_end(&it);
	return rc;
}

/* Keys of block @b that are <= @k. */
static uint32_t count_le(const struct bi_block *b, const bi_key *k)
{
	uint32_t lo = 0, hi = b->nritems, per = b->level ? KP_SIZE : ITEM_SIZE;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		bi_key mk;
		bi_key_read(b->data + HDR_SIZE + (size_t)mid * per, &mk);
		if (bi_key_cmp(&mk, k) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* One descent: a node's pointer keys are its children's first keys, so
 * the last pointer <= max leads to the leaf holding the last item <= max. */
static int fs_last(void *ctx, const bi_key *min, const bi_key *max, bi_key *key,
		   uint8_t **data, uint32_t *size)
{
	struct fs_src *s = ctx;
	bi_key fk;
	struct bi_expect e = { s->root.id, s->root.generation, s->root.level, NULL };
	uint64_t bytenr = s->root.bytenr, gen;
	for (;;) {
		struct bi_block *b;
		int rc = bi_block_read(s->fs, bytenr, &e, &b);
		if (rc < 0)
			return rc;
		uint32_t n = count_le(b, max);
		if (n && b->level == 0) {
			const uint8_t *d;
			uint32_t sz;
			bi_leaf_item(b, n - 1, key, &d, &sz);
			rc = bi_key_cmp(key, min) < 0 ? 0 : copy_out(d, sz, data, size);
		} else if (n) {
			bi_node_ptr(b, n - 1, &fk, &bytenr, &gen);
			e = (struct bi_expect){ s->root.id, gen, b->level - 1, &fk };
		}
		bool leaf = b->level == 0;
		bi_block_put(s->fs, b);
		if (!n || leaf)
			return n ? rc : 0;
	}
}

/* The logs found in the log root tree, with their subvolumes. */
struct log_set {
	struct bi_lr_log *logs;
	struct fs_src *srcs;
	size_t n, cap;
	uint64_t bytes;
};

static void log_set_free(struct log_set *ls)
{
	for (size_t i = 0; i < ls->n; i++) {
		for (size_t j = 0; j < ls->logs[i].n; j++)
			free((void *)ls->logs[i].items[j].data);
		free((void *)ls->logs[i].items);
	}
	free(ls->logs);
	free(ls->srcs);
}

/* Root item fields (ROOT_ITEM of a log or a subvolume). */
static int root_loc(struct btrfsimg_fs *fs, uint64_t id, const uint8_t *d, uint32_t size,
		    struct bi_root *r, uint32_t *refs)
{
	if (size < RI_SIZE_V1)
		return bi_err(fs, -EUCLEAN, "corrupt root item for tree %llu: size %u expect >= %u",
			      (unsigned long long)id, size, RI_SIZE_V1);
	*r = (struct bi_root){ id, bi_le64(d + RI_BYTENR), bi_le64(d + RI_GENERATION), d[RI_LEVEL] };
	*refs = bi_le32(d + RI_REFS);
	if (r->level >= MAX_LEVEL || !r->bytenr || r->bytenr % fs->sectorsize)
		return bi_err(fs, -EUCLEAN, "corrupt root item for tree %llu: level %u bytenr %llu",
			      (unsigned long long)id, r->level, (unsigned long long)r->bytenr);
	return 0;
}

/* Every item of tree @r, copied. */
static int load_tree(struct btrfsimg_fs *fs, const struct bi_root *r, struct bi_lr_log *l,
		     uint64_t *bytes)
{
	bi_key lo = { 0, 0, 0 }, hi = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	struct bi_lr_item *v = NULL;
	size_t cap = 0;
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, r, &lo, &hi);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = 0;
		*bytes += item.size + sizeof(*v);
		if (*bytes > LOG_MAX_BYTES) {
			rc = bi_err(fs, -EUCLEAN, "log trees hold more than %llu bytes",
				    (unsigned long long)LOG_MAX_BYTES);
			break;
		}
		if (l->n == cap) {
			cap = cap ? 2 * cap : 64;
			struct bi_lr_item *nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
		}
		uint8_t *d = malloc(item.size ? item.size : 1);
		if (!d) {
			rc = -ENOMEM;
			break;
		}
		memcpy(d, item.data, item.size);
		v[l->n++] = (struct bi_lr_item){ item.key, d, item.size };
	}
	bi_iter_end(&it);
	l->items = v;
	return rc;
}

/* The subvolume's fs tree, or a missing one (deleted: root refs 0). */
static int subvol_src(struct btrfsimg_fs *fs, uint64_t id, struct fs_src *s, bool *found)
{
	bi_key lo = { id, KT_ROOT_ITEM, 0 }, hi = { id, KT_ROOT_ITEM, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	uint32_t refs = 0;
	int rc = bi_iter_start(fs, &it, &fs->root_tree, &lo, &hi);
	if (rc == 0)
		rc = bi_iter_next(&it, &item);
	if (rc > 0)
		rc = root_loc(fs, id, item.data, item.size, &s->root, &refs);
	bi_iter_end(&it);
	s->fs = fs;
	*found = rc == 0 && refs > 0;
	return rc < 0 ? rc : 0;
}

static int add_log(struct btrfsimg_fs *fs, struct log_set *ls, const struct bi_item *item)
{
	if (ls->n == ls->cap) {
		size_t cap = ls->cap ? 2 * ls->cap : 4;
		struct bi_lr_log *l = realloc(ls->logs, cap * sizeof(*l));
		if (l)
			ls->logs = l;
		struct fs_src *s = realloc(ls->srcs, cap * sizeof(*s));
		if (s)
			ls->srcs = s;
		if (!l || !s)
			return -ENOMEM;
		ls->cap = cap;
		for (size_t i = 0; i < ls->n; i++)	/* the sources moved */
			ls->logs[i].base.ctx = &ls->srcs[i];
	}
	uint64_t id = item->key.offset;
	struct bi_root r;
	uint32_t refs;
	bool found;
	struct bi_lr_log *l = &ls->logs[ls->n];
	struct fs_src *s = &ls->srcs[ls->n];
	*l = (struct bi_lr_log){ .root = id };
	int rc = root_loc(fs, OBJ_TREE_LOG, item->data, item->size, &r, &refs);
	if (rc == 0)
		rc = load_tree(fs, &r, l, &ls->bytes);
	ls->n++;	/* owns what load_tree allocated, even on failure */
	if (rc == 0 && is_fs_tree(id))
		rc = subvol_src(fs, id, s, &found);
	if (rc == 0 && is_fs_tree(id) && found)
		l->base = (struct bi_lr_src){ fs_first, fs_last, s };
	return rc;
}

static int load_logs(struct btrfsimg_fs *fs, struct log_set *ls)
{
	/* the log root tree is written in the transaction after the last commit */
	struct bi_root r = { OBJ_TREE_LOG, fs->sb.info.log_root, fs->sb.info.generation + 1,
			     fs->sb.info.log_root_level };
	bi_key lo = { OBJ_TREE_LOG, KT_ROOT_ITEM, 0 }, hi = { OBJ_TREE_LOG, KT_ROOT_ITEM, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, &r, &lo, &hi);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0)
		rc = add_log(fs, ls, &item);
	bi_iter_end(&it);
	return rc;
}

/* The csum and extent trees as sources; either may be absent. */
static int global_trees(struct btrfsimg_fs *fs, struct bi_lr_trees *t, struct fs_src *csum,
			struct fs_src *ext, struct bi_lr_array *empty)
{
	*csum = *ext = (struct fs_src){ fs, { 0 } };
	*t = (struct bi_lr_trees){ { fs_first, fs_last, csum }, { fs_first, fs_last, ext } };
	int rc = bi_root_find(fs, OBJ_CSUM_TREE, &csum->root);
	if (rc == -ENOENT)
		bi_lr_src_array(&t->csum, empty);
	if (rc && rc != -ENOENT)
		return rc;
	rc = bi_root_find(fs, OBJ_EXTENT_TREE, &ext->root);
	if (rc == -ENOENT)
		t->extent.first = NULL;	/* reference counts unknown: nothing is freed */
	return rc == -ENOENT ? 0 : rc;
}

static struct bi_lr_params replay_params(const struct btrfsimg_fs *fs, uint64_t log_bytes)
{
	uint64_t inc = fs->sb.info.incompat_flags;
	return (struct bi_lr_params){
		.transid = fs->sb.info.generation + 1,
		.sectorsize = fs->sectorsize,
		.nodesize = fs->nodesize,
		.csum_size = fs->csum_size,
		.no_holes = inc & INCOMPAT_NO_HOLES,
		.extended_iref = inc & INCOMPAT_EXTENDED_IREF,
		.max_bytes = DEFAULT_MAX_BYTES > 16 * log_bytes ? 0 : 16 * log_bytes,
	};
}

int bi_log_replay(struct btrfsimg_fs *fs)
{
	if ((fs->opts.flags & BTRFSIMG_OPEN_NO_LOG_REPLAY) || !fs->sb.info.log_root)
		return 0;
	if (fs->overlays)
		return bi_err(fs, -EINVAL, "log replay: overlays exist already");
	struct log_set ls = { 0 };
	struct fs_src csum, ext;
	struct bi_lr_array empty = { NULL, 0 };
	struct bi_lr_trees trees;
	struct bi_overlay *ovl = NULL;
	char why[768] = "";
	fs->err[0] = '\0';
	int rc = load_logs(fs, &ls);
	if (rc == 0)
		rc = global_trees(fs, &trees, &csum, &ext, &empty);
	if (rc == 0) {
		struct bi_lr_params p = replay_params(fs, ls.bytes);
		rc = bi_lr_replay(&p, ls.logs, ls.n, &trees, &ovl, why, sizeof(why));
	}
	log_set_free(&ls);
	if (rc == 0) {
		struct bi_overlay **tail = &fs->overlays;
		while (*tail)
			tail = &(*tail)->next;
		*tail = ovl;
		bi_info(fs, "replayed the log tree of generation %llu",
			(unsigned long long)fs->sb.info.generation + 1);
		return 0;
	}
	/* The kernel refuses to mount such an image; show what was committed. */
	bi_damage(fs, "log tree not replayed (error %d; the kernel would not mount this image), "
		  "showing the last committed state: %s%s%s", rc, why,
		  why[0] && fs->err[0] ? "; " : "", fs->err);
	fs->err[0] = '\0';
	return 0;
}
