// SPDX-License-Identifier: MIT
/*
 * Two trees compared (see treecmp.h).
 *
 * Each side keeps a cursor: the one path (btrfs/path.h) from its root
 * and the level it stands on. At a node level the cursor stands on a pointer (its key is the first
 * key of the subtree behind it); at level 0 on an item. The two cursors
 * move so that the one standing on the smaller key, or higher up the tree,
 * moves first; two pointers with the same key, address and generation lead
 * to the same subtree, and both cursors step over it without reading it.
 * Items are only ever compared at level 0, so the answer does not depend
 * on how the two trees happen to be split into blocks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/treecmp.h"

#include "base/err.h"
#include "base/grow.h"
#include "base/ondisk.h"
#include "btrfs/path.h"
#include "btrfs/tree.h"

/* One side: the one path of btrfs/path.h, and the level it stands on. */
struct cursor {
	struct bi_path p;
	int level;
	bool end;
	uint64_t *reads;
};

static int cursor_start(struct cursor *c, struct btrfsimg_fs *fs, const struct bi_root *r,
			uint64_t *reads)
{
	static const bi_key max = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	memset(c, 0, sizeof(*c));
	c->reads = reads;
	bi_path_init(&c->p, fs, r, &max, true);
	int rc = bi_path_root(&c->p);
	if (rc < 0)
		return rc;
	(*reads)++;
	c->level = c->p.top;
	c->end = c->p.nodes[c->p.top]->nritems == 0;
	return 0;
}

static void cursor_end(struct cursor *c)
{
	bi_path_release(&c->p);
}

static void cursor_key(const struct cursor *c, bi_key *k, uint64_t *ptr, uint64_t *gen)
{
	if (c->level <= 0) {
		const uint8_t *d;
		uint32_t n;
		bi_leaf_item(c->p.nodes[0], c->p.slots[0], k, &d, &n);
		*ptr = *gen = 0;
	} else {
		bi_node_ptr(c->p.nodes[c->level], c->p.slots[c->level], k, ptr, gen);
	}
}

/* To the next slot on this level, climbing while a block is used up: the
 * cursor may end on a higher level, standing on the next subtree. */
static void cursor_next(struct cursor *c)
{
	c->p.slots[c->level]++;
	while (c->p.slots[c->level] >= c->p.nodes[c->level]->nritems) {
		if (c->level == c->p.top) {
			c->end = true;
			return;
		}
		bi_block_put(c->p.fs, c->p.nodes[c->level]);
		c->p.nodes[c->level] = NULL;
		c->level++;
		c->p.slots[c->level]++;
	}
}

/* Into the subtree behind the pointer the cursor stands on. */
static int cursor_down(struct cursor *c)
{
	if (c->level <= 0 || c->level >= MAX_LEVEL)
		return -EUCLEAN; /* callers go down from nodes only */
	int rc = bi_path_down(&c->p, c->level);
	if (rc < 0)
		return rc;
	(*c->reads)++;
	c->level--;
	c->p.slots[c->level] = 0;
	if (c->p.nodes[c->level]->nritems == 0) /* only a root may be empty: step past it */
		cursor_next(c);
	return 0;
}

static struct bi_cmp_side side_of(const struct cursor *c)
{
	struct bi_cmp_side s = { NULL, 0, true };
	bi_key k;
	bi_leaf_item(c->p.nodes[0], c->p.slots[0], &k, &s.data, &s.size);
	return s;
}

static const struct bi_cmp_side absent = { NULL, 0, false };

/* A key range [lo, hi) one side could not read (hi_inf: to the end). */
struct blind {
	bi_key lo, hi;
	bool hi_inf;
};

/* One comparison: the callbacks and the ranges compared no further. */
struct cmp {
	bi_treecmp_fn fn;
	bi_treecmp_unread_fn unread;
	void *ctx;
	struct bi_treecmp_stats *st;
	struct blind *blind;
	size_t nblind, capblind;
};

static bool in_blind(const struct cmp *m, const bi_key *k)
{
	for (size_t i = 0; i < m->nblind; i++)
		if (bi_key_cmp(k, &m->blind[i].lo) >= 0 &&
		    (m->blind[i].hi_inf || bi_key_cmp(k, &m->blind[i].hi) < 0))
			return true;
	return false;
}

/* An item one side has alone, or both with different bytes: reported
 * unless the other side could not read where it would be. */
static int report(struct cmp *m, const bi_key *k, const struct bi_cmp_side *a,
		  const struct bi_cmp_side *b)
{
	return in_blind(m, k) ? 0 : m->fn(m->ctx, k, a, b);
}

