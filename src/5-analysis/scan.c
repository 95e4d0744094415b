/* SPDX-License-Identifier: MIT */
/*
 * Whole-tree scans that must stay fast when hundreds of snapshots share
 * one large fs tree.
 *
 * Snapshots share leaves. Each distinct leaf (by bytenr and generation) is
 * decoded once into a summary: the objectids of its INODE_ITEMs (sorted,
 * because keys are) and its directory entries that name subvolumes. A
 * subvolume's leaves are found by walking only its internal nodes. The
 * first tree made of leaves no earlier set holds gets a full set, the
 * concatenation of its leaves' objectids. A later tree whose leaves come
 * mostly from one full set (a snapshot, diverged or not) is stored as that
 * set minus the objectids it lacks plus those only it has, found by
 * comparing only the leaves the two do not share, unless that difference
 * is as large as the tree: memory grows with how the snapshots differ, not
 * with how many there are.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "5-analysis/scan.h"

#include "0-base/cursor.h"
#include "0-base/err.h"
#include "0-base/handle.h"
#include "0-base/key.h"
#include "0-base/ondisk.h"
#include "3-btrfs/check.h"
#include "3-btrfs/tree.h"

struct leafsum {
	uint64_t bytenr, generation;
	uint64_t *ids;
	uint32_t nids;
	struct bi_subent *subents;
	uint32_t nsub;
	struct bi_tree_ids *owner;	/* the first full set made with this leaf */
	uint64_t in_tree, in_base;	/* bi_scan.epoch when marked (set differences) */
};

struct bi_scan {
	struct btrfsimg_fs *fs;
	struct leafsum **slots;	/* open addressing by bytenr */
	size_t nslots, used;
	struct bi_tree_ids **sets;	/* the full sets, bases for later trees */
	size_t nsets, capsets;
	uint64_t epoch;
};

struct bi_scan *bi_scan_new(struct btrfsimg_fs *fs)
{
	struct bi_scan *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->fs = fs;
	s->nslots = 1024;
	s->slots = calloc(s->nslots, sizeof(*s->slots));
	if (!s->slots) {
		free(s);
		return NULL;
	}
	return s;
}

void bi_tree_ids_put(struct bi_tree_ids *set)
{
	if (set && --set->refs == 0) {
		bi_tree_ids_put(set->base); /* bases are full sets: one level */
		free(set->ids);
		free(set->del);
		free(set->leaves);
		free(set);
	}
}

void bi_scan_free(struct bi_scan *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nslots; i++)
		if (s->slots[i]) {
			free(s->slots[i]->ids);
			free(s->slots[i]->subents);
			free(s->slots[i]);
		}
	for (size_t i = 0; i < s->nsets; i++)
		bi_tree_ids_put(s->sets[i]);
	free(s->sets);
	free(s->slots);
	free(s);
}

static size_t slot_of(uint64_t bytenr, size_t nslots)
{
	return (size_t)((bytenr >> 12) * 0x9E3779B97F4A7C15ull >> 32) & (nslots - 1);
}

static struct leafsum *memo_get(struct bi_scan *s, uint64_t bytenr)
{
	for (size_t i = slot_of(bytenr, s->nslots);; i = (i + 1) & (s->nslots - 1)) {
		if (!s->slots[i])
			return NULL;
		if (s->slots[i]->bytenr == bytenr)
			return s->slots[i];
	}
}

static int memo_grow(struct bi_scan *s)
{
	size_t n = s->nslots * 2;
	struct leafsum **v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t k = 0; k < s->nslots; k++) {
		if (!s->slots[k])
			continue;
		size_t i = slot_of(s->slots[k]->bytenr, n);
		while (v[i])
			i = (i + 1) & (n - 1);
		v[i] = s->slots[k];
	}
	free(s->slots);
	s->slots = v;
	s->nslots = n;
	return 0;
}

static int memo_put(struct bi_scan *s, struct leafsum *l)
{
	if ((s->used + 1) * 2 > s->nslots && memo_grow(s) < 0)
		return -ENOMEM;
	size_t i = slot_of(l->bytenr, s->nslots);
	while (s->slots[i])
		i = (i + 1) & (s->nslots - 1);
	s->slots[i] = l;
	s->used++;
	return 0;
}

static bool is_inode_objectid(uint64_t id)
{
	return id >= OBJ_FIRST_FREE && id <= OBJ_LAST_FREE;
}

