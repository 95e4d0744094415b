// SPDX-License-Identifier: MIT
/*
 * Versions of files from the forensic index: deleted files, earlier
 * versions, dropped subvolumes, orphans, and how much of each can be
 * trusted. This file builds them (the steps in the files version.h
 * lists) and answers btrfsimg_forensic.h with them.
 *
 * A version is what one fs-tree leaf (live or stale, of a generation G)
 * holds of one inode: its INODE_ITEM, INODE_REF names and EXTENT_DATA
 * items. At one moment an inode's items are a contiguous key run and its
 * extent items do not overlap, so a leaf in which the run ends before the
 * last slot shows the whole inode as it was at G ("complete"); a run that
 * reaches the last slot is continued in leaves of the same owner and
 * generation that start with the same inode, if found, and otherwise the
 * bytes past its last extent are "items not found". How far each
 * version's data can be trusted is recdata.c's part.
 *
 * Kinds: a version whose subvolume is gone (or deleted, not yet cleaned)
 * is "dropped-subvolume"; one whose inode today's tree lacks, or holds
 * with another creation generation, "deleted"; one whose inode lives with
 * other extents or size "previous-version"; today's own state with link
 * count 0 "orphan". Identical versions (same extent items, or the same
 * bytes when intact) are one record, the verified or newest one.
 *
 * Directories no live path shows any more (gone from their live tree, or
 * in a dropped subvolume) are records too, one per directory (every
 * state of it is one record: a directory has no contents): intact when
 * its items were seen whole, else metadata-only; never verified. One
 * whose INODE_ITEM no leaf holds any more, but which names show (the
 * parent of a name, an entry of type directory), is a metadata-only
 * record with mode S_IFDIR alone.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "forensic/version.h"

#include "base/err.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"
#include "btrfs/root.h"
#include "files/compress.h"
#include "files/extent.h"

static void recovered_free(struct bi_fx_recovered *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nrefs; i++)
		free(r->refs[i].name);
	for (size_t i = 0; i < r->nrrefs; i++)
		free(r->rrefs[i].name);
	for (size_t i = 0; i < r->nv; i++)
		bi_fx_version_free(&r->v[i]);
	free(r->refs);
	free(r->dext);
	free(r->csums);
	free(r->rrefs);
	free(r->v);
	free(r->vslots);
	free(r->found);
	free(r->found_hash);
	btrfsimg_subvols_free(r->subvols, r->nsubvols);
	bi_zctx_free(r->z);
	bi_fx_csum_cache_free(r->csum_cache);
	free(r);
}

/* ------------------------------------------------------------ sorting */

static int ver_cmp(const void *pa, const void *pb)
{
	const struct fx_version *a = pa, *b = pb;
#define CMP(x, y)                                                                                  \
	if ((x) != (y))                                                                            \
	return (x) < (y) ? -1 : 1
	CMP(a->subvol, b->subvol);
	CMP(a->ino, b->ino);
	CMP(b->inode.generation, a->inode.generation);
	CMP(a->sig, b->sig);
	CMP(b->complete, a->complete);
	CMP(b->leaf_gen, a->leaf_gen);
	CMP(b->inode.transid, a->inode.transid);
	return 0;
}

/* Newest first inside a file (creation generation, then the leaf's). */
static int order_cmp(const void *pa, const void *pb)
{
	const struct fx_version *a = pa, *b = pb;
	CMP(a->subvol, b->subvol);
	CMP(a->ino, b->ino);
	CMP(b->inode.generation, a->inode.generation);
	CMP(b->leaf_gen, a->leaf_gen);
	CMP(b->inode.transid, a->inode.transid);
	CMP(a->sig, b->sig);
	return 0;
#undef CMP
}

static int csum_cmp(const void *pa, const void *pb)
{
	const struct fx_csum *a = pa, *b = pb;
	return a->start < b->start ? -1 : a->start > b->start;
}

/* One entry per (bytenr, len, gen) with the newest sightings. */
static void merge_dext(struct bi_fx_recovered *r)
{
	fx_qsort(r->dext, r->ndext, sizeof(*r->dext), dext_cmp);
	size_t u = 0;
	for (size_t i = 0; i < r->ndext; i++) {
		struct fx_dext *p = u ? &r->dext[u - 1] : NULL, *d = &r->dext[i];
		if (p && p->bytenr == d->bytenr && p->len == d->len && p->gen == d->gen) {
			if (d->last_seen > p->last_seen)
				p->last_seen = d->last_seen;
			continue;
		}
		r->dext[u++] = *d;
	}
	r->ndext = u;
}