/* The first key past the subtree behind the pointer @c stands on: the
 * next pointer's key on its level or, at a node's end, above it. */
static bool bound_after(const struct cursor *c, bi_key *hi)
{
	for (int lvl = c->level; lvl <= c->p.top; lvl++) {
		const struct bi_block *n = c->p.nodes[lvl];
		if (c->p.slots[lvl] + 1 < n->nritems) {
			uint64_t ptr, gen;
			bi_node_ptr(n, c->p.slots[lvl] + 1, hi, &ptr, &gen);
			return true;
		}
	}
	return false;
}

/* Into the subtree behind the pointer @c stands on; when it cannot be
 * read (a block written over, a checksum, a failed check) and the caller
 * takes unread ranges, its key range goes blind on both sides and the
 * cursor steps over it. */
static int down(struct cmp *m, struct cursor *c, bool is_b)
{
	int rc = cursor_down(c);
	if (rc >= 0 || !m->unread || (rc != -EIO && rc != -EUCLEAN))
		return rc;
	int grc = bi_grow((void **)&m->blind, &m->capblind, m->nblind + 1, sizeof(*m->blind));
	if (grc < 0)
		return grc;
	struct blind *b = &m->blind[m->nblind++];
	uint64_t ptr, gen;
	cursor_key(c, &b->lo, &ptr, &gen);
	b->hi_inf = !bound_after(c, &b->hi);
	grc = m->unread(m->ctx, is_b, &b->lo, b->hi_inf ? NULL : &b->hi, rc);
	if (grc)
		return grc;
	cursor_next(c);
	return 0;
}

/* What to do when one side is used up: every item left on the other is
 * reported alone. */
static int drain(struct cmp *m, struct cursor *c, bool is_a)
{
	while (!c->end) {
		if (c->level > 0) {
			int rc = down(m, c, !is_a);
			if (rc < 0)
				return rc;
			continue;
		}
		bi_key k;
		uint64_t p, g;
		cursor_key(c, &k, &p, &g);
		struct bi_cmp_side s = side_of(c);
		int rc = is_a ? report(m, &k, &s, &absent) : report(m, &k, &absent, &s);
		if (rc)
			return rc;
		cursor_next(c);
	}
	return 0;
}

/* Both cursors on items: report the smaller key alone, or the pair if
 * their bytes differ, and step past what was reported. */
static int compare_items(struct cmp *m, struct cursor *a, struct cursor *b)
{
	bi_key ka, kb;
	uint64_t p, g;
	cursor_key(a, &ka, &p, &g);
	cursor_key(b, &kb, &p, &g);
	int cmp = bi_key_cmp(&ka, &kb);
	int rc = 0;
	if (cmp < 0) {
		struct bi_cmp_side s = side_of(a);
		rc = report(m, &ka, &s, &absent);
		cursor_next(a);
	} else if (cmp > 0) {
		struct bi_cmp_side s = side_of(b);
		rc = report(m, &kb, &absent, &s);
		cursor_next(b);
	} else {
		struct bi_cmp_side sa = side_of(a), sb = side_of(b);
		if (sa.size != sb.size || memcmp(sa.data, sb.data, sa.size) != 0)
			rc = report(m, &ka, &sa, &sb);
		cursor_next(a);
		cursor_next(b);
	}
	return rc;
}

/* Both cursors on pointers of one level: the same block on both sides is
 * stepped over; otherwise the side with the smaller key (both, if equal)
 * goes down, as only items are compared. */
static int compare_pointers(struct cmp *m, struct cursor *a, struct cursor *b)
{
	bi_key ka, kb;
	uint64_t pa, ga, pb, gb;
	cursor_key(a, &ka, &pa, &ga);
	cursor_key(b, &kb, &pb, &gb);
	int cmp = bi_key_cmp(&ka, &kb);
	if (cmp < 0)
		return down(m, a, false);
	if (cmp > 0)
		return down(m, b, true);
	if (pa == pb && ga == gb) {
		m->st->subtrees_shared++;
		cursor_next(a);
		cursor_next(b);
		return 0;
	}
	int rc = down(m, a, false);
	return rc < 0 ? rc : down(m, b, true);
}

static int walk_both(struct cmp *m, struct cursor *a, struct cursor *b)
{
	int rc = 0;
	while (rc == 0 && !a->end && !b->end) {
		if (a->level == 0 && b->level == 0)
			rc = compare_items(m, a, b);
		else if (a->level == b->level)
			rc = compare_pointers(m, a, b);
		else
			rc = a->level > b->level ? down(m, a, false) : down(m, b, true);
	}
	if (rc == 0)
		rc = drain(m, a, true);
	if (rc == 0)
		rc = drain(m, b, false);
	return rc;
}

