/* SPDX-License-Identifier: MIT */
/*
 * Brute-force reference for the collision engine, shared by
 * tests/unit/test_collide.c and fuzz/fuzz_schemes.c. It restates the model from
 * docs/inode-numbers.md on its own (its own byte swap, overlay and
 * device rules) and materialises every (device, presented number, inode)
 * triple, sorts them and counts. Slow on purpose: nothing here is shared
 * with src/inum/collide.c.
 */
#ifndef COLLIDE_BRUTE_H
#define COLLIDE_BRUTE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg_inum.h"

/* Byte reversal through an array. */
static uint64_t bf_swab(uint64_t v)
{
	uint8_t b[8];
	uint64_t r = 0;

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	for (int i = 0; i < 8; i++)
		r |= (uint64_t)b[i] << (8 * (7 - i));
	return r;
}

/* The constant XORed in: the overlay (inumbits) or the uniquifier (nfsd). */
static uint64_t bf_const(const struct btrfsimg_scheme *s, uint64_t id)
{
	if (id == 5)
		return 0;
	if (s->uniquifier)
		return bf_swab(id);
	if (s->inumbits == 0)
		return 0;
	uint64_t v = bf_swab(id);
	for (unsigned k = 0; k < 64 - s->inumbits; k++)
		v /= 2;
	return v;
}

struct bf_ent {
	uint64_t dev, value;
	int extra;		/* subvolume entries sort before extras */
	size_t idx;		/* input index */
	uint64_t subvol, obj;
};

static int bf_cmp(const void *a, const void *b)
{
	const struct bf_ent *x = a, *y = b;
#define BF_KEY(f) if (x->f != y->f) return x->f < y->f ? -1 : 1
	BF_KEY(dev);
	BF_KEY(value);
	BF_KEY(extra);
	BF_KEY(idx);
	BF_KEY(obj);
#undef BF_KEY
	return 0;
}

static bool bf_in(const struct btrfsimg_idset *s, uint64_t x)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (s->v[i] == x)
			return true;
	return false;
}

/* Membership by linear scans is too slow for big sets: a merge instead. */
static size_t bf_members(const struct btrfsimg_collide_subvol *v, uint64_t *out)
{
	size_t k = 0, d = 0;

	for (size_t i = 0; v->base && i < v->base->n; i++) {
		uint64_t a = v->base->v[i];
		while (v->del && d < v->del->n && v->del->v[d] < a)
			d++;
		if (v->del && d < v->del->n && v->del->v[d] == a)
			continue;
		out[k++] = a;
	}
	for (size_t i = 0; v->add && i < v->add->n; i++)
		out[k++] = v->add->v[i];
	return k;
}

struct bf_result {
	uint64_t groups, inodes;
	size_t nexamples;
	struct btrfsimg_collide_group ex[64];
	struct btrfsimg_collide_member mem[64][64];
};

/* Every (device, presented number, inode) triple of @in under @s, sorted:
 * the materialisation both references below count from. *k gets their
 * number; NULL when out of memory (free() the result). */
static inline struct bf_ent *bf_entries(const struct btrfsimg_collide_input *in,
					const struct btrfsimg_scheme *s, size_t *k)
{
	size_t total = in->nextras;
	*k = 0;
	for (size_t i = 0; i < in->nsubvols; i++)
		total += (in->subvols[i].base ? in->subvols[i].base->n : 0) +
			 (in->subvols[i].add ? in->subvols[i].add->n : 0);
	struct bf_ent *e = malloc((total + 1) * sizeof(*e));
	uint64_t *tmp = malloc((total + 1) * sizeof(*tmp));
	if (!e || !tmp) {
		free(e);
		free(tmp);
		return NULL;
	}
	for (size_t i = 0; i < in->nsubvols; i++) {
		const struct btrfsimg_collide_subvol *v = &in->subvols[i];
		uint64_t c = bf_const(s, v->id);
		uint64_t dev = s->numdevs == 1 ? 0 : s->numdevs == 2 ? v->parity : i + 1;
		size_t n = bf_members(v, tmp);
		for (size_t j = 0; j < n; j++) {
			uint64_t a = tmp[j];
			e[(*k)++] = (struct bf_ent){ dev, a == c ? a : a ^ c, 0, i, v->id, a };
		}
	}
	for (size_t i = 0; i < in->nextras; i++) {
		const struct btrfsimg_collide_extra *x = &in->extras[i];
		uint64_t dev = s->numdevs == 2 ? x->parity : 0;
		e[(*k)++] = (struct bf_ent){ dev, x->ino, 1, i, x->subvol, x->ino };
	}
	free(tmp);
	qsort(e, *k, sizeof(*e), bf_cmp);
	return e;
}

/* The end of the run of equal (device, value) starting at @i. */
static inline size_t bf_run_end(const struct bf_ent *e, size_t k, size_t i)
{
	size_t j = i;
	while (j < k && e[j].dev == e[i].dev && e[j].value == e[i].value)
		j++;
	return j;
}

static inline struct btrfsimg_collide_member bf_member(const struct bf_ent *e)
{
	return (struct btrfsimg_collide_member){ e->subvol, e->obj, e->extra != 0,
						 e->extra ? e->idx : 0 };
}

