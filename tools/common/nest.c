// SPDX-License-Identifier: MIT
#include "common/nest.h"

int nest_load(btrfsimg_fs *fs, uint64_t mount, struct nest *out)
{
	return btrfsimg_numdevs2_open(fs, mount, &out->t);
}

void nest_free(struct nest *n)
{
	btrfsimg_numdevs2_free(n->t);
	n->t = NULL;
}

int nest_dev(const struct nest *n, uint64_t subvol)
{
	return btrfsimg_numdevs2_dev(n->t, subvol);
}
