/* SPDX-License-Identifier: MIT */
/*
 * The btrfs core's open sequence.
 */
#ifndef BI_OPEN_H
#define BI_OPEN_H

#include "base/handle.h"

/* Locate every device, read and choose the superblock, load the chunk map
 * (sys_chunk_array, then the chunk tree) and check the root tree is
 * readable. 0 or a negative errno with the message on @fs. */
int bi_core_open(struct btrfsimg_fs *fs);

/* Walk the chunk tree (fs->chunk_tree, read through the chunks the
 * sys_chunk_array mapped) and add every chunk, then report the degraded
 * ones (bi_chunk_map_report_degraded). */
int bi_load_chunk_tree(struct btrfsimg_fs *fs);

#endif
