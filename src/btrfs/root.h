/* SPDX-License-Identifier: MIT */
/*
 * The root tree: where each tree is, subvolumes and their paths.
 */
#ifndef BI_ROOT_H
#define BI_ROOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"

/* Locate tree @id: 1 and 3 from the superblock, others by ROOT_ITEM. */
int bi_root_find(struct btrfsimg_fs *fs, uint64_t id, struct bi_root *out);

#endif