/* A DIR_INDEX entry whose location is a ROOT_ITEM: a subvolume (or stub). */
static int add_subent(struct btrfsimg_fs *fs, struct leafsum *l, const struct bi_block *b,
		      uint32_t slot, const bi_key *k, const uint8_t *d, uint32_t size)
{
	struct bi_cur c = bi_cur_make(d, size);
	uint16_t nlen = bi_u16(&c, DI_NAME_LEN);
	const uint8_t *name = bi_bytes(&c, DI_SIZE, nlen);
	if (c.bad || nlen == 0 || nlen > 255)
		return bi_err(fs, -EUCLEAN,
			      "corrupt dir index: block=%" PRIu64
			      " slot=%u, name length %u, item size %u",
			      b->bytenr, slot, nlen, size);
	struct bi_subent *e = &l->subents[l->nsub++];
	e->dir = k->objectid;
	e->index = k->offset;
	e->child = bi_le64(d + DI_LOCATION);
	e->name_len = nlen;
	memcpy(e->name, name, nlen);
	return 0;
}

static int summarize_leaf(struct bi_scan *s, const struct bi_block *b, struct leafsum **out)
{
	struct leafsum *l = calloc(1, sizeof(*l));
	uint32_t nids = 0, nsub = 0;
	if (!l)
		return bi_err(s->fs, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < b->nritems; i++) {
		bi_key k;
		const uint8_t *d;
		uint32_t size;
		bi_leaf_item(b, i, &k, &d, &size);
		nids += k.type == KT_INODE_ITEM && is_inode_objectid(k.objectid);
		nsub += k.type == KT_DIR_INDEX && size > DI_LOCATION + 8 &&
			d[DI_LOCATION + 8] == KT_ROOT_ITEM;
	}
	l->bytenr = b->bytenr;
	l->generation = b->generation;
	l->ids = malloc((nids ? nids : 1) * sizeof(*l->ids));
	l->subents = nsub ? calloc(nsub, sizeof(*l->subents)) : NULL;
	int rc = (!l->ids || (nsub && !l->subents)) ? bi_err(s->fs, -ENOMEM, "out of memory") : 0;
	for (uint32_t i = 0; rc == 0 && i < b->nritems; i++) {
		bi_key k;
		const uint8_t *d;
		uint32_t size;
		bi_leaf_item(b, i, &k, &d, &size);
		if (k.type == KT_INODE_ITEM && is_inode_objectid(k.objectid))
			l->ids[l->nids++] = k.objectid;
		else if (k.type == KT_DIR_INDEX && size > DI_LOCATION + 8 &&
			 d[DI_LOCATION + 8] == KT_ROOT_ITEM)
			rc = add_subent(s->fs, l, b, i, &k, d, size);
	}
	if (rc == 0)
		rc = memo_put(s, l) < 0 ? bi_err(s->fs, -ENOMEM, "out of memory") : 0;
	if (rc < 0) {
		free(l->ids);
		free(l->subents);
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}

/* The list of leaf summaries of one tree, in key order. */
struct leaflist {
	struct leafsum **v;
	size_t n, cap;
};

static int leaflist_add(struct btrfsimg_fs *fs, struct leaflist *ll, struct leafsum *l)
{
	if (ll->n == ll->cap) {
		size_t cap = ll->cap ? ll->cap * 2 : 256;
		void *v = realloc(ll->v, cap * sizeof(*ll->v));
		if (!v)
			return bi_err(fs, -ENOMEM, "out of memory");
		ll->v = v;
		ll->cap = cap;
	}
	ll->v[ll->n++] = l;
	return 0;
}

/* Depth-first over internal nodes; leaves come from the memo when known.
 * The parent's expectations (level, generation, first key) are checked on
 * every block read, so a pointer loop cannot recurse: levels decrease. */
static int walk_nodes(struct bi_scan *s, uint64_t treeid, uint64_t bytenr,
		      const struct bi_expect *e, struct leaflist *ll)
{
	struct leafsum *l = e->level == 0 ? memo_get(s, bytenr) : NULL;
	if (l && l->generation == e->generation)
		return leaflist_add(s->fs, ll, l);
	struct bi_block *b;
	int rc = bi_block_read(s->fs, bytenr, e, &b);
	if (rc < 0)
		return rc;
	if (b->level == 0) {
		rc = l ? bi_err(s->fs, -EUCLEAN, "leaf %" PRIu64 " read with two generations",
				bytenr)
		       : summarize_leaf(s, b, &l);
		if (rc == 0)
			rc = leaflist_add(s->fs, ll, l);
		bi_block_put_once(s->fs, b); /* the summary stands for it now */
		return rc;
	}
	for (uint32_t i = 0; rc == 0 && i < b->nritems; i++) {
		bi_key k;
		uint64_t ptr, gen;
		bi_node_ptr(b, i, &k, &ptr, &gen);
		struct bi_expect ce = { treeid, gen, b->level - 1, &k };
		rc = walk_nodes(s, treeid, ptr, &ce, ll);
	}
	bi_block_put(s->fs, b);
	return rc;
}

/* Inode items are unique keys of one tree: their objectids must rise
 * across leaves too. Each leaf was checked on its own; this catches a node
 * pointing at a leaf out of order (or twice). */
static int check_ascending(struct bi_scan *s, const struct bi_root *r,
			   const struct leaflist *ll)
{
	uint64_t last = 0;
	for (size_t i = 0; i < ll->n; i++) {
		const struct leafsum *l = ll->v[i];
		if (!l->nids)
			continue;
		if (l->ids[0] <= last)
			return bi_err(s->fs, -EUCLEAN,
				      "corrupt tree %" PRIu64 ": leaf %" PRIu64
				      " starts with inode %" PRIu64 ", not after "
				      "inode %" PRIu64 " of an earlier leaf",
				      r->id, l->bytenr, l->ids[0], last);
		last = l->ids[l->nids - 1];
	}
	return 0;
}

/* Concatenate the leaves' ids (ascending, as checked). The set keeps the
 * leaf list and becomes the owner of the leaves no set owned yet. */
static int materialize(struct bi_scan *s, struct leaflist *ll, struct bi_tree_ids **out)
{
	size_t n = 0;
	for (size_t i = 0; i < ll->n; i++)
		n += ll->v[i]->nids;
	struct bi_tree_ids *set = calloc(1, sizeof(*set));
	if (!set || !(set->ids = malloc((n ? n : 1) * sizeof(uint64_t)))) {
		free(set);
		return bi_err(s->fs, -ENOMEM, "out of memory for %zu inode numbers", n);
	}
	for (size_t i = 0; i < ll->n; i++) {
		struct leafsum *l = ll->v[i];
		memcpy(set->ids + set->nids, l->ids, l->nids * sizeof(uint64_t));
		set->nids += l->nids;
		if (!l->owner)
			l->owner = set;
	}
	set->n = set->nids;
	set->max_id = n ? set->ids[n - 1] : 0;
	set->leaves = (void **)ll->v;
	set->nleaves = ll->n;
	set->refs = 1;
	ll->v = NULL;
	*out = set;
	return 0;
}

/* The full set that made most of these leaves (delta_of then weighs the
 * difference). Only a few candidates are counted: a snapshot's leaves come
 * from one or two sets. */
static struct bi_tree_ids *best_base(const struct leaflist *ll)
{
	struct cand {
		struct bi_tree_ids *set;
		size_t n;
	} cand[8];
	size_t nc = 0, best = 0;
	for (size_t i = 0; i < ll->n; i++) {
		struct bi_tree_ids *o = ll->v[i]->owner;
		size_t k = 0;
		while (k < nc && cand[k].set != o)
			k++;
		if (!o || (k == nc && nc == 8))
			continue;
		if (k == nc)
			cand[nc++] = (struct cand){ o, 0 };
		if (++cand[k].n > cand[best].n)
			best = k;
	}
	return nc ? cand[best].set : NULL;
}

/* Whether leaf @l is in the other list: the tree's (in_tree) or the
 * base's (in_base), as marked at @epoch. */
static bool marked(const struct leafsum *l, bool tree_mark, uint64_t epoch)
{
	return (tree_mark ? l->in_tree : l->in_base) == epoch;
}

/* The leaves of one list that the other lacks, in order (key order, so
 * their objectids ascend), as runs of ids. */
struct idcur {
	struct leafsum *const *v;
	size_t n, i;
	bool tree_mark;
	uint64_t epoch;
};

static bool idcur_run(struct idcur *c, const uint64_t **p, const uint64_t **end)
{
	for (; c->i < c->n; c->i++) {
		const struct leafsum *l = c->v[c->i];
		if (!marked(l, c->tree_mark, c->epoch) && l->nids) {
			*p = l->ids;
			*end = l->ids + l->nids;
			c->i++;
			return true;
		}
	}
	return false;
}

struct idvec {
	uint64_t *v;
	size_t n, cap;
};

static int idvec_push(struct bi_scan *s, struct idvec *a, uint64_t id)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 64;
		uint64_t *v = realloc(a->v, cap * sizeof(*v));
		if (!v)
			return bi_err(s->fs, -ENOMEM, "out of memory for inode numbers");
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = id;
	return 0;
}

