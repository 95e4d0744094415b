// SPDX-License-Identifier: MIT
/*
 * What each recovered version is, once the versions are merged: its kind
 * against today's tree (dropped-subvolume, deleted, previous-version,
 * orphan; the live state itself skipped), whether its inode item is a
 * flush artefact, and which versions of a file hold the same bytes (one
 * record: the verified, else the newest). Apart from the collection
 * (reccollect.c) and the build (recover.c) because each step here
 * compares versions with each other or with today's tree.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "forensic/version.h"

#include "base/ondisk.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"

struct live_ext {
	struct fx_version v;
	size_t cap;
	uint32_t sectorsize;
	int rc;
};

static int live_ext_item(void *ctx, const struct btrfsimg_key *k, const uint8_t *d, uint32_t size)
{
	struct live_ext *l = ctx;
	struct bi_fx_item it = { *k, d, size };
	if (k->type == KT_EXTENT_DATA &&
	    (l->rc = bi_fx_add_extent(&l->v, &it, l->sectorsize, &l->cap)))
		return 1;
	return 0;
}

/* The signature today's tree gives (subvol, ino), or 0 if unreadable. */
static uint64_t live_signature(struct btrfsimg_forensic *f, uint64_t subvol, uint64_t ino,
			       const struct btrfsimg_inode *live)
{
	struct live_ext l = { .sectorsize = f->fs->sectorsize };
	l.v.inode = *live;
	struct btrfsimg_key lo = { ino, KT_EXTENT_DATA, 0 },
			    hi = { ino, KT_EXTENT_DATA, UINT64_MAX };
	int rc = btrfsimg_tree_walk(f->fs, subvol, &lo, &hi, live_ext_item, &l);
	uint64_t sig = rc < 0 || l.rc ? 0 : bi_fx_signature(&l.v);
	bi_fx_version_free(&l.v);
	return sig;
}

static bool subvol_live(const struct bi_fx_recovered *r, uint64_t id)
{
	const struct btrfsimg_subvol *s = bi_fx_live_subvol(r, id);
	return s && !s->deleted;
}

/* An empty version with no extent items caught in the transaction that
 * also wrote a later state of the inode (@transid): the file between its
 * creation and its first write, never committed as such. Not reported. */
static bool just_created(const struct fx_version *v, uint64_t transid)
{
	return v->inode.size == 0 && v->next == 0 && v->inode.transid == transid;
}

/* The same for versions of gone inodes: another version of the file
 * (sorted next to it) with the same transid. */
void bi_fx_skip_just_created(struct bi_fx_recovered *r)
{
	for (size_t i = 0; i < r->nv; i++) {
		struct fx_version *v = &r->v[i];
		for (size_t j = i;
		     !v->skip && j-- > 0 && r->v[j].subvol == v->subvol && r->v[j].ino == v->ino;)
			v->skip = r->v[j].inode.generation == v->inode.generation &&
				  just_created(v, r->v[j].inode.transid) && r->v[j].next;
		for (size_t j = i + 1;
		     !v->skip && j < r->nv && r->v[j].subvol == v->subvol && r->v[j].ino == v->ino;
		     j++)
			v->skip = r->v[j].inode.generation == v->inode.generation &&
				  just_created(v, r->v[j].inode.transid) && r->v[j].next;
	}
}

/* Kind of each version; versions today's tree shows as they are are
 * skipped (unless orphans: reported once). */
