// SPDX-License-Identifier: MIT
/*
 * Leaves to the recovered-version model (version.h): every leaf of the
 * forensic index, live or stale, read once. fs-tree leaves give names
 * (INODE_REF, DIR_INDEX), disk extents (EXTENT_DATA) and a version per
 * INODE_ITEM of a regular file, symlink or directory; csum-tree leaves
 * the EXTENT_CSUM items; root-tree leaves the ROOT_BACKREFs.
 *
 * A version is what one fs-tree leaf (of a generation G) holds of one
 * inode: its INODE_ITEM and EXTENT_DATA items. At one moment an inode's
 * items are a contiguous key run, so a leaf in which the run ends before
 * the last slot shows the whole inode as it was at G ("complete"); a run
 * that reaches the last slot is continued in leaves of the same owner and
 * generation that start with the same inode, if found.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "forensic/version.h"

#include "base/cursor.h"
#include "base/grow.h"
#include "base/name.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"
#include "btrfs/root.h"
#include "files/extent.h"

/* Names are first merged at this many (then at twice what is kept). */
#define REFS_MERGE_MIN 65536u

void bi_fx_version_free(struct fx_version *v)
{
	for (size_t i = 0; i < v->next; i++)
		free((void *)v->ext[i].inline_data);
	free(v->ext);
	if (v->res) {
		free(v->res->path);
		free(v->res->bad);
		free(v->res->state);
		free(v->res->sub);
		free(v->res);
	}
}

void bi_fx_item_at(const uint8_t *blk, uint32_t slot, struct bi_fx_item *it)
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
	r->refs[r->nrefs] = (struct fx_ref){ .subvol = subvol,
					     .ino = ino,
					     .parent = parent,
					     .gen = gen,
					     .name = s,
					     .bad = bi_name_problem(name, n),
					     .seq = r->refs_seq++,
					     .newest = gen };
	r->nrefs++;
	return 0;
}

int bi_fx_ref_cmp(const void *pa, const void *pb)
{
	const struct fx_ref *a = pa, *b = pb;
	if (a->subvol != b->subvol)
		return a->subvol < b->subvol ? -1 : 1;
	if (a->ino != b->ino)
		return a->ino < b->ino ? -1 : 1;
	if (a->gen != b->gen)
		return a->gen > b->gen ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static bool same_name(const struct fx_ref *a, const struct fx_ref *b)
{
	return a->subvol == b->subvol && a->ino == b->ino && a->parent == b->parent && !a->bad &&
	       !b->bad && strcmp(a->name, b->name) == 0;
}

/* The end of the run of names in order from @i (< n). */
static size_t run_end(const struct fx_ref *a, size_t i, size_t n)
{
	while (i + 1 < n && bi_fx_ref_cmp(&a[i], &a[i + 1]) < 0)
		i++;
	return i + 1;
}

/* Runs [lo, mid) and [mid, hi) of @a merged into the same places of @out. */
static void merge_runs(const struct fx_ref *a, size_t lo, size_t mid, size_t hi,
		       struct fx_ref *out)
{
	size_t i = lo, j = mid, w = lo;
	while (i < mid && j < hi)
		out[w++] = bi_fx_ref_cmp(&a[j], &a[i]) < 0 ? a[j++] : a[i++];
	memcpy(&out[w], &a[i], (mid - i) * sizeof(*a));
	w += mid - i;
	memcpy(&out[w], &a[j], (hi - j) * sizeof(*a));
}

/* @n names of @a sorted into @tmp (n places; @a is scratch then): a merge
 * sort of the runs already in order, pass after pass. Names come in
 * long runs (a leaf's, and the leaves of one tree and generation, are in
 * key order), and each pass reads and writes in order, where qsort (an
 * indirect sort for records this size) moved every record to a random
 * place at the end. */
static void refs_msort(struct fx_ref *a, struct fx_ref *tmp, size_t n)
{
	struct fx_ref *src = a, *dst = tmp;
	for (;;) {
		size_t lo = 0;
		while (lo < n) {
			size_t mid = run_end(src, lo, n);
			if (mid == n && lo == 0) {
				if (src != tmp)
					memcpy(tmp, src, n * sizeof(*a));
				return;
			}
			size_t hi = mid == n ? n : run_end(src, mid, n);
			merge_runs(src, lo, mid, hi, dst);
			lo = hi;
		}
		struct fx_ref *t = src;
		src = dst;
		dst = t;
	}
}

/* Sort the names: those past r->refs_sorted alone, then merged with the
 * sorted prefix in one pass from the back, so that each name is sorted
 * once and not again at every later merge. bi_fx_ref_cmp is a total order
 * (seq is unique): the result is the one a sort of the whole array gives. */
static void refs_sort(struct bi_fx_recovered *r)
{
	struct fx_ref *a = r->refs;
	size_t k = r->refs_sorted <= r->nrefs ? r->refs_sorted : 0, n = r->nrefs, t = n - k;
	if (t == 0)
		return;
	struct fx_ref *tmp = malloc(t * sizeof(*tmp));
	if (!tmp) {
		fx_qsort(a, n, sizeof(*a), bi_fx_ref_cmp); /* the slow way, in place */
		return;
	}
	refs_msort(a + k, tmp, t);
	/* from the back: w = i + j - 1 >= i - 1, the merged end never
	 * overtakes the prefix still to merge */
	size_t i = k, j = t, w = n;
	while (j > 0) {
		if (i > 0 && bi_fx_ref_cmp(&a[i - 1], &tmp[j - 1]) > 0)
			a[--w] = a[--i];
		else
			a[--w] = tmp[--j];
	}
	free(tmp);
}

void bi_fx_refs_merge(struct bi_fx_recovered *r)
{
	refs_sort(r);
	size_t w = 0;
	for (size_t i = 0; i < r->nrefs; i++) {
		struct fx_ref *x = &r->refs[i], *next = i + 1 < r->nrefs ? x + 1 : NULL;
		if (!next || !same_name(x, next)) {
			r->refs[w++] = *x;
			continue;
		}
		if (x->newest > next->newest)
			next->newest = x->newest;
		if (x->dir && (!next->dir || x->dir_gen > next->dir_gen))
			next->dir_gen = x->dir_gen;
		next->dir |= x->dir;
		free(x->name);
	}
	r->nrefs = w;
	r->refs_sorted = w;
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
		      const struct bi_fx_item *it)
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
			r->refs[r->nrefs - 1].dir_gen = b->generation;
		}
	}
	return 0;
}