/* Give back the doubling's spare room (kept if that fails: only larger). */
static uint64_t *shrunk(struct idvec *a)
{
	if (!a->n) {
		free(a->v);
		return NULL;
	}
	uint64_t *w = realloc(a->v, a->n * sizeof(*w));
	return w ? w : a->v;
}

/* del = ids of @gone not in @fresh, add = ids of @fresh not in @gone: what
 * both hold was only rewritten (a leaf copied on write), not added or
 * deleted. Stops with 1 once they reach @limit ids. */
static int differences(struct bi_scan *s, struct idcur *gone, struct idcur *fresh,
		       size_t limit, struct idvec *del, struct idvec *add)
{
	const uint64_t *pa = NULL, *ea = NULL, *pb = NULL, *eb = NULL;
	bool ha = idcur_run(gone, &pa, &ea), hb = idcur_run(fresh, &pb, &eb);
	int rc = 0;
	while (rc == 0 && (ha || hb)) {
		while (ha && hb && pa < ea && pb < eb && rc == 0) {
			if (*pa == *pb)
				pa++, pb++;
			else if (*pa < *pb)
				rc = idvec_push(s, del, *pa++);
			else
				rc = idvec_push(s, add, *pb++);
		}
		while (rc == 0 && ha && !hb && pa < ea)
			rc = idvec_push(s, del, *pa++);
		while (rc == 0 && hb && !ha && pb < eb)
			rc = idvec_push(s, add, *pb++);
		if (ha && pa == ea)
			ha = idcur_run(gone, &pa, &ea);
		if (hb && pb == eb)
			hb = idcur_run(fresh, &pb, &eb);
		if (rc == 0 && del->n + add->n >= limit)
			rc = 1;
	}
	return rc;
}