void bi_fx_classify(struct btrfsimg_forensic *f)
{
	struct bi_fx_recovered *r = f->rec;
	for (size_t i = 0; i < r->nv; i++) {
		struct fx_version *v = &r->v[i];
		struct btrfsimg_inode live;
		if (!subvol_live(r, v->subvol)) {
			v->kind = BTRFSIMG_REC_DROPPED_SUBVOLUME;
			continue;
		}
		int got = btrfsimg_inode_get(f->fs, v->subvol, v->ino, &live);
		if (v->names_only) { /* no creation generation: gone, or not said */
			v->kind = BTRFSIMG_REC_DELETED;
			v->skip = got == 0;
			continue;
		}
		if (got < 0 || live.generation != v->inode.generation) {
			v->kind = BTRFSIMG_REC_DELETED;
			continue;
		}
		if (v->dir) { /* a live directory: nothing lost */
			v->skip = true;
			continue;
		}
		v->live = (struct fx_live){ live.generation, live.size, live.transid, live.mtime,
					    live.ctime };
		v->has_live = true;
		uint64_t sig = live_signature(f, v->subvol, v->ino, &live);
		if (sig != v->sig) {
			v->kind = BTRFSIMG_REC_PREVIOUS_VERSION;
			v->skip = just_created(v, live.transid);
			continue;
		}
		v->kind = BTRFSIMG_REC_ORPHAN;
		v->skip = live.nlink != 0;
	}
}

static bool same_time(const struct btrfsimg_timespec *a, const struct btrfsimg_timespec *b)
{
	return a->sec == b->sec && a->nsec == b->nsec;
}

/* @v's inode item is @w's with the size lagging: the same mtime and ctime
 * to the nanosecond (a write or truncate that changes the size sets both),
 * a smaller size, and no later transaction. */
static bool size_lags(const struct btrfsimg_inode *v, const struct fx_live *w)
{
	return v->generation == w->generation && v->size < w->size && v->transid <= w->transid &&
	       same_time(&v->mtime, &w->mtime) && same_time(&v->ctime, &w->ctime);
}

/* Versions of one file by creation generation, mtime and ctime, then
 * the largest size first: a run of equal times sees the larger sizes
 * before the smaller ones. Sorts pointers into r->v. */
static int lag_cmp(const void *pa, const void *pb)
{
	const struct fx_version *a = *(const struct fx_version *const *)pa;
	const struct fx_version *b = *(const struct fx_version *const *)pb;
	const struct btrfsimg_inode *x = &a->inode, *y = &b->inode;
#define CMP(p, q)                                                                                  \
	if ((p) != (q))                                                                            \
	return (p) < (q) ? -1 : 1
	CMP(a->subvol, b->subvol);
	CMP(a->ino, b->ino);
	CMP(x->generation, y->generation);
	CMP(x->mtime.sec, y->mtime.sec);
	CMP(x->mtime.nsec, y->mtime.nsec);
	CMP(x->ctime.sec, y->ctime.sec);
	CMP(x->ctime.nsec, y->ctime.nsec);
	CMP(y->size, x->size);
	return 0;
#undef CMP
}

/* One file, one creation, the same mtime and ctime. */
static bool same_times(const struct fx_version *a, const struct fx_version *b)
{
	return a->subvol == b->subvol && a->ino == b->ino &&
	       a->inode.generation == b->inode.generation &&
	       same_time(&a->inode.mtime, &b->inode.mtime) &&
	       same_time(&a->inode.ctime, &b->inode.ctime);
}

static void mark_artefact(struct fx_version *v)
{
	if (v->skip || v->dir)
		return;
	v->res->rec.status = BTRFSIMG_REC_ARTEFACT;
	v->res->rec.verified = false;
}

/*
 * Flush artefacts: an inode item written out (a leaf flushed mid-
 * transaction, or committed before the data's ordered extents completed:
 * the kernel raises the on-disk i_size only then) with the times of the
 * write that made a later state but the size from before it, often 0.
 * Nobody saw that state: its bytes are not a content the file held. The
 * later state is another version of the file (skipped or not) or today's
 * inode. Status "artefact", never intact or verified. One sort: each run
 * of equal times is swept from the largest size down, so the work is
 * n log n however many versions a file has.
 */
