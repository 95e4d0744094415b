// SPDX-License-Identifier: MIT
/*
 * What `btrfsimg super` reports beyond the superblock, and where each
 * device was read from, in one place for every front end (the CLI's super
 * and unallocated, the Python binding's Filesystem.superblock). It sits in
 * files/ because it gathers from every level below: the volume layers'
 * rows, the chunk tree's devices and profiles, the log tree's replay.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg.h"
#include "base/err.h"

/* How deep a device may lie under its image: partition, LUKS, PV, VG, LV
 * and then some; a deeper chain (rows that loop) is not followed. */
#define WHERE_DEPTH 16

static void where_add(struct btrfsimg_device_where *w, const struct btrfsimg_layer *r)
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

/* The in-use btrfs row under @d's image: its chain, top first; false when
 * no row leads to that image. */
static bool where_from_rows(const struct btrfsimg_layer *rows, size_t n,
			    const struct btrfsimg_device *d, struct btrfsimg_device_where *w)
{
	for (size_t i = 0; i < n; i++) {
		if (!rows[i].in_use || strcmp(rows[i].kind, "btrfs"))
			continue;
		int up[WHERE_DEPTH], nu = 0, p = rows[i].parent;
		while (p >= 0 && (size_t)p < n && nu < WHERE_DEPTH && rows[p].parent >= 0) {
			up[nu++] = p;
			p = rows[p].parent;
		}
		if (p < 0 || (size_t)p >= n || strcmp(rows[p].name, d->image))
			continue;
		for (int k = nu - 1; k >= 0; k--)
			where_add(w, &rows[up[k]]);
		return true;
	}
	return false;
}

void btrfsimg_device_where(btrfsimg_fs *fs, const struct btrfsimg_device *d,
			   struct btrfsimg_device_where *w)
{
	*w = (struct btrfsimg_device_where){ 0 };
	if (d->missing)
		return;
	size_t n = 0;
	struct btrfsimg_layer *rows = NULL;
	bool found = d->image && btrfsimg_layers(fs, NULL, 0, &n) == 0 && n &&
		     (rows = calloc(n, sizeof(*rows))) && btrfsimg_layers(fs, rows, n, &n) == 0 &&
		     where_from_rows(rows, n, d, w);
	free(rows);
	if (!found && d->partition) /* no rows: the partition, as the device says */
		snprintf(w->chain, sizeof(w->chain), "partition %d at offset %" PRIu64,
			 d->partition, d->offset);
}

/* Devices and where each was read from; none when they cannot be listed. */
static void facts_devices(btrfsimg_fs *fs, struct btrfsimg_fs_facts *f)
{
	size_t n = 0;
	if (btrfsimg_devices(fs, NULL, 0, &n) == 0 && n &&
	    (f->devices = calloc(n, sizeof(*f->devices))) &&
	    btrfsimg_devices(fs, f->devices, n, &f->ndevices) == 0 && f->ndevices > n)
		f->ndevices = n;
	if (f->ndevices && (f->where = calloc(f->ndevices, sizeof(*f->where))))
		for (size_t i = 0; i < f->ndevices; i++)
			btrfsimg_device_where(fs, &f->devices[i], &f->where[i]);
}

int btrfsimg_fs_facts(btrfsimg_fs *fs, struct btrfsimg_fs_facts **out)
{
	if (!fs || !out)
		return -EINVAL;
	*out = NULL;
	struct btrfsimg_fs_facts *f = calloc(1, sizeof(*f));
	if (!f)
		return bi_err(fs, -ENOMEM, "facts: out of memory");
	int rc = btrfsimg_super(fs, &f->super);
	if (rc < 0) {
		free(f);
		return rc;
	}
	facts_devices(fs, f);
	size_t cap = sizeof(f->profiles) / sizeof(f->profiles[0]);
	if (btrfsimg_profiles(fs, f->profiles, cap, &f->nprofiles) < 0)
		f->nprofiles = 0;
	if (f->nprofiles > cap)
		f->nprofiles = cap;
	f->have_log = btrfsimg_log_info(fs, &f->log) == 0;
	*out = f;
	return 0;
}

void btrfsimg_fs_facts_free(struct btrfsimg_fs_facts *f)
{
	if (!f)
		return;
	free(f->devices);
	free(f->where);
	free(f);
}