/* Identical versions of a file (same signature) once: the newest. */
static void merge_versions(struct bi_fx_recovered *r)
{
	fx_qsort(r->v, r->nv, sizeof(*r->v), ver_cmp);
	size_t u = 0;
	for (size_t i = 0; i < r->nv; i++) {
		struct fx_version *p = u ? &r->v[u - 1] : NULL, *v = &r->v[i];
		if (p && p->subvol == v->subvol && p->ino == v->ino &&
		    p->inode.generation == v->inode.generation && p->sig == v->sig) {
			bi_fx_version_free(v);
			continue;
		}
		r->v[u++] = *v;
	}
	r->nv = u;
	fx_qsort(r->v, r->nv, sizeof(*r->v), order_cmp);
}

/* ------------------------------------------------------------ directories */

struct dir_cand {
	uint64_t subvol, ino, gen;
};

static int cand_cmp(const void *pa, const void *pb)
{
	const struct dir_cand *a = pa, *b = pb;
	if (a->subvol != b->subvol)
		return a->subvol < b->subvol ? -1 : 1;
	if (a->ino != b->ino)
		return a->ino < b->ino ? -1 : 1;
	return a->gen > b->gen ? -1 : a->gen < b->gen;
}

/* Whether a directory version of (subvol, ino) was found (r->v sorted by
 * subvolume and inode). */
static bool have_dir(const struct bi_fx_recovered *r, uint64_t subvol, uint64_t ino)
{
	size_t a = 0, b = r->nv;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		const struct fx_version *x = &r->v[m];
		if (x->subvol < subvol || (x->subvol == subvol && x->ino < ino))
			a = m + 1;
		else
			b = m;
	}
	for (; a < r->nv && r->v[a].subvol == subvol && r->v[a].ino == ino; a++)
		if (r->v[a].dir)
			return true;
	return false;
}

/* Directories no leaf found the INODE_ITEM of, known from names: the
 * parent of a name, or a DIR_INDEX entry of type directory. One version
 * each (mode S_IFDIR alone, times unknown), seen at the newest generation
 * of those names. */
static int names_only_dirs(struct bi_fx_recovered *r)
{
	struct dir_cand *c = malloc((2 * r->nrefs + 1) * sizeof(*c));
	if (!c)
		return -ENOMEM;
	size_t n = 0;
	for (size_t i = 0; i < r->nrefs; i++) {
		const struct fx_ref *x = &r->refs[i];
		if (x->parent >= OBJ_FIRST_FREE && x->parent != x->ino)
			c[n++] = (struct dir_cand){ x->subvol, x->parent, x->newest };
		if (x->dir && x->ino >= OBJ_FIRST_FREE)
			c[n++] = (struct dir_cand){ x->subvol, x->ino, x->dir_gen };
	}
	fx_qsort(c, n, sizeof(*c), cand_cmp);
	size_t before = r->nv;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (i && c[i].subvol == c[i - 1].subvol && c[i].ino == c[i - 1].ino)
			continue; /* the newest sighting came first */
		if (have_dir(r, c[i].subvol, c[i].ino))
			continue;
		struct fx_version v = { .subvol = c[i].subvol,
					.ino = c[i].ino,
					.leaf_gen = c[i].gen,
					.dir = true,
					.names_only = true };
		v.inode.mode = S_IFDIR;
		rc = bi_fx_add_version(r, &v);
	}
	free(c);
	if (r->nv != before)
		fx_qsort(r->v, r->nv, sizeof(*r->v), order_cmp);
	return rc;
}

/* ------------------------------------------------------------ building */

/* A directory's record: intact when its items were seen whole (the
 * run of its items ended inside the leaves found), else metadata-only
 * (always when only its names were found); never verified (no data). */
static void finish_dir(struct fx_version *v)
{
	v->res->rec.status = v->complete ? BTRFSIMG_REC_INTACT : BTRFSIMG_REC_METADATA_ONLY;
	v->res->rec.verified = false;
}

