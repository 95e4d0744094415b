// SPDX-License-Identifier: MIT
/* numdevs=2 per subvolume: the parity of the subvolume crossings between
 * the mounted subvolume and it (btrfsimg_subvol_depth), one table. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "btrfsimg_inum.h"

struct btrfsimg_numdevs2 {
	struct btrfsimg_subvol *v; /* sorted by id (btrfsimg_subvols) */
	size_t n;
	int *depth; /* crossings below the mount, -1 if not below it */
};

int btrfsimg_numdevs2_open(btrfsimg_fs *fs, uint64_t mount, btrfsimg_numdevs2 **out)
{
	*out = NULL;
	struct btrfsimg_numdevs2 *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	int rc = mount ? 0 : btrfsimg_default_subvol(fs, &mount);
	if (rc == 0)
		rc = btrfsimg_subvols(fs, &t->v, &t->n);
	if (rc == 0 && !(t->depth = calloc(t->n + 1, sizeof(int))))
		rc = -ENOMEM;
	if (rc < 0) {
		btrfsimg_numdevs2_free(t);
		return rc;
	}
	for (size_t i = 0; i < t->n; i++)
		t->depth[i] = btrfsimg_subvol_depth(t->v, t->n, mount, t->v[i].id);
	*out = t;
	return 0;
}

int btrfsimg_numdevs2_dev(const btrfsimg_numdevs2 *t, uint64_t subvol)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->v[mid].id == subvol)
			return t->depth[mid] < 0 ? -1 : (t->depth[mid] & 1);
		if (t->v[mid].id < subvol)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

void btrfsimg_numdevs2_free(btrfsimg_numdevs2 *t)
{
	if (!t)
		return;
	btrfsimg_subvols_free(t->v, t->n);
	free(t->depth);
	free(t);
}
