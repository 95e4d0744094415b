// SPDX-License-Identifier: MIT
/*
 * Versions of files from the forensic index: deleted files, earlier
 * versions, dropped subvolumes, orphans, and how much of each can be
 * trusted.
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

#include "forensic/recover.h"

#include "base/cursor.h"
#include "base/grow.h"
#include "base/err.h"
#include "base/name.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"
#include "files/compress.h"
#include "files/extent.h"

static void version_free(struct fx_version *v)
{
	for (size_t i = 0; i < v->next; i++)
		free((void *)v->ext[i].inline_data);
	free(v->ext);
	free(v->path);
	free(v->bad);
	free(v->state);
	free(v->sub);
}

static void recovered_free(struct bi_fx_recovered *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nrefs; i++)
		free(r->refs[i].name);
	for (size_t i = 0; i < r->nrrefs; i++)
		free(r->rrefs[i].name);
	for (size_t i = 0; i < r->nv; i++)
		version_free(&r->v[i]);
	free(r->refs);
	free(r->dext);
	free(r->csums);
	free(r->rrefs);
	free(r->v);
	btrfsimg_subvols_free(r->subvols, r->nsubvols);
	bi_zctx_free(r->z);
	free(r->csum_leaf);
	free(r);
}

/* ------------------------------------------------------------ leaf items */

struct leaf_item {
	bi_key key;
	const uint8_t *data;
	uint32_t size;
};

static void item_at(const uint8_t *blk, uint32_t slot, struct leaf_item *it)
{
	const uint8_t *p = blk + HDR_SIZE + (size_t)slot * ITEM_SIZE;
	bi_key_read(p, &it->key);
	it->data = blk + HDR_SIZE + bi_le32(p + ITEM_OFFSET);
	it->size = bi_le32(p + ITEM_DSIZE);
}

/* A name's safe form (base/name.h), NUL-terminated: a NUL in it no
 * longer cuts the path, a '/' no longer adds a level. */
static char *dup_name(const uint8_t *p, size_t n)
{
	size_t cap = BI_NAME_SAFE_MAX(n) + 1;
	char *s = malloc(cap);
	if (s)
		bi_name_safe(p, n, s, cap);
	return s;
}

static int add_ref(struct bi_fx_recovered *r, uint64_t subvol, uint64_t ino, uint64_t parent,
		   uint64_t gen, const uint8_t *name, size_t n)
{
	if (bi_grow((void **)&r->refs, &r->crefs, r->nrefs + 1, sizeof(*r->refs)))
		return -ENOMEM;
	char *s = dup_name(name, n);
	if (!s)
		return -ENOMEM;
	r->refs[r->nrefs++] =
		(struct fx_ref){ subvol, ino, parent, gen, s, bi_name_problem(name, n), false };
	return 0;
}

static int add_dext(struct bi_fx_recovered *r, const struct bi_extent *e, uint64_t leaf_gen)
{
	if (bi_grow((void **)&r->dext, &r->cdext, r->ndext + 1, sizeof(*r->dext)))
		return -ENOMEM;
	r->dext[r->ndext++] =
		(struct fx_dext){ e->disk_bytenr, e->disk_num_bytes, e->generation, leaf_gen };
	return 0;
}

