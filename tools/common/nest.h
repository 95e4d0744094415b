/* SPDX-License-Identifier: MIT */
/* Subvolume nesting, for numdevs=2: a subvolume's device is the parity of
 * the number of subvolume crossings between the mounted subvolume and it
 * (the library's btrfsimg_numdevs2 table). */
#ifndef BTRFSIMG_TOOLS_NEST_H
#define BTRFSIMG_TOOLS_NEST_H

#include <stddef.h>
#include <stdint.h>

#include "btrfsimg.h"
#include "btrfsimg_inum.h"

struct nest {
	btrfsimg_numdevs2 *t;
};

/* @mount 0: the filesystem's default subvolume. */
int nest_load(btrfsimg_fs *fs, uint64_t mount, struct nest *out);
void nest_free(struct nest *n);
/* 0 or 1; -1 when @subvol is not visible under the mounted subvolume. */
int nest_dev(const struct nest *n, uint64_t subvol);

#endif