int bi_tree_compare_across(struct btrfsimg_fs *fsa, const struct bi_root *ra,
			   struct btrfsimg_fs *fsb, const struct bi_root *rb, bi_treecmp_fn fn,
			   bi_treecmp_unread_fn unread, void *ctx, struct bi_treecmp_stats *st)
{
	if (bi_overlay_for(fsa, ra->id) || bi_overlay_for(fsb, rb->id))
		return bi_tree_compare_items_across(fsa, ra, fsb, rb, fn, ctx, st);
	memset(st, 0, sizeof(*st));
	if (ra->bytenr == rb->bytenr && ra->generation == rb->generation) {
		st->subtrees_shared = 1;
		return 0;
	}
	struct cursor a, b;
	int rc = cursor_start(&a, fsa, ra, &st->blocks_read);
	if (rc < 0)
		return rc;
	rc = cursor_start(&b, fsb, rb, &st->blocks_read);
	if (rc < 0) {
		cursor_end(&a);
		return rc;
	}
	struct cmp m = { .fn = fn, .unread = unread, .ctx = ctx, .st = st };
	rc = walk_both(&m, &a, &b);
	free(m.blind);
	cursor_end(&a);
	cursor_end(&b);
	return rc;
}

int bi_tree_compare(struct btrfsimg_fs *fs, const struct bi_root *ra, const struct bi_root *rb,
		    bi_treecmp_fn fn, void *ctx, struct bi_treecmp_stats *st)
{
	return bi_tree_compare_across(fs, ra, fs, rb, fn, NULL, ctx, st);
}

/* ------------------------------------------------- every item, merged */

struct stream {
	struct bi_iter it;
	struct bi_item item;
	bool have;
};

static int stream_next(struct stream *s)
{
	int rc = bi_iter_next(&s->it, &s->item);
	if (rc < 0)
		return rc;
	s->have = rc == 1;
	return 0;
}

static int stream_start(struct btrfsimg_fs *fs, struct stream *s, const struct bi_root *r)
{
	static const bi_key min = { 0, 0, 0 };
	static const bi_key max = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	int rc = bi_iter_start(fs, &s->it, r, &min, &max);
	if (rc < 0)
		return rc;
	bi_iter_stream(&s->it);
	return stream_next(s);
}

static struct bi_cmp_side item_side(const struct stream *s)
{
	return (struct bi_cmp_side){ s->item.data, s->item.size, true };
}

static int merge_streams(struct stream *a, struct stream *b, bi_treecmp_fn fn, void *ctx)
{
	int rc = 0;
	while (rc == 0 && (a->have || b->have)) {
		int cmp = !a->have ? 1 : !b->have ? -1 : bi_key_cmp(&a->item.key, &b->item.key);
		struct bi_cmp_side sa = cmp <= 0 ? item_side(a) : absent;
		struct bi_cmp_side sb = cmp >= 0 ? item_side(b) : absent;
		bi_key k = cmp <= 0 ? a->item.key : b->item.key;
		if (cmp != 0 || sa.size != sb.size || memcmp(sa.data, sb.data, sa.size) != 0)
			rc = fn(ctx, &k, &sa, &sb);
		if (rc == 0 && cmp <= 0)
			rc = stream_next(a);
		if (rc == 0 && cmp >= 0)
			rc = stream_next(b);
	}
	return rc;
}

int bi_tree_compare_items_across(struct btrfsimg_fs *fsa, const struct bi_root *ra,
				 struct btrfsimg_fs *fsb, const struct bi_root *rb,
				 bi_treecmp_fn fn, void *ctx, struct bi_treecmp_stats *st)
{
	memset(st, 0, sizeof(*st));
	struct stream a = { 0 }, b = { 0 };
	int rc = stream_start(fsa, &a, ra);
	if (rc == 0)
		rc = stream_start(fsb, &b, rb);
	if (rc == 0)
		rc = merge_streams(&a, &b, fn, ctx);
	bi_iter_end(&b.it);
	bi_iter_end(&a.it);
	return rc;
}

int bi_tree_compare_items(struct btrfsimg_fs *fs, const struct bi_root *ra,
			  const struct bi_root *rb, bi_treecmp_fn fn, void *ctx,
			  struct bi_treecmp_stats *st)
{
	return bi_tree_compare_items_across(fs, ra, fs, rb, fn, ctx, st);
}