/* Names from INODE_REF and DIR_INDEX items; disk extents of EXTENT_DATA. */
static int leaf_names(struct btrfsimg_forensic *f, const struct bi_fx_block *b,
		      const struct leaf_item *it)
{
	struct bi_fx_recovered *r = f->rec;
	char why[256];
	if (it->key.type == KT_INODE_REF) {
		uint32_t pos = 0;
		struct bi_ref_entry e;
		while (bi_iref_next(it->data, it->size, it->key.offset, &pos, &e, why,
				    sizeof(why)) == 1)
			if (add_ref(r, b->owner, it->key.objectid, e.parent, b->generation, e.name,
				    e.name_len))
				return -ENOMEM;
	} else if (it->key.type == KT_DIR_INDEX) {
		uint32_t pos = 0;
		struct bi_dir_entry e;
		if (bi_dir_item_next(it->data, it->size, KT_DIR_INDEX, &pos, &e, why,
				     sizeof(why)) == 1 &&
		    e.location.type == KT_INODE_ITEM) {
			if (add_ref(r, b->owner, e.location.objectid, it->key.objectid,
				    b->generation, e.name, e.name_len))
				return -ENOMEM;
			r->refs[r->nrefs - 1].dir = e.type == FT_DIR;
		}
	}
	return 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t signature(const struct fx_version *v)
{
	/* A directory has no contents: all its states are one record. */
	if (v->dir)
		return fnv(0xcbf29ce484222325ull, "directory", 9);
	uint64_t h = fnv(0xcbf29ce484222325ull, &v->inode.size, 8);
	for (size_t i = 0; i < v->next; i++) {
		const struct bi_extent *e = &v->ext[i];
		if (e->file_offset >= v->inode.size)
			continue;
		uint64_t w[7] = { e->file_offset, e->type | (uint64_t)e->compression << 8,
				  e->disk_bytenr, e->disk_num_bytes,
				  e->offset,	  e->num_bytes,
				  e->ram_bytes };
		h = fnv(h, w, sizeof(w));
		if (e->inline_data)
			h = fnv(h, e->inline_data, e->inline_size);
	}
	return h;
}

static int add_extent(struct fx_version *v, const struct leaf_item *it, uint32_t sectorsize,
		      size_t *cap)
{
	struct bi_extent e;
	char why[256];
	if (bi_extent_parse(it->data, it->size, it->key.offset, sectorsize, &e, why, sizeof(why)) <
	    0)
		return 0;
	if (e.inline_data) {
		uint8_t *copy = malloc(e.inline_size ? e.inline_size : 1);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, e.inline_data, e.inline_size);
		e.inline_data = copy;
	}
	if (bi_grow((void **)&v->ext, cap, v->next + 1, sizeof(*v->ext))) {
		free((void *)e.inline_data);
		return -ENOMEM;
	}
	v->ext[v->next++] = e;
	return 0;
}

/* The items of inode @v->ino in leaf @blk from slot *slot; *slot ends
 * past them. Returns whether the run reached the last slot. */
static int take_run(struct btrfsimg_forensic *f, const uint8_t *blk, uint32_t nritems,
		    uint32_t *slot, struct fx_version *v, size_t *cap, bool *at_end)
{
	struct leaf_item it;
	for (; *slot < nritems; (*slot)++) {
		item_at(blk, *slot, &it);
		if (it.key.objectid != v->ino)
			break;
		if (it.key.type == KT_EXTENT_DATA) {
			int rc = add_extent(v, &it, f->fs->sectorsize, cap);
			if (rc < 0)
				return rc;
		}
	}
	*at_end = *slot >= nritems;
	return 0;
}

/* The first block of [lo, hi) (one owner's, sorted by generation, level,
 * first key) after (gen, level 0, @after). */
static const struct bi_fx_block *leaf_after(const struct btrfsimg_forensic *f, size_t lo, size_t hi,
					    uint64_t gen, const bi_key *after)
{
	while (lo < hi) {
		size_t m = lo + (hi - lo) / 2;
		const struct bi_fx_block *c = &f->blocks[m];
		bool before = c->generation < gen || (c->generation == gen && c->level == 0 &&
						      bi_key_cmp(&c->first, after) <= 0);
		if (before)
			lo = m + 1;
		else
			hi = m;
	}
	return lo < f->nblocks ? &f->blocks[lo] : NULL;
}

/* Follow a run from leaf @n on (a leaf of the same owner and generation
 * as the one it left, starting with the same inode), leaf after leaf. */
static int follow_run(struct btrfsimg_forensic *f, size_t lo, size_t hi,
		      const struct bi_fx_block *n, struct fx_version *v, size_t *cap)
{
	uint64_t gen = n->generation;
	for (int hops = 0; hops < 1024; hops++) {
		if (!n || n >= f->blocks + hi || n->generation != gen || n->level != 0 ||
		    !n->nritems || n->first.objectid != v->ino || bi_fx_read_block(f, n) < 0)
			return 0;
		uint32_t slot = 0;
		bool at_end;
		int rc = take_run(f, f->buf, n->nritems, &slot, v, cap, &at_end);
		if (rc < 0 || !at_end) {
			v->complete = rc == 0;
			return rc;
		}
		n = leaf_after(f, lo, hi, gen, &n->last);
	}
	return 0;
}

static void drop_extents(struct fx_version *v, size_t keep)
{
	while (v->next > keep)
		free((void *)v->ext[--v->next].inline_data);
	v->complete = false;
}

