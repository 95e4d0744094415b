/* SPDX-License-Identifier: MIT */
/*
 * What NFS clients and 32-bit programs see: the figures of
 * btrfsimg_nfs_report over the inode sets analyze.c gathered.
 *
 * Every scheme presents f(subvol, objectid) = objectid ^ c_s except at a
 * few objectids per subvolume (the "unless equal" steps: the overlay, the
 * uniquifier, their XOR and, for 32-bit figures, c_s's low half). So the
 * collision engine counts with the single constant c_s (or its low 32
 * bits) and is exact unless one of those objectids is present and
 * presents otherwise; then the engine's count is corrected at the numbers
 * those few inodes leave and reach (how many inodes of the device present
 * a number is one membership test per subvolume). Only for 32-bit figures
 * over objectids past 2^32, where many objectids share a low half, are the
 * device's numbers listed and sorted (bounded: more than BRUTE_MAX inodes
 * on a device is refused). Counts over a set (numbers past 2^32, readdir
 * disagreements) are range counts plus the same few objectids: never a
 * pass over every inode of every snapshot.
 *
 * The composed schemes (inumbits=N with nfsd's uniquifier): nfsd calls
 * btrfs's getattr, which already returns the overlaid number, and XORs
 * the uniquifier on top (btrfsimg_nfs_fileid). With N = 64 the two
 * constants cancel: the composed numbers are today's objectids.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg_inum.h"
#include "inum/collide.h"
#include "inum/nfs.h"

#include "base/ondisk.h"
#include "base/grow.h"
#include "base/search.h"

#define LOW32 0xffffffffull
/* The most inodes of one device listed for an exact count (8 bytes each). */
#define BRUTE_MAX (1ull << 24)

struct pres {
	unsigned bits;	/* inumbits N, 0 = none */
	bool uniq;	/* nfsd's uniquifier on top */
	int numdevs;
};

static uint64_t pres_f(const struct pres *p, uint64_t sv, uint64_t o)
{
	uint64_t x = btrfsimg_presented_ino(o, btrfsimg_inumbits_overlay(sv, p->bits));
	return p->uniq ? btrfsimg_presented_ino(x, btrfsimg_uniquifier(sv)) : x;
}

static uint64_t pres_c(const struct pres *p, uint64_t sv)
{
	return btrfsimg_inumbits_overlay(sv, p->bits) ^ (p->uniq ? btrfsimg_uniquifier(sv) : 0);
}

/* The objectids where f may differ from objectid ^ c (or its low half). */
static size_t candidates(const struct pres *p, uint64_t sv, uint64_t k[5])
{
	uint64_t ov = btrfsimg_inumbits_overlay(sv, p->bits);
	uint64_t u = p->uniq ? btrfsimg_uniquifier(sv) : 0, c = ov ^ u;
	uint64_t all[5] = { ov, u, c, c & LOW32, 0 };
	size_t n = 0;
	for (size_t i = 0; i < 5; i++) {
		bool dup = all[i] == 0;
		for (size_t j = 0; j < n && !dup; j++)
			dup = k[j] == all[i];
		if (!dup)
			k[n++] = all[i];
	}
	return n;
}

static uint64_t sv_dev(const struct pres *p, const struct btrfsimg_collide_subvol *v, size_t i)
{
	if (p->numdevs == BTRFSIMG_NUMDEVS_2)
		return v->parity;
	return p->numdevs == BTRFSIMG_NUMDEVS_MANY ? (uint64_t)i + 1 : 0;
}

static uint64_t extra_dev(const struct pres *p, const struct btrfsimg_collide_extra *e)
{
	return p->numdevs == BTRFSIMG_NUMDEVS_2 ? e->parity : 0;
}

/* ------------------------------------------------ counts over sets */

static uint64_t set_range(const struct btrfsimg_idset *s, uint64_t lo, uint64_t hi)
{
	if (!s || !s->n)
		return 0;
	size_t a = bi_lower_bound(s->v, s->n, lo);
	size_t b = hi == UINT64_MAX ? s->n : bi_lower_bound(s->v, s->n, hi + 1);
	return b - a;
}

