/* SPDX-License-Identifier: MIT */
/*
 * Ordered iteration over a key range of one tree, the log overlay merged
 * in; lookups of one key and of the last key before one.
 *
 * Items come from the one path (path.c) leaf by leaf; this file checks
 * what the path cannot: that keys increase strictly across leaves (so a
 * loop in the tree ends in an error, not a hang) and that an item past the
 * range ends the walk. Apart from the path because a leaf walk (leafwalk.c)
 * uses that path without items, and from the overlay (overlay.c) because
 * only a log replay makes one.
 */
#include <stdlib.h>
#include <string.h>

#include "btrfs/tree.h"

#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/block.h"
#include "btrfs/overlay.h"
#include "btrfs/path.h"

int bi_iter_start(struct btrfsimg_fs *fs, struct bi_iter *it, const struct bi_root *root,
		  const bi_key *min, const bi_key *max)
{
	/* field by field: a memset of the whole struct (base included, set
	 * before it is read) was a third of a lookup's time in this function */
	bi_path_init(&it->p, fs, root, max, true);
	it->last = (bi_key){ 0 };
	it->started = it->done = false;
	it->have_base = it->base_done = false;
	bi_ovl_seek(fs, root->id, min, &it->ovl);
	if (bi_path_hint_start(&it->p, min))
		return 0;
	int rc = bi_path_descend(&it->p, min);
	if (rc < 0)
		it->done = true;
	return rc;
}

void bi_iter_skip_leaves(struct bi_iter *it, bool (*skip)(const bi_key *lo, const bi_key *hi))
{
	it->p.skip = skip;
}

void bi_iter_stream(struct bi_iter *it)
{
	it->p.ra = BI_RA_STREAM;
}

/* The tree's own next item, in [min, max]. */
static int base_next(struct bi_iter *it, struct bi_item *out)
{
	while (!it->done) {
		struct bi_block *leaf = it->p.nodes[0];
		if (it->p.slots[0] >= leaf->nritems) {
			int rc = bi_path_next_leaf(&it->p);
			if (rc <= 0) {
				it->done = true;
				return rc;
			}
			continue;
		}
		bi_leaf_item(leaf, it->p.slots[0], &out->key, &out->data, &out->size);
		if (bi_key_cmp(&out->key, &it->p.max) > 0)
			break;
		if (it->started && bi_key_cmp(&out->key, &it->last) <= 0) {
			it->done = true;
			return bi_item_err(it->p.fs, -EUCLEAN, "leaf", it->p.root.id, leaf->bytenr,
					   it->p.slots[0],
					   "key (%" PRIu64 " %u %" PRIu64
					   ") not after the previous leaf's (%" PRIu64
					   " %u %" PRIu64 ")",
					   out->key.objectid, out->key.type, out->key.offset,
					   it->last.objectid, it->last.type, it->last.offset);
		}
		it->started = true;
		it->last = out->key;
		out->block = leaf->bytenr;
		out->slot = it->p.slots[0]++;
		return 1;
	}
	it->done = true;
	return 0;
}

/* The tree's items merged with the overlay's: an overlay item replaces the
 * tree's item with the same key, and deleted ranges hide tree items. */
int bi_iter_next(struct bi_iter *it, struct bi_item *out)
{
	if (!it->ovl.ovl)
		return base_next(it, out);
	for (;;) {
		if (!it->have_base && !it->base_done) {
			int rc = base_next(it, &it->base);
			if (rc < 0)
				return rc;
			it->have_base = rc > 0;
			it->base_done = rc == 0;
		}
		const struct bi_ovl_put *p = bi_ovl_peek(&it->ovl, &it->p.max);
		if (it->have_base && (bi_ovl_hidden(&it->ovl, &it->base.key) ||
				      (p && bi_key_cmp(&p->key, &it->base.key) == 0))) {
			it->have_base = false;
			continue;
		}
		if (p && (!it->have_base || bi_key_cmp(&p->key, &it->base.key) < 0)) {
			*out = (struct bi_item){ p->key, p->data, p->size, 0,
						 (uint32_t)it->ovl.put_pos };
			it->ovl.put_pos++;
			return 1;
		}
		if (!it->have_base)
			return 0;
		*out = it->base;
		it->have_base = false;
		return 1;
	}
}

void bi_iter_end(struct bi_iter *it)
{
	if (!it->p.fs)
		return;
	bi_path_hint_keep(&it->p);
	bi_path_release(&it->p);
	it->done = true;
}

int bi_tree_get(struct btrfsimg_fs *fs, const struct bi_root *root, const bi_key *key,
		uint8_t **data, uint32_t *size)
{
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, root, key, key);
	if (rc < 0)
		return rc;
	rc = bi_iter_next(&it, &item);
	if (rc == 0)
		rc = -ENOENT;
	if (rc > 0) {
		rc = 0;
		if (size)
			*size = item.size;
		if (data) {
			*data = malloc(item.size ? item.size : 1);
			if (*data)
				memcpy(*data, item.data, item.size);
			else
				rc = bi_err(fs, -ENOMEM, "out of memory");
		}
	}
	bi_iter_end(&it);
	return rc;
}

int bi_tree_last(struct btrfsimg_fs *fs, const struct bi_root *root, const bi_key *max, bi_key *out)
{
	struct bi_path p;
	bi_path_init(&p, fs, root, max, true);
	int rc = bi_path_descend(&p, max);
	if (rc < 0)
		return rc;
	/* the slot of the first item >= max; the one before it is < max */
	const struct bi_block *b = p.nodes[0];
	uint32_t s = p.slots[0];
	bi_key k = { 0, 0, 0 };
	if (s < b->nritems)
		bi_key_read(b->data + HDR_SIZE + (size_t)s * ITEM_SIZE, &k);
	if (s < b->nritems && bi_key_cmp(&k, max) == 0)
		*out = k;
	else if (s > 0)
		bi_key_read(b->data + HDR_SIZE + (size_t)(s - 1) * ITEM_SIZE, out);
	else
		rc = -ENOENT;
	bi_path_release(&p);
	return rc;
}
