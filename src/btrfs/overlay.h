/* SPDX-License-Identifier: MIT */
/*
 * Log overlays: items that replace or hide a tree's own (the log tree
 * replayed in memory, logreplay/), as the iterator (btrfs/tree.h) merges
 * them into a walk.
 */
#ifndef BI_OVERLAY_H
#define BI_OVERLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"
#include "base/key.h"

/* Puts are sorted by key and unique; dels are sorted, non-overlapping
 * inclusive ranges. Owned by the handle (fs->overlays). */
struct bi_ovl_put {
	bi_key key;
	uint8_t *data;
	uint32_t size;
};
struct bi_ovl_del {
	bi_key start, end;
};
struct bi_log_overlay {
	uint64_t root;
	struct bi_ovl_put *puts;
	size_t nputs;
	struct bi_ovl_del *dels;
	size_t ndels;
	struct bi_log_overlay *next;
};
const struct bi_log_overlay *bi_overlay_for(const struct btrfsimg_fs *fs, uint64_t root);
void bi_overlays_free(struct btrfsimg_fs *fs);
/* Free a list of overlays (the pure replay's result). */
void bi_lr_overlays_free(struct bi_log_overlay *list);

/* A walk's place in one overlay, keys ascending. */
struct bi_ovl_cursor {
	const struct bi_log_overlay *ovl; /* NULL: the tree has none */
	size_t put_pos, del_pos;
};
/* Start at the first put >= @min of @root's overlay, if it has one. */
void bi_ovl_seek(const struct btrfsimg_fs *fs, uint64_t root, const bi_key *min,
		 struct bi_ovl_cursor *c);
/* The next put not past @max, or NULL; bi_ovl_cursor.put_pos++ takes it. */
const struct bi_ovl_put *bi_ovl_peek(const struct bi_ovl_cursor *c, const bi_key *max);
/* Whether a deleted range hides @k (keys asked for in ascending order). */
bool bi_ovl_hidden(struct bi_ovl_cursor *c, const bi_key *k);

#endif
