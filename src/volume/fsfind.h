/* SPDX-License-Identifier: MIT */
/*
 * Finding btrfs in an image without a usable partition table: by its
 * superblocks, wherever they lie (fsfind.c).
 */
#ifndef BI_FSFIND_H
#define BI_FSFIND_H

#include <stdbool.h>
#include <stdint.h>

struct btrfsimg_fs;
struct bi_dev;

/* What the scan of one image found. */
struct bi_found {
	bool done;	/* the image was scanned */
	bool found;	/* a filesystem start was chosen */
	uint64_t start; /* image byte where the filesystem starts */
	uint64_t size;	/* its device size (dev_item total_bytes), bounded by the image */
	uint8_t fsid[16];
	char label[257];
	char how[160];	  /* "superblock at byte N", "superblock copy 1 at byte N" */
	char others[300]; /* candidates set aside, for the message; "" */
	uint64_t bytes;	  /* read by the scan */
};

/* Scan @d (the raw image, every layer of its container) once, front to
 * back, for superblock magic at every 512-byte boundary; each copy that
 * verifies under its checksum implies a filesystem start (its bytenr says
 * which copy it is). The start with the most evidence wins: a chunk-tree
 * root that verifies where the copy's sys_chunk_array puts it, then the
 * number of copies that agree, then the newest generation. Cached on the
 * handle: a second call for the same image reads nothing. *out borrowed
 * from the handle. 0 (found or not: (*out)->found) or a negative errno
 * (message on @fs). Each piece read is also handed to fs->raw_piece when
 * set (the salvage scan indexes its tree blocks on the same pass). */
int bi_fsfind(struct btrfsimg_fs *fs, const struct bi_dev *d, const struct bi_found **out);

#endif
