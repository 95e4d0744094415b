/* SPDX-License-Identifier: MIT */
/*
 * Log overlays: their lookup, their freeing, and a cursor over one for a
 * walk in key order (the merge itself is the iterator's, iter.c).
 *
 * Apart from the iterator because only a log replay makes them, and here,
 * not with the replay (logreplay/, a level up), because every walk of a
 * tree must see them and the handle frees them whether or not the log
 * replay is built in.
 */
#include <stdlib.h>

#include "btrfs/overlay.h"

#include "base/handle.h"
#include "base/key.h"

const struct bi_log_overlay *bi_overlay_for(const struct btrfsimg_fs *fs, uint64_t root)
{
	for (const struct bi_log_overlay *o = fs->overlays; o; o = o->next)
		if (o->root == root)
			return o;
	return NULL;
}

void bi_lr_overlays_free(struct bi_log_overlay *o)
{
	while (o) {
		struct bi_log_overlay *next = o->next;
		for (size_t i = 0; i < o->nputs; i++)
			free(o->puts[i].data);
		free(o->puts);
		free(o->dels);
		free(o);
		o = next;
	}
}

void bi_overlays_free(struct btrfsimg_fs *fs)
{
	bi_lr_overlays_free(fs->overlays);
	fs->overlays = NULL;
}

void bi_ovl_seek(const struct btrfsimg_fs *fs, uint64_t root, const bi_key *min,
		 struct bi_ovl_cursor *c)
{
	c->ovl = bi_overlay_for(fs, root);
	c->put_pos = c->del_pos = 0;
	const struct bi_log_overlay *o = c->ovl;
	if (!o)
		return;
	size_t lo = 0, hi = o->nputs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bi_key_cmp(&o->puts[mid].key, min) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	c->put_pos = lo;
}

const struct bi_ovl_put *bi_ovl_peek(const struct bi_ovl_cursor *c, const bi_key *max)
{
	const struct bi_log_overlay *o = c->ovl;
	if (c->put_pos >= o->nputs || bi_key_cmp(&o->puts[c->put_pos].key, max) > 0)
		return NULL;
	return &o->puts[c->put_pos];
}

/* Deletions are sorted, non-overlapping ranges; keys arrive ascending. */
bool bi_ovl_hidden(struct bi_ovl_cursor *c, const bi_key *k)
{
	const struct bi_log_overlay *o = c->ovl;
	while (c->del_pos < o->ndels && bi_key_cmp(&o->dels[c->del_pos].end, k) < 0)
		c->del_pos++;
	return c->del_pos < o->ndels && bi_key_cmp(&o->dels[c->del_pos].start, k) <= 0;
}
