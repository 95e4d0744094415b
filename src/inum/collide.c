/* SPDX-License-Identifier: MIT */
/*
 * Exact collision counting of presented inode numbers over an abstract set
 * of inodes, without expanding shared sets.
 *
 * Model. Subvolume s holds objectids S_s (base + add - del) and presents
 * a as P_s(a) = a ^ c_s, except a == c_s which presents c_s (c_s: 0, the
 * inumbits overlay or the nfsd uniquifier). Extras (stubs) present a fixed
 * number. A group is a presented number held by >= 2 inodes of one device.
 *
 * Signed pieces. Everything a device presents is a sum of pieces (sorted
 * slice A, constant c, weight m): the multiset { a ^ c : a in A }, m times.
 * A subvolume gives base(+1), add(+1), del(-1); the exception a == c_s
 * gives {0}(-1) and {c_s}(+1); an extra gives {ino}(+1). Pieces with the
 * same slice and constant merge first: k snapshots sharing a tree under one
 * constant are one piece of weight k.
 *
 * This file lays a scheme's input out as pieces, device by device, counts
 * each device with the trie (trie.c), fills the examples' members, and
 * gives the one-scheme API; btrfsimg_collide_all (collide_all.c) runs
 * every scheme of a report.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg_inum.h"
#include "inum/collide.h"

#include "base/err.h"
#include "base/search.h"
#include "inum/schemes.h"
#include "inum/trie.h"

#define DEFAULT_MEMBERS 16

static const uint64_t zero_value; /* the image of the exception a == c */

bool bi_idset_has(const struct btrfsimg_idset *s, uint64_t x)
{
	size_t k = s ? bi_lower_bound(s->v, s->n, x) : 0;
	return s && k < s->n && s->v[k] == x;
}

bool bi_collide_subvol_has(const struct btrfsimg_collide_subvol *s, uint64_t a)
{
	if (bi_idset_has(s->add, a))
		return true;
	return bi_idset_has(s->base, a) && !bi_idset_has(s->del, a);
}

uint64_t bi_scheme_const(const struct btrfsimg_scheme *s, uint64_t subvol)
{
	if (s->uniquifier)
		return btrfsimg_uniquifier(subvol);
	return btrfsimg_inumbits_overlay(subvol, s->inumbits);
}

/* Device of subvols[i] (extras: see btrfsimg_collide_extra). */
static uint64_t subvol_dev(const struct btrfsimg_scheme *s, const struct btrfsimg_collide_subvol *v,
			   size_t i)
{
	if (s->numdevs == BTRFSIMG_NUMDEVS_2)
		return v->parity;
	if (s->numdevs == BTRFSIMG_NUMDEVS_MANY)
		return (uint64_t)i + 1;
	return 0;
}

static uint64_t extra_dev(const struct btrfsimg_scheme *s, const struct btrfsimg_collide_extra *e)
{
	return s->numdevs == BTRFSIMG_NUMDEVS_2 ? e->parity : 0;
}

/* ------------------------- one device, one scheme ------------------------- */

/* What one scheme run shares between devices. */
struct ctx {
	const struct btrfsimg_collide_input *in;
	const struct btrfsimg_scheme *s;
	uint64_t *c;   /* per-subvolume constant */
	size_t *order; /* subvolume indices grouped by device */
	size_t max_members;
	struct btrfsimg_collide_result *out;
	struct bi_trie run;
	struct bi_piece *pieces; /* root pieces of the current device */
	/* streaming: every group, with every member, to fn */
	btrfsimg_collide_group_fn fn;
	void *fn_ctx;
	size_t lo, hi; /* the device being counted: order[lo, hi) */
	bool extras;   /* and its extras */
};

static void add_piece(struct bi_piece *p, size_t *np, const struct btrfsimg_idset *set, uint64_t c,
		      int64_t m, uint32_t owner)
{
	if (set && set->n)
		p[(*np)++] = (struct bi_piece){ set->v, set->n, c, m, owner };
}

static void add_value(struct bi_piece *p, size_t *np, const uint64_t *v, int64_t m, uint32_t owner)
{
	p[(*np)++] = (struct bi_piece){ v, 1, 0, m, owner };
}

/* Subvolume i's owner tag. Its base + add - del is a set and a ^ c is one
 * to one, so it presents each value once; except that with both 0 and c
 * in the set, 0 presents 0 ^ c = c and so does c: then it is left mixed. */
