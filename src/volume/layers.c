/* SPDX-License-Identifier: MIT */
/*
 * The rows of btrfsimg_layers: one per image, partition, LUKS header, PV,
 * VG, LV and btrfs a scan met, with what happened to each (opened,
 * locked, damaged) in its detail; and the listing, as a tree in row
 * order. Rows are added by the scan (scan.c, unlock.c) and marked in use
 * by the choice (vol.c); they hold no secret.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "volume/stack.h"

#include "base/err.h"
#include "base/grow.h"
#include "base/handle.h"
#include "image/dev.h"
#include "volume/vol.h"

/* One more row, or -1 (out of memory, or the listing full). The last
 * row ROWS_MAX leaves says that rows were left out; bi_vols_scan() reports it. */
int bi_vols_row_add(struct bi_vols *V, int parent, const char *kind, const char *name, uint64_t off,
		    uint64_t size)
{
	if (V->rows_full)
		return -1;
	if (bi_grow_most((void **)&V->rows, &V->rows_cap, V->nrows + 1, sizeof(*V->rows), ROWS_MAX))
		return -1;
	if (V->nrows == ROWS_MAX - 1) {
		V->rows_full = true;
		parent = -1;
		kind = "stopped";
		name = "";
		off = size = 0;
	}
	struct btrfsimg_layer *r = &V->rows[V->nrows];
	memset(r, 0, sizeof(*r));
	r->parent = parent;
	r->depth = parent >= 0 ? V->rows[parent].depth + 1 : 0;
	snprintf(r->kind, sizeof(r->kind), "%s", kind);
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->offset = off;
	r->size = size;
	if (V->rows_full) {
		snprintf(r->detail, sizeof(r->detail),
			 "listing stopped: more than %d layers; the rest are not listed",
			 ROWS_MAX - 1);
		V->nrows++;
		return -1;
	}
	return (int)V->nrows++;
}

struct btrfsimg_layer *bi_vols_row(struct bi_vols *V, int i)
{
	if (i < 0 || (size_t)i >= V->nrows) { /* a row that could not be added */
		memset(&V->sink, 0, sizeof(V->sink));
		return &V->sink;
	}
	return &V->rows[i];
}

void bi_vols_row_note(struct bi_vols *V, int i, const char *fmt, const char *s)
{
	struct btrfsimg_layer *r = bi_vols_row(V, i);
	size_t used = strlen(r->detail);
	snprintf(r->detail + used, sizeof(r->detail) - used, fmt, s);
}

void bi_vols_placed_row(struct btrfsimg_fs *fs, const struct bi_dev *d, const uint8_t fsid[16],
			const char *how)
{
	struct bi_vols *V = fs->vols;
	for (size_t i = 0; V && i < V->nrows; i++) {
		const struct btrfsimg_layer *img = &V->rows[i];
		if (img->parent >= 0 || strcmp(img->kind, "image") || strcmp(img->name, d->name))
			continue;
		int r = bi_vols_row_add(V, (int)i, "btrfs", "", d->base, d->size);
		bi_uuid_str(fsid, bi_vols_row(V, r)->uuid);
		bi_vols_row_note(V, r, "found by scanning: %s", how);
		bi_vols_row(V, r)->in_use = true;
		bi_vols_row(V, (int)i)->in_use = true;
		return;
	}
}

/* ------------------------------------------------------------ listing */

/* Children in row order: kid[i] the first child of row i, sib[i] the next
 * one after it (-1: none); roots hang off kid[nrows]. Built in one pass so
 * a listing of many rows costs rows, not rows squared. */
struct tree {
	const struct bi_vols *V;
	int *kid, *sib;
	struct btrfsimg_layer *out;
	size_t max, n;
};

static void dfs(struct tree *T, int first, int out_parent, unsigned depth)
{
	for (int i = first; i >= 0; i = T->sib[i]) {
		size_t me = T->n++;
		if (me < T->max) {
			T->out[me] = T->V->rows[i];
			T->out[me].parent = out_parent;
			T->out[me].depth = depth;
		}
		if (depth < 32)
			dfs(T, T->kid[i], (int)me, depth + 1);
	}
}

int btrfsimg_layers(btrfsimg_fs *fs, struct btrfsimg_layer *out, size_t max, size_t *n)
{
	if (!fs || !n || (max && !out))
		return -EINVAL;
	*n = 0;
	if (!fs->vols || !fs->vols->scanned)
		return bi_err(fs, -EINVAL,
			      "btrfsimg_layers: call btrfsimg_probe() or "
			      "btrfsimg_open() first");
	const struct bi_vols *V = fs->vols;
	struct tree T = { V,
			  malloc((V->nrows + 1) * sizeof(int)),
			  malloc((V->nrows + 1) * sizeof(int)),
			  out,
			  max,
			  0 };
	if (!T.kid || !T.sib) {
		free(T.kid);
		free(T.sib);
		return bi_err(fs, -ENOMEM, "btrfsimg_layers: out of memory for %zu rows", V->nrows);
	}
	for (size_t i = 0; i <= V->nrows; i++)
		T.kid[i] = -1;
	for (size_t i = V->nrows; i-- > 0;) { /* prepend: children end up in row order */
		int p = V->rows[i].parent;
		size_t at = p >= 0 && (size_t)p < i ? (size_t)p : V->nrows;
		T.sib[i] = T.kid[at];
		T.kid[at] = (int)i;
	}
	dfs(&T, T.kid[V->nrows], -1, 0);
	*n = T.n;
	free(T.kid);
	free(T.sib);
	return 0;
}
