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
	p->ino = btrfsimg_presented_ino(obj, p->overlay);
	p->nfs_fileid = btrfsimg_presented_ino(obj, p->uniquifier);
	p->nfs4_d_fileid = obj;
	p->nfs_fileid_inumbits = btrfsimg_presented_ino(p->ino, p->uniquifier);
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
