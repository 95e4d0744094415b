/* SPDX-License-Identifier: MIT */
/*
 * Paths from the inodes' own back references, for a damaged tree whose
 * directory entries are lost where the inodes survive (orphans.c).
 */
#ifndef BI_ORPHANS_H
#define BI_ORPHANS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"

/* A directory's listing (in index order) merged with the entries only
 * back references give: bi_orphans_merge_begin (builds the index; 0 or a
 * negative errno), then bi_orphans_merge_fn as the listing's callback
 * (@ctx the merge), then bi_orphans_merge_end for those after the last
 * listed entry. @fn gets both in index order. */
struct bi_orphans_merge {
	struct bi_orphans *o;
	size_t next;
	uint64_t dir;
	btrfsimg_dirent_fn fn;
	void *ctx;
};
int bi_orphans_merge_begin(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
			   btrfsimg_dirent_fn fn, void *ctx, struct bi_orphans_merge *m);
int bi_orphans_merge_fn(void *ctx, const struct btrfsimg_dirent *e);
int bi_orphans_merge_end(struct bi_orphans_merge *m);

/* Whether subvolume @subvol has inodes no chain of back references leads
 * to from its root (the index built on first use), into *@any. 0 or a
 * negative errno. */
int bi_orphans_any_lost(struct btrfsimg_fs *fs, uint64_t subvol, bool *any);

/* The listing of the made-up directory BTRFSIMG_LOST_FOUND of @subvol:
 * @parent 0, one directory per lost parent (named by its inode number,
 * kind BTRFSIMG_TARGET_LOST) and "#<ino>" per inode without back
 * reference; else the inodes whose back references name lost parent
 * @parent, by those names. */
int bi_orphans_lost(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t parent,
		    btrfsimg_dirent_fn fn, void *ctx);

/* Entry @name of directory @dir (as a lookup gave it: a real directory,
 * or a made-up one, kind BTRFSIMG_TARGET_LOST) that only back references
 * give: 0 and *@out, -ENOENT (no message), or another negative errno. */
int bi_orphans_lookup(struct btrfsimg_fs *fs, const struct btrfsimg_dirent *dir,
		      const uint8_t *name, size_t len, struct btrfsimg_dirent *out);

/* The inode shown for a made-up directory: a directory, mode 0500, no
 * times, one link. */
void bi_orphans_dir_inode(uint64_t objectid, struct btrfsimg_inode *out);

/* After reading inode @objectid of @subvol failed with @rc: when it is
 * the subvolume's root directory (256) and items of its tree survive, a
 * directory made up in its place into *@out (marked synthesized, said as
 * damage once) and 0; else @rc, its message kept. */
int bi_orphans_root_dir(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid, int rc,
			struct btrfsimg_inode *out);

/* The made-up entry BTRFSIMG_LOST_FOUND of directory @dir of @subvol
 * (index UINT64_MAX: after the real ones): 1 and *@out when @dir is the
 * root and some inode's chain of back references breaks, else 0; or a
 * negative errno. Damaged mode is the caller's to decide. */
int bi_orphans_lost_found(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
			  struct btrfsimg_dirent *out);

void bi_orphans_free(struct btrfsimg_fs *fs);

#endif
