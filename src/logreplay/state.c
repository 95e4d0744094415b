/* SPDX-License-Identifier: MIT */
/*
 * Log tree replay: the state it works on.
 *
 * Replay never writes a tree. Each tree it changes (a subvolume's fs tree,
 * the csum tree, the extent reference counts) is a view: the tree's own
 * items, read through a bi_lr_src, under an ordered map (AVL) of replaced
 * items and tombstones. Reads merge the two; writes go to the map only. At
 * the end each view's map becomes an overlay (btrfs/overlay.c) for the readers.
 * Also here: the in-memory inodes (one lives while it is referenced, as
 * the kernel's do during replay), the parsers of the log's items, and the
 * array source that tests and fuzzing use instead of a tree.
 *
 * Separate from the replay operations (ops.c) because none of this
 * knows the kernel's replay procedure: it is the storage, and the place
 * where its limits are enforced. The map's memory is limited (max_bytes)
 * and so is the work (max_steps), so a hostile log fails with a message
 * instead of exhausting memory or time; every item is parsed "header
 * fits, then whole entry fits".
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cursor.h"
#include "base/err.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"
#include "btrfs/tree.h"
#include "logreplay/replay.h"
#include "logreplay/state.h"

#define M_CHR 0020000u
#define M_BLK 0060000u

/* ------------------------------------------------------------ the map */

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

struct lr_node *bi_lr_map_find(struct lr_node *t, const bi_key *k)
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
struct lr_node *bi_lr_map_bound(struct lr_node *t, const bi_key *k, bool ceil)
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

void bi_lr_map_free(struct lr_node *t)
{
	if (!t)
		return;
	bi_lr_map_free(t->l);
	bi_lr_map_free(t->r);
	free(t->data);
	free(t);
}

bool bi_lr_key_next(const bi_key *k, bi_key *out)
{
	*out = *k;
	if (++out->offset)
		return true;
	if (++out->type)
		return true;
	return ++out->objectid != 0;
}

bool bi_lr_key_prev(const bi_key *k, bi_key *out)
{
	*out = *k;
	if (out->offset--)
		return true;
	if (out->type--)
		return true;
	return out->objectid-- != 0;
}

/* ------------------------------------------------------ context, errors */

void bi_lr_item_free(struct lr_item *it)
{
	free(it->data);
	it->data = NULL;
}

/* Record the first failure, with where it happened; returns @rc. */
int bi_lr_fail(struct lr_ctx *cx, int rc, const char *fmt, ...)
{
	if (cx->why[0])
		return rc;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(cx->why, cx->whylen,
		 "root=%" PRIu64 " stage=%d log item (%" PRIu64 " %u %" PRIu64 "): %s",
		 (cx->fs ? cx->fs->id : 0), cx->stage, cx->cur.objectid, cx->cur.type,
		 cx->cur.offset, msg);
	return rc;
}

static int step(struct lr_ctx *cx)
{
	if (++cx->steps <= cx->max_steps)
		return 0;
	return bi_lr_fail(cx, -E2BIG, "more than %" PRIu64 " item operations, limit reached",
			  cx->max_steps);
}

static int charge(struct lr_ctx *cx, uint64_t n)
{
	cx->bytes += n;
	if (cx->bytes <= cx->max_bytes)
		return 0;
	return bi_lr_fail(cx, -ENOMEM,
			  "replayed items need more than %" PRIu64 " bytes, limit reached",
			  cx->max_bytes);
}

/* ------------------------------------------------------------- the view */