static uint32_t subvol_owner(const struct btrfsimg_collide_subvol *v, uint64_t c, size_t i)
{
	if (i >= BI_OWNER_NONE || (c && bi_collide_subvol_has(v, 0) && bi_collide_subvol_has(v, c)))
		return BI_OWNER_MIXED;
	return (uint32_t)i;
}

/* Root pieces of subvolumes order[lo, hi) and of the extras on @dev. */
static size_t device_pieces(struct ctx *x, size_t lo, size_t hi, uint64_t dev, bool extras)
{
	size_t np = 0;

	for (size_t k = lo; k < hi; k++) {
		size_t i = x->order[k];
		const struct btrfsimg_collide_subvol *v = &x->in->subvols[i];
		uint64_t c = x->c[i];
		uint32_t o = subvol_owner(v, c, i);
		add_piece(x->pieces, &np, v->base, c, 1, o);
		add_piece(x->pieces, &np, v->add, c, 1, o);
		add_piece(x->pieces, &np, v->del, c, -1, o);
		if (c && bi_collide_subvol_has(v, c)) {
			/* a == c presents c, not c ^ c = 0 */
			add_value(x->pieces, &np, &zero_value, -1, o);
			add_value(x->pieces, &np, &x->c[i], 1, o);
		}
	}
	for (size_t i = 0; extras && i < x->in->nextras; i++)
		if (extra_dev(x->s, &x->in->extras[i]) == dev)
			add_value(x->pieces, &np, &x->in->extras[i].ino, 1, BI_OWNER_MIXED);
	return bi_trie_merge(x->pieces, np);
}

static int add_member(struct ctx *x, struct btrfsimg_collide_group *g, uint64_t subvol,
		      uint64_t obj, bool extra, size_t extra_index)
{
	if (!g->members) {
		size_t n = g->size < x->max_members ? (size_t)g->size : x->max_members;
		g->members = calloc(n ? n : 1, sizeof(*g->members));
		if (!g->members)
			return -ENOMEM;
	}
	if (g->nmembers < x->max_members)
		g->members[g->nmembers++] =
			(struct btrfsimg_collide_member){ subvol, obj, extra, extra_index };
	return 0;
}

/* Fill the members of example @g by asking each inode of its device. */
static int fill_members(struct ctx *x, struct btrfsimg_collide_group *g, size_t lo, size_t hi,
			bool extras)
{
	int rc = 0;

	for (size_t k = lo; k < hi && !rc; k++) {
		size_t i = x->order[k];
		const struct btrfsimg_collide_subvol *v = &x->in->subvols[i];
		uint64_t c = x->c[i], a = g->ino ^ c;
		/* a = ino ^ c presents ino unless a == c (ino == 0) */
		if ((c == 0 || a != c) && bi_collide_subvol_has(v, a))
			rc = add_member(x, g, v->id, a, false, 0);
		if (!rc && c && g->ino == c && bi_collide_subvol_has(v, c))
			rc = add_member(x, g, v->id, c, false, 0);
	}
	for (size_t i = 0; extras && !rc && i < x->in->nextras; i++) {
		const struct btrfsimg_collide_extra *e = &x->in->extras[i];
		if (extra_dev(x->s, e) == g->device && e->ino == g->ino)
			rc = add_member(x, g, e->subvol, e->ino, true, i);
	}
	return rc;
}

/* A group found while streaming: its members, then the caller's function. */
static int stream_group(void *ctx, uint64_t dev, uint64_t value, int64_t m)
{
	struct ctx *x = ctx;
	struct btrfsimg_collide_group g = { dev, value, (uint64_t)m, 0, NULL };
	int rc = fill_members(x, &g, x->lo, x->hi, x->extras);
	if (!rc)
		rc = x->fn(x->fn_ctx, &g);
	free(g.members);
	return rc;
}

/* Count device @dev: subvolumes order[lo, hi), extras if @extras. */
static int count_device(struct ctx *x, size_t lo, size_t hi, uint64_t dev, bool extras)
{
	size_t np = device_pieces(x, lo, hi, dev, extras), ex0 = x->out->nexamples;
	struct bi_trie *r = &x->run;

	x->lo = lo;
	x->hi = hi;
	x->extras = extras;
	r->dev = dev;
	r->used = 0;
	int rc = bi_trie_reserve(r, np);
	if (rc)
		return rc;
	if (np)
		memcpy(r->stack, x->pieces, np * sizeof(*r->stack));
	r->used = np;
	rc = bi_trie_count(r, np);
	if (!rc)
		rc = r->stop;
	for (size_t i = ex0; !rc && i < x->out->nexamples; i++)
		rc = fill_members(x, &x->out->examples[i], lo, hi, extras);
	return rc;
}

