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
 * bytes past its last extent are "items not found".
 *
 * Trust in data. Each disk extent (bytenr B, length L, generation g) of a
 * version:
 *   - alive: today's extent tree holds EXTENT_ITEM (B, L) with generation
 *     <= the newest leaf seen referencing the extent: it has been
 *     allocated to this extent all along;
 *   - reused: not alive, and today's extent tree, or any EXTENT_DATA item
 *     found of a later generation, uses bytes of [B, B + L) for another
 *     extent; or a stale chunk maps it and today's chunks cover its
 *     device bytes. A nodatacow (hence nodatasum) extent that a later
 *     version shares may have been rewritten in place: nothing on disk
 *     tells, so such versions read what is there now, never verified;
 *   - verified: every sector matches an EXTENT_CSUM item of a csum-tree
 *     leaf (live or stale) written while B held this extent: generation in
 *     [g, newest leaf referencing it], or any generation >= g when alive.
 *     A match proves the bytes are the ones btrfs wrote for the extent;
 *     compressed extents are checked on the compressed bytes.
 * A verified extent is good even if reused; a csum mismatch, or reuse
 * without verification, makes its range bad ("csum mismatch", "reused").
 * Inline and nodatasum data are never verified.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "5-forensics/fscan.h"

#include "0-base/csum.h"
#include "0-base/cursor.h"
#include "0-base/err.h"
#include "0-base/ondisk.h"
#include "1-image/dev.h"
#include "3-btrfs/chunk.h"
#include "3-btrfs/root.h"
#include "3-btrfs/tree.h"
#include "4-files/compress.h"
#include "4-files/extent.h"

#define INODE_NODATASUM (1ull << 0)
#define INODE_NODATACOW (1ull << 1)
#define MAX_DEPTH	64
#define OUT_CHUNK	(1u << 20)

/* A name of an inode: INODE_REF (ino -> parent) or DIR_INDEX. */
struct fx_ref {
	uint64_t subvol, ino, parent, gen;
	char *name;
};

/* A disk extent some EXTENT_DATA item referenced. */
struct fx_dext {
	uint64_t bytenr, len, gen; /* gen: the item's generation */
	uint64_t last_seen;	   /* newest leaf referencing it */
};

/* An EXTENT_CSUM item of a csum-tree leaf. */
struct fx_csum {
	uint64_t start, end; /* logical bytes covered */
	uint64_t gen;	     /* the leaf's */
	size_t block;	     /* index of the leaf in f->blocks */
	uint32_t off;	     /* item data offset in the leaf */
};

struct fx_rootref {
	uint64_t child, parent, dirid, gen;
	char *name;
};

struct fx_version {
	uint64_t subvol, ino, leaf_gen, sig;
	struct btrfsimg_inode inode;
	struct bi_extent *ext;
	size_t next;
	bool complete;
	/* results */
	struct btrfsimg_recovered rec;
	char id[80];
	char *path;
	struct btrfsimg_bad_range *bad;
	size_t nbad, cbad;
	uint8_t *state;	  /* per extent: enum ext_state */
	uint64_t content; /* hash of the bytes (intact versions) */
	bool skip;
};

struct bi_fx_recovered {
	struct fx_ref *refs;
	size_t nrefs, crefs;
	struct fx_dext *dext;
	size_t ndext, cdext;
	struct fx_csum *csums;
	size_t ncsums, ccsums;
	struct fx_rootref *rrefs;
	size_t nrrefs, crrefs;
	struct fx_version *v;
	size_t nv, cv;
	struct btrfsimg_subvol *subvols;
	size_t nsubvols;
	struct bi_zctx *z;
	uint64_t csum_span; /* the longest range one csum item covers */
	uint8_t *csum_leaf; /* the csum leaf last read */
	size_t csum_leaf_idx;
};

#define GROW(arr, n, cap) ((n) < (cap) ? 0 : grow_array((void **)&(arr), &(cap), sizeof(*(arr))))

