/* SPDX-License-Identifier: MIT */
/*
 * The collision analysis of a whole filesystem: every reachable subvolume's
 * inode set (from snapshot_scan.c, shared between unchanged snapshots), its stub
 * directories and subvolume entries, then every scheme counted exactly by
 * collide.c, with how far the filesystem may grow before a collision
 * becomes possible.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg_inum.h"
#include "base/grow.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "btrfs/chunk.h"
#include "btrfs/root.h"
#include "inum/nfs.h"
#include "inum/snapshot_scan.h"

struct sv {
	uint64_t id;
	int dev2; /* numdevs=2 device: 0 or 1 */
	struct bi_tree_ids *set;
};

struct subent_rec {
	uint64_t dir_subvol, child;
	bool stub;
	uint64_t dir; /* where the entry is, for reports */
	uint16_t name_len;
	uint8_t name[255];
};

struct an {
	struct btrfsimg_fs *fs;
	struct sv *sv;
	size_t nsv;
	struct subent_rec *ents;
	size_t nents, capents;
	uint64_t cur_subvol;
	uint64_t max_objectid, max_subvol, inodes;
};

static int on_subent(void *ctx, const struct bi_subent *e)
{
	struct an *a = ctx;
	struct btrfsimg_dirent d;
	int rc = btrfsimg_lookup(a->fs, a->cur_subvol, e->dir, e->name, e->name_len, &d);
	if (rc == -ENOENT)
		return 0; /* a DIR_INDEX without its DIR_ITEM: lookup never reaches it */
	if (rc < 0)
		return rc;
	if (bi_grow((void **)&a->ents, &a->capents, a->nents + 1, sizeof(*a->ents)))
		return bi_err(a->fs, -ENOMEM, "out of memory");
	struct subent_rec *r = &a->ents[a->nents++];
	*r = (struct subent_rec){ a->cur_subvol, e->child,    d.kind == BTRFSIMG_TARGET_STUB,
				  e->dir,	 e->name_len, { 0 } };
	memcpy(r->name, e->name, e->name_len);
	return 0;
}

static int gather(struct an *a, uint64_t mount, uint64_t *skipped)
{
	struct btrfsimg_subvol *v;
	size_t n;
	int rc = btrfsimg_subvols(a->fs, &v, &n);
	if (rc < 0)
		return rc;
	struct bi_scan *scan = bi_scan_new(a->fs);
	a->sv = calloc(n + 1, sizeof(*a->sv));
	if (!scan || !a->sv)
		rc = bi_err(a->fs, -ENOMEM, "out of memory");
	else
		bi_scan_start(scan); /* the inode sets on a second thread */
	/* Ask for every root block at once: a year of snapshots has 10,000,
	 * scattered, each its own read when the scan reaches it (cold, 1-2 s
	 * of waiting one after another); the kernel fetches them together. */
	for (size_t i = 0; rc == 0 && i < n; i++) {
		struct bi_root r;
		if (v[i].path && !v[i].deleted && bi_root_find(a->fs, v[i].id, &r) == 0)
			bi_prefetch(a->fs, r.bytenr, a->fs->nodesize);
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (!v[i].path || v[i].deleted) {
			(*skipped)++;
			continue;
		}
		struct bi_root r;
		struct sv *s = &a->sv[a->nsv];
		s->id = v[i].id;
		/* numdevs=2: the parity of crossings below the mount; subvolumes
		 * outside it use their depth below the top level */
		int d = btrfsimg_subvol_depth(v, n, mount, v[i].id);
		s->dev2 = (d < 0 ? btrfsimg_subvol_depth(v, n, OBJ_FS_TREE, v[i].id) : d) & 1;
		a->cur_subvol = s->id;
		rc = bi_root_find(a->fs, s->id, &r);
		if (rc == 0)
			rc = bi_scan_tree(scan, &r, &s->set, on_subent, a);
		if (rc < 0)
			break;
		a->nsv++;
	}
	/* the worker's error came first: trees after it were not asked for */
	int wrc = scan ? bi_scan_wait(scan) : 0;
	if (wrc < 0)
		rc = wrc;
	for (size_t i = 0; rc == 0 && i < a->nsv; i++) {
		const struct sv *s = &a->sv[i];
		a->inodes += s->set->n;
		if (s->set->max_id > a->max_objectid)
			a->max_objectid = s->set->max_id;
		if (s->id > a->max_subvol)
			a->max_subvol = s->id;
	}
	bi_scan_free(scan);
	btrfsimg_subvols_free(v, n);
	return rc;
}