/* A run that reached the end of its leaf: continue in the leaf of the same
 * owner and generation that starts next, if it starts with the same inode.
 * A transaction can leave more than one such leaf on disk (one written
 * before a later change in the same transaction): the first whose items
 * agree with the inode's nbytes is taken, else the first. */
static int continue_run(struct btrfsimg_forensic *f, size_t lo, size_t hi,
			const struct bi_fx_block *b, struct fx_version *v, size_t *cap)
{
	size_t base = v->next;
	const struct bi_fx_block *first = leaf_after(f, lo, hi, b->generation, &b->last);
	const struct bi_fx_block *fallback = NULL;
	int tries = 0;
	for (const struct bi_fx_block *n = first;
	     n && n < f->blocks + hi && n->generation == b->generation && n->level == 0 &&
	     tries < 16;
	     n++) {
		if (!n->nritems || n->first.objectid < v->ino)
			continue;
		if (n->first.objectid > v->ino)
			break;
		tries++;
		int rc = follow_run(f, lo, hi, n, v, cap);
		if (rc < 0)
			return rc;
		if (v->complete && (!v->inode.size || bi_fx_nbytes(v) == v->inode.nbytes))
			return 0;
		if (!fallback)
			fallback = n;
		drop_extents(v, base);
	}
	return fallback ? follow_run(f, lo, hi, fallback, v, cap) : 0;
}

static int add_version(struct bi_fx_recovered *r, struct fx_version *v)
{
	if (bi_grow((void **)&r->v, &r->cv, r->nv + 1, sizeof(*r->v))) {
		version_free(v);
		return -ENOMEM;
	}
	v->sig = signature(v);
	r->v[r->nv++] = *v;
	return 0;
}

/* One fs-tree leaf: names, extents, and a version per regular file or
 * symlink whose INODE_ITEM it holds. */
static int fs_leaf(struct btrfsimg_forensic *f, size_t idx, size_t lo, size_t hi)
{
	const struct bi_fx_block *b = &f->blocks[idx];
	int rc = bi_fx_read_block(f, b);
	if (rc < 0)
		return 0; /* changed under us: not used */
	struct bi_fx_recovered *r = f->rec;
	uint8_t *blk = malloc(f->fs->nodesize);
	if (!blk)
		return -ENOMEM;
	memcpy(blk, f->buf, f->fs->nodesize);
	char why[256];
	for (uint32_t s = 0; s < b->nritems && rc == 0; s++) {
		struct leaf_item it;
		item_at(blk, s, &it);
		if ((rc = leaf_names(f, b, &it)) < 0)
			break;
		if (it.key.type == KT_EXTENT_DATA) {
			struct bi_extent e;
			if (bi_extent_parse(it.data, it.size, it.key.offset, f->fs->sectorsize, &e,
					    why, sizeof(why)) == 0 &&
			    e.kind >= BI_EXT_DISK)
				rc = add_dext(r, &e, b->generation);
			continue;
		}
		if (it.key.type != KT_INODE_ITEM || it.key.objectid < OBJ_FIRST_FREE)
			continue;
		struct fx_version v = { .subvol = b->owner,
					.ino = it.key.objectid,
					.leaf_gen = b->generation,
					.has_leaf = true,
					.leaf = idx,
					.slot = s };
		if (bi_inode_parse(it.data, it.size, b->owner, v.ino, 0, &v.inode, why,
				   sizeof(why)) < 0 ||
		    !(S_ISREG(v.inode.mode) || S_ISLNK(v.inode.mode) || S_ISDIR(v.inode.mode)))
			continue;
		v.dir = S_ISDIR(v.inode.mode);
		size_t cap = 0;
		uint32_t slot = s;
		bool at_end;
		rc = take_run(f, blk, b->nritems, &slot, &v, &cap, &at_end);
		v.complete = !at_end;
		if (rc == 0 && at_end)
			rc = continue_run(f, lo, hi, b, &v, &cap);
		if (rc < 0) {
			version_free(&v);
			break;
		}
		rc = add_version(r, &v);
	}
	free(blk);
	return rc;
}

