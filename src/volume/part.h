/* SPDX-License-Identifier: MIT */
/*
 * Partition tables (MBR, GPT), and where the filesystem lies in a device.
 */
#ifndef BI_PART_H
#define BI_PART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg.h"

struct btrfsimg_fs;
struct bi_dev;

/* bi_part_parse never returns more: 8192 GPT entries (1 MiB array of
 * 128-byte entries) or 4 primaries + 4 per EBR over 128 EBRs. */
#define BI_PART_MAX (8192 + 4 + 4 * 128)

typedef int (*bi_read_at_fn)(void *ctx, uint64_t off, void *buf, size_t len);
/* Parse an MBR or GPT partition table through @rd (only called for ranges
 * inside [0, size)). Fills up to @max entries, returns the number of
 * partitions (0: no table, or an empty one; at most BI_PART_MAX) or a
 * negative errno (-EUCLEAN: bad table; @rd's error) with a message in @err.
 * On success @err is empty or notes damage worked around (the backup GPT
 * header used). Partitions are listed as the table states them, possibly
 * extending past @size. Does not probe for btrfs (is_btrfs left false). */
int bi_part_parse(bi_read_at_fn rd, void *ctx, uint64_t size, struct btrfsimg_partition *out,
		  size_t max, char *err, size_t errlen);

/* A partition asked for (fs->opts.partition) of an image that holds btrfs
 * itself: -EINVAL with the message on @fs, else 0. */
int bi_part_applies(struct btrfsimg_fs *fs);

/* Choose base/size of every device: the image itself if it holds btrfs at
 * 64 KiB, else the partition asked for, else the only btrfs partition. */
int bi_dev_locate(struct btrfsimg_fs *fs, struct bi_dev *d);

#endif