int bi_lr_src_get(struct lr_ctx *cx, struct lr_view *v, bool last, const bi_key *min,
		  const bi_key *max, struct lr_item *out)
{
	out->data = NULL;
	int rc = (last ? v->base.last : v->base.first)(v->base.ctx, min, max, &out->key,
							&out->data, &out->size);
	if (rc < 0)
		return bi_lr_fail(cx, rc, "reading tree %" PRIu64 " failed (error %d)", v->id, rc);
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
	struct lr_node *n = bi_lr_map_bound(v->map, last ? max : min, !last);
	while (n && n->del) {
		bi_key k;
		if (!(last ? bi_lr_key_prev(&n->key, &k) : bi_lr_key_next(&n->key, &k)))
			return NULL;
		n = bi_lr_map_bound(v->map, &k, !last);
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
		rc = bi_lr_src_get(cx, v, last, &lo, &hi, &b);
		if (rc <= 0)
			break;
		if (!bi_lr_map_find(v->map, &b.key)) {
			have = true;
			break;
		}
		bool more = last ? bi_lr_key_prev(&b.key, &hi) : bi_lr_key_next(&b.key, &lo);
		bi_lr_item_free(&b);
		if (!more || (rc = step(cx)))
			break;
	}
	if (rc < 0)
		return rc;
	if (have && (!n || (bi_key_cmp(&b.key, &n->key) < 0) != last)) {
		*out = b;
		return 1;
	}
	bi_lr_item_free(&b);
	return n ? node_copy(n, out) : 0;
}

int bi_view_first(struct lr_ctx *cx, struct lr_view *v, const bi_key *min, const bi_key *max,
		  struct lr_item *out)
{
	return vw_edge(cx, v, min, max, false, out);
}

int bi_view_last(struct lr_ctx *cx, struct lr_view *v, const bi_key *min, const bi_key *max,
		 struct lr_item *out)
{
	return vw_edge(cx, v, min, max, true, out);
}

int bi_view_get(struct lr_ctx *cx, struct lr_view *v, const bi_key *k, struct lr_item *out)
{
	return vw_edge(cx, v, k, k, false, out);
}

