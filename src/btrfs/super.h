/* SPDX-License-Identifier: MIT */
/*
 * Superblocks: decode, check, choose the copy in use, match devices.
 */
#ifndef BI_SUPER_H
#define BI_SUPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"

/* Decode and check one 4096-byte copy read from @bytenr. Returns a
 * btrfsimg_mirror_state; @why receives the reason when not valid. */
int bi_super_parse(const uint8_t *buf, size_t len, uint64_t bytenr, struct bi_super *out,
		   char *why, size_t whylen);
/* Read every device's copies, pick the one to use, match devices. */
int bi_super_load(struct btrfsimg_fs *fs);

#endif
