/* SPDX-License-Identifier: MIT */
/*
 * Every inode with what today's kernel and each proposal present for it:
 * the reader's inode walk (files/inode_enum.c) with each subvolume's
 * constants (overlay, uniquifier, numdevs=2 device) worked out once per
 * subvolume, not per inode.
 */
#include "btrfsimg_inum.h"
#include "base/err.h"
#include "base/handle.h"
#include "inum/schemes.h"

struct present {
	btrfsimg_inode_numbers_fn fn;
	void *ctx;
	struct btrfsimg_subvol *v;
	size_t n;
	uint64_t mount;
	struct btrfsimg_inode_numbers p;	/* constants of the current subvolume */
	uint64_t cur;
};

static int present_one(void *ctx, const struct btrfsimg_inode_entry *e)
{
	struct present *x = ctx;
	struct btrfsimg_inode_numbers *p = &x->p;
	uint64_t sv = e->inode.subvol, obj = e->inode.objectid;
	if (sv != x->cur) {
		x->cur = sv;
		p->tree_id = sv;
		p->overlay = btrfsimg_inumbits_overlay(sv, p->inumbits);
		p->uniquifier = btrfsimg_uniquifier(sv);
		int d = btrfsimg_subvol_depth(x->v, x->n, x->mount, sv);
		p->numdevs2_dev = d < 0 ? -1 : d & 1;
	}
	p->st_ino = obj;
	p->ino = bi_presented_ino(obj, p->overlay);
	p->nfs_fileid = bi_presented_ino(obj, p->uniquifier);
	p->nfs4_d_fileid = obj;
	p->nfs_fileid_inumbits = bi_presented_ino(p->ino, p->uniquifier);
	p->nfs4_d_fileid_inumbits = p->ino;
	return x->fn(x->ctx, e, p);
}

int btrfsimg_inodes_presented(btrfsimg_fs *fs, uint64_t subvol, unsigned inumbits,
			      uint64_t mount_subvol, btrfsimg_inode_numbers_fn fn, void *ctx)
{
	if (!fs || !fn || (inumbits && (inumbits < 32 || inumbits > 64)))
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	struct present x = { .fn = fn, .ctx = ctx, .mount = mount_subvol,
			     .p = { .inumbits = inumbits } };
	int rc = mount_subvol ? 0 : btrfsimg_default_subvol(fs, &x.mount);
	if (rc == 0)
		rc = btrfsimg_subvols(fs, &x.v, &x.n);
	if (rc == 0)
		rc = btrfsimg_inodes(fs, subvol, present_one, &x);
	btrfsimg_subvols_free(x.v, x.n);
	return rc;
}

/* A stub directory is what the kernel synthesizes (inode 2 on the parent's
 * device): no scheme moves its number, and it sits on device 0. The
 * start has no directory entry, so no readdir numbers. */
void btrfsimg_walk_numbers(const struct btrfsimg_walk_entry *e, unsigned inumbits,
			   const btrfsimg_numdevs2 *devs, struct btrfsimg_walk_numbers *out)
{
	uint64_t st_ino = e->objectid;
	*out = (struct btrfsimg_walk_numbers){ .ino = st_ino, .nfs_fileid = st_ino,
					       .nfs_fileid_inumbits = st_ino };
	if (!e->stub) {
		out->ino = btrfsimg_presented_ino(st_ino,
						  btrfsimg_inumbits_overlay(e->subvol, inumbits));
		out->nfs_fileid = btrfsimg_nfs_fileid(e->subvol, st_ino, 0);
		out->nfs_fileid_inumbits = btrfsimg_nfs_fileid(e->subvol, st_ino, inumbits);
	}
	if (!e->is_start) {
		uint64_t loc = e->ent.location_objectid, dir = e->dir_subvol;
		out->d_ino = btrfsimg_presented_ino(loc, btrfsimg_inumbits_overlay(dir, inumbits));
		out->nfs_d_fileid = btrfsimg_nfs3_d_fileid(dir, loc, 0);
		out->nfs_d_fileid_inumbits = btrfsimg_nfs3_d_fileid(dir, loc, inumbits);
		/* a stub (not a btrfs inode) shows its 2 here too */
		out->nfs4_d_fileid = e->stub ? st_ino : btrfsimg_nfs4_d_fileid(e->subvol, st_ino, 0);
		out->nfs4_d_fileid_inumbits =
			e->stub ? st_ino : btrfsimg_nfs4_d_fileid(e->subvol, st_ino, inumbits);
	}
	int dev = e->stub ? 0 : devs ? btrfsimg_numdevs2_dev(devs, e->subvol) : -1;
	out->numdevs2_dev = dev < 0 ? -1 : dev;
}