static uint64_t scheme_c(const struct btrfsimg_scheme *sc, uint64_t subvol)
{
	if (sc->uniquifier)
		return btrfsimg_uniquifier(subvol);
	return btrfsimg_inumbits_overlay(subvol, sc->inumbits);
}

static uint64_t readdir_mismatches(const struct an *a, const struct btrfsimg_scheme *sc)
{
	uint64_t n = 0;
	for (size_t i = 0; i < a->nents; i++) {
		const struct subent_rec *e = &a->ents[i];
		uint64_t d = btrfsimg_presented_ino(e->child, scheme_c(sc, e->dir_subvol));
		uint64_t st =
			e->stub ? OBJ_EMPTY_SUBVOL_DIR
				: btrfsimg_presented_ino(OBJ_FIRST_FREE, scheme_c(sc, e->child));
		n += d != st;
	}
	return n;
}

/* What the engine needs: per subvolume its base, added and deleted ids, as
 * views of the arrays snapshot_scan.c shares (the engine merges by array). */
/* The public result and what its arrays point into. The public struct is
 * the first member, so btrfsimg_fs_collisions_free() finds the rest. */
struct owned {
	struct btrfsimg_fs_collisions pub;
	struct btrfsimg_idset *sets; /* 3 per subvolume: base, add, del */
	struct btrfsimg_collide_extra *extras;
	struct btrfsimg_collide_input in; /* for btrfsimg_collisions_groups */
	struct an an;
};

static int build_input(struct owned *o, struct btrfsimg_fs_collisions *c,
		       struct btrfsimg_collide_input *in)
{
	struct an *a = &o->an;
	o->sets = calloc(3 * a->nsv + 1, sizeof(*o->sets));
	c->subvols = calloc(a->nsv + 1, sizeof(*c->subvols));
	o->extras = calloc(a->nents + 1, sizeof(*o->extras));
	c->stub_entries = calloc(a->nents + 1, sizeof(*c->stub_entries));
	if (!o->sets || !c->subvols || !o->extras || !c->stub_entries)
		return -ENOMEM;
	for (size_t i = 0; i < a->nsv; i++) {
		const struct bi_tree_ids *set = a->sv[i].set, *full = set->base ? set->base : set;
		struct btrfsimg_idset *v = &o->sets[3 * i];
		v[0] = (struct btrfsimg_idset){ full->ids, full->nids };
		if (set->base) {
			v[1] = (struct btrfsimg_idset){ set->ids, set->nids };
			v[2] = (struct btrfsimg_idset){ set->del, set->ndel };
		}
		c->subvols[i] =
			(struct btrfsimg_collide_subvol){ a->sv[i].id, (unsigned)a->sv[i].dev2,
							  &v[0], set->base ? &v[1] : NULL,
							  set->base ? &v[2] : NULL };
	}
	size_t ne = 0;
	for (size_t i = 0; i < a->nents; i++) {
		const struct subent_rec *e = &a->ents[i];
		if (!e->stub)
			continue;
		struct btrfsimg_stub *st = &c->stub_entries[ne];
		*st = (struct btrfsimg_stub){ e->dir_subvol, e->dir, e->name_len, { 0 } };
		memcpy(st->name, e->name, e->name_len);
		o->extras[ne++] =
			(struct btrfsimg_collide_extra){ e->dir_subvol, OBJ_EMPTY_SUBVOL_DIR, 0 };
	}
	c->nsubvols = a->nsv;
	c->stubs = ne;
	*in = (struct btrfsimg_collide_input){ c->subvols, a->nsv, o->extras, ne };
	return 0;
}

void btrfsimg_fs_collisions_free(struct btrfsimg_fs_collisions *c)
{
	if (!c)
		return;
	struct owned *o = (struct owned *)c;
	for (size_t i = 0; i < o->an.nsv; i++)
		bi_tree_ids_put(o->an.sv[i].set);
	free(o->an.sv);
	free(o->an.ents);
	free(o->sets);
	free(o->extras);
	btrfsimg_collide_report_free(c->report);
	btrfsimg_collide_report_free(c->report_without_stubs);
	btrfsimg_nfs_report_free(c->nfs);
	free(c->readdir_mismatch);
	free(c->subvols);
	free(c->stub_entries);
	free(o);
}