static int csum_leaf(struct btrfsimg_forensic *f, size_t idx)
{
	const struct bi_fx_block *b = &f->blocks[idx];
	if (bi_fx_read_block(f, b) < 0)
		return 0;
	struct bi_fx_recovered *r = f->rec;
	for (uint32_t s = 0; s < b->nritems; s++) {
		struct leaf_item it;
		item_at(f->buf, s, &it);
		if (it.key.objectid != OBJ_EXTENT_CSUM || it.key.type != KT_EXTENT_CSUM ||
		    it.size < f->fs->csum_size)
			continue;
		uint64_t n = it.size / f->fs->csum_size;
		if (bi_grow((void **)&r->csums, &r->ccsums, r->ncsums + 1, sizeof(*r->csums)))
			return -ENOMEM;
		r->csums[r->ncsums++] =
			(struct fx_csum){ it.key.offset, it.key.offset + n * f->fs->sectorsize,
					  b->generation, idx, (uint32_t)(it.data - f->buf) };
	}
	return 0;
}

static int root_leaf(struct btrfsimg_forensic *f, size_t idx)
{
	const struct bi_fx_block *b = &f->blocks[idx];
	if (bi_fx_read_block(f, b) < 0)
		return 0;
	struct bi_fx_recovered *r = f->rec;
	for (uint32_t s = 0; s < b->nritems; s++) {
		struct leaf_item it;
		item_at(f->buf, s, &it);
		struct bi_root_ref rr;
		char why[256];
		if (it.key.type != KT_ROOT_BACKREF ||
		    bi_root_ref_parse(it.data, it.size, &rr, why, sizeof(why)) < 0)
			continue;
		if (bi_grow((void **)&r->rrefs, &r->crrefs, r->nrrefs + 1, sizeof(*r->rrefs)))
			return -ENOMEM;
		char *name = dup_name(rr.name, rr.name_len);
		if (!name)
			return -ENOMEM;
		r->rrefs[r->nrrefs++] = (struct fx_rootref){ it.key.objectid, it.key.offset,
							     rr.dirid,	      b->generation,
							     name, bi_name_problem(rr.name, rr.name_len) };
	}
	return 0;
}

static bool fs_tree(uint64_t owner)
{
	return owner == OBJ_FS_TREE || (owner >= OBJ_FIRST_FREE && owner <= OBJ_LAST_FREE);
}

static int collect(struct btrfsimg_forensic *f)
{
	int rc = 0;
	for (size_t i = 0; i < f->nblocks && rc == 0; i++) {
		const struct bi_fx_block *b = &f->blocks[i];
		if (b->level != 0)
			continue;
		if (b->owner == OBJ_CSUM_TREE)
			rc = csum_leaf(f, i);
		else if (b->owner == OBJ_ROOT_TREE)
			rc = root_leaf(f, i);
		else if (fs_tree(b->owner)) {
			size_t lo, hi;
			bi_fx_owner_range(f, b->owner, &lo, &hi);
			rc = fs_leaf(f, i, lo, hi);
		}
	}
	return rc;
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

static int ref_cmp(const void *pa, const void *pb)
{
	const struct fx_ref *a = pa, *b = pb;
	if (a->subvol != b->subvol)
		return a->subvol < b->subvol ? -1 : 1;
	if (a->ino != b->ino)
		return a->ino < b->ino ? -1 : 1;
	return a->gen > b->gen ? -1 : a->gen < b->gen;
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
			version_free(v);
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
			c[n++] = (struct dir_cand){ x->subvol, x->parent, x->gen };
		if (x->dir && x->ino >= OBJ_FIRST_FREE)
			c[n++] = (struct dir_cand){ x->subvol, x->ino, x->gen };
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
		rc = add_version(r, &v);
	}
	free(c);
	if (r->nv != before)
		fx_qsort(r->v, r->nv, sizeof(*r->v), order_cmp);
	return rc;
}

/* ------------------------------------------------------------ paths */

/* The name of (subvol, ino) nearest generation @gen: the newest at or
 * before it, else the oldest after it. */
static const struct fx_ref *name_of(const struct bi_fx_recovered *r, uint64_t subvol, uint64_t ino,
				    uint64_t gen)
{
	size_t a = 0, b = r->nrefs;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		const struct fx_ref *x = &r->refs[m];
		if (x->subvol < subvol || (x->subvol == subvol && x->ino < ino))
			a = m + 1;
		else
			b = m;
	}
	const struct fx_ref *after = NULL;
	for (size_t i = a; i < r->nrefs && r->refs[i].subvol == subvol && r->refs[i].ino == ino;
	     i++) {
		if (r->refs[i].gen <= gen)
			return &r->refs[i];
		after = &r->refs[i];
	}
	return after;
}