/* Objectids of @v in [lo, hi]. */
static uint64_t sv_range(const struct btrfsimg_collide_subvol *v, uint64_t lo, uint64_t hi)
{
	return set_range(v->base, lo, hi) - set_range(v->del, lo, hi) + set_range(v->add, lo, hi);
}

static uint64_t sv_count(const struct btrfsimg_collide_subvol *v)
{
	return sv_range(v, 0, UINT64_MAX);
}

/* Inodes of @v presenting more than 32 bits: objectid ^ c has high bits
 * unless the objectid's high half is c's, then the few exceptions. */
static uint64_t over32(const struct pres *p, const struct btrfsimg_collide_subvol *v)
{
	uint64_t c = pres_c(p, v->id), hi = c >> 32, k[5];
	uint64_t n = sv_count(v) - sv_range(v, hi << 32, hi << 32 | LOW32);
	size_t nk = candidates(p, v->id, k);
	for (size_t i = 0; i < nk; i++) {
		if (!bi_collide_subvol_has(v, k[i]))
			continue;
		n -= (k[i] >> 32) != hi;
		n += pres_f(p, v->id, k[i]) > LOW32;
	}
	return n;
}

/* ------------------------------------------------ collisions */

/* Does the engine with constants c (masked by @mask) count exactly? */
static bool engine_exact(const struct pres *p, const struct btrfsimg_collide_input *in,
			 uint64_t mask, uint64_t maxobj)
{
	if (mask != UINT64_MAX && maxobj > mask)
		return false;
	for (size_t i = 0; i < in->nsubvols; i++) {
		const struct btrfsimg_collide_subvol *v = &in->subvols[i];
		uint64_t c = pres_c(p, v->id) & mask, k[5];
		size_t nk = candidates(p, v->id, k);
		for (size_t j = 0; j < nk; j++)
			if (bi_collide_subvol_has(v, k[j]) &&
			    (pres_f(p, v->id, k[j]) & mask) != btrfsimg_presented_ino(k[j], c))
				return false;
	}
	return true;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct list {
	uint64_t *v;
	size_t n, cap;
};

static int list_put(struct list *l, uint64_t x)
{
	int rc = bi_grow_most((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v), BRUTE_MAX);
	if (rc == -EOVERFLOW)
		return -E2BIG; /* bounded: see BRUTE_MAX */
	if (rc < 0)
		return rc;
	l->v[l->n++] = x;
	return 0;
}

/* base - del + add of @v, each presented and masked, into @l. */
static int list_subvol(struct list *l, const struct pres *p, const struct btrfsimg_collide_subvol *v,
		       uint64_t mask)
{
	const struct btrfsimg_idset *b = v->base, *a = v->add;
	int rc = 0;
	for (size_t i = 0; rc == 0 && b && i < b->n; i++)
		if (!bi_idset_has(v->del, b->v[i]))
			rc = list_put(l, pres_f(p, v->id, b->v[i]) & mask);
	for (size_t i = 0; rc == 0 && a && i < a->n; i++)
		rc = list_put(l, pres_f(p, v->id, a->v[i]) & mask);
	return rc;
}

static void tally(struct list *l, uint64_t *groups, uint64_t *inodes)
{
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), u64_cmp);
	for (size_t i = 0; i < l->n;) {
		size_t j = i + 1;
		while (j < l->n && l->v[j] == l->v[i])
			j++;
		if (j - i > 1) {
			(*groups)++;
			*inodes += j - i;
		}
		i = j;
	}
}

/* Every number of device @dev listed and sorted: the exact count where the
 * engine's single constant is not. */
