/* SPDX-License-Identifier: MIT */
/*
 * Offline scrub (scrub.c) with its read sizes chosen: the tests use small
 * windows so that blocks and extents lie across window boundaries.
 */
#ifndef BI_SCRUB_H
#define BI_SCRUB_H

#include <stdint.h>

#include "btrfsimg_forensic.h"

/* btrfsimg_scrub reading at most @window bytes of a stripe at a time (a
 * multiple of 64 KiB, at most 8 MiB) with @depth ring buffers per device
 * (2 to 16; anything else reads through bi_dev_read only). */
int bi_scrub_run(btrfsimg_fs *fs, const struct btrfsimg_scrub_opts *opts, uint32_t window,
		 unsigned depth, struct btrfsimg_scrub_report **out);

#endif
