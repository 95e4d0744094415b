/* SPDX-License-Identifier: MIT */
/*
 * Fast whole-tree scans: inode sets shared between snapshots.
 */
#ifndef BI_SCAN_H
#define BI_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"

/* A directory entry naming a subvolume (location type ROOT_ITEM). */
struct bi_subent {
	uint64_t dir;	/* directory objectid */
	uint64_t index; /* DIR_INDEX offset */
	uint64_t child; /* subvolume id the entry names */
	uint16_t name_len;
	uint8_t name[255];
};
typedef int (*bi_subent_fn)(void *ctx, const struct bi_subent *e);

/* The objectids of every INODE_ITEM (256..LAST_FREE) of one tree. A full
 * set (base NULL) holds them all in @ids, strictly increasing. A snapshot
 * that shares most leaves with a full set is that base minus @del plus
 * @ids (both strictly increasing, del inside the base, ids outside it), so
 * it costs its difference, not a copy. Reference counted; a delta holds a
 * reference to its base. */
struct bi_tree_ids {
	struct bi_tree_ids *base;
	uint64_t *ids;
	size_t nids;
	uint64_t *del;
	size_t ndel;
	size_t n;	 /* inodes in the tree */
	uint64_t max_id; /* the largest objectid, 0 when empty */
	uint32_t refs;
};
void bi_tree_ids_put(struct bi_tree_ids *set);

struct bi_scan;
struct bi_scan *bi_scan_new(struct btrfsimg_fs *fs);
void bi_scan_free(struct bi_scan *s);
/* Scan tree @r: *out (may be NULL) gets its inode set (a reference: put it),
 * @fn (may be NULL) is called for each subvolume entry in key order. Each
 * distinct block is summarised once per bi_scan; a tree sharing blocks
 * with an earlier one is compared with it only where they differ and gets
 * a delta against that one's full set when that is smaller than a full
 * set. */
int bi_scan_tree(struct bi_scan *s, const struct bi_root *r, struct bi_tree_ids **out,
		 bi_subent_fn fn, void *ctx);
/* Build the inode sets on a second thread (one where none can start):
 * bi_scan_tree then reads and summarises the tree's blocks, calls @fn and
 * returns, its *out set by the worker; bi_scan_wait() waits for every set
 * and returns the worker's first error (its message on the fs, before
 * any later tree's: the trees after a failed one are not scanned). The
 * sets come out as without the worker. */
void bi_scan_start(struct bi_scan *s);
int bi_scan_wait(struct bi_scan *s);

#endif