struct sbuf {
	char *s;
	size_t len, cap;
	bool oom;
	char *damage; /* where the first damaged name is said (@damage_cap bytes) */
	size_t damage_cap;
};

/* Say the first name of the path that is shown by its safe form. */
static void sb_damage(struct sbuf *b, const char *kind, uint64_t subvol, uint64_t ino,
		      uint64_t parent, uint64_t gen, const char *why)
{
	if (!why || !b->damage || b->damage[0])
		return;
	snprintf(b->damage, b->damage_cap,
		 "%s of %" PRIu64 " in directory %" PRIu64 " of subvolume %" PRIu64
		 " (leaf generation %" PRIu64 "): %s",
		 kind, ino, parent, subvol, gen, why);
}

static void sb_prepend(struct sbuf *b, const char *p, size_t n)
{
	if (b->oom)
		return;
	bool fresh = !b->s;
	if (bi_grow((void **)&b->s, &b->cap, b->len + n + 1, 1)) {
		b->oom = true;
		return;
	}
	if (fresh)
		b->s[0] = '\0';
	memmove(b->s + n, b->s, b->len + 1);
	memcpy(b->s, p, n);
	b->len += n;
}

static void sb_part(struct sbuf *b, const char *p)
{
	if (b->len)
		sb_prepend(b, "/", 1);
	sb_prepend(b, p, strlen(p));
}

static void sb_unknown(struct sbuf *b, uint64_t subvol, uint64_t ino)
{
	char u[64];
	snprintf(u, sizeof(u), "<%" PRIu64 ":%" PRIu64 ">", subvol, ino);
	sb_part(b, u);
}

static const struct btrfsimg_subvol *live_subvol(const struct bi_fx_recovered *r, uint64_t id)
{
	for (size_t i = 0; i < r->nsubvols; i++)
		if (r->subvols[i].id == id)
			return &r->subvols[i];
	return NULL;
}

/* Directory @dir of @subvol back to its root (256), then the subvolume's
 * place: live path, else a stale ROOT_BACKREF. */
static void dir_path(const struct bi_fx_recovered *r, struct sbuf *b, uint64_t subvol, uint64_t dir,
		     uint64_t gen, int depth)
{
	for (; dir != OBJ_FIRST_FREE && depth < MAX_DEPTH; depth++) {
		const struct fx_ref *n = name_of(r, subvol, dir, gen);
		if (!n) {
			sb_unknown(b, subvol, dir);
			return;
		}
		sb_part(b, n->name);
		sb_damage(b, "name", subvol, dir, n->parent, n->gen, n->bad);
		dir = n->parent;
	}
	if (depth >= MAX_DEPTH || subvol == OBJ_FS_TREE)
		return;
	const struct btrfsimg_subvol *s = live_subvol(r, subvol);
	if (s && s->path) {
		if (s->path[0])
			sb_part(b, s->path);
		return;
	}
	const struct fx_rootref *best = NULL;
	for (size_t i = 0; i < r->nrrefs; i++)
		if (r->rrefs[i].child == subvol && (!best || r->rrefs[i].gen > best->gen))
			best = &r->rrefs[i];
	if (!best) {
		sb_unknown(b, subvol, OBJ_FIRST_FREE);
		return;
	}
	sb_part(b, best->name);
	sb_damage(b, "subvolume name", best->parent, subvol, best->dirid, best->gen, best->bad);
	dir_path(r, b, best->parent, best->dirid, gen, depth + 1);
}