/* Group subvolume indices by device (parity 0 first under numdevs=2),
 * keeping input order within one; returns where device 1 starts. */
static size_t order_by_device(struct ctx *x)
{
	size_t n = x->in->nsubvols, k = 0, split = n;

	for (unsigned p = 0; p < 2; p++) {
		if (p == 1)
			split = k;
		for (size_t i = 0; i < n; i++)
			if (x->s->numdevs != BTRFSIMG_NUMDEVS_2 ? p == 0
								: x->in->subvols[i].parity == p)
				x->order[k++] = i;
	}
	return split;
}

static int count_all(struct ctx *x)
{
	size_t n = x->in->nsubvols, split = order_by_device(x);
	int rc;

	if (x->s->numdevs == BTRFSIMG_NUMDEVS_MANY) {
		/* the superblock's device holds only the extras */
		rc = count_device(x, 0, 0, 0, true);
		for (size_t i = 0; !rc && i < n; i++)
			rc = count_device(x, i, i + 1, (uint64_t)i + 1, false);
		return rc;
	}
	rc = count_device(x, 0, split, 0, true);
	if (!rc && x->s->numdevs == BTRFSIMG_NUMDEVS_2)
		rc = count_device(x, split, n, 1, true);
	return rc;
}

/* ----------------------------- headroom ----------------------------- */

/* Constant tables of the current scheme: subvolumes and extras. */
static int constants(struct ctx *x, struct bi_subvol_const **t, struct bi_subvol_const **fx)
{
	size_t n = x->in->nsubvols, ne = x->in->nextras;

	*t = calloc(n + 1, sizeof(**t));
	*fx = calloc(ne + 1, sizeof(**fx));
	if (!*t || !*fx)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		(*t)[i] = (struct bi_subvol_const){ subvol_dev(x->s, &x->in->subvols[i], i),
						    x->c[i], x->in->subvols[i].id };
	for (size_t i = 0; i < ne; i++)
		(*fx)[i] =
			(struct bi_subvol_const){ extra_dev(x->s, &x->in->extras[i]),
						  x->in->extras[i].ino, x->in->extras[i].subvol };
	return 0;
}

static int headroom(struct ctx *x, const struct bi_collide_stats *st)
{
	struct bi_subvol_const *t = NULL, *fx = NULL;
	int rc = constants(x, &t, &fx);

	if (!rc)
		bi_headroom(x->s, t, x->in->nsubvols, fx, x->in->nextras, st, x->out);
	free(t);
	free(fx);
	return rc;
}

/* ------------------- the interface analyze.c uses ------------------- */

static void ctx_free(struct ctx *x)
{
	free(x->c);
	free(x->order);
	free(x->pieces);
	bi_trie_free(&x->run);
}

static int ctx_alloc(struct ctx *x, size_t n, size_t nextras, size_t maxex)
{
	if (n > SIZE_MAX / 8 / sizeof(struct bi_piece) ||
	    nextras > SIZE_MAX / 8 / sizeof(struct bi_piece))
		return -ENOMEM;
	x->c = calloc(n + 1, sizeof(*x->c));
	x->order = calloc(n + 1, sizeof(*x->order));
	x->pieces = calloc(5 * n + nextras + 1, sizeof(*x->pieces));
	x->run.ex = &x->out->examples; /* grown as groups are found */
	x->run.nex = &x->out->nexamples;
	x->run.maxex = maxex;
	return x->c && x->order && x->pieces ? 0 : -ENOMEM;
}

/* ----------------------------- public API ----------------------------- */

int btrfsimg_scheme_name(const struct btrfsimg_scheme *s, char *buf, size_t len)
{
	static const char *const devs[] = { "", "1", "2", "many" };
	const char *d = s && s->numdevs >= 1 && s->numdevs <= 3 ? devs[s->numdevs] : "?";

	if (!s)
		return snprintf(buf, len, "?");
	if (s->uniquifier && s->inumbits)
		return snprintf(buf, len, "inumbits=%u+nfsd-uniquifier", s->inumbits);
	if (s->uniquifier)
		return snprintf(buf, len, "nfsd-uniquifier");
	if (!s->inumbits && s->numdevs == BTRFSIMG_NUMDEVS_1)
		return snprintf(buf, len, "nfsd");
	if (!s->inumbits)
		return snprintf(buf, len, "numdevs=%s", d);
	return snprintf(buf, len, "inumbits=%u,numdevs=%s", s->inumbits, d);
}

