// SPDX-License-Identifier: MIT
#include "nest.h"

#include <errno.h>
#include <stdlib.h>

#include "btrfsimg_inum.h"

const struct btrfsimg_subvol *nest_find(const struct nest *n, uint64_t id)
{
	size_t lo = 0, hi = n->n; /* btrfsimg_subvols sorts by id */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (n->v[mid].id == id)
			return &n->v[mid];
		if (n->v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int nest_load(btrfsimg_fs *fs, uint64_t mount, struct nest *out)
{
	out->v = NULL;
	out->depth = NULL;
	int rc = 0;
	if (!mount)
		rc = btrfsimg_default_subvol(fs, &mount);
	if (rc == 0)
		rc = btrfsimg_subvols(fs, &out->v, &out->n);
	if (rc < 0)
		return rc;
	out->mount = mount;
	out->depth = calloc(out->n + 1, sizeof(int));
	if (!out->depth) {
		nest_free(out);
		return -ENOMEM;
	}
	for (size_t i = 0; i < out->n; i++)
		out->depth[i] = btrfsimg_subvol_depth(out->v, out->n, mount, out->v[i].id);
	return 0;
}

void nest_free(struct nest *n)
{
	btrfsimg_subvols_free(n->v, n->n);
	free(n->depth);
	n->v = NULL;
	n->depth = NULL;
}

int nest_dev(const struct nest *n, uint64_t subvol)
{
	const struct btrfsimg_subvol *s = nest_find(n, subvol);
	if (!s)
		return -1;
	int d = n->depth[s - n->v];
	return d < 0 ? -1 : (d & 1);
}
