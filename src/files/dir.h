/* SPDX-License-Identifier: MIT */
/*
 * Directory entries, as stat() and readdir see them.
 */
#ifndef BI_DIR_H
#define BI_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"

/* What stat() on an entry of directory @dir in @subvol reaches: fills
 * kind / target_subvol / target_objectid of @e from its location (the
 * kernel's fixup_tree_root_location rule for subvolume entries). */
int bi_dir_resolve(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
		   struct btrfsimg_dirent *e);

/* The listing buffers kept on the handle (btrfsimg_fs_free). */
void bi_dir_bufs_free(struct btrfsimg_fs *fs);

struct bi_root;
/* Inode @e->location_objectid of @r (an entry of directory @dir that
 * readdir listed), checking on the way that its INODE_REF (or EXTREF)
 * names it in @dir at the entry's index, as btrfs check does; a missing or
 * different backref is reported as damage, not an error. */
int bi_dir_child_inode(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t dir,
		       const struct btrfsimg_dirent *e, struct btrfsimg_inode *out);

#endif