void btrfsimg_collide_result_clear(struct btrfsimg_collide_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; r->examples && i < r->nexamples; i++)
		free(r->examples[i].members);
	free(r->examples);
	r->examples = NULL;
	r->nexamples = 0;
}

int bi_collide_run(const struct btrfsimg_collide_input *in, const struct btrfsimg_scheme *s,
		   const struct btrfsimg_collide_opts *o, const struct bi_collide_stats *st,
		   struct btrfsimg_collide_result *out, btrfsimg_collide_group_fn fn, void *fn_ctx)
{
	size_t n = in->nsubvols, maxex = o && !fn ? o->max_examples : 0;
	struct ctx x = { .in = in, .s = s, .out = out, .fn = fn, .fn_ctx = fn_ctx };
	int rc = -ENOMEM;

	memset(out, 0, sizeof(*out));
	out->scheme = *s;
	x.max_members = o && o->max_members ? o->max_members : DEFAULT_MEMBERS;
	if (fn) {
		x.max_members = SIZE_MAX;
		x.run.group = stream_group;
		x.run.group_ctx = &x;
	}
	if (maxex > st->total / 2) /* each group holds >= 2 inodes */
		maxex = (size_t)(st->total / 2);
	if (ctx_alloc(&x, n, in->nextras, maxex))
		goto out;
	for (size_t i = 0; i < n; i++)
		x.c[i] = bi_scheme_const(s, in->subvols[i].id);
	rc = count_all(&x);
	out->groups = x.run.groups;
	out->inodes = x.run.inodes;
	if (!rc && !fn)
		rc = headroom(&x, st);
out:
	ctx_free(&x);
	return rc;
}

int btrfsimg_collide(const struct btrfsimg_collide_input *in, const struct btrfsimg_scheme *s,
		     const struct btrfsimg_collide_opts *o, struct btrfsimg_collide_result *out,
		     char *err, size_t errlen)
{
	struct bi_collide_stats st;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	int rc = bi_collide_scheme_ok(s, err, errlen);
	if (!rc)
		rc = bi_collide_input_ok(in, BI_COLLIDE_MAX_SUBVOLS, &st, err, errlen);
	if (!rc)
		rc = bi_collide_run(in, s, o, &st, out, NULL, NULL);
	if (rc == -ENOMEM)
		bi_msg(err, errlen, -ENOMEM, "out of memory counting collisions");
	return rc;
}

int bi_collide_consts(const struct btrfsimg_collide_input *in, const uint64_t *c, int numdevs,
		      uint64_t *groups, uint64_t *inodes)
{
	struct btrfsimg_scheme s = { 0, false, numdevs };
	struct btrfsimg_collide_result out;
	size_t n = in->nsubvols;
	struct ctx x = { .in = in, .s = &s, .out = &out, .max_members = DEFAULT_MEMBERS };
	int rc = -ENOMEM;

	memset(&out, 0, sizeof(out));
	if (!ctx_alloc(&x, n, in->nextras, 0)) {
		for (size_t i = 0; i < n; i++)
			x.c[i] = c[i];
		rc = count_all(&x);
	}
	*groups = x.run.groups;
	*inodes = x.run.inodes;
	ctx_free(&x);
	btrfsimg_collide_result_clear(&out);
	return rc;
}

int btrfsimg_collide_groups(const struct btrfsimg_collide_input *in,
			    const struct btrfsimg_scheme *s, btrfsimg_collide_group_fn fn,
			    void *ctx, char *err, size_t errlen)
{
	struct bi_collide_stats st;
	struct btrfsimg_collide_result out;

	if (!fn)
		return bi_msg(err, errlen, -EINVAL, "no function to call for each group");
	int rc = bi_collide_scheme_ok(s, err, errlen);
	if (!rc)
		rc = bi_collide_input_ok(in, BI_COLLIDE_MAX_SUBVOLS, &st, err, errlen);
	if (!rc)
		rc = bi_collide_run(in, s, NULL, &st, &out, fn, ctx);
	btrfsimg_collide_result_clear(&out);
	if (rc == -ENOMEM)
		bi_msg(err, errlen, -ENOMEM, "out of memory counting collisions");
	return rc;
}
