/* SPDX-License-Identifier: MIT */
/*
 * The volume stack's answer for an open: which volume holds each device's
 * btrfs. With neither LUKS nor LVM anywhere the images are located
 * exactly as before (bi_dev_locate, part.c); else the stack the scan
 * built (scan.c) gives each image the one btrfs volume rooted in it (the
 * partition or LV asked for, if any), points the device's reads at it
 * (stack_read.c), and marks an image that only holds a PV of an LV read
 * as another device absorbed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "volume/vol.h"

#include "volume/stack.h"

#include "base/err.h"
#include "base/handle.h"
#include "image/dev.h"

static uint64_t roots(struct bi_vols *V, const struct bi_vol *v, int depth)
{
	if (depth > 16)
		return 0;
	if (v->kind == V_IMAGE)
		return v->img_idx < 64 ? 1ull << v->img_idx : 0;
	if (v->kind == V_LUKS)
		return roots(V, v->lower, depth + 1);
	uint64_t m = 0;
	const struct vg_ent *g = &V->vg[v->vg];
	for (int i = 0; i < g->vg.npv; i++)
		if (g->pv[i])
			m |= roots(V, g->pv[i], depth + 1);
	return m;
}

static bool wanted(struct btrfsimg_fs *fs, const struct bi_vol *v)
{
	struct bi_vols *V = fs->vols;
	if (V->select)
		return strcmp(v->lvname, V->select) == 0;
	if (fs->opts.partition)
		return (unsigned)v->partition == fs->opts.partition;
	return true;
}

static void mark_in_use(struct bi_vols *V, int r)
{
	for (int i = 0; r >= 0 && (size_t)r < V->nrows && i < 64; i++) {
		V->rows[r].in_use = true;
		r = V->rows[r].parent;
	}
}

static void use_vol(struct btrfsimg_fs *fs, struct bi_dev *d, struct bi_vol *v)
{
	struct bi_vols *V = fs->vols;
	/* base: where the stack starts in this image (its partition, or 0),
	 * down through LUKS and the LV's first PV on this image */
	const struct bi_vol *w = v;
	for (int hops = 0; w && w->kind != V_IMAGE && hops < 16; hops++) {
		const struct vg_ent *g = w->kind == V_LV ? &V->vg[w->vg] : NULL;
		const struct bi_vol *next = w->kind == V_LUKS ? w->lower : NULL;
		for (int i = 0; g && i < g->vg.npv; i++)
			if (g->pv[i] && (!next || g->pv[i]->img == d))
				next = g->pv[i];
		w = next;
	}
	d->partition = v->partition;
	d->size = v->size;
	d->base = w && w->kind == V_IMAGE && w->img == d ? w->base : 0;
	if (v->kind != V_IMAGE) {
		d->vol = v;
		d->vread = bi_vol_dev_read;
	}
	mark_in_use(V, v->row);
	for (const struct bi_vol *u = v; u; u = u->kind == V_LUKS ? u->lower : NULL)
		if (u->kind == V_LV) /* and the PVs of a VG printed apart */
			for (size_t k = 0; k < V->npv; k++)
				if (strcmp(V->pv[k].vgid, V->vg[u->vg].vg.id) == 0)
					mark_in_use(V, V->pv[k].row);
	bi_info(fs, "image '%s': using %s (%" PRIu64 " bytes)", d->name, v->name, v->size);
}

static int none_found(struct btrfsimg_fs *fs, const struct bi_dev *d)
{
	struct bi_vols *V = fs->vols;
	if (V->broken[0] && !V->locked[0])
		return bi_err(fs, -EUCLEAN, "no btrfs found in image '%s': the LUKS header of %s",
			      d->name, V->broken);
	if (V->locked[0])
		return bi_err(
			fs, -EKEYREJECTED,
			"no btrfs found in image '%s': %s is encrypted and stays locked; give "
			"--passphrase-file FILE or --volume-key-file FILE",
			d->name, V->locked);
	if (V->select)
		return bi_err(fs, -ENOENT, "image '%s': no logical volume '%s' holding btrfs",
			      d->name, V->select);
	if (fs->opts.partition)
		return bi_err(fs, -ENOENT, "image '%s': partition %u holds no btrfs (in any layer)",
			      d->name, fs->opts.partition);
	return bi_err(fs, -EUCLEAN,
		      "no btrfs superblock found in image '%s' nor in any partition, LUKS volume "
		      "or logical volume of it",
		      d->name);
}