static int brute_device(const struct pres *p, const struct btrfsimg_collide_input *in,
			uint64_t dev, uint64_t mask, uint64_t *groups, uint64_t *inodes)
{
	struct list l = { 0 };
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < in->nsubvols; i++)
		if (sv_dev(p, &in->subvols[i], i) == dev)
			rc = list_subvol(&l, p, &in->subvols[i], mask);
	for (size_t i = 0; rc == 0 && i < in->nextras; i++)
		if (extra_dev(p, &in->extras[i]) == dev)
			rc = list_put(&l, in->extras[i].ino & mask);
	if (rc == 0)
		tally(&l, groups, inodes);
	free(l.v);
	return rc;
}

static int brute(const struct pres *p, const struct btrfsimg_collide_input *in, uint64_t mask,
		 uint64_t *groups, uint64_t *inodes)
{
	size_t ndev = p->numdevs == BTRFSIMG_NUMDEVS_MANY ? in->nsubvols + 1
			: p->numdevs == BTRFSIMG_NUMDEVS_2 ? 2 : 1;
	int rc = 0;
	*groups = *inodes = 0;
	for (size_t d = 0; rc == 0 && d < ndev; d++)
		rc = brute_device(p, in, d, mask, groups, inodes);
	return rc;
}

/* ------------------------------------------------ the few that differ */

/* An inode whose number is not the engine's: its device, the number the
 * engine's constant gives it and the one the scheme does. */
struct moved {
	uint64_t dev, from, to;
};

/* Inodes of subvolume @v presenting @x under the engine's constant @c
 * (btrfsimg_presented_ino(o, c) = x): o = x ^ c where that is not c, and
 * c itself when x is c. */
static uint64_t engine_sv_mult(const struct btrfsimg_collide_subvol *v, uint64_t c, uint64_t x)
{
	uint64_t o = x ^ c;
	return (uint64_t)(o != c && bi_collide_subvol_has(v, o)) +
	       (uint64_t)(x == c && bi_collide_subvol_has(v, c));
}

/* How many inodes of device @dev the engine gives number @x. */
static uint64_t engine_mult(const struct pres *p, const struct btrfsimg_collide_input *in,
			    const uint64_t *c, uint64_t dev, uint64_t mask, uint64_t x)
{
	uint64_t n = 0;
	for (size_t i = 0; i < in->nsubvols; i++)
		if (sv_dev(p, &in->subvols[i], i) == dev)
			n += engine_sv_mult(&in->subvols[i], c[i], x);
	for (size_t i = 0; i < in->nextras; i++)
		if (extra_dev(p, &in->extras[i]) == dev && (in->extras[i].ino & mask) == x)
			n++;
	return n;
}

/* The candidate objectids present whose number the scheme gives otherwise
 * than the engine's constant, into @m (at most 5 per subvolume). */
static int moved_list(const struct pres *p, const struct btrfsimg_collide_input *in,
		      const uint64_t *c, uint64_t mask, struct moved **m, size_t *n)
{
	size_t cap = 0;
	*n = 0;
	for (size_t i = 0; i < in->nsubvols; i++) {
		const struct btrfsimg_collide_subvol *v = &in->subvols[i];
		uint64_t k[5];
		size_t nk = candidates(p, v->id, k);
		for (size_t j = 0; j < nk; j++) {
			uint64_t from = btrfsimg_presented_ino(k[j], c[i]);
			uint64_t to = pres_f(p, v->id, k[j]) & mask;
			if (from == to || !bi_collide_subvol_has(v, k[j]))
				continue;
			if (bi_grow((void **)m, &cap, *n + 1, sizeof(**m)))
				return -ENOMEM;
			(*m)[(*n)++] = (struct moved){ sv_dev(p, v, i), from, to };
		}
	}
	return 0;
}

/* Whether (@dev, @x) came before entry @upto of @m (as a from or a to):
 * each number is corrected once. */
static bool seen_value(const struct moved *m, size_t upto, bool to, uint64_t dev, uint64_t x)
{
	for (size_t i = 0; i <= upto; i++) {
		if (i == upto && !to)
			break;
		if (m[i].dev == dev && (m[i].from == x || (i < upto && m[i].to == x)))
			return true;
	}
	return false;
}