static struct lr_node *node_get(struct lr_ctx *cx, struct lr_view *v, const bi_key *k)
{
	struct lr_node *n = bi_lr_map_find(v->map, k);
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

int bi_view_put(struct lr_ctx *cx, struct lr_view *v, const bi_key *k, const void *data,
		uint32_t size)
{
	int rc = step(cx);
	if (rc)
		return rc;
	struct lr_node *n = node_get(cx, v, k);
	if (!n)
		return cx->why[0] ? -ENOMEM : bi_lr_fail(cx, -ENOMEM, "out of memory");
	uint8_t *d = malloc(size ? size : 1);
	if (!d || charge(cx, size)) {
		free(d);
		return cx->why[0] ? -ENOMEM : bi_lr_fail(cx, -ENOMEM, "out of memory");
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

int bi_view_del(struct lr_ctx *cx, struct lr_view *v, const bi_key *k)
{
	int rc = step(cx);
	if (rc)
		return rc;
	struct lr_node *n = node_get(cx, v, k);
	if (!n)
		return cx->why[0] ? -ENOMEM : bi_lr_fail(cx, -ENOMEM, "out of memory");
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
int bi_view_cut(struct lr_ctx *cx, struct lr_view *v, const struct lr_item *it, uint32_t off,
		uint32_t len)
{
	if (len >= it->size)
		return bi_view_del(cx, v, &it->key);
	uint8_t *d = malloc(it->size - len);
	if (!d)
		return bi_lr_fail(cx, -ENOMEM, "out of memory");
	memcpy(d, it->data, off);
	memcpy(d + off, it->data + off + len, it->size - off - len);
	int rc = bi_view_put(cx, v, &it->key, d, it->size - len);
	free(d);
	return rc;
}

/* @it (may be absent: size 0, data NULL) with @add appended. */
int bi_view_append(struct lr_ctx *cx, struct lr_view *v, const bi_key *k,
		   const struct lr_item *it, const uint8_t *add, uint32_t n)
{
	uint32_t old = it ? it->size : 0;
	uint8_t *d = malloc((size_t)old + n + 1);
	if (!d)
		return bi_lr_fail(cx, -ENOMEM, "out of memory");
	if (old)
		memcpy(d, it->data, old);
	memcpy(d + old, add, n);
	int rc = bi_view_put(cx, v, k, d, old + n);
	free(d);
	return rc;
}

/* ---------------------------------------------------------- the log */

size_t bi_lr_log_lower(const struct bi_lr_log *l, const bi_key *k)
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
	size_t i = bi_lr_log_lower(l, k);
	return i < l->n && bi_key_cmp(&l->items[i].key, k) == 0 ? &l->items[i] : NULL;
}

/* ------------------------------------------------------------ parsers */

/* The entry at @pos of an item of type @key_type (DIR_ITEM, DIR_INDEX or
 * XATTR_ITEM), decoded by the checker: the same rules for the log's items
 * and the fs tree's. */
int bi_lr_dent_at(uint8_t key_type, const uint8_t *d, uint32_t size, uint32_t pos,
		  struct lr_dent *e)
{
	struct bi_dir_entry de;
	uint32_t next = pos;
	if (bi_dir_item_next(d, size, key_type, &next, &de, NULL, 0) != 1)
		return -EUCLEAN;
	*e = (struct lr_dent){ .loc = de.location,
			       .type = de.type,
			       .name_len = de.name_len,
			       .name = de.name,
			       .off = pos,
			       .len = next - pos };
	return 0;
}

/* btrfs_match_dir_item_name: 1 and *e when found, 0 if not, -EUCLEAN. */
int bi_lr_dent_find(uint8_t key_type, const uint8_t *d, uint32_t size, const uint8_t *name,
		    uint16_t len, struct lr_dent *e)
{
	for (uint32_t pos = 0; pos < size; pos += e->len) {
		if (bi_lr_dent_at(key_type, d, size, pos, e) < 0)
			return -EUCLEAN;
		if (e->name_len == len && memcmp(e->name, name, len) == 0)
			return 1;
	}
	return 0;
}

int bi_lr_ref_at(bool ext, uint64_t key_off, const uint8_t *d, uint32_t size, uint32_t pos,
		 struct lr_ref *r)
{
	struct bi_ref_entry re;
	uint32_t next = pos;
	int rc = ext ? bi_extref_next(d, size, &next, &re, NULL, 0)
		     : bi_iref_next(d, size, key_off, &next, &re, NULL, 0);
	if (rc != 1)
		return -EUCLEAN;
	*r = (struct lr_ref){ .parent = re.parent,
			      .index = re.index,
			      .name_len = re.name_len,
			      .name = re.name,
			      .off = pos,
			      .len = next - pos };
	return 0;
}

/* btrfs_find_name_in_backref / _ext_backref (@parent checked for extrefs). */
int bi_lr_ref_find(bool ext, uint64_t key_off, const uint8_t *d, uint32_t size,
		   uint64_t parent, const uint8_t *name, uint16_t len, struct lr_ref *r)
{
	for (uint32_t pos = 0; pos < size; pos += r->len) {
		if (bi_lr_ref_at(ext, key_off, d, size, pos, r) < 0)
			return -EUCLEAN;
		if ((!ext || r->parent == parent) && r->name_len == len &&
		    memcmp(r->name, name, len) == 0)
			return 1;
	}
	return 0;
}

int bi_lr_corrupt_item(struct lr_ctx *cx, const bi_key *k, const char *what)
{
	return bi_lr_fail(cx, -EUCLEAN,
			  "corrupt item (%" PRIu64 " %u %" PRIu64 ") in tree %" PRIu64 ": %s",
			  k->objectid, k->type, k->offset, cx->fs->id, what);
}

/* Does the log hold the name (with @parent for extrefs) under key @k? */
int bi_lr_log_has_ref(struct lr_ctx *cx, const bi_key *k, uint64_t parent,
		      const uint8_t *name, uint16_t len)
{
	const struct bi_lr_item *li = log_get(cx->log, k);
	if (!li)
		return 0;
	struct lr_ref r;
	int rc = bi_lr_ref_find(k->type == KT_INODE_EXTREF, k->offset, li->data, li->size, parent,
				name, len, &r);
	return rc < 0 ? bi_lr_corrupt_item(cx, k, "bad inode ref in the log") : rc;
}

int bi_lr_log_has_dent(struct lr_ctx *cx, const bi_key *k, const uint8_t *name, uint16_t len)
{
	const struct bi_lr_item *li = log_get(cx->log, k);
	if (!li)
		return 0;
	struct lr_dent e;
	int rc = bi_lr_dent_find(k->type, li->data, li->size, name, len, &e);
	return rc < 0 ? bi_lr_corrupt_item(cx, k, "bad dir entry in the log") : rc;
}

int bi_lr_fe_parse(struct lr_ctx *cx, const bi_key *k, const uint8_t *d, uint32_t size,
		   struct lr_fe *fe)
{
	struct bi_extent e;
	char why[160];
	if (bi_extent_parse(d, size, k->offset, cx->p->sectorsize, &e, why, sizeof(why)) < 0)
		return bi_lr_corrupt_item(cx, k, why);
	*fe = (struct lr_fe){ .type = e.type,
			      .compression = e.compression,
			      .ram_bytes = e.ram_bytes,
			      .disk_bytenr = e.disk_bytenr,
			      .disk_num_bytes = e.disk_num_bytes,
			      .offset = e.offset,
			      .num_bytes = e.num_bytes };
	/* btrfs_drop_extents' extent_end: an inline extent ends ram_bytes
	 * after its key, not at the sector the reader rounds up to. */
	uint64_t len = e.type == FE_TYPE_INLINE ? e.ram_bytes : e.num_bytes;
	if (!bi_add_ok(k->offset, len, &fe->end))
		return bi_lr_corrupt_item(cx, k, "file extent end overflows");
	return 0;
}

int bi_lr_csum_range(struct lr_ctx *cx, const bi_key *k, uint32_t size, uint64_t *end)
{
	uint64_t n = size / cx->p->csum_size;
	if (size == 0 || size % cx->p->csum_size || k->offset % cx->p->sectorsize ||
	    !bi_add_ok(k->offset, n * cx->p->sectorsize, end))
		return bi_lr_fail(cx, -EUCLEAN,
				  "bad checksum item (%" PRIu64 " %u %" PRIu64 ") size %u",
				  k->objectid, k->type, k->offset, size);
	return 0;
}

/* ------------------------------------------------------------ inodes */

/* btrfs_iget: the held inode, or a fresh one read from the view.
 * -ENOENT (no message) if the inode item does not exist. */
int bi_lr_iget(struct lr_ctx *cx, uint64_t ino, struct lr_inode **out)
{
	for (struct lr_inode *h = cx->held; h; h = h->next)
		if (h->ino == ino) {
			h->refs++;
			*out = h;
			return 0;
		}
	bi_key k = { ino, KT_INODE_ITEM, 0 };
	struct lr_item it;
	int rc = bi_view_get(cx, cx->fs, &k, &it);
	if (rc <= 0)
		return rc ? rc : -ENOENT;
	struct lr_inode *in = calloc(1, sizeof(*in));
	if (it.size != INODE_ITEM_SIZE || !in) {
		bi_lr_item_free(&it);
		free(in);
		return in ? bi_lr_corrupt_item(cx, &k, "inode item size is not 160")
			  : bi_lr_fail(cx, -ENOMEM, "out of memory");
	}
	memcpy(in->item, it.data, INODE_ITEM_SIZE);
	bi_lr_item_free(&it);
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

/* bi_lr_iget, where a missing inode is corrupt (the kernel aborts the replay). */
int bi_lr_iget_must(struct lr_ctx *cx, uint64_t ino, struct lr_inode **out)
{
	int rc = bi_lr_iget(cx, ino, out);
	if (rc == -ENOENT)
		return bi_lr_fail(cx, -EUCLEAN, "inode %" PRIu64 " does not exist", ino);
	return rc;
}

void bi_lr_iput(struct lr_ctx *cx, struct lr_inode *in)
{
	if (!in || --in->refs > 0)
		return;
	struct lr_inode **pp = &cx->held;
	while (*pp != in)
		pp = &(*pp)->next;
	*pp = in->next;
	free(in);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* btrfs_update_inode (direct, as during log recovery): fill_inode_item
 * writes every field of the in-memory inode into the current item, whose
 * reserved bytes stay; transid becomes the replay transaction's. */
int bi_lr_iupdate(struct lr_ctx *cx, struct lr_inode *in)
{
	bi_key k = { in->ino, KT_INODE_ITEM, 0 };
	struct lr_item it;
	int rc = bi_view_get(cx, cx->fs, &k, &it);
	if (rc <= 0)
		return rc ? rc : bi_lr_fail(cx, -EUCLEAN, "inode %" PRIu64 " vanished", in->ino);
	if (it.size != INODE_ITEM_SIZE) {
		bi_lr_item_free(&it);
		return bi_lr_corrupt_item(cx, &k, "inode item size is not 160");
	}
	uint8_t out[INODE_ITEM_SIZE];
	memcpy(out, it.data, sizeof(out));
	bi_lr_item_free(&it);
	const uint8_t *m = in->item;
	memcpy(out + INODE_UID, m + INODE_UID, 8);		/* uid, gid */
	memcpy(out + INODE_ATIME, m + INODE_ATIME, 4 * TIMESPEC_SIZE);
	memcpy(out + INODE_GENERATION, m + INODE_GENERATION, 8);
	memcpy(out + INODE_FLAGS, m + INODE_FLAGS, 8);
	bi_put_le64(out + INODE_SIZE_OFF, in->size);
	bi_put_le64(out + INODE_NBYTES, in->nbytes);
	put32(out + INODE_NLINK, in->nlink);
	put32(out + INODE_MODE, in->mode);
	bi_put_le64(out + INODE_SEQUENCE, in->seq);
	bi_put_le64(out + INODE_TRANSID, cx->p->transid);
	bi_put_le64(out + INODE_BLOCK_GROUP, 0);
	/* i_rdev is a 32-bit dev_t, kept only for device nodes */
	uint32_t fmt = in->mode & M_FMT;
	bi_put_le64(out + INODE_RDEV, fmt == M_CHR || fmt == M_BLK ? bi_le32(m + INODE_RDEV) : 0);
	return bi_view_put(cx, cx->fs, &k, out, sizeof(out));
}

/* ------------------------------------------------------------ overlays */

/* In-order walk filling the overlay (data moves from the map). */
static int emit_walk(struct lr_ctx *cx, struct lr_view *v, struct lr_node *n,
		     struct bi_log_overlay *o, bool count)
{
	if (!n)
		return 0;
	int rc = emit_walk(cx, v, n->l, o, count);
	if (rc)
		return rc;
	if (n->del && n->in_base < 0) {
		struct lr_item it;
		rc = bi_lr_src_get(cx, v, false, &n->key, &n->key, &it);
		if (rc < 0)
			return rc;
		bi_lr_item_free(&it);
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

int bi_lr_emit(struct lr_ctx *cx, struct lr_view *v, struct bi_log_overlay **list)
{
	struct bi_log_overlay c = { 0 };
	int rc = emit_walk(cx, v, v->map, &c, true);
	if (rc || (!c.nputs && !c.ndels))
		return rc;
	struct bi_log_overlay *o = calloc(1, sizeof(*o));
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
		return bi_lr_fail(cx, -ENOMEM, "out of memory");
	}
	o->root = v->id;
	rc = emit_walk(cx, v, v->map, o, false);
	o->next = *list;
	*list = o;
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
