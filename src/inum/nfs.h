/* SPDX-License-Identifier: MIT */
/*
 * The NFS and 32-bit figures of a collision analysis (nfs.c).
 */
#ifndef BI_NFS_H
#define BI_NFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg_inum.h"

/* nfsd, nfsd-uniquifier, inumbits=32..64 composed with the uniquifier */
#define BI_NFS_SCHEMES 35

/* An entry naming a subvolume: in directory subvolume dir_subvol. */
struct bi_nfs_subent {
	uint64_t dir_subvol, child;
	bool stub;
};

/* What analyze.c gathered; @in validated (btrfsimg_collide_all ran on it). */
struct bi_nfs_input {
	const struct btrfsimg_collide_input *in;
	const struct bi_nfs_subent *ents;
	size_t nents;
	uint64_t max_objectid;
};

/* 0, -ENOMEM, or -E2BIG (a device too large to list where the engine is
 * not exact); free *out with btrfsimg_nfs_report_free(). */
int bi_nfs_report(const struct bi_nfs_input *x, struct btrfsimg_nfs_report **out);

#endif