static int finish(struct btrfsimg_forensic *f, struct fx_version *v, uint8_t *buf)
{
	struct fx_result *res = v->res = calloc(1, sizeof(*v->res));
	if (!res)
		return -ENOMEM;
	res->rec.kind = v->kind;
	int rc = 0;
	if (v->dir)
		finish_dir(v);
	else
		rc = bi_fx_evaluate(f, v, buf);
	if (rc < 0)
		return rc;
	res->path = bi_fx_version_path(f->rec, v);
	if (!res->path)
		return -ENOMEM;
	snprintf(res->id, sizeof(res->id), "%" PRIu64 "-%" PRIu64 "-%" PRIu64 "-%08" PRIx32,
		 v->subvol, v->ino, v->inode.transid, (uint32_t)(v->sig ^ (v->sig >> 32)));
	struct btrfsimg_recovered *rec = &res->rec;
	rec->id = res->id;
	rec->subvol = v->subvol;
	rec->objectid = v->ino;
	rec->generation = v->leaf_gen;
	rec->path = res->path;
	rec->name_damage = res->name_damage[0] ? res->name_damage : NULL;
	rec->inode = v->inode;
	rec->bad = res->bad;
	rec->nbad = res->nbad;
	return 0;
}

static int build(struct btrfsimg_forensic *f)
{
	struct btrfsimg_fs *fs = f->fs;
	struct bi_fx_recovered *r = calloc(1, sizeof(*r));
	if (!r)
		return bi_err(fs, -ENOMEM, "deleted files: out of memory");
	f->rec = r;
	uint8_t *buf = malloc(OUT_CHUNK);
	r->csum_cache = bi_fx_csum_cache_new(fs->nodesize);
	int rc = -ENOMEM;
	if (!buf || !r->csum_cache)
		goto out;
	rc = btrfsimg_subvols(fs, &r->subvols, &r->nsubvols);
	if (rc < 0)
		goto out;
	if ((rc = bi_fx_collect(f)) < 0)
		goto out;
	fx_qsort(r->csums, r->ncsums, sizeof(*r->csums), csum_cmp);
	merge_dext(r);
	merge_versions(r);
	if ((rc = names_only_dirs(r)) < 0)
		goto out;
	bi_fx_classify(f);
	bi_fx_skip_just_created(r);
	r->csum_span = bi_fx_csum_span(r);
	for (size_t i = 0; i < r->nv && rc >= 0; i++)
		if (!r->v[i].skip)
			rc = finish(f, &r->v[i], buf);
	if (rc > 0)
		rc = 0;
	if (rc == 0)
		rc = bi_fx_mark_artefacts(r);
	if (rc == 0)
		rc = bi_fx_same_contents(f);
out:
	free(buf);
	if (rc == -ENOMEM)
		bi_err(fs, rc, "deleted files: out of memory");
	if (rc < 0) {
		recovered_free(r);
		f->rec = NULL;
	}
	return rc;
}

/* ------------------------------------------------------------ API */

void btrfsimg_forensic_free(btrfsimg_forensic *f)
{
	if (!f)
		return;
	recovered_free(f->rec);
	f->rec = NULL;
	bi_fx_index_free(f);
}

const char *btrfsimg_recovered_kind_name(enum btrfsimg_recovered_kind k)
{
	switch (k) {
	case BTRFSIMG_REC_DELETED:
		return "deleted";
	case BTRFSIMG_REC_PREVIOUS_VERSION:
		return "previous-version";
	case BTRFSIMG_REC_DROPPED_SUBVOLUME:
		return "dropped-subvolume";
	case BTRFSIMG_REC_ORPHAN:
		return "orphan";
	}
	return "unknown";
}

const char *btrfsimg_recovered_status_name(enum btrfsimg_recovered_status s)
{
	switch (s) {
	case BTRFSIMG_REC_INTACT:
		return "intact";
	case BTRFSIMG_REC_PARTIAL:
		return "partial";
	case BTRFSIMG_REC_OVERWRITTEN:
		return "overwritten";
	case BTRFSIMG_REC_METADATA_ONLY:
		return "metadata-only";
	case BTRFSIMG_REC_ARTEFACT:
		return "artefact";
	}
	return "unknown";
}

