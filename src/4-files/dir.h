/* SPDX-License-Identifier: MIT */
/*
 * Directory entries, as stat() and readdir see them.
 */
#ifndef BI_DIR_H
#define BI_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "0-base/handle.h"

/* What stat() on an entry of directory @dir in @subvol reaches: fills
 * kind / target_subvol / target_objectid of @e from its location (the
 * kernel's fixup_tree_root_location rule for subvolume entries). */
int bi_dir_resolve(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
		   struct btrfsimg_dirent *e);

#endif
