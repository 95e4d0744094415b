/* SPDX-License-Identifier: MIT */
/*
 * Log tree replay, in memory (replay.c, ops.c, state.c).
 */
#ifndef BI_LOGREPLAY_H
#define BI_LOGREPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"
#include "base/key.h"
#include "btrfs/tree.h"

/*
 * Replay the log tree (superblock log_root != 0: a crash after fsync) into
 * overlays on fs->overlays, so every reader sees what the kernel shows
 * after mounting. Nothing is written. Does nothing with
 * BTRFSIMG_OPEN_NO_LOG_REPLAY or log_root 0. A log the kernel could not
 * replay either (corrupt, or an operation the kernel would abort on) is
 * reported as damage (bi_damage) and the last committed state is shown, so
 * this returns 0 except for misuse (-EINVAL: overlays exist already). Call
 * once, at the end of the open sequence.
 */
int bi_log_replay(struct btrfsimg_fs *fs);

/* A read-only sorted item source: a tree, or (tests, fuzzing) an array.
 * first/last give the first/last item with min <= key <= max: 1 with *key,
 * *data (malloc'd copy, caller frees; never NULL) and *size set, 0 if none,
 * or a negative errno (message in the source's own way). */
struct bi_lr_src {
	int (*first)(void *ctx, const bi_key *min, const bi_key *max, bi_key *key,
		     uint8_t **data, uint32_t *size);
	int (*last)(void *ctx, const bi_key *min, const bi_key *max, bi_key *key,
		    uint8_t **data, uint32_t *size);
	void *ctx;
};

/* One item of an in-memory item array (data borrowed). */
struct bi_lr_item {
	bi_key key;
	const uint8_t *data;
	uint32_t size;
};

/* An array source: @items sorted by key, keys unique (not checked here). */
struct bi_lr_array {
	const struct bi_lr_item *items;
	size_t n;
};
void bi_lr_src_array(struct bi_lr_src *src, struct bi_lr_array *arr);

/* The log tree of one subvolume, and that subvolume's fs tree. */
struct bi_lr_log {
	uint64_t root;			/* subvolume id (the log ROOT_ITEM's offset) */
	const struct bi_lr_item *items;	/* the log tree's items, sorted, unique */
	size_t n;
	struct bi_lr_src base;		/* its fs tree; first == NULL: no such
					   subvolume, the log is skipped as the
					   kernel skips it */
};

struct bi_lr_params {
	uint64_t transid;		/* the replay transaction: generation + 1 */
	uint32_t sectorsize, nodesize, csum_size;
	bool no_holes, extended_iref;	/* incompat NO_HOLES, EXTENDED_IREF */
	uint64_t max_bytes;		/* overlay memory limit (0: 256 MiB) */
	uint64_t max_steps;		/* item lookups/updates limit (0: 2^27) */
};

/* The global trees replay reads: the csum tree (changed: logged data's
 * checksums go in, freed extents' go out) and the extent tree (read only,
 * for the reference counts that decide which extents replay frees). */
struct bi_lr_trees {
	struct bi_lr_src csum, extent;
};

/* The pure replay: apply @logs (any order; replayed in the kernel's order)
 * to their fs trees and to the csum tree. On success *out is a list of
 * overlays (one per changed fs tree, plus root 7 for the csum tree) that
 * the caller owns (free with bi_lr_overlays_free, or hang on fs->overlays).
 * Errors: -EUCLEAN (a corrupt log or tree, or an operation the kernel's
 * replay would abort on), -ENOMEM (allocation failed or max_bytes
 * exceeded), -E2BIG (max_steps exceeded), -EINVAL (bad params), or a
 * source's error; @why says what and where. */
int bi_lr_replay(const struct bi_lr_params *p, const struct bi_lr_log *logs, size_t nlogs,
		 const struct bi_lr_trees *trees, struct bi_log_overlay **out, char *why,
		 size_t whylen);

#endif