/* The NFS and 32-bit figures (nfs.c) over what was gathered. */
static int nfs_figures(struct owned *o)
{
	const struct an *a = &o->an;
	struct bi_nfs_subent *e = calloc(a->nents + 1, sizeof(*e));
	if (!e)
		return bi_err(a->fs, -ENOMEM, "out of memory");
	for (size_t i = 0; i < a->nents; i++)
		e[i] = (struct bi_nfs_subent){ a->ents[i].dir_subvol, a->ents[i].child,
					       a->ents[i].stub };
	struct bi_nfs_input x = { &o->in, e, a->nents, a->max_objectid };
	int rc = bi_nfs_report(&x, &o->pub.nfs);
	free(e);
	if (rc == -E2BIG) /* bounded work: -ENOMEM's meaning, with why */
		return bi_err(a->fs, -ENOMEM, "NFS figures: more than 2^24 inodes on one device "
					      "would have to be listed");
	return rc < 0 ? bi_err(a->fs, rc, "out of memory") : 0;
}

int btrfsimg_collisions(btrfsimg_fs *fs, uint64_t mount_subvol, size_t max_examples,
			struct btrfsimg_fs_collisions **out)
{
	if (!fs || !out)
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	*out = NULL;
	struct owned *o = calloc(1, sizeof(*o));
	if (!o)
		return bi_err(fs, -ENOMEM, "out of memory");
	struct btrfsimg_fs_collisions *c = &o->pub;
	o->an.fs = fs;
	int rc = mount_subvol ? 0 : btrfsimg_default_subvol(fs, &mount_subvol);
	if (rc == 0)
		rc = gather(&o->an, mount_subvol, &c->skipped_subvols);
	struct btrfsimg_collide_input in;
	if (rc == 0 && build_input(o, c, &in) < 0)
		rc = bi_err(fs, -ENOMEM, "out of memory");
	struct btrfsimg_collide_opts opts = { max_examples, 0 };
	char err[256] = "";
	if (rc == 0 && (rc = btrfsimg_collide_all(&in, &opts, &c->report, err, sizeof(err))) < 0)
		rc = bi_err(fs, rc, "collision analysis: %s", err);
	if (rc == 0)
		o->in = in;
	/* Every stub presents 2 on one device: they collide whatever the
	 * scheme, so the verdict without them needs a count without them. */
	struct btrfsimg_collide_input bare = { in.subvols, in.nsubvols, NULL, 0 };
	if (rc == 0 && c->stubs &&
	    (rc = btrfsimg_collide_all(&bare, &opts, &c->report_without_stubs, err, sizeof(err))) <
		    0)
		rc = bi_err(fs, rc, "collision analysis without the stub directories: %s", err);
	if (rc == 0 && !(c->readdir_mismatch = calloc(c->report->nresults + 1, sizeof(uint64_t))))
		rc = bi_err(fs, -ENOMEM, "out of memory");
	for (size_t i = 0; rc == 0 && i < c->report->nresults; i++)
		c->readdir_mismatch[i] = readdir_mismatches(&o->an, &c->report->results[i].scheme);
	if (rc == 0)
		rc = nfs_figures(o);
	if (rc < 0) {
		btrfsimg_fs_collisions_free(c);
		return rc;
	}
	c->inodes = o->an.inodes;
	c->max_objectid = o->an.max_objectid;
	c->max_subvol = o->an.max_subvol;
	c->mount_subvol = mount_subvol;
	*out = c;
	return 0;
}

int btrfsimg_collisions_groups(const struct btrfsimg_fs_collisions *c,
			       const struct btrfsimg_scheme *s, bool stubs,
			       btrfsimg_collide_group_fn fn, void *ctx)
{
	if (!c || !s || !fn)
		return -EINVAL;
	const struct owned *o = (const struct owned *)c;
	struct btrfsimg_collide_input in = o->in;
	if (!stubs)
		in.nextras = 0;
	char err[256] = "";
	int rc = btrfsimg_collide_groups(&in, s, fn, ctx, err, sizeof(err));
	if (rc < 0)
		return bi_err(o->an.fs, rc, "collision groups: %s", err);
	return rc;
}

const struct btrfsimg_collide_report *
btrfsimg_collisions_without_stubs(const struct btrfsimg_fs_collisions *c)
{
	return c->report_without_stubs ? c->report_without_stubs : c->report;
}

/* The verdict's two lists: a scheme is safe as it is, or safe only once
 * the stubs (every one presenting 2 on one device) are left out. */
bool btrfsimg_collisions_headroom(const struct btrfsimg_fs_collisions *c, size_t i,
				  bool without_stubs)
{
	const struct btrfsimg_collide_report *rep = c->report, *bare = c->report_without_stubs;
	if (i >= rep->nresults)
		return false;
	if (!without_stubs)
		return rep->results[i].groups == 0;
	return bare && i < bare->nresults && bare->results[i].groups == 0 &&
	       rep->results[i].groups != 0;
}
