/* SPDX-License-Identifier: MIT */
/*
 * The collision engine's input checks (collide.c counts only what passed
 * them): every id array strictly increasing, each subvolume's additions
 * outside its base and deletions inside it, subvolume ids unique, parities
 * 0 or 1, totals within 64 bits; and the scheme's fields in range.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg_inum.h"
#include "inum/collide.h"

#include "base/cursor.h"
#include "base/err.h"
#include "base/search.h"
#include "inum/schemes.h"

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int set_ok(const struct btrfsimg_idset *s, const char *what, uint64_t id, char *err,
		  size_t len)
{
	if (s && s->n && !s->v) {
		return bi_msg(err, len, -EINVAL,
			      "subvolume %" PRIu64 ": %s set has %zu entries and no array", (id),
			      what, s->n);
	}
	return 0;
}

/* One array of the input, for slices_sorted. */
struct slice {
	const uint64_t *v;
	size_t n;
};

static int slice_cmp(const void *a, const void *b)
{
	const struct slice *x = a, *y = b;
	if (x->v != y->v)
		return (uintptr_t)x->v < (uintptr_t)y->v ? -1 : 1;
	return x->n < y->n ? -1 : x->n > y->n;
}

static void add_slice(struct slice *p, size_t *n, const struct btrfsimg_idset *set)
{
	if (set && set->n)
		p[(*n)++] = (struct slice){ set->v, set->n };
}

/* Every distinct slice strictly increasing: each array is checked once. */
static int slices_sorted(const struct btrfsimg_collide_input *in, char *err, size_t len)
{
	size_t n = 0, cap = in->nsubvols * 3;
	struct slice *p = calloc(cap ? cap : 1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < in->nsubvols; i++) {
		add_slice(p, &n, in->subvols[i].base);
		add_slice(p, &n, in->subvols[i].add);
		add_slice(p, &n, in->subvols[i].del);
	}
	qsort(p, n, sizeof(*p), slice_cmp);
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		if (i && p[i].v == p[i - 1].v && p[i].n == p[i - 1].n)
			continue;
		for (size_t j = 1; j < p[i].n && !rc; j++)
			if (p[i].v[j] <= p[i].v[j - 1]) {
				bi_msg(err, len, -EINVAL,
				       "objectid set not strictly increasing at index %zu: "
				       "have %" PRIu64 " after %" PRIu64,
				       j, (p[i].v[j]), (p[i].v[j - 1]));
				rc = -EINVAL;
			}
	}
	free(p);
	return rc;
}

static void stat_set(struct bi_collide_stats *st, const struct btrfsimg_idset *s)
{
	if (!s || !s->n)
		return;
	st->any = true;
	if (s->v[0] < st->minobj)
		st->minobj = s->v[0];
	if (s->v[s->n - 1] > st->maxobj)
		st->maxobj = s->v[s->n - 1];
}

/* Index of the first element >= x at or after @from, galloping: the
 * callers ask for ascending x, so each search starts where the last one
 * ended and costs the log of the distance. */
static size_t lower_from(const uint64_t *v, size_t n, size_t from, uint64_t x)
{
	size_t lo = from, hi = from, step = 1;

	if (from >= n) /* also an empty set, whose v may be NULL */
		return n;
	while (hi < n && v[hi] < x) {
		lo = hi + 1;
		hi += step;
		step *= 2;
	}
	if (hi > n)
		hi = n;
	return lo + bi_lower_bound(v + lo, hi - lo, x);
}

/* add disjoint from base, del inside base; totals fit in 64 bits. Both
 * are strictly increasing (slices_sorted), so one pass each. */
static int deltas_ok(const struct btrfsimg_collide_subvol *v, uint64_t *total, char *err,
		     size_t len)
{
	const uint64_t *b = v->base ? v->base->v : NULL;
	size_t nb = v->base ? v->base->n : 0, pos = 0;

	for (size_t j = 0; v->add && j < v->add->n; j++) {
		pos = lower_from(b, nb, pos, v->add->v[j]);
		if (pos < nb && b[pos] == v->add->v[j]) {
			return bi_msg(err, len, -EINVAL,
				      "subvolume %" PRIu64 ": added objectid %" PRIu64
				      " is already in the base",
				      (v->id), (v->add->v[j]));
		}
	}
	pos = 0;
	for (size_t j = 0; v->del && j < v->del->n; j++) {
		pos = lower_from(b, nb, pos, v->del->v[j]);
		if (pos == nb || b[pos] != v->del->v[j]) {
			return bi_msg(err, len, -EINVAL,
				      "subvolume %" PRIu64 ": deleted objectid %" PRIu64
				      " is not in the base",
				      (v->id), (v->del->v[j]));
		}
	}
	if (!bi_add_ok(*total, v->base ? v->base->n : 0, total) ||
	    !bi_add_ok(*total, v->add ? v->add->n : 0, total)) {
		return bi_msg(err, len, -EINVAL, "more than 2^64 inodes");
	}
	return 0;
}

