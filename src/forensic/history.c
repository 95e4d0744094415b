// SPDX-License-Identifier: MIT
/*
 * History: the generations the forensic index can show.
 *
 * A generation is listed when a root-tree block written in it was found
 * or a superblock copy (primary root or one of its four backup roots)
 * names it. Its root is the root-tree block of that generation that the
 * superblocks name, else the one --generation reads (generation.c: the
 * highest-level one its own extent tree records), else the highest-level
 * root-tree block written in it.
 * From that root the tree is walked through the index (a child is used
 * only when a block with the bytenr and the generation its parent's key
 * pointer records was found) and every ROOT_ITEM reached is one tree of
 * the generation; "found" says whether the index holds its root block.
 * The time is the newest of: root items' ctime and otime whose ctransid
 * or otransid is the generation, and ctimes of inodes whose transid is
 * the generation, in fs-tree leaves written in it.
 *
 * ROOT_ITEM: +160 generation, +176 bytenr, +238 level, +295 ctransid,
 * +303 otransid, +327 ctime, +339 otime (12 bytes each).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "forensic/block_scan.h"

#include "base/grow.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/ondisk.h"

struct addr {
	uint64_t bytenr, generation;
	size_t idx;
};

struct hist {
	struct btrfsimg_forensic *f;
	struct addr *by_addr; /* every block by bytenr, generation */
	struct btrfsimg_history_tree *trees;
	size_t ntrees, ctrees;
	struct btrfsimg_generation g;
	uint8_t *stack; /* nodesize * MAX_LEVEL: blocks on the walk */
};

static int addr_cmp(const void *pa, const void *pb)
{
	const struct addr *a = pa, *b = pb;
	if (a->bytenr != b->bytenr)
		return a->bytenr < b->bytenr ? -1 : 1;
	return a->generation < b->generation ? -1 : a->generation > b->generation;
}

static const struct bi_fx_block *lookup(const struct hist *h, uint64_t bytenr, uint64_t gen)
{
	size_t a = 0, b = h->f->nblocks;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		const struct addr *x = &h->by_addr[m];
		if (x->bytenr < bytenr || (x->bytenr == bytenr && x->generation < gen))
			a = m + 1;
		else
			b = m;
	}
	if (a < h->f->nblocks) {
		const struct addr *x = &h->by_addr[a];
		if (x->bytenr == bytenr && x->generation == gen)
			return &h->f->blocks[x->idx];
	}
	return NULL;
}

static void newer_time(struct btrfsimg_generation *g, const uint8_t *p)
{
	struct btrfsimg_timespec t = { (int64_t)bi_le64(p), bi_le32(p + 8) };
	if (!g->has_time || t.sec > g->time.sec ||
	    (t.sec == g->time.sec && t.nsec > g->time.nsec)) {
		g->time = t;
		g->has_time = true;
	}
}

static int root_item(struct hist *h, uint64_t id, const uint8_t *d, uint32_t size)
{
	if (size < RI_SIZE_V1)
		return 0;
	for (size_t i = 0; i < h->ntrees; i++)
		if (h->trees[i].id == id)
			return 0;
	if (bi_grow((void **)&h->trees, &h->ctrees, h->ntrees + 1, sizeof(*h->trees)))
		return -ENOMEM;
	uint64_t bytenr = bi_le64(d + RI_BYTENR), gen = bi_le64(d + RI_GENERATION);
	h->trees[h->ntrees++] =
		(struct btrfsimg_history_tree){ id, bytenr, gen, lookup(h, bytenr, gen) != NULL };
	if (size >= RI_SIZE) {
		if (bi_le64(d + RI_CTRANSID) == h->g.transid)
			newer_time(&h->g, d + RI_CTIME);
		if (bi_le64(d + RI_OTRANSID) == h->g.transid)
			newer_time(&h->g, d + RI_OTIME);
	}
	return 0;
}