/* Count @in under @s; keep the first @maxex (<= 64) groups with up to
 * @maxmem (<= 64) members. Returns 0 or -1 (no memory). */
static inline int bf_count(const struct btrfsimg_collide_input *in, const struct btrfsimg_scheme *s,
			   size_t maxex, size_t maxmem, struct bf_result *r)
{
	size_t k;
	memset(r, 0, sizeof(*r));
	struct bf_ent *e = bf_entries(in, s, &k);
	if (!e)
		return -1;
	for (size_t i = 0, j; i < k; i = j) {
		j = bf_run_end(e, k, i);
		if (j - i < 2)
			continue;
		r->groups++;
		r->inodes += j - i;
		if (r->nexamples >= maxex)
			continue;
		size_t x = r->nexamples++;
		r->ex[x] = (struct btrfsimg_collide_group){ e[i].dev, e[i].value, j - i, 0, r->mem[x] };
		for (size_t m = i; m < j && r->ex[x].nmembers < maxmem; m++)
			r->mem[x][r->ex[x].nmembers++] = bf_member(&e[m]);
	}
	free(e);
	return 0;
}

/* Every group of @in under @s, in (device, value) order, with all its
 * members (subvolumes in input order, objectids ascending, then extras),
 * to @fn; stops at @fn's first non-zero return and returns it. -1: no
 * memory. The same materialised sort as bf_count, with nothing kept. */
static inline int bf_groups(const struct btrfsimg_collide_input *in,
			    const struct btrfsimg_scheme *s, btrfsimg_collide_group_fn fn,
			    void *ctx)
{
	size_t k;
	struct bf_ent *e = bf_entries(in, s, &k);
	struct btrfsimg_collide_member *mem = malloc((k + 1) * sizeof(*mem));
	if (!e || !mem) {
		free(e);
		free(mem);
		return -1;
	}
	int rc = 0;
	for (size_t i = 0, j; i < k && !rc; i = j) {
		j = bf_run_end(e, k, i);
		if (j - i < 2)
			continue;
		for (size_t m = i; m < j; m++)
			mem[m - i] = bf_member(&e[m]);
		struct btrfsimg_collide_group g = { e[i].dev, e[i].value, j - i, j - i, mem };
		rc = fn(ctx, &g);
	}
	free(e);
	free(mem);
	return rc;
}

/* 0 if the engine's result equals the reference, else a line number. */
static inline int bf_same(const struct btrfsimg_collide_result *got, const struct bf_result *want)
{
	if (got->groups != want->groups)
		return __LINE__;
	if (got->inodes != want->inodes)
		return __LINE__;
	if (got->nexamples != want->nexamples)
		return __LINE__;
	for (size_t i = 0; i < got->nexamples; i++) {
		const struct btrfsimg_collide_group *g = &got->examples[i], *w = &want->ex[i];
		if (g->device != w->device || g->ino != w->ino || g->size != w->size)
			return __LINE__;
		if (g->nmembers != w->nmembers)
			return __LINE__;
		for (size_t m = 0; m < g->nmembers; m++)
			if (g->members[m].subvol != w->members[m].subvol ||
			    g->members[m].objectid != w->members[m].objectid ||
			    g->members[m].extra != w->members[m].extra ||
			    g->members[m].extra_index != w->members[m].extra_index)
				return __LINE__;
	}
	/* a proof of absence must never coexist with a collision */
	if (got->proven && got->groups)
		return __LINE__;
	return 0;
}

/* Reference validity of an input (what the engine must accept). */
static inline bool bf_valid(const struct btrfsimg_collide_input *in)
{
	for (size_t i = 0; i < in->nsubvols; i++) {
		const struct btrfsimg_collide_subvol *v = &in->subvols[i];
		const struct btrfsimg_idset *sets[3] = { v->base, v->add, v->del };
		if (v->parity > 1)
			return false;
		for (size_t j = 0; j < i; j++)
			if (in->subvols[j].id == v->id)
				return false;
		for (int s = 0; s < 3; s++)
			for (size_t j = 1; sets[s] && j < sets[s]->n; j++)
				if (sets[s]->v[j] <= sets[s]->v[j - 1])
					return false;
		for (size_t j = 0; v->add && j < v->add->n; j++)
			if (bf_in(v->base, v->add->v[j]))
				return false;
		for (size_t j = 0; v->del && j < v->del->n; j++)
			if (!bf_in(v->base, v->del->v[j]))
				return false;
	}
	for (size_t i = 0; i < in->nextras; i++)
		if (in->extras[i].parity > 1)
			return false;
	return true;
}

/* The i-th scheme of btrfsimg_collide_all's order. */
static inline struct btrfsimg_scheme bf_scheme(size_t i)
{
	struct btrfsimg_scheme s = { 0, false, 1 };

	if (i == 1)
		s.uniquifier = true;
	else if (i >= 2 && i < 35)
		s.inumbits = (unsigned)(30 + i);
	else if (i >= 35 && i < 68) {
		s.inumbits = (unsigned)(i - 3);
		s.numdevs = 2;
	} else if (i == 68)
		s.numdevs = 3;
	return s;
}

#endif