static char *version_path(const struct bi_fx_recovered *r, struct fx_version *v)
{
	struct sbuf b = { .damage = v->name_damage, .damage_cap = sizeof(v->name_damage) };
	v->name_damage[0] = '\0';
	sb_prepend(&b, "", 0);
	const struct fx_ref *n = name_of(r, v->subvol, v->ino, v->leaf_gen);
	if (v->ino == OBJ_FIRST_FREE) /* a subvolume's top directory: its place */
		dir_path(r, &b, v->subvol, OBJ_FIRST_FREE, v->leaf_gen, 0);
	else if (n) {
		sb_part(&b, n->name);
		sb_damage(&b, "name", v->subvol, v->ino, n->parent, n->gen, n->bad);
		dir_path(r, &b, v->subvol, n->parent, v->leaf_gen, 0);
	} else {
		sb_unknown(&b, v->subvol, v->ino);
		dir_path(r, &b, v->subvol, OBJ_FIRST_FREE, v->leaf_gen, 0);
	}
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

/* ------------------------------------------------------------ kinds */

struct live_ext {
	struct fx_version v;
	size_t cap;
	uint32_t sectorsize;
	int rc;
};

static int live_ext_item(void *ctx, const struct btrfsimg_key *k, const uint8_t *d, uint32_t size)
{
	struct live_ext *l = ctx;
	struct leaf_item it = { *k, d, size };
	if (k->type == KT_EXTENT_DATA && (l->rc = add_extent(&l->v, &it, l->sectorsize, &l->cap)))
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
	uint64_t sig = rc < 0 || l.rc ? 0 : signature(&l.v);
	version_free(&l.v);
	return sig;
}

static bool subvol_live(const struct bi_fx_recovered *r, uint64_t id)
{
	const struct btrfsimg_subvol *s = live_subvol(r, id);
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
static void skip_just_created(struct bi_fx_recovered *r)
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
static void classify(struct btrfsimg_forensic *f)
{
	struct bi_fx_recovered *r = f->rec;
	for (size_t i = 0; i < r->nv; i++) {
		struct fx_version *v = &r->v[i];
		struct btrfsimg_inode live;
		if (!subvol_live(r, v->subvol)) {
			v->rec.kind = BTRFSIMG_REC_DROPPED_SUBVOLUME;
			continue;
		}
		int got = btrfsimg_inode_get(f->fs, v->subvol, v->ino, &live);
		if (v->names_only) { /* no creation generation: gone, or not said */
			v->rec.kind = BTRFSIMG_REC_DELETED;
			v->skip = got == 0;
			continue;
		}
		if (got < 0 || live.generation != v->inode.generation) {
			v->rec.kind = BTRFSIMG_REC_DELETED;
			continue;
		}
		if (v->dir) { /* a live directory: nothing lost */
			v->skip = true;
			continue;
		}
		v->live = live;
		v->has_live = true;
		uint64_t sig = live_signature(f, v->subvol, v->ino, &live);
		if (sig != v->sig) {
			v->rec.kind = BTRFSIMG_REC_PREVIOUS_VERSION;
			v->skip = just_created(v, live.transid);
			continue;
		}
		v->rec.kind = BTRFSIMG_REC_ORPHAN;
		v->skip = live.nlink != 0;
	}
}

/* ------------------------------------------------------------ building */

/* A directory's record: intact when its items were seen whole (the
 * run of its items ended inside the leaves found), else metadata-only
 * (always when only its names were found); never verified (no data). */
static void finish_dir(struct fx_version *v)
{
	v->rec.status = v->complete ? BTRFSIMG_REC_INTACT : BTRFSIMG_REC_METADATA_ONLY;
	v->rec.verified = false;
}

static int finish(struct btrfsimg_forensic *f, struct fx_version *v, uint8_t *buf)
{
	int rc = 0;
	if (v->dir)
		finish_dir(v);
	else
		rc = bi_fx_evaluate(f, v, buf);
	if (rc < 0)
		return rc;
	v->path = version_path(f->rec, v);
	if (!v->path)
		return -ENOMEM;
	snprintf(v->id, sizeof(v->id), "%" PRIu64 "-%" PRIu64 "-%" PRIu64 "-%08" PRIx32, v->subvol,
		 v->ino, v->inode.transid, (uint32_t)(v->sig ^ (v->sig >> 32)));
	struct btrfsimg_recovered *rec = &v->rec;
	rec->id = v->id;
	rec->subvol = v->subvol;
	rec->objectid = v->ino;
	rec->generation = v->leaf_gen;
	rec->path = v->path;
	rec->name_damage = v->name_damage[0] ? v->name_damage : NULL;
	rec->inode = v->inode;
	rec->bad = v->bad;
	rec->nbad = v->nbad;
	return 0;
}

static int same_contents(struct btrfsimg_forensic *f);

static bool same_time(const struct btrfsimg_timespec *a, const struct btrfsimg_timespec *b)
{
	return a->sec == b->sec && a->nsec == b->nsec;
}

/* @v's inode item is @w's with the size lagging: the same mtime and ctime
 * to the nanosecond (a write or truncate that changes the size sets both),
 * a smaller size, and no later transaction. */
static bool size_lags(const struct btrfsimg_inode *v, const struct btrfsimg_inode *w)
{
	return v->generation == w->generation && v->size < w->size &&
	       v->transid <= w->transid && same_time(&v->mtime, &w->mtime) &&
	       same_time(&v->ctime, &w->ctime);
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
	v->rec.status = BTRFSIMG_REC_ARTEFACT;
	v->rec.verified = false;
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
static int mark_artefacts(struct bi_fx_recovered *r)
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

static int build(struct btrfsimg_forensic *f)
{
	struct btrfsimg_fs *fs = f->fs;
	struct bi_fx_recovered *r = calloc(1, sizeof(*r));
	if (!r)
		return bi_err(fs, -ENOMEM, "deleted files: out of memory");
	f->rec = r;
	uint8_t *buf = malloc(OUT_CHUNK);
	r->csum_leaf = malloc(fs->nodesize);
	int rc = -ENOMEM;
	if (!buf || !r->csum_leaf)
		goto out;
	rc = btrfsimg_subvols(fs, &r->subvols, &r->nsubvols);
	if (rc < 0)
		goto out;
	if ((rc = collect(f)) < 0)
		goto out;
	fx_qsort(r->refs, r->nrefs, sizeof(*r->refs), ref_cmp);
	fx_qsort(r->csums, r->ncsums, sizeof(*r->csums), csum_cmp);
	merge_dext(r);
	merge_versions(r);
	if ((rc = names_only_dirs(r)) < 0)
		goto out;
	classify(f);
	skip_just_created(r);
	r->csum_span = bi_fx_csum_span(r);
	for (size_t i = 0; i < r->nv && rc >= 0; i++)
		if (!r->v[i].skip)
			rc = finish(f, &r->v[i], buf);
	if (rc > 0)
		rc = 0;
	if (rc == 0)
		rc = mark_artefacts(r);
	if (rc == 0)
		rc = same_contents(f);
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
	c->h = fnv(c->h, rec, sizeof(rec));
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
	if (a->rec.verified != b->rec.verified)
		return a->rec.verified;
	return a->leaf_gen > b->leaf_gen;
}

/* Versions of one file whose bytes are the same (intact, same size and
 * content hash) are one: the verified one, else the newest, is kept. */
static int same_contents(struct btrfsimg_forensic *f)
{
	struct bi_fx_recovered *r = f->rec;
	for (size_t i = 0; i < r->nv; i++) {
		struct fx_version *v = &r->v[i];
		if (v->skip || v->dir || v->rec.status != BTRFSIMG_REC_INTACT)
			continue;
		struct content_hash c = { 0xcbf29ce484222325ull, 0 };
		int rc = bi_fx_out_walk_holes(f, v, false, hash_piece, hash_hole, &c);
		if (rc < 0)
			return rc;
		fold_zeros(&c);
		v->content = c.h;
	}
	for (size_t i = 0; i < r->nv; i++) {
		struct fx_version *a = &r->v[i];
		if (a->skip || a->dir || a->rec.status != BTRFSIMG_REC_INTACT)
			continue;
		for (size_t j = i + 1; j < r->nv; j++) {
			struct fx_version *b = &r->v[j];
			if (b->subvol != a->subvol || b->ino != a->ino)
				break;
			if (b->skip || b->dir || b->rec.status != BTRFSIMG_REC_INTACT ||
			    b->inode.generation != a->inode.generation ||
			    b->inode.size != a->inode.size || b->content != a->content)
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
		int rc = fn(ctx, &f->rec->v[i].rec);
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
		if (!f->rec->v[i].skip && strcmp(f->rec->v[i].id, id) == 0) {
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
		struct leaf_item it;
		item_at(blk, s, &it);
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
			      v->path);
	int rc = bi_fx_out_walk(f, v, flags & BTRFSIMG_FORENSIC_RAW, fn, ctx);
	if (rc)
		return rc;
	return v->rec.status == BTRFSIMG_REC_INTACT ? 0 : 1;
}