uint64_t bi_fx_signature(const struct fx_version *v)
{
	/* A directory has no contents: all its states are one record. */
	if (v->dir)
		return bi_fx_fnv(0xcbf29ce484222325ull, "directory", 9);
	uint64_t h = bi_fx_fnv(0xcbf29ce484222325ull, &v->inode.size, 8);
	for (size_t i = 0; i < v->next; i++) {
		const struct bi_extent *e = &v->ext[i];
		if (e->file_offset >= v->inode.size)
			continue;
		uint64_t w[7] = { e->file_offset, e->type | (uint64_t)e->compression << 8,
				  e->disk_bytenr, e->disk_num_bytes,
				  e->offset,	  e->num_bytes,
				  e->ram_bytes };
		h = bi_fx_fnv(h, w, sizeof(w));
		if (e->inline_data)
			h = bi_fx_fnv(h, e->inline_data, e->inline_size);
	}
	return h;
}

int bi_fx_add_extent(struct fx_version *v, const struct bi_fx_item *it, uint32_t sectorsize,
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
	struct bi_fx_item it;
	for (; *slot < nritems; (*slot)++) {
		bi_fx_item_at(blk, *slot, &it);
		if (it.key.objectid != v->ino)
			break;
		if (it.key.type == KT_EXTENT_DATA) {
			int rc = bi_fx_add_extent(v, &it, f->fs->sectorsize, cap);
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

int bi_fx_add_version(struct bi_fx_recovered *r, struct fx_version *v)
{
	if (bi_grow((void **)&r->v, &r->cv, r->nv + 1, sizeof(*r->v))) {
		bi_fx_version_free(v);
		return -ENOMEM;
	}
	v->sig = bi_fx_signature(v);
	r->v[r->nv++] = *v;
	return 0;
}

/* ------------------------------------------------------------ one per file state */

/*
 * A file unchanged across many generations is held by many leaves (every
 * snapshot's copy-on-write of its neighbours writes it again): the same
 * version found thousands of times. recover.c keeps one per (subvolume,
 * inode, creation generation, signature): the first of ver_cmp's order
 * (complete, then newest leaf, then newest transid; the first found on a
 * tie). That choice is made here as the leaves are read, through a hash
 * of those four, so memory follows the distinct versions, not the leaves.
 */
static uint64_t ver_hash(const struct fx_version *v)
{
	uint64_t w[4] = { v->subvol, v->ino, v->inode.generation, v->sig };
	return bi_fx_fnv(BI_FX_FNV_SEED, w, sizeof(w));
}

static bool same_version(const struct fx_version *a, const struct fx_version *b)
{
	return a->subvol == b->subvol && a->ino == b->ino &&
	       a->inode.generation == b->inode.generation && a->sig == b->sig;
}

/* Whether @n comes before @o in ver_cmp's order of one (subvol, ino,
 * generation, signature). */
static bool better(const struct fx_version *n, const struct fx_version *o)
{
	if (n->complete != o->complete)
		return n->complete;
	if (n->leaf_gen != o->leaf_gen)
		return n->leaf_gen > o->leaf_gen;
	return n->inode.transid > o->inode.transid;
}

/* The slot of @v's key (hashed @h) in the table: its version's, or the
 * empty one where it goes. */
static struct fx_vslot *ver_slot(struct bi_fx_recovered *r, const struct fx_version *v,
				 uint64_t h)
{
	size_t mask = r->nvslots - 1;
	for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
		struct fx_vslot *s = &r->vslots[i];
		if (!s->idx || (s->hash == h && same_version(&r->v[s->idx - 1], v)))
			return s;
	}
}

/* Keep the table at most half full with @more versions added. */
static int ver_table_room(struct bi_fx_recovered *r, size_t more)
{
	size_t want = (r->nv + more) * 2, n = r->nvslots ? r->nvslots : 1024;
	if (r->nvslots && want <= r->nvslots)
		return 0;
	while (n < want)
		if ((n *= 2) > SIZE_MAX / 2 / sizeof(struct fx_vslot))
			return -ENOMEM;
	struct fx_vslot *t = calloc(n, sizeof(*t));
	if (!t)
		return -ENOMEM;
	/* every key is there once: each goes to the first empty slot */
	for (size_t i = 0; i < r->nvslots; i++) {
		const struct fx_vslot *o = &r->vslots[i];
		size_t j = (size_t)o->hash & (n - 1);
		while (o->idx && t[j].idx)
			j = (j + 1) & (n - 1);
		if (o->idx)
			t[j] = *o;
	}
	free(r->vslots);
	r->vslots = t;
	r->nvslots = n;
	return 0;
}

/* Add @v (its signature and hash @h made) to the table, whose room is
 * made. */
static int add_hashed(struct bi_fx_recovered *r, struct fx_version *v, uint64_t h)
{
	struct fx_vslot *s = ver_slot(r, v, h);
	if (s->idx) {
		struct fx_version *o = &r->v[s->idx - 1];
		if (better(v, o)) {
			bi_fx_version_free(o);
			*o = *v;
		} else {
			bi_fx_version_free(v);
		}
		return 0;
	}
	int rc = bi_fx_add_version(r, v);
	if (rc == 0)
		*s = (struct fx_vslot){ r->nv, h };
	return rc;
}

int bi_fx_add_found_version(struct bi_fx_recovered *r, struct fx_version *v)
{
	v->sig = bi_fx_signature(v);
	if (ver_table_room(r, 1) < 0) {
		bi_fx_version_free(v);
		return -ENOMEM;
	}
	return add_hashed(r, v, ver_hash(v));
}

/* How far ahead of the version being added its table slot and version are
 * fetched: the lookups of one leaf's inodes miss the cache in parallel,
 * not one after another. */
#define FOUND_AHEAD 8

int bi_fx_add_found_versions(struct bi_fx_recovered *r, struct fx_version *vs, size_t n)
{
	int rc = ver_table_room(r, n);
	if (rc == 0 && bi_grow((void **)&r->found_hash, &r->cfound_hash, n, sizeof(uint64_t)))
		rc = -ENOMEM;
	for (size_t i = 0; i < n && rc == 0; i++) {
		vs[i].sig = bi_fx_signature(&vs[i]);
		r->found_hash[i] = ver_hash(&vs[i]);
		__builtin_prefetch(&r->vslots[r->found_hash[i] & (r->nvslots - 1)]);
	}
	size_t i = 0;
	for (; i < n && rc == 0; i++) {
		if (i + FOUND_AHEAD < n) {
			const struct fx_vslot *s =
				&r->vslots[r->found_hash[i + FOUND_AHEAD] & (r->nvslots - 1)];
			if (s->idx)
				__builtin_prefetch(&r->v[s->idx - 1]);
		}
		rc = add_hashed(r, &vs[i], r->found_hash[i]);
	}
	for (; i < n; i++)
		bi_fx_version_free(&vs[i]);
	return rc;
}

void bi_fx_found_versions_done(struct bi_fx_recovered *r)
{
	free(r->vslots);
	r->vslots = NULL;
	r->nvslots = 0;
	free(r->found);
	free(r->found_hash);
	r->found = NULL;
	r->found_hash = NULL;
	r->cfound = r->cfound_hash = 0;
}

/* One fs-tree leaf: names, extents, and a version per regular file or
 * symlink whose INODE_ITEM it holds. */
static int fs_leaf(struct btrfsimg_forensic *f, size_t idx, size_t lo, size_t hi)
{
	const struct bi_fx_block *b = &f->blocks[idx];
	struct bi_fx_recovered *r = f->rec;
	/* a buffer of its own: continue_run reads the leaves after it into
	 * f->buf. Taken anew for each leaf: malloc then carves the leaf's
	 * names from the space it frees, side by side (one buffer kept for
	 * all leaves made the run a third slower) */
	uint8_t *blk = malloc(f->fs->nodesize);
	if (!blk)
		return -ENOMEM;
	int rc = bi_fx_read_block_to(f, b, blk);
	if (rc < 0) {
		free(blk);
		return 0; /* changed under us: not used */
	}
	char why[256];
	for (uint32_t s = 0; s < b->nritems && rc == 0; s++) {
		struct bi_fx_item it;
		bi_fx_item_at(blk, s, &it);
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
		if (rc == 0 && bi_grow((void **)&r->found, &r->cfound, r->nfound + 1,
					   sizeof(*r->found)))
			rc = -ENOMEM;
		if (rc < 0) {
			bi_fx_version_free(&v);
			break;
		}
		r->found[r->nfound++] = v;
	}
	free(blk);
	size_t n = r->nfound;
	r->nfound = 0;
	if (rc < 0) {
		for (size_t i = 0; i < n; i++)
			bi_fx_version_free(&r->found[i]);
		return rc;
	}
	return bi_fx_add_found_versions(r, r->found, n);
}

static int csum_leaf(struct btrfsimg_forensic *f, size_t idx)
{
	const struct bi_fx_block *b = &f->blocks[idx];
	if (bi_fx_read_block(f, b) < 0)
		return 0;
	struct bi_fx_recovered *r = f->rec;
	for (uint32_t s = 0; s < b->nritems; s++) {
		struct bi_fx_item it;
		bi_fx_item_at(f->buf, s, &it);
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
		struct bi_fx_item it;
		bi_fx_item_at(f->buf, s, &it);
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
		r->rrefs[r->nrrefs++] = (struct fx_rootref){
			it.key.objectid, it.key.offset, rr.dirid,
			b->generation,	 name,		bi_name_problem(rr.name, rr.name_len)
		};
	}
	return 0;
}

static bool fs_tree(uint64_t owner)
{
	return owner == OBJ_FS_TREE || (owner >= OBJ_FIRST_FREE && owner <= OBJ_LAST_FREE);
}

/* Names are merged (bi_fx_refs_merge) when they have doubled since the
 * last merge, and only where that is exact: before a leaf of another tree
 * or a newer generation than the last (the index is in that order), so
 * every name still to come is newer than all kept of its inode. */
static void merge_names(struct bi_fx_recovered *r, const struct bi_fx_block *last,
			const struct bi_fx_block *b)
{
	if (!last || (last->owner == b->owner && last->generation == b->generation) ||
	    r->nrefs < r->refs_merge_at)
		return;
	bi_fx_refs_merge(r);
	r->refs_merge_at = r->nrefs * 2 > REFS_MERGE_MIN ? r->nrefs * 2 : REFS_MERGE_MIN;
}

int bi_fx_collect(struct btrfsimg_forensic *f)
{
	int rc = 0;
	const struct bi_fx_block *last = NULL; /* the last fs-tree leaf read */
	f->rec->refs_merge_at = REFS_MERGE_MIN;
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
			merge_names(f->rec, last, b);
			last = b;
			bi_fx_owner_range(f, b->owner, &lo, &hi);
			rc = fs_leaf(f, i, lo, hi);
		}
	}
	if (rc == 0)
		bi_fx_refs_merge(f->rec);
	bi_fx_found_versions_done(f->rec);
	return rc;
}
