/* SPDX-License-Identifier: MIT */
/*
 * Inodes of a subvolume, read through the checker.
 */
#ifndef BI_INODE_H
#define BI_INODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"

/* Read INODE_ITEM (subvol, objectid) through bi_inode_parse. -ENOENT with
 * a message if absent; a subvolume's root directory whose item is lost is
 * synthesized where its tree's items survive (bi_orphans_root_dir). */
int bi_inode_read(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t objectid,
		  struct btrfsimg_inode *out);

struct bi_item;
/* The INODE_ITEM @item of @r parsed into *out: 0 or -EUCLEAN (message). */
int bi_inode_item(struct btrfsimg_fs *fs, const struct bi_root *r, const struct bi_item *item,
		  struct btrfsimg_inode *out);

#endif