int bi_fx_ready(struct btrfsimg_forensic *f)
{
	return f->rec ? 0 : build(f);
}

int btrfsimg_forensic_recovered(btrfsimg_forensic *f, btrfsimg_recovered_fn fn, void *ctx)
{
	if (!f || !fn)
		return -EINVAL;
	if (!f->rec) {
		int rc = build(f);
		if (rc < 0)
			return rc;
	}
	for (size_t i = 0; i < f->rec->nv; i++) {
		if (f->rec->v[i].skip)
			continue;
		int rc = fn(ctx, &f->rec->v[i].res->rec);
		if (rc)
			return rc;
	}
	return 0;
}

/* The version of id @id (the index built first if need be): 0, -ENOENT
 * (said), or build's error. */
static int find_version(struct btrfsimg_forensic *f, const char *id, struct fx_version **out)
{
	if (!f->rec) {
		int rc = build(f);
		if (rc < 0)
			return rc;
	}
	for (size_t i = 0; i < f->rec->nv; i++)
		if (!f->rec->v[i].skip && strcmp(f->rec->v[i].res->id, id) == 0) {
			*out = &f->rec->v[i];
			return 0;
		}
	return bi_err(f->fs, -ENOENT, "no recovered version has id %s", id);
}

/* The XATTR_ITEMs after a version's INODE_ITEM in its leaf (@blk, a copy:
 * @fn may read other blocks), in key order. */
static int leaf_xattrs(const struct fx_version *v, const uint8_t *blk, uint32_t nritems,
		       btrfsimg_xattr_fn fn, void *ctx)
{
	char why[192];
	for (uint32_t s = v->slot + 1; s < nritems; s++) {
		struct bi_fx_item it;
		bi_fx_item_at(blk, s, &it);
		if (it.key.objectid != v->ino || it.key.type > KT_XATTR_ITEM)
			break;
		if (it.key.type != KT_XATTR_ITEM ||
		    bi_dir_item_check(it.data, it.size, &it.key, why, sizeof(why)) < 0)
			continue; /* a damaged item: its xattrs are not given */
		struct bi_dir_entry e;
		uint32_t pos = 0;
		while (bi_dir_item_next(it.data, it.size, KT_XATTR_ITEM, &pos, &e, NULL, 0) > 0) {
			int rc = fn(ctx, e.name, e.name_len, e.data, e.data_len);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int btrfsimg_forensic_xattrs(btrfsimg_forensic *f, const char *id, btrfsimg_xattr_fn fn,
			     void *ctx)
{
	if (!f || !id || !fn)
		return -EINVAL;
	struct fx_version *v;
	int rc = find_version(f, id, &v);
	if (rc < 0 || !v->has_leaf)
		return rc;
	const struct bi_fx_block *b = &f->blocks[v->leaf];
	if ((rc = bi_fx_read_block(f, b)) < 0)
		return rc;
	uint8_t *blk = malloc(f->fs->nodesize);
	if (!blk)
		return bi_err(f->fs, -ENOMEM, "deleted files: out of memory");
	memcpy(blk, f->buf, f->fs->nodesize);
	rc = leaf_xattrs(v, blk, b->nritems, fn, ctx);
	free(blk);
	return rc;
}

int btrfsimg_forensic_read(btrfsimg_forensic *f, const char *id, btrfsimg_data_fn fn, void *ctx)
{
	return btrfsimg_forensic_read_flags(f, id, 0, fn, ctx);
}

int btrfsimg_forensic_read_flags(btrfsimg_forensic *f, const char *id, unsigned flags,
				 btrfsimg_data_fn fn, void *ctx)
{
	if (!f || !id || !fn || (flags & ~(unsigned)BTRFSIMG_FORENSIC_RAW))
		return -EINVAL;
	struct fx_version *v;
	int err = find_version(f, id, &v);
	if (err < 0)
		return err;
	if (v->dir)
		return bi_err(f->fs, -EISDIR, "recovered version %s is a directory (%s): no contents", id,
			      v->res->path);
	int rc = bi_fx_out_walk(f, v, flags & BTRFSIMG_FORENSIC_RAW, fn, ctx);
	if (rc)
		return rc;
	return v->res->rec.status == BTRFSIMG_REC_INTACT ? 0 : 1;
}