int bi_fx_mark_artefacts(struct bi_fx_recovered *r)
{
	for (size_t i = 0; i < r->nv; i++)
		if (r->v[i].has_live && size_lags(&r->v[i].inode, &r->v[i].live))
			mark_artefact(&r->v[i]);
	struct fx_version **p = malloc((r->nv ? r->nv : 1) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	size_t n = 0;
	for (size_t i = 0; i < r->nv; i++)
		if (!r->v[i].dir)
			p[n++] = &r->v[i];
	fx_qsort(p, n, sizeof(*p), lag_cmp);
	for (size_t a = 0; a < n;) {
		size_t b = a + 1;
		while (b < n && same_times(p[a], p[b]))
			b++;
		/* [a, b): one file, one creation, the same times; larger
		 * sizes first. @newest: the latest transid of a larger size. */
		uint64_t newest = 0;
		bool any = false;
		for (size_t i = a; i < b;) {
			size_t j = i + 1;
			while (j < b && p[j]->inode.size == p[i]->inode.size)
				j++;
			for (size_t k = i; k < j; k++)
				if (any && p[k]->inode.transid <= newest)
					mark_artefact(p[k]);
			for (size_t k = i; k < j; k++)
				if (!any || p[k]->inode.transid > newest)
					newest = p[k]->inode.transid;
			any = true;
			i = j;
		}
		a = b;
	}
	free(p);
	return 0;
}

/*
 * The content hash of same_contents, over the bytes with every run of
 * zeros folded into one record (a 0 byte, then the run's length as 8
 * bytes; other bytes as they are): unambiguous, as a literal 0 never comes
 * otherwise, and equal for equal bytes whether a run lies in a hole or in
 * an extent. A hole of any size is one step, so merging versions costs
 * their data, never their size.
 */
struct content_hash {
	uint64_t h, zeros; /* zeros: the run not yet folded in */
};

static void fold_zeros(struct content_hash *c)
{
	if (!c->zeros)
		return;
	uint8_t rec[9] = { 0 };
	for (int i = 0; i < 8; i++)
		rec[1 + i] = (uint8_t)(c->zeros >> (8 * i));
	c->h = bi_fx_fnv(c->h, rec, sizeof(rec));
	c->zeros = 0;
}

static int hash_hole(void *ctx, uint64_t off, uint64_t len)
{
	(void)off;
	struct content_hash *c = ctx;
	c->zeros += len; /* at most i_size in all: no overflow */
	return 0;
}

static int hash_piece(void *ctx, uint64_t off, const void *data, size_t len)
{
	(void)off;
	struct content_hash *c = ctx;
	const uint8_t *p = data;
	for (size_t i = 0; i < len; i++) {
		if (!p[i]) {
			c->zeros++;
			continue;
		}
		fold_zeros(c);
		c->h = (c->h ^ p[i]) * 0x100000001b3ull;
	}
	return 0;
}

static bool better(const struct fx_version *a, const struct fx_version *b)
{
	if (a->res->rec.verified != b->res->rec.verified)
		return a->res->rec.verified;
	return a->leaf_gen > b->leaf_gen;
}

/* Versions of one file whose bytes are the same (intact, same size and
 * content hash) are one: the verified one, else the newest, is kept. */
int bi_fx_same_contents(struct btrfsimg_forensic *f)
{
	struct bi_fx_recovered *r = f->rec;
	for (size_t i = 0; i < r->nv; i++) {
		struct fx_version *v = &r->v[i];
		if (v->skip || v->dir || v->res->rec.status != BTRFSIMG_REC_INTACT)
			continue;
		struct content_hash c = { 0xcbf29ce484222325ull, 0 };
		int rc = bi_fx_out_walk_holes(f, v, false, hash_piece, hash_hole, &c);
		if (rc < 0)
			return rc;
		fold_zeros(&c);
		v->res->content = c.h;
	}
	for (size_t i = 0; i < r->nv; i++) {
		struct fx_version *a = &r->v[i];
		if (a->skip || a->dir || a->res->rec.status != BTRFSIMG_REC_INTACT)
			continue;
		for (size_t j = i + 1; j < r->nv; j++) {
			struct fx_version *b = &r->v[j];
			if (b->subvol != a->subvol || b->ino != a->ino)
				break;
			if (b->skip || b->dir || b->res->rec.status != BTRFSIMG_REC_INTACT ||
			    b->inode.generation != a->inode.generation ||
			    b->inode.size != a->inode.size || b->res->content != a->res->content)
				continue;
			if (better(b, a)) {
				a->skip = true;
				break;
			}
			b->skip = true;
		}
	}
	return 0;
}