static int grow_array(void **arr, size_t *cap, size_t size)
{
	size_t c = *cap ? *cap * 2 : 256;
	void *p = realloc(*arr, c * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

static void version_free(struct fx_version *v)
{
	for (size_t i = 0; i < v->next; i++)
		free((void *)v->ext[i].inline_data);
	free(v->ext);
	free(v->path);
	free(v->bad);
	free(v->state);
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

static char *dup_name(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

static int add_ref(struct bi_fx_recovered *r, uint64_t subvol, uint64_t ino, uint64_t parent,
		   uint64_t gen, const uint8_t *name, size_t n)
{
	if (GROW(r->refs, r->nrefs, r->crefs))
		return -ENOMEM;
	char *s = dup_name(name, n);
	if (!s)
		return -ENOMEM;
	r->refs[r->nrefs++] = (struct fx_ref){ subvol, ino, parent, gen, s };
	return 0;
}

static int add_dext(struct bi_fx_recovered *r, const struct bi_extent *e, uint64_t leaf_gen)
{
	if (GROW(r->dext, r->ndext, r->cdext))
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
		    e.location.type == KT_INODE_ITEM &&
		    add_ref(r, b->owner, e.location.objectid, it->key.objectid, b->generation,
			    e.name, e.name_len))
			return -ENOMEM;
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
	if (v->next == *cap && grow_array((void **)&v->ext, cap, sizeof(*v->ext))) {
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

/* A run that reached the end of its leaf: continue in a leaf of the same
 * owner and generation starting with the same inode. */
static int continue_run(struct btrfsimg_forensic *f, size_t lo, size_t hi,
			const struct bi_fx_block *b, struct fx_version *v, size_t *cap)
{
	bi_key after = b->last;
	for (int hops = 0; hops < 1024; hops++) {
		const struct bi_fx_block *n = NULL;
		for (size_t i = lo; i < hi; i++) {
			const struct bi_fx_block *c = &f->blocks[i];
			if (c->generation == b->generation && c->level == 0 && c->nritems &&
			    c->first.objectid == v->ino && bi_key_cmp(&c->first, &after) > 0 &&
			    (!n || bi_key_cmp(&c->first, &n->first) < 0))
				n = c;
		}
		if (!n || bi_fx_read_block(f, n) < 0)
			return 0;
		uint32_t slot = 0;
		bool at_end;
		int rc = take_run(f, f->buf, n->nritems, &slot, v, cap, &at_end);
		if (rc < 0 || !at_end) {
			v->complete = rc == 0;
			return rc;
		}
		after = n->last;
	}
	return 0;
}

static int add_version(struct bi_fx_recovered *r, struct fx_version *v)
{
	if (GROW(r->v, r->nv, r->cv)) {
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
					.leaf_gen = b->generation };
		if (bi_inode_parse(it.data, it.size, b->owner, v.ino, 0, &v.inode, why,
				   sizeof(why)) < 0 ||
		    !(S_ISREG(v.inode.mode) || S_ISLNK(v.inode.mode)))
			continue;
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
		if (GROW(r->csums, r->ncsums, r->ccsums))
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
		if (GROW(r->rrefs, r->nrrefs, r->crrefs))
			return -ENOMEM;
		char *name = dup_name(rr.name, rr.name_len);
		if (!name)
			return -ENOMEM;
		r->rrefs[r->nrrefs++] = (struct fx_rootref){ it.key.objectid, it.key.offset,
							     rr.dirid, b->generation, name };
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

static int dext_cmp(const void *pa, const void *pb)
{
	const struct fx_dext *a = pa, *b = pb;
	if (a->bytenr != b->bytenr)
		return a->bytenr < b->bytenr ? -1 : 1;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return a->gen < b->gen ? -1 : a->gen > b->gen;
}

static int csum_cmp(const void *pa, const void *pb)
{
	const struct fx_csum *a = pa, *b = pb;
	return a->start < b->start ? -1 : a->start > b->start;
}

/* One entry per (bytenr, len, gen) with the newest sightings. */
static void merge_dext(struct bi_fx_recovered *r)
{
	qsort(r->dext, r->ndext, sizeof(*r->dext), dext_cmp);
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
	qsort(r->v, r->nv, sizeof(*r->v), ver_cmp);
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
	qsort(r->v, r->nv, sizeof(*r->v), order_cmp);
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
};

static void sb_prepend(struct sbuf *b, const char *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		char *s = realloc(b->s, cap);
		if (!s) {
			b->oom = true;
			return;
		}
		if (!b->s)
			s[0] = '\0';
		b->s = s;
		b->cap = cap;
	}
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
	dir_path(r, b, best->parent, best->dirid, gen, depth + 1);
}

static char *version_path(const struct bi_fx_recovered *r, const struct fx_version *v)
{
	struct sbuf b = { 0 };
	sb_prepend(&b, "", 0);
	const struct fx_ref *n = name_of(r, v->subvol, v->ino, v->leaf_gen);
	if (n) {
		sb_part(&b, n->name);
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

/* ------------------------------------------------------------ reading data */

enum ext_state { EXT_GOOD = 0, EXT_VERIFIED = 1, EXT_BAD = 2 };

/* Read @len bytes at @logical: way @copy through today's chunk map, else
 * (copy 0 only) through a stale chunk item. */
static int fx_read(struct btrfsimg_forensic *f, uint64_t logical, uint8_t *buf, size_t len,
		   int copy)
{
	struct btrfsimg_fs *fs = f->fs;
	if (bi_chunk_lookup(fs->chunks, logical))
		return bi_read_copy(fs, logical, buf, len, copy);
	if (copy)
		return -EIO;
	while (len) {
		uint64_t devid, phys, room;
		bool old;
		if (bi_fx_map(f, logical, &devid, &phys, &room, &old) < 0)
			return bi_err(fs, -EIO, "forensic: logical %" PRIu64 " is in no chunk",
				      logical);
		struct bi_dev *d = bi_dev_by_id(fs, devid);
		size_t n = room < len ? (size_t)room : len;
		if (!d || n == 0)
			return bi_err(fs, -EIO, "forensic: logical %" PRIu64 ": device missing",
				      logical);
		int rc = bi_dev_read(fs, d, phys, buf, n);
		if (rc < 0)
			return rc;
		buf += n;
		len -= n;
		logical += n;
	}
	return 0;
}

static int fx_copies(struct btrfsimg_forensic *f, uint64_t logical)
{
	return bi_chunk_lookup(f->fs->chunks, logical) ? bi_num_copies(f->fs, logical) : 1;
}

/* Largest span one csum item covers, for the backwards search. */
static uint64_t csum_span(const struct bi_fx_recovered *r)
{
	uint64_t m = 0;
	for (size_t i = 0; i < r->ncsums; i++)
		if (r->csums[i].end - r->csums[i].start > m)
			m = r->csums[i].end - r->csums[i].start;
	return m;
}

struct csum_q {
	uint64_t gen_lo, gen_hi; /* leaf generations accepted */
	uint64_t span;
};

/* 1: sector at @x matches an accepted csum; 0: accepted csums exist and
 * none matches; -ENOENT: none accepted. */
static int sector_check(struct btrfsimg_forensic *f, const struct csum_q *q, uint64_t x,
			const uint8_t *data)
{
	struct bi_fx_recovered *r = f->rec;
	struct btrfsimg_fs *fs = f->fs;
	size_t a = 0, b = r->ncsums;
	while (a < b) { /* first entry starting after x */
		size_t m = a + (b - a) / 2;
		if (r->csums[m].start <= x)
			a = m + 1;
		else
			b = m;
	}
	uint8_t sum[CSUM_SIZE_MAX];
	bool have = false, any = false;
	for (size_t i = a; i-- > 0;) {
		const struct fx_csum *c = &r->csums[i];
		if (c->start + q->span <= x)
			break;
		if (x >= c->end || c->gen < q->gen_lo || c->gen > q->gen_hi)
			continue;
		if (r->csum_leaf_idx != c->block + 1) {
			if (bi_fx_read_block(f, &f->blocks[c->block]) < 0)
				continue;
			memcpy(r->csum_leaf, f->buf, fs->nodesize);
			r->csum_leaf_idx = c->block + 1;
		}
		if (!have) {
			bi_csum(fs->csum_type, data, fs->sectorsize, sum);
			have = true;
		}
		any = true;
		size_t at = c->off + (size_t)((x - c->start) / fs->sectorsize) * fs->csum_size;
		if (memcmp(r->csum_leaf + at, sum, fs->csum_size) == 0)
			return 1;
	}
	return any ? 0 : -ENOENT;
}

/* Live EXTENT_ITEMs overlapping [b, b + len): same allocation (exact
 * match of start and length, generation <= @seen), or another one. */
struct live_q {
	uint64_t b, len, seen;
	bool same, other;
};

static int live_item(void *ctx, const struct btrfsimg_key *k, const uint8_t *d, uint32_t size)
{
	struct live_q *q = ctx;
	if (k->type != KT_EXTENT_ITEM || k->objectid >= q->b + q->len ||
	    k->objectid + k->offset <= q->b)
		return 0;
	if (k->objectid == q->b && k->offset == q->len && size >= 16 && bi_le64(d + 8) <= q->seen)
		q->same = true;
	else
		q->other = true;
	return 0;
}

static void live_extent(struct btrfsimg_forensic *f, struct live_q *q)
{
	uint64_t back = (uint64_t)MAX_COMPRESSED * 1024; /* 128 MiB: the largest extent */
	struct btrfsimg_key lo = { q->b > back ? q->b - back : 0, 0, 0 };
	struct btrfsimg_key hi = { q->b + q->len - 1, KT_EXTENT_ITEM, UINT64_MAX };
	if (btrfsimg_tree_walk(f->fs, OBJ_EXTENT_TREE, &lo, &hi, live_item, q) < 0)
		q->other = true; /* unknown: not trusted unverified */
}

/* Device bytes of a stale chunk that today's chunks cover again. */
static bool old_space_reused(struct btrfsimg_forensic *f, uint64_t logical, uint64_t len)
{
	if (bi_chunk_lookup(f->fs->chunks, logical))
		return false;
	uint64_t devid, phys, room;
	bool old;
	if (bi_fx_map(f, logical, &devid, &phys, &room, &old) < 0)
		return true;
	const struct bi_chunk_map *m = f->fs->chunks;
	for (size_t i = 0; i < bi_chunk_map_count(m); i++) {
		const struct bi_chunk *c = bi_chunk_map_at(m, i);
		uint64_t span = bi_chunk_stripe_span(c);
		for (uint16_t s = 0; s < c->num_stripes; s++)
			if (c->stripes[s].devid == devid && phys < c->stripes[s].offset + span &&
			    c->stripes[s].offset < phys + len)
				return true;
	}
	return false;
}

/* Another allocation of a later generation used bytes of the extent. */
static bool stale_reuse(const struct bi_fx_recovered *r, const struct bi_extent *e)
{
	uint64_t b = e->disk_bytenr, end = b + e->disk_num_bytes;
	uint64_t back = (uint64_t)MAX_COMPRESSED * 1024;
	for (size_t i = 0; i < r->ndext; i++) { /* sorted by bytenr */
		const struct fx_dext *d = &r->dext[i];
		if (d->bytenr + back < b)
			continue;
		if (d->bytenr >= end)
			break;
		if (d->bytenr + d->len <= b || d->gen <= e->generation)
			continue;
		return true;
	}
	return false;
}

static const struct fx_dext *dext_of(const struct bi_fx_recovered *r, const struct bi_extent *e)
{
	struct fx_dext key = { e->disk_bytenr, e->disk_num_bytes, e->generation, 0 };
	return bsearch(&key, r->dext, r->ndext, sizeof(*r->dext), dext_cmp);
}

/* Read [lo, hi) of an extent in pieces and check every sector. *match
 * and *miss count sectors that matched / had accepted csums that did not. */
static int check_sectors(struct btrfsimg_forensic *f, const struct csum_q *q, uint64_t lo,
			 uint64_t hi, uint8_t *buf, uint64_t *match, uint64_t *miss)
{
	uint32_t ss = f->fs->sectorsize;
	for (uint64_t x = lo; x < hi;) {
		size_t n = hi - x < OUT_CHUNK ? (size_t)(hi - x) : OUT_CHUNK;
		int copies = fx_copies(f, x), rc = -EIO;
		uint64_t best_match = 0, best_miss = UINT64_MAX;
		for (int c = 0; c < copies; c++) {
			if (fx_read(f, x, buf, n, c) < 0)
				continue;
			rc = 0;
			uint64_t m = 0, s = 0;
			for (size_t o = 0; o + ss <= n; o += ss) {
				int k = sector_check(f, q, x + o, buf + o);
				m += k == 1;
				s += k == 0;
			}
			if (s < best_miss || (s == best_miss && m > best_match))
				best_match = m, best_miss = s;
			if (s == 0)
				break;
		}
		if (rc < 0)
			return rc;
		*match += best_match;
		*miss += best_miss;
		x += n;
	}
	return 0;
}

static enum ext_state eval_extent(struct btrfsimg_forensic *f, const struct fx_version *v,
				  const struct bi_extent *e, uint8_t *buf, const char **why)
{
	struct bi_fx_recovered *r = f->rec;
	uint32_t ss = f->fs->sectorsize;
	const struct fx_dext *d = dext_of(r, e);
	uint64_t seen = d && d->last_seen > v->leaf_gen ? d->last_seen : v->leaf_gen;
	struct live_q lq = { e->disk_bytenr, e->disk_num_bytes, seen, false, false };
	live_extent(f, &lq);
	bool alive = lq.same && !lq.other;
	bool reused = !alive && (lq.other || stale_reuse(r, e) ||
				 old_space_reused(f, e->disk_bytenr, e->disk_num_bytes));
	uint64_t lo = e->disk_bytenr, hi = lo + e->disk_num_bytes;
	if (e->kind == BI_EXT_DISK) {
		lo = e->disk_bytenr + (e->offset & ~(uint64_t)(ss - 1));
		uint64_t end = e->disk_bytenr + e->offset + e->num_bytes;
		end = (end + ss - 1) & ~(uint64_t)(ss - 1);
		hi = end < hi ? end : hi;
	}
	struct csum_q q = { e->generation, alive ? UINT64_MAX : seen, r->csum_span };
	uint64_t match = 0, miss = 0;
	if (check_sectors(f, &q, lo, hi, buf, &match, &miss) < 0) {
		*why = "unreadable";
		return EXT_BAD;
	}
	uint64_t sectors = (hi - lo) / ss;
	if (!(v->inode.flags & INODE_NODATASUM) && sectors && match == sectors)
		return EXT_VERIFIED;
	if (miss) {
		*why = "csum mismatch";
		return EXT_BAD;
	}
	if (reused) {
		*why = "reused";
		return EXT_BAD;
	}
	return EXT_GOOD;
}

/* ------------------------------------------------------------ pieces */

static int ext_cmp(const void *pa, const void *pb)
{
	const struct bi_extent *a = pa, *b = pb;
	return a->file_offset < b->file_offset ? -1 : a->file_offset > b->file_offset;
}

typedef int (*piece_fn)(void *ctx, const struct bi_piece *p, size_t ext);

/* The pieces of [0, size) in order; bytes past the last extent of an
 * incomplete version come as one piece with ext == SIZE_MAX. */
static int walk_pieces(const struct fx_version *v, piece_fn fn, void *ctx)
{
	uint64_t pos = 0, size = v->inode.size;
	for (size_t i = 0; i < v->next && pos < size; i++) {
		uint64_t next = i + 1 < v->next ? v->ext[i + 1].file_offset : UINT64_MAX;
		if (v->ext[i].end <= pos)
			continue;
		struct bi_piece out[3];
		size_t n = bi_extent_pieces(&v->ext[i], next, pos, size, out);
		for (size_t k = 0; k < n; k++) {
			int rc = fn(ctx, &out[k], out[k].kind == BI_EXT_ZERO ? SIZE_MAX - 1 : i);
			if (rc)
				return rc;
			pos = out[k].pos + out[k].len;
		}
	}
	if (pos < size) {
		struct bi_piece tail = { pos, size - pos, BI_EXT_ZERO, 0 };
		return fn(ctx, &tail, v->complete ? SIZE_MAX - 1 : SIZE_MAX);
	}
	return 0;
}

static int add_bad(struct fx_version *v, uint64_t off, uint64_t len, const char *why)
{
	if (v->nbad && v->bad[v->nbad - 1].offset + v->bad[v->nbad - 1].length == off &&
	    v->bad[v->nbad - 1].why == why) {
		v->bad[v->nbad - 1].length += len;
		return 0;
	}
	if (v->nbad == v->cbad && grow_array((void **)&v->bad, &v->cbad, sizeof(*v->bad)))
		return -ENOMEM;
	v->bad[v->nbad++] = (struct btrfsimg_bad_range){ off, len, why };
	return 0;
}

struct eval_ctx {
	struct fx_version *v;
	const char **whys;
	uint64_t good_data, bad_data;
};

static int eval_piece(void *ctx, const struct bi_piece *p, size_t ext)
{
	struct eval_ctx *x = ctx;
	if (ext == SIZE_MAX)
		return add_bad(x->v, p->pos, p->len, "items not found");
	if (ext == SIZE_MAX - 1)
		return 0;
	if (x->v->state[ext] == EXT_BAD) {
		x->bad_data += p->len;
		return add_bad(x->v, p->pos, p->len, x->whys[ext]);
	}
	x->good_data += p->len;
	return 0;
}

/* The bytes the extents hold as the kernel counts them in nbytes: inline
 * ram_bytes, regular and prealloc num_bytes (holes none). */
static uint64_t nbytes_of(const struct fx_version *v)
{
	uint64_t n = 0;
	for (size_t i = 0; i < v->next; i++) {
		const struct bi_extent *e = &v->ext[i];
		if (e->type == FE_TYPE_INLINE)
			n += e->ram_bytes;
		else if (e->disk_bytenr)
			n += e->num_bytes;
	}
	return n;
}

/* Status and verified of a version from its extents' states. */
static int evaluate(struct btrfsimg_forensic *f, struct fx_version *v, uint8_t *buf)
{
	qsort(v->ext, v->next, sizeof(*v->ext), ext_cmp);
	v->state = calloc(v->next ? v->next : 1, 1);
	const char **whys = calloc(v->next ? v->next : 1, sizeof(*whys));
	if (!v->state || !whys) {
		free(whys);
		return -ENOMEM;
	}
	struct btrfsimg_recovered *rec = &v->rec;
	size_t disk = 0, verified = 0;
	for (size_t i = 0; i < v->next; i++) {
		const struct bi_extent *e = &v->ext[i];
		if (e->file_offset >= v->inode.size)
			continue;
		if (e->kind == BI_EXT_INLINE)
			rec->has_inline = true;
		if (e->compression)
			rec->compressed = true;
		if (e->kind < BI_EXT_DISK)
			continue;
		disk++;
		v->state[i] = (uint8_t)eval_extent(f, v, e, buf, &whys[i]);
		verified += v->state[i] == EXT_VERIFIED;
	}
	struct eval_ctx x = { v, whys, 0, 0 };
	int rc = walk_pieces(v, eval_piece, &x);
	free(whys);
	if (rc < 0)
		return rc;
	rec->nodatasum = (v->inode.flags & INODE_NODATASUM) != 0;
	/* A block written in the middle of a transaction can hold an inode
	 * item and extent items that were never true together (a truncate
	 * half done): nbytes, which the kernel keeps equal to the bytes its
	 * extents hold (btrfs check's "nbytes wrong"), tells. */
	if (v->complete && nbytes_of(v) != v->inode.nbytes && v->inode.size) {
		v->nbad = 0; /* the whole file, instead of what the pieces said */
		if ((rc = add_bad(v, 0, v->inode.size, "items disagree with the inode")) < 0)
			return rc;
	}
	bool any_items = v->next > 0;
	if (v->inode.size && !any_items && !v->complete)
		rec->status = BTRFSIMG_REC_METADATA_ONLY;
	else if (!v->nbad)
		rec->status = BTRFSIMG_REC_INTACT;
	else if (x.bad_data && !x.good_data && !rec->has_inline)
		rec->status = BTRFSIMG_REC_OVERWRITTEN;
	else
		rec->status = BTRFSIMG_REC_PARTIAL;
	rec->verified = rec->status == BTRFSIMG_REC_INTACT && disk && verified == disk &&
			!rec->has_inline && !rec->nodatasum;
	return 0;
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
		if (btrfsimg_inode_get(f->fs, v->subvol, v->ino, &live) < 0 ||
		    live.generation != v->inode.generation) {
			v->rec.kind = BTRFSIMG_REC_DELETED;
			continue;
		}
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

static int finish(struct btrfsimg_forensic *f, struct fx_version *v, uint8_t *buf)
{
	int rc = evaluate(f, v, buf);
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
	rec->inode = v->inode;
	rec->bad = v->bad;
	rec->nbad = v->nbad;
	return 0;
}

static int same_contents(struct btrfsimg_forensic *f);

static int build(struct btrfsimg_forensic *f)
{
	struct btrfsimg_fs *fs = f->fs;
	struct bi_fx_recovered *r = calloc(1, sizeof(*r));
	if (!r)
		return bi_err(fs, -ENOMEM, "forensic: out of memory");
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
	qsort(r->refs, r->nrefs, sizeof(*r->refs), ref_cmp);
	qsort(r->csums, r->ncsums, sizeof(*r->csums), csum_cmp);
	merge_dext(r);
	merge_versions(r);
	classify(f);
	skip_just_created(r);
	r->csum_span = csum_span(r);
	for (size_t i = 0; i < r->nv && rc >= 0; i++)
		if (!r->v[i].skip)
			rc = finish(f, &r->v[i], buf);
	if (rc > 0)
		rc = 0;
	if (rc == 0)
		rc = same_contents(f);
out:
	free(buf);
	if (rc == -ENOMEM)
		bi_err(fs, rc, "forensic: out of memory");
	if (rc < 0) {
		recovered_free(r);
		f->rec = NULL;
	}
	return rc;
}

/* ------------------------------------------------------------ API */

static int out_walk(struct btrfsimg_forensic *f, struct fx_version *v, btrfsimg_data_fn fn,
		    void *ctx);

static int hash_piece(void *ctx, uint64_t off, const void *data, size_t len)
{
	(void)off;
	uint64_t *h = ctx;
	*h = fnv(*h, data, len);
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
		if (v->skip || v->rec.status != BTRFSIMG_REC_INTACT)
			continue;
		v->content = 0xcbf29ce484222325ull;
		int rc = out_walk(f, v, hash_piece, &v->content);
		if (rc < 0)
			return rc;
	}
	for (size_t i = 0; i < r->nv; i++) {
		struct fx_version *a = &r->v[i];
		if (a->skip || a->rec.status != BTRFSIMG_REC_INTACT)
			continue;
		for (size_t j = i + 1; j < r->nv; j++) {
			struct fx_version *b = &r->v[j];
			if (b->subvol != a->subvol || b->ino != a->ino)
				break;
			if (b->skip || b->rec.status != BTRFSIMG_REC_INTACT ||
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
	}
	return "unknown";
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

struct out_ctx {
	struct btrfsimg_forensic *f;
	struct fx_version *v;
	btrfsimg_data_fn fn;
	void *ctx;
	uint8_t *buf, *dec;
	size_t dec_ext; /* extent decoded in dec (+1), 0 none */
	int rc;
};

/* Zeros for @len bytes from @pos. */
static int emit_zeros(struct out_ctx *o, uint64_t pos, uint64_t len)
{
	memset(o->buf, 0, OUT_CHUNK);
	while (len) {
		size_t n = len < OUT_CHUNK ? (size_t)len : OUT_CHUNK;
		int rc = o->fn(o->ctx, pos, o->buf, n);
		if (rc)
			return rc;
		pos += n;
		len -= n;
	}
	return 0;
}

/* Decode extent @i (inline or compressed) into o->dec (ram_bytes). */
static int decode(struct out_ctx *o, size_t i)
{
	const struct bi_extent *e = &o->v->ext[i];
	struct btrfsimg_fs *fs = o->f->fs;
	if (o->dec_ext == i + 1)
		return 0;
	free(o->dec);
	o->dec = calloc(1, e->ram_bytes ? e->ram_bytes : 1);
	uint8_t *src = NULL;
	if (!o->dec)
		return -ENOMEM;
	const uint8_t *in = e->inline_data;
	size_t inlen = e->inline_size;
	if (e->kind == BI_EXT_COMPRESSED) {
		src = malloc(e->disk_num_bytes);
		if (!src)
			return -ENOMEM;
		int rc = fx_read(o->f, e->disk_bytenr, src, e->disk_num_bytes, 0);
		if (rc < 0) {
			free(src);
			return rc;
		}
		in = src;
		inlen = e->disk_num_bytes;
	}
	int rc = 0;
	if (e->compression) {
		size_t got;
		char why[256];
		if (!o->f->rec->z && !(o->f->rec->z = bi_zctx_new()))
			rc = -ENOMEM;
		else
			rc = bi_decompress(o->f->rec->z, e->compression, in, inlen, o->dec,
					   e->ram_bytes, fs->sectorsize, &got, why, sizeof(why));
	} else {
		memcpy(o->dec, in, inlen < e->ram_bytes ? inlen : e->ram_bytes);
	}
	free(src);
	if (rc == 0)
		o->dec_ext = i + 1;
	return rc;
}

static int out_piece(void *ctx, const struct bi_piece *p, size_t ext)
{
	struct out_ctx *o = ctx;
	if (ext >= SIZE_MAX - 1 || o->v->state[ext] == EXT_BAD || p->kind == BI_EXT_ZERO)
		return emit_zeros(o, p->pos, p->len);
	if (p->kind == BI_EXT_DISK) {
		for (uint64_t d = 0; d < p->len;) {
			size_t n = p->len - d < OUT_CHUNK ? (size_t)(p->len - d) : OUT_CHUNK;
			int rc = fx_read(o->f, p->src + d, o->buf, n, 0);
			if (rc < 0)
				return emit_zeros(o, p->pos + d, p->len - d);
			if ((rc = o->fn(o->ctx, p->pos + d, o->buf, n)))
				return rc;
			d += n;
		}
		return 0;
	}
	if (decode(o, ext) < 0)
		return emit_zeros(o, p->pos, p->len);
	const struct bi_extent *e = &o->v->ext[ext];
	if (p->src > e->ram_bytes || p->len > e->ram_bytes - p->src)
		return emit_zeros(o, p->pos, p->len);
	for (uint64_t d = 0; d < p->len;) {
		size_t n = p->len - d < OUT_CHUNK ? (size_t)(p->len - d) : OUT_CHUNK;
		int rc = o->fn(o->ctx, p->pos + d, o->dec + p->src + d, n);
		if (rc)
			return rc;
		d += n;
	}
	return 0;
}

int btrfsimg_forensic_read(btrfsimg_forensic *f, const char *id, btrfsimg_data_fn fn, void *ctx)
{
	if (!f || !id || !fn)
		return -EINVAL;
	if (!f->rec) {
		int rc = build(f);
		if (rc < 0)
			return rc;
	}
	struct fx_version *v = NULL;
	for (size_t i = 0; i < f->rec->nv && !v; i++)
		if (!f->rec->v[i].skip && strcmp(f->rec->v[i].id, id) == 0)
			v = &f->rec->v[i];
	if (!v)
		return bi_err(f->fs, -ENOENT, "forensic: no recovered version has id %s", id);
	int rc = out_walk(f, v, fn, ctx);
	if (rc)
		return rc;
	return v->rec.status == BTRFSIMG_REC_INTACT ? 0 : 1;
}

static int out_walk(struct btrfsimg_forensic *f, struct fx_version *v, btrfsimg_data_fn fn,
		    void *ctx)
{
	struct out_ctx o = { f, v, fn, ctx, malloc(OUT_CHUNK), NULL, 0, 0 };
	if (!o.buf)
		return bi_err(f->fs, -ENOMEM, "forensic: out of memory");
	int rc = walk_pieces(v, out_piece, &o);
	free(o.buf);
	free(o.dec);
	return rc;
}