static int choose(struct btrfsimg_fs *fs)
{
	struct bi_vols *V = fs->vols;
	uint64_t used = 0;
	int rc = 0;
	for (size_t k = 0; k < fs->ndevs && rc == 0; k++) {
		struct bi_vol *pick = NULL;
		int hits = 0;
		char list[512] = "";
		size_t n = 0;
		for (size_t i = 0; i < V->nbtrfs; i++) {
			struct bi_vol *v = V->btrfs[i];
			uint64_t m = roots(V, v, 0);
			if (!m || (size_t)__builtin_ctzll(m) != k || !wanted(fs, v))
				continue;
			hits++;
			pick = v;
			if (n < sizeof(list))
				n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s",
						      n ? "; " : "", v->name);
		}
		if (hits > 1)
			rc = bi_err(fs, -EINVAL,
				    "image '%s' holds %d btrfs volumes (%s): choose one with "
				    "--partition N or --partition VG/LV",
				    fs->devs[k].name, hits, list);
		else if (hits == 1) {
			use_vol(fs, &fs->devs[k], pick);
			used |= roots(V, pick, 0);
		}
	}
	for (size_t k = 0; k < fs->ndevs && rc == 0; k++) {
		struct bi_dev *d = &fs->devs[k];
		if (d->vol || d->size != d->raw_size || d->base || d->partition)
			continue; /* given a volume above */
		bool self = false;
		for (size_t i = 0; i < V->nbtrfs; i++)
			self |= V->btrfs[i]->kind == V_IMAGE && V->btrfs[i]->img == d &&
				V->btrfs[i]->base == 0 && wanted(fs, V->btrfs[i]);
		if (self)
			continue;
		if (k < 64 && (used & (1ull << k))) {
			d->absorbed = true;
			bi_info(fs,
				"image '%s' holds a PV of a logical volume read as another device",
				d->name);
			continue;
		}
		rc = none_found(fs, d);
	}
	return rc;
}

/* Each image where its superblock is. One without any, beside images that
 * have one, is kept whole (base 0): the open may still place it among the
 * devices by its tree blocks (btrfs/salvage_chunks.c). None found at all
 * is the first image's error. */
static int locate_plain(struct btrfsimg_fs *fs)
{
	char first[sizeof(fs->err)] = "";
	int first_rc = 0;
	size_t located = 0;
	for (size_t i = 0; i < fs->ndevs; i++) {
		struct bi_dev *d = &fs->devs[i];
		int rc = bi_dev_locate(fs, d);
		if (rc == -EUCLEAN && fs->ndevs > 1) {
			if (!first_rc)
				snprintf(first, sizeof(first), "%s", fs->err);
			first_rc = first_rc ? first_rc : rc;
			d->base = 0;
			d->size = d->raw_size;
			continue;
		}
		if (rc < 0)
			return rc;
		located++;
	}
	if (first_rc && !located)
		return bi_err(fs, first_rc, "%s", first);
	fs->err[0] = '\0';
	return 0;
}

int bi_vol_assemble(struct btrfsimg_fs *fs)
{
	if (fs->ndevs == 0)
		return bi_err(fs, -EINVAL, "no device image given");
	bool plain = (fs->opts.flags & BTRFSIMG_OPEN_OFFSET) != 0;
	if (!plain) {
		int rc = bi_vols_scan(fs, true);
		if (rc < 0)
			return rc;
		plain = !fs->vols->layered;
		fs->err[0] = '\0';
	}
	if (plain) {
		if (fs->vols && fs->vols->select)
			return bi_err(fs, -ENOENT, "no LVM logical volume '%s': no image holds LVM",
				      fs->vols->select);
		int rc = locate_plain(fs);
		if (rc < 0)
			return rc;
		if (fs->vols) /* the rows: what bi_dev_locate chose */
			for (size_t i = 0; i < fs->vols->nbtrfs; i++) {
				struct bi_vol *v = fs->vols->btrfs[i];
				if (v->kind == V_IMAGE && v->img->base == v->base)
					mark_in_use(fs->vols, v->row);
			}
		return 0;
	}
	return choose(fs);
}
