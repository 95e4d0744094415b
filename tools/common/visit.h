/* SPDX-License-Identifier: MIT */
/*
 * Depth-first traversal of a directory tree, as a process walking the
 * mounted filesystem would see it: the library's walk iterator
 * (btrfsimg_walk_next) with a callback per path, a progress bar and the
 * per-entry errors on stderr. Shared by walk, bodyfile and extract.
 */
#ifndef BTRFSIMG_TOOLS_VISIT_H
#define BTRFSIMG_TOOLS_VISIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg.h"

struct visit_node {
	const uint8_t *path;		/* relative to the start; "" for the start */
	size_t path_len;
	size_t depth;			/* 0 for the start */
	bool is_start;
	struct btrfsimg_dirent ent;	/* the parent's entry (unset for the start) */
	uint64_t subvol, objectid;	/* what stat() reaches */
	bool stub;
	struct btrfsimg_inode inode;	/* synthesized for stubs */
	uint64_t dir_subvol, dir_objectid;	/* the containing directory */
	uint64_t dir_tree_subvol;	/* subvolume of that directory (readdir's root) */
	const struct btrfsimg_inode *dir_inode;	/* its inode; NULL for the start */
	const struct btrfsimg_walk_entry *entry; /* the walk's record it was made from */
};

/* Return 0 to go on, 1 to skip descending into this directory, < 0 to stop. */
typedef int (*visit_fn)(void *ctx, const struct visit_node *n);

struct visit_opts {
	uint64_t subvol;	/* where the start path is resolved */
	const char *path;	/* start path ("" or NULL: the subvolume root) */
	uint64_t objectid;	/* not 0: start at inode @subvol:@objectid (no @path) */
	bool post_dirs;		/* also call @post after a directory's children */
	visit_fn post;
};

/* Walk; per-entry failures are counted in *errors and reported on stderr,
 * the walk goes on. Returns 0 or the first fatal negative errno. */
int visit_tree(btrfsimg_fs *fs, const struct visit_opts *o, visit_fn fn, void *ctx,
	       uint64_t *errors);

#endif
