/* SPDX-License-Identifier: MIT */
/* btrfsimg mount: what the FUSE operations (cmd_mount.c) share with the
 * bookkeeping under them (mount_nodes.c): the inode-number scheme shown,
 * the table of inodes the kernel holds (FUSE node ids), and a pool of
 * filesystem handles opened on the same images, since one handle serves
 * one thread at a time. */
#ifndef BTRFSIMG_TOOLS_MOUNT_H
#define BTRFSIMG_TOOLS_MOUNT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/statvfs.h>

#include "btrfsimg_inum.h"

/* ------------------------------------------------------------ numbers */

/* The schemes one FUSE mount can show (one st_dev: numdevs=1 only). */
struct mount_scheme {
	bool uniquifier;   /* nfsd-uniquifier */
	unsigned inumbits; /* 0: nfsd (with or without the uniquifier) */
};

/* Parse "nfsd", "nfsd-uniquifier" or "inumbits=N,numdevs=1" (N 32..64).
 * Returns 0, or -1 with the reason in @why (numdevs=2 and many: FUSE
 * gives a mount one device). */
int mount_scheme_parse(const char *s, struct mount_scheme *out, char *why, size_t len);

/* st_ino of (subvol, objectid) under the scheme; a stub keeps 2, the made-up
 * #lost+found (objectid 0) shows 1. */
uint64_t mount_st_ino(const struct mount_scheme *s, uint64_t subvol, uint64_t objectid, bool stub);
/* readdir's d_ino of an entry locating @loc (its DIR_INDEX location
 * objectid) in a directory of subvolume @dir_subvol: the directory's
 * overlay or uniquifier, as the patches do. */
uint64_t mount_d_ino(const struct mount_scheme *s, uint64_t dir_subvol, uint64_t loc);

/* ------------------------------------------------------------ nodes */

/* One inode the kernel holds (a FUSE node id is its address; the root is
 * FUSE_ROOT_ID). A stub has objectid 2 and is named by the directory
 * holding it and the subvolume id its entry locates: each stub is its
 * own inode, as new_simple_dir makes one per lookup. */
struct mount_node {
	uint64_t subvol, objectid;
	uint64_t stub_dir, stub_child; /* stubs only; 0 otherwise */
	bool lost; /* a made-up directory of BTRFSIMG_LOST_FOUND (no items):
		      objectid the lost parent's inode number, 0 for the top */
	uint64_t parent_ino;	       /* st_ino of the directory it was found in
					  (readdir's ".."); the root's own */
	uint64_t nlookup;
	struct mount_node *next; /* hash chain */
};

struct mount_nodes {
	pthread_mutex_t lock;
	struct mount_node **buckets;
	size_t nbuckets, count;
};

int mount_nodes_init(struct mount_nodes *t);
void mount_nodes_free(struct mount_nodes *t);
/* The node of @key (subvol, objectid, stub_dir, stub_child, lost; parent_ino is
 * kept from the first lookup), made if new, its lookup count raised by
 * one. NULL when out of memory. */
struct mount_node *mount_nodes_get(struct mount_nodes *t, const struct mount_node *key);
/* Lower @n's lookup count by @k; at zero it is freed. */
void mount_nodes_forget(struct mount_nodes *t, struct mount_node *n, uint64_t k);

/* ------------------------------------------------------------ statfs */

/* statfs as btrfs_statfs shows it on a read-only mount (mount_statfs.c),
 * and the sector size (st_blksize). Returns 0 or a negative errno. */
int mount_statfs(btrfsimg_fs *fs, struct statvfs *out, uint32_t *sectorsize);

/* ------------------------------------------------------------ handles */

#define MOUNT_MAX_HANDLES 8

struct mount_pool {
	pthread_mutex_t lock;
	pthread_cond_t freed;
	btrfsimg_fs *fs[MOUNT_MAX_HANDLES];
	bool busy[MOUNT_MAX_HANDLES];
	int n;
};

/* @first is the handle already open (owned by the caller); up to @n - 1
 * more are opened on @images with @opts (plain device files). Returns how
 * many handles the pool has (1 when the first extra failed, the reason in
 * @err). */
int mount_pool_open(struct mount_pool *p, btrfsimg_fs *first, int n, char **images, int nimages,
		    const struct btrfsimg_open_opts *opts, char *err, size_t errlen);
/* Frees every handle but the first. */
void mount_pool_close(struct mount_pool *p);
btrfsimg_fs *mount_pool_get(struct mount_pool *p);
void mount_pool_put(struct mount_pool *p, btrfsimg_fs *fs);

#endif