/* The largest objectid of base - del + add. del is inside the base, both
 * ascending: the base's top ids that del removes are del's top ids. */
static uint64_t delta_max(const struct bi_tree_ids *base, const uint64_t *del, size_t ndel,
			  const uint64_t *add, size_t nadd)
{
	size_t i = base->nids, j = ndel;
	while (i && j && base->ids[i - 1] == del[j - 1])
		i--, j--;
	uint64_t top = i ? base->ids[i - 1] : 0;
	return nadd && add[nadd - 1] > top ? add[nadd - 1] : top;
}

/* The tree as @base minus the ids it lacks plus the ids only it has, found
 * by comparing only the leaves the two do not share. Returns 1 when those
 * would be as many ids as the tree's own: a full set is then no larger. */
static int delta_of(struct bi_scan *s, struct bi_tree_ids *base, struct leaflist *ll,
		    struct bi_tree_ids **out)
{
	struct leafsum **bl = (struct leafsum **)base->leaves;
	uint64_t epoch = ++s->epoch;
	size_t own = 0;
	for (size_t i = 0; i < ll->n; i++) {
		ll->v[i]->in_tree = epoch;
		own += ll->v[i]->nids;
	}
	for (size_t i = 0; i < base->nleaves; i++)
		bl[i]->in_base = epoch;
	struct idcur gone = { bl, base->nleaves, 0, true, epoch };
	struct idcur fresh = { ll->v, ll->n, 0, false, epoch };
	struct idvec del = { 0 }, add = { 0 };
	int rc = differences(s, &gone, &fresh, own, &del, &add);
	struct bi_tree_ids *set = rc == 0 ? calloc(1, sizeof(*set)) : NULL;
	if (!set) {
		free(del.v);
		free(add.v);
		return rc ? rc : bi_err(s->fs, -ENOMEM, "out of memory");
	}
	*set = (struct bi_tree_ids){ .base = base, .ids = shrunk(&add), .nids = add.n,
				  .del = shrunk(&del), .ndel = del.n,
				  .n = base->n - del.n + add.n, .refs = 1 };
	set->max_id = delta_max(base, set->del, set->ndel, set->ids, set->nids);
	base->refs++;
	*out = set;
	return 0;
}

