/* SPDX-License-Identifier: MIT */
/*
 * What diff and send both need of an inode: its links (parent directory,
 * name) and their paths from the subvolume's root, built from INODE_REF
 * items up to the root directory (256).
 */
#ifndef BI_SEND_PATHS_H
#define BI_SEND_PATHS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg.h"
#include "base/grow.h"

/* Bytes with a NUL kept after them. */
struct bi_bytes {
	uint8_t *p;
	size_t len, cap;
};
int bi_bytes_put(struct bi_bytes *b, const void *d, size_t n);

struct bi_link {
	uint64_t parent;
	uint8_t *name;
	size_t len;
};

/* One inode of one subvolume: whether it exists, its item, its links
 * (none for the root directory, whose stored name ".." is no link). */
struct bi_inode_links {
	uint64_t subvol;
	bool exists;
	struct btrfsimg_inode ino;
	struct bi_link *links;
	size_t nlinks, cap;
};

int bi_inode_links_load(btrfsimg_fs *fs, struct bi_inode_links *s, uint64_t objectid);
void bi_inode_links_clear(struct bi_inode_links *s);
bool bi_same_link(const struct bi_link *a, const struct bi_link *b);
bool bi_has_link(const struct bi_inode_links *s, const struct bi_link *l);

/* @name, then '/', then what @out held (nothing when it was empty). */
int bi_bytes_prepend(struct bi_bytes *out, const uint8_t *name, size_t len);

/* Where a directory is when it is not where the tree says: nonzero with
 * its parent and name (borrowed), or 0 to read the tree. */
typedef int (*bi_place_fn)(void *ctx, uint64_t dir, uint64_t *parent, const uint8_t **name,
			   size_t *len);
/* bi_dir_path with @place asked first at each step up (NULL: never). */
int bi_dir_path_placed(btrfsimg_fs *fs, uint64_t subvol, uint64_t dir, bi_place_fn place,
		       void *ctx, struct bi_bytes *out);

/* The path of directory @dir from the subvolume's root ("" for the root),
 * or of link @l; @out is overwritten. -ELOOP, -EUCLEAN with a message. */
int bi_dir_path(btrfsimg_fs *fs, uint64_t subvol, uint64_t dir, struct bi_bytes *out);
int bi_link_path(btrfsimg_fs *fs, uint64_t subvol, const struct bi_link *l, struct bi_bytes *out);

#endif
