/* SPDX-License-Identifier: MIT */
/*
 * Fuzz the collision engine: the input bytes describe a small inode set
 * (subvolume ids from a palette of colliding shapes, shared objectid sets
 * aimed at the schemes' constants, deltas, stubs, parities) and a scheme.
 * The engine must agree with the brute-force reference of
 * tests/support/collide_brute.h on counts, examples and members; it must reject
 * exactly the inputs the reference calls invalid; "proven" must never
 * come with a collision. Any difference aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg_inum.h"
#include "../tests/support/collide_brute.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NSUB 8
#define NSET 4
#define SETMAX 24

struct in {
	const uint8_t *p;
	size_t n, at;
};

static uint8_t u8(struct in *in)
{
	return in->at < in->n ? in->p[in->at++] : 0;
}

static uint64_t u64(struct in *in)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)u8(in) << (8 * i);
	return v;
}

static uint64_t pick_id(struct in *in)
{
	uint8_t t = u8(in), k = u8(in);
	switch (t % 6) {
	case 0:
		return 5;
	case 1:
		return 256 + k;
	case 2:
		return 256 + (uint64_t)(k % 16) * 65536;
	case 3:
		return 256 + ((uint64_t)k << 24);
	case 4:
		return (1ull << 32) + 256 + k;
	default:
		return u64(in);
	}
}

/* One or more objectids; @c are the constants of the subvolumes so far. */
static size_t pick_obj(struct in *in, const uint64_t *c, size_t nc, uint64_t *out)
{
	uint8_t t = u8(in), k = u8(in);
	uint64_t cc = nc ? c[k % nc] : 0, small = 256 + k;
	switch (t % 8) {
	case 0:
		out[0] = small;
		return 1;
	case 1:
		out[0] = t & 8 ? 0 : 2 ^ cc;
		return 1;
	case 2:
		out[0] = cc ^ small;
		return 1;
	case 3:
		out[0] = cc;		/* the objectid == constant exception */
		return 1;
	case 4:
		out[0] = (1ull << (40 + 8 * (k % 3) + (k % 4 == 3 ? 23 - 8 * (k % 3) : 0))) + t;
		return 1;
	case 5:
		out[0] = u64(in);
		return 1;
	default: {			/* a dense run, maybe a whole aligned block */
		size_t n = 1 + k % 16;
		uint64_t at = (t & 16) ? small & ~15ull : small;
		for (size_t i = 0; i < n; i++)
			out[i] = at + i;
		return n;
	}
	}
}

static int u64cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static size_t tidy(uint64_t *v, size_t n, bool sort)
{
	size_t k = 0;
	if (!sort)
		return n;
	qsort(v, n, sizeof(*v), u64cmp);
	for (size_t i = 0; i < n; i++)
		if (!k || v[k - 1] != v[i])
			v[k++] = v[i];
	return k;
}

struct world {
	struct btrfsimg_collide_subvol sv[NSUB];
	struct btrfsimg_collide_extra ex[4];
	struct btrfsimg_idset sets[NSET + 2 * NSUB];
	uint64_t vals[NSET + 2 * NSUB][SETMAX + 16];
	struct btrfsimg_collide_input in;
};

static void build(struct in *in, struct world *w, struct btrfsimg_scheme s)
{
	bool sorted = (u8(in) & 15) != 0;
	size_t nsub = 1 + u8(in) % NSUB, nsets = 1 + u8(in) % NSET, nc = 0;
	uint64_t c[NSUB];

	memset(w, 0, sizeof(*w));
	w->in.subvols = w->sv;
	w->in.extras = w->ex;
	for (size_t i = 0; i < nsub; i++) {
		uint8_t f = u8(in);
		w->sv[i] = (struct btrfsimg_collide_subvol){ pick_id(in), f & 1 ? 1u : 0u, NULL,
			    NULL, NULL };
		if ((f & 0x30) == 0x30)
			w->sv[i].parity = 2;	/* invalid on purpose, rarely */
		c[nc++] = bf_const(&s, w->sv[i].id);
	}
	for (size_t i = 0; i < nsets + 2 * nsub; i++) {
		size_t n = 0, want = u8(in) % (i < nsets ? SETMAX : 4);
		while (n < want)
			n += pick_obj(in, c, nc, &w->vals[i][n]);
		w->sets[i] = (struct btrfsimg_idset){ w->vals[i], tidy(w->vals[i], n, sorted) };
	}
	for (size_t i = 0; i < nsub; i++) {
		uint8_t f = u8(in);
		struct btrfsimg_idset *base = &w->sets[f % nsets];
		w->sv[i].base = f & 0x80 ? NULL : base;
		if (f & 0x10)		/* additions: drop what the base holds */
			w->sv[i].add = &w->sets[nsets + 2 * i];
		if (f & 0x20 && base->n) {	/* deletions: a slice of the base */
			size_t from = u8(in) % base->n, len = 1 + u8(in) % 4;
			struct btrfsimg_idset *d = &w->sets[nsets + 2 * i + 1];
			d->v = base->v + from;
			d->n = from + len <= base->n ? len : base->n - from;
			w->sv[i].del = d;
		}
		if (w->sv[i].add && sorted && w->sv[i].base) {
			struct btrfsimg_idset *a = &w->sets[nsets + 2 * i];
			size_t k = 0;
			for (size_t j = 0; j < a->n; j++)
				if (!bf_in(w->sv[i].base, a->v[j]))
					w->vals[nsets + 2 * i][k++] = a->v[j];
			a->n = k;
		}
	}
	w->in.nsubvols = nsub;
	w->in.nextras = u8(in) % 4;
	for (size_t i = 0; i < w->in.nextras; i++) {
		uint8_t f = u8(in);
		w->ex[i] = (struct btrfsimg_collide_extra){ w->sv[f % nsub].id,
			    f & 0x40 ? 256 + u8(in) : 2,
						    f & 0x80 ? 1u : 0u };
	}
}

static void check(const struct world *w, struct btrfsimg_scheme s, size_t maxex, size_t maxmem)
{
	struct btrfsimg_collide_opts o = { maxex, maxmem };
	struct btrfsimg_collide_result got;
	struct bf_result *want = malloc(sizeof(*want));
	char err[256] = "";
	int rc = btrfsimg_collide(&w->in, &s, &o, &got, err, sizeof(err));
	bool valid = bf_valid(&w->in);

	if (!want)
		abort();
	if (valid != (rc == 0)) {
		fprintf(stderr, "validity: engine rc %d (%s), reference %d\n", rc, err, valid);
		abort();
	}
	if (rc == 0) {
		if (bf_count(&w->in, &s, maxex, maxmem ? maxmem : 16, want) != 0)
			abort();
		int line = bf_same(&got, want);
		if (line) {
			fprintf(stderr, "engine differs from brute force (collide_brute.h:%d)\n", line);
			abort();
		}
		if (!got.reason[0])
			abort();
	} else if (!err[0]) {
		abort();
	}
	btrfsimg_collide_result_clear(&got);
	free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size, 0 };
	struct world w;
	uint8_t sel = u8(&in), opt = u8(&in);
	struct btrfsimg_scheme s = bf_scheme(sel % BTRFSIMG_COLLIDE_SCHEMES);

	build(&in, &w, s);
	check(&w, s, opt % 8, (opt >> 3) % 5);
	/* the same world under two neighbours of the scheme */
	check(&w, bf_scheme((sel + 1) % BTRFSIMG_COLLIDE_SCHEMES), 3, 2);
	check(&w, bf_scheme((sel + 33) % BTRFSIMG_COLLIDE_SCHEMES), 3, 2);
	return 0;
}