static int remember_set(struct bi_scan *s, struct bi_tree_ids *set)
{
	if (s->nsets == s->capsets) {
		size_t cap = s->capsets ? s->capsets * 2 : 16;
		void *v = realloc(s->sets, cap * sizeof(*s->sets));
		if (!v)
			return bi_err(s->fs, -ENOMEM, "out of memory");
		s->sets = v;
		s->capsets = cap;
	}
	s->sets[s->nsets++] = set;
	set->refs++;
	return 0;
}

static int ids_push(struct btrfsimg_fs *fs, struct bi_tree_ids *set, size_t *cap, uint64_t id)
{
	if (set->nids == *cap) {
		size_t c = *cap ? *cap * 2 : 1024;
		uint64_t *v = realloc(set->ids, c * sizeof(*v));
		if (!v)
			return bi_err(fs, -ENOMEM, "out of memory for inode numbers");
		set->ids = v;
		*cap = c;
	}
	set->ids[set->nids++] = id;
	set->n = set->nids;
	set->max_id = id; /* the merged view is in key order */
	return 0;
}

static int merged_subent(struct btrfsimg_fs *fs, const struct bi_item *it, bi_subent_fn fn,
			 void *ctx)
{
	struct bi_cur c = bi_cur_make(it->data, it->size);
	uint16_t nlen = bi_u16(&c, DI_NAME_LEN);
	const uint8_t *name = bi_bytes(&c, DI_SIZE, nlen);
	if (c.bad || nlen == 0 || nlen > 255)
		return bi_err(fs, -EUCLEAN,
			      "corrupt dir index: dir %" PRIu64 " index %" PRIu64
			      ", name length %u, item size %u",
			      it->key.objectid, it->key.offset, nlen, it->size);
	struct bi_subent e = { it->key.objectid, it->key.offset, bi_le64(it->data + DI_LOCATION),
			       nlen, { 0 } };
	memcpy(e.name, name, nlen);
	return fn ? fn(ctx, &e) : 0;
}

/*
 * A tree with a replayed log (an overlay, see logtree.c) is not the sum of
 * its leaves: walk it item by item through the merged view instead. Such a
 * set is private (a log belongs to one tree).
 */
static int scan_merged(struct bi_scan *s, const struct bi_root *r, struct bi_tree_ids **out,
		       bi_subent_fn fn, void *ctx)
{
	struct bi_tree_ids *set = calloc(1, sizeof(*set));
	if (!set)
		return bi_err(s->fs, -ENOMEM, "out of memory");
	set->refs = 1;
	size_t cap = 0;
	bi_key min = { OBJ_FIRST_FREE, 0, 0 }, max = { OBJ_LAST_FREE, 255, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(s->fs, &it, r, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = 0;
		if (item.key.type == KT_INODE_ITEM)
			rc = ids_push(s->fs, set, &cap, item.key.objectid);
		else if (item.key.type == KT_DIR_INDEX && item.size > DI_LOCATION + 8 &&
			 item.data[DI_LOCATION + 8] == KT_ROOT_ITEM)
			rc = merged_subent(s->fs, &item, fn, ctx);
	}
	bi_iter_end(&it);
	if (rc < 0 || !out) {
		bi_tree_ids_put(set);
		return rc;
	}
	*out = set;
	return 0;
}

int bi_scan_tree(struct bi_scan *s, const struct bi_root *r, struct bi_tree_ids **out,
		 bi_subent_fn fn, void *ctx)
{
	if (bi_overlay_for(s->fs, r->id))
		return scan_merged(s, r, out, fn, ctx);
	struct leaflist ll = { 0 };
	struct bi_expect e = { r->id, r->generation, r->level, NULL };
	int rc = walk_nodes(s, r->id, r->bytenr, &e, &ll);
	if (rc == 0)
		rc = check_ascending(s, r, &ll);
	for (size_t i = 0; rc == 0 && fn && i < ll.n; i++)
		for (uint32_t k = 0; rc == 0 && k < ll.v[i]->nsub; k++)
			rc = fn(ctx, &ll.v[i]->subents[k]);
	if (rc < 0 || !out) {
		free(ll.v);
		return rc;
	}
	struct bi_tree_ids *base = best_base(&ll);
	rc = base ? delta_of(s, base, &ll, out) : 1;
	if (rc == 1) {
		rc = materialize(s, &ll, out);
		if (rc == 0 && (rc = remember_set(s, *out)) < 0)
			bi_tree_ids_put(*out);
	}
	free(ll.v);
	return rc;
}