/* The groups and inodes that share number @x of device @dev once the moved
 * inodes are where the scheme puts them, against where the engine did. */
static void correct_value(const struct pres *p, const struct btrfsimg_collide_input *in,
			  const uint64_t *c, uint64_t mask, const struct moved *m, size_t n,
			  uint64_t dev, uint64_t x, uint64_t *groups, uint64_t *inodes)
{
	uint64_t before = engine_mult(p, in, c, dev, mask, x), after = before;
	for (size_t i = 0; i < n; i++) {
		if (m[i].dev != dev)
			continue;
		after -= m[i].from == x;
		after += m[i].to == x;
	}
	if (before > 1) {
		*groups -= 1;
		*inodes -= before;
	}
	if (after > 1) {
		*groups += 1;
		*inodes += after;
	}
}

/* The engine's count with the single constants, corrected at the numbers
 * the few inodes that present otherwise leave and reach: exact without
 * listing every inode (maxobj <= mask, so one objectid per subvolume
 * presents a number). */
static int corrected(const struct pres *p, const struct btrfsimg_collide_input *in,
		     const uint64_t *c, uint64_t mask, uint64_t *groups, uint64_t *inodes)
{
	struct moved *m = NULL;
	size_t n = 0;
	int rc = moved_list(p, in, c, mask, &m, &n);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (!seen_value(m, i, false, m[i].dev, m[i].from))
			correct_value(p, in, c, mask, m, n, m[i].dev, m[i].from, groups, inodes);
		if (!seen_value(m, i, true, m[i].dev, m[i].to))
			correct_value(p, in, c, mask, m, n, m[i].dev, m[i].to, groups, inodes);
	}
	free(m);
	return rc;
}