/* Subvolumes in the order of their bases' arrays (see deltas_fast_ok). */
struct by_base {
	const uint64_t *v;
	size_t n, i;
};

static int by_base_cmp(const void *a, const void *b)
{
	const struct by_base *x = a, *y = b;
	uintptr_t p = (uintptr_t)x->v, q = (uintptr_t)y->v;
	if (p != q)
		return p < q ? -1 : 1;
	if (x->n != y->n)
		return x->n < y->n ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* The deltas of subvolumes [lo, hi) of @w (all on base w[lo]) checked
 * against a bitmap of that base: each id costs one bit test in a table
 * of at most the base's own size, where galloping through an 8 MiB base
 * misses the cache. False when some id is wrong (or the bitmap would be
 * larger than the base: then nothing was checked). */
static bool deltas_bits_ok(const struct btrfsimg_collide_input *in, const struct by_base *w,
			   size_t lo, size_t hi, uint64_t **bits, size_t *cap, bool *checked)
{
	const uint64_t *b = w[lo].v;
	size_t nb = w[lo].n;
	uint64_t first = b[0], span = b[nb - 1] - first;
	*checked = false;
	if (span / 64 >= nb)
		return true;
	size_t words = (size_t)(span / 64) + 1;
	if (words > *cap) {
		free(*bits);
		*cap = 0;
		if (!(*bits = malloc(words * sizeof(**bits))))
			return true;
		*cap = words;
	}
	uint64_t *t = *bits;
	memset(t, 0, words * sizeof(*t));
	for (size_t k = 0; k < nb; k++)
		t[(b[k] - first) / 64] |= 1ull << ((b[k] - first) % 64);
	*checked = true;
	for (size_t g = lo; g < hi; g++) {
		const struct btrfsimg_collide_subvol *v = &in->subvols[w[g].i];
		for (size_t j = 0; v->add && j < v->add->n; j++) {
			uint64_t a = v->add->v[j] - first;
			if (v->add->v[j] >= first && a <= span && (t[a / 64] >> (a % 64) & 1))
				return false;
		}
		for (size_t j = 0; v->del && j < v->del->n; j++) {
			uint64_t a = v->del->v[j] - first;
			if (v->del->v[j] < first || a > span || !(t[a / 64] >> (a % 64) & 1))
				return false;
		}
	}
	return true;
}

/* Whether every subvolume's add is disjoint from its base and its del
 * inside it, the subvolumes sharing a base checked together (see
 * deltas_bits_ok; where no bitmap fits, as deltas_ok does). False also on
 * no memory: the caller then checks one by one, which names the first
 * wrong id. */
static bool deltas_fast_ok(const struct btrfsimg_collide_input *in)
{
	size_t n = 0, cap = 0;
	uint64_t *bits = NULL;
	struct by_base *w = calloc(in->nsubvols + 1, sizeof(*w));
	bool ok = w != NULL;
	for (size_t i = 0; ok && i < in->nsubvols; i++) {
		const struct btrfsimg_collide_subvol *v = &in->subvols[i];
		if ((v->add && v->add->n) || (v->del && v->del->n))
			w[n++] = (struct by_base){ v->base ? v->base->v : NULL,
						   v->base ? v->base->n : 0, i };
	}
	if (ok)
		qsort(w, n, sizeof(*w), by_base_cmp);
	for (size_t lo = 0, hi; ok && lo < n; lo = hi) {
		size_t nd = 0;
		for (hi = lo; hi < n && w[hi].v == w[lo].v && w[hi].n == w[lo].n; hi++) {
			const struct btrfsimg_collide_subvol *v = &in->subvols[w[hi].i];
			nd += (v->add ? v->add->n : 0) + (v->del ? v->del->n : 0);
		}
		bool checked = false;
		/* a bitmap pays when the deltas are not tiny against the base */
		if (w[lo].n && nd >= w[lo].n / 256)
			ok = deltas_bits_ok(in, w, lo, hi, &bits, &cap, &checked);
		for (size_t g = lo; ok && !checked && g < hi; g++) {
			uint64_t total = 0;
			ok = deltas_ok(&in->subvols[w[g].i], &total, NULL, 0) == 0;
		}
	}
	free(bits);
	free(w);
	return ok;
}

static int subvols_ok(const struct btrfsimg_collide_input *in, struct bi_collide_stats *st,
		      uint64_t *total, char *err, size_t len)
{
	for (size_t i = 0; i < in->nsubvols; i++) {
		const struct btrfsimg_collide_subvol *v = &in->subvols[i];
		if (v->parity > 1) {
			return bi_msg(err, len, -EINVAL,
				      "subvolume %" PRIu64 ": parity %u, expected 0 or 1", (v->id),
				      v->parity);
		}
		int rc = set_ok(v->base, "base", v->id, err, len);
		if (!rc)
			rc = set_ok(v->add, "add", v->id, err, len);
		if (!rc)
			rc = set_ok(v->del, "del", v->id, err, len);
		if (rc)
			return rc;
		if (v->id > st->maxid)
			st->maxid = v->id;
		stat_set(st, v->base);
		stat_set(st, v->add);
	}
	int rc = slices_sorted(in, err, len);
	if (!rc && deltas_fast_ok(in)) {
		for (size_t i = 0; i < in->nsubvols; i++) {
			const struct btrfsimg_collide_subvol *v = &in->subvols[i];
			if (!bi_add_ok(*total, v->base ? v->base->n : 0, total) ||
			    !bi_add_ok(*total, v->add ? v->add->n : 0, total))
				return bi_msg(err, len, -EINVAL, "more than 2^64 inodes");
		}
		return 0;
	}
	for (size_t i = 0; !rc && i < in->nsubvols; i++)
		rc = deltas_ok(&in->subvols[i], total, err, len);
	return rc;
}

static int ids_unique(const struct btrfsimg_collide_input *in, char *err, size_t len)
{
	uint64_t *ids = calloc(in->nsubvols ? in->nsubvols : 1, sizeof(*ids));
	int rc = 0;

	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < in->nsubvols; i++)
		ids[i] = in->subvols[i].id;
	qsort(ids, in->nsubvols, sizeof(*ids), u64_cmp);
	for (size_t i = 1; i < in->nsubvols && !rc; i++)
		if (ids[i] == ids[i - 1]) {
			bi_msg(err, len, -EINVAL, "subvolume %" PRIu64 " listed twice", (ids[i]));
			rc = -EINVAL;
		}
	free(ids);
	return rc;
}

