// SPDX-License-Identifier: MIT
/*
 * Where a device was read from, as layer rows (btrfsimg_layers) say: the
 * in-use btrfs row under the device's image, and the rows between.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/where.h"

static void add(struct dev_where *w, const struct btrfsimg_layer *r)
{
	size_t k = strlen(w->chain);
	const char *sep = k ? " > " : "";
	if (!strcmp(r->kind, "partition"))
		snprintf(w->chain + k, sizeof(w->chain) - k, "%spartition %s at offset %" PRIu64,
			 sep, r->name, r->offset);
	else if (!strncmp(r->kind, "luks", 4))
		snprintf(w->chain + k, sizeof(w->chain) - k, "%s%s %s", sep, r->kind, r->uuid);
	else
		snprintf(w->chain + k, sizeof(w->chain) - k, "%s%s %s", sep, r->kind, r->name);
	w->volume |= !strncmp(r->kind, "luks", 4) || !strncmp(r->kind, "lvm", 3);
}

static void fallback(const struct btrfsimg_device *d, struct dev_where *w)
{
	if (d->partition)
		snprintf(w->chain, sizeof(w->chain), "partition %d at offset %" PRIu64,
			 d->partition, d->offset);
}

void dev_where(btrfsimg_fs *fs, const struct btrfsimg_device *d, struct dev_where *w)
{
	*w = (struct dev_where){ 0 };
	size_t n = 0;
	struct btrfsimg_layer *rows = NULL;
	if (d->missing || !d->image || btrfsimg_layers(fs, NULL, 0, &n) < 0 || !n ||
	    !(rows = calloc(n, sizeof(*rows))) || btrfsimg_layers(fs, rows, n, &n) < 0) {
		free(rows);
		fallback(d, w);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (!rows[i].in_use || strcmp(rows[i].kind, "btrfs"))
			continue;
		/* climb to the image row: the chain, top first */
		int up[16], nu = 0;
		int p = rows[i].parent;
		while (p >= 0 && (size_t)p < n && nu < 16 && rows[p].parent >= 0) {
			up[nu++] = p;
			p = rows[p].parent;
		}
		if (p < 0 || (size_t)p >= n || strcmp(rows[p].name, d->image))
			continue;
		for (int k = nu - 1; k >= 0; k--)
			add(w, &rows[up[k]]);
		free(rows);
		return;
	}
	free(rows);
	fallback(d, w);
}