static int count(const struct pres *p, const struct btrfsimg_collide_input *in, uint64_t mask,
		 uint64_t maxobj, uint64_t *groups, uint64_t *inodes)
{
	bool exact = engine_exact(p, in, mask, maxobj);
	if (!exact && mask != UINT64_MAX && maxobj > mask)
		return brute(p, in, mask, groups, inodes); /* many objectids per number */
	uint64_t *c = calloc(in->nsubvols + 1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (size_t i = 0; i < in->nsubvols; i++)
		c[i] = pres_c(p, in->subvols[i].id) & mask;
	/* the stubs' 2 is below 2^32 either way */
	int rc = bi_collide_consts(in, c, p->numdevs, groups, inodes);
	if (rc == 0 && !exact)
		rc = corrected(p, in, c, mask, groups, inodes);
	free(c);
	return rc;
}

/* ------------------------------------------------ readdir */

/* The v4 d_ino is btrfs's st_ino (the overlay only); the fileid adds the
 * uniquifier: they differ for every inode but one per subvolume. */
static uint64_t v4_inodes(const struct pres *p, const struct btrfsimg_collide_subvol *v)
{
	if (!p->uniq || v->id == OBJ_FS_TREE)
		return 0;
	uint64_t n = sv_count(v) - bi_collide_subvol_has(v, OBJ_FIRST_FREE);
	uint64_t ov = btrfsimg_inumbits_overlay(v->id, p->bits), u = btrfsimg_uniquifier(v->id);
	/* the fileid equals the d_ino where the overlaid number is u */
	uint64_t same = ov == u ? ov : ov ^ u;
	if (same != OBJ_FIRST_FREE && bi_collide_subvol_has(v, same))
		n--;
	return n;
}

static void readdir_counts(const struct pres *p, const struct bi_nfs_input *x,
			   struct btrfsimg_nfs_figures *f)
{
	for (size_t i = 0; i < x->nents; i++) {
		const struct bi_nfs_subent *e = &x->ents[i];
		uint64_t st = e->stub ? OBJ_EMPTY_SUBVOL_DIR : pres_f(p, e->child, OBJ_FIRST_FREE);
		struct pres plain = { p->bits, false, p->numdevs };
		uint64_t d4 = e->stub ? OBJ_EMPTY_SUBVOL_DIR
				      : pres_f(&plain, e->child, OBJ_FIRST_FREE);
		f->readdir_v3 += pres_f(p, e->dir_subvol, e->child) != st;
		f->readdir_v4 += d4 != st;
	}
	for (size_t i = 0; i < x->in->nsubvols; i++)
		f->readdir_v4 += v4_inodes(p, &x->in->subvols[i]);
}

/* ------------------------------------------------ the report */

static int figures(const struct pres *p, const struct bi_nfs_input *x, bool nfs,
		   struct btrfsimg_nfs_figures *f)
{
	const struct btrfsimg_collide_input *in = x->in;
	f->scheme = (struct btrfsimg_scheme){ p->bits, p->uniq, p->numdevs };
	f->nfs = nfs;
	int rc = count(p, in, UINT64_MAX, x->max_objectid, &f->groups, &f->inodes);
	if (rc == 0)
		rc = count(p, in, LOW32, x->max_objectid, &f->low32_groups, &f->low32_inodes);
	for (size_t i = 0; i < in->nsubvols; i++)
		f->over32 += over32(p, &in->subvols[i]);
	if (nfs)
		readdir_counts(p, x, f);
	return rc;
}

static void transition(const struct bi_nfs_input *x, struct btrfsimg_nfs_report *r)
{
	for (size_t i = 0; i < x->in->nsubvols; i++) {
		const struct btrfsimg_collide_subvol *v = &x->in->subvols[i];
		uint64_t n = sv_count(v), kept = n;
		if (v->id != OBJ_FS_TREE)
			kept = bi_collide_subvol_has(v, btrfsimg_uniquifier(v->id));
		r->transition_changed += n - kept;
		r->transition_kept += kept;
	}
}

/* The i-th scheme: nfsd, nfsd-uniquifier, inumbits=32..64+uniquifier,
 * then inumbits=32..64 on numdevs 1 and 2 and numdevs=many. */
static struct pres scheme_at(size_t i)
{
	if (i == 0)
		return (struct pres){ 0, false, BTRFSIMG_NUMDEVS_1 };
	if (i == 1)
		return (struct pres){ 0, true, BTRFSIMG_NUMDEVS_1 };
	if (i < BI_NFS_SCHEMES)
		return (struct pres){ (unsigned)(32 + i - 2), true, BTRFSIMG_NUMDEVS_1 };
	i -= BI_NFS_SCHEMES;
	if (i < 33)
		return (struct pres){ (unsigned)(32 + i), false, BTRFSIMG_NUMDEVS_1 };
	if (i < 66)
		return (struct pres){ (unsigned)(i - 1), false, BTRFSIMG_NUMDEVS_2 };
	return (struct pres){ 0, false, BTRFSIMG_NUMDEVS_MANY };
}

int bi_nfs_report(const struct bi_nfs_input *x, struct btrfsimg_nfs_report **out)
{
	struct btrfsimg_nfs_report *r = calloc(1, sizeof(*r));
	size_t n = BI_NFS_SCHEMES + 67;
	int rc = -ENOMEM;
	*out = NULL;
	if (!r || !(r->figures = calloc(n, sizeof(*r->figures))))
		goto fail;
	r->n = n;
	r->nnfs = BI_NFS_SCHEMES;
	for (size_t i = 0; i < n; i++) {
		struct pres p = scheme_at(i);
		if ((rc = figures(&p, x, i < BI_NFS_SCHEMES, &r->figures[i])) < 0)
			goto fail;
	}
	transition(x, r);
	*out = r;
	return 0;
fail:
	btrfsimg_nfs_report_free(r);
	return rc;
}

void btrfsimg_nfs_report_free(struct btrfsimg_nfs_report *r)
{
	if (!r)
		return;
	free(r->figures);
	free(r);
}