int bi_collide_input_ok(const struct btrfsimg_collide_input *in, size_t max_subvols,
			struct bi_collide_stats *st, char *err, size_t len)
{
	uint64_t total = 0;

	*st = (struct bi_collide_stats){ 0, UINT64_MAX, 0, 0, false };
	if (!in || (in->nsubvols && !in->subvols) || (in->nextras && !in->extras)) {
		return bi_msg(err, len, -EINVAL, "no input, or a count without its array");
	}
	if (in->nsubvols > max_subvols) {
		return bi_msg(err, len, -EINVAL, "too many subvolumes: %zu", in->nsubvols);
	}
	for (size_t i = 0; i < in->nextras; i++)
		if (in->extras[i].parity > 1) {
			return bi_msg(err, len, -EINVAL,
				      "extra %zu (subvolume %" PRIu64
				      "): parity %u, expected 0 or 1",
				      i, (in->extras[i].subvol), in->extras[i].parity);
		}
	int rc = ids_unique(in, err, len);
	if (!rc)
		rc = subvols_ok(in, st, &total, err, len);
	if (!rc && !bi_add_ok(total, in->nextras, &total)) {
		bi_msg(err, len, -EINVAL, "more than 2^64 inodes");
		rc = -EINVAL;
	}
	st->total = total;
	return rc;
}

int bi_collide_scheme_ok(const struct btrfsimg_scheme *s, char *err, size_t len)
{
	if (!s || (s->inumbits && (s->inumbits < 32 || s->inumbits > 64)) ||
	    (s->uniquifier && s->inumbits) || s->numdevs < 1 || s->numdevs > 3) {
		return bi_msg(err, len, -EINVAL,
			      "bad scheme: inumbits %u (0 or 32..64), uniquifier %d (needs "
			      "inumbits 0), numdevs %d (1, 2 or 3)",
			      s ? s->inumbits : 0, s ? s->uniquifier : 0, s ? s->numdevs : 0);
	}
	return 0;
}