/* Walk the root tree below block @b (depth @depth on the stack). */
static int walk(struct hist *h, const struct bi_fx_block *b, int depth)
{
	struct btrfsimg_forensic *f = h->f;
	uint32_t ns = f->fs->nodesize;
	if (depth >= MAX_LEVEL || bi_fx_read_block(f, b) < 0)
		return 0;
	uint8_t *blk = h->stack + (size_t)depth * ns;
	memcpy(blk, f->buf, ns);
	for (uint32_t s = 0; s < b->nritems; s++) {
		int rc = 0;
		if (b->level) {
			const uint8_t *kp = blk + HDR_SIZE + (size_t)s * KP_SIZE;
			const struct bi_fx_block *c =
				lookup(h, bi_le64(kp + KP_BLOCKPTR), bi_le64(kp + KP_GENERATION));
			if (c && c->owner == OBJ_ROOT_TREE && c->level + 1 == b->level)
				rc = walk(h, c, depth + 1);
		} else {
			const uint8_t *it = blk + HDR_SIZE + (size_t)s * ITEM_SIZE;
			bi_key k;
			bi_key_read(it, &k);
			if (k.type == KT_ROOT_ITEM)
				rc = root_item(h, k.objectid,
					       blk + HDR_SIZE + bi_le32(it + ITEM_OFFSET),
					       bi_le32(it + ITEM_DSIZE));
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Inode ctimes of fs-tree leaves written in the generation. */
static void inode_times(struct hist *h)
{
	struct btrfsimg_forensic *f = h->f;
	for (size_t i = 0; i < f->nblocks; i++) {
		const struct bi_fx_block *b = &f->blocks[i];
		bool fs_tree = b->owner == OBJ_FS_TREE ||
			       (b->owner >= OBJ_FIRST_FREE && b->owner <= OBJ_LAST_FREE);
		if (!fs_tree || b->level || b->generation != h->g.transid ||
		    bi_fx_read_block(f, b) < 0)
			continue;
		for (uint32_t s = 0; s < b->nritems; s++) {
			const uint8_t *it = f->buf + HDR_SIZE + (size_t)s * ITEM_SIZE;
			bi_key k;
			bi_key_read(it, &k);
			const uint8_t *d = f->buf + HDR_SIZE + bi_le32(it + ITEM_OFFSET);
			if (k.type == KT_INODE_ITEM &&
			    bi_le32(it + ITEM_DSIZE) == INODE_ITEM_SIZE &&
			    bi_le64(d + INODE_TRANSID) == h->g.transid)
				newer_time(&h->g, d + INODE_CTIME);
		}
	}
}

static int gen_cmp(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
	return a < b ? -1 : a > b;
}

/* Every generation: root-tree blocks' and the superblocks'. */
static int generations(const struct btrfsimg_forensic *f, uint64_t **out, size_t *n)
{
	size_t lo, hi;
	bi_fx_owner_range(f, OBJ_ROOT_TREE, &lo, &hi);
	uint64_t *g = malloc((hi - lo + f->nsroots + 1) * sizeof(*g));
	if (!g)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = lo; i < hi; i++)
		g[k++] = f->blocks[i].generation;
	for (size_t i = 0; i < f->nsroots; i++)
		g[k++] = f->sroots[i].generation;
	fx_qsort(g, k, sizeof(*g), gen_cmp);
	size_t u = 0;
	for (size_t i = 0; i < k; i++)
		if (!u || g[u - 1] != g[i])
			g[u++] = g[i];
	*out = g;
	*n = u;
	return 0;
}

/* The root-tree root of generation @gen. */
static const struct bi_fx_block *gen_root(struct hist *h, uint64_t gen)
{
	const struct btrfsimg_forensic *f = h->f;
	h->g.superblock = false;
	for (size_t i = 0; i < f->nsroots; i++)
		if (f->sroots[i].generation == gen) {
			h->g.superblock = true;
			h->g.root_tree_bytenr = f->sroots[i].bytenr;
			const struct bi_fx_block *b = lookup(h, f->sroots[i].bytenr, gen);
			if (b)
				return b;
		}
	/* the root --generation reads: a commit may write a root-tree block
	 * twice, the copy it freed showing less */
	struct bi_root r;
	char how[128];
	const struct bi_fx_block *picked = NULL;
	if (bi_fx_pick_root(h->f, gen, &r, how, sizeof(how), false) == 0)
		picked = lookup(h, r.bytenr, gen);
	if (picked) {
		h->g.root_tree_bytenr = picked->bytenr;
		return picked;
	}
	size_t lo, hi;
	bi_fx_owner_range(f, OBJ_ROOT_TREE, &lo, &hi);
	const struct bi_fx_block *best = NULL;
	for (size_t i = lo; i < hi; i++) {
		const struct bi_fx_block *b = &f->blocks[i];
		if (b->generation == gen && (!best || b->level > best->level))
			best = b;
	}
	if (best)
		h->g.root_tree_bytenr = best->bytenr;
	return best;
}

static int one_generation(struct hist *h, uint64_t gen, btrfsimg_generation_fn fn, void *ctx)
{
	struct btrfsimg_forensic *f = h->f;
	memset(&h->g, 0, sizeof(h->g));
	h->g.transid = gen;
	h->ntrees = 0;
	for (size_t i = 0; i < f->nblocks; i++)
		h->g.blocks += f->blocks[i].generation == gen;
	const struct bi_fx_block *root = gen_root(h, gen);
	int rc = root ? walk(h, root, 0) : 0;
	for (size_t i = 0; rc == 0 && i < f->nsroots; i++) /* tree 5 from backup roots */
		if (f->sroots[i].generation == gen && f->sroots[i].fs_bytenr) {
			bool have = false;
			for (size_t t = 0; t < h->ntrees; t++)
				have |= h->trees[t].id == OBJ_FS_TREE;
			if (!have) {
				uint8_t ri[RI_SIZE_V1] = { 0 };
				bi_put_le64(ri + RI_BYTENR, f->sroots[i].fs_bytenr);
				bi_put_le64(ri + RI_GENERATION, f->sroots[i].fs_gen);
				rc = root_item(h, OBJ_FS_TREE, ri, sizeof(ri));
			}
		}
	if (rc < 0)
		return rc;
	inode_times(h);
	h->g.trees = h->trees;
	h->g.ntrees = h->ntrees;
	return fn(ctx, &h->g);
}

int bi_fx_generations(const btrfsimg_forensic *f, uint64_t **gens, size_t *ngens)
{
	return generations(f, gens, ngens);
}

int btrfsimg_forensic_history(btrfsimg_forensic *f, btrfsimg_generation_fn fn, void *ctx)
{
	if (!f || !fn)
		return -EINVAL;
	struct hist h = { .f = f };
	uint64_t *gens = NULL;
	size_t ngens = 0;
	h.by_addr = malloc((f->nblocks + 1) * sizeof(*h.by_addr));
	h.stack = malloc((size_t)f->fs->nodesize * MAX_LEVEL);
	int rc = -ENOMEM;
	if (!h.by_addr || !h.stack || generations(f, &gens, &ngens) < 0)
		goto out;
	for (size_t i = 0; i < f->nblocks; i++)
		h.by_addr[i] = (struct addr){ f->blocks[i].bytenr, f->blocks[i].generation, i };
	fx_qsort(h.by_addr, f->nblocks, sizeof(*h.by_addr), addr_cmp);
	rc = 0;
	for (size_t i = 0; i < ngens && rc == 0; i++)
		rc = one_generation(&h, gens[i], fn, ctx);
out:
	free(gens);
	free(h.by_addr);
	free(h.stack);
	free(h.trees);
	if (rc == -ENOMEM)
		bi_err(f->fs, rc, "forensic history: out of memory");
	return rc;
}
