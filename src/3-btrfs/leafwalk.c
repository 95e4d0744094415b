/* SPDX-License-Identifier: MIT */
/*
 * A tree's leaves in key order, handed out whole (see leafwalk.h).
 *
 * The same descent as bi_iter's (tree.c) in its streaming mode: one
 * verified node per level, each child checked against what its parent
 * expects (level, generation, first key), leaves ahead of the walk
 * requested from the kernel in batches (PREFETCH_BYTES) and the next
 * level-1 node asked for on entering one, skippable leaves never read. It
 * reads the same blocks in the same order, so a damaged tree fails with
 * the same message at the same place; only the leaves are not kept in the
 * path but given to the caller, who may hold many at once.
 */
#include <string.h>

#include "3-btrfs/leafwalk.h"

#include "0-base/err.h"
#include "3-btrfs/check.h"
#include "3-btrfs/chunk.h"

/* As tree.c's streamed walk: requests of at most this much, topped up
 * once half of the window is used. */
#define PREFETCH_BYTES (8u << 20)

/* Last pointer whose key is <= target (slot 0 if target is before all). */
static uint32_t node_slot(const struct bi_block *b, const bi_key *target)
{
	uint32_t lo = 0, hi = b->nritems;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		bi_key k;
		bi_key_read(b->data + HDR_SIZE + (size_t)mid * KP_SIZE, &k);
		if (bi_key_cmp(&k, target) <= 0)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* First item whose key is >= target (nritems if none). */
static uint32_t leaf_slot(const struct bi_block *b, const bi_key *target)
{
	uint32_t lo = 0, hi = b->nritems;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		bi_key k;
		bi_key_read(b->data + HDR_SIZE + (size_t)mid * ITEM_SIZE, &k);
		if (bi_key_cmp(&k, target) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool slot_skippable(const struct bi_leafwalk *lw, uint32_t s)
{
	const struct bi_block *n = lw->path[1];
	if (!lw->skip || s + 1 >= n->nritems)
		return false;
	bi_key lo, hi;
	bi_key_read(n->data + HDR_SIZE + (size_t)s * KP_SIZE, &lo);
	bi_key_read(n->data + HDR_SIZE + (size_t)(s + 1) * KP_SIZE, &hi);
	return lw->skip(&lo, &hi);
}

static void prefetch_leaves(struct bi_leafwalk *lw, uint32_t from, uint32_t to)
{
	const struct bi_block *n = lw->path[1];
	uint32_t bs = lw->fs->nodesize;
	uint64_t start = 0, len = 0;
	for (uint32_t s = from; s < to; s++) {
		bi_key k;
		uint64_t ptr, gen;
		bi_node_ptr(n, s, &k, &ptr, &gen);
		if (bi_key_cmp(&k, &lw->max) > 0)
			break;
		if (slot_skippable(lw, s))
			continue;
		if (len && ptr == start + len && len < PREFETCH_BYTES) {
			len += bs;
			continue;
		}
		if (len)
			bi_prefetch(lw->fs, start, len);
		start = ptr;
		len = bs;
	}
	if (len)
		bi_prefetch(lw->fs, start, len);
}

static void prefetch_ahead(struct bi_leafwalk *lw)
{
	uint32_t s = lw->slot[1], n = lw->path[1]->nritems;
	uint32_t window = PREFETCH_BYTES / lw->fs->nodesize;
	if (lw->ra_slot > s && lw->ra_slot - s > window / 2)
		return;
	uint32_t from = lw->ra_slot > s ? lw->ra_slot : s;
	uint32_t to = n - s > window ? s + window : n;
	if (from < to)
		prefetch_leaves(lw, from, to);
	lw->ra_slot = to;
}

static void prefetch_next_node(struct bi_leafwalk *lw)
{
	const struct bi_block *up = lw->path[2];
	uint32_t s = lw->slot[2] + 1;
	if (s >= up->nritems)
		return;
	bi_key k;
	uint64_t ptr, gen;
	bi_node_ptr(up, s, &k, &ptr, &gen);
	if (bi_key_cmp(&k, &lw->max) <= 0)
		bi_prefetch(lw->fs, ptr, lw->fs->nodesize);
}

/* The child behind path[level]'s slot: into path[level - 1] for a node,
 * into *@leaf for a leaf (level 1). */
static int descend(struct bi_leafwalk *lw, int level, struct bi_block **leaf)
{
	if (level == 1)
		prefetch_ahead(lw);
	bi_key k;
	uint64_t ptr, gen;
	bi_node_ptr(lw->path[level], lw->slot[level], &k, &ptr, &gen);
	struct bi_expect e = { lw->root.id, gen, level - 1, &k };
	struct bi_block *child;
	int rc = bi_block_read(lw->fs, ptr, &e, &child);
	if (rc < 0)
		return rc;
	if (level == 1) {
		*leaf = child;
		return 0;
	}
	bi_block_put(lw->fs, lw->path[level - 1]);
	lw->path[level - 1] = child;
	if (level == 2) {
		lw->ra_slot = 0;
		prefetch_next_node(lw);
	}
	return 0;
}

int bi_leafwalk_start(struct btrfsimg_fs *fs, struct bi_leafwalk *lw, const struct bi_root *root,
		      const bi_key *min, const bi_key *max,
		      bool (*skip)(const bi_key *lo, const bi_key *hi))
{
	memset(lw, 0, sizeof(*lw));
	lw->fs = fs;
	lw->root = *root;
	lw->min = *min;
	lw->max = *max;
	lw->skip = skip;
	struct bi_expect e = { root->id, root->generation, root->level, NULL };
	struct bi_block *b;
	int rc = bi_block_read(fs, root->bytenr, &e, &b);
	if (rc < 0) {
		lw->done = true;
		return rc;
	}
	lw->top = b->level;
	if (lw->top == 0) {
		lw->root_leaf = b;
		return 0;
	}
	lw->path[lw->top] = b;
	for (int lvl = lw->top; lvl > 1; lvl--) {
		lw->slot[lvl] = node_slot(lw->path[lvl], min);
		rc = descend(lw, lvl, NULL);
		if (rc < 0) {
			bi_leafwalk_end(lw);
			return rc;
		}
	}
	lw->slot[1] = node_slot(lw->path[1], min);
	return 0;
}

/* Move path[1]'s slot to the next leaf to read. 1: moved; 0: the tree
 * (or range) is exhausted; < 0: a node could not be read. */
static int next_slot(struct bi_leafwalk *lw)
{
	int lvl = 1;
	while (lvl <= lw->top && lw->slot[lvl] + 1 >= lw->path[lvl]->nritems)
		lvl++;
	if (lvl > lw->top)
		return 0;
	lw->slot[lvl]++;
	bi_key k;
	uint64_t ptr, gen;
	bi_node_ptr(lw->path[lvl], lw->slot[lvl], &k, &ptr, &gen);
	if (bi_key_cmp(&k, &lw->max) > 0)
		return 0;
	for (; lvl > 1; lvl--) {
		int rc = descend(lw, lvl, NULL);
		if (rc < 0)
			return rc;
		lw->slot[lvl - 1] = 0;
	}
	while (slot_skippable(lw, lw->slot[1]))
		lw->slot[1]++;
	return 1;
}

int bi_leafwalk_next(struct bi_leafwalk *lw, struct bi_block **leaf, uint32_t *from)
{
	*leaf = NULL;
	*from = 0;
	if (lw->done)
		return 0;
	if (lw->root_leaf) {
		*leaf = lw->root_leaf;
		*from = leaf_slot(*leaf, &lw->min);
		lw->root_leaf = NULL;
		lw->done = true;
		return 1;
	}
	int rc = 1;
	if (lw->started)
		rc = next_slot(lw);
	if (rc > 0 && (rc = descend(lw, 1, leaf)) == 0)
		rc = 1;
	if (rc <= 0) {
		lw->done = true;
		return rc;
	}
	if (!lw->started)
		*from = leaf_slot(*leaf, &lw->min);
	lw->started = true;
	return 1;
}

void bi_leafwalk_end(struct bi_leafwalk *lw)
{
	if (!lw->fs)
		return;
	bi_block_put(lw->fs, lw->root_leaf);
	lw->root_leaf = NULL;
	for (int lvl = 1; lvl < MAX_LEVEL; lvl++) {
		bi_block_put(lw->fs, lw->path[lvl]);
		lw->path[lvl] = NULL;
	}
	lw->done = true;
}
